/* hazard.c - what runs once the reduces of a grouping pass are placed:
 * elementwise roots that share loops merge into multi-output kernels, and
 * the two assign rules make sure no in-place update reads what it has
 * already overwritten, and no kernel needs both a buffer's old and new
 * value.
 *
 * Cost per pass, n = bases: merge_elementwise visits each root's cone once
 * (identity_loads) and tries each pair (a root, an earlier reader of one of
 * its inputs) once, most of them settled by one union-find test; a try that
 * gets as far as the checks costs its members' cones plus kgraph.c's
 * searches; merge_puts tries each indexed store once against the first at
 * its index. protect_targets walks each assign's kernel once (an indexed
 * store's index and values once each); split_old_readers looks only at the
 * roots that read an assign's target (kgraph.c's index), not at every base.
 */
#include "internal.h"

/* ---- elementwise multi-output kernels ----
 * Roots without a reduce that have the same size and read each other, or a
 * common input, at their own index are one kernel: Adam's m, v and param
 * updates (the param update reads the new m and v, which the kernel has in
 * registers anyway), or two results of one input. Such a group also joins a
 * reduce's kernel whose rows it matches one to one (its size is the reduced
 * space's, the reduce's outputs are stored unpermuted): a realized reduce
 * (a batch norm's sum, read by many other kernels) then also stores what is
 * computed from it per row (the mean, the running-mean update) instead of a
 * kernel of its own reading it back. Only reduces of at most TC_REDUCE_ROWS
 * rows: a conv's kernel (a register tile per 9.4M outputs) that also stored
 * its relu'd copy lost its tile plan, 6 -> 20 ms (beautiful_mnist's conv1). */

enum {
    TINY_KERNEL = 256,  /* elements: below this, kernels of one size merge */
    UPDATE_BUFS = 64,   /* buffers of a kernel of merged updates, at most: what every
                           runtime launches (CUDA's here; OpenCL guarantees 128) */
    UPDATE_TRIES = 4,   /* open update kernels of one size a new update may join */
};

/* adds p to v unless set already has it */
static void add_unique(tc_sched_ctx *c, tc_ptrvec *v, tc_ptrmap *set, void *p) {
    if (tc_ptrset_add(set, p)) tc_sched_push(c, v, p);
}

/* the realized nodes root r reads at exactly its own flat index (no view,
 * or a reshape of equal size, all along the path); bent_out (or NULL): the
 * ones it reads otherwise */
static void identity_loads(tc_sched_ctx *c, tc_node *r, tc_ptrvec *out, tc_ptrvec *bent_out,
                           tc_ptrmap *bent_set) {
    unsigned w = tc_sched_new_walk(c);
    tc_ptrvec stack = {0}, bent = {0};
    tc_ptrmap out_set = {0}, bent_here = {0};
    tc_sched_push(c, &stack, r);
    while (stack.n) {
        tc_node *x = stack.items[--stack.n];
        tc_binfo *xi = tc_binfo_of(x);
        if (xi->walk_mark == w) continue;
        xi->walk_mark = w;
        for (int k = 0; k < x->n_srcs; k++) {
            tc_node *src = x->srcs[k], *b = tc_node_base(src);
            bool same = src == b ||
                        (tc_st_is_contiguous(src->st) && tc_node_numel(src) == tc_node_numel(b));
            if (b->op == TC_OP_CONST) continue;
            if (b->op == TC_OP_BUFFER || tc_binfo_of(b)->realize) {
                if (same) add_unique(c, out, &out_set, b);
                else add_unique(c, &bent, &bent_here, b);
            } else if (same && tc_op_is_elementwise(b->op)) {
                tc_sched_push(c, &stack, b);
            } else {
                add_unique(c, &bent, &bent_here, b); /* reached otherwise: not an identity reader */
            }
        }
    }
    for (int i = 0; i < out->n; i++) /* read both ways: not only at the identity */
        if (tc_ptrmap_get(&bent_here, out->items[i], NULL)) out->items[i--] = out->items[--out->n];
    for (int i = 0; bent_out && i < bent.n; i++) add_unique(c, bent_out, bent_set, bent.items[i]);
    c->failed |= out_set.failed || bent_here.failed;
    tc_ptrvec_free(&stack);
    tc_ptrvec_free(&bent);
    tc_ptrmap_free(&out_set);
    tc_ptrmap_free(&bent_here);
}

/* is n a root of the group marked me? */
static bool in_group(const tc_node *n, unsigned me) {
    if (n->op == TC_OP_BUFFER || n->op == TC_OP_CONST || !tc_binfo_of(n)->realize) return false;
    return tc_group_find(tc_binfo_of(n))->member_mark == me;
}

/* does the unrealized cone under b hold a root of the groups marked me, or
 * read one (a realized node at its edge)? */
static bool cone_reads_group(tc_sched_ctx *c, tc_node *b, unsigned me) {
    unsigned w = tc_sched_new_walk(c);
    tc_ptrvec stack = {0};
    bool found = false;
    tc_sched_push(c, &stack, b);
    while (stack.n && !found) {
        tc_node *x = tc_node_base(stack.items[--stack.n]);
        if (x->op == TC_OP_BUFFER || x->op == TC_OP_CONST) continue;
        tc_binfo *xi = tc_binfo_of(x);
        if (xi->walk_mark == w) continue;
        xi->walk_mark = w;
        found = in_group(x, me);
        if (x != b && xi->realize) continue; /* an edge: read, not computed here */
        for (int i = 0; i < x->n_srcs; i++) tc_sched_push(c, &stack, x->srcs[i]);
    }
    tc_ptrvec_free(&stack);
    return found;
}

static bool elementwise_group(const tc_binfo *g) {
    return !g->has_reduce;
}

/* elements of group g's rows: its reduced space, or its roots' size */
static int64_t group_rows(const tc_binfo *g) {
    if (!g->has_reduce) return tc_node_numel(g->node);
    int64_t n = 1;
    for (int a = 0; a < g->full_ndim; a++) n *= (g->axes >> a) & 1 ? 1 : g->full[a];
    return n;
}

/* the roots of groups ga and gb that each reads at its own index (inline_ok)
 * and, for a reduce group, the nodes they read through a view (bent) */
static void member_reads(tc_sched_ctx *c, tc_binfo *ga, tc_binfo *gb, unsigned me,
                         tc_ptrmap *inline_ok, tc_ptrvec *bent) {
    tc_ptrmap bent_set = {0};
    tc_binfo *groups[2] = {ga, gb};
    for (int g = 0; g < 2; g++) {
        for (tc_binfo *m = groups[g]; m; m = m->next_member) {
            tc_ptrvec idl = {0};
            identity_loads(c, m->node, &idl, ga->has_reduce ? bent : NULL, &bent_set);
            for (int k = 0; k < idl.n; k++)
                if (in_group(idl.items[k], me) && !tc_ptrmap_put(inline_ok, idl.items[k], NULL))
                    c->failed = true;
            tc_ptrvec_free(&idl);
        }
    }
    c->failed |= bent_set.failed;
    tc_ptrmap_free(&bent_set);
}

/* the elementwise ops of g's members' cones (schedule.c's bound_kernels) */
static int64_t group_ops(const tc_binfo *g) {
    int64_t n = 0;
    for (const tc_binfo *m = g; m; m = m->next_member) n += m->ops;
    return n;
}

/* merges the groups of a and b when the result is a correct kernel: two
 * elementwise groups of one size, or an elementwise group into a reduce's
 * group with a row per element, of at most kernel_ops ops together */
static bool try_merge_elementwise(tc_sched_ctx *c, tc_node *a, tc_node *b) {
    tc_binfo *ga = tc_group_find(tc_binfo_of(a)), *gb = tc_group_find(tc_binfo_of(b));
    if (ga == gb || !elementwise_group(gb)) return false;
    if (c->kernel_ops && group_ops(ga) + group_ops(gb) > c->kernel_ops) return false;
    if (group_rows(ga) != tc_node_numel(gb->node) ||
        (ga->has_reduce && group_rows(ga) > TC_REDUCE_ROWS))
        return false;
    /* a reduce root stored through a permutation: its rows are not its elements */
    for (tc_binfo *m = ga; m && ga->has_reduce; m = m->next_member)
        if (m->store_st) return false;
    for (tc_binfo *m = gb; m && ga->has_reduce; m = m->next_member)
        if (m->store_st) return false;
    unsigned me = tc_sched_new_walk(c);
    ga->member_mark = gb->member_mark = me;
    tc_ptrmap inline_ok = {0}; /* members read at the identity are recomputed */
    tc_ptrvec bent = {0}; /* reduce groups: members read through a view (a flip of a row's value) */
    member_reads(c, ga, gb, me, &inline_ok, &bent);
    /* a reduce's value is one register per row: a member that reads another
     * member of a reduce's kernel (or a value computed from one) through a
     * view (a flip: other rows) cannot have it (diff seed 5466158) */
    bool ok = true;
    for (int i = 0; i < bent.n && ok; i++) ok = !cone_reads_group(c, bent.items[i], me);
    tc_ptrvec reps = {0};
    tc_sched_push(c, &reps, ga);
    tc_sched_push(c, &reps, gb);
    ok = ok && !c->failed && !tc_kg_conflict(c, &reps, &inline_ok);
    if (ok) {
        tc_kg_unite(c, ga, gb);
        for (int i = 0; i < inline_ok.cap; i++)
            if (inline_ok.keys[i]) tc_binfo_of(inline_ok.keys[i])->inlinable = true;
    }
    c->failed |= inline_ok.failed;
    tc_ptrmap_free(&inline_ok);
    tc_ptrvec_free(&bent);
    tc_ptrvec_free(&reps);
    return ok;
}

static bool mergeable_root(const tc_node *n) {
    return n->op != TC_OP_BUFFER && n->op != TC_OP_COPY && n->op != TC_OP_SCATTER &&
           !tc_sched_is_put(n) && tc_binfo_of(n)->realize && !tc_binfo_of(n)->keep_stored;
}

/* tries b against every earlier root listed under key in lists, then lists b */
static void try_listed(tc_sched_ctx *c, tc_ptrmap *lists, const void *key, tc_node *b) {
    void *v = NULL;
    tc_ptrvec *l = NULL;
    if (tc_ptrmap_get(lists, key, &v)) {
        l = v;
    } else if (!(l = tc_calloc(1, sizeof *l)) || !tc_ptrmap_put(lists, key, l)) {
        tc_free(l);
        c->failed = true;
        return;
    }
    for (int j = 0; j < l->n; j++) try_merge_elementwise(c, l->items[j], b);
    tc_sched_push(c, l, b);
}

static void free_lists(tc_ptrmap *m) {
    for (int i = 0; i < m->cap; i++) {
        if (!m->keys[i]) continue;
        tc_ptrvec_free(m->vals[i]);
        tc_free(m->vals[i]);
    }
    tc_ptrmap_free(m);
}

/* buffers of one kernel computing ga and gb: its outputs and the distinct
 * nodes they load, but for the targets of its assigns (an assign reads its
 * target through its own output's slot, ast.c) */
static int merged_buffers(tc_sched_ctx *c, tc_binfo *ga, tc_binfo *gb) {
    tc_ptrmap seen = {0}, targets = {0};
    tc_binfo *groups[2] = {ga, gb};
    for (int g = 0; g < 2; g++)
        for (tc_binfo *m = groups[g]; m; m = m->next_member) {
            tc_ptrset_add(&seen, m->node);
            if (m->node->op == TC_OP_ASSIGN) tc_ptrset_add(&targets, tc_node_base(m->node->srcs[1]));
        }
    int n = seen.n;
    for (int g = 0; g < 2; g++)
        for (tc_binfo *m = groups[g]; m; m = m->next_member) {
            const tc_ptrvec *loads = tc_kg_loads(c, m);
            for (int k = 0; k < loads->n; k++)
                if (!tc_ptrmap_get(&targets, loads->items[k], NULL) && tc_ptrset_add(&seen, loads->items[k])) n++;
        }
    if (seen.failed || targets.failed) n = UPDATE_BUFS + 1;
    tc_ptrmap_free(&seen);
    tc_ptrmap_free(&targets);
    return n;
}

/* In-place updates of one size (an optimizer's parameters and moments)
 * share a kernel even without a common input, as PyTorch's foreach
 * optimizers share a launch: one kernel per parameter size, or a few when
 * they pass UPDATE_BUFS buffers. Updates are sinks at the end of a step, so
 * merging them delays nothing. Each update tries the last UPDATE_TRIES open
 * kernels of its size: O(updates x UPDATE_BUFS). */
static void merge_updates(tc_sched_ctx *c) {
    tc_ptrmap open = {0}; /* numel + 1 -> roots of the kernels of that size so far */
    for (int i = c->bases.n - 1; i >= 0 && !c->failed; i--) {
        tc_node *b = c->bases.items[i];
        if (b->op != TC_OP_ASSIGN || !mergeable_root(b) ||
            !elementwise_group(tc_group_find(tc_binfo_of(b))))
            continue;
        void *v = NULL;
        tc_ptrvec *l = NULL;
        const void *key = (void *)(uintptr_t)(tc_node_numel(b) + 1);
        if (tc_ptrmap_get(&open, key, &v)) {
            l = v;
        } else if (!(l = tc_calloc(1, sizeof *l)) || !tc_ptrmap_put(&open, key, l)) {
            tc_free(l);
            c->failed = true;
            break;
        }
        bool joined = false;
        for (int j = l->n - 1; j >= 0 && j >= l->n - UPDATE_TRIES && !joined; j--) {
            tc_binfo *g = tc_group_find(tc_binfo_of(l->items[j])), *gb = tc_group_find(tc_binfo_of(b));
            joined = g == gb || (merged_buffers(c, g, gb) <= UPDATE_BUFS &&
                                 try_merge_elementwise(c, l->items[j], b));
        }
        if (!joined) tc_sched_push(c, l, b);
    }
    c->failed |= open.failed;
    free_lists(&open);
}

/* Indexed stores (put-assigns) at one index node share loops (the values'
 * space, the index's shape): a layer's K and V cache rows written at one
 * position are one kernel. The index node is shared by every layer's
 * stores, which depend on each other, so each store tries the last
 * UPDATE_TRIES kernels opened at its index and opens one of its own when
 * none takes it: O(puts x UPDATE_TRIES) conflict checks. */
static void merge_puts(tc_sched_ctx *c) {
    tc_ptrmap open = {0}; /* index node -> the put-assigns that opened kernels at it */
    for (int i = c->bases.n - 1; i >= 0 && !c->failed; i--) {
        tc_node *b = c->bases.items[i];
        if (!tc_sched_is_put(b) || !tc_binfo_of(b)->realize) continue;
        const tc_node *idx = b->srcs[0]->srcs[0];
        void *v = NULL;
        tc_ptrvec *l = NULL;
        if (tc_ptrmap_get(&open, idx, &v)) {
            l = v;
        } else if (!(l = tc_calloc(1, sizeof *l)) || !tc_ptrmap_put(&open, idx, l)) {
            tc_free(l);
            c->failed = true;
            break;
        }
        bool joined = false;
        for (int j = l->n - 1; j >= 0 && j >= l->n - UPDATE_TRIES && !joined; j--) {
            tc_binfo *ga = tc_group_find(tc_binfo_of(l->items[j])), *gb = tc_group_find(tc_binfo_of(b));
            if (ga == gb || merged_buffers(c, ga, gb) > UPDATE_BUFS) continue;
            tc_ptrvec reps = {0};
            tc_sched_push(c, &reps, ga);
            tc_sched_push(c, &reps, gb);
            joined = !c->failed && !tc_kg_conflict(c, &reps, NULL);
            if (joined) tc_kg_unite(c, ga, gb);
            tc_ptrvec_free(&reps);
        }
        if (!joined) tc_sched_push(c, l, b);
    }
    c->failed |= open.failed;
    free_lists(&open);
}

void tc_hazard_merge_elementwise(tc_sched_ctx *c) {
    if (tc_flag_get(TC_FLAG_NOFUSE) != 0 || c->no_merge) return;
    tc_ptrmap readers = {0}; /* input -> the roots (so far) reading it at the identity */
    for (int i = c->bases.n - 1; i >= 0 && !c->failed; i--) {
        tc_node *b = c->bases.items[i];
        if (!mergeable_root(b) || !elementwise_group(tc_group_find(tc_binfo_of(b)))) continue;
        tc_ptrvec idl = {0};
        identity_loads(c, b, &idl, NULL, NULL);
        for (int k = 0; k < idl.n; k++) {
            tc_node *l = idl.items[k];
            if (l->op != TC_OP_BUFFER && mergeable_root(l))
                try_merge_elementwise(c, l, b); /* l may be a reduce's */
            try_listed(c, &readers, l, b);      /* a sibling reading the same input */
        }
        tc_ptrvec_free(&idl);
    }
    c->failed |= readers.failed;
    free_lists(&readers);
    /* tiny kernels of one size (optimizer scalars, bias updates) share a
     * launch even without a common input: launching costs more than they do */
    tc_ptrmap tiny = {0}; /* numel + 1 (as a key) -> the tiny roots of that size so far */
    for (int i = c->bases.n - 1; i >= 0 && !c->failed; i--) {
        tc_node *b = c->bases.items[i];
        if (!mergeable_root(b) || tc_node_numel(b) > TINY_KERNEL ||
            !elementwise_group(tc_group_find(tc_binfo_of(b))))
            continue;
        try_listed(c, &tiny, (void *)(uintptr_t)(tc_node_numel(b) + 1), b);
    }
    c->failed |= tiny.failed;
    free_lists(&tiny);
    merge_updates(c);
    merge_puts(c);
}

/* ---- assigns ----
 * An assign reads its target's old value and writes the new one in the same
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

/* does assign a's kernel read its target through a view that is not the
 * identity (directly or below such a view)? */
static bool reads_target_bent(tc_sched_ctx *c, tc_node *a) {
    tc_node *target = tc_node_base(a->srcs[1]), *value = tc_node_base(a->srcs[0]);
    tc_binfo *group = tc_group_find(tc_binfo_of(a));
    unsigned w = tc_sched_new_walk(c);
    tc_ptrvec stack = {0}; /* pairs (node, through a bent view) */
    bool crooked = false;
    tc_sched_push(c, &stack, value);
    tc_sched_push(c, &stack, NULL);
    while (stack.n >= 2 && !crooked && !c->failed) { /* pairs; a failed push ends the walk */
        bool bent = stack.items[--stack.n] != NULL;
        tc_node *x = stack.items[--stack.n];
        tc_binfo *xi = tc_binfo_of(x);
        unsigned *mark = bent ? &xi->bent_mark : &xi->walk_mark;
        if (*mark == w) continue;
        *mark = w;
        for (int k = 0; k < x->n_srcs && !crooked; k++) {
            tc_node *src = x->srcs[k], *sb = tc_node_base(src);
            bool b = bent || (src != sb && !tc_st_is_contiguous(src->st));
            if (sb == target && b) crooked = true;
            if (computed_in(sb, group)) {
                tc_sched_push(c, &stack, sb);
                tc_sched_push(c, &stack, b ? (void *)1 : NULL);
            }
        }
    }
    tc_ptrvec_free(&stack);
    return crooked;
}

/* does the part of put-assign a's kernel that computes src (the index or
 * the values) read a's target anywhere? Its kernel writes only some of the
 * target's elements, in loops over the values' space, so any read of the
 * target there (another row, another column) could see its own writes. */
static bool put_reads_target(tc_sched_ctx *c, tc_node *a, tc_node *src) {
    tc_node *target = tc_node_base(a->srcs[1]);
    tc_binfo *group = tc_group_find(tc_binfo_of(a));
    unsigned w = tc_sched_new_walk(c);
    tc_ptrvec stack = {0};
    bool found = false;
    tc_sched_push(c, &stack, src);
    while (stack.n && !found && !c->failed) {
        tc_node *x = tc_node_base(stack.items[--stack.n]);
        found = x == target;
        if (found || !computed_in(x, group)) continue;
        tc_binfo *xi = tc_binfo_of(x);
        if (xi->walk_mark == w) continue;
        xi->walk_mark = w;
        for (int k = 0; k < x->n_srcs; k++) tc_sched_push(c, &stack, x->srcs[k]);
    }
    tc_ptrvec_free(&stack);
    return found;
}

/* An indexed store computes its index and values in its own kernel unless
 * they read its target: then each is realized first (the front end makes a
 * view of the target itself contiguous, so what is realized here is always
 * a computed node). False when it realized something. */
static bool protect_put(tc_sched_ctx *c, tc_node *a) {
    bool unchanged = true;
    const tc_node *put = a->srcs[0];
    for (int k = 0; k < 2; k++) {
        tc_node *b = tc_node_base(put->srcs[k]);
        if (b->op == TC_OP_BUFFER || b->op == TC_OP_CONST || tc_binfo_of(b)->realize) continue;
        if (!put_reads_target(c, a, put->srcs[k])) continue;
        tc_kg_realize(c, tc_binfo_of(b));
        tc_binfo_of(b)->keep_stored = true;
        unchanged = false;
    }
    return unchanged;
}

bool tc_hazard_protect_targets(tc_sched_ctx *c) {
    bool unchanged = true;
    for (int i = 0; i < c->bases.n && !c->failed; i++) {
        tc_node *a = c->bases.items[i];
        if (a->op != TC_OP_ASSIGN) continue;
        if (tc_sched_is_put(a)) {
            unchanged &= protect_put(c, a);
            continue;
        }
        tc_node *value = tc_node_base(a->srcs[0]);
        if (!computed_in(value, tc_group_find(tc_binfo_of(a))))
            continue; /* loaded: written earlier */
        if (reads_target_bent(c, a)) {
            tc_kg_realize(c, tc_binfo_of(value));
            tc_binfo_of(value)->keep_stored = true;
            unchanged = false;
        }
    }
    return unchanged;
}

static bool contains(const tc_ptrvec *v, const void *p) {
    for (int i = 0; i < v->n; i++)
        if (v->items[i] == p) return true;
    return false;
}

/* realizes the nodes of root kn's kernel that read target (kn itself reads
 * it as a load of the kernel); each also reads target, so it joins readers */
static void split_reader(tc_sched_ctx *c, tc_node *kn, tc_node *target, tc_ptrvec *readers) {
    unsigned w = tc_sched_new_walk(c);
    tc_ptrvec stack = {0};
    tc_sched_push(c, &stack, kn);
    while (stack.n) {
        tc_node *x = stack.items[--stack.n];
        tc_binfo *xi = tc_binfo_of(x);
        if (xi->walk_mark == w) continue;
        xi->walk_mark = w;
        for (int j = 0; j < x->n_srcs; j++) {
            tc_node *sb = tc_node_base(x->srcs[j]);
            if (sb == target && x != kn && !xi->realize) {
                tc_kg_realize(c, xi);
                xi->keep_stored = true;
                tc_sched_push(c, readers, x);
            } else if (sb->op != TC_OP_BUFFER && sb->op != TC_OP_CONST &&
                       !tc_binfo_of(sb)->realize) {
                tc_sched_push(c, &stack, sb);
            }
        }
    }
    tc_ptrvec_free(&stack);
}

/* A kernel that needs an assign's new value (it runs after the assign) and
 * also computes something from the target's old value would have to run
 * before it too: (x*0.5) + x after x := x*0.5. The parts of its own
 * computation that read the old value are realized into buffers of their
 * own first, so the schedule has an order. Returns false when it changed
 * something. */
bool tc_hazard_split_old_readers(tc_sched_ctx *c) {
    bool unchanged = true;
    for (int i = 0; i < c->bases.n; i++) {
        tc_node *a = c->bases.items[i];
        if (a->op != TC_OP_ASSIGN || !tc_binfo_of(a)->realize) continue;
        tc_node *target = tc_node_base(a->srcs[1]);
        void *v = NULL;
        if (!tc_ptrmap_get(&c->target_readers, target, &v)) continue;
        tc_ptrvec *readers = v; /* the roots whose kernels load the target */
        for (int k = 0; k < readers->n; k++) {
            tc_node *kn = readers->items[k];
            tc_binfo *ki = tc_binfo_of(kn);
            if (kn == a || kn->op == TC_OP_COPY ||
                tc_group_find(ki) == tc_group_find(tc_binfo_of(a)))
                continue;
            if (!(contains(tc_kg_loads(c, ki), a) || tc_kg_needs_node(c, kn, a))) continue;
            int before = readers->n;
            split_reader(c, kn, target, readers);
            unchanged &= readers->n == before;
        }
    }
    return unchanged;
}
