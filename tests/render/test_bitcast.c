/* test_bitcast.c - every dialect renders a BITCAST between 4- and 8-byte
 * types as a reinterpretation, never as a value conversion: float32 <->
 * int32 and float64 <-> int64 (tc_bitcast) in C (a memcpy), C99 (a union),
 * OpenCL (as_int, as_long, as_float, as_double) and CUDA (tc_bitcast<T>).
 * Only the source text is checked (no device needed); on the CPU the values
 * are checked in tests/api/test_bitcast.c. */
#include "tc_test.h"
#include "tc_test_lower.h"

#include <string.h>

#include "render/render.h"

/* the source of the one kernel that bitcasts an input of dtype from to to */
static char *render_bitcast(const tc_dialect *d, tc_dtype from, tc_dtype to) {
    tc_tensor *x = tc_zeros(1, (int64_t[]){8}, from, NULL), *xr = tc_contiguous(x);
    assert_int_equal(tc_realize(&xr, 1), TC_OK);
    tc_tensor *y = tc_bitcast(xr, to);
    assert_non_null(y);
    tc_test_lowered l = tc_test_lower(y, &d->target);
    char *src = tc_render(d, l.k);
    if (!src) fprintf(stderr, "render: %s\n", tc_last_error());
    assert_non_null(src);
    tc_test_lowered_free(&l);
    tc_release(x), tc_release(xr), tc_release(y);
    return src;
}

static void expect_in(const char *src, const char *needle, const char *what) {
    if (!strstr(src, needle)) fail_msg("%s: no \"%s\" in\n%s", what, needle, src);
}

static void test_bitcast_sources(void **state) {
    (void)state;
    static const struct {
        tc_dtype from, to;
        const char *opencl, *cuda; /* what each prints */
    } cases[] = {
        {TC_FLOAT32, TC_INT32, "as_int(", "tc_bitcast<int>("},
        {TC_INT32, TC_FLOAT32, "as_float(", "tc_bitcast<float>("},
        {TC_FLOAT64, TC_INT64, "as_long(", "tc_bitcast<long long>("},
        {TC_INT64, TC_FLOAT64, "as_double(", "tc_bitcast<double>("},
        {TC_FLOAT64, TC_UINT64, "as_ulong(", "tc_bitcast<unsigned long long>("},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *s = render_bitcast(&tc_dialect_opencl, cases[i].from, cases[i].to);
        expect_in(s, cases[i].opencl, "OpenCL");
        tc_free(s);
        s = render_bitcast(&tc_dialect_cuda, cases[i].from, cases[i].to);
        expect_in(s, cases[i].cuda, "CUDA");
        tc_free(s);
        s = render_bitcast(&tc_dialect_c, cases[i].from, cases[i].to);
        expect_in(s, "__builtin_memcpy(&d_, &s_", "C");
        tc_free(s);
        s = render_bitcast(&tc_dialect_c_plain, cases[i].from, cases[i].to);
        expect_in(s, "union", "C99");
        tc_free(s);
    }
    tc_shutdown();
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_bitcast_sources)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
