/* schedule.c - the scheduler's driver and its first section: collect the
 * graph under the requested nodes and decide the realize points that follow
 * from ops and views (tinygrad's create_schedule, in three sections: this
 * file; group.c places reduces and groups roots into kernels, with
 * kgraph.c's checks and hazard.c's merges and assign rules; ast.c builds and
 * orders the items; internal.h maps the files).
 *
 * Cost: collect is O(n + edges); decide_realizes and realize_shared are one
 * pass over the bases with a walk of one kernel's cone per base read through
 * an expand (or per reduce), each node of a walk visited once (epoch marks);
 * bound_kernels walks each elementwise base's cone up to KERNEL_OPS nodes;
 * after the row kernels, tc_order_program (ast.c) puts the items in the
 * program's order, O((items + buffers) log items).
 *
 * Input: the nodes to realize. Output: a tc_schedule owning references to
 * every buffer node its items touch. The graph is only read; per-base
 * bookkeeping (tc_binfo) lives in node->scratch while create runs.
 */
#include "internal.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

static bool is_realized(const tc_node *n) {
    return n->op == TC_OP_BUFFER;
}

TC_MUST_USE static tc_status add_base(tc_sched_ctx *c, tc_node *b) {
    tc_binfo *bi = tc_arena_alloc(&c->s->arena, sizeof *bi);
    if (!bi || tc_ptrvec_push(&c->bases, b) != TC_OK) return TC_ERR_MEMORY;
    bi->node = b;
    bi->item = -1;
    b->scratch = bi; /* only once listed: create clears the scratch of listed bases */
    return TC_OK;
}

/* walks from the outputs through unrealized bases without recursion, and
 * records for every base who reads it through which view, and which bases
 * nodes outside the walk read (tc_graph_held). O(n + edges) */
TC_MUST_USE static tc_status collect(tc_sched_ctx *c, tc_node *const *nodes, int n) {
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
            tc_binfo *si = tc_binfo_of(sb);
            if (st == TC_OK) st = tc_ptrvec_push(&si->consumers, b);
            if (st == TC_OK) st = tc_ptrvec_push(&si->consumers, src == sb ? NULL : src);
        }
    }
    tc_ptrvec_free(&stack);
    if (st == TC_OK) st = tc_graph_held((tc_node *const *)c->bases.items, c->bases.n, &c->held);
    return st;
}

bool tc_sched_unsafe_pad(const tc_node *n) {
    return tc_ops[n->op].is_unsafe_pad;
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

/* first time the walk w reaches base x (which has bookkeeping)? */
static bool first_visit(tc_node *x, unsigned w) {
    tc_binfo *xi = tc_binfo_of(x);
    if (xi->walk_mark == w) return false;
    xi->walk_mark = w;
    return true;
}

/* The walks below each visit the unrealized cone of one base once: O(cone).
 * They stop at realized nodes, so a cone is one kernel's worth of graph. */

/* true when the unrealized cone under b (stopping at realized nodes and, if
 * stop_at_reduce, at reduces) holds a node for which pred holds */
bool tc_sched_cone_has(tc_sched_ctx *c, tc_node *b, bool stop_at_reduce,
                       bool (*pred)(const tc_node *)) {
    unsigned w = tc_sched_new_walk(c);
    tc_ptrvec stack = {0};
    bool found = false;
    tc_sched_push(c, &stack, b);
    while (stack.n && !found) {
        tc_node *x = tc_node_base(stack.items[--stack.n]);
        if (is_realized(x) || x->op == TC_OP_CONST) continue;
        if (x != b && tc_binfo_of(x)->realize) continue;
        if (!first_visit(x, w)) continue;
        if (pred(x)) found = true;
        if (stop_at_reduce && tc_op_is_reduce(x->op)) continue;
        for (int i = 0; i < x->n_srcs; i++) tc_sched_push(c, &stack, x->srcs[i]);
    }
    tc_ptrvec_free(&stack);
    return found;
}

static bool is_reduce_node(const tc_node *n) {
    return tc_op_is_reduce(n->op);
}

/* does computing b read any buffer (realized or produced by another kernel)? */
static bool reads_memory(tc_sched_ctx *c, tc_node *b) {
    unsigned w = tc_sched_new_walk(c);
    tc_ptrvec stack = {0};
    bool found = false;
    tc_sched_push(c, &stack, b);
    while (stack.n && !found) {
        tc_node *x = tc_node_base(stack.items[--stack.n]);
        if (x->op == TC_OP_CONST) continue;
        if (is_realized(x) || (x != b && tc_binfo_of(x)->realize) || !tc_op_is_elementwise(x->op)) {
            found = true;
            continue;
        }
        if (!first_visit(x, w)) continue;
        for (int i = 0; i < x->n_srcs; i++) tc_sched_push(c, &stack, x->srcs[i]);
    }
    tc_ptrvec_free(&stack);
    return found;
}

/* Is b a scalar worth recomputing wherever it is broadcast: one element, a
 * few elementwise ops over constants and one-element buffers (Adam's
 * lr/(1-b1^t) and sqrt(1-b2^t))? Each reader then spends a handful of flops
 * on a value every lane shares, instead of the schedule spending a kernel on
 * it. */
enum { CHEAP_SCALAR_OPS = 16 };
static bool is_cheap_scalar(tc_sched_ctx *c, tc_node *b) {
    if (tc_node_numel(b) != 1) return false;
    unsigned w = tc_sched_new_walk(c);
    tc_ptrvec stack = {0};
    int n_ops = 0;
    bool cheap = true;
    tc_sched_push(c, &stack, b);
    while (stack.n && cheap) {
        tc_node *x = tc_node_base(stack.items[--stack.n]);
        if (x->op == TC_OP_CONST) continue;
        if (is_realized(x) || (x != b && tc_binfo_of(x)->realize)) {
            cheap = tc_node_numel(x) == 1;
            continue;
        }
        if (!first_visit(x, w)) continue;
        cheap = tc_op_is_elementwise(x->op) && ++n_ops <= CHEAP_SCALAR_OPS;
        for (int i = 0; i < x->n_srcs; i++) tc_sched_push(c, &stack, x->srcs[i]);
    }
    tc_ptrvec_free(&stack);
    return cheap;
}

/* Is b a cheap conversion of one buffer worth recomputing wherever it is
 * broadcast: a cast or a little plain arithmetic (no transcendental, no
 * division) of a single realized input and constants? A reader loads that
 * input where it would have loaded b, so the broadcast costs no more memory
 * traffic, and the schedule saves a kernel (the uint8 -> float cast of
 * beautiful_mnist's images, read 25 times by the first conv's windows; an
 * index wrapped where negative, read by a gather along every column; a
 * label compared with ignore_index, read by the cross-entropy per class).
 * With an indexed load (GATHER) in it, b may also read small tables (at
 * most SMALL_TABLE elements each: its indices and weights, cache-resident)
 * beside the one large input, in a few more ops: interpolate 's lerp
 * x[lo] * a + x[hi] * b read by a conv's windows costs each window two
 * loads of x where it loaded one of the resized tensor, not a kernel and
 * the resized tensor's round trip. O(b's elementwise cone). */
enum { CHEAP_CONVERT_OPS = 4, CHEAP_GATHER_OPS = 12, SMALL_TABLE = 1 << 12, CHEAP_INPUTS = 8 };
static bool is_cheap_convert(tc_sched_ctx *c, tc_node *b) {
    unsigned w = tc_sched_new_walk(c);
    tc_ptrvec stack = {0};
    tc_node *inputs[CHEAP_INPUTS];
    int n_ops = 0, n_inputs = 0, n_large = 0;
    bool cheap = true, whole = true, gathers = false;
    tc_sched_push(c, &stack, b);
    while (stack.n && cheap) {
        tc_node *src = stack.items[--stack.n], *x = tc_node_base(src);
        if (x->op == TC_OP_CONST) continue;
        if (is_realized(x) || (x != b && tc_binfo_of(x)->realize)) {
            /* an input, read whole at the reader's index (or through a gather) */
            whole &= src == x || tc_st_is_contiguous(src->st);
            int k = 0;
            while (k < n_inputs && inputs[k] != x) k++;
            if (k < n_inputs) continue;
            cheap = n_inputs < CHEAP_INPUTS;
            if (cheap) inputs[n_inputs++] = x;
            n_large += tc_node_numel(x) > SMALL_TABLE;
            continue;
        }
        if (!first_visit(x, w)) continue;
        tc_op op = x->op;
        gathers |= op == TC_OP_GATHER;
        cheap = (op == TC_OP_CAST || op == TC_OP_ADD || op == TC_OP_MUL || op == TC_OP_NEG ||
                 op == TC_OP_MAX || op == TC_OP_CMPLT || op == TC_OP_CMPNE || op == TC_OP_WHERE ||
                 op == TC_OP_GATHER) &&
                ++n_ops <= CHEAP_GATHER_OPS;
        for (int i = 0; i < x->n_srcs; i++) tc_sched_push(c, &stack, x->srcs[i]);
    }
    tc_ptrvec_free(&stack);
    if (!cheap || n_inputs == 0) return false;
    if (gathers) return n_large <= 1;
    return n_inputs == 1 && whole && n_ops <= CHEAP_CONVERT_OPS;
}

/* a PUT is computed only by its kernel: the ASSIGN of it to its own target */
static bool put_is_assigned(const tc_node *p) {
    const tc_binfo *pi = tc_binfo_of(p);
    if (pi->consumers.n != 2) return false;
    const tc_node *a = pi->consumers.items[0];
    return pi->consumers.items[1] == NULL && a->op == TC_OP_ASSIGN && a->srcs[0] == p &&
           a->srcs[1] == p->srcs[2] && is_realized(p->srcs[2]);
}

/* realize points that follow from the op or from how a base is read: one
 * pass over the bases, with a bounded walk per base read through an expand */
TC_MUST_USE static tc_status decide_realizes(tc_sched_ctx *c, tc_node *const *nodes, int n) {
    for (int i = 0; i < n; i++) {
        tc_node *b = tc_node_base(nodes[i]);
        if (!is_realized(b)) tc_binfo_of(b)->realize = true;
    }
    /* a gather's source is read anywhere: realized, and known to be before
     * the loop below asks whether what reads it is cheap to recompute */
    for (int i = 0; i < c->bases.n; i++) {
        tc_node *b = c->bases.items[i];
        if (b->op == TC_OP_GATHER && !is_realized(tc_node_base(b->srcs[0])))
            tc_binfo_of(tc_node_base(b->srcs[0]))->realize = true;
    }
    for (int i = 0; i < c->bases.n; i++) {
        tc_node *b = c->bases.items[i];
        tc_binfo *bi = tc_binfo_of(b);
        if (b->op == TC_OP_CONTIGUOUS || b->op == TC_OP_ASSIGN || b->op == TC_OP_COPY ||
            b->op == TC_OP_SCATTER) /* a scatter's loops run over its sources' space */
            bi->realize = true;
        if (b->op == TC_OP_COPY && b->srcs[0]->op == TC_OP_VIEW)
            return TC_INTERNAL("COPY of a view reached the scheduler");
        if (b->op == TC_OP_ASSIGN && !is_realized(tc_node_base(b->srcs[1])))
            return TC_INTERNAL("ASSIGN target is not a realized buffer");
        if (b->op == TC_OP_PUT && !put_is_assigned(b))
            return TC_INTERNAL("a PUT is read other than as the value of an ASSIGN to its target");
        if (b->op == TC_OP_CONST) continue; /* consts are inlined, never realized */
        for (int k = 0; k < bi->consumers.n; k += 2) {
            tc_node *consumer = bi->consumers.items[k], *via = bi->consumers.items[k + 1];
            if (consumer->op == TC_OP_COPY) bi->realize = true; /* copies read buffers */
            if (!via) continue;
            if (reads_more_than_base(via, b)) {
                /* an expand recomputes b per element it broadcasts to: realize b,
                 * unless b is a per-row value of a reduce that a kernel can keep
                 * in a register (group.c decides) */
                if (!reads_memory(c, b)) continue; /* made of constants only: free to recompute */
                if (tc_flag_get(TC_FLAG_NOFUSE) == 0 && (is_cheap_scalar(c, b) || is_cheap_convert(c, b)))
                    continue;
                if (tc_flag_get(TC_FLAG_NOFUSE) == 0 && tc_sched_cone_has(c, b, true, is_reduce_node))
                    bi->expand_pending = true;
                else
                    bi->realize = true;
            }
            /* a padded view of an op with f(0) != 0 needs no realize: ast.c
             * gates the expression with the view's validity */
        }
    }
    return c->failed ? TC_ERR_MEMORY : TC_OK;
}

/* An elementwise value of many elements that several reduces read, each in
 * its own kernel, and that takes several large loads to compute (the
 * gradient through a max-pool and a relu, read by batchnorm's backward
 * sums) is realized once, at the node where the reads fan out, instead of
 * being recomputed by every reduce kernel. */
enum { SHARED_REDUCERS = 3, SHARED_LOADS = 3, SHARED_NUMEL = 1 << 16 };

static bool stops_walk(tc_node *x) {
    return is_realized(x) || x->op == TC_OP_CONST || tc_binfo_of(x)->realize;
}

/* n_reducers of every elementwise base in the cone of each reduce:
 * O(sum over reduces of their elementwise cones) */
static void count_reducers(tc_sched_ctx *c) {
    tc_ptrvec stack = {0};
    for (int i = 0; i < c->bases.n && !c->failed; i++) {
        tc_node *r = c->bases.items[i];
        if (!tc_op_is_reduce(r->op)) continue;
        unsigned w = tc_sched_new_walk(c);
        stack.n = 0;
        for (int k = 0; k < r->n_srcs; k++) tc_sched_push(c, &stack, r->srcs[k]);
        while (stack.n) {
            tc_node *x = tc_node_base(stack.items[--stack.n]);
            if (stops_walk(x) || !tc_op_is_elementwise(x->op) || !first_visit(x, w)) continue;
            tc_binfo_of(x)->n_reducers++;
            for (int k = 0; k < x->n_srcs; k++) tc_sched_push(c, &stack, x->srcs[k]);
        }
    }
    tc_ptrvec_free(&stack);
}

/* distinct realized inputs of at least numel/16 elements in b's cone */
static int large_loads(tc_sched_ctx *c, tc_node *b) {
    unsigned w = tc_sched_new_walk(c);
    tc_ptrvec stack = {0};
    tc_ptrmap buffers = {0}; /* BUFFER nodes counted */
    int64_t min = tc_node_numel(b) / 16;
    int n = 0;
    tc_sched_push(c, &stack, b);
    while (stack.n) {
        tc_node *x = tc_node_base(stack.items[--stack.n]);
        if (x->op == TC_OP_CONST) continue;
        if (is_realized(x)) {
            if (tc_ptrset_add(&buffers, x)) n += tc_node_numel(x) >= min;
            continue;
        }
        if (!first_visit(x, w)) continue;
        if (x != b && (tc_binfo_of(x)->realize || !tc_op_is_elementwise(x->op))) {
            n += tc_node_numel(x) >= min;
            continue;
        }
        for (int k = 0; k < x->n_srcs; k++) tc_sched_push(c, &stack, x->srcs[k]);
    }
    c->failed |= buffers.failed;
    tc_ptrvec_free(&stack);
    tc_ptrmap_free(&buffers);
    return n;
}

TC_MUST_USE static tc_status realize_shared(tc_sched_ctx *c) {
    if (tc_flag_get(TC_FLAG_NOFUSE)) return TC_OK;
    count_reducers(c);
    for (int i = 0; i < c->bases.n && !c->failed; i++) {
        tc_node *b = c->bases.items[i];
        tc_binfo *bi = tc_binfo_of(b);
        if (bi->realize || bi->n_reducers < SHARED_REDUCERS || tc_node_numel(b) < SHARED_NUMEL)
            continue;
        bool fans_out = true; /* no elementwise consumer is read by as many reduces */
        for (int k = 0; k < bi->consumers.n && fans_out; k += 2) {
            tc_node *u = bi->consumers.items[k];
            fans_out = !(tc_op_is_elementwise(u->op) && tc_binfo_of(u)->n_reducers >= bi->n_reducers);
        }
        if (fans_out && large_loads(c, b) >= SHARED_LOADS) bi->realize = true;
    }
    return c->failed ? TC_ERR_MEMORY : TC_OK;
}

/* A bound on the elementwise ops one kernel inlines (PyTorch Inductor has
 * one too, max_fusion_size): gcc's time on a kernel grows with its ops, about
 * 0.3-0.5 ms an op here (a chain of 3,000 in one kernel: 0.9-1.5 s), so a
 * longer chain is cut into kernels of at most KERNEL_OPS ops, compiled
 * apart (and in parallel), at the cost of one store and load of the value
 * at each cut. No model of the test corpus comes near it (gelu's cone is
 * about 20 ops, Adam's update 25). */
enum { KERNEL_OPS = 512 };

/* the unrealized elementwise bases in x's cone (x one of them), x
 * included, stopping where stops_walk does and at non-elementwise ops,
 * counted up to limit: O(min(cone, limit)) */
static int cone_ops(tc_sched_ctx *c, tc_ptrvec *stack, tc_node *x, int limit) {
    unsigned w = tc_sched_new_walk(c);
    int n = 0;
    stack->n = 0;
    tc_sched_push(c, stack, x);
    while (stack->n && n < limit) {
        tc_node *y = tc_node_base(stack->items[--stack->n]);
        if ((y != x && stops_walk(y)) || !tc_op_is_elementwise(y->op) || !first_visit(y, w)) continue;
        n++;
        for (int i = 0; i < y->n_srcs; i++) tc_sched_push(c, stack, y->srcs[i]);
    }
    return n;
}

/* Producers first, every elementwise base whose cone passes the bound
 * realizes the source with the biggest cone until its own fits (each
 * source's fits already: it came first), and keeps its count (hazard.c
 * merges no kernels past the bound). O(n * bound) at worst; a cone that
 * stops early (at a reduce, a realized value) costs its size. */
TC_MUST_USE static tc_status bound_kernels(tc_sched_ctx *c) {
    int64_t flag = tc_flag_get(TC_FLAG_KERNEL_OPS);
    if (flag < 0) return TC_OK;
    int bound = c->kernel_ops = flag == 0 ? KERNEL_OPS : flag < INT_MAX - 1 ? (int)flag : INT_MAX - 1;
    tc_ptrvec stack = {0};
    for (int i = 0; i < c->by_id.n && !c->failed; i++) {
        tc_node *x = c->by_id.items[i];
        if (!tc_op_is_elementwise(x->op)) continue;
        int *ops = &tc_binfo_of(x)->ops;
        while ((*ops = cone_ops(c, &stack, x, bound + 1)) > bound && !c->failed) {
            tc_node *cut = NULL;
            int most = 0;
            for (int k = 0; k < x->n_srcs; k++) {
                tc_node *sb = tc_node_base(x->srcs[k]);
                if (stops_walk(sb) || !tc_op_is_elementwise(sb->op)) continue;
                int n = cone_ops(c, &stack, sb, bound + 1);
                if (n > most) most = n, cut = sb;
            }
            if (!cut) break; /* cannot happen: x's cone passes the bound through a source */
            tc_binfo_of(cut)->realize = true;
        }
    }
    tc_ptrvec_free(&stack);
    return c->failed ? TC_ERR_MEMORY : TC_OK;
}

TC_MUST_USE static tc_status schedule_run(tc_sched_ctx *c, tc_node *const *nodes, int n) {
    tc_status st = collect(c, nodes, n);
    if (st == TC_OK) st = tc_kg_init(c);
    if (st == TC_OK) st = decide_realizes(c, nodes, n);
    if (st == TC_OK) st = realize_shared(c);
    if (st == TC_OK) st = bound_kernels(c);
    if (st == TC_OK) st = tc_group_reduces(c);
    if (st == TC_OK) st = tc_build_items(c);
    if (st == TC_OK) st = tc_rows_fuse(c, nodes, n);
    if (st == TC_OK) st = tc_merge_axes(c);
    if (st == TC_OK) st = tc_order_program(c);
    return st;
}

static tc_schedule *create(tc_node *const *nodes, int n, bool no_merge, bool *is_cycle);

/* TC_SCHEDULE_LOG=path appends every schedule's dump to path: the corpus
 * that tools/schedule_replay.sh diffs before and after a scheduler change
 * (tinygrad's process replay). A debugging aid: never fails a schedule. */
static void log_schedule(const tc_schedule *s) {
    const char *path = getenv("TC_SCHEDULE_LOG");
    if (!path || !*path) return;
    FILE *f = fopen(path, "a");
    if (!f) return;
    tc_schedule_dump_dag(f, s);
    fclose(f);
}

/* A schedule. When the elementwise merges leave no valid order (a cycle the
 * merge checks missed: seen only with several assigns in one realize), the
 * graph is scheduled again without them, which is always orderable when the
 * graph is. */
tc_schedule *tc_schedule_create(tc_node *const *nodes, int n) {
    bool is_cycle = false;
    tc_error_state es;
    tc_error_save(&es);
    tc_schedule *s = create(nodes, n, false, &is_cycle);
    if (!s && is_cycle) {
        tc_error_restore(&es); /* the retry's outcome is the one to report */
        s = create(nodes, n, true, &is_cycle);
    }
    if (s) log_schedule(s);
    return s;
}

static tc_schedule *create(tc_node *const *nodes, int n, bool no_merge, bool *is_cycle) {
    tc_schedule *s = tc_calloc(1, sizeof *s);
    if (!s) return NULL;
    tc_sched_ctx c = {.s = s, .no_merge = no_merge};
    tc_status st = schedule_run(&c, nodes, n);
    for (int i = 0; i < c.bases.n; i++) {
        tc_node *b = c.bases.items[i];
        tc_ptrvec_free(&tc_binfo_of(b)->consumers);
        tc_ptrvec_free(&tc_binfo_of(b)->loads);
        tc_ptrvec_free(&tc_binfo_of(b)->readers);
        b->scratch = NULL;
    }
    tc_kg_free(&c);
    tc_ptrvec_free(&c.bases);
    tc_ptrmap_free(&c.held);
    *is_cycle = c.is_cycle;
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
