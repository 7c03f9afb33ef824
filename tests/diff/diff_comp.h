/* diff_comp.h - builders for the composite family of the differential suite:
 * the composites of tinyc.h (matmul, linear, softmax, log_softmax, layernorm,
 * conv2d, pools, argmax, cross_entropy, dropout, batchnorm), gradients from
 * tc_backward, and in-place updates with tc_assign. Part of diff_gen.h
 * (included after diff_ops.h); same conventions: pool indices in, a pool
 * index out, -1 failed, -2 refused.
 *
 * Composites are fed fresh data leaves (U[-2,2]) or well-conditioned values,
 * since their error bounds are rough; values built from them are never
 * `exact` once a sum is involved, so the cap of the tolerance (a fraction of
 * the data's magnitude) is what judges them.
 */
#ifndef DIFF_COMP_H
#define DIFF_COMP_H

#define GRAD_BOUND 1e4 /* assumed magnitude of a gradient (no derivative facts are kept) */

/* a fresh float32 leaf of U[-2,2] data */
static int fresh(gen *g, int nd, const int64_t *shape) {
    int64_t numel = 1;
    char sh[96];
    for (int d = 0; d < nd; d++) numel *= shape[d];
    tc_tensor *t = data_tensor(g, TC_FLOAT32, nd, shape, numel, -2, 2);
    return push_leaf(g, push(g, t, -2, 2, 0, true, "data(%s, float32, [-2, 2])",
                             fmt_list(sh, sizeof sh, shape, NULL, nd)));
}

/* pushes a composite's result: err bound err, never exact unless asked */
static int comp_push(gen *g, int x, tc_tensor *r, double lo, double hi, double err, bool exact,
                     const char *e) {
    g->pool[x].is_used = true;
    return set_half(g, push(g, r, lo, hi, err, exact, "%s", e), g->pool[x].has_half);
}

/* matmul or linear of pool[a] (..., K) with a fresh (K, N) or (K) weight */
static int c_matmul(gen *g, int a, bool linear) {
    const val *x = &g->pool[a];
    int nd = tc_ndim(x->t);
    if (nd == 0) return -2;
    int64_t K = tc_shape(x->t)[nd - 1], N = rint_(g, 1, 5), M = tc_numel(x->t) / (K ? K : 1);
    double Ma = mag(x->lo, x->hi), bound = (double)K * Ma * 2 + 2;
    if (bound > 1e5 || M * N > NUMEL_MAX) return -2;
    bool vec = !linear && chance(g, 0.25), bias = linear && chance(g, 0.6);
    int w = fresh(g, vec ? 1 : 2, linear ? (int64_t[]){N, K} : (int64_t[]){K, N});
    int b = w < 0 || !bias ? w : fresh(g, 1, (int64_t[]){N});
    if (b < 0) return b;
    char e[96];
    tc_tensor *r = linear ? tc_linear(x->t, g->pool[w].t, bias ? g->pool[b].t : NULL)
                          : tc_matmul(x->t, g->pool[w].t);
    snprintf(e, sizeof e, linear ? "linear(v%d, v%d%s)" : "matmul(v%d, v%d)", a, w,
             bias ? ", bias" : "");
    double err = (double)K * (2 * x->err + 0x1p-22 * (double)K * Ma * 2) + 0x1p-22 * bound;
    return comp_push(g, a, r, -bound, bound, err, false, e);
}

/* softmax, log_softmax or layernorm of pool[a] over a random axis (layernorm: that
 * axis and every later one) */
static int c_normalize(gen *g, int a, compop op) {
    const val *x = &g->pool[a];
    int nd = tc_ndim(x->t), axis = nd ? (int)rint_(g, -nd, nd - 1) : 0;
    if (nd == 0 || x->hi - x->lo > 30 || (op == C_LAYERNORM && x->err > 0)) return -2;
    int first = axis < 0 ? axis + nd : axis, last = op == C_LAYERNORM ? nd - 1 : first;
    double n = 1, R = x->hi - x->lo, lo = 0, hi = 1, err;
    for (int d = first; d <= last; d++) n *= (double)tc_shape(x->t)[d];
    tc_tensor *r;
    if (op == C_SOFTMAX) {
        r = tc_softmax(x->t, axis), err = 2 * x->err + 0x1p-21 * n;
    } else if (op == C_LOG_SOFTMAX) {
        lo = -R - log(fmax(n, 1)), hi = 0, err = 2 * x->err + 0x1p-21 * n * (R + 1);
        r = tc_log_softmax(x->t, axis);
    } else {
        if (n < 2) return -2;
        lo = -sqrt(n), hi = sqrt(n), err = 1e-4 * sqrt(n);
        r = tc_layernorm(x->t, axis, 1e-5);
    }
    char e[64];
    snprintf(e, sizeof e, "%s(v%d, axis=%d)", comp_names[op], a, axis);
    return comp_push(g, a, r, lo, hi, err, false, e);
}

/* conv2d (sometimes conv2d_ex: per-axis strides and pads, dilation, groups) of fresh
 * leaves */
static int c_conv(gen *g) {
    int64_t n = rint_(g, 1, 2), ci = rint_(g, 1, 3), h = rint_(g, 3, 7), wd = rint_(g, 3, 7);
    int64_t groups = chance(g, 0.3) ? ci : 1, co = groups * rint_(g, 1, 2);
    int64_t kh = rint_(g, 1, 3), kw = rint_(g, 1, 3), sh = rint_(g, 1, 2), ph = rint_(g, 0, 1);
    int64_t dil = chance(g, 0.3) ? 2 : 1;
    bool ex = dil > 1 || groups > 1 || chance(g, 0.3);
    int64_t sw = ex ? 3 - sh : sh, pw = ex ? 1 - ph : ph;
    if ((kh - 1) * dil + 1 > h + 2 * ph || (kw - 1) * dil + 1 > wd + 2 * pw) return -2;
    int x = fresh(g, 4, (int64_t[]){n, ci, h, wd});
    int w = x < 0 ? x : fresh(g, 4, (int64_t[]){co, ci / groups, kh, kw});
    int b = w < 0 || chance(g, 0.5) ? w : fresh(g, 1, (int64_t[]){co});
    if (b < 0) return b;
    tc_tensor *bias = b != w ? g->pool[b].t : NULL, *r;
    char e[160];
    if (ex)
        r = tc_conv2d_ex(g->pool[x].t, g->pool[w].t, bias, (int)sh, (int)sw, (int)ph, (int)pw,
                         (int)dil, (int)groups);
    else r = tc_conv2d(g->pool[x].t, g->pool[w].t, bias, (int)sh, (int)ph);
    snprintf(e, sizeof e,
             "conv2d%s(v%d, v%d%s, stride %lld,%lld, pad %lld,%lld, dilation %lld, "
             "groups %lld)",
             ex ? "_ex" : "", x, w, bias ? ", bias" : "", (long long)sh, (long long)sw,
             (long long)ph, (long long)pw, (long long)dil, (long long)groups);
    double K = (double)(ci / groups * kh * kw), bound = K * 4 + 2;
    g->pool[w].is_used = true;
    return comp_push(g, x, r, -bound, bound, 0x1p-20 * K * K * 4, false, e);
}

/* max or avg pool over the last two dims of pool[a] */
static int c_pool(gen *g, int a, bool is_max) {
    const val *x = &g->pool[a];
    int nd = tc_ndim(x->t), k = (int)rint_(g, 1, 3), s = (int)rint_(g, 0, 2);
    if (nd < 2 || tc_shape(x->t)[nd - 1] < k || tc_shape(x->t)[nd - 2] < k) return -2;
    char e[64];
    snprintf(e, sizeof e, "%s_pool2d(v%d, kernel %d, stride %d)", is_max ? "max" : "avg", a, k, s);
    tc_tensor *r = is_max ? tc_max_pool2d(x->t, k, s) : tc_avg_pool2d(x->t, k, s);
    double err = x->err + (is_max ? 0 : 0x1p-22 * k * k * mag(x->lo, x->hi));
    return comp_push(g, a, r, x->lo, x->hi, err, x->exact && (is_max || k == 1), e);
}

/* argmax of an exact value along a random axis (int32) */
static int c_argmax(gen *g, int a) {
    const val *x = &g->pool[a];
    int nd = tc_ndim(x->t);
    if (nd == 0 || !x->exact || tc_numel(x->t) == 0) return -2;
    int axis = (int)rint_(g, -nd, nd - 1);
    bool keep = chance(g, 0.5);
    char e[64];
    snprintf(e, sizeof e, "argmax(v%d, axis=%d%s)", a, axis, keep ? ", keepdim" : "");
    double hi = (double)tc_shape(x->t)[axis < 0 ? axis + nd : axis] - 1;
    return comp_push(g, a, tc_argmax(x->t, axis, keep), 0, hi, 0, true, e);
}

/* cross entropy of fresh (N,C) logits (or pool[a] when 2-D) and int32 labels */
static int c_cross_entropy(gen *g, int a) {
    const val *v = &g->pool[a];
    int x = tc_ndim(v->t) == 2 && tc_shape(v->t)[0] <= 64 && v->hi - v->lo < 30 ? a : -1;
    if (x < 0) {
        int64_t rows = rint_(g, 1, 6), cols = rint_(g, 2, 6);
        x = fresh(g, 2, (int64_t[]){rows, cols});
    }
    if (x < 0) return x;
    int64_t n = tc_shape(g->pool[x].t)[0], c = tc_shape(g->pool[x].t)[1];
    if (n == 0 || c == 0) return -2;
    int32_t labels[64];
    for (int64_t i = 0; i < n && i < 64; i++) labels[i] = (int32_t)rint_(g, 0, c - 1);
    int l = push_leaf(g, push(g, tc_from_data(labels, TC_INT32, 1, &n, NULL), 0, (double)c - 1, 0,
                              true, "labels(%lld, int32, [0, %lld))", (long long)n, (long long)c));
    if (l < 0) return l;
    char e[64];
    snprintf(e, sizeof e, "cross_entropy(v%d, v%d)", x, l);
    double R = g->pool[x].hi - g->pool[x].lo;
    return comp_push(g, x, tc_cross_entropy(g->pool[x].t, g->pool[l].t), 0, R + log((double)c),
                     2 * g->pool[x].err + 0x1p-20 * (double)c * (R + 1), false, e);
}

/* dropout (training) of pool[a]: the mask comes from tc_rand */
static int c_dropout(gen *g, int a) {
    const val *x = &g->pool[a];
    double p = 0.25, lo = fmin(0, x->lo / (1 - p)), hi = fmax(0, x->hi / (1 - p));
    char e[48];
    snprintf(e, sizeof e, "dropout(v%d, 0.25, training)", a);
    return comp_push(g, a, tc_dropout(x->t, p, true), lo, hi, x->err / (1 - p), x->exact, e);
}

/* batchnorm in training mode (batch statistics, no running stats) of fresh data */
static int c_batchnorm(gen *g) {
    bool img = chance(g, 0.5);
    int64_t n = rint_(g, 2, 4), c = rint_(g, 1, 3), h = rint_(g, 1, 3), w0 = rint_(g, 1, 3);
    int x = fresh(g, img ? 4 : 2, (int64_t[]){n, c, h, w0});
    bool affine = chance(g, 0.5);
    int w = x < 0 || !affine ? x : fresh(g, 1, &c);
    int b = w < 0 || !affine ? w : fresh(g, 1, &c);
    if (b < 0) return b;
    char e[64];
    snprintf(e, sizeof e, "batchnorm(v%d%s, training)", x, affine ? ", weight, bias" : "");
    tc_tensor *r = tc_batchnorm(g->pool[x].t, affine ? g->pool[w].t : NULL,
                                affine ? g->pool[b].t : NULL, NULL, NULL, true, 0.1, 1e-5);
    double bound = affine ? 2 * 4 + 2 : 4;
    return comp_push(g, x, r, -bound, bound, 1e-3, false, e);
}

static int v_composite(gen *g, int a, compop op) {
    cov[COV_COMPOSITE][op]++;
    switch (op) {
    case C_MATMUL: return c_matmul(g, a, false);
    case C_LINEAR: return c_matmul(g, a, true);
    case C_SOFTMAX:
    case C_LOG_SOFTMAX:
    case C_LAYERNORM: return c_normalize(g, a, op);
    case C_CONV2D: return c_conv(g);
    case C_MAXPOOL: return c_pool(g, a, true);
    case C_AVGPOOL: return c_pool(g, a, false);
    case C_ARGMAX: return c_argmax(g, a);
    case C_CROSS_ENTROPY: return c_cross_entropy(g, a);
    case C_DROPOUT: return c_dropout(g, a);
    case C_BATCHNORM:
    case C_COUNT: return c_batchnorm(g);
    }
    return -2;
}

/* ---- gradients and in-place updates ---- */

/* gradients of a random scalar loss of two fresh leaves: loss = sum or mean of a few
 * random ops of x (the case's shape) and w (a broadcasting shape) */
static int v_grad(gen *g) {
    int64_t s[NDIM_MAX];
    int nd = variant_shape(g, g->ndim, g->shape, s);
    int x = fresh(g, g->ndim, g->shape), w = x < 0 ? x : fresh(g, nd, s);
    if (w < 0) return w;
    if (tc_set_requires_grad(g->pool[x].t, true) != TC_OK ||
        tc_set_requires_grad(g->pool[w].t, true) != TC_OK)
        return push(g, NULL, 0, 0, 0, false, "tc_set_requires_grad");
    int y = x;
    for (int k = (int)rint_(g, 1, 4); k > 0; k--) {
        int r;
        if (chance(g, 0.5)) {
            int b = chance(g, 0.7) ? w : y;
            r = v_binary(g, y, b, (binop)rint_(g, 0, BI_POW));
        } else {
            r = v_unary(g, y, (unop)rint_(g, 0, UN_COUNT - 1));
        }
        if (r == -1) return -1;
        if (r >= 0) y = r;
    }
    int loss = v_reduce(g, y, chance(g, 0.5) ? RD_SUM : RD_MEAN, 0, NULL, false, 0);
    if (loss < 0) return loss;
    say(g, "  backward(v%d)\n", loss);
    if (tc_backward(g->pool[loss].t) != TC_OK) return push(g, NULL, 0, 0, 0, false, "tc_backward");
    int gx =
        push(g, tc_grad(g->pool[x].t), -GRAD_BOUND, GRAD_BOUND, GRAD_BOUND, false, "grad(v%d)", x);
    tc_tensor *gw = gx < 0 ? NULL : tc_grad(g->pool[w].t);
    if (gx < 0 || !gw) { /* w may not reach the loss (pow(y, k) ignores its partner) */
        if (gx >= 0) say(g, "  grad(v%d): none\n", w);
        return gx;
    }
    return push(g, gw, -GRAD_BOUND, GRAD_BOUND, GRAD_BOUND, false, "grad(v%d)", w);
}

/* dst := value in place (tc_assign): dst is a fresh realized leaf, value an expression of
 * dst and a partner (so the update reads the buffer it overwrites) */
static int v_assign(gen *g) {
    int d = fresh(g, g->ndim, g->shape);
    int b = d < 0 ? d : partner(g, d, CAT_NUM, false);
    int v = b < 0 ? b : v_binary(g, d, b, (binop)rint_(g, 0, BI_MIN));
    if (v < 0) return v;
    if (tc_ndim(g->pool[v].t) != g->ndim ||
        memcmp(tc_shape(g->pool[v].t), g->shape, sizeof(int64_t) * (size_t)g->ndim) != 0)
        return -2; /* the partner broadcast d to a larger shape */
    if (tc_assign(g->pool[d].t, g->pool[v].t) != TC_OK)
        return push(g, NULL, 0, 0, 0, false, "tc_assign(v%d, v%d)", d, v);
    val *dst = &g->pool[d];
    dst->lo = g->pool[v].lo, dst->hi = g->pool[v].hi, dst->err = g->pool[v].err;
    dst->exact = g->pool[v].exact, dst->has_half = g->pool[v].has_half;
    dst->is_leaf = false, dst->is_used = false;
    say(g, "  v%d := assign(v%d, v%d)  (v%d now reads the updated buffer)\n", d, d, v, d);
    return d;
}

#endif /* DIFF_COMP_H */
