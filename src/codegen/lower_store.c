/* lower_store.c - the stores of a kernel (lower.c opens the loops and lowers
 * the reduces first): per space (the reduced one, then the full one inside a
 * store stage), every value first, then every store.
 *
 * An upcast kernel (opt.c's plan) stores each of its copies; a register
 * tile's reduced-space store of f(reduce) goes out in two passes (the sum,
 * then f of it read back). A plan with epi_loop lowers the stores once
 * instead, in loops over the tile's kept copies: each copy's value of every
 * reduce the stores read goes to a scratch array, then a loop nest over the
 * copies (the column axis innermost, a plain loop the C compiler
 * vectorizes) reads them back and finishes every output. The source then
 * holds f once, not once per copy: gelu's tanh or an Adam update over a
 * 96-output tile was 96 copies of it (opt.c states when). A blocked
 * reduce (the plan's kblock) stores its partial sums in every block, the
 * earlier blocks' read back and added; an epilogue f of it runs once, after
 * the last block, on their total read back from the output.
 *
 * Cost: O(copies x AST nodes of the stores) UOps unrolled, O(copies +
 * AST nodes) with epi_loop.
 */
#include "lower.h"

#include <string.h>

bool tc_lw_store_is_full(const lower_ctx *c, const tc_ast *st) {
    const tc_view *v = &st->st->views[st->st->n_views - 1];
    for (int a = 0; a < v->ndim; a++)
        if (((c->it->reduce_axes >> a) & 1) && v->shape[a] > 1) return true;
    return false;
}

/* the distinct reduces under a (at most 2 counted; *red: the first), and
 * *loads_out: some load reads slot buf; each node walked once (marked
 * `mark`: a DAG sharing its reduce has exponentially many paths) */
static int count_reduces(tc_ast *a, int mark, tc_ast **red, int buf, bool *loads_out) {
    if (a->mark == mark) return 0;
    a->mark = mark;
    if (tc_op_is_reduce(a->op)) {
        if (!*red) *red = a;
        return 1;
    }
    if (a->op == TC_OP_LOAD) *loads_out |= a->buf == buf;
    int n = 0;
    for (int i = 0; i < a->n_srcs && n < 2; i++) n += count_reduces(a->srcs[i], mark, red, buf, loads_out);
    return n;
}

/* A register tile's reduced-space store of f(reduce) goes out in two passes:
 * the reduce's value is stored first, then read back and finished by f. gcc
 * packs a tile's accumulators into vectors starting from its consecutive
 * stores; a comparison in f (a relu mask) stops that, and the whole reduce
 * loop stays scalar (the dx conv of beautiful_mnist with relu' fused: 4x
 * slower). A blocked reduce (c->kaxis) stores its partial sums in every
 * block and f of their total after the last, tile or not. Returns the
 * reduce, or NULL where the plain store is kept (no tile, no single reduce,
 * another dtype, an assign, f reading the output). */
static tc_ast *epilogue_reduce(const lower_ctx *c, const tc_ast *st) {
    if ((c->n_reps < 2 && c->kaxis < 0) || c->tg->has_local || c->is_grouped || tc_op_is_reduce(st->srcs[0]->op))
        return NULL;
    for (int i = 0; i < c->it->n_outs; i++)
        if (c->it->bufs[i]->op == TC_OP_ASSIGN) return NULL;
    tc_ast *red = NULL;
    bool reads_out = false;
    if (count_reduces(st->srcs[0], tc_lw_next_epoch(), &red, st->buf, &reads_out) != 1 || reads_out) return NULL;
    return red->dtype == st->dtype ? red : NULL;
}

/* epilogue_reduce of reduced-space store st; a blocked reduce's store must
 * be the bare reduce or such an epilogue (opt.c's tc_opt_kblock_axis
 * allows no other): anything else fails the kernel */
static tc_ast *store_epilogue(lower_ctx *c, const tc_ast *st) {
    tc_ast *epi = epilogue_reduce(c, st);
    c->ub.failed |= c->kaxis >= 0 && !epi && !tc_op_is_reduce(st->srcs[0]->op);
    return epi;
}

/* store st's f of its reduce epi at copy rep, the reduce's value read back
 * from st's place idx (what the copy stored there before) */
static tc_uop *epilogue_of_stored(lower_ctx *c, const tc_ast *st, tc_ast *epi, int rep, tc_uop *idx) {
    tc_lw_memo_put(c, epi, rep, tc_ub_load(&c->ub, c->globals[st->buf], idx, NULL), c->epoch);
    return tc_lw_lower(c, st->srcs[0]);
}

/* a blocked reduce (c->kaxis): v plus what the earlier blocks stored at
 * st's index (nothing in the first block). The element is read in every
 * block (the store writes it, so it is there) and the first block's value
 * dropped by a select: a load gated by the block index renders as a float
 * ?:, which kept gcc from vectorizing the loop that stores the tile, and
 * a scalar store loop after every block cost a few-row matmul a fifth of
 * its time ((64,768) @ (768,50304), 1 thread, Zen 5: 132 -> 162 GFLOPS,
 * numpy 150; (128,50304) @ (50304,768) 153 -> 169; 2048^3 214 both) */
static tc_uop *block_sum(lower_ctx *c, const tc_ast *st, tc_uop *v) {
    tc_uop *idx, *valid;
    if (tc_lw_st_index(c, st->st, &idx, &valid) != TC_OK) {
        c->ub.failed = true;
        return NULL;
    }
    c->ub.index_mode = true;
    tc_uop *later = ix(c, TC_OP_CMPLT, ic(c, 0), c->kb);
    c->ub.index_mode = false;
    tc_uop *earlier = tc_ub_alu(&c->ub, TC_OP_WHERE, v->dtype, 3, later,
                                tc_ub_load_here(&c->ub, c->globals[st->buf], idx),
                                tc_ub_const(&c->ub, v->dtype, 0, 0));
    return tc_ub_alu(&c->ub, TC_OP_ADD, v->dtype, 2, v, earlier, NULL);
}

/* ---- the stores in loops over the tile (epi_loop) ---- */

enum { TILE_REDS = 8 }; /* reduces whose values a looped epilogue reads, at most */

/* adds the reduces under a (not under another reduce) to reds[*n]; false
 * when there are more than TILE_REDS. Nodes are marked `mark` once seen. */
static bool tile_reduces(tc_ast *a, int mark, tc_ast **reds, int *n) {
    if (a->op == TC_OP_LOAD || a->op == TC_OP_CONST || a->mark == mark) return true;
    a->mark = mark;
    if (tc_op_is_reduce(a->op)) {
        if (*n == TILE_REDS) return false;
        reds[(*n)++] = a;
        return true;
    }
    for (int i = 0; i < a->n_srcs; i++)
        if (!tile_reduces(a->srcs[i], mark, reds, n)) return false;
    return true;
}

/* every copy's value of reduce red (lowered already) to scratch array tmp,
 * in copy order; the lanes of a tile column's vector accumulator (copies
 * r, r+1, ... holding lanes 0, 1, ... of one vector) in one vector store */
static void store_tile(lower_ctx *c, tc_ast *red, tc_uop *tmp) {
    int step = (int)c->split;
    for (int r = 0; r < c->n_reps; r += step) {
        tc_lw_set_copy(c, r);
        tc_uop *v = tc_lw_lower(c, red);
        int lanes = v && v->op == TC_UOP_GEP && v->arg == 0 ? v->srcs[0]->vcount : 1;
        bool whole = lanes > 1 && r / step % lanes == 0 && r + step * lanes <= c->n_reps;
        for (int l = 1; l < lanes && whole; l++) {
            tc_lw_set_copy(c, r + step * l);
            tc_uop *w = tc_lw_lower(c, red);
            whole = w && w->op == TC_UOP_GEP && w->arg == l && w->srcs[0] == v->srcs[0];
        }
        if (v) tc_ub_store(&c->ub, tmp, ic(c, r / step), whole ? v->srcs[0] : v);
        else c->ub.failed = true;
        if (whole) r += step * (lanes - 1);
    }
}

/* the kept plan axis whose loop goes innermost in a tile's store loops:
 * the last (the columns), unless the first store `st` moves along it and
 * is contiguous along another (a @ b stored transposed: its columns a
 * row of the output apart, 4 KiB at 1024 columns, every store a line of
 * its own in one set of the L1d; a.T @ b.T of 1024, 1 thread, Zen 5: 114
 * -> 214 GFLOPS with the rows innermost) */
static int inner_tile_axis(const lower_ctx *c, const tc_st *st) {
    int inner = -1;
    for (int i = 0; i < c->n_up; i++)
        if (!((c->it->reduce_axes >> c->up_axis[i]) & 1)) inner = i;
    if (inner < 0 || !st || tc_st_stride(st, c->up_axis[inner]) == 1) return inner;
    for (int i = 0; i < c->n_up; i++)
        if (!((c->it->reduce_axes >> c->up_axis[i]) & 1) && tc_st_stride(st, c->up_axis[i]) == 1) return i;
    return inner;
}

/* opens a loop over the digits of each kept plan axis (in plan order, the
 * loop of plan axis `inner` innermost), its index base + digit, and an IF
 * that skips a clamped axis' digits past its end; *t: the copy's place in
 * the scratch arrays (plan order). Returns the loops and blocks opened. */
static int open_tile_loops(lower_ctx *c, int inner, tc_uop **t) {
    int opened = 0;
    tc_uop *d[3] = {NULL, NULL, NULL};
    for (int k = 0; k <= c->n_up; k++) {
        int i = k == c->n_up ? inner : k, a = i >= 0 ? c->up_axis[i] : 0;
        if (i < 0 || (k < c->n_up && i == inner) || (c->it->reduce_axes >> a) & 1) continue;
        d[i] = tc_ub_range(&c->ub, TC_MAX_DIMS + 1 + i, c->idt, c->up_amt[i]);
        opened++;
        c->ub.index_mode = true;
        c->idx[a] = ix(c, TC_OP_ADD, c->up_base[i], d[i]);
        tc_uop *in = NULL;
        if (c->up_clamp[i]) in = ix(c, TC_OP_CMPLT, c->idx[a], ic(c, c->it->full_shape[a]));
        c->ub.index_mode = false;
        if (in && tc_ub_if(&c->ub, in)) opened++;
    }
    *t = ic(c, 0);
    c->ub.index_mode = true;
    for (int i = 0; i < c->n_up; i++)
        if (d[i]) *t = ix(c, TC_OP_ADD, ix(c, TC_OP_MUL, *t, ic(c, c->up_amt[i])), d[i]);
    c->ub.index_mode = false;
    return opened;
}

/* a blocked reduce's last block (an IF opened on it; false: none opened) */
static bool if_last_block(lower_ctx *c) {
    int64_t blocks = c->it->full_shape[c->kaxis] / c->kblock;
    c->ub.index_mode = true;
    tc_uop *last = ix(c, TC_OP_CMPLT, ic(c, blocks - 2), c->kb);
    c->ub.index_mode = false;
    return tc_ub_if(&c->ub, last);
}

/* what one looped pass stores: every value (f of the reduces, plus the
 * earlier blocks' sums where the value is the blocked reduce itself), a
 * blocked epilogue's reduce (plus the earlier blocks'), or that epilogue
 * of the reduce's total read back from the output */
typedef enum { PASS_VALUES, PASS_SUMS, PASS_EPILOGUE } store_pass;

/* one pass of the looped stores over the tile's copies: the reduces' values
 * from the scratch arrays tmp (PASS_EPILOGUE: epi's from the output) */
static void looped_pass(lower_ctx *c, tc_ast *sink, bool full, tc_ast **reds, tc_uop **tmp, int n_reds,
                        tc_ast *epi, store_pass pass) {
    tc_ast **srcs = sink->srcs;
    tc_uop *t;
    int n = sink->n_srcs;
    const tc_st *first = NULL;
    for (int i = 0; i < n && !first; i++)
        if (tc_lw_store_is_full(c, srcs[i]) == full) first = srcs[i]->st;
    int opened = open_tile_loops(c, inner_tile_axis(c, first), &t), stage = full ? tc_lw_open_stage(c, false) : 0;
    c->rep = c->n_reps;
    c->epoch = tc_lw_next_epoch();
    for (int k = 0; k < n_reds && pass != PASS_EPILOGUE; k++)
        tc_lw_memo_put(c, reds[k], c->rep, tc_ub_load(&c->ub, tmp[k], t, NULL), c->epoch);
    tc_uop **vals = tc_arena_alloc(&c->ub.k->arena, sizeof(tc_uop *) * (size_t)n);
    c->ub.failed |= !vals;
    for (int i = 0; i < n && vals; i++) { /* every value first (an assign reads the old one) */
        tc_uop *idx, *valid;
        vals[i] = NULL;
        if (tc_lw_store_is_full(c, srcs[i]) != full) continue;
        if (pass == PASS_EPILOGUE) { /* the reduce's value: the total the sums pass stored */
            if (tc_lw_st_index(c, srcs[i]->st, &idx, &valid) != TC_OK) {
                c->ub.failed = true;
                break;
            }
            vals[i] = epilogue_of_stored(c, srcs[i], epi, c->rep, idx);
            continue;
        }
        vals[i] = tc_lw_lower(c, pass == PASS_SUMS ? epi : srcs[i]->srcs[0]);
        if (vals[i] && c->kaxis >= 0 && !full) vals[i] = block_sum(c, srcs[i], vals[i]);
    }
    for (int i = 0; i < n && !c->ub.failed; i++) {
        tc_uop *idx, *valid;
        if (tc_lw_store_is_full(c, srcs[i]) != full) continue;
        if (vals[i] && tc_lw_st_index(c, srcs[i]->st, &idx, &valid) == TC_OK)
            tc_ub_store(&c->ub, c->globals[srcs[i]->buf], idx,
                        tc_ub_cast(&c->ub, vals[i], srcs[i]->dtype, false));
        else
            c->ub.failed = true;
    }
    if (full) tc_lw_close_stage(c, stage);
    while (opened--) tc_ub_end_range(&c->ub);
    c->epoch = tc_lw_next_epoch();
}

/* the stores of one space once, in loops over the kept copies of the tile:
 * each copy's reduce values go to scratch arrays, the loops read them back
 * (the loops' values are a copy of their own, rep n_reps). A blocked
 * reduce's epilogue (one store of f(reduce): opt.c's tc_opt_kblock_axis)
 * takes two passes: the sums in every block, f of them after the last.
 * false (nothing emitted) when the stores read more than TILE_REDS
 * reduces. */
static bool lower_stores_looped(lower_ctx *c, tc_ast *sink, bool full) {
    tc_ast *reds[TILE_REDS], **srcs = sink->srcs;
    tc_uop *tmp[TILE_REDS];
    int n_reds = 0, mark = tc_lw_next_epoch(), n = sink->n_srcs;
    for (int i = 0; i < n; i++) {
        bool mine = tc_lw_store_is_full(c, srcs[i]) == full;
        if (mine && !tile_reduces(srcs[i]->srcs[0], mark, reds, &n_reds)) return false;
    }
    for (int k = 0; k < n_reds; k++) {
        tmp[k] = tc_ub_define_scratch(&c->ub, reds[k]->dtype, c->n_reps / c->split);
        if (tmp[k]) store_tile(c, reds[k], tmp[k]);
    }
    tc_ast *epi = c->kaxis >= 0 && !full && n == 1 ? store_epilogue(c, srcs[0]) : NULL;
    looped_pass(c, sink, full, reds, tmp, n_reds, epi, epi ? PASS_SUMS : PASS_VALUES);
    if (epi) {
        bool gated = if_last_block(c);
        looped_pass(c, sink, full, reds, tmp, n_reds, epi, PASS_EPILOGUE);
        if (gated) tc_ub_end_if(&c->ub);
        c->epoch = tc_lw_next_epoch();
    }
    tc_lw_set_copy(c, 0);
    return true;
}

/* the lanes of the vector whose lane 0 is copy r's value of store i (vals
 * holds n stores a copy), where copies r, r + split, ... hold its lanes in
 * order and the store is contiguous along the plan's last axis (kept, not
 * clamped): the vector is stored whole at copy r's index. 1: lane by lane. */
static int whole_vector(const lower_ctx *c, const tc_ast *st, tc_uop **vals, int n, int r, int i) {
    int step = (int)c->split, last = c->n_up - 1;
    tc_uop *v = vals[r * n + i];
    if (!v || v->op != TC_UOP_GEP || v->arg != 0 || v->dtype != st->dtype || c->gvl > 1 || last < 0)
        return 1;
    int a = c->up_axis[last], lanes = v->srcs[0]->vcount;
    if ((c->it->reduce_axes >> a) & 1 || c->up_clamp[last] || tc_st_stride(st->st, a) != 1) return 1;
    if (lanes < 2 || r / step % lanes != 0 || r + step * lanes > c->n_reps) return 1;
    for (int l = 1; l < lanes; l++) {
        tc_uop *w = vals[(r + step * l) * n + i];
        if (!w || w->op != TC_UOP_GEP || w->arg != l || w->srcs[0] != v->srcs[0]) return 1;
    }
    return lanes;
}

/* the stores of one space: every value first, then every store, so a kernel
 * that reads a buffer it also writes (an assign) reads the old values */
void tc_lw_lower_stores(lower_ctx *c, tc_ast *sink, bool full) {
    int opened = 0, n = 0, step = (int)c->split; /* the split digit is 0 outside reduce stages */
    for (int i = 0; i < sink->n_srcs; i++) n += tc_lw_store_is_full(c, sink->srcs[i]) == full;
    if (!n) return;
    if (c->epi_loop && c->n_reps / c->split > 1 && lower_stores_looped(c, sink, full)) return;
    tc_uop **vals = tc_arena_alloc(&c->ub.k->arena, sizeof(tc_uop *) * (size_t)(sink->n_srcs * c->n_reps));
    if (!vals) {
        c->ub.failed = true;
        return;
    }
    if (full) opened = tc_lw_open_stage(c, false);
    if (c->is_grouped && !full) { /* the reduced-space stores run on lane 0 */
        opened = tc_ub_if(&c->ub, ix(c, TC_OP_CMPLT, c->lane, ic(c, 1)));
        c->gate = ++c->n_gates;
        c->epoch = tc_lw_next_epoch();
    }
    tc_ast **epi = tc_arena_alloc(&c->ub.k->arena, sizeof(tc_ast *) * (size_t)sink->n_srcs);
    if (!epi) {
        c->ub.failed = true;
        return;
    }
    bool any_epi = false;
    for (int i = 0; i < sink->n_srcs; i++) {
        epi[i] = full || tc_lw_store_is_full(c, sink->srcs[i]) ? NULL : store_epilogue(c, sink->srcs[i]);
        any_epi |= epi[i] != NULL;
    }
    for (int r = 0; r < c->n_reps; r += step) {
        tc_lw_set_copy(c, r);
        for (int i = 0; i < sink->n_srcs; i++) {
            tc_ast *st = sink->srcs[i];
            vals[r * sink->n_srcs + i] =
                tc_lw_store_is_full(c, st) != full ? NULL : tc_lw_lower(c, epi[i] ? epi[i] : st->srcs[0]);
            if (c->kaxis >= 0 && !full && vals[r * sink->n_srcs + i]) /* plus the earlier blocks' sum */
                vals[r * sink->n_srcs + i] = block_sum(c, st, vals[r * sink->n_srcs + i]);
        }
    }
    bool *in_vec = tc_arena_alloc(&c->ub.k->arena, sizeof(bool) * (size_t)(sink->n_srcs * c->n_reps));
    if (!in_vec) {
        c->ub.failed = true;
        return;
    }
    memset(in_vec, 0, sizeof(bool) * (size_t)(sink->n_srcs * c->n_reps));
    for (int r = 0; r < c->n_reps; r += step) {
        tc_lw_set_copy(c, r);
        tc_uop *gate = tc_lw_copy_gate(c, r); /* a clamped copy past the end stores nothing */
        bool gated = gate && tc_ub_if(&c->ub, gate);
        for (int i = 0; i < sink->n_srcs && !c->ub.failed; i++) {
            tc_ast *st = sink->srcs[i];
            tc_uop *idx, *valid, *v = vals[r * sink->n_srcs + i];
            if (tc_lw_store_is_full(c, st) != full || in_vec[r * sink->n_srcs + i]) continue;
            int lanes = c->tg->has_vec ? whole_vector(c, st, vals, sink->n_srcs, r, i) : 1;
            for (int l = 1; l < lanes; l++) in_vec[(r + step * l) * sink->n_srcs + i] = true;
            if (lanes > 1) v = v->srcs[0];
            if (v) v = tc_ub_cast(&c->ub, v, st->dtype, false);
            if (v) v = tc_ub_broadcast(&c->ub, v, c->gvl); /* GPU vectors: all of a lane's */
            if (v && tc_lw_st_index(c, st->st, &idx, &valid) == TC_OK)
                tc_ub_store(&c->ub, c->globals[st->buf], idx, v);
            else
                c->ub.failed = true;
        }
        if (gated) tc_ub_end_if(&c->ub);
    }
    /* the epilogues' second pass (a blocked reduce's: after its last block) */
    bool last_gated = any_epi && c->kaxis >= 0 && if_last_block(c);
    for (int r = 0; r < c->n_reps && any_epi; r += step) {
        tc_lw_set_copy(c, r);
        tc_uop *gate = tc_lw_copy_gate(c, r);
        bool gated = gate && tc_ub_if(&c->ub, gate);
        for (int i = 0; i < sink->n_srcs && !c->ub.failed; i++) {
            tc_ast *st = sink->srcs[i];
            tc_uop *idx, *valid;
            if (!epi[i]) continue;
            if (tc_lw_st_index(c, st->st, &idx, &valid) != TC_OK) {
                c->ub.failed = true;
                break;
            }
            /* the reduce's value is what this copy stored (loaded after that store) */
            tc_uop *v = epilogue_of_stored(c, st, epi[i], r, idx);
            if (v) tc_ub_store(&c->ub, c->globals[st->buf], idx, tc_ub_cast(&c->ub, v, st->dtype, false));
            else c->ub.failed = true;
        }
        if (gated) tc_ub_end_if(&c->ub);
    }
    if (last_gated) {
        tc_ub_end_if(&c->ub);
        c->epoch = tc_lw_next_epoch();
    }
    tc_lw_set_copy(c, 0);
    if (full) tc_lw_close_stage(c, opened);
    if (c->is_grouped && !full) {
        while (opened--) tc_ub_end_if(&c->ub);
        c->gate = 0;
        c->epoch = tc_lw_next_epoch();
    }
}
