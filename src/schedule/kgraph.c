/* kgraph.c - the kernel graph of one grouping pass: which roots form one
 * kernel (union-find groups with member lists), what each root's kernel
 * loads, and the checks every merge of groups asks: would the merged kernel
 * be part of a cycle, or break an assign (an in-place update) ordering?
 *
 * Edges: a root's kernel loads realized nodes (buffers, other roots); group
 * X -> group Y when a root of Y loads a root of X. Merges never make a cycle
 * (tc_kg_conflict refuses them), so the groups stay a DAG, and each
 * representative keeps a *level* above the level of every group it loads.
 * A chain of loads from group T to group K then only passes groups whose
 * level lies between T's and K's, so the searches skip every group below
 * the lowest level they look for: they walk the slice of the graph between
 * the kernels a merge joins, not the whole graph above them.
 *
 * Cost, n = roots, e = loads (kernel inputs) of all roots, per pass:
 *   tc_kg_reset     O(n + sum of the kernels' unrealized cones + e): every
 *                   root's loads, readers and level, producers first
 *   tc_kg_unite     O(1) for the union, plus raising the levels of the
 *                   groups downstream that sat at or below the new level
 *   tc_kg_conflict  O(members' loads) plus a constant number of searches,
 *                   each about twice the cheaper of two walks (up from its
 *                   starts, down from its targets) over the groups between
 *                   the targets' lowest level and the starts' highest
 * Roots added after a pass started (hazard.c splits) have no level: the
 * searches stop pruning for the rest of that pass (correct, slower).
 */
#include "internal.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

void tc_sched_push(tc_sched_ctx *c, tc_ptrvec *v, void *p) {
    if (tc_ptrvec_push(v, p) != TC_OK) c->failed = true;
}

static int by_id(const void *a, const void *b) {
    const tc_node *x = *(tc_node *const *)a, *y = *(tc_node *const *)b;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* the list stored under key in m, made on first use (NULL: out of memory) */
static tc_ptrvec *list_at(tc_sched_ctx *c, tc_ptrmap *m, const void *key) {
    void *v = NULL;
    if (tc_ptrmap_get(m, key, &v)) return v;
    tc_ptrvec *l = tc_calloc(1, sizeof *l);
    if (!l || !tc_ptrmap_put(m, key, l)) {
        tc_free(l);
        c->failed = true;
        return NULL;
    }
    return l;
}

static void free_lists(tc_ptrmap *m) {
    for (int i = 0; i < m->cap; i++) {
        if (!m->keys[i]) continue;
        tc_ptrvec_free(m->vals[i]);
        tc_free(m->vals[i]);
    }
    tc_ptrmap_free(m);
}

TC_MUST_USE tc_status tc_kg_init(tc_sched_ctx *c) {
    for (int i = 0; i < c->bases.n; i++) {
        tc_node *b = c->bases.items[i];
        tc_sched_push(c, &c->by_id, b);
        if (b->op != TC_OP_ASSIGN) continue;
        tc_ptrvec *l = list_at(c, &c->assigns, tc_node_base(b->srcs[1]));
        if (l) tc_sched_push(c, l, b);
    }
    if (c->failed || c->assigns.failed) return TC_ERR_MEMORY;
    if (c->by_id.n > 1) qsort(c->by_id.items, (size_t)c->by_id.n, sizeof(void *), by_id);
    return TC_OK;
}

void tc_kg_free(tc_sched_ctx *c) {
    free_lists(&c->assigns);
    free_lists(&c->target_readers);
    tc_ptrvec_free(&c->by_id);
}

tc_binfo *tc_group_find(tc_binfo *b) {
    while (b->parent && b->parent != b) {
        if (b->parent->parent) b->parent = b->parent->parent; /* path halving */
        b = b->parent;
    }
    return b;
}

const tc_ptrvec *tc_kg_assigns_of(const tc_sched_ctx *c, const tc_node *t) {
    void *v = NULL;
    return tc_ptrmap_get(&c->assigns, t, &v) ? v : NULL;
}

void tc_kg_realize(tc_sched_ctx *c, tc_binfo *b) {
    b->realize = true;
    if (c->in_pass) c->levels_stale = true;
}

/* the realized nodes (buffers and other roots) a root's kernel reads, each
 * once: a walk of its unrealized cone, cached for the pass */
const tc_ptrvec *tc_kg_loads(tc_sched_ctx *c, tc_binfo *ri) {
    if (ri->loads_done) return &ri->loads;
    ri->loads_done = true;
    unsigned w = tc_sched_new_walk(c);
    tc_ptrmap buffers = {0}; /* BUFFER nodes already listed */
    tc_ptrvec stack = {0};
    for (int i = 0; i < ri->node->n_srcs; i++) tc_sched_push(c, &stack, ri->node->srcs[i]);
    while (stack.n) {
        tc_node *x = tc_node_base(stack.items[--stack.n]);
        if (x->op == TC_OP_BUFFER) {
            if (tc_ptrset_add(&buffers, x)) tc_sched_push(c, &ri->loads, x);
            continue;
        }
        if (x->op == TC_OP_CONST) continue;
        tc_binfo *xi = tc_binfo_of(x);
        if (xi->walk_mark == w) continue;
        xi->walk_mark = w;
        if (xi->realize) {
            tc_sched_push(c, &ri->loads, x);
            continue;
        }
        for (int i = 0; i < x->n_srcs; i++) tc_sched_push(c, &stack, x->srcs[i]);
    }
    c->failed |= buffers.failed;
    tc_ptrmap_free(&buffers);
    tc_ptrvec_free(&stack);
    return &ri->loads;
}

static void reset_base(tc_binfo *bi) {
    tc_node *b = bi->node;
    bi->validated = bi->inlinable = bi->is_deferred = bi->is_blocked = false;
    bi->parent = bi->realize ? bi : NULL;
    bi->next_member = NULL;
    bi->last_member = bi;
    bi->level = 0;
    bi->has_reduce = false;
    bi->loads.n = 0;
    bi->loads_done = false;
    bi->readers.n = 0;
    bi->mapped = false;
    bi->map = bi->store_st = NULL;
    if (bi->realize && tc_op_is_reduce(b->op)) { /* a realized reduce runs over its own input */
        bi->has_reduce = true;
        bi->full_ndim = b->srcs[0]->ndim;
        memcpy(bi->full, b->srcs[0]->shape, sizeof(int64_t) * (size_t)bi->full_ndim);
        bi->axes = b->axes;
    }
}

void tc_kg_reset(tc_sched_ctx *c) {
    c->in_pass = c->levels_stale = false;
    for (int i = 0; i < c->target_readers.cap; i++)
        if (c->target_readers.keys[i]) ((tc_ptrvec *)c->target_readers.vals[i])->n = 0;
    for (int i = 0; i < c->bases.n; i++) reset_base(tc_binfo_of(c->bases.items[i]));
    /* producers first: what a root loads has a smaller id, so its level is known */
    for (int i = 0; i < c->by_id.n; i++) {
        tc_binfo *bi = tc_binfo_of(c->by_id.items[i]);
        if (!bi->realize) continue;
        const tc_ptrvec *loads = tc_kg_loads(c, bi);
        bi->level = 1;
        for (int k = 0; k < loads->n; k++) {
            tc_node *l = loads->items[k];
            if (l->op == TC_OP_BUFFER) {
                tc_ptrvec *readers =
                    tc_kg_assigns_of(c, l) ? list_at(c, &c->target_readers, l) : NULL;
                if (readers) tc_sched_push(c, readers, bi->node);
                continue;
            }
            tc_binfo *li = tc_binfo_of(l);
            tc_sched_push(c, &li->readers, bi);
            if (li->level >= bi->level) bi->level = li->level + 1;
        }
    }
    c->in_pass = true;
}

/* after g's level rose: every group reading g sits above it again */
static void raise_readers(tc_sched_ctx *c, tc_binfo *g0) {
    tc_ptrvec work = {0};
    tc_sched_push(c, &work, g0);
    while (work.n && !c->failed) {
        tc_binfo *g = work.items[--work.n];
        for (tc_binfo *m = g; m; m = m->next_member) {
            for (int k = 0; k < m->readers.n; k++) {
                tc_binfo *r = tc_group_find(m->readers.items[k]);
                if (r == g || r->level > g->level) continue;
                r->level = g->level + 1;
                tc_sched_push(c, &work, r);
            }
        }
    }
    tc_ptrvec_free(&work);
}

void tc_kg_unite(tc_sched_ctx *c, tc_binfo *rep, tc_binfo *g) {
    g->parent = rep;
    rep->last_member->next_member = g;
    rep->last_member = g->last_member;
    if (g->level > rep->level) rep->level = g->level;
    if (!c->levels_stale) raise_readers(c, rep);
}

/* ---- searches ----
 * needs: is there a chain of loads from a target (a root of the groups
 * marked members, or of one group, or one node) up to the kernel of one of
 * the start roots? Two walks take turns, one group at a time: up from the
 * starts through loads, down from the targets through readers; the search
 * ends when one meets the other's end or either runs out. A group on such a
 * chain has a level between the targets' lowest and the starts' highest, so
 * each walk skips the groups outside: the cost is about twice that of the
 * cheaper walk (a scalar assign of level 1, read by no one, is done at once
 * going down; a layer's backward reaches its forward in a few steps up). */

typedef struct {
    unsigned members;      /* a root of a group whose member_mark is this ... */
    const tc_binfo *group; /* ... or of this group ... */
    const tc_node *node;   /* ... or this node */
} target;

static bool is_target(const target *t, tc_node *l) {
    if (t->node) return l == t->node;
    const tc_binfo *g = tc_group_find(tc_binfo_of(l));
    return t->group ? g == t->group : g->member_mark == t->members;
}

typedef struct {
    tc_sched_ctx *c;
    const target *t;
    unsigned w;         /* this search's epoch (marks) */
    int min_level;      /* the targets' lowest level */
    int max_level;      /* the starts' highest level */
    tc_ptrvec up, down; /* groups to expand each way */
    bool found;
} search_state;

/* up: every load of every root of g */
static void expand_up(search_state *q, tc_binfo *g) {
    for (tc_binfo *m = g; m && !q->found; m = m->next_member) {
        const tc_ptrvec *loads = tc_kg_loads(q->c, m);
        for (int i = 0; i < loads->n && !q->found; i++) {
            tc_node *l = loads->items[i];
            if (l->op == TC_OP_BUFFER) continue;
            if (is_target(q->t, l)) {
                q->found = true;
                continue;
            }
            tc_binfo *lg = tc_group_find(tc_binfo_of(l));
            if (lg->group_mark == q->w || lg->level < q->min_level) continue;
            lg->group_mark = q->w;
            tc_sched_push(q->c, &q->up, lg);
        }
    }
}

/* down: the groups of the roots reading root m */
static void expand_readers(search_state *q, const tc_binfo *m) {
    for (int i = 0; i < m->readers.n && !q->found; i++) {
        tc_binfo *rg = tc_group_find(m->readers.items[i]);
        if (rg->start_mark == q->w) {
            q->found = true;
            continue;
        }
        if (rg->down_mark == q->w || rg->level >= q->max_level) continue;
        rg->down_mark = q->w;
        tc_sched_push(q->c, &q->down, rg);
    }
}

/* starts: roots (consumed); tgroups: the target groups (NULL for a node) */
static bool needs(tc_sched_ctx *c, tc_ptrvec *starts, const target *t, const tc_ptrvec *tgroups) {
    search_state q = {.c = c, .t = t, .w = tc_sched_new_walk(c), .max_level = INT_MIN};
    q.min_level = t->node ? tc_group_find(tc_binfo_of(t->node))->level : INT_MAX;
    for (int i = 0; tgroups && i < tgroups->n; i++) {
        const tc_binfo *g = tgroups->items[i];
        if (g->level < q.min_level) q.min_level = g->level;
    }
    bool down = !c->levels_stale; /* readers and levels hold only for the pass's roots */
    if (!down) q.min_level = INT_MIN;
    for (int i = 0; i < starts->n; i++) {
        tc_binfo *g = tc_group_find(tc_binfo_of(starts->items[i]));
        if (g->start_mark == q.w) continue;
        g->start_mark = g->group_mark = q.w;
        if (g->level > q.max_level) q.max_level = g->level;
        if (g->level >= q.min_level) tc_sched_push(c, &q.up, g);
    }
    starts->n = 0;
    if (down && t->node) expand_readers(&q, tc_binfo_of(t->node));
    for (int i = 0; down && tgroups && i < tgroups->n; i++) {
        tc_binfo *g = tgroups->items[i];
        if (g->down_mark == q.w) continue;
        g->down_mark = q.w;
        tc_sched_push(c, &q.down, g);
    }
    while (!q.found && !c->failed && q.up.n) { /* either walk running out: no chain */
        expand_up(&q, q.up.items[--q.up.n]);
        if (q.found || !down) continue;
        if (!q.down.n) break;
        tc_binfo *g = q.down.items[--q.down.n];
        for (tc_binfo *m = g; m && !q.found; m = m->next_member) expand_readers(&q, m);
    }
    tc_ptrvec_free(&q.up);
    tc_ptrvec_free(&q.down);
    return q.found;
}

bool tc_kg_needs_node(tc_sched_ctx *c, tc_node *k, tc_node *a) {
    tc_ptrvec stack = {0};
    tc_sched_push(c, &stack, k);
    target t = {.node = a};
    bool found = needs(c, &stack, &t, NULL);
    tc_ptrvec_free(&stack);
    return found;
}

static bool is_member(const tc_node *n, unsigned me) {
    return tc_group_find(tc_binfo_of(n))->member_mark == me;
}

/* buffer t is the target of an ASSIGN member other than m */
static bool targets_member_assign(const tc_sched_ctx *c, const tc_node *t, const tc_binfo *m,
                                  unsigned me) {
    const tc_ptrvec *assigns = tc_kg_assigns_of(c, t);
    for (int i = 0; assigns && i < assigns->n; i++)
        if (assigns->items[i] != m->node && is_member(assigns->items[i], me)) return true;
    return false;
}

/* A member reads buffer t, so the kernel must run before every assign to t
 * outside it; it cannot if it needs (through any kernels) such an assign's
 * own kernel: a cycle. */
static bool needs_outside_assign(tc_sched_ctx *c, const tc_ptrvec *reps, const tc_node *t,
                                 unsigned me) {
    const tc_ptrvec *assigns = tc_kg_assigns_of(c, t);
    tc_ptrvec stack = {0};
    bool found = false;
    for (int i = 0; assigns && i < assigns->n && !found; i++) {
        if (is_member(assigns->items[i], me)) continue;
        tc_binfo *ag = tc_group_find(tc_binfo_of(assigns->items[i]));
        target tg = {.group = ag};
        tc_ptrvec tgroups = {0};
        tc_sched_push(c, &tgroups, ag);
        for (int r = 0; r < reps->n; r++)
            tc_sched_push(c, &stack, ((tc_binfo *)reps->items[r])->node);
        found = needs(c, &stack, &tg, &tgroups);
        tc_ptrvec_free(&tgroups);
    }
    tc_ptrvec_free(&stack);
    return found;
}

/* Would one kernel computing every root of the groups in reps be wrong or
 * impossible to order?
 * - a member reads another member it cannot recompute (not inlinable, not
 *   in inline_ok);
 * - a member reads the target of another member's ASSIGN (old value needed);
 * - a member needs another member through a kernel outside the group, or a
 *   kernel outside must run before the group (it reads an assign target of a
 *   member) yet needs a member's output, or the group must run before an
 *   outside assign (it reads its target) yet needs that assign's kernel: all
 *   three are cycles. */
bool tc_kg_conflict(tc_sched_ctx *c, const tc_ptrvec *reps, const tc_ptrmap *inline_ok) {
    unsigned me = tc_sched_new_walk(c);
    for (int r = 0; r < reps->n; r++) ((tc_binfo *)reps->items[r])->member_mark = me;
    target members = {.members = me};
    tc_ptrvec outside = {0}; /* roots outside that a member loads */
    bool bad = false;
    for (int r = 0; r < reps->n && !bad; r++) {
        for (tc_binfo *m = reps->items[r]; m && !bad; m = m->next_member) {
            const tc_ptrvec *loads = tc_kg_loads(c, m);
            for (int k = 0; k < loads->n && !bad; k++) {
                tc_node *l = loads->items[k];
                if (l->op == TC_OP_BUFFER)
                    bad =
                        targets_member_assign(c, l, m, me) || needs_outside_assign(c, reps, l, me);
                else if (is_member(l, me))
                    bad = !tc_binfo_of(l)->inlinable &&
                          !(inline_ok && tc_ptrmap_get(inline_ok, l, NULL));
                else tc_sched_push(c, &outside, l);
            }
        }
    }
    if (!bad) bad = needs(c, &outside, &members, reps);
    /* outside readers of a member's assign target run before the group */
    for (int r = 0; r < reps->n && !bad; r++) {
        for (tc_binfo *m = reps->items[r]; m; m = m->next_member) {
            void *v = NULL;
            if (m->node->op != TC_OP_ASSIGN ||
                !tc_ptrmap_get(&c->target_readers, tc_node_base(m->node->srcs[1]), &v))
                continue;
            const tc_ptrvec *readers = v;
            for (int k = 0; k < readers->n; k++)
                if (!is_member(readers->items[k], me))
                    tc_sched_push(c, &outside, readers->items[k]);
        }
    }
    if (!bad) bad = needs(c, &outside, &members, reps);
    tc_ptrvec_free(&outside);
    return bad;
}
