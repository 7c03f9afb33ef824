/* lower.c - kernel AST -> UOps.
 *
 * The loop space of the item (full shape F, reduced axes R) becomes: one
 * RANGE per kept axis (size-1 axes are the constant 0), then, per store,
 * its reduce stages (DEFINE_ACC, RANGEs over R, accumulate, ENDRANGE) and the
 * store itself, in the reduced space or inside a store stage over R (the
 * stores: lower_store.c).
 * Buffer indices come from each LOAD/STORE/CONST tracker: the last view maps
 * loop indices to an offset and a mask; earlier views re-split that offset.
 *
 * A transcendental that several stages compute is stored by the first in a
 * scratch array over the reduced axes and loaded by the others (saved
 * values, below: softmax's exp).
 *
 * Targets with work-groups (has_local): lower_gpu.c maps the kept axes to
 * work-groups and lanes, splits long reduces across a work-group and gives
 * a lane 4 elements where the views allow.
 */
#include "lower.h"

#include <math.h>
#include <string.h>

/* a lowered value of one copy of an upcast kernel's body */
typedef struct rmemo {
    struct rmemo *next; /* chain */
    const tc_ast *a;    /* key: the AST node ... */
    int rep;            /* ... in this copy */
    tc_uop *u;          /* its UOp */
    int epoch;          /* the stage that computed it */
} rmemo;

static int epoch_counter; /* stage numbers are unique across lowerings (under the API lock) */

int tc_lw_next_epoch(void) {
    return ++epoch_counter;
}


/* (index, valid) of tracker st at the current loop indices */
TC_MUST_USE tc_status tc_lw_st_index(lower_ctx *c, const tc_st *st, tc_uop **idx_out, tc_uop **valid_out) {
    tc_ub *ub = &c->ub;
    ub->index_mode = true;
    const tc_view *v = &st->views[st->n_views - 1];
    tc_uop *dims[TC_MAX_DIMS];
    for (int a = 0; a < v->ndim; a++) {
        dims[a] = v->shape[a] == 1 ? tc_ub_iconst(ub, c->idt, 0) : c->idx[a];
        if (!dims[a] && !ub->failed) {
            ub->index_mode = false;
            return TC_INTERNAL("axis %d of a buffer is read outside its loop", a);
        }
    }
    tc_uop *valid = tc_ub_iconst(ub, TC_BOOL, 1), *idx = NULL;
    /* Earlier views re-split the last view's offset with / and %. Where the
     * last view's mask holds, its indices lie inside the mask, and only
     * there does the address matter (the load is gated): so the offset is
     * computed from the indices clamped to the mask, whose narrower ranges
     * let the / and % fold (a padded view of a pooled one: 6 divisions per
     * element otherwise). The mask itself reads the plain indices. */
    tc_uop *clamped[TC_MAX_DIMS];
    for (int a = 0; a < v->ndim; a++) {
        clamped[a] = dims[a];
        if (st->n_views < 2 || !v->has_mask || v->shape[a] == 1) continue;
        if (v->mask_begin[a] > 0 && v->mask_begin[a] < v->mask_end[a])
            clamped[a] = tc_ub_alu(ub, TC_OP_MAX, c->idt, 2, clamped[a], tc_ub_iconst(ub, c->idt, v->mask_begin[a]), NULL);
        if (v->mask_end[a] < v->shape[a] && v->mask_begin[a] < v->mask_end[a]) { /* min(x, e-1) = -max(-x, 1-e) */
            tc_uop *neg = tc_ub_alu(ub, TC_OP_NEG, c->idt, 1, clamped[a], NULL, NULL);
            tc_uop *m = tc_ub_alu(ub, TC_OP_MAX, c->idt, 2, neg, tc_ub_iconst(ub, c->idt, 1 - v->mask_end[a]), NULL);
            clamped[a] = tc_ub_alu(ub, TC_OP_NEG, c->idt, 1, m, NULL, NULL);
        }
    }
    for (int k = st->n_views - 1; k >= 0; k--) {
        v = &st->views[k];
        if (k < st->n_views - 1) { /* re-split the flat offset by this view's shape */
            int64_t acc = 1;
            for (int a = v->ndim - 1; a >= 0; a--) {
                tc_uop *q = tc_ub_alu(ub, TC_OP_IDIV, c->idt, 2, idx, tc_ub_iconst(ub, c->idt, acc), NULL);
                dims[a] = tc_ub_alu(ub, TC_OP_MOD, c->idt, 2, q, tc_ub_iconst(ub, c->idt, v->shape[a]), NULL);
                acc *= v->shape[a];
            }
        }
        tc_uop *sum = tc_ub_iconst(ub, c->idt, v->offset);
        for (int a = 0; a < v->ndim; a++) {
            if (v->strides[a] != 0)
                sum = tc_ub_alu(ub, TC_OP_ADD, c->idt, 2, sum,
                                tc_ub_alu(ub, TC_OP_MUL, c->idt, 2, k == st->n_views - 1 ? clamped[a] : dims[a],
                                          tc_ub_iconst(ub, c->idt, v->strides[a]), NULL),
                                NULL);
            if (!v->has_mask) continue;
            if (v->mask_begin[a] > 0)
                valid = tc_ub_alu(ub, TC_OP_AND, TC_BOOL, 2, valid,
                                  tc_ub_alu(ub, TC_OP_CMPLT, TC_BOOL, 2,
                                            tc_ub_iconst(ub, c->idt, v->mask_begin[a] - 1), dims[a], NULL),
                                  NULL);
            if (v->mask_end[a] < v->shape[a])
                valid = tc_ub_alu(ub, TC_OP_AND, TC_BOOL, 2, valid,
                                  tc_ub_alu(ub, TC_OP_CMPLT, TC_BOOL, 2, dims[a],
                                            tc_ub_iconst(ub, c->idt, v->mask_end[a]), NULL),
                                  NULL);
        }
        idx = sum;
    }
    ub->index_mode = false;
    *idx_out = idx;
    *valid_out = valid;
    return ub->failed ? TC_ERR_MEMORY : TC_OK;
}

tc_uop *tc_lw_reduce_init(lower_ctx *c, tc_op op, tc_dtype dt) {
    int64_t lo, hi;
    if (op == TC_OP_REDUCE_SUM) return tc_ub_const(&c->ub, dt, 0, 0);
    if (op == TC_OP_REDUCE_PROD) return tc_ub_const(&c->ub, dt, 1, 1);
    if (tc_dtype_int_range(dt, &lo, &hi)) return tc_ub_iconst(&c->ub, dt, lo); /* max: the least */
    return tc_ub_const(&c->ub, dt, -INFINITY, 0);
}



/* opens a loop over each R axis of the kernel (size-1 axes are index 0); in
 * a reduce stage (is_reduce) a split axis steps by its amount and each copy
 * sets its index (set_copy) */
int tc_lw_open_stage(lower_ctx *c, bool is_reduce) {
    int opened = 0;
    c->epoch = tc_lw_next_epoch();
    if (c->is_grouped) return tc_lw_open_group_stage(c);
    for (int a = 0; a < c->it->ndim; a++) {
        if (!((c->it->reduce_axes >> a) & 1)) continue;
        if (c->it->full_shape[a] == 1) {
            c->idx[a] = tc_ub_iconst(&c->ub, c->idt, 0);
            continue;
        }
        bool is_split = is_reduce && c->split * c->vl > 1 && c->up_axis[c->n_up - 1] == a;
        bool is_block = a == c->kaxis; /* a block of kblock indices, from kb * kblock */
        int64_t step = is_split ? c->split * c->vl : 1;
        c->idx[a] = tc_ub_range(&c->ub, a, c->idt, (is_block ? c->kblock : c->it->full_shape[a]) / step);
        opened++;
        c->ub.index_mode = true;
        if (is_reduce && c->pack_load) /* flat over the reduced axes, within a block */
            c->pack_kloc = c->pack_kloc ? ix(c, TC_OP_ADD, ix(c, TC_OP_MUL, c->pack_kloc, ic(c, c->it->full_shape[a])),
                                             c->idx[a])
                                        : c->idx[a];
        if (is_split) c->up_base[c->n_up - 1] = ix(c, TC_OP_MUL, c->idx[a], ic(c, step));
        tc_uop **at = is_split ? &c->up_base[c->n_up - 1] : &c->idx[a];
        if (is_block) *at = ix(c, TC_OP_ADD, ix(c, TC_OP_MUL, c->kb, ic(c, c->kblock)), *at);
        c->ub.index_mode = false;
    }
    return opened;
}

void tc_lw_close_stage(lower_ctx *c, int opened) {
    while (opened--) tc_ub_end_range(&c->ub);
    for (int a = 0; a < c->it->ndim; a++)
        if ((c->it->reduce_axes >> a) & 1) c->idx[a] = NULL;
    c->pack_kloc = NULL;
    if (c->split * c->vl > 1) c->up_base[c->n_up - 1] = NULL;
    c->epoch = tc_lw_next_epoch();
}

tc_op tc_lw_acc_op(const tc_ast *a) {
    bool is_bool = a->dtype == TC_BOOL;
    if (a->op == TC_OP_REDUCE_SUM) return is_bool ? TC_OP_OR : TC_OP_ADD;
    if (a->op == TC_OP_REDUCE_PROD) return is_bool ? TC_OP_AND : TC_OP_MUL;
    return TC_OP_MAX;
}

/* ---- upcast (CPU): UP outputs of a kept axis per loop iteration ----
 * The loop over an upcast axis steps by its amount; the body is lowered once
 * per copy with the index base + copy, each copy with accumulators of its
 * own, so a reduce runs several independent chains (a float sum is a chain
 * of dependent adds otherwise) and loads that do not depend on the axis are
 * shared between copies (hash-consing).
 * Vectors (has_vec targets, a plan with lanes): a split's copies are vectors
 * of vl consecutive indices (c->vl: the loop steps by split * vl, the
 * partial vectors are folded lane by lane after it); a tile column's copies
 * are vectors of vj in the reduce stages only (c->vj: every vj-th copy
 * accumulates a vector, each copy's value is its lane, the stores stay
 * scalar). Inside such a stage a load along that axis is a vector load and
 * everything computed from it a vector (uop.c broadcasts the scalars). */

static rmemo *rmemo_find(lower_ctx *c, const tc_ast *a) {
    size_t h = ((uintptr_t)a >> 4 ^ (size_t)c->rep * 31) % 4096;
    for (rmemo *e = c->rbuckets[h]; e; e = e->next)
        if (e->a == a && e->rep == c->rep) return e;
    return NULL;
}

void tc_lw_memo_put(lower_ctx *c, const tc_ast *a, int rep, tc_uop *u, int epoch) {
    size_t h = ((uintptr_t)a >> 4 ^ (size_t)rep * 31) % 4096;
    rmemo *e = NULL;
    for (e = c->rbuckets[h]; e && !(e->a == a && e->rep == rep); e = e->next) {
    }
    if (!e) {
        if (!(e = tc_arena_alloc(&c->ub.k->arena, sizeof *e))) {
            c->ub.failed = true;
            return;
        }
        *e = (rmemo){c->rbuckets[h], a, rep, NULL, 0};
        c->rbuckets[h] = e;
    }
    e->u = u;
    e->epoch = epoch;
}

/* makes copy r current: each upcast axis' index is its base plus r's digit
 * (the last digit is the split's, set inside its stage only); a clamped axis
 * past its end reads its last index (the store of that copy is gated off) */
void tc_lw_set_copy(lower_ctx *c, int r) {
    c->rep = r;
    for (int i = c->n_up - 1; i >= 0; i--) {
        int64_t off = r % c->up_amt[i];
        r /= (int)c->up_amt[i];
        c->up_off[i] = off;
        if (!c->up_base[i]) continue;
        c->ub.index_mode = true;
        bool is_vec_split = i == c->n_up - 1 && c->vl > 1; /* copies are vectors of vl indices */
        tc_uop *at = ix(c, TC_OP_ADD, c->up_base[i], ic(c, is_vec_split ? off * c->vl : off));
        if (c->up_clamp[i] && off > 0) {
            int64_t last = c->it->full_shape[c->up_axis[i]] - 1;
            at = tc_ub_alu(&c->ub, TC_OP_WHERE, c->idt, 3, ix(c, TC_OP_CMPLT, at, ic(c, last + 1)), at,
                           ic(c, last));
        }
        c->idx[c->up_axis[i]] = at;
        c->ub.index_mode = false;
    }
}

/* copy r's stores are real: every clamped axis' index is inside it (NULL: no gate) */
tc_uop *tc_lw_copy_gate(lower_ctx *c, int r) {
    tc_uop *gate = NULL;
    for (int i = c->n_up - 1; i >= 0; i--) {
        int64_t off = r % c->up_amt[i];
        r /= (int)c->up_amt[i];
        if (!c->up_clamp[i] || off == 0) continue;
        c->ub.index_mode = true;
        tc_uop *in = ix(c, TC_OP_CMPLT, ix(c, TC_OP_ADD, c->up_base[i], ic(c, off)),
                        ic(c, c->it->full_shape[c->up_axis[i]]));
        gate = gate ? tc_ub_alu(&c->ub, TC_OP_AND, TC_BOOL, 2, gate, in, NULL) : in;
        c->ub.index_mode = false;
    }
    return gate;
}

/* ---- vector partials (has_vec targets): opt.c's tc_opt_vec_ok says when ---- */

/* the lanes of the vector copy being lowered (0: scalars): inside the split
 * stage of a vector split, or a tile column's vector copy in a reduce
 * stage; loads along the last plan axis are vectors then */
int tc_lw_vec_lanes_now(const lower_ctx *c) {
    if (c->vl > 1 && c->up_base[c->n_up - 1]) return c->vl;
    return c->in_vj ? c->vj : 0;
}

/* takes opt.c's plan p: kept axes first, a split reduced axis last */
void tc_lw_take_plan(lower_ctx *c, tc_kopt p) {
    c->n_up = 0;
    c->n_reps = 1;
    c->split = 1;
    c->split_tail = 0;
    c->vl = c->vj = 1;
    for (int i = 0; i < p.n; i++) {
        int a = p.axis[i];
        int64_t amt = p.amt[i];
        bool red = (c->it->reduce_axes >> a) & 1;
        bool vec = i == p.n - 1 && p.lanes > 1 && p.lanes <= 16 && !(p.lanes & (p.lanes - 1)) &&
                   c->tg->has_vec && amt % p.lanes == 0 &&
                   tc_opt_vec_ok(c->it, a, !red, p.pack ? tc_opt_pack_load(c->it, a) : NULL);
        if (vec && red) {
            c->vl = p.lanes;
            amt /= p.lanes;
        } else if (vec && c->it->full_shape[a] % amt == 0) {
            c->vj = p.lanes;
        }
        c->up_axis[c->n_up] = a;
        c->up_amt[c->n_up] = amt;
        c->up_clamp[c->n_up++] = !red && c->it->full_shape[a] % p.amt[i] != 0;
        if (red) c->split_tail = c->it->full_shape[a] % p.amt[i];
        c->n_reps *= (int)amt;
        if (red) c->split = amt;
    }
    c->mblock = c->n_up == 2 ? p.mblock : 0;
    c->kaxis = p.kblock > 0 ? tc_opt_kblock_axis(c->it) : -1; /* opt.c checked the rest */
    if (c->kaxis >= 0) c->kblock = p.kblock;
    c->epi_loop = p.epi_loop;
    c->pack_from = -1;
    if (p.pack && c->n_up == 2 && c->vj > 1 && (c->pack_load = tc_opt_pack_load(c->it, c->up_axis[1]))) {
        c->pack_from = tc_opt_pack_from(c->it, c->pack_load, c->up_axis[0], c->up_axis[1]);
        c->pack_k = tc_opt_panel_k(c->it, c->kaxis >= 0 ? c->kblock : 0);
        c->pack_buf = tc_ub_define_scratch(&c->ub, TC_FLOAT32, c->pack_k * c->up_amt[1]);
        if (!c->pack_buf) c->ub.failed = true;
    } else {
        c->pack_load = NULL;
    }
    c->row_load = NULL;
    if (p.row_pack && c->pack_load && (c->row_load = tc_opt_row_load(c->it, c->up_axis[0], c->up_axis[1]))) {
        c->row_rows = tc_opt_row_rows(c->it, &p);
        c->row_buf = tc_ub_define_scratch(&c->ub, TC_FLOAT32, c->row_rows * c->pack_k);
        if (!c->row_buf) c->ub.failed = true;
    }
}

static void choose_upcast(lower_ctx *c) {
    tc_kopt p = {0};
    if (c->plan && !c->tg->has_local) p = *c->plan;
    else tc_opt_choose(c->it, c->tg, &p);
    tc_lw_take_plan(c, p);
}

bool tc_lw_is_upcast(const lower_ctx *c, int a) {
    for (int i = 0; i < c->n_up; i++)
        if (c->up_axis[i] == a) return true;
    return false;
}

/* every copy's accumulator of reduce a, in one stage; a split reduce's
 * partial accumulators are combined pairwise after it, and the result is
 * the value of every copy that differs only in the split digit */
/* a tile whose column copies are vectors in the reduce stage (c->vj): the
 * copies at lanes 0, vj, 2vj, ... of the column accumulate vectors; every
 * copy's value is its lane of one of them */
static tc_uop *lower_reduce_vj(lower_ctx *c, tc_ast *a) {
    int me = c->rep, jd = (int)c->up_amt[c->n_up - 1];
    tc_uop **accs = tc_arena_alloc(&c->ub.k->arena, sizeof(tc_uop *) * (size_t)c->n_reps);
    if (!accs) {
        c->ub.failed = true;
        return NULL;
    }
    for (int r = 0; r < c->n_reps; r++)
        accs[r] = r % jd % c->vj ? NULL : tc_ub_acc_vec(&c->ub, tc_lw_reduce_init(c, a->op, a->dtype), c->vj);
    int opened = tc_lw_open_stage(c, true);
    c->in_vj = true;
    for (int r = 0; r < c->n_reps; r += c->vj) {
        tc_lw_set_copy(c, r);
        tc_uop *x = tc_lw_lower(c, a->srcs[0]);
        if (accs[r] && x) tc_ub_acc_update(&c->ub, tc_lw_acc_op(a), accs[r], x);
        else c->ub.failed = true;
    }
    c->in_vj = false;
    tc_lw_close_stage(c, opened);
    tc_uop *mine = NULL;
    for (int r = 0; r < c->n_reps; r++) {
        int lane = r % jd % c->vj;
        tc_uop *v = tc_ub_gep(&c->ub, accs[r - lane], lane);
        tc_lw_memo_put(c, a, r, v, c->epoch);
        if (r == me) mine = v;
    }
    tc_lw_set_copy(c, me);
    return mine;
}

/* A split whose steps do not cover its axis (split_tail > 0) reduces the
 * rest in scalars: the split's loop (the stage's innermost) closes, a loop
 * over the tail opens in its place, and each group of copies that differ
 * only in the split digit adds its tail to an accumulator of its own
 * (tails[r0 / split]), combined with the partials after the stage. */
static void lower_tail(lower_ctx *c, tc_ast *a, tc_uop **tails) {
    int sa = c->up_axis[c->n_up - 1], s = (int)c->split;
    const tc_uop *loop = c->ub.scope[c->ub.depth];
    if (!loop || loop->op != TC_UOP_RANGE || loop->arg != sa) {
        TC_INTERNAL("the tail of %s's split axis %d is not its innermost loop", c->it->name, sa);
        c->ub.failed = true;
        return;
    }
    tc_ub_end_range(&c->ub);
    int was = c->epoch;
    c->epoch = tc_lw_next_epoch(); /* the loop's values are its vectors, not the tail's scalars */
    for (int i = 0; i < c->n_saved; i++)
        if (c->saved[i].epoch == was) c->saved[i].epoch = c->epoch; /* the same stage stores them */
    c->up_base[c->n_up - 1] = NULL; /* scalars; the split axis' index is the tail's */
    tc_uop *t = tc_ub_range(&c->ub, sa, c->idt, c->split_tail);
    c->ub.index_mode = true;
    c->idx[sa] = ix(c, TC_OP_ADD, t, ic(c, c->it->full_shape[sa] - c->split_tail));
    c->ub.index_mode = false;
    for (int r0 = 0; r0 < c->n_reps; r0 += s) {
        tc_lw_set_copy(c, r0);
        tc_uop *x = tc_lw_lower(c, a->srcs[0]);
        if (tails[r0 / s] && x) tc_ub_acc_update(&c->ub, tc_lw_acc_op(a), tails[r0 / s], x);
        else c->ub.failed = true;
    }
}

static tc_uop *lower_reduce_copies(lower_ctx *c, tc_ast *a) {
    if (c->vj > 1) return lower_reduce_vj(c, a);
    int me = c->rep, s = (int)c->split;
    tc_uop **accs = tc_arena_alloc(&c->ub.k->arena, sizeof(tc_uop *) * (size_t)(c->n_reps + c->n_reps / s));
    if (!accs) {
        c->ub.failed = true;
        return NULL;
    }
    tc_uop **tails = accs + c->n_reps;
    for (int r = 0; r < c->n_reps; r++) accs[r] = tc_ub_acc_vec(&c->ub, tc_lw_reduce_init(c, a->op, a->dtype), c->vl);
    for (int g = 0; c->split_tail && g < c->n_reps / s; g++)
        tails[g] = tc_ub_acc(&c->ub, tc_lw_reduce_init(c, a->op, a->dtype));
    int opened = tc_lw_open_stage(c, true);
    for (int r = 0; r < c->n_reps; r++) {
        tc_lw_set_copy(c, r);
        tc_uop *x = tc_lw_lower(c, a->srcs[0]);
        if (accs[r] && x) tc_ub_acc_update(&c->ub, tc_lw_acc_op(a), accs[r], x);
    }
    if (c->split_tail) lower_tail(c, a, tails);
    tc_lw_close_stage(c, opened);
    for (int r0 = 0; r0 < c->n_reps; r0 += s) {
        for (int w = 1; w < s; w *= 2)
            for (int r = r0; r + w < r0 + s; r += 2 * w)
                accs[r] = tc_ub_alu(&c->ub, tc_lw_acc_op(a), a->dtype, 2, accs[r], accs[r + w], NULL);
        tc_uop *lanes[64]; /* a vector's lanes, folded pairwise */
        for (int l = 0; l < c->vl; l++) lanes[l] = tc_ub_gep(&c->ub, accs[r0], l);
        for (int w = 1; w < c->vl; w *= 2)
            for (int l = 0; l + w < c->vl; l += 2 * w)
                lanes[l] = tc_ub_alu(&c->ub, tc_lw_acc_op(a), a->dtype, 2, lanes[l], lanes[l + w], NULL);
        accs[r0] = lanes[0];
        if (c->split_tail) accs[r0] = tc_ub_alu(&c->ub, tc_lw_acc_op(a), a->dtype, 2, accs[r0], tails[r0 / s], NULL);
        for (int r = r0; r < r0 + s; r++) tc_lw_memo_put(c, a, r, accs[r0], c->epoch);
    }
    tc_lw_set_copy(c, me);
    return accs[me - me % s];
}

static tc_uop *lower_reduce(lower_ctx *c, tc_ast *a) {
    if (c->is_grouped) return tc_lw_group_value(c, a);
    if (c->ub.depth != c->outer_depth) {
        TC_INTERNAL("a reduce was reached inside another stage");
        c->ub.failed = true;
        return NULL;
    }
    tc_lw_prelower_reduces(c, a->srcs[0]); /* earlier stages: reduces this one reads */
    if (c->n_reps > 1 || c->vl > 1) return lower_reduce_copies(c, a);
    tc_uop *acc = tc_lw_gv_acc(c, a, tc_lw_reduce_init(c, a->op, a->dtype));
    int opened = tc_lw_open_stage(c, true);
    tc_uop *x = tc_lw_lower(c, a->srcs[0]);
    if (acc && x) tc_ub_acc_update(&c->ub, tc_lw_acc_op(a), acc, x);
    tc_lw_close_stage(c, opened);
    return acc;
}

/* a packed tile's load of its column operand, in the reduce stage: the
 * panel at (reduce index within it, column digit), a vector of the tile's
 * column lanes in a vector copy */
static tc_uop *panel_load(lower_ctx *c) {
    c->ub.index_mode = true;
    tc_uop *at = ix(c, TC_OP_ADD, ix(c, TC_OP_MUL, c->pack_kloc, ic(c, c->up_amt[1])), ic(c, c->up_off[1]));
    c->ub.index_mode = false;
    int lanes = tc_lw_vec_lanes_now(c);
    return lanes ? tc_ub_load_vec(&c->ub, c->pack_buf, at, NULL, lanes) : tc_ub_load(&c->ub, c->pack_buf, at, NULL);
}

/* a row panel's load of the rows' operand, in the reduce stage: the
 * panel at (tile within the row block, reduce index, row digit) */
static tc_uop *row_panel_load(lower_ctx *c) {
    c->ub.index_mode = true;
    tc_uop *tile = ix(c, TC_OP_MUL, ix(c, TC_OP_ADD, c->up_base[0], c->row_off), ic(c, c->pack_k));
    tc_uop *at = ix(c, TC_OP_ADD, ix(c, TC_OP_ADD, tile, ix(c, TC_OP_MUL, c->pack_kloc, ic(c, c->up_amt[0]))),
                    ic(c, c->up_off[0]));
    c->ub.index_mode = false;
    return tc_ub_load(&c->ub, c->row_buf, at, NULL);
}

static tc_uop *lower_leaf(lower_ctx *c, tc_ast *a) {
    if (a == c->pack_load && c->pack_kloc) return panel_load(c);
    if (a == c->row_load && c->pack_kloc) return row_panel_load(c);
    tc_uop *idx, *valid;
    if (tc_lw_st_index(c, a->st, &idx, &valid) != TC_OK) {
        c->ub.failed = true;
        return NULL;
    }
    int lanes = tc_lw_vec_lanes_now(c);
    if (a->op == TC_OP_LOAD && lanes && tc_st_stride(a->st, c->up_axis[c->n_up - 1]) == 1)
        return tc_ub_load_vec(&c->ub, c->globals[a->buf], idx, valid, lanes);
    if (a->op == TC_OP_LOAD && c->gvl > 1 && tc_st_stride(a->st, c->gv_axis) == 1)
        return tc_ub_load_vec(&c->ub, c->globals[a->buf], idx, valid, c->gvl);
    if (a->op == TC_OP_LOAD) return tc_ub_load(&c->ub, c->globals[a->buf], idx, valid);
    tc_uop *k = tc_ub_const(&c->ub, a->dtype, a->value, a->ivalue);
    return tc_ub_alu(&c->ub, TC_OP_WHERE, a->dtype, 3, valid, k, tc_ub_const(&c->ub, a->dtype, 0, 0));
}

/* ---- saved values (CPU): a transcendental that several stages compute ----
 * Each stage lowers its body anew, so softmax's exp(x - max), in its sum's
 * body and in its store, was computed twice per element (a third of the
 * kernel's time at 64 x 1024). Here the first stage that computes such a
 * value (an exp2, log2 or sin that varies along the reduced axes) stores it
 * in a scratch array, one element per point of the reduced space, private
 * to the kernel's run; a later stage loads it instead of computing it (in
 * the same row: every stage of a row runs before the next row's). Only
 * where that space, for all the saved values, fits half the L1d, and the
 * plan upcasts no kept axis (a row's copies would share the array) and
 * neither blocks nor groups the reduce. Finding them: one walk per stage
 * root (a reduce's body, the stores' values), O(nodes * stages). */
enum { SAVE_REDUCES = 16 }; /* most reduces of a kernel searched for saved values */

static bool is_transcendental(tc_op op) {
    return op == TC_OP_EXP2 || op == TC_OP_LOG2 || op == TC_OP_SIN;
}

static void find_reduces(tc_ast *a, int mark, tc_ast **reds, int *n) {
    if (a->mark == mark) return;
    a->mark = mark;
    if (tc_op_is_reduce(a->op)) {
        if (*n <= SAVE_REDUCES) reds[(*n)++] = a;
        if (*n > SAVE_REDUCES) return;
    }
    for (int i = 0; i < a->n_srcs; i++) find_reduces(a->srcs[i], mark, reds, n);
}

/* counts, per float32 transcendental of one stage (not through reduces),
 * the stages that compute it: (nodes, counts) of up to `max` of them */
static void count_stage(tc_ast *a, int mark, const tc_ast **nodes, int *counts, int *n, int max) {
    if (a->mark == mark || tc_op_is_reduce(a->op)) return;
    a->mark = mark;
    if (is_transcendental(a->op) && a->dtype == TC_FLOAT32) {
        int i = 0;
        while (i < *n && nodes[i] != a) i++;
        if (i == *n && *n < max) nodes[(*n)++] = a, counts[i] = 0;
        if (i < *n) counts[i]++;
    }
    for (int i = 0; i < a->n_srcs; i++) count_stage(a->srcs[i], mark, nodes, counts, n, max);
}

static void find_saved(lower_ctx *c) {
    const tc_sched_item *it = c->it;
    c->n_saved = 0;
    if (c->tg->has_local || c->is_grouped || c->kaxis >= 0 || c->pack_load || !it->reduce_axes) return;
    for (int i = 0; i < c->n_up; i++)
        if (!((it->reduce_axes >> c->up_axis[i]) & 1)) return;
    int64_t flat = 1;
    tc_view *v = tc_arena_alloc(&c->ub.k->arena, sizeof *v);
    if (!v) return;
    *v = (tc_view){.ndim = it->ndim};
    for (int a = it->ndim - 1; a >= 0; a--) {
        v->shape[a] = it->full_shape[a];
        bool red = (it->reduce_axes >> a) & 1 && it->full_shape[a] > 1;
        v->strides[a] = red ? flat : 0;
        flat *= red ? it->full_shape[a] : 1;
    }
    int64_t l1d = c->tg->cache[0].bytes > 0 ? c->tg->cache[0].bytes : 32 * 1024;
    int64_t room = l1d / 2 / (flat * (int64_t)sizeof(float));
    if (room < 1) return;
    tc_ast *reds[SAVE_REDUCES + 1];
    int n_reds = 0;
    find_reduces(it->ast, tc_lw_next_epoch(), reds, &n_reds);
    if (n_reds > SAVE_REDUCES) return;
    enum { CANDIDATES = 32 };
    const tc_ast *nodes[CANDIDATES];
    int counts[CANDIDATES], n = 0;
    for (int r = 0; r < n_reds; r++) count_stage(reds[r]->srcs[0], tc_lw_next_epoch(), nodes, counts, &n, CANDIDATES);
    int stores = tc_lw_next_epoch();
    for (int i = 0; i < it->ast->n_srcs; i++)
        count_stage(it->ast->srcs[i]->srcs[0], stores, nodes, counts, &n, CANDIDATES);
    int most = (int)(sizeof c->saved / sizeof c->saved[0]);
    for (int i = 0; i < n && c->n_saved < most && c->n_saved < room; i++)
        if (counts[i] >= 2) c->saved[c->n_saved++] = (saved_value){nodes[i], NULL, 0};
    c->saved_st = (tc_st){.n_views = 1, .views = v};
    c->saved_n = flat;
}

static int saved_slot(const lower_ctx *c, const tc_ast *a) {
    for (int i = 0; i < c->n_saved; i++)
        if (c->saved[i].a == a) return c->saved[i].epoch == -1 ? -1 : i;
    return -1;
}

/* where slot i's value is, at the current copy's indices; false where a
 * vector copy's lanes would not be consecutive elements of the array */
static bool saved_index(lower_ctx *c, tc_uop **idx) {
    int lanes = tc_lw_vec_lanes_now(c);
    if (lanes && tc_st_stride(&c->saved_st, c->up_axis[c->n_up - 1]) != 1) return false;
    tc_uop *valid;
    if (tc_lw_st_index(c, &c->saved_st, idx, &valid) == TC_OK) return true;
    c->ub.failed = true;
    return false;
}

/* slot i's value stored by an earlier stage, loaded; NULL: compute it */
static tc_uop *saved_load(lower_ctx *c, int i) {
    tc_uop *idx;
    if (c->saved[i].epoch <= 0 || c->saved[i].epoch == c->epoch || c->ub.depth <= c->outer_depth ||
        !saved_index(c, &idx))
        return NULL;
    int lanes = tc_lw_vec_lanes_now(c);
    return lanes ? tc_ub_load_vec(&c->ub, c->saved[i].buf, idx, NULL, lanes)
                 : tc_ub_load(&c->ub, c->saved[i].buf, idx, NULL);
}

/* slot i's value u, computed in this stage: stored for the later ones */
static void saved_store(lower_ctx *c, int i, tc_uop *u) {
    if (u->depth <= c->outer_depth || (c->saved[i].epoch > 0 && c->saved[i].epoch != c->epoch)) return;
    int lanes = tc_lw_vec_lanes_now(c);
    tc_uop *idx;
    if (u->vcount != (lanes ? lanes : 1) || !saved_index(c, &idx)) {
        c->saved[i].epoch = -1; /* not a value of one point per copy: every stage computes it */
        return;
    }
    if (!c->saved[i].buf && !(c->saved[i].buf = tc_ub_define_scratch(&c->ub, TC_FLOAT32, c->saved_n))) {
        c->ub.failed = true;
        return;
    }
    tc_ub_store(&c->ub, c->saved[i].buf, idx, u);
    c->saved[i].epoch = c->epoch;
}

tc_uop *tc_lw_lower(lower_ctx *c, tc_ast *a) {
    if (c->is_grouped && tc_op_is_reduce(a->op)) return lower_reduce(c, a);
    tc_uop *m = a->lowered;
    int m_epoch = a->lowered_epoch;
    rmemo *e = c->n_reps > 1 ? rmemo_find(c, a) : NULL;
    if (c->n_reps > 1) m = e ? e->u : NULL, m_epoch = e ? e->epoch : 0;
    if (m && m_epoch >= c->base_epoch && (m_epoch == c->epoch || m->depth <= c->outer_depth))
        return m;
    tc_uop *r = NULL, *s[3] = {NULL, NULL, NULL};
    switch (tc_ops[a->op].kind) {
    case TC_OPK_REDUCE: r = lower_reduce(c, a); break;
    case TC_OPK_UNARY:
    case TC_OPK_BINARY:
    case TC_OPK_TERNARY: {
        int sv = c->n_saved ? saved_slot(c, a) : -1;
        if (sv >= 0 && (r = saved_load(c, sv)) != NULL) break;
        for (int i = 0; i < a->n_srcs; i++) s[i] = tc_lw_lower(c, a->srcs[i]);
        if (c->gvl > 1) tc_lw_gv_operands(c, a->op, s, a->n_srcs);
        if (a->op == TC_OP_CAST || a->op == TC_OP_BITCAST) r = tc_ub_cast(&c->ub, s[0], a->dtype, a->op == TC_OP_BITCAST);
        else r = tc_ub_alu(&c->ub, a->op, a->dtype, a->n_srcs, s[0], s[1], s[2]);
        if (sv >= 0 && r) saved_store(c, sv, r);
        break;
    }
    case TC_OPK_META:
    case TC_OPK_AST:
        if (a->op == TC_OP_LOAD || a->op == TC_OP_CONST) r = lower_leaf(c, a);
        else TC_INTERNAL("unexpected %s in a kernel AST", tc_ops[a->op].name);
        break;
    case TC_OPK_INDEX:
        if (a->op == TC_OP_GATHER) r = tc_lw_gather(c, a);
        else TC_INTERNAL("a %s below a kernel's stores", tc_ops[a->op].name);
        break;
    }
    if (!r) c->ub.failed = true;
    if (c->n_reps > 1) {
        tc_lw_memo_put(c, a, c->rep, r, c->epoch);
    } else {
        a->lowered = r;
        a->lowered_epoch = c->epoch;
    }
    return r;
}

/* lowers every reduce under a (outside any stage) before a store stage opens */
void tc_lw_prelower_reduces(lower_ctx *c, tc_ast *a) {
    if (tc_op_is_reduce(a->op)) {
        if (c->is_grouped) tc_lw_group_partials(c, a);
        else tc_lw_lower(c, a);
        return;
    }
    if (a->op == TC_OP_LOAD || a->op == TC_OP_CONST || a->mark == c->base_epoch) return;
    a->mark = c->base_epoch; /* visited in this lowering: DAGs stay linear */
    for (int i = 0; i < a->n_srcs && !c->ub.failed; i++) tc_lw_prelower_reduces(c, a->srcs[i]);
}

static tc_dtype index_dtype(const tc_sched_item *it) {
    int64_t n = 1;
    for (int a = 0; a < it->ndim; a++) n *= it->full_shape[a] ? it->full_shape[a] : 1;
    for (int i = 0; i < it->n_bufs; i++) {
        int64_t m = tc_node_numel(it->bufs[i]);
        n = m > n ? m : n;
    }
    return n < ((int64_t)1 << 30) ? TC_INT32 : TC_INT64;
}

static void estimate(tc_kernel_uops *k, const tc_sched_item *it) {
    int64_t mult[TC_UB_MAX_DEPTH + 2] = {1};
    for (int d = 0; d < 3; d++) mult[0] *= k->global_size[d] * k->local_size[d];
    int d = 0;
    for (int i = 0; i < k->n_uops; i++) {
        const tc_uop *u = k->uops[i];
        if (u->op == TC_UOP_RANGE && d + 1 < TC_UB_MAX_DEPTH + 2) {
            mult[d + 1] = mult[d] * (u->ivalue > 0 ? u->ivalue : u->vmax - u->vmin + 1);
            d++;
        } else if (u->op == TC_UOP_ENDRANGE && d > 0) {
            d--;
        } else if (u->op == TC_UOP_ALU && !u->is_index) {
            k->est_ops += mult[d] * u->vcount;
        }
    }
    for (int i = 0; i < it->n_bufs; i++) { /* an indexed store writes its values' size */
        int64_t n = it->is_put && i < it->n_outs ? tc_node_numel(it->bufs[i]->srcs[0]->srcs[1])
                                                 : tc_node_numel(it->bufs[i]);
        k->est_mem += n * (int64_t)tc_dtypes[it->bufs[i]->dtype].size;
    }
}

/* The outermost loop of a CPU kernel with enough work is shared by threads:
 * its bounds come from one more kernel argument, {start, end}, that the
 * runtime fills per thread (tc_launch_dims.cpu_range). */
enum { THREAD_MIN_WORK = 32768 }; /* loop iterations (all loops) worth a thread split */
enum { ROW_BLOCK_AXIS = 2 * TC_MAX_DIMS + 5 }; /* the row blocks' loop (after the panel's loops) */

tc_uop *tc_lw_outer_range(lower_ctx *c, tc_kernel_uops *k, int a, int64_t n) {
    const tc_sched_item *it = c->it;
    int64_t work = 0;
    const tc_ast *const *parts = it->has_parts ? (const tc_ast *const *)it->ast->srcs : NULL;
    for (int p = 0; p < (parts ? it->ast->n_srcs : 1); p++) { /* a row kernel: its parts' */
        const tc_view *v = parts ? &parts[p]->st->views[0] : NULL;
        int64_t w = 1;
        for (int d = 0; d < (v ? v->ndim : it->ndim); d++) w *= v ? v->shape[d] : it->full_shape[d];
        work += w;
    }
    bool split = c->ub.depth == c->outer0 && n >= 2 && work >= THREAD_MIN_WORK && !c->tg->has_local &&
                 !tc_flag_get(TC_FLAG_NOOPT);
    if (!split) return tc_ub_range(&c->ub, a, c->idt, n);
    tc_uop *bounds = tc_ub_global(&c->ub, it->n_bufs, TC_INT64);
    tc_uop *start = tc_ub_cast(&c->ub, tc_ub_load(&c->ub, bounds, ic(c, 0), NULL), c->idt, false);
    tc_uop *end = tc_ub_cast(&c->ub, tc_ub_load(&c->ub, bounds, ic(c, 1), NULL), c->idt, false);
    k->n_bufs = it->n_bufs + 1;
    k->buf_dtypes[it->n_bufs] = TC_INT64;
    k->buf_written[it->n_bufs] = false;
    k->cpu_range = n;
    return tc_ub_range_in(&c->ub, a, c->idt, start, end, n);
}

/* The loops over the kept axes, outermost first: axis order, except that
 * the outermost loop (shared by threads) goes to the axis of the operand
 * that does not fit the cache, so the one read again at each of its steps
 * is the one that does:
 *  - a register tile's column axis (the contiguous one, second in the
 *    plan) is opened before its row axis when it has enough steps to share
 *    between threads, or shares more evenly than the rows (tc_opt_cols_first):
 *    the tile's columns of the reused input then stay in
 *    cache while the rows go by (matmul 2048: the 64-column panel of b, 512
 *    KiB, stays in L2 instead of all of b passing through for every 6 rows;
 *    ResNet-18's 256-channel 8 x 8 conv, batch 16 in 3 steps of 6 rows, 4
 *    of 64 channels: 4.7-4.8 -> 3.5-3.7 ms on 2 threads, 7.3 -> 7.4 on one,
 *    Zen 5);
 *  - a dot tile's (x @ w.T: both inputs read along the reduce) later kept
 *    axis is opened first when what its loop re-reads per step fits a
 *    nearer cache than what the earlier one's does (reread_level): x @ w.T of a
 *    (256,256) x and a (50304,256) w streamed all of w (51 MB) from memory
 *    for every 2 rows of x; w's rows outside, x (256 KiB) is read from the
 *    L2 instead (measured with bench_ops' matmul_wt, see bench/run.sh);
 *  - a kernel without reduces tiled by two axes (a transposing copy of a
 *    load larger than the L2: opt.c's plan_transpose) opens its columns'
 *    loop first, so its rows' loop inside reads each of the load's rows in
 *    order. */
static void loop_order(const lower_ctx *c, int *order) {
    const tc_sched_item *it = c->it;
    for (int a = 0; a < it->ndim; a++) order[a] = a;
    if (c->n_up < 2) return;
    int i = c->up_axis[0], j = c->up_axis[1];
    if ((it->reduce_axes >> i) & 1 || (it->reduce_axes >> j) & 1) return;
    if (c->split * c->vl > 1) { /* a dot tile: the later axis first, or axis order */
        int first = i < j ? i : j, later = i < j ? j : i;
        int64_t amt = later == i ? c->up_amt[0] : c->up_amt[1];
        if (ceil_div(it->full_shape[later], amt) < 8 ||
            tc_opt_reread_level(it, c->tg, later) >= tc_opt_reread_level(it, c->tg, first))
            return;
        i = first, j = later;
    } else if (c->pack_load) { /* a packed tile's panel is filled outside its rows */
        if (j < c->pack_from) return;
        i = c->pack_from;
    } else if (!it->reduce_axes) { /* a transposing copy's square (opt.c's plan_transpose) */
        if (j < i) return;
    } else if (j < i || !tc_opt_cols_first(it, c->tg, i, c->up_amt[0], j, c->up_amt[1])) {
        return;
    }
    for (int o = j; o > i; o--) order[o] = order[o - 1];
    order[i] = j;
}

/* row blocks (opt.c's plan_mblock): the loop over them opens first, where
 * the plan's columns run outside its rows; else the plan's rows go in one
 * pass */
static void open_row_blocks(lower_ctx *c, const int *order) {
    int i = c->up_axis[0], j = c->up_axis[1], at_i = -1, at_j = -1;
    for (int o = 0; o < c->it->ndim; o++) {
        if (order[o] == i) at_i = o;
        if (order[o] == j) at_j = o;
    }
    if (!c->mblock || c->tg->has_local || at_j > at_i) {
        if (c->mblock) c->row_load = NULL; /* its row panel was sized for the blocks */
        c->mblock = 0;
        return;
    }
    int64_t steps = ceil_div(c->it->full_shape[i], c->up_amt[0]), per = c->mblock / c->up_amt[0];
    c->mb = tc_ub_range(&c->ub, ROW_BLOCK_AXIS, c->idt, ceil_div(steps, per));
    c->outer0 = 1;
}

/* the steps of the rows' loop in row block c->mb: per of them, fewer in the
 * last block */
static tc_uop *row_block_steps(lower_ctx *c, int64_t steps) {
    int64_t per = c->mblock / c->up_amt[0];
    c->ub.index_mode = true;
    tc_uop *start = ix(c, TC_OP_MUL, c->mb, ic(c, per)), *end = ix(c, TC_OP_ADD, start, ic(c, per));
    end = tc_ub_alu(&c->ub, TC_OP_WHERE, c->idt, 3, ix(c, TC_OP_CMPLT, end, ic(c, steps)), end, ic(c, steps));
    c->ub.index_mode = false;
    tc_uop *r = tc_ub_range_in(&c->ub, c->up_axis[0], c->idt, start, end, steps);
    if (r) r->ivalue = per; /* its steps per block (estimate), not the axis' */
    return r;
}

void tc_lw_open_kept(lower_ctx *c, tc_kernel_uops *k, int a, bool may_share) {
    const tc_sched_item *it = c->it;
    if (it->full_shape[a] == 1) c->idx[a] = ic(c, 0);
    else if (!tc_lw_is_upcast(c, a))
        c->idx[a] = may_share ? tc_lw_outer_range(c, k, a, it->full_shape[a])
                              : tc_ub_range(&c->ub, a, c->idt, it->full_shape[a]);
    for (int i = 0; i < c->n_up; i++) { /* an upcast axis steps by its amount */
        if (c->up_axis[i] != a) continue;
        int64_t steps = ceil_div(it->full_shape[a], c->up_amt[i]);
        tc_uop *r = c->mblock && i == 0 ? row_block_steps(c, steps)
                    : steps < 2         ? ic(c, 0)
                    : may_share         ? tc_lw_outer_range(c, k, a, steps)
                                        : tc_ub_range(&c->ub, a, c->idt, steps);
        c->ub.index_mode = true;
        c->up_base[i] = ix(c, TC_OP_MUL, r, ic(c, c->up_amt[i]));
        c->ub.index_mode = false;
    }
}

/* a blocked reduce's loop over its blocks, opened inside the outermost kept
 * loop (which threads share: each thread owns its outputs in every block)
 * and outside the others, so one block's panel serves every row of tiles */
static tc_uop *block_range(lower_ctx *c) {
    return tc_ub_range(&c->ub, TC_MAX_DIMS, c->idt, c->it->full_shape[c->kaxis] / c->kblock);
}

/* the pack loops over the reduced axes (of more than one index), in axis
 * order, each index set in c->idx (the blocked axis' from its block's
 * start), the innermost (axis last) stepping by `line` (the caller adds the
 * line's index); the flat index within the panel, *loops counts the loops */
static tc_uop *pack_reduce_loops(lower_ctx *c, int *loops, int last, int64_t line) {
    const tc_sched_item *it = c->it;
    tc_uop *kk = NULL;
    for (int a = 0; a < it->ndim; a++) {
        if (!((it->reduce_axes >> a) & 1) || it->full_shape[a] == 1) continue;
        int64_t n = a == c->kaxis ? c->kblock : it->full_shape[a];
        tc_uop *r = tc_ub_range(&c->ub, TC_MAX_DIMS + 5 + (*loops)++, c->idt, a == last ? n / line : n);
        c->ub.index_mode = true;
        if (a == last && line > 1) r = ix(c, TC_OP_MUL, r, ic(c, line));
        c->idx[a] = a == c->kaxis ? ix(c, TC_OP_ADD, ix(c, TC_OP_MUL, c->kb, ic(c, c->kblock)), r) : r;
        kk = kk ? ix(c, TC_OP_ADD, ix(c, TC_OP_MUL, kk, ic(c, n)), r) : r;
        c->ub.index_mode = false;
    }
    return kk;
}

/* the elements of a cache line a packed tile's panel copies at a time from
 * an operand contiguous along its innermost reduced axis (*last; 1: none):
 * where that axis' loop holds whole lines */
static int64_t pack_line(const lower_ctx *c, int *last) {
    const tc_sched_item *it = c->it;
    *last = -1;
    for (int a = 0; a < it->ndim; a++)
        if ((it->reduce_axes >> a) & 1 && it->full_shape[a] > 1) *last = a;
    int64_t line = tc_opt_line_bytes(c->tg) / (int64_t)tc_dtypes[c->pack_load->dtype].size;
    if (*last < 0 || line < 2 || tc_st_stride(c->pack_load->st, *last) != 1) return 1;
    int64_t n = *last == c->kaxis ? c->kblock : it->full_shape[*last];
    return n % line == 0 ? line : 1;
}

/* In a panel's copy whose operand lies a line or more apart along the
 * reduce (b of a @ b: a row of b per reduce index), each row gives a line
 * or two, a row from the last, a new page each where b is wide: no
 * prefetcher follows them, and the copy waits for memory at every row
 * (GPT-2's skinny (64, 768) @ (768, 50304): 768 rows 201 KB apart per
 * panel). The copy prefetches the next column block's line of the row as
 * it goes (the last block its own), so that panel comes from the caches:
 * 70 -> 63 ms there on AVX2's 16-column panels (a hand-edited kernel,
 * Zen 5). r: the innermost reduced axis (pack_line's). */
static void prefetch_next_panel(lower_ctx *c, int r) {
    int j = c->up_axis[1];
    const tc_st *st = c->pack_load->st;
    int64_t size = (int64_t)tc_dtypes[c->pack_load->dtype].size;
    if (r < 0 || tc_st_stride(st, j) != 1 || tc_st_stride(st, r) * size < tc_opt_line_bytes(c->tg)) return;
    c->ub.index_mode = true;
    tc_uop *next = ix(c, TC_OP_ADD, c->up_base[1], ic(c, c->up_amt[1]));
    c->idx[j] = tc_ub_alu(&c->ub, TC_OP_WHERE, c->idt, 3, ix(c, TC_OP_CMPLT, next, ic(c, c->it->full_shape[j])),
                          next, c->up_base[1]);
    c->ub.index_mode = false;
    tc_uop *idx, *valid;
    if (tc_lw_st_index(c, st, &idx, &valid) == TC_OK) tc_ub_prefetch(&c->ub, c->globals[c->pack_load->buf], idx, valid);
}

/* a packed tile's panel, before the loop over axis pack_from (the column
 * loop and the reduce's block loop are open): panel[kk * cols + jj] = the
 * column operand at flat reduce index (block start +) kk and column (tile
 * start +) jj, the columns innermost so the panel is written in order.
 * Where the operand is contiguous along the reduce (x @ W.T), a column's
 * reduce innermost wrote the panel a row apart (149-152 GFLOPS against
 * 163-166, 256 x 256 x 50304, 1 thread, Zen 5), and the columns innermost
 * read a line of each of W's 64 rows per reduce index, rows a multiple of
 * 4 KiB apart (W of 1024 inputs) landing in one set of the L1d, read from
 * the L2 16 times each; so the reduce goes a cache line at a time, the
 * columns inside, the line's indices innermost: each line of W is read
 * once, and the panel's 16 rows being written stay in the L1d. Axes whose
 * loops are not open are ones the operand does not move along (opt.c). */
static void emit_pack(lower_ctx *c) {
    const tc_sched_item *it = c->it;
    int j = c->up_axis[1], loops = 0, last;
    int64_t cols = c->up_amt[1], line = pack_line(c, &last);
    tc_uop *saved[TC_MAX_DIMS];
    memcpy(saved, c->idx, sizeof saved);
    for (int a = 0; a < it->ndim; a++)
        if (!c->idx[a]) c->idx[a] = ic(c, 0);
    tc_uop *kk = pack_reduce_loops(c, &loops, last, line);
    if (line == 1) prefetch_next_panel(c, last);
    tc_uop *jj = tc_ub_range(&c->ub, TC_MAX_DIMS + 4, c->idt, cols);
    if (line > 1) { /* the line's indices */
        tc_uop *l = tc_ub_range(&c->ub, TC_MAX_DIMS + 5 + loops++, c->idt, line);
        c->ub.index_mode = true;
        c->idx[last] = ix(c, TC_OP_ADD, c->idx[last], l);
        kk = ix(c, TC_OP_ADD, kk, l);
        c->ub.index_mode = false;
    }
    c->ub.index_mode = true;
    c->idx[j] = ix(c, TC_OP_ADD, c->up_base[1], jj);
    tc_uop *at = ix(c, TC_OP_ADD, ix(c, TC_OP_MUL, kk, ic(c, cols)), jj);
    c->ub.index_mode = false;
    tc_uop *idx, *valid;
    if (tc_lw_st_index(c, c->pack_load->st, &idx, &valid) == TC_OK)
        tc_ub_store(&c->ub, c->pack_buf, at, tc_ub_load(&c->ub, c->globals[c->pack_load->buf], idx, valid));
    else
        c->ub.failed = true;
    for (int i = 0; i <= loops; i++) tc_ub_end_range(&c->ub);
    memcpy(c->idx, saved, sizeof saved);
}

/* a row panel (plan's row_pack), inside the loops over the row blocks and
 * the reduce's blocks, outside the kept axes': panel[(t * pack_k + kk) *
 * ri + d] = the rows' operand at row (block start +) t * ri + d (the axis'
 * last row past its end, as a tile's clamped rows read) and flat reduce
 * index (block start +) kk. The loops read the operand in order: its rows
 * innermost where it is contiguous along them (a.T @ b), else the reduce */
static void emit_row_pack(lower_ctx *c) {
    const tc_sched_item *it = c->it;
    int i = c->up_axis[0], r = -1, loops = 0;
    for (int a = 0; a < it->ndim; a++)
        if ((it->reduce_axes >> a) & 1 && it->full_shape[a] > 1) r = a;
    int64_t ri = c->up_amt[0], n = it->full_shape[i], si = tc_st_stride(c->row_load->st, i);
    bool rows_inner = si >= 0 && si < tc_st_stride(c->row_load->st, r);
    tc_uop *saved[TC_MAX_DIMS];
    memcpy(saved, c->idx, sizeof saved);
    for (int a = 0; a < it->ndim; a++)
        if (!c->idx[a]) c->idx[a] = ic(c, 0);
    tc_uop *kk = rows_inner ? pack_reduce_loops(c, &loops, -1, 1) : NULL;
    tc_uop *t = tc_ub_range(&c->ub, 2 * TC_MAX_DIMS + 6, c->idt, c->row_rows / ri);
    tc_uop *d = tc_ub_range(&c->ub, 2 * TC_MAX_DIMS + 7, c->idt, ri);
    if (!rows_inner) kk = pack_reduce_loops(c, &loops, -1, 1);
    c->ub.index_mode = true;
    tc_uop *row = ix(c, TC_OP_ADD, ix(c, TC_OP_MUL, t, ic(c, ri)), d);
    if (c->mblock) row = ix(c, TC_OP_ADD, ix(c, TC_OP_MUL, c->mb, ic(c, c->mblock)), row);
    c->idx[i] = tc_ub_alu(&c->ub, TC_OP_WHERE, c->idt, 3, ix(c, TC_OP_CMPLT, row, ic(c, n)), row, ic(c, n - 1));
    tc_uop *at = kk ? ix(c, TC_OP_ADD, ix(c, TC_OP_MUL, ix(c, TC_OP_ADD, ix(c, TC_OP_MUL, t, ic(c, c->pack_k)), kk),
                                        ic(c, ri)), d)
                    : NULL;
    c->ub.index_mode = false;
    tc_uop *idx, *valid;
    if (at && tc_lw_st_index(c, c->row_load->st, &idx, &valid) == TC_OK)
        tc_ub_store(&c->ub, c->row_buf, at, tc_ub_load(&c->ub, c->globals[c->row_load->buf], idx, valid));
    else
        c->ub.failed = true;
    for (int l = 0; l < loops + 2; l++) tc_ub_end_range(&c->ub);
    memcpy(c->idx, saved, sizeof saved);
    c->ub.index_mode = true;
    c->row_off = c->mblock ? ix(c, TC_OP_MUL, c->mb, ic(c, -c->mblock)) : ic(c, 0);
    c->ub.index_mode = false;
}

TC_MUST_USE static tc_status lower_kernel(lower_ctx *c, tc_kernel_uops *k) {
    const tc_sched_item *it = c->it;
    for (int i = 0; i < it->n_bufs; i++) c->globals[i] = tc_ub_global(&c->ub, i, it->bufs[i]->dtype);
    if (it->has_parts) {
        tc_status st = tc_lw_rows_kernel(c, k);
        if (st == TC_OK) estimate(k, it);
        return st;
    }
    if (it->is_scatter || it->is_put) {
        tc_status st = tc_lw_scatter_kernel(c, k);
        if (st == TC_OK) estimate(k, it);
        return st;
    }
    c->n_reps = 1;
    choose_upcast(c);
    k->untiled = !c->tg->has_local;
    for (int i = 0; i < c->n_up; i++) k->untiled &= (bool)((it->reduce_axes >> c->up_axis[i]) & 1);
    k->copy_tile = !c->tg->has_local && !it->reduce_axes && c->n_up == 2;
    bool is_empty = false;
    int order[TC_MAX_DIMS];
    loop_order(c, order);
    if (!it->reduce_axes && !c->tg->has_local) { /* a map kernel: its loops and stores alone */
        tc_lw_kept_loops(c, k, order, it->ndim, it->ast, true);
        tc_status st = tc_ub_linearize(&c->ub);
        if (st == TC_OK) estimate(k, it);
        return st;
    }
    open_row_blocks(c, order);
    if (c->row_load) {
        if (c->kaxis >= 0) c->kb = block_range(c); /* the reduce's blocks outside the threads' loop */
        c->outer0 = c->ub.depth;
        emit_row_pack(c);
    }
    bool pack_due = false; /* the panel goes here, once the block loop is open */
    for (int o = 0; o < it->ndim; o++) {
        int a = order[o];
        if (c->kaxis >= 0 && !c->kb && c->ub.depth > c->outer0) c->kb = block_range(c);
        pack_due |= c->pack_load && a == c->pack_from; /* before the rows */
        if (pack_due && (c->kaxis < 0 || c->kb)) emit_pack(c), pack_due = false;
        if ((it->reduce_axes >> a) & 1) continue;
        is_empty |= it->full_shape[a] == 0;
        if (!c->tg->has_local) tc_lw_open_kept(c, k, a, true);
    }
    if (c->kaxis >= 0 && !c->kb) c->kb = block_range(c);
    if (pack_due) emit_pack(c);
    if (c->n_up) tc_lw_set_copy(c, 0);
    tc_status st = TC_OK;
    if (c->tg->has_local && is_empty) k->global_size[0] = 0; /* nothing to launch */
    else if (c->tg->has_local) st = tc_lw_lower_grid(c, k);
    if (st != TC_OK) return st;
    c->outer_depth = c->ub.depth;
    find_saved(c);
    tc_ast *sink = it->ast;
    if (!(c->tg->has_local && is_empty)) {
        tc_lw_prelower_reduces(c, sink); /* every reduce stage, in dependency order */
        tc_lw_lower_stores(c, sink, false);
        tc_lw_lower_stores(c, sink, true);
    }
    while (c->ub.depth > 0) tc_ub_end_range(&c->ub);
    st = tc_ub_linearize(&c->ub);
    if (st == TC_OK) estimate(k, it);
    return st;
}

tc_kernel_uops *tc_codegen(const tc_sched_item *it, const tc_target *target) {
    return tc_codegen_plan(it, target, NULL);
}

tc_kernel_uops *tc_codegen_plan(const tc_sched_item *it, const tc_target *target, const tc_kopt *plan) {
    tc_kernel_uops *k = tc_calloc(1, sizeof *k);
    lower_ctx *c = tc_calloc(1, sizeof *c);
    if (!k || !c) {
        tc_free(k);
        tc_free(c);
        return NULL;
    }
    tc_ub_init(&c->ub, k);
    c->it = it;
    c->tg = target;
    c->plan = plan;
    /* dead UOps go: GPU compilers warn about unused variables, and so do gcc
     * and clang -Wall on exported C (tc_export_c); a CPU tile whose stores
     * run in loops (epi_loop) leaves its copies' lanes and indices unused */
    c->ub.drop_dead = true;
    /* CPU: 64-bit indices always: with int32 (and -fwrapv) the C compiler
     * cannot prove that copies of an upcast read consecutive addresses, and
     * does not vectorize them */
    c->idt = target->has_local ? index_dtype(it) : TC_INT64;
    for (int d = 0; d < 3; d++) k->global_size[d] = k->local_size[d] = 1;
    c->base_epoch = c->epoch = tc_lw_next_epoch();
    k->index_dtype = c->idt;
    k->n_bufs = it->n_bufs;
    snprintf(k->name, sizeof k->name, "%s", it->name);
    c->globals = tc_arena_alloc(&k->arena, sizeof(tc_uop *) * (size_t)(it->n_bufs + 1));
    k->buf_dtypes = tc_arena_alloc(&k->arena, sizeof(tc_dtype) * (size_t)(it->n_bufs + 1));
    k->buf_written = tc_arena_alloc(&k->arena, (size_t)it->n_bufs + 1);
    tc_status st = TC_ERR_MEMORY;
    if (c->globals && k->buf_dtypes && k->buf_written) {
        for (int i = 0; i < it->n_bufs; i++) {
            k->buf_dtypes[i] = it->bufs[i]->dtype;
            k->buf_written[i] = i < it->n_outs;
        }
        st = lower_kernel(c, k);
    }
    tc_free(c);
    if (st != TC_OK) {
        if (tc_error_code() == TC_OK) tc_error_set(TC_ERR_MEMORY, "codegen: out of memory");
        tc_kernel_uops_free(k);
        return NULL;
    }
    return k;
}

void tc_kernel_uops_free(tc_kernel_uops *k) {
    if (!k) return;
    tc_arena_free(&k->arena);
    tc_free(k);
}

void tc_uops_dump(FILE *f, const tc_kernel_uops *k) {
    for (int i = 0; i < k->n_uops; i++) {
        const tc_uop *u = k->uops[i];
        fprintf(f, "%4d %-13s %-8s", u->id, tc_uop_names[u->op], tc_dtypes[u->dtype].name);
        if (u->op == TC_UOP_ALU) fprintf(f, " %-6s", tc_ops[u->alu].name);
        if (u->vcount > 1) fprintf(f, " x%d", u->vcount);
        if (u->op == TC_UOP_CONST) fprintf(f, " %g", u->value);
        if (u->op == TC_UOP_DEFINE_GLOBAL || u->op == TC_UOP_RANGE) fprintf(f, " arg=%lld", (long long)u->arg);
        if (u->op == TC_UOP_SPECIAL)
            fprintf(f, " %s%lld size=%lld", u->is_lane ? "lidx" : "gidx", (long long)u->arg,
                    (long long)u->ivalue);
        if (u->op == TC_UOP_DEFINE_LOCAL)
            fprintf(f, " temp%lld[%lld]", (long long)u->arg, (long long)u->ivalue);
        fprintf(f, " [");
        for (int j = 0; j < u->n_srcs; j++) fprintf(f, "%s%d", j ? "," : "", u->srcs[j]->id);
        fprintf(f, "]");
        if (tc_dtypes[u->dtype].is_float == false && u->op != TC_UOP_DEFINE_GLOBAL)
            fprintf(f, " range [%lld, %lld]", (long long)u->vmin, (long long)u->vmax);
        fprintf(f, "\n");
    }
}
