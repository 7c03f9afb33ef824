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

const tc_dialect tc_dialect_cuda = {
    .name = "CUDA",
    .preamble = CUDA_PREAMBLE,
    .half_preamble = CUDA_HALF,
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
    .group_id = {"blockIdx.x", "blockIdx.y", "blockIdx.z"},
    .lane_id = {"threadIdx.x", "threadIdx.y", "threadIdx.z"},
    .local_prefix = "__shared__ ",
    .barrier = "__syncthreads();",
    .bitcast = "tc_bitcast<%1$s>(%2$s)",
    .target = {.has_local = true,
               .global_max = {2147483647, 65535, 65535},
               .local_max = {1024, 1024, 64},
               .lanes_max = 1024,
               .shared_max = 49152},
};
