/* nnops.c - the network composites: conv2d, max/avg pooling and batchnorm,
 * built from the public ops like composite.c (cross-entropy is in loss.c).
 *
 * Pooling windows come from tinygrad's _pool, with views only: for x
 * (..., H, W), kernel k, stride s, dilation d it makes (..., oh, ow, kh, kw).
 *   k <= s and d == 1: pad or shrink H to o*s, reshape (o, s), keep (o, k).
 *   otherwise: repeat H ceil(k*(H+d)/H) times (reshape, expand, reshape),
 *   take k*(H+d) elements, reshape (k, H+d): row j starts j*d elements
 *   further into x; fit H+d to o*s (shrink, or pad: only the first (o-1)*s +
 *   1 columns are read), reshape (k, o, s) and keep (k, o, 1).
 * conv2d: pad x, pool it to (N, G*cin, oh, ow, kh, kw), reshape to
 *   (N, G, cin, 1, oh, ow, kh, kw), expand over rcout = cout/G, move cin
 *   next to the kernel dims, multiply by w seen as (1, G, rcout, 1, 1, cin,
 *   kh, kw) and sum the last three axes: (N, cout, oh, ow). */
#include "tensor.h"

#include <math.h>
#include <string.h>

/* ---- view helpers (all keep their results in s) ---- */

/* x reshaped to its first `pre` dims followed by tail[0..nt-1] */
static tc_tensor *reshape_tail(tc_scope *s, tc_tensor *x, int pre, int nt, const int64_t *tail) {
    if (s->failed) return NULL;
    int64_t shp[TC_MAX_DIMS];
    memcpy(shp, x->node->shape, sizeof(int64_t) * (size_t)pre);
    memcpy(shp + pre, tail, sizeof(int64_t) * (size_t)nt);
    return TC_S(s, tc_reshape(x, pre + nt, shp));
}

/* x with its last nt dims cut or zero-padded at the end to sizes end[] */
static tc_tensor *fit_tail(tc_scope *s, tc_tensor *x, int nt, const int64_t *end) {
    if (s->failed) return NULL;
    int nd = x->node->ndim, pre = nd - nt;
    int64_t pad[2 * TC_MAX_DIMS] = {0}, cut[2 * TC_MAX_DIMS];
    bool has_pad = false;
    for (int i = 0; i < nd; i++) {
        int64_t size = x->node->shape[i], want = i < pre ? size : end[i - pre];
        pad[2 * i + 1] = want > size ? want - size : 0;
        has_pad = has_pad || want > size;
        cut[2 * i] = 0;
        cut[2 * i + 1] = want;
    }
    tc_tensor *p = has_pad ? TC_S(s, tc_pad(x, pad)) : x;
    return TC_S(s, tc_shrink(p, cut));
}

/* the pooling windows of x (..., H, W): (..., oh, ow, kh, kw); arguments
 * checked (every window fits) */
static tc_tensor *pool_axes(tc_scope *s, tc_tensor *x, const int64_t *k, const int64_t *st,
                            const int64_t *d, int *win);

static tc_tensor *pool(tc_scope *s, tc_tensor *x, const int64_t *k, const int64_t *st,
                       const int64_t *d) {
    return pool_axes(s, x, k, st, d, NULL);
}

/* pool's windows; with win, the windows of the k <= s path stay where the
 * reshape put them, (..., oh, kh, ow, kw), and win gets their two axes
 * (else the last two): a reduce over them reads x in its own order, and the
 * reduce's gradient comes back in it (a max-pool's backward, read by
 * batchnorm's sums: contiguous instead of through a permute) */
static tc_tensor *pool_axes(tc_scope *s, tc_tensor *x, const int64_t *k, const int64_t *st,
                            const int64_t *d, int *win) {
    int nd = x->node->ndim, pre = nd - 2;
    const int64_t *in = x->node->shape + pre;
    int64_t o[2];
    int order[TC_MAX_DIMS];
    for (int i = 0; i < pre; i++) order[i] = i;
    if (k[0] <= st[0] && k[1] <= st[1] && d[0] == 1 && d[1] == 1) {
        for (int j = 0; j < 2; j++) o[j] = (in[j] - k[j]) / st[j] + 1;
        int64_t fit[2] = {o[0] * st[0], o[1] * st[1]};
        int64_t split[4] = {o[0], st[0], o[1], st[1]}, keep[4] = {o[0], k[0], o[1], k[1]};
        tc_tensor *y = reshape_tail(s, fit_tail(s, x, 2, fit), pre, 4, split);
        y = fit_tail(s, y, 4, keep); /* (..., oh, kh, ow, kw) */
        if (win) {
            win[0] = pre + 1, win[1] = pre + 3;
            return y;
        }
        order[pre] = pre, order[pre + 1] = pre + 2, order[pre + 2] = pre + 1, order[pre + 3] = pre + 3;
        return TC_S(s, tc_permute(y, order));
    }
    int64_t rep[2], ones[4], tiled[4], flat[2], rows[4], fit[4], split[6], keep[6], ko[4];
    for (int j = 0; j < 2; j++) {
        o[j] = (in[j] - d[j] * (k[j] - 1) - 1) / st[j] + 1;
        rep[j] = (k[j] * (in[j] + d[j]) + in[j] - 1) / in[j];
        ones[2 * j] = 1, ones[2 * j + 1] = in[j];
        tiled[2 * j] = rep[j], tiled[2 * j + 1] = in[j];
        flat[j] = rep[j] * in[j];
        rows[2 * j] = k[j], rows[2 * j + 1] = in[j] + d[j];
        fit[2 * j] = k[j], fit[2 * j + 1] = o[j] * st[j];
        split[3 * j] = k[j], split[3 * j + 1] = o[j], split[3 * j + 2] = st[j];
        keep[3 * j] = k[j], keep[3 * j + 1] = o[j], keep[3 * j + 2] = 1;
        ko[2 * j] = k[j], ko[2 * j + 1] = o[j];
    }
    int64_t full[TC_MAX_DIMS];
    memcpy(full, x->node->shape, sizeof(int64_t) * (size_t)pre);
    memcpy(full + pre, tiled, sizeof tiled);
    tc_tensor *y = reshape_tail(s, x, pre, 4, ones); /* (..., 1, H, 1, W) */
    y = TC_S(s, tc_expand(y, pre + 4, full));        /* (..., rh, H, rw, W) */
    y = reshape_tail(s, y, pre, 2, flat);
    int64_t taken[2] = {rows[0] * rows[1], rows[2] * rows[3]};
    y = reshape_tail(s, fit_tail(s, y, 2, taken), pre, 4, rows); /* (..., kh, H+dh, kw, W+dw) */
    y = reshape_tail(s, fit_tail(s, y, 4, fit), pre, 6, split);  /* (..., kh, oh, sh, kw, ow, sw) */
    y = reshape_tail(s, fit_tail(s, y, 6, keep), pre, 4, ko);    /* (..., kh, oh, kw, ow) */
    order[pre] = pre + 1, order[pre + 1] = pre + 3, order[pre + 2] = pre, order[pre + 3] = pre + 2;
    if (win) win[0] = pre + 2, win[1] = pre + 3;
    return TC_S(s, tc_permute(y, order));
}

/* output size of a window k with stride st and dilation d over n (after
 * padding); 0 when not even one window fits */
static int64_t out_size(int64_t n, int64_t k, int64_t st, int64_t d) {
    int64_t span = d * (k - 1) + 1;
    return n < span ? 0 : (n - span) / st + 1;
}

/* ---- conv2d ---- */

typedef struct {
    int64_t stride[2];   /* sh, sw >= 1 */
    int64_t pad[2];      /* ph, pw >= 0, both sides */
    int64_t dilation[2]; /* >= 1 */
    int64_t groups;      /* >= 1, divides cin and cout */
} conv_args;

TC_MUST_USE static tc_status check_conv(tc_tensor *x, tc_tensor *w, tc_tensor *bias, const conv_args *a) {
    const char *api = "tc_conv2d";
    static const char *const names[3] = {"x", "w", "bias"};
    tc_tensor *ts[3] = {x, w, bias};
    tc_status s = tc_tensor_check(x, api, "x");
    if (s == TC_OK) s = tc_tensor_check(w, api, "w");
    if (s == TC_OK) s = tc_tensor_same_device(api, 3, ts, names);
    if (s != TC_OK) return s;
    if (a->stride[0] < 1 || a->stride[1] < 1 || a->pad[0] < 0 || a->pad[1] < 0 ||
        a->dilation[0] < 1 || a->groups < 1)
        return tc_error_set(TC_ERR_INVALID, "tc_conv2d: stride (%lld,%lld) and dilation %lld must "
                            "be >= 1, padding (%lld,%lld) >= 0, groups %lld >= 1",
                            (long long)a->stride[0], (long long)a->stride[1],
                            (long long)a->dilation[0], (long long)a->pad[0], (long long)a->pad[1],
                            (long long)a->groups);
    const tc_node *xn = x->node, *wn = w->node;
    char b1[256], b2[256];
    tc_fmt_shape(b1, sizeof b1, xn->ndim, xn->shape);
    tc_fmt_shape(b2, sizeof b2, wn->ndim, wn->shape);
    if (xn->ndim != 4 || wn->ndim != 4)
        return tc_error_set(TC_ERR_SHAPE, "tc_conv2d: x %s must be (N,Cin,H,W) and w %s "
                            "(Cout,Cin/groups,kh,kw)", b1, b2);
    if (wn->shape[1] * a->groups != xn->shape[1] || wn->shape[0] % a->groups != 0)
        return tc_error_set(TC_ERR_SHAPE, "tc_conv2d: x %s and w %s do not fit groups %lld "
                            "(need Cin = w.shape[1]*groups, Cout divisible by groups)", b1, b2,
                            (long long)a->groups);
    for (int j = 0; j < 2; j++)
        if (out_size(xn->shape[2 + j] + 2 * a->pad[j], wn->shape[2 + j], a->stride[j],
                     a->dilation[j]) < 1)
            return tc_error_set(TC_ERR_SHAPE, "tc_conv2d: kernel %s (dilation %lld) does not fit "
                                "input %s with padding (%lld,%lld)", b2, (long long)a->dilation[0],
                                b1, (long long)a->pad[0], (long long)a->pad[1]);
    if (bias && (bias->node->ndim != 1 || bias->node->shape[0] != wn->shape[0]))
        return tc_error_set(TC_ERR_SHAPE, "tc_conv2d: bias %s must be (%lld) for w %s",
                            tc_fmt_shape(b1, sizeof b1, bias->node->ndim, bias->node->shape),
                            (long long)wn->shape[0], b2);
    return TC_OK;
}

/* A conv reads its weight through a channels-last copy, w[o,i,y,x] stored
 * at (i,y,x,o), when the output channels fill vectors (at least 16, a
 * multiple of 8): the reduce kernel's register tile then runs along the
 * output channels, which the weight load gives contiguously, with the
 * output columns as rows, instead of along the output columns, whose 20 or
 * 24 (beautiful_mnist) leave vector lanes idle and whose 6 or 8 do not fill
 * one. The copy is one small kernel for a weight; for the weight gradient,
 * a conv whose "weight" is dy, it is a copy of dy. beautiful_mnist's step at
 * batch 512, one thread: 1330 -> 650 ms, 52 -> 67 kernels. */
enum { CL_MIN_COUT = 16 };

static tc_tensor *conv(tc_scope *s, tc_tensor *x, tc_tensor *w, tc_tensor *bias,
                       const conv_args *a) {
    const int64_t *xs = x->node->shape, *ws = w->node->shape;
    int64_t n = xs[0], g = a->groups, cin = ws[1], rcout = ws[0] / g, k[2] = {ws[2], ws[3]};
    int64_t pads[8] = {0, 0, 0, 0, a->pad[0], a->pad[0], a->pad[1], a->pad[1]};
    tc_tensor *xp = TC_S(s, tc_pad(x, pads));
    tc_tensor *p = s->failed ? NULL : pool(s, xp, k, a->stride, a->dilation);
    if (s->failed) return NULL;
    int64_t oh = p->node->shape[2], ow = p->node->shape[3];
    int64_t grouped[8] = {n, g, cin, 1, oh, ow, k[0], k[1]};
    int64_t wide[8] = {n, g, cin, rcout, oh, ow, k[0], k[1]};
    int64_t wshape[8] = {1, g, rcout, 1, 1, cin, k[0], k[1]};
    static const int order[8] = {0, 1, 3, 4, 5, 2, 6, 7};
    static const int kernel_axes[3] = {5, 6, 7};
    tc_tensor *y = TC_S(s, tc_reshape(p, 8, grouped));
    y = TC_S(s, tc_expand(y, 8, wide));
    y = TC_S(s, tc_permute(y, order)); /* (N, G, rcout, oh, ow, cin, kh, kw) */
    if (rcout >= CL_MIN_COUT && rcout % 8 == 0) { /* w channels-last, in a buffer of its own */
        static const int to_last[4] = {1, 2, 3, 0}, from_last[4] = {3, 0, 1, 2};
        tc_tensor *wl = TC_S(s, tc_contiguous(TC_S(s, tc_permute(w, to_last))));
        w = TC_S(s, tc_permute(wl, from_last));
    }
    tc_tensor *wr = TC_S(s, tc_reshape(w, 8, wshape));
    y = TC_S(s, tc_mul(y, wr));
    y = TC_S(s, tc_sum(y, 3, kernel_axes, false));
    int64_t out[4] = {n, g * rcout, oh, ow}, bshape[4] = {1, g * rcout, 1, 1};
    y = TC_S(s, tc_reshape(y, 4, out));
    if (!bias) return y;
    tc_tensor *br = TC_S(s, tc_reshape(bias, 4, bshape));
    return TC_S(s, tc_add(y, br));
}

/* A conv with stride 1, no dilation, one group and padding p < k records
 * one context of its own (TC_AG_CONV2D) instead of its ops': the gradients
 * are convolutions again (tc_conv2d_grad), each one reduce kernel, where
 * differentiating the pool's views would give a product over every window
 * element and then a sum over the overlapping windows (a buffer kh*kw times
 * the input's size, and masked multi-view loads). */
static bool has_conv_rule(const tc_tensor *w, const conv_args *a) {
    const int64_t *ws = w->node->shape;
    return a->stride[0] == 1 && a->stride[1] == 1 && a->dilation[0] == 1 && a->dilation[1] == 1 &&
           a->groups == 1 && a->pad[0] < ws[2] && a->pad[1] < ws[3];
}

TC_API tc_tensor *tc_conv2d_ex(tc_tensor *x, tc_tensor *w, tc_tensor *bias, int stride_h,
                               int stride_w, int pad_h, int pad_w, int dilation, int groups) {
    TC_API_ENTER();
    tc_lock();
    tc_tensor *out = NULL;
    conv_args a = {{stride_h, stride_w}, {pad_h, pad_w}, {dilation, dilation}, groups};
    if (check_conv(x, w, bias, &a) == TC_OK) {
        bool own = has_conv_rule(w, &a) && tc_is_grad_enabled();
        if (own) tc_set_grad_enabled(false);
        tc_scope s = {0};
        out = tc_scope_end(&s, conv(&s, x, w, bias, &a));
        if (own) {
            tc_set_grad_enabled(true);
            tc_tensor *ins[3] = {x, w, bias};
            tc_ag_args args = {.pads = {a.pad[0], a.pad[1]}};
            out = tc_ag_record(out, TC_AG_CONV2D, bias ? 3 : 2, ins, &args);
        }
    }
    tc_unlock();
    return out;
}

/* the node of t (a new reference); t released */
static tc_node *unwrap(tc_tensor *t) {
    tc_node *n = t ? tc_node_retain(t->node) : NULL;
    tc_release(t);
    return n;
}

void tc_conv2d_grad(const tc_ag_ctx *c, tc_node *g, tc_node **grads) {
    tc_node *xn = c->inputs[0], *wn = c->inputs[1];
    int64_t ph = c->args.pads[0], pw = c->args.pads[1], kh = wn->shape[2], kw = wn->shape[3];
    static const int swap01[4] = {1, 0, 2, 3}, hw[2] = {2, 3}, nhw[3] = {0, 2, 3};
    tc_scope s = {0};
    tc_tensor *gt = TC_S(&s, tc_tensor_wrap(tc_node_retain(g)));
    tc_node_release(g);
    if (c->parents[0]) { /* dx = conv(dy, w flipped and transposed, padding k-1-p) */
        tc_tensor *wt = TC_S(&s, tc_tensor_wrap(tc_node_retain(wn)));
        wt = TC_S(&s, tc_permute(TC_S(&s, tc_flip(wt, 2, hw)), swap01));
        /* dy padded in a buffer of its own: a conv reading a padded view does
         * masked loads that do not vectorize (the pad is one cheap kernel).
         * dy is realized before it is padded: the padded copy of an
         * expression (beautiful_mnist: BatchNorm's and max-pool's backward)
         * gates every load and stays scalar, 76 ms, where dy's own kernel
         * and the copy take 6 + 10 ms */
        int64_t qh = kh - 1 - ph, qw = kw - 1 - pw, pads[8] = {0, 0, 0, 0, qh, qh, qw, qw};
        tc_tensor *gp = gt;
        if (qh || qw) { /* dw below reads the realized dy too: its channels-last copy a transpose */
            gt = TC_S(&s, tc_contiguous(gt));
            gp = TC_S(&s, tc_contiguous(TC_S(&s, tc_pad(gt, pads))));
        }
        conv_args a = {{1, 1}, {0, 0}, {1, 1}, 1};
        tc_tensor *dx = s.failed ? NULL : conv(&s, gp, wt, NULL, &a);
        grads[0] = s.failed ? NULL : unwrap(tc_retain(dx));
    }
    if (c->parents[1]) { /* dw[o,i] = sum over n,y,x of dy[n,o,y,x] x[n,i,y+.,x+.]: a conv over n */
        tc_tensor *xt = TC_S(&s, tc_permute(TC_S(&s, tc_tensor_wrap(tc_node_retain(xn))), swap01));
        tc_tensor *gn = TC_S(&s, tc_permute(gt, swap01));
        conv_args a = {{1, 1}, {ph, pw}, {1, 1}, 1};
        tc_tensor *dw = s.failed ? NULL : conv(&s, xt, gn, NULL, &a);
        grads[1] = s.failed ? NULL : unwrap(tc_retain(TC_S(&s, tc_permute(dw, swap01))));
    }
    if (c->n_inputs > 2 && c->parents[2]) /* dbias = dy summed over n, y, x */
        grads[2] = s.failed ? NULL : unwrap(tc_retain(TC_S(&s, tc_sum(gt, 3, nhw, false))));
    tc_scope_end(&s, NULL);
}

TC_API tc_tensor *tc_conv2d(tc_tensor *x, tc_tensor *w, tc_tensor *bias, int stride, int padding) {
    TC_API_ENTER();
    return tc_conv2d_ex(x, w, bias, stride, stride, padding, padding, 1, 1);
}

/* ---- pools ---- */

static tc_tensor *pool2d(const char *api, tc_tensor *x, int kernel, int stride, bool is_max) {
    tc_lock();
    tc_tensor *out = NULL;
    if (tc_tensor_check(x, api, "x") != TC_OK) goto done;
    int64_t st = stride <= 0 ? kernel : stride, k[2] = {kernel, kernel}, ss[2] = {st, st};
    static const int64_t d[2] = {1, 1};
    const tc_node *n = x->node;
    char b[256];
    if (kernel < 1) {
        tc_error_set(TC_ERR_INVALID, "%s: kernel %d must be >= 1", api, kernel);
        goto done;
    }
    if (n->ndim < 2 || n->ndim > TC_MAX_DIMS - 4 || out_size(n->shape[n->ndim - 2], kernel, st, 1) < 1 ||
        out_size(n->shape[n->ndim - 1], kernel, st, 1) < 1) {
        tc_error_set(TC_ERR_SHAPE, "%s: kernel %d does not fit the last two dims of %s", api,
                     kernel, tc_fmt_shape(b, sizeof b, n->ndim, n->shape));
        goto done;
    }
    tc_scope s = {0};
    int win[2];
    tc_tensor *p = pool_axes(&s, x, k, ss, d, win);
    tc_tensor *r = s.failed ? NULL : is_max ? TC_S(&s, tc_max(p, 2, win, false)) : TC_S(&s, tc_mean(p, 2, win, false));
    out = tc_scope_end(&s, r);
done:
    tc_unlock();
    return out;
}

TC_API tc_tensor *tc_max_pool2d(tc_tensor *x, int kernel, int stride) {
    TC_API_ENTER();
    return pool2d("tc_max_pool2d", x, kernel, stride, true);
}

TC_API tc_tensor *tc_avg_pool2d(tc_tensor *x, int kernel, int stride) {
    TC_API_ENTER();
    return pool2d("tc_avg_pool2d", x, kernel, stride, false);
}

/* ---- batchnorm ---- */

/* the (C) tensor t (NULL is fine) checked against C */
TC_MUST_USE static tc_status check_channel(const char *name, const tc_tensor *t, int64_t c) {
    if (!t || (t->node->ndim == 1 && t->node->shape[0] == c)) return TC_OK;
    char b[256];
    return tc_error_set(TC_ERR_SHAPE, "tc_batchnorm: %s has shape %s, expected (%lld)", name,
                        tc_fmt_shape(b, sizeof b, t->node->ndim, t->node->shape), (long long)c);
}

TC_MUST_USE static tc_status check_batchnorm(tc_tensor *const *ts, bool training, double momentum,
                                 double eps) {
    static const char *const names[5] = {"x", "weight", "bias", "running_mean", "running_var"};
    tc_status s = tc_tensor_check(ts[0], "tc_batchnorm", "x");
    if (s == TC_OK) s = tc_tensor_same_device("tc_batchnorm", 5, ts, names);
    if (s != TC_OK) return s;
    const tc_node *x = ts[0]->node;
    char b[256];
    if (x->ndim < 2)
        return tc_error_set(TC_ERR_SHAPE, "tc_batchnorm: x %s must be (N,C) or (N,C,...)",
                            tc_fmt_shape(b, sizeof b, x->ndim, x->shape));
    for (int i = 1; i < 5 && s == TC_OK; i++) s = check_channel(names[i], ts[i], x->shape[1]);
    if (s != TC_OK) return s;
    if (!ts[3] != !ts[4])
        return tc_error_set(TC_ERR_INVALID, "tc_batchnorm: give both running_mean and "
                            "running_var, or neither");
    if (!(momentum >= 0 && momentum <= 1) || !(eps >= 0))
        return tc_error_set(TC_ERR_INVALID, "tc_batchnorm: momentum %g must be in [0, 1] and eps "
                            "%g >= 0", momentum, eps);
    int64_t per_channel = tc_node_numel(x) / (x->shape[1] ? x->shape[1] : 1);
    if (training && ts[3] && per_channel < 2)
        return tc_error_set(TC_ERR_SHAPE, "tc_batchnorm: training needs more than 1 value per "
                            "channel, x is %s", tc_fmt_shape(b, sizeof b, x->ndim, x->shape));
    return TC_OK;
}

/* r.assign((1 - momentum) * r + factor * stat.detach()) */
TC_MUST_USE static tc_status update_running(tc_scope *s, tc_tensor *r, tc_tensor *stat, double momentum,
                                double factor) {
    tc_tensor *keep = tc_scope_scalar(s, r, 1 - momentum), *take = tc_scope_scalar(s, r, factor);
    tc_tensor *sd = TC_S(s, tc_detach(stat));
    tc_tensor *old = TC_S(s, tc_mul(keep, r)), *fresh = TC_S(s, tc_mul(take, sd));
    tc_tensor *v = TC_S(s, tc_add(old, fresh));
    return s->failed ? tc_error_code() : tc_assign(r, v);
}

/* x normalized per channel (training, or no running stats: batch stats) */
static tc_tensor *batchnorm(tc_scope *s, tc_tensor *const *ts, bool training, double momentum,
                            double eps) {
    tc_tensor *x = ts[0], *rm = ts[3], *rv = ts[4];
    int nd = x->node->ndim, axes[TC_MAX_DIMS], na = 0;
    int64_t c = x->node->shape[1], bshape[TC_MAX_DIMS];
    for (int i = 0; i < nd; i++) {
        bshape[i] = i == 1 ? c : 1;
        if (i != 1) axes[na++] = i;
    }
    bool use_batch = training || !rm;
    tc_tensor *mean = use_batch ? TC_S(s, tc_mean(x, na, axes, false)) : rm;
    tc_tensor *mean_b = TC_S(s, tc_reshape(mean, nd, bshape));
    tc_tensor *y = TC_S(s, tc_sub(x, mean_b));
    tc_tensor *y2 = use_batch ? TC_S(s, tc_mul(y, y)) : NULL;
    tc_tensor *var = use_batch ? TC_S(s, tc_mean(y2, na, axes, false)) : rv;
    tc_tensor *e = s->failed ? NULL : tc_scope_scalar(s, var, eps);
    tc_tensor *ve = TC_S(s, tc_add(var, e));
    tc_tensor *sd = TC_S(s, tc_sqrt(ve));
    tc_tensor *inv = TC_S(s, tc_recip(sd));
    tc_tensor *inv_b = TC_S(s, tc_reshape(inv, nd, bshape));
    tc_tensor *out = TC_S(s, tc_mul(y, inv_b));
    for (int i = 1; i <= 2; i++) { /* weight, then bias */
        if (!ts[i]) continue;
        tc_tensor *p = TC_S(s, tc_reshape(ts[i], nd, bshape));
        out = i == 1 ? TC_S(s, tc_mul(out, p)) : TC_S(s, tc_add(out, p));
    }
    if (s->failed || !training || !rm) return out;
    double n = (double)(tc_node_numel(x->node) / c);
    if (update_running(s, rm, mean, momentum, momentum) != TC_OK ||
        update_running(s, rv, var, momentum, momentum * n / (n - 1)) != TC_OK)
        s->failed = true;
    return out;
}

TC_API tc_tensor *tc_batchnorm(tc_tensor *x, tc_tensor *weight, tc_tensor *bias,
                               tc_tensor *running_mean, tc_tensor *running_var, bool training,
                               double momentum, double eps) {
    TC_API_ENTER();
    tc_lock();
    tc_tensor *out = NULL, *ts[5] = {x, weight, bias, running_mean, running_var};
    if (check_batchnorm(ts, training, momentum, eps) == TC_OK) {
        tc_scope s = {0};
        out = tc_scope_end(&s, batchnorm(&s, ts, training, momentum, eps));
    }
    tc_unlock();
    return out;
}
