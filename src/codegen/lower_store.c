/* lower_store.c - the stores of a kernel (lower.c opens the loops and lowers
 * the reduces first): per space (the reduced one, then the full one inside a
 * store stage), every value first, then every store, so a kernel that reads
 * a buffer it also writes (an assign) reads the old values. An upcast
 * kernel (opt.c's plan) stores each of its copies; a register tile's
 * reduced-space store of f(reduce) goes out in two passes (the sum, then f
 * of it read back).
 *
 * Cost: O(copies x AST nodes of the stores) UOps.
 */
#include "lower.h"

bool tc_lw_store_is_full(const lower_ctx *c, const tc_ast *st) {
    const tc_view *v = &st->st->views[st->st->n_views - 1];
    for (int a = 0; a < v->ndim; a++)
        if (((c->it->reduce_axes >> a) & 1) && v->shape[a] > 1) return true;
    return false;
}

/* the reduces under a (at most 2 counted), *loads_out: some load reads slot buf */
static int count_reduces(const tc_ast *a, tc_ast **red, int buf, bool *loads_out) {
    if (tc_op_is_reduce(a->op)) {
        *red = (tc_ast *)a;
        return 1;
    }
    if (a->op == TC_OP_LOAD) *loads_out |= a->buf == buf;
    int n = 0;
    for (int i = 0; i < a->n_srcs && n < 2; i++) n += count_reduces(a->srcs[i], red, buf, loads_out);
    return n;
}

/* A register tile's reduced-space store of f(reduce) goes out in two passes:
 * the reduce's value is stored first, then read back and finished by f. gcc
 * packs a tile's accumulators into vectors starting from its consecutive
 * stores; a comparison in f (a relu mask) stops that, and the whole reduce
 * loop stays scalar (the dx conv of beautiful_mnist with relu' fused: 4x
 * slower). Returns the reduce, or NULL where the plain store is kept (no
 * tile, no single reduce, another dtype, an assign, f reading the output). */
static tc_ast *epilogue_reduce(const lower_ctx *c, const tc_ast *st) {
    if (c->n_reps < 2 || c->tg->has_local || c->is_grouped || tc_op_is_reduce(st->srcs[0]->op))
        return NULL;
    for (int i = 0; i < c->it->n_outs; i++)
        if (c->it->bufs[i]->op == TC_OP_ASSIGN) return NULL;
    tc_ast *red = NULL;
    bool reads_out = false;
    if (count_reduces(st->srcs[0], &red, st->buf, &reads_out) != 1 || reads_out) return NULL;
    return red->dtype == st->dtype ? red : NULL;
}

/* a blocked reduce (c->kaxis): v plus what the earlier blocks stored at
 * st's index (nothing in the first block) */
static tc_uop *block_sum(lower_ctx *c, const tc_ast *st, tc_uop *v) {
    tc_uop *idx, *valid;
    if (tc_lw_st_index(c, st->st, &idx, &valid) != TC_OK) {
        c->ub.failed = true;
        return NULL;
    }
    c->ub.index_mode = true;
    tc_uop *later = ix(c, TC_OP_CMPLT, ic(c, 0), c->kb);
    c->ub.index_mode = false;
    tc_uop *earlier = tc_ub_load(&c->ub, c->globals[st->buf], idx, later);
    return tc_ub_alu(&c->ub, TC_OP_ADD, v->dtype, 2, v, earlier, NULL);
}

/* the stores of one space: every value first, then every store, so a kernel
 * that reads a buffer it also writes (an assign) reads the old values */
void tc_lw_lower_stores(lower_ctx *c, tc_ast *sink, bool full) {
    int opened = 0, n = 0, step = (int)c->split; /* the split digit is 0 outside reduce stages */
    for (int i = 0; i < sink->n_srcs; i++) n += tc_lw_store_is_full(c, sink->srcs[i]) == full;
    if (!n) return;
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
        epi[i] = full || tc_lw_store_is_full(c, sink->srcs[i]) ? NULL : epilogue_reduce(c, sink->srcs[i]);
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
    for (int r = 0; r < c->n_reps; r += step) {
        tc_lw_set_copy(c, r);
        tc_uop *gate = tc_lw_copy_gate(c, r); /* a clamped copy past the end stores nothing */
        bool gated = gate && tc_ub_if(&c->ub, gate);
        for (int i = 0; i < sink->n_srcs && !c->ub.failed; i++) {
            tc_ast *st = sink->srcs[i];
            tc_uop *idx, *valid, *v = vals[r * sink->n_srcs + i];
            if (tc_lw_store_is_full(c, st) != full) continue;
            if (v) v = tc_ub_cast(&c->ub, v, st->dtype, false);
            if (v) v = tc_ub_broadcast(&c->ub, v, c->gvl); /* GPU vectors: all of a lane's */
            if (v && tc_lw_st_index(c, st->st, &idx, &valid) == TC_OK)
                tc_ub_store(&c->ub, c->globals[st->buf], idx, v);
            else
                c->ub.failed = true;
        }
        if (gated) tc_ub_end_if(&c->ub);
    }
    for (int r = 0; r < c->n_reps && any_epi; r += step) { /* the epilogues' second pass */
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
            /* the reduce's value is what this copy stored (created after that store) */
            tc_lw_memo_put(c, epi[i], r, tc_ub_load(&c->ub, c->globals[st->buf], idx, NULL), c->epoch);
            tc_uop *v = tc_lw_lower(c, st->srcs[0]);
            if (v) tc_ub_store(&c->ub, c->globals[st->buf], idx, tc_ub_cast(&c->ub, v, st->dtype, false));
            else c->ub.failed = true;
        }
        if (gated) tc_ub_end_if(&c->ub);
    }
    tc_lw_set_copy(c, 0);
    if (full) tc_lw_close_stage(c, opened);
    if (c->is_grouped && !full) {
        while (opened--) tc_ub_end_if(&c->ub);
        c->gate = 0;
        c->epoch = tc_lw_next_epoch();
    }
}
