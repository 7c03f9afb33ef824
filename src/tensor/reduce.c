/* reduce.c - sum, max, min, mean, var, std, any and all over a set of axes.
 *
 * Axes become a bitmask for tc_node_reduce (reduced dims stay size 1); unless
 * keepdim they are then reshaped away. Accumulation dtypes: bool, uint8 and
 * int32 sum in int32, int64 in int64, float16 and bfloat16 in float32 (cast
 * back after),
 * float64 in float64 (mean, var and std of float64 too), uint64 in uint64.
 * min = flip(max(flip x)) with the order-reversing flip of tc_ew_order_flip.
 * mean = sum * (1/n) (ints in float32); var = sum((x-mean)^2) / max(0, n-c).
 * any = count(x != 0) != 0; all = count(x == 0) == 0. A 0-d tensor may name axis
 * 0 or -1 (its one element, as torch and tinygrad allow): nothing reduces.
 * An input with no elements reduces to the identity (sum 0, max -inf or the
 * dtype's lowest value, min its highest), so mean of nothing is NaN. */
#include "tensor.h"

#include <math.h>

/* the lowest value of dt (max's identity) as a const of the given shape */
static tc_node *lowest(tc_dtype dt, int device, int ndim, const int64_t *shape) {
    int64_t lo, hi;
    if (tc_dtype_int_range(dt, &lo, &hi)) return tc_node_const_int(lo, dt, device, ndim, shape);
    return tc_node_const(-INFINITY, dt, device, ndim, shape);
}

/* Long reduces are split in two (tinygrad's split_reduceop, generalised):
 *  - to one value: x flattened to (parts, n/parts), each part reduced (one
 *    kernel whose outer loop the CPU runtime shares between threads), then
 *    the parts (a tiny second kernel). One kernel would run on one thread.
 *  - to at least SPLIT_OUTS values, each reducing at least SPLIT_RATIO
 *    inputs (a conv's weight gradient: batch x oy x ox per weight): the
 *    outermost reduced axis (the batch) is divided into (parts, rest) and
 *    parts moved to the front; the first kernel reduces rest and the other
 *    reduced axes for each part, the second sums the parts (an optimizer's
 *    update of the weight rides on it). Each part's chunk of the input then
 *    stays in cache while every output tile passes over it, where one
 *    kernel streams the whole batch once per tile. beautiful_mnist at batch
 *    512, one thread: the 32->32 5x5 weight gradient 90 -> 51 ms (+0.2 ms
 *    for the sum of 16 parts), 32->64 3x3 7.5 -> 6.1 ms, 1->32 5x5 5.6 ->
 *    3.0 ms. Per-channel statistics (batchnorm's 32 or 64 outputs) read
 *    each input once and fuse their reduces with the elementwise work
 *    around them: split too, the step took 622 -> 781 ms.
 * The order of the additions changes (not bit-exact with one kernel). */
enum {
    SPLIT_MIN = 1 << 20,      /* full reduce: fewest inputs worth a split */
    SPLIT_PARTS = 1024,       /* full reduce: most parts */
    SPLIT_MIN_PART = 4096,    /* full reduce: fewest inputs one part reduces */
    SPLIT_RATIO = 32768,      /* partial reduce: fewest inputs per output */
    SPLIT_OUTS = 256,         /* partial reduce: fewest outputs */
    SPLIT_CHUNKS = 16,        /* partial reduce: most parts */
    SPLIT_PARTIAL = 1 << 19,  /* partial reduce: most elements of the partial buffer */
};

/* parts for a full reduce of x (0: no split) */
static int64_t full_parts(const tc_node *x) {
    int64_t n = tc_node_numel(x);
    if (n < SPLIT_MIN) return 0;
    for (int64_t p = SPLIT_PARTS; p > 1; p--)
        if (n % p == 0 && n / p >= SPLIT_MIN_PART) return p;
    return 0;
}

/* parts for x reduced over `real`, some output having company; *axis: the
 * reduced axis divided (0 parts: no split) */
static int64_t partial_parts(const tc_node *x, uint32_t real, int *axis) {
    int64_t red = 1;
    *axis = -1;
    for (int i = x->ndim - 1; i >= 0; i--)
        if ((real >> i) & 1) red *= x->shape[i], *axis = i;
    if (red < SPLIT_RATIO || x->ndim >= TC_MAX_DIMS) return 0;
    int64_t outs = tc_node_numel(x) / red, size = x->shape[*axis];
    if (outs < SPLIT_OUTS) return 0;
    for (int64_t p = SPLIT_CHUNKS; p > 1; p--)
        if (size % p == 0 && size / p > 1 && p * outs <= SPLIT_PARTIAL) return p;
    return 0;
}

static tc_node *reduce_one(tc_node *x, tc_op op, uint32_t mask);

/* x (consumed) reduced over real: parts of it first, then the parts */
static tc_node *split_reduce(tc_node *x, tc_op op, uint32_t real, const int64_t *out_shape) {
    int nd = x->ndim, axis = -1;
    bool full = true;
    for (int i = 0; i < nd; i++) full &= x->shape[i] == 1 || ((real >> i) & 1);
    int64_t parts = full ? full_parts(x) : partial_parts(x, real, &axis);
    if (parts < 2) return reduce_one(x, op, real);
    if (full) {
        int64_t flat[2] = {parts, tc_node_numel(x) / parts};
        tc_node *r = reduce_one(tc_ew_reshape(x, 2, flat), op, 2u); /* (parts, 1) */
        r = reduce_one(tc_ew_reshape(r, 1, flat), op, 1u);         /* (1) */
        return tc_ew_reshape(r, nd, out_shape);
    }
    /* (.., parts, rest, ..) with parts moved to the front: the outermost
     * loop of the first kernel, so one part's chunk is read by every output
     * tile before the next part (and parts are what threads share) */
    int64_t shape[TC_MAX_DIMS];
    int order[TC_MAX_DIMS];
    for (int i = 0; i < nd; i++) shape[i + (i > axis)] = x->shape[i];
    shape[axis] = parts;
    shape[axis + 1] = x->shape[axis] / parts;
    order[0] = axis;
    for (int i = 0; i <= nd; i++)
        if (i != axis) order[i + (i < axis)] = i;
    tc_node *xs = tc_ew_reshape(x, nd + 1, shape);
    tc_node *xp = xs ? tc_node_permute(xs, order) : NULL;
    tc_node_release(xs);
    uint32_t low = real & ((1u << axis) - 1), high = real >> (axis + 1);
    uint32_t first = (low << 1) | (1u << (axis + 1)) | (high << (axis + 2));
    tc_node *r = reduce_one(xp, op, first); /* (parts, kept dims..) */
    r = reduce_one(r, op, 1u);
    return tc_ew_reshape(r, nd, out_shape);
}

/* x (consumed) reduced with op over mask (reduced dims size 1), one reduce */
static tc_node *reduce_one(tc_node *x, tc_op op, uint32_t mask) {
    if (!x) return NULL;
    int64_t shape[TC_MAX_DIMS];
    uint32_t real = 0; /* reducing a size-1 dim changes nothing */
    for (int i = 0; i < x->ndim; i++) {
        bool is_reduced = (mask >> i) & 1;
        shape[i] = is_reduced ? 1 : x->shape[i];
        if (is_reduced && x->shape[i] != 1) real |= 1u << i;
    }
    tc_node *r;
    if (tc_node_numel(x) == 0)
        r = op == TC_OP_REDUCE_SUM    ? tc_node_const_int(0, x->dtype, x->device, x->ndim, shape)
            : op == TC_OP_REDUCE_PROD ? tc_node_const_int(1, x->dtype, x->device, x->ndim, shape)
                                      : lowest(x->dtype, x->device, x->ndim, shape);
    else if (!real) return x;
    else r = tc_node_reduce(op, x, real);
    tc_node_release(x);
    return r;
}

/* x (consumed) reduced with op (REDUCE_SUM, REDUCE_MAX or REDUCE_PROD) over mask; the
 * reduced dims stay as size 1 */
tc_node *tc_ew_reduce(tc_node *x, tc_op op, uint32_t mask) {
    if (!x) return NULL;
    int64_t shape[TC_MAX_DIMS];
    uint32_t real = 0;
    for (int i = 0; i < x->ndim; i++) {
        bool is_reduced = (mask >> i) & 1;
        shape[i] = is_reduced ? 1 : x->shape[i];
        if (is_reduced && x->shape[i] != 1) real |= 1u << i;
    }
    if (tc_node_numel(x) == 0 || !real) return reduce_one(x, op, mask);
    return split_reduce(x, op, real, shape);
}

/* x (consumed) with the dims in mask removed, unless keepdim */
static tc_node *squeeze(tc_node *x, uint32_t mask, bool keepdim) {
    if (!x || keepdim || !mask) return x;
    int64_t shape[TC_MAX_DIMS];
    int nd = 0;
    for (int i = 0; i < x->ndim; i++)
        if (!((mask >> i) & 1)) shape[nd++] = x->shape[i];
    return tc_ew_reshape(x, nd, shape);
}

/* number of elements each output element reduces */
static int64_t reduced_count(const tc_node *x, uint32_t mask) {
    int64_t n = 1;
    for (int i = 0; i < x->ndim; i++)
        if ((mask >> i) & 1) n *= x->shape[i];
    return n;
}

/* the 16-bit floats: summed in float32, the result cast back */
static bool is_half(tc_dtype dt) {
    return dt == TC_FLOAT16 || dt == TC_BFLOAT16;
}

tc_dtype tc_sum_dtype(tc_dtype dt) {
    switch (dt) {
    case TC_BOOL:
    case TC_UINT8:
    case TC_INT8:
    case TC_INT16:
    case TC_UINT16:
    case TC_INT32: return TC_INT32;
    case TC_UINT32: /* every uint32 sum of up to 2^31 elements fits */
    case TC_INT64: return TC_INT64;
    case TC_FLOAT64: return TC_FLOAT64;
    case TC_UINT64: return TC_UINT64;
    case TC_FLOAT16:
    case TC_BFLOAT16:
    case TC_FLOAT32:
    case TC_DTYPE_COUNT: break;
    }
    return TC_FLOAT32;
}

/* x * (1/n) for float x (consumed) */
static tc_node *scale(tc_node *x, double n) {
    return tc_ew_binary(TC_OP_MUL, x, tc_ew_const(x, n > 0 ? 1.0 / n : INFINITY));
}

/* mean over mask, dims kept; x float32 (consumed) */
static tc_node *mean_keep(tc_node *x, uint32_t mask) {
    if (!x) return NULL;
    double n = (double)reduced_count(x, mask);
    return scale(tc_ew_reduce(x, TC_OP_REDUCE_SUM, mask), n);
}

/* variance over mask, dims kept; x float32 (consumed) */
static tc_node *var_keep(tc_node *x, uint32_t mask, int correction) {
    if (!x) return NULL;
    int ndim = x->ndim;
    int64_t shape[TC_MAX_DIMS];
    for (int i = 0; i < ndim; i++) shape[i] = x->shape[i];
    double n = (double)reduced_count(x, mask) - correction;
    tc_node *mean = tc_ew_broadcast(mean_keep(tc_ew_keep(x), mask), ndim, shape);
    tc_node *d = tc_ew_sub(x, mean);
    tc_node *d2 = tc_ew_keep(d);
    return scale(tc_ew_reduce(tc_ew_binary(TC_OP_MUL, d, d2), TC_OP_REDUCE_SUM, mask), n);
}

/* any (or, is_all, all) of x (consumed) over mask, dims kept: the count of
 * nonzero (zero) elements compared with 0. A count, not a max over bools:
 * gcc 12 at -O2 -march=native vectorizes max(acc, v != 0) with true as -1
 * and returns false (seen on this project's CPU kernels). */
static tc_node *any_all(tc_node *x, bool is_all, uint32_t mask) {
    tc_node *hit = is_all ? tc_ew_not(tc_ew_cast(x, TC_BOOL)) : tc_ew_cast(x, TC_BOOL);
    tc_node *count = tc_ew_reduce(tc_ew_cast(hit, TC_INT32), TC_OP_REDUCE_SUM, mask);
    tc_node *found = tc_ew_binary(TC_OP_CMPNE, count, tc_ew_const(count, 0));
    return is_all ? tc_ew_not(found) : found;
}

/* ---- public ---- */

typedef enum {
    R_SUM,  /* sum, in tc_sum_dtype */
    R_MAX,  /* max */
    R_MIN,  /* min */
    R_MEAN, /* mean, float */
    R_VAR,  /* variance with a correction, float */
    R_STD,  /* standard deviation with a correction, float */
    R_ANY,  /* some element is nonzero, bool */
    R_ALL,  /* every element is nonzero, bool */
} reduce_kind;

/* the reduction of x (consumed, dtype dt) over mask, dims kept */
static tc_node *reduce_node(tc_node *x, tc_dtype dt, reduce_kind kind, uint32_t mask,
                            int correction) {
    switch (kind) {
    case R_SUM:
        return tc_ew_cast(tc_ew_reduce(tc_ew_cast(x, tc_sum_dtype(dt)), TC_OP_REDUCE_SUM, mask),
                          is_half(dt) ? dt : tc_sum_dtype(dt));
    case R_MAX: return tc_ew_reduce(x, TC_OP_REDUCE_MAX, mask);
    case R_MIN: return tc_ew_order_flip(tc_ew_reduce(tc_ew_order_flip(x), TC_OP_REDUCE_MAX, mask));
    case R_ANY:
    case R_ALL: return any_all(x, kind == R_ALL, mask);
    case R_MEAN:
    case R_VAR:
    case R_STD: break;
    }
    tc_dtype acc = tc_dtype_float_acc(dt), out = is_half(dt) ? dt : acc;
    x = tc_ew_cast(x, acc);
    tc_node *r = kind == R_MEAN ? mean_keep(x, mask) : var_keep(x, mask, correction);
    if (kind == R_STD) r = tc_ew_unary(TC_OP_SQRT, r);
    return tc_ew_cast(r, out);
}

static tc_tensor *reduce(const char *api, tc_tensor *a, int naxes, const int *axes, bool keepdim,
                         reduce_kind kind, int correction) {
    tc_lock();
    tc_tensor *out = NULL;
    uint32_t mask = 0;
    if (tc_tensor_check(a, api, "a") == TC_OK &&
        tc_tensor_axes_mask(api, a->node->ndim, naxes, axes, &mask) == TC_OK) {
        tc_node *x = tc_node_retain(a->node);
        tc_node *r = reduce_node(x, a->node->dtype, kind, mask, correction);
        static const tc_ag_op ag[] = {[R_SUM] = TC_AG_SUM,   [R_MAX] = TC_AG_MAX,
                                      [R_MIN] = TC_AG_MIN,   [R_MEAN] = TC_AG_MEAN,
                                      [R_VAR] = TC_AG_VAR,   [R_STD] = TC_AG_STD,
                                      [R_ANY] = TC_AG_NONE, [R_ALL] = TC_AG_NONE};
        tc_ag_args args = {.axes = mask, .correction = correction};
        out = tc_ag_record(tc_tensor_wrap(squeeze(r, mask, keepdim)), ag[kind], 1, &a, &args);
    }
    tc_unlock();
    return out;
}

TC_API tc_tensor *tc_sum(tc_tensor *a, int naxes, const int *axes, bool keepdim) {
    TC_API_ENTER();
    return reduce("tc_sum", a, naxes, axes, keepdim, R_SUM, 0);
}
TC_API tc_tensor *tc_max(tc_tensor *a, int naxes, const int *axes, bool keepdim) {
    TC_API_ENTER();
    return reduce("tc_max", a, naxes, axes, keepdim, R_MAX, 0);
}
TC_API tc_tensor *tc_min(tc_tensor *a, int naxes, const int *axes, bool keepdim) {
    TC_API_ENTER();
    return reduce("tc_min", a, naxes, axes, keepdim, R_MIN, 0);
}
TC_API tc_tensor *tc_mean(tc_tensor *a, int naxes, const int *axes, bool keepdim) {
    TC_API_ENTER();
    return reduce("tc_mean", a, naxes, axes, keepdim, R_MEAN, 0);
}
TC_API tc_tensor *tc_var(tc_tensor *a, int naxes, const int *axes, bool keepdim, int correction) {
    TC_API_ENTER();
    return reduce("tc_var", a, naxes, axes, keepdim, R_VAR, correction);
}
TC_API tc_tensor *tc_any(tc_tensor *a, int naxes, const int *axes, bool keepdim) {
    TC_API_ENTER();
    return reduce("tc_any", a, naxes, axes, keepdim, R_ANY, 0);
}
TC_API tc_tensor *tc_all(tc_tensor *a, int naxes, const int *axes, bool keepdim) {
    TC_API_ENTER();
    return reduce("tc_all", a, naxes, axes, keepdim, R_ALL, 0);
}
TC_API tc_tensor *tc_std(tc_tensor *a, int naxes, const int *axes, bool keepdim, int correction) {
    TC_API_ENTER();
    return reduce("tc_std", a, naxes, axes, keepdim, R_STD, correction);
}
