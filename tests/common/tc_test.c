/* tc_test.c - see tc_test.h. */
#include "tc_test.h"

#include "runtime/runtime.h" /* tc_nvrtc_available */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double load(const void *p, tc_dtype dt, int64_t i) {
    switch (dt) {
    case TC_FLOAT32: return ((const float *)p)[i];
    case TC_FLOAT16: {
        uint16_t h = ((const uint16_t *)p)[i];
        int e = (h >> 10) & 31, m = h & 1023;
        double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, e - 25);
        return (h & 0x8000) ? -v : v;
    }
    case TC_INT32: return ((const int32_t *)p)[i];
    case TC_INT64: return (double)((const int64_t *)p)[i];
    case TC_UINT8: return ((const uint8_t *)p)[i];
    case TC_BOOL: return ((const uint8_t *)p)[i];
    case TC_INT8: return ((const int8_t *)p)[i];
    case TC_INT16: return ((const int16_t *)p)[i];
    case TC_UINT16: return ((const uint16_t *)p)[i];
    case TC_UINT32: return ((const uint32_t *)p)[i];
    case TC_FLOAT64: return ((const double *)p)[i];
    case TC_UINT64: return (double)((const uint64_t *)p)[i];
    case TC_BFLOAT16: {
        uint32_t bits = (uint32_t)((const uint16_t *)p)[i] << 16;
        float f;
        memcpy(&f, &bits, 4);
        return f;
    }
    case TC_DTYPE_COUNT: break;
    }
    return NAN;
}

bool tc_allclose(const void *got, const void *want, tc_dtype dt, int64_t n, double rtol,
                 double atol, const char *what) {
    bool exact = dt != TC_FLOAT32 && dt != TC_FLOAT16 && dt != TC_FLOAT64 && dt != TC_BFLOAT16;
    int64_t bad = 0;
    double maxdiff = 0;
    for (int64_t i = 0; i < n; i++) {
        double g = load(got, dt, i), w = load(want, dt, i);
        bool ok;
        if (isnan(w) || isnan(g)) ok = isnan(w) && isnan(g);
        else if (isinf(w) || isinf(g)) ok = g == w;
        else ok = exact ? g == w : fabs(g - w) <= atol + rtol * fabs(w);
        if (!isnan(g) && !isnan(w) && !isinf(g) && !isinf(w) && fabs(g - w) > maxdiff)
            maxdiff = fabs(g - w);
        if (!ok) {
            if (bad < 8)
                fprintf(stderr, "  %s[%lld]: got %.9g want %.9g\n", what ? what : "value",
                        (long long)i, g, w);
            bad++;
        }
    }
    if (bad)
        fprintf(stderr, "  %s: %lld of %lld mismatched, max |diff| %.3g (rtol %g atol %g)\n",
                what ? what : "value", (long long)bad, (long long)n, maxdiff, rtol, atol);
    return bad == 0;
}

bool tc_allclose_f32(const float *got, const float *want, int64_t n, double rtol, double atol,
                     const char *what) {
    return tc_allclose(got, want, TC_FLOAT32, n, rtol, atol, what);
}

void tc_assert_error(tc_status code, const char *needle, const char *file, int line) {
    const char *msg = tc_last_error();
    tc_status got = tc_last_status();
    if (got != code || !msg || !strstr(msg, needle)) {
        fprintf(stderr, "%s:%d: expected %s containing \"%s\", got %s \"%s\"\n", file, line,
                tc_status_string(code), needle, tc_status_string(got), msg ? msg : "(null)");
        fail();
    }
}

void *tc_test_read(tc_tensor *t) {
    size_t nbytes = (size_t)tc_numel(t) * tc_dtype_size(tc_get_dtype(t));
    void *p = malloc(nbytes ? nbytes : 1);
    assert_non_null(p);
    if (tc_to_host(t, p, nbytes) != TC_OK) {
        fprintf(stderr, "tc_to_host failed: %s\n", tc_last_error());
        free(p);
        fail();
    }
    return p;
}

tc_tensor *tc_test_randn(int ndim, const int64_t *shape, uint64_t seed, float lo, float hi) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    float *d = malloc(sizeof(float) * (size_t)(n ? n : 1));
    assert_non_null(d);
    uint64_t s = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    for (int64_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        d[i] = lo + (hi - lo) * (float)((s >> 40) & 0xFFFFFF) / 16777216.0f;
    }
    tc_tensor *t = tc_from_data(d, TC_FLOAT32, ndim, shape, NULL);
    free(d);
    assert_non_null(t);
    return t;
}

#include "schedule/schedule.h"
#include "tensor/tensor.h"

void tc_check_schedule_many(tc_tensor *const *ts, int n, int kernels, double rtol, double atol,
                            const char *what) {
    for (int i = 0; i < n; i++) assert_non_null(ts[i]);
    int got = tc_schedule_kernel_count((tc_tensor **)ts, n);
    if (got != kernels) {
        fprintf(stderr, "%s: expected %d kernels, got %d\n", what, kernels, got);
        tc_node *b[8];
        for (int i = 0; i < n && i < 8; i++) b[i] = tc_node_base(tc_tensor_node(ts[i]));
        tc_schedule *s = tc_schedule_create(b, n < 8 ? n : 8);
        if (s) tc_schedule_dump(stderr, s);
        tc_schedule_free(s);
        for (int i = 0; i < n; i++) tc_node_dump(stderr, tc_tensor_node(ts[i]));
    }
    assert_int_equal(got, kernels);
    void **want = calloc(n > 0 ? (size_t)n : 1, sizeof *want);
    assert_non_null(want);
    for (int i = 0; i < n; i++) {
        tc_tensor *t = ts[i];
        size_t nbytes = (size_t)tc_numel(t) * tc_dtype_size(tc_get_dtype(t));
        want[i] = malloc(nbytes ? nbytes : 1);
        assert_non_null(want[i]);
        if (tc_ref_eval(tc_tensor_node(t), want[i]) != TC_OK) {
            fprintf(stderr, "%s: reference failed: %s\n", what, tc_last_error());
            fail();
        }
    }
    tc_counters before, after;
    tc_get_counters(&before);
    assert_int_equal(tc_realize((tc_tensor **)ts, n), TC_OK);
    tc_get_counters(&after);
    bool ok = true;
    for (int i = 0; i < n; i++) {
        void *got_v = tc_test_read(ts[i]);
        ok &= tc_allclose(got_v, want[i], tc_get_dtype(ts[i]), tc_numel(ts[i]), rtol, atol, what);
        free(got_v);
        free(want[i]);
    }
    free(want);
    bool count_ok = after.kernel_count - before.kernel_count == kernels;
    if (!count_ok)
        fprintf(stderr, "%s: %lld kernels ran, expected %d\n", what,
                (long long)(after.kernel_count - before.kernel_count), kernels);
    assert_true(ok);
    assert_true(count_ok);
}

void tc_check_schedule(tc_tensor *t, int kernels, double rtol, double atol, const char *what) {
    tc_check_schedule_many(&t, 1, kernels, rtol, atol, what);
}

void tc_test_need_nvrtc(void) {
    char why[200];
    if (!tc_nvrtc_available(why, sizeof why)) {
        fprintf(stderr, "no NVRTC: %s\n", why);
        skip();
    }
}

void tc_test_check_promotion(const tc_dtype (*cases)[3], size_t n) {
    for (size_t k = 0; k < n; k++) {
        tc_tensor *a = tc_zeros(1, (const int64_t[]){2}, cases[k][0], NULL);
        tc_tensor *b = tc_zeros(1, (const int64_t[]){2}, cases[k][1], NULL);
        tc_tensor *s = tc_add(a, b);
        assert_non_null(s);
        if (tc_get_dtype(s) != cases[k][2])
            fail_msg("%s + %s gives %s, want %s", tc_dtype_name(cases[k][0]),
                     tc_dtype_name(cases[k][1]), tc_dtype_name(tc_get_dtype(s)),
                     tc_dtype_name(cases[k][2]));
        tc_release(s), tc_release(a), tc_release(b);
    }
}
