/* ref_ops.h - plain C reference loops, in double, for the composites
 * (matmul, softmax, layernorm, conv2d, pools, batchnorm, cross-entropy,
 * argmax): the oracle of test_composite.c and the host forward that
 * test_grad.c differentiates by central differences. Row-major arrays;
 * shapes are given as sizes. Nothing here calls the library. */
#ifndef TC_REF_OPS_H
#define TC_REF_OPS_H

#include <math.h>
#include <stdint.h>

/* out (m,n) = a (m,k) @ b (k,n) */
static inline void ref_matmul(const double *a, const double *b, int64_t m, int64_t k, int64_t n,
                              double *out) {
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double acc = 0;
            for (int64_t t = 0; t < k; t++) acc += a[i * k + t] * b[t * n + j];
            out[i * n + j] = acc;
        }
}

/* softmax (or log_softmax) of x viewed as (outer, len, inner), normalised
 * over the middle axis */
static inline void ref_softmax(const double *x, int64_t outer, int64_t len, int64_t inner,
                               bool is_log, double *out) {
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            const double *p = x + o * len * inner + i;
            double m = -INFINITY, s = 0;
            for (int64_t j = 0; j < len; j++) m = fmax(m, p[j * inner]);
            for (int64_t j = 0; j < len; j++) s += exp(p[j * inner] - m);
            for (int64_t j = 0; j < len; j++) {
                double v = p[j * inner] - m;
                out[o * len * inner + j * inner + i] = is_log ? v - log(s) : exp(v) / s;
            }
        }
}

/* layernorm of x viewed as (outer, inner) over inner, biased variance */
static inline void ref_layernorm(const double *x, int64_t outer, int64_t inner, double eps,
                                 double *out) {
    for (int64_t o = 0; o < outer; o++) {
        const double *p = x + o * inner;
        double mean = 0, var = 0;
        for (int64_t j = 0; j < inner; j++) mean += p[j];
        mean /= (double)inner;
        for (int64_t j = 0; j < inner; j++) var += (p[j] - mean) * (p[j] - mean);
        var /= (double)inner;
        for (int64_t j = 0; j < inner; j++) out[o * inner + j] = (p[j] - mean) / sqrt(var + eps);
    }
}

typedef struct {
    int64_t n, cin, h, w;       /* input (N, Cin, H, W) */
    int64_t cout, kh, kw;       /* weight (Cout, Cin/groups, kh, kw) */
    int64_t sh, sw, ph, pw;     /* stride and zero padding */
    int64_t dil, groups;        /* dilation and groups */
} ref_conv_shape;

static inline int64_t ref_conv_oh(const ref_conv_shape *c) {
    return (c->h + 2 * c->ph - c->dil * (c->kh - 1) - 1) / c->sh + 1;
}
static inline int64_t ref_conv_ow(const ref_conv_shape *c) {
    return (c->w + 2 * c->pw - c->dil * (c->kw - 1) - 1) / c->sw + 1;
}

/* out (N, Cout, oh, ow); bias may be NULL */
static inline void ref_conv2d(const double *x, const double *w, const double *bias,
                              const ref_conv_shape *c, double *out) {
    int64_t oh = ref_conv_oh(c), ow = ref_conv_ow(c), cpg = c->cin / c->groups;
    int64_t opg = c->cout / c->groups;
    for (int64_t n = 0; n < c->n; n++)
        for (int64_t co = 0; co < c->cout; co++)
            for (int64_t y = 0; y < oh; y++)
                for (int64_t xx = 0; xx < ow; xx++) {
                    double acc = bias ? bias[co] : 0;
                    int64_t g = co / opg;
                    for (int64_t ci = 0; ci < cpg; ci++)
                        for (int64_t i = 0; i < c->kh; i++)
                            for (int64_t j = 0; j < c->kw; j++) {
                                int64_t iy = y * c->sh + i * c->dil - c->ph;
                                int64_t ix = xx * c->sw + j * c->dil - c->pw;
                                if (iy < 0 || iy >= c->h || ix < 0 || ix >= c->w) continue;
                                double xv = x[((n * c->cin + g * cpg + ci) * c->h + iy) * c->w + ix];
                                acc += xv * w[((co * cpg + ci) * c->kh + i) * c->kw + j];
                            }
                    out[((n * c->cout + co) * oh + y) * ow + xx] = acc;
                }
}

/* max or average pooling of x viewed as (outer, h, w) with a k x k window and
 * stride s (no padding) */
static inline void ref_pool(const double *x, int64_t outer, int64_t h, int64_t w, int64_t k,
                            int64_t s, bool is_max, double *out) {
    int64_t oh = (h - k) / s + 1, ow = (w - k) / s + 1;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t y = 0; y < oh; y++)
            for (int64_t xx = 0; xx < ow; xx++) {
                double acc = is_max ? -INFINITY : 0;
                for (int64_t i = 0; i < k; i++)
                    for (int64_t j = 0; j < k; j++) {
                        double v = x[(o * h + y * s + i) * w + xx * s + j];
                        acc = is_max ? fmax(acc, v) : acc + v;
                    }
                out[(o * oh + y) * ow + xx] = is_max ? acc : acc / (double)(k * k);
            }
}

/* mean over rows of -log_softmax(logits)[row, label] */
static inline double ref_cross_entropy(const double *logits, const int32_t *labels, int64_t n,
                                       int64_t c) {
    double total = 0;
    for (int64_t i = 0; i < n; i++) {
        const double *p = logits + i * c;
        double m = -INFINITY, s = 0;
        for (int64_t j = 0; j < c; j++) m = fmax(m, p[j]);
        for (int64_t j = 0; j < c; j++) s += exp(p[j] - m);
        total += -(p[labels[i]] - m - log(s));
    }
    return total / (double)n;
}

/* batchnorm of x (N, C, inner) with the batch statistics; weight/bias may
 * be NULL; mean/var (biased) of each channel go to mean_out/var_out if given */
static inline void ref_batchnorm(const double *x, int64_t n, int64_t c, int64_t inner,
                                 const double *weight, const double *bias, double eps, double *out,
                                 double *mean_out, double *var_out) {
    for (int64_t ch = 0; ch < c; ch++) {
        double mean = 0, var = 0, cnt = (double)(n * inner);
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < inner; j++) mean += x[(i * c + ch) * inner + j];
        mean /= cnt;
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < inner; j++) {
                double d = x[(i * c + ch) * inner + j] - mean;
                var += d * d;
            }
        var /= cnt;
        if (mean_out) mean_out[ch] = mean;
        if (var_out) var_out[ch] = var;
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < inner; j++) {
                int64_t at = (i * c + ch) * inner + j;
                double v = (x[at] - mean) / sqrt(var + eps);
                out[at] = v * (weight ? weight[ch] : 1) + (bias ? bias[ch] : 0);
            }
    }
}

/* argmax of x viewed as (outer, len, inner) over the middle axis: the first
 * index of the maximum */
static inline void ref_argmax(const double *x, int64_t outer, int64_t len, int64_t inner,
                              int32_t *out) {
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            int32_t best = 0;
            for (int64_t j = 1; j < len; j++)
                if (x[(o * len + j) * inner + i] > x[(o * len + best) * inner + i]) best = (int32_t)j;
            out[o * inner + i] = best;
        }
}

#endif
