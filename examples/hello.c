/* hello.c - the smallest libtinyc program.
 *
 * Builds out = (a * b + c).sum(axis=1) for three 2x4 float32 tensors. Nothing
 * runs while the graph is built; tc_realize schedules it (the multiply, add
 * and sum fuse into one kernel), generates C source, compiles it and runs it
 * on the CPU. Prints the result, checks it against plain C, and prints how
 * many kernels libtinyc launched (tc_get_counters).
 *
 * Exit status: 0 on success; 1 with tc_last_error() on any failure.
 */
#include <stdio.h>

#include <tinyc.h>

#define ROWS 2
#define COLS 4

static int fail(const char *what) {
    fprintf(stderr, "hello: %s failed: %s\n", what, tc_last_error());
    return 1;
}

int main(void) {
    float a[ROWS * COLS], b[ROWS * COLS], c[ROWS * COLS], want[ROWS] = {0};
    for (int i = 0; i < ROWS * COLS; i++) {
        a[i] = (float)(i + 1);           /* 1 2 3 4 / 5 6 7 8 */
        b[i] = 0.5f * (float)(i % COLS); /* 0 .5 1 1.5 per row */
        c[i] = (float)(i / COLS);        /* 0 in row 0, 1 in row 1 */
        want[i / COLS] += a[i] * b[i] + c[i];
    }

    int64_t shape[2] = {ROWS, COLS};
    int axis = 1;
    int rc = 1;
    tc_tensor *ta = NULL, *tb = NULL, *tc = NULL, *ab = NULL, *abc = NULL, *out = NULL;
    if (!(ta = tc_from_data(a, TC_FLOAT32, 2, shape, NULL)) ||
        !(tb = tc_from_data(b, TC_FLOAT32, 2, shape, NULL)) ||
        !(tc = tc_from_data(c, TC_FLOAT32, 2, shape, NULL))) {
        rc = fail("tc_from_data");
        goto done;
    }
    /* lazy: these only build graph nodes */
    if (!(ab = tc_mul(ta, tb)) || !(abc = tc_add(ab, tc)) ||
        !(out = tc_sum(abc, 1, &axis, false))) {
        rc = fail("building (a * b + c).sum(axis=1)");
        goto done;
    }

    tc_reset_counters();
    if (tc_realize(&out, 1) != TC_OK) {
        rc = fail("tc_realize");
        goto done;
    }
    float got[ROWS];
    if (tc_to_host(out, got, sizeof got) != TC_OK) {
        rc = fail("tc_to_host");
        goto done;
    }
    tc_counters counters;
    tc_get_counters(&counters);

    rc = 0;
    printf("libtinyc %s: (a * b + c).sum(axis=1) =", tc_version());
    for (int i = 0; i < ROWS; i++) {
        printf(" %g", got[i]);
        float d = got[i] - want[i];
        if (d > 1e-4f || d < -1e-4f) {
            rc = 1;
        }
    }
    printf("\nkernels run: %lld\n", (long long)counters.kernel_count);
    if (rc != 0) {
        fprintf(stderr, "hello: wrong result, want %g %g\n", want[0], want[1]);
    }

done:
    tc_release(out);
    tc_release(abc);
    tc_release(ab);
    tc_release(tc);
    tc_release(tb);
    tc_release(ta);
    tc_shutdown();
    return rc;
}
