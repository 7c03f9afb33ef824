/* test_cmath.c - the C dialect's own exp2/log2/sin (src/render/cmath_src.h)
 * measured against double libm:
 *  - compiled into this test (so the ASan/UBSan build checks the bit
 *    tricks), over dense sweeps of float bit patterns and special values;
 *  - as generated kernels (tc_exp2/tc_log2/tc_sin on the CPU device: the
 *    prelude text compiled by the runtime with its own flags), float32 and
 *    float16 (computed in float, rounded once);
 *  - vectorization: the .so of a softmax and of elementwise exp2/log2/sin
 *    kernels holds packed float FMAs (the polynomials: a libm call leaves
 *    none in these kernels) and no call to a libm function.
 * Prints the measured maxima (the accuracy table of cmath_src.h). */
#include "tc_test.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TC_CMATH_FN(...) __VA_ARGS__
#include "render/cmath_src.h"
#include "render/render.h"

/* ---- sweeps over float bit patterns ------------------------------------ */

static float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* the floats are ordered like these integers: -0 and +0 both map to 0 */
static int64_t key_of(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return (u & 0x80000000u) ? -(int64_t)(u & 0x7fffffffu) : (int64_t)u;
}

static float float_of(int64_t k) {
    return k < 0 ? from_bits((uint32_t)(-k) | 0x80000000u) : from_bits((uint32_t)k);
}

/* every stride-th float in [lo, hi], appended to *xs (realloc'ed) */
static void sweep(float **xs, int64_t *n, float lo, float hi, int64_t stride) {
    int64_t a = key_of(lo), b = key_of(hi), m = (b - a) / stride + 1;
    float *p = realloc(*xs, sizeof(float) * (size_t)(*n + m));
    assert_non_null(p);
    for (int64_t i = 0; i < m; i++) p[*n + i] = float_of(a + i * stride);
    *xs = p;
    *n += m;
}

/* ---- error measures ----------------------------------------------------- */

/* spacing of float32 at |w| (the subnormal spacing below 2^-126) */
static double ulp32(double w) {
    int e;
    frexp(fabs(w), &e);
    return ldexp(1.0, (e - 1 < -126 ? -126 : e - 1) - 23);
}

/* |got - want| in units of want's float spacing; inf counts as 2^128 next to a
 * finite want; NaN and inf must match exactly (else 1e9) */
static double ulp_err(float got, double want) {
    if (isnan(want)) return isnan(got) ? 0 : 1e9;
    if (isinf(want)) return isinf(got) && (got > 0) == (want > 0) ? 0 : 1e9;
    if (fabs(want) >= 0x1p128) want = copysign(0x1p128, want); /* float32 rounds it to inf */
    double g = isinf(got) ? copysign(ldexp(1.0, 128), got) : (double)got;
    if (isnan(got)) return 1e9;
    return fabs(g - want) / ulp32(want);
}

typedef struct {
    double err;
    float at;
} worst;

static void note(worst *w, double err, float x) {
    if (err > w->err || (isnan(err) && !isnan(w->err))) w->err = err, w->at = x;
}

typedef enum { F_EXP2, F_LOG2, F_SIN } fn;

static double ref(fn f, float x) {
    switch (f) {
    case F_EXP2: return exp2((double)x);
    case F_LOG2: return x < 0 ? NAN : x == 0 ? -INFINITY : log2((double)x);
    case F_SIN: return isinf(x) ? NAN : sin((double)x);
    }
    return NAN;
}

static float ours(fn f, float x) {
    switch (f) {
    case F_EXP2: return tc_exp2f(x);
    case F_LOG2: return tc_log2f(x);
    case F_SIN: return tc_sinf(x);
    }
    return NAN;
}

/* results of f over xs through the library: a CPU kernel */
static float *kernel_results(fn f, const float *xs, int64_t n) {
    tc_tensor *a = tc_from_data(xs, TC_FLOAT32, 1, (int64_t[]){n}, NULL);
    assert_non_null(a);
    tc_tensor *y = f == F_EXP2 ? tc_exp2(a) : f == F_LOG2 ? tc_log2(a) : tc_sin(a);
    assert_non_null(y);
    float *got = tc_test_read(y);
    tc_release(a), tc_release(y);
    return got;
}

/* ---- float32 accuracy, in this test and in kernels ---------------------- */

/* max ulp error of exp2 over normal results and over subnormal results (in
 * units of the subnormal spacing); checks the stated bounds */
static void check_exp2(const char *where, const float *xs, const float *got, int64_t n) {
    worst normal = {0, 0}, sub = {0, 0};
    for (int64_t i = 0; i < n; i++) {
        double want = exp2((double)xs[i]);
        note(want < 0x1p-126 ? &sub : &normal, ulp_err(got[i], want), xs[i]);
    }
    printf("  exp2 %-8s normal results: max %.3f ulp (x=%a); subnormal: %.3f ulp (x=%a); %lld points\n",
           where, normal.err, (double)normal.at, sub.err, (double)sub.at, (long long)n);
    assert_true(normal.err <= 2.0);
    assert_true(sub.err <= 2.0);
}

static void check_log2(const char *where, const float *xs, const float *got, int64_t n) {
    worst w = {0, 0};
    for (int64_t i = 0; i < n; i++) note(&w, ulp_err(got[i], ref(F_LOG2, xs[i])), xs[i]);
    printf("  log2 %-8s max %.3f ulp (x=%a); %lld points\n", where, w.err, (double)w.at, (long long)n);
    assert_true(w.err <= 2.0);
}

/* absolute error of sin per range of |x|; |x| < 1e5 is asserted everywhere,
 * up to 6.5e6 where the compiler contracted the reduction into FMAs */
static void check_sin(const char *where, const float *xs, const float *got, int64_t n, bool fma) {
    static const double edge[] = {1e2, 1e4, 1e5, 1e6, 6.5e6};
    worst w[5] = {{0, 0}};
    double ulps = 0;
    for (int64_t i = 0; i < n; i++) {
        double ax = fabs((double)xs[i]), want = sin((double)xs[i]);
        int b = 0;
        while (b < 4 && ax >= edge[b]) b++;
        if (ax <= 6.5e6) note(&w[b], fabs((double)got[i] - want), xs[i]);
        if (ax < 1e2) ulps = fmax(ulps, ulp_err(got[i], want));
    }
    printf("  sin  %-8s max abs error: |x|<1e2 %.3g, <1e4 %.3g, <1e5 %.3g, <1e6 %.3g, <=6.5e6 %.3g "
           "(at %a); |x|<1e2 in ulp %.2f\n",
           where, w[0].err, w[1].err, w[2].err, w[3].err, w[4].err, (double)w[4].at, ulps);
    for (int b = 0; b < 3; b++) assert_true(w[b].err <= 2e-7);
    if (fma) assert_true(w[3].err <= 2e-7 && w[4].err <= 2e-5);
}

/* the inputs: dense where the reductions have edges, strided elsewhere;
 * `thin` multiplies the strides (kernels get fewer points) */
static float *exp2_inputs(int64_t thin, int64_t *n) {
    float *xs = NULL;
    *n = 0;
    sweep(&xs, n, -160.0f, 130.0f, 397 * thin);
    sweep(&xs, n, -150.5f, -125.5f, 1 * thin);  /* subnormal results and their edge */
    sweep(&xs, n, 127.0f, 128.5f, 1 * thin);    /* overflow edge */
    sweep(&xs, n, -1.0f, 1.0f, 1031 * thin);
    return xs;
}

static float *log2_inputs(int64_t thin, int64_t *n) {
    float *xs = NULL;
    *n = 0;
    sweep(&xs, n, 0.0f, INFINITY, 401 * thin);         /* every binade, subnormals too */
    sweep(&xs, n, 0.5f, 2.0f, 3 * thin);               /* around 1 and the reduction's edges */
    sweep(&xs, n, 0x1p-149f, 0x1p-120f, 17 * thin);    /* subnormals */
    return xs;
}

static float *sin_inputs(int64_t thin, int64_t *n) {
    float *xs = NULL;
    *n = 0;
    sweep(&xs, n, -1e5f, 1e5f, 509 * thin);
    sweep(&xs, n, 1e5f, 6.5e6f, 31 * thin);
    sweep(&xs, n, -7.0f, 7.0f, 1021 * thin);
    return xs;
}

static float *ours_over(fn f, const float *xs, int64_t n) {
    float *got = malloc(sizeof(float) * (size_t)n);
    assert_non_null(got);
    for (int64_t i = 0; i < n; i++) got[i] = ours(f, xs[i]);
    return got;
}

#if defined(__x86_64__) || defined(__i386__)
static bool host_has_fma(void) {
    return __builtin_cpu_supports("fma");
}
#else
static bool host_has_fma(void) {
    return true; /* aarch64, ppc64le and riscv64 kernels have FMA */
}
#endif

static void test_accuracy_in_process(void **state) {
    (void)state;
    int64_t n;
    float *xs = exp2_inputs(1, &n), *got = ours_over(F_EXP2, xs, n);
    check_exp2("here", xs, got, n);
    free(xs), free(got);
    xs = log2_inputs(1, &n), got = ours_over(F_LOG2, xs, n);
    check_log2("here", xs, got, n);
    free(xs), free(got);
    xs = sin_inputs(1, &n), got = ours_over(F_SIN, xs, n);
#ifdef __FP_FAST_FMAF
    check_sin("here", xs, got, n, true);
#else
    check_sin("here", xs, got, n, false);
#endif
    free(xs), free(got);
}

static void test_accuracy_in_kernels(void **state) {
    (void)state;
    int64_t n;
    float *xs = exp2_inputs(8, &n), *got = kernel_results(F_EXP2, xs, n);
    check_exp2("kernel", xs, got, n);
    free(xs), free(got);
    xs = log2_inputs(8, &n), got = kernel_results(F_LOG2, xs, n);
    check_log2("kernel", xs, got, n);
    free(xs), free(got);
    xs = sin_inputs(8, &n), got = kernel_results(F_SIN, xs, n);
    check_sin("kernel", xs, got, n, host_has_fma());
    free(xs), free(got);
    tc_shutdown();
}

/* ---- special values ------------------------------------------------------ */

typedef struct {
    fn f;
    float x, want; /* want compared bit for bit, except any NaN matches NaN */
} special;

static bool same(float a, float b) {
    return (isnan(a) && isnan(b)) || (a == b && signbit(a) == signbit(b));
}

static void test_special_values(void **state) {
    (void)state;
    const special cases[] = {
        {F_EXP2, NAN, NAN},           {F_EXP2, -NAN, NAN},
        {F_EXP2, INFINITY, INFINITY}, {F_EXP2, -INFINITY, 0.0f},
        {F_EXP2, 128.0f, INFINITY},   {F_EXP2, 1000.0f, INFINITY},
        {F_EXP2, 3e38f, INFINITY},    {F_EXP2, -3e38f, 0.0f},
        {F_EXP2, -150.0f, 0.0f},      {F_EXP2, -149.0f, 0x1p-149f},
        {F_EXP2, -126.0f, 0x1p-126f}, {F_EXP2, -140.5f, 0x1.6ap-141f},
        {F_EXP2, 0.0f, 1.0f},         {F_EXP2, -0.0f, 1.0f},
        {F_EXP2, 1.0f, 2.0f},         {F_EXP2, 10.0f, 1024.0f},
        {F_EXP2, 127.0f, 0x1p127f},   {F_EXP2, -1.0f, 0.5f},
        {F_LOG2, NAN, NAN},           {F_LOG2, INFINITY, INFINITY},
        {F_LOG2, -INFINITY, NAN},     {F_LOG2, -1.0f, NAN},
        {F_LOG2, -0x1p-149f, NAN},    {F_LOG2, 0.0f, -INFINITY},
        {F_LOG2, -0.0f, -INFINITY},   {F_LOG2, 1.0f, 0.0f},
        {F_LOG2, 2.0f, 1.0f},         {F_LOG2, 0.5f, -1.0f},
        {F_LOG2, 0x1p-149f, -149.0f}, {F_LOG2, 0x1p-130f, -130.0f},
        {F_LOG2, 0x1p127f, 127.0f},   {F_LOG2, 0x1.fffffep127f, 128.0f},
        {F_SIN, NAN, NAN},            {F_SIN, INFINITY, NAN},
        {F_SIN, -INFINITY, NAN},      {F_SIN, 0.0f, 0.0f},
        {F_SIN, -0.0f, -0.0f},        {F_SIN, 0x1p-149f, 0x1p-149f},
        {F_SIN, -1e-20f, -1e-20f},    {F_SIN, 1e30f, 0.0f},
        {F_SIN, 7e6f, 0.0f},
    };
    enum { N = sizeof cases / sizeof cases[0] };
    float xs[3][N], got_k[3][N];
    int64_t cnt[3] = {0, 0, 0};
    for (int i = 0; i < N; i++) xs[cases[i].f][cnt[cases[i].f]++] = cases[i].x;
    for (int f = 0; f < 3; f++) {
        float *g = kernel_results((fn)f, xs[f], cnt[f]);
        memcpy(got_k[f], g, sizeof(float) * (size_t)cnt[f]);
        free(g);
    }
    int64_t at[3] = {0, 0, 0};
    int bad = 0;
    for (int i = 0; i < N; i++) {
        const special *c = &cases[i];
        float here = ours(c->f, c->x), kern = got_k[c->f][at[c->f]++];
        if (!same(here, c->want) || !same(kern, c->want)) {
            fprintf(stderr, "%s(%a): got %a here, %a in a kernel, want %a\n",
                    c->f == F_EXP2 ? "exp2" : c->f == F_LOG2 ? "log2" : "sin", (double)c->x,
                    (double)here, (double)kern, (double)c->want);
            bad++;
        }
    }
    assert_int_equal(bad, 0);
    tc_shutdown();
}

/* ---- float16: computed in float, rounded once --------------------------- */

static double ulp16(double w) {
    int e;
    frexp(fabs(w), &e);
    return ldexp(1.0, (e - 1 < -14 ? -14 : e - 1) - 10);
}

static void test_float16_kernels(void **state) {
    (void)state;
    enum { N = 65536 };
    _Float16 *xs = malloc(sizeof(_Float16) * N), *got = NULL;
    assert_non_null(xs);
    for (int i = 0; i < N; i++) {
        uint16_t u = (uint16_t)i;
        memcpy(&xs[i], &u, sizeof u);
    }
    for (int f = 0; f < 3; f++) {
        tc_tensor *a = tc_from_data(xs, TC_FLOAT16, 1, (int64_t[]){N}, NULL);
        tc_tensor *y = f == F_EXP2 ? tc_exp2(a) : f == F_LOG2 ? tc_log2(a) : tc_sin(a);
        assert_non_null(y);
        got = tc_test_read(y);
        double worst_err = 0;
        for (int i = 0; i < N; i++) {
            float x = (float)xs[i];
            double want = ref((fn)f, x);
            if (isnan(x) || isnan(want) || isinf(want) || fabs(want) > 65504.0) {
                /* beyond float16's range: inf (or NaN where the math says so) */
                bool ok = isnan(want) ? isnan((float)got[i])
                                      : isinf((float)got[i]) && (got[i] > 0) == (want > 0);
                if (fabs(want) > 65504.0 && fabs(want) < 65520.0) ok = ok || fabs((float)got[i]) == 65504.0f;
                if (!ok) fprintf(stderr, "float16 fn %d x=%a: got %a\n", f, (double)x, (double)got[i]);
                assert_true(ok);
                continue;
            }
            /* correctly rounded up to the float error: half a float16 spacing and a bit */
            worst_err = fmax(worst_err, fabs((double)got[i] - want) / ulp16(want));
        }
        printf("  float16 %s: max %.4f float16 ulp over all 65536 inputs\n",
               f == F_EXP2 ? "exp2" : f == F_LOG2 ? "log2" : "sin ", worst_err);
        assert_true(worst_err <= 0.5 + 1.0 / 1024);
        free(got);
        tc_release(a), tc_release(y);
    }
    free(xs);
    tc_shutdown();
}

/* ---- vectorization --------------------------------------------------------- */

/* a fresh kernel cache directory for this process, so the .so files found
 * there are the kernels built below */
static char cache_dir[64];

static void fresh_cache(void) {
    snprintf(cache_dir, sizeof cache_dir, "/tmp/tc_cmath_XXXXXX");
    assert_non_null(mkdtemp(cache_dir));
    assert_int_equal(setenv("TC_CACHEDIR", cache_dir, 1), 0);
    tc_shutdown(); /* forget the cache directory read so far */
}

static void remove_cache(void) {
    DIR *d = opendir(cache_dir);
    assert_non_null(d);
    struct dirent *e;
    char path[512];
    while ((e = readdir(d)))
        if (e->d_name[0] != '.') {
            snprintf(path, sizeof path, "%s/%s", cache_dir, e->d_name);
            unlink(path);
        }
    closedir(d);
    rmdir(cache_dir);
}

typedef struct {
    int sos;        /* .so files read */
    int packed;     /* packed float FMAs (multiplies on a CPU without FMA) */
    int libm_calls; /* calls to exp2f, log2f, sinf (or anything named so) */
} disasm;

/* disassembles every .so of the cache directory */
static disasm scan_kernels(void) {
    disasm r = {0, 0, 0};
    bool fma = host_has_fma();
    DIR *d = opendir(cache_dir);
    assert_non_null(d);
    struct dirent *e;
    char cmd[600], ln[512];
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 4 || strcmp(e->d_name + len - 3, ".so")) continue;
        snprintf(cmd, sizeof cmd, "objdump -d --no-show-raw-insn '%s/%s'", cache_dir, e->d_name);
        FILE *p = popen(cmd, "r");
        assert_non_null(p);
        r.sos++;
        while (fgets(ln, sizeof ln, p)) {
            bool vec_reg = strstr(ln, "%ymm") || strstr(ln, "%zmm") || strstr(ln, "%xmm");
            bool packed = strstr(ln, "ps ") || strstr(ln, "ps\t");
            bool arith = fma ? strstr(ln, "fmadd") || strstr(ln, "fnmadd") || strstr(ln, "fmsub")
                             : strstr(ln, "mulps") != NULL;
            if (vec_reg && packed && arith) r.packed++;
            if (strstr(ln, "call") && (strstr(ln, "exp2f") || strstr(ln, "log2f") || strstr(ln, "sinf")))
                r.libm_calls++;
        }
        assert_int_equal(pclose(p), 0);
    }
    closedir(d);
    return r;
}

static void test_kernels_vectorize(void **state) {
    (void)state;
#if !defined(__x86_64__)
    skip(); /* the scan reads x86 mnemonics */
#else
    if (system("objdump --version >/dev/null 2>&1") != 0) skip();
    fresh_cache();
    /* softmax over rows (one fused kernel: max, sum of exp2, store), checked
     * against double */
    enum { R = 24, C = 1000 };
    float *x = malloc(sizeof(float) * R * C);
    assert_non_null(x);
    for (int i = 0; i < R * C; i++) x[i] = (float)(sin(i * 0.37) * 6.0);
    tc_tensor *a = tc_from_data(x, TC_FLOAT32, 2, (int64_t[]){R, C}, NULL);
    int ax = 1;
    tc_tensor *m = tc_max(a, 1, &ax, true), *d = tc_sub(a, m), *ex = tc_exp(d);
    tc_tensor *s = tc_sum(ex, 1, &ax, true), *y = tc_div(ex, s);
    assert_int_equal(tc_schedule_kernel_count(&y, 1), 1);
    float *got = tc_test_read(y);
    double err = 0;
    for (int r = 0; r < R; r++) {
        double mx = -INFINITY, sum = 0;
        for (int c = 0; c < C; c++) mx = fmax(mx, x[r * C + c]);
        for (int c = 0; c < C; c++) sum += exp(x[r * C + c] - mx);
        for (int c = 0; c < C; c++)
            err = fmax(err, fabs(got[r * C + c] - exp(x[r * C + c] - mx) / sum) / (exp(x[r * C + c] - mx) / sum));
    }
    printf("  softmax %dx%d: max relative error %.3g\n", R, C, err);
    assert_true(err < 1e-5);
    free(got), free(x);
    tc_release(a), tc_release(m), tc_release(d), tc_release(ex), tc_release(s), tc_release(y);
    disasm k = scan_kernels();
    printf("  softmax kernel: %d packed float FMAs, %d libm calls\n", k.packed, k.libm_calls);
    assert_int_equal(k.sos, 1);
    assert_int_equal(k.libm_calls, 0);
    assert_true(k.packed >= 6); /* exp2: 6 FMAs per vector */
    remove_cache();

    /* elementwise exp2, log2, sin kernels: a constant trip count, and one
     * large enough to be split across threads (a runtime trip count) */
    for (int f = 0; f < 6; f++) {
        fresh_cache();
        int64_t n = f < 3 ? 1 << 14 : 1 << 16;
        float *v = malloc(sizeof(float) * (size_t)n);
        assert_non_null(v);
        for (int64_t i = 0; i < n; i++) v[i] = 0.001f + (float)i * 0.01f;
        free(kernel_results((fn)(f % 3), v, n));
        free(v);
        k = scan_kernels();
        printf("  %s kernel of %lld: %d packed float FMAs, %d libm calls\n",
               f % 3 == F_EXP2 ? "exp2" : f % 3 == F_LOG2 ? "log2" : "sin", (long long)n, k.packed,
               k.libm_calls);
        assert_int_equal(k.sos, 1);
        assert_int_equal(k.libm_calls, 0);
        assert_true(k.packed >= 6); /* exp2: 6 FMAs per vector */
        remove_cache();
    }
    tc_shutdown();
#endif
}

/* the prelude text is the same source: it names every function */
/* tc_fmaxf, the C dialect's float max: NaN wins either side, as torch's */
static void test_fmax(void **state) {
    (void)state;
    assert_true(isnan(tc_fmaxf(NAN, 1.0f)) && isnan(tc_fmaxf(1.0f, NAN)) && isnan(tc_fmaxf(NAN, NAN)));
    assert_true(tc_fmaxf(-INFINITY, 3.0f) == 3.0f && tc_fmaxf(INFINITY, 3.0f) == INFINITY);
    assert_true(tc_fmaxf(2.0f, -5.0f) == 2.0f && tc_fmaxf(-5.0f, 2.0f) == 2.0f);
    assert_true(tc_fmaxf(-0.0f, -1.0f) == 0.0f && signbit(tc_fmaxf(-0.0f, -1.0f)));
}

static void test_prelude_text(void **state) {
    (void)state;
    const char *names[] = {"#include <math.h>", "#include <stdint.h>", "static inline float tc_exp2f(float x)",
                           "static inline float tc_log2f(float x)", "static inline float tc_sinf(float x)"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        assert_non_null(strstr(tc_cmath_prelude, names[i]));
    assert_true(tc_dialect_c.preamble == tc_cmath_prelude);
    assert_string_equal(tc_dialect_c.math_fn[TC_OP_EXP2], "tc_exp2f");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prelude_text),       cmocka_unit_test(test_special_values),
        cmocka_unit_test(test_fmax),
        cmocka_unit_test(test_accuracy_in_process), cmocka_unit_test(test_accuracy_in_kernels),
        cmocka_unit_test(test_float16_kernels),    cmocka_unit_test(test_kernels_vectorize),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
