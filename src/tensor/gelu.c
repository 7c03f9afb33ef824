/* gelu.c - erf and gelu (both of torch's forms), composed from the public
 * ops so that they fuse into the kernels around them and differentiate
 * through the ops' own rules. Each call adds a constant number of nodes:
 * O(1) graph work.
 *
 *   erf(x), float32-accurate (within 3 ulp of the true value, checked in
 *   tests/autograd/test_gelu.c against C's erf on a fine grid):
 *     |x| < 1:  x * P(x^2), P of degree 7
 *     |x| >= 1: sign(x) * (1 - exp(-a^2) * Q(1/a)), a = min(|x|, 4), Q of
 *               degree 9; past 4, 1 - erf is below half a float32 ulp of 1
 *   Both polynomials are least-squares fits (Chebyshev nodes, in double) of
 *   erf(x)/x over x^2 in [0, 1] and of erfc(x)*exp(x^2) over 1/x in
 *   [1/4, 1], made for this file. The derivative autograd takes is the
 *   fit's: within 2e-6 relative of 2/sqrt(pi) exp(-x^2).
 *   The branch for |x| >= 1 reads |x| where |x| >= 1 and 1 elsewhere (a
 *   where, not a max, whose gradient would be halved at the tie |x| = 1), so
 *   at x = 0 neither branch divides by zero and the gradient of the branch
 *   not taken is 0, not NaN.
 *   gelu(x) = x/2 * (1 + erf(x/sqrt(2)))                       (exact form)
 *   gelu(x) = x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))  (tanh form) */
#include "tensor.h"

#include <math.h>

#define SQRT1_2      0.70710678118654752440
#define SQRT_2_OV_PI 0.79788456080286535588

/* erf(x)/x = P(x^2) on |x| < 1, coefficients of s^0 .. s^7 */
static const double ERF_P[8] = {
    1.128379167e+00, -3.761263829e-01, 1.128378087e-01, -2.686536913e-02,
    5.220921704e-03, -8.483178994e-04, 1.126355577e-04, -9.670187530e-06,
};
/* erfc(a) * exp(a^2) = Q(1/a) on 1 <= a <= 4, coefficients of u^0 .. u^9 */
static const double ERF_Q[10] = {
    1.305839459e-04, 5.616074157e-01,  2.169814460e-02, -3.805961838e-01, 2.423437747e-01,
    2.189374187e-01, -5.166987174e-01, 4.251311764e-01, -1.749410520e-01, 2.997103139e-02,
};

/* c[0] + c[1] v + ... + c[n-1] v^(n-1) by Horner's rule; v borrowed */
static tc_tensor *poly(tc_tensor *v, const double *c, int n) {
    tc_scope s = {0};
    tc_tensor *r = tc_scope_scalar(&s, v, c[n - 1]);
    for (int k = n - 2; k >= 0 && !s.failed; k--) {
        tc_tensor *ck = tc_scope_scalar(&s, v, c[k]);
        tc_tensor *rv = TC_S(&s, tc_mul(r, v));
        r = TC_S(&s, tc_add(rv, ck));
    }
    return tc_scope_end(&s, r);
}

/* erf(x) for float x (the formulas above); x borrowed */
static tc_tensor *erf_of(tc_tensor *x) {
    tc_scope s = {0};
    tc_tensor *one = tc_scope_scalar(&s, x, 1), *four = tc_scope_scalar(&s, x, 4);
    tc_tensor *x2 = TC_S(&s, tc_mul(x, x));
    tc_tensor *near = s.failed ? NULL : TC_S(&s, poly(x2, ERF_P, 8));
    near = TC_S(&s, tc_mul(x, near)); /* |x| < 1 */
    tc_tensor *ax = TC_S(&s, tc_abs(x));
    tc_tensor *is_near = TC_S(&s, tc_lt(ax, one));
    tc_tensor *lo = TC_S(&s, tc_where(is_near, one, ax)); /* where, not max: no tie at 1 */
    tc_tensor *is_big = TC_S(&s, tc_lt(four, lo));
    tc_tensor *a = TC_S(&s, tc_where(is_big, four, lo)); /* NaN stays NaN */
    tc_tensor *u = TC_S(&s, tc_recip(a));
    tc_tensor *q = s.failed ? NULL : TC_S(&s, poly(u, ERF_Q, 10));
    tc_tensor *a2 = TC_S(&s, tc_mul(a, a));
    tc_tensor *na2 = TC_S(&s, tc_neg(a2));
    tc_tensor *e = TC_S(&s, tc_exp(na2));
    tc_tensor *eq = TC_S(&s, tc_mul(e, q));
    tc_tensor *far = TC_S(&s, tc_sub(one, eq)); /* erf(|x|), |x| >= 1 */
    tc_tensor *zero = tc_scope_scalar(&s, x, 0);
    tc_tensor *is_neg = TC_S(&s, tc_lt(x, zero)), *neg_far = TC_S(&s, tc_neg(far));
    tc_tensor *signed_far = TC_S(&s, tc_where(is_neg, neg_far, far));
    return tc_scope_end(&s, TC_S(&s, tc_where(is_near, near, signed_far)));
}

/* x as a float tensor: x itself (retained) or a float32 cast */
static tc_tensor *as_float(tc_tensor *x) {
    return tc_dtypes[x->node->dtype].is_float ? tc_retain(x) : tc_cast(x, TC_FLOAT32);
}

TC_API tc_tensor *tc_erf(tc_tensor *x) {
    TC_API_ENTER();
    tc_lock();
    tc_tensor *out = NULL;
    if (tc_tensor_check(x, "tc_erf", "x") == TC_OK) {
        tc_tensor *xf = as_float(x);
        out = xf ? erf_of(xf) : NULL;
        tc_release(xf);
    }
    tc_unlock();
    return out;
}

/* tanh(sqrt(2/pi) * (x + 0.044715 x^3)) or erf(x/sqrt(2)): the part in 1 + . */
static tc_tensor *gelu_inner(tc_scope *s, tc_tensor *x, bool approximate) {
    if (!approximate) {
        tc_tensor *k = tc_scope_scalar(s, x, SQRT1_2);
        tc_tensor *xs = TC_S(s, tc_mul(x, k));
        return s->failed ? NULL : TC_S(s, erf_of(xs));
    }
    tc_tensor *k = tc_scope_scalar(s, x, 0.044715), *c = tc_scope_scalar(s, x, SQRT_2_OV_PI);
    tc_tensor *x2 = TC_S(s, tc_mul(x, x));
    tc_tensor *x3 = TC_S(s, tc_mul(x2, x));
    tc_tensor *kx3 = TC_S(s, tc_mul(k, x3));
    tc_tensor *sum = TC_S(s, tc_add(x, kx3));
    tc_tensor *arg = TC_S(s, tc_mul(c, sum));
    return TC_S(s, tc_tanh(arg));
}

TC_API tc_tensor *tc_gelu(tc_tensor *x, bool approximate) {
    TC_API_ENTER();
    tc_lock();
    tc_tensor *out = NULL;
    if (tc_tensor_check(x, "tc_gelu", "x") == TC_OK) {
        tc_scope s = {0};
        tc_tensor *xf = TC_S(&s, as_float(x));
        tc_tensor *inner = s.failed ? NULL : gelu_inner(&s, xf, approximate);
        tc_tensor *one = s.failed ? NULL : tc_scope_scalar(&s, xf, 1);
        tc_tensor *half = s.failed ? NULL : tc_scope_scalar(&s, xf, 0.5);
        tc_tensor *hx = TC_S(&s, tc_mul(half, xf));
        tc_tensor *plus = TC_S(&s, tc_add(one, inner));
        out = tc_scope_end(&s, TC_S(&s, tc_mul(hx, plus)));
    }
    tc_unlock();
    return out;
}
