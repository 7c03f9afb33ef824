/* test_grad_einsum.c - gradients of tc_einsum against central finite
 * differences in double on the host (grad_check.h): a matmul, a batched
 * matmul with a transposed operand, a diagonal times a vector, "..."
 * broadcasting (the broadcast operand's gradient sums over the batch) and
 * three operands. Tolerances as test_grad.c's. */
#include "grad_check.h"

#define RTOL 2e-3
#define ATOL 2e-4

static tc_tensor *lib_einsum(tc_tensor *const *x, const void *arg) {
    const char *f = arg;
    int n = 1;
    for (const char *c = f; *c && *c != '-'; c++) n += *c == ',';
    return tc_einsum(f, n, x);
}

/* "ij,jk->ik": (2,3) @ (3,4) */
static int64_t host_mm(const double *const *x, double *out, const void *arg) {
    (void)arg;
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 4; k++) {
            out[i * 4 + k] = 0;
            for (int j = 0; j < 3; j++) out[i * 4 + k] += x[0][i * 3 + j] * x[1][j * 4 + k];
        }
    return 8;
}

/* "bij,bkj->bik": (2,2,3) and (2,4,3) */
static int64_t host_bmm_t(const double *const *x, double *out, const void *arg) {
    (void)arg;
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < 2; i++)
            for (int k = 0; k < 4; k++) {
                double acc = 0;
                for (int j = 0; j < 3; j++)
                    acc += x[0][b * 6 + i * 3 + j] * x[1][b * 12 + k * 3 + j];
                out[b * 8 + i * 4 + k] = acc;
            }
    return 16;
}

/* "ii,i->i": diag(A) * v, A (3,3), v (3) */
static int64_t host_diag(const double *const *x, double *out, const void *arg) {
    (void)arg;
    for (int i = 0; i < 3; i++) out[i] = x[0][i * 4] * x[1][i];
    return 3;
}

/* "...ij,jk->...ik": (2,2,3) @ (3,2) */
static int64_t host_ell(const double *const *x, double *out, const void *arg) {
    (void)arg;
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < 2; i++)
            for (int k = 0; k < 2; k++) {
                double acc = 0;
                for (int j = 0; j < 3; j++) acc += x[0][b * 6 + i * 3 + j] * x[1][j * 2 + k];
                out[b * 4 + i * 2 + k] = acc;
            }
    return 8;
}

/* "i,ij,j->": a^T B c, a (3), B (3,2), c (2) */
static int64_t host_three(const double *const *x, double *out, const void *arg) {
    (void)arg;
    out[0] = 0;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 2; j++) out[0] += x[0][i] * x[1][i * 2 + j] * x[2][j];
    return 1;
}

static void test_einsum_gradients(void **state) {
    (void)state;
    gc_case c = one_input(2, SHAPE(2, 3), -1, 1);
    add_input(&c, 2, SHAPE(3, 4), -1, 1);
    c.lib = lib_einsum, c.host = host_mm, c.arg = "ij,jk->ik";
    gc_check("ij,jk->ik", &c, RTOL, ATOL);

    c = one_input(3, SHAPE(2, 2, 3), -1, 1);
    add_input(&c, 3, SHAPE(2, 4, 3), -1, 1);
    c.lib = lib_einsum, c.host = host_bmm_t, c.arg = "bij,bkj->bik";
    gc_check("bij,bkj->bik", &c, RTOL, ATOL);

    c = one_input(2, SHAPE(3, 3), -1, 1);
    add_input(&c, 1, SHAPE(3), -1, 1);
    c.lib = lib_einsum, c.host = host_diag, c.arg = "ii,i->i";
    gc_check("ii,i->i", &c, RTOL, ATOL);

    c = one_input(3, SHAPE(2, 2, 3), -1, 1);
    add_input(&c, 2, SHAPE(3, 2), -1, 1);
    c.lib = lib_einsum, c.host = host_ell, c.arg = "...ij,jk->...ik";
    gc_check("...ij,jk->...ik", &c, RTOL, ATOL);

    c = one_input(1, SHAPE(3), -1, 1);
    add_input(&c, 2, SHAPE(3, 2), -1, 1);
    add_input(&c, 1, SHAPE(2), -1, 1);
    c.lib = lib_einsum, c.host = host_three, c.arg = "i,ij,j->";
    gc_check("i,ij,j->", &c, RTOL, ATOL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TEST(test_einsum_gradients),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
