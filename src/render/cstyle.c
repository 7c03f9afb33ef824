/* cstyle.c - the C-style renderer core: UOps -> C-family source.
 *
 * Each UOp becomes an expression; ALUs, casts and loads used once at their
 * own loop depth are inlined into their user, others get a variable
 * (ridxN, accN, valN, aluN, castN). An expression is inlined only while it
 * nests at most TC_RENDER_NEST_MAX brackets deep (render.h), so a chain of
 * any length becomes statements of bounded depth; an operand that a format
 * names several times (OpenCL's max, the guarded division) gets a variable
 * when its copies would pass TC_RENDER_REPEAT_MAX characters, so the text
 * stays linear in the UOps. Deciding scans the expression: a chain's
 * expressions are bounded by the same limits, so the cost is linear in the
 * UOps times the bound. Constants print exactly (%.9g for
 * float32 round-trips). Integer division by a value not known to be nonzero
 * is guarded so a kernel never traps. Work-group UOps (SPECIAL,
 * DEFINE_LOCAL, BARRIER, IF) print through the dialect's strings (a CPU
 * kernel's scratch DEFINE_LOCAL is a plain array, tileN); float16
 * values of dialects with is_half_in_float, and bfloat16 values in every
 * dialect, are floats rounded after each op.
 */
#include "render.h"

#include <math.h>
#include <string.h>

/* bfloat16 in C (both C dialects): its bits in buffers, a float in
 * variables (render.h); to bfloat16 rounds to nearest even, NaN stays a
 * quiet NaN */
static const char c_bf16[] =
    "#ifndef TC_BF16\n#define TC_BF16\n"
    "static inline float tc_bf2f(unsigned short b) {\n"
    "  uint32_t u = (uint32_t)b << 16;\n  float f;\n  memcpy(&f, &u, sizeof f);\n  return f;\n}\n"
    "static inline unsigned short tc_f2bf(float f) {\n"
    "  uint32_t u;\n  memcpy(&u, &f, sizeof u);\n"
    "  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);\n"
    "  u += 0x7fffu + ((u >> 16) & 1u);\n  return (unsigned short)(u >> 16);\n}\n"
    "static inline float tc_bfround(float f) { return tc_bf2f(tc_f2bf(f)); }\n"
    "#endif\n";

const tc_dialect tc_dialect_c = {
    .name = "C",
    .scratch_suffix = " __attribute__((aligned(64)))",
    .preamble = tc_cmath_prelude,
    .kernel_prefix = "",
    /* gcc -O2's very-cheap cost model keeps loops with a runtime trip count
     * (the thread split's {start, end}) scalar; in a map kernel the default
     * model vectorizes them (exp over 4M floats 7.4 ms libm, 17 ms scalar
     * tc_exp2f, 0.9 ms vectorized). Not for reduce kernels: the register
     * tiles of opt.c lose their SLP packing under it (matmul 240 -> 1.5
     * GFLOPS). */
    .map_prefix = "__attribute__((optimize(\"vect-cost-model=dynamic\"))) ",
    /* a transposing copy's square of copies (opt.c's plan_transpose): gcc 12
     * -O2 vectorized its loop over the square's rows (16 loads of a row at
     * once) and took every element out of those vectors to store it, 22,000
     * instructions for 256 copies, 0.16 -> 1.2 ms for a 256-channel conv
     * weight made channels-last; with the loop vectorizer off its SLP packs
     * each stored line: 0.085 ms */
    .copy_tile_prefix = "__attribute__((optimize(\"no-tree-loop-vectorize\"))) ",
    .prefetch = "__builtin_prefetch(&%1$s[%2$s]);",
    .buf_prefix = "",
    .restrict_kw = "restrict ",
    .half_type = "_Float16",
    .bf16_preamble = c_bf16,
    .int64_suffix = "LL",
    .math_fn = {[TC_OP_EXP2] = "tc_exp2f", [TC_OP_LOG2] = "tc_log2f", [TC_OP_SIN] = "tc_sinf",
                [TC_OP_SQRT] = "sqrtf"},
    /* float64: libm's double functions (the prelude's polynomials are
     * float32 only); the reference evaluator calls the same ones */
    .math_fn_f64 = {[TC_OP_EXP2] = "exp2", [TC_OP_LOG2] = "log2", [TC_OP_SIN] = "sin",
                    [TC_OP_SQRT] = "sqrt"},
    /* out of line: a kernel of the differential suite whose four reduce
     * stages each recomputed six transcendentals took gcc 0.56 s with 46
     * inlined calls, 0.19 s calling these */
    .math_fn_shared = {[TC_OP_EXP2] = "tc_exp2f_shared", [TC_OP_LOG2] = "tc_log2f_shared",
                       [TC_OP_SIN] = "tc_sinf_shared"},
    /* NaN wins as in the ternary, but through bit masks (cmath_src.h): gcc
     * makes the ternary a branch, which relu and max-pool mispredict half
     * the time (beautiful_mnist's first max-pool: 24 -> 6 ms) */
    .float_max = "tc_fmaxf(%1$s, %2$s)",
    /* comparisons turned into floats by bit masks too: gcc branches on
     * (float)(0.0f < x), relu's gradient, and on c ? a : b of floats
     * (a channels-last copy of dy with relu' fused: 10.6 -> 1.8 ms) */
    .bool_float = "tc_cm_float(tc_cm_mask(%1$s) & 0x3f800000u)",
    .float_where = "tc_cm_sel(tc_cm_mask(%1$s), %2$s, %3$s)",
    .target = {.has_local = false, .has_vec = true},
};

/* float16 in plain C: uint16_t in buffers, float in variables, rounded
 * after every op (render.h); the conversions round to nearest even and keep
 * infinities, NaNs (quieted) and subnormals */
static const char plain_half[] =
    "#ifndef TC_PLAIN_HALF\n#define TC_PLAIN_HALF\n"
    "static inline float tc_h2f(uint16_t h) {\n"
    "  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 31u, m = h & 1023u, bits;\n"
    "  float f;\n"
    "  if (e == 0u && m != 0u) { /* subnormal: m * 2^-24, exact */\n"
    "    f = (float)m * 5.9604644775390625e-8f;\n    return sign ? -f : f;\n  }\n"
    "  if (e == 31u) bits = sign | 0x7f800000u | (m << 13);\n"
    "  else if (e != 0u) bits = sign | ((e + 112u) << 23) | (m << 13);\n"
    "  else bits = sign;\n"
    "  memcpy(&f, &bits, sizeof f);\n  return f;\n}\n"
    "static inline uint16_t tc_f2h(float f) {\n"
    "  uint32_t x, ax, sign, h, rem;\n  memcpy(&x, &f, sizeof x);\n"
    "  sign = (x >> 16) & 0x8000u;\n  ax = x & 0x7fffffffu;\n"
    "  if (ax > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));\n"
    "  if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* 65520 and up: inf */\n"
    "  if (ax < 0x38800000u) { /* below 2^-14: a subnormal half, or 0 */\n"
    "    uint32_t m = (ax & 0x7fffffu) | 0x800000u, shift = 126u - (ax >> 23), half;\n"
    "    if (ax < 0x33000000u) return (uint16_t)sign;\n"
    "    h = m >> shift;\n    rem = m & ((1u << shift) - 1u);\n    half = 1u << (shift - 1u);\n"
    "    if (rem > half || (rem == half && (h & 1u))) h++;\n"
    "    return (uint16_t)(sign | h);\n  }\n"
    "  h = (ax - 0x38000000u) >> 13;\n  rem = ax & 0x1fffu;\n"
    "  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++; /* a carry is right too */\n"
    "  return (uint16_t)(sign | h);\n}\n"
    "#endif\n";

const tc_dialect tc_dialect_c_plain = {
    .name = "C99",
    .preamble = tc_cmath_prelude,
    .half_preamble = plain_half,
    .kernel_prefix = "",
    .buf_prefix = "",
    .restrict_kw = "restrict ",
    .half_type = "uint16_t",
    .is_half_in_float = true,
    .half_load = "tc_h2f(%1$s[%2$s])",
    .half_store = "%1$s[%2$s] = tc_f2h(%3$s);",
    .half_round = "tc_h2f(tc_f2h(%1$s))",
    .bf16_preamble = c_bf16,
    .int64_suffix = "LL",
    .math_fn = {[TC_OP_EXP2] = "tc_exp2f", [TC_OP_LOG2] = "tc_log2f", [TC_OP_SIN] = "tc_sinf",
                [TC_OP_SQRT] = "sqrtf"},
    .math_fn_f64 = {[TC_OP_EXP2] = "exp2", [TC_OP_LOG2] = "log2", [TC_OP_SIN] = "sin",
                    [TC_OP_SQRT] = "sqrt"},
    .float_max = "tc_fmaxf(%1$s, %2$s)",
    .bool_float = "tc_cm_float(tc_cm_mask(%1$s) & 0x3f800000u)",
    .float_where = "tc_cm_sel(tc_cm_mask(%1$s), %2$s, %3$s)",
    .bitcast_any = "(((union { %1$s s_; %2$s d_; }){%3$s}).d_)",
    .target = {.has_local = false, .has_vec = false},
};

typedef struct {
    const tc_dialect *d;      /* language */
    const tc_kernel_uops *k;  /* program */
    char **expr;              /* per UOp: its expression or variable name */
    int *user_depth;          /* per UOp: depth of its single user, -1 if several/none */
    tc_strbuf out;            /* the source */
    int indent;               /* current indentation level */
    bool is_math_shared;      /* transcendentals call the dialect's math_fn_shared */
} rctx;

/* the type of a value of dtype dt */
static const char *ctype(const rctx *r, tc_dtype dt) {
    if (dt == TC_FLOAT16) return r->d->is_half_in_float ? "float" : r->d->half_type;
    if (dt == TC_BFLOAT16) return "float"; /* rounded after each op (render.h) */
    return r->d->type_names[dt] ? r->d->type_names[dt] : tc_dtypes[dt].cname;
}

/* vectors (C only): GCC/Clang vector extensions. tc_<type><n> is a value,
 * tc_<type><n>_u the same vector at element alignment (loads at any index) */
static const char *const vec_elem[TC_DTYPE_COUNT] = {
    [TC_FLOAT32] = "float", [TC_INT32] = "int",     [TC_UINT8] = "uchar",
    [TC_INT8] = "schar",    [TC_UINT16] = "ushort", [TC_INT16] = "short",
    [TC_BOOL] = "mask", /* lanes of -1 (true) or 0: a compare's result (float_helpers' type) */
};
static const char *const vec_ctype[TC_DTYPE_COUNT] = {
    [TC_FLOAT32] = "float", [TC_INT32] = "int",              [TC_UINT8] = "unsigned char",
    [TC_INT8] = "signed char", [TC_UINT16] = "unsigned short", [TC_INT16] = "short",
};
enum { VEC_MAX = 16 };

/* a GPU dialect's vector type (vec_type: "float4"); the names of one
 * thread's last dialect, so a name stays valid for the whole render */
static const char *gpu_vtype(const rctx *r, tc_dtype dt, int lanes) {
    static _Thread_local const tc_dialect *of;
    static _Thread_local char names[TC_DTYPE_COUNT][VEC_MAX + 1][24];
    if (of != r->d) memset(names, 0, sizeof names), of = r->d;
    char *n = names[dt][lanes];
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
    if (!n[0])
        snprintf(n, sizeof names[0][0], r->d->vec_type,
                 r->d->vec_elem[dt] ? r->d->vec_elem[dt] : ctype(r, dt), lanes);
#pragma GCC diagnostic pop
    return n;
}

/* the type of u's value: its dtype's, or a vector of it */
static const char *utype(const rctx *r, const tc_uop *u) {
    static char names[TC_DTYPE_COUNT][VEC_MAX + 1][24]; /* written once per name, same text */
    if (u->vcount > 1 && u->vcount <= VEC_MAX && r->d->vec_type)
        return gpu_vtype(r, u->dtype, u->vcount);
    if (u->vcount <= 1 || u->vcount > VEC_MAX || !vec_elem[u->dtype]) return ctype(r, u->dtype);
    char *n = names[u->dtype][u->vcount];
    if (!n[0]) snprintf(n, sizeof names[0][0], "tc_%s%d", vec_elem[u->dtype], u->vcount);
    return n;
}

/* a vector cast of a narrow integer (8 or 16 bits) to float on a target
 * with GCC vector types: gcc 12 converts such lanes one by one with
 * __builtin_convertvector (16 vpextrb + vcvtusi2ss for 16 uint8), but
 * widens them to int32 lanes and converts those in one instruction each
 * (vpmovzxbd, vcvtdq2ps); the int32 vector of n lanes is float_helpers'
 * tc_mask<n>. 8-bit lanes widen to 16 bits first: widened straight to
 * 32 bits gcc 12 gathers them byte by byte (16 uint8 to float: 48
 * instructions, 64 movzbl and 32 vpinsrd a step of MNIST's first layer,
 * 17.7 GFLOP/s; through 16 bits 11, vpmovzxbw + vpmovzxwd, on AVX-512 and
 * AVX2 alike). No <immintrin.h>: gcc takes 0.4 s to parse it. */
static bool is_narrow_int_cast(const rctx *r, const tc_uop *u) {
    tc_dtype from = u->srcs[0]->dtype;
    return !r->d->vec_type && u->op == TC_UOP_CAST && u->vcount > 1 && u->dtype == TC_FLOAT32 &&
           (from == TC_UINT8 || from == TC_INT8 || from == TC_UINT16 || from == TC_INT16);
}

/* the 16-bit lane type an 8-bit narrow cast widens through (NONE: none) */
static tc_dtype narrow_step(const tc_uop *u) {
    tc_dtype from = u->srcs[0]->dtype;
    return from == TC_UINT8 ? TC_UINT16 : from == TC_INT8 ? TC_INT16 : TC_DTYPE_COUNT;
}

/* float vectors of n lanes (bytes wide): a lane-wise select by a compare's
 * mask, and max with NaN winning (the scalar tc_fmaxf) through it */
static void float_helpers(rctx *r, int n, int bytes) {
    tc_sb_printf(&r->out,
                 "typedef int tc_mask%d __attribute__((vector_size(%d)));\n"
                 "static inline tc_float%d tc_sel_float%d(tc_mask%d m, tc_float%d a, tc_float%d b) {\n"
                 "  return (tc_float%d)((m & (tc_mask%d)a) | (~m & (tc_mask%d)b));\n}\n"
                 "static inline tc_float%d tc_max_float%d(tc_float%d a, tc_float%d b) {\n"
                 "  return tc_sel_float%d((a > b) | (a != a), a, b);\n}\n",
                 n, bytes, n, n, n, n, n, n, n, n, n, n, n, n, n);
}

/* tc_exp2f of the prelude (cmath_src.h) lane-wise over n floats: the same
 * steps; in a guard of its own (a kernel may use the type without it) */
static void exp2_helper(rctx *r, int n, int bytes) {
    tc_sb_printf(&r->out, "#ifndef TC_VEC_EXP2_float%d\n#define TC_VEC_EXP2_float%d\n", n, n);
    tc_sb_printf(&r->out, "typedef unsigned int tc_uint%d __attribute__((vector_size(%d)));\n", n,
                 bytes);
    tc_sb_printf(&r->out,
                 "static inline tc_float%d tc_exp2_float%d(tc_float%d x) {\n"
                 "  tc_float%d z = {0};\n"
                 "  tc_float%d xc = tc_sel_float%d(x > -150.0f, x, z - 150.0f);\n"
                 "  xc = tc_sel_float%d(xc < 128.0f, xc, z + 128.0f);\n"
                 "  tc_float%d t = xc + 12582912.0f, f = xc - (t - 12582912.0f);\n"
                 "  tc_uint%d b = (tc_uint%d)t - 0x4b400000u + 1000u, h = b >> 1;\n"
                 "  tc_float%d s1 = (tc_float%d)((h - 373u) << 23), s2 = (tc_float%d)((b - h - 373u) << 23);\n"
                 "  tc_float%d p = z + 1.559467782e-04f;\n"
                 "  p = p * f + 1.340664341e-03f;\n  p = p * f + 9.617692791e-03f;\n"
                 "  p = p * f + 5.550310388e-02f;\n  p = p * f + 2.402265221e-01f;\n"
                 "  p = p * f + 6.931472421e-01f;\n  p = p * f + 1.0f;\n"
                 "  return (p * s1) * s2 + (tc_float%d)((tc_uint%d)(x != x) & 0x7fc00000u);\n}\n"
                 "#endif\n",
                 n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, n);
}

/* typedefs of the vector types the kernel uses (and max for float vectors),
 * each group in an include guard: kernels concatenated into one file
 * (tc_export_c) define each once */
static void vector_typedefs(rctx *r) {
    bool used[TC_DTYPE_COUNT][VEC_MAX + 1] = {{false}}, exp2[VEC_MAX + 1] = {false};
    for (int i = 0; i < r->k->n_uops; i++) {
        const tc_uop *u = r->k->uops[i];
        if (u->vcount > 1 && u->vcount <= VEC_MAX && vec_elem[u->dtype])
            used[u->dtype == TC_BOOL ? TC_FLOAT32 : u->dtype][u->vcount] = true; /* masks: with floats */
        if (u->vcount > 1 && u->vcount <= VEC_MAX && is_narrow_int_cast(r, u) &&
            narrow_step(u) != TC_DTYPE_COUNT)
            used[narrow_step(u)][u->vcount] = true; /* the lanes it widens through */
        if (u->vcount > 1 && u->vcount <= VEC_MAX && u->op == TC_UOP_ALU && u->alu == TC_OP_EXP2)
            exp2[u->vcount] = true;
    }
    for (int t = 0; t < TC_DTYPE_COUNT; t++) {
        for (int n = 2; n <= VEC_MAX; n++) {
            if (!used[t][n]) continue;
            const char *e = vec_elem[t], *c = vec_ctype[t];
            int bytes = n * (int)tc_dtypes[t].size;
            tc_sb_printf(&r->out, "#ifndef TC_VEC_%s%d\n#define TC_VEC_%s%d\n", e, n, e, n);
            tc_sb_printf(&r->out,
                         "typedef %s tc_%s%d __attribute__((vector_size(%d)));\n"
                         "typedef %s tc_%s%d_u __attribute__((vector_size(%d), aligned(%d)));\n",
                         c, e, n, bytes, c, e, n, bytes, (int)tc_dtypes[t].size);
            if (t == TC_FLOAT32) float_helpers(r, n, bytes);
            tc_sb_printf(&r->out, "#endif\n");
            if (t == TC_FLOAT32 && exp2[n]) exp2_helper(r, n, bytes);
        }
    }
}

/* scalar calls of the transcendentals that have an out-of-line form */
static int shared_math_calls(const rctx *r, bool *used) {
    int n = 0;
    for (int i = 0; i < r->k->n_uops; i++) {
        const tc_uop *u = r->k->uops[i];
        if (u->op != TC_UOP_ALU || u->vcount > 1 || !r->d->math_fn_shared[u->alu] ||
            u->dtype == TC_FLOAT64)
            continue; /* the shared helpers are float32's */
        n++;
        if (used) used[u->alu] = true;
    }
    return n;
}

/* the out-of-line helpers the kernel calls: one copy of each polynomial,
 * each in an include guard (kernels concatenated into one file by
 * tc_export_c define each once) */
static void shared_math_fns(rctx *r) {
    bool used[TC_OP_COUNT] = {false};
    shared_math_calls(r, used);
    for (int op = 0; op < TC_OP_COUNT; op++)
        if (used[op])
            tc_sb_printf(&r->out,
                         "#ifndef TC_FN_%s\n#define TC_FN_%s\n"
                         "static __attribute__((noinline)) float %s(float x) { return %s(x); }\n"
                         "#endif\n",
                         r->d->math_fn_shared[op], r->d->math_fn_shared[op],
                         r->d->math_fn_shared[op], r->d->math_fn[op]);
}

/* the element type of a global buffer of dtype dt */
static const char *buf_ctype(const rctx *r, tc_dtype dt) {
    if (dt == TC_BFLOAT16) /* its bits */
        return r->d->type_names[dt] ? r->d->type_names[dt] : tc_dtypes[dt].cname;
    return dt == TC_FLOAT16 ? r->d->half_type : ctype(r, dt);
}

/* float16 kept in a float: its value rounded to float16 */
static bool is_half_float(const rctx *r, tc_dtype dt) {
    return dt == TC_FLOAT16 && r->d->is_half_in_float;
}

static char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static char *fmt(const char *f, ...) {
    tc_strbuf b = {0};
    va_list ap;
    va_start(ap, f);
    tc_sb_vprintf(&b, f, ap);
    va_end(ap);
    if (b.failed) {
        tc_sb_free(&b);
        return NULL;
    }
    return b.s;
}

static char *render_const(const rctx *r, const tc_uop *u) {
    switch (u->dtype) {
    case TC_FLOAT32:
    case TC_BFLOAT16: /* a float holding a bfloat16 value: printed exactly by %.9g */
    case TC_FLOAT16: {
        char num[64];
        if (isnan(u->value)) snprintf(num, sizeof num, "NAN");
        else if (isinf(u->value)) snprintf(num, sizeof num, "%sINFINITY", u->value < 0 ? "-" : "");
        else {
            snprintf(num, sizeof num, "%.9g", u->value);
            if (!strpbrk(num, ".en")) strcat(num, ".0");
            strcat(num, "f");
        }
        if (u->dtype == TC_FLOAT16 && !r->d->is_half_in_float)
            return fmt("((%s)%s)", r->d->half_type, num);
        return fmt("(%s)", num);
    }
    case TC_FLOAT64: { /* %.17g: every double prints back to itself */
        char num[64];
        if (isnan(u->value)) snprintf(num, sizeof num, "((double)NAN)");
        else if (isinf(u->value)) snprintf(num, sizeof num, "%s((double)INFINITY)", u->value < 0 ? "-" : "");
        else {
            snprintf(num, sizeof num, "%.17g", u->value);
            if (!strpbrk(num, ".en")) strcat(num, ".0");
        }
        return fmt("(%s)", num);
    }
    case TC_INT32:
        return u->ivalue == INT32_MIN ? fmt("(-2147483647-1)") : fmt("%lld", (long long)u->ivalue);
    case TC_INT64:
        return u->ivalue == INT64_MIN ? fmt("(-9223372036854775807%s-1)", r->d->int64_suffix)
                                      : fmt("%lld%s", (long long)u->ivalue, r->d->int64_suffix);
    case TC_UINT8: return fmt("((unsigned char)%lld)", (long long)u->ivalue);
    case TC_BOOL: return fmt("%d", u->ivalue != 0);
    case TC_INT8:
    case TC_INT16:
    case TC_UINT16: return fmt("((%s)%lld)", ctype(r, u->dtype), (long long)u->ivalue);
    case TC_UINT32: return fmt("((%s)%lluu)", ctype(r, u->dtype), (unsigned long long)u->ivalue);
    case TC_UINT64: /* its bits: 2^64-1 travels as -1 */
        return fmt("((%s)%lluu%s)", ctype(r, u->dtype), (unsigned long long)u->ivalue, r->d->int64_suffix);
    case TC_DTYPE_COUNT: break;
    }
    return NULL;
}

/* printf formats per op: %1$s, %2$s, %3$s are the operands */
static const char *const alu_fmt[TC_OP_COUNT] = {
    [TC_OP_NEG] = "(-%1$s)",          [TC_OP_ADD] = "(%1$s+%2$s)",
    [TC_OP_MUL] = "(%1$s*%2$s)",      [TC_OP_MAX] = "(((%1$s>%2$s)|(%1$s!=%1$s))?%1$s:%2$s)",
    [TC_OP_CMPLT] = "(%1$s<%2$s)",    [TC_OP_CMPNE] = "(%1$s!=%2$s)",
    [TC_OP_AND] = "(%1$s&%2$s)",      [TC_OP_OR] = "(%1$s|%2$s)",
    [TC_OP_XOR] = "(%1$s^%2$s)",      [TC_OP_SHL] = "(%1$s<<%2$s)",
    [TC_OP_SHR] = "(%1$s>>%2$s)",     [TC_OP_WHERE] = "(%1$s?%2$s:%3$s)",
    [TC_OP_MULACC] = "((%1$s*%2$s)+%3$s)",
    [TC_OP_IDIV] = "(%1$s/%2$s)",     [TC_OP_MOD] = "(%1$s%%%2$s)",
};
/* bool overrides: logic instead of arithmetic */
static const char *const bool_fmt[TC_OP_COUNT] = {
    [TC_OP_NEG] = "(!%1$s)", [TC_OP_ADD] = "(%1$s|%2$s)", [TC_OP_MUL] = "(%1$s&%2$s)",
};
/* integer division by something that may be 0 or -1 must not trap */
static const char *const safe_div_fmt[TC_OP_COUNT] = {
    [TC_OP_IDIV] = "(%2$s==0?0:%2$s==-1?-(%1$s):%1$s/%2$s)",
    [TC_OP_MOD] = "(%2$s==0||%2$s==-1?0:%1$s%%%2$s)",
};
/* an unsigned divisor is never -1 (and comparing it with -1 draws warnings) */
static const char *const safe_udiv_fmt[TC_OP_COUNT] = {
    [TC_OP_IDIV] = "(%2$s==0?0:%1$s/%2$s)",
    [TC_OP_MOD] = "(%2$s==0?0:%1$s%%%2$s)",
};
/* wraps x (a float holding a float16 result) in the dialect's rounding;
 * takes x */
static char *half_rounded(const rctx *r, char *x) {
    if (!x) return NULL;
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
    char *y = fmt(r->d->half_round, x);
#pragma GCC diagnostic pop
    tc_free(x);
    return y;
}

static char *render_alu(rctx *r, const tc_uop *u);
static void line(rctx *r, const char *f, ...) __attribute__((format(printf, 2, 3)));

/* the operands of u that format f names more than once (OpenCL's and
 * CUDA's float max: 4 times, the guarded division's divisor: 3) get a
 * variable first when their copies would be longer than
 * TC_RENDER_REPEAT_MAX: along a chain of such ops the text would otherwise
 * grow exponentially. Declared here, at u, where an inlined operand would
 * be evaluated anyway. */
static void hoist_repeated(rctx *r, const tc_uop *u, const char *f) {
    for (int k = 0; k < u->n_srcs && k < 3; k++) {
        char tag[8];
        snprintf(tag, sizeof tag, "%%%d$s", k + 1);
        size_t copies = 0;
        for (const char *at = strstr(f, tag); at; at = strstr(at + 1, tag)) copies++;
        const tc_uop *src = u->srcs[k];
        char *x = r->expr[src->id];
        if (copies < 2 || copies * strlen(x) <= TC_RENDER_REPEAT_MAX) continue;
        bool is_cast = src->op == TC_UOP_CAST || src->op == TC_UOP_BITCAST;
        char *name = fmt("%s%d", is_cast ? "cast" : "alu", src->id);
        if (!name) return; /* out of memory: the copies stay (the render fails later) */
        line(r, "%s %s = %s;", utype(r, src), name, x);
        tc_free(x);
        r->expr[src->id] = name;
    }
}

/* x (a float holding a bfloat16 result) rounded to bfloat16; takes x */
static char *bf16_rounded(char *x) {
    if (!x) return NULL;
    char *y = fmt("tc_bfround(%s)", x);
    tc_free(x);
    return y;
}

/* an ALU result; float16 and bfloat16 in a float are rounded */
static char *render_alu_value(rctx *r, const tc_uop *u) {
    char *x = render_alu(r, u);
    if (u->dtype == TC_BFLOAT16 && u->vcount <= 1) return bf16_rounded(x);
    return is_half_float(r, u->dtype) ? half_rounded(r, x) : x;
}

/* a vector ALU: + * - and 1/x take scalar operands as they are (the
 * compiler broadcasts them); max gets both as vectors */
/* operand i of vector ALU u as a vector: a scalar broadcast to u's lanes
 * (a bool as a mask lane, -1 for true) */
static char *vec_operand(const rctx *r, const tc_uop *u, int i) {
    const tc_uop *s = u->srcs[i];
    const char *x = r->expr[s->id];
    if (s->vcount > 1) return fmt("%s", x);
    if (s->dtype == TC_BOOL) return fmt("((tc_mask%d){0}-(int)(%s))", u->vcount, x);
    if (!vec_elem[s->dtype]) {
        TC_INTERNAL("no vector of %s for a vector %s", tc_dtypes[s->dtype].name, tc_ops[u->alu].name);
        return NULL;
    }
    return fmt("((tc_%s%d){0}+%s)", vec_elem[s->dtype], u->vcount, x);
}

/* a vector compare, mask logic or select: every operand a vector */
static char *render_vec_mask_alu(const rctx *r, const tc_uop *u) {
    char *o[3] = {NULL, NULL, NULL}, *x = NULL;
    bool ok = true;
    for (int i = 0; i < u->n_srcs; i++) ok &= (o[i] = vec_operand(r, u, i)) != NULL;
    if (ok && u->alu == TC_OP_CMPLT) x = fmt("(%s<%s)", o[0], o[1]);
    if (ok && u->alu == TC_OP_CMPNE) x = fmt("(%s!=%s)", o[0], o[1]);
    if (ok && u->alu == TC_OP_AND) x = fmt("(%s&%s)", o[0], o[1]);
    if (ok && u->alu == TC_OP_OR) x = fmt("(%s|%s)", o[0], o[1]);
    if (ok && u->alu == TC_OP_XOR) x = fmt("(%s^%s)", o[0], o[1]);
    if (ok && u->alu == TC_OP_WHERE) x = fmt("tc_sel_float%d(%s, %s, %s)", u->vcount, o[0], o[1], o[2]);
    for (int i = 0; i < 3; i++) tc_free(o[i]);
    return x;
}

static char *render_vec_alu(const rctx *r, const tc_uop *u) {
    char *const *e = r->expr;
    const char *t = utype(r, u);
    const char *a = e[u->srcs[0]->id], *b = u->n_srcs > 1 ? e[u->srcs[1]->id] : "";
    if (u->alu == TC_OP_CMPLT || u->alu == TC_OP_CMPNE || u->alu == TC_OP_AND || u->alu == TC_OP_OR ||
        u->alu == TC_OP_XOR || (u->alu == TC_OP_WHERE && u->dtype == TC_FLOAT32))
        return render_vec_mask_alu(r, u);
    if (u->alu == TC_OP_ADD) return fmt("(%s+%s)", a, b);
    if (u->alu == TC_OP_MUL) return fmt("(%s*%s)", a, b);
    if (u->alu == TC_OP_NEG) return fmt("(-%s)", a);
    if (u->alu == TC_OP_RECIP) return fmt("(1.0f/%s)", a);
    if (u->alu == TC_OP_EXP2) return fmt("tc_exp2_%s(%s)", t + 3, a);
    if (u->alu == TC_OP_MAX) {
        /* a scalar operand: ((tc_floatN){0}+x), the zero vector plus x in every lane */
        bool va = u->srcs[0]->vcount > 1, vb = u->srcs[1]->vcount > 1;
        return fmt("tc_max_%s(%s%s%s%s%s, %s%s%s%s%s)", t + 3, va ? "" : "((", va ? "" : t,
                   va ? "" : "){0}+", a, va ? "" : ")", vb ? "" : "((", vb ? "" : t,
                   vb ? "" : "){0}+", b, vb ? "" : ")");
    }
    TC_INTERNAL("cannot render vector ALU %s", tc_ops[u->alu].name);
    return NULL;
}

/* a vector ALU of a GPU dialect: its vec_alu format over vector operands */
static char *render_gpu_vec_alu(rctx *r, const tc_uop *u) {
    char *const *e = r->expr;
    const char *f = r->d->vec_alu[u->alu];
    if (!f) {
        TC_INTERNAL("%s has no vector form of %s", r->d->name, tc_ops[u->alu].name);
        return NULL;
    }
    hoist_repeated(r, u, f);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
    return fmt(f, e[u->srcs[0]->id], u->n_srcs > 1 ? e[u->srcs[1]->id] : "",
               u->n_srcs > 2 ? e[u->srcs[2]->id] : "");
#pragma GCC diagnostic pop
}

static char *render_alu(rctx *r, const tc_uop *u) {
    if (u->vcount > 1) return r->d->vec_type ? render_gpu_vec_alu(r, u) : render_vec_alu(r, u);
    char *const *e = r->expr;
    const char *a = e[u->srcs[0]->id];
    bool is_f64 = u->dtype == TC_FLOAT64;
    const char *fn = is_f64 ? r->d->math_fn_f64[u->alu] : r->d->math_fn[u->alu];
    if (r->is_math_shared && r->d->math_fn_shared[u->alu] && !is_f64) fn = r->d->math_fn_shared[u->alu];
    if (fn)
        return u->dtype == TC_FLOAT16 && !r->d->is_half_in_float
                   ? fmt("((%s)%s((float)%s))", ctype(r, u->dtype), fn, a)
                   : fmt("%s(%s)", fn, a);
    if (u->alu == TC_OP_RECIP) return fmt("((%s)1.0f/%s)", ctype(r, u->dtype), a);
    const char *f = alu_fmt[u->alu];
    /* NaN does not occur in integers: no self-comparison (which -Wall flags) */
    if (u->alu == TC_OP_MAX && !tc_dtypes[u->dtype].is_float) f = "((%1$s>%2$s)?%1$s:%2$s)";
    bool is_in_float = u->dtype == TC_FLOAT32 || u->dtype == TC_BFLOAT16 || is_half_float(r, u->dtype);
    if (u->alu == TC_OP_MAX && is_in_float && r->d->float_max)
        f = r->d->float_max;
    if (u->alu == TC_OP_WHERE && u->dtype == TC_FLOAT32 && r->d->float_where) f = r->d->float_where;
    if (u->dtype == TC_BOOL && bool_fmt[u->alu]) f = bool_fmt[u->alu];
    if (safe_div_fmt[u->alu] && !(u->srcs[1]->vmin > 0 || u->srcs[1]->vmax < -1))
        f = tc_dtypes[u->srcs[1]->dtype].is_signed ? safe_div_fmt[u->alu] : safe_udiv_fmt[u->alu];
    if (!f) {
        TC_INTERNAL("cannot render ALU %s", tc_ops[u->alu].name);
        return NULL;
    }
    hoist_repeated(r, u, f);
    a = e[u->srcs[0]->id];
    const char *b = u->n_srcs > 1 ? e[u->srcs[1]->id] : "";
    const char *c = u->n_srcs > 2 ? e[u->srcs[2]->id] : "";
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
    char *x = fmt(f, a, b, c);
#pragma GCC diagnostic pop
    /* C computes narrow types in a wider one (uint8 in int, _Float16 in
     * float): cast back so every op wraps or rounds like the dtype */
    bool narrow = (!tc_dtypes[u->dtype].is_float && tc_dtypes[u->dtype].size < 4 && u->dtype != TC_BOOL) ||
                  (u->dtype == TC_FLOAT16 && !strcmp(ctype(r, u->dtype), "_Float16"));
    if (!narrow || !x) return x;
    char *y = fmt("((%s)%s)", ctype(r, u->dtype), x);
    tc_free(x);
    return y;
}

static void line(rctx *r, const char *f, ...) {
    tc_sb_printf(&r->out, "%*s", 2 * r->indent, "");
    va_list ap;
    va_start(ap, f);
    tc_sb_vprintf(&r->out, f, ap);
    va_end(ap);
    tc_sb_printf(&r->out, "\n");
}

/* whether expr may be inlined into its user: it nests at most
 * TC_RENDER_NEST_MAX brackets ((, [, {) deep (the scan stops past it) */
static bool fits_inline(const char *expr) {
    int depth = 0;
    for (const char *c = expr; *c; c++) {
        if ((*c == '(' || *c == '[' || *c == '{') && ++depth > TC_RENDER_NEST_MAX) return false;
        if (*c == ')' || *c == ']' || *c == '}') depth--;
    }
    return true;
}

/* an expression for u: inline it, or declare a variable and name it */
static char *bind(rctx *r, const tc_uop *u, const char *prefix, char *expr) {
    if (!expr) return NULL;
    bool inl = u->uses == 1 && r->user_depth[u->id] == u->depth && fits_inline(expr);
    if (inl) return expr;
    char *name = fmt("%s%d", prefix, u->id);
    if (name) line(r, "%s %s = %s;", utype(r, u), name, expr);
    tc_free(expr);
    return name;
}

static bool is_global_half(const rctx *r, const tc_uop *buf) {
    return buf->op == TC_UOP_DEFINE_GLOBAL && is_half_float(r, buf->dtype);
}

static bool is_global_bf16(const tc_uop *buf) {
    return buf->op == TC_UOP_DEFINE_GLOBAL && buf->dtype == TC_BFLOAT16;
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
static char *render_load(rctx *r, const tc_uop *u) {
    char *const *e = r->expr;
    const char *buf = e[u->srcs[0]->id], *idx = e[u->srcs[1]->id];
    bool is_gated = u->n_srcs > 2 && u->srcs[2]->op != TC_UOP_BARRIER;
    bool gpu_vec = u->vcount > 1 && r->d->vec_load && u->srcs[0]->op == TC_UOP_DEFINE_GLOBAL;
    /* a local array of vectors is indexed; a vector from a CPU scratch array of
     * scalars (a row kernel's row, a packed tile's panel) is read like one from a global buffer */
    bool is_local = u->srcs[0]->op == TC_UOP_DEFINE_LOCAL &&
                    !(u->vcount > 1 && u->srcs[0]->vcount <= 1 && u->srcs[0]->is_scratch);
    char *x = gpu_vec       ? fmt(r->d->vec_load, buf, idx, u->vcount, utype(r, u))
              : is_local    ? fmt("%s[%s]", buf, idx)
              : u->vcount > 1                 ? fmt("*(const %s_u *)(%s+%s)", utype(r, u), buf, idx)
              : is_global_half(r, u->srcs[0]) ? fmt(r->d->half_load, buf, idx)
              : is_global_bf16(u->srcs[0])    ? fmt("tc_bf2f(%s[%s])", buf, idx)
                                              : fmt("%s[%s]", buf, idx);
    if (x && is_gated) {
        char *zero = gpu_vec ? fmt(r->d->vec_bcast, utype(r, u), "0.0f") : NULL;
        char *g = gpu_vec && zero ? fmt("(%s?%s:%s)", e[u->srcs[2]->id], x, zero)
                  : gpu_vec       ? NULL
                  : u->vcount > 1 ? fmt("(%s?%s:(%s){0})", e[u->srcs[2]->id], x, utype(r, u))
                                  : fmt("(%s?%s:(%s)0)", e[u->srcs[2]->id], x, ctype(r, u->dtype));
        tc_free(zero);
        tc_free(x);
        x = g;
    }
    char *name = x ? fmt("val%d", u->id) : NULL; /* never inlined: it must read before any store */
    if (name) line(r, "%s %s = %s;", utype(r, u), name, x);
    tc_free(x);
    return name;
}

static char *render_store(rctx *r, const tc_uop *u) {
    char *const *e = r->expr;
    const char *buf = e[u->srcs[0]->id], *idx = e[u->srcs[1]->id], *val = e[u->srcs[2]->id];
    if (u->srcs[2]->vcount > 1 && r->d->vec_store && u->srcs[0]->op == TC_UOP_DEFINE_GLOBAL) {
        char *x = fmt(r->d->vec_store, buf, idx, val, u->srcs[2]->vcount, utype(r, u->srcs[2]));
        if (x) line(r, "%s", x);
        tc_free(x);
    } else if (u->srcs[2]->vcount > 1 && !r->d->vec_store) { /* C: a vector at element alignment */
        line(r, "*(%s_u *)(%s+%s) = %s;", utype(r, u->srcs[2]), buf, idx, val);
    } else if (is_global_half(r, u->srcs[0])) {
        char *x = fmt(r->d->half_store, buf, idx, val);
        if (x) line(r, "%s", x);
        tc_free(x);
    } else if (is_global_bf16(u->srcs[0])) {
        line(r, "%s[%s] = tc_f2bf(%s);", buf, idx, val);
    } else {
        line(r, "%s[%s] = %s;", buf, idx, val);
    }
    return fmt("%s", "");
}

static char *render_cast(rctx *r, const tc_uop *u) {
    const char *x = r->expr[u->srcs[0]->id];
    const char *to = ctype(r, u->dtype), *from = ctype(r, u->srcs[0]->dtype);
    if (is_narrow_int_cast(r, u) && narrow_step(u) != TC_DTYPE_COUNT)
        return bind(r, u, "cast",
                    fmt("__builtin_convertvector(__builtin_convertvector(__builtin_convertvector(%s, "
                        "tc_%s%d), tc_mask%d), %s)",
                        x, vec_elem[narrow_step(u)], u->vcount, u->vcount, utype(r, u)));
    if (is_narrow_int_cast(r, u))
        return bind(r, u, "cast", fmt("__builtin_convertvector(__builtin_convertvector(%s, tc_mask%d), %s)", x,
                                      u->vcount, utype(r, u)));
    bool is_bcast = u->vcount > 1 && u->srcs[0]->vcount == 1 && u->dtype == u->srcs[0]->dtype;
    if (is_bcast && r->d->vec_bcast)
        return bind(r, u, "cast", fmt(r->d->vec_bcast, utype(r, u), x)); /* a broadcast */
    bool is_mask = u->op == TC_UOP_CAST && u->srcs[0]->dtype == TC_BOOL && u->dtype == TC_FLOAT32;
    if (u->vcount > 1 && is_mask && r->d->vec_mask_cast)
        return bind(r, u, "cast", fmt(r->d->vec_mask_cast, utype(r, u), x));
    bool is_to_float = u->op == TC_UOP_CAST && u->dtype == TC_FLOAT32 &&
                       (u->srcs[0]->dtype == TC_UINT8 || u->srcs[0]->dtype == TC_INT32);
    if (u->vcount > 1 && is_to_float && r->d->vec_cast)
        return bind(r, u, "cast", fmt(r->d->vec_cast, utype(r, u), x));
    if (u->vcount > 1 && r->d->vec_type) {
        TC_INTERNAL("%s has no vector cast from %s to %s", r->d->name,
                    tc_dtypes[u->srcs[0]->dtype].name, tc_dtypes[u->dtype].name);
        return NULL;
    }
    if (u->op == TC_UOP_CAST && u->vcount > 1 && is_mask) /* a mask's -1 lanes are 1.0f */
        return bind(r, u, "cast", fmt("tc_sel_float%d(%s, ((%s){0}+1.0f), ((%s){0}))", u->vcount, x,
                                      utype(r, u), utype(r, u)));
    if (u->op == TC_UOP_CAST && u->vcount > 1)
        return bind(r, u, "cast", fmt("__builtin_convertvector(%s, %s)", x, utype(r, u)));
    if (is_mask && r->d->bool_float) return bind(r, u, "cast", fmt(r->d->bool_float, x));
    if (u->op == TC_UOP_CAST && u->dtype == TC_BOOL && u->srcs[0]->dtype != TC_BOOL)
        return bind(r, u, "cast", fmt("(%s!=0)", x)); /* what a cast to bool is; (_Bool)(a*b)
                                                         draws -Wint-in-bool-context */
    if (u->op == TC_UOP_CAST && u->dtype == TC_BFLOAT16) /* through float32, then rounded */
        return bind(r, u, "cast", bf16_rounded(fmt("((float)%s)", x)));
    if (u->op == TC_UOP_CAST) { /* float64 -> float16 through float32, on every device */
        bool via_f32 = u->dtype == TC_FLOAT16 && u->srcs[0]->dtype == TC_FLOAT64;
        char *c = via_f32 ? fmt("((%s)((float)%s))", to, x) : fmt("((%s)%s)", to, x);
        return bind(r, u, "cast", is_half_float(r, u->dtype) ? half_rounded(r, c) : c);
    }
    if (r->d->bitcast_any) return bind(r, u, "cast", fmt(r->d->bitcast_any, from, to, x));
    if (!r->d->bitcast)
        return bind(r, u, "cast",
                    fmt("__extension__({%s s_ = %s; %s d_; "
                        "__builtin_memcpy(&d_, &s_, sizeof d_); d_;})",
                        from, x, to));
    /* 4 and 8 bytes reinterpreted (float32, float64 <-> integers); between
     * 1- and 2-byte integers a conversion keeps the bits (tc_bitcast gives
     * no 16-bit float a BITCAST) */
    size_t size = tc_dtypes[u->dtype].size;
    bool is_wide = size >= 4 && size == tc_dtypes[u->srcs[0]->dtype].size;
    return bind(r, u, "cast", is_wide ? fmt(r->d->bitcast, to, x) : fmt("((%s)%s)", to, x));
}
#pragma GCC diagnostic pop

/* SPECIAL, DEFINE_LOCAL, BARRIER, IF, ENDIF */
static char *render_gpu(rctx *r, const tc_uop *u) {
    char *const *e = r->expr;
    switch (u->op) {
    case TC_UOP_SPECIAL: {
        int d = (int)u->arg;
        char *name = fmt("%s%d", u->is_lane ? "lidx" : "gidx", d);
        if (name)
            line(r, "%s %s = (%s)%s; /* %lld */", ctype(r, u->dtype), name, ctype(r, u->dtype),
                 u->is_lane ? r->d->lane_id[d] : r->d->group_id[d], (long long)u->ivalue);
        return name;
    }
    case TC_UOP_DEFINE_LOCAL: {
        char *name = fmt("%s%lld", u->is_scratch ? "tile" : "temp", (long long)u->arg);
        if (name) /* a scratch array: a plain array of the kernel (on the stack) */
            line(r, "%s%s %s[%lld]%s;", u->is_scratch ? "" : r->d->local_prefix, utype(r, u), name,
                 (long long)u->ivalue, u->is_scratch && r->d->scratch_suffix ? r->d->scratch_suffix : "");
        return name;
    }
    case TC_UOP_BARRIER: line(r, "%s", r->d->barrier); return fmt("%s", "");
    case TC_UOP_IF:
        line(r, "if (%s) {", e[u->srcs[0]->id]);
        r->indent++;
        return fmt("%s", "");
    case TC_UOP_ENDIF:
        r->indent--;
        line(r, "}");
        return fmt("%s", "");
    case TC_UOP_DEFINE_GLOBAL:
    case TC_UOP_DEFINE_ACC:
    case TC_UOP_CONST:
    case TC_UOP_RANGE:
    case TC_UOP_ENDRANGE:
    case TC_UOP_LOAD:
    case TC_UOP_STORE:
    case TC_UOP_PREFETCH:
    case TC_UOP_ALU:
    case TC_UOP_CAST:
    case TC_UOP_BITCAST:
    case TC_UOP_ASSIGN:
    case TC_UOP_GEP:
    case TC_UOP_COUNT: break;
    }
    TC_INTERNAL("cannot render UOp %s", tc_uop_names[u->op]);
    return NULL;
}

/* a vector CONST (GPU dialects): a variable at the top of the kernel, so
 * each value is printed once per vector type */
static char *render_vec_const(rctx *r, const tc_uop *u) {
    if (!r->d->vec_bcast) {
        TC_INTERNAL("%s has no vector constants", r->d->name);
        return NULL;
    }
    char *x = render_const(r, u); /* "(2.0f)": the vector's parentheses will do */
    size_t n = x ? strlen(x) : 0;
    bool paren = n > 2 && x[0] == '(' && x[n - 1] == ')';
    if (paren) x[n - 1] = '\0';
    char *v = x ? fmt(r->d->vec_bcast, utype(r, u), x + paren) : NULL;
    char *name = v ? fmt("vconst%d", u->id) : NULL;
    if (name) line(r, "const %s %s = %s;", utype(r, u), name, v);
    tc_free(x);
    tc_free(v);
    return name;
}

static char *render_uop(rctx *r, const tc_uop *u) {
    char *const *e = r->expr;
    switch (u->op) {
    case TC_UOP_DEFINE_GLOBAL: return fmt("data%lld", (long long)u->arg);
    case TC_UOP_CONST: return u->vcount > 1 ? render_vec_const(r, u) : render_const(r, u);
    case TC_UOP_RANGE: {
        char *name = fmt("ridx%d", u->id);
        if (name)
            line(r, "for (%s %s = %s; %s < %s; %s++) {", ctype(r, u->dtype), name,
                 e[u->srcs[0]->id], name, e[u->srcs[1]->id], name);
        r->indent++;
        return name;
    }
    case TC_UOP_ENDRANGE:
        r->indent--;
        line(r, "}");
        return fmt("%s", "");
    case TC_UOP_DEFINE_ACC: {
        char *name = fmt("acc%d", u->id);
        if (!name) return NULL;
        if (u->vcount <= 1 || u->srcs[0]->vcount > 1) { /* from a scalar or a vector CONST */
            line(r, "%s %s = %s;", utype(r, u), name, e[u->srcs[0]->id]);
            return name;
        }
        tc_strbuf init = {0}; /* every lane the initial value */
        for (int l = 0; l < u->vcount; l++) tc_sb_printf(&init, "%s%s", l ? ", " : "", e[u->srcs[0]->id]);
        if (!init.failed) line(r, "%s %s = {%s};", utype(r, u), name, init.s);
        bool ok = !init.failed;
        tc_sb_free(&init);
        if (!ok) tc_free(name);
        return ok ? name : NULL;
    }
    case TC_UOP_GEP: return bind(r, u, "alu", fmt("%s[%lld]", e[u->srcs[0]->id], (long long)u->arg));
    case TC_UOP_LOAD: return render_load(r, u);
    case TC_UOP_STORE: return render_store(r, u);
    case TC_UOP_PREFETCH: {
        char *x = r->d->prefetch ? fmt(r->d->prefetch, e[u->srcs[0]->id], e[u->srcs[1]->id]) : NULL;
        if (x) line(r, "%s", x);
        tc_free(x);
        return fmt("%s", "");
    }
    case TC_UOP_ALU: return bind(r, u, "alu", render_alu_value(r, u));
    case TC_UOP_CAST:
    case TC_UOP_BITCAST: return render_cast(r, u);
    case TC_UOP_ASSIGN:
        line(r, "%s = %s;", e[u->srcs[0]->id], e[u->srcs[1]->id]);
        return fmt("%s", "");
    case TC_UOP_SPECIAL:
    case TC_UOP_DEFINE_LOCAL:
    case TC_UOP_BARRIER:
    case TC_UOP_IF:
    case TC_UOP_ENDIF: return render_gpu(r, u);
    case TC_UOP_COUNT: break;
    }
    TC_INTERNAL("cannot render UOp %d", (int)u->op);
    return NULL;
}

static bool uses_half(const tc_kernel_uops *k) {
    for (int i = 0; i < k->n_uops; i++)
        if (k->uops[i]->dtype == TC_FLOAT16) return true;
    return false;
}

static bool uses_f64(const tc_kernel_uops *k) {
    for (int i = 0; i < k->n_uops; i++)
        if (k->uops[i]->dtype == TC_FLOAT64) return true;
    for (int i = 0; i < k->n_bufs; i++)
        if (k->buf_dtypes[i] == TC_FLOAT64) return true;
    return false;
}

static bool uses_bf16(const tc_kernel_uops *k) {
    for (int i = 0; i < k->n_uops; i++)
        if (k->uops[i]->dtype == TC_BFLOAT16) return true;
    for (int i = 0; i < k->n_bufs; i++)
        if (k->buf_dtypes[i] == TC_BFLOAT16) return true;
    return false;
}

static bool has_reduce(const tc_kernel_uops *k) {
    for (int i = 0; i < k->n_uops; i++)
        if (k->uops[i]->op == TC_UOP_DEFINE_ACC) return true;
    return false;
}

/* a load gated by a mask (a pad's zeros): `valid ? buf[i] : 0` */
static bool has_gated_load(const tc_kernel_uops *k) {
    for (int i = 0; i < k->n_uops; i++)
        if (k->uops[i]->op == TC_UOP_LOAD && k->uops[i]->n_srcs == 3) return true;
    return false;
}

/* every store writes a value loaded as is, or a constant beside such stores
 * (a padded copy whose loops lower_split.c split: the pad's zeros): a copy
 * (a transposing one builds a lane transpose under the dynamic cost model;
 * a fill alone is no copy) */
static bool is_copy(const tc_kernel_uops *k) {
    bool loaded = false;
    for (int i = 0; i < k->n_uops; i++) {
        const tc_uop *u = k->uops[i];
        if (u->op != TC_UOP_STORE) continue;
        if (u->srcs[2]->op != TC_UOP_LOAD && u->srcs[2]->op != TC_UOP_CONST) return false;
        loaded |= u->srcs[2]->op == TC_UOP_LOAD;
    }
    return loaded;
}

static bool uses_vec(const tc_kernel_uops *k) {
    for (int i = 0; i < k->n_uops; i++)
        if (k->uops[i]->vcount > 1) return true;
    return false;
}

static void signature(rctx *r) {
    const tc_kernel_uops *k = r->k;
    if (r->d->f64_preamble && uses_f64(k)) tc_sb_printf(&r->out, "%s", r->d->f64_preamble);
    tc_sb_printf(&r->out, "%s", r->d->preamble);
    if (r->d->half_preamble && uses_half(k)) tc_sb_printf(&r->out, "%s", r->d->half_preamble);
    if (r->d->bf16_preamble && uses_bf16(k)) tc_sb_printf(&r->out, "%s", r->d->bf16_preamble);
    if (r->d->vec_prelude && uses_vec(k)) tc_sb_printf(&r->out, "%s", r->d->vec_prelude);
    if (!r->d->vec_type) vector_typedefs(r); /* C: GCC vector types */
    if (r->is_math_shared) shared_math_fns(r);
    tc_sb_printf(&r->out, "%s", r->d->kernel_prefix);
    /* not where a load is gated: gcc 12.2 with -march=native (AVX-512) and
     * the dynamic cost model vectorizes a pad's copy wrongly (x of (3,5,2)
     * padded by 2 rows: the first 4 values came out 0; -O2's own model, -O3
     * and clang are right), found by the differential suite at
     * TC_DIFF_SCALE=10 (tests/api/test_movement.c keeps the case); not in
     * a copy: -O2's own model vectorizes a contiguous one (or calls memcpy)
     * and keeps a transposing one scalar, which compiles in half the time
     * and runs as fast or faster (MNIST's 512 x 64 x 64 transposing copy:
     * 0.26 -> 0.13 s of gcc, 0.88 -> 0.72 ms) */
    if (r->d->map_prefix && (!has_reduce(k) || k->untiled) && !has_gated_load(k) && !is_copy(k))
        tc_sb_printf(&r->out, "%s", r->d->map_prefix);
    else if (r->d->copy_tile_prefix && k->copy_tile && is_copy(k))
        tc_sb_printf(&r->out, "%s", r->d->copy_tile_prefix);
    tc_sb_printf(&r->out, "void ");
    if (r->d->has_launch_bounds)
        tc_sb_printf(&r->out, "__launch_bounds__(%lld) ",
                     (long long)(k->local_size[0] * k->local_size[1] * k->local_size[2]));
    tc_sb_printf(&r->out, "%s(", k->name);
    for (int i = 0; i < k->n_bufs; i++)
        tc_sb_printf(&r->out, "%s%s%s%s *%sdata%d", i ? ", " : "", k->buf_written[i] ? "" : "const ",
                     r->d->buf_prefix, buf_ctype(r, k->buf_dtypes[i]), r->d->restrict_kw, i);
    tc_sb_printf(&r->out, ") {\n");
}

static bool is_vec_const(const tc_uop *u) {
    return u->op == TC_UOP_CONST && u->vcount > 1;
}

char *tc_render(const tc_dialect *d, const tc_kernel_uops *k) {
    rctx r = {.d = d, .k = k, .indent = 1};
    r.expr = tc_calloc((size_t)k->n_uops + 1, sizeof(char *));
    r.user_depth = tc_calloc((size_t)k->n_uops + 1, sizeof(int));
    bool ok = r.expr && r.user_depth;
    for (int i = 0; ok && i < k->n_uops; i++) r.user_depth[i] = -1;
    for (int i = 0; ok && i < k->n_uops; i++)
        for (int j = 0; j < k->uops[i]->n_srcs; j++) r.user_depth[k->uops[i]->srcs[j]->id] = k->uops[i]->depth;
    /* a row kernel may inline what its parts would have inlined as kernels of their own */
    int inline_max = TC_MATH_INLINE_MAX * (k->n_parts > 1 ? k->n_parts : 1);
    r.is_math_shared = ok && has_reduce(k) && shared_math_calls(&r, NULL) > inline_max;
    if (ok) signature(&r);
    for (int i = 0; ok && i < k->n_uops; i++) /* a buffer the kernel does not read (a folded
                                                 value's): no unused-parameter warning */
        if (k->uops[i]->op == TC_UOP_DEFINE_GLOBAL && k->uops[i]->uses == 0)
            line(&r, "(void)data%lld;", (long long)k->uops[i]->arg);
    /* vector CONSTs first: each once, before any block that uses it */
    for (int i = 0; ok && i < k->n_uops; i++)
        if (is_vec_const(k->uops[i])) ok = (r.expr[i] = render_uop(&r, k->uops[i])) != NULL;
    for (int i = 0; ok && i < k->n_uops; i++)
        if (!is_vec_const(k->uops[i])) ok = (r.expr[i] = render_uop(&r, k->uops[i])) != NULL;
    tc_sb_printf(&r.out, "}\n");
    if (r.expr)
        for (int i = 0; i < k->n_uops; i++) tc_free(r.expr[i]);
    tc_free(r.expr);
    tc_free(r.user_depth);
    if (!ok || r.out.failed) {
        tc_sb_free(&r.out);
        if (tc_error_code() == TC_OK) tc_error_set(TC_ERR_MEMORY, "render: out of memory");
        return NULL;
    }
    return r.out.s;
}
