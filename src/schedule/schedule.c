/* schedule.c - decides realize points, fuses, and builds one kernel AST per
 * group (tinygrad's create_schedule, in three sections: collect the graph
 * and decide realizes; pair reduces with their elementwise consumers; build
 * and order the items).
 *
 * Input: the nodes to realize. Output: a tc_schedule owning references to
 * every buffer node its items touch. The graph is only read; per-base
 * bookkeeping lives in node->scratch while create runs and is cleared after.
 */
#include "schedule.h"

#include <string.h>

/* per-base bookkeeping while scheduling */
typedef struct binfo binfo;
struct binfo {
    tc_node *node;         /* the base */
    bool realize;          /* gets a buffer (is some kernel's output) */
    bool pad_check;        /* read through a masked view: check for unsafe ops */
    tc_ptrvec consumers;   /* pairs (consumer base, view node or NULL), flattened */
    tc_node *fused_into;   /* REDUCE fused into this realized node's kernel */
    bool has_reduce;       /* realized node whose kernel holds a fused reduce */
    int full_ndim;         /* that kernel's loop-space rank */
    int64_t full[TC_MAX_DIMS]; /* and full shape */
    uint32_t axes;         /* and its reduced axes */
    int item;              /* index of the producing item, -1 */
};

typedef struct {
    tc_schedule *s;       /* the schedule being built */
    tc_ptrvec bases;      /* every unrealized base reached, in discovery order */
    tc_ptrvec items;      /* tc_sched_item pointers (arena) in creation order */
} sched_ctx;

static binfo *info(const tc_node *n) {
    return n->scratch;
}

static bool is_realized(const tc_node *n) {
    return n->op == TC_OP_BUFFER;
}

/* ---- section 1: collect ---- */

static tc_status add_base(sched_ctx *c, tc_node *b) {
    binfo *bi = tc_arena_alloc(&c->s->arena, sizeof *bi);
    if (!bi) return TC_ERR_MEMORY;
    bi->node = b;
    bi->item = -1;
    b->scratch = bi;
    return tc_ptrvec_push(&c->bases, b);
}

/* walks from the outputs through unrealized bases without recursion, and
 * records for every base who reads it through which view */
static tc_status collect(sched_ctx *c, tc_node *const *nodes, int n) {
    tc_ptrvec stack = {0};
    tc_status st = TC_OK;
    for (int i = 0; i < n && st == TC_OK; i++) {
        tc_node *b = tc_node_base(nodes[i]);
        if (is_realized(b) || b->scratch) continue;
        if ((st = add_base(c, b)) == TC_OK) st = tc_ptrvec_push(&stack, b);
    }
    while (stack.n && st == TC_OK) {
        tc_node *b = stack.items[--stack.n];
        for (int i = 0; i < b->n_srcs && st == TC_OK; i++) {
            tc_node *src = b->srcs[i], *sb = tc_node_base(src);
            if (is_realized(sb)) continue;
            if (!sb->scratch) {
                if ((st = add_base(c, sb)) == TC_OK) st = tc_ptrvec_push(&stack, sb);
            }
            if (st == TC_OK) st = tc_ptrvec_push(&info(sb)->consumers, b);
            if (st == TC_OK) st = tc_ptrvec_push(&info(sb)->consumers, src == sb ? NULL : src);
        }
    }
    tc_ptrvec_free(&stack);
    return st;
}

static bool st_has_mask(const tc_st *st) {
    for (int i = 0; i < st->n_views; i++)
        if (st->views[i].has_mask) return true;
    return false;
}

/* an expanding view: it reads base elements more than once. A padded view
 * counts only its valid region (tinygrad's "simple pad"). */
static bool reads_more_than_base(const tc_node *via, const tc_node *b) {
    const tc_st *st = via->st;
    int64_t n = tc_node_numel(via);
    if (st->n_views == 1 && st->views[0].has_mask) {
        const tc_view *v = &st->views[0];
        n = 1;
        for (int a = 0; a < v->ndim; a++) n *= v->mask_end[a] - v->mask_begin[a];
    }
    return n > tc_node_numel(b);
}

/* realize points that follow from the op or from how a base is read */
static tc_status decide_realizes(sched_ctx *c, tc_node *const *nodes, int n) {
    for (int i = 0; i < n; i++) {
        tc_node *b = tc_node_base(nodes[i]);
        if (!is_realized(b)) info(b)->realize = true;
    }
    for (int i = 0; i < c->bases.n; i++) {
        tc_node *b = c->bases.items[i];
        binfo *bi = info(b);
        if (b->op == TC_OP_CONTIGUOUS || b->op == TC_OP_ASSIGN || b->op == TC_OP_COPY)
            bi->realize = true;
        if (b->op == TC_OP_COPY && b->srcs[0]->op == TC_OP_VIEW)
            return TC_INTERNAL("COPY of a view reached the scheduler");
        if (b->op == TC_OP_ASSIGN && !is_realized(tc_node_base(b->srcs[1])))
            return TC_INTERNAL("ASSIGN target is not a realized buffer");
        if (b->op == TC_OP_CONST) continue; /* consts are inlined, never realized */
        for (int k = 0; k < bi->consumers.n; k += 2) {
            tc_node *consumer = bi->consumers.items[k], *via = bi->consumers.items[k + 1];
            if (consumer->op == TC_OP_COPY) bi->realize = true; /* copies read buffers */
            if (!via) continue;
            if (reads_more_than_base(via, b)) bi->realize = true; /* expand */
            else if (st_has_mask(via->st)) bi->pad_check = true;
        }
    }
    return TC_OK;
}

/* true when the unrealized cone under b holds an op with f(0) != 0, so a
 * padded view of b cannot be computed by masking its leaves */
static bool cone_is_pad_unsafe(tc_node *b) {
    tc_ptrvec stack = {0}, seen = {0};
    bool unsafe = false;
    tc_ptrvec_push(&stack, b);
    while (stack.n && !unsafe) {
        tc_node *x = tc_node_base(stack.items[--stack.n]);
        if (is_realized(x) || x->op == TC_OP_CONST || tc_op_is_reduce(x->op)) continue;
        if (x != b && info(x)->realize) continue;
        bool dup = false;
        for (int i = 0; i < seen.n && !dup; i++) dup = seen.items[i] == x;
        if (dup) continue;
        tc_ptrvec_push(&seen, x);
        if (tc_ops[x->op].is_unsafe_pad) unsafe = true;
        for (int i = 0; i < x->n_srcs; i++) tc_ptrvec_push(&stack, x->srcs[i]);
    }
    tc_ptrvec_free(&stack);
    tc_ptrvec_free(&seen);
    return unsafe;
}

/* ---- section 2: pair reduces with elementwise consumers ---- */

/* Follows r's consumers through unrealized elementwise nodes. Returns the
 * single realized node they all end in, or NULL when r must be realized on
 * its own: the paths end in several nodes, or meet another reduce, a copy,
 * or a view that is more than a reshape (expand, pad, shrink, permute). */
static tc_node *fusion_target(tc_node *r) {
    tc_ptrvec stack = {0}, seen = {0};
    tc_node *target = NULL;
    bool forced = false;
    tc_ptrvec_push(&stack, r);
    while (stack.n && !forced) {
        tc_node *x = stack.items[--stack.n];
        binfo *xi = info(x);
        for (int k = 0; k < xi->consumers.n && !forced; k += 2) {
            tc_node *cons = xi->consumers.items[k], *via = xi->consumers.items[k + 1];
            if ((via && !tc_st_is_contiguous(via->st)) || tc_op_is_reduce(cons->op) ||
                cons->op == TC_OP_COPY) {
                forced = true;
            } else if (info(cons)->realize) {
                if (target && target != cons) forced = true;
                target = cons;
            } else {
                bool dup = false;
                for (int i = 0; i < seen.n && !dup; i++) dup = seen.items[i] == cons;
                if (!dup) {
                    tc_ptrvec_push(&seen, cons);
                    tc_ptrvec_push(&stack, cons);
                }
            }
        }
    }
    tc_ptrvec_free(&stack);
    tc_ptrvec_free(&seen);
    return forced ? NULL : target;
}

/* records that t's kernel runs over r's loop space; false when it already
 * runs over a different one */
static bool join_loop_space(binfo *ti, const tc_node *r) {
    const tc_node *src = r->srcs[0];
    if (ti->has_reduce)
        return ti->axes == r->axes && ti->full_ndim == src->ndim &&
               memcmp(ti->full, src->shape, sizeof(int64_t) * (size_t)r->ndim) == 0;
    ti->has_reduce = true;
    ti->full_ndim = src->ndim;
    ti->axes = r->axes;
    memcpy(ti->full, src->shape, sizeof(int64_t) * (size_t)r->ndim);
    return true;
}

static void pair_reduces(sched_ctx *c) {
    bool nofuse = tc_flag_get(TC_FLAG_NOFUSE) != 0;
    for (int i = 0; i < c->bases.n; i++) {
        tc_node *r = c->bases.items[i];
        binfo *ri = info(r);
        if (!tc_op_is_reduce(r->op)) continue;
        if (!ri->realize) {
            tc_node *t = nofuse ? NULL : fusion_target(r);
            if (t && join_loop_space(info(t), r)) {
                ri->fused_into = t;
                continue;
            }
            ri->realize = true;
        }
        join_loop_space(ri, r); /* a realized reduce runs over its own input */
    }
}

/* ---- section 3: build the kernel ASTs ---- */

typedef struct memo memo;
struct memo {
    memo *next;      /* chain */
    tc_node *node;   /* key: node ... */
    const tc_st *st; /* ... read through this tracker */
    tc_ast *ast;     /* value */
};

typedef struct {
    sched_ctx *c;           /* the schedule */
    tc_sched_item *item;    /* the kernel being built */
    tc_node *out;           /* its output base */
    tc_ptrvec slots;        /* buffer nodes by slot */
    memo *buckets[512];     /* (node, st) -> ast, so DAGs stay DAGs */
} build_ctx;

static tc_st *keep_st(build_ctx *bc, tc_st *st) {
    if (st && tc_ptrvec_push(&bc->c->s->sts, st) != TC_OK) {
        tc_st_free(st);
        return NULL;
    }
    return st;
}

static tc_ast *ast_new(build_ctx *bc, tc_op op, tc_dtype dt, int n_srcs) {
    tc_ast *a = tc_arena_alloc(&bc->c->s->arena, sizeof *a);
    if (!a) return NULL;
    a->op = op;
    a->dtype = dt;
    a->n_srcs = n_srcs;
    a->buf = -1;
    if (n_srcs) {
        a->srcs = tc_arena_alloc(&bc->c->s->arena, sizeof(tc_ast *) * (size_t)n_srcs);
        if (!a->srcs) return NULL;
    }
    return a;
}

static int slot_of(build_ctx *bc, tc_node *b) {
    if (bc->out->op == TC_OP_ASSIGN && tc_node_base(bc->out->srcs[1]) == b)
        return 0; /* read-modify-write: the target is read through the output slot */
    for (int i = 0; i < bc->slots.n; i++)
        if (bc->slots.items[i] == b) return i;
    if (tc_ptrvec_push(&bc->slots, b) != TC_OK) return -1;
    return bc->slots.n - 1;
}

static tc_ast *build(build_ctx *bc, tc_node *n, const tc_st *st);

static tc_ast *build_base(build_ctx *bc, tc_node *b, const tc_st *st) {
    binfo *bi = b->scratch;
    bool is_out = b == bc->out;
    if (is_realized(b) || (bi && bi->realize && !is_out)) {
        int slot = slot_of(bc, b);
        tc_ast *a = slot < 0 ? NULL : ast_new(bc, TC_OP_LOAD, b->dtype, 0);
        if (!a) return NULL;
        a->buf = slot;
        a->st = (tc_st *)st;
        return a;
    }
    if (b->op == TC_OP_CONST) {
        tc_ast *a = ast_new(bc, TC_OP_CONST, b->dtype, 0);
        if (!a) return NULL;
        a->value = b->value;
        a->ivalue = b->ivalue;
        a->st = (tc_st *)st;
        return a;
    }
    if (b->op == TC_OP_CONTIGUOUS || b->op == TC_OP_ASSIGN) /* only as this kernel's output */
        return build(bc, b->srcs[0], st);
    if (tc_op_is_reduce(b->op)) {
        /* fused here: st is the identity on the reduced space by construction */
        tc_st *full = keep_st(bc, tc_st_from_shape(b->srcs[0]->ndim, b->srcs[0]->shape));
        tc_ast *src = full ? build(bc, b->srcs[0], full) : NULL;
        tc_ast *a = src ? ast_new(bc, b->op, b->dtype, 1) : NULL;
        if (!a) return NULL;
        a->srcs[0] = src;
        a->axes = b->axes;
        return a;
    }
    if (!tc_op_is_elementwise(b->op)) {
        TC_INTERNAL("op %s cannot be inlined in a kernel", tc_ops[b->op].name);
        return NULL;
    }
    tc_ast *a = ast_new(bc, b->op, b->dtype, b->n_srcs);
    if (!a) return NULL;
    for (int i = 0; i < b->n_srcs; i++)
        if (!(a->srcs[i] = build(bc, b->srcs[i], st))) return NULL;
    return a;
}

/* the AST computing node n at loop-space indices mapped onto n's elements by st */
static tc_ast *build(build_ctx *bc, tc_node *n, const tc_st *st) {
    size_t h = (size_t)tc_hash_combine((uint64_t)(uintptr_t)n, tc_st_hash(st)) % 512;
    for (memo *m = bc->buckets[h]; m; m = m->next)
        if (m->node == n && tc_st_equal(m->st, st)) return m->ast;
    tc_ast *a;
    if (n->op == TC_OP_VIEW) {
        tc_st *composed = keep_st(bc, tc_st_compose(n->st, st));
        a = composed ? build_base(bc, n->srcs[0], composed) : NULL;
    } else {
        a = build_base(bc, n, st);
    }
    memo *m = a ? tc_arena_alloc(&bc->c->s->arena, sizeof *m) : NULL;
    if (!m) return NULL;
    *m = (memo){bc->buckets[h], n, st, a};
    bc->buckets[h] = m;
    return a;
}

static void name_kernel(tc_sched_item *it) {
    size_t at = (size_t)snprintf(it->name, sizeof it->name, "%s", it->reduce_axes ? "r" : "E");
    for (int i = 0; i < it->ndim && at + 24 < sizeof it->name; i++)
        at += (size_t)snprintf(it->name + at, sizeof it->name - at, "_%lld",
                               (long long)it->full_shape[i]);
    if (it->ndim == 0) snprintf(it->name + at, sizeof it->name - at, "_1");
}

static tc_status finish_item(sched_ctx *c, tc_sched_item *it, tc_ptrvec *slots) {
    it->n_bufs = slots->n;
    it->bufs = tc_arena_alloc(&c->s->arena, sizeof(tc_node *) * (size_t)(slots->n ? slots->n : 1));
    if (!it->bufs) return TC_ERR_MEMORY;
    for (int i = 0; i < slots->n; i++) it->bufs[i] = tc_node_retain(slots->items[i]);
    return tc_ptrvec_push(&c->items, it);
}

static tc_status build_copy_item(sched_ctx *c, tc_node *b) {
    tc_sched_item *it = tc_arena_alloc(&c->s->arena, sizeof *it);
    if (!it) return TC_ERR_MEMORY;
    it->is_copy = true;
    it->n_outs = 1;
    snprintf(it->name, sizeof it->name, "copy");
    tc_ptrvec slots = {0};
    tc_status st = tc_ptrvec_push(&slots, b);
    if (st == TC_OK) st = tc_ptrvec_push(&slots, b->srcs[0]);
    if (st == TC_OK) st = finish_item(c, it, &slots);
    tc_ptrvec_free(&slots);
    return st;
}

static tc_status build_kernel_item(sched_ctx *c, tc_node *b) {
    binfo *bi = info(b);
    build_ctx bc = {.c = c, .out = b};
    tc_sched_item *it = tc_arena_alloc(&c->s->arena, sizeof *it);
    if (!it) return TC_ERR_MEMORY;
    bc.item = it;
    it->n_outs = 1;
    it->ndim = b->ndim;
    memcpy(it->full_shape, b->shape, sizeof(int64_t) * (size_t)b->ndim);
    if (bi->has_reduce) {
        it->ndim = bi->full_ndim;
        memcpy(it->full_shape, bi->full, sizeof(int64_t) * (size_t)bi->full_ndim);
        it->reduce_axes = bi->axes;
    }
    /* the store runs in the reduced space: full shape with R axes at 1 */
    int64_t red[TC_MAX_DIMS];
    for (int i = 0; i < it->ndim; i++)
        red[i] = (it->reduce_axes >> i) & 1 ? 1 : it->full_shape[i];
    tc_status status = TC_ERR_MEMORY;
    tc_st *st = keep_st(&bc, tc_st_from_shape(it->ndim, red));
    tc_ast *store = st ? ast_new(&bc, TC_OP_STORE, b->dtype, 1) : NULL;
    tc_ast *sink = store ? ast_new(&bc, TC_OP_SINK, b->dtype, 1) : NULL;
    if (sink && tc_ptrvec_push(&bc.slots, b) == TC_OK) {
        store->buf = 0;
        store->st = st;
        store->srcs[0] = build(&bc, b, st);
        sink->srcs[0] = store;
        it->ast = sink;
        status = store->srcs[0] ? finish_item(c, it, &bc.slots) : tc_error_code();
    }
    name_kernel(it);
    tc_ptrvec_free(&bc.slots);
    return status;
}

/* ---- ordering ---- */

/* Kahn's algorithm over producer -> consumer edges plus "reader of an
 * assign target runs before the assign". Ties keep creation order. */
static tc_status order_items(sched_ctx *c) {
    int n = c->items.n;
    tc_sched_item **its = (tc_sched_item **)c->items.items;
    int *indeg = tc_calloc((size_t)n + 1, sizeof(int));
    bool *edge = tc_calloc((size_t)n * (size_t)n + 1, 1); /* edge[a*n+b]: a before b */
    bool *done = tc_calloc((size_t)n + 1, 1);
    tc_status st = TC_OK;
    if (!indeg || !edge || !done) st = TC_ERR_MEMORY;
    for (int b = 0; b < n && st == TC_OK; b++) {
        for (int k = its[b]->n_outs; k < its[b]->n_bufs; k++) {
            tc_node *in = its[b]->bufs[k];
            if (in->scratch && info(in)->item >= 0) edge[info(in)->item * n + b] = true;
            for (int a = 0; a < n; a++) { /* b reads a's assign target: b first */
                tc_node *o = its[a]->bufs[0];
                if (a != b && o->op == TC_OP_ASSIGN && tc_node_base(o->srcs[1]) == in)
                    edge[b * n + a] = true;
            }
        }
    }
    for (int a = 0; a < n; a++)
        for (int b = 0; b < n; b++) indeg[b] += edge[a * n + b];
    c->s->items = tc_arena_alloc(&c->s->arena, sizeof(tc_sched_item) * (size_t)(n ? n : 1));
    if (!c->s->items && st == TC_OK) st = TC_ERR_MEMORY;
    for (int placed = 0; placed < n && st == TC_OK; placed++) {
        int pick = -1;
        for (int i = 0; i < n && pick < 0; i++)
            if (!done[i] && indeg[i] == 0) pick = i;
        if (pick < 0) {
            st = tc_error_set(TC_ERR_INVALID, "tc_realize: cycle in the schedule: a kernel "
                                              "reads a buffer that an assign overwrites");
            break;
        }
        done[pick] = true;
        for (int b = 0; b < n; b++) indeg[b] -= edge[pick * n + b];
        c->s->items[c->s->n_items++] = *its[pick];
    }
    tc_free(indeg);
    tc_free(edge);
    tc_free(done);
    return st;
}

/* ---- driver ---- */

static tc_status build_items(sched_ctx *c) {
    for (int i = c->bases.n - 1; i >= 0; i--) { /* sources before consumers */
        tc_node *b = c->bases.items[i];
        binfo *bi = info(b);
        if (!bi->realize) continue;
        bi->item = c->items.n;
        tc_status st = b->op == TC_OP_COPY ? build_copy_item(c, b) : build_kernel_item(c, b);
        if (st != TC_OK) return st;
    }
    return TC_OK;
}

static tc_status schedule_run(sched_ctx *c, tc_node *const *nodes, int n) {
    tc_status st = collect(c, nodes, n);
    if (st == TC_OK) st = decide_realizes(c, nodes, n);
    if (st != TC_OK) return st;
    for (int i = 0; i < c->bases.n; i++) {
        tc_node *b = c->bases.items[i];
        if (info(b)->pad_check && !info(b)->realize && cone_is_pad_unsafe(b))
            info(b)->realize = true;
    }
    pair_reduces(c);
    st = build_items(c);
    return st == TC_OK ? order_items(c) : st;
}

tc_schedule *tc_schedule_create(tc_node *const *nodes, int n) {
    tc_schedule *s = tc_calloc(1, sizeof *s);
    if (!s) return NULL;
    sched_ctx c = {.s = s};
    tc_status st = schedule_run(&c, nodes, n);
    for (int i = 0; i < c.bases.n; i++) {
        tc_node *b = c.bases.items[i];
        tc_ptrvec_free(&info(b)->consumers);
        b->scratch = NULL;
    }
    tc_ptrvec_free(&c.bases);
    if (st == TC_OK) {
        tc_ptrvec_free(&c.items);
        return s;
    }
    /* items not yet copied into s->items still own node references */
    for (int i = 0; i < c.items.n; i++) {
        tc_sched_item *it = c.items.items[i];
        for (int k = 0; k < it->n_bufs; k++) tc_node_release(it->bufs[k]);
        it->n_bufs = 0;
    }
    tc_ptrvec_free(&c.items);
    s->n_items = 0;
    tc_schedule_free(s);
    return NULL;
}

void tc_schedule_free(tc_schedule *s) {
    if (!s) return;
    for (int i = 0; i < s->n_items; i++)
        for (int k = 0; k < s->items[i].n_bufs; k++) tc_node_release(s->items[i].bufs[k]);
    for (int i = 0; i < s->sts.n; i++) tc_st_free(s->sts.items[i]);
    tc_ptrvec_free(&s->sts);
    tc_arena_free(&s->arena);
    tc_free(s);
}

int tc_schedule_n_kernels(const tc_schedule *s) {
    int k = 0;
    for (int i = 0; i < s->n_items; i++) k += !s->items[i].is_copy;
    return k;
}
