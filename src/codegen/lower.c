/* lower.c - kernel AST -> UOps.
 *
 * The loop space of the item (full shape F, reduced axes R) becomes: one
 * RANGE per kept axis (size-1 axes are the constant 0), then, per store,
 * its reduce stages (DEFINE_ACC, RANGEs over R, accumulate, ENDRANGE) and the
 * store itself, in the reduced space or inside a store stage over R.
 * Buffer indices come from each LOAD/STORE/CONST tracker: the last view maps
 * loop indices to an offset and a mask; earlier views re-split that offset.
 */
#include "codegen.h"

#include <math.h>
#include <string.h>

typedef struct {
    tc_ub ub;                  /* the UOp builder */
    const tc_sched_item *it;   /* the kernel */
    tc_uop *idx[TC_MAX_DIMS];  /* current loop index per axis; NULL outside its loop */
    tc_uop **globals;          /* DEFINE_GLOBAL per slot */
    tc_dtype idt;              /* index dtype */
    int base_epoch;            /* first stage number of this lowering */
    int epoch;                 /* current stage number */
    int outer_depth;           /* loop depth of the kept-axes loops */
} lower_ctx;

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
                                tc_ub_alu(ub, TC_OP_MUL, c->idt, 2, dims[a],
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

/* opens a loop over each R axis of the kernel (size-1 axes are index 0) */
static int open_stage(lower_ctx *c) {
    int opened = 0;
    c->epoch = ++epoch_counter;
    for (int a = 0; a < c->it->ndim; a++) {
        if (!((c->it->reduce_axes >> a) & 1)) continue;
        if (c->it->full_shape[a] == 1) {
            c->idx[a] = tc_ub_iconst(&c->ub, c->idt, 0);
            continue;
        }
        c->idx[a] = tc_ub_range(&c->ub, a, c->idt, c->it->full_shape[a]);
        opened++;
    }
    return opened;
}

static void close_stage(lower_ctx *c, int opened) {
    while (opened--) tc_ub_end_range(&c->ub);
    for (int a = 0; a < c->it->ndim; a++)
        if ((c->it->reduce_axes >> a) & 1) c->idx[a] = NULL;
    c->epoch = ++epoch_counter;
}

static tc_uop *lower_reduce(lower_ctx *c, tc_ast *a) {
    if (c->ub.depth != c->outer_depth) {
        TC_INTERNAL("a reduce was reached inside another stage");
        c->ub.failed = true;
        return NULL;
    }
    prelower_reduces(c, a->srcs[0]); /* earlier stages: reduces this one reads */
    tc_uop *acc = tc_ub_acc(&c->ub, reduce_init(c, a->op, a->dtype));
    int opened = open_stage(c);
    tc_uop *x = lower(c, a->srcs[0]);
    tc_op op = a->op == TC_OP_REDUCE_SUM ? (a->dtype == TC_BOOL ? TC_OP_OR : TC_OP_ADD) : TC_OP_MAX;
    if (acc && x) tc_ub_acc_update(&c->ub, op, acc, x);
    close_stage(c, opened);
    return acc;
}

static tc_uop *lower_leaf(lower_ctx *c, tc_ast *a) {
    tc_uop *idx, *valid;
    if (st_to_uops(c, a->st, &idx, &valid) != TC_OK) {
        c->ub.failed = true;
        return NULL;
    }
    if (a->op == TC_OP_LOAD) return tc_ub_load(&c->ub, c->globals[a->buf], idx, valid);
    tc_uop *k = tc_ub_const(&c->ub, a->dtype, a->value, a->ivalue);
    return tc_ub_alu(&c->ub, TC_OP_WHERE, a->dtype, 3, valid, k, tc_ub_const(&c->ub, a->dtype, 0, 0));
}

static tc_uop *lower(lower_ctx *c, tc_ast *a) {
    tc_uop *m = a->lowered;
    if (m && a->lowered_epoch >= c->base_epoch &&
        (a->lowered_epoch == c->epoch || m->depth <= c->outer_depth))
        return m;
    tc_uop *r = NULL, *s[3] = {NULL, NULL, NULL};
    switch (tc_ops[a->op].kind) {
    case TC_OPK_REDUCE: r = lower_reduce(c, a); break;
    case TC_OPK_UNARY:
    case TC_OPK_BINARY:
    case TC_OPK_TERNARY:
        for (int i = 0; i < a->n_srcs; i++) s[i] = lower(c, a->srcs[i]);
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
    a->lowered = r;
    a->lowered_epoch = c->epoch;
    return r;
}

/* lowers every reduce under a (outside any stage) before a store stage opens */
static void prelower_reduces(lower_ctx *c, tc_ast *a) {
    if (tc_op_is_reduce(a->op)) {
        lower(c, a);
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

/* the stores of one space: every value first, then every store, so a kernel
 * that reads a buffer it also writes (an assign) reads the old values */
static void lower_stores(lower_ctx *c, tc_ast *sink, bool full) {
    tc_uop *vals[sink->n_srcs];
    int opened = 0, n = 0;
    for (int i = 0; i < sink->n_srcs; i++) n += store_is_full(c, sink->srcs[i]) == full;
    if (!n) return;
    if (full) opened = open_stage(c);
    for (int i = 0; i < sink->n_srcs; i++) {
        tc_ast *st = sink->srcs[i];
        vals[i] = store_is_full(c, st) == full ? lower(c, st->srcs[0]) : NULL;
    }
    for (int i = 0; i < sink->n_srcs && !c->ub.failed; i++) {
        tc_ast *st = sink->srcs[i];
        tc_uop *idx, *valid;
        if (store_is_full(c, st) != full) continue;
        if (vals[i] && st_to_uops(c, st->st, &idx, &valid) == TC_OK)
            tc_ub_store(&c->ub, c->globals[st->buf], idx, tc_ub_cast(&c->ub, vals[i], st->dtype, false));
        else
            c->ub.failed = true;
    }
    if (full) close_stage(c, opened);
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
    int d = 0;
    for (int i = 0; i < k->n_uops; i++) {
        const tc_uop *u = k->uops[i];
        if (u->op == TC_UOP_RANGE && d + 1 < TC_UB_MAX_DEPTH + 2) {
            mult[d + 1] = mult[d] * (u->srcs[1]->ivalue - u->srcs[0]->ivalue);
            d++;
        } else if (u->op == TC_UOP_ENDRANGE && d > 0) {
            d--;
        } else if (u->op == TC_UOP_ALU && !u->is_index) {
            k->est_ops += mult[d];
        }
    }
    for (int i = 0; i < it->n_bufs; i++)
        k->est_mem += tc_node_numel(it->bufs[i]) * (int64_t)tc_dtypes[it->bufs[i]->dtype].size;
}

static tc_status lower_kernel(lower_ctx *c, tc_kernel_uops *k) {
    const tc_sched_item *it = c->it;
    for (int i = 0; i < it->n_bufs; i++) c->globals[i] = tc_ub_global(&c->ub, i, it->bufs[i]->dtype);
    for (int a = 0; a < it->ndim; a++) {
        if ((it->reduce_axes >> a) & 1) continue;
        if (it->full_shape[a] == 1) c->idx[a] = tc_ub_iconst(&c->ub, c->idt, 0);
        else c->idx[a] = tc_ub_range(&c->ub, a, c->idt, it->full_shape[a]);
    }
    c->outer_depth = c->ub.depth;
    tc_ast *sink = it->ast;
    prelower_reduces(c, sink); /* every reduce stage, in dependency order */
    lower_stores(c, sink, false);
    lower_stores(c, sink, true);
    while (c->ub.depth > 0) tc_ub_end_range(&c->ub);
    tc_status st = tc_ub_linearize(&c->ub);
    if (st == TC_OK) estimate(k, it);
    return st;
}

tc_kernel_uops *tc_codegen(const tc_sched_item *it, const tc_target *target) {
    (void)target; /* CPU-style loops for every target until work-groups land */
    tc_kernel_uops *k = tc_calloc(1, sizeof *k);
    lower_ctx *c = tc_calloc(1, sizeof *c);
    if (!k || !c) {
        tc_free(k);
        tc_free(c);
        return NULL;
    }
    tc_ub_init(&c->ub, k);
    c->it = it;
    c->idt = index_dtype(it);
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
        if (u->op == TC_UOP_CONST) fprintf(f, " %g", u->value);
        if (u->op == TC_UOP_DEFINE_GLOBAL || u->op == TC_UOP_RANGE) fprintf(f, " arg=%lld", (long long)u->arg);
        fprintf(f, " [");
        for (int j = 0; j < u->n_srcs; j++) fprintf(f, "%s%d", j ? "," : "", u->srcs[j]->id);
        fprintf(f, "]");
        if (tc_dtypes[u->dtype].is_float == false && u->op != TC_UOP_DEFINE_GLOBAL)
            fprintf(f, " range [%lld, %lld]", (long long)u->vmin, (long long)u->vmax);
        fprintf(f, "\n");
    }
}
