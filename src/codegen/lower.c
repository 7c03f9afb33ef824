/* lower.c - kernel AST -> UOps.
 *
 * The loop space of the item (full shape F, reduced axes R) becomes: one
 * RANGE per kept axis (size-1 axes are the constant 0), then, per store,
 * its reduce stages (DEFINE_ACC, RANGEs over R, accumulate, ENDRANGE) and the
 * store itself, in the reduced space or inside a store stage over R.
 * Buffer indices come from each LOAD/STORE/CONST tracker: the last view maps
 * loop indices to an offset and a mask; earlier views re-split that offset.
 *
 * Targets with work-groups (has_local) get the kept axes as work-group ids
 * (gpu.c-style SPECIALs, see map_kept_axes). A kernel whose rows are long
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
#include "codegen.h"

#include <math.h>
#include <string.h>

#define GROUP_MIN_N 16    /* fewest reduced elements per row worth a grouped reduce */
#define GROUP_MAX_LANES 256 /* most lanes of a grouped reduce */
#define LANES_MAX 128     /* most lanes of an ungrouped kernel's work-group */
#define GV_MAX_NODES 512  /* most AST nodes of a GPU vector kernel */

/* a reduce of a grouped kernel */
typedef struct {
    tc_ast *ast;       /* the REDUCE_* node */
    bool is_bcast;     /* read by every lane (by a later stage), not only by lane 0 */
    bool is_done;      /* partials stored (and broadcast when is_bcast) */
    tc_uop *temp;      /* local buffer of G partials */
    tc_uop *value;     /* the combined value: temp_k[0] (broadcast) or lane 0's */
    int value_gate;    /* not broadcast: the lane-0 block value belongs to */
} group_red;

typedef struct {
    tc_ub ub;                  /* the UOp builder */
    const tc_sched_item *it;   /* the kernel */
    tc_uop *idx[TC_MAX_DIMS];  /* current loop index per axis; NULL outside its loop */
    tc_uop **globals;          /* DEFINE_GLOBAL per slot */
    tc_dtype idt;              /* index dtype */
    int base_epoch;            /* first stage number of this lowering */
    int epoch;                 /* current stage number */
    int outer_depth;           /* loop depth of the kept-axes loops */
    const tc_target *tg;       /* what the target offers */
    const tc_kopt *plan;       /* the optimizer's plan to follow; NULL: opt.c chooses */
    bool is_grouped;           /* reduces split across the lanes of a work-group */
    int64_t lanes;             /* grouped: lanes per work-group (G) */
    int64_t red_n;             /* grouped: reduced elements per row (N) */
    tc_uop *lane;              /* grouped: this lane's id */
    group_red reds[TC_UB_MAX_LOCALS]; /* grouped: one per reduce */
    int n_reds;                /* entries of reds */
    bool has_many_reds;        /* more reduces than reds can hold: not grouped */
    int mark_all, mark_one;    /* grouped analysis: marks for "read by all lanes / lane 0" */
    int gate;                  /* grouped: serial of the open lane-0 block, 0 = none */
    int n_gates;               /* grouped: lane-0 blocks opened so far */
    int n_up;                  /* upcast (CPU, opt.c's plan): axes computed UP at a time */
    int up_axis[3];            /* upcast: those axes (a reduced one last: the split) */
    int64_t up_amt[3];         /* upcast: how many at a time */
    bool up_clamp[3];          /* upcast: the amount does not divide the axis */
    tc_uop *up_base[3];        /* upcast: loop index * amount (a split: inside its stage) */
    int n_reps;                /* upcast: copies of the loop body (product of amounts) */
    int64_t split;             /* upcast: partial accumulators per reduce (1: no split) */
    int vl;                    /* upcast: lanes of each partial accumulator (vectors, has_vec
                                  targets; 1: scalars); a split steps by split * vl */
    int vj;                    /* upcast: lanes of the tile column (a kept axis, last in the
                                  plan) in reduce stages; 1: scalars */
    bool in_vj;                /* lowering a reduce stage's vector copies of the column */
    int rep;                   /* upcast: the copy being lowered */
    struct rmemo *rbuckets[4096]; /* upcast: (AST node, copy) -> UOp */
    int gvl;                   /* GPU vectors: elements of axis gv_axis per lane (1: scalar) */
    int gv_axis;               /* GPU vectors: the innermost kept axis */
    const tc_ast *gv_node[GV_MAX_NODES]; /* GPU vectors: the AST nodes walked ... */
    bool gv_is_vec[GV_MAX_NODES];        /* ... and whether each is a vector */
    int n_gv;                  /* GPU vectors: entries of gv_node */
} lower_ctx;

/* a lowered value of one copy of an upcast kernel's body */
typedef struct rmemo {
    struct rmemo *next; /* chain */
    const tc_ast *a;    /* key: the AST node ... */
    int rep;            /* ... in this copy */
    tc_uop *u;          /* its UOp */
    int epoch;          /* the stage that computed it */
} rmemo;

static int epoch_counter; /* stage numbers are unique across lowerings (under the API lock) */

/* (index, valid) of tracker st at the current loop indices */
static tc_status st_to_uops(lower_ctx *c, const tc_st *st, tc_uop **idx_out, tc_uop **valid_out) {
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

static tc_uop *reduce_init(lower_ctx *c, tc_op op, tc_dtype dt) {
    if (op == TC_OP_REDUCE_SUM || dt == TC_BOOL || dt == TC_UINT8) return tc_ub_const(&c->ub, dt, 0, 0);
    switch (dt) {
    case TC_INT32: return tc_ub_iconst(&c->ub, dt, INT32_MIN);
    case TC_INT64: return tc_ub_iconst(&c->ub, dt, INT64_MIN);
    case TC_FLOAT32:
    case TC_FLOAT16: return tc_ub_const(&c->ub, dt, -INFINITY, 0);
    case TC_UINT8:
    case TC_BOOL:
    case TC_DTYPE_COUNT: break;
    }
    return tc_ub_const(&c->ub, dt, 0, 0);
}

static tc_uop *lower(lower_ctx *c, tc_ast *a);
static void prelower_reduces(lower_ctx *c, tc_ast *a);

static int64_t ceil_div(int64_t a, int64_t b) {
    return (a + b - 1) / b;
}

/* index math of the GPU parts: constants and ops in the index dtype (CMPLT: bool) */
static tc_uop *ic(lower_ctx *c, int64_t v) {
    return tc_ub_iconst(&c->ub, c->idt, v);
}

static tc_uop *ix(lower_ctx *c, tc_op op, tc_uop *a, tc_uop *b) {
    return tc_ub_alu(&c->ub, op, op == TC_OP_CMPLT ? TC_BOOL : c->idt, 2, a, b, NULL);
}

/* grouped: lane l walks the row's reduced elements r = j*G + l, r < N (the
 * last R axis fastest); returns the scopes opened (the loop over j, the IF) */
static int open_group_stage(lower_ctx *c) {
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

/* opens a loop over each R axis of the kernel (size-1 axes are index 0); in
 * a reduce stage (is_reduce) a split axis steps by its amount and each copy
 * sets its index (set_copy) */
static int open_stage(lower_ctx *c, bool is_reduce) {
    int opened = 0;
    c->epoch = ++epoch_counter;
    if (c->is_grouped) return open_group_stage(c);
    for (int a = 0; a < c->it->ndim; a++) {
        if (!((c->it->reduce_axes >> a) & 1)) continue;
        if (c->it->full_shape[a] == 1) {
            c->idx[a] = tc_ub_iconst(&c->ub, c->idt, 0);
            continue;
        }
        bool is_split = is_reduce && c->split * c->vl > 1 && c->up_axis[c->n_up - 1] == a;
        int64_t step = is_split ? c->split * c->vl : 1;
        c->idx[a] = tc_ub_range(&c->ub, a, c->idt, c->it->full_shape[a] / step);
        opened++;
        if (!is_split) continue;
        c->ub.index_mode = true;
        c->up_base[c->n_up - 1] = ix(c, TC_OP_MUL, c->idx[a], ic(c, step));
        c->ub.index_mode = false;
    }
    return opened;
}

static void close_stage(lower_ctx *c, int opened) {
    while (opened--) tc_ub_end_range(&c->ub);
    for (int a = 0; a < c->it->ndim; a++)
        if ((c->it->reduce_axes >> a) & 1) c->idx[a] = NULL;
    if (c->split * c->vl > 1) c->up_base[c->n_up - 1] = NULL;
    c->epoch = ++epoch_counter;
}

static tc_op acc_op(const tc_ast *a) {
    return a->op == TC_OP_REDUCE_SUM ? (a->dtype == TC_BOOL ? TC_OP_OR : TC_OP_ADD) : TC_OP_MAX;
}

/* ---- GPU vectors: gvl consecutive elements of the innermost kept axis per
 * lane (lower_grid decides, gv_choose says when). A value is a vector when
 * it reads that axis (a load of stride 1, or an op or reduce over such a
 * value); every other value stays a scalar and is broadcast where it meets a
 * vector (its constants become vector CONSTs, printed once). ---- */

/* whether AST node a is a vector in this kernel (false when not walked) */
static bool gv_is_vec(const lower_ctx *c, const tc_ast *a) {
    for (int i = 0; i < c->n_gv; i++)
        if (c->gv_node[i] == a) return c->gv_is_vec[i];
    return false;
}

/* an op with some vector operand takes all of them as vectors, except a
 * WHERE's scalar condition (which picks between whole vectors) */
static void gv_operands(lower_ctx *c, tc_op op, tc_uop **s, int n) {
    bool any = false;
    for (int i = 0; i < n; i++) any |= s[i] && s[i]->vcount > 1;
    for (int i = op == TC_OP_WHERE; i < n && any; i++) s[i] = tc_ub_broadcast(&c->ub, s[i], c->gvl);
}

/* the accumulator of reduce a: a vector of gvl partials when a is a vector */
static tc_uop *gv_acc(lower_ctx *c, const tc_ast *a, tc_uop *init) {
    if (c->gvl <= 1 || !gv_is_vec(c, a)) return tc_ub_acc(&c->ub, init);
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
    tc_uop *acc = gv_acc(c, r->ast, reduce_init(c, r->ast->op, r->ast->dtype));
    tc_uop *i = tc_ub_range(ub, -1, c->idt, c->lanes);
    tc_uop *part = tc_ub_load(ub, r->temp, i, NULL); /* a barrier goes before the block */
    if (acc && part) tc_ub_acc_update(ub, acc_op(r->ast), acc, part);
    tc_ub_end_range(ub);
    return acc;
}

/* grouped: the partials stage of reduce a (after the reduces it reads), the
 * store of each lane's partial, and for a broadcast reduce the combine by
 * lane 0 into temp[0] and every lane's load of it */
static void group_partials(lower_ctx *c, tc_ast *a) {
    group_red *r = red_of(c, a);
    tc_ub *ub = &c->ub;
    if (!r) {
        TC_INTERNAL("grouped kernel %s: a reduce was not found by the analysis", c->it->name);
        ub->failed = true;
        return;
    }
    if (r->is_done) return;
    r->is_done = true;
    prelower_reduces(c, a->srcs[0]);
    tc_uop *acc = gv_acc(c, a, reduce_init(c, a->op, a->dtype));
    int opened = open_stage(c, true);
    tc_uop *x = lower(c, a->srcs[0]);
    if (acc && x) tc_ub_acc_update(ub, acc_op(a), acc, x);
    close_stage(c, opened);
    r->temp = tc_ub_define_local(ub, a->dtype, c->lanes);
    if (r->temp && acc) r->temp->vcount = acc->vcount; /* GPU vectors: of partials */
    tc_ub_store(ub, r->temp, c->lane, acc);
    if (!r->is_bcast) return;
    tc_uop *zero = ic(c, 0);
    tc_ub_if(ub, ix(c, TC_OP_CMPLT, c->lane, ic(c, 1)));
    tc_ub_store(ub, r->temp, zero, group_combine(c, r));
    tc_ub_end_if(ub);
    c->epoch = ++epoch_counter;
    r->value = tc_ub_load(ub, r->temp, zero, NULL);
}

/* grouped: the value of reduce a where it is read */
static tc_uop *group_value(lower_ctx *c, tc_ast *a) {
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

static void rmemo_put(lower_ctx *c, const tc_ast *a, int rep, tc_uop *u, int epoch) {
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
static void set_copy(lower_ctx *c, int r) {
    c->rep = r;
    for (int i = c->n_up - 1; i >= 0; i--) {
        int64_t off = r % c->up_amt[i];
        r /= (int)c->up_amt[i];
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
static tc_uop *copy_gate(lower_ctx *c, int r) {
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
static int vec_lanes_now(const lower_ctx *c) {
    if (c->vl > 1 && c->up_base[c->n_up - 1]) return c->vl;
    return c->in_vj ? c->vj : 0;
}

/* takes opt.c's plan: kept axes first, a split reduced axis last */
static void choose_upcast(lower_ctx *c) {
    tc_kopt p = {0};
    if (c->plan && !c->tg->has_local) p = *c->plan;
    else tc_opt_choose(c->it, c->tg, &p);
    c->n_reps = 1;
    c->split = 1;
    c->vl = c->vj = 1;
    for (int i = 0; i < p.n; i++) {
        int a = p.axis[i];
        int64_t amt = p.amt[i];
        bool red = (c->it->reduce_axes >> a) & 1;
        bool vec = i == p.n - 1 && p.lanes > 1 && p.lanes <= 16 && !(p.lanes & (p.lanes - 1)) &&
                   c->tg->has_vec && amt % p.lanes == 0 && tc_opt_vec_ok(c->it, a, !red);
        if (vec && red) {
            c->vl = p.lanes;
            amt /= p.lanes;
        } else if (vec && c->it->full_shape[a] % amt == 0) {
            c->vj = p.lanes;
        }
        c->up_axis[c->n_up] = a;
        c->up_amt[c->n_up] = amt;
        c->up_clamp[c->n_up++] = c->it->full_shape[a] % p.amt[i] != 0;
        c->n_reps *= (int)amt;
        if (red) c->split = amt;
    }
}

static bool is_upcast(const lower_ctx *c, int a) {
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
        accs[r] = r % jd % c->vj ? NULL : tc_ub_acc_vec(&c->ub, reduce_init(c, a->op, a->dtype), c->vj);
    int opened = open_stage(c, true);
    c->in_vj = true;
    for (int r = 0; r < c->n_reps; r += c->vj) {
        set_copy(c, r);
        tc_uop *x = lower(c, a->srcs[0]);
        if (accs[r] && x) tc_ub_acc_update(&c->ub, acc_op(a), accs[r], x);
        else c->ub.failed = true;
    }
    c->in_vj = false;
    close_stage(c, opened);
    tc_uop *mine = NULL;
    for (int r = 0; r < c->n_reps; r++) {
        int lane = r % jd % c->vj;
        tc_uop *v = tc_ub_gep(&c->ub, accs[r - lane], lane);
        rmemo_put(c, a, r, v, c->epoch);
        if (r == me) mine = v;
    }
    set_copy(c, me);
    return mine;
}

static tc_uop *lower_reduce_copies(lower_ctx *c, tc_ast *a) {
    if (c->vj > 1) return lower_reduce_vj(c, a);
    int me = c->rep;
    tc_uop **accs = tc_arena_alloc(&c->ub.k->arena, sizeof(tc_uop *) * (size_t)c->n_reps);
    if (!accs) {
        c->ub.failed = true;
        return NULL;
    }
    for (int r = 0; r < c->n_reps; r++) accs[r] = tc_ub_acc_vec(&c->ub, reduce_init(c, a->op, a->dtype), c->vl);
    int opened = open_stage(c, true);
    for (int r = 0; r < c->n_reps; r++) {
        set_copy(c, r);
        tc_uop *x = lower(c, a->srcs[0]);
        if (accs[r] && x) tc_ub_acc_update(&c->ub, acc_op(a), accs[r], x);
    }
    close_stage(c, opened);
    int s = (int)c->split;
    for (int r0 = 0; r0 < c->n_reps; r0 += s) {
        for (int w = 1; w < s; w *= 2)
            for (int r = r0; r + w < r0 + s; r += 2 * w)
                accs[r] = tc_ub_alu(&c->ub, acc_op(a), a->dtype, 2, accs[r], accs[r + w], NULL);
        tc_uop *lanes[64]; /* a vector's lanes, folded pairwise */
        for (int l = 0; l < c->vl; l++) lanes[l] = tc_ub_gep(&c->ub, accs[r0], l);
        for (int w = 1; w < c->vl; w *= 2)
            for (int l = 0; l + w < c->vl; l += 2 * w)
                lanes[l] = tc_ub_alu(&c->ub, acc_op(a), a->dtype, 2, lanes[l], lanes[l + w], NULL);
        accs[r0] = lanes[0];
        for (int r = r0; r < r0 + s; r++) rmemo_put(c, a, r, accs[r0], c->epoch);
    }
    set_copy(c, me);
    return accs[me - me % s];
}

static tc_uop *lower_reduce(lower_ctx *c, tc_ast *a) {
    if (c->is_grouped) return group_value(c, a);
    if (c->ub.depth != c->outer_depth) {
        TC_INTERNAL("a reduce was reached inside another stage");
        c->ub.failed = true;
        return NULL;
    }
    prelower_reduces(c, a->srcs[0]); /* earlier stages: reduces this one reads */
    if (c->n_reps > 1 || c->vl > 1) return lower_reduce_copies(c, a);
    tc_uop *acc = gv_acc(c, a, reduce_init(c, a->op, a->dtype));
    int opened = open_stage(c, true);
    tc_uop *x = lower(c, a->srcs[0]);
    if (acc && x) tc_ub_acc_update(&c->ub, acc_op(a), acc, x);
    close_stage(c, opened);
    return acc;
}

static tc_uop *lower_leaf(lower_ctx *c, tc_ast *a) {
    tc_uop *idx, *valid;
    if (st_to_uops(c, a->st, &idx, &valid) != TC_OK) {
        c->ub.failed = true;
        return NULL;
    }
    int lanes = vec_lanes_now(c);
    if (a->op == TC_OP_LOAD && lanes && tc_st_stride(a->st, c->up_axis[c->n_up - 1]) == 1)
        return tc_ub_load_vec(&c->ub, c->globals[a->buf], idx, valid, lanes);
    if (a->op == TC_OP_LOAD && c->gvl > 1 && tc_st_stride(a->st, c->gv_axis) == 1)
        return tc_ub_load_vec(&c->ub, c->globals[a->buf], idx, valid, c->gvl);
    if (a->op == TC_OP_LOAD) return tc_ub_load(&c->ub, c->globals[a->buf], idx, valid);
    tc_uop *k = tc_ub_const(&c->ub, a->dtype, a->value, a->ivalue);
    return tc_ub_alu(&c->ub, TC_OP_WHERE, a->dtype, 3, valid, k, tc_ub_const(&c->ub, a->dtype, 0, 0));
}

static tc_uop *lower(lower_ctx *c, tc_ast *a) {
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
    case TC_OPK_TERNARY:
        for (int i = 0; i < a->n_srcs; i++) s[i] = lower(c, a->srcs[i]);
        if (c->gvl > 1) gv_operands(c, a->op, s, a->n_srcs);
        if (a->op == TC_OP_CAST || a->op == TC_OP_BITCAST) r = tc_ub_cast(&c->ub, s[0], a->dtype, a->op == TC_OP_BITCAST);
        else r = tc_ub_alu(&c->ub, a->op, a->dtype, a->n_srcs, s[0], s[1], s[2]);
        break;
    case TC_OPK_META:
    case TC_OPK_AST:
        if (a->op == TC_OP_LOAD || a->op == TC_OP_CONST) r = lower_leaf(c, a);
        else TC_INTERNAL("unexpected %s in a kernel AST", tc_ops[a->op].name);
        break;
    }
    if (!r) c->ub.failed = true;
    if (c->n_reps > 1) {
        rmemo_put(c, a, c->rep, r, c->epoch);
    } else {
        a->lowered = r;
        a->lowered_epoch = c->epoch;
    }
    return r;
}

/* lowers every reduce under a (outside any stage) before a store stage opens */
static void prelower_reduces(lower_ctx *c, tc_ast *a) {
    if (tc_op_is_reduce(a->op)) {
        if (c->is_grouped) group_partials(c, a);
        else lower(c, a);
        return;
    }
    if (a->op == TC_OP_LOAD || a->op == TC_OP_CONST || a->mark == c->base_epoch) return;
    a->mark = c->base_epoch; /* visited in this lowering: DAGs stay linear */
    for (int i = 0; i < a->n_srcs && !c->ub.failed; i++) prelower_reduces(c, a->srcs[i]);
}

static bool store_is_full(const lower_ctx *c, const tc_ast *st) {
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

/* the stores of one space: every value first, then every store, so a kernel
 * that reads a buffer it also writes (an assign) reads the old values */
static void lower_stores(lower_ctx *c, tc_ast *sink, bool full) {
    int opened = 0, n = 0, step = (int)c->split; /* the split digit is 0 outside reduce stages */
    for (int i = 0; i < sink->n_srcs; i++) n += store_is_full(c, sink->srcs[i]) == full;
    if (!n) return;
    tc_uop **vals = tc_arena_alloc(&c->ub.k->arena, sizeof(tc_uop *) * (size_t)(sink->n_srcs * c->n_reps));
    if (!vals) {
        c->ub.failed = true;
        return;
    }
    if (full) opened = open_stage(c, false);
    if (c->is_grouped && !full) { /* the reduced-space stores run on lane 0 */
        opened = tc_ub_if(&c->ub, ix(c, TC_OP_CMPLT, c->lane, ic(c, 1)));
        c->gate = ++c->n_gates;
        c->epoch = ++epoch_counter;
    }
    tc_ast **epi = tc_arena_alloc(&c->ub.k->arena, sizeof(tc_ast *) * (size_t)sink->n_srcs);
    if (!epi) {
        c->ub.failed = true;
        return;
    }
    bool any_epi = false;
    for (int i = 0; i < sink->n_srcs; i++) {
        epi[i] = full || store_is_full(c, sink->srcs[i]) ? NULL : epilogue_reduce(c, sink->srcs[i]);
        any_epi |= epi[i] != NULL;
    }
    for (int r = 0; r < c->n_reps; r += step) {
        set_copy(c, r);
        for (int i = 0; i < sink->n_srcs; i++) {
            tc_ast *st = sink->srcs[i];
            vals[r * sink->n_srcs + i] =
                store_is_full(c, st) != full ? NULL : lower(c, epi[i] ? epi[i] : st->srcs[0]);
        }
    }
    for (int r = 0; r < c->n_reps; r += step) {
        set_copy(c, r);
        tc_uop *gate = copy_gate(c, r); /* a clamped copy past the end stores nothing */
        bool gated = gate && tc_ub_if(&c->ub, gate);
        for (int i = 0; i < sink->n_srcs && !c->ub.failed; i++) {
            tc_ast *st = sink->srcs[i];
            tc_uop *idx, *valid, *v = vals[r * sink->n_srcs + i];
            if (store_is_full(c, st) != full) continue;
            if (v) v = tc_ub_cast(&c->ub, v, st->dtype, false);
            if (v) v = tc_ub_broadcast(&c->ub, v, c->gvl); /* GPU vectors: all of a lane's */
            if (v && st_to_uops(c, st->st, &idx, &valid) == TC_OK)
                tc_ub_store(&c->ub, c->globals[st->buf], idx, v);
            else
                c->ub.failed = true;
        }
        if (gated) tc_ub_end_if(&c->ub);
    }
    for (int r = 0; r < c->n_reps && any_epi; r += step) { /* the epilogues' second pass */
        set_copy(c, r);
        tc_uop *gate = copy_gate(c, r);
        bool gated = gate && tc_ub_if(&c->ub, gate);
        for (int i = 0; i < sink->n_srcs && !c->ub.failed; i++) {
            tc_ast *st = sink->srcs[i];
            tc_uop *idx, *valid;
            if (!epi[i]) continue;
            if (st_to_uops(c, st->st, &idx, &valid) != TC_OK) {
                c->ub.failed = true;
                break;
            }
            /* the reduce's value is what this copy stored (created after that store) */
            rmemo_put(c, epi[i], r, tc_ub_load(&c->ub, c->globals[st->buf], idx, NULL), c->epoch);
            tc_uop *v = lower(c, st->srcs[0]);
            if (v) tc_ub_store(&c->ub, c->globals[st->buf], idx, tc_ub_cast(&c->ub, v, st->dtype, false));
            else c->ub.failed = true;
        }
        if (gated) tc_ub_end_if(&c->ub);
    }
    set_copy(c, 0);
    if (full) close_stage(c, opened);
    if (c->is_grouped && !full) {
        while (opened--) tc_ub_end_if(&c->ub);
        c->gate = 0;
        c->epoch = ++epoch_counter;
    }
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
    c->mark_all = ++epoch_counter;
    c->mark_one = ++epoch_counter;
    tc_ast *sink = c->it->ast;
    for (int i = 0; i < sink->n_srcs; i++)
        mark_reads(c, sink->srcs[i]->srcs[0], store_is_full(c, sink->srcs[i]));
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
static tc_status lower_grid(lower_ctx *c, tc_kernel_uops *k) {
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
    return ub->failed ? tc_error_code() ? tc_error_code() : TC_ERR_MEMORY : TC_OK;
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
            mult[d + 1] = mult[d] * (u->vmax - u->vmin + 1);
            d++;
        } else if (u->op == TC_UOP_ENDRANGE && d > 0) {
            d--;
        } else if (u->op == TC_UOP_ALU && !u->is_index) {
            k->est_ops += mult[d] * u->vcount;
        }
    }
    for (int i = 0; i < it->n_bufs; i++)
        k->est_mem += tc_node_numel(it->bufs[i]) * (int64_t)tc_dtypes[it->bufs[i]->dtype].size;
}

/* The outermost loop of a CPU kernel with enough work is shared by threads:
 * its bounds come from one more kernel argument, {start, end}, that the
 * runtime fills per thread (tc_launch_dims.cpu_range). */
enum { THREAD_MIN_WORK = 32768 }; /* loop iterations (all loops) worth a thread split */

static tc_uop *outer_range(lower_ctx *c, tc_kernel_uops *k, int a, int64_t n) {
    const tc_sched_item *it = c->it;
    int64_t work = 1;
    for (int d = 0; d < it->ndim; d++) work *= it->full_shape[d];
    bool split = c->ub.depth == 0 && n >= 2 && work >= THREAD_MIN_WORK && !c->tg->has_local &&
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

/* The loops over the kept axes, outermost first: axis order, except that a
 * register tile's column axis (the contiguous one, second in the plan) is
 * opened before its row axis when it has enough steps to share between
 * threads: the tile's columns of the reused input then stay in cache while
 * the rows go by (matmul 2048: the 64-column panel of b, 512 KiB, stays in
 * L2 instead of all of b passing through for every 6 rows). */
static void loop_order(const lower_ctx *c, int *order) {
    const tc_sched_item *it = c->it;
    for (int a = 0; a < it->ndim; a++) order[a] = a;
    if (c->n_up < 2 || c->split * c->vl > 1) return;
    int i = c->up_axis[0], j = c->up_axis[1];
    if (j < i || ceil_div(it->full_shape[j], c->up_amt[1]) < 8) return;
    for (int o = j; o > i; o--) order[o] = order[o - 1];
    order[i] = j;
}

static tc_status lower_kernel(lower_ctx *c, tc_kernel_uops *k) {
    const tc_sched_item *it = c->it;
    for (int i = 0; i < it->n_bufs; i++) c->globals[i] = tc_ub_global(&c->ub, i, it->bufs[i]->dtype);
    c->n_reps = 1;
    choose_upcast(c);
    bool is_empty = false;
    int order[TC_MAX_DIMS];
    loop_order(c, order);
    for (int o = 0; o < it->ndim; o++) {
        int a = order[o];
        if ((it->reduce_axes >> a) & 1) continue;
        is_empty |= it->full_shape[a] == 0;
        if (c->tg->has_local) continue;
        if (it->full_shape[a] == 1) c->idx[a] = tc_ub_iconst(&c->ub, c->idt, 0);
        else if (!is_upcast(c, a)) c->idx[a] = outer_range(c, k, a, it->full_shape[a]);
        for (int i = 0; i < c->n_up; i++) { /* an upcast axis steps by its amount */
            if (c->up_axis[i] != a) continue;
            int64_t steps = ceil_div(it->full_shape[a], c->up_amt[i]);
            tc_uop *r = steps > 1 ? outer_range(c, k, a, steps) : ic(c, 0);
            c->ub.index_mode = true;
            c->up_base[i] = ix(c, TC_OP_MUL, r, ic(c, c->up_amt[i]));
            c->ub.index_mode = false;
        }
    }
    if (c->n_up) set_copy(c, 0);
    tc_status st = TC_OK;
    if (c->tg->has_local && is_empty) k->global_size[0] = 0; /* nothing to launch */
    else if (c->tg->has_local) st = lower_grid(c, k);
    if (st != TC_OK) return st;
    c->outer_depth = c->ub.depth;
    tc_ast *sink = it->ast;
    if (!(c->tg->has_local && is_empty)) {
        prelower_reduces(c, sink); /* every reduce stage, in dependency order */
        lower_stores(c, sink, false);
        lower_stores(c, sink, true);
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
    c->ub.drop_dead = target->has_local; /* the CPU output stays as it was */
    /* CPU: 64-bit indices always: with int32 (and -fwrapv) the C compiler
     * cannot prove that copies of an upcast read consecutive addresses, and
     * does not vectorize them */
    c->idt = target->has_local ? index_dtype(it) : TC_INT64;
    for (int d = 0; d < 3; d++) k->global_size[d] = k->local_size[d] = 1;
    c->base_epoch = c->epoch = ++epoch_counter;
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
