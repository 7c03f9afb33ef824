/* ref.c - the reference evaluator: the oracle every differential test trusts.
 *
 * Input: a node of the lazy (unscheduled) graph. Output: its elements,
 * row-major in its dtype, written to the caller's array. The graph under the
 * node is ordered with an explicit worklist (no recursion: graphs may be 100k
 * nodes deep), then evaluated op by op on the host with plain loops: every
 * node becomes a dense host array of its dtype and shape; a VIEW gathers from
 * its base through tc_st_index (masked elements read 0); realized BUFFERs are
 * read back with tc_buffer_copyout. Arithmetic follows C per dtype: float32 in
 * float (exp2f, log2f, sinf, sqrtf), float16 and bfloat16 in float rounded
 * to their precision after every op, float64 in double (libm's exp2, log2, sin, sqrt), integers with
 * two's-complement wrapping and without traps (division by zero gives 0;
 * uint64, held in an int64, compares, divides and shifts right unsigned),
 * bools as 0/1. Reduces accumulate in index order
 * in the node's dtype; GATHER reads 0, SCATTER adds nothing and PUT writes
 * nothing at an index outside the indexed axis; SCATTER adds and PUT writes
 * in index order.
 *
 * It shares no code with the scheduler, codegen or renderers on purpose.
 * Ownership: everything allocated here is freed before tc_ref_eval returns;
 * the graph is only read (node->scratch is not touched). */
#include "engine.h"

#include <math.h>
#include <string.h>

/* one node of the graph under evaluation */
typedef struct {
    tc_node *node; /* the node */
    void *data;    /* dense row-major host array of node's dtype and shape (NULL until done) */
    int uses;      /* consumers not yet evaluated (+1 for the root, which is never freed early) */
} entry;

/* evaluation state: entries plus a pointer -> entry hash map (open addressing) */
typedef struct {
    entry *ents; /* n entries, cap allocated */
    int n, cap;
    int *slots;    /* nslots slots holding entry index + 1; 0 = empty */
    size_t nslots; /* power of two, > 2*n */
    int *order;    /* n entry indices, sources before consumers */
    int n_order;
} ctx;

/* ---- the node -> entry map ------------------------------------------------ */

static size_t slot_of(const ctx *c, const tc_node *n) {
    uint64_t h = (uint64_t)(uintptr_t)n * 0x9E3779B97F4A7C15ULL;
    return (size_t)(h >> 17) & (c->nslots - 1);
}

/* index of n's entry, or -1 */
static int map_find(const ctx *c, const tc_node *n) {
    if (!c->nslots) return -1;
    for (size_t s = slot_of(c, n);; s = (s + 1) & (c->nslots - 1)) {
        int k = c->slots[s];
        if (!k) return -1;
        if (c->ents[k - 1].node == n) return k - 1;
    }
}

TC_MUST_USE static tc_status map_grow(ctx *c) {
    size_t ns = c->nslots ? c->nslots * 2 : 64;
    int *slots = tc_calloc(ns, sizeof *slots);
    if (!slots) return TC_ERR_MEMORY;
    tc_free(c->slots);
    c->slots = slots;
    c->nslots = ns;
    for (int i = 0; i < c->n; i++) {
        size_t s = slot_of(c, c->ents[i].node);
        while (c->slots[s]) s = (s + 1) & (ns - 1);
        c->slots[s] = i + 1;
    }
    return TC_OK;
}

/* adds an entry for n (not yet present); returns its index or -1 on OOM */
static int map_add(ctx *c, tc_node *n) {
    if (c->n == c->cap) {
        int cap = c->cap ? c->cap * 2 : 64;
        entry *e = tc_realloc(c->ents, sizeof *e * (size_t)cap);
        int *o = e ? tc_realloc(c->order, sizeof *o * (size_t)cap) : NULL;
        if (e) c->ents = e;
        if (o) c->order = o;
        if (!e || !o) return -1;
        c->cap = cap;
    }
    c->ents[c->n] = (entry){.node = n};
    c->n++;
    if ((size_t)c->n * 2 >= c->nslots) {
        if (map_grow(c) != TC_OK) return -1; /* rebuilds every slot, the new one too */
    } else {
        size_t s = slot_of(c, n);
        while (c->slots[s]) s = (s + 1) & (c->nslots - 1);
        c->slots[s] = c->n;
    }
    return c->n - 1;
}

static void ctx_free(ctx *c) {
    for (int i = 0; i < c->n; i++) tc_free(c->ents[i].data);
    tc_free(c->ents);
    tc_free(c->slots);
    tc_free(c->order);
}

/* ---- ordering ------------------------------------------------------------ */

/* sources a node's value depends on: ASSIGN's value is srcs[0] alone (the
 * target's old contents reach it, if at all, through srcs[0]'s own graph) */
static int needed_srcs(const tc_node *n) {
    if (n->op == TC_OP_ASSIGN) return 1;
    return n->op == TC_OP_BUFFER || n->op == TC_OP_CONST ? 0 : n->n_srcs;
}

/* depth-first post-order of the graph under root into c->order, with an
 * explicit stack; a stack item with its low bit set means "emit" */
TC_MUST_USE static tc_status topo(ctx *c, tc_node *root) {
    tc_ptrvec stack = {0};
    tc_status st = tc_ptrvec_push(&stack, root);
    while (st == TC_OK && stack.n) {
        uintptr_t item = (uintptr_t)stack.items[--stack.n];
        tc_node *n = (tc_node *)(item & ~(uintptr_t)1);
        if (item & 1) {
            c->order[c->n_order++] = map_find(c, n);
            continue;
        }
        if (map_find(c, n) >= 0) continue;
        if (map_add(c, n) < 0) {
            st = TC_ERR_MEMORY;
            break;
        }
        st = tc_ptrvec_push(&stack, (void *)(item | 1));
        for (int i = needed_srcs(n) - 1; st == TC_OK && i >= 0; i--) {
            if (!n->srcs[i])
                st = TC_INTERNAL("tc_ref_eval: %s node has a NULL source", tc_ops[n->op].name);
            else if (map_find(c, n->srcs[i]) < 0) st = tc_ptrvec_push(&stack, n->srcs[i]);
        }
    }
    tc_ptrvec_free(&stack);
    if (st != TC_OK) return st;
    for (int k = 0; k < c->n_order; k++) {
        tc_node *n = c->ents[c->order[k]].node;
        for (int i = 0; i < needed_srcs(n); i++) c->ents[map_find(c, n->srcs[i])].uses++;
    }
    c->ents[map_find(c, root)].uses++;
    return TC_OK;
}

/* ---- scalar access in C semantics ---------------------------------------- */

static bool is_float(tc_dtype dt) {
    return tc_dtypes[dt].is_float;
}

/* float -> integer as x86's truncating conversion does it: out-of-range and
 * NaN give the "integer indefinite" value; uint8 goes through int32. f is a
 * float32 or float64 value (every float32 is one double: the bounds below
 * hold for both) */
static int64_t f2i(double f, tc_dtype dt) {
    bool in64 = f >= -9223372036854775808.0 && f < 9223372036854775808.0;
    if (dt == TC_UINT64) /* from 2^63 on: less 2^63, then the top bit set (gcc's way) */
        return f >= 9223372036854775808.0 && f < 18446744073709551616.0
                   ? (int64_t)((uint64_t)(int64_t)(f - 9223372036854775808.0) ^ (UINT64_C(1) << 63))
                   : in64 ? (int64_t)f : INT64_MIN;
    if (dt == TC_INT64) return in64 ? (int64_t)f : INT64_MIN;
    if (dt == TC_UINT32) /* gcc converts through int64 and keeps the low half */
        return tc_dtype_wrap(dt, in64 ? (int64_t)f : INT64_MIN);
    int32_t v = f > -2147483649.0 && f < 2147483648.0 ? (int32_t)f : INT32_MIN;
    return tc_dtype_wrap(dt, v);
}

/* element i as a float32 (integers and float64 converted as C does) */
static float ldf(const void *p, tc_dtype dt, int64_t i) {
    if (dt == TC_FLOAT32) return ((const float *)p)[i];
    if (dt == TC_FLOAT16) return tc_half_to_float(((const uint16_t *)p)[i]);
    if (dt == TC_BFLOAT16) return tc_bf16_to_float(((const uint16_t *)p)[i]);
    if (dt == TC_FLOAT64) return (float)((const double *)p)[i];
    if (dt == TC_UINT64) return (float)((const uint64_t *)p)[i];
    return (float)tc_scalar_load_int(p, dt, i);
}

/* element i as a float64 (integers converted as C does, floats exactly) */
static double ldd(const void *p, tc_dtype dt, int64_t i) {
    if (dt == TC_FLOAT64) return ((const double *)p)[i];
    if (is_float(dt)) return ldf(p, dt, i);
    return tc_dtype_int_to_double(dt, tc_scalar_load_int(p, dt, i));
}

/* element i as an integer (floats truncated as C does) */
static int64_t ldi(const void *p, tc_dtype dt, int64_t i) {
    if (is_float(dt)) return f2i(ldd(p, dt, i), TC_INT64);
    return tc_scalar_load_int(p, dt, i);
}

/* element i as a C condition */
static bool truthy(const void *p, tc_dtype dt, int64_t i) {
    return is_float(dt) ? ldd(p, dt, i) != 0 : ldi(p, dt, i) != 0;
}

/* stores a float64 result into element i of dtype dt (a C conversion;
 * float16 and bfloat16 through float32, as every renderer converts them) */
static void std_(void *p, tc_dtype dt, int64_t i, double v) {
    if (dt == TC_FLOAT64) ((double *)p)[i] = v;
    else if (dt == TC_FLOAT32) ((float *)p)[i] = (float)v;
    else if (dt == TC_FLOAT16) ((uint16_t *)p)[i] = tc_float_to_half((float)v);
    else if (dt == TC_BFLOAT16) ((uint16_t *)p)[i] = tc_float_to_bf16((float)v);
    else if (dt == TC_BOOL) ((uint8_t *)p)[i] = v != 0;
    else tc_scalar_store_int(p, dt, i, f2i(v, dt));
}

/* stores a float32 result into element i of dtype dt (a C conversion) */
static void stf(void *p, tc_dtype dt, int64_t i, float v) {
    std_(p, dt, i, v);
}

/* stores an integer result into element i of dtype dt (wrapping to its width) */
static void sti(void *p, tc_dtype dt, int64_t i, int64_t v) {
    if (dt == TC_FLOAT64) ((double *)p)[i] = (double)v;
    else if (dt == TC_FLOAT32) ((float *)p)[i] = (float)v;
    else if (dt == TC_FLOAT16) ((uint16_t *)p)[i] = tc_float_to_half((float)v);
    else if (dt == TC_BFLOAT16) ((uint16_t *)p)[i] = tc_float_to_bf16((float)v);
    else tc_scalar_store_int(p, dt, i, v); /* wraps to the width; bool: v != 0 */
}

/* stores integer v of dtype from into element i of dtype dt: sti, but a
 * uint64 source converts to floats as unsigned */
static void sti_from(void *p, tc_dtype dt, int64_t i, int64_t v, tc_dtype from) {
    if (from != TC_UINT64 || !is_float(dt)) sti(p, dt, i, v);
    else if (dt == TC_FLOAT64) ((double *)p)[i] = (double)(uint64_t)v;
    else std_(p, dt, i, (float)(uint64_t)v); /* float32, float16, bfloat16 */
}

/* ---- elementwise ops ---------------------------------------------------- */

/* one element of an operand or a result: .f in float arithmetic (a float32
 * value, or a float64 one when the op computes in float64), .i on integers
 * held in int64 */
typedef struct {
    double f;
    int64_t i;
} num;

/* op on float64 operands in double (libm's exp2, log2, sin, sqrt) */
static double alu_f64(tc_op op, double a, double b, double c) {
    switch (op) {
    case TC_OP_EXP2: return exp2(a);
    case TC_OP_LOG2: return log2(a);
    case TC_OP_SIN: return sin(a);
    case TC_OP_SQRT: return sqrt(a);
    case TC_OP_RECIP: return 1.0 / a;
    case TC_OP_NEG: return -a;
    case TC_OP_ADD: return a + b;
    case TC_OP_MUL: return a * b;
    case TC_OP_IDIV: return trunc(a / b);
    case TC_OP_MOD: return fmod(a, b);
    case TC_OP_MAX: return a > b || a != a ? a : b; /* NaN wins, as in torch */
    case TC_OP_CMPLT: return a < b;
    case TC_OP_CMPNE: return a != b;
    case TC_OP_MULACC: return a * b + c;
    case TC_OP_AND:
    case TC_OP_OR:
    case TC_OP_XOR:
    case TC_OP_SHL:
    case TC_OP_SHR:
    case TC_OP_CAST:
    case TC_OP_BITCAST:
    case TC_OP_WHERE:
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
    return 0;
}

/* one op on one element, both ways: .f in float32 arithmetic (check_alu
 * made sure op applies to the float domain when it is the one used), .i on
 * integers (the store wraps to the dtype's width; no undefined behaviour:
 * overflow wraps, division by zero gives 0). The caller reads the half of
 * its domain; the other half is computed from zeros and traps on nothing.
 * float64 operands go to alu_f64 instead. */
static num alu(tc_op op, num na, num nb, num nc, bool is_bool, bool is_u64) {
    uint64_t ua = (uint64_t)na.i, ub = (uint64_t)nb.i;
    int64_t x = na.i, y = nb.i;
    if (is_u64) { /* uint64's ops that differ from int64's: unsigned order, / % >> */
        num r = {0, 0};
        switch (op) {
        case TC_OP_IDIV: r.i = ub == 0 ? 0 : (int64_t)(ua / ub); return r;
        case TC_OP_MOD: r.i = ub == 0 ? 0 : (int64_t)(ua % ub); return r;
        case TC_OP_MAX: r.i = ua > ub ? x : y; return r;
        case TC_OP_CMPLT: r.i = ua < ub; return r;
        case TC_OP_SHR: r.i = y < 0 || y > 63 ? 0 : (int64_t)(ua >> y); return r;
        case TC_OP_EXP2:
        case TC_OP_LOG2:
        case TC_OP_SIN:
        case TC_OP_SQRT:
        case TC_OP_RECIP:
        case TC_OP_NEG:
        case TC_OP_ADD:
        case TC_OP_MUL:
        case TC_OP_CMPNE:
        case TC_OP_AND:
        case TC_OP_OR:
        case TC_OP_XOR:
        case TC_OP_SHL:
        case TC_OP_MULACC:
        case TC_OP_CAST:
        case TC_OP_BITCAST:
        case TC_OP_WHERE:
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
        case TC_OP_COUNT: break; /* as int64's */
        }
    }
    float af = (float)na.f, bf = (float)nb.f, cf = (float)nc.f;
    float rf = 0;
    num r = {0, 0};
    switch (op) {
    case TC_OP_EXP2: rf = exp2f(af); break;
    case TC_OP_LOG2: rf = log2f(af); break;
    case TC_OP_SIN: rf = sinf(af); break;
    case TC_OP_SQRT: rf = sqrtf(af); break;
    case TC_OP_RECIP: rf = 1.0f / af; break;
    case TC_OP_NEG: rf = -af, r.i = is_bool ? !x : (int64_t)(0 - ua); break;
    case TC_OP_ADD: rf = af + bf, r.i = (int64_t)(ua + ub); break;
    case TC_OP_MUL: rf = af * bf, r.i = (int64_t)(ua * ub); break;
    case TC_OP_IDIV:
        rf = truncf(af / bf), r.i = y == 0 ? 0 : y == -1 ? (int64_t)(0 - ua) : x / y;
        break;
    case TC_OP_MOD: rf = fmodf(af, bf), r.i = y == 0 || y == -1 ? 0 : x % y; break;
    case TC_OP_MAX: /* NaN wins, as in torch */
        rf = af > bf || af != af ? af : bf, r.i = x > y ? x : y;
        break;
    case TC_OP_CMPLT: rf = af < bf, r.i = x < y; break;
    case TC_OP_CMPNE: rf = af != bf, r.i = x != y; break;
    case TC_OP_AND: r.i = x & y; break;
    case TC_OP_OR: r.i = x | y; break;
    case TC_OP_XOR: r.i = x ^ y; break;
    case TC_OP_SHL: r.i = y < 0 || y > 63 ? 0 : (int64_t)(ua << y); break;
    case TC_OP_SHR: r.i = y < 0 || y > 63 ? (x < 0 ? -1 : 0) : x >> y; break;
    case TC_OP_MULACC: rf = af * bf + cf, r.i = (int64_t)(ua * ub + (uint64_t)nc.i); break;
    case TC_OP_CAST: /* eval_alu copies CAST, WHERE and BITCAST itself */
    case TC_OP_BITCAST:
    case TC_OP_WHERE:
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
    r.f = rf;
    return r;
}

/* the dtype an elementwise op computes in */
static tc_dtype alu_domain(const tc_node *n) {
    return n->op == TC_OP_WHERE || n->op == TC_OP_MULACC ? n->dtype : n->srcs[0]->dtype;
}

TC_MUST_USE static tc_status check_alu(const tc_node *n) {
    tc_dtype d = alu_domain(n);
    tc_op op = n->op;
    if (is_float(d) ? tc_ops[op].is_int_only : tc_ops[op].is_float_only)
        return tc_error_set(TC_ERR_DTYPE, "tc_ref_eval: %s on %s (node n%llu)", tc_ops[op].name,
                            tc_dtypes[d].name, (unsigned long long)n->id);
    for (int i = 0; i < n->n_srcs; i++)
        if (tc_node_numel(n->srcs[i]) != tc_node_numel(n))
            return TC_INTERNAL("tc_ref_eval: %s node n%llu has a source of another size",
                               tc_ops[op].name, (unsigned long long)n->id);
    if (op == TC_OP_BITCAST && tc_dtypes[n->dtype].size != tc_dtypes[n->srcs[0]->dtype].size)
        return TC_INTERNAL("tc_ref_eval: BITCAST between sizes (node n%llu)",
                           (unsigned long long)n->id);
    return TC_OK;
}

/* out[i] = op(in[0][i], in[1][i], in[2][i]) for every element */
TC_MUST_USE static tc_status eval_alu(const tc_node *n, void *out, void *const *in) {
    tc_status st = check_alu(n);
    if (st != TC_OK) return st;
    int64_t numel = tc_node_numel(n);
    tc_dtype dt = n->dtype, d = alu_domain(n), s[3] = {TC_BOOL, TC_BOOL, TC_BOOL};
    for (int k = 0; k < n->n_srcs; k++) s[k] = n->srcs[k]->dtype;
    if (n->op == TC_OP_BITCAST) {
        memcpy(out, in[0], (size_t)numel * tc_dtypes[dt].size);
        return TC_OK;
    }
    for (int64_t i = 0; i < numel; i++) {
        if (n->op == TC_OP_CAST || n->op == TC_OP_WHERE) {
            int k = n->op == TC_OP_CAST ? 0 : truthy(in[0], s[0], i) ? 1 : 2;
            if (is_float(s[k])) std_(out, dt, i, ldd(in[k], s[k], i)); /* exact, then C's */
            else sti_from(out, dt, i, ldi(in[k], s[k], i), s[k]);
        } else if (d == TC_FLOAT64) {
            double v[3] = {0, 0, 0};
            for (int k = 0; k < n->n_srcs; k++) v[k] = ldd(in[k], s[k], i);
            std_(out, dt, i, alu_f64(n->op, v[0], v[1], v[2]));
        } else {
            num v[3] = {{0, 0}, {0, 0}, {0, 0}};
            for (int k = 0; k < n->n_srcs; k++) {
                if (is_float(d)) v[k].f = ldf(in[k], s[k], i);
                else v[k].i = ldi(in[k], s[k], i);
            }
            num r = alu(n->op, v[0], v[1], v[2], d == TC_BOOL, d == TC_UINT64);
            if (is_float(d)) stf(out, dt, i, (float)r.f);
            else sti(out, dt, i, r.i);
        }
    }
    return TC_OK;
}

/* ---- reduces ------------------------------------------------------------ */

/* the identity of REDUCE_MAX: -inf, or the dtype's minimum */
static void store_max_identity(void *p, tc_dtype dt, int64_t i) {
    int64_t lo, hi;
    if (tc_dtype_int_range(dt, &lo, &hi)) sti(p, dt, i, lo);
    else stf(p, dt, i, -INFINITY);
}

/* acc[oi] = acc[oi] (+, max or *) in[i], in the node's dtype */
static void accumulate(tc_op op, tc_dtype dt, void *out, int64_t oi, const void *in, tc_dtype sdt,
                       int64_t i) {
    bool is_sum = op == TC_OP_REDUCE_SUM, is_prod = op == TC_OP_REDUCE_PROD;
    if (dt == TC_FLOAT64) {
        double acc = ldd(out, dt, oi), x = ldd(in, sdt, i);
        std_(out, dt, oi, is_sum ? acc + x : is_prod ? acc * x : acc > x || acc != acc ? acc : x);
    } else if (is_float(dt)) {
        float acc = ldf(out, dt, oi), x = ldf(in, sdt, i);
        stf(out, dt, oi, is_sum ? acc + x : is_prod ? acc * x : acc > x || acc != acc ? acc : x);
    } else if (dt == TC_BOOL) { /* or, and, or */
        int64_t acc = ldi(out, dt, oi), x = ldi(in, sdt, i);
        sti(out, dt, oi, is_prod ? (acc && x) : (acc || x));
    } else {
        int64_t acc = ldi(out, dt, oi), x = ldi(in, sdt, i);
        bool is_more = dt == TC_UINT64 ? (uint64_t)acc > (uint64_t)x : acc > x;
        uint64_t r = is_sum ? (uint64_t)acc + (uint64_t)x : (uint64_t)acc * (uint64_t)x;
        sti(out, dt, oi, is_sum || is_prod ? (int64_t)r : is_more ? acc : x); /* wraps */
    }
}

/* sums, maxes or multiplies src over n->axes into out (n's keepdim shape), visiting the
 * source in row-major order so each output accumulates in index order */
TC_MUST_USE static tc_status eval_reduce(const tc_node *n, void *out, const void *in) {
    const tc_node *src = n->srcs[0];
    if (src->ndim != n->ndim || (n->ndim < 32 && (n->axes >> n->ndim) != 0))
        return TC_INTERNAL("tc_ref_eval: reduce node n%llu has bad axes 0x%x",
                           (unsigned long long)n->id, n->axes);
    int64_t ostride[TC_MAX_DIMS], idx[TC_MAX_DIMS] = {0}, s = 1;
    for (int d = n->ndim - 1; d >= 0; d--) {
        bool red = (n->axes >> d) & 1;
        if (n->shape[d] != (red ? 1 : src->shape[d]))
            return TC_INTERNAL("tc_ref_eval: reduce node n%llu has a bad shape",
                               (unsigned long long)n->id);
        ostride[d] = red ? 0 : s;
        s *= n->shape[d];
    }
    int64_t on = tc_node_numel(n), sn = tc_node_numel(src);
    for (int64_t i = 0; i < on; i++) {
        if (n->op == TC_OP_REDUCE_SUM) sti(out, n->dtype, i, 0);
        else if (n->op == TC_OP_REDUCE_PROD) sti(out, n->dtype, i, 1);
        else store_max_identity(out, n->dtype, i);
    }
    for (int64_t i = 0; i < sn; i++) {
        int64_t oi = 0;
        for (int d = 0; d < n->ndim; d++) oi += idx[d] * ostride[d];
        accumulate(n->op, n->dtype, out, oi, in, src->dtype, i);
        for (int d = n->ndim - 1; d >= 0 && ++idx[d] == src->shape[d]; d--) idx[d] = 0;
    }
    return TC_OK;
}

/* ---- leaves, views and meta ops ------------------------------------------ */

TC_MUST_USE static tc_status eval_const(const tc_node *n, void *out) {
    int64_t numel = tc_node_numel(n);
    for (int64_t i = 0; i < numel; i++) {
        if (is_float(n->dtype)) std_(out, n->dtype, i, tc_dtype_round(n->dtype, n->value));
        else if (n->dtype == TC_BOOL) sti(out, n->dtype, i, n->ivalue != 0 || n->value != 0);
        else sti(out, n->dtype, i, n->ivalue);
    }
    return TC_OK;
}

TC_MUST_USE static tc_status eval_buffer(const tc_node *n, void *out) {
    size_t nbytes = (size_t)tc_node_numel(n) * tc_dtypes[n->dtype].size;
    if (!nbytes) return TC_OK;
    if (!n->buffer || n->buffer->nbytes < nbytes)
        return TC_INTERNAL("tc_ref_eval: BUFFER node n%llu has %s (needs %zu bytes)",
                           (unsigned long long)n->id, n->buffer ? "a short buffer" : "no buffer",
                           nbytes);
    return tc_buffer_copyout(n->buffer, 0, out, nbytes);
}

/* gathers the view's elements from its source's dense array */
TC_MUST_USE static tc_status eval_view(const tc_node *n, void *out, const void *in) {
    if (!n->st || tc_st_ndim(n->st) != n->ndim)
        return TC_INTERNAL("tc_ref_eval: VIEW node n%llu has no tracker of its rank",
                           (unsigned long long)n->id);
    int64_t numel = tc_node_numel(n), src_numel = tc_node_numel(n->srcs[0]);
    size_t size = tc_dtypes[n->dtype].size;
    int64_t idx[TC_MAX_DIMS] = {0};
    for (int64_t i = 0; i < numel; i++) {
        bool valid = true;
        int64_t off = tc_st_index(n->st, idx, &valid);
        if (!valid) {
            memset((char *)out + (size_t)i * size, 0, size);
        } else if (off < 0 || off >= src_numel) {
            return TC_INTERNAL("tc_ref_eval: VIEW node n%llu reads element %lld of %lld",
                               (unsigned long long)n->id, (long long)off, (long long)src_numel);
        } else if (size == 4) { /* a copy of a known size: inline, not a call */
            memcpy((char *)out + (size_t)i * 4, (const char *)in + (size_t)off * 4, 4);
        } else {
            memcpy((char *)out + (size_t)i * size, (const char *)in + (size_t)off * size, size);
        }
        for (int d = n->ndim - 1; d >= 0 && ++idx[d] == n->shape[d]; d--) idx[d] = 0;
    }
    return TC_OK;
}

/* COPY, CONTIGUOUS and ASSIGN: the value of srcs[0] */
TC_MUST_USE static tc_status eval_same(const tc_node *n, void *out, const void *in) {
    const tc_node *s = n->srcs[0];
    if (tc_node_numel(s) != tc_node_numel(n) || s->dtype != n->dtype)
        return TC_INTERNAL("tc_ref_eval: %s node n%llu differs from its source", tc_ops[n->op].name,
                           (unsigned long long)n->id);
    memcpy(out, in, (size_t)tc_node_numel(n) * tc_dtypes[n->dtype].size);
    return TC_OK;
}

/* the row-major coordinates of element i of a shape */
static void unravel(int64_t i, int ndim, const int64_t *shape, int64_t *at) {
    for (int d = ndim - 1; d >= 0; d--) {
        at[d] = shape[d] ? i % shape[d] : 0;
        i = shape[d] ? i / shape[d] : 0;
    }
}

static int64_t ravel(int ndim, const int64_t *shape, const int64_t *at) {
    int64_t i = 0;
    for (int d = 0; d < ndim; d++) i = i * shape[d] + at[d];
    return i;
}

static int one_axis(uint32_t axes) {
    int a = 0;
    while (a < 31 && !((axes >> a) & 1)) a++;
    return a;
}

/* out[o] = x[o with o[a] := idx[o]]; 0 for an index outside x along a */
TC_MUST_USE static tc_status eval_gather(const tc_node *n, void *out, const void *x, const void *idx) {
    const tc_node *xn = n->srcs[0], *in = n->srcs[1];
    int a = one_axis(n->axes);
    int64_t at[TC_MAX_DIMS], numel = tc_node_numel(n);
    size_t size = tc_dtypes[n->dtype].size;
    for (int64_t o = 0; o < numel; o++) {
        unravel(o, n->ndim, n->shape, at);
        int64_t k = ldi(idx, in->dtype, o);
        if (k < 0 || k >= xn->shape[a]) {
            memset((char *)out + (size_t)o * size, 0, size);
            continue;
        }
        at[a] = k;
        memcpy((char *)out + (size_t)o * size, (const char *)x + (size_t)ravel(xn->ndim, xn->shape, at) * size,
               size);
    }
    return TC_OK;
}

/* zeros, then src[o] added at [o with o[a] := idx[o]], in index order */
TC_MUST_USE static tc_status eval_scatter(const tc_node *n, void *out, const void *idx, const void *src) {
    const tc_node *in = n->srcs[0], *sn = n->srcs[1];
    int a = one_axis(n->axes);
    int64_t at[TC_MAX_DIMS], numel = tc_node_numel(n), m = tc_node_numel(sn);
    for (int64_t i = 0; i < numel; i++) sti(out, n->dtype, i, 0);
    for (int64_t o = 0; o < m; o++) {
        int64_t k = ldi(idx, in->dtype, o);
        if (k < 0 || k >= n->shape[a]) continue;
        unravel(o, sn->ndim, sn->shape, at);
        at[a] = k;
        int64_t t = ravel(n->ndim, n->shape, at);
        if (n->dtype == TC_FLOAT64) std_(out, n->dtype, t, ldd(out, n->dtype, t) + ldd(src, sn->dtype, o));
        else if (is_float(n->dtype)) stf(out, n->dtype, t, ldf(out, n->dtype, t) + ldf(src, sn->dtype, o));
        else sti(out, n->dtype, t, (int64_t)((uint64_t)ldi(out, n->dtype, t) + (uint64_t)ldi(src, sn->dtype, o)));
    }
    return TC_OK;
}

/* target's elements, then src[o] written at [o with o[a] := idx[o]], in
 * index order (of two places equal, the later wins); an index outside the
 * axis writes nothing */
TC_MUST_USE static tc_status eval_put(const tc_node *n, void *out, const void *idx, const void *src,
                                      const void *target) {
    const tc_node *in = n->srcs[0], *sn = n->srcs[1];
    int a = one_axis(n->axes);
    size_t size = tc_dtypes[n->dtype].size;
    int64_t at[TC_MAX_DIMS], m = tc_node_numel(sn);
    memcpy(out, target, (size_t)tc_node_numel(n) * size);
    for (int64_t o = 0; o < m; o++) {
        int64_t k = ldi(idx, in->dtype, o);
        if (k < 0 || k >= n->shape[a]) continue;
        unravel(o, sn->ndim, sn->shape, at);
        at[a] = k;
        memcpy((char *)out + (size_t)ravel(n->ndim, n->shape, at) * size, (const char *)src + (size_t)o * size,
               size);
    }
    return TC_OK;
}

/* evaluates one node whose needed sources are done */
TC_MUST_USE static tc_status eval_node(ctx *c, entry *e) {
    tc_node *n = e->node;
    void *in[3] = {NULL, NULL, NULL};
    for (int i = 0; i < needed_srcs(n); i++) in[i] = c->ents[map_find(c, n->srcs[i])].data;
    int64_t numel = tc_node_numel(n);
    if (numel < 0 || !tc_dtype_valid((int)n->dtype) ||
        (uint64_t)numel > SIZE_MAX / 16 / tc_dtypes[n->dtype].size)
        return TC_INTERNAL("tc_ref_eval: node n%llu has a bad shape or dtype",
                           (unsigned long long)n->id);
    e->data = tc_malloc(numel ? (size_t)numel * tc_dtypes[n->dtype].size : 1);
    if (!e->data) return TC_ERR_MEMORY;
    switch (n->op) {
    case TC_OP_EXP2:
    case TC_OP_LOG2:
    case TC_OP_SIN:
    case TC_OP_SQRT:
    case TC_OP_RECIP:
    case TC_OP_NEG:
    case TC_OP_CAST:
    case TC_OP_BITCAST:
    case TC_OP_ADD:
    case TC_OP_MUL:
    case TC_OP_IDIV:
    case TC_OP_MOD:
    case TC_OP_MAX:
    case TC_OP_CMPLT:
    case TC_OP_CMPNE:
    case TC_OP_AND:
    case TC_OP_OR:
    case TC_OP_XOR:
    case TC_OP_SHL:
    case TC_OP_SHR:
    case TC_OP_WHERE:
    case TC_OP_MULACC: return eval_alu(n, e->data, in);
    case TC_OP_REDUCE_SUM:
    case TC_OP_REDUCE_MAX:
    case TC_OP_REDUCE_PROD: return eval_reduce(n, e->data, in[0]);
    case TC_OP_CONST: return eval_const(n, e->data);
    case TC_OP_BUFFER: return eval_buffer(n, e->data);
    case TC_OP_VIEW: return eval_view(n, e->data, in[0]);
    case TC_OP_COPY:
    case TC_OP_CONTIGUOUS:
    case TC_OP_ASSIGN: return eval_same(n, e->data, in[0]);
    case TC_OP_GATHER: return eval_gather(n, e->data, in[0], in[1]);
    case TC_OP_SCATTER: return eval_scatter(n, e->data, in[0], in[1]);
    case TC_OP_PUT: return eval_put(n, e->data, in[0], in[1], in[2]);
    case TC_OP_LOAD:
    case TC_OP_STORE:
    case TC_OP_SINK:
    case TC_OP_COUNT: break;
    }
    return TC_INTERNAL("tc_ref_eval: op %s (node n%llu) is not part of a lazy graph",
                       n->op < TC_OP_COUNT ? tc_ops[n->op].name : "?", (unsigned long long)n->id);
}

/* evaluates in order, freeing each source's array after its last consumer */
TC_MUST_USE static tc_status eval_all(ctx *c) {
    for (int k = 0; k < c->n_order; k++) {
        entry *e = &c->ents[c->order[k]];
        tc_status st = eval_node(c, e);
        if (st != TC_OK) return st;
        for (int i = 0; i < needed_srcs(e->node); i++) {
            entry *s = &c->ents[map_find(c, e->node->srcs[i])];
            if (--s->uses == 0) {
                tc_free(s->data);
                s->data = NULL;
            }
        }
    }
    return TC_OK;
}

TC_MUST_USE tc_status tc_ref_eval(tc_node *n, void *out) {
    if (!n) return tc_error_set(TC_ERR_INVALID, "tc_ref_eval: node is NULL");
    if (!out && tc_node_numel(n) != 0)
        return tc_error_set(TC_ERR_INVALID, "tc_ref_eval: out is NULL");
    tc_lock();
    ctx c = {0};
    tc_status st = topo(&c, n);
    if (st == TC_OK) st = eval_all(&c);
    if (st == TC_OK) {
        size_t nbytes = (size_t)tc_node_numel(n) * tc_dtypes[n->dtype].size;
        if (nbytes) memcpy(out, c.ents[map_find(&c, n)].data, nbytes);
    }
    ctx_free(&c);
    tc_unlock();
    return st;
}
