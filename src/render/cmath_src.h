/* cmath_src.h - float32 exp2, log2 and sin for generated CPU kernels, as C
 * source that both becomes text (cmath.c stringifies it into the C
 * dialect's prelude) and compiles directly (tests/render/test_cmath.c).
 * The includer defines TC_CMATH_FN(...): #__VA_ARGS__ for text, __VA_ARGS__
 * for code. No preprocessor lines and no string literals may appear inside
 * a TC_CMATH_FN(...); the includer provides <math.h>, <stdint.h> and
 * <string.h>. Only ISO C99 is used (memcpy, fabsf, isless and the other
 * quiet comparison macros; GCC maps them to its builtins), so the same
 * text also serves the plain-C kernels of exported code (tc_export_c).
 *
 * Why: libm's exp2f/log2f/sinf are calls, so a loop holding one never
 * vectorizes. These are straight-line code: range reduction by integer
 * and bit operations on the float's bits (memcpy, unsigned arithmetic only:
 * no UB, no implementation-defined shifts), minimax polynomials (fitted
 * with a Remez exchange on relative error, coefficients rounded to float).
 * No tables, no calls, no branches, and no float ?: either: given
 * `c ? K : r` or a clamp to a constant, GCC threads the loop body into a
 * path where the result is constant and one that computes it, and then
 * cannot if-convert the float arithmetic back (it may trap), so the loop
 * stays scalar. Special values therefore come from integer masks
 * (tc_cm_mask/tc_cm_sel) and quiet comparisons (C99's isless...), and
 * reach the result through arithmetic (+ NaN, + -inf, * 0) on a value that
 * is finite for every input. Checked with gcc 12 at -march=x86-64, haswell
 * and native (AVX-512) and clang 14: the elementwise loops vectorize.
 *
 * Accuracy against double libm, with FMA contraction (kernels: -march=native
 * on a CPU with FMA) / without. Exhaustive over every float of the ranges
 * named (a throwaway harness), the rest from the sweeps of
 * tests/render/test_cmath.c, which asserts exp2/log2 <= 2 ulp and sin
 * <= 2e-7 below 1e5 (and up to 6.5e6 with FMA: <= 2e-5):
 *   tc_exp2f: |x| in [2^-12, 128): max 1.01 / 1.29 ulp; subnormal results
 *     (x in (-150, -126)) max 0.99 / 0.90 of the subnormal spacing; x >= 128
 *     -> inf, x <= -150 -> 0 (2^-150 rounds to 0 as in libm), NaN -> NaN.
 *   tc_log2f: [1/16, 16): max 1.67 / 1.79 ulp (the error repeats per
 *     binade; sweeps of all positive floats agree); subnormals 0.51 ulp;
 *     +0 and -0 -> -inf, x < 0 -> NaN, inf -> inf, NaN -> NaN.
 *   tc_sinf: absolute error max 9.8e-8 for |x| < 1e5; with FMA 8.8e-8 up
 *     to 1e6 and 9.5e-7 up to 6.5e6 (without FMA q*pi/2 is no longer exact
 *     past 1e5: 0.03 at 1e6, 0.25 at 6.5e6); |x| > 6.5e6, where floats are
 *     0.5 or more apart and only a multi-word reduction by 2/pi (not done
 *     here) gives sin: 0; +-inf, NaN -> NaN; -0 -> -0.
 */

TC_CMATH_FN(
static inline uint32_t tc_cm_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}
static inline float tc_cm_float(uint32_t u) {
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}
static inline uint32_t tc_cm_mask(int c) {
    return 0u - (uint32_t)(c != 0);
}
static inline float tc_cm_sel(uint32_t m, float a, float b) {
    return tc_cm_float((tc_cm_bits(a) & m) | (tc_cm_bits(b) & ~m));
}
/* max with NaN winning (torch's), branch-free: the C dialect's float max */
static inline float tc_fmaxf(float a, float b) {
    return tc_cm_sel(tc_cm_mask((a > b) | (a != a)), a, b);
}
)

/* exp2: x = n + f with n = round(x), f in [-0.5, 0.5]; 2^f by a degree-6
 * polynomial (relative error 2.6e-9); 2^n as two factors 2^(n>>1) and
 * 2^(n-(n>>1)), both normal for n in [-150, 128], so p*2^n rounds once, also
 * to a subnormal, and 2^128 overflows to inf. NaN reaches the result by
 * adding NaN (the clamps turned it into -150). */
TC_CMATH_FN(
static inline float tc_exp2f(float x) {
    float xc = tc_cm_sel(tc_cm_mask(isgreater(x, -150.0f)), x, -150.0f);
    xc = tc_cm_sel(tc_cm_mask(isless(xc, 128.0f)), xc, 128.0f);
    float t = xc + 12582912.0f;
    float f = xc - (t - 12582912.0f);
    uint32_t b = tc_cm_bits(t) - 0x4b400000u + 1000u;
    uint32_t h = b >> 1;
    float s1 = tc_cm_float((h - 373u) << 23), s2 = tc_cm_float((b - h - 373u) << 23);
    float p = 1.559467782e-04f;
    p = p * f + 1.340664341e-03f;
    p = p * f + 9.617692791e-03f;
    p = p * f + 5.550310388e-02f;
    p = p * f + 2.402265221e-01f;
    p = p * f + 6.931472421e-01f;
    p = p * f + 1.0f;
    return (p * s1) * s2 + tc_cm_float(tc_cm_mask(x != x) & 0x7fc00000u);
}
)

/* log2: subnormals are scaled by 2^23 first; x = 2^e * m with m in
 * [sqrt(2)/2, sqrt(2)) (found by subtracting the bits of sqrt(2)/2), so
 * f = m - 1 is exact and |f * Q(f)| <= 0.5 <= |e + f * Q(f)| when e != 0;
 * log2(1+f) = f * Q(f), Q of degree 9 (relative error 4.1e-9). The result
 * is finite for every input; 0, inf, negatives and NaN add -inf, inf or
 * NaN to it. */
TC_CMATH_FN(
static inline float tc_log2f(float x) {
    uint32_t sub = 0u - (uint32_t)isless(x, 1.17549435e-38f);
    uint32_t u = tc_cm_bits(x * tc_cm_float(0x3f800000u + (sub & 0x0b800000u)));
    uint32_t k = (u - 0x3f3504f3u + 0x40000000u) >> 23;
    float f = tc_cm_float(u - ((k - 128u) << 23)) - 1.0f;
    float e = (float)((int32_t)k - 128 - (int32_t)(sub & 23u));
    float q = -1.099495366e-01f;
    q = q * f + 1.861749440e-01f;
    q = q * f - 1.910627484e-01f;
    q = q * f + 2.046006173e-01f;
    q = q * f - 2.396174073e-01f;
    q = q * f + 2.885673940e-01f;
    q = q * f - 3.606966436e-01f;
    q = q * f + 4.808982313e-01f;
    q = q * f - 7.213473320e-01f;
    q = q * f + 1.442695022e+00f;
    uint32_t special = tc_cm_mask(isless(x, 0.0f) || x != x) & 0x7fc00000u;
    special |= tc_cm_mask(x == 0.0f) & 0xff800000u;
    special |= tc_cm_mask(x == INFINITY) & 0x7f800000u;
    return (e + f * q) + tc_cm_float(special);
}
)

/* sin: q = round(x * 2/pi), r = x - q*pi/2 in about [-pi/4, pi/4] with pi/2
 * in four parts (8, 7 and 5 significant bits, then 24); sin r = r + r^3 S(r^2)
 * and cos r = 1 + r^2 C(r^2) (relative errors 6.5e-9 and 6.4e-11); q's low
 * bits, read from the rounding sum's bits, choose cos (by a bit mask) and
 * the sign. Inputs beyond 6.5e6 are reduced as 0 and the result scaled by
 * 0 (NaN for inf and NaN); -0 is scaled by -1 (r + r^3 S gives +0). */
TC_CMATH_FN(
static inline float tc_sinf(float x) {
    uint32_t in_range = tc_cm_mask(islessequal(fabsf(x), 6.5e6f));
    float xr = tc_cm_float(tc_cm_bits(x) & in_range);
    uint32_t scale = in_range & 0x3f800000u;
    scale |= tc_cm_mask(!isless(fabsf(x), INFINITY)) & 0x7fc00000u;
    scale |= tc_cm_mask(tc_cm_bits(x) == 0x80000000u) & 0xbf800000u;
    float t = xr * 6.366197467e-01f + 12582912.0f;
    float q = t - 12582912.0f;
    uint32_t n = tc_cm_bits(t);
    float r = xr - q * 0x1.92p+0f;
    r = r - q * 0x1.fcp-12f;
    r = r - q * -0x1.58p-21f;
    r = r - q * 0x1.10b462p-30f;
    float r2 = r * r;
    float s = -1.950396254e-04f;
    s = s * r2 + 8.332100697e-03f;
    s = s * r2 - 1.666665524e-01f;
    s = r + (r * r2) * s;
    float c = 2.438356751e-05f;
    c = c * r2 - 1.388668199e-03f;
    c = c * r2 + 4.166661948e-02f;
    c = c * r2 - 0.5f;
    c = c * r2 + 1.0f;
    uint32_t odd = 0u - (n & 1u);
    uint32_t v = (tc_cm_bits(c) & odd) | (tc_cm_bits(s) & ~odd);
    return tc_cm_float(v ^ ((n & 2u) << 30)) * tc_cm_float(scale);
}
)
