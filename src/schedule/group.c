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
 * through the inverse permutation, indexed by the kernel's own rows, so the
 * optimizer update of a transposed gradient is an extra output of the
 * kernel that computes the gradient.
 * Every realized node reached becomes an output of r's kernel. Anything else
 * (another loop space, a permute/shrink/pad of a reduced value, a copy, two
 * roots that read each other) forces r to be realized on its own.
 *
 * Cost rule: a reduce is only ever computed where each of its values is used
 * once per row of its own loop space (broadcast over R only), so fusion never
 * re-runs an expensive reduce (a matmul, a conv) per output element.
 *
 * Deciding one reduce can change another's answer (a realized reduce is a
 * root for the reduces before it), so grouping runs in passes until nothing
 * changes; the realize set only grows, so this ends.
 */
#include "schedule.h"

#include <stdlib.h>
#include <string.h>

tc_binfo *tc_group_find(tc_binfo *b) {
    while (b->parent && b->parent != b) {
        if (b->parent->parent) b->parent = b->parent->parent; /* path halving */
        b = b->parent;
    }
    return b;
}

static bool contains(const tc_ptrvec *v, const void *p) {
    for (int i = 0; i < v->n; i++)
        if (v->items[i] == p) return true;
    return false;
}

static void push_unique(tc_ptrvec *v, void *p) {
    if (!contains(v, p)) tc_ptrvec_push(v, p);
}

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

/* ---- following a reduce's consumers ---- */

typedef struct {
    bool forced;         /* r must be realized on its own ... */
    tc_node *cut;        /* ... or, better, this value it reaches (see group_pass) */
    tc_ptrvec roots;     /* realized nodes reached: r's kernel's outputs */
    tc_ptrvec root_maps; /* parallel to roots: each root's map (NULL: identity) */
    tc_ptrvec through;   /* roots whose readers are all inside the kernel too */
    tc_ptrvec validated; /* expand_pending bases whose broadcast r absorbs */
    tc_ptrvec seen;      /* nodes visited */
    tc_ptrvec maps;      /* parallel to seen: each node's map (NULL: identity) */
    tc_ptrvec stack;     /* triples (node, full-space flag, map) to visit */
    tc_ptrvec *owner;    /* the schedule's trackers: maps made here go there */
} reach;

static void reach_free(reach *o) {
    tc_ptrvec_free(&o->roots);
    tc_ptrvec_free(&o->root_maps);
    tc_ptrvec_free(&o->through);
    tc_ptrvec_free(&o->validated);
    tc_ptrvec_free(&o->seen);
    tc_ptrvec_free(&o->maps);
    tc_ptrvec_free(&o->stack);
}

static int index_of(const tc_ptrvec *v, const void *p) {
    for (int i = 0; i < v->n; i++)
        if (v->items[i] == p) return i;
    return -1;
}

static bool same_map(const tc_st *a, const tc_st *b) {
    return a == b || (a && b && tc_st_equal(a, b));
}

/* x reached with map m: a node seen before must have been seen with the same
 * map (two paths that disagree on which row an element belongs to) */
static void visit(reach *o, tc_node *x, bool full, tc_st *m) {
    int at = index_of(&o->seen, x);
    if (at >= 0) {
        if (!same_map(o->maps.items[at], m)) o->forced = true;
        return;
    }
    tc_ptrvec_push(&o->seen, x);
    tc_ptrvec_push(&o->maps, m);
    tc_ptrvec_push(&o->stack, x);
    tc_ptrvec_push(&o->stack, (void *)(uintptr_t)full);
    tc_ptrvec_push(&o->stack, m);
}

static void add_root(reach *o, tc_node *t, tc_st *m) {
    int at = index_of(&o->roots, t);
    if (at >= 0) {
        if (!same_map(o->root_maps.items[at], m)) o->forced = true;
        return;
    }
    tc_ptrvec_push(&o->roots, t);
    tc_ptrvec_push(&o->root_maps, m);
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
    if (m && tc_ptrvec_push(o->owner, m) != TC_OK) {
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
            if (tc_binfo_of(x)->expand_pending) push_unique(&o->validated, x);
        } else {
            cm = map_through(o, x, m, via, &ok);
            if (!ok || (cm && !is_permutation(cm, s->red_numel))) {
                o->forced = true;
                if (ok && cuttable) o->cut = x;
                return;
            }
        }
    }
    if (cons->op == TC_OP_COPY) {
        o->forced = true;
    } else if (tc_binfo_of(cons)->realize) {
        add_root(o, cons, cm);
    } else if (tc_op_is_reduce(cons->op)) {
        /* a consecutive reduce: same loop space, reading a full-space value */
        if (!cfull || cons->axes != s->axes ||
            !same_full(s, cons->srcs[0]->ndim, cons->srcs[0]->shape)) {
            o->forced = true;
            if (!tc_op_is_reduce(x->op) && tc_binfo_of(x)->expand_pending) o->cut = x;
        } else
            visit(o, cons, false, NULL); /* a reduce's value is reduced-space */
    } else {
        visit(o, cons, cfull, cm);
    }
}

static void run(reach *o, const space *s) {
    while (o->stack.n && !o->forced) {
        tc_st *m = o->stack.items[--o->stack.n];
        bool full = (uintptr_t)o->stack.items[--o->stack.n] != 0;
        tc_node *x = o->stack.items[--o->stack.n];
        tc_binfo *xi = tc_binfo_of(x);
        for (int k = 0; k < xi->consumers.n && !o->forced; k += 2)
            follow_edge(o, s, x, full, m, xi->consumers.items[k], xi->consumers.items[k + 1]);
    }
}

static void copy_vec(tc_ptrvec *dst, const tc_ptrvec *src) {
    dst->n = 0;
    for (int i = 0; i < src->n; i++) tc_ptrvec_push(dst, src->items[i]);
}

/* tries to go on through root t: when everything reading t can be computed
 * in the same kernel (t's value is then recomputed, not loaded), its readers'
 * roots join; otherwise they read t's buffer and nothing changes */
static void extend_through(reach *o, const space *s, tc_node *t, tc_st *m) {
    reach e = {.owner = o->owner};
    copy_vec(&e.seen, &o->seen);
    copy_vec(&e.maps, &o->maps);
    copy_vec(&e.roots, &o->roots);
    copy_vec(&e.root_maps, &o->root_maps);
    bool full = tc_node_numel(t) != s->red_numel;
    tc_ptrvec_push(&e.stack, t);
    tc_ptrvec_push(&e.stack, (void *)(uintptr_t)full);
    tc_ptrvec_push(&e.stack, full ? NULL : m);
    run(&e, s);
    if (!e.forced) {
        push_unique(&o->through, t);
        copy_vec(&o->roots, &e.roots);
        copy_vec(&o->root_maps, &e.root_maps);
        for (int i = 0; i < e.validated.n; i++) push_unique(&o->validated, e.validated.items[i]);
        copy_vec(&o->seen, &e.seen);
        copy_vec(&o->maps, &e.maps);
    }
    reach_free(&e);
}

static void follow(tc_node *r, const space *s, reach *o) {
    visit(o, r, false, NULL);
    run(o, s);
    /* roots found so far may lead on to more (the list grows as we go) */
    for (int i = 0; i < o->roots.n && !o->forced; i++) {
        tc_node *t = o->roots.items[i];
        if (t->op != TC_OP_COPY && !tc_binfo_of(t)->keep_stored && !contains(&o->through, t))
            extend_through(o, s, t, o->root_maps.items[i]);
    }
    if (!o->roots.n) o->forced = true;
}

/* ---- roots and their groups ---- */

/* the realized nodes (buffers and other roots) a root's kernel reads */
static const tc_ptrvec *root_loads(tc_binfo *ri) {
    if (ri->loads_done) return &ri->loads;
    ri->loads_done = true;
    tc_ptrvec stack = {0}, seen = {0};
    for (int i = 0; i < ri->node->n_srcs; i++) tc_ptrvec_push(&stack, ri->node->srcs[i]);
    while (stack.n) {
        tc_node *x = tc_node_base(stack.items[--stack.n]);
        if (x->op == TC_OP_BUFFER || (x->scratch && tc_binfo_of(x)->realize)) {
            push_unique(&ri->loads, x);
            continue;
        }
        if (x->op == TC_OP_CONST || contains(&seen, x)) continue;
        tc_ptrvec_push(&seen, x);
        for (int i = 0; i < x->n_srcs; i++) tc_ptrvec_push(&stack, x->srcs[i]);
    }
    tc_ptrvec_free(&stack);
    tc_ptrvec_free(&seen);
    return &ri->loads;
}

/* the roots of the groups represented in reps */
static void members_of(tc_sched_ctx *c, const tc_ptrvec *reps, tc_ptrvec *members) {
    for (int i = 0; i < c->bases.n; i++) {
        tc_binfo *bi = tc_binfo_of(c->bases.items[i]);
        if (bi->realize && contains(reps, tc_group_find(bi))) tc_ptrvec_push(members, bi->node);
    }
}

static bool is_member_target(const tc_ptrvec *members, const tc_node *l, const tc_node *except) {
    for (int j = 0; j < members->n; j++) {
        const tc_node *m = members->items[j];
        if (m != except && m->op == TC_OP_ASSIGN && tc_node_base(m->srcs[1]) == l) return true;
    }
    return false;
}

/* links each group's realized roots from its representative (needs_member's
 * scratch, tagged with epoch): one pass over the bases per search */
static void link_groups(tc_sched_ctx *c, unsigned epoch) {
    for (int b = 0; b < c->bases.n; b++) {
        tc_binfo *yi = tc_binfo_of(c->bases.items[b]);
        if (!yi->realize || yi->node->op == TC_OP_BUFFER) continue;
        tc_binfo *g = tc_group_find(yi);
        if (g->link_epoch != epoch) {
            g->link_epoch = epoch;
            g->link_visited = false;
            g->link_head = NULL;
        }
        yi->link_next = g->link_head;
        g->link_head = yi;
    }
}

/* does root k need (through loads of other kernels) the output of a member?
 * A kernel needs whatever any root of its group loads; each group is
 * searched once (the scan was once per node reached, over every base). */
static bool needs_member(tc_sched_ctx *c, tc_node *k, const tc_ptrvec *members) {
    static unsigned epochs; /* under the API lock */
    unsigned epoch = ++epochs;
    link_groups(c, epoch);
    tc_ptrvec stack = {0};
    bool found = false;
    tc_ptrvec_push(&stack, k);
    while (stack.n && !found) {
        tc_node *x = stack.items[--stack.n];
        tc_binfo *g = tc_group_find(tc_binfo_of(x));
        if (g->link_epoch != epoch || g->link_visited) continue;
        g->link_visited = true;
        for (tc_binfo *yi = g->link_head; yi && !found; yi = yi->link_next) {
            const tc_ptrvec *loads = root_loads(yi);
            for (int i = 0; i < loads->n && !found; i++) {
                tc_node *l = loads->items[i];
                if (l->op == TC_OP_BUFFER) continue;
                if (contains(members, l)) found = true;
                else tc_ptrvec_push(&stack, l);
            }
        }
    }
    tc_ptrvec_free(&stack);
    return found;
}

/* A member reads buffer t, so the kernel must run before every assign to t
 * outside it; it cannot if it needs (through any kernels) such an assign's
 * own kernel: a cycle. */
static bool needs_outside_assign_of(tc_sched_ctx *c, const tc_ptrvec *members, tc_node *t) {
    bool found = false;
    for (int i = 0; i < c->bases.n && !found; i++) {
        tc_node *a = c->bases.items[i];
        if (a->op != TC_OP_ASSIGN || contains(members, a) || tc_node_base(a->srcs[1]) != t) continue;
        tc_ptrvec group = {0}, reps = {0};
        tc_ptrvec_push(&reps, tc_group_find(tc_binfo_of(a)));
        members_of(c, &reps, &group);
        for (int m = 0; m < members->n && !found; m++) found = needs_member(c, members->items[m], &group);
        tc_ptrvec_free(&group);
        tc_ptrvec_free(&reps);
    }
    return found;
}

/* Would one kernel computing all of members be wrong or impossible to order?
 * - a member reads another member it cannot recompute (not in `inline_ok`);
 * - a member reads the target of another member's ASSIGN (old value needed);
 * - a member needs another member through a kernel outside the group, or a
 *   kernel outside must run before the group (it reads an assign target of a
 *   member) yet needs a member's output, or the group must run before an
 *   outside assign (it reads its target) yet needs that assign's kernel: all
 *   three are cycles. */
static bool members_conflict(tc_sched_ctx *c, const tc_ptrvec *members, const tc_ptrvec *inline_ok) {
    for (int i = 0; i < members->n; i++) {
        tc_node *m = members->items[i];
        const tc_ptrvec *loads = root_loads(tc_binfo_of(m));
        for (int k = 0; k < loads->n; k++) {
            tc_node *l = loads->items[k];
            if (contains(members, l) && !tc_binfo_of(l)->inlinable && !contains(inline_ok, l)) return true;
            if (is_member_target(members, l, m)) return true;
            if (l->op != TC_OP_BUFFER && !contains(members, l) && needs_member(c, l, members)) return true;
            if (l->op == TC_OP_BUFFER && needs_outside_assign_of(c, members, l)) return true;
        }
    }
    for (int i = 0; i < c->bases.n; i++) { /* outside readers of an assign target */
        tc_node *k = c->bases.items[i];
        if (!tc_binfo_of(k)->realize || contains(members, k)) continue;
        const tc_ptrvec *loads = root_loads(tc_binfo_of(k));
        bool reads_target = false;
        for (int j = 0; j < loads->n && !reads_target; j++)
            reads_target = is_member_target(members, loads->items[j], NULL);
        if (reads_target && needs_member(c, k, members)) return true;
    }
    return false;
}

/* can the groups of o's roots become one kernel over space s? */
static bool merge_ok(tc_sched_ctx *c, const reach *o, const space *s) {
    tc_ptrvec reps = {0}, members = {0};
    for (int i = 0; i < o->roots.n; i++)
        push_unique(&reps, tc_group_find(tc_binfo_of(o->roots.items[i])));
    bool ok = true;
    for (int i = 0; i < reps.n && ok; i++) {
        const tc_binfo *g = reps.items[i];
        if (g->has_reduce && (g->axes != s->axes || !same_full(s, g->full_ndim, g->full))) ok = false;
    }
    for (int i = 0; i < o->roots.n && ok; i++) { /* an earlier reduce's store of a root agrees */
        const tc_binfo *ri = tc_binfo_of(o->roots.items[i]);
        if (ri->mapped && !same_map(ri->map, o->root_maps.items[i])) ok = false;
    }
    if (ok) {
        members_of(c, &reps, &members);
        ok = !members_conflict(c, &members, &o->through);
    }
    tc_ptrvec_free(&reps);
    tc_ptrvec_free(&members);
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
    for (int i = 0; i < o->roots.n; i++) { /* permuted outputs: their stores first */
        tc_binfo *ri = tc_binfo_of(o->roots.items[i]);
        const tc_st *m = o->root_maps.items[i];
        if (ri->mapped || !m) continue;
        tc_st *inv = inverse_store(m, s);
        if (!inv || tc_ptrvec_push(&c->s->sts, inv) != TC_OK) {
            tc_st_free(inv);
            return false;
        }
        ri->store_st = inv;
    }
    for (int i = 0; i < o->roots.n; i++) {
        tc_binfo *ri = tc_binfo_of(o->roots.items[i]);
        ri->mapped = true;
        ri->map = o->root_maps.items[i];
    }
    tc_binfo *rep = tc_group_find(tc_binfo_of(o->roots.items[0]));
    for (int i = 1; i < o->roots.n; i++) {
        tc_binfo *g = tc_group_find(tc_binfo_of(o->roots.items[i]));
        if (g != rep) g->parent = rep;
    }
    rep->has_reduce = true;
    rep->full_ndim = s->ndim;
    memcpy(rep->full, s->full, sizeof(int64_t) * (size_t)s->ndim);
    rep->axes = s->axes;
    for (int i = 0; i < o->validated.n; i++) tc_binfo_of(o->validated.items[i])->validated = true;
    for (int i = 0; i < o->through.n; i++) tc_binfo_of(o->through.items[i])->inlinable = true;
    return true;
}

/* every root alone in its group; a realized reduce runs over its own input */
static void reset_groups(tc_sched_ctx *c) {
    for (int i = 0; i < c->bases.n; i++) {
        tc_node *b = c->bases.items[i];
        tc_binfo *bi = tc_binfo_of(b);
        bi->validated = false;
        bi->inlinable = false;
        bi->parent = bi->realize ? bi : NULL;
        bi->has_reduce = false;
        bi->loads.n = 0;
        bi->loads_done = false;
        bi->mapped = false;
        bi->map = bi->store_st = NULL;
        if (bi->realize && tc_op_is_reduce(b->op)) {
            space s;
            space_of(b, &s);
            bi->has_reduce = true;
            bi->full_ndim = s.ndim;
            memcpy(bi->full, s.full, sizeof(int64_t) * (size_t)s.ndim);
            bi->axes = s.axes;
        }
    }
}

/* An assign reads its target's old value and writes the new one in the same
 * kernel, element by element. That is only right when every read of the
 * target is at the element being written (or in an earlier reduce stage of
 * the same row). A read through any other view (a.assign(a.T + b), a flip, a
 * shift) would see elements the kernel has already overwritten, so the value
 * is realized first into a buffer of its own. Runs after grouping, since
 * what the assign's kernel reads itself depends on what got realized. */
/* is n's value computed inside the kernel of `group` (not loaded)? */
static bool computed_in(tc_node *n, tc_binfo *group) {
    if (n->op == TC_OP_BUFFER || n->op == TC_OP_CONST) return false;
    tc_binfo *ni = tc_binfo_of(n);
    return !ni->realize || (ni->inlinable && tc_group_find(ni) == group);
}

static bool protect_assign_targets(tc_sched_ctx *c) {
    bool unchanged = true;
    for (int i = 0; i < c->bases.n; i++) {
        tc_node *a = c->bases.items[i];
        if (a->op != TC_OP_ASSIGN) continue;
        tc_node *target = tc_node_base(a->srcs[1]), *value = tc_node_base(a->srcs[0]);
        tc_binfo *group = tc_group_find(tc_binfo_of(a));
        if (!computed_in(value, group)) continue; /* loaded: written by an earlier kernel */
        tc_ptrvec stack = {0}, seen = {0}, seen_bent = {0}; /* pairs (node, through a bent view) */
        bool crooked = false;
        tc_ptrvec_push(&stack, value);
        tc_ptrvec_push(&stack, NULL);
        while (stack.n && !crooked) {
            bool bent = stack.items[--stack.n] != NULL;
            tc_node *x = stack.items[--stack.n];
            tc_ptrvec *visited = bent ? &seen_bent : &seen;
            if (contains(visited, x)) continue;
            tc_ptrvec_push(visited, x);
            for (int k = 0; k < x->n_srcs && !crooked; k++) {
                tc_node *src = x->srcs[k], *sb = tc_node_base(src);
                bool b = bent || (src != sb && !tc_st_is_contiguous(src->st));
                if (sb == target && b) crooked = true;
                if (computed_in(sb, group)) {
                    tc_ptrvec_push(&stack, sb);
                    tc_ptrvec_push(&stack, b ? (void *)1 : NULL);
                }
            }
        }
        if (crooked) {
            tc_binfo_of(value)->realize = true;
            tc_binfo_of(value)->keep_stored = true;
            unchanged = false;
        }
        tc_ptrvec_free(&stack);
        tc_ptrvec_free(&seen);
        tc_ptrvec_free(&seen_bent);
    }
    return unchanged;
}

/* ---- elementwise multi-output kernels ----
 * Roots without a reduce that have the same size and read each other, or a
 * common input, at their own index are one kernel: Adam's m, v and param
 * updates (the param update reads the new m and v, which the kernel has in
 * registers anyway), or two results of one input. Such a group also joins a
 * reduce's kernel whose rows it matches one to one (its size is the reduced
 * space's, the reduce's outputs are stored unpermuted): a realized reduce
 * (a batch norm's sum, read by many other kernels) then also stores what is
 * computed from it per row (the mean, the running-mean update) instead of a
 * kernel of its own reading it back. Only reduces of at most REDUCE_ROWS
 * rows: a conv's kernel (a register tile per 9.4M outputs) that also stored
 * its relu'd copy lost its tile plan, 6 -> 20 ms (beautiful_mnist's conv1). */

/* the realized nodes root r reads at exactly its own flat index (no view,
 * or a reshape of equal size, all along the path); bent_out (or NULL): the
 * ones it reads otherwise */
static void identity_loads(tc_node *r, tc_ptrvec *out, tc_ptrvec *bent_out) {
    tc_ptrvec stack = {0}, seen = {0}, bent = {0};
    tc_ptrvec_push(&stack, r);
    while (stack.n) {
        tc_node *x = stack.items[--stack.n];
        if (contains(&seen, x)) continue;
        tc_ptrvec_push(&seen, x);
        for (int k = 0; k < x->n_srcs; k++) {
            tc_node *src = x->srcs[k], *b = tc_node_base(src);
            bool same = src == b || (tc_st_is_contiguous(src->st) && tc_node_numel(src) == tc_node_numel(b));
            if (b->op == TC_OP_CONST) continue;
            if (b->op == TC_OP_BUFFER || tc_binfo_of(b)->realize) {
                push_unique(same ? out : &bent, b);
            } else if (same && tc_op_is_elementwise(b->op)) {
                tc_ptrvec_push(&stack, b);
            } else {
                push_unique(&bent, b); /* reached otherwise: not an identity reader */
            }
        }
    }
    for (int i = 0; i < out->n; i++) /* read both ways: not only at the identity */
        if (contains(&bent, out->items[i])) out->items[i--] = out->items[--out->n];
    for (int i = 0; bent_out && i < bent.n; i++) push_unique(bent_out, bent.items[i]);
    tc_ptrvec_free(&stack);
    tc_ptrvec_free(&seen);
    tc_ptrvec_free(&bent);
}

/* does the unrealized cone under b hold one of the nodes in set (with
 * edge: or read one, a realized node at its edge)? */
static bool cone_search(tc_node *b, const tc_ptrvec *set, bool edge) {
    tc_ptrvec stack = {0}, seen = {0};
    bool found = false;
    tc_ptrvec_push(&stack, b);
    while (stack.n && !found) {
        tc_node *x = tc_node_base(stack.items[--stack.n]);
        if (x->op == TC_OP_BUFFER || x->op == TC_OP_CONST || contains(&seen, x)) continue;
        bool is_edge = x != b && tc_binfo_of(x)->realize;
        if (is_edge && !edge) continue;
        tc_ptrvec_push(&seen, x);
        found = contains(set, x);
        if (is_edge) continue;
        for (int i = 0; i < x->n_srcs; i++) tc_ptrvec_push(&stack, x->srcs[i]);
    }
    tc_ptrvec_free(&stack);
    tc_ptrvec_free(&seen);
    return found;
}

enum {
    TINY_KERNEL = 256,   /* elements: below this, kernels of one size merge */
    REDUCE_ROWS = 4096,  /* rows of a reduce whose kernel elementwise groups may join */
};

static bool elementwise_group(tc_binfo *g) {
    return !g->has_reduce;
}

/* elements of group g's rows: its reduced space, or its roots' size */
static int64_t group_rows(const tc_binfo *g) {
    if (!g->has_reduce) return tc_node_numel(g->node);
    int64_t n = 1;
    for (int a = 0; a < g->full_ndim; a++) n *= (g->axes >> a) & 1 ? 1 : g->full[a];
    return n;
}

/* merges the groups of a and b when the result is a correct kernel: two
 * elementwise groups of one size, or an elementwise group into a reduce's
 * group with a row per element */
static bool try_merge_elementwise(tc_sched_ctx *c, tc_node *a, tc_node *b) {
    tc_binfo *ga = tc_group_find(tc_binfo_of(a)), *gb = tc_group_find(tc_binfo_of(b));
    if (ga == gb || !elementwise_group(gb)) return false;
    if (group_rows(ga) != tc_node_numel(gb->node) || (ga->has_reduce && group_rows(ga) > REDUCE_ROWS)) return false;
    tc_ptrvec reps = {0}, members = {0}, inline_ok = {0};
    tc_ptrvec_push(&reps, ga);
    tc_ptrvec_push(&reps, gb);
    members_of(c, &reps, &members);
    bool permuted = false; /* a reduce root stored through a permutation: its rows are not its elements */
    for (int i = 0; i < members.n && ga->has_reduce; i++) permuted |= tc_binfo_of(members.items[i])->store_st != NULL;
    if (permuted) {
        tc_ptrvec_free(&reps);
        tc_ptrvec_free(&members);
        return false;
    }
    tc_ptrvec bent = {0}; /* reduce groups: members read through a view (a flip of a row's value) */
    for (int i = 0; i < members.n; i++) { /* members read at the identity are recomputed */
        tc_ptrvec idl = {0};
        identity_loads(members.items[i], &idl, ga->has_reduce ? &bent : NULL);
        for (int k = 0; k < idl.n; k++)
            if (contains(&members, idl.items[k])) push_unique(&inline_ok, idl.items[k]);
        tc_ptrvec_free(&idl);
    }
    /* a reduce's value is one register per row: a member that reads another
     * member of a reduce's kernel (or a value computed from one) through a
     * view (a flip: other rows) cannot have it (diff seed 5466158) */
    bool ok = true;
    for (int i = 0; i < bent.n && ok; i++) ok = !cone_search(bent.items[i], &members, true);
    ok = ok && !members_conflict(c, &members, &inline_ok);
    if (ok) {
        gb->parent = ga;
        for (int i = 0; i < inline_ok.n; i++) tc_binfo_of(inline_ok.items[i])->inlinable = true;
    }
    tc_ptrvec_free(&reps);
    tc_ptrvec_free(&members);
    tc_ptrvec_free(&inline_ok);
    tc_ptrvec_free(&bent);
    return ok;
}

static bool mergeable_root(const tc_node *n) {
    return n->op != TC_OP_BUFFER && n->op != TC_OP_COPY && tc_binfo_of(n)->realize &&
           !tc_binfo_of(n)->keep_stored;
}

static void merge_elementwise(tc_sched_ctx *c) {
    if (tc_flag_get(TC_FLAG_NOFUSE) != 0 || c->no_merge) return;
    tc_ptrvec readers = {0}; /* pairs (input, root reading it at the identity) */
    for (int i = c->bases.n - 1; i >= 0; i--) {
        tc_node *b = c->bases.items[i];
        if (!mergeable_root(b) || !elementwise_group(tc_group_find(tc_binfo_of(b)))) continue;
        tc_ptrvec idl = {0};
        identity_loads(b, &idl, NULL);
        for (int k = 0; k < idl.n; k++) {
            tc_node *l = idl.items[k];
            if (l->op != TC_OP_BUFFER && mergeable_root(l)) try_merge_elementwise(c, l, b); /* l may be a reduce's */
            for (int j = 0; j < readers.n; j += 2) /* a sibling reading the same input */
                if (readers.items[j] == l) try_merge_elementwise(c, readers.items[j + 1], b);
            tc_ptrvec_push(&readers, l);
            tc_ptrvec_push(&readers, b);
        }
        tc_ptrvec_free(&idl);
    }
    tc_ptrvec_free(&readers);
    /* tiny kernels of one size (optimizer scalars, bias updates) share a
     * launch even without a common input: launching costs more than they do */
    tc_ptrvec tiny = {0};
    for (int i = c->bases.n - 1; i >= 0; i--) {
        tc_node *b = c->bases.items[i];
        if (!mergeable_root(b) || tc_node_numel(b) > TINY_KERNEL ||
            !elementwise_group(tc_group_find(tc_binfo_of(b))))
            continue;
        for (int j = 0; j < tiny.n; j++)
            if (tc_node_numel(tiny.items[j]) == tc_node_numel(b)) try_merge_elementwise(c, tiny.items[j], b);
        tc_ptrvec_push(&tiny, b);
    }
    tc_ptrvec_free(&tiny);
}

/* A kernel that needs an assign's new value (it runs after the assign) and
 * also computes something from the target's old value would have to run
 * before it too: (x*0.5) + x after x := x*0.5. The parts of its own
 * computation that read the old value are realized into buffers of their
 * own first, so the schedule has an order. Returns false when it changed
 * something. */
static bool split_old_readers(tc_sched_ctx *c) {
    bool unchanged = true;
    for (int i = 0; i < c->bases.n; i++) {
        tc_node *a = c->bases.items[i];
        if (a->op != TC_OP_ASSIGN || !tc_binfo_of(a)->realize) continue;
        tc_node *target = tc_node_base(a->srcs[1]);
        tc_ptrvec just_a = {0};
        tc_ptrvec_push(&just_a, a);
        for (int k = 0; k < c->bases.n; k++) {
            tc_node *kn = c->bases.items[k];
            tc_binfo *ki = tc_binfo_of(kn);
            if (kn == a || !ki->realize || kn->op == TC_OP_COPY || tc_group_find(ki) == tc_group_find(tc_binfo_of(a)))
                continue;
            const tc_ptrvec *loads = root_loads(ki);
            if (!contains(loads, target) || !(contains(loads, a) || needs_member(c, kn, &just_a))) continue;
            /* realize the nodes of kn's kernel that read the target */
            tc_ptrvec stack = {0}, seen = {0};
            tc_ptrvec_push(&stack, kn);
            while (stack.n) {
                tc_node *x = stack.items[--stack.n];
                if (contains(&seen, x)) continue;
                tc_ptrvec_push(&seen, x);
                for (int j = 0; j < x->n_srcs; j++) {
                    tc_node *sb = tc_node_base(x->srcs[j]);
                    if (sb == target && x != kn && !tc_binfo_of(x)->realize) {
                        tc_binfo_of(x)->realize = tc_binfo_of(x)->keep_stored = true;
                        unchanged = false;
                    } else if (sb->op != TC_OP_BUFFER && sb->op != TC_OP_CONST && !tc_binfo_of(sb)->realize) {
                        tc_ptrvec_push(&stack, sb);
                    }
                }
            }
            tc_ptrvec_free(&stack);
            tc_ptrvec_free(&seen);
        }
        tc_ptrvec_free(&just_a);
    }
    return unchanged;
}

static int by_id(const void *a, const void *b) {
    const tc_node *x = *(tc_node *const *)a, *y = *(tc_node *const *)b;
    return x->id < y->id ? -1 : x->id > y->id;
}


/* One grouping pass; false when it realized something (run another pass).
 * Reduces are placed producers first. A reduce whose consumers cannot be
 * followed (another loop space, a bent view) is realized at once. A reduce
 * whose kernel would conflict (an assign hazard, a cycle) is only deferred:
 * the conflict often comes from an intermediate still unrealized that the
 * end of this pass realizes (a broadcast value no reduce absorbed), and the
 * next pass may merge it; only when nothing else changes is it realized. */
static bool group_pass(tc_sched_ctx *c) {
    reset_groups(c);
    tc_ptrvec reduces = {0}, deferred = {0}; /* producers first: a node's id is above its sources' */
    for (int i = 0; i < c->bases.n; i++)
        if (tc_op_is_reduce(((tc_node *)c->bases.items[i])->op)) tc_ptrvec_push(&reduces, c->bases.items[i]);
    if (reduces.n > 1) qsort(reduces.items, (size_t)reduces.n, sizeof(void *), by_id);
    bool stable = true;
    for (int i = 0; i < reduces.n && stable; i++) {
        tc_node *r = reduces.items[i];
        tc_binfo *ri = tc_binfo_of(r);
        if (ri->realize) continue;
        space s;
        space_of(r, &s);
        reach o = {.owner = &c->s->sts};
        follow(r, &s, &o);
        if (o.forced) {
            /* A value of r's loop space read by another loop space (through
             * a broadcasting view: relu(conv + b) read by the next conv's
             * windows; or by a reduce over other axes) that is also read
             * through an expand would be realized anyway: realizing it now,
             * rather than r, lets r's kernel store it (conv, bias and relu
             * in one kernel) */
            tc_binfo_of(o.cut ? o.cut : r)->realize = true;
            stable = false;
        } else if (!(merge_ok(c, &o, &s) && merge(c, &o, &s))) {
            tc_ptrvec_push(&deferred, r);
        }
        reach_free(&o);
    }
    tc_ptrvec_free(&reduces);
    for (int i = 0; i < c->bases.n && stable; i++) {
        tc_binfo *bi = tc_binfo_of(c->bases.items[i]);
        if (bi->expand_pending && !bi->validated && !bi->realize && !cone_search(bi->node, &deferred, false)) {
            bi->realize = true; /* its reduce went elsewhere: the expand recomputes it */
            stable = false;
        }
    }
    if (stable && deferred.n) {
        tc_binfo_of(deferred.items[0])->realize = true;
        stable = false;
    }
    tc_ptrvec_free(&deferred);
    if (stable) merge_elementwise(c);
    return stable && protect_assign_targets(c) && split_old_readers(c);
}

tc_status tc_group_reduces(tc_sched_ctx *c) {
    bool nofuse = tc_flag_get(TC_FLAG_NOFUSE) != 0;
    for (int i = 0; i < c->bases.n && nofuse; i++) {
        tc_node *b = c->bases.items[i];
        if (tc_op_is_reduce(b->op)) tc_binfo_of(b)->realize = true;
    }
    while (!group_pass(c)) {
    }
    return TC_OK;
}
