/* ast.c - the scheduler's third section: one item per group of roots (a
 * kernel with one STORE per root, or a copy), and their order.
 *
 * Building walks back from each root through unrealized nodes, composing
 * views so every LOAD and CONST carries a tracker from the kernel's loop
 * space to its buffer. A fused reduce is one AST node however it is reached
 * (its value is a per-row register); everything else is memoised per
 * (node, tracker) so DAGs stay DAGs.
 *
 * Cost: building is O(the kernels' AST sizes) (each group's roots come from
 * its member list); ordering is O((items + edges) log items), twice: by
 * creation for the row kernels, then by the program (tc_order_program).
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct memo memo;
struct memo {
    memo *next;      /* chain */
    tc_node *node;   /* key: node ... */
    const tc_st *st; /* ... read through this tracker (NULL: any, for reduces) */
    tc_ast *ast;     /* value */
};

typedef struct {
    tc_sched_ctx *c;        /* the schedule */
    tc_ptrvec slots;        /* buffer nodes by slot: the outputs, then inputs */
    int n_outs;             /* outputs */
    memo *buckets[512];     /* (node, st) -> ast */
} build_ctx;

static bool is_realized(const tc_node *n) {
    return n->op == TC_OP_BUFFER;
}

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
    for (int i = 0; i < bc->n_outs; i++) { /* read-modify-write: an assign's target */
        tc_node *o = bc->slots.items[i];
        if (o->op == TC_OP_ASSIGN && tc_node_base(o->srcs[1]) == b) return i;
    }
    for (int i = 0; i < bc->slots.n; i++)
        if (bc->slots.items[i] == b) return i;
    if (tc_ptrvec_push(&bc->slots, b) != TC_OK) return -1;
    return bc->slots.n - 1;
}

static size_t memo_bucket(tc_node *n, const tc_st *st) {
    return (size_t)tc_hash_combine((uint64_t)(uintptr_t)n, st ? tc_st_hash(st) : 0) % 512;
}

static tc_ast *memo_find(build_ctx *bc, tc_node *n, const tc_st *st) {
    for (memo *m = bc->buckets[memo_bucket(n, st)]; m; m = m->next)
        if (m->node == n && (st ? m->st && tc_st_equal(m->st, st) : !m->st)) return m->ast;
    return NULL;
}

/* Records a (built). At the head of its bucket: the build that made a has
 * added entries of its own since memo_find looked, so a slot found then may
 * no longer be the chain's end (writing there dropped them, and which ones
 * depended on where the nodes were allocated). */
static tc_ast *memo_put(build_ctx *bc, tc_node *n, const tc_st *st, tc_ast *a) {
    memo *e = a ? tc_arena_alloc(&bc->c->s->arena, sizeof *e) : NULL;
    if (!e) return NULL;
    size_t h = memo_bucket(n, st);
    *e = (memo){bc->buckets[h], n, st, a};
    bc->buckets[h] = e;
    return a;
}

static tc_ast *build(build_ctx *bc, tc_node *n, const tc_st *st);

static tc_ast *build_reduce(build_ctx *bc, tc_node *r) {
    tc_ast *known = memo_find(bc, r, NULL);
    if (known) return known;
    tc_node *src = r->srcs[0];
    tc_st *full = keep_st(bc, tc_st_from_shape(src->ndim, src->shape));
    tc_ast *s = full ? build(bc, src, full) : NULL;
    tc_ast *a = s ? ast_new(bc, r->op, r->dtype, 1) : NULL;
    if (!a) return NULL;
    a->srcs[0] = s;
    a->axes = r->axes;
    return memo_put(bc, r, NULL, a);
}

/* The tracker from shape O onto buffer elements of x (tracker x_st, its
 * shape O but along axis, one view, unmasked along axis) that reads x at
 * index 0 of the indexed axis everywhere: the axis's stride becomes 0. A
 * GATHER or SCATTER adds index * the old stride to what it gives. */
static tc_st *at_index_zero(build_ctx *bc, const tc_st *x_st, int ndim, const int64_t *o_shape,
                            int axis, int64_t *stride, int64_t *size) {
    if (x_st->n_views != 1) {
        TC_INTERNAL("an indexed read of a view of views (the front end makes it contiguous)");
        return NULL;
    }
    tc_st *z = keep_st(bc, tc_st_copy(x_st));
    if (!z) return NULL;
    tc_view *v = &z->views[0];
    *stride = v->strides[axis];
    *size = v->shape[axis];
    memcpy(v->shape, o_shape, sizeof(int64_t) * (size_t)ndim);
    v->strides[axis] = 0;
    if (v->has_mask) v->mask_begin[axis] = 0, v->mask_end[axis] = o_shape[axis];
    v->is_contiguous = false;
    return z;
}

static int axis_of(uint32_t axes) {
    int a = 0;
    while (a < TC_MAX_DIMS - 1 && !((axes >> a) & 1)) a++;
    return a;
}

/* a GATHER read at loop-space indices mapped onto its elements by st: x
 * (realized) at row 0 of the indexed axis, plus the index loaded there */
static tc_ast *build_gather(build_ctx *bc, tc_node *g, const tc_st *st) {
    tc_node *xs = g->srcs[0], *xb = tc_node_base(xs);
    int axis = axis_of(g->axes), slot = slot_of(bc, xb);
    tc_st *x_st = xs == xb ? keep_st(bc, tc_st_from_shape(xs->ndim, xs->shape)) : xs->st;
    tc_ast *a = slot >= 0 && x_st ? ast_new(bc, TC_OP_GATHER, g->dtype, 1) : NULL;
    tc_st *z = a ? at_index_zero(bc, x_st, g->ndim, g->shape, axis, &a->index_stride, &a->index_size) : NULL;
    if (z) a->st = keep_st(bc, tc_st_compose(z, st));
    if (!a || !a->st || !(a->srcs[0] = build(bc, g->srcs[1], st))) return NULL;
    a->buf = slot;
    return a;
}

static tc_ast *build_base(build_ctx *bc, tc_node *b, const tc_st *st) {
    tc_binfo *bi = b->scratch;
    bool is_out = false;
    for (int i = 0; i < bc->n_outs; i++) is_out |= bc->slots.items[i] == b;
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
    if (tc_op_is_reduce(b->op)) return build_reduce(bc, b);
    if (b->op == TC_OP_GATHER) return build_gather(bc, b, st);
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

/* A padded view of a computed value whose ops do not keep 0 at 0 (exp2,
 * log2, recip, idiv): masking the leaves gives f(0) in the padding, so the
 * whole value is gated: valid ? value : 0. (tinygrad realized these.) */
static bool needs_gate(build_ctx *bc, tc_node *view) {
    tc_node *b = view->srcs[0];
    tc_binfo *bi = b->scratch;
    bool computed = !is_realized(b) && b->op != TC_OP_CONST && bi;
    bool is_out = false;
    for (int i = 0; i < bc->n_outs; i++) is_out |= bc->slots.items[i] == b;
    if (!computed || (bi->realize && !is_out) || !tc_st_has_mask(view->st)) return false;
    return tc_sched_cone_has(bc->c, b, false, tc_sched_unsafe_pad);
}

static tc_ast *gate(build_ctx *bc, tc_ast *value, tc_st *st) {
    tc_ast *valid = ast_new(bc, TC_OP_CONST, TC_BOOL, 0), *zero = ast_new(bc, TC_OP_CONST, value->dtype, 0);
    tc_ast *w = valid && zero ? ast_new(bc, TC_OP_WHERE, value->dtype, 3) : NULL;
    if (!w) return NULL;
    valid->value = 1;
    valid->ivalue = 1;
    valid->st = st; /* a true constant under the view's mask: the validity */
    zero->st = st;
    w->srcs[0] = valid;
    w->srcs[1] = value;
    w->srcs[2] = zero;
    return w;
}

/* the AST computing node n at loop-space indices mapped onto n's elements by st */
static tc_ast *build(build_ctx *bc, tc_node *n, const tc_st *st) {
    tc_ast *a = memo_find(bc, n, st);
    if (a) return a;
    if (n->op == TC_OP_VIEW) {
        tc_st *composed = keep_st(bc, tc_st_compose(n->st, st));
        a = composed ? build_base(bc, n->srcs[0], composed) : NULL;
        if (a && needs_gate(bc, n)) a = gate(bc, a, composed);
    } else {
        a = build_base(bc, n, st);
    }
    return memo_put(bc, n, st, a);
}

void tc_name_kernel(tc_sched_item *it) {
    const char *kind = it->is_scatter ? "S" : it->is_put ? "P" : it->reduce_axes ? "r" : "E";
    size_t at = (size_t)snprintf(it->name, sizeof it->name, "%s", kind);
    if (it->n_outs > 1) at += (size_t)snprintf(it->name + at, sizeof it->name - at, "%d", it->n_outs);
    for (int i = 0; i < it->ndim && at + 24 < sizeof it->name; i++)
        at += (size_t)snprintf(it->name + at, sizeof it->name - at, "_%lld",
                               (long long)it->full_shape[i]);
    if (it->ndim == 0) snprintf(it->name + at, sizeof it->name - at, "_1");
}

TC_MUST_USE static tc_status finish_item(tc_sched_ctx *c, tc_sched_item *it, tc_ptrvec *slots) {
    it->bufs = tc_arena_alloc(&c->s->arena, sizeof(tc_node *) * (size_t)(slots->n ? slots->n : 1));
    if (!it->bufs || tc_ptrvec_push(&c->items, it) != TC_OK) return TC_ERR_MEMORY;
    /* listed first: on a later failure, create releases what listed items hold */
    it->n_bufs = slots->n;
    for (int i = 0; i < slots->n; i++) it->bufs[i] = tc_node_retain(slots->items[i]);
    return TC_OK;
}

TC_MUST_USE static tc_status build_copy_item(tc_sched_ctx *c, tc_node *b) {
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

/* the store of one root: in the full space when it has F's size, else in the
 * reduced space (F with R at 1) */
static tc_ast *build_store(build_ctx *bc, tc_sched_item *it, int k) {
    tc_node *root = bc->slots.items[k];
    int64_t shape[TC_MAX_DIMS], numel = 1, full = 1;
    for (int a = 0; a < it->ndim; a++) {
        full *= it->full_shape[a];
        shape[a] = (it->reduce_axes >> a) & 1 ? 1 : it->full_shape[a];
        numel *= shape[a];
    }
    if (tc_node_numel(root) == full) memcpy(shape, it->full_shape, sizeof shape);
    else if (tc_node_numel(root) != numel) {
        TC_INTERNAL("output %d of %s has %lld elements, not %lld", k, it->name,
                    (long long)tc_node_numel(root), (long long)numel);
        return NULL;
    }
    /* a root whose elements are the rows permuted (a transposed gradient's
     * update) is stored through the inverse permutation (group.c) */
    const tc_binfo *ri = tc_binfo_of(root);
    tc_st *st = ri->store_st ? (tc_st *)ri->store_st : keep_st(bc, tc_st_from_shape(it->ndim, shape));
    tc_ast *store = st ? ast_new(bc, TC_OP_STORE, root->dtype, 1) : NULL;
    if (!store) return NULL;
    store->buf = k;
    store->st = st;
    store->srcs[0] = build(bc, root, st);
    return store->srcs[0] ? store : NULL;
}

static int by_id(const void *a, const void *b) {
    const tc_node *x = *(tc_node *const *)a, *y = *(tc_node *const *)b;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* The kernel of a SCATTER root (a group of its own): its loops run over
 * the sources' space O, and its one store adds each value at the index
 * loaded beside it into the output (X, contiguous), which codegen zeroes
 * first. */
static tc_ast *build_scatter(build_ctx *bc, tc_sched_item *it, tc_node *sc) {
    tc_node *src = sc->srcs[1];
    it->is_scatter = true;
    it->ndim = src->ndim;
    memcpy(it->full_shape, src->shape, sizeof(int64_t) * (size_t)it->ndim);
    tc_name_kernel(it);
    tc_st *own = keep_st(bc, tc_st_from_shape(src->ndim, src->shape));
    tc_st *out = keep_st(bc, tc_st_from_shape(sc->ndim, sc->shape));
    tc_ast *a = own && out ? ast_new(bc, TC_OP_SCATTER, sc->dtype, 2) : NULL;
    if (!a) return NULL;
    a->buf = 0;
    a->st = at_index_zero(bc, out, src->ndim, src->shape, axis_of(sc->axes), &a->index_stride,
                          &a->index_size);
    if (!a->st || !(a->srcs[0] = build(bc, src, own)) || !(a->srcs[1] = build(bc, sc->srcs[0], own)))
        return NULL;
    return a;
}

/* The indexed store of put-assign root k (slot k): value and index built
 * in the loop space (the values' shape O), written at the index into the
 * target's buffer, which is slot k's (the output of the ASSIGN). */
static tc_ast *build_put(build_ctx *bc, tc_sched_item *it, int k) {
    const tc_node *put = ((tc_node *)bc->slots.items[k])->srcs[0];
    tc_node *src = put->srcs[1];
    tc_st *own = keep_st(bc, tc_st_from_shape(src->ndim, src->shape));
    tc_st *out = keep_st(bc, tc_st_from_shape(put->ndim, put->shape));
    tc_ast *a = own && out ? ast_new(bc, TC_OP_PUT, put->dtype, 2) : NULL;
    if (!a) return NULL;
    if (src->ndim != it->ndim || memcmp(src->shape, it->full_shape, sizeof(int64_t) * (size_t)it->ndim)) {
        TC_INTERNAL("indexed stores of other loop spaces in one kernel (%s)", it->name);
        return NULL;
    }
    a->buf = k;
    a->st = at_index_zero(bc, out, src->ndim, src->shape, axis_of(put->axes), &a->index_stride,
                          &a->index_size);
    if (!a->st || !(a->srcs[0] = build(bc, src, own)) || !(a->srcs[1] = build(bc, put->srcs[0], own)))
        return NULL;
    return a;
}

/* The kernel of a group of put-assigns (tc_index_copy), one indexed store
 * each: its loops run over their values' space; the outputs are the
 * ASSIGNs, whose buffers are their targets'. */
TC_MUST_USE static tc_status build_put_item(tc_sched_ctx *c, tc_binfo *rep) {
    build_ctx bc = {.c = c};
    tc_sched_item *it = tc_arena_alloc(&c->s->arena, sizeof *it);
    if (!it) return TC_ERR_MEMORY;
    for (tc_binfo *bi = rep; bi; bi = bi->next_member)
        if (tc_ptrvec_push(&bc.slots, bi->node) != TC_OK) return TC_ERR_MEMORY;
    qsort(bc.slots.items, (size_t)bc.slots.n, sizeof(void *), by_id);
    bc.n_outs = it->n_outs = bc.slots.n;
    for (int k = 0; k < bc.n_outs; k++) tc_binfo_of(bc.slots.items[k])->item = c->items.n;
    const tc_node *src = ((tc_node *)bc.slots.items[0])->srcs[0]->srcs[1];
    it->is_put = true;
    it->ndim = src->ndim;
    memcpy(it->full_shape, src->shape, sizeof(int64_t) * (size_t)it->ndim);
    tc_name_kernel(it);
    tc_ast *sink = ast_new(&bc, TC_OP_SINK, src->dtype, bc.n_outs);
    for (int k = 0; sink && k < bc.n_outs; k++)
        if (!(sink->srcs[k] = build_put(&bc, it, k))) sink = NULL;
    tc_status st = sink ? (it->ast = sink, finish_item(c, it, &bc.slots)) : tc_error_or(TC_ERR_MEMORY);
    tc_ptrvec_free(&bc.slots);
    return st;
}

TC_MUST_USE static tc_status build_kernel_item(tc_sched_ctx *c, tc_binfo *rep) {
    if (tc_sched_is_put(rep->node)) return build_put_item(c, rep);
    build_ctx bc = {.c = c};
    tc_sched_item *it = tc_arena_alloc(&c->s->arena, sizeof *it);
    if (!it) return TC_ERR_MEMORY;
    if (rep->node->op == TC_OP_SCATTER) {
        tc_ast *sink = tc_ptrvec_push(&bc.slots, rep->node) == TC_OK ? ast_new(&bc, TC_OP_SINK, rep->node->dtype, 1) : NULL;
        it->n_outs = bc.n_outs = 1;
        rep->item = c->items.n;
        if (sink) sink->srcs[0] = build_scatter(&bc, it, rep->node);
        tc_status st = sink && sink->srcs[0] ? (it->ast = sink, finish_item(c, it, &bc.slots))
                                             : tc_error_or(TC_ERR_MEMORY);
        tc_ptrvec_free(&bc.slots);
        return st;
    }
    for (tc_binfo *bi = rep; bi; bi = bi->next_member) /* the group's roots, by creation order */
        if (bi->realize && bi->node->op != TC_OP_COPY && tc_ptrvec_push(&bc.slots, bi->node) != TC_OK)
            return TC_ERR_MEMORY;
    qsort(bc.slots.items, (size_t)bc.slots.n, sizeof(void *), by_id);
    bc.n_outs = it->n_outs = bc.slots.n;
    for (int k = 0; k < bc.n_outs; k++) tc_binfo_of(bc.slots.items[k])->item = c->items.n;
    tc_node *first = bc.slots.items[0];
    it->ndim = rep->has_reduce ? rep->full_ndim : first->ndim;
    memcpy(it->full_shape, rep->has_reduce ? rep->full : first->shape, sizeof(int64_t) * (size_t)it->ndim);
    it->reduce_axes = rep->has_reduce ? rep->axes : 0;
    tc_name_kernel(it);
    tc_status status = TC_ERR_MEMORY;
    tc_ast *sink = ast_new(&bc, TC_OP_SINK, first->dtype, bc.n_outs);
    for (int k = 0; sink && k < bc.n_outs; k++)
        if (!(sink->srcs[k] = build_store(&bc, it, k))) sink = NULL;
    if (sink) {
        it->ast = sink;
        status = finish_item(c, it, &bc.slots);
    } else if (tc_error_code() != TC_OK) {
        status = tc_error_code();
    }
    tc_ptrvec_free(&bc.slots);
    return status;
}

/* ---- ordering ----
 * Kahn's algorithm over producer -> consumer edges plus "reader of an
 * assign target runs before the assign"; of the items ready, the one
 * created first runs first (a binary heap of ready indices).
 * O((items + edges) log items). */

typedef struct {
    int *at;             /* the heap: ready item indices */
    int n;               /* in it */
    const uint64_t *key; /* per item: its rank among the ready (NULL: its index) */
} ready_heap;

static bool runs_before(const ready_heap *h, int a, int b) {
    if (h->key && h->key[a] != h->key[b]) return h->key[a] < h->key[b];
    return a < b;
}

static void heap_push(ready_heap *h, int v) {
    int i = h->n++;
    while (i > 0 && runs_before(h, v, h->at[(i - 1) / 2])) {
        h->at[i] = h->at[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->at[i] = v;
}

static int heap_pop(ready_heap *h) {
    int top = h->at[0], v = h->at[--h->n], i = 0;
    for (;;) {
        int k = 2 * i + 1;
        if (k >= h->n) break;
        if (k + 1 < h->n && runs_before(h, h->at[k + 1], h->at[k])) k++;
        if (!runs_before(h, h->at[k], v)) break;
        h->at[i] = h->at[k];
        i = k;
    }
    if (h->n) h->at[i] = v;
    return top;
}

/* edges a -> b (a runs before b), as per-item lists of successors */
typedef struct {
    tc_ptrvec *succ; /* n lists of successor indices (as pointers) */
    int *indeg;      /* n predecessor counts */
} item_graph;

static void add_edge(tc_sched_ctx *c, item_graph *g, int a, int b) {
    tc_sched_push(c, &g->succ[a], (void *)(intptr_t)b);
    g->indeg[b]++;
}

/* the edges among its[0..n-1] into g: producer -> consumer (an item
 * reading an output of another), and a reader of an assign's target before
 * the assign; writers (freed by free_item_graph): assign target -> the
 * items writing it. Items are found by their outputs (a map), not by
 * tc_binfo.item, which the row kernels leave behind. */
static void item_edges(tc_sched_ctx *c, item_graph *g, tc_sched_item *const *its, int n, tc_ptrmap *writers) {
    tc_ptrmap made = {0}; /* output node -> its item + 1 */
    for (int a = 0; a < n && !c->failed; a++)
        for (int o = 0; o < its[a]->n_outs && !c->failed; o++) {
            tc_node *out = its[a]->bufs[o];
            if (!tc_ptrmap_put(&made, out, (void *)(intptr_t)(a + 1))) c->failed = true;
            if (out->op != TC_OP_ASSIGN || c->failed) continue;
            tc_node *t = tc_node_base(out->srcs[1]);
            void *v = NULL;
            tc_ptrvec *l = tc_ptrmap_get(writers, t, &v) ? v : tc_calloc(1, sizeof *l);
            if (!l || (!v && !tc_ptrmap_put(writers, t, l))) {
                tc_free(l); /* not in the map */
                c->failed = true;
            } else {
                tc_sched_push(c, l, (void *)(intptr_t)a);
            }
        }
    for (int b = 0; b < n && !c->failed; b++)
        for (int k = its[b]->n_outs; k < its[b]->n_bufs; k++) {
            tc_node *in = its[b]->bufs[k];
            void *v = NULL;
            if (tc_ptrmap_get(&made, in, &v) && (int)(intptr_t)v - 1 != b)
                add_edge(c, g, (int)(intptr_t)v - 1, b);
            if (!tc_ptrmap_get(writers, in, &v)) continue;
            const tc_ptrvec *l = v; /* b reads a's assign target: b first */
            for (int i = 0; i < l->n; i++)
                if ((int)(intptr_t)l->items[i] != b) add_edge(c, g, b, (int)(intptr_t)l->items[i]);
        }
    if (made.failed) c->failed = true;
    tc_ptrmap_free(&made);
}

/* Kahn's algorithm over g: the items into order[], each time the ready one
 * h ranks first; returns how many (fewer than n: a cycle) */
static int kahn(item_graph *g, ready_heap *h, int n, int *order) {
    int done = 0;
    for (int i = 0; i < n; i++)
        if (g->indeg[i] == 0) heap_push(h, i);
    while (h->n) {
        int pick = heap_pop(h);
        for (int k = 0; k < g->succ[pick].n; k++) {
            int b = (int)(intptr_t)g->succ[pick].items[k];
            if (--g->indeg[b] == 0) heap_push(h, b);
        }
        order[done++] = pick;
    }
    return done;
}

/* frees g's lists and arrays (n items) and writers' lists */
static void free_item_graph(item_graph *g, int n, tc_ptrmap *writers) {
    for (int i = 0; g->succ && i < n; i++) tc_ptrvec_free(&g->succ[i]);
    for (int i = 0; i < writers->cap; i++)
        if (writers->keys[i]) {
            tc_ptrvec_free(writers->vals[i]);
            tc_free(writers->vals[i]);
        }
    tc_ptrmap_free(writers);
    tc_free(g->succ);
    tc_free(g->indeg);
}

TC_MUST_USE static tc_status order_items(tc_sched_ctx *c) {
    int n = c->items.n;
    tc_sched_item **its = (tc_sched_item **)c->items.items;
    item_graph g = {tc_calloc((size_t)n + 1, sizeof(tc_ptrvec)), tc_calloc((size_t)n + 1, sizeof(int))};
    ready_heap h = {tc_calloc((size_t)n + 1, sizeof(int)), 0, NULL};
    int *order = tc_calloc((size_t)n + 1, sizeof *order);
    tc_ptrmap writers = {0}; /* assign target -> the items writing it */
    c->s->items = tc_arena_alloc(&c->s->arena, sizeof(tc_sched_item) * (size_t)(n ? n : 1));
    if (!g.succ || !g.indeg || !h.at || !order || !c->s->items) c->failed = true;
    if (!c->failed) item_edges(c, &g, its, n, &writers);
    tc_status st = c->failed || writers.failed ? TC_ERR_MEMORY : TC_OK;
    if (st == TC_OK) c->s->n_items = kahn(&g, &h, n, order);
    for (int i = 0; st == TC_OK && i < c->s->n_items; i++) c->s->items[i] = *its[order[i]];
    if (st == TC_OK && c->s->n_items < n) {
        c->is_cycle = true;
        st = tc_error_set(TC_ERR_INVALID, "tc_realize: cycle in the schedule: a kernel "
                                          "reads a buffer that an assign overwrites");
    }
    free_item_graph(&g, n, &writers);
    tc_free(h.at);
    tc_free(order);
    return st;
}

TC_MUST_USE tc_status tc_build_items(tc_sched_ctx *c) {
    for (int i = c->bases.n - 1; i >= 0; i--) { /* sources before consumers */
        tc_node *b = c->bases.items[i];
        tc_binfo *bi = tc_binfo_of(b);
        if (!bi->realize || bi->item >= 0) continue;
        tc_status st;
        if (b->op == TC_OP_COPY) {
            bi->item = c->items.n;
            st = build_copy_item(c, b);
        } else {
            st = build_kernel_item(c, tc_group_find(bi));
        }
        if (st != TC_OK) return st;
    }
    return order_items(c);
}

/* ---- the final order: the program's ----
 * The order above (creation among the ready) keeps a chain's kernels
 * together, which the row kernels need; once they are made, the items run
 * in the order the program made their values: of the ready items, the one
 * whose first output node was created first (node ids). A training step's
 * backward then runs as autograd wrote it, each layer's weight gradient
 * beside its input gradient, so a layer's saved activations go as soon as
 * both read them, as in an eager framework: ResNet-18's step (batch 16)
 * peaked at 294 MB in the creation order, which ran the weight gradients
 * after the whole backward. Edges: producer -> consumer, and a reader of
 * an assign's target before the assign. O((items + buffers) log items). */
TC_MUST_USE tc_status tc_order_program(tc_sched_ctx *c) {
    tc_schedule *s = c->s;
    int n = s->n_items;
    if (n < 2) return TC_OK;
    item_graph g = {tc_calloc((size_t)n, sizeof(tc_ptrvec)), tc_calloc((size_t)n, sizeof(int))};
    uint64_t *key = tc_calloc((size_t)n, sizeof *key);
    ready_heap h = {tc_calloc((size_t)n, sizeof(int)), 0, key};
    int *order = tc_calloc((size_t)n, sizeof *order);
    tc_sched_item **its = tc_calloc((size_t)n, sizeof *its);
    tc_sched_item *out = tc_arena_alloc(&s->arena, sizeof *out * (size_t)n);
    tc_ptrmap writers = {0}; /* assign target -> the items writing it */
    if (!g.succ || !g.indeg || !key || !h.at || !order || !its || !out) c->failed = true;
    for (int a = 0; a < n && !c->failed; a++) {
        its[a] = &s->items[a];
        key[a] = UINT64_MAX;
        for (int o = 0; o < its[a]->n_outs; o++)
            if (its[a]->bufs[o]->id < key[a]) key[a] = its[a]->bufs[o]->id;
    }
    if (!c->failed) item_edges(c, &g, its, n, &writers);
    tc_status st = c->failed || writers.failed ? TC_ERR_MEMORY : TC_OK;
    int done = st == TC_OK ? kahn(&g, &h, n, order) : 0;
    for (int i = 0; i < done; i++) out[i] = s->items[order[i]];
    if (st == TC_OK && done == n) s->items = out; /* else the order it had holds */
    else if (st == TC_OK) st = TC_INTERNAL("tc_order_program: %d of %d items ordered", done, n);
    free_item_graph(&g, n, &writers);
    tc_free(key), tc_free(h.at), tc_free(order), tc_free(its);
    return st;
}
