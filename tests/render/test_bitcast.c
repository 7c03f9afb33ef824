/* test_bitcast.c - every dialect renders a BITCAST between 4- and 8-byte
 * types as a reinterpretation, never as a value conversion: float32 <->
 * int32 and float64 <-> int64 (tc_bitcast) in C (a memcpy), C99 (a union),
 * OpenCL (as_int, as_long, as_float, as_double) and CUDA (tc_bitcast<T>).
 * The source text is checked (no device needed); with NVRTC on the machine
 * the CUDA sources of those kernels, of the 16-bit float bitcasts and of a
 * cumprod (a REDUCE_PROD) are compiled too (skipped without it). On the CPU
 * the values are checked in tests/api/test_bitcast.c. */
#include "tc_test.h"
#include "tc_test_lower.h"

#include <string.h>

#include "render/render.h"
#include "runtime/runtime.h"

/* the source of y's last kernel in dialect d (name: its kernel's, or NULL) */
static char *render_last(const tc_dialect *d, tc_tensor *y, char *name, size_t name_size) {
    assert_non_null(y);
    tc_test_lowered l = tc_test_lower(y, &d->target);
    char *src = tc_render(d, l.k);
    if (!src) fprintf(stderr, "render: %s\n", tc_last_error());
    assert_non_null(src);
    if (name) snprintf(name, name_size, "%s", l.k->name);
    tc_test_lowered_free(&l);
    return src;
}

/* a realized input of 8 zeros of dtype dt */
static tc_tensor *input(tc_dtype dt) {
    tc_tensor *x = tc_zeros(1, (int64_t[]){8}, dt, NULL), *xr = tc_contiguous(x);
    assert_int_equal(tc_realize(&xr, 1), TC_OK);
    tc_release(x);
    return xr;
}

/* the source of the one kernel that bitcasts an input of dtype from to to */
static char *render_bitcast(const tc_dialect *d, tc_dtype from, tc_dtype to, char *name,
                            size_t name_size) {
    tc_tensor *x = input(from), *y = tc_bitcast(x, to);
    char *src = render_last(d, y, name, name_size);
    tc_release(x), tc_release(y);
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
        char *s = render_bitcast(&tc_dialect_opencl, cases[i].from, cases[i].to, NULL, 0);
        expect_in(s, cases[i].opencl, "OpenCL");
        tc_free(s);
        s = render_bitcast(&tc_dialect_cuda, cases[i].from, cases[i].to, NULL, 0);
        expect_in(s, cases[i].cuda, "CUDA");
        tc_free(s);
        s = render_bitcast(&tc_dialect_c, cases[i].from, cases[i].to, NULL, 0);
        expect_in(s, "__builtin_memcpy(&d_, &s_", "C");
        tc_free(s);
        s = render_bitcast(&tc_dialect_c_plain, cases[i].from, cases[i].to, NULL, 0);
        expect_in(s, "union", "C99");
        tc_free(s);
    }
    tc_shutdown();
}

/* NVRTC compiles the CUDA sources: the wide bitcasts, the 16-bit float ones
 * (integer ops over float32 bits) and a cumprod's product reduce */
static void test_cuda_sources_compile(void **state) {
    (void)state;
    tc_test_need_nvrtc();
    static const tc_dtype pairs[][2] = {{TC_FLOAT32, TC_INT32},  {TC_FLOAT64, TC_INT64},
                                        {TC_INT64, TC_FLOAT64},  {TC_FLOAT16, TC_INT16},
                                        {TC_UINT16, TC_FLOAT16}, {TC_BFLOAT16, TC_UINT16},
                                        {TC_INT16, TC_BFLOAT16}, {TC_FLOAT16, TC_BFLOAT16}};
    char name[128];
    for (size_t i = 0; i < sizeof pairs / sizeof *pairs; i++) {
        char *s = render_bitcast(&tc_dialect_cuda, pairs[i][0], pairs[i][1], name, sizeof name);
        tc_status st = tc_cuda_compile(s, name, "sm_80", true, NULL);
        if (st != TC_OK)
            fprintf(stderr, "%s -> %s: %s\n", tc_dtype_name(pairs[i][0]),
                    tc_dtype_name(pairs[i][1]), tc_last_error());
        assert_int_equal(st, TC_OK);
        tc_free(s);
    }
    tc_tensor *x = input(TC_FLOAT32), *r = tc_reshape(x, 2, (int64_t[]){2, 4});
    tc_tensor *p = tc_cumprod(r, 1);
    char *s = render_last(&tc_dialect_cuda, p, name, sizeof name);
    tc_status st = tc_cuda_compile(s, name, "sm_80", true, NULL);
    if (st != TC_OK) fprintf(stderr, "cumprod: %s\n", tc_last_error());
    assert_int_equal(st, TC_OK);
    tc_free(s);
    tc_release(x), tc_release(r), tc_release(p);
    tc_shutdown();
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_bitcast_sources),
                                       cmocka_unit_test(test_cuda_sources_compile)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
