/* lower_split.c - loops split at the bounds of the masks their loads read
 * through.
 *
 * A load through a masked view (a pad: zeros outside [begin, end) along an
 * axis) is gated, valid ? x[i] : 0, in every step of its loops, and a C
 * compiler keeps such a loop scalar: a conv's padded copy of its input
 * (ResNet-18's `R2_16_64`, the 64-channel BatchNorm + ReLU stored padded by
 * one) ran a test and a select per element. Here the loop over a masked
 * axis opens once per segment between the masks' bounds, [0, b), [b, e),
 * [e, n), each over a range known when lowering (tc_ub_range_span), so each
 * test of the index against a bound folds (uop.c): inside [b, e) the load
 * is a plain one, outside it the value is 0, and the C compiler vectorizes
 * the inner loop. The body is lowered once per segment (the product of the
 * split axes' segments), so only where that stays small: kernels and row
 * parts without a reduce, masks on their loads' last view only (an earlier
 * view's mask tests a re-split index, which does not fold), at most
 * SPLIT_AXES axes, the innermost masked ones that are not upcast, and
 * SPLIT_SEGS bodies in all. A kernel's outermost loop, the one threads
 * share, is not split.
 *
 * Cost: O(AST nodes x axes) to find the bounds; the body's lowering once
 * per segment.
 */
#include "lower.h"

#include <string.h>

enum {
    SPLIT_AXES = 2, /* loops split, at most */
    SPLIT_CUTS = 4, /* bounds on one axis, at most (a concat of five: conv_by_rows) */
    SPLIT_SEGS = 9, /* bodies lowered, at most */
};

typedef struct {
    int n;                                /* axes split */
    int axis[SPLIT_AXES];                 /* loop-space axis */
    int n_cuts[SPLIT_AXES];               /* its bounds ... */
    int64_t cut[SPLIT_AXES][SPLIT_CUTS];  /* ... ascending, inside (0, its size) */
} split_plan;

/* puts x into cuts (ascending, distinct); false when that makes too many */
static bool add_cut(int64_t *cuts, int *n, int64_t x) {
    int i = 0;
    while (i < *n && cuts[i] < x) i++;
    if (i < *n && cuts[i] == x) return true;
    if (*n == SPLIT_CUTS) return false;
    memmove(&cuts[i + 1], &cuts[i], sizeof(int64_t) * (size_t)(*n - i));
    cuts[i] = x;
    (*n)++;
    return true;
}

/* the bounds along axis ax (of size n, in a loop space of ndim axes) of the
 * masks a's loads and constants read through, into cuts; false where the
 * body is not split: a reduce, a gather, a mask on a view before the last,
 * too many bounds */
static bool find_cuts(const tc_ast *a, int ax, int64_t n, int ndim, int64_t *cuts, int *nc, int mark) {
    if (a->mark == mark) return true;
    ((tc_ast *)a)->mark = mark;
    if (tc_op_is_reduce(a->op) || tc_ops[a->op].kind == TC_OPK_INDEX) return false;
    if ((a->op == TC_OP_LOAD || a->op == TC_OP_CONST) && a->st) {
        const tc_st *st = a->st;
        for (int k = 0; k + 1 < st->n_views; k++)
            if (st->views[k].has_mask) return false;
        const tc_view *v = &st->views[st->n_views - 1];
        if (v->ndim != ndim) return false;
        if (v->has_mask && v->mask_begin[ax] < v->mask_end[ax]) {
            if (v->mask_begin[ax] > 0 && v->mask_begin[ax] < n && !add_cut(cuts, nc, v->mask_begin[ax]))
                return false;
            if (v->mask_end[ax] > 0 && v->mask_end[ax] < n && !add_cut(cuts, nc, v->mask_end[ax])) return false;
        }
    }
    for (int i = 0; i < a->n_srcs; i++)
        if (!find_cuts(a->srcs[i], ax, n, ndim, cuts, nc, mark)) return false;
    return true;
}

/* kept axis a has a loop (tc_lw_open_kept): more than one index, or steps */
static bool opens_loop(const lower_ctx *c, int a) {
    const tc_sched_item *it = c->it;
    if ((it->reduce_axes >> a) & 1 || it->full_shape[a] < 2) return false;
    for (int i = 0; i < c->n_up; i++)
        if (c->up_axis[i] == a) return it->full_shape[a] > c->up_amt[i];
    return true;
}

/* the axes to split among order[from..n), innermost first */
static void plan_split(lower_ctx *c, const int *order, int from, int n, const tc_ast *root, split_plan *sp) {
    const tc_sched_item *it = c->it;
    int64_t segs = 1;
    sp->n = 0;
    for (int o = n - 1; o >= from && sp->n < SPLIT_AXES; o--) {
        int a = order[o];
        int64_t len = it->full_shape[a];
        if ((it->reduce_axes >> a) & 1 || len < 2 || tc_lw_is_upcast(c, a)) continue;
        int64_t cuts[SPLIT_CUTS];
        int nc = 0;
        if (!find_cuts(root, a, len, it->ndim, cuts, &nc, tc_lw_next_epoch())) {
            sp->n = 0;
            return;
        }
        if (!nc || segs * (nc + 1) > SPLIT_SEGS) continue;
        segs *= nc + 1;
        sp->axis[sp->n] = a;
        sp->n_cuts[sp->n] = nc;
        memcpy(sp->cut[sp->n], cuts, sizeof(int64_t) * (size_t)nc);
        sp->n++;
    }
}

/* opens the loops order[o..n) (a split axis once per segment) and lowers
 * root's stores inside the innermost */
static void open_from(lower_ctx *c, tc_kernel_uops *k, const int *order, int o, int n, const split_plan *sp,
                      tc_ast *root, bool may_share) {
    if (c->ub.failed) return;
    if (o == n) {
        if (sp->n) c->base_epoch = c->epoch = tc_lw_next_epoch(); /* what another segment lowered stays there */
        c->outer_depth = c->ub.depth;
        if (c->n_up) tc_lw_set_copy(c, 0);
        tc_lw_prelower_reduces(c, root);
        tc_lw_lower_stores(c, root, false);
        tc_lw_lower_stores(c, root, true);
        return;
    }
    int a = order[o], depth = c->ub.depth, s = -1;
    for (int i = 0; i < sp->n; i++)
        if (sp->axis[i] == a) s = i;
    if (s < 0) {
        if (!((c->it->reduce_axes >> a) & 1)) tc_lw_open_kept(c, k, a, may_share);
        open_from(c, k, order, o + 1, n, sp, root, may_share);
    } else {
        for (int g = 0; g <= sp->n_cuts[s] && !c->ub.failed; g++) {
            int64_t lo = g ? sp->cut[s][g - 1] : 0, hi = g < sp->n_cuts[s] ? sp->cut[s][g] : c->it->full_shape[a];
            c->idx[a] = hi - lo == 1 ? ic(c, lo) : tc_ub_range_span(&c->ub, a, c->idt, lo, hi);
            open_from(c, k, order, o + 1, n, sp, root, may_share);
            while (c->ub.depth > depth) tc_ub_end_range(&c->ub);
        }
    }
    while (c->ub.depth > depth) tc_ub_end_range(&c->ub);
}

void tc_lw_kept_loops(lower_ctx *c, tc_kernel_uops *k, const int *order, int n, tc_ast *root, bool may_share) {
    const tc_sched_item *it = c->it;
    split_plan sp = {.n = 0};
    if (!c->tg->has_local && !it->reduce_axes) {
        int from = 0;
        if (may_share) { /* past the first loop opened (the threads') */
            while (from < n && !opens_loop(c, order[from])) from++;
            from++;
        }
        plan_split(c, order, from, n, root, &sp);
    }
    open_from(c, k, order, 0, n, &sp, root, may_share);
    if (sp.n) c->base_epoch = c->epoch = tc_lw_next_epoch();
}
