/* lower_gpu.c - the lowering of kernels for targets with work-groups
 * (has_local: OpenCL, CUDA), called from lower.c.
 *
 * Targets with work-groups (has_local) get the kept axes as work-group ids
 * (SPECIALs, see tc_lw_lower_grid). A kernel whose rows are long
 * enough is *grouped*: one work-group per row, its G lanes walk the row's
 * reduced elements with stride G, and each reduce becomes
 *   partials:  acc = init; for j: if (r < N) acc op= x[r = j*G + lane];
 *              temp_k[lane] = acc;
 *   combine:   if (lane < 1) { acc2 = init; for i < G: acc2 op= temp_k[i]; ... }
 * A reduce read only by the reduced-space stores is combined inside their
 * lane-0 block. A reduce read by a later stage (softmax's max and sum,
 * layernorm's mean and variance) is broadcast: lane 0 writes temp_k[0] and
 * every lane loads it. The builder puts the barriers in (one after each
 * phase of stores to a local buffer, before its loads).
 * Multi-reduce kernels use one local buffer per reduce (choice (a)): the
 * buffers cost G elements each (1 KiB for 256 float lanes, far below any
 * device's local memory) and no buffer is ever stored again after all lanes
 * read it, so no barrier guards a reuse. Reusing one buffer (choice (b))
 * would save local memory but needs one more barrier per extra reduce (the
 * next partials must wait until every lane has read the broadcast value).
 *
 * A GPU kernel whose innermost kept axis is read and written contiguously
 * takes tc_target.vec_width (4) elements of it per lane ("GPU vectors",
 * gv_*): its index is (group * lanes + lane) * 4 (grouped: group * 4),
 * loads of stride 1 along it are float4 loads, everything computed from
 * them is a float4 value (accumulators, and a grouped kernel's local arrays
 * of partials: one work-group reduces 4 columns), other values stay scalars
 * and are broadcast where they meet one, and every store writes a float4.
 * gv_choose decides, all or nothing per kernel, from the views and the ops
 * (gv_view_ok, gv_ops, gv_mask_ok); anything else keeps one element a lane.
 */
#include "lower.h"

#include <string.h>

/* grouped: lane l walks the row's reduced elements r = j*G + l, r < N (the
 * last R axis fastest); returns the scopes opened (the loop over j, the IF) */
int tc_lw_open_group_stage(lower_ctx *c) {
    tc_ub *ub = &c->ub;
    int64_t steps = ceil_div(c->red_n, c->lanes), inner = 1;
    int first = 0, opened = 0;
    while (!((c->it->reduce_axes >> first) & 1)) first++;
    tc_uop *j = steps > 1 ? tc_ub_range(ub, first, c->idt, steps) : ic(c, 0);
    opened += steps > 1;
    ub->index_mode = true;
    tc_uop *r = ix(c, TC_OP_ADD, ix(c, TC_OP_MUL, j, ic(c, c->lanes)), c->lane);
    for (int a = c->it->ndim - 1; a >= 0; a--) {
        if (!((c->it->reduce_axes >> a) & 1)) continue;
        int64_t n = c->it->full_shape[a];
        tc_uop *q = ix(c, TC_OP_IDIV, r, ic(c, inner));
        /* the outermost axis needs no % n where r < N (the gate below) */
        c->idx[a] = n == 1 ? ic(c, 0) : a == first ? q : ix(c, TC_OP_MOD, q, ic(c, n));
        inner *= n;
    }
    tc_uop *in = ix(c, TC_OP_CMPLT, r, ic(c, c->red_n));
    ub->index_mode = false;
    opened += tc_ub_if(ub, in);
    return opened;
}


/* ---- GPU vectors: gvl consecutive elements of the innermost kept axis per
 * lane (lower_grid decides, gv_choose says when). A value is a vector when
 * it reads that axis (a load of stride 1, or an op or reduce over such a
 * value); every other value stays a scalar and is broadcast where it meets a
 * vector (its constants become vector CONSTs, printed once). ---- */

/* whether AST node a is a vector in this kernel (false when not walked) */
bool tc_lw_gv_is_vec(const lower_ctx *c, const tc_ast *a) {
    for (int i = 0; i < c->n_gv; i++)
        if (c->gv_node[i] == a) return c->gv_is_vec[i];
    return false;
}

/* an op with some vector operand takes all of them as vectors, except a
 * WHERE's scalar condition (which picks between whole vectors) */
void tc_lw_gv_operands(lower_ctx *c, tc_op op, tc_uop **s, int n) {
    bool any = false;
    for (int i = 0; i < n; i++) any |= s[i] && s[i]->vcount > 1;
    for (int i = op == TC_OP_WHERE; i < n && any; i++) s[i] = tc_ub_broadcast(&c->ub, s[i], c->gvl);
}

/* the accumulator of reduce a: a vector of gvl partials when a is a vector */
tc_uop *tc_lw_gv_acc(lower_ctx *c, const tc_ast *a, tc_uop *init) {
    if (c->gvl <= 1 || !tc_lw_gv_is_vec(c, a)) return tc_ub_acc(&c->ub, init);
    return tc_ub_acc_vec(&c->ub, tc_ub_broadcast(&c->ub, init, c->gvl), c->gvl);
}

static group_red *red_of(lower_ctx *c, const tc_ast *a) {
    for (int i = 0; i < c->n_reds; i++)
        if (c->reds[i].ast == a) return &c->reds[i];
    return NULL;
}

/* grouped: lane 0 folds the G partials of r (the caller opened its block) */
static tc_uop *group_combine(lower_ctx *c, group_red *r) {
    tc_ub *ub = &c->ub;
    tc_uop *acc = tc_lw_gv_acc(c, r->ast, tc_lw_reduce_init(c, r->ast->op, r->ast->dtype));
    tc_uop *i = tc_ub_range(ub, -1, c->idt, c->lanes);
    tc_uop *part = tc_ub_load(ub, r->temp, i, NULL); /* a barrier goes before the block */
    if (acc && part) tc_ub_acc_update(ub, tc_lw_acc_op(r->ast), acc, part);
    tc_ub_end_range(ub);
    return acc;
}

/* grouped: the partials stage of reduce a (after the reduces it reads), the
 * store of each lane's partial, and for a broadcast reduce the combine by
 * lane 0 into temp[0] and every lane's load of it */
void tc_lw_group_partials(lower_ctx *c, tc_ast *a) {
    group_red *r = red_of(c, a);
    tc_ub *ub = &c->ub;
    if (!r) {
        TC_INTERNAL("grouped kernel %s: a reduce was not found by the analysis", c->it->name);
        ub->failed = true;
        return;
    }
    if (r->is_done) return;
    r->is_done = true;
    tc_lw_prelower_reduces(c, a->srcs[0]);
    tc_uop *acc = tc_lw_gv_acc(c, a, tc_lw_reduce_init(c, a->op, a->dtype));
    int opened = tc_lw_open_stage(c, true);
    tc_uop *x = tc_lw_lower(c, a->srcs[0]);
    if (acc && x) tc_ub_acc_update(ub, tc_lw_acc_op(a), acc, x);
    tc_lw_close_stage(c, opened);
    r->temp = tc_ub_define_local(ub, a->dtype, c->lanes);
    if (r->temp && acc) r->temp->vcount = acc->vcount; /* GPU vectors: of partials */
    tc_ub_store(ub, r->temp, c->lane, acc);
    if (!r->is_bcast) return;
    tc_uop *zero = ic(c, 0);
    tc_ub_if(ub, ix(c, TC_OP_CMPLT, c->lane, ic(c, 1)));
    tc_ub_store(ub, r->temp, zero, group_combine(c, r));
    tc_ub_end_if(ub);
    c->epoch = tc_lw_next_epoch();
    r->value = tc_ub_load(ub, r->temp, zero, NULL);
}

/* grouped: the value of reduce a where it is read */
tc_uop *tc_lw_group_value(lower_ctx *c, tc_ast *a) {
    group_red *r = red_of(c, a);
    if (!r || !r->is_done || (!r->is_bcast && !c->gate)) {
        TC_INTERNAL("grouped kernel %s: a reduce is read before its partials or off lane 0",
                    c->it->name);
        c->ub.failed = true;
        return NULL;
    }
    if (r->is_bcast) return r->value;
    if (r->value_gate != c->gate) {
        r->value = group_combine(c, r);
        r->value_gate = c->gate;
    }
    return r->value;
}


/* ---- work-groups (has_local targets) ---- */

/* grouped analysis: finds the reduces under a and marks those that every
 * lane reads (under a full-space store, or under another reduce's input) */
static void mark_reads(lower_ctx *c, tc_ast *a, bool all_lanes) {
    int m = all_lanes ? c->mark_all : c->mark_one;
    if (a->mark == c->mark_all || a->mark == m) return;
    a->mark = m;
    if (tc_op_is_reduce(a->op)) {
        group_red *r = red_of(c, a);
        if (!r && c->n_reds == TC_UB_MAX_LOCALS) {
            c->has_many_reds = true;
            return;
        }
        if (!r) r = &c->reds[c->n_reds++], r->ast = a;
        r->is_bcast |= all_lanes;
        all_lanes = true; /* its partials run on every lane */
    }
    for (int i = 0; i < a->n_srcs; i++) mark_reads(c, a->srcs[i], all_lanes);
}

/* decides whether reduces split across a work-group, and its lanes G: the
 * power of two covering a row (N reduced elements), at most
 * GROUP_MAX_LANES and what the device allows (lanes, local memory) */
static bool choose_group(lower_ctx *c) {
    const tc_target *t = c->tg;
    int64_t n = 1, g = 1;
    for (int a = 0; a < c->it->ndim; a++)
        if ((c->it->reduce_axes >> a) & 1) n *= c->it->full_shape[a];
    if (!c->it->reduce_axes || n < GROUP_MIN_N) return false;
    c->mark_all = tc_lw_next_epoch();
    c->mark_one = tc_lw_next_epoch();
    tc_ast *sink = c->it->ast;
    for (int i = 0; i < sink->n_srcs; i++)
        mark_reads(c, sink->srcs[i]->srcs[0], tc_lw_store_is_full(c, sink->srcs[i]));
    if (c->has_many_reds || c->n_reds == 0) return false;
    while (g < n && g < GROUP_MAX_LANES) g *= 2;
    while (g > 1 && (g > t->lanes_max || g > t->local_max[0] || g * 8 * c->n_reds > t->shared_max))
        g /= 2;
    c->lanes = g;
    c->red_n = n;
    return g >= 2;
}

/* where each kept axis goes: grid dimension 0 takes the innermost kept axis
 * (in groups of `lanes` when lanes split it), 1 the next, 2 the ones outside
 * merged; outer axes that do not fit the grid become loops */
typedef struct {
    int dim[TC_MAX_DIMS]; /* per axis: grid dimension 0..2, -1 for a loop, -2 unused */
    int64_t size[3];      /* work-groups per grid dimension */
    bool has_loops;       /* some kept axis is a loop */
} grid_plan;

static bool plan_grid(const lower_ctx *c, int64_t lanes, grid_plan *p) {
    const tc_sched_item *it = c->it;
    int kept[TC_MAX_DIMS], m = 0;
    *p = (grid_plan){.size = {1, 1, 1}};
    for (int a = 0; a < it->ndim; a++) {
        p->dim[a] = -2;
        if (!((it->reduce_axes >> a) & 1) && it->full_shape[a] > 1) kept[m++] = a;
    }
    bool is_looping = false; /* an axis of dimension 2 did not fit: the ones outside loop too */
    for (int i = m - 1; i >= 0; i--) {
        int a = kept[i], d = i == m - 1 ? 0 : i == m - 2 ? 1 : 2;
        int64_t n = d == 0 ? ceil_div(it->full_shape[a], lanes) : it->full_shape[a];
        bool fits = !(d == 2 && is_looping) && n <= c->tg->global_max[d] / p->size[d];
        if (!fits && d == 0) return false;
        is_looping |= !fits && d == 2;
        p->dim[a] = fits ? d : -1;
        p->has_loops |= !fits;
        if (fits) p->size[d] *= n;
    }
    return true;
}

/* GPU vectors, legality: a vector load or store has one view, stride 1 along
 * the vector axis with no mask cutting it, float32 elements (loads also
 * uint8 and int32, which only a cast to float32 may read: gv_mask_ok), and
 * an index that is a multiple of the width (its offset and its strides
 * along every other axis are): with buffers at least 16-byte aligned (every
 * runtime's allocations) the vector is aligned, as CUDA's float4 (and
 * uchar4, int4) accesses must be */
static bool gv_view_ok(const lower_ctx *c, const tc_st *st, tc_dtype dt, bool is_store) {
    bool dt_ok = dt == TC_FLOAT32 || (!is_store && (dt == TC_UINT8 || dt == TC_INT32));
    if (tc_st_stride(st, c->gv_axis) != 1 || !dt_ok) return false;
    const tc_view *v = &st->views[0];
    if (v->offset % c->gvl) return false;
    for (int a = 0; a < v->ndim; a++)
        if (a != c->gv_axis && v->shape[a] > 1 && v->strides[a] % c->gvl) return false;
    return true;
}

/* the float32 ops a vector may go through: those OpenCL C has for float4
 * and the CUDA dialect's prelude defines (render/cuda.c); masks (gv_mask_ok)
 * have their own rules */
static const bool gv_ops[TC_OP_COUNT] = {
    [TC_OP_ADD] = true,    [TC_OP_MUL] = true,        [TC_OP_NEG] = true,
    [TC_OP_RECIP] = true,  [TC_OP_MAX] = true,        [TC_OP_EXP2] = true,
    [TC_OP_LOG2] = true,   [TC_OP_SIN] = true,        [TC_OP_SQRT] = true,
    [TC_OP_MULACC] = true, [TC_OP_REDUCE_SUM] = true, [TC_OP_REDUCE_MAX] = true,
};

/* vector masks: float comparisons (a vector of bools), AND/OR of two such,
 * a float WHERE on one (or on a scalar bool) and a mask's cast to float
 * (relu's gradient, g * (0 < x)); casts of uint8 and int32 loads to float;
 * v[i]: operand i is a vector */
static bool gv_mask_ok(const tc_ast *a, const bool *v) {
    tc_dtype in = a->n_srcs ? a->srcs[0]->dtype : TC_DTYPE_COUNT;
    if (a->op == TC_OP_CMPLT || a->op == TC_OP_CMPNE)
        return in == TC_FLOAT32 && a->srcs[1]->dtype == TC_FLOAT32;
    if (a->op == TC_OP_AND || a->op == TC_OP_OR) return a->dtype == TC_BOOL && v[0] && v[1];
    if (a->op == TC_OP_WHERE) return a->dtype == TC_FLOAT32 && in == TC_BOOL;
    if (a->op == TC_OP_CAST)
        return a->dtype == TC_FLOAT32 && (in == TC_BOOL || in == TC_UINT8 || in == TC_INT32);
    return false;
}

/* walks the values under a: records which are vectors (gv_node), clears *ok
 * when one cannot be (a load read along the axis with another stride, a mask
 * on it, an op with no vector form, too many nodes) */
static bool gv_walk(lower_ctx *c, const tc_ast *a, bool *ok) {
    for (int i = 0; i < c->n_gv; i++)
        if (c->gv_node[i] == a) return c->gv_is_vec[i];
    if (a->op == TC_OP_GATHER) return *ok = false; /* a load per lane (lower_index.c) */
    if (c->n_gv == GV_MAX_NODES) return *ok = false;
    bool vec = false;
    if (a->op == TC_OP_LOAD || a->op == TC_OP_CONST) {
        int64_t st = tc_st_stride(a->st, c->gv_axis);
        vec = st != 0;
        *ok &= st == 0 ||
               (a->op == TC_OP_LOAD && gv_view_ok(c, a->st, c->it->bufs[a->buf]->dtype, false));
    } else {
        bool v[3] = {false, false, false};
        for (int i = 0; i < a->n_srcs && *ok; i++) vec |= v[i] = gv_walk(c, a->srcs[i], ok);
        *ok &= !vec || (gv_ops[a->op] && a->dtype == TC_FLOAT32) || gv_mask_ok(a, v);
    }
    if (c->n_gv == GV_MAX_NODES) return *ok = false; /* the sources filled the table */
    c->gv_node[c->n_gv] = a;
    c->gv_is_vec[c->n_gv++] = vec;
    return vec;
}

/* the elements per lane of a GPU kernel along its innermost kept
 * axis: the target's vector width where that divides the axis and every
 * store writes it contiguously (GPU vectors above), else 1 */
static int gv_choose(lower_ctx *c, int inner) {
    int w = c->tg->vec_width;
    c->n_gv = 0;
    if (c->it->has_parts) return 1; /* a row kernel: one row a lane, the parts in loops */
    if (w <= 1 || inner < 0 || tc_flag_get(TC_FLAG_NOOPT) || c->it->full_shape[inner] % w)
        return 1;
    /* grouped: the local buffers hold vectors (choose_group counted 8 bytes an element) */
    if (c->is_grouped && c->lanes * w * 8 * c->n_reds > c->tg->shared_max) return 1;
    c->gvl = w;
    c->gv_axis = inner;
    bool ok = true;
    const tc_ast *sink = c->it->ast;
    for (int i = 0; i < sink->n_srcs && ok; i++) {
        const tc_ast *st = sink->srcs[i];
        ok = gv_view_ok(c, st->st, c->it->bufs[st->buf]->dtype, true) && st->dtype == TC_FLOAT32;
        if (ok) gv_walk(c, st->srcs[0], &ok);
    }
    if (!ok) c->n_gv = 0;
    return ok ? w : 1;
}

/* GPU: work-group ids (and lanes) index the kept axes, looped axes open
 * their loops, and an ungrouped kernel whose lanes overrun the innermost
 * axis gates everything in an IF block (left open to the end) */
TC_MUST_USE tc_status tc_lw_lower_grid(lower_ctx *c, tc_kernel_uops *k) {
    const tc_sched_item *it = c->it;
    tc_ub *ub = &c->ub;
    grid_plan p;
    int inner = -1;
    for (int a = 0; a < it->ndim; a++)
        if (!((it->reduce_axes >> a) & 1) && it->full_shape[a] > 1) inner = a;
    c->is_grouped = choose_group(c) && plan_grid(c, 1, &p) && !p.has_loops;
    c->gvl = gv_choose(c, inner);
    if (c->is_grouped && c->gvl > 1) plan_grid(c, c->gvl, &p); /* a group takes gvl rows */
    int64_t lanes = c->is_grouped ? c->lanes : 1;
    if (!c->is_grouped && inner >= 0) {
        int64_t cap = LANES_MAX < c->tg->lanes_max ? LANES_MAX : c->tg->lanes_max;
        cap = cap < c->tg->local_max[0] ? cap : c->tg->local_max[0];
        while (lanes < it->full_shape[inner] / c->gvl && lanes * 2 <= cap) lanes *= 2;
    }
    if (!c->is_grouped && !plan_grid(c, lanes * c->gvl, &p))
        return tc_error_set(TC_ERR_DEVICE, "codegen of %s: %lld work-groups exceed the grid's %lld",
                            it->name, (long long)ceil_div(it->full_shape[inner], lanes * c->gvl),
                            (long long)c->tg->global_max[0]);
    for (int d = 0; d < 3; d++) k->global_size[d] = p.size[d], k->local_size[d] = d ? 1 : lanes;
    ub->index_mode = true;
    tc_uop *gid[3], *lane = lanes > 1 ? tc_ub_special(ub, 0, true, c->idt, lanes) : NULL;
    for (int d = 0; d < 3; d++)
        gid[d] = p.size[d] > 1 ? tc_ub_special(ub, d, false, c->idt, p.size[d]) : ic(c, 0);
    int64_t inner2 = 1; /* product of the dimension-2 axes inside the current one */
    tc_uop *gate = tc_ub_iconst(ub, TC_BOOL, 1);
    for (int a = it->ndim - 1; a >= 0; a--) {
        int64_t n = it->full_shape[a];
        if ((it->reduce_axes >> a) & 1 || p.dim[a] == -1) continue;
        if (p.dim[a] == -2) {
            c->idx[a] = ic(c, 0);
        } else if (p.dim[a] == 1) {
            c->idx[a] = gid[1];
        } else if (p.dim[a] == 2) { /* dimension 2 holds several axes, the innermost fastest */
            c->idx[a] = ix(c, TC_OP_MOD, ix(c, TC_OP_IDIV, gid[2], ic(c, inner2)), ic(c, n));
            inner2 *= n;
        } else if (c->is_grouped) {
            c->idx[a] = c->gvl > 1 ? ix(c, TC_OP_MUL, gid[0], ic(c, c->gvl)) : gid[0];
        } else { /* lanes split the innermost axis (gvl elements each); the ones
                    past its end do nothing */
            tc_uop *e = gid[0];
            if (lane) e = ix(c, TC_OP_ADD, ix(c, TC_OP_MUL, gid[0], ic(c, lanes)), lane);
            c->idx[a] = c->gvl > 1 ? ix(c, TC_OP_MUL, e, ic(c, c->gvl)) : e;
            if (lane) gate = ix(c, TC_OP_CMPLT, e, ic(c, n / c->gvl));
        }
    }
    ub->index_mode = false;
    if (c->is_grouped) c->lane = lane;
    for (int a = 0; a < it->ndim; a++)
        if (p.dim[a] == -1) c->idx[a] = tc_ub_range(ub, a, c->idt, it->full_shape[a]);
    tc_ub_if(ub, gate);
    return ub->failed ? tc_error_or(TC_ERR_MEMORY) : TC_OK;
}
