/* grad_check.h - the gradient checker of test_grad.c: runs a forward through
 * the library in float32 on small deterministic inputs, takes
 * loss = sum(out * W) for fixed weights W (so every output element matters
 * differently), calls tc_backward, and compares each input's gradient with
 * central finite differences of the same loss computed in double on the
 * host (h = 1e-5), within the tolerances the caller states. */
#ifndef TC_GRAD_CHECK_H
#define TC_GRAD_CHECK_H

#include "../api/api_helpers.h"

#include <math.h>

#define GC_MAXIN 3   /* inputs per case */
#define GC_MAXN  512 /* elements per input or output */

typedef struct {
    int n_in;                      /* number of inputs */
    int ndim[GC_MAXIN];            /* rank of each input */
    int64_t shape[GC_MAXIN][8];    /* shape of each input */
    double lo[GC_MAXIN];           /* values of input i are drawn from [lo, hi) */
    double hi[GC_MAXIN];
    bool is_const[GC_MAXIN];       /* input does not require grad (no gradient checked) */
    double kink;                   /* inputs keep at least this distance from 0 */
    const int64_t *zeros;          /* flat indices of input 0 set to exactly 0 (may be NULL) */
    int n_zeros;                   /* number of entries in zeros */
    /* library forward: inputs borrowed, a new output (any shape) */
    tc_tensor *(*lib)(tc_tensor *const *x, const void *arg);
    /* host forward in double: writes the output row-major, returns its numel */
    int64_t (*host)(const double *const *x, double *out, const void *arg);
    const void *arg; /* extra parameters for both forwards */
} gc_case;

/* a case with one input of the given shape and value range */
static inline gc_case one_input(int ndim, const int64_t *shape, double lo, double hi) {
    gc_case c;
    memset(&c, 0, sizeof c);
    c.n_in = 1;
    c.ndim[0] = ndim;
    for (int i = 0; i < ndim; i++) c.shape[0][i] = shape[i];
    c.lo[0] = lo, c.hi[0] = hi;
    return c;
}

/* appends an input to c */
static inline void add_input(gc_case *c, int ndim, const int64_t *shape, double lo, double hi) {
    int k = c->n_in++;
    c->ndim[k] = ndim;
    for (int i = 0; i < ndim; i++) c->shape[k][i] = shape[i];
    c->lo[k] = lo, c->hi[k] = hi;
}

static inline uint64_t gc_hash(const char *s) {
    uint64_t h = 1469598103934665603ULL;
    while (*s) h = (h ^ (uint8_t)*s++) * 1099511628211ULL;
    return h;
}

/* the next value of an LCG in [0, 1) */
static inline double gc_uniform(uint64_t *state) {
    *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)((*state >> 40) & 0xFFFFFF) / 16777216.0;
}

static inline int64_t gc_numel(int ndim, const int64_t *shape) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    return n;
}

/* the host loss sum(host(x) * w) */
static inline double gc_host_loss(const gc_case *c, double *const *x, const double *w,
                                  int64_t n_out) {
    double out[GC_MAXN];
    int64_t n = c->host((const double *const *)x, out, c->arg);
    assert_int_equal(n, n_out);
    double loss = 0;
    for (int64_t k = 0; k < n; k++) loss += out[k] * w[k];
    return loss;
}

/* checks d loss / d input for every input that requires grad */
static inline void gc_check(const char *what, const gc_case *c, double rtol, double atol) {
    uint64_t rng = gc_hash(what);
    float xf[GC_MAXIN][GC_MAXN];
    double xd_store[GC_MAXIN][GC_MAXN], *xd[GC_MAXIN];
    tc_tensor *x[GC_MAXIN];
    for (int i = 0; i < c->n_in; i++) {
        int64_t n = gc_numel(c->ndim[i], c->shape[i]);
        assert_true(n <= GC_MAXN);
        for (int64_t j = 0; j < n; j++) {
            double v = c->lo[i] + (c->hi[i] - c->lo[i]) * gc_uniform(&rng);
            if (fabs(v) < c->kink) v = v < 0 ? -c->kink : c->kink;
            xf[i][j] = (float)v;
            xd_store[i][j] = (double)xf[i][j];
        }
        for (int z = 0; i == 0 && z < c->n_zeros; z++)
            xf[0][c->zeros[z]] = 0, xd_store[0][c->zeros[z]] = 0;
        xd[i] = xd_store[i];
        x[i] = f32(c->ndim[i], c->shape[i], xf[i]);
        if (!c->is_const[i]) assert_int_equal(tc_set_requires_grad(x[i], true), TC_OK);
    }
    tc_tensor *out = c->lib(x, c->arg);
    if (!out) fprintf(stderr, "%s: forward failed: %s\n", what, tc_last_error());
    assert_non_null(out);
    int64_t n_out = tc_numel(out);
    assert_true(n_out <= GC_MAXN);
    float wf[GC_MAXN];
    double wd[GC_MAXN];
    for (int64_t k = 0; k < n_out; k++) wd[k] = wf[k] = (float)(2 * gc_uniform(&rng) - 1);
    tc_tensor *w = f32(tc_ndim(out), tc_shape(out), wf);
    tc_tensor *prod = tc_mul(out, w), *loss = tc_sum(prod, 0, NULL, false);
    assert_non_null(loss);
    tc_status bs = tc_backward(loss);
    if (bs != TC_OK) fprintf(stderr, "%s: tc_backward: %s\n", what, tc_last_error());
    assert_int_equal(bs, TC_OK);
    for (int i = 0; i < c->n_in; i++) {
        tc_tensor *g = tc_grad(x[i]);
        if (c->is_const[i]) {
            assert_null(g);
            continue;
        }
        assert_non_null(g);
        int64_t n = gc_numel(c->ndim[i], c->shape[i]);
        float *got = tc_test_read(g), want[GC_MAXN];
        for (int64_t j = 0; j < n; j++) {
            double keep = xd[i][j], h = 1e-5;
            xd[i][j] = keep + h;
            double up = gc_host_loss(c, xd, wd, n_out);
            xd[i][j] = keep - h;
            double down = gc_host_loss(c, xd, wd, n_out);
            xd[i][j] = keep;
            want[j] = (float)((up - down) / (2 * h));
        }
        char label[160];
        snprintf(label, sizeof label, "%s: d loss / d input %d", what, i);
        bool ok = tc_allclose_f32(got, want, n, rtol, atol, label);
        free(got);
        tc_release(g);
        assert_true(ok);
    }
    tc_release(loss);
    tc_release(prod);
    tc_release(w);
    tc_release(out);
    for (int i = 0; i < c->n_in; i++) tc_release(x[i]);
}

#endif
