/* lower_rows.c - a row kernel (schedule.h, rows.c) -> UOps.
 *
 * The loops over the rows (the item's loop space: threads share the
 * outermost on a CPU; work-group ids and lanes on a GPU, one row a lane)
 * hold the parts in order. A part is lowered as a kernel of its own whose
 * row axes are already indexed: the loops over its other kept axes (upcast
 * by opt.c's plan for the part, its row axes shown to opt.c as size 1), then
 * its reduce stages and stores (lower.c, lower_store.c), then those loops
 * close. Row scratch arrays (LOAD/STORE with buf < 0) are arrays private to
 * the row being run (CPU: the kernel's own, per thread; GPU: per lane); a
 * load of one is never hoisted above the row loops (uop.c's scratch_floor),
 * where its index, which does not depend on the row, would otherwise put it.
 *
 * Cost: O(the parts' lowering), as for their kernels alone.
 */
#include "lower.h"

#include <string.h>

/* the row scratch arrays' dtype and elements, from their loads and stores */
static void scratch_of(const tc_ast *a, tc_dtype *dt, int64_t *n, int n_scratch, int mark) {
    if (a->mark == mark) return;
    ((tc_ast *)a)->mark = mark;
    if ((a->op == TC_OP_LOAD || a->op == TC_OP_STORE) && a->buf < 0 && -1 - a->buf < n_scratch) {
        int k = -1 - a->buf;
        dt[k] = a->dtype;
        if (a->index_size > n[k]) n[k] = a->index_size;
    }
    for (int i = 0; i < a->n_srcs; i++) scratch_of(a->srcs[i], dt, n, n_scratch, mark);
}

static int min_buf(const tc_ast *a, int mark) {
    if (a->mark == mark) return 0;
    ((tc_ast *)a)->mark = mark;
    int m = (a->op == TC_OP_LOAD || a->op == TC_OP_STORE) && a->buf < 0 ? a->buf : 0;
    for (int i = 0; i < a->n_srcs; i++) {
        int s = min_buf(a->srcs[i], mark);
        m = s < m ? s : m;
    }
    return m;
}

/* c->globals[-1 - k] becomes row scratch array k */
TC_MUST_USE static tc_status define_scratch(lower_ctx *c) {
    const tc_sched_item *it = c->it;
    int n_scratch = -min_buf(it->ast, tc_lw_next_epoch());
    if (!n_scratch) return TC_OK;
    tc_uop **g =
        tc_arena_alloc(&c->ub.k->arena, sizeof(tc_uop *) * (size_t)(n_scratch + it->n_bufs + 1));
    tc_dtype *dt = tc_arena_alloc(&c->ub.k->arena, sizeof(tc_dtype) * (size_t)n_scratch);
    int64_t *n = tc_arena_alloc(&c->ub.k->arena, sizeof(int64_t) * (size_t)n_scratch);
    if (!g || !dt || !n) return TC_ERR_MEMORY;
    scratch_of(it->ast, dt, n, n_scratch, tc_lw_next_epoch());
    memcpy(g + n_scratch, c->globals, sizeof(tc_uop *) * (size_t)(it->n_bufs + 1));
    for (int k = 0; k < n_scratch; k++) {
        if (n[k] < 1) return TC_INTERNAL("row scratch array %d of %s has no size", k, it->name);
        g[n_scratch - 1 - k] = tc_ub_define_scratch(&c->ub, dt[k], n[k]);
    }
    c->globals = g + n_scratch;
    return c->ub.failed ? TC_ERR_MEMORY : TC_OK;
}

/* the loops over the rows (CPU; a GPU's come from tc_lw_lower_grid) */
static void open_rows(lower_ctx *c, tc_kernel_uops *k) {
    const tc_sched_item *it = c->it;
    for (int a = 0; a < it->ndim; a++)
        c->idx[a] =
            it->full_shape[a] == 1 ? ic(c, 0) : tc_lw_outer_range(c, k, a, it->full_shape[a]);
}

/* one part: a kernel over its own loop space whose rows are indexed */
static void lower_part(lower_ctx *c, tc_kernel_uops *k, const tc_sched_item *rows, tc_ast *part) {
    tc_sched_item pi = *rows;
    const tc_view *v = &part->st->views[0];
    pi.has_parts = false;
    pi.ast = part;
    pi.ndim = v->ndim;
    memcpy(pi.full_shape, v->shape, sizeof(int64_t) * (size_t)v->ndim);
    pi.reduce_axes = part->axes;
    tc_kopt p = {0};
    if (!c->tg->has_local) { /* opt.c's plan for the part alone, the rows not its to tile */
        tc_sched_item shown = pi;
        for (int a = 0; a < rows->ndim; a++) shown.full_shape[a] = 1;
        tc_opt_choose(&shown, c->tg, &p);
        p.kblock = 0, p.mblock = 0; /* a part's loops block neither */
    }
    c->it = &pi;
    tc_ub_forget_written_loads(&c->ub); /* an earlier part's reload of what it stored */
    memset(c->up_base, 0, sizeof c->up_base);
    c->in_vj = false;
    c->kb = NULL;
    c->rep = 0;
    tc_lw_take_plan(c, p);
    c->kaxis = -1;
    int depth = c->ub.depth, order[TC_MAX_DIMS];
    for (int a = rows->ndim; a < pi.ndim; a++) order[a - rows->ndim] = a;
    tc_lw_kept_loops(c, k, order, pi.ndim - rows->ndim, part, false);
    while (c->ub.depth > depth) tc_ub_end_range(&c->ub);
    for (int a = rows->ndim; a < pi.ndim; a++) c->idx[a] = NULL;
    c->epoch = tc_lw_next_epoch();
    c->it = rows;
}

TC_MUST_USE tc_status tc_lw_rows_kernel(lower_ctx *c, tc_kernel_uops *k) {
    const tc_sched_item *it = c->it;
    tc_status st = define_scratch(c);
    if (st != TC_OK) return st;
    if (c->tg->has_local) st = tc_lw_lower_grid(c, k);
    else open_rows(c, k);
    if (st != TC_OK) return st;
    c->ub.scratch_floor = c->ub.depth;
    k->n_parts = it->ast->n_srcs;
    for (int i = 0; i < it->ast->n_srcs && !c->ub.failed; i++) lower_part(c, k, it, it->ast->srcs[i]);
    while (c->ub.depth > 0) tc_ub_end_range(&c->ub);
    return tc_ub_linearize(&c->ub);
}
