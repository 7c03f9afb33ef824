/* math.c - the public unary math ops beyond elementwise.c's: rounding
 * (trunc, floor, ceil, round, sign), hyperbolic functions and their inverses,
 * and the smooth activations (softsign, hardswish, mish, quick_gelu, celu),
 * each composed from primitive ops so it fuses like any other elementwise op,
 * plus the derivatives autograd multiplies by (tc_math_grad). Each op is a
 * constant number of nodes: O(1) graph work per call.
 *
 * Float formulas (x float; ints and bool keep their value for the rounding
 * ops and are cast to float32 for the rest):
 *   trunc: x where |x| >= 2^23 (2^10 for float16, 2^7 for bfloat16, 2^52 for float64: already
 *          whole, or inf/NaN), else float(int32(x)) (int64 for float64)
 *   floor: t - (x < t)   ceil: t + (t < x)   with t = trunc(x)
 *   round: t plus sign(x) when |x - t| > 1/2, or == 1/2 and t is odd (half to
 *          even, as torch and numpy)
 *          the four keep x's sign on a zero result (C's and torch's: floor(-0.0),
 *          ceil(-0.5), trunc(-0.3), round(-0.4) are -0): where(r != 0, r, x*0),
 *          as the integer cast gives +0 (in the front end, so every device has it)
 *   sign:  (0 < x) - (x < 0), so NaN gives 0 (torch 1.13's answer)
 *   sinh, cosh: (e -+ 1/e)/2 with e = exp(x)
 *   asinh: sign(x) log(|x| + sqrt(x^2+1)), log|x| + ln 2 past |x| = 2^12
 *   acosh: log(x + sqrt(x-1)sqrt(x+1)), log x + ln 2 past 2^12; NaN below 1
 *   atanh: log((1+x)/(1-x))/2
 *   softsign: x/(1+|x|)   hardswish: x*min(max(x+3,0),6)/6
 *   mish: x*tanh(softplus x), softplus(x) = max(x,0) + log(1+exp(-|x|))
 *   quick_gelu: x*sigmoid(1.702x)
 *   celu(alpha): max(x,0) + min(alpha*(exp(x/alpha)-1), 0), composed from
 *          the public ops (so it differentiates through theirs)
 * Rounding ops and sign have gradient 0 (torch's); the others' derivatives
 * are in tc_math_grad.
 *
 * Node rule as in elementwise.c: a combinator consumes its arguments, so
 * every further use of a node takes a reference first (K). */
#include "ew_short.h"

#include <math.h>

#define LN_2 0.69314718055994530942

static tc_node *lt(tc_node *a, tc_node *b) {
    return tc_ew_binary(TC_OP_CMPLT, a, b);
}
/* x + v (x consumed) */
static tc_node *add_c(tc_node *x, double v) {
    tc_node *c = cnst(x, v);
    return add(x, c);
}
/* x * v (x consumed) */
static tc_node *mul_c(tc_node *x, double v) {
    tc_node *c = cnst(x, v);
    return mul(x, c);
}
/* cond as 0/1 in dt */
static tc_node *as01(tc_node *cond, tc_dtype dt) {
    return tc_ew_cast(cond, dt);
}

/* ---- rounding ---- */

/* 2^(mantissa bits): every float at least this large is a whole number */
static double whole_above(tc_dtype dt) {
    if (dt == TC_BFLOAT16) return 128.0;
    return dt == TC_FLOAT16 ? 1024.0 : dt == TC_FLOAT64 ? 4503599627370496.0 : 8388608.0;
}

/* the parts of float x (borrowed) that the rounding ops share: *small = |x|
 * below whole_above (false for inf and NaN), *ti = int32 (float64: int64) trunc of x where
 * small (0 elsewhere, so the cast never overflows), *t = *ti as x's dtype */
static void trunc_parts(tc_node *x, tc_node **small, tc_node **ti, tc_node **t) {
    tc_node *lim = cnst(x, whole_above(x->dtype));
    *small = lt(tc_ew_abs(K(x)), lim);
    tc_node *safe = tc_ew_where(K(*small), K(x), cnst(x, 0));
    *ti = tc_ew_cast(safe, x->dtype == TC_FLOAT64 ? TC_INT64 : TC_INT32); /* 2^52 needs int64 */
    *t = tc_ew_cast(K(*ti), x->dtype);
}

/* r (a rounding of x) with x's sign where r is zero: x*0 is +-0 with x's sign
 * (NaN for inf and NaN x, where r is not zero); both consumed */
static tc_node *signed_zero(tc_node *r, tc_node *x) {
    tc_node *is_nz = tc_ew_binary(TC_OP_CMPNE, K(r), cnst(r, 0));
    tc_node *z = mul(K(x), cnst(x, 0));
    tc_node_release(x);
    return tc_ew_where(is_nz, r, z);
}

/* trunc without the sign of a zero result (floor and ceil fix it after) */
static tc_node *trunc_unsigned(tc_node *x) {
    tc_node *small, *ti, *t;
    trunc_parts(x, &small, &ti, &t);
    tc_node_release(ti);
    return tc_ew_where(small, t, x);
}

static tc_node *build_trunc(tc_node *x) {
    if (!x || !tc_dtypes[x->dtype].is_float) return x; /* ints and bool are whole */
    return signed_zero(trunc_unsigned(K(x)), x);
}

/* floor (is_ceil false) or ceil: the trunc moved by one where it is on the
 * wrong side of x */
static tc_node *floor_ceil(tc_node *x, bool is_ceil) {
    if (!x || !tc_dtypes[x->dtype].is_float) return x;
    tc_node *t = trunc_unsigned(K(x));
    tc_node *off = is_ceil ? lt(K(t), K(x)) : lt(K(x), K(t));
    tc_node *step = as01(off, t ? t->dtype : TC_FLOAT32);
    return signed_zero(is_ceil ? add(t, step) : tc_ew_sub(t, step), x);
}

static tc_node *build_floor(tc_node *x) {
    return floor_ceil(x, false);
}

static tc_node *build_ceil(tc_node *x) {
    return floor_ceil(x, true);
}

static tc_node *build_round(tc_node *x) {
    if (!x || !tc_dtypes[x->dtype].is_float) return x;
    tc_node *small, *ti, *t;
    trunc_parts(x, &small, &ti, &t);
    tc_node *safe = tc_ew_where(K(small), K(x), cnst(x, 0));
    tc_node *frac = tc_ew_abs(tc_ew_sub(K(safe), K(t))); /* exact: t and x are close */
    tc_node *half = cnst(x, 0.5), *half2 = cnst(x, 0.5);
    tc_node *one_i = tc_ew_const(ti, 1), *zero_i = tc_ew_const(ti, 0);
    tc_node *is_odd = tc_ew_binary(TC_OP_CMPNE, tc_ew_binary(TC_OP_AND, ti, one_i), zero_i);
    tc_node *is_tie = tc_ew_not(tc_ew_binary(TC_OP_CMPNE, K(frac), half));
    tc_node *up = tc_ew_binary(TC_OP_OR, lt(half2, frac), tc_ew_binary(TC_OP_AND, is_tie, is_odd));
    tc_node *moved = add(t, tc_ew_where(up, tc_ew_sign(safe), cnst(x, 0)));
    return signed_zero(tc_ew_where(small, moved, K(x)), x);
}

tc_node *tc_ew_sign(tc_node *x) {
    if (!x || x->dtype == TC_BOOL) return x;
    tc_dtype dt = x->dtype;
    tc_node *pos = as01(lt(cnst(x, 0), K(x)), dt);
    if (!tc_dtypes[dt].is_signed) {
        tc_node_release(x);
        return pos;
    }
    tc_node *neg = as01(lt(x, cnst(x, 0)), dt);
    return tc_ew_sub(pos, neg);
}

/* ---- hyperbolic ---- */

/* (e + k/e) / 2 with e = exp(x): k = 1 cosh, k = -1 sinh */
static tc_node *exp_pair(tc_node *x, double k) {
    tc_node *e = tc_ew_exp(x);
    tc_node *inv = mul_c(recip(K(e)), k);
    return mul_c(add(e, inv), 0.5);
}

static tc_node *build_sinh(tc_node *x) {
    return exp_pair(x, -1);
}

static tc_node *build_cosh(tc_node *x) {
    return exp_pair(x, 1);
}

/* log(a + r) for a <= 2^12, log(a) + ln 2 above (r, which is ~a there,
 * would lose a to rounding and then overflow); a borrowed, r consumed */
static tc_node *log_a_plus_sqrt(tc_node *a, tc_node *r) {
    tc_node *big = lt(cnst(a, 4096.0), K(a));
    tc_node *near = tc_ew_log(add(K(a), r));
    tc_node *far = add_c(tc_ew_log(K(a)), LN_2);
    return tc_ew_where(big, far, near);
}

static tc_node *build_asinh(tc_node *x) {
    if (!x) return NULL;
    tc_node *a = tc_ew_abs(K(x));
    tc_node *r = log_a_plus_sqrt(a, tc_ew_unary(TC_OP_SQRT, add_c(mul(K(a), K(a)), 1)));
    tc_node_release(a);
    tc_node *r2 = K(r);
    return tc_ew_where(lt(x, cnst(x, 0)), tc_ew_unary(TC_OP_NEG, r), r2);
}

static tc_node *build_acosh(tc_node *x) {
    if (!x) return NULL;
    /* sqrt(x-1)*sqrt(x+1): NaN below 1, and no overflow far below -1 */
    tc_node *lo = tc_ew_unary(TC_OP_SQRT, add_c(K(x), -1));
    tc_node *r = log_a_plus_sqrt(x, mul(lo, tc_ew_unary(TC_OP_SQRT, add_c(K(x), 1))));
    tc_node_release(x);
    return r;
}

static tc_node *build_atanh(tc_node *x) {
    if (!x) return NULL;
    tc_node *den = add_c(tc_ew_unary(TC_OP_NEG, K(x)), 1);
    return mul_c(tc_ew_log(mul(add_c(x, 1), recip(den))), 0.5);
}

/* ---- activations ---- */

static tc_node *build_softsign(tc_node *x) {
    tc_node *den = add_c(tc_ew_abs(K(x)), 1);
    return mul(x, recip(den));
}

static tc_node *build_hardswish(tc_node *x) {
    tc_node *v = tc_ew_binary(TC_OP_MAX, add_c(K(x), 3), cnst(x, 0));
    tc_node *six = cnst(x, 6), *six2 = cnst(x, 6);
    tc_node *r6 = tc_ew_where(lt(six, K(v)), six2, v);
    return mul_c(mul(x, r6), 1.0 / 6.0);
}

tc_node *tc_ew_softplus(tc_node *x) {
    tc_node *pos = tc_ew_binary(TC_OP_MAX, K(x), cnst(x, 0));
    tc_node *tail = tc_ew_exp(tc_ew_unary(TC_OP_NEG, tc_ew_abs(x)));
    return add(pos, tc_ew_log(add_c(tail, 1)));
}

static tc_node *build_mish(tc_node *x) {
    tc_node *t = tc_ew_tanh(tc_ew_softplus(K(x)));
    return mul(x, t);
}

static tc_node *build_quick_gelu(tc_node *x) {
    tc_node *s = tc_ew_sigmoid(mul_c(K(x), 1.702));
    return mul(x, s);
}

/* ---- derivatives: x the input (output dtype), y the output, borrowed ---- */

typedef tc_node *(*factor_fn)(tc_node *x, tc_node *y);

static tc_node *d_sinh(tc_node *x, tc_node *y) {
    (void)y;
    return build_cosh(K(x));
}
static tc_node *d_cosh(tc_node *x, tc_node *y) {
    (void)y;
    return build_sinh(K(x));
}
static tc_node *d_asinh(tc_node *x, tc_node *y) { /* 1/sqrt(x^2+1) */
    (void)y;
    return recip(tc_ew_unary(TC_OP_SQRT, add_c(mul(K(x), K(x)), 1)));
}
static tc_node *d_acosh(tc_node *x, tc_node *y) { /* 1/(sqrt(x-1)sqrt(x+1)) */
    (void)y;
    tc_node *lo = tc_ew_unary(TC_OP_SQRT, add_c(K(x), -1));
    return recip(mul(lo, tc_ew_unary(TC_OP_SQRT, add_c(K(x), 1))));
}
static tc_node *d_atanh(tc_node *x, tc_node *y) { /* 1/((1-x)(1+x)) */
    (void)y;
    return recip(mul(add_c(tc_ew_unary(TC_OP_NEG, K(x)), 1), add_c(K(x), 1)));
}
static tc_node *d_softsign(tc_node *x, tc_node *y) { /* 1/(1+|x|)^2 */
    (void)y;
    tc_node *d = add_c(tc_ew_abs(K(x)), 1);
    return recip(mul(d, K(d)));
}
static tc_node *d_hardswish(tc_node *x, tc_node *y) { /* 0 below -3, 1 above 3, x/3+1/2 */
    (void)y;
    tc_node *mid = add_c(mul_c(K(x), 1.0 / 3.0), 0.5);
    tc_node *r = tc_ew_where(lt(cnst(x, 3), K(x)), cnst(x, 1), mid);
    return tc_ew_where(lt(K(x), cnst(x, -3)), cnst(x, 0), r);
}
static tc_node *d_mish(tc_node *x, tc_node *y) { /* t + x(1-t^2)sigmoid(x), t = tanh(sp x) */
    (void)y;
    tc_node *t = tc_ew_tanh(tc_ew_softplus(K(x)));
    tc_node *sech2 = add_c(tc_ew_unary(TC_OP_NEG, mul(K(t), K(t))), 1);
    return add(t, mul(mul(K(x), sech2), tc_ew_sigmoid(K(x))));
}
static tc_node *d_quick_gelu(tc_node *x, tc_node *y) { /* s + 1.702 x s(1-s) */
    (void)y;
    tc_node *s = tc_ew_sigmoid(mul_c(K(x), 1.702));
    tc_node *ds = mul(K(s), add_c(tc_ew_unary(TC_OP_NEG, K(s)), 1));
    return add(s, mul(mul_c(K(x), 1.702), ds));
}

static const factor_fn factors[TC_AG_COUNT] = {
    [TC_AG_SINH] = d_sinh,           [TC_AG_COSH] = d_cosh,   [TC_AG_ASINH] = d_asinh,
    [TC_AG_ACOSH] = d_acosh,         [TC_AG_ATANH] = d_atanh, [TC_AG_SOFTSIGN] = d_softsign,
    [TC_AG_HARDSWISH] = d_hardswish, [TC_AG_MISH] = d_mish,   [TC_AG_QUICK_GELU] = d_quick_gelu,
};

tc_node *tc_math_grad(tc_ag_op op, tc_node *x, tc_node *y) {
    if (op < 0 || op >= TC_AG_COUNT || !factors[op]) {
        TC_INTERNAL("math.c has no derivative for autograd op %d", (int)op);
        return NULL;
    }
    return factors[op](x, y);
}

/* ---- public ---- */

TC_API tc_tensor *tc_trunc(tc_tensor *a) {
    TC_API_ENTER();
    return tc_unary_api("tc_trunc", a, U_ANY, build_trunc, TC_AG_STEP);
}
TC_API tc_tensor *tc_floor(tc_tensor *a) {
    TC_API_ENTER();
    return tc_unary_api("tc_floor", a, U_ANY, build_floor, TC_AG_STEP);
}
TC_API tc_tensor *tc_ceil(tc_tensor *a) {
    TC_API_ENTER();
    return tc_unary_api("tc_ceil", a, U_ANY, build_ceil, TC_AG_STEP);
}
TC_API tc_tensor *tc_round(tc_tensor *a) {
    TC_API_ENTER();
    return tc_unary_api("tc_round", a, U_ANY, build_round, TC_AG_STEP);
}
TC_API tc_tensor *tc_sign(tc_tensor *a) {
    TC_API_ENTER();
    return tc_unary_api("tc_sign", a, U_ANY, tc_ew_sign, TC_AG_STEP);
}
TC_API tc_tensor *tc_sinh(tc_tensor *a) {
    TC_API_ENTER();
    return tc_unary_api("tc_sinh", a, U_FLOAT, build_sinh, TC_AG_SINH);
}
TC_API tc_tensor *tc_cosh(tc_tensor *a) {
    TC_API_ENTER();
    return tc_unary_api("tc_cosh", a, U_FLOAT, build_cosh, TC_AG_COSH);
}
TC_API tc_tensor *tc_asinh(tc_tensor *a) {
    TC_API_ENTER();
    return tc_unary_api("tc_asinh", a, U_FLOAT, build_asinh, TC_AG_ASINH);
}
TC_API tc_tensor *tc_acosh(tc_tensor *a) {
    TC_API_ENTER();
    return tc_unary_api("tc_acosh", a, U_FLOAT, build_acosh, TC_AG_ACOSH);
}
TC_API tc_tensor *tc_atanh(tc_tensor *a) {
    TC_API_ENTER();
    return tc_unary_api("tc_atanh", a, U_FLOAT, build_atanh, TC_AG_ATANH);
}
TC_API tc_tensor *tc_softsign(tc_tensor *a) {
    TC_API_ENTER();
    return tc_unary_api("tc_softsign", a, U_FLOAT, build_softsign, TC_AG_SOFTSIGN);
}
TC_API tc_tensor *tc_hardswish(tc_tensor *a) {
    TC_API_ENTER();
    return tc_unary_api("tc_hardswish", a, U_FLOAT, build_hardswish, TC_AG_HARDSWISH);
}
TC_API tc_tensor *tc_mish(tc_tensor *a) {
    TC_API_ENTER();
    return tc_unary_api("tc_mish", a, U_FLOAT, build_mish, TC_AG_MISH);
}
TC_API tc_tensor *tc_quick_gelu(tc_tensor *a) {
    TC_API_ENTER();
    return tc_unary_api("tc_quick_gelu", a, U_FLOAT, build_quick_gelu, TC_AG_QUICK_GELU);
}

TC_API tc_tensor *tc_celu(tc_tensor *a, double alpha) {
    TC_API_ENTER();
    tc_lock();
    tc_tensor *out = NULL;
    if (tc_tensor_check(a, "tc_celu", "a") != TC_OK) goto done;
    if (!(alpha != 0) || !isfinite(alpha)) {
        tc_error_set(TC_ERR_INVALID, "tc_celu: alpha %g must be finite and nonzero", alpha);
        goto done;
    }
    tc_scope s = {0};
    tc_tensor *x = tc_dtypes[a->node->dtype].is_float ? a : TC_S(&s, tc_cast(a, TC_FLOAT32));
    tc_tensor *zero = s.failed ? NULL : tc_scope_scalar(&s, x, 0);
    tc_tensor *inv = s.failed ? NULL : tc_scope_scalar(&s, x, 1 / alpha);
    tc_tensor *al = s.failed ? NULL : tc_scope_scalar(&s, x, alpha);
    tc_tensor *xs = TC_S(&s, tc_mul(x, inv));
    tc_tensor *e = TC_S(&s, tc_exp(xs));
    tc_tensor *one = s.failed ? NULL : tc_scope_scalar(&s, x, 1);
    tc_tensor *em1 = TC_S(&s, tc_sub(e, one));
    tc_tensor *scaled = TC_S(&s, tc_mul(al, em1));
    tc_tensor *neg = TC_S(&s, tc_minimum(scaled, zero));
    tc_tensor *pos = TC_S(&s, tc_maximum(x, zero));
    tc_tensor *r = TC_S(&s, tc_add(pos, neg));
    out = tc_scope_end(&s, r);
done:
    tc_unlock();
    return out;
}
