/* cmath.c - the C dialect's prelude: <math.h>, <stdint.h> and the float32
 * exp2/log2/sin of cmath_src.h as text, so every CPU kernel carries its own
 * branch-free, vectorizable versions instead of calling libm. The prelude
 * sits in an include guard (TC_CMATH_PRELUDE), so several kernels'
 * sources concatenated into one file (tc_export_c) define it once. */
#include "render.h"

#define TC_CMATH_FN(...) #__VA_ARGS__ "\n"

const char tc_cmath_prelude[] = "#ifndef TC_CMATH_PRELUDE\n#define TC_CMATH_PRELUDE\n"
                                "#include <math.h>\n#include <stdint.h>\n#include <string.h>\n"
#include "cmath_src.h"
                                "#endif\n";
