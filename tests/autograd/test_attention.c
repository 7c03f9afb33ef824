/* test_attention.c - tc_tril, tc_triu, tc_masked_fill and
 * tc_scaled_dot_product_attention(_ex): values against the host (in
 * double) and the reference evaluator, exact kernel counts forward and
 * backward, gradients by finite differences, torch's mask rules (bool
 * keeps, float adds, is_causal as tril of ones (L, S), a row with every
 * score masked is NaN), dropout on the weights, and bad arguments. */
#include "grad_check.h"

/* ---- tril, triu ---- */

/* tril/triu of x (2,3,4,5) for diagonals from below the last row to past
 * the last column, in float32, int32 and bool: 1 kernel each */
static void test_triangles(void **state) {
    (void)state;
    tc_tensor *x = tc_test_randn(4, SHAPE(2, 3, 4, 5), 1, -1, 1);
    float *xv = tc_test_read(x);
    int32_t iv[120];
    for (int i = 0; i < 120; i++) iv[i] = i - 60;
    tc_tensor *xi = from(iv, TC_INT32, 4, SHAPE(2, 3, 4, 5)),
              *xb = tc_test_randn(2, SHAPE(4, 5), 2, -1, 1);
    tc_tensor *zero = scalar(0, TC_FLOAT32), *b = tc_lt(xb, zero);
    bool *bv = tc_test_read(b);
    const int64_t diags[] = {-9, -4, -1, 0, 1, 3, 5, 100};
    for (size_t d = 0; d < sizeof diags / sizeof diags[0]; d++)
        for (int upper = 0; upper < 2; upper++) {
            int64_t k = diags[d];
            float want[120];
            int32_t iwant[120];
            bool bwant[20];
            for (int i = 0; i < 120; i++) {
                int r = (i / 5) % 4, c = i % 5;
                bool keep = upper ? c - r >= k : c - r <= k;
                want[i] = keep ? xv[i] : 0, iwant[i] = keep ? iv[i] : 0;
                if (i < 20) bwant[i] = keep && bv[i];
            }
            tc_tensor *t = upper ? tc_triu(x, k) : tc_tril(x, k);
            check_meta(t, TC_FLOAT32, 4, SHAPE(2, 3, 4, 5));
            tc_check_schedule(t, 1, 0, 0, upper ? "triu" : "tril");
            expect_f32(t, want, 120, 0, 0, upper ? "triu" : "tril");
            t = upper ? tc_triu(xi, k) : tc_tril(xi, k);
            expect_values(t, iwant, 120, 0, 0, "int32");
            t = upper ? tc_triu(b, k) : tc_tril(b, k);
            expect_values(t, bwant, 20, 0, 0, "bool");
        }
    free(xv), free(bv);
    tc_release(x), tc_release(xi), tc_release(xb), tc_release(zero), tc_release(b);
}

/* ---- masked_fill ---- */

/* mask (4,1) broadcast over x (3,4,5): 1 kernel; the value cast to x's dtype */
static void test_masked_fill(void **state) {
    (void)state;
    tc_tensor *x = tc_test_randn(3, SHAPE(3, 4, 5), 3, -1, 1);
    float *xv = tc_test_read(x), want[60];
    bool mv[4] = {true, false, false, true};
    tc_tensor *m = from(mv, TC_BOOL, 2, SHAPE(4, 1));
    for (int i = 0; i < 60; i++) want[i] = mv[(i / 5) % 4] ? -INFINITY : xv[i];
    tc_tensor *y = tc_masked_fill(x, m, -INFINITY);
    check_meta(y, TC_FLOAT32, 3, SHAPE(3, 4, 5));
    tc_check_schedule(y, 1, 0, 0, "masked_fill");
    expect_f32(y, want, 60, 0, 0, "masked_fill");
    int32_t iv[4] = {1, 2, 3, 4}, iwant[4] = {7, 2, 3, 7};
    tc_tensor *xi = from(iv, TC_INT32, 2, SHAPE(1, 4)), *m1 = tc_reshape(m, 1, SHAPE(4));
    expect_values(tc_masked_fill(xi, m1, 7.9), iwant, 4, 0, 0, "int32 (7.9 cast to 7)");
    free(xv);
    tc_release(x), tc_release(m), tc_release(xi), tc_release(m1);
}

/* ---- scaled dot product attention ---- */

#define B  2
#define H  3
#define L  5
#define S  6
#define E  4
#define EV 3

enum { NO_MASK, CAUSAL, BOOL_MASK, FLOAT_MASK };

typedef struct {
    int mode;       /* NO_MASK, CAUSAL, BOOL_MASK (L, S) or FLOAT_MASK (B, 1, L, S) */
    bool kv_shared; /* k (H, S, E) and v (H, S, EV), broadcast over B */
} sdpa_arg;

static const bool BOOL_M[L * S] = {
    1, 0, 1, 1, 0, 1, 0, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 1, 1, 1, 1, 1,
};

/* the float mask (B, 1, L, S) */
static float float_mask(int i) {
    return (float)(((i * 37) % 11) - 5) / 4.0f;
}

/* out (B, H, L, EV) in double */
static int64_t host_sdpa(const double *const *x, double *out, const void *arg) {
    const sdpa_arg *a = arg;
    for (int b = 0; b < B * H; b++) {
        int kb = a->kv_shared ? b % H : b;
        const double *q = x[0] + b * L * E, *k = x[1] + kb * S * E, *v = x[2] + kb * S * EV;
        for (int l = 0; l < L; l++) {
            double sc[S], m = -INFINITY, sum = 0;
            for (int s = 0; s < S; s++) {
                double d = 0;
                for (int e = 0; e < E; e++) d += q[l * E + e] * k[s * E + e];
                sc[s] = d / sqrt((double)E);
                if ((a->mode == CAUSAL && s > l) || (a->mode == BOOL_MASK && !BOOL_M[l * S + s]))
                    sc[s] = -INFINITY;
                if (a->mode == FLOAT_MASK) sc[s] += float_mask((b / H) * L * S + l * S + s);
                m = fmax(m, sc[s]);
            }
            for (int s = 0; s < S; s++) sum += exp(sc[s] - m);
            for (int j = 0; j < EV; j++) {
                double o = 0;
                for (int s = 0; s < S; s++) o += exp(sc[s] - m) / sum * v[s * EV + j];
                out[(b * L + l) * EV + j] = o;
            }
        }
    }
    return B * H * L * EV;
}

static tc_tensor *mask_of(int mode) {
    if (mode == BOOL_MASK) return from(BOOL_M, TC_BOOL, 2, SHAPE(L, S));
    if (mode != FLOAT_MASK) return NULL;
    float f[B * L * S];
    for (int i = 0; i < B * L * S; i++) f[i] = float_mask(i);
    return f32(4, SHAPE(B, 1, L, S), f);
}

static tc_tensor *lib_sdpa(tc_tensor *const *x, const void *arg) {
    const sdpa_arg *a = arg;
    tc_tensor *m = mask_of(a->mode);
    tc_tensor *o = tc_scaled_dot_product_attention(x[0], x[1], x[2], m, a->mode == CAUSAL);
    tc_release(m);
    return o;
}

/* q, k, v of the shapes a names, in [-2, 2), with their values as doubles */
static void make_qkv(const sdpa_arg *a, uint64_t seed, tc_tensor **t, double **d) {
    int nk = a->kv_shared ? 3 : 4;
    const int64_t *shapes[3] = {SHAPE(B, H, L, E),
                                a->kv_shared ? SHAPE(H, S, E) : SHAPE(B, H, S, E),
                                a->kv_shared ? SHAPE(H, S, EV) : SHAPE(B, H, S, EV)};
    for (int i = 0; i < 3; i++) {
        int nd = i == 0 ? 4 : nk;
        const int64_t *sh = i == 0 ? shapes[0] : shapes[i];
        t[i] = tc_test_randn(nd, sh, seed + (uint64_t)i, -2, 2);
        float *v = tc_test_read(t[i]);
        int64_t n = tc_numel(t[i]);
        d[i] = malloc((size_t)n * sizeof(double));
        for (int64_t j = 0; j < n; j++) d[i][j] = v[j];
        free(v);
    }
}

/* Forward: 1 kernel with any mask or none, a row kernel over (batch, head,
 * query) (schedule/rows.c): the scores q @ k^T, softmax's stages with the
 * scale and the mask (the causal one computed in place) and the weights'
 * product with v are its parts, the score and weight rows in scratch
 * arrays (3 kernels before row kernels). Backward, d/dq, d/dk, d/dv
 * together: 4 (5 before): one row kernel for the forward's parts, the score
 * gradients and d/dq, which stores the weights and score gradients that
 * d/dk and d/dv (rows (batch, head, key)) read, plus d/d weights. */
static void test_sdpa_values(void **state) {
    (void)state;
    for (int mode = NO_MASK; mode <= FLOAT_MASK; mode++)
        for (int shared = 0; shared < 2; shared++) {
            sdpa_arg a = {mode, shared};
            tc_tensor *t[3];
            double *d[3], want[B * H * L * EV];
            make_qkv(&a, (uint64_t)(10 + mode * 2 + shared), t, d);
            for (int i = 0; i < 3; i++) assert_int_equal(tc_set_requires_grad(t[i], true), TC_OK);
            host_sdpa((const double *const *)d, want, &a);
            tc_tensor *o = lib_sdpa(t, &a);
            check_meta(o, TC_FLOAT32, 4, SHAPE(B, H, L, EV));
            char what[64];
            snprintf(what, sizeof what, "sdpa mask %d, shared k/v %d", mode, shared);
            tc_check_schedule(o, 1, 1e-5, 1e-6, what);
            float wf[B * H * L * EV];
            for (int i = 0; i < B * H * L * EV; i++) wf[i] = (float)want[i];
            expect_f32(tc_retain(o), wf, B * H * L * EV, 1e-5, 1e-6, what);
            tc_tensor *s = tc_sum(o, 0, NULL, false);
            assert_int_equal(tc_backward(s), TC_OK);
            tc_tensor *g[3] = {tc_grad(t[0]), tc_grad(t[1]), tc_grad(t[2])};
            assert_int_equal(tc_schedule_kernel_count(g, 3), 4);
            assert_int_equal(tc_realize(g, 3), TC_OK);
            for (int i = 0; i < 3; i++) tc_release(g[i]), tc_release(t[i]), free(d[i]);
            tc_release(o), tc_release(s);
        }
}

/* a row whose every score is masked is NaN (as torch); is_causal with L < S
 * keeps s <= l (top-left, as tril(ones(L, S))) */
static void test_sdpa_edges(void **state) {
    (void)state;
    sdpa_arg a = {NO_MASK, false};
    tc_tensor *t[3];
    double *d[3];
    make_qkv(&a, 30, t, d);
    bool mv[L * S];
    for (int i = 0; i < L * S; i++) mv[i] = i / S != 2;
    tc_tensor *m = from(mv, TC_BOOL, 2, SHAPE(L, S));
    tc_tensor *o = tc_scaled_dot_product_attention(t[0], t[1], t[2], m, false);
    float *ov = tc_test_read(o);
    for (int i = 0; i < B * H * L * EV; i++) assert_true(isnan(ov[i]) == ((i / EV) % L == 2));
    free(ov);
    tc_release(m), tc_release(o);
    for (int i = 0; i < 3; i++) tc_release(t[i]), free(d[i]);
}

/* dropout_p on the weights: with v = I each output is a weight, either
 * dropped (0) or scaled by 1/(1-p); p = 0 is the plain call */
static void test_sdpa_dropout(void **state) {
    (void)state;
    float eye[S * S] = {0};
    for (int i = 0; i < S; i++) eye[i * S + i] = 1;
    tc_tensor *q = tc_test_randn(2, SHAPE(L, E), 40, -2, 2),
              *k = tc_test_randn(2, SHAPE(S, E), 41, -2, 2);
    tc_tensor *v = f32(2, SHAPE(S, S), eye);
    tc_tensor *p = tc_scaled_dot_product_attention(q, k, v, NULL, false);
    tc_tensor *p0 = tc_scaled_dot_product_attention_ex(q, k, v, NULL, false, 0);
    tc_manual_seed(7);
    tc_tensor *pd = tc_scaled_dot_product_attention_ex(q, k, v, NULL, false, 0.5);
    float *w = tc_test_read(p), *w0 = tc_test_read(p0), *wd = tc_test_read(pd);
    int dropped = 0, kept = 0;
    for (int i = 0; i < L * S; i++) {
        assert_true(w0[i] == w[i]);
        if (wd[i] == 0) dropped++;
        else if (fabsf(wd[i] - 2 * w[i]) <= 1e-6f + 1e-5f * 2 * w[i]) kept++;
    }
    assert_int_equal(dropped + kept, L * S);
    assert_true(dropped > 0 && kept > 0);
    free(w), free(w0), free(wd);
    tc_release(q), tc_release(k), tc_release(v), tc_release(p), tc_release(p0), tc_release(pd);
}

/* ---- gradients by finite differences ---- */

static tc_tensor *lib_tril(tc_tensor *const *x, const void *arg) {
    (void)arg;
    return tc_tril(x[0], -1);
}

static int64_t host_tril(const double *const *x, double *out, const void *arg) {
    (void)arg; /* x (2,4,3) */
    for (int i = 0; i < 24; i++) out[i] = (i % 3) - ((i / 3) % 4) <= -1 ? x[0][i] : 0;
    return 24;
}

static tc_tensor *lib_fill(tc_tensor *const *x, const void *arg) {
    (void)arg;
    bool mv[3] = {false, true, false};
    tc_tensor *m = from(mv, TC_BOOL, 1, SHAPE(3)), *y = tc_masked_fill(x[0], m, 2.5);
    tc_release(m);
    return y;
}

static int64_t host_fill(const double *const *x, double *out, const void *arg) {
    (void)arg; /* x (4,3) */
    for (int i = 0; i < 12; i++) out[i] = i % 3 == 1 ? 2.5 : x[0][i];
    return 12;
}

static void test_grad_fd(void **state) {
    (void)state;
    gc_case c = one_input(3, SHAPE(2, 4, 3), -1, 1);
    c.lib = lib_tril, c.host = host_tril;
    gc_check("tril", &c, 1e-3, 1e-4);
    gc_case f = one_input(2, SHAPE(4, 3), -1, 1);
    f.lib = lib_fill, f.host = host_fill;
    gc_check("masked_fill", &f, 1e-3, 1e-4);
    for (int mode = NO_MASK; mode <= FLOAT_MASK; mode++) {
        sdpa_arg a = {mode, mode == BOOL_MASK};
        gc_case g = one_input(4, SHAPE(B, H, L, E), -2, 2);
        if (a.kv_shared) {
            add_input(&g, 3, SHAPE(H, S, E), -2, 2);
            add_input(&g, 3, SHAPE(H, S, EV), -2, 2);
        } else {
            add_input(&g, 4, SHAPE(B, H, S, E), -2, 2);
            add_input(&g, 4, SHAPE(B, H, S, EV), -2, 2);
        }
        g.lib = lib_sdpa, g.host = host_sdpa, g.arg = &a;
        char what[48];
        snprintf(what, sizeof what, "sdpa (mask %d)", mode);
        gc_check(what, &g, 2e-3, 2e-4);
    }
}

/* ---- errors ---- */

static void test_errors(void **state) {
    (void)state;
    tc_tensor *x1 = tc_test_randn(1, SHAPE(5), 50, -1, 1),
              *x = tc_test_randn(2, SHAPE(4, 5), 51, -1, 1);
    assert_null(tc_tril(x1, 0));
    assert_tc_error(TC_ERR_SHAPE, "tc_tril: x (5,) needs at least 2 dims");
    assert_null(tc_triu(NULL, 0));
    assert_tc_error(TC_ERR_INVALID, "tc_triu: tensor x is NULL");
    tc_tensor *mf = tc_test_randn(1, SHAPE(5), 52, -1, 1), *zero = scalar(0, TC_FLOAT32);
    tc_tensor *r3 = tc_test_randn(1, SHAPE(3), 53, -1, 1), *mb = tc_lt(r3, zero);
    assert_null(tc_masked_fill(x, mf, 0));
    assert_tc_error(TC_ERR_DTYPE, "tc_masked_fill: mask must be bool, got float32");
    assert_null(tc_masked_fill(x, mb, 0));
    assert_tc_error(TC_ERR_SHAPE, "tc_masked_fill: mask (3,) does not broadcast to (4,5)");
    assert_null(tc_masked_fill(x, NULL, 0));
    assert_tc_error(TC_ERR_INVALID, "tc_masked_fill: tensor mask is NULL");

    tc_tensor *q = tc_test_randn(3, SHAPE(2, 5, 4), 54, -1, 1),
              *k = tc_test_randn(3, SHAPE(2, 6, 4), 55, -1, 1);
    tc_tensor *v = tc_test_randn(3, SHAPE(2, 6, 3), 56, -1, 1),
              *k3 = tc_test_randn(3, SHAPE(3, 6, 4), 57, -1, 1);
    tc_tensor *ke = tc_test_randn(3, SHAPE(2, 6, 5), 58, -1, 1), *qi = tc_cast(q, TC_INT32);
    assert_null(tc_scaled_dot_product_attention(q, ke, v, NULL, false));
    assert_tc_error(TC_ERR_SHAPE,
                    "tc_scaled_dot_product_attention: q (2,5,4), k (2,6,5), v (2,6,3) "
                    "must be (..., L, E), (..., S, E), (..., S, Ev)");
    assert_null(tc_scaled_dot_product_attention(q, k3, v, NULL, false));
    assert_tc_error(TC_ERR_SHAPE, "with batch dims that broadcast");
    assert_null(tc_scaled_dot_product_attention(qi, k, v, NULL, false));
    assert_tc_error(TC_ERR_DTYPE, "tc_scaled_dot_product_attention: q is int32, not a float dtype");
    assert_null(tc_scaled_dot_product_attention(q, k, NULL, NULL, false));
    assert_tc_error(TC_ERR_INVALID, "tc_scaled_dot_product_attention: tensor v is NULL");
    tc_tensor *r56 = tc_test_randn(2, SHAPE(5, 6), 59, -1, 1), *m = tc_lt(r56, zero);
    assert_null(tc_scaled_dot_product_attention(q, k, v, m, true));
    assert_tc_error(TC_ERR_INVALID, "give attn_mask or is_causal, not both");
    tc_tensor *mi = tc_cast(m, TC_INT32), *mt = tc_transpose(m, 0, 1);
    assert_null(tc_scaled_dot_product_attention(q, k, v, mi, false));
    assert_tc_error(TC_ERR_DTYPE, "attn_mask must be bool or float, got int32");
    assert_null(tc_scaled_dot_product_attention(q, k, v, mt, false));
    assert_tc_error(TC_ERR_SHAPE, "tc_scaled_dot_product_attention: attn_mask (6,5) does not "
                                  "broadcast to the scores (2,5,6)");
    assert_null(tc_scaled_dot_product_attention_ex(q, k, v, m, true, 0.1));
    assert_tc_error(TC_ERR_INVALID, "tc_scaled_dot_product_attention_ex: give attn_mask or "
                                    "is_causal, not both");
    assert_null(tc_scaled_dot_product_attention_ex(q, k, v, NULL, false, 1.5));
    assert_tc_error(TC_ERR_INVALID, "tc_scaled_dot_product_attention_ex: dropout_p 1.5 must be in");
    tc_release(x1), tc_release(x), tc_release(mf), tc_release(zero), tc_release(mb);
    tc_release(q), tc_release(k), tc_release(v), tc_release(k3), tc_release(ke), tc_release(qi);
    tc_release(m), tc_release(mi), tc_release(mt), tc_release(r3), tc_release(r56);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TEST(test_triangles),  TEST(test_masked_fill),  TEST(test_sdpa_values),
        TEST(test_sdpa_edges), TEST(test_sdpa_dropout), TEST(test_grad_fd),
        TEST(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
