/* group.c - the scheduler's second section: place every unrealized reduce
 * in a kernel, grouping roots (realized bases) into multi-output kernels.
 *
 * A kernel runs over a loop space (full shape F, reduced axes R; see
 * schedule.h). From each unrealized reduce r we follow its consumers through
 * unrealized nodes. Along the way a value is either in the *reduced* space
 * (a per-row scalar: r itself, elementwise ops on it, reshapes of it) or in
 * the *full* space (shape F). Allowed steps:
 *   reduced -> reduced   through reshapes (contiguous views)
 *   reduced -> full      through a row broadcast: an expand over exactly R
 *   full    -> full      through elementwise ops and reshapes
 *   full    -> reduced   through another reduce over the same F and R
 *   reduced -> reduced'  through a permutation: a view (permute, reshape) that
 *                        reads every reduced value exactly once, e.g. the
 *                        transpose of a weight gradient x.T @ dout
 * A reduced-space value carries its *map*: which row of the loop space each
 * of its elements belongs to (identity, or a permutation). Every path to a
 * node must agree on its map. A root reached through a permutation is stored
 * through the inverse permutation, indexed by the kernel's own rows, so a
 * transposed gradient (or scan) and an SGD step on it are outputs of the
 * kernel that computes it; more than one such root (an update with state:
 * momentum, Adam's m and v) realizes the reduce on its own instead (their
 * scattered stores cost more than a kernel of their own, follow()).
 * Every realized node reached becomes an output of r's kernel. Anything else
 * (another loop space, a permute/shrink/pad of a reduced value, a copy, two
 * roots that read each other) forces r to be realized on its own.
 * A reduce already realized (asked for: a gradient realized with its
 * optimizer step; or by an earlier pass) is followed the same way by the
 * merging sweep, as its kernel's first root: the roots it reaches join its
 * kernel when nothing forces it (else they read its buffer), only in-place
 * updates when it has more than TC_REDUCE_ROWS rows (stored_takes).
 *
 * Cost rule: a reduce is only ever computed where each of its values is used
 * once per row of its own loop space (broadcast over R only), so fusion never
 * re-runs an expensive reduce (a matmul, a conv) per output element.
 *
 * Passes. Deciding one reduce can change another's answer (a realized
 * reduce is a root for the reduces before it), so grouping runs in passes
 * until nothing changes; the realize set only grows, so this ends. A pass
 * follows every reduce, producers first, and realizes every reduce (or the
 * value it cuts at) that cannot be followed, each seen by the reduces after
 * it; only a pass that realized nothing merges kernels. Then, in one go, the
 * broadcast values no reduce absorbed are realized; then the deferred
 * reduces no other reduce's outcome depends on; then the elementwise merges
 * and the assign rules (hazard.c).
 * Measured on deep graphs the passes stay few (4 for an L-layer MLP's
 * training step, whatever L), each O(n) in graph nodes plus the searches
 * of kgraph.c: following a reduce visits its consumers up to the roots they
 * reach (and on through roots it may recompute), every node once per reduce
 * whose kernel could contain it.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* ---- the loop space of a reduce ---- */

typedef struct {
    int ndim;                   /* rank of F */
    const int64_t *full;        /* F: the reduce's input shape */
    uint32_t axes;              /* R */
    int64_t red[TC_MAX_DIMS];   /* F with R at 1 */
    int64_t red_numel;          /* elements of the reduced space */
} space;

static void space_of(const tc_node *r, space *s) {
    s->ndim = r->srcs[0]->ndim;
    s->full = r->srcs[0]->shape;
    s->axes = r->axes;
    s->red_numel = 1;
    for (int a = 0; a < s->ndim; a++) {
        s->red[a] = (r->axes >> a) & 1 ? 1 : s->full[a];
        s->red_numel *= s->red[a];
    }
}

static bool same_full(const space *s, int ndim, const int64_t *shape) {
    return ndim == s->ndim && memcmp(shape, s->full, sizeof(int64_t) * (size_t)ndim) == 0;
}

/* via maps an index of F onto the flat reduced-space index, ignoring R */
static bool is_row_broadcast(const tc_node *via, const space *s) {
    const tc_st *st = via->st;
    if (st->n_views != 1 || !same_full(s, via->ndim, via->shape)) return false;
    const tc_view *v = &st->views[0];
    if (v->has_mask || v->offset != 0) return false;
    int64_t stride = 1;
    for (int a = s->ndim - 1; a >= 0; a--) {
        int64_t want = s->red[a] == 1 || s->full[a] == 1 ? 0 : stride;
        if (v->strides[a] != want) return false;
        stride *= s->red[a];
    }
    return true;
}

/* ---- following a reduce's consumers ----
 * Lists with an index (a map from node to position + 1): an entry is valid
 * only while the list still holds that node there, so truncating the list
 * undoes additions (extend_through's rollback) without touching the map. */

typedef struct {
    tc_ptrvec items; /* in the order added */
    tc_ptrmap at;    /* item -> its position + 1 (stale past items.n) */
} ilist;

static int ilist_find(const ilist *l, const void *p) {
    void *v = NULL;
    if (!tc_ptrmap_get(&l->at, p, &v)) return -1;
    int i = (int)(intptr_t)v - 1;
    return i < l->items.n && l->items.items[i] == p ? i : -1;
}

static void ilist_add(tc_sched_ctx *c, ilist *l, void *p) {
    if (!tc_ptrmap_put(&l->at, p, (void *)(intptr_t)(l->items.n + 1))) c->failed = true;
    tc_sched_push(c, &l->items, p);
}

static void ilist_free(tc_sched_ctx *c, ilist *l) {
    c->failed |= l->at.failed;
    tc_ptrvec_free(&l->items);
    tc_ptrmap_free(&l->at);
}

typedef struct {
    tc_sched_ctx *c;     /* the schedule (its trackers own the maps made here) */
    bool forced;         /* r must be realized on its own ... */
    tc_node *cut;        /* ... or, better, this value it reaches (see group_pass) */
    ilist roots;         /* realized nodes reached: r's kernel's outputs */
    tc_ptrvec root_maps; /* parallel to roots: each root's map (NULL: identity) */
    tc_ptrmap through;   /* roots whose readers are all inside the kernel too (a set) */
    ilist validated;     /* expand_pending bases whose broadcast r absorbs */
    ilist seen;          /* nodes visited */
    tc_ptrvec maps;      /* parallel to seen: each node's map (NULL: identity) */
    tc_ptrvec stack;     /* triples (node, full-space flag, map) to visit */
} reach;

static void reach_free(reach *o) {
    ilist_free(o->c, &o->roots);
    tc_ptrvec_free(&o->root_maps);
    o->c->failed |= o->through.failed;
    tc_ptrmap_free(&o->through);
    ilist_free(o->c, &o->validated);
    ilist_free(o->c, &o->seen);
    tc_ptrvec_free(&o->maps);
    tc_ptrvec_free(&o->stack);
}

static bool same_map(const tc_st *a, const tc_st *b) {
    return a == b || (a && b && tc_st_equal(a, b));
}

/* x reached with map m: a node seen before must have been seen with the same
 * map (two paths that disagree on which row an element belongs to) */
static void visit(reach *o, tc_node *x, bool full, tc_st *m) {
    int at = ilist_find(&o->seen, x);
    if (at >= 0) {
        if (!same_map(o->maps.items[at], m)) o->forced = true;
        return;
    }
    ilist_add(o->c, &o->seen, x);
    tc_sched_push(o->c, &o->maps, m);
    tc_sched_push(o->c, &o->stack, x);
    tc_sched_push(o->c, &o->stack, (void *)(uintptr_t)full);
    tc_sched_push(o->c, &o->stack, m);
}

static void add_root(reach *o, tc_node *t, tc_st *m) {
    int at = ilist_find(&o->roots, t);
    if (at >= 0) {
        if (!same_map(o->root_maps.items[at], m)) o->forced = true;
        return;
    }
    ilist_add(o->c, &o->roots, t);
    tc_sched_push(o->c, &o->root_maps, m);
}

/* Is m (one view onto a contiguous array of numel elements) a permutation:
 * every element read exactly once, no mask? That holds when its axes,
 * sorted by stride, have the strides of a contiguous layout. */
static bool is_permutation(const tc_st *m, int64_t numel) {
    if (m->n_views != 1) return false;
    const tc_view *v = &m->views[0];
    if (v->has_mask || v->offset != 0) return false;
    int64_t n = 1;
    int order[TC_MAX_DIMS], k = 0;
    for (int a = 0; a < v->ndim; a++) {
        n *= v->shape[a];
        if (v->shape[a] > 1) order[k++] = a;
    }
    if (n != numel) return false;
    for (int i = 1; i < k; i++) /* insertion sort, largest stride first */
        for (int j = i; j > 0 && v->strides[order[j]] > v->strides[order[j - 1]]; j--) {
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    int64_t want = 1;
    for (int i = k - 1; i >= 0; i--) {
        if (v->strides[order[i]] != want) return false;
        want *= v->shape[order[i]];
    }
    return true;
}

/* the map of a value read through view via from x (map mx): mx composed
 * with via's tracker; NULL when that is the identity. *ok = false when the
 * tracker could not be made. The schedule owns what is made here. */
static tc_st *map_through(reach *o, const tc_node *x, tc_st *mx, const tc_node *via, bool *ok) {
    tc_st *base = mx ? mx : tc_st_from_shape(x->ndim, x->shape);
    tc_st *m = base ? tc_st_compose(base, via->st) : NULL;
    if (!mx) tc_st_free(base);
    *ok = m != NULL;
    if (m && tc_st_is_contiguous(m)) {
        tc_st_free(m);
        return NULL;
    }
    if (m && tc_ptrvec_push(&o->c->s->sts, m) != TC_OK) {
        tc_st_free(m);
        *ok = false;
        return NULL;
    }
    return m;
}

/* one consumer edge x -> cons (through via) of a value in the given space,
 * with map m (reduced space only) */
static void follow_edge(reach *o, const space *s, tc_node *x, bool full, tc_st *m, tc_node *cons,
                        tc_node *via) {
    bool cfull = full;
    tc_st *cm = m;
    bool reshape = via && tc_st_is_contiguous(via->st);
    if (reshape && tc_node_numel(via) != tc_node_numel(x)) { /* a shrink to nothing */
        o->forced = true;
        return;
    }
    if (via && (m || !tc_st_is_contiguous(via->st))) {
        bool ok = true;
        bool cuttable = !tc_op_is_reduce(x->op) && tc_binfo_of(x)->expand_pending;
        if (full) {
            o->forced = true;
            if (cuttable) o->cut = x;
            return;
        }
        if (!m && is_row_broadcast(via, s)) {
            cfull = true;
            cm = NULL;
            if (tc_binfo_of(x)->expand_pending && ilist_find(&o->validated, x) < 0)
                ilist_add(o->c, &o->validated, x);
        } else {
            cm = map_through(o, x, m, via, &ok);
            if (!ok || (cm && !is_permutation(cm, s->red_numel))) {
                o->forced = true;
                if (ok && cuttable) o->cut = x;
                return;
            }
        }
    }
    if (cons->op == TC_OP_COPY || cons->op == TC_OP_SCATTER || cons->op == TC_OP_PUT) {
        /* kernels of their own */
        o->forced = true;
    } else if (tc_op_is_reduce(cons->op)) {
        /* a consecutive reduce: same loop space, reading a full-space value
         * (realized or not: a realized reduce over other axes is no output
         * of this kernel) */
        if (!cfull || cons->axes != s->axes ||
            !same_full(s, cons->srcs[0]->ndim, cons->srcs[0]->shape)) {
            o->forced = true;
            if (!tc_op_is_reduce(x->op) && tc_binfo_of(x)->expand_pending) o->cut = x;
        } else if (tc_binfo_of(cons)->realize)
            add_root(o, cons, NULL);
        else
            visit(o, cons, false, NULL); /* a reduce's value is reduced-space */
    } else if (tc_binfo_of(cons)->realize) {
        add_root(o, cons, cm);
    } else {
        visit(o, cons, cfull, cm);
    }
}

static void run(reach *o, const space *s) {
    while (o->stack.n && !o->forced && !o->c->failed) {
        tc_st *m = o->stack.items[--o->stack.n];
        bool full = (uintptr_t)o->stack.items[--o->stack.n] != 0;
        tc_node *x = o->stack.items[--o->stack.n];
        tc_binfo *xi = tc_binfo_of(x);
        for (int k = 0; k < xi->consumers.n && !o->forced; k += 2)
            follow_edge(o, s, x, full, m, xi->consumers.items[k], xi->consumers.items[k + 1]);
    }
}

/* tries to go on through root t: when everything reading t can be computed
 * in the same kernel (t's value is then recomputed, not loaded), its readers'
 * roots join; otherwise they read t's buffer and nothing changes (what the
 * try added is dropped again) */
static void extend_through(reach *o, const space *s, tc_node *t, tc_st *m) {
    int n_seen = o->seen.items.n, n_roots = o->roots.items.n, n_valid = o->validated.items.n;
    tc_node *cut = o->cut;
    bool full = tc_node_numel(t) != s->red_numel;
    tc_sched_push(o->c, &o->stack, t);
    tc_sched_push(o->c, &o->stack, (void *)(uintptr_t)full);
    tc_sched_push(o->c, &o->stack, full ? NULL : m);
    run(o, s);
    if (!o->forced) {
        if (!tc_ptrset_add(&o->through, t) && o->through.failed) o->c->failed = true;
        return;
    }
    o->forced = false;
    o->cut = cut;
    o->stack.n = 0;
    o->seen.items.n = o->maps.n = n_seen;
    o->roots.items.n = o->root_maps.n = n_roots;
    o->validated.items.n = n_valid;
}

static void follow(tc_node *r, const space *s, reach *o) {
    visit(o, r, false, NULL);
    run(o, s);
    /* roots found so far may lead on to more (the list grows as we go) */
    for (int i = 0; i < o->roots.items.n && !o->forced && !o->c->failed; i++) {
        tc_node *t = o->roots.items.items[i];
        if (t->op != TC_OP_COPY && !tc_binfo_of(t)->keep_stored &&
            !tc_ptrmap_get(&o->through, t, NULL))
            extend_through(o, s, t, o->root_maps.items[i]);
    }
    if (!o->roots.items.n) o->forced = true;
    /* One root stored through a permutation (a gradient or a scan stored
     * transposed, an SGD step on it) costs what a transposing copy would;
     * more (momentum, Adam's m, v and w) each add a scattered scalar load
     * and store per element after the tile (CPU: a ResNet-18 layer-4 weight
     * gradient 14 ms alone, 28-37 ms with Adam fused; the update on its own
     * reading the realized gradient 4 ms), so r is realized on its own and
     * they read it in a kernel of theirs */
    int permuted = 0;
    for (int i = 0; i < o->root_maps.n; i++) permuted += o->root_maps.items[i] != NULL;
    if (permuted > 1) o->forced = true;
}

/* ---- merging a reduce's roots into its kernel ---- */

/* can the groups of o's roots become one kernel over space s? */
static bool merge_ok(tc_sched_ctx *c, const reach *o, const space *s) {
    tc_ptrvec reps = {0};
    unsigned w = tc_sched_new_walk(c);
    for (int i = 0; i < o->roots.items.n; i++) {
        tc_binfo *g = tc_group_find(tc_binfo_of(o->roots.items.items[i]));
        if (g->group_mark == w) continue;
        g->group_mark = w;
        tc_sched_push(c, &reps, g);
    }
    bool ok = true;
    for (int i = 0; i < reps.n && ok; i++) {
        const tc_binfo *g = reps.items[i];
        if (g->has_reduce && (g->axes != s->axes || !same_full(s, g->full_ndim, g->full))) ok = false;
    }
    for (int i = 0; i < o->roots.items.n && ok; i++) { /* an earlier reduce's store of a root agrees */
        const tc_binfo *ri = tc_binfo_of(o->roots.items.items[i]);
        if (ri->mapped && !same_map(ri->map, o->root_maps.items[i])) ok = false;
    }
    ok = ok && !tc_kg_conflict(c, &reps, &o->through);
    tc_ptrvec_free(&reps);
    return ok;
}

/* the store of a root whose elements map onto the loop space's rows by the
 * permutation m: the loop space's reduced shape read in m's stride order is
 * the root's index permuted, so the inverse is a permute then a reshape of
 * the root's own layout */
static tc_st *inverse_store(const tc_st *m, const space *s) {
    const tc_view *v = &m->views[0];
    int order[TC_MAX_DIMS], k = 0;
    for (int a = 0; a < v->ndim; a++) order[k++] = a;
    for (int i = 1; i < k; i++) /* stable, largest stride first, size-1 axes last */
        for (int j = i; j > 0; j--) {
            int64_t sj = v->shape[order[j]] > 1 ? v->strides[order[j]] : -1;
            int64_t sp = v->shape[order[j - 1]] > 1 ? v->strides[order[j - 1]] : -1;
            if (sj <= sp) break;
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    tc_st *own = tc_st_from_shape(v->ndim, v->shape);
    tc_st *p = own ? tc_st_permute(own, order) : NULL;
    tc_st *r = p ? tc_st_reshape(p, s->ndim, s->red) : NULL;
    tc_st_free(own);
    tc_st_free(p);
    return r;
}

static bool merge(tc_sched_ctx *c, const reach *o, const space *s) {
    for (int i = 0; i < o->roots.items.n; i++) { /* permuted outputs: their stores first */
        tc_binfo *ri = tc_binfo_of(o->roots.items.items[i]);
        const tc_st *m = o->root_maps.items[i];
        if (ri->mapped || !m) continue;
        tc_st *inv = inverse_store(m, s);
        if (!inv || tc_ptrvec_push(&c->s->sts, inv) != TC_OK) {
            tc_st_free(inv);
            c->failed = true;
            return false;
        }
        ri->store_st = inv;
    }
    for (int i = 0; i < o->roots.items.n; i++) {
        tc_binfo *ri = tc_binfo_of(o->roots.items.items[i]);
        ri->mapped = true;
        ri->map = o->root_maps.items[i];
    }
    tc_binfo *rep = tc_group_find(tc_binfo_of(o->roots.items.items[0]));
    for (int i = 1; i < o->roots.items.n; i++) {
        tc_binfo *g = tc_group_find(tc_binfo_of(o->roots.items.items[i]));
        if (g != rep) tc_kg_unite(c, rep, g);
    }
    rep->has_reduce = true;
    rep->full_ndim = s->ndim;
    memcpy(rep->full, s->full, sizeof(int64_t) * (size_t)s->ndim);
    rep->axes = s->axes;
    for (int i = 0; i < o->validated.items.n; i++) tc_binfo_of(o->validated.items.items[i])->validated = true;
    for (int i = 0; i < o->through.cap; i++)
        if (o->through.keys[i]) tc_binfo_of(o->through.keys[i])->inlinable = true;
    return true;
}

/* ---- passes ---- */

/* does the unrealized cone under b (not expanding realized nodes) hold a
 * reduce deferred in this pass? */
static bool cone_has_deferred(tc_sched_ctx *c, tc_node *b) {
    unsigned w = tc_sched_new_walk(c);
    tc_ptrvec stack = {0};
    bool found = false;
    tc_sched_push(c, &stack, b);
    while (stack.n && !found) {
        tc_node *x = tc_node_base(stack.items[--stack.n]);
        if (x->op == TC_OP_BUFFER || x->op == TC_OP_CONST) continue;
        tc_binfo *xi = tc_binfo_of(x);
        if (xi->walk_mark == w || (x != b && xi->realize)) continue;
        xi->walk_mark = w;
        found = xi->is_deferred;
        for (int i = 0; i < x->n_srcs; i++) tc_sched_push(c, &stack, x->srcs[i]);
    }
    tc_ptrvec_free(&stack);
    return found;
}

/* a deferred r lists the reduces its reach holds (but r) in links, pairs
 * (r, reduce), in the order reduces are placed */
static void note_reached(tc_sched_ctx *c, tc_node *r, const reach *o, tc_ptrvec *links) {
    for (int i = 0; i < o->seen.items.n && tc_binfo_of(r)->is_deferred; i++) {
        tc_node *x = o->seen.items.items[i];
        if (x == r || !tc_op_is_reduce(x->op)) continue;
        tc_sched_push(c, links, r);
        tc_sched_push(c, links, x);
    }
}

/* may the kernel of a realized reduce (o's first root) also store the other
 * roots its consumers reach? Any, when it has at most TC_REDUCE_ROWS rows;
 * else only in-place updates (an optimizer's step on a gradient asked
 * for): their own kernel would read the gradient back and read and write
 * the target, against one more store here; a value such as relu(x @ W)
 * costs a read and a write either way, and the stores it adds would cost
 * the reduce's tile more (hazard.c) */
static bool stored_takes(const reach *o, const space *s) {
    if (o->roots.items.n < 2) return false;
    for (int i = 1; i < o->roots.items.n && s->red_numel > TC_REDUCE_ROWS; i++)
        if (((const tc_node *)o->roots.items.items[i])->op != TC_OP_ASSIGN) return false;
    return true;
}

/* follows every unrealized reduce, producers first, and realizes what
 * cannot be followed (each realize is seen by the reduces after it). When
 * deferred is given (a merging sweep), merges each reduce's kernel or defers
 * it (a conflict that a later realize often removes), noting in links what
 * the deferred reduces reach. False when it realized something. */
static bool place_reduces(tc_sched_ctx *c, tc_ptrvec *deferred, tc_ptrvec *links) {
    bool stable = true, nofuse = tc_flag_get(TC_FLAG_NOFUSE) != 0;
    for (int i = 0; i < c->by_id.n && !c->failed; i++) {
        tc_node *r = c->by_id.items[i];
        tc_binfo *ri = tc_binfo_of(r);
        /* a realized reduce (requested, or realized on its own before) is
         * only followed by the merging sweep: its kernel may store what
         * reads it too (a gradient asked for and its optimizer update);
         * TC_NOFUSE keeps every reduce a kernel of its own */
        bool stored = ri->realize;
        if (!tc_op_is_reduce(r->op) || (stored && (!deferred || nofuse))) continue;
        space s;
        space_of(r, &s);
        reach o = {.c = c};
        if (stored) add_root(&o, r, NULL);
        follow(r, &s, &o);
        if (c->failed) {
            reach_free(&o);
            break;
        }
        if (stored) {
            if (!o.forced && stable && stored_takes(&o, &s) && merge_ok(c, &o, &s)) merge(c, &o, &s);
        } else if (o.forced) {
            /* A value of r's loop space read by another loop space (through
             * a broadcasting view: relu(conv + b) read by the next conv's
             * windows; or by a reduce over other axes) that is also read
             * through an expand would be realized anyway: realizing it now,
             * rather than r, lets r's kernel store it (conv, bias and relu
             * in one kernel) */
            tc_kg_realize(c, tc_binfo_of(o.cut ? o.cut : r));
            stable = false;
        } else if (deferred && stable) {
            if (!(merge_ok(c, &o, &s) && merge(c, &o, &s))) {
                ri->is_deferred = true;
                tc_sched_push(c, deferred, r);
            }
            note_reached(c, r, &o, links);
        }
        reach_free(&o);
    }
    return stable;
}

/* Realizes the first deferred reduce, and with it every later one that no
 * reduce realized here reaches: realizing r changes only the reaches that
 * hold r (a realize removes no dependency between other kernels), so what
 * another pass could learn about r comes from the reduces reaching it. The
 * deferrals of a deep graph are chains within a layer (a batch norm's sum,
 * then its variance's: one reach) and independent across layers, so the
 * passes stay a few per layer's chain, not a few per layer. links are the
 * deferred reduces' reaches (note_reached), in deferred's order. */
static void realize_deferred(tc_sched_ctx *c, const tc_ptrvec *deferred, const tc_ptrvec *links) {
    int li = 0;
    for (int i = 0; i < deferred->n; i++) {
        tc_node *r = deferred->items[i];
        bool pick = i == 0 || !tc_binfo_of(r)->is_blocked;
        if (pick) tc_kg_realize(c, tc_binfo_of(r));
        for (; li < links->n && links->items[li] == r; li += 2)
            if (pick) tc_binfo_of(links->items[li + 1])->is_blocked = true;
    }
}

/* One grouping pass; false when it realized something (run another pass).
 * First the reduces are followed until none is forced: those sweeps need no
 * groups (merges depend on the realize set, never the other way round).
 * Then the merging sweep, with the kernel graph of the final realize set.
 * A reduce whose kernel would conflict (an assign hazard, a cycle) is only
 * deferred: the conflict often comes from an intermediate still unrealized
 * that the end of this pass realizes (a broadcast value no reduce absorbed),
 * and the next pass may merge it; only when nothing else changes is it
 * realized. */
static bool group_pass(tc_sched_ctx *c) {
    c->in_pass = false;
    while (!place_reduces(c, NULL, NULL) && !c->failed) {
    }
    tc_kg_reset(c);
    tc_ptrvec deferred = {0}, links = {0};
    bool stable = place_reduces(c, &deferred, &links);
    bool absorbed = true; /* every pending broadcast went into a reduce's kernel */
    for (int i = 0; i < c->bases.n && stable; i++) {
        tc_binfo *bi = tc_binfo_of(c->bases.items[i]);
        if (bi->expand_pending && !bi->validated && !bi->realize && !cone_has_deferred(c, bi->node)) {
            tc_kg_realize(c, bi); /* its reduce went elsewhere: the expand recomputes it */
            absorbed = false;
        }
    }
    stable = stable && absorbed;
    if (stable && deferred.n) {
        realize_deferred(c, &deferred, &links);
        stable = false;
    }
    tc_ptrvec_free(&deferred);
    tc_ptrvec_free(&links);
    if (c->failed) return true;
    if (stable) tc_hazard_merge_elementwise(c);
    return stable && tc_hazard_protect_targets(c) && tc_hazard_split_old_readers(c);
}

TC_MUST_USE tc_status tc_group_reduces(tc_sched_ctx *c) {
    bool nofuse = tc_flag_get(TC_FLAG_NOFUSE) != 0;
    for (int i = 0; i < c->bases.n && nofuse; i++) {
        tc_node *b = c->bases.items[i];
        if (tc_op_is_reduce(b->op)) tc_binfo_of(b)->realize = true;
    }
    while (!group_pass(c) && !c->failed) {
    }
    return c->failed ? TC_ERR_MEMORY : TC_OK;
}
