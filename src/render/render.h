/* render.h - the interface of src/render: a linear UOp list -> source text.
 * One C-style core (cstyle.c) prints every language; a dialect table holds
 * what differs (kernel prefix, buffer qualifiers, type names, math names,
 * work-item ids, local memory, barriers). Dialects: C (the CPU, cstyle.c),
 * OpenCL C (opencl.c) and CUDA C++ (cuda.c).
 *
 * Vectors on OpenCL and CUDA (tc_target.vec_width): a lane loads, computes
 * and stores float4 values. OpenCL C has them built in (vload4/vstore4,
 * arithmetic, overloaded math); CUDA's float4 is a plain struct, so the
 * CUDA dialect's vec_prelude defines its operators and math as inline
 * helpers, per lane (NVIDIA GPUs compute per lane anyway; what float4 buys
 * there is the 16-byte load and store).
 *
 * float16 on OpenCL and CUDA: values live in float variables and are
 * rounded to float16 after every operation (exactly what float16 arithmetic
 * gives: a float result of one +,*,/ rounds once more without error); only
 * buffers hold 16-bit values, read and written through conversions. So no
 * device needs cl_khr_fp16 and NVRTC needs no cuda_fp16.h.
 *
 * bfloat16, in every dialect (C too): the same, values in float variables
 * rounded to bfloat16 after every operation, buffers of its 16-bit
 * patterns read with tc_bf2f and written with tc_f2bf (bf16_preamble).
 */
#ifndef TC_RENDER_H
#define TC_RENDER_H

#include "codegen/codegen.h"

typedef struct {
    const char *name;          /* "C", "OpenCL", "CUDA" */
    const char *preamble;      /* text before the kernel */
    const char *half_preamble; /* text after the preamble when float16 appears (NULL: none) */
    const char *kernel_prefix; /* before the return type: "", "__kernel ", ... */
    const char *map_prefix;    /* after kernel_prefix in kernels without a reduce (NULL: none) */
    const char *copy_tile_prefix; /* after kernel_prefix in a copy tiled by two axes (NULL: none) */
    bool has_launch_bounds;    /* "__launch_bounds__(lanes) " before the name (CUDA) */
    const char *buf_prefix;    /* before a buffer's element type: "", "__global " */
    const char *restrict_kw;   /* after the '*' of a buffer: "restrict " or "" */
    const char *half_type;     /* float16 type: of values (C), of buffer elements (others) */
    bool is_half_in_float;     /* float16 values live in float variables (see above) */
    const char *half_load;     /* printf: %1$s buffer, %2$s index -> float */
    const char *half_store;    /* printf: %1$s buffer, %2$s index, %3$s float: a statement */
    const char *half_round;    /* printf: %1$s float -> that float rounded to float16 */
    const char *int64_suffix;  /* of int64 constants: "LL", "L" */
    const char *type_names[TC_DTYPE_COUNT]; /* value type names; NULL: tc_dtypes' cname */
    const char *math_fn[TC_OP_COUNT];       /* EXP2, LOG2, SIN, SQRT function names */
    const char *math_fn_f64[TC_OP_COUNT];   /* the same on float64 values (double math) */
    const char *f64_preamble;  /* text before everything when float64 appears (NULL: none) */
    const char *bf16_preamble; /* after the preamble when bfloat16 appears: tc_bf2f (bits ->
                                  float), tc_f2bf (float -> bits, ties to even) and
                                  tc_bfround (a float rounded to bfloat16) */
    const char *math_fn_shared[TC_OP_COUNT]; /* the same out of line, for a reduce kernel with
                                                more than TC_MATH_INLINE_MAX scalar calls
                                                (cstyle.c defines them; NULL: math_fn) */
    const char *float_max;     /* printf: %1$s, %2$s -> max of two float32s (NULL: the ternary) */
    const char *bool_float;    /* printf: %1$s bool -> 0.0f or 1.0f (NULL: a cast) */
    const char *float_where;   /* printf: %1$s bool, %2$s, %3$s floats -> one (NULL: ?:) */
    const char *group_id[3];   /* work-group id per dimension (has_local) */
    const char *lane_id[3];    /* lane id in the work-group per dimension (has_local) */
    const char *local_prefix;  /* before a local array: "__local ", "__shared__ " */
    const char *scratch_suffix; /* after a scratch array's declarator (NULL: none). C: aligned
                                   to 64 bytes, which makes gcc align the frame itself: the
                                   compiler may store vectors into it with aligned stores,
                                   and a kernel's stack on entry may be only 8-byte aligned */
    const char *barrier;       /* the work-group barrier statement */
    const char *prefetch;      /* printf: %1$s buffer, %2$s index -> a prefetch statement
                                  (NULL: PREFETCH renders nothing) */
    const char *bitcast;       /* printf: %1$s type, %2$s value; between 4- or 8-byte types */
    const char *bitcast_any;   /* printf: %1$s from type, %2$s to type, %3$s value: between
                                  any two types of one size (NULL: `bitcast`, or in C a GCC
                                  statement expression) */
    /* vectors of GPU dialects (NULL in C, which prints GCC vector types) */
    const char *vec_type;      /* printf: %1$s element type, %2$d lanes -> "float4" */
    const char *vec_elem[TC_DTYPE_COUNT]; /* element types of vectors (NULL: type_names',
                                             tc_dtypes'); bool: the masks' int */
    const char *vec_load;      /* printf: %1$s buffer, %2$s index, %3$d lanes, %4$s type */
    const char *vec_store;     /* printf: %1$s buffer, %2$s index, %3$s value, %4$d lanes,
                                  %5$s type: a statement */
    const char *vec_bcast;     /* printf: %1$s type, %2$s scalar -> that vector */
    const char *vec_mask_cast; /* printf: %1$s float vector type, %2$s a mask (a vector of
                                  bools, int lanes) -> 1.0f where true, else 0.0f */
    const char *vec_cast;      /* printf: %1$s float vector type, %2$s an int or uint8
                                  vector -> its values as floats */
    const char *vec_prelude;   /* after the preambles when the kernel has vectors (NULL: none) */
    const char *vec_alu[TC_OP_COUNT]; /* printf: vector operands %1$s %2$s %3$s (codegen's
                                         gv_ops and masks: every op it may vectorize has
                                         one); masks are int vectors (OpenCL's -1/0) */
    tc_target target;          /* what codegen may use */
} tc_dialect;

/* scalar calls of math_fn's transcendentals (exp2, log2, sin: polynomials
 * the C compiler inlines at each) a reduce kernel may inline; past it they
 * call math_fn_shared helpers, one copy each (opt.c bounds what a plan's
 * copies repeat; this bounds kernels whose stages recompute fused work).
 * A row kernel (tc_kernel_uops.n_parts) may inline this many per part, as
 * its parts would as kernels of their own: an out-of-line call per element
 * made attention's backward row kernel 2.5x slower than its kernels apart. */
#define TC_MATH_INLINE_MAX 16

/* An expression is inlined into its one user only while it nests at most
 * TC_RENDER_NEST_MAX brackets deep; past it, it gets a variable. One op
 * adds at most 8 levels around its operands (the deepest: a uint8 or
 * float16 cast around OpenCL's ternary max), a statement 2 more, so every
 * full expression nests at most 42 deep: within the 63 levels C11
 * (5.2.4.1) promises of every compiler, far from clang's 256 (the OpenCL C
 * compilers' "bracket nesting level"), and deeper than any expression the
 * MNIST steps render (15), which therefore render as before. */
#define TC_RENDER_NEST_MAX 32
/* An operand that its op's format names several times (OpenCL's and CUDA's
 * float max: 4 times) is inlined only while its copies stay this short:
 * along a chain of such ops the text would otherwise grow exponentially
 * (the MNIST runs' most: the test argmax's int max, 2 copies of 530) */
#define TC_RENDER_REPEAT_MAX 2048

extern const tc_dialect tc_dialect_c;
/* the C dialect in ISO C99 alone, for the plain fallback of exported code
 * (tc_export_c): no vector types (its target has no has_vec), no attributes,
 * bitcasts through a union, the same prelude; float16 as uint16_t in
 * buffers and float in variables, rounded after every op (as on the GPUs) */
extern const tc_dialect tc_dialect_c_plain;
extern const tc_dialect tc_dialect_opencl;
extern const tc_dialect tc_dialect_cuda;
/* the C dialect's preamble: <math.h>, <stdint.h>, <string.h> and static inline tc_exp2f,
 * tc_log2f and tc_sinf (cmath_src.h: branch-free polynomials the compiler
 * can vectorize; accuracy stated there) */
extern const char tc_cmath_prelude[];
/* the kernel's source (malloc'ed, freed with tc_free), NULL with an error set */
char *tc_render(const tc_dialect *d, const tc_kernel_uops *k);

#endif /* TC_RENDER_H */
