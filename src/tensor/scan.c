/* scan.c - tc_cumsum and tc_cumprod: running sums and products along one
 * axis, built from views and one reduce (REDUCE_SUM, REDUCE_PROD) so the
 * scheduler makes a row's scan one kernel, fused with its readers; cumsum's
 * gradient (the running sums from the other end) is built the same way, so
 * it is one kernel too.
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
 * O(log n) levels. Products are the same windows with ones where the sums
 * have zeros (the padding) and a product for the sum.
 *
 * cumprod's gradient, with z the first zero of a row (n if none), out' the
 * running products of x with x[z] taken as 1 (out' = out before z), and
 * rev(v) the running sums of v from the end:
 *   i < z:  rev(g * out)[i] / x[i]     (x[i] != 0; out is 0 from z on)
 *   i = z:  rev(g * out')[z]           (d out[j] / d x[z] = out'[j], j >= z)
 *   i > z:  0                          (every out[j], j >= i, holds x[z] = 0)
 * as torch's: exact where x has zeros, not the 0/0 of rev(g * out) / x.
 * Scans: the zero count, out', and rev of the two products (one kernel). */
#include "tensor.h"

#include <string.h>

enum { BLOCK = 256 /* block length of the blocked scan */ };

typedef enum {
    SCAN_SUM,  /* running sums: windows padded with zeros, REDUCE_SUM */
    SCAN_PROD, /* running products: windows padded with ones, REDUCE_PROD */
} scan_kind;

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

/* pad_last with the scan's identity: zeros for sums, ones for products
 * (where the padding is: a padded view of true, so no buffer) */
static tc_node *pad_id(tc_node *x, int64_t before, int64_t after, scan_kind kind) {
    if (!x || kind == SCAN_SUM || before + after == 0) return pad_last(x, before, after);
    tc_node *is_in = pad_last(tc_ew_binary(TC_OP_CMPNE, tc_ew_const(x, 0), tc_ew_const(x, 1)),
                              before, after); /* true inside, false in the padding */
    tc_node *p = pad_last(x, before, after);
    return tc_ew_where(is_in, p, p ? tc_ew_const(p, 1) : NULL);
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

static tc_node *scan_last(tc_node *x, bool is_reverse, scan_kind kind);

/* rows of n <= 2*BLOCK: the window view, summed (multiplied) */
static tc_node *scan_windows(tc_node *x, bool is_reverse, scan_kind kind) {
    int nd = x->ndim;
    int64_t n = x->shape[nd - 1], len = 2 * n - 1;
    int64_t one_l[2] = {1, len}, flat = (n + 1) * len, win[2] = {n, len + 1}, out[1] = {n};
    tc_node *r = reshape_tail(pad_id(x, is_reverse ? 0 : n - 1, is_reverse ? n - 1 : 0, kind), 1, 2,
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
    tc_op op = kind == SCAN_SUM ? TC_OP_REDUCE_SUM : TC_OP_REDUCE_PROD;
    tc_node *s = tc_ew_reduce(w, op, 1u << nd); /* (..., n, 1) */
    return reshape_tail(s, 2, 1, out);
}

/* longer rows: the blocks' scans plus (times) the scan of the totals of the
 * blocks before (after, for is_reverse) each */
static tc_node *scan_blocks(tc_node *x, bool is_reverse, scan_kind kind) {
    int64_t n = x->shape[x->ndim - 1], k = (n + BLOCK - 1) / BLOCK, m = k * BLOCK;
    int64_t kb[2] = {k, BLOCK}, k1[2] = {k, 1};
    /* the identity on the near side of the scan changes nothing */
    tc_node *p = pad_id(x, is_reverse ? 0 : m - n, is_reverse ? m - n : 0, kind);
    tc_node *r = scan_last(reshape_tail(p, 1, 2, kb), is_reverse, kind); /* (..., k, B) */
    int64_t at = is_reverse ? 0 : BLOCK - 1; /* where a block's total is */
    tc_node *t = reshape_tail(shrink_last(tc_ew_keep(r), at, at + 1), 2, 1, &k); /* (..., k) */
    tc_node *others = is_reverse ? shrink_last(pad_id(t, 0, 1, kind), 1, k + 1)
                                 : shrink_last(pad_id(t, 1, 0, kind), 0, k);
    tc_node *base = reshape_tail(scan_last(others, is_reverse, kind), 1, 2, k1); /* (..., k, 1) */
    if (!r || !base) {
        tc_node_release(r);
        tc_node_release(base);
        return NULL;
    }
    tc_node *sum = tc_ew_binary(kind == SCAN_SUM ? TC_OP_ADD : TC_OP_MUL, r,
                                tc_ew_broadcast(base, r->ndim, r->shape));
    tc_node *flat = reshape_tail(sum, 2, 1, &m);
    return is_reverse ? shrink_last(flat, 0, n) : shrink_last(flat, m - n, m);
}

static tc_node *scan_last(tc_node *x, bool is_reverse, scan_kind kind) {
    if (!x || x->shape[x->ndim - 1] <= 1) return x; /* its own running sum */
    return x->shape[x->ndim - 1] <= 2 * BLOCK ? scan_windows(x, is_reverse, kind)
                                              : scan_blocks(x, is_reverse, kind);
}

/* x (consumed) scanned along axis (ndim >= 1), in x's dtype */
static tc_node *scan_axis(tc_node *x, int axis, bool is_reverse, scan_kind kind) {
    if (!x) return NULL;
    int nd = x->ndim, order[TC_MAX_DIMS];
    if (axis == nd - 1) return scan_last(x, is_reverse, kind);
    for (int i = 0; i < nd; i++) order[i] = i;
    order[axis] = nd - 1, order[nd - 1] = axis; /* a swap: its own inverse */
    tc_node *t = tc_node_permute(x, order);
    tc_node_release(x);
    tc_node *s = scan_last(t, is_reverse, kind);
    tc_node *r = s ? tc_node_permute(s, order) : NULL;
    tc_node_release(s);
    return r;
}

/* ---- public ---- */

void tc_cumsum_grad(const tc_ag_ctx *c, tc_node *g, tc_node **grads) {
    const tc_node *x = c->inputs[0];
    tc_node *gf = tc_ew_cast(g, tc_dtype_float_acc(x->dtype));
    if (x->ndim > 0) gf = scan_axis(gf, c->args.order[0], true, SCAN_SUM);
    grads[0] = tc_ew_cast(gf, x->dtype);
}

/* ---- cumprod's gradient (see the top of the file) ---- */

static tc_node *eq_c(tc_node *x, double v) { /* x == v, bool */
    return tc_ew_not(tc_ew_binary(TC_OP_CMPNE, tc_ew_keep(x), tc_ew_const(x, v)));
}

void tc_cumprod_grad(const tc_ag_ctx *c, tc_node *g, tc_node **grads) {
    const tc_node *x = c->inputs[0];
    tc_dtype ft = tc_dtype_float_acc(x->dtype);
    tc_node *gf = tc_ew_cast(g, ft);
    if (x->ndim == 0 || !gf) { /* one element: its own running product */
        grads[0] = tc_ew_cast(gf, x->dtype);
        return;
    }
    int ax = c->args.order[0];
    tc_node *xf = tc_ew_cast(tc_node_retain(c->inputs[0]), ft);
    tc_node *is0 = eq_c(xf, 0);
    tc_node *zeros = scan_axis(tc_ew_cast(tc_ew_keep(is0), ft), ax, false, SCAN_SUM);
    tc_node *before = eq_c(zeros, 0);                           /* i < z */
    tc_node *at = tc_ew_binary(TC_OP_AND, is0, eq_c(zeros, 1)); /* i == z */
    tc_node_release(zeros);
    tc_node *x1 = tc_ew_where(tc_ew_keep(at), xf ? tc_ew_const(xf, 1) : NULL, tc_ew_keep(xf));
    tc_node *out1 = scan_axis(x1, ax, false, SCAN_PROD); /* out', = out before z */
    tc_node *gout = tc_ew_binary(TC_OP_MUL, gf, out1);
    tc_node *g_pre = tc_ew_where(tc_ew_keep(before), tc_ew_keep(gout),
                                 gout ? tc_ew_const(gout, 0) : NULL); /* g * out */
    tc_node *s_pre = scan_axis(g_pre, ax, true, SCAN_SUM),
            *s_at = scan_axis(gout, ax, true, SCAN_SUM);
    tc_node *x_safe = tc_ew_where(tc_ew_keep(before), xf, xf ? tc_ew_const(xf, 1) : NULL);
    tc_node *d_pre = tc_ew_binary(TC_OP_MUL, s_pre, tc_ew_unary(TC_OP_RECIP, x_safe));
    tc_node *d_at = tc_ew_where(at, s_at, s_at ? tc_ew_const(s_at, 0) : NULL);
    grads[0] = tc_ew_cast(tc_ew_where(before, d_pre, d_at), x->dtype);
}

/* ---- public ---- */

/* tc_cumsum and tc_cumprod: the scan of x along axis in tc_sum's dtype
 * (float16 and bfloat16 scanned in float32 and cast back) */
static tc_tensor *scan_api(const char *api, tc_tensor *x, int axis, scan_kind kind) {
    tc_tensor *out = NULL;
    int ax = 0;
    if (tc_tensor_check(x, api, "x") != TC_OK) return NULL;
    int nd = x->node->ndim;
    bool is_0d = nd == 0 && (axis == 0 || axis == -1); /* one element: its own scan */
    if (!is_0d && tc_tensor_axis(api, nd, axis, &ax) != TC_OK) return NULL;
    if (nd + 1 > TC_MAX_DIMS) { /* the window view has one dim more */
        tc_error_set(TC_ERR_SHAPE, "%s: %d dims leave no room for the scan's (at most %d)", api, nd,
                     TC_MAX_DIMS - 1);
        return NULL;
    }
    tc_dtype dt = x->node->dtype, acc = tc_sum_dtype(dt);
    tc_node *n = tc_ew_cast(tc_node_retain(x->node), acc);
    if (!is_0d) n = scan_axis(n, ax, false, kind);
    n = tc_ew_cast(n, dt == TC_FLOAT16 || dt == TC_BFLOAT16 ? dt : acc);
    tc_ag_args args = {.order = {ax}};
    out = tc_ag_record(tc_tensor_wrap(n), kind == SCAN_SUM ? TC_AG_CUMSUM : TC_AG_CUMPROD, 1, &x,
                       &args);
    return out;
}

TC_API tc_tensor *tc_cumsum(tc_tensor *x, int axis) {
    TC_API_ENTER();
    tc_lock();
    tc_tensor *out = scan_api("tc_cumsum", x, axis, SCAN_SUM);
    tc_unlock();
    return out;
}

TC_API tc_tensor *tc_cumprod(tc_tensor *x, int axis) {
    TC_API_ENTER();
    tc_lock();
    tc_tensor *out = scan_api("tc_cumprod", x, axis, SCAN_PROD);
    tc_unlock();
    return out;
}
