/* sample.c - tc_multinomial: indices drawn from rows of non-negative
 * weights, composed from the public ops over uniforms from tc_rand (the
 * host's counter-based stream, so the draws do not depend on the device).
 *
 * With replacement (tinygrad's method): cdf = cumsum(w)/sum(w) per row; the
 * index a uniform u picks is the number of cdf values <= u (categories of
 * weight 0 are never picked: their cdf equals the one before). One compare
 * and one sum over (rows, samples, categories).
 * Without replacement: the Gumbel-top-k trick. key = log(w) - log(e) with e
 * = -log(u) ~ Exp(1) (u moved into (0,1)); the indices of the k largest keys,
 * largest first, are k draws without replacement, each in proportion to the
 * weights left. Found one argmax at a time, the winner's key then set to
 * -inf: k argmaxes, O(k) nodes.
 * When w is realized its values are checked (finite, >= 0, a positive row
 * sum, enough positive weights to draw k without replacement); lazy weights
 * are used as they come. */
#include "tensor.h"

#include <math.h>
#include <string.h>

static const char *const API = "tc_multinomial";

/* the realized weights w (rows, n) are a distribution to draw k from */
TC_MUST_USE static tc_status check_values(tc_tensor *w, int64_t rows, int64_t n, int64_t k, bool replace) {
    size_t nbytes = (size_t)(rows * n) * sizeof(float);
    float *v = tc_malloc(nbytes ? nbytes : 1);
    if (!v) return TC_ERR_MEMORY;
    tc_status s = tc_engine_to_host(w->node, v, nbytes, API);
    for (int64_t r = 0; r < rows && s == TC_OK; r++) {
        double sum = 0;
        int64_t positive = 0;
        for (int64_t j = 0; j < n && s == TC_OK; j++) {
            float x = v[r * n + j];
            if (!(x >= 0) || isinf(x))
                s = tc_error_set(TC_ERR_INVALID, "%s: weight %g at row %lld, column %lld is not a "
                                 "finite value >= 0", API, (double)x, (long long)r, (long long)j);
            sum += x, positive += x > 0;
        }
        if (s == TC_OK && !(sum > 0))
            s = tc_error_set(TC_ERR_INVALID, "%s: row %lld has no positive weight", API,
                             (long long)r);
        if (s == TC_OK && !replace && positive < k)
            s = tc_error_set(TC_ERR_INVALID, "%s: row %lld has %lld positive weights, too few to "
                             "draw %lld without replacement", API, (long long)r,
                             (long long)positive, (long long)k);
    }
    tc_free(v);
    return s;
}

TC_MUST_USE static tc_status check_args(tc_tensor *probs, int64_t k, bool replace) {
    if (tc_tensor_check(probs, API, "probs") != TC_OK) return TC_ERR_INVALID;
    const tc_node *p = probs->node;
    char buf[256];
    if (p->ndim < 1 || p->ndim > 2)
        return tc_error_set(TC_ERR_SHAPE, "%s: probs must have 1 or 2 dims, got %s", API,
                            tc_fmt_shape(buf, sizeof buf, p->ndim, p->shape));
    int64_t n = p->shape[p->ndim - 1];
    if (n < 1) /* (rows, 0): nothing to draw from; (0, n): no rows, an empty result */
        return tc_error_set(TC_ERR_SHAPE, "%s: probs %s has no categories", API,
                            tc_fmt_shape(buf, sizeof buf, p->ndim, p->shape));
    if (p->dtype == TC_BOOL)
        return tc_error_set(TC_ERR_DTYPE, "%s: probs must be numbers, got bool", API);
    if (k < 1 || k > INT32_MAX)
        return tc_error_set(TC_ERR_INVALID, "%s: num_samples %lld must be >= 1", API,
                            (long long)k);
    if (!replace && k > n)
        return tc_error_set(TC_ERR_INVALID, "%s: cannot draw %lld samples without replacement "
                            "from %lld categories", API, (long long)k, (long long)n);
    return TC_OK;
}

/* with replacement: (rows, k) int32 indices from w (rows, n) float32 */
static tc_tensor *with_replacement(tc_scope *s, tc_tensor *w, int64_t k) {
    int64_t rows = w->node->shape[0], n = w->node->shape[1];
    static const int last[1] = {-1};
    int64_t be[4] = {0, rows, n - 1, n}, rk1[3] = {rows, k, 1}, r1n[3] = {rows, 1, n};
    tc_tensor *cw = TC_S(s, tc_cumsum(w, 1));
    tc_tensor *tot = TC_S(s, tc_shrink(cw, be)); /* (rows, 1): the row sums */
    tc_tensor *cdf = TC_S(s, tc_div(cw, tot));
    tc_tensor *cdf3 = TC_S(s, tc_reshape(cdf, 3, r1n));
    tc_tensor *u = TC_S(s, tc_rand(3, rk1, TC_FLOAT32, tc_device(w)));
    tc_tensor *hit = TC_S(s, tc_ge(u, cdf3)); /* (rows, k, n) */
    return TC_S(s, tc_sum(hit, 1, last, false));
}

/* one step of the top-k: the argmax of *keys (rows, 1), then its key -inf */
static tc_tensor *take_max(tc_tensor **keys, tc_tensor *cols) {
    tc_scope s = {0};
    tc_tensor *idx = TC_S(&s, tc_argmax(*keys, 1, true));
    tc_tensor *hit = TC_S(&s, tc_eq(cols, idx));
    tc_tensor *ninf = s.failed ? NULL : tc_scope_scalar(&s, *keys, -INFINITY);
    tc_tensor *next = TC_S(&s, tc_where(hit, ninf, *keys));
    if (!s.failed) {
        tc_release(*keys);
        *keys = tc_retain(next);
    }
    return tc_scope_end(&s, idx);
}

/* without replacement: (rows, k) int32 indices, the Gumbel-top-k of w */
static tc_tensor *without_replacement(tc_scope *s, tc_tensor *w, int64_t k) {
    int64_t n = w->node->shape[1];
    tc_tensor *u = TC_S(s, tc_rand(2, w->node->shape, TC_FLOAT32, tc_device(w)));
    tc_tensor *off = s->failed ? NULL : tc_scope_scalar(s, w, 0x1p-25); /* u in (0, 1) */
    tc_tensor *uo = TC_S(s, tc_add(u, off));
    tc_tensor *log_u = TC_S(s, tc_log(uo));
    tc_tensor *e = TC_S(s, tc_neg(log_u)); /* Exp(1) */
    tc_tensor *ratio = TC_S(s, tc_div(w, e));
    tc_tensor *keys0 = TC_S(s, tc_log(ratio));
    tc_tensor *ar = TC_S(s, tc_arange(0, n, 1, TC_INT32, tc_device(w)));
    int64_t one_n[2] = {1, n};
    tc_tensor *cols = TC_S(s, tc_reshape(ar, 2, one_n));
    if (s->failed) return NULL;
    tc_tensor *keys = tc_retain(keys0), *out = NULL;
    for (int64_t j = 0; j < k; j++) {
        tc_tensor *idx = take_max(&keys, cols);
        int64_t pads[4] = {0, 0, j, k - 1 - j}; /* idx into column j of (rows, k) */
        tc_tensor *col = idx ? tc_pad(idx, pads) : NULL;
        tc_tensor *sum = col && out ? tc_add(out, col) : col ? tc_retain(col) : NULL;
        tc_release(idx), tc_release(col), tc_release(out);
        if (!(out = sum)) break;
    }
    tc_release(keys);
    return TC_S(s, out);
}

TC_API tc_tensor *tc_multinomial(tc_tensor *probs, int64_t num_samples, bool replacement) {
    TC_API_ENTER();
    tc_lock();
    tc_tensor *out = NULL;
    if (check_args(probs, num_samples, replacement) != TC_OK) goto done;
    tc_scope s = {0};
    const tc_node *p = probs->node;
    int64_t rows = p->ndim == 2 ? p->shape[0] : 1, n = p->shape[p->ndim - 1], rn[2] = {rows, n};
    if (rows == 0) { /* torch's (0, num_samples) */
        int64_t shape[2] = {0, num_samples};
        out = tc_full(2, shape, 0, TC_INT32, tc_device(probs));
        goto done;
    }
    tc_tensor *f = p->dtype == TC_FLOAT32 ? probs : TC_S(&s, tc_cast(probs, TC_FLOAT32));
    tc_tensor *f2 = TC_S(&s, tc_reshape(f, 2, rn));
    tc_tensor *w = TC_S(&s, tc_detach(f2)); /* indices: not differentiable */
    if (!s.failed && tc_is_realized(probs) &&
        check_values(w, rows, n, num_samples, replacement) != TC_OK)
        s.failed = true;
    tc_tensor *r = s.failed      ? NULL
                   : replacement ? with_replacement(&s, w, num_samples)
                                 : without_replacement(&s, w, num_samples);
    int64_t k = num_samples;
    if (r && p->ndim == 1) r = TC_S(&s, tc_reshape(r, 1, &k));
    out = tc_scope_end(&s, r);
done:
    tc_unlock();
    return out;
}
