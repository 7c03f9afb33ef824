/* cuda.c - the CUDA C++ dialect of the C-style renderer (cstyle.c), for
 * NVRTC.
 *
 * Kernels are `extern "C" __global__ void __launch_bounds__(lanes)
 * name(T *__restrict__ data0, ...)`; work-group ids are blockIdx, lanes
 * threadIdx, local arrays `__shared__`, the barrier __syncthreads(). The
 * source includes no header (NVRTC may run where no CUDA headers are
 * installed): INFINITY and NAN are defined from bits, and float16 buffers
 * are `unsigned short` converted with the PTX instructions cvt.f32.f16 and
 * cvt.rn.f16.f32 (values are floats rounded after each op, see render.h).
 * Vector kernels (render.h): float4 loads and stores through pointer casts
 * (codegen proves the 16-byte alignment: index a multiple of 4, buffers from
 * cuMemAlloc), and float4 arithmetic from CUDA_VEC's inline helpers, added
 * only to kernels that use them. Helpers rather than per-lane GEPs in the
 * UOps: both GPU dialects share one vector UOp list (no CUDA-only pass), and
 * NVRTC inlines each helper into the same four scalar instructions.
 * The limits are those of every GPU since sm_30 (CUDA's grid and block
 * limits, 48 KiB of static shared memory).
 */
#include "render.h"

#define CUDA_PREAMBLE                                                     \
    "#define INFINITY (__int_as_float(0x7f800000))\n"                     \
    "#define NAN (__int_as_float(0x7fffffff))\n"                          \
    "template <class D, class S> __device__ inline D tc_bitcast(S s) {\n" \
    "  D d; memcpy(&d, &s, sizeof d); return d;\n"                        \
    "}\n"

#define CUDA_HALF                                                                             \
    "__device__ inline float tc_h2f(unsigned short h) {\n"                                    \
    "  float f; asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"(h)); return f;\n"             \
    "}\n"                                                                                     \
    "__device__ inline unsigned short tc_f2h(float f) {\n"                                    \
    "  unsigned short h; asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(f)); return h;\n" \
    "}\n"

/* float4 arithmetic, per lane (CUDA defines the type, no operators); masks
 * (float4 comparisons) are int4 of 0/1 */
#define CUDA_VEC                                                                              \
    "__device__ inline float4 tc_float4(float x) { return make_float4(x, x, x, x); }\n"       \
    "__device__ inline float4 operator+(float4 a, float4 b) {\n"                              \
    "  return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);\n}\n"                   \
    "__device__ inline float4 operator*(float4 a, float4 b) {\n"                              \
    "  return make_float4(a.x * b.x, a.y * b.y, a.z * b.z, a.w * b.w);\n}\n"                   \
    "__device__ inline float4 operator-(float4 a) {\n"                                        \
    "  return make_float4(-a.x, -a.y, -a.z, -a.w);\n}\n"                                       \
    "__device__ inline float tc_max1(float a, float b) { return (a > b || a != a) ? a : b; }\n" \
    "__device__ inline float4 tc_max(float4 a, float4 b) {\n"                                 \
    "  return make_float4(tc_max1(a.x, b.x), tc_max1(a.y, b.y), tc_max1(a.z, b.z),\n"          \
    "                     tc_max1(a.w, b.w));\n}\n"                                             \
    "__device__ inline float4 tc_recip(float4 a) {\n"                                         \
    "  return make_float4(1.0f / a.x, 1.0f / a.y, 1.0f / a.z, 1.0f / a.w);\n}\n"               \
    "__device__ inline float4 tc_exp2(float4 a) {\n"                                          \
    "  return make_float4(exp2f(a.x), exp2f(a.y), exp2f(a.z), exp2f(a.w));\n}\n"               \
    "__device__ inline float4 tc_log2(float4 a) {\n"                                          \
    "  return make_float4(log2f(a.x), log2f(a.y), log2f(a.z), log2f(a.w));\n}\n"               \
    "__device__ inline float4 tc_sin(float4 a) {\n"                                           \
    "  return make_float4(sinf(a.x), sinf(a.y), sinf(a.z), sinf(a.w));\n}\n"                   \
    "__device__ inline float4 tc_sqrt(float4 a) {\n"                                          \
    "  return make_float4(sqrtf(a.x), sqrtf(a.y), sqrtf(a.z), sqrtf(a.w));\n}\n"               \
    "__device__ inline int4 tc_lt(float4 a, float4 b) {\n"                                    \
    "  return make_int4(a.x < b.x, a.y < b.y, a.z < b.z, a.w < b.w);\n}\n"                     \
    "__device__ inline int4 tc_ne(float4 a, float4 b) {\n"                                    \
    "  return make_int4(a.x != b.x, a.y != b.y, a.z != b.z, a.w != b.w);\n}\n"                 \
    "__device__ inline int4 operator&(int4 a, int4 b) {\n"                                    \
    "  return make_int4(a.x & b.x, a.y & b.y, a.z & b.z, a.w & b.w);\n}\n"                     \
    "__device__ inline int4 operator|(int4 a, int4 b) {\n"                                    \
    "  return make_int4(a.x | b.x, a.y | b.y, a.z | b.z, a.w | b.w);\n}\n"                     \
    "__device__ inline float4 tc_where(int4 c, float4 a, float4 b) {\n"                       \
    "  return make_float4(c.x ? a.x : b.x, c.y ? a.y : b.y, c.z ? a.z : b.z, c.w ? a.w : b.w);\n}\n" \
    "__device__ inline float4 tc_where(bool c, float4 a, float4 b) { return c ? a : b; }\n"   \
    "__device__ inline float4 tc_float4_mask(int4 c) {\n"                                     \
    "  return make_float4((float)c.x, (float)c.y, (float)c.z, (float)c.w);\n}\n"               \
    "__device__ inline float4 tc_float4(int4 a) {\n"                                          \
    "  return make_float4((float)a.x, (float)a.y, (float)a.z, (float)a.w);\n}\n"               \
    "__device__ inline float4 tc_float4(uchar4 a) {\n"                                        \
    "  return make_float4((float)a.x, (float)a.y, (float)a.z, (float)a.w);\n}\n"

#define CUDA_BF16                                                                           \
    "__device__ inline float tc_bf2f(unsigned short b) {\n"                                  \
    "  return __uint_as_float((unsigned int)b << 16);\n}\n"                                 \
    "__device__ inline unsigned short tc_f2bf(float f) {\n"                                  \
    "  unsigned int u = __float_as_uint(f);\n"                                               \
    "  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);\n"   \
    "  u += 0x7fffu + ((u >> 16) & 1u);\n"                                                   \
    "  return (unsigned short)(u >> 16);\n}\n"                                              \
    "__device__ inline float tc_bfround(float f) { return tc_bf2f(tc_f2bf(f)); }\n"

const tc_dialect tc_dialect_cuda = {
    .name = "CUDA",
    .preamble = CUDA_PREAMBLE,
    .half_preamble = CUDA_HALF,
    .bf16_preamble = CUDA_BF16,
    .kernel_prefix = "extern \"C\" __global__ ",
    .has_launch_bounds = true,
    .buf_prefix = "",
    .restrict_kw = "__restrict__ ",
    .half_type = "unsigned short",
    .is_half_in_float = true,
    .half_load = "tc_h2f(%1$s[%2$s])",
    .half_store = "%1$s[%2$s] = tc_f2h(%3$s);",
    .half_round = "tc_h2f(tc_f2h(%1$s))",
    .int64_suffix = "LL",
    .type_names = {[TC_BOOL] = "bool"},
    .math_fn = {[TC_OP_EXP2] = "exp2f",
                [TC_OP_LOG2] = "log2f",
                [TC_OP_SIN] = "sinf",
                [TC_OP_SQRT] = "sqrtf"},
    .math_fn_f64 = {[TC_OP_EXP2] = "exp2", [TC_OP_LOG2] = "log2", [TC_OP_SIN] = "sin",
                    [TC_OP_SQRT] = "sqrt"}, /* CUDA's double functions */
    .group_id = {"blockIdx.x", "blockIdx.y", "blockIdx.z"},
    .lane_id = {"threadIdx.x", "threadIdx.y", "threadIdx.z"},
    .local_prefix = "__shared__ ",
    .barrier = "__syncthreads();",
    .bitcast = "tc_bitcast<%1$s>(%2$s)",
    .vec_type = "%1$s%2$d",
    .vec_elem = {[TC_BOOL] = "int", [TC_UINT8] = "uchar"},
    .vec_load = "(*(const %4$s *)(%1$s+%2$s))",
    .vec_store = "*(%5$s *)(%1$s+%2$s) = %3$s;",
    .vec_bcast = "tc_%1$s(%2$s)",
    .vec_mask_cast = "tc_%1$s_mask(%2$s)",
    .vec_cast = "tc_%1$s(%2$s)",
    .vec_prelude = CUDA_VEC,
    .vec_alu = {[TC_OP_ADD] = "(%1$s+%2$s)", [TC_OP_MUL] = "(%1$s*%2$s)", [TC_OP_NEG] = "(-%1$s)",
                [TC_OP_RECIP] = "tc_recip(%1$s)", [TC_OP_MAX] = "tc_max(%1$s, %2$s)",
                [TC_OP_EXP2] = "tc_exp2(%1$s)", [TC_OP_LOG2] = "tc_log2(%1$s)",
                [TC_OP_SIN] = "tc_sin(%1$s)", [TC_OP_SQRT] = "tc_sqrt(%1$s)",
                [TC_OP_MULACC] = "((%1$s*%2$s)+%3$s)", [TC_OP_CMPLT] = "tc_lt(%1$s, %2$s)",
                [TC_OP_CMPNE] = "tc_ne(%1$s, %2$s)", [TC_OP_AND] = "(%1$s&%2$s)",
                [TC_OP_OR] = "(%1$s|%2$s)", [TC_OP_WHERE] = "tc_where(%1$s, %2$s, %3$s)"},
    .target = {.has_local = true,
               .vec_width = 4,
               .global_max = {2147483647, 65535, 65535},
               .local_max = {1024, 1024, 64},
               .lanes_max = 1024,
               .shared_max = 49152},
};
