/* cmath.c - the C dialect's prelude: <math.h>, <stdint.h> and the float32
 * exp2/log2/sin of cmath_src.h as text, so every CPU kernel carries its own
 * branch-free, vectorizable versions instead of calling libm. */
#include "render.h"

#define TC_CMATH_FN(...) #__VA_ARGS__ "\n"

const char tc_cmath_prelude[] = "#include <math.h>\n#include <stdint.h>\n"
#include "cmath_src.h"
    ;
