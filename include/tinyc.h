/* tinyc.h - the public API of libtinyc, an embeddable tensor compiler.
 *
 * A program builds a lazy graph of tensor operations through these calls;
 * nothing runs until a tensor is realized (tc_realize, tc_to_host). Then the
 * scheduler fuses the graph into kernels, which are generated as C source,
 * compiled, cached on disk and launched on the tensor's device.
 *
 * Conventions
 * - Handles are reference counted. Every function returning a tc_tensor *
 *   gives the caller one new reference; drop it with tc_release. Arguments
 *   are borrowed: the library retains what it keeps.
 * - No call aborts or exits on a user's mistake. A failing call returns NULL,
 *   -1 or a nonzero tc_status, changes nothing, and tc_last_error() says what
 *   went wrong, naming the call and the values (thread-local).
 * - Shapes are int64_t arrays of ndim values; axes are int and may be
 *   negative (counting from the end).
 * - Devices are named "CPU", "OPENCL", "CUDA" with an optional ":N" index,
 *   and "NULL". NULL (the pointer) means the default: TC_DEVICE if set, else
 *   "CPU". The NULL device (tinygrad's NULL=1) schedules, lowers and renders
 *   every kernel as the CPU would (same C dialect, same target), but compiles
 *   and runs nothing: its buffers reserve no memory, data copied to it is
 *   dropped, and reading one back (tc_to_host, tc_to_device to another
 *   device) gives zeros. Its launches count in tc_counters like real ones.
 *   It measures and tests the front end, scheduler and codegen on big graphs.
 * - The library is safe to call from several threads (one lock at entry).
 */
#ifndef TINYC_H
#define TINYC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(TC_BUILDING_LIBRARY)
#define TC_API __attribute__((visibility("default")))
#else
#define TC_API
#endif

#define TC_MAX_DIMS 16 /* most dimensions a tensor may have */
/* most elements a tensor may have (2^58): any buffer of them has a byte size
 * and every index into it a value that int64 holds with room to spare; a
 * larger shape is TC_ERR_SHAPE where it is made */
#define TC_MAX_NUMEL ((int64_t)1 << 58)

typedef struct tc_tensor tc_tensor; /* opaque, reference-counted tensor handle */
typedef int tc_status;              /* 0 = ok, nonzero = one of tc_error */

typedef enum {
    TC_OK = 0,           /* success */
    TC_ERR_INVALID = 1,  /* bad argument: NULL handle, bad value, bad option */
    TC_ERR_SHAPE = 2,    /* shapes do not fit: reshape, broadcast, axis out of range */
    TC_ERR_DTYPE = 3,    /* dtype not allowed for this operation */
    TC_ERR_DEVICE = 4,   /* unknown or unavailable device, or tensors on different devices */
    TC_ERR_MEMORY = 5,   /* out of host or device memory */
    TC_ERR_COMPILE = 6,  /* the kernel compiler failed (message holds its log) */
    TC_ERR_RUNTIME = 7,  /* a device call failed at run time */
    TC_ERR_IO = 8,       /* a file could not be read or written */
    TC_ERR_INTERNAL = 9, /* a bug in libtinyc: the message names file:line */
    TC_ERR_COUNT         /* number of status codes */
} tc_error;

typedef enum {
    TC_FLOAT32, /* 32-bit IEEE float: the first-class dtype */
    TC_FLOAT16, /* 16-bit IEEE float (storage and casts) */
    TC_INT32,   /* 32-bit signed integer */
    TC_INT64,   /* 64-bit signed integer */
    TC_UINT8,   /* 8-bit unsigned integer */
    TC_BOOL,    /* bool, one byte per element */
    TC_INT8,    /* 8-bit signed integer */
    TC_INT16,   /* 16-bit signed integer */
    TC_UINT16,  /* 16-bit unsigned integer */
    TC_UINT32,  /* 32-bit unsigned integer */
    TC_FLOAT64, /* 64-bit IEEE float, computed in double where the device has it */
    TC_UINT64,  /* 64-bit unsigned integer */
    TC_BFLOAT16, /* bfloat16 (float32's top 16 bits): storage and casts, math in float32 */
    TC_DTYPE_COUNT
} tc_dtype;

/* ---- library ------------------------------------------------------------ */
TC_API const char *tc_last_error(void);           /* message of the last failure on this thread */
TC_API tc_status tc_last_status(void);            /* code of the last failure on this thread */
TC_API const char *tc_status_string(tc_status s); /* "TC_ERR_SHAPE", ... */
TC_API const char *tc_version(void);              /* "MAJOR.MINOR.PATCH" */
TC_API void tc_shutdown(void); /* frees every cache and global; tensors must be released first */
TC_API size_t tc_dtype_size(tc_dtype dt);      /* bytes per element; 0 for an unknown dtype */
TC_API const char *tc_dtype_name(tc_dtype dt); /* "float32", ... */

/* Integer flags, read once from the environment and settable here:
 * TC_DEBUG (0-5), TC_NOOPT, TC_NOFUSE, TC_BEAM, TC_NOROWS. Unknown names are an error. */
TC_API tc_status tc_set_flag(const char *name, int64_t value);
TC_API int64_t tc_get_flag(const char *name); /* -1 and an error for unknown names */

/* ---- creation ----------------------------------------------------------- */
/* copies ndim-shaped data (row-major) of dtype dt to a new realized tensor */
TC_API tc_tensor *tc_from_data(const void *data, tc_dtype dt, int ndim, const int64_t *shape,
                               const char *device);
TC_API tc_tensor *tc_full(int ndim, const int64_t *shape, double value, tc_dtype dt,
                          const char *device);
TC_API tc_tensor *tc_zeros(int ndim, const int64_t *shape, tc_dtype dt, const char *device);
TC_API tc_tensor *tc_ones(int ndim, const int64_t *shape, tc_dtype dt, const char *device);
TC_API tc_tensor *tc_full_like(tc_tensor *a, double value); /* same shape, dtype, device */
/* start, start+step, ... below stop (above it for a negative step) */
TC_API tc_tensor *tc_arange(int64_t start, int64_t stop, int64_t step, tc_dtype dt,
                            const char *device);
TC_API tc_tensor *tc_eye(int64_t n, tc_dtype dt, const char *device);
/* a realized tensor whose elements are not set (tinygrad's Tensor.empty):
 * a buffer, no kernel; write it with tc_assign */
TC_API tc_tensor *tc_empty(int ndim, const int64_t *shape, tc_dtype dt, const char *device);
TC_API tc_tensor *tc_rand(int ndim, const int64_t *shape, tc_dtype dt,
                          const char *device); /* U[0,1) */
TC_API tc_tensor *tc_randn(int ndim, const int64_t *shape, tc_dtype dt,
                           const char *device); /* N(0,1) */
/* U[low, high) (finite low <= high) and N(mean, std^2) (std >= 0), float dtypes:
 * the same streams as tc_rand and tc_randn, scaled on the host */
TC_API tc_tensor *tc_uniform(int ndim, const int64_t *shape, double low, double high, tc_dtype dt,
                             const char *device);
TC_API tc_tensor *tc_normal(int ndim, const int64_t *shape, double mean, double std, tc_dtype dt,
                            const char *device);
/* integers uniform in [low, high) (low < high, in dt's range), integer dtypes */
TC_API tc_tensor *tc_randint(int ndim, const int64_t *shape, int64_t low, int64_t high,
                             tc_dtype dt, const char *device);
/* num_samples int32 category indices per row of probs ((n) -> (num_samples),
 * (rows, n) -> (rows, num_samples)), each drawn in proportion to the row's
 * non-negative weights (not normalised); without replacement the indices of
 * a row differ (num_samples <= n). Realized weights are checked (finite, >= 0,
 * a positive sum, enough positive ones); lazy ones are used as they come.
 * Uniforms from tc_rand, so tc_manual_seed makes the draws reproducible. */
TC_API tc_tensor *tc_multinomial(tc_tensor *probs, int64_t num_samples, bool replacement);
TC_API void tc_manual_seed(uint64_t seed);
TC_API tc_tensor *tc_retain(tc_tensor *t); /* returns t with one more reference; NULL for NULL */
TC_API void tc_release(tc_tensor *t);      /* NULL is fine */

/* ---- properties --------------------------------------------------------- */
TC_API int tc_ndim(const tc_tensor *t);            /* -1 for NULL */
TC_API const int64_t *tc_shape(const tc_tensor *t); /* ndim values, owned by t */
TC_API tc_dtype tc_get_dtype(const tc_tensor *t);
TC_API int64_t tc_numel(const tc_tensor *t);      /* -1 for NULL */
TC_API const char *tc_device(const tc_tensor *t); /* canonical name, e.g. "CPU" */
TC_API bool tc_is_realized(const tc_tensor *t);   /* backed by a buffer (maybe through a view) */

/* ---- elementwise (numpy broadcasting and type promotion) ----------------- */
TC_API tc_tensor *tc_add(tc_tensor *a, tc_tensor *b);
TC_API tc_tensor *tc_sub(tc_tensor *a, tc_tensor *b);
TC_API tc_tensor *tc_mul(tc_tensor *a, tc_tensor *b);
TC_API tc_tensor *tc_div(tc_tensor *a, tc_tensor *b);  /* true division; ints give float32 */
TC_API tc_tensor *tc_idiv(tc_tensor *a, tc_tensor *b); /* integers: truncates toward zero */
TC_API tc_tensor *tc_mod(tc_tensor *a, tc_tensor *b);  /* integers: sign of the dividend (C %) */
TC_API tc_tensor *tc_maximum(tc_tensor *a, tc_tensor *b);
TC_API tc_tensor *tc_minimum(tc_tensor *a, tc_tensor *b);
TC_API tc_tensor *tc_pow(tc_tensor *a, tc_tensor *b);
TC_API tc_tensor *tc_lt(tc_tensor *a, tc_tensor *b); /* comparisons give TC_BOOL */
TC_API tc_tensor *tc_gt(tc_tensor *a, tc_tensor *b);
TC_API tc_tensor *tc_le(tc_tensor *a, tc_tensor *b);
TC_API tc_tensor *tc_ge(tc_tensor *a, tc_tensor *b);
TC_API tc_tensor *tc_eq(tc_tensor *a, tc_tensor *b);
TC_API tc_tensor *tc_ne(tc_tensor *a, tc_tensor *b);
TC_API tc_tensor *tc_logical_and(tc_tensor *a, tc_tensor *b); /* bool and integer dtypes */
TC_API tc_tensor *tc_logical_or(tc_tensor *a, tc_tensor *b);
TC_API tc_tensor *tc_logical_xor(tc_tensor *a, tc_tensor *b);
TC_API tc_tensor *tc_logical_not(tc_tensor *a); /* a == 0 (bool: !a), any dtype; gives TC_BOOL */
/* integers: a << b and arithmetic a >> b; a count outside 0..bits-1 shifts
 * every bit out (0, or -1 for rshift of a negative signed a) */
TC_API tc_tensor *tc_lshift(tc_tensor *a, tc_tensor *b);
TC_API tc_tensor *tc_rshift(tc_tensor *a, tc_tensor *b);
TC_API tc_tensor *tc_neg(tc_tensor *a);
TC_API tc_tensor *tc_exp(tc_tensor *a);
TC_API tc_tensor *tc_log(tc_tensor *a);
TC_API tc_tensor *tc_exp2(tc_tensor *a);
TC_API tc_tensor *tc_log2(tc_tensor *a);
TC_API tc_tensor *tc_sqrt(tc_tensor *a);
TC_API tc_tensor *tc_sin(tc_tensor *a);
TC_API tc_tensor *tc_cos(tc_tensor *a);
TC_API tc_tensor *tc_relu(tc_tensor *a);
TC_API tc_tensor *tc_sigmoid(tc_tensor *a);
TC_API tc_tensor *tc_tanh(tc_tensor *a);
TC_API tc_tensor *tc_recip(tc_tensor *a);
TC_API tc_tensor *tc_abs(tc_tensor *a);
TC_API tc_tensor *tc_square(tc_tensor *a);
/* rounding: integers and bool keep their value and dtype; floats stay floats
 * (round: half to even, like torch and numpy); gradient 0 (torch's) */
TC_API tc_tensor *tc_trunc(tc_tensor *a);
TC_API tc_tensor *tc_floor(tc_tensor *a);
TC_API tc_tensor *tc_ceil(tc_tensor *a);
TC_API tc_tensor *tc_round(tc_tensor *a);
TC_API tc_tensor *tc_sign(tc_tensor *a); /* -1, 0, 1 in a's dtype; NaN gives 0 (torch) */
/* float math (ints and bool are computed in float32) */
TC_API tc_tensor *tc_sinh(tc_tensor *a);
TC_API tc_tensor *tc_cosh(tc_tensor *a);
TC_API tc_tensor *tc_asinh(tc_tensor *a);
TC_API tc_tensor *tc_acosh(tc_tensor *a);       /* NaN below 1 */
TC_API tc_tensor *tc_atanh(tc_tensor *a);       /* NaN outside [-1, 1] */
TC_API tc_tensor *tc_softsign(tc_tensor *a);    /* x/(1+|x|) */
TC_API tc_tensor *tc_hardswish(tc_tensor *a);   /* x*min(max(x+3,0),6)/6 */
TC_API tc_tensor *tc_mish(tc_tensor *a);        /* x*tanh(softplus x) */
TC_API tc_tensor *tc_quick_gelu(tc_tensor *a);  /* x*sigmoid(1.702x) */
/* max(x,0) + min(alpha*(exp(x/alpha)-1), 0); alpha finite and nonzero */
TC_API tc_tensor *tc_celu(tc_tensor *a, double alpha);
TC_API tc_tensor *tc_where(tc_tensor *cond, tc_tensor *a, tc_tensor *b);
TC_API tc_tensor *tc_cast(tc_tensor *a, tc_dtype dt);
/* a's bits read as dt, of the same size (tinygrad's bitcast, torch's
 * view(dtype)); TC_ERR_DTYPE for another size or for a non-bool to bool,
 * TC_ERR_INVALID when a requires grad (no gradient). Elementwise: it fuses. */
TC_API tc_tensor *tc_bitcast(tc_tensor *a, tc_dtype dt);

/* ---- reduce (naxes 0 = all axes; negative axes count from the end; a 0-d
 * tensor takes axis 0 or -1, its one element) ------------------------------ */
TC_API tc_tensor *tc_sum(tc_tensor *a, int naxes, const int *axes, bool keepdim);
TC_API tc_tensor *tc_max(tc_tensor *a, int naxes, const int *axes, bool keepdim);
TC_API tc_tensor *tc_min(tc_tensor *a, int naxes, const int *axes, bool keepdim);
TC_API tc_tensor *tc_mean(tc_tensor *a, int naxes, const int *axes, bool keepdim);
TC_API tc_tensor *tc_var(tc_tensor *a, int naxes, const int *axes, bool keepdim, int correction);
TC_API tc_tensor *tc_std(tc_tensor *a, int naxes, const int *axes, bool keepdim, int correction);
/* TC_BOOL: some / every element is nonzero (any dtype; not differentiable) */
TC_API tc_tensor *tc_any(tc_tensor *a, int naxes, const int *axes, bool keepdim);
TC_API tc_tensor *tc_all(tc_tensor *a, int naxes, const int *axes, bool keepdim);
/* log(sum(exp(a))) over the axes, shifted by the (finite) max: one kernel */
TC_API tc_tensor *tc_logsumexp(tc_tensor *a, int naxes, const int *axes, bool keepdim);
/* running sums along axis (tc_sum's dtype); a row of up to 512 is one
 * kernel (a windowed view and a sum), longer rows are scanned in blocks */
TC_API tc_tensor *tc_cumsum(tc_tensor *x, int axis);
/* running products along axis (torch's cumprod; tc_sum's dtype), one kernel
 * as tc_cumsum (windows and a product); the gradient is exact where x has
 * zeros, as torch's */
TC_API tc_tensor *tc_cumprod(tc_tensor *x, int axis);

/* ---- movement: views, no copies ----------------------------------------- */
TC_API tc_tensor *tc_reshape(tc_tensor *a, int ndim, const int64_t *shape); /* one -1 allowed */
TC_API tc_tensor *tc_permute(tc_tensor *a, const int *order);               /* ndim axes */
TC_API tc_tensor *tc_transpose(tc_tensor *a, int axis0, int axis1);
TC_API tc_tensor *tc_expand(tc_tensor *a, int ndim, const int64_t *shape); /* -1 keeps a dim */
TC_API tc_tensor *tc_pad(tc_tensor *a, const int64_t *before_after);       /* 2*ndim values */
TC_API tc_tensor *tc_shrink(tc_tensor *a, const int64_t *begin_end);       /* 2*ndim values */
TC_API tc_tensor *tc_flip(tc_tensor *a, int naxes, const int *axes);
TC_API tc_tensor *tc_contiguous(tc_tensor *a); /* a realize point: a kernel makes a copy */
/* tinygrad's contiguous_backward: a's values unchanged (no kernel); in the
 * backward graph its gradient is made contiguous (a realize point there) */
TC_API tc_tensor *tc_contiguous_backward(tc_tensor *a);

/* ---- running ------------------------------------------------------------ */
TC_API tc_status tc_realize(tc_tensor **ts, int n);
/* copies t's elements (row-major, t's dtype) to dst; nbytes must be numel*dtype size */
TC_API tc_status tc_to_host(tc_tensor *t, void *dst, size_t nbytes);
/* kernels tc_realize would run now (copies excluded); -1 on error */
TC_API int tc_schedule_kernel_count(tc_tensor **ts, int n);
TC_API tc_tensor *tc_to_device(tc_tensor *t, const char *device);
/* tinygrad's to_: moves t in place (its handle now reads a copy on device),
 * its gradient too; a leaf stays a leaf (later gradients land on device), a
 * result keeps its history behind the copy, as tc_to_device's. On error t is
 * unchanged. */
TC_API tc_status tc_move_to_device(tc_tensor *t, const char *device);
/* waits until every kernel and copy queued on device ("CUDA", "OPENCL:1",
 * NULL = TC_DEVICE or CPU) has finished: GPU launches return as soon as they
 * are queued, so time GPU work up to this call (torch.cuda.synchronize) */
TC_API tc_status tc_synchronize(const char *device);

/* counters since start or the last reset (tinygrad's GlobalCounters) */
typedef struct {
    int64_t kernel_count; /* kernels launched (copies excluded) */
    int64_t global_ops;   /* estimated arithmetic ops executed */
    int64_t global_mem;   /* bytes moved by kernels */
    double time_sum_s;    /* kernel time, when timing is on (TC_DEBUG>=2) */
    /* where a realize's time goes, in seconds, always measured (TC_DEBUG>=1
     * prints them per realize) */
    double schedule_s;     /* building schedules (graph -> kernels) */
    double lower_s;        /* codegen + render of kernels (and lowering-cache lookups) */
    double codegen_s;      /* of lower_s: codegen (kernel AST -> optimised UOps) */
    double render_s;       /* of lower_s: rendering UOps to source text */
    double compile_s;      /* device compile: cache lookups, loads, compiler runs */
    double launch_s;       /* launch calls (CPU: the kernels' run time; GPUs queue) */
    int64_t compile_count; /* kernels built from source (no cache had them) */
    int64_t graph_nodes;   /* graph nodes the schedules walked: distinct lazy nodes under
                              the tensors realized (or counted by tc_schedule_kernel_count),
                              views, constants and the realized buffers read included */
    /* device memory (all devices) */
    int64_t mem_used; /* bytes in live buffers now (not changed by a reset) */
    int64_t mem_peak; /* the most mem_used reached since start or the last reset */
    int64_t mem_cached; /* bytes of released buffers kept for reuse (TC_BUFCACHE_MB) */
} tc_counters;
TC_API void tc_get_counters(tc_counters *out);
TC_API void tc_reset_counters(void);

/* ---- nn: datasets ---------------------------------------------------------
 * IDX files (the MNIST format), plain or gzip-compressed (zlib is loaded at
 * run time for compressed files). Element types 0x08 (uint8), 0x0C (int32)
 * and 0x0D (float32) are read. A missing file, a wrong magic, truncated data
 * or bytes after the data are TC_ERR_IO errors naming the file. */
TC_API tc_tensor *tc_idx_load(const char *path, const char *device); /* the file's shape */

typedef struct {
    tc_tensor *train_images; /* (60000,28,28) uint8, raw 0-255 pixels */
    tc_tensor *train_labels; /* (60000) uint8, class ids 0..9 */
    tc_tensor *test_images;  /* (10000,28,28) uint8 */
    tc_tensor *test_labels;  /* (10000) uint8 */
} tc_mnist;
/* Loads the four MNIST files (MNIST, Fashion-MNIST, ...) from dir, each named
 * as in the original distribution ("train-images-idx3-ubyte",
 * "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
 * with or without ".gz", or with ".idx" for "-idx" ("train-images.idx3-ubyte").
 * Checks that images are uint8 (N,rows,cols), labels uint8 (N) with the same N
 * and every label in 0..9. On failure *out is untouched. */
TC_API tc_status tc_mnist_load(const char *dir, const char *device, tc_mnist *out);
TC_API void tc_mnist_release(tc_mnist *m); /* releases the four tensors, zeroes *m */

/* ---- nn: optimizers --------------------------------------------------------
 * PyTorch's formulas (torch.optim.SGD, Adam, AdamW). The optimizer keeps a
 * reference to each parameter (marking it with tc_set_requires_grad) and owns
 * its state (momentum buffers, Adam's m and v, lr, b1^t and b2^t as realized
 * tensors updated in place, so every step runs the same kernels).
 * tc_optimizer_step builds every update lazily with tc_assign and realizes
 * them all in one tc_realize call, with every gradient still lazy (the kernel
 * computing a gradient stores it beside the update, so tc_grad after the step
 * holds the values the step used, as torch's .grad does, and no graph keeps
 * the step's activations); a parameter without a gradient is skipped.
 * Parameters must be float, distinct and on one device. Hyperparameters are
 * checked: lr, momentum, dampening, weight_decay, eps >= 0; b1, b2 in [0,1).
 * A step that fails part-way may leave some parameters updated. */
typedef struct tc_optimizer tc_optimizer;
/* SGD: d = g + weight_decay*p; with momentum, b = momentum*b + (1-dampening)*d
 * (b = d on the first step) and d = nesterov ? d + momentum*b : b; p -= lr*d */
TC_API tc_optimizer *tc_sgd(tc_tensor **params, int n, double lr, double momentum);
TC_API tc_optimizer *tc_sgd_ex(tc_tensor **params, int n, double lr, double momentum,
                               double dampening, double weight_decay, bool nesterov);
/* Adam: m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g^2;
 * p -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps). Usual: 1e-3, 0.9, 0.999, 1e-8 */
TC_API tc_optimizer *tc_adam(tc_tensor **params, int n, double lr, double b1, double b2,
                             double eps);
/* AdamW: p *= 1 - lr*weight_decay, then the Adam update (torch's default wd: 0.01) */
TC_API tc_optimizer *tc_adamw(tc_tensor **params, int n, double lr, double b1, double b2,
                              double eps, double weight_decay);
TC_API tc_status tc_optimizer_zero_grad(tc_optimizer *o); /* drops every parameter's grad */
TC_API tc_status tc_optimizer_step(tc_optimizer *o);      /* schedules the update; realizes it */
/* the step, realizing also[0..n_also-1] (the loss, BatchNorm's running
 * statistics) in the same tc_realize call, so they are scheduled together */
TC_API tc_status tc_optimizer_step_with(tc_optimizer *o, tc_tensor **also, int n_also);
/* the step without realizing it (tinygrad's schedule_step): assigns every
 * update lazily and puts the updated tensors (parameters and state, owned by
 * the optimizer: borrowed) in out[0..cap-1]; returns how many there are
 * (which may exceed cap), -1 on error. Realizing them (with the loss) is one
 * step; tc_export_c of them exports it. The gradients stay lazy (tinygrad's
 * way: none is stored, each update computes its own; GPT-2 124M's step
 * needs 340 MB less than with tc_optimizer_step, which stores them); realize
 * them with the rest to keep them. The optimizer's step count is not
 * advanced (it matters only to SGD with dampening, whose first step differs). */
TC_API int tc_optimizer_schedule_step(tc_optimizer *o, tc_tensor **out, int cap);
TC_API tc_status tc_optimizer_set_lr(tc_optimizer *o, double lr); /* from the next step on */
TC_API double tc_optimizer_get_lr(const tc_optimizer *o);         /* NaN (an error) for NULL */
TC_API void tc_optimizer_free(tc_optimizer *o);                   /* NULL is fine */

/* ---- nn: layers ------------------------------------------------------------
 * PyTorch's default initialisation: Linear and Conv2d weights and biases from
 * U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (kaiming_uniform_ with a = sqrt(5)),
 * drawn with tc_rand (so tc_manual_seed makes them reproducible);
 * BatchNorm2d weight 1, bias 0, running_mean 0, running_var 1; LayerNorm
 * weight 1, bias 0; Embedding weight from N(0, 1) (tc_randn). A layer owns
 * its tensors, all realized float32 with requires_grad set on the trainable
 * ones: "weight" (Linear (out,in), Conv2d (out,in,k,k), BN and LayerNorm
 * (C), Embedding (num_embeddings, embedding_dim)), "bias", and BN's
 * buffers "running_mean", "running_var" (C). */
typedef struct tc_layer tc_layer;
typedef enum {
    TC_LAYER_LINEAR,      /* y = x @ weight^T + bias, x (..., in_features) */
    TC_LAYER_CONV2D,      /* x (N, in_channels, H, W), zero padding on both sides */
    TC_LAYER_BATCHNORM2D, /* x (N, C, H, W) or (N, C) */
    TC_LAYER_LAYERNORM,   /* x (..., features), normalized over the last dim */
    TC_LAYER_EMBEDDING,   /* integer ids (...) -> weight rows (..., embedding_dim) */
    TC_LAYER_COUNT        /* number of layer kinds */
} tc_layer_kind;
TC_API tc_layer *tc_nn_linear(int64_t in_features, int64_t out_features, bool bias,
                              const char *device);
TC_API tc_layer *tc_nn_conv2d(int64_t in_channels, int64_t out_channels, int kernel_size,
                              int stride, int padding, bool bias, const char *device);
/* torch's defaults: eps 1e-5, momentum 0.1 */
TC_API tc_layer *tc_nn_batchnorm2d(int64_t channels, double eps, double momentum,
                                   const char *device);
/* torch.nn.LayerNorm(features, eps, elementwise_affine, bias): tc_layernorm
 * over the last dim, times weight and plus bias where they exist (torch's
 * defaults: eps 1e-5, both true) */
TC_API tc_layer *tc_nn_layernorm(int64_t features, double eps, bool elementwise_affine,
                                 bool bias, const char *device);
/* torch.nn.Embedding(num_embeddings, embedding_dim): forward(ids) is
 * tc_index(weight, 0, ids), ids of any integer dtype and shape; its gradient
 * is a scatter-add into weight's rows */
TC_API tc_layer *tc_nn_embedding(int64_t num_embeddings, int64_t embedding_dim,
                                 const char *device);
/* the layer applied to x (a lazy tensor); shapes are checked here */
TC_API tc_tensor *tc_layer_forward(tc_layer *l, tc_tensor *x);
/* BatchNorm2d: training (the default) normalizes with the batch statistics and
 * updates the running ones when they are next realized (pass them to
 * tc_optimizer_step_with); otherwise it uses the running statistics */
TC_API tc_status tc_layer_set_training(tc_layer *l, bool training);
TC_API tc_layer_kind tc_layer_get_kind(const tc_layer *l); /* TC_LAYER_COUNT (an error) for NULL */
/* a new reference to the tensor called name ("weight", ...); NULL if none */
TC_API tc_tensor *tc_layer_tensor(tc_layer *l, const char *name);
/* Lists fill out[0..cap-1] with BORROWED tensors (the layer keeps them; retain
 * one to keep it after tc_layer_free) and return how many there are (which
 * may exceed cap), or -1 on bad arguments. */
TC_API int tc_layer_parameters(tc_layer *l, tc_tensor **out, int cap); /* weight, bias */
TC_API int tc_layer_buffers(tc_layer *l, tc_tensor **out, int cap);    /* running stats */
TC_API int tc_nn_parameters(tc_layer **layers, int n, tc_tensor **out, int cap);
TC_API int tc_nn_buffers(tc_layer **layers, int n, tc_tensor **out, int cap);
TC_API void tc_layer_free(tc_layer *l); /* NULL is fine */

/* ---- nn: saving and loading -------------------------------------------------
 * The safetensors format (huggingface/safetensors, tinygrad's safe_save): an
 * 8-byte little-endian header length N, N bytes of JSON {"name": {"dtype":
 * "F32", "shape": [..], "data_offsets": [begin, end]}, ...} padded with
 * spaces to a multiple of 8, then each tensor's elements, row-major and
 * little-endian. Loading writes into existing tensors in place (tc_assign,
 * realized together) after checking every name, dtype (TC_ERR_DTYPE), shape
 * (TC_ERR_SHAPE) and offset (TC_ERR_IO), so a load that fails a check
 * changes nothing (running out of memory part-way may leave some loaded). */
TC_API tc_status tc_safe_save(const char *path, const char *const *names, tc_tensor **ts, int n);
/* each names[i] must be in the file with ts[i]'s dtype and shape; other
 * entries of the file are ignored */
TC_API tc_status tc_safe_load(const char *path, const char *const *names, tc_tensor **ts, int n);
/* every tensor of layers[0..n-1], named "<index>.<tensor>" ("0.weight",
 * "2.running_mean"); loading also rejects files with entries the layers lack */
TC_API tc_status tc_nn_save(const char *path, tc_layer **layers, int n);
TC_API tc_status tc_nn_load(const char *path, tc_layer **layers, int n);

/* ---- JIT: capture a step once, replay its kernels ---------------------------
 * tc_jit_run calls the step the first time (warm-up, compiles), records its
 * kernels the second time, and from then on replays them with the new
 * inputs' buffers: no scheduling, lowering or compiling. Inputs are realized
 * (and copied if they are views) first. A change of input count, shape,
 * dtype or device captures again. Replays only re-run kernels and device
 * copies: host work in the step (uploads, host-side random numbers) must come
 * in as inputs. Outputs of a replay are new handles on the same buffers each
 * call. Free jits before tc_shutdown. */
typedef struct tc_jit tc_jit;
/* the step: reads inputs, sets outputs[0..n_outputs-1] to new references */
typedef tc_status (*tc_jit_fn)(void *user, tc_tensor *const *inputs, int n_inputs,
                               tc_tensor **outputs, int n_outputs);
TC_API tc_jit *tc_jit_new(tc_jit_fn fn, void *user);
TC_API tc_status tc_jit_run(tc_jit *j, tc_tensor *const *inputs, int n_inputs,
                            tc_tensor **outputs, int n_outputs);
/* kernels a replay launches (0 before capture); -1 with TC_ERR_INVALID for NULL */
TC_API int tc_jit_kernel_count(const tc_jit *j);
TC_API void tc_jit_free(tc_jit *j);

/* ---- ahead-of-time export: a graph as standalone C ----------------------------
 * tc_export_c writes <dir>/<name>.c and <dir>/<name>.h, which compute outs
 * from ins with no libtinyc, libffi, dlopen or compiler at run time (only
 * libc, and libm). The tensors in ins (realized, each reading its whole
 * buffer) become run-time arguments, in that order; every other realized
 * tensor the graph reads is embedded as constant data, and what the graph
 * assigns to (parameters, optimizer state: see tc_optimizer_schedule_step)
 * becomes state kept by the generated code and updated by each run, as the
 * library would. The graph is scheduled, not run: outs stay lazy, nothing
 * changes. The header declares at least
 *   #define <NAME>_ARENA_BYTES <n>   (scratch the caller passes to run; may be 0)
 *   int  <name>_run(void *arena, const void *const *inputs, void *const *outputs);
 *   void <name>_reset(void);         (state back to its exported values)
 *   extern void (*<name>_parallel_for)(...);   (optional thread split; NULL: serial)
 * and each input's and output's dtype, shape and bytes (fixed at export).
 * name must be a C identifier (<NAME> is it in upper case); CPU graphs only. */
TC_API tc_status tc_export_c(const char *dir, const char *name, tc_tensor **outs, int n_outs,
                             tc_tensor **ins, int n_ins);

/* ---- reading and writing by integer tensors ---------------------------------
 * A load whose place along one axis comes from an integer tensor (int32,
 * int64 or uint8): O(output) work, fused with what reads the result (an
 * embedding lookup plus a position embedding is one kernel). The gradient
 * adds the output's gradient at the same places: one kernel (CPU only for
 * now; on OPENCL and CUDA it fails with TC_ERR_DEVICE). In a kernel an
 * index outside the axis reads 0 and its gradient goes nowhere. */
/* tinygrad's and torch's gather: out has index's shape (index.ndim ==
 * x.ndim, index.shape[d] <= x.shape[d] off axis); out[i] = x[i with i[axis]
 * = index[i]] */
TC_API tc_tensor *tc_gather(tc_tensor *x, int axis, tc_tensor *index);
/* x[..., index, ...] on axis (numpy's integer-array indexing of one axis):
 * the result's shape is x.shape[:axis] + index.shape + x.shape[axis+1:];
 * negative indices count from the end. tc_index(weight, 0, ids) is an
 * embedding lookup */
TC_API tc_tensor *tc_index(tc_tensor *x, int axis, tc_tensor *index);
/* torch's x.index_copy_(axis, index, value), an indexed store in place:
 * dst[..., index[j], ...] = value[..., j, ...] for each of the m entries of
 * index (0-d: one entry; 1-d: m), written into dst's own buffer as an
 * assign (lazily: when dst is next realized, after the kernels that read
 * its old contents; dst must be a buffer seen whole and in order, as
 * tc_assign's). value broadcasts to dst's shape with axis at m and is cast
 * to dst's dtype. The kernel loops over value's elements only (a KV cache's
 * new row costs one row, not the cache), computes value and index in the
 * same loops, and reads index's values when it runs, so a tc_jit replay
 * with new index data writes new places. Indices must be in [0, size of
 * the axis) (torch's rule: no negative ones): outside is TC_ERR_INVALID
 * here when index is known on the host (a realized tensor or a constant);
 * in a kernel such an entry writes nothing. Of two equal indices the later
 * entry's values stay. Not differentiable: dst loses its recorded history.
 * On OPENCL and CUDA the kernel is one work-item (fine for rows of a cache,
 * slow for millions of elements). */
TC_API tc_status tc_index_copy(tc_tensor *dst, int axis, tc_tensor *index, tc_tensor *value);

/* resampling (torch's F.interpolate with a size, tinygrad's interpolate):
 * the last n axes of x take the sizes size[0..n-1], one axis at a time,
 * through indexed loads (O(output) work; gradients on the CPU only, as
 * tc_index's). nearest: x[floor(dst * in/out)]; nearest-exact: x[floor((dst
 * + 0.5) * in/out)]; linear (linear, bilinear, trilinear: any n): the two
 * neighbours weighted, half-pixel centres, or corner-aligned with
 * align_corners (linear only; float x only). An axis whose size does not
 * change is left as it is. */
typedef enum {
    TC_INTERP_NEAREST,       /* torch's "nearest" */
    TC_INTERP_NEAREST_EXACT, /* torch's "nearest-exact" */
    TC_INTERP_LINEAR,        /* torch's "linear", "bilinear", "trilinear" */
    TC_INTERP_COUNT          /* number of modes */
} tc_interp_mode;
TC_API tc_tensor *tc_interpolate(tc_tensor *x, int n, const int64_t *size, tc_interp_mode mode,
                                 bool align_corners);

/* ---- composites: built from the ops above, so they fuse and differentiate --
 * Optional tensors may be NULL. Shapes are checked at the call. */
/* numpy matmul: 1-D operands get a dim added (and removed from the result),
 * batch dims broadcast; a multiply and a sum over the last axis, no copies */
TC_API tc_tensor *tc_matmul(tc_tensor *a, tc_tensor *b);
TC_API tc_tensor *tc_dot(tc_tensor *a, tc_tensor *b); /* same as tc_matmul */
/* Einstein summation over xs[0..n-1] (1..16 operands), numpy's and torch's
 * formulas: "ij,jk->ik", "bij,bjk", "ii->i" (a repeated subscript takes the
 * diagonal), "...ij,...jk->...ik" ("..." broadcasts). Without "->" the
 * output is the "..." dims then the subscripts used once, in ASCII order;
 * summed "..." dims are allowed. Lowered to views, one broadcast multiply
 * and one sum, so it fuses like tc_matmul ("ij,jk" is one kernel). */
TC_API tc_tensor *tc_einsum(const char *formula, int n, tc_tensor *const *xs);
/* x @ w^T + b with torch's layout: w is (out, in), b is (out) or NULL */
TC_API tc_tensor *tc_linear(tc_tensor *x, tc_tensor *w, tc_tensor *b);
TC_API tc_tensor *tc_softmax(tc_tensor *a, int axis);
TC_API tc_tensor *tc_log_softmax(tc_tensor *a, int axis);
/* normalizes over the dims axis..ndim-1 (torch's normalized_shape of the
 * trailing dims): (a - mean) / sqrt(var + eps), biased variance, no affine */
TC_API tc_tensor *tc_layernorm(tc_tensor *a, int axis, double eps);
/* x is (N,C) or (N,C,...); weight, bias, running_mean, running_var are (C)
 * or NULL (the running stats both or neither). training: normalizes with the
 * batch statistics (biased variance) and, when given, updates the running
 * stats with tc_assign like torch: r = (1-momentum)*r + momentum*stat, with
 * the unbiased variance (the update runs when they are next realized).
 * Otherwise normalizes with the running stats, or with the batch's when none
 * are given (torch's track_running_stats=False). */
TC_API tc_tensor *tc_batchnorm(tc_tensor *x, tc_tensor *weight, tc_tensor *bias,
                               tc_tensor *running_mean, tc_tensor *running_var, bool training,
                               double momentum, double eps);
/* x (N,Cin,H,W), w (Cout,Cin/groups,kh,kw), bias (Cout) or NULL; zero padding
 * on both sides of H and W. Views (pad, reshape, expand, shrink) and one
 * multiply+sum: no im2col copy */
TC_API tc_tensor *tc_conv2d(tc_tensor *x, tc_tensor *w, tc_tensor *bias, int stride, int padding);
TC_API tc_tensor *tc_conv2d_ex(tc_tensor *x, tc_tensor *w, tc_tensor *bias, int stride_h,
                               int stride_w, int pad_h, int pad_w, int dilation, int groups);
/* convolution over nd spatial axes (1 <= nd <= 4), tinygrad's and PyTorch's
 * conv1d/2d/3d: x (N, Cin, *spatial[nd]), w (Cout, Cin/groups, *k[nd]), bias
 * (Cout) or NULL; result (N, Cout, *o[nd]) with
 * o = (in + before + after - dilation*(k-1) - 1) / stride + 1.
 * stride, dilation: nd values >= 1 (NULL: all 1); padding: 2*nd values, the
 * zeros added before and after each spatial axis in order (NULL: none), a
 * negative value crops instead; groups >= 1 divides Cin and Cout. Built like
 * tc_conv2d (views and one multiply+sum: one reduce kernel); tc_conv2d_ex is
 * this with nd = 2. Errors: TC_ERR_INVALID for nd out of range, stride,
 * dilation or groups < 1, any value beyond +-INT32_MAX; TC_ERR_SHAPE for
 * ranks other than nd + 2, channels that do not fit groups, a kernel larger
 * than its padded input, a bias that is not (Cout). */
TC_API tc_tensor *tc_conv_nd(tc_tensor *x, tc_tensor *w, tc_tensor *bias, int nd,
                             const int64_t *stride, const int64_t *padding,
                             const int64_t *dilation, int64_t groups);
/* transposed convolution (the gradient of tc_conv_nd with respect to its
 * input), PyTorch's conv_transpose1d/2d/3d: x (N, Cin, *spatial[nd]), w (Cin,
 * Cout/groups, *k[nd]), bias (Cout) or NULL; result (N, Cout, *o[nd]) with
 * o = (in-1)*stride - 2*padding + dilation*(k-1) + output_padding + 1.
 * stride, dilation: nd values >= 1 (NULL: all 1); padding: nd values >= 0,
 * removed from both sides of each axis (NULL: none); output_padding: nd
 * values >= 0 added at the end of each axis, each smaller than its stride or
 * its dilation (NULL: none); groups >= 1 divides Cin. Built as a conv of x
 * with stride-1 zeros between its elements (views only) and the flipped,
 * per-group transposed w; differentiable through those ops. Errors:
 * TC_ERR_INVALID for nd out of range and bad stride, dilation, padding,
 * output_padding or groups (also beyond +-INT32_MAX); TC_ERR_SHAPE for ranks
 * other than nd + 2, Cin that is not w's dim 0 or not divisible by groups,
 * an output size < 1, a bias that is not (Cout). */
TC_API tc_tensor *tc_conv_transpose_nd(tc_tensor *x, tc_tensor *w, tc_tensor *bias, int nd,
                                       const int64_t *stride, const int64_t *padding,
                                       const int64_t *output_padding, const int64_t *dilation,
                                       int64_t groups);
/* over the last two dims of x (ndim >= 2), no padding, windows that fit;
 * stride <= 0 means stride = kernel */
TC_API tc_tensor *tc_max_pool2d(tc_tensor *x, int kernel, int stride);
TC_API tc_tensor *tc_avg_pool2d(tc_tensor *x, int kernel, int stride);
/* pools over windows of the last nd axes of x (any leading dims; 1 <= nd
 * <= rank): kernel, stride (NULL: the kernel) and dilation (NULL: 1) give
 * nd values each, >= 1; output size per axis (in - dilation*(k-1) - 1) /
 * stride + 1 (torch's max_pool/avg_pool without padding: pad x first, with
 * -inf for max). The max's gradient is spread evenly over a window's
 * maximal elements (tinygrad's rule; torch gives it to one of them); the
 * mean counts every element of a window. */
TC_API tc_tensor *tc_max_pool_nd(tc_tensor *x, int nd, const int64_t *kernel,
                                 const int64_t *stride, const int64_t *dilation);
TC_API tc_tensor *tc_avg_pool_nd(tc_tensor *x, int nd, const int64_t *kernel,
                                 const int64_t *stride, const int64_t *dilation);
/* mean over N of -log_softmax(logits)[n, labels[n]]: logits (N,C) float,
 * labels (N) integer class ids. When labels is realized its values are
 * checked (0 <= label < C) at the call; a lazy label outside the range
 * contributes 0 to the sum (but still counts in N). */
TC_API tc_tensor *tc_cross_entropy(tc_tensor *logits, tc_tensor *labels);
/* index of the first maximum along axis, int32 (like torch) */
TC_API tc_tensor *tc_argmax(tc_tensor *a, int axis, bool keepdim);
/* training: zeroes each element with probability p (mask from tc_rand) and
 * scales the rest by 1/(1-p); otherwise (or p == 0) returns x itself */
TC_API tc_tensor *tc_dropout(tc_tensor *x, double p, bool training);

/* ---- transformer ops: masks, attention, gelu, losses -----------------------
 * Composed from the ops above like the composites (they fuse and
 * differentiate). */
/* x (..., R, C) with the elements above diagonal `diagonal` set to 0
 * (torch.tril: diagonal 0 is the main one, > 0 above it, < 0 below); tc_triu
 * zeroes those below it. Any dtype. */
TC_API tc_tensor *tc_tril(tc_tensor *x, int64_t diagonal);
TC_API tc_tensor *tc_triu(tc_tensor *x, int64_t diagonal);
/* x with value (cast to x's dtype) where mask (bool, broadcast to x's
 * shape) is true */
TC_API tc_tensor *tc_masked_fill(tc_tensor *x, tc_tensor *mask, double value);
/* softmax(q @ k^T / sqrt(E) + mask) @ v: q (..., L, E), k (..., S, E), v
 * (..., S, Ev) -> (..., L, Ev), batch dims broadcast. attn_mask (may be NULL)
 * broadcasts to (..., L, S): bool keeps the scores where true (-inf
 * elsewhere), float is added. is_causal masks as tril of ones (L, S) does
 * (torch's; not together with attn_mask). A row with every score masked is
 * NaN, as in torch. */
TC_API tc_tensor *tc_scaled_dot_product_attention(tc_tensor *q, tc_tensor *k, tc_tensor *v,
                                                  tc_tensor *attn_mask, bool is_causal);
/* the same with dropout on the attention weights (torch's dropout_p, in
 * [0, 1]: each weight is dropped with probability dropout_p and the rest
 * scaled by 1/(1-dropout_p), drawn with tc_rand; 0 is
 * tc_scaled_dot_product_attention) */
TC_API tc_tensor *tc_scaled_dot_product_attention_ex(tc_tensor *q, tc_tensor *k, tc_tensor *v,
                                                     tc_tensor *attn_mask, bool is_causal,
                                                     double dropout_p);
/* the error function, within 3 float32 ulp of the true value; tc_erf and
 * tc_gelu cast an integer x to float32 first */
TC_API tc_tensor *tc_erf(tc_tensor *x);
/* x/2 (1 + erf(x/sqrt 2)) (torch's gelu), or with approximate its tanh form
 * x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (approximate='tanh') */
TC_API tc_tensor *tc_gelu(tc_tensor *x, bool approximate);
typedef enum {
    TC_REDUCTION_MEAN, /* the sum over the rows not ignored, divided by their count */
    TC_REDUCTION_SUM,  /* the sum over the rows */
    TC_REDUCTION_NONE, /* one loss per row, 0 where ignored */
    TC_REDUCTION_COUNT /* number of reductions */
} tc_reduction;
/* torch's cross_entropy over logits (N,C) float and labels (N) integer:
 * loss[n] = -sum_c log_softmax(logits)[n,c] * ((1-ls) [c == labels[n]] + ls/C)
 * with ls = label_smoothing in [0, 1], and 0 for rows whose label is
 * ignore_index (torch's default: -100). Realized labels are checked (each in
 * [0, C) or ignore_index) at the call; a lazy label outside both picks no
 * class. Mean over no rows left is NaN. */
TC_API tc_tensor *tc_cross_entropy_ex(tc_tensor *logits, tc_tensor *labels,
                                      tc_reduction reduction, int64_t ignore_index,
                                      double label_smoothing);

/* ---- autograd and training ---------------------------------------------
 * Reverse mode over the public ops. A float tensor marked with
 * tc_set_requires_grad is a leaf; every differentiable op on such tensors
 * records how its result was made (comparisons, idiv/mod, logical ops and
 * casts to integers are not differentiable and record nothing).
 * tc_backward(loss) adds d loss / d leaf to each leaf's gradient (grad +=
 * new, so two backward calls accumulate); only leaves keep gradients. It is
 * lazy: tc_grad returns an unrealized tensor that runs when realized.
 * Releasing tensors releases what they recorded; a gradient never keeps its
 * leaf alive. */
TC_API tc_status tc_set_requires_grad(tc_tensor *t, bool on); /* float leaves only */
TC_API bool tc_requires_grad(const tc_tensor *t); /* false for NULL */
/* loss must have exactly one element and require grad */
TC_API tc_status tc_backward(tc_tensor *loss);
/* torch's loss.backward(gradient): d (sum of loss * gradient) / d leaf added
 * to each leaf's gradient, for a loss of any shape; gradient has loss's
 * shape, a float dtype and its device (NULL: tc_backward, one element) */
TC_API tc_status tc_backward_ex(tc_tensor *loss, tc_tensor *gradient);
/* tc_backward_ex (gradient NULL: a one-element loss) that, with retain_graph
 * false, then frees what the loss's graph recorded (PyTorch's backward
 * default, tinygrad's too): the values kept for the rules go once the
 * gradients no longer read them, and a later backward that needs a gradient
 * through one of those tensors fails (TC_ERR_INVALID). tc_backward and
 * tc_backward_ex keep the graph (retain_graph true). */
TC_API tc_status tc_backward_opts(tc_tensor *loss, tc_tensor *gradient, bool retain_graph);
/* a new reference to t's gradient, or NULL with no error set when it has none.
 * The gradient is lazy and reads the buffers it depends on when it runs:
 * realize it before (or together with) an in-place update of those (tc_assign
 * of the parameter) if its value is wanted afterwards (tc_optimizer_step
 * does). */
TC_API tc_tensor *tc_grad(tc_tensor *t);
TC_API tc_status tc_zero_grad(tc_tensor *t); /* drops t's gradient */
TC_API tc_tensor *tc_detach(tc_tensor *t);  /* same values, no history, no requires_grad */
/* grad mode (on at start): while off, ops record nothing (torch.no_grad);
 * returns the previous setting */
TC_API bool tc_set_grad_enabled(bool on);
TC_API bool tc_is_grad_enabled(void);
/* torch.nn.utils.clip_grad_norm_: total = the norm_type-norm (2, inf, any
 * q > 0) of the gradients of params[0..n-1] taken together; each gradient
 * becomes grad * min(max_norm / (total + 1e-6), 1). Returns total (0-d,
 * float32, lazy like the gradients: realize it with the step; 0 when no
 * parameter has a gradient). Parameters without a gradient are skipped. */
TC_API tc_tensor *tc_clip_grad_norm(tc_tensor **params, int n, double max_norm,
                                    double norm_type);
/* In-place update, scheduled lazily: dst takes value's elements (broadcast to
 * dst's shape, cast to its dtype) when dst is next realized, written into
 * dst's own buffer (readers of the old value are scheduled first). dst must
 * be a buffer seen whole and in order (a lazy dst is realized into a buffer
 * of its own first); a view into part of a buffer is TC_ERR_INVALID. Not
 * differentiable: a dst with recorded history loses it. */
TC_API tc_status tc_assign(tc_tensor *dst, tc_tensor *value);

#ifdef __cplusplus
}
#endif
#endif /* TINYC_H */
