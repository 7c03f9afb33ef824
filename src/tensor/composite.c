/* composite.c - matmul (and dot, linear), softmax, log_softmax, layernorm,
 * argmax and dropout, composed from the public ops (so the scheduler sees
 * and fuses them, and autograd differentiates them through the ops' own
 * rules), plus the scope that collects a composite's intermediate handles.
 *
 *   matmul: a (...,m,k) -> (...,m,1,k); b (...,k,n) -> (...,1,n,k); multiply
 *           (batch dims broadcast) and sum the last axis -> (...,m,n)
 *   softmax: e = exp(x - max(x).detach()); e / sum(e)
 *   log_softmax: s = x - max(x).detach(); s - log(sum(exp(s)))
 *   logsumexp: m = max(x).detach() (0 where it is +-inf); log(sum(exp(x-m))) + m
 *   (softmax, log_softmax, argmax on a 0-d tensor take axis 0 or -1: its element)
 *   layernorm: y = x - mean(x); y * rsqrt(mean(y*y) + eps)
 *   argmax: n-1 - max((x == max x) * (n-1, ..., 0)), int32 (tinygrad's trick)
 *   dropout: x * (rand >= p) * 1/(1-p) */
#include "tensor.h"

#include <math.h>
#include <string.h>

/* ---- scope ---- */

tc_tensor *tc_scope_keep(tc_scope *s, tc_tensor *t) {
    if (!t) {
        s->failed = true;
        return NULL;
    }
    if (s->n == TC_SCOPE_MAX) {
        tc_release(t);
        s->failed = true;
        TC_INTERNAL("composite scope is full (%d handles)", TC_SCOPE_MAX);
        return NULL;
    }
    s->ts[s->n++] = t;
    return t;
}

tc_tensor *tc_scope_end(tc_scope *s, tc_tensor *result) {
    tc_tensor *r = !s->failed && result ? tc_retain(result) : NULL;
    for (int i = 0; i < s->n; i++) tc_release(s->ts[i]);
    s->n = 0;
    return r;
}

tc_tensor *tc_scope_scalar(tc_scope *s, const tc_tensor *like, double value) {
    tc_dtype dt = tc_dtypes[like->node->dtype].is_float ? like->node->dtype : TC_FLOAT32;
    return TC_S(s, tc_full(0, NULL, value, dt, tc_device(like)));
}

TC_MUST_USE tc_status tc_tensor_same_device(const char *api, int n, tc_tensor *const *ts,
                                const char *const *names) {
    int first = -1;
    for (int i = 0; i < n; i++) {
        if (!ts[i]) continue;
        if (first < 0) first = i;
        else if (ts[i]->node->device != ts[first]->node->device) {
            tc_dev *a = tc_device_get(ts[first]->node->device), *b = tc_device_get(ts[i]->node->device);
            return tc_error_set(TC_ERR_DEVICE, "%s: %s is on %s but %s is on %s", api, names[first],
                                a ? a->name : "?", names[i], b ? b->name : "?");
        }
    }
    return TC_OK;
}

/* ---- matmul ---- */

/* numpy's rules for a @ b: ranks >= 1, contracted sizes equal, batch dims
 * broadcastable */
TC_MUST_USE static tc_status check_matmul(const char *api, const tc_tensor *a, const tc_tensor *b) {
    static const char *const names[2] = {"a", "b"};
    tc_tensor *ts[2] = {(tc_tensor *)a, (tc_tensor *)b};
    tc_status s = tc_tensor_check(a, api, "a");
    if (s == TC_OK) s = tc_tensor_check(b, api, "b");
    if (s == TC_OK) s = tc_tensor_same_device(api, 2, ts, names);
    if (s != TC_OK) return s;
    const tc_node *x = a->node, *y = b->node;
    char b1[256], b2[256];
    tc_fmt_shape(b1, sizeof b1, x->ndim, x->shape);
    tc_fmt_shape(b2, sizeof b2, y->ndim, y->shape);
    if (x->ndim == 0 || y->ndim == 0)
        return tc_error_set(TC_ERR_SHAPE, "%s: operands need at least 1 dim, got %s and %s", api,
                            b1, b2);
    int64_t k = x->shape[x->ndim - 1], kb = y->shape[y->ndim > 1 ? y->ndim - 2 : 0];
    if (k != kb)
        return tc_error_set(TC_ERR_SHAPE, "%s: cannot multiply %s by %s (%lld != %lld)", api, b1,
                            b2, (long long)k, (long long)kb);
    int bx = x->ndim - 2, by = y->ndim - 2; /* batch ranks (may be negative) */
    for (int i = 1; i <= bx && i <= by; i++) {
        int64_t sx = x->shape[bx - i], sy = y->shape[by - i];
        if (sx != sy && sx != 1 && sy != 1)
            return tc_error_set(TC_ERR_SHAPE, "%s: batch dims of %s and %s do not broadcast", api,
                                b1, b2);
    }
    int nd = (bx > by ? bx : by) + 3; /* the product's rank */
    if (nd > TC_MAX_DIMS)
        return tc_error_set(TC_ERR_SHAPE, "%s: %s @ %s needs more than %d dims", api, b1, b2,
                            TC_MAX_DIMS);
    return TC_OK;
}

/* t (in s) reshaped to its shape with a 1 inserted before dim `at` */
static tc_tensor *insert_one(tc_scope *s, tc_tensor *t, int at) {
    if (s->failed) return NULL;
    int64_t shp[TC_MAX_DIMS];
    const tc_node *n = t->node;
    for (int i = 0, j = 0; i <= n->ndim; i++) shp[i] = i == at ? 1 : n->shape[j++];
    return TC_S(s, tc_reshape(t, n->ndim + 1, shp));
}

/* t (in s) with dim `at` (of size 1) removed */
static tc_tensor *remove_dim(tc_scope *s, tc_tensor *t, int at) {
    if (s->failed) return NULL;
    int64_t shp[TC_MAX_DIMS];
    const tc_node *n = t->node;
    for (int i = 0, j = 0; i < n->ndim; i++)
        if (i != at) shp[j++] = n->shape[i];
    return TC_S(s, tc_reshape(t, n->ndim - 1, shp));
}

/* a @ b, arguments checked */
static tc_tensor *matmul(tc_scope *s, tc_tensor *a, tc_tensor *b) {
    bool a_vec = a->node->ndim == 1, b_vec = b->node->ndim == 1;
    tc_tensor *x = a_vec ? insert_one(s, a, 0) : a; /* (..., m, k) */
    tc_tensor *w = b_vec ? insert_one(s, b, 1) : b; /* (..., k, n) */
    if (s->failed) return NULL;
    tc_tensor *xr = insert_one(s, x, x->node->ndim - 1);             /* (..., m, 1, k) */
    tc_tensor *wt = TC_S(s, tc_transpose(w, -1, -2));                /* (..., n, k) */
    tc_tensor *wr = s->failed ? NULL : insert_one(s, wt, wt->node->ndim - 2); /* (..., 1, n, k) */
    tc_tensor *p = TC_S(s, tc_mul(xr, wr));                          /* (..., m, n, k) */
    static const int last[1] = {-1};
    tc_tensor *r = TC_S(s, tc_sum(p, 1, last, false)); /* (..., m, n) */
    if (r && b_vec) r = remove_dim(s, r, r->node->ndim - 1);
    if (r && a_vec) r = remove_dim(s, r, r->node->ndim - 2);
    return r;
}

static tc_tensor *matmul_api(const char *api, tc_tensor *a, tc_tensor *b) {
    tc_lock();
    tc_tensor *out = NULL;
    if (check_matmul(api, a, b) == TC_OK) {
        tc_scope s = {0};
        out = tc_scope_end(&s, matmul(&s, a, b));
    }
    tc_unlock();
    return out;
}

TC_API tc_tensor *tc_matmul(tc_tensor *a, tc_tensor *b) {
    TC_API_ENTER();
    return matmul_api("tc_matmul", a, b);
}

TC_API tc_tensor *tc_dot(tc_tensor *a, tc_tensor *b) {
    TC_API_ENTER();
    return matmul_api("tc_dot", a, b);
}

TC_MUST_USE static tc_status check_linear(tc_tensor *x, tc_tensor *w, tc_tensor *b) {
    static const char *const names[3] = {"x", "w", "b"};
    tc_tensor *ts[3] = {x, w, b};
    tc_status s = tc_tensor_check(x, "tc_linear", "x");
    if (s == TC_OK) s = tc_tensor_check(w, "tc_linear", "w");
    if (s == TC_OK) s = tc_tensor_same_device("tc_linear", 3, ts, names);
    if (s != TC_OK) return s;
    const tc_node *xn = x->node, *wn = w->node;
    char b1[256], b2[256];
    if (wn->ndim != 2 || xn->ndim < 1 || xn->shape[xn->ndim - 1] != wn->shape[1])
        return tc_error_set(TC_ERR_SHAPE, "tc_linear: x %s does not fit w %s (w is (out, in), "
                            "x is (..., in))", tc_fmt_shape(b1, sizeof b1, xn->ndim, xn->shape),
                            tc_fmt_shape(b2, sizeof b2, wn->ndim, wn->shape));
    if (b && (b->node->ndim != 1 || b->node->shape[0] != wn->shape[0]))
        return tc_error_set(TC_ERR_SHAPE, "tc_linear: b %s must be (%lld) for w %s",
                            tc_fmt_shape(b1, sizeof b1, b->node->ndim, b->node->shape),
                            (long long)wn->shape[0],
                            tc_fmt_shape(b2, sizeof b2, wn->ndim, wn->shape));
    return TC_OK;
}

TC_API tc_tensor *tc_linear(tc_tensor *x, tc_tensor *w, tc_tensor *b) {
    TC_API_ENTER();
    tc_lock();
    tc_tensor *out = NULL;
    if (check_linear(x, w, b) == TC_OK) {
        tc_scope s = {0};
        tc_tensor *wt = TC_S(&s, tc_transpose(w, 0, 1));
        tc_tensor *y = s.failed ? NULL : matmul(&s, x, wt);
        if (b) y = TC_S(&s, tc_add(y, b));
        out = tc_scope_end(&s, y);
    }
    tc_unlock();
    return out;
}

/* ---- softmax, log_softmax, layernorm ---- */

/* a as float (a itself, or a float32 cast kept in s) */
static tc_tensor *as_float(tc_scope *s, tc_tensor *a) {
    return tc_dtypes[a->node->dtype].is_float ? a : TC_S(s, tc_cast(a, TC_FLOAT32));
}

/* x - max(x, axis).detach(), the shifted input both softmaxes start from */
static tc_tensor *shifted(tc_scope *s, tc_tensor *x, int axis) {
    tc_tensor *m = TC_S(s, tc_max(x, 1, &axis, true));
    tc_tensor *md = TC_S(s, tc_detach(m));
    return TC_S(s, tc_sub(x, md));
}

/* a 0-d a with axis 0 or -1 (its one element, as torch allows): a seen as
 * (1) in s, axis 0 in *ax; otherwise a itself with its axis checked */
static tc_tensor *axis_view(const char *api, tc_scope *s, tc_tensor *a, int axis, int *ax) {
    if (a->node->ndim == 0 && (axis == 0 || axis == -1)) {
        static const int64_t one[1] = {1};
        *ax = 0;
        return TC_S(s, tc_reshape(a, 1, one));
    }
    return tc_tensor_axis(api, a->node->ndim, axis, ax) == TC_OK ? a : NULL;
}

static tc_tensor *softmax(const char *api, tc_tensor *a, int axis, bool is_log) {
    tc_lock();
    tc_tensor *out = NULL;
    int ax = 0;
    tc_scope s = {0};
    tc_tensor *x = tc_tensor_check(a, api, "a") == TC_OK ? axis_view(api, &s, a, axis, &ax) : NULL;
    if (x) {
        tc_tensor *sh = shifted(&s, as_float(&s, x), ax);
        tc_tensor *e = TC_S(&s, tc_exp(sh));
        tc_tensor *sum = TC_S(&s, tc_sum(e, 1, &ax, true));
        tc_tensor *log_sum = is_log ? TC_S(&s, tc_log(sum)) : NULL;
        tc_tensor *r = is_log ? TC_S(&s, tc_sub(sh, log_sum)) : TC_S(&s, tc_div(e, sum));
        if (x != a) r = TC_S(&s, tc_reshape(r, 0, NULL));
        out = tc_scope_end(&s, r);
    }
    tc_unlock();
    return out;
}

TC_API tc_tensor *tc_softmax(tc_tensor *a, int axis) {
    TC_API_ENTER();
    return softmax("tc_softmax", a, axis, false);
}

TC_API tc_tensor *tc_log_softmax(tc_tensor *a, int axis) {
    TC_API_ENTER();
    return softmax("tc_log_softmax", a, axis, true);
}

/* max(x) over the axes, detached, with +-inf replaced by 0 (so x - m is
 * never inf - inf: torch's rule) */
static tc_tensor *finite_max(tc_scope *s, tc_tensor *x, int naxes, const int *axes, bool keepdim) {
    tc_tensor *m = TC_S(s, tc_max(x, naxes, axes, keepdim));
    tc_tensor *md = TC_S(s, tc_detach(m));
    tc_tensor *mag = TC_S(s, tc_abs(md));
    tc_tensor *inf = s->failed ? NULL : tc_scope_scalar(s, x, INFINITY);
    tc_tensor *zero = s->failed ? NULL : tc_scope_scalar(s, x, 0);
    tc_tensor *is_inf = TC_S(s, tc_eq(mag, inf));
    return TC_S(s, tc_where(is_inf, zero, md));
}

TC_API tc_tensor *tc_logsumexp(tc_tensor *a, int naxes, const int *axes, bool keepdim) {
    TC_API_ENTER();
    tc_lock();
    tc_tensor *out = NULL;
    uint32_t mask = 0;
    if (tc_tensor_check(a, "tc_logsumexp", "a") == TC_OK &&
        tc_tensor_axes_mask("tc_logsumexp", a->node->ndim, naxes, axes, &mask) == TC_OK) {
        tc_scope s = {0};
        tc_tensor *x = as_float(&s, a);
        tc_tensor *mk = s.failed ? NULL : finite_max(&s, x, naxes, axes, true);
        tc_tensor *m = keepdim || s.failed ? mk : finite_max(&s, x, naxes, axes, false);
        tc_tensor *sh = TC_S(&s, tc_sub(x, mk));
        tc_tensor *e = TC_S(&s, tc_exp(sh));
        tc_tensor *sum = TC_S(&s, tc_sum(e, naxes, axes, keepdim));
        tc_tensor *lse = TC_S(&s, tc_log(sum));
        out = tc_scope_end(&s, TC_S(&s, tc_add(lse, m)));
    }
    tc_unlock();
    return out;
}

TC_API tc_tensor *tc_layernorm(tc_tensor *a, int axis, double eps) {
    TC_API_ENTER();
    tc_lock();
    tc_tensor *out = NULL;
    int ax = 0;
    if (tc_tensor_check(a, "tc_layernorm", "a") != TC_OK ||
        tc_tensor_axis("tc_layernorm", a->node->ndim, axis, &ax) != TC_OK)
        goto done;
    if (!(eps >= 0)) {
        tc_error_set(TC_ERR_INVALID, "tc_layernorm: eps %g must be >= 0", eps);
        goto done;
    }
    int axes[TC_MAX_DIMS], n = 0;
    for (int i = ax; i < a->node->ndim; i++) axes[n++] = i;
    tc_scope s = {0};
    tc_tensor *x = as_float(&s, a);
    tc_tensor *mean = TC_S(&s, tc_mean(x, n, axes, true));
    tc_tensor *y = TC_S(&s, tc_sub(x, mean));
    tc_tensor *y2 = TC_S(&s, tc_mul(y, y));
    tc_tensor *var = TC_S(&s, tc_mean(y2, n, axes, true));
    tc_tensor *e = s.failed ? NULL : tc_scope_scalar(&s, x, eps);
    tc_tensor *ve = TC_S(&s, tc_add(var, e));
    tc_tensor *sd = TC_S(&s, tc_sqrt(ve));
    tc_tensor *inv = TC_S(&s, tc_recip(sd));
    out = tc_scope_end(&s, TC_S(&s, tc_mul(y, inv)));
done:
    tc_unlock();
    return out;
}

/* ---- argmax, dropout ---- */

TC_API tc_tensor *tc_argmax(tc_tensor *a, int axis, bool keepdim) {
    TC_API_ENTER();
    tc_lock();
    tc_tensor *out = NULL;
    int ax = 0;
    if (tc_tensor_check(a, "tc_argmax", "a") != TC_OK) goto done;
    if (a->node->ndim == 0 && (axis == 0 || axis == -1)) { /* one element, at index 0 */
        out = tc_full(0, NULL, 0, TC_INT32, tc_device(a));
        goto done;
    }
    if (tc_tensor_axis("tc_argmax", a->node->ndim, axis, &ax) != TC_OK) goto done;
    int64_t n = a->node->shape[ax];
    if (n == 0) {
        tc_error_set(TC_ERR_SHAPE, "tc_argmax: axis %d has no elements", axis);
        goto done;
    }
    tc_scope s = {0};
    int64_t col[TC_MAX_DIMS]; /* (n, 1, ..., 1): broadcasts along axis */
    int nd = a->node->ndim - ax;
    for (int i = 0; i < nd; i++) col[i] = i == 0 ? n : 1;
    tc_tensor *x = TC_S(&s, tc_detach(a)); /* not differentiable: record nothing */
    tc_tensor *m = TC_S(&s, tc_max(x, 1, &ax, true));
    tc_tensor *hit = TC_S(&s, tc_eq(x, m));
    tc_tensor *rev = TC_S(&s, tc_arange(n - 1, -1, -1, TC_INT32, tc_device(a)));
    tc_tensor *rev_col = TC_S(&s, tc_reshape(rev, nd, col));
    tc_tensor *idx = TC_S(&s, tc_mul(hit, rev_col));
    tc_tensor *top = TC_S(&s, tc_max(idx, 1, &ax, keepdim));
    tc_tensor *last = TC_S(&s, tc_full(0, NULL, (double)(n - 1), TC_INT32, tc_device(a)));
    out = tc_scope_end(&s, TC_S(&s, tc_sub(last, top)));
done:
    tc_unlock();
    return out;
}

TC_API tc_tensor *tc_dropout(tc_tensor *x, double p, bool training) {
    TC_API_ENTER();
    tc_lock();
    tc_tensor *out = NULL;
    if (tc_tensor_check(x, "tc_dropout", "x") != TC_OK) goto done;
    if (!(p >= 0 && p <= 1)) {
        tc_error_set(TC_ERR_INVALID, "tc_dropout: p %g must be in [0, 1]", p);
        goto done;
    }
    if (!training || p == 0) {
        out = tc_retain(x);
        goto done;
    }
    tc_scope s = {0};
    if (p == 1) { /* everything dropped (1/(1-p) would be inf, and 0*inf NaN) */
        tc_tensor *zero = tc_scope_scalar(&s, x, 0);
        out = tc_scope_end(&s, TC_S(&s, tc_mul(x, zero)));
        goto done;
    }
    tc_tensor *r = TC_S(&s, tc_rand(x->node->ndim, x->node->shape, TC_FLOAT32, tc_device(x)));
    tc_tensor *pt = s.failed ? NULL : tc_scope_scalar(&s, r, p);
    tc_tensor *keep = TC_S(&s, tc_ge(r, pt));
    tc_tensor *kept = TC_S(&s, tc_mul(x, keep));
    tc_tensor *k = s.failed ? NULL : tc_scope_scalar(&s, kept, 1 / (1 - p));
    tc_tensor *y = TC_S(&s, tc_mul(kept, k));
    out = tc_scope_end(&s, y);
done:
    tc_unlock();
    return out;
}
