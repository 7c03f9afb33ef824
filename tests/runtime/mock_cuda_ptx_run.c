/* mock_cuda_ptx_run.c - the PTX interpreter's runner: ptx_run loops over a
 * grid's blocks; in each, threads run one after another until bar.sync or
 * ret, and the block resumes its threads once all live ones have arrived.
 * Values live in 64-bit register slots as raw bits (f32 in the low 32); each
 * instruction reads them at its own type. Arithmetic is C's IEEE float and
 * double arithmetic (round to nearest, as PTX's .rn); the approximations
 * (ex2, lg2, sin, cos, rsqrt, rcp.approx.ftz.f64) use libm or exact math. Every load and store is checked for
 * bounds and natural alignment.
 */
#include "mock_cuda_ptx_int.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STEP_LIMIT (1LL << 31) /* instructions one thread may run in a launch */

/* ---- running --------------------------------------------------------------------------- */

typedef struct {
    uint64_t *r;     /* registers */
    uint32_t id;     /* linear thread index + 1 (0: nobody) */
    uint8_t *local;  /* .local depot */
    int pc;          /* next instruction */
    bool is_done;    /* returned */
    unsigned tid[3]; /* %tid */
    int64_t steps;   /* instructions run */
} thread;

typedef struct {
    ptx_kernel *k;
    void **params;
    unsigned grid[3], block[3], cta[3];
    uint8_t *shared;
    /* race detection on shared memory, per byte: who last wrote and read it
     * in which barrier interval (epochs are unique across blocks) */
    uint32_t *w_id, *w_epoch, *r_id, *r_epoch;
    uint32_t epoch; /* the interval running now */
    ptx_range_fn ask_range;
    uintptr_t rbase[16]; /* global ranges seen this launch */
    size_t rsize[16];
    int n_ranges;
    char *err;
    size_t err_size;
} launch;

static inline float f32(uint64_t v) {
    uint32_t u = (uint32_t)v;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
static inline uint64_t bits32(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}
static inline double f64(uint64_t v) {
    double d;
    memcpy(&d, &v, sizeof d);
    return d;
}
static inline uint64_t bits64(double d) {
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}
static inline uint64_t mask(uint64_t v, int bits) {
    return bits >= 64 ? v : v & ((1ULL << bits) - 1);
}
static inline int64_t sext(uint64_t v, int bits) {
    return bits >= 64 ? (int64_t)v : (int64_t)(v << (64 - bits)) >> (64 - bits);
}
/* v at type t widened to 64 bits (sign-extended for signed types) */
static inline uint64_t ext(uint64_t v, ptype t) {
    int b = tbits(t);
    return tsigned(t) ? (uint64_t)sext(v, b) : mask(v, b);
}

/* float16 bits -> float, and float -> float16 rounded to nearest even */
static float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 31, mant = h & 1023;
    if (e == 31) return f32(sign | 0x7f800000u | (mant << 13));
    if (e == 0) {
        float f = ldexpf((float)mant, -24);
        return sign ? -f : f;
    }
    return f32(sign | ((e + 112) << 23) | (mant << 13));
}

static uint16_t float_to_half(float f) {
    uint32_t u = (uint32_t)bits32(f), sign = (u >> 16) & 0x8000;
    float a = fabsf(f);
    if (isnan(f)) return (uint16_t)(sign | 0x7e00 | ((u >> 13) & 0x3ff));
    if (a >= 65520.0f) return (uint16_t)(sign | 0x7c00); /* rounds to infinity */
    if (a < 6.103515625e-05f) { /* subnormal: multiples of 2^-24, rint rounds to even */
        return (uint16_t)(sign | (uint32_t)rintf(a * 16777216.0f));
    }
    uint32_t au = (uint32_t)bits32(a);
    uint32_t e = ((au >> 23) & 255) - 112, mant = au & 0x7fffff;
    uint32_t h = (e << 10) | (mant >> 13), rest = mant & 0x1fff;
    if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) h++;
    return (uint16_t)(sign | h);
}

static int fail(launch *l, const thread *th, const instr *in, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(launch *l, const thread *th, const instr *in, const char *fmt, ...) {
    char what[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(l->err, l->err_size, "kernel '%s' block (%u,%u,%u) thread (%u,%u,%u), PTX line %d: %s",
             l->k->name, l->cta[0], l->cta[1], l->cta[2], th->tid[0], th->tid[1], th->tid[2],
             in ? in->line : 0, what);
    return -1;
}

static inline uint64_t special(const launch *l, const thread *th, int i) {
    if (i < 3) return th->tid[i];
    if (i < 6) return l->block[i - 3];
    if (i < 9) return l->cta[i - 6];
    return l->grid[i - 9];
}

static inline uint64_t sym_base(const launch *l, const thread *th, int sym) {
    return sym == SYM_SHARED  ? (uint64_t)(uintptr_t)l->shared
           : sym == SYM_LOCAL ? (uint64_t)(uintptr_t)th->local
                              : 0;
}

static inline uint64_t val(const launch *l, const thread *th, const operand *o) {
    switch (o->kind) {
    case K_REG: return th->r[o->reg];
    case K_IMM: return (uint64_t)o->imm + sym_base(l, th, o->sym);
    case K_SPECIAL: return special(l, th, o->reg);
    default: return 0;
    }
}

/* the bounds and alignment check of an access of n bytes at p in space */
static bool check_access(launch *l, const thread *th, const instr *in, int space, uint64_t p,
                         size_t n) {
    if (p % n != 0) {
        fail(l, th, in, "misaligned %zu-byte access at 0x%llx", n, (unsigned long long)p);
        return false;
    }
    uint64_t lo, hi;
    if (space == S_SHARED || space == S_LOCAL) {
        lo = space == S_SHARED ? (uint64_t)(uintptr_t)l->shared : (uint64_t)(uintptr_t)th->local;
        hi = lo + (space == S_SHARED ? l->k->shared_size : l->k->local_size);
        if (p >= lo && p + n <= hi) return true;
        fail(l, th, in, "%s access of %zu bytes at offset %lld outside its %llu bytes",
             space == S_SHARED ? "shared" : "local", n, (long long)(p - lo),
             (unsigned long long)(hi - lo));
        return false;
    }
    for (int i = 0; i < l->n_ranges; i++)
        if (p >= l->rbase[i] && p - l->rbase[i] < l->rsize[i]) {
            if (n <= l->rsize[i] - (p - l->rbase[i])) return true;
            fail(l, th, in, "global access of %zu bytes at offset %llu of a %zu-byte allocation", n,
                 (unsigned long long)(p - l->rbase[i]), l->rsize[i]);
            return false;
        }
    uintptr_t base = 0;
    size_t size = 0;
    bool found = l->ask_range && l->ask_range((uintptr_t)p, &base, &size);
    for (int i = 0; !found && i < l->k->m->n_vars; i++) {
        gvar *g = &l->k->m->vars[i];
        if (p >= (uint64_t)(uintptr_t)g->data && p - (uint64_t)(uintptr_t)g->data < g->size)
            base = (uintptr_t)g->data, size = g->size, found = true;
    }
    if (!found) {
        fail(l, th, in, "global access of %zu bytes at 0x%llx: not in any live allocation", n,
             (unsigned long long)p);
        return false;
    }
    int slot = l->n_ranges < 16 ? l->n_ranges++ : (int)(p % 16);
    l->rbase[slot] = base, l->rsize[slot] = size;
    if (n <= size - (p - base)) return true;
    fail(l, th, in, "global access of %zu bytes at offset %llu of a %zu-byte allocation", n,
         (unsigned long long)(p - base), size);
    return false;
}

#define MANY 0xffffffffu /* several threads read the byte in this interval */

/* the race check of a shared access of n bytes at p by th: between two
 * bar.syncs, a byte one thread wrote may not be read or written by another,
 * and a byte one thread read may not be written by another (on a GPU their
 * order is not defined; here threads run one after another, so the result
 * would depend on that order) */
static bool check_race(launch *l, const thread *th, const instr *in, uint64_t p, size_t n,
                       bool is_write) {
    size_t off = (size_t)(p - (uint64_t)(uintptr_t)l->shared);
    for (size_t b = off; b < off + n; b++) {
        uint32_t other = 0;
        const char *what = NULL;
        if (l->w_epoch[b] == l->epoch && l->w_id[b] != th->id)
            other = l->w_id[b], what = is_write ? "writes a shared byte thread %u wrote"
                                                : "reads a shared byte thread %u wrote";
        else if (is_write && l->r_epoch[b] == l->epoch && l->r_id[b] != th->id)
            other = l->r_id[b], what = "writes a shared byte thread %u read";
        if (what) {
            char msg[120];
            snprintf(msg, sizeof msg, what, other == MANY ? 0 : other - 1);
            fail(l, th, in, "%s%s since the last bar.sync (offset %zu): a race", msg,
                 other == MANY ? " (and others)" : "", b);
            return false;
        }
        if (is_write) {
            l->w_epoch[b] = l->epoch, l->w_id[b] = th->id;
        } else if (l->r_epoch[b] != l->epoch) {
            l->r_epoch[b] = l->epoch, l->r_id[b] = th->id;
        } else if (l->r_id[b] != th->id) {
            l->r_id[b] = MANY;
        }
    }
    return true;
}

static uint64_t load_bytes(const void *p, size_t n) {
    uint64_t v = 0;
    memcpy(&v, p, n); /* little endian */
    return v;
}

static bool compare(int c, ptype t, uint64_t a, uint64_t b) {
    if (t == T_F32 || t == T_F64) {
        double x = t == T_F32 ? f32(a) : f64(a), y = t == T_F32 ? f32(b) : f64(b);
        bool un = isnan(x) || isnan(y);
        switch (c) {
        case C_EQ: return !un && x == y;
        case C_NE: return !un && x != y;
        case C_LT: return !un && x < y;
        case C_LE: return !un && x <= y;
        case C_GT: return !un && x > y;
        case C_GE: return !un && x >= y;
        case C_EQU: return un || x == y;
        case C_NEU: return un || x != y;
        case C_LTU: return un || x < y;
        case C_LEU: return un || x <= y;
        case C_GTU: return un || x > y;
        case C_GEU: return un || x >= y;
        case C_NUM: return !un;
        case C_NAN: return un;
        default: return false;
        }
    }
    if (tsigned(t)) {
        int64_t x = sext(a, tbits(t)), y = sext(b, tbits(t));
        switch (c) {
        case C_EQ: return x == y;
        case C_NE: return x != y;
        case C_LT: return x < y;
        case C_LE: return x <= y;
        case C_GT: return x > y;
        case C_GE: return x >= y;
        default: return false;
        }
    }
    uint64_t x = mask(a, tbits(t)), y = mask(b, tbits(t));
    switch (c) {
    case C_EQ: return x == y;
    case C_NE: return x != y;
    case C_LT: return x < y;
    case C_LE: return x <= y;
    case C_GT: return x > y;
    case C_GE: return x >= y;
    default: return false;
    }
}

/* float -> integer type t with rounding r, saturating; NaN -> 0 */
static uint64_t float_to_int(double x, int r, ptype t) {
    if (isnan(x)) return 0;
    x = r == R_RNI ? nearbyint(x) : r == R_RMI ? floor(x) : r == R_RPI ? ceil(x) : trunc(x);
    int b = tbits(t);
    if (tsigned(t)) {
        double lo = -ldexp(1.0, b - 1), hi = ldexp(1.0, b - 1);
        if (x <= lo) return mask((uint64_t)1 << (b - 1), b);
        if (x >= hi) return mask(((uint64_t)1 << (b - 1)) - 1, b);
        return mask((uint64_t)(int64_t)x, b);
    }
    if (x <= 0) return 0;
    if (x >= ldexp(1.0, b)) return mask(~0ULL, b);
    return mask((uint64_t)x, b);
}

static uint64_t cvt(const instr *in, uint64_t v) {
    ptype d = (ptype)in->t, s = (ptype)in->t2;
    bool df = d == T_F16 || d == T_F32 || d == T_F64, sf = s == T_F16 || s == T_F32 || s == T_F64;
    if (sf) {
        double x = s == T_F16 ? half_to_float((uint16_t)v) : s == T_F32 ? f32(v) : f64(v);
        if (in->mod == R_RNI || in->mod == R_RZI || in->mod == R_RMI || in->mod == R_RPI) {
            if (d == T_F16 || d == T_F32 || d == T_F64) /* to an integral value, same type */
                x = in->mod == R_RNI   ? nearbyint(x)
                    : in->mod == R_RMI ? floor(x)
                    : in->mod == R_RPI ? ceil(x)
                                       : trunc(x);
        }
        if (d == T_F16) return float_to_half((float)x); /* f64 -> f16 goes through f32 */
        if (d == T_F32) return bits32((float)x);
        if (d == T_F64) return bits64(x);
        return float_to_int(x, in->mod, d);
    }
    uint64_t w = ext(v, s);
    if (df) {
        float xf = tsigned(s) ? (float)(int64_t)w : (float)w;
        double xd = tsigned(s) ? (double)(int64_t)w : (double)w;
        if (d == T_F16) return float_to_half(xf);
        return d == T_F32 ? bits32(xf) : bits64(xd);
    }
    return mask(w, tbits(d));
}

/* integer and float arithmetic of one ALU instruction */
static uint64_t alu(const instr *in, uint64_t a, uint64_t b, uint64_t c) {
    ptype t = (ptype)in->t;
    int bits = tbits(t);
    if (t == T_F32) {
        float x = f32(a), y = f32(b);
        switch (in->op) {
        case OP_ADD: return bits32(x + y);
        case OP_SUB: return bits32(x - y);
        case OP_MUL: return bits32(x * y);
        case OP_DIV: return bits32(x / y);
        case OP_FMA:
        case OP_MAD: return bits32(fmaf(x, y, f32(c)));
        case OP_NEG: return bits32(-x);
        case OP_ABS: return bits32(fabsf(x));
        case OP_MIN: return bits32(fminf(x, y));
        case OP_MAX: return bits32(fmaxf(x, y));
        case OP_EX2: return bits32(exp2f(x));
        case OP_LG2: return bits32(log2f(x));
        case OP_SIN: return bits32(sinf(x));
        case OP_COS: return bits32(cosf(x));
        case OP_RCP: return bits32(1.0f / x);
        case OP_SQRT: return bits32(sqrtf(x));
        case OP_RSQRT: return bits32(1.0f / sqrtf(x));
        default: return 0;
        }
    }
    if (t == T_F64) {
        double x = f64(a), y = f64(b);
        switch (in->op) {
        case OP_ADD: return bits64(x + y);
        case OP_SUB: return bits64(x - y);
        case OP_MUL: return bits64(x * y);
        case OP_DIV: return bits64(x / y);
        case OP_FMA:
        case OP_MAD: return bits64(fma(x, y, f64(c)));
        case OP_NEG: return bits64(-x);
        case OP_ABS: return bits64(fabs(x));
        case OP_MIN: return bits64(fmin(x, y));
        case OP_MAX: return bits64(fmax(x, y));
        case OP_RCP: { /* .approx.ftz: exact here (CUDA refines the guess anyway) */
            bool ftz = in->mod == M_FTZ;
            double r = 1.0 / (ftz && fpclassify(x) == FP_SUBNORMAL ? copysign(0.0, x) : x);
            return bits64(ftz && fpclassify(r) == FP_SUBNORMAL ? copysign(0.0, r) : r);
        }
        case OP_SQRT: return bits64(sqrt(x));
        default: return 0;
        }
    }
    bool sg = tsigned(t);
    uint64_t ua = ext(a, t), ub = ext(b, t);
    int64_t sa = (int64_t)ua, sb = (int64_t)ub;
    switch (in->op) {
    case OP_ADD: return mask(ua + ub, bits);
    case OP_SUB: return mask(ua - ub, bits);
    case OP_MUL:
    case OP_MAD: {
        uint64_t add = in->op == OP_MAD ? c : 0;
        if (in->mod == M_WIDE) return mask(ua * ub + add, 2 * bits);
        if (in->mod == M_HI) {
            uint64_t hi;
            if (bits == 64)
                hi = sg ? (uint64_t)(((__int128)sa * sb) >> 64)
                        : (uint64_t)(((unsigned __int128)ua * ub) >> 64);
            else hi = sg ? (uint64_t)((sa * sb) >> bits) : (ua * ub) >> bits;
            return mask(hi + add, bits);
        }
        return mask(ua * ub + add, bits);
    }
    case OP_DIV:
        if (ub == 0) return mask(~0ULL, bits);
        if (sg) return sb == -1 ? mask((uint64_t)0 - ua, bits) : mask((uint64_t)(sa / sb), bits);
        return mask(ua / ub, bits);
    case OP_REM:
        if (ub == 0) return mask(ua, bits);
        if (sg) return sb == -1 ? 0 : mask((uint64_t)(sa % sb), bits);
        return mask(ua % ub, bits);
    case OP_NEG: return mask((uint64_t)0 - ua, bits);
    case OP_ABS: return mask(sa < 0 ? (uint64_t)0 - ua : ua, bits);
    case OP_MIN: return mask(sg ? (sa < sb ? ua : ub) : (ua < ub ? ua : ub), bits);
    case OP_MAX: return mask(sg ? (sa > sb ? ua : ub) : (ua > ub ? ua : ub), bits);
    case OP_AND: return t == T_PRED ? (a & b & 1) : mask(a & b, bits);
    case OP_OR: return t == T_PRED ? ((a | b) & 1) : mask(a | b, bits);
    case OP_XOR: return t == T_PRED ? ((a ^ b) & 1) : mask(a ^ b, bits);
    case OP_NOT: return t == T_PRED ? (~a & 1) : mask(~a, bits);
    case OP_CNOT: return mask(a, bits) == 0;
    case OP_SHL: {
        uint64_t n = mask(b, 32);
        return n >= (uint64_t)bits ? 0 : mask(a << n, bits);
    }
    case OP_SHR: {
        uint64_t n = mask(b, 32);
        if (sg) return mask((uint64_t)(sa >> (n >= (uint64_t)bits ? bits - 1 : (int)n)), bits);
        return n >= (uint64_t)bits ? 0 : mask(ua >> n, bits);
    }
    default: return 0;
    }
}

/* runs th until ret (0), bar.sync (1) or an error (-1) */
static int run_thread(launch *l, thread *th) {
    const instr *code = l->k->code;
    uint64_t *r = th->r;
    for (;;) {
        const instr *in = &code[th->pc++];
        if (++th->steps > STEP_LIMIT)
            return fail(l, th, in, "more than %lld instructions (a runaway loop?)", STEP_LIMIT);
        if (in->guard >= 0 && (r[in->guard] != 0) == in->guard_neg) continue;
        const operand *o = in->o;
        switch ((opcode)in->op) {
        case OP_BRA: th->pc = (int)o[0].imm; break;
        case OP_RET: th->is_done = true; return 0;
        case OP_BAR: return 1;
        case OP_CVTA:
        case OP_MOV:
            if (o[0].kind == K_VEC || o[1].kind == K_VEC) { /* pack / unpack */
                int part = tbits((ptype)in->t) / (o[0].kind == K_VEC ? o[0].n_vec : o[1].n_vec);
                if (o[0].kind == K_VEC) {
                    uint64_t v = val(l, th, &o[1]);
                    for (int i = 0; i < o[0].n_vec; i++)
                        if (o[0].vec[i] >= 0) r[o[0].vec[i]] = mask(v >> (i * part), part);
                } else {
                    uint64_t v = 0;
                    for (int i = o[1].n_vec - 1; i >= 0; i--)
                        v = (v << part) | mask(o[1].vec[i] >= 0 ? r[o[1].vec[i]] : 0, part);
                    r[o[0].reg] = v;
                }
                break;
            }
            r[o[0].reg] = mask(val(l, th, &o[1]), tbits((ptype)in->t));
            break;
        case OP_SELP:
            r[o[0].reg] = val(l, th, &o[3]) ? val(l, th, &o[1]) : val(l, th, &o[2]);
            break;
        case OP_SETP: {
            bool p = compare(in->mod, (ptype)in->t, val(l, th, &o[1]), val(l, th, &o[2]));
            if (in->bool_op) {
                bool q = val(l, th, &o[3]) != 0;
                p = in->bool_op == OP_AND ? (p && q) : in->bool_op == OP_OR ? (p || q) : (p != q);
            }
            r[o[0].reg] = p;
            break;
        }
        case OP_CVT: r[o[0].reg] = cvt(in, val(l, th, &o[1])); break;
        case OP_PRMT: { /* byte k of d: byte (c >> 4k) & 7 of {b, a}, or its sign with bit 3 */
            uint64_t ab = mask(val(l, th, &o[1]), 32) | mask(val(l, th, &o[2]), 32) << 32;
            uint32_t c = (uint32_t)val(l, th, &o[3]), d = 0;
            for (int k = 0; k < 4; k++) {
                unsigned sel = (c >> (4 * k)) & 15, byte = (unsigned)(ab >> (8 * (sel & 7))) & 255;
                if (sel & 8) byte = byte & 128 ? 255 : 0;
                d |= (uint32_t)byte << (8 * k);
            }
            r[o[0].reg] = d;
            break;
        }
        case OP_BFI: {
            uint64_t a = val(l, th, &o[1]), b = val(l, th, &o[2]);
            unsigned pos = (unsigned)val(l, th, &o[3]) & 255,
                     len = (unsigned)val(l, th, &o[4]) & 255;
            int bits = tbits((ptype)in->t);
            uint64_t d = b;
            if (len > 0 && pos < (unsigned)bits) {
                if (pos + len > (unsigned)bits) len = (unsigned)bits - pos;
                uint64_t m = mask(~0ULL, (int)len) << pos;
                d = (b & ~m) | ((a << pos) & m);
            }
            r[o[0].reg] = mask(d, bits);
            break;
        }
        case OP_LD:
        case OP_ST: {
            const operand *addr = in->op == OP_LD ? &o[1] : &o[0];
            const operand *reg = in->op == OP_LD ? &o[0] : &o[1];
            size_t n = (size_t)tbits((ptype)in->t) / 8;
            if (in->mod == S_PARAM) {
                int idx = (int)(addr->imm / 4096);
                if (in->op != OP_LD || addr->sym != SYM_PARAM || idx >= l->k->n_params)
                    return fail(l, th, in, "param access not understood");
                r[reg->reg] = ext(load_bytes((const uint8_t *)l->params[idx] + addr->imm % 4096, n),
                                  (ptype)in->t);
                break;
            }
            uint64_t p =
                (addr->reg >= 0 ? r[addr->reg] : sym_base(l, th, addr->sym)) + (uint64_t)addr->imm;
            int space = in->mod ? in->mod : S_GLOBAL;
            if (!check_access(l, th, in, space, p, n * in->vec)) return -1;
            if (space == S_SHARED && !check_race(l, th, in, p, n * in->vec, in->op == OP_ST))
                return -1;
            for (int i = 0; i < in->vec; i++) {
                int rr = reg->kind == K_VEC ? reg->vec[i] : reg->reg;
                uint8_t *at = (uint8_t *)(uintptr_t)p + (size_t)i * n;
                if (in->op == OP_LD) {
                    if (rr >= 0) r[rr] = ext(load_bytes(at, n), (ptype)in->t);
                } else {
                    uint64_t v = reg->kind == K_VEC ? (rr >= 0 ? r[rr] : 0) : val(l, th, reg);
                    memcpy(at, &v, n);
                }
            }
            break;
        }
        case OP_ADD:
        case OP_SUB:
        case OP_MUL:
        case OP_MAD:
        case OP_FMA:
        case OP_DIV:
        case OP_REM:
        case OP_NEG:
        case OP_ABS:
        case OP_MIN:
        case OP_MAX:
        case OP_AND:
        case OP_OR:
        case OP_XOR:
        case OP_NOT:
        case OP_CNOT:
        case OP_SHL:
        case OP_SHR:
        case OP_EX2:
        case OP_LG2:
        case OP_SIN:
        case OP_COS:
        case OP_RCP:
        case OP_SQRT:
        case OP_RSQRT:
            r[o[0].reg] = alu(in, val(l, th, &o[1]), in->n > 2 ? val(l, th, &o[2]) : 0,
                              in->n > 3 ? val(l, th, &o[3]) : 0);
            break;
        case OP_UNKNOWN: return fail(l, th, in, "unknown instruction");
        }
    }
}

int ptx_run(ptx_kernel *k, const unsigned grid[3], const unsigned block[3], void **params,
            ptx_range_fn ask_range, char *err, size_t err_size) {
    launch l = {.k = k, .params = params, .ask_range = ask_range, .err = err, .err_size = err_size};
    memcpy(l.grid, grid, sizeof l.grid);
    memcpy(l.block, block, sizeof l.block);
    if (k->unsupported[0]) {
        snprintf(err, err_size, "kernel '%s' cannot be interpreted: %s", k->name, k->unsupported);
        return -2;
    }
    size_t n_threads = (size_t)block[0] * block[1] * block[2], n_regs = (size_t)k->n_regs + 1;
    thread *ths = calloc(n_threads, sizeof *ths);
    uint64_t *regs = calloc(n_threads * n_regs, sizeof *regs);
    uint8_t *locals = calloc(n_threads, k->local_size ? k->local_size : 1);
    size_t sh = k->shared_size ? k->shared_size : 1;
    l.shared = malloc(sh);
    l.w_id = calloc(sh, sizeof *l.w_id), l.w_epoch = calloc(sh, sizeof *l.w_epoch);
    l.r_id = calloc(sh, sizeof *l.r_id), l.r_epoch = calloc(sh, sizeof *l.r_epoch);
    int rc = 0;
    if (!ths || !regs || !locals || !l.shared || !l.w_id || !l.w_epoch || !l.r_id || !l.r_epoch) {
        snprintf(err, err_size, "kernel '%s': out of host memory for %zu threads", k->name,
                 n_threads);
        rc = -1;
    }
    for (unsigned bz = 0; rc == 0 && bz < grid[2]; bz++)
        for (unsigned by = 0; rc == 0 && by < grid[1]; by++)
            for (unsigned bx = 0; rc == 0 && bx < grid[0]; bx++) {
                l.cta[0] = bx, l.cta[1] = by, l.cta[2] = bz;
                l.epoch++;
                memset(l.shared, 0xff, sh);
                for (size_t t = 0; t < n_threads; t++) {
                    thread *th = &ths[t];
                    memset(th, 0, sizeof *th);
                    th->r = regs + t * n_regs;
                    th->local = locals + t * (k->local_size ? k->local_size : 1);
                    th->tid[0] = (unsigned)(t % block[0]);
                    th->tid[1] = (unsigned)(t / block[0] % block[1]);
                    th->tid[2] = (unsigned)(t / ((size_t)block[0] * block[1]));
                    th->id = (uint32_t)t + 1;
                }
                for (bool is_waiting = true; is_waiting && rc == 0;) {
                    /* every live thread to its next barrier or its end; all that
                     * wait must wait at the same bar.sync, and none may end while
                     * others wait (a barrier in divergent code) */
                    is_waiting = false;
                    l.epoch++;        /* a new barrier interval */
                    int at = -1;      /* the bar.sync they wait at */
                    size_t first = 0; /* the first thread waiting there */
                    size_t ended = n_threads;
                    for (size_t t = 0; t < n_threads && rc == 0; t++) {
                        if (ths[t].is_done) continue;
                        int s = run_thread(&l, &ths[t]);
                        if (s < 0) rc = -1;
                        if (s == 0 && ended == n_threads) ended = t;
                        if (s != 1) continue;
                        is_waiting = true;
                        if (at < 0) at = ths[t].pc, first = t;
                        if (ths[t].pc != at)
                            rc = fail(&l, &ths[t], &k->code[ths[t].pc - 1],
                                      "waits at another bar.sync than thread %zu", first);
                    }
                    if (rc == 0 && is_waiting && ended < n_threads)
                        rc = fail(&l, &ths[ended], &k->code[ths[ended].pc - 1],
                                  "ended while other threads wait at the bar.sync of PTX line %d",
                                  k->code[at - 1].line);
                }
            }
    free(ths);
    free(regs);
    free(locals);
    free(l.shared);
    free(l.w_id), free(l.w_epoch), free(l.r_id), free(l.r_epoch);
    return rc;
}
