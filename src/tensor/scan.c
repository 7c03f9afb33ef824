/* scan.c - tc_cumsum: running sums along one axis, built from views and one
 * sum so the scheduler makes a row's scan one kernel, fused with its
 * readers; its gradient (the running sums from the other end) is built the
 * same way, so it is one kernel too.
 *
 * A row x of n values (the axis moved last) becomes n windows of a sliding
 * view: x padded with n-1 zeros in front (length L = 2n-1) is expanded to
 * n+1 copies, flattened, cut to n*(L+1) values and seen as (n, L+1): row i
 * starts i values further along, so its first n values are x[i-n+1 .. i]
 * (zeros before x[0]), and their sum is the running sum at i (tinygrad's
 * pool trick). Padding behind instead gives x[i .. i+n-1], the sums from
 * the end (the gradient). That is n^2 additions per row, so rows longer than
 * 2*BLOCK are scanned in blocks of BLOCK: each block's own scan, then the
 * scan of the block totals shifted by one block (recursively), added back.
 * Sums run in tc_sum's accumulation dtype. Graph work: O(1) nodes per level,
 * O(log n) levels. */
#include "tensor.h"

#include <string.h>

enum { BLOCK = 256 /* block length of the blocked scan */ };

/* ---- consuming view helpers on the last dim ---- */

static tc_node *pad_last(tc_node *x, int64_t before, int64_t after) {
    if (!x) return NULL;
    int64_t ba[2 * TC_MAX_DIMS] = {0};
    ba[2 * x->ndim - 2] = before, ba[2 * x->ndim - 1] = after;
    tc_node *r = tc_node_pad(x, ba);
    tc_node_release(x);
    return r;
}

static tc_node *shrink_last(tc_node *x, int64_t begin, int64_t end) {
    if (!x) return NULL;
    int64_t be[2 * TC_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) be[2 * i] = 0, be[2 * i + 1] = x->shape[i];
    be[2 * x->ndim - 2] = begin, be[2 * x->ndim - 1] = end;
    tc_node *r = tc_node_shrink(x, be);
    tc_node_release(x);
    return r;
}

/* x with its last `drop` dims replaced by tail[0..n_tail-1] */
static tc_node *reshape_tail(tc_node *x, int drop, int n_tail, const int64_t *tail) {
    if (!x) return NULL;
    int64_t shape[TC_MAX_DIMS];
    int lead = x->ndim - drop;
    memcpy(shape, x->shape, sizeof(int64_t) * (size_t)lead);
    memcpy(shape + lead, tail, sizeof(int64_t) * (size_t)n_tail);
    return tc_ew_reshape(x, lead + n_tail, shape);
}

/* ---- scans of the last dim (x consumed) ---- */

static tc_node *scan_last(tc_node *x, bool is_reverse);

/* rows of n <= 2*BLOCK: the window view, summed */
static tc_node *scan_windows(tc_node *x, bool is_reverse) {
    int nd = x->ndim;
    int64_t n = x->shape[nd - 1], len = 2 * n - 1;
    int64_t one_l[2] = {1, len}, flat = (n + 1) * len, win[2] = {n, len + 1}, out[1] = {n};
    tc_node *r = reshape_tail(pad_last(x, is_reverse ? 0 : n - 1, is_reverse ? n - 1 : 0), 1, 2,
                              one_l); /* (..., 1, L) */
    if (!r) return NULL;
    int64_t shape[TC_MAX_DIMS];
    memcpy(shape, r->shape, sizeof(int64_t) * (size_t)(nd + 1));
    shape[nd - 1] = n + 1;
    tc_node *e = tc_node_expand(r, nd + 1, shape); /* (..., n+1, L) */
    tc_node_release(r);
    tc_node *w = reshape_tail(shrink_last(reshape_tail(e, 2, 1, &flat), 0, n * (len + 1)), 1, 2,
                              win);  /* (..., n, L+1) */
    w = shrink_last(w, 0, n);        /* (..., n, n) */
    tc_node *s = tc_ew_reduce(w, TC_OP_REDUCE_SUM, 1u << nd); /* (..., n, 1) */
    return reshape_tail(s, 2, 1, out);
}

/* longer rows: the blocks' scans plus the scan of the totals of the blocks
 * before (after, for is_reverse) each */
static tc_node *scan_blocks(tc_node *x, bool is_reverse) {
    int64_t n = x->shape[x->ndim - 1], k = (n + BLOCK - 1) / BLOCK, m = k * BLOCK;
    int64_t kb[2] = {k, BLOCK}, k1[2] = {k, 1};
    /* zeros on the far side of the scan add nothing */
    tc_node *p = pad_last(x, is_reverse ? 0 : m - n, is_reverse ? m - n : 0);
    tc_node *r = scan_last(reshape_tail(p, 1, 2, kb), is_reverse); /* (..., k, B) */
    int64_t at = is_reverse ? 0 : BLOCK - 1;                       /* where a block's total is */
    tc_node *t = reshape_tail(shrink_last(tc_ew_keep(r), at, at + 1), 2, 1, &k); /* (..., k) */
    tc_node *others = is_reverse ? shrink_last(pad_last(t, 0, 1), 1, k + 1)
                                 : shrink_last(pad_last(t, 1, 0), 0, k);
    tc_node *base = reshape_tail(scan_last(others, is_reverse), 1, 2, k1); /* (..., k, 1) */
    if (!r || !base) {
        tc_node_release(r);
        tc_node_release(base);
        return NULL;
    }
    tc_node *sum = tc_ew_binary(TC_OP_ADD, r, tc_ew_broadcast(base, r->ndim, r->shape));
    tc_node *flat = reshape_tail(sum, 2, 1, &m);
    return is_reverse ? shrink_last(flat, 0, n) : shrink_last(flat, m - n, m);
}

static tc_node *scan_last(tc_node *x, bool is_reverse) {
    if (!x || x->shape[x->ndim - 1] <= 1) return x; /* its own running sum */
    return x->shape[x->ndim - 1] <= 2 * BLOCK ? scan_windows(x, is_reverse)
                                               : scan_blocks(x, is_reverse);
}

/* x (consumed) scanned along axis (ndim >= 1), in x's dtype */
static tc_node *scan_axis(tc_node *x, int axis, bool is_reverse) {
    if (!x) return NULL;
    int nd = x->ndim, order[TC_MAX_DIMS];
    if (axis == nd - 1) return scan_last(x, is_reverse);
    for (int i = 0; i < nd; i++) order[i] = i;
    order[axis] = nd - 1, order[nd - 1] = axis; /* a swap: its own inverse */
    tc_node *t = tc_node_permute(x, order);
    tc_node_release(x);
    tc_node *s = scan_last(t, is_reverse);
    tc_node *r = s ? tc_node_permute(s, order) : NULL;
    tc_node_release(s);
    return r;
}

/* ---- public ---- */

void tc_cumsum_grad(const tc_ag_ctx *c, tc_node *g, tc_node **grads) {
    const tc_node *x = c->inputs[0];
    tc_node *gf = tc_ew_cast(g, tc_dtype_float_acc(x->dtype));
    if (x->ndim > 0) gf = scan_axis(gf, c->args.order[0], true);
    grads[0] = tc_ew_cast(gf, x->dtype);
}

TC_API tc_tensor *tc_cumsum(tc_tensor *x, int axis) {
    TC_API_ENTER();
    tc_lock();
    tc_tensor *out = NULL;
    int ax = 0;
    if (tc_tensor_check(x, "tc_cumsum", "x") != TC_OK) goto done;
    int nd = x->node->ndim;
    bool is_0d = nd == 0 && (axis == 0 || axis == -1); /* one element: its own running sum */
    if (!is_0d && tc_tensor_axis("tc_cumsum", nd, axis, &ax) != TC_OK) goto done;
    if (nd + 1 > TC_MAX_DIMS) { /* the window view has one dim more */
        tc_error_set(TC_ERR_SHAPE, "tc_cumsum: %d dims leave no room for the scan's (at most %d)",
                     nd, TC_MAX_DIMS - 1);
        goto done;
    }
    tc_dtype dt = x->node->dtype, acc = tc_sum_dtype(dt);
    tc_node *n = tc_ew_cast(tc_node_retain(x->node), acc);
    if (!is_0d) n = scan_axis(n, ax, false);
    n = tc_ew_cast(n, dt == TC_FLOAT16 || dt == TC_BFLOAT16 ? dt : acc);
    tc_ag_args args = {.order = {ax}};
    out = tc_ag_record(tc_tensor_wrap(n), TC_AG_CUMSUM, 1, &x, &args);
done:
    tc_unlock();
    return out;
}
