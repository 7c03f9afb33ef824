/* render.h - the interface of src/render: a linear UOp list -> source text.
 * One C-style core (cstyle.c) prints every language; a dialect table holds
 * what differs (kernel prefix, buffer qualifiers, type names, math names).
 * Only C (the CPU target) exists so far; OpenCL C and CUDA C will be tables.
 */
#ifndef TC_RENDER_H
#define TC_RENDER_H

#include "codegen/codegen.h"

typedef struct {
    const char *name;          /* "C" */
    const char *preamble;      /* text before the kernel */
    const char *kernel_prefix; /* before the return type: "", "__kernel ", ... */
    const char *buf_prefix;    /* before a buffer's element type: "", "__global " */
    const char *restrict_kw;   /* after the '*' of a buffer: "restrict" or "" */
    const char *half_type;     /* name of the float16 type */
    tc_target target;          /* what codegen may use */
} tc_dialect;

extern const tc_dialect tc_dialect_c;
/* the kernel's source (malloc'ed, freed with tc_free), NULL with an error set */
char *tc_render(const tc_dialect *d, const tc_kernel_uops *k);

#endif /* TC_RENDER_H */
