/* opt.c - the CPU kernel optimizer: which axes of a reduce kernel to upcast.
 *
 * An upcast axis is computed `amt` indices at a time: its loop steps by amt
 * and the body is lowered once per index (lower.c). On a target that prints
 * vectors (tc_target.has_vec: the C renderer's GCC vector types) the plan's
 * last axis can be computed in vectors of `lanes` instead (tc_opt_vec_ok
 * says where every load and op under the reduces has a vector form);
 * elsewhere the copies are straight-line scalar code that the C compiler's
 * SLP vectorizer packs when they touch consecutive addresses (both checked
 * on the generated code in tests/codegen/test_opt.c).
 *
 * Six shapes of kernel get a plan:
 *  - register tile (matmul, conv): the column axis j is a kept axis along
 *    which some operand of the reduce (a load that moves along a reduced
 *    axis) is contiguous; of several, the one whose amount (up to 4
 *    vectors) fills the most vector lanes, contiguous stores breaking ties
 *    (a conv whose weight is channels-last: its 32 output channels fill two
 *    vectors where its 20 output columns leave 12 of 32 lanes idle). The
 *    rows: the kept axis along which that operand is reused (stride 0)
 *    giving the most rows. A conv's window (has_window) tries every such
 *    column and rows axis instead and ranks them by an estimate of their
 *    L1d refills (tile_eff: 8 output columns x 32 channels for ResNet's
 *    128- and 256-channel convs). The tile's shape comes from the register file
 *    (tile_max_rows: 6 rows of 2 vectors with 16 registers, 6 of 4 with
 *    32), its reduce's block from the L1d, a conv's from the L2
 *    (plan_kblock). Per reduce step the tile loads amt_j/L vectors and
 *    amt_i scalars and does amt_i*amt_j/L vector FMAs; with has_vec the
 *    columns are vectors in the reduce stage. A row
 *    amount that does not divide the axis is clamped: the extra rows re-read
 *    the last row and their stores are gated off.
 *  - packed tile (x @ w.T with enough rows, has_vec targets): a register
 *    tile whose column operand moves along the reduce, not along the
 *    columns, reads it from a panel that the kernel copies it into,
 *    contiguous along the columns (see "packed panels" below).
 *  - dot tile (x @ w.T, a conv's weight gradient: every operand read along
 *    the reduce), has_vec targets where no tile or only one narrower than a
 *    vector exists: the innermost reduced axis in vectors of partial sums,
 *    times rows of up to two kept axes along which an input is reused
 *    (4x4 for x @ w.T: 8 vector loads for 16 vector FMAs per step).
 *  - split reduce (sums, softmax, norms): the innermost reduced axis, read
 *    contiguously, is split into up to 2L partial accumulators (a divisor of
 *    the axis; vectors where they exist) combined after the loop, so a
 *    float sum runs independent chains (the order of the additions changes:
 *    not bit-exact with the plain loop). Without vectors no kept axis is
 *    upcast with it (see tc_opt_choose).
 *  - otherwise: up to two kept axes along which an input is reused (or any
 *    kept axes), 4 (or 3 or 2) at a time, for independent accumulator chains.
 *  - transposing copy (no reduces; see plan_transpose): a load that strides
 *    along the output's rows is read a cache line at a time along the axis
 *    it is contiguous on, that axis upcast by the line.
 * TC_NOOPT=1 keeps the plain loops. Targets with work-groups are not planned
 * here (lower.c maps their axes to work-groups).
 *
 * The machine: plans read only the target (tc_target: SIMD lanes and
 * registers, the data caches, cores), which the CPU device fills from what
 * the host reports when it opens (src/runtime/cpu_info.c; TC_CPU_L1D,
 * TC_CPU_L2, TC_CPU_L3 and TC_CPU_ISA override it), so a plan is the same
 * for the same target on any host. Used today: lanes and registers (tile
 * shapes), the L1d and the L2 (reduce blocks), the L2 and a core's share of the L3
 * (lower.c's loop order: which operand a dot tile re-reads from cache; a
 * tile's row blocks, plan_mblock: BLIS's mc). The cores are recorded; each
 * thread walks its columns of tiles over the rows (of a row block).
 *
 * The cost rule (bound_plan): what a plan's copies repeat stays bounded, so
 * no kernel's source or compile time grows with the work fused into it.
 * Per element, the stores' values outside the reduces (a fused epilogue:
 * gelu's tanh, an optimizer's update) and the transcendentals and divisions
 * of the reduce bodies are counted in weighted ops (an exp2, log2 or sin,
 * which gcc inlines as a polynomial, is COST_TRANS). The copies of the
 * reduce body hold at most BODY_BUDGET of them: past it the plan's largest
 * amount is halved until they do (sum(log(exp(sin(x*y)) + exp(cos(x*y))))
 * in 16 partial sums: 80 polynomials, 0.56 s of gcc; in 2: 0.14 s), and
 * at most BODY_OPS weighted ops of every kind (a body of many loads, which a
 * scalar tile repeats per copy), and on a vector target at most
 * SCALAR_COPIES scalar copies (a tile whose columns are no whole vectors). The kept copies repeat the stores' work at
 * most EPI_BUDGET unrolled and write at most STORE_BUDGET element stores
 * (a vector stored whole counts once): past either the plan says epi_loop,
 * and lower_store.c runs the stores once per output in a loop nest over the
 * tile after it, which gcc vectorizes. Measured at
 * the runtime's flags on a 2-core AVX2 machine (gcc CPU time): the MLP
 * step's tile of dy @ W with gelu' fused, 1,152 lines and 0.72 s -> 97
 * lines and 0.11 s; a conv weight gradient with its Adam update (MNIST)
 * 1,390 lines and 1.76 s -> 143 lines and 0.13 s. Kernel time did not
 * suffer (one thread, thread CPU time): relu(a @ b + bias), gelu(a @ b +
 * bias), exp(a @ b) at 256^3 0.94/1.56/1.31 ms -> 0.79/0.77/0.71, a 768x768
 * weight gradient with AdamW 58 -> 10 ms (its unrolled update had kept gcc
 * from packing the tile). Cost: one walk over the AST (a hash set of its
 * nodes), O(nodes), and at most log2(copies) halvings.
 */
#include "codegen.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    TILE_VECS = 4,  /* vectors of a register tile along the contiguous axis */
    TAIL_STEPS = 8, /* fewest steps of a split with a scalar tail (the tail: < 1/TAIL_STEPS) */
    MAX_COPIES = 512, /* body copies of one kernel a search may try (compile-time guard) */
    ROW_COPIES = 16,  /* body copies of plan_rows' accumulator chains */
};

/* ---- the machine: what the target reports, and what opt.c assumes where it
 * reports nothing (a target filled by hand; a host whose caches were not
 * found): the smallest L1d of current x86-64 and Arm cores ---- */
#define ASSUMED_L1D (32 * 1024)
#define ASSUMED_L2 (256 * 1024)

static int64_t l1d_bytes(const tc_target *tg) {
    return tg->cache[0].bytes > 0 ? tg->cache[0].bytes : ASSUMED_L1D;
}

int64_t tc_opt_line_bytes(const tc_target *tg) {
    return tg->cache[0].line > 0 ? tg->cache[0].line : 64;
}

/* the bytes of cache level cl one core may count on (a cache shared by
 * several cores, split); 0: unknown */
static int64_t core_share(const tc_cache_level *cl) {
    return cl->bytes > 0 ? cl->bytes / (cl->shared > 1 ? cl->shared : 1) : 0;
}

/* the L2 one core may count on */
static int64_t l2_share(const tc_target *tg) {
    return tg->cache[1].bytes > 0 ? core_share(&tg->cache[1]) : ASSUMED_L2;
}

/* the most indices, at most `most`, of a block of an axis of n: a divisor of
 * n leaving at least two blocks; 0: none */
static int64_t block_of(int64_t n, int64_t most) {
    for (int64_t b = most; b >= 2; b--)
        if (n % b == 0 && n / b >= 2) return b;
    return 0;
}

/* stride of tracker st along axis a; 0 for a size-1 axis; -1 when unknown
 * (several views, or a mask that cuts the axis) */
int64_t tc_st_stride(const tc_st *st, int a) {
    if (st->n_views != 1) return -1;
    const tc_view *v = &st->views[0];
    if (a >= v->ndim) return -1;
    if (v->shape[a] == 1) return 0;
    if (v->has_mask && (v->mask_begin[a] > 0 || v->mask_end[a] < v->shape[a])) return -1;
    return v->strides[a];
}

typedef struct {
    const tc_ast *loads[64]; /* the loads under a reduce */
    int n_loads;
    const tc_ast *stores[64]; /* the stores */
    int n_stores;
    const tc_ast *reds[8];   /* the reduces (the first 8) */
    int n_reds;              /* reduces, up to 9 (more than reds holds) */
    bool overflow;           /* more than the arrays hold: no plan */
} kinfo;

/* the loads under a reduce, the stores and the reduces of the AST under a,
 * into k; each node walked once in each of the two modes (under a reduce
 * or not; seen holds a node's address, plus one for the first mode), so a
 * DAG's shared operands are not walked once per path (exponential in a
 * long fused chain's depth): O(nodes) set operations */
static void collect_walk(kinfo *k, tc_ptrmap *seen, const tc_ast *a, bool under_reduce) {
    if (!tc_ptrset_add(seen, (const char *)a + under_reduce) || seen->failed) {
        k->overflow |= seen->failed;
        return;
    }
    if (a->op == TC_OP_LOAD) {
        if (!under_reduce) return;
        for (int i = 0; i < k->n_loads; i++)
            if (k->loads[i] == a) return;
        if (k->n_loads == 64) k->overflow = true;
        else k->loads[k->n_loads++] = a;
        return;
    }
    if (a->op == TC_OP_STORE) {
        if (k->n_stores == 64) k->overflow = true;
        else k->stores[k->n_stores++] = a;
    }
    if (tc_op_is_reduce(a->op)) {
        bool seen_red = false;
        for (int i = 0; i < k->n_reds && i < 8; i++) seen_red |= k->reds[i] == a;
        if (!seen_red && k->n_reds < 8) k->reds[k->n_reds] = a;
        if (!seen_red && k->n_reds < 9) k->n_reds++;
    }
    bool red = under_reduce || tc_op_is_reduce(a->op);
    for (int i = 0; i < a->n_srcs && !k->overflow; i++) collect_walk(k, seen, a->srcs[i], red);
}

/* k, emptied, then filled from the kernel's AST (an allocation failure:
 * k->overflow, so no plan) */
static void collect(kinfo *k, const tc_ast *ast) {
    memset(k, 0, sizeof *k);
    tc_ptrmap seen = {0};
    collect_walk(k, &seen, ast, false);
    tc_ptrmap_free(&seen);
}

static bool is_kept(const tc_sched_item *it, int a) {
    return !((it->reduce_axes >> a) & 1) && it->full_shape[a] > 1;
}

/* the outermost (innermost: the innermost) reduced axis of more than one
 * index; -1: none */
static int reduced_axis(const tc_sched_item *it, bool innermost) {
    int r = -1;
    for (int a = 0; a < it->ndim && (innermost || r < 0); a++)
        if ((it->reduce_axes >> a) & 1 && it->full_shape[a] > 1) r = a;
    return r;
}

/* ---- vector partials ---- */

typedef struct {
    const tc_ast *seen[256]; /* nodes checked (ASTs are DAGs) */
    int n;
    bool kept;               /* the axis is kept: an earlier reduce's value is no scalar */
    const tc_ast *packed;    /* a load read from a packed panel, contiguous along the axis */
} vec_walk;

static bool vec_seen(vec_walk *w, const tc_ast *a) {
    for (int i = 0; i < w->n; i++)
        if (w->seen[i] == a) return true;
    if (w->n < 256) w->seen[w->n++] = a;
    return false;
}

static bool vec_dtype_ok(tc_dtype dt) {
    return dt == TC_FLOAT32 || dt == TC_INT32 || dt == TC_UINT8 || dt == TC_INT8 ||
           dt == TC_UINT16 || dt == TC_INT16;
}

/* a's value is the same at every index of axis: its loads do not move
 * along it (an index is a few nodes), and it has no reduce. With
 * row_scalar, a's value is one scalar per row in a reduce stage along
 * axis: made of earlier reduces and of loads that do not move along it,
 * no gather (a cross-entropy's log of its sum; any op: it is computed
 * outside the stage's loop). depth bounds the walk */
static bool uniform_along(const tc_ast *a, int axis, bool row_scalar, int depth) {
    if (depth > 16) return false;
    if (tc_op_is_reduce(a->op)) return row_scalar;
    if (a->op == TC_OP_LOAD || a->op == TC_OP_CONST) return tc_st_stride(a->st, axis) == 0;
    if (a->op == TC_OP_GATHER && (row_scalar || tc_st_stride(a->st, axis) != 0)) return false;
    for (int i = 0; i < a->n_srcs; i++)
        if (!uniform_along(a->srcs[i], axis, row_scalar, depth + 1)) return false;
    return true;
}

/* a node under a reduce: a vector form exists (an earlier reduce is a scalar) */
static bool vec_node_ok(vec_walk *w, const tc_ast *a, int axis) {
    if (tc_op_is_reduce(a->op)) return !w->kept;
    if (!w->kept && a->op != TC_OP_LOAD && a->op != TC_OP_CONST && uniform_along(a, axis, true, 0)) return true;
    if (a->op == TC_OP_LOAD || a->op == TC_OP_CONST) {
        int64_t st = a == w->packed ? 1 : tc_st_stride(a->st, axis);
        bool dt_ok = vec_dtype_ok(a->dtype) || (a->op == TC_OP_CONST && a->dtype == TC_BOOL);
        return dt_ok && (st == 0 || (st == 1 && a->op == TC_OP_LOAD));
    }
    /* a gathered row (an embedding's) read along the axis: one index for
     * every lane, so the lanes are consecutive elements (lower_index.c) */
    if (a->op == TC_OP_GATHER)
        return vec_dtype_ok(a->dtype) && tc_st_stride(a->st, axis) == 1 &&
               uniform_along(a->srcs[0], axis, false, 0);
    bool op_ok = a->op == TC_OP_CAST || a->op == TC_OP_ADD || a->op == TC_OP_MUL ||
                 a->op == TC_OP_NEG || a->op == TC_OP_MAX || a->op == TC_OP_RECIP || a->op == TC_OP_EXP2 ||
                 a->op == TC_OP_WHERE;
    /* masks (a one-hot pick, a relu's gate): compares of float32 or int32
     * lanes and their logic, lanes of -1 or 0 (the C renderer's tc_maskN) */
    bool is_mask = a->dtype == TC_BOOL &&
                   (((a->op == TC_OP_CMPLT || a->op == TC_OP_CMPNE) &&
                     (a->srcs[0]->dtype == TC_FLOAT32 || a->srcs[0]->dtype == TC_INT32 ||
                      a->srcs[0]->dtype == TC_BOOL)) ||
                    a->op == TC_OP_AND || a->op == TC_OP_OR || a->op == TC_OP_XOR);
    if (!((op_ok && a->dtype == TC_FLOAT32) || is_mask) || w->n == 256) return false;
    if (vec_seen(w, a)) return true;
    for (int i = 0; i < a->n_srcs; i++)
        if (!vec_node_ok(w, a->srcs[i], axis)) return false;
    return true;
}

/* every reduce under a (walk w: nodes visited; ops: nodes checked) */
static bool vec_reduces_ok(vec_walk *w, vec_walk *ops, const tc_ast *a, int axis) {
    if (a->op == TC_OP_LOAD || a->op == TC_OP_CONST) return true;
    if (w->n == 256) return false;
    if (vec_seen(w, a)) return true;
    if (tc_op_is_reduce(a->op) && (a->dtype != TC_FLOAT32 || !vec_node_ok(ops, a->srcs[0], axis)))
        return false;
    for (int i = 0; i < a->n_srcs; i++)
        if (!vec_reduces_ok(w, ops, a->srcs[i], axis)) return false;
    return true;
}

bool tc_opt_vec_ok(const tc_sched_item *it, int a, bool kept, const tc_ast *packed) {
    vec_walk w = {.n = 0}, ops = {.n = 0, .kept = kept, .packed = packed};
    return vec_reduces_ok(&w, &ops, it->ast, a);
}

/* ---- the cost of what a plan repeats ----
 * A plan's copies repeat the kernel's work in its source: the reduce body
 * once per copy (per reduce step), the stores' values once per kept copy
 * (per output). Costs are weighted ops per element, each AST node once (a
 * DAG): a transcendental is the prelude's polynomial, which gcc inlines
 * into every call, a division a few ops. Of a reduce body only those
 * count: its loads, multiplies and adds are what a tile exists to repeat
 * (the matmul tile of 6x64 scalar copies that gcc packs into vectors). */
enum {
    COST_TRANS = 32,    /* exp2, log2, sin: about that many ops inlined (cmath_src.h) */
    COST_DIV = 4,       /* recip, idiv, mod */
    COST_LOAD = 2,      /* a load and its address */
    COST_GATHER = 7,    /* a gather: a load, and its index bounds-checked (two compares, an
                           and), clamped and scaled: the test GPT-2's embedding sum under a
                           LayerNorm's two reduces, uncounted, took 16 copies, 430 lines and
                           0.39-0.6 s of gcc */
    COST_NODES = 1024,  /* AST nodes a cost walk tracks; past that the costs are COST_MANY */
    COST_MANY = 1 << 20, /* the cost of a kernel too big to count */
    BODY_BUDGET = 512,  /* weighted transcendentals and divisions a plan's copies of the
                           reduce bodies may hold */
    EPI_BUDGET = 64,    /* weighted ops of the stores its kept copies may repeat unrolled */
    BODY_OPS = 512,     /* weighted ops of every kind a plan's copies of the reduce bodies
                           may hold (body_size): the AVX-512 6x4-vector matmul tile 84, a
                           scalar 6x32 one (plain C) 456; 2 x 32 scalar copies of a
                           LayerNorm gradient's 15 loads (GPT-2's, fused with the residual
                           sums and a gather) 1,504 were 1,112 lines and 3 s of gcc; at
                           1024 the test GPT-2's LayerNorm gradient (two bodies of 10
                           loads, a sqrt and a where: no vector form) in 16 scalar partial
                           sums each was 519 lines and 0.29-0.76 s of gcc, at 512 (8) its
                           slowest kernel took 0.21 s; no step slower (MNIST, GPT-2 124M,
                           Zen 4) */
    SCALAR_COPIES = 64, /* scalar copies of a plan on a vector target (columns that are no
                           whole number of vectors): test_small_shapes' 13x17 @ 17x130 took
                           26 columns for two vectors' registers, 13 rows of them: 338 scalar
                           copies, 1,070 lines, 0.38 s of gcc; test_einsum's 16x24 @ 24x8 as
                           one tile of 128: 423 lines, 0.37-0.55 s (Zen 5) */
    BODY_COPIES = 64,   /* copies of the reduce body (a vector counts once) a search may try:
                           the heuristic's tiles are at most 28 (AVX-512's 14x2 vectors) */
    STORE_BUDGET = 128, /* element stores (a vector store counts once) its kept copies may
                           write unrolled */
};

/* weighted ops of one node (a const costs nothing) */
static const int64_t op_cost[TC_OP_COUNT] = {
    [TC_OP_EXP2] = COST_TRANS, [TC_OP_LOG2] = COST_TRANS, [TC_OP_SIN] = COST_TRANS,
    [TC_OP_RECIP] = COST_DIV,  [TC_OP_IDIV] = COST_DIV,   [TC_OP_MOD] = COST_DIV,
    [TC_OP_LOAD] = COST_LOAD,  [TC_OP_GATHER] = COST_GATHER,
    [TC_OP_SQRT] = 1,          [TC_OP_NEG] = 1,           [TC_OP_CAST] = 1,
    [TC_OP_BITCAST] = 1,       [TC_OP_ADD] = 1,           [TC_OP_MUL] = 1,
    [TC_OP_MAX] = 1,           [TC_OP_CMPLT] = 1,         [TC_OP_CMPNE] = 1,
    [TC_OP_AND] = 1,           [TC_OP_OR] = 1,            [TC_OP_XOR] = 1,
    [TC_OP_SHL] = 1,           [TC_OP_SHR] = 1,           [TC_OP_WHERE] = 1,
    [TC_OP_MULACC] = 1,
};

typedef struct {
    const tc_ast *seen[2 * COST_NODES]; /* nodes counted: an open-addressing set */
    int n;                              /* nodes in seen */
    int64_t epi;                        /* weighted ops of the stores' values outside reduces */
    int64_t body;                       /* weighted transcendentals and divisions of the reduce
                                           bodies (per reduce step), each body on its own */
    int64_t body_alu;                   /* every weighted op of the reduce bodies but their
                                           loads (body_size counts those), each body on its own */
} kcost;

/* adds a to the set; false when it was there (or the set is full: the costs
 * become COST_MANY) */
static bool cost_first_visit(kcost *c, const tc_ast *a) {
    size_t h = ((uintptr_t)a >> 4) * 0x9e3779b97f4a7c15u % (2 * COST_NODES);
    while (c->seen[h] && c->seen[h] != a) h = (h + 1) % (2 * COST_NODES);
    if (c->seen[h]) return false;
    if (c->n == COST_NODES) {
        c->epi = c->body = c->body_alu = COST_MANY;
        return false;
    }
    c->seen[h] = a;
    c->n++;
    return true;
}

/* adds the weighted ops of the body under a, up to the reduces it reads
 * (each an earlier stage), to set: set->body its transcendentals and
 * divisions, set->body_alu all but its loads; set->seen holds its nodes */
static void body_cost(kcost *set, const tc_ast *a) {
    for (int i = 0; i < a->n_srcs; i++) {
        const tc_ast *s = a->srcs[i];
        if (tc_op_is_reduce(s->op) || !cost_first_visit(set, s)) continue;
        set->body += op_cost[s->op] >= COST_DIV ? op_cost[s->op] : 0;
        set->body_alu += s->op == TC_OP_LOAD ? 0 : op_cost[s->op];
        body_cost(set, s);
    }
    if (set->n == COST_NODES) set->body = set->body_alu = COST_MANY;
}

/* c->epi: the weighted ops of the stores' values outside the reduces; c->body
 * and c->body_alu: the sums of every reduce's body_cost, since each reduce
 * stage lowers its body anew (a subtree that two stages share, softmax's
 * exp(x - max) in its sum and its store, is counted in each). O(nodes) per
 * reduce. */
static void cost_walk(kcost *c, kcost *set, const tc_ast *a, bool under_reduce) {
    if (!cost_first_visit(c, a)) return;
    if (tc_op_is_reduce(a->op)) {
        memset(set, 0, sizeof *set);
        body_cost(set, a);
        c->body += set->body;
        c->body_alu += set->body_alu;
    } else if (!under_reduce) {
        c->epi += op_cost[a->op];
    }
    for (int i = 0; i < a->n_srcs; i++)
        cost_walk(c, set, a->srcs[i], under_reduce || tc_op_is_reduce(a->op));
}

/* the largest divisor of n that is at most cap, preferring multiples of l */
static int64_t best_divisor(int64_t n, int64_t cap, int64_t l) {
    for (int64_t d = cap - cap % l; d >= l; d -= l)
        if (n % d == 0) return d;
    for (int64_t d = cap < n ? cap : n; d > 1; d--)
        if (n % d == 0) return d;
    return 1;
}

/* rows of a tile along an axis of size n, at most want: want itself when the
 * clamped rows waste at most an eighth of the axis, else a divisor. With
 * spread, the same number of blocks with the rows spread evenly over them:
 * a register tile's 64 rows with want 14 are 5 blocks of 13, one row
 * clamped, not 5 of 14 with 6 clamped (each clamped row costs the tile an
 * index of its own, and its FMAs are work thrown away; a 64-channel 32x32
 * conv, Zen 5: 7.0-7.2 -> 5.5-5.9 ms). A copy's rows (a cache line) are
 * not spread. */
static int64_t tile_rows(int64_t n, int64_t want, bool spread) {
    if (n <= want) return n;
    int64_t steps = (n + want - 1) / want;
    if ((steps * want - n) * 8 <= n) return spread ? (n + steps - 1) / steps : want;
    return best_divisor(n, want, 1);
}

/* a load that moves along some reduced axis (an operand of the reduce, not
 * a per-row value such as a normalization's scale) */
static bool varies_in_reduce(const tc_sched_item *it, const tc_st *st) {
    for (int a = 0; a < it->ndim; a++)
        if ((it->reduce_axes >> a) & 1 && it->full_shape[a] > 1 && tc_st_stride(st, a) != 0) return true;
    return false;
}

/* every store of the kernel is contiguous along kept axis a */
static bool stores_contiguous(const kinfo *k, int a) {
    bool ok = k->n_stores > 0;
    for (int s = 0; s < k->n_stores && ok; s++) ok = tc_st_stride(k->stores[s]->st, a) == 1;
    return ok;
}

/* the share of vector lanes a tile column of cj floats uses */
static double lane_use(int64_t cj, int64_t l) {
    return (double)cj / (double)(((cj + l - 1) / l) * l);
}

/* ---- what a loop re-reads ---- */

/* bytes of the buffers that the reduces of it read and that do not move
 * along kept axis a (each buffer once; seen: slots counted): what the loops
 * inside a loop over a read again at each of its steps */
static int64_t reread_bytes(const tc_sched_item *it, const tc_ast *x, int a, bool under, bool *seen) {
    if (x->op == TC_OP_LOAD) {
        if (!under || x->buf < 0 || seen[x->buf] || tc_st_stride(x->st, a) != 0) return 0;
        seen[x->buf] = true;
        const tc_node *b = it->bufs[x->buf];
        return tc_node_numel(b) * (int64_t)tc_dtypes[b->dtype].size;
    }
    int64_t n = 0;
    for (int i = 0; i < x->n_srcs; i++) n += reread_bytes(it, x->srcs[i], a, under || tc_op_is_reduce(x->op), seen);
    return n;
}

enum { REREAD_BUFS = 64 }; /* buffers of a kernel tc_opt_reread_level looks at, at most */

/* what a loop over kept axis a re-reads at each step (reread_bytes); -1:
 * more buffers than REREAD_BUFS */
static int64_t reread_total(const tc_sched_item *it, int a) {
    bool seen[REREAD_BUFS] = {false};
    return it->n_bufs > REREAD_BUFS ? -1 : reread_bytes(it, it->ast, a, false, seen);
}

/* the cache level (1, 2; 3: past them) whose share holds `bytes` (-1: unknown) */
static int reread_level_of(const tc_target *tg, int64_t bytes) {
    if (bytes < 0) return 3;
    for (int l = 1; l < 3; l++) {
        int64_t share = core_share(&tg->cache[l]);
        if (share > 0 && bytes <= share / 2) return l;
    }
    return 3;
}

int tc_opt_reread_level(const tc_sched_item *it, const tc_target *tg, int a) {
    return reread_level_of(tg, reread_total(it, a));
}

bool tc_opt_rows_outer(const tc_sched_item *it, const tc_target *tg, int i, int j) {
    return tc_opt_reread_level(it, tg, i) < tc_opt_reread_level(it, tg, j);
}

/* a loop of n steps shared by t threads: n / (t * ceil(n / t)) of them busy
 * (3 steps on 2 threads: 3 of 4); a > b: a's share is more even than b's */
static bool shares_better(int64_t a, int64_t b, int64_t t) {
    return a * ((b + t - 1) / t) > b * ((a + t - 1) / t);
}

bool tc_opt_cols_first(const tc_sched_item *it, const tc_target *tg, int i, int64_t amt_i, int j, int64_t amt_j) {
    int64_t steps_i = (it->full_shape[i] + amt_i - 1) / amt_i, steps_j = (it->full_shape[j] + amt_j - 1) / amt_j;
    int64_t t = tg->cores > 1 ? tg->cores : 1;
    return (steps_j >= 8 || shares_better(steps_j, steps_i, t)) && !tc_opt_rows_outer(it, tg, i, j);
}

/* plan p is a tile of two kept axes, the only ones of the kernel */
static bool plain_tile(const tc_sched_item *it, const tc_kopt *p) {
    if (p->n != 2 || !is_kept(it, p->axis[0]) || !is_kept(it, p->axis[1])) return false;
    for (int a = 0; a < it->ndim; a++)
        if (is_kept(it, a) && a != p->axis[0] && a != p->axis[1]) return false;
    return true;
}

/* ---- row blocks (BLIS's mc) ----
 * A register tile whose column loop runs outside its rows' (lower.c's loop
 * order: a packed tile, or columns first) reads, at every column step, all
 * of the operand that does not move along the columns (a of a @ b, every
 * row of it) again: from the L3 while that fits half a core's share, else
 * from memory, once per tile of columns. Past that, the rows run in blocks
 * that fit it, and the loop over the blocks goes outside the columns', so
 * a block of a stays in the L3 while every column of b passes by (each
 * block fills its panels anew: one more copy of b per block). Only for a
 * plain tile, rows and columns the only kept axes of more than one index.
 * Measured (matmul 4096^3, 6 x 64 tiles, panels of 2048 x 64, one thread,
 * Zen 5 with 16 MiB of L3 a core; the kernel's C alone, four runs each):
 * unblocked 195-216 GFLOPS, blocks of 516 rows 215-225, of 1026 rows
 * 202-230; 2048^3 (a of 16 MiB): unblocked 236-244, blocks of 1026 rows
 * 234-241 (equal). O(AST nodes). */
/* the rows of each of `blocks` row blocks over `steps` tiles of ri rows, as
 * even as whole tiles allow; 0 where one block holds them all */
static int64_t even_row_blocks(int64_t steps, int64_t blocks, int64_t ri) {
    int64_t per = (steps + blocks - 1) / blocks;
    return per < steps ? per * ri : 0;
}

static int64_t plan_mblock(const tc_sched_item *it, const tc_target *tg, const tc_kopt *p) {
    if (!plain_tile(it, p) || it->n_bufs > REREAD_BUFS) return 0;
    int i = p->axis[0], j = p->axis[1];
    if (!p->pack && i < j && !tc_opt_cols_first(it, tg, i, p->amt[0], j, p->amt[1])) return 0;
    int64_t half = core_share(&tg->cache[2]) / 2;
    bool seen[REREAD_BUFS] = {false};
    int64_t bytes = reread_bytes(it, it->ast, j, false, seen);
    if (half <= 0 || bytes <= half) return 0;
    int64_t steps = (it->full_shape[i] + p->amt[0] - 1) / p->amt[0];
    return even_row_blocks(steps, (bytes + half - 1) / half, p->amt[0]);
}

/* ---- packed panels ----
 * A register tile needs an operand that moves contiguously along its column
 * axis j. x @ w.T has none: w (out, in) moves along the reduce. A packed
 * tile copies the tile's columns of that operand, pack_k reduce indices of
 * them, into a panel (a scratch array, contiguous along j) before the rows
 * of tiles that read it, and reads the panel instead (lower.c): the copy is
 * O(pack_k x columns) per panel, the tile's work O(rows x pack_k x columns)
 * (OpenBLAS and BLIS pack every operand so). */

enum {
    PACK_ROWS_PER_LANE = 10,   /* rows a panel must serve per vector lane: its copy moves
                                  pack_k x cols elements one by one, the tiles do rows x
                                  pack_k x cols / lanes vector FMAs, so the copy costs at most
                                  a tenth (x @ w.T, one thread, AVX-512: 64 rows 49 vs 59
                                  GFLOPS for the dot tile, 128 rows 57 vs 60, 256 rows 58-72
                                  vs 42-59) */
    PACK_JUMP_ROWS_PER_LANE = 4, /* the same where the tile would jump from page to page of
                                    the operand without a panel (b of a @ b, a row of it per
                                    reduce step, the rows a page or more apart): GPT-2's skinny (64, 768) @ (768,
                                    50304), 64 rows, AVX2's 6 x 2 vectors: 76-77 GFLOPS
                                    unpacked, 92-93 packed (the copy prefetching: lower.c) */
    PAGE_BYTES = 4096,           /* a page (x86-64's and AArch64's smallest): no prefetcher
                                    crosses one */
    PACK_MAX_BYTES = 512 << 10 /* the largest panel: a stack array of the kernel (glibc's
                                  threads have 8 MiB of stack) */
};

/* the bytes a packed panel may take: half the L2 a core may count on, at
 * most PACK_MAX_BYTES */
static int64_t panel_limit(const tc_target *tg) {
    int64_t limit = l2_share(tg) / 2;
    return limit < PACK_MAX_BYTES ? limit : PACK_MAX_BYTES;
}

/* the load a packed tile along kept axis j copies into its panel: the only
 * load under the reduces that moves along j, moving along the reduce too,
 * float32, in a kernel of one reduce (over one or more reduced axes: the
 * panel holds their indices flat, as a reduce split by axes.c, attention's
 * merged heads, reads them) whose other loads do not move along j; NULL
 * where there is none */
static const tc_ast *pack_load(const tc_sched_item *it, const kinfo *k, int j) {
    int n_red = 0;
    for (int a = 0; a < it->ndim; a++) n_red += (it->reduce_axes >> a) & 1 && it->full_shape[a] > 1;
    if (n_red < 1 || !is_kept(it, j) || k->n_reds != 1) return NULL;
    const tc_ast *found = NULL;
    for (int i = 0; i < k->n_loads; i++) {
        const tc_ast *l = k->loads[i];
        if (tc_st_stride(l->st, j) == 0) continue;
        if (found || l->dtype != TC_FLOAT32 || !varies_in_reduce(it, l->st)) return NULL;
        found = l;
    }
    return found;
}

/* the kept axis whose loop a packed tile's panel is filled before: rows
 * axis i, or the outermost of the kept axes just before it that pl does
 * not move along either (lower.c opens the column axis j before it), so
 * one panel serves the rows of them all (the merged heads' matmul: (batch,
 * T) rows that do not merge, 4 x 64) */
int tc_opt_pack_from(const tc_sched_item *it, const tc_ast *pl, int i, int j) {
    int f = i;
    while (f > 0 && f - 1 != j && is_kept(it, f - 1) && tc_st_stride(pl->st, f - 1) == 0) f--;
    return f;
}

/* the panel of load pl, filled before the loop over axis f =
 * tc_opt_pack_from, can be: every other kept axis pl moves along is opened
 * before f, that is an earlier axis */
static bool pack_axes_ok(const tc_sched_item *it, const tc_ast *pl, int i, int j) {
    int f = tc_opt_pack_from(it, pl, i, j);
    for (int a = 0; a < it->ndim; a++)
        if (is_kept(it, a) && a != j && a >= f && tc_st_stride(pl->st, a) != 0) return false;
    return true;
}

/* the rows one panel of pl serves: the kept axes from f to i, and those
 * past i but j (pack_axes_ok: pl does not move along them), whose loops
 * lower.c opens inside i's (a conv tiled by images: each image's output
 * pixels) */
static int64_t pack_rows(const tc_sched_item *it, const tc_ast *pl, int i, int j) {
    int64_t rows = 1;
    for (int a = tc_opt_pack_from(it, pl, i, j); a < it->ndim; a++)
        if (a <= i || (a != j && is_kept(it, a))) rows *= it->full_shape[a];
    return rows;
}

/* the reduce indices inside the blockable axis (tc_opt_kblock_axis, else
 * the first reduced one): the other reduced axes' product */
static int64_t reduce_inner(const tc_sched_item *it) {
    int64_t inner = 1;
    bool first = true;
    for (int a = 0; a < it->ndim; a++) {
        if (!((it->reduce_axes >> a) & 1) || it->full_shape[a] == 1) continue;
        if (!first) inner *= it->full_shape[a];
        first = false;
    }
    return inner;
}

/* the reduce's length: the reduced axes' product */
static int64_t reduce_len(const tc_sched_item *it) {
    int64_t n = 1;
    for (int a = 0; a < it->ndim; a++)
        if ((it->reduce_axes >> a) & 1) n *= it->full_shape[a];
    return n;
}

int64_t tc_opt_panel_k(const tc_sched_item *it, int64_t kblock) {
    return kblock ? kblock * reduce_inner(it) : reduce_len(it);
}

const tc_ast *tc_opt_pack_load(const tc_sched_item *it, int j) {
    kinfo k;
    collect(&k, it->ast);
    return k.overflow ? NULL : pack_load(it, &k, j);
}

/* the load a row panel of rows axis i, columns j holds (tc_opt_row_load) */
static const tc_ast *row_load(const tc_sched_item *it, const kinfo *k, int i, int j) {
    const tc_ast *found = NULL;
    for (int li = 0; li < k->n_loads; li++) {
        const tc_ast *l = k->loads[li];
        if (tc_st_stride(l->st, i) == 0) continue;
        if (found || tc_st_stride(l->st, j) != 0 || l->dtype != TC_FLOAT32 || !varies_in_reduce(it, l->st))
            return NULL;
        found = l;
    }
    return found;
}

const tc_ast *tc_opt_row_load(const tc_sched_item *it, int i, int j) {
    kinfo k;
    collect(&k, it->ast);
    return k.overflow ? NULL : row_load(it, &k, i, j);
}

int64_t tc_opt_row_rows(const tc_sched_item *it, const tc_kopt *p) {
    int64_t ri = p->amt[0];
    return p->mblock ? p->mblock : (it->full_shape[p->axis[0]] + ri - 1) / ri * ri;
}

/* The rows of a register tile of `vecs` vectors per row (BLIS's micro-tile
 * mr x nr, nr = vecs lanes-wide vectors) that a file of `regs` SIMD
 * registers holds. Per reduce step the tile loads its vecs vectors of the
 * reused operand once, then each row's broadcast of the other operand in
 * turn, and does rows * vecs vector FMAs: the accumulators, the vecs
 * vectors and the broadcast must all be registers, with one to spare. gcc
 * keeps them so; a register short, it reads every FMA's vector from memory
 * instead (the 3x32 tile on AVX2's 16 registers: 15 loads per 12 FMAs, not
 * 7). plan_tile takes, of the widths that divide the column axis, the one
 * with the most used lanes of FMAs per load (rows * vecs / (rows + vecs):
 * the tile's reuse), then the most accumulators (independent FMA chains
 * hide the FMA's latency): 16 registers give 6x2 vectors (BLIS's Haswell and
 * Zen kernels are 6x16 floats too), 32 give 6x4. Measured (matmul 512^3, one
 * thread, CPU time, Zen 3 AVX2): 3x32 36 GFLOPS, 6x16 48. */
static int64_t tile_max_rows(int64_t regs, int64_t vecs) {
    int64_t rows = (regs - vecs - 2) / vecs;
    return rows > 1 ? rows : 1;
}

/* the rows of the register tile with the most reuse (rows * vecs / (rows +
 * vecs)) of at most TILE_VECS vectors, the most rows breaking ties: 6 of 2
 * vectors with 16 registers, 6 of 4 with 32 */
static int64_t reuse_tile_rows(int64_t regs) {
    int64_t best = 1;
    double best_reuse = 0;
    for (int64_t v = 1; v <= TILE_VECS; v++) {
        int64_t r = tile_max_rows(regs, v);
        double reuse = (double)(r * v) / (double)(r + v);
        if (reuse > best_reuse || (reuse == best_reuse && r > best)) best_reuse = reuse, best = r;
    }
    return best;
}

static bool packs(const tc_sched_item *it, const kinfo *k, int64_t l, const tc_target *tg,
                  const tc_kopt *p);

/* tile p (rows, columns) reads its column operand (pack_load) in order:
 * its columns are the whole row of it that a step of the innermost
 * reduced axis moves by (a conv's channels-last weight as wide as the
 * tile), so the tile's lines over the reduce are one contiguous run */
static bool reads_in_order(const tc_sched_item *it, const kinfo *k, const tc_kopt *p) {
    const tc_ast *pl = pack_load(it, k, p->axis[1]);
    int r = reduced_axis(it, true);
    return pl && r >= 0 && tc_st_stride(pl->st, p->axis[1]) == 1 &&
           tc_st_stride(pl->st, r) == p->amt[1];
}

/* ---- a tile's line traffic ----
 *
 * A tile's reduce step does rows x vecs vector FMAs and rows + vecs loads,
 * and refills the L1d with the lines of its operands that are not there:
 * an operand whose lines over the whole reduce (the tile's footprint)
 * pass half the L1d comes from the L2 at every step, its lines per step
 * being the lines the tile's copies along the axes it moves on touch
 * (rows a line or more apart: a line each; closer: the lines they share,
 * whole: by the time the next tiles read the rest of a line it is gone),
 * over the reduce steps one line serves along the innermost reduced axis
 * (a conv's window: 3 steps of an input row). We take two FMAs and about
 * 1.5 loads a cycle (LOAD_SLOTS) and about 0.4 lines a cycle from the L2
 * (half its 64-byte port: what a core sustains under streaming), so a
 * line costs FILL_COST FMA slots; where the lines jump (far_lines: a
 * weight line 2 KiB from the last per step, no prefetch reaching it) a
 * step waits JUMP_COST slots per jump beside that. The tile's efficiency
 * is its FMAs over the most of FMAs, loads, refills and jumps in those
 * slots, times the share of its rows and lanes doing work (columns that
 * are not whole vectors: a scalar tile), and, where its column operand
 * streams, times rows / max_rows under the most-reuse tile's rows (fewer
 * rows re-read the column panel from the next cache more often per FMA:
 * reuse_tile_rows, 6 with 16 registers as with 32). A tile that would read
 * its column operand from a packed panel (packs) reads it in order: no
 * jumps. Measured (`build/bench/plan_time` with CONV, 1 thread, Zen 5):
 * ResNet-18's 3x3 convs, batch 16, channels-last weight: 128 channels
 * 16x16 had 16 output channels x 16 columns (one vector, load-bound) at
 * 189-201 GFLOPS, 8 columns of a row x 32 output channels 230-252; 256
 * channels 8x8 had 6 images x 64 channels (each image its own line:
 * 179-185), 8 columns x 32 channels 206-239; 512 channels 4x4 keep 6
 * images x 64 (176-192; 4 columns x 64 channels 114-132, their panel
 * re-read per 4 rows). In a ResNet-18 step (batch 16, 1 thread) the 16
 * kernels whose plan it changed took 99.7 -> 85.0 ms. Planning for AVX2
 * (16 registers of 8 floats), whose 6 x 2 vector tile does half the FMAs
 * per step, a jump per step decides: 4 columns x 16 channels of the
 * 512-channel conv (a weight line per 8 FMAs) ran 45-54 GFLOPS, 6 images
 * x 16 channels from a packed panel 85-97; the step's 3x3 convs took
 * 778-910 -> 627-663 ms (`TC_CPU_ISA=avx2 bench/step_kernels.py
 * --against`, Zen 5). Only a window's tiles (has_window) and those whose
 * rows' operand is read a line apart per reduce step (rows_far) are chosen
 * so: on a 1x1 conv the estimate picked 8 columns x 32 channels over 29
 * channels x 16 columns and ran 1.39 -> 2.00 ms, and matmuls keep the
 * reuse rule their plans were measured with. */
enum {
    FILL_COST = 5,      /* FMA slots a line refilled from the L2 costs */
    JUMP_COST = 14,     /* FMA slots a step waits per jump to a line far from the last (AVX2 tiles
                           of 8 and 12 FMAs a step and a jump ran at 7-8 cycles a step) */
    MEM_FILL_COST = 64, /* FMA slots a line streamed from memory costs (stream_eff) */
    FMA_CHAINS = 8,     /* accumulators that keep two FMA pipes of latency 4 busy */
};
/* FMA slots a load takes: loads issue beside FMAs, but a tile of one vector
 * (a load per FMA) ran well below its FMAs' rate: 13 x 1 vectors 76 GFLOPS
 * against 94 for 6 x 2 (AVX2), 29 x 1 144 against 200 for 6 x 4
 * (AVX-512; ResNet-18's 64-channel conv and 512-channel weight gradient,
 * Zen 5) */
#define LOAD_SLOTS (4.0 / 3.0)
/* how much more efficient (tile_eff) a tile must be to win over more reuse:
 * the estimate is rough (a weight gradient's 13x2 tile, estimated 2.6%
 * better than 6x4, ran 7% slower) */
#define EFF_MARGIN 1.1

/* reduce steps one line of load st serves along the innermost reduced axis */
static double steps_per_line(const tc_sched_item *it, const tc_st *st, int64_t size, int64_t line) {
    int r = reduced_axis(it, true);
    if (r < 0) return 1;
    int64_t s = tc_st_stride(st, r), n = it->full_shape[r];
    if (s == 0) return (double)n;
    if (s < 0 || s * size >= line) return 1;
    double per = (double)line / (double)(s * size);
    return per < (double)n ? per : (double)n;
}

/* lines per reduce step the copies of load st along axis a (amt of them) touch */
static double lines_along(const tc_st *st, int a, int64_t amt, int64_t size, int64_t line) {
    int64_t s = a >= 0 ? tc_st_stride(st, a) : 0;
    if (s == 0) return 1;
    if (s < 0 || s * size >= line) return (double)amt;
    return (double)(amt * s * size) / (double)line;
}

/* x lines rounded up: a copy reading part of a line touches all of it */
static double whole(double x) {
    double w = (double)(int64_t)x;
    return w < x ? w + 1 : w;
}

/* the tile's loads of st jump from line to line along the innermost
 * reduced axis, leaving a gap: its step there is a line or more and passes
 * what the tile reads contiguously (its rows or columns along an axis of
 * stride 1) */
static bool far_lines(const tc_sched_item *it, const tc_st *st, int i, int64_t ri, int j,
                      int64_t cj, int64_t size, int64_t line) {
    int r = reduced_axis(it, true);
    int64_t s = r >= 0 ? tc_st_stride(st, r) : 0, span = 1;
    if (i >= 0 && tc_st_stride(st, i) == 1) span = ri;
    if (tc_st_stride(st, j) == 1) span = cj;
    return s * size >= line && s > span;
}

/* the efficiency of a tile of ri rows of axis i (-1: none) and cj columns
 * (vecs vectors) of axis j, per the charter above */
static double tile_eff(const tc_sched_item *it, const kinfo *k, const tc_target *tg, int i, int64_t ri, int j,
                       int64_t cj, int64_t vecs, int64_t l, int64_t max_rows) {
    int64_t line = tc_opt_line_bytes(tg), half_l1 = l1d_bytes(tg) / 2, len = reduce_len(it);
    double fills = 0, far = 0; /* FMA slots: of the lines refilled, of the jumps between them */
    bool col_streams = false;
    tc_kopt cand = {.n = 2, .axis = {i, j}, .amt = {ri, cj}};
    bool packed = i >= 0 && tg->has_vec && cj % l == 0 && packs(it, k, l, tg, &cand);
    for (int li = 0; li < k->n_loads; li++) {
        const tc_st *st = k->loads[li]->st;
        if (!varies_in_reduce(it, st)) continue;
        int64_t size = tc_dtypes[k->loads[li]->dtype].size;
        double along_i = lines_along(st, i, ri, size, line),
               along_j = lines_along(st, j, cj, size, line);
        double per_step = whole(along_i) * whole(along_j) / steps_per_line(it, st, size, line);
        if (per_step * (double)len * (double)line <= (double)half_l1)
            continue; /* stays in the L1d */
        fills += per_step * FILL_COST;
        if (far_lines(it, st, i, ri, j, cj, size, line) &&
            !(packed && k->loads[li] == pack_load(it, k, j))) {
            /* each run of adjacent lines a jump: its latency, the run's lines coming together */
            double run = tc_st_stride(st, j) == 1             ? whole(along_j)
                         : i >= 0 && tc_st_stride(st, i) == 1 ? whole(along_i)
                                                              : 1;
            far += per_step / run * JUMP_COST;
        }
        col_streams |= tc_st_stride(st, j) != 0;
    }
    /* columns that are not whole vectors are a scalar tile (choose_plan
     * gives it no lanes): ri x cj FMAs of one lane each */
    bool vec = cj % l == 0;
    double fma = (double)(ri * (vec ? vecs : cj)), most = fma;
    double loads = (double)(ri + (vec ? vecs : cj)) * LOAD_SLOTS;
    if (loads > most) most = loads;
    if (fills > most) most = fills;
    if (far > most) most = far;
    double eff = fma / most / (vec ? 1.0 : (double)l);
    if (fma < FMA_CHAINS) eff *= fma / FMA_CHAINS; /* too few chains to hide the FMA's latency */
    if (i >= 0) {
        int64_t n = it->full_shape[i], steps = (n + ri - 1) / ri;
        eff *= (double)n / (double)(steps * ri);
    }
    if (col_streams && ri < max_rows) eff *= (double)ri / (double)max_rows;
    return eff;
}

/* FMA slots one pass over what a column block of axis j re-reads costs
 * where it streams from memory (tc_opt_reread_level 3), else 0 */
static double stream_slots(const tc_sched_item *it, const tc_target *tg, int j) {
    int64_t bytes = reread_total(it, j);
    if (bytes < 0 || reread_level_of(tg, bytes) < 3) return 0;
    return (double)bytes / (double)tc_opt_line_bytes(tg) * MEM_FILL_COST;
}

/* a tile of efficiency eff whose `passes` column blocks each re-read
 * pass_slots from memory: its efficiency over the kernel's FMAs (its loop
 * space, l lanes a vector FMA) and those passes, in turn. A pass of
 * MNIST's 64-channel conv over 512 images (13 MB) cost about 1.5 ms in a
 * step (6 images x 64 channels 14.0-14.7 ms, x 32 in two passes 15.9-18.0,
 * AVX-512, Zen 5): about 64 FMA slots a line (MEM_FILL_COST). MNIST's
 * conv2 input gradient (512 images, 51 MB, 32 channels) planning for AVX2
 * took 3 channels x 24 columns in one pass (the fewest passes ruled
 * before) at 60 GFLOPS; 6 columns x 16 channels in two run at 107. */
static double stream_eff(const tc_sched_item *it, double eff, int64_t passes, double pass_slots,
                         int64_t l) {
    double fmas = 1;
    for (int a = 0; a < it->ndim; a++) fmas *= (double)it->full_shape[a];
    fmas /= (double)l;
    return 1.0 / (1.0 / eff + (double)passes * pass_slots / fmas);
}

/* a convolution's window: a load under the reduce slides along a kept
 * axis by a step (the conv's stride, at most 4) of its stride along a
 * reduced axis inside the outermost one (x[oh * s + kh]); a matmul's
 * operands do not (its one reduced axis is the outermost, whatever its
 * length), nor does a 1x1 conv, nor a reduce split over several axes
 * (attention's merged heads) */
static bool has_window(const tc_sched_item *it, const kinfo *k) {
    int outer = reduced_axis(it, false);
    for (int li = 0; li < k->n_loads; li++)
        for (int i = 0; i < it->ndim; i++) {
            int64_t si = tc_st_stride(k->loads[li]->st, i);
            if (!is_kept(it, i) || si <= 0) continue;
            for (int r = 0; r < it->ndim; r++) {
                int64_t sr = tc_st_stride(k->loads[li]->st, r);
                if ((it->reduce_axes >> r) & 1 && r != outer && it->full_shape[r] > 1 && sr > 0 && si % sr == 0 &&
                    si / sr <= 4)
                    return true;
            }
        }
    return false;
}

/* the rows' operand of a tile along column axis j (a load under the reduce
 * that the columns reuse) reads lines a line or more apart along the
 * innermost reduced axis: a 1x1 conv of NCHW images (x[n, ci, 2oh, 2ow],
 * ci reduced), a.T @ b. Its rows axis then decides how many lines a step
 * reads (6 images: 6, each far from the last; 8 columns of one image: 1),
 * which the reuse rule does not see, so such tiles are ranked by tile_eff
 * as a window's are. ResNet-18's 1x1 stride-2 shortcut conv (16 x 128 x 16
 * x 16 to 256 channels, `CONV=128,256,16,2,1 build/bench/plan_time`, 1
 * thread, Zen 5): 6 images x 64 channels 0.94-1.06 ms, 8 columns x 32
 * channels 0.42-0.46. */
static bool rows_far(const tc_sched_item *it, const kinfo *k, const tc_target *tg, int j) {
    int r = reduced_axis(it, true);
    int64_t line = tc_opt_line_bytes(tg);
    for (int li = 0; li < k->n_loads && r >= 0; li++) {
        const tc_st *st = k->loads[li]->st;
        int64_t s = tc_st_stride(st, r);
        if (varies_in_reduce(it, st) && tc_st_stride(st, j) == 0 && s > 0 &&
            s * (int64_t)tc_dtypes[k->loads[li]->dtype].size >= line)
            return true;
    }
    return false;
}

static bool plan_tile(const tc_sched_item *it, const kinfo *k, int64_t l, int64_t regs, const tc_target *tg,
                      tc_kopt *p) {
    bool may_pack = tg->has_vec;
    /* the column axis j: a kept axis some load under the reduce reads
     * contiguously (and along a reduced axis). Under a window every such
     * axis is tried (a conv's output channels in its channels-last weight,
     * its output columns in its input); elsewhere the one filling the most
     * vector lanes, contiguous stores breaking ties */
    int js[TC_MAX_DIMS], n_js = 0;
    const tc_st *jst[TC_MAX_DIMS];
    bool window = has_window(it, k);
    double best_lanes = 0;
    for (int j = it->ndim - 1; j >= 0; j--) {
        if (!is_kept(it, j)) continue;
        for (int li = 0; li < k->n_loads; li++) {
            if (tc_st_stride(k->loads[li]->st, j) != 1 || !varies_in_reduce(it, k->loads[li]->st)) continue;
            int64_t cj = best_divisor(it->full_shape[j], TILE_VECS * l, l);
            double lanes = cj < 2 ? 0 : lane_use(cj, l) + (stores_contiguous(k, j) ? 0.01 : 0);
            if (lanes > 0 && window) js[n_js] = j, jst[n_js++] = k->loads[li]->st;
            else if (lanes > best_lanes) best_lanes = lanes, js[0] = j, jst[0] = k->loads[li]->st, n_js = 1;
            break;
        }
    }
    bool packed = false;
    for (int j = it->ndim - 1; j >= 0 && n_js == 0 && may_pack; j--) { /* a packed tile */
        const tc_ast *pl = pack_load(it, k, j);
        if (pl && best_divisor(it->full_shape[j], TILE_VECS * l, l) >= l) js[n_js] = j, jst[n_js++] = pl->st, packed = true;
    }
    if (n_js == 0) return false;
    /* A kernel of several outputs (a weight gradient stored with its
     * optimizer update) gets the same tile as one of one: bound_plan puts
     * an epilogue past EPI_BUDGET in loops after the tile. (A cap of two
     * vectors and 192 outputs for such kernels, from before that bound,
     * cost GPT-2 124M's 147 weight-gradient + AdamW kernels 318-367 ms a
     * step against 290-306 without it, and an SGD step's 1024x1024 weight
     * gradient stored with its update 2.3-2.5 ms against 1.8; MNIST's step
     * and gcc's time for GPT-2's 60 kernels unchanged. Zen 5, 2026-12-06.)
     * Of the tiles (j, vectors, rows axis i): under a window the most
     * efficient (tile_eff, and the passes over what a column block
     * re-reads from memory: stream_eff; within EFF_MARGIN of the current
     * best counts as equal); then the most used lanes of FMAs per load
     * (the tile's reuse), then the most accumulators (see tile_max_rows),
     * then stores contiguous along j, then the innermost axes. */
    double best_eff = -1, best_reuse = -1;
    int64_t best_accs = 0, max_rows = reuse_tile_rows(regs);
    bool best_stores = false;
    /* what a column block re-reads past the L3's share (as the target
     * reports it) streams from memory once per block (a window's tiles) */
    bool known = tg->cache[1].bytes > 0 || tg->cache[2].bytes > 0;
    for (int c = 0; c < n_js; c++) {
        int j = js[c];
        bool stores_ok = stores_contiguous(k, j), ranked = window || rows_far(it, k, tg, j);
        double pass_slots = window && known ? stream_slots(it, tg, j) : 0;
        for (int64_t nv = 1; nv <= TILE_VECS; nv++) {
            int64_t cj = best_divisor(it->full_shape[j], nv * l, l), vecs = (cj + l - 1) / l;
            if (vecs != nv) continue; /* a narrower shape has these columns */
            int64_t rows_max = tile_max_rows(regs, vecs);
            for (int i = it->ndim - 1; i >= -1; i--) { /* -1: a tile of columns alone */
                if (i >= 0 && (i == j || !is_kept(it, i) || tc_st_stride(jst[c], i) != 0)) continue;
                int64_t ri = i >= 0 ? tile_rows(it->full_shape[i], rows_max, true) : 1;
                if (i >= 0 && ri < 2) continue;
                double eff = ranked ? tile_eff(it, k, tg, i, ri, j, cj, vecs, l, max_rows) : 1;
                if (pass_slots > 0)
                    eff = stream_eff(it, eff, (it->full_shape[j] + cj - 1) / cj, pass_slots, l);
                double reuse = (double)(ri * cj) / (double)l / (double)(ri + vecs);
                int64_t accs = ri * vecs;
                bool better =
                    best_eff < 0 || eff > best_eff * EFF_MARGIN ||
                    (eff * EFF_MARGIN >= best_eff &&
                     (reuse > best_reuse ||
                      (reuse == best_reuse &&
                       (accs > best_accs || (accs == best_accs && stores_ok && !best_stores)))));
                if (!better) continue;
                best_eff = eff, best_reuse = reuse, best_accs = accs, best_stores = stores_ok;
                if (i >= 0) *p = (tc_kopt){.n = 2, .axis = {i, j}, .amt = {ri, cj}, .pack = packed};
                else *p = (tc_kopt){.n = 1, .axis = {j}, .amt = {cj}};
            }
        }
    }
    /* a panel serves the rows of one column block: enough of them */
    if (best_eff >= 0 && packed && (p->n != 2 || !packs(it, k, l, tg, p))) return false;
    return best_eff >= 0;
}

/* reused by some load under a reduce along kept axis a */
static bool is_reused(const kinfo *k, int a) {
    for (int i = 0; i < k->n_loads; i++)
        if (tc_st_stride(k->loads[i]->st, a) == 0) return true;
    return false;
}

/* up to two kept axes, reused ones first, innermost first */
static void plan_rows(const tc_sched_item *it, const kinfo *k, tc_kopt *p) {
    int64_t copies = 1;
    for (int pass = 0; pass < 2 && p->n < 2; pass++) {
        for (int a = it->ndim - 1; a >= 0 && p->n < 2; a--) {
            int64_t n = it->full_shape[a], amt = n % 4 == 0 ? 4 : n % 3 == 0 ? 3 : n % 2 == 0 ? 2 : 1;
            if (!is_kept(it, a) || amt == 1 || copies * amt > ROW_COPIES) continue;
            if (p->n && p->axis[0] == a) continue;
            if (pass == 0 && !is_reused(k, a)) continue;
            p->axis[p->n] = a;
            p->amt[p->n++] = amt;
            copies *= amt;
        }
    }
}

/* the innermost reduced axis, when some load under the reduce reads it
 * contiguously; -1 otherwise. *amt: its split, a divisor of the axis of at
 * most 2l accumulators (multiples of l first; 20 splits into 20), or 2l
 * with a tail where no multiple of l divides an axis of TAIL_STEPS steps
 * (a vocabulary of 50,257 = 29 x 1,733: 29 scalar chains before) */
static int split_axis(const tc_sched_item *it, const kinfo *k, int64_t l, int64_t *amt) {
    int r = reduced_axis(it, true);
    if (r < 0) return -1;
    *amt = best_divisor(it->full_shape[r], 2 * l, l);
    if (*amt % l && it->full_shape[r] >= TAIL_STEPS * 2 * l) *amt = 2 * l; /* and a tail (lower.c) */
    if (*amt < 4) return -1;
    for (int i = 0; i < k->n_loads; i++)
        if (tc_st_stride(k->loads[i]->st, r) == 1) return r;
    return -1;
}

/* the widest power-of-two vector (at most l lanes, at least 4) dividing n; 0 if none */
static int vec_lanes(int64_t n, int64_t l) {
    for (int64_t v = l; v >= 4; v /= 2)
        if (n % v == 0) return (int)v;
    return 0;
}

/* dot products (the split axis r is read contiguously by the loads that
 * read it): partials in vectors along r, and up to two kept axes along which
 * an input is reused, innermost first, as rows: per step the tile loads one
 * vector per row of each input and does rows_i * rows_j vector FMAs (x @
 * w.T, a conv's weight gradient). Without rows, two vectors of partials,
 * or a short row whole with rows of a kept axis as independent streams. */
static bool plan_dot(const tc_sched_item *it, const kinfo *k, int r, int64_t l, int64_t regs, tc_kopt *p) {
    int lanes = vec_lanes(it->full_shape[r], l);
    /* a long row no vector divides (a vocabulary of 50,257) in vectors of
     * the machine's lanes, its last indices (fewer than a step) in a scalar
     * loop after them (lower.c's tail): under 1/TAIL_STEPS of the row */
    bool tail = !lanes && it->full_shape[r] >= TAIL_STEPS * 2 * l;
    if (tail) lanes = (int)l;
    if (!lanes || !tc_opt_vec_ok(it, r, false, NULL)) return false;
    static const int64_t rows[] = {4, 5, 3, 6, 2};
    int64_t accs = 1;
    *p = (tc_kopt){0};
    for (int a = it->ndim - 1; a >= 0 && p->n < 2; a--) {
        if (!is_kept(it, a) || !is_reused(k, a)) continue;
        for (size_t m = 0; m < sizeof rows / sizeof rows[0]; m++) {
            int64_t n = it->full_shape[a], amt = rows[m];
            if (n % amt != 0 || accs * amt > regs) continue;
            p->axis[p->n] = a;
            p->amt[p->n++] = amt;
            accs *= amt;
            break;
        }
    }
    int64_t vecs = p->n == 0 && (tail || it->full_shape[r] % (2 * lanes) == 0) ? 2 : 1;
    int64_t short_vecs = it->full_shape[r] / lanes;
    if (p->n == 0 && short_vecs <= 8 && !tail) {
        /* a short row (batchnorm's sums over 20 columns: 5 vectors of 4) and
         * no input reused across outputs: the whole row in vectors, and rows
         * of the innermost kept axis as independent streams, up to 40
         * accumulators (TC_BEAM's pick: 3.8 -> 1.0 ms) */
        vecs = short_vecs;
        for (int a = it->ndim - 1; a >= 0; a--) {
            if (!is_kept(it, a)) continue;
            int64_t amt = best_divisor(it->full_shape[a], 40 / vecs, 1);
            if (amt >= 2) p->axis[p->n] = a, p->amt[p->n++] = amt;
            break;
        }
    }
    p->axis[p->n] = r;
    p->amt[p->n++] = vecs * lanes;
    p->lanes = lanes;
    return true;
}

static bool has_max_reduce(const tc_ast *a) {
    if (a->op == TC_OP_REDUCE_MAX) return true;
    for (int i = 0; i < a->n_srcs; i++)
        if (has_max_reduce(a->srcs[i])) return true;
    return false;
}

/* max-pooling (a max over a window of at most 16 elements, its innermost
 * axis at most 4): that axis unrolled whole and a run of outputs along the
 * innermost kept axis, stored contiguously, so the copies read one
 * contiguous stretch (2x2 pooling of 10 columns: x[2j + dj], 20 consecutive
 * floats) that gcc loads as vectors and deinterleaves. With the branch-free
 * max of the C dialect: beautiful_mnist's first pool 24 -> 6 ms. A sum over
 * such a window (the pool's backward) gained nothing and keeps plan_rows. */
static bool plan_window(const tc_sched_item *it, const kinfo *k, int64_t l, tc_kopt *p) {
    int64_t window = 1;
    int r = -1;
    if (!has_max_reduce(it->ast)) return false;
    for (int a = 0; a < it->ndim; a++)
        if ((it->reduce_axes >> a) & 1) window *= it->full_shape[a], r = it->full_shape[a] > 1 ? a : r;
    if (r < 0 || window > 16 || it->full_shape[r] > 4) return false;
    for (int j = it->ndim - 1; j >= 0; j--) {
        if (!is_kept(it, j)) continue;
        int64_t cj = best_divisor(it->full_shape[j], l, 1);
        if (!stores_contiguous(k, j) || cj < 2) return false;
        *p = (tc_kopt){.n = 2, .axis = {j, r}, .amt = {cj, it->full_shape[r]}};
        return true;
    }
    return false;
}

static int count_reduces(const tc_ast *a) {
    int n = tc_op_is_reduce(a->op);
    for (int i = 0; i < a->n_srcs; i++) n += count_reduces(a->srcs[i]);
    return n;
}

static bool loads_buf(const tc_ast *a, int buf) {
    if (a->op == TC_OP_LOAD) return a->buf == buf;
    for (int i = 0; i < a->n_srcs; i++)
        if (loads_buf(a->srcs[i], buf)) return true;
    return false;
}

/* the one reduce under a store's value a (*red; walks stop at reduces,
 * each node once: seen), false where a reads buffer out or holds reduces
 * of two kinds */
static bool epilogue_walk(const tc_ast *a, int out, tc_ptrmap *seen, const tc_ast **red) {
    if (!tc_ptrset_add(seen, a)) return !seen->failed;
    if (a->op == TC_OP_LOAD) return a->buf != out;
    if (tc_op_is_reduce(a->op)) {
        if (*red && *red != a) return false;
        *red = a;
        return true;
    }
    for (int i = 0; i < a->n_srcs; i++)
        if (!epilogue_walk(a->srcs[i], out, seen, red)) return false;
    return true;
}

int tc_opt_kblock_axis(const tc_sched_item *it) {
    const tc_ast *sink = it->ast, *red = NULL;
    if (it->n_outs != 1 || it->bufs[0]->op == TC_OP_ASSIGN || sink->n_srcs != 1) return -1;
    const tc_ast *st = sink->srcs[0];
    const tc_view *v = &st->st->views[st->st->n_views - 1];
    for (int a = 0; a < v->ndim; a++) /* stored in the reduced space */
        if ((it->reduce_axes >> a) & 1 && v->shape[a] > 1) return -1;
    tc_ptrmap seen = {0};
    bool one = st->dtype == TC_FLOAT32 && epilogue_walk(st->srcs[0], st->buf, &seen, &red);
    tc_ptrmap_free(&seen);
    if (!one || !red || red->op != TC_OP_REDUCE_SUM || red->dtype != TC_FLOAT32 || count_reduces(red->srcs[0]) != 0 ||
        loads_buf(red, st->buf))
        return -1;
    return reduced_axis(it, false);
}

/* The block of a tile's reduce (tc_kopt.kblock; 0: none). Each row of
 * tiles reads the reused operand's panel (the reduce's length times the
 * tile's `cols` columns) once; BLIS sizes its kc so that the kc x nr
 * micro-panel of B stays in L1d while the rows of A stream past, and so do
 * we: the fewest blocks (a divisor of the axis, at least two) whose panel
 * fits the L1d, none when the whole panel does. Fewer blocks matter as much,
 * since every block re-reads and re-writes the outputs' partial sums. Our
 * panel is not packed: its rows lie a row of b apart, each its own page past
 * 1024 floats, so a block also bounds the pages and cache sets the panel
 * touches. Measured (one thread, CPU time; bench_ops shapes): 2048^3 on a
 * Zen 3 (32 KiB L1d, 6x16 tiles, 64-byte panel rows), blocks of 256 and 512
 * (panels of L1d/2 and L1d) 26 GFLOPS, of 1024 (2 L1d) 19, none 17; on an
 * AVX-512 Xeon (48 KiB L1d, 6x64 tiles) blocks of 512 took 2048^3 from 178
 * to 234 GFLOPS (a 128 KiB panel; this rule gives 128 there, not measured).
 * With more reduced axes inside the blocked one (a conv: input channels,
 * then the window) the panel is the block's channels times the window
 * times the columns, and it is blocked to half the L2 a core may count on
 * instead: blocks fitting the L1d made beautiful_mnist's convs slower (6.0
 * -> 9.2 ms for conv2's dw), as each block re-reads and re-writes the
 * outputs, but a panel past the L2 is re-read from the L3 by every row of
 * tiles: ResNet-18's 512-channel 3x3 convs on 4x4 images (a 1.2 MB panel
 * of 64 output channels, re-read by 48 rows of tiles) took 86.7 -> 78.5 ms
 * for their six kernels at one thread, 55.2 -> 44.3 ms at two (blocks of
 * 128 channels, Zen 4 with a 1 MiB L2; least of two step runs each). A
 * tile over a window is blocked by window_kblock first, which counts the
 * input planes a block reads again as well (blocks of 64 there). */
static int64_t plan_kblock(const tc_sched_item *it, int64_t cols, const tc_target *tg) {
    int k = tc_opt_kblock_axis(it);
    if (k < 0) return 0;
    int64_t inner = reduce_inner(it); /* the reduced axes inside k: a conv's window */
    int64_t n = it->full_shape[k], per_index = cols * 4 * inner;
    int64_t fit = inner == 1 ? l1d_bytes(tg) : l2_share(tg) / 2;
    return n * per_index <= fit ? 0 : block_of(n, fit / per_index);
}

/* Elements load st touches while each axis a runs over n[a] indices (1:
 * held), the axes taken by stride, smallest first: one whose stride is
 * past what the axes before it reach adds disjoint copies (the count times
 * n[a]); one within it slides over what they touch (a conv's output
 * columns and its window's: 8 + 3 - 1 of them, not 24) and adds what it
 * reaches past. -1 where a stride is unknown. O(ndim^2). */
static double load_footprint(const tc_st *st, const int64_t *n, int ndim) {
    double count = 1, reach = 1;
    uint32_t done = 0;
    for (;;) {
        int best = -1;
        int64_t bs = 0;
        for (int a = 0; a < ndim; a++) {
            if ((done >> a) & 1 || n[a] <= 1) continue;
            int64_t sa = tc_st_stride(st, a);
            if (sa < 0) return -1;
            if (sa > 0 && (best < 0 || sa < bs)) best = a, bs = sa;
        }
        if (best < 0) return count;
        done |= 1u << best;
        double m = (double)n[best], sb = (double)bs;
        count *= sb >= reach ? m : (reach + (m - 1) * sb) / reach;
        reach += (m - 1) * sb;
    }
}

/* the columns' loop of tile p runs outside its rows' (lower.c's
 * loop_order: axis order, the columns' axis moved before the rows' where
 * tc_opt_cols_first) */
static bool cols_outside(const tc_sched_item *it, const tc_target *tg, const tc_kopt *p) {
    return p->axis[1] < p->axis[0] || tc_opt_cols_first(it, tg, p->axis[0], p->amt[0], p->axis[1], p->amt[1]);
}

/* the kept axis whose loop lower.c opens first for tile p, its columns'
 * loop outside its rows' or not (cols_outside; an axis of one step opens
 * none); -1: none */
static int outer_loop_axis(const tc_sched_item *it, const tc_kopt *p, bool cols_out) {
    int i = p->axis[0], j = p->axis[1];
    bool cols_first = j > i && cols_out; /* moved before the rows */
    for (int o = 0; o < it->ndim; o++) {
        int a = cols_first && o >= i && o <= j ? (o == i ? j : o - 1) : o;
        int64_t step = a == i ? p->amt[0] : a == j ? p->amt[1] : 1;
        if (is_kept(it, a) && it->full_shape[a] > step) return a;
    }
    return -1;
}

/* the fewest reduce steps a block of a conv's reduce holds: each block
 * reads back and stores its tiles' partial sums and opens their loops
 * again, as BLIS's kc (256 floats and more) amortizes a C micro-tile's
 * update; a weight gradient of 16 images of 4x4 in blocks of 8 (128 steps)
 * ran 10% slower than unblocked (ResNet-18, 1 thread, Zen 5) */
enum { BLOCK_MIN_STEPS = 256 };

/* The block of a conv's reduce (a tile over a window: has_window; 0: none,
 * -1: plan_kblock's rule). lower.c opens the block loop inside the
 * outermost kept loop, so what a block's loops read again is the rows'
 * operand over every row of tiles in it (the tiles of rows come back to it
 * for each column tile) and one column tile's panel (read again by each
 * row of tiles, where the columns' loop runs outside the rows'; else the
 * whole block's); and every block reads back the partial sums of the
 * outputs of that outermost step. Half the L2 a core may count on holds
 * the block's operands (the most channels that fit, counted by
 * load_footprint over the loops inside), the other half the partial sums;
 * where those do not fit, no block of two or more does, a block would hold
 * fewer than BLOCK_MIN_STEPS, or a stride is unknown, plan_kblock's rule
 * (the panel alone) stays. The panel alone left out the 16 images' planes
 * that a 512-channel 4x4 conv reads again for each column tile. */
static int64_t window_kblock(const tc_sched_item *it, const kinfo *k, const tc_target *tg, const tc_kopt *p) {
    bool cols_out = cols_outside(it, tg, p);
    int ka = tc_opt_kblock_axis(it), outer = outer_loop_axis(it, p, cols_out), i = p->axis[0], j = p->axis[1];
    if (ka < 0 || outer < 0) return -1;
    int64_t n[TC_MAX_DIMS], fit = l2_share(tg) / 2, outs = 4; /* float32 sums */
    for (int a = 0; a < it->ndim; a++) n[a] = it->full_shape[a];
    n[outer] = outer == i ? p->amt[0] : outer == j ? p->amt[1] : 1;
    for (int a = 0; a < it->ndim; a++) outs *= is_kept(it, a) ? n[a] : 1;
    if (cols_out) n[j] = p->amt[1];
    n[ka] = 1; /* per channel of the block */
    double per = 0;
    for (int li = 0; li < k->n_loads; li++) {
        const tc_st *st = k->loads[li]->st;
        if (!varies_in_reduce(it, st)) continue;
        double f = load_footprint(st, n, it->ndim);
        if (f < 0) return -1;
        per += f * (double)tc_dtypes[k->loads[li]->dtype].size;
    }
    int64_t len = it->full_shape[ka];
    if (per * (double)len <= (double)fit) return 0;
    int64_t b = outs <= fit && per < (double)fit ? block_of(len, (int64_t)((double)fit / per)) : 0;
    return b && b * reduce_inner(it) >= BLOCK_MIN_STEPS ? b : -1;
}

/* The block of a tile's reduce for its rows' operand (0: none needed): a
 * tile of rows whose operand is a line or more apart along the reduce (a.T
 * @ b, a stored (k, m): a weight gradient's x.T) reads a new line of it per
 * reduce step, and the next tiles of rows read those lines again (a line
 * holds 16 rows); so the lines one tile reads, a block's worth, fit half
 * the L1d, as plan_kblock's strided panel does. Lines a multiple of 4 KiB
 * apart crowd a few sets of the caches, and a whole reduce's worth were
 * gone before the next tile came: a.T @ b at 1024 185-197 GFLOPS unblocked,
 * blocks of 256 219-234; at 2048 142 -> 219 (blocks of 64-512: 216-228;
 * a @ b 229), 1 thread, Zen 5; at m = 1,008 the same plan unblocked ran at
 * 243. With an epilogue (a.T @ b + r, blocked since the epilogue waits for
 * the last block): 1024 184-194 -> 204-213, 2048 125-134 -> 201-208
 * (`build/bench/plan_time`, LAYOUT=tn EPI=1). One reduced axis only (a
 * conv's window: plan_kblock). */
static int64_t rows_kblock(const tc_sched_item *it, const kinfo *k, const tc_target *tg, const tc_kopt *p) {
    int ka = tc_opt_kblock_axis(it);
    if (p->n != 2 || ka < 0 || reduce_inner(it) != 1) return 0;
    int64_t line = tc_opt_line_bytes(tg), stride = 0;
    for (int i = 0; i < k->n_loads; i++) {
        const tc_st *st = k->loads[i]->st;
        if (tc_st_stride(st, p->axis[1]) == 0 && tc_st_stride(st, p->axis[0]) != 0) {
            int64_t s = tc_st_stride(st, ka) * (int64_t)tc_dtypes[k->loads[i]->dtype].size;
            stride = s > stride ? s : stride;
        }
    }
    int64_t n = it->full_shape[ka], fit = l1d_bytes(tg) / 2 / line;
    return stride < line || n <= fit ? 0 : block_of(n, fit);
}

/* the copies of plan p: its amounts' product */
static int64_t plan_copies(const tc_kopt *p) {
    int64_t c = 1;
    for (int i = 0; i < p->n; i++) c *= p->amt[i];
    return c;
}

/* the copies of the reduce body in plan p's source: a vector counts once */
static int64_t body_copies(const tc_kopt *p) {
    return p->lanes > 1 ? plan_copies(p) / p->lanes : plan_copies(p);
}

/* the kept copies of plan p: the product of its kept axes' amounts */
static int64_t kept_copies(const tc_sched_item *it, const tc_kopt *p) {
    int64_t c = 1;
    for (int i = 0; i < p->n; i++)
        if (!((it->reduce_axes >> p->axis[i]) & 1)) c *= p->amt[i];
    return c;
}

/* the weighted ops plan p's copies of the reduce bodies hold: every copy
 * repeats the bodies' ALU ops (costs c), but a load only once per distinct
 * index, the product of the amounts of the plan axes it moves along (a
 * matmul tile's row loads once per row, its column once per column; a
 * vector counts once). A plan whose vectors run along a reduced axis folds
 * each kept copy's accumulator of every reduce into one lane after the
 * stage: lanes - 1 adds each (16 copies of a LayerNorm's two sums, 16
 * lanes: 480 adds, as many as their bodies) */
static int64_t body_size(const tc_sched_item *it, const kinfo *k, const tc_kopt *p, const kcost *c) {
    int64_t n = body_copies(p) * c->body_alu;
    if (p->lanes > 1 && p->n > 0 && ((it->reduce_axes >> p->axis[p->n - 1]) & 1))
        n += kept_copies(it, p) * k->n_reds * (p->lanes - 1);
    for (int l = 0; l < k->n_loads; l++) {
        int64_t copies = 1;
        for (int i = 0; i < p->n; i++) {
            if (tc_st_stride(k->loads[l]->st, p->axis[i]) == 0) continue;
            copies *= i == p->n - 1 && p->lanes > 1 ? p->amt[i] / p->lanes : p->amt[i];
        }
        n += copies * COST_LOAD;
    }
    return n;
}

/* the stores plan p's kept copies write unrolled: one per copy and store,
 * a vector's lanes once where lower_store.c stores it whole (every store
 * contiguous along the vector axis, no earlier blocks' sums to add);
 * elsewhere each lane is a store of its own: a conv's output channels in
 * vectors, stored channel-first, were 448 scalar stores, 1,261 lines and
 * 0.6 s of gcc on AVX-512 */
static int64_t store_copies(const tc_sched_item *it, const kinfo *k, const tc_kopt *p) {
    int64_t kept = kept_copies(it, p);
    if (p->lanes > 1 && p->n > 0 && !p->kblock && !((it->reduce_axes >> p->axis[p->n - 1]) & 1) &&
        stores_contiguous(k, p->axis[p->n - 1]))
        kept /= p->lanes;
    return kept * k->n_stores;
}

/* halves the entry of plan p with the most copies (a reduced axis' amount
 * stays a divisor of it, a vector entry keeps whole vectors); an entry left
 * with one copy goes, a lone vector stays. false when nothing can shrink. */
static bool shrink_plan(const tc_sched_item *it, tc_kopt *p) {
    int best = -1;
    int64_t most = 1;
    for (int i = 0; i < p->n; i++) {
        int64_t unit = i == p->n - 1 && p->lanes > 1 ? p->lanes : 1;
        if (p->amt[i] / unit > most) most = p->amt[i] / unit, best = i;
    }
    if (best < 0) return false;
    int a = p->axis[best];
    bool is_vec = best == p->n - 1 && p->lanes > 1;
    int64_t unit = is_vec ? p->lanes : 1, want = most / 2;
    if ((it->reduce_axes >> a) & 1 && it->full_shape[a] % p->amt[best] == 0) /* else it has a tail */
        want = best_divisor(it->full_shape[a] / unit, want, 1);
    if (want > 1 || is_vec) {
        p->amt[best] = want * unit;
        return true;
    }
    memmove(&p->axis[best], &p->axis[best + 1], sizeof(int) * (size_t)(p->n - best - 1));
    memmove(&p->amt[best], &p->amt[best + 1], sizeof(int64_t) * (size_t)(p->n - best - 1));
    p->n--;
    return true;
}

static bool plan_valid(const tc_sched_item *it, const tc_kopt *p);

/* The cost rule: the copies of a plan repeat its reduce body at most
 * BODY_BUDGET weighted ops (fewer copies until they do), and its stores'
 * work at most EPI_BUDGET: past that the stores run once per output in
 * loops over the tile (epi_loop). A blocked reduce's stores add the earlier
 * blocks' sums: a load and an add per output. */
static void bound_plan(const tc_sched_item *it, const kinfo *k, const tc_target *tg, tc_kopt *p) {
    kcost c, set;
    memset(&c, 0, sizeof c);
    cost_walk(&c, &set, it->ast, false);
    bool shrunk = false;
    while (p->n > 0 &&
           (body_copies(p) * c.body > BODY_BUDGET || body_size(it, k, p, &c) > BODY_OPS ||
            (tg->has_vec && p->lanes <= 1 && plan_copies(p) > SCALAR_COPIES)) &&
           shrink_plan(it, p))
        shrunk = true;
    if (shrunk) p->kblock = 0, p->row_pack = false, p->mblock = 0;
    if (shrunk && p->n && !plan_valid(it, p)) *p = (tc_kopt){0};
    if (p->kblock) c.epi += COST_LOAD + 1;
    int64_t kept = kept_copies(it, p);
    p->epi_loop = kept > 1 && (kept * c.epi > EPI_BUDGET || store_copies(it, k, p) > STORE_BUDGET);
}

/* tile p (rows, columns) may read its column operand from a panel: enough
 * rows share each panel (PACK_ROWS_PER_LANE), the operand is the only
 * load moving along the columns, its other axes are open by then, and the
 * columns' loop may be the outer one (a panel is filled outside the rows):
 * not when the rows' loop re-reads less per step from a nearer cache
 * (tc_opt_rows_outer: GPT-2's wte gradient, 50304 rows of 256 x 768
 * columns, streamed all 51 MB of its rows' operand per column block), nor
 * when the tile already reads the operand in order (reads_in_order) and
 * its reduce would not be blocked to the L1d without a panel (a window's
 * blocks are the L2's, as a panel's; a copy gains nothing there: a weight
 * gradient of ResNet-18, 64 x 64 channels on 32 x 32, 6 x 64 tile, ran
 * 223-238 -> 186-198 GFLOPS packed, Zen 5, one thread) */
static bool packs(const tc_sched_item *it, const kinfo *k, int64_t l, const tc_target *tg,
                  const tc_kopt *p) {
    const tc_ast *pl = pack_load(it, k, p->axis[1]);
    if (!pl) return false;
    bool in_order =
        reads_in_order(it, k, p) && (reduce_inner(it) > 1 || !plan_kblock(it, p->amt[1], tg));
    /* a jump to a new page per step costs the tile (tile_eff) where it does
     * fewer FMAs than the jump takes (b's rows 256 bytes apart do not: 64
     * x 2048 x 64 ran 108-112 GFLOPS unpacked, 99-104 packed, AVX2) */
    int r = reduced_axis(it, true);
    bool jumps = r >= 0 && p->amt[0] * ((p->amt[1] + l - 1) / l) < JUMP_COST &&
                 tc_st_stride(pl->st, r) * (int64_t)tc_dtypes[pl->dtype].size >= PAGE_BYTES &&
                 far_lines(it, pl->st, p->axis[0], p->amt[0], p->axis[1], p->amt[1],
                           (int64_t)tc_dtypes[pl->dtype].size, tc_opt_line_bytes(tg));
    int64_t rows = (jumps ? PACK_JUMP_ROWS_PER_LANE : PACK_ROWS_PER_LANE) * l;
    return !in_order && pack_rows(it, pl, p->axis[0], p->axis[1]) >= rows &&
           pack_axes_ok(it, pl, p->axis[0], p->axis[1]) &&
           !tc_opt_rows_outer(it, tg, p->axis[0], p->axis[1]);
}

/* completes packed tile p: its columns in vectors (a packed tile exists
 * for them: false where the kernel has no vector form), its panel of the
 * whole reduce where that fits half the L2 (and PACK_MAX_BYTES), else the
 * fewest blocks (kblock) whose panels do, where the reduce may be blocked,
 * else the most columns (whole vectors, the rows as planned) whose panel
 * does (false where none: a kernel whose reduce may not be blocked, two
 * reduces or an optimizer's update stored with a weight gradient, once had
 * a dot tile instead, 99.6 GFLOPS against 178.8 for 6 rows of 32 packed
 * columns, 256 x 3072 x 768, 1 thread, Zen 5; an epilogue, GPT-2's x @ W.T
 * + bias + residual, is blocked since: 181-190 GFLOPS with 64 columns and
 * blocks of 1,536, 189-195 with 32 unblocked). A packed panel is contiguous, so unlike plan_kblock's
 * strided one it need not stay in the L1d; fewer blocks mean fewer passes
 * over the output's partial sums, each a read and a write of all of it.
 * Measured (2048^3, one thread, thread CPU time, Zen 4 with a 1 MiB L2,
 * 6x64 tiles): panels of 32 / 128 / 256 / 512 KiB (16 / 4 / 2 / 1 blocks)
 * 57-65 / 61-67 / 75-80 / 90-96 GFLOPS, unpacked blocks from the L1d 46-54;
 * 1024^3: one 256 KiB panel 91-100, unpacked 58-66; OpenBLAS 84-91. */
static bool plan_pack(const tc_sched_item *it, const kinfo *k, int64_t l, const tc_target *tg, tc_kopt *p) {
    int j = p->axis[1];
    const tc_ast *pl = pack_load(it, k, j);
    if (!pl || p->amt[1] % l || !tc_opt_vec_ok(it, j, true, pl)) return false;
    p->lanes = (int)l;
    int64_t limit = panel_limit(tg), per_index = p->amt[1] * 4 * reduce_inner(it);
    p->kblock = 0;
    if (tc_opt_panel_k(it, 0) * p->amt[1] * 4 <= limit) return true;
    int ka = tc_opt_kblock_axis(it);
    if (ka < 0) { /* not blockable: fewer columns, whole vectors dividing the axis */
        for (int64_t cols = p->amt[1] - l; cols >= l; cols -= l)
            if (it->full_shape[j] % cols == 0 && tc_opt_panel_k(it, 0) * cols * 4 <= limit) {
                p->amt[1] = cols;
                return true;
            }
        return false;
    }
    p->kblock = block_of(it->full_shape[ka], limit / per_index); /* blocks of the blockable axis */
    return p->kblock > 0;
}

/* ---- row panels (BLIS's packed A) ----
 * A packed tile whose rows' operand lies a line or more apart along the
 * reduce (a.T @ b, a stored (k, m): a weight gradient's x.T) reads a line
 * of it per reduce step and row, from rows 4 KiB apart in a 1,024-wide a:
 * a new page per step, that no prefetcher follows. rows_kblock keeps those
 * lines in the L1d for the next tiles of rows; on AVX2's 6 x 16 tile that
 * is a line per 12 FMAs, and a.T @ b ran at 72% of a @ b (88 against 122
 * GFLOPS, 1024^3, one thread, Zen 5 planning for AVX2). A row panel copies
 * a row block's rows of it (the copy reads a's rows in order) into a
 * scratch array laid out tile by tile, each tile's rows innermost, before
 * the columns' loop, and the tiles read the panel in order: BLIS's packed
 * A (mc x kc in the L2), beside the column panel (its kc x nr). The panel
 * holds the rows of a row block (mblock) times the reduce indices of a
 * block (kblock) and fits half the L2 a core may count on: kblock passes
 * read back the output's partial sums, and each row block fills its
 * column panels anew (one more copy of b per block), so both go near the
 * root of what fits (a block of the whole reduce where the rows fit with
 * it). A hand-written 1024^3 kernel so: 88 -> 121 GFLOPS (blocks of 128
 * of the reduce, all rows). A kernel whose reduce may not be blocked (a
 * weight gradient stored with its optimizer's update) takes row blocks
 * alone. The copies cost what a tile of more FMAs per line of a does not
 * win back: AVX-512's 6 x 64 tile (24 vector FMAs a step) ran a.T @ b at
 * the speed of a @ b without a panel (226-238 GFLOPS at 1024, 237 at 512)
 * and 8-12% slower with one (196-207, 208), the copy being scalar; AVX2's
 * 6 x 16 (12 FMAs a step) 86-90 -> 112-119. So a tile of fewer than
 * ROW_PACK_FMAS vector FMAs per reduce step takes a row panel. O(AST
 * nodes). */
enum { ROW_PACK_FMAS = 2 * FMA_CHAINS };
static void plan_row_pack(const tc_sched_item *it, const kinfo *k, const tc_target *tg, tc_kopt *p) {
    int r = reduced_axis(it, true);
    if (!p->pack || !plain_tile(it, p) || reduce_inner(it) != 1 || r < 0 || p->lanes < 2 ||
        p->amt[0] * (p->amt[1] / p->lanes) >= ROW_PACK_FMAS)
        return;
    int i = p->axis[0];
    const tc_ast *rl = row_load(it, k, i, p->axis[1]);
    int64_t s = rl ? tc_st_stride(rl->st, r) : -1;
    if (s < 0 || s * 4 < tc_opt_line_bytes(tg)) return;
    int64_t limit = panel_limit(tg) / 4; /* floats */
    int64_t ri = p->amt[0], rows = tc_opt_row_rows(it, p), steps = rows / ri;
    int64_t len = reduce_len(it), kb = p->kblock ? p->kblock : len, root = 1;
    while ((root + 1) * (root + 1) <= limit) root++;
    if (rows * kb > limit && tc_opt_kblock_axis(it) >= 0) {
        int64_t want = limit / rows > root ? limit / rows : root;
        int64_t b = want < kb ? block_of(len, want) : 0;
        if (b) kb = b;
    }
    int64_t mb = 0;
    if (rows * kb > limit) { /* row blocks of at most the tiles that fit */
        int64_t per = limit / kb / ri;
        if (per < 1) return;
        mb = even_row_blocks(steps, (steps + per - 1) / per, ri);
    }
    p->row_pack = true;
    p->kblock = kb == len ? 0 : kb;
    p->mblock = mb;
}

/* the plan of a kernel by its shape (see the charter) */
static void choose_plan(const tc_sched_item *it, const tc_target *tg, const kinfo *k, tc_kopt *p) {
    int64_t l = tg->simd_floats > 1 ? tg->simd_floats : 4;
    int64_t file = tg->simd_regs > 0 ? tg->simd_regs : 16;
    int64_t regs = file * 3 / 4; /* a dot tile's accumulators, leaving room for operands */
    int64_t amt = 0;
    int r = split_axis(it, k, l, &amt);
    tc_kopt tile;
    bool has_tile = plan_tile(it, k, l, file, tg, &tile);
    if (has_tile && tile.pack && !plan_pack(it, k, l, tg, &tile)) has_tile = false;
    if (has_tile && !tile.pack && tg->has_vec && tile.n == 2 && packs(it, k, l, tg, &tile)) {
        tc_kopt packed = tile; /* a tile whose panel pays for its copy reads it packed */
        packed.pack = true;
        if (plan_pack(it, k, l, tg, &packed)) tile = packed;
    }
    /* a tile narrower than a vector loses to a dot tile where there is one */
    bool narrow = has_tile && tile.amt[tile.n - 1] < l;
    if (tg->has_vec && r >= 0 && (!has_tile || narrow) && plan_dot(it, k, r, l, regs, p)) return;
    if (has_tile) { /* its columns in vectors in the reduce stage where they fill them */
        int j = tile.axis[tile.n - 1];
        if (!tile.pack && tg->has_vec && tile.amt[tile.n - 1] % l == 0 && tc_opt_vec_ok(it, j, true, NULL))
            tile.lanes = (int)l;
        if (tile.n == 2 && !tile.pack) {
            tile.kblock = has_window(it, k) ? window_kblock(it, k, tg, &tile) : -1;
            if (tile.kblock < 0) tile.kblock = plan_kblock(it, tile.amt[1], tg);
        }
        plan_row_pack(it, k, tg, &tile);
        int64_t rb = tile.row_pack ? 0 : rows_kblock(it, k, tg, &tile); /* the smaller of two divisors */
        if (rb && (!tile.kblock || rb < tile.kblock)) tile.kblock = rb;
        *p = tile;
        return;
    }
    /* a split alone: the compiler packs the partial sums of one output into
     * vectors, but with several outputs per iteration it packs across them
     * (their stores are the consecutive ones) and uses 4-wide vectors:
     * x @ w.T (128x784x128) 2.3 ms with 4 rows and a split, 0.8 ms with the
     * split alone (TC_BEAM found it) */
    if (r >= 0) *p = (tc_kopt){.n = 1, .axis = {r}, .amt = {amt}};
    else if (!plan_window(it, k, l, p)) plan_rows(it, k, p);
}

/* ---- elementwise kernels: transposing copies ----
 *
 * A kernel without reduces runs its loops in the order of its output, so a
 * load that strides along the innermost axis (a transpose: a weight's
 * channels-last copy, a permuted activation) touches a new cache line per
 * element, and a stride of a multiple of 4 KiB maps them all to a few sets:
 * E_4608_512, a 512x4608 weight transposed, ran at 3.3 GB/s (5.8 ms for 9
 * MB) on a Zen 4 core. Upcasting the axis along which that load is
 * contiguous by a cache line of its elements (the loop over it steps by a
 * line, the body holds a line's copies) reads whole lines and keeps the
 * line's worth of output lines in the L1d across the inner loop: tiled
 * transposition, as a blocked copy kernel does it. */

enum {
    ELEM_LOADS = 16,  /* loads an elementwise kernel may hold for a transposing plan */
    ELEM_NODES = 256, /* AST nodes it may hold (a walk that remembers each node once) */
};

typedef struct {
    const tc_ast *seen[ELEM_NODES];
    int n_seen;
    const tc_ast *loads[ELEM_LOADS];
    int n_loads;
    bool overflow; /* more than the arrays hold: no plan */
} elem_walk;

/* the distinct loads and stores (into k) under a, each node once: a
 * kernel's AST is a DAG, and a walk of its paths grows exponentially with
 * its depth (a long fused chain). O(n^2) over at most ELEM_NODES nodes. */
static void elem_collect(elem_walk *w, kinfo *k, const tc_ast *a) {
    for (int i = 0; i < w->n_seen; i++)
        if (w->seen[i] == a) return;
    if (w->n_seen == ELEM_NODES) w->overflow = true;
    if (w->overflow) return;
    w->seen[w->n_seen++] = a;
    if (a->op == TC_OP_LOAD) {
        if (w->n_loads == ELEM_LOADS) w->overflow = true;
        else w->loads[w->n_loads++] = a;
    }
    if (a->op == TC_OP_STORE) {
        if (k->n_stores == 64) w->overflow = true;
        else k->stores[k->n_stores++] = a;
    }
    for (int i = 0; i < a->n_srcs; i++) elem_collect(w, k, a->srcs[i]);
}

/* st reads loop axis a at stride 1 or -1 (a flipped axis: a conv's weight
 * in its input gradient), through one view, no mask cutting a */
static bool unit_stride(const tc_st *st, int a) {
    if (st->n_views != 1 || a >= st->views[0].ndim) return false;
    const tc_view *v = &st->views[0];
    if (v->has_mask && (v->mask_begin[a] > 0 || v->mask_end[a] < v->shape[a])) return false;
    return v->strides[a] == 1 || v->strides[a] == -1;
}

/* every store of the kernel writes a value loaded as is */
static bool only_copies(const kinfo *k) {
    for (int s = 0; s < k->n_stores; s++)
        if (k->stores[s]->n_srcs < 1 || k->stores[s]->srcs[0]->op != TC_OP_LOAD) return false;
    return k->n_stores > 0;
}

/* the bytes a kernel's load reads: its element size times the sizes of the
 * axes it moves along */
static int64_t load_bytes(const tc_sched_item *it, const tc_ast *l) {
    int64_t n = tc_dtypes[l->dtype].size;
    for (int a = 0; a < it->ndim; a++)
        if (tc_st_stride(l->st, a) != 0) n *= it->full_shape[a];
    return n;
}

/* the plan of a kernel without reduces whose stores are contiguous along its
 * innermost axis and one of whose loads strides along it but is contiguous
 * (or reversed) along another kept axis: that axis upcast by a cache line of
 * the load's elements (the L1d's line as the host reports it; 64 bytes if
 * unknown); bound_transpose keeps it or drops it by its copies' cost.
 * Where the load's elements along the innermost axis are a line or more
 * apart, each step of the innermost loop then reads a line of another row
 * of the load, as many rows in turn as the innermost axis is long: more
 * than a hardware prefetcher follows. A copy whose load is larger than the
 * L2 a core may count on (its lines come from farther away, each a miss of
 * its own) is tiled by a line of the stores' elements along the innermost
 * axis too: a square whose loop over the stores' lines lower.c opens
 * outside the other, so each step reads on along a line's worth of rows,
 * in order (rendered without gcc's loop vectorizer, which turned the
 * square into lane extracts: render/cstyle.c); only where the square
 * divides both axes (257 x 4099 with clamped squares ran 0.60 -> 1.09 ms).
 * A ResNet-18 512-channel conv weight made channels-last (E_4608_512, 9
 * MiB) right after the conv that last read it (1 thread, Zen 5): 1.73-1.79
 * -> 0.73-0.74 ms; the step's six such copies (weights, activations and
 * gradients made channels-last) 13.7 -> 6.6 ms. Cost: elem_collect's walk,
 * then loads x axes. */
static void plan_transpose(const tc_sched_item *it, const tc_target *tg, const kinfo *k,
                           const elem_walk *w, tc_kopt *p) {
    int last = it->ndim - 1;
    if (last < 1 || !is_kept(it, last) || !stores_contiguous(k, last)) return;
    int64_t line = tc_opt_line_bytes(tg);
    const tc_ast *const *loads = w->loads;
    for (int i = 0; i < w->n_loads; i++) {
        int64_t s = tc_st_stride(loads[i]->st, last);
        if (s == 0 || s == 1 || s == -1) continue;
        for (int a = last - 1; a >= 0; a--) {
            if (!is_kept(it, a) || !unit_stride(loads[i]->st, a)) continue;
            int64_t want = line / tc_dtypes[loads[i]->dtype].size;
            int64_t amt = tile_rows(it->full_shape[a], want, false);
            if (amt < 2) return;
            *p = (tc_kopt){.n = 1, .axis = {a}, .amt = {amt}};
            int64_t cols = tile_rows(it->full_shape[last], line / tc_dtypes[loads[i]->dtype].size, false);
            bool far = (s < 0 ? -s : s) * (int64_t)tc_dtypes[loads[i]->dtype].size >= line; /* a line a step */
            bool whole = it->full_shape[a] % amt == 0 && it->full_shape[last] % cols == 0; /* no clamped square */
            if (far && whole && only_copies(k) && load_bytes(it, loads[i]) > l2_share(tg) && cols >= 2 &&
                cols < it->full_shape[last])
                *p = (tc_kopt){.n = 2, .axis = {a, last}, .amt = {amt, cols}};
            return;
        }
    }
}

static int cmp_i64(const void *x, const void *y) {
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a > b) - (a < b);
}

enum {
    STAY_SETS = 1024,  /* L1d sets strided_lines_stay counts in, at most */
    STAY_LINES = 1024, /* lines it counts, at most (half of a 128 KiB L1d) */
};

/* The lines that an elementwise kernel's loads striding along its
 * innermost axis touch in the loops inside axis a (the axis they read
 * contiguously, which a transposing plan upcasts) stay in the L1d until
 * the next index of a comes back to them: at most half its bytes, and as
 * many in any one set as half its ways. Lines a multiple of the set span
 * apart share a few sets: ResNet-18's 64 channels of 32 x 32 pixels, 4 KiB
 * apart, are 64 lines in one set of a 48 KiB 12-way L1d; MNIST's 32
 * channels of 24 x 24, 2,304 bytes apart, 4 lines in each of 16 sets. Each
 * load is taken to start at a set's first line; the L1d's geometry as the
 * target reports it (8 ways where it does not); a stride that is unknown
 * (or negative) inside a: no. Cost: the lines counted, at most half the
 * L1d's, sorted: O(L log L). */
static bool strided_lines_stay(const tc_sched_item *it, const tc_target *tg, const elem_walk *w, int a) {
    int64_t line = tc_opt_line_bytes(tg), ways = tg->cache[0].ways > 0 ? tg->cache[0].ways : 8;
    int64_t sets = l1d_bytes(tg) / (ways * line), cap = l1d_bytes(tg) / 2 / line, last = it->ndim - 1;
    if (sets < 1 || sets > STAY_SETS || cap > STAY_LINES) return false;
    int64_t lines[STAY_LINES], total = 0;
    int count[STAY_SETS] = {0};
    bool stays = true;
    for (int i = 0; i < w->n_loads && stays; i++) {
        const tc_st *st = w->loads[i]->st;
        int64_t s = tc_st_stride(st, (int)last), size = tc_dtypes[w->loads[i]->dtype].size, n = 1;
        if (s == 0 || s == 1 || s == -1) continue;
        for (int b = a + 1; b <= last && stays; b++) {
            int64_t sb = tc_st_stride(st, b);
            stays = sb >= 0 || it->full_shape[b] == 1;
            n *= sb ? it->full_shape[b] : 1;
        }
        if (!stays || total + n > cap) { /* past half the L1d: no need to count */
            stays = false;
            break;
        }
        for (int64_t e = 0; e < n; e++) { /* index e over the axes inside a, the last fastest */
            int64_t off = 0, rest = e;
            for (int b = (int)last; b > a; b--) {
                int64_t sb = tc_st_stride(st, b);
                if (!sb) continue;
                off += (rest % it->full_shape[b]) * sb * size;
                rest /= it->full_shape[b];
            }
            lines[total + e] = off >= 0 ? off / line : -((-off + line - 1) / line);
        }
        qsort(lines + total, (size_t)n, sizeof *lines, cmp_i64);
        for (int64_t e = 0; e < n; e++) {
            if (e > 0 && lines[total + e] == lines[total + e - 1]) continue;
            int64_t set = ((lines[total + e] % sets) + sets) % sets;
            stays &= ++count[set] <= ways / 2;
        }
        total += n;
    }
    return stays;
}

/* A transposing plan's copies repeat the whole store unrolled, its loads
 * included: within EPI_BUDGET weighted ops (a copy), or within BODY_OPS
 * (what a reduce body's copies may hold) where the strided loads' lines
 * would not stay in the L1d without it (strided_lines_stay); else none.
 * Also none past STORE_BUDGET element stores. Per kernel in a step
 * (TC_DEBUG=2, least of 2-3 processes, 1 thread, Zen 5): ResNet-18's
 * BatchNorm gradient into a channels-last copy (`E_16_1024_64`: 7 loads,
 * two of them 4 KiB apart per channel, 10 ops; 16 copies weigh 448) no
 * plan -> 16 copies, 3.9-4.2 -> 0.8-0.9 ms; GPT-2's q, k, v gradients
 * joined (`E_4_64_36_64`, 12 of them) 4.9-5.0 -> 3.0-3.4 ms; MNIST's relu
 * gradient into channels-last (`E_512_576_32`, lines that stay) ran 7.8 ->
 * 10.5 ms with the plan, so keeps none. Also none past SCALAR_COPIES
 * copies (a 128-byte line of bytes). Cost: a cost_walk, O(nodes). */
static int64_t epi_cost(const tc_sched_item *it) {
    kcost c, set;
    memset(&c, 0, sizeof c);
    cost_walk(&c, &set, it->ast, false);
    return c.epi;
}

static void bound_transpose(const tc_sched_item *it, const tc_target *tg, const kinfo *k, const elem_walk *w,
                            tc_kopt *p) {
    if (p->n != 1) return;
    int64_t work = p->amt[0] * epi_cost(it);
    bool pays = work <= EPI_BUDGET || (work <= BODY_OPS && !strided_lines_stay(it, tg, w, p->axis[0]));
    if (!pays || p->amt[0] * k->n_stores > STORE_BUDGET || (tg->has_vec && p->amt[0] > SCALAR_COPIES))
        *p = (tc_kopt){0};
}

void tc_opt_choose(const tc_sched_item *it, const tc_target *tg, tc_kopt *p) {
    *p = (tc_kopt){0};
    if (tg->has_local || tc_flag_get(TC_FLAG_NOOPT)) return;
    kinfo k;
    memset(&k, 0, sizeof k);
    if (!it->reduce_axes) {
        elem_walk w;
        w.n_seen = w.n_loads = 0;
        w.overflow = false;
        elem_collect(&w, &k, it->ast);
        if (w.overflow) return;
        plan_transpose(it, tg, &k, &w, p);
        bound_transpose(it, tg, &k, &w, p);
        return;
    }
    collect(&k, it->ast);
    if (k.overflow) return;
    choose_plan(it, tg, &k, p);
    bound_plan(it, &k, tg, p);
    if (!p->row_pack) p->mblock = plan_mblock(it, tg, p);
}

/* ---- search (TC_BEAM): the plans one step away from a plan ---- */

static bool plan_has(const tc_kopt *p, int a) {
    for (int i = 0; i < p->n; i++)
        if (p->axis[i] == a) return true;
    return false;
}

/* a plan lower.c can take: at most two kept axes (amounts clamped or not)
 * and one reduced axis last (an amount that divides it, or, on the
 * innermost reduced axis of an unblocked reduce, one with a scalar tail) */
static bool plan_valid(const tc_sched_item *it, const tc_kopt *p) {
    int kept = 0, red = 0;
    for (int i = 0; i < p->n; i++) {
        int a = p->axis[i];
        if (a < 0 || a >= it->ndim || p->amt[i] < 2 || p->amt[i] > it->full_shape[a]) return false;
        if ((it->reduce_axes >> a) & 1) { /* not dividing it: vectors and a tail, unblocked */
            bool inner = true; /* the innermost reduced axis (lower.c's tail loop replaces its loop) */
            for (int b = a + 1; b < it->ndim; b++) inner &= !((it->reduce_axes >> b) & 1) || it->full_shape[b] == 1;
            if (i != p->n - 1 || (it->full_shape[a] % p->amt[i] != 0 && (p->kblock || !inner)))
                return false;
            red++;
        } else {
            kept++;
        }
    }
    if (p->lanes > 1) { /* vectors: a power of two dividing the last entry's amount */
        if (p->n == 0 || p->lanes > 16 || (p->lanes & (p->lanes - 1)) || p->amt[p->n - 1] % p->lanes)
            return false;
    }
    if (p->kblock) { /* blocks that divide the blockable axis, at least two, whole steps of its split */
        int k = tc_opt_kblock_axis(it);
        if (k < 0 || p->n == 0 || p->kblock < 1 || it->full_shape[k] % p->kblock || p->kblock == it->full_shape[k])
            return false;
        if (p->n && p->axis[p->n - 1] == k && p->kblock % p->amt[p->n - 1]) return false;
    }
    if (p->epi_loop && kept == 0) return false; /* a loop over no copies */
    if (p->mblock && (!plain_tile(it, p) || p->mblock % p->amt[0] || p->mblock >= it->full_shape[p->axis[0]]))
        return false; /* whole steps of a plain tile's rows, fewer than all */
    if (p->pack) { /* a tile of rows and vector columns of the panel's operand */
        const tc_ast *pl = p->n == 2 ? tc_opt_pack_load(it, p->axis[1]) : NULL;
        if (kept != 2 || p->lanes < 2 || !pl || !pack_axes_ok(it, pl, p->axis[0], p->axis[1])) return false;
        if (tc_opt_panel_k(it, p->kblock) * p->amt[1] * 4 > PACK_MAX_BYTES) return false;
    }
    if (p->row_pack) { /* a packed plain tile over one reduced axis, its row panel within PACK_MAX_BYTES */
        if (!p->pack || !plain_tile(it, p) || reduce_inner(it) != 1 || !tc_opt_row_load(it, p->axis[0], p->axis[1]))
            return false;
        if (tc_opt_row_rows(it, p) * tc_opt_panel_k(it, p->kblock) * 4 > PACK_MAX_BYTES) return false;
    }
    return kept <= 2 && red <= 1 && plan_copies(p) <= MAX_COPIES;
}

/* whether plan p keeps the cost rule for costs c as bound_plan would leave
 * it: its body copies within BODY_BUDGET and BODY_COPIES, its stores looped
 * where their unrolled copies would pass EPI_BUDGET or STORE_BUDGET */
static bool plan_bounded(const tc_sched_item *it, const kinfo *k, const tc_kopt *p, const kcost *c) {
    if (p->n > 0 && (body_copies(p) * c->body > BODY_BUDGET || body_copies(p) > BODY_COPIES ||
                     body_size(it, k, p, c) > BODY_OPS))
        return false;
    int64_t kept = kept_copies(it, p), epi = c->epi + (p->kblock ? COST_LOAD + 1 : 0);
    return p->epi_loop || kept <= 1 || (kept * epi <= EPI_BUDGET && store_copies(it, k, p) <= STORE_BUDGET);
}

static void add_plan(const tc_sched_item *it, const kinfo *k, const kcost *c, tc_kopt *out, int *n,
                     int max, const tc_kopt *plan) {
    tc_kopt q = *plan, *p = &q; /* base's row blocks, whole steps of this plan's rows (or none) */
    if (p->mblock && p->n == 2) p->mblock = (p->mblock + p->amt[0] - 1) / p->amt[0] * p->amt[0];
    if (p->n != 2 || p->mblock >= it->full_shape[p->axis[0]]) p->mblock = 0;
    if (*n >= max || !plan_valid(it, p) || !plan_bounded(it, k, p, c)) return;
    for (int i = 0; i < *n; i++)
        if (!memcmp(&out[i], p, sizeof *p)) return;
    out[(*n)++] = *p;
}

int tc_opt_neighbors(const tc_sched_item *it, const tc_kopt *base, tc_kopt *out, int max) {
    static const int64_t amounts[] = {2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 32, 64};
    int n = 0;
    kinfo k;
    collect(&k, it->ast);
    if (k.overflow) return 0;
    kcost c, set; /* a search tries only plans the cost rule allows */
    memset(&c, 0, sizeof c);
    cost_walk(&c, &set, it->ast, false);
    for (int i = 0; i < base->n; i++) { /* another amount for an entry, or none */
        for (size_t m = 0; m < sizeof amounts / sizeof amounts[0]; m++) {
            tc_kopt p = *base;
            p.amt[i] = amounts[m];
            add_plan(it, &k, &c, out, &n, max, &p);
        }
        tc_kopt p = *base;
        memmove(&p.axis[i], &p.axis[i + 1], sizeof(int) * (size_t)(p.n - i - 1));
        memmove(&p.amt[i], &p.amt[i + 1], sizeof(int64_t) * (size_t)(p.n - i - 1));
        p.n--;
        add_plan(it, &k, &c, out, &n, max, &p);
    }
    if (base->n > 0) { /* a split with vectors of other widths, or scalars */
        for (int lanes = 0; lanes <= 16; lanes = lanes ? lanes * 2 : 4) {
            tc_kopt p = *base;
            p.lanes = lanes;
            add_plan(it, &k, &c, out, &n, max, &p);
        }
    }
    tc_kopt e = *base; /* the stores once per copy, or in loops over them */
    e.epi_loop = !e.epi_loop;
    add_plan(it, &k, &c, out, &n, max, &e);
    e = *base; /* the columns' operand from a panel, or not */
    e.pack = !e.pack;
    add_plan(it, &k, &c, out, &n, max, &e);
    e = *base; /* the rows' operand from a row panel too, or not */
    e.row_pack = !e.row_pack;
    add_plan(it, &k, &c, out, &n, max, &e);
    e = *base; /* the rows in one pass (row blocks are read from what the machine reports) */
    e.mblock = 0;
    add_plan(it, &k, &c, out, &n, max, &e);
    int ka = tc_opt_kblock_axis(it);
    for (int64_t b = 0; ka >= 0 && b <= it->full_shape[ka] / 2; b = b ? b * 2 : 16) { /* other blocks */
        tc_kopt p = *base;
        p.kblock = b;
        add_plan(it, &k, &c, out, &n, max, &p);
    }
    if (base->n < 3) { /* one more axis: kept ones before a split */
        for (int a = 0; a < it->ndim; a++) {
            if (it->full_shape[a] < 2 || plan_has(base, a)) continue;
            bool red = (it->reduce_axes >> a) & 1;
            for (size_t m = 0; m < sizeof amounts / sizeof amounts[0]; m++) {
                tc_kopt p = *base;
                int at = p.n;
                if (!red && p.n && ((it->reduce_axes >> p.axis[p.n - 1]) & 1)) at = p.n - 1;
                memmove(&p.axis[at + 1], &p.axis[at], sizeof(int) * (size_t)(p.n - at));
                memmove(&p.amt[at + 1], &p.amt[at], sizeof(int64_t) * (size_t)(p.n - at));
                p.axis[at] = a;
                p.amt[at] = amounts[m];
                p.n++;
                add_plan(it, &k, &c, out, &n, max, &p);
            }
        }
    }
    return n;
}

int tc_opt_format(const tc_kopt *p, char *buf, size_t size) {
    size_t len = 0;
    buf[0] = 0;
    for (int i = 0; i < p->n && len < size; i++)
        len += (size_t)snprintf(buf + len, size - len, "%s%d:%lld", i ? "," : "", p->axis[i],
                                (long long)p->amt[i]);
    if (p->lanes > 1 && len < size) len += (size_t)snprintf(buf + len, size - len, "/%d", p->lanes);
    if (p->kblock > 0 && len < size) len += (size_t)snprintf(buf + len, size - len, "/k%lld", (long long)p->kblock);
    if (p->epi_loop && len < size) len += (size_t)snprintf(buf + len, size - len, "/e");
    if (p->pack && len < size) len += (size_t)snprintf(buf + len, size - len, "/p");
    if (p->row_pack && len < size) len += (size_t)snprintf(buf + len, size - len, "/a");
    if (p->mblock > 0 && len < size) len += (size_t)snprintf(buf + len, size - len, "/m%lld", (long long)p->mblock);
    return len < size ? (int)len : -1;
}

bool tc_opt_parse(const tc_sched_item *it, const char *s, tc_kopt *p) {
    *p = (tc_kopt){0};
    while (*s && p->n < 3) {
        int a, used = 0;
        long long m;
        if (sscanf(s, "%d:%lld%n", &a, &m, &used) != 2) return false;
        p->axis[p->n] = a;
        p->amt[p->n++] = m;
        s += used;
        if (*s == ',') s++;
        int lanes = 0;
        if (*s == '/' && sscanf(s, "/%d%n", &lanes, &used) == 1 && lanes > 1) p->lanes = lanes, s += used;
        long long kb = 0;
        if (*s == '/' && sscanf(s, "/k%lld%n", &kb, &used) == 1 && kb > 0) p->kblock = kb, s += used;
        if (s[0] == '/' && s[1] == 'e') p->epi_loop = true, s += 2;
        if (s[0] == '/' && s[1] == 'p') p->pack = true, s += 2;
        if (s[0] == '/' && s[1] == 'a') p->row_pack = true, s += 2;
        long long mb = 0;
        if (*s == '/' && sscanf(s, "/m%lld%n", &mb, &used) == 1 && mb > 0) p->mblock = mb, s += used;
    }
    return !*s && (p->n == 0 || plan_valid(it, p));
}
