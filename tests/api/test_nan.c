/* test_nan.c - NaN propagates through max (elementwise and reduce), as in
 * torch: max(1, NaN) and max(NaN, 1) are NaN, and a row holding a NaN has a
 * NaN maximum wherever the NaN sits. Uses only tinyc.h. */
#include "tc_test.h"

#include <math.h>
#include <stdlib.h>

static void test_max_propagates_nan(void **state) {
    (void)state;
    const float x[6] = {1, NAN, 3, 5, 2, 4};
    const float y[6] = {NAN, 0, 1, 7, NAN, 2};
    tc_tensor *a = tc_from_data(x, TC_FLOAT32, 2, (int64_t[]){2, 3}, NULL);
    tc_tensor *b = tc_from_data(y, TC_FLOAT32, 2, (int64_t[]){2, 3}, NULL);
    tc_tensor *m = tc_maximum(a, b);
    float *got = tc_test_read(m);
    const float want[6] = {NAN, NAN, 3, 7, NAN, 4};
    assert_true(tc_allclose_f32(got, want, 6, 0, 0, "maximum with NaN"));
    free(got);
    int ax = 1;
    tc_tensor *r = tc_max(a, 1, &ax, false);
    got = tc_test_read(r);
    assert_true(isnan(got[0]));   /* NaN in the middle of the row */
    assert_true(got[1] == 5.0f);
    free(got);
    tc_release(a), tc_release(b), tc_release(m), tc_release(r);
    tc_shutdown();
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_max_propagates_nan)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
