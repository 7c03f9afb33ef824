/* attention.c - triangular masks (tril, triu), masked_fill and scaled dot
 * product attention, composed from the public ops so that the scheduler
 * sees and fuses them and autograd differentiates them through the ops'
 * own rules. Each call adds a constant number of nodes: O(1) graph work.
 *
 *   tril(x, k): x where col - row <= k, else 0, over the last two dims
 *   triu(x, k): x where col - row >= k, else 0 (row, col from aranges)
 *   masked_fill(x, mask, v): where(mask, v, x), mask bool broadcast to x
 *   sdpa(q, k, v, mask, causal): softmax(q @ k^T * 1/sqrt(E) (+ mask)) @ v
 *     q (..., L, E), k (..., S, E), v (..., S, Ev) -> (..., L, Ev); a bool
 *     mask (or is_causal: tril of ones (L, S)) sets the scores where it is
 *     false to -inf, a float mask is added to them (torch's rules); the _ex
 *     form drops weights with tc_dropout (probability dropout_p, the rest
 *     scaled by 1/(1-p)) before the product with v. */
#include "tensor.h"

#include <math.h>

/* bool of shape (..., rows, cols) (ndim dims, the last two rows and cols):
 * col - row <= k (upper false) or >= k (upper true). The aranges are
 * expanded to the whole shape before they are subtracted, so the mask is
 * computed in its reader's kernel (a (rows, cols) mask broadcast over the
 * batch dims would be realized first: it reads two buffers). */
static tc_tensor *band(tc_scope *s, int ndim, const int64_t *shape, int64_t k, bool upper,
                       const char *device) {
    int64_t rows = shape[ndim - 2], cols = shape[ndim - 1];
    if (k > cols) k = cols; /* keeps the difference in int32 whatever k is */
    if (k < -rows) k = -rows;
    int64_t col_shape[2] = {rows, 1};
    tc_tensor *r = TC_S(s, tc_arange(0, rows, 1, TC_INT32, device));
    tc_tensor *c = TC_S(s, tc_arange(0, cols, 1, TC_INT32, device));
    tc_tensor *rc = TC_S(s, tc_reshape(r, 2, col_shape));
    tc_tensor *re = TC_S(s, tc_expand(rc, ndim, shape)), *ce = TC_S(s, tc_expand(c, ndim, shape));
    tc_tensor *diff = TC_S(s, tc_sub(ce, re)); /* col - row */
    tc_tensor *kt = TC_S(s, tc_full(0, NULL, (double)k, TC_INT32, device));
    return upper ? TC_S(s, tc_ge(diff, kt)) : TC_S(s, tc_le(diff, kt));
}

static tc_tensor *triangle(const char *api, tc_tensor *x, int64_t diagonal, bool upper) {
    tc_lock();
    tc_tensor *out = NULL;
    if (tc_tensor_check(x, api, "x") != TC_OK) goto done;
    const tc_node *n = x->node;
    if (n->ndim < 2) {
        char b[256];
        tc_error_set(TC_ERR_SHAPE, "%s: x %s needs at least 2 dims", api,
                     tc_fmt_shape(b, sizeof b, n->ndim, n->shape));
        goto done;
    }
    tc_scope s = {0};
    const char *dev = tc_device(x);
    tc_tensor *keep = band(&s, n->ndim, n->shape, diagonal, upper, dev);
    tc_tensor *zero = TC_S(&s, tc_full(0, NULL, 0, n->dtype, dev));
    out = tc_scope_end(&s, TC_S(&s, tc_where(keep, x, zero)));
done:
    tc_unlock();
    return out;
}

TC_API tc_tensor *tc_tril(tc_tensor *x, int64_t diagonal) {
    TC_API_ENTER();
    return triangle("tc_tril", x, diagonal, false);
}

TC_API tc_tensor *tc_triu(tc_tensor *x, int64_t diagonal) {
    TC_API_ENTER();
    return triangle("tc_triu", x, diagonal, true);
}

/* mask is bool and broadcasts to x's shape (numpy rules, x's shape kept) */
TC_MUST_USE static tc_status check_mask(const char *api, const char *what, const tc_node *x, const tc_node *m) {
    char b1[256], b2[256];
    bool fits = m->ndim <= x->ndim;
    for (int i = 1; i <= m->ndim && fits; i++) {
        int64_t sm = m->shape[m->ndim - i], sx = x->shape[x->ndim - i];
        fits = sm == sx || sm == 1;
    }
    if (!fits)
        return tc_error_set(TC_ERR_SHAPE, "%s: %s %s does not broadcast to %s", api, what,
                            tc_fmt_shape(b1, sizeof b1, m->ndim, m->shape),
                            tc_fmt_shape(b2, sizeof b2, x->ndim, x->shape));
    return TC_OK;
}

TC_API tc_tensor *tc_masked_fill(tc_tensor *x, tc_tensor *mask, double value) {
    TC_API_ENTER();
    tc_lock();
    tc_tensor *out = NULL, *ts[2] = {x, mask};
    static const char *const names[2] = {"x", "mask"};
    const char *api = "tc_masked_fill";
    if (tc_tensor_check(x, api, "x") != TC_OK || tc_tensor_check(mask, api, "mask") != TC_OK ||
        tc_tensor_same_device(api, 2, ts, names) != TC_OK)
        goto done;
    if (mask->node->dtype != TC_BOOL) {
        tc_error_set(TC_ERR_DTYPE, "%s: mask must be bool, got %s", api,
                     tc_dtypes[mask->node->dtype].name);
        goto done;
    }
    if (check_mask(api, "mask", x->node, mask->node) != TC_OK) goto done;
    tc_scope s = {0};
    tc_tensor *v = TC_S(&s, tc_full(0, NULL, value, x->node->dtype, tc_device(x)));
    out = tc_scope_end(&s, TC_S(&s, tc_where(mask, v, x)));
done:
    tc_unlock();
    return out;
}

/* ---- scaled dot product attention ---- */

/* the batch dims (all but the last two) of q, k and v broadcast together
 * into batch[0..*nb-1] (numpy rules); false when they do not */
static bool batch_shape(const tc_node *const *ns, int n, int64_t *batch, int *nb) {
    *nb = 0;
    for (int i = 0; i < n; i++) *nb = ns[i]->ndim - 2 > *nb ? ns[i]->ndim - 2 : *nb;
    for (int d = 1; d <= *nb; d++) {
        int64_t size = 1;
        for (int i = 0; i < n; i++) {
            int nd = ns[i]->ndim - 2;
            int64_t si = d <= nd ? ns[i]->shape[nd - d] : 1;
            if (si != 1 && size != 1 && si != size) return false;
            if (si != 1) size = si;
        }
        batch[*nb - d] = size;
    }
    return true;
}

/* the shapes of q, k, v and the mask; dtypes and devices checked */
TC_MUST_USE static tc_status check_shapes(const char *api, const tc_node *qn, const tc_node *kn,
                              const tc_node *vn, const tc_node *mn) {
    char b1[256], b2[256], b3[256];
    tc_fmt_shape(b1, sizeof b1, qn->ndim, qn->shape);
    tc_fmt_shape(b2, sizeof b2, kn->ndim, kn->shape);
    tc_fmt_shape(b3, sizeof b3, vn->ndim, vn->shape);
    const tc_node *ns[3] = {qn, kn, vn};
    int64_t scores[TC_MAX_DIMS + 2];
    int nb = 0;
    if (qn->ndim < 2 || kn->ndim < 2 || vn->ndim < 2 ||
        qn->shape[qn->ndim - 1] != kn->shape[kn->ndim - 1] ||
        kn->shape[kn->ndim - 2] != vn->shape[vn->ndim - 2] || !batch_shape(ns, 3, scores, &nb))
        return tc_error_set(TC_ERR_SHAPE,
                            "%s: q %s, k %s, v %s must be (..., L, E), (..., S, E), (..., S, Ev) "
                            "with batch dims that broadcast",
                            api, b1, b2, b3);
    if (!mn) return TC_OK;
    scores[nb] = qn->shape[qn->ndim - 2], scores[nb + 1] = kn->shape[kn->ndim - 2];
    bool fits = mn->ndim <= nb + 2;
    for (int i = 1; i <= mn->ndim && fits; i++) {
        int64_t sm = mn->shape[mn->ndim - i], ss = scores[nb + 2 - i];
        fits = sm == ss || sm == 1;
    }
    if (!fits)
        return tc_error_set(TC_ERR_SHAPE, "%s: attn_mask %s does not broadcast to the scores %s",
                            api, tc_fmt_shape(b1, sizeof b1, mn->ndim, mn->shape),
                            tc_fmt_shape(b2, sizeof b2, nb + 2, scores));
    return TC_OK;
}

TC_MUST_USE static tc_status check_sdpa(const char *api, tc_tensor *q, tc_tensor *k, tc_tensor *v,
                            tc_tensor *mask, bool is_causal) {
    static const char *const names[4] = {"q", "k", "v", "attn_mask"};
    tc_tensor *ts[4] = {q, k, v, mask};
    for (int i = 0; i < 3; i++)
        if (tc_tensor_check(ts[i], api, names[i]) != TC_OK) return TC_ERR_INVALID;
    tc_status st = tc_tensor_same_device(api, 4, ts, names);
    if (st != TC_OK) return st;
    for (int i = 0; i < 3; i++)
        if (!tc_dtypes[ts[i]->node->dtype].is_float)
            return tc_error_set(TC_ERR_DTYPE, "%s: %s is %s, not a float dtype", api, names[i],
                                tc_dtypes[ts[i]->node->dtype].name);
    if (mask && is_causal)
        return tc_error_set(TC_ERR_INVALID, "%s: give attn_mask or is_causal, not both", api);
    if (mask && mask->node->dtype != TC_BOOL && !tc_dtypes[mask->node->dtype].is_float)
        return tc_error_set(TC_ERR_DTYPE, "%s: attn_mask must be bool or float, got %s", api,
                            tc_dtypes[mask->node->dtype].name);
    return check_shapes(api, q->node, k->node, v->node, mask ? mask->node : NULL);
}

/* the formula above, arguments checked; dropout (p > 0) on the weights */
static tc_tensor *sdpa(tc_tensor *q, tc_tensor *k, tc_tensor *v, tc_tensor *attn_mask,
                       bool is_causal, double dropout_p) {
    const tc_node *qn = q->node;
    int64_t e = qn->shape[qn->ndim - 1];
    tc_scope s = {0};
    tc_tensor *kt = TC_S(&s, tc_transpose(k, -1, -2));
    tc_tensor *scale = tc_scope_scalar(&s, q, e > 0 ? 1 / sqrt((double)e) : 1);
    tc_tensor *qk = TC_S(&s, tc_matmul(q, kt));
    tc_tensor *scores = TC_S(&s, tc_mul(qk, scale)); /* (..., L, S) */
    tc_tensor *keep = attn_mask && attn_mask->node->dtype == TC_BOOL ? attn_mask : NULL;
    if (is_causal && !s.failed) /* tril of ones (L, S), over the scores' shape */
        keep = band(&s, scores->node->ndim, scores->node->shape, 0, false, tc_device(q));
    if (keep) {
        tc_tensor *ninf = s.failed ? NULL : tc_scope_scalar(&s, scores, -INFINITY);
        scores = TC_S(&s, tc_where(keep, scores, ninf));
    } else if (attn_mask) {
        scores = TC_S(&s, tc_add(scores, attn_mask));
    }
    tc_tensor *p = TC_S(&s, tc_softmax(scores, -1));
    if (dropout_p > 0) p = TC_S(&s, tc_dropout(p, dropout_p, true));
    return tc_scope_end(&s, TC_S(&s, tc_matmul(p, v)));
}

TC_API tc_tensor *tc_scaled_dot_product_attention(tc_tensor *q, tc_tensor *k, tc_tensor *v,
                                                  tc_tensor *attn_mask, bool is_causal) {
    TC_API_ENTER();
    tc_lock();
    tc_tensor *out = NULL;
    if (check_sdpa("tc_scaled_dot_product_attention", q, k, v, attn_mask, is_causal) == TC_OK)
        out = sdpa(q, k, v, attn_mask, is_causal, 0);
    tc_unlock();
    return out;
}

TC_API tc_tensor *tc_scaled_dot_product_attention_ex(tc_tensor *q, tc_tensor *k, tc_tensor *v,
                                                     tc_tensor *attn_mask, bool is_causal,
                                                     double dropout_p) {
    TC_API_ENTER();
    const char *api = "tc_scaled_dot_product_attention_ex";
    tc_lock();
    tc_tensor *out = NULL;
    if (!(dropout_p >= 0 && dropout_p <= 1))
        tc_error_set(TC_ERR_INVALID, "%s: dropout_p %g must be in [0, 1]", api, dropout_p);
    else if (check_sdpa(api, q, k, v, attn_mask, is_causal) == TC_OK)
        out = sdpa(q, k, v, attn_mask, is_causal, dropout_p);
    tc_unlock();
    return out;
}
