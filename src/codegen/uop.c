/* uop.c - the UOp builder: hash-consing, simplification as UOps are made
 * (constant folding, identities, range analysis of integer math), placement
 * in the innermost loop a UOp needs, and linearization.
 *
 * Scopes: RANGE and IF open a body; UOps with sources go into the innermost
 * body their sources need, but never above the innermost open IF (work
 * inside a gate stays gated). When an IF closes, the UOps made inside it
 * leave the hash-consing table, so nothing after the block reuses them.
 * Thread ids, local arrays and the barriers around them: gpu.c.
 *
 * Every UOp lives in the kernel's arena (tc_kernel_uops.arena).
 */
#include "codegen.h"

#include <math.h>
#include <string.h>

const char *const tc_uop_names[TC_UOP_COUNT] = {
    [TC_UOP_DEFINE_GLOBAL] = "DEFINE_GLOBAL", [TC_UOP_DEFINE_ACC] = "DEFINE_ACC",
    [TC_UOP_CONST] = "CONST",                 [TC_UOP_SPECIAL] = "SPECIAL",
    [TC_UOP_RANGE] = "RANGE",                 [TC_UOP_ENDRANGE] = "ENDRANGE",
    [TC_UOP_LOAD] = "LOAD",                   [TC_UOP_STORE] = "STORE",
    [TC_UOP_ALU] = "ALU",                     [TC_UOP_CAST] = "CAST",
    [TC_UOP_BITCAST] = "BITCAST",             [TC_UOP_ASSIGN] = "ASSIGN",
    [TC_UOP_DEFINE_LOCAL] = "DEFINE_LOCAL",   [TC_UOP_BARRIER] = "BARRIER",
    [TC_UOP_IF] = "IF",                       [TC_UOP_ENDIF] = "ENDIF",
    [TC_UOP_GEP] = "GEP",                     [TC_UOP_PREFETCH] = "PREFETCH",
};

static const int64_t BIG = (int64_t)1 << 62; /* bounds beyond this are "unknown" */

static bool is_int(tc_dtype dt) {
    return !tc_dtypes[dt].is_float;
}

/* the range an int64 bound can state of dt; 64-bit integers: unknown
 * (uint64's values past 2^63 are negative as int64s, so its ALUs keep
 * this; its constants hold their bits) */
static void dtype_bounds(tc_dtype dt, int64_t *lo, int64_t *hi) {
    if (!tc_dtype_int_range(dt, lo, hi) || tc_dtypes[dt].size == 8) *lo = -BIG, *hi = BIG;
}

void tc_ub_init(tc_ub *ub, tc_kernel_uops *k) {
    memset(ub, 0, sizeof *ub);
    ub->k = k;
    ub->open[0] = &ub->top;
    ub->if_depth = -1;
}

static bool ulist_push(tc_ub *ub, tc_ulist *l, int at, tc_uop *u) {
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 16;
        tc_uop **items = tc_arena_alloc(&ub->k->arena, sizeof(tc_uop *) * (size_t)cap);
        if (!items) return false;
        if (l->n) memcpy(items, l->items, sizeof(tc_uop *) * (size_t)l->n);
        l->items = items;
        l->cap = cap;
    }
    memmove(l->items + at + 1, l->items + at, sizeof(tc_uop *) * (size_t)(l->n - at));
    l->items[at] = u;
    l->n++;
    return true;
}

/* puts u at depth d (<= the current depth): appended to the current body,
 * or, hoisted, just before the open scope at depth d+1 */
static tc_uop *put(tc_ub *ub, tc_uop *u, int d) {
    u->depth = d;
    tc_ulist *l = ub->open[d];
    if (!ulist_push(ub, l, d < ub->depth ? l->n - 1 : l->n, u)) {
        ub->failed = true;
        return NULL;
    }
    return u;
}

/* puts u in the innermost open loop its sources need, not above the
 * innermost open IF (or the current body when pinned) */
static tc_uop *place(tc_ub *ub, tc_uop *u, bool pinned) {
    int d = 0;
    for (int i = 0; i < u->n_srcs; i++) {
        int sd = u->srcs[i]->depth + (u->srcs[i]->op == TC_UOP_RANGE);
        if (sd > d) d = sd;
    }
    if (u->n_srcs > 0 && d < ub->floor[ub->depth]) d = ub->floor[ub->depth];
    if (u->op == TC_UOP_LOAD && u->srcs[0]->is_scratch && d < ub->scratch_floor)
        d = ub->scratch_floor; /* a row kernel's row: not above the rows (lower_rows.c) */
    if (pinned) d = ub->depth;
    return put(ub, u, d);
}

static uint64_t uop_hash(const tc_uop *u) {
    uint64_t h = tc_hash_combine((uint64_t)u->op * 131 + (uint64_t)u->dtype,
                                 ((uint64_t)u->alu * 2 + u->is_lane) * 64 + (uint64_t)u->vcount);
    for (int i = 0; i < u->n_srcs; i++) h = tc_hash_combine(h, (uint64_t)(uintptr_t)u->srcs[i]);
    h = tc_hash_combine(h, (uint64_t)u->arg);
    h = tc_hash_combine(h, (uint64_t)u->ivalue);
    return tc_hash_combine(h, tc_hash_bytes(&u->value, sizeof u->value, 0));
}

static bool uop_same(const tc_uop *a, const tc_uop *b) {
    if (a->op != b->op || a->dtype != b->dtype || a->vcount != b->vcount || a->alu != b->alu ||
        a->n_srcs != b->n_srcs ||
        a->arg != b->arg || a->ivalue != b->ivalue || a->is_lane != b->is_lane ||
        memcmp(&a->value, &b->value, sizeof a->value) != 0)
        return false;
    for (int i = 0; i < a->n_srcs; i++)
        if (a->srcs[i] != b->srcs[i]) return false;
    return true;
}

/* returns the existing equal UOp, or places and records the new one */
static tc_uop *intern(tc_ub *ub, tc_uop *u) {
    u->hash = uop_hash(u);
    tc_uop **bucket = &ub->table[u->hash % TC_UB_BUCKETS];
    for (tc_uop *m = *bucket; m; m = m->hash_next)
        if (m->hash == u->hash && uop_same(m, u)) return m;
    if (!place(ub, u, false)) return NULL;
    u->hash_next = *bucket;
    *bucket = u;
    return u;
}

static tc_uop *new_uop(tc_ub *ub, tc_uop_op op, tc_dtype dt, int n, tc_uop *const *srcs) {
    if (ub->failed) return NULL;
    for (int i = 0; i < n; i++)
        if (!srcs[i]) return NULL;
    tc_uop *u = tc_arena_alloc(&ub->k->arena, sizeof *u);
    if (!u) {
        ub->failed = true;
        return NULL;
    }
    u->op = op;
    u->dtype = dt;
    u->vcount = 1;
    u->n_srcs = n;
    for (int i = 0; i < n; i++) {
        u->srcs[i] = srcs[i];
        /* an ALU or cast of a vector is a vector (scalar operands broadcast) */
        if ((op == TC_UOP_ALU || op == TC_UOP_CAST) && srcs[i]->vcount > u->vcount) u->vcount = srcs[i]->vcount;
    }
    u->is_index = ub->index_mode;
    dtype_bounds(dt, &u->vmin, &u->vmax);
    return u;
}

tc_uop *tc_ub_const(tc_ub *ub, tc_dtype dt, double value, int64_t ivalue) {
    tc_uop *u = new_uop(ub, TC_UOP_CONST, dt, 0, NULL);
    if (!u) return NULL;
    if (is_int(dt)) {
        value = tc_dtype_int_to_double(dt, ivalue);
        u->vmin = u->vmax = ivalue;
    } else {
        value = tc_dtype_round(dt, value);
        ivalue = 0;
    }
    u->value = value;
    u->ivalue = ivalue;
    return intern(ub, u);
}

tc_uop *tc_ub_iconst(tc_ub *ub, tc_dtype dt, int64_t v) {
    return tc_ub_const(ub, dt, (double)v, v);
}

static bool is_const(const tc_uop *u) {
    return u && u->op == TC_UOP_CONST;
}

static bool is_iconst(const tc_uop *u, int64_t v) {
    return is_const(u) && is_int(u->dtype) && u->ivalue == v;
}

/* ---- integer range analysis ---- */

static int64_t clamp_add(int64_t a, int64_t b) {
    __int128 r = (__int128)a + b;
    return r > BIG ? BIG : r < -BIG ? -BIG : (int64_t)r;
}

static void set_bounds(tc_uop *u) {
    if (!is_int(u->dtype) || u->op != TC_UOP_ALU || u->dtype == TC_UINT64) return;
    int64_t lo, hi;
    dtype_bounds(u->dtype, &lo, &hi);
    const tc_uop *a = u->srcs[0], *b = u->n_srcs > 1 ? u->srcs[1] : NULL;
    tc_op op = u->alu;
    if (tc_ops[op].is_comparison) {
        lo = 0, hi = 1;
    } else if (op == TC_OP_ADD) {
        lo = clamp_add(a->vmin, b->vmin), hi = clamp_add(a->vmax, b->vmax);
    } else if (op == TC_OP_MUL) {
        int64_t p[4];
        bool ovf = __builtin_mul_overflow(a->vmin, b->vmin, &p[0]) |
                   __builtin_mul_overflow(a->vmin, b->vmax, &p[1]) |
                   __builtin_mul_overflow(a->vmax, b->vmin, &p[2]) |
                   __builtin_mul_overflow(a->vmax, b->vmax, &p[3]);
        if (!ovf) {
            lo = hi = p[0];
            for (int i = 1; i < 4; i++) lo = p[i] < lo ? p[i] : lo, hi = p[i] > hi ? p[i] : hi;
        }
    } else if (op == TC_OP_IDIV) {
        if (b->op == TC_UOP_CONST && b->ivalue > 0) lo = a->vmin / b->ivalue, hi = a->vmax / b->ivalue;
    } else if (op == TC_OP_MOD) {
        if (b->op == TC_UOP_CONST && b->ivalue > 0) {
            hi = a->vmax < b->ivalue - 1 ? (a->vmax > 0 ? a->vmax : 0) : b->ivalue - 1;
            lo = a->vmin >= 0 ? 0 : -(b->ivalue - 1);
        }
    } else if (op == TC_OP_MAX) {
        lo = a->vmin > b->vmin ? a->vmin : b->vmin;
        hi = a->vmax > b->vmax ? a->vmax : b->vmax;
    } else if (op == TC_OP_NEG) {
        if (u->dtype != TC_BOOL) lo = -a->vmax, hi = -a->vmin;
    } else if (op == TC_OP_WHERE) {
        lo = b->vmin < u->srcs[2]->vmin ? b->vmin : u->srcs[2]->vmin;
        hi = b->vmax > u->srcs[2]->vmax ? b->vmax : u->srcs[2]->vmax;
    } else if (op == TC_OP_AND) {
        if (u->dtype == TC_BOOL || (a->vmin >= 0 && b->vmin >= 0))
            lo = 0, hi = a->vmax < b->vmax ? a->vmax : b->vmax;
    } /* any other op: the dtype's range */
    int64_t dlo, dhi;
    dtype_bounds(u->dtype, &dlo, &dhi);
    u->vmin = lo < dlo ? dlo : lo;
    u->vmax = hi > dhi ? dhi : hi;
    if (u->vmin > u->vmax) u->vmin = dlo, u->vmax = dhi;
}

/* ---- sums of terms, for div/mod folding ---- */

typedef struct {
    tc_uop *terms[32]; /* non-constant terms */
    int n;             /* number of terms */
    int64_t c;         /* constant part */
    bool ok;           /* fit in the arrays */
} sum_terms;

static void split_sum(tc_uop *u, sum_terms *s) {
    if (u->op == TC_UOP_ALU && u->alu == TC_OP_ADD) {
        split_sum(u->srcs[0], s);
        split_sum(u->srcs[1], s);
    } else if (is_const(u)) {
        s->c += u->ivalue;
    } else if (s->n < 32) {
        s->terms[s->n++] = u;
    } else {
        s->ok = false;
    }
}

/* a term's constant factor (x*k -> k, else 1) and the rest */
static int64_t term_factor(tc_uop *t, tc_uop **rest) {
    if (t->op == TC_UOP_ALU && t->alu == TC_OP_MUL && is_const(t->srcs[1])) {
        *rest = t->srcs[0];
        return t->srcs[1]->ivalue;
    }
    *rest = t;
    return 1;
}

/* x // c and x % c for c > 0 and x >= 0: multiples of c leave the remainder;
 * a remainder known to lie in [0, c) disappears from the quotient */
static tc_uop *fold_divmod(tc_ub *ub, tc_op op, tc_uop *x, int64_t c) {
    tc_dtype dt = x->dtype;
    sum_terms s = {.ok = true};
    split_sum(x, &s);
    if (!s.ok) return NULL;
    /* the constant part c0 goes to the remainder whole when that keeps the
     * remainder >= 0 (a padded view's negative offset next to the terms it
     * offsets), else split floor-wise, c0 = qc * c + rc with rc in [0, c);
     * of two that work, the one whose remainder is below c */
    int64_t lo = 0, hi = 0;
    for (int i = 0; i < s.n; i++) {
        tc_uop *rest;
        int64_t k = term_factor(s.terms[i], &rest);
        if (k % c == 0 && rest->vmin >= 0) continue;
        lo = clamp_add(lo, s.terms[i]->vmin), hi = clamp_add(hi, s.terms[i]->vmax);
    }
    int64_t q1 = s.c >= 0 ? s.c / c : 0, r1 = s.c >= 0 ? s.c % c : s.c;
    int64_t q2 = s.c / c - (s.c % c < 0), r2 = s.c - q2 * c;
    bool ok1 = clamp_add(r1, lo) >= 0, ok2 = clamp_add(r2, lo) >= 0;
    bool use2 = !ok1 || (ok2 && clamp_add(r1, hi) >= c && clamp_add(r2, hi) < c);
    int64_t qc = use2 ? q2 : q1, rc = use2 ? r2 : r1;
    tc_uop *quot = tc_ub_iconst(ub, dt, qc);
    tc_uop *rem = tc_ub_iconst(ub, dt, rc);
    bool moved = qc != 0;
    for (int i = 0; i < s.n; i++) {
        tc_uop *rest;
        int64_t k = term_factor(s.terms[i], &rest);
        if (k % c == 0 && rest->vmin >= 0) {
            quot = tc_ub_alu(ub, TC_OP_ADD, dt, 2, quot,
                             tc_ub_alu(ub, TC_OP_MUL, dt, 2, rest, tc_ub_iconst(ub, dt, k / c),
                                       NULL),
                             NULL);
            moved = true;
        } else {
            rem = tc_ub_alu(ub, TC_OP_ADD, dt, 2, rem, s.terms[i], NULL);
        }
    }
    if (!rem || !quot || rem->vmin < 0) return NULL;
    bool small = rem->vmax < c;
    if (!moved && !small) return NULL;
    if (op == TC_OP_MOD) return small ? rem : tc_ub_alu(ub, TC_OP_MOD, dt, 2, rem, tc_ub_iconst(ub, dt, c), NULL);
    tc_uop *rq = small ? NULL : tc_ub_alu(ub, TC_OP_IDIV, dt, 2, rem, tc_ub_iconst(ub, dt, c), NULL);
    return rq ? tc_ub_alu(ub, TC_OP_ADD, dt, 2, quot, rq, NULL) : quot;
}

/* ---- building with simplification ---- */

/* op over constant operands, both ways: *ri on the int64 values (wrapping;
 * the caller wraps to the dtype; uint64's bits, compared and divided as
 * unsigned when is_u64), *rx on the doubles (the transcendentals in float32
 * math, or in double, libm's, when is_f64: as the reference evaluator
 * computes them). Returns whether op folds in the domain `ints` says (the
 * other domain's result is computed from 0s or converted values, and traps
 * on nothing). Shifts are not folded. */
static bool fold(tc_op op, bool ints, bool is_f64, bool is_u64, const int64_t *i, const double *x,
                 int64_t *ri, double *rx) {
    if (ints ? tc_ops[op].is_float_only : tc_ops[op].is_int_only) return false;
    int64_t a = i[0], b = i[1], c = i[2];
    uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
    if (is_u64 && (op == TC_OP_IDIV || op == TC_OP_MOD)) {
        *ri = ub == 0 ? 0 : (int64_t)(op == TC_OP_IDIV ? ua / ub : ua % ub);
        return true;
    }
    if (is_u64 && (op == TC_OP_MAX || op == TC_OP_CMPLT)) {
        *ri = op == TC_OP_MAX ? (ua > ub ? a : b) : ua < ub;
        return true;
    }
    switch (op) {
    case TC_OP_EXP2: *rx = is_f64 ? exp2(x[0]) : exp2f((float)x[0]); return true;
    case TC_OP_LOG2: *rx = is_f64 ? log2(x[0]) : log2f((float)x[0]); return true;
    case TC_OP_SIN: *rx = is_f64 ? sin(x[0]) : sinf((float)x[0]); return true;
    case TC_OP_SQRT: *rx = is_f64 ? sqrt(x[0]) : sqrtf((float)x[0]); return true;
    case TC_OP_RECIP: *rx = is_f64 ? 1.0 / x[0] : 1.0f / (float)x[0]; return true;
    case TC_OP_NEG: *ri = (int64_t)(0 - ua), *rx = -x[0]; return true;
    case TC_OP_ADD: *ri = (int64_t)(ua + ub), *rx = x[0] + x[1]; return true;
    case TC_OP_MUL: *ri = (int64_t)(ua * ub), *rx = x[0] * x[1]; return true;
    case TC_OP_IDIV: *ri = b == 0 ? 0 : (b == -1 ? (int64_t)(0 - ua) : a / b); return ints;
    case TC_OP_MOD: *ri = b == 0 || b == -1 ? 0 : a % b; return ints;
    case TC_OP_MAX: /* NaN wins, as in torch */
        *ri = a > b ? a : b, *rx = x[0] > x[1] || x[0] != x[0] ? x[0] : x[1];
        return true;
    case TC_OP_CMPLT: *ri = a < b, *rx = x[0] < x[1]; return true;
    case TC_OP_CMPNE: *ri = a != b, *rx = x[0] != x[1]; return true;
    case TC_OP_AND: *ri = a & b; return true;
    case TC_OP_OR: *ri = a | b; return true;
    case TC_OP_XOR: *ri = a ^ b; return true;
    case TC_OP_WHERE: *ri = a ? b : c, *rx = x[0] != 0 ? x[1] : x[2]; return true;
    case TC_OP_MULACC:
        *ri = (int64_t)(ua * ub + (uint64_t)c), *rx = x[0] * x[1] + x[2];
        return true;
    case TC_OP_SHL:
    case TC_OP_SHR:
    case TC_OP_CAST:
    case TC_OP_BITCAST:
    case TC_OP_REDUCE_SUM:
    case TC_OP_REDUCE_MAX:
    case TC_OP_REDUCE_PROD:
    case TC_OP_CONST:
    case TC_OP_BUFFER:
    case TC_OP_VIEW:
    case TC_OP_COPY:
    case TC_OP_CONTIGUOUS:
    case TC_OP_ASSIGN:
    case TC_OP_GATHER:
    case TC_OP_SCATTER:
    case TC_OP_PUT:
    case TC_OP_LOAD:
    case TC_OP_STORE:
    case TC_OP_SINK:
    case TC_OP_COUNT: break;
    }
    return false;
}

static tc_uop *try_fold_consts(tc_ub *ub, tc_op op, tc_dtype dt, int n, tc_uop *const *s) {
    for (int i = 0; i < n; i++)
        if (!is_const(s[i])) return NULL;
    /* the operand dtype decides the arithmetic (CMPLT of floats gives bool) */
    tc_dtype in = op == TC_OP_WHERE ? s[1]->dtype : s[0]->dtype;
    int64_t iv[3] = {0, 0, 0}, ri = 0;
    double xv[3] = {0, 0, 0}, rx = 0;
    for (int k = 0; k < n; k++) iv[k] = s[k]->ivalue, xv[k] = s[k]->value;
    if (!fold(op, is_int(in), in == TC_FLOAT64, in == TC_UINT64, iv, xv, &ri, &rx)) return NULL;
    if (is_int(in)) return tc_ub_iconst(ub, dt, tc_dtype_wrap(dt, ri));
    return is_int(dt) ? tc_ub_iconst(ub, dt, tc_dtype_double_to_int(dt, rx)) : tc_ub_const(ub, dt, rx, 0);
}

/* identities and range-based folds; NULL when nothing applies */
static tc_uop *simplify(tc_ub *ub, tc_op op, tc_dtype dt, int n, tc_uop **s) {
    tc_uop *r = try_fold_consts(ub, op, dt, n, s);
    if (r || ub->failed) return r;
    tc_uop *a = s[0], *b = n > 1 ? s[1] : NULL;
    bool ints = is_int(a->dtype) && dt != TC_BOOL;
    if (op == TC_OP_ADD) {
        if (is_iconst(b, 0) || (is_const(b) && !ints && b->value == 0 && dt != TC_BOOL)) return a;
        if (ints && is_const(b) && a->op == TC_UOP_ALU && a->alu == TC_OP_ADD && is_const(a->srcs[1]))
            return tc_ub_alu(ub, TC_OP_ADD, dt, 2, a->srcs[0],
                             tc_ub_iconst(ub, dt, tc_dtype_wrap(dt, a->srcs[1]->ivalue + b->ivalue)), NULL);
        /* a constant term goes outermost: (x + c) + y -> (x + y) + c, so the
         * copies of a tile index one base at constant offsets (the C
         * compiler then keeps one pointer, not one per copy: conv2's dx
         * held 12 row pointers in 16 registers and spilled) */
        for (int k = 0; ints && k < 2; k++) {
            tc_uop *t = s[k], *o = s[1 - k];
            if (!is_const(o) && t->op == TC_UOP_ALU && t->alu == TC_OP_ADD && is_const(t->srcs[1]))
                return tc_ub_alu(ub, TC_OP_ADD, dt, 2,
                                 k ? tc_ub_alu(ub, TC_OP_ADD, dt, 2, o, t->srcs[0], NULL)
                                   : tc_ub_alu(ub, TC_OP_ADD, dt, 2, t->srcs[0], o, NULL),
                                 t->srcs[1], NULL); /* the terms keep their order */
        }
    } else if (op == TC_OP_MUL) {
        if (ints && is_iconst(b, 1)) return a;
        if (!ints && is_const(b) && b->value == 1 && dt != TC_BOOL) return a;
        if (ints && is_iconst(b, 0)) return b;
        if (ints && is_const(b) && a->op == TC_UOP_ALU && a->alu == TC_OP_MUL && is_const(a->srcs[1]))
            return tc_ub_alu(ub, TC_OP_MUL, dt, 2, a->srcs[0],
                             tc_ub_iconst(ub, dt, tc_dtype_wrap(dt, a->srcs[1]->ivalue * b->ivalue)), NULL);
    } else if (op == TC_OP_IDIV || op == TC_OP_MOD) {
        if (!ints || !is_const(b) || b->ivalue <= 0) return NULL;
        if (b->ivalue == 1) return op == TC_OP_IDIV ? a : tc_ub_iconst(ub, dt, 0);
        if (a->vmin >= 0 && a->vmax < b->ivalue) return op == TC_OP_IDIV ? tc_ub_iconst(ub, dt, 0) : a;
        if (a->vmin >= 0 && a->vmin / b->ivalue == a->vmax / b->ivalue) { /* one quotient q: x - q*c */
            int64_t q = a->vmin / b->ivalue;
            return op == TC_OP_IDIV ? tc_ub_iconst(ub, dt, q)
                                    : tc_ub_alu(ub, TC_OP_ADD, dt, 2, a, tc_ub_iconst(ub, dt, -q * b->ivalue), NULL);
        }
        if (a->vmin >= 0) return fold_divmod(ub, op, a, b->ivalue);
    } else if (op == TC_OP_CMPLT) {
        /* unsigned x < 0: never (uint64's bounds are unknown, so it needs the rule) */
        if (is_int(a->dtype) && !tc_dtypes[a->dtype].is_signed && is_iconst(b, 0))
            return tc_ub_iconst(ub, TC_BOOL, 0);
        if (is_int(a->dtype) && a->vmax < b->vmin) return tc_ub_iconst(ub, TC_BOOL, 1);
        if (is_int(a->dtype) && a->vmin >= b->vmax) return tc_ub_iconst(ub, TC_BOOL, 0);
    } else if (op == TC_OP_AND) {
        if (dt == TC_BOOL && is_iconst(b, 1)) return a;
        if (dt == TC_BOOL && is_iconst(a, 1)) return b;
        if (dt == TC_BOOL && (is_iconst(a, 0) || is_iconst(b, 0))) return tc_ub_iconst(ub, dt, 0);
        if (a == b) return a;
    } else if (op == TC_OP_OR) {
        if (dt == TC_BOOL && (is_iconst(a, 1) || is_iconst(b, 1))) return tc_ub_iconst(ub, dt, 1);
        if (dt == TC_BOOL && is_iconst(b, 0)) return a;
        if (dt == TC_BOOL && is_iconst(a, 0)) return b;
        if (a == b) return a;
    } else if (op == TC_OP_WHERE) {
        if (is_const(a)) return a->ivalue ? s[1] : s[2];
        if (s[1] == s[2]) return s[1];
    } /* any other op: no rule */
    return NULL;
}

tc_uop *tc_ub_alu(tc_ub *ub, tc_op op, tc_dtype dt, int n, tc_uop *a, tc_uop *b, tc_uop *c) {
    tc_uop *s[3] = {a, b, c};
    for (int i = 0; i < n; i++)
        if (!s[i] || ub->failed) return NULL;
    if (tc_ops[op].is_commutative && is_const(s[0]) && !is_const(s[1])) { /* constants go right */
        s[0] = b;
        s[1] = a;
    }
    tc_uop *r = simplify(ub, op, dt, n, s);
    if (r || ub->failed) return r;
    tc_uop *u = new_uop(ub, TC_UOP_ALU, dt, n, s);
    if (!u) return NULL;
    u->alu = op;
    set_bounds(u);
    return intern(ub, u);
}

tc_uop *tc_ub_cast(tc_ub *ub, tc_uop *x, tc_dtype dt, bool bitcast) {
    if (!x) return NULL;
    if (x->dtype == dt) return x;
    if (!bitcast && is_const(x)) {
        if (dt == TC_BOOL) return tc_ub_iconst(ub, dt, is_int(x->dtype) ? x->ivalue != 0 : x->value != 0);
        if (is_int(dt))
            return tc_ub_iconst(ub, dt, is_int(x->dtype) ? tc_dtype_wrap(dt, x->ivalue)
                                                         : tc_dtype_double_to_int(dt, x->value));
        return tc_ub_const(ub, dt, is_int(x->dtype) ? tc_dtype_int_to_double(x->dtype, x->ivalue) : x->value,
                           0);
    }
    tc_uop *u = new_uop(ub, bitcast ? TC_UOP_BITCAST : TC_UOP_CAST, dt, 1, &x);
    return u ? intern(ub, u) : NULL;
}

tc_uop *tc_ub_global(tc_ub *ub, int slot, tc_dtype dt) {
    tc_uop *u = new_uop(ub, TC_UOP_DEFINE_GLOBAL, dt, 0, NULL);
    if (!u) return NULL;
    u->arg = slot;
    return intern(ub, u);
}

/* ---- for gpu.c: the builder's own steps ---- */

tc_uop *tc_ub_new(tc_ub *ub, tc_uop_op op, tc_dtype dt, int n, tc_uop *const *srcs) {
    return new_uop(ub, op, dt, n, srcs);
}

tc_uop *tc_ub_put(tc_ub *ub, tc_uop *u, int depth) {
    return put(ub, u, depth);
}

tc_uop *tc_ub_intern(tc_ub *ub, tc_uop *u) {
    return intern(ub, u);
}

bool tc_ub_insert_first(tc_ub *ub, tc_uop *u) {
    bool ok = ulist_push(ub, &ub->top, 0, u);
    if (!ok) ub->failed = true;
    return ok;
}

/* ---- memory ---- */

void tc_ub_forget_written_loads(tc_ub *ub) {
    for (int b = 0; b < TC_UB_BUCKETS; b++) {
        tc_uop **p = &ub->table[b];
        while (*p) {
            const tc_uop *u = *p, *buf = u->op == TC_UOP_LOAD ? u->srcs[0] : NULL;
            bool written = buf && (buf->is_scratch || (buf->op == TC_UOP_DEFINE_GLOBAL &&
                                                       ub->k->buf_written[buf->arg]));
            if (written) *p = u->hash_next;
            else p = &(*p)->hash_next;
        }
    }
}

tc_uop *tc_ub_load(tc_ub *ub, tc_uop *buf, tc_uop *idx, tc_uop *valid) {
    if (buf && buf->op == TC_UOP_DEFINE_LOCAL && !buf->is_scratch)
        return tc_ub_local_load(ub, buf, idx);
    if (valid && is_iconst(valid, 0)) return tc_ub_const(ub, buf->dtype, 0, 0);
    return tc_ub_load_vec(ub, buf, idx, valid, 1);
}

tc_uop *tc_ub_load_vec(tc_ub *ub, tc_uop *buf, tc_uop *idx, tc_uop *valid, int lanes) {
    if (valid && is_iconst(valid, 1)) valid = NULL;
    tc_uop *s[3] = {buf, idx, valid};
    tc_uop *u = new_uop(ub, TC_UOP_LOAD, buf ? buf->dtype : TC_FLOAT32, valid ? 3 : 2, s);
    if (!u) return NULL;
    u->vcount = lanes;
    return intern(ub, u);
}

tc_uop *tc_ub_load_here(tc_ub *ub, tc_uop *buf, tc_uop *idx) {
    tc_uop *s[2] = {buf, idx};
    tc_uop *u = new_uop(ub, TC_UOP_LOAD, buf ? buf->dtype : TC_FLOAT32, 2, s);
    return u ? place(ub, u, true) : NULL; /* not interned, as a store */
}

tc_uop *tc_ub_gep(tc_ub *ub, tc_uop *v, int lane) {
    if (!v || v->vcount <= 1) return v;
    tc_uop *u = new_uop(ub, TC_UOP_GEP, v->dtype, 1, &v);
    if (!u) return NULL;
    u->arg = lane;
    return intern(ub, u);
}

tc_uop *tc_ub_store(tc_ub *ub, tc_uop *buf, tc_uop *idx, tc_uop *value) {
    if (buf && buf->op == TC_UOP_DEFINE_LOCAL && !buf->is_scratch && !tc_ub_local_store_sync(ub, buf))
        return NULL;
    tc_uop *s[3] = {buf, idx, value};
    tc_uop *u = new_uop(ub, TC_UOP_STORE, value ? value->dtype : TC_FLOAT32, 3, s);
    return u ? place(ub, u, true) : NULL;
}

tc_uop *tc_ub_prefetch(tc_ub *ub, tc_uop *buf, tc_uop *idx, tc_uop *valid) {
    if (valid && !is_iconst(valid, 1)) return NULL;
    tc_uop *s[2] = {buf, idx};
    tc_uop *u = new_uop(ub, TC_UOP_PREFETCH, buf ? buf->dtype : TC_FLOAT32, 2, s);
    return u ? place(ub, u, true) : NULL; /* in its place, as a store */
}

tc_uop *tc_ub_acc(tc_ub *ub, tc_uop *init) {
    return tc_ub_acc_vec(ub, init, 1);
}

tc_uop *tc_ub_acc_vec(tc_ub *ub, tc_uop *init, int lanes) {
    tc_uop *u = new_uop(ub, TC_UOP_DEFINE_ACC, init ? init->dtype : TC_FLOAT32, 1, &init);
    if (u) u->vcount = lanes;
    return u ? place(ub, u, true) : NULL;
}

tc_uop *tc_ub_acc_update(tc_ub *ub, tc_op op, tc_uop *acc, tc_uop *x) {
    /* pinned inside the loop even when x is loop-invariant */
    tc_uop *s[2] = {acc, x};
    tc_uop *v = new_uop(ub, TC_UOP_ALU, acc ? acc->dtype : TC_FLOAT32, 2, s);
    if (!v) return NULL;
    v->alu = op;
    v->vcount = acc->vcount;
    if (!place(ub, v, true)) return NULL;
    tc_uop *s2[2] = {acc, v};
    tc_uop *u = new_uop(ub, TC_UOP_ASSIGN, acc->dtype, 2, s2);
    if (u) u->vcount = acc->vcount;
    return u ? place(ub, u, true) : NULL;
}

/* ---- scopes ---- */

/* pins scope u (RANGE or IF, sources set) at the current depth and opens its body */
static bool open_scope(tc_ub *ub, tc_uop *u) {
    if (ub->depth >= TC_UB_MAX_DEPTH) {
        TC_INTERNAL("loops and blocks nested deeper than %d", TC_UB_MAX_DEPTH);
        ub->failed = true;
        return false;
    }
    tc_ulist *body = tc_arena_alloc(&ub->k->arena, sizeof *body);
    if (!body || !place(ub, u, true)) {
        ub->failed = true;
        return false;
    }
    u->body = body;
    int d = ++ub->depth;
    ub->open[d] = body;
    ub->scope[d] = u;
    ub->floor[d] = u->op == TC_UOP_IF ? d : ub->floor[d - 1];
    return true;
}

tc_uop *tc_ub_range(tc_ub *ub, int axis, tc_dtype dt, int64_t n) {
    return tc_ub_range_in(ub, axis, dt, tc_ub_iconst(ub, dt, 0), tc_ub_iconst(ub, dt, n), n);
}

tc_uop *tc_ub_range_in(tc_ub *ub, int axis, tc_dtype dt, tc_uop *start, tc_uop *end, int64_t n) {
    tc_uop *s[2] = {start, end};
    tc_uop *u = new_uop(ub, TC_UOP_RANGE, dt, 2, s);
    if (!u || !open_scope(ub, u)) {
        ub->failed = true;
        return NULL;
    }
    u->arg = axis;
    u->vmin = 0;
    u->vmax = n - 1;
    u->is_index = true;
    return u;
}

tc_uop *tc_ub_range_span(tc_ub *ub, int axis, tc_dtype dt, int64_t lo, int64_t hi) {
    tc_uop *u = tc_ub_range_in(ub, axis, dt, tc_ub_iconst(ub, dt, lo), tc_ub_iconst(ub, dt, hi), hi);
    if (u) u->vmin = lo, u->vmax = hi - 1;
    return u;
}

bool tc_ub_if(tc_ub *ub, tc_uop *cond) {
    if (!cond) {
        ub->failed = true;
        return false;
    }
    if (is_iconst(cond, 1)) return false;
    tc_uop *u = new_uop(ub, TC_UOP_IF, TC_BOOL, 1, &cond);
    int d = ub->depth;
    if (!u || !open_scope(ub, u)) return false;
    if (ub->if_depth < 0) {
        ub->if_depth = d;
        ub->if_serial = ++ub->n_ifs;
    }
    return true;
}

/* takes the UOps of body l (and of the bodies inside it) out of the hash table */
static void forget(tc_ub *ub, const tc_ulist *l) {
    for (int i = 0; i < l->n; i++) {
        tc_uop *u = l->items[i];
        if (u->body) forget(ub, u->body);
        tc_uop **p = &ub->table[u->hash % TC_UB_BUCKETS];
        while (*p && *p != u) p = &(*p)->hash_next;
        if (*p) *p = u->hash_next;
    }
}

void tc_ub_end_range(tc_ub *ub) {
    if (ub->depth <= 0) return;
    int d = ub->depth--;
    tc_uop *s = ub->scope[d];
    if (s && s->op == TC_UOP_IF) {
        forget(ub, s->body);
        if (ub->if_depth == d - 1) {
            ub->if_depth = -1;
            ub->if_serial = 0;
        }
    }
    ub->open[d] = NULL;
    ub->scope[d] = NULL;
}

void tc_ub_end_if(tc_ub *ub) {
    tc_ub_end_range(ub);
}

static bool has_effect(const tc_uop *u);

/* does body l hold a UOp that acts (a store, an assign, a loop)? An IF whose
 * body does not is left out with its body (a vector store's gated lanes
 * after its first: their stores went into the vector's, their blocks stay
 * empty). O(body). */
static bool acts(const tc_ulist *l) {
    for (int i = 0; i < l->n; i++) {
        const tc_uop *u = l->items[i];
        if (u->op == TC_UOP_IF ? acts(u->body) : has_effect(u)) return true;
    }
    return false;
}

static bool flatten(tc_ub *ub, tc_ulist *l, tc_ptrvec *out) {
    for (int i = 0; i < l->n; i++) {
        tc_uop *u = l->items[i];
        if (u->op == TC_UOP_IF && !acts(u->body)) continue;
        if (tc_ptrvec_push(out, u) != TC_OK) return false;
        if (u->op != TC_UOP_RANGE && u->op != TC_UOP_IF) continue;
        if (!flatten(ub, u->body, out)) return false;
        tc_uop_op end_op = u->op == TC_UOP_RANGE ? TC_UOP_ENDRANGE : TC_UOP_ENDIF;
        tc_uop *end = new_uop(ub, end_op, u->dtype, 1, &u);
        if (!end || tc_ptrvec_push(out, end) != TC_OK) return false;
    }
    return true;
}

/* does u act by itself (a store, a loop, a block, a barrier, a kernel argument)? */
static bool has_effect(const tc_uop *u) {
    switch (u->op) {
    case TC_UOP_DEFINE_GLOBAL:
    case TC_UOP_RANGE:
    case TC_UOP_ENDRANGE:
    case TC_UOP_STORE:
    case TC_UOP_PREFETCH:
    case TC_UOP_ASSIGN:
    case TC_UOP_BARRIER:
    case TC_UOP_IF:
    case TC_UOP_ENDIF: return true;
    case TC_UOP_DEFINE_ACC:
    case TC_UOP_CONST:
    case TC_UOP_SPECIAL:
    case TC_UOP_LOAD:
    case TC_UOP_ALU:
    case TC_UOP_CAST:
    case TC_UOP_BITCAST:
    case TC_UOP_DEFINE_LOCAL:
    case TC_UOP_GEP:
    case TC_UOP_COUNT: return false;
    }
    return false;
}

/* keeps the UOps with an effect and what they read (sources come first in
 * the list, so one backward pass marks them); `uses` is still 0 here */
static void drop_dead(tc_ptrvec *l) {
    for (int i = l->n - 1; i >= 0; i--) {
        tc_uop *u = l->items[i];
        if (!has_effect(u) && u->uses == 0) continue;
        for (int j = 0; j < u->n_srcs; j++) u->srcs[j]->uses = 1; /* live mark */
    }
    int n = 0;
    for (int i = 0; i < l->n; i++) {
        tc_uop *u = l->items[i];
        if (has_effect(u) || u->uses) l->items[n++] = u;
        u->uses = 0;
    }
    l->n = n;
}

TC_MUST_USE tc_status tc_ub_linearize(tc_ub *ub) {
    if (ub->failed) return tc_error_or(TC_ERR_MEMORY);
    tc_ptrvec out = {0};
    if (!flatten(ub, &ub->top, &out)) {
        tc_ptrvec_free(&out);
        return TC_ERR_MEMORY;
    }
    tc_kernel_uops *k = ub->k;
    k->uops = tc_arena_alloc(&k->arena, sizeof(tc_uop *) * (size_t)(out.n ? out.n : 1));
    if (!k->uops) {
        tc_ptrvec_free(&out);
        return TC_ERR_MEMORY;
    }
    if (ub->drop_dead) drop_dead(&out);
    for (int i = 0; i < out.n; i++) {
        k->uops[i] = out.items[i];
        k->uops[i]->id = i;
        for (int j = 0; j < k->uops[i]->n_srcs; j++) k->uops[i]->srcs[j]->uses++;
    }
    k->n_uops = out.n;
    tc_ptrvec_free(&out);
    return TC_OK;
}
