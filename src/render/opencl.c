/* opencl.c - the OpenCL C dialect of the C-style renderer (cstyle.c).
 *
 * Kernels are `__kernel void name(__global T *restrict data0, ...)`; work-
 * group ids are get_group_id(d), lanes get_local_id(d), local arrays
 * `__local`, the barrier is barrier(CLK_LOCAL_MEM_FENCE). OpenCL C's int64
 * is `long` (constants with an L suffix); math functions are the overloaded
 * exp2/log2/sin/sqrt. float16 needs no cl_khr_fp16: buffers are `half` read
 * with vload_half and written with vstore_half (round to nearest even), and
 * values are floats rounded by tc_half_round (bit arithmetic: 10 mantissa
 * bits, ties to even, float16 subnormals in steps of 2^-24, overflow to inf).
 * float64 is `double`, enabled by the cl_khr_fp64 pragma in kernels that
 * use it (the runtime refuses such a kernel on a device without the
 * extension, with an error naming the device).
 * Vector kernels (render.h) use float4 values, vload4/vstore4 (element
 * alignment is enough, though codegen proves 16 bytes for CUDA's sake), the
 * built-in float4 arithmetic and overloaded math; max keeps NaN winning with
 * the vector ?: (a lane is selected by its comparison's sign bit). A float4
 * comparison is an int4 mask (-1 true, 0 false): & | and ?: take it as it
 * is, a cast to float negates it first.
 * The limits are OpenCL's minimums; the device lowers them to its own.
 */
#include "render.h"

#define HALF_ROUND                                                                    \
    "inline float tc_half_round(float f) {\n"                                         \
    "  uint u = as_uint(f), a = u & 0x7fffffffu;\n"                                   \
    "  if (a >= 0x7f800000u) return f;\n"                                             \
    "  if (a >= 0x477ff000u) return as_float((u & 0x80000000u) | 0x7f800000u);\n"     \
    "  if (a < 0x38800000u) return rint(f * 16777216.0f) * 5.9604644775390625e-8f;\n" \
    "  u += 0x0fffu + ((u >> 13) & 1u);\n"                                            \
    "  return as_float(u & ~0x1fffu);\n"                                              \
    "}\n"

#define BF16                                                                          \
    "inline float tc_bf2f(ushort b) { return as_float((uint)b << 16); }\n"            \
    "inline ushort tc_f2bf(float f) {\n"                                               \
    "  uint u = as_uint(f);\n"                                                         \
    "  if ((u & 0x7fffffffu) > 0x7f800000u) return (ushort)((u >> 16) | 0x40u);\n"     \
    "  u += 0x7fffu + ((u >> 16) & 1u);\n"                                             \
    "  return (ushort)(u >> 16);\n"                                                    \
    "}\n"                                                                              \
    "inline float tc_bfround(float f) { return tc_bf2f(tc_f2bf(f)); }\n"

const tc_dialect tc_dialect_opencl = {
    .name = "OpenCL",
    .preamble = "",
    .half_preamble = HALF_ROUND,
    .bf16_preamble = BF16,
    .kernel_prefix = "__kernel ",
    .buf_prefix = "__global ",
    .restrict_kw = "restrict ",
    .half_type = "half",
    .is_half_in_float = true,
    .half_load = "vload_half(%2$s, %1$s)",
    .half_store = "vstore_half(%3$s, %2$s, %1$s);",
    .half_round = "tc_half_round(%1$s)",
    .int64_suffix = "L",
    .type_names = {[TC_INT64] = "long", [TC_UINT8] = "uchar", [TC_BOOL] = "bool", [TC_INT8] = "char",
                   [TC_INT16] = "short", [TC_UINT16] = "ushort", [TC_UINT32] = "uint", [TC_UINT64] = "ulong",
                   [TC_BFLOAT16] = "ushort"},
    .math_fn =
        {[TC_OP_EXP2] = "exp2", [TC_OP_LOG2] = "log2", [TC_OP_SIN] = "sin", [TC_OP_SQRT] = "sqrt"},
    .math_fn_f64 =
        {[TC_OP_EXP2] = "exp2", [TC_OP_LOG2] = "log2", [TC_OP_SIN] = "sin", [TC_OP_SQRT] = "sqrt"},
    .f64_preamble = "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n",
    .group_id = {"get_group_id(0)", "get_group_id(1)", "get_group_id(2)"},
    .lane_id = {"get_local_id(0)", "get_local_id(1)", "get_local_id(2)"},
    .local_prefix = "__local ",
    .barrier = "barrier(CLK_LOCAL_MEM_FENCE);",
    .bitcast = "as_%1$s(%2$s)",
    .vec_type = "%1$s%2$d",
    .vec_elem = {[TC_BOOL] = "int"},
    .vec_load = "vload%3$d(0, %1$s+%2$s)",
    .vec_store = "vstore%4$d(%3$s, 0, %1$s+%2$s);",
    .vec_bcast = "((%1$s)(%2$s))",
    .vec_mask_cast = "convert_%1$s(-(%2$s))",
    .vec_cast = "convert_%1$s(%2$s)",
    .vec_alu = {[TC_OP_ADD] = "(%1$s+%2$s)", [TC_OP_MUL] = "(%1$s*%2$s)", [TC_OP_NEG] = "(-%1$s)",
                [TC_OP_RECIP] = "(1.0f/%1$s)",
                [TC_OP_MAX] = "(((%1$s>%2$s)|(%1$s!=%1$s))?%1$s:%2$s)",
                [TC_OP_EXP2] = "exp2(%1$s)", [TC_OP_LOG2] = "log2(%1$s)", [TC_OP_SIN] = "sin(%1$s)",
                [TC_OP_SQRT] = "sqrt(%1$s)", [TC_OP_MULACC] = "((%1$s*%2$s)+%3$s)",
                [TC_OP_CMPLT] = "(%1$s<%2$s)", [TC_OP_CMPNE] = "(%1$s!=%2$s)",
                [TC_OP_AND] = "(%1$s&%2$s)", [TC_OP_OR] = "(%1$s|%2$s)",
                [TC_OP_WHERE] = "(%1$s?%2$s:%3$s)"},
    .target = {.has_local = true,
               .vec_width = 4,
               .global_max = {2147483647, 2147483647, 2147483647},
               .local_max = {256, 256, 256},
               .lanes_max = 256,
               .shared_max = 16384},
};
