/* rows.c - the scheduler's last step: row kernels (schedule.h's kernel
 * model one level deeper). Walks the ordered items once and grows runs of
 * consecutive kernels that share their leading kept axes (the rows), each
 * kernel that joins reading an output of the run; a run of two or more
 * becomes one item with a part per kernel, run row by row. An output that
 * nothing outside the run reads (and that was not asked for) becomes a row
 * scratch array: attention's scores and weights never reach memory.
 *
 * Rules:
 *  - rows: the first nr axes of every part, kept (not reduced) in each,
 *    with the same sizes, at least 2 rows in all; nr is the longest prefix
 *    on which the run's first two kernels agree (and the rules below hold);
 *  - row-local: every load of a buffer the run writes, and that buffer's
 *    store, has one view whose row axes step by whole rows of the buffer
 *    (row r holds elements [r * inner, (r + 1) * inner)) and stays inside
 *    one row: row r of a part reads only row r of what the run writes, so
 *    rows are independent (threads, work-items) and a row's parts run in
 *    order (a store nothing in the run reads may have any view: attention's
 *    output stored with its heads merged);
 *  - cost: no part reads, inside a reduce, a buffer that stays fixed along
 *    every row axis and moves along two or more of the others (a weight all
 *    rows share whole, as in x @ W): per row it would be read again, where a
 *    kernel of its own tiles its rows against it. Attention's k and v move
 *    with (b, h); a causal mask's arange is a vector;
 *  - no copies, scatters or assigns (an in-place update read elsewhere in
 *    the run could be seen by a row in the wrong order);
 *  - worth it: a run becomes a row kernel only when a row scratch array
 *    holds more than one element a row (a row of scores), the memory
 *    traffic it exists to save. Per-row scalars alone (a mean, a max) buy
 *    one launch at the price of the parts' own tiling over those rows (a
 *    matmul whose every output is a row is a dot product per row), and the
 *    grouping's stages already keep them in registers where it can.
 * A part does the work its kernel did, once per row: nothing is recomputed,
 * only the intermediates' trips through memory go.
 *
 * Cost: O(items + buffers + the ASTs' sizes * TC_MAX_DIMS) (the first pair
 * of a run tries each row count once).
 */
#include "internal.h"

#include <string.h>

/* the most elements of one row scratch array: a row of 16K scores (64 KiB
 * of float32, on a CPU thread's stack or in a GPU lane's private memory);
 * a longer row stays in memory. ROW_SCRATCH_BYTES bounds a row kernel's
 * arrays together (a run of many parts each keeping a row would otherwise
 * overflow a thread's stack): past it, later outputs stay in memory. */
enum { ROW_SCRATCH_MAX = 16384, ROW_SCRATCH_BYTES = 256 * 1024 };

typedef struct {
    tc_schedule *s;    /* items, ordered */
    tc_ptrmap made;    /* output node -> producing item + 1 */
    tc_ptrmap readers; /* output node -> items reading it (count) */
    tc_ptrmap asked;   /* the requested bases (a set) */
    const tc_ptrmap *held; /* the bases held outside the schedule's graph (tc_sched_ctx) */
    int *run_of;       /* per item: the first item of its run, -1 */
    bool failed;       /* out of memory */
} rows_ctx;

static int64_t get_int(const tc_ptrmap *m, const void *k) {
    void *v = NULL;
    return tc_ptrmap_get(m, k, &v) ? (int64_t)(intptr_t)v : 0;
}

static void put_int(rows_ctx *r, tc_ptrmap *m, const void *k, int64_t v) {
    if (!tc_ptrmap_put(m, k, (void *)(intptr_t)v)) r->failed = true;
}

/* the item producing node n, -1 when none of this schedule does */
static int producer(const rows_ctx *r, const tc_node *n) {
    return (int)get_int(&r->made, n) - 1;
}

static bool eligible(const tc_sched_item *it) {
    if (it->is_copy || it->is_scatter || it->is_put || it->has_parts || !it->ast || it->ndim < 1) return false;
    for (int a = 0; a < it->ndim; a++)
        if (it->full_shape[a] < 1) return false;
    for (int k = 0; k < it->n_outs; k++)
        if (it->bufs[k]->op == TC_OP_ASSIGN) return false;
    return true;
}

/* kernel it's first nr axes are kept and equal to rows[] */
static bool has_rows(const tc_sched_item *it, int nr, const int64_t *rows) {
    if (it->ndim < nr) return false;
    for (int a = 0; a < nr; a++)
        if ((it->reduce_axes >> a) & 1 || it->full_shape[a] != rows[a]) return false;
    return true;
}

static int64_t rows_of(const int64_t *rows, int nr) {
    int64_t n = 1;
    for (int a = 0; a < nr; a++) n *= rows[a];
    return n;
}

/* st (over a loop space whose first nr axes are the rows) reads or writes
 * only row r's elements [r * inner, (r + 1) * inner) of a buffer of numel
 * elements at row r; *inner is set */
static bool row_local(const tc_st *st, int nr, const int64_t *rows, int64_t numel, int64_t *inner) {
    int64_t n_rows = rows_of(rows, nr);
    if (st->n_views != 1 || n_rows < 1 || numel % n_rows) return false;
    const tc_view *v = &st->views[0];
    *inner = numel / n_rows;
    int64_t want = *inner;
    for (int a = nr - 1; a >= 0; a--) {
        if (v->shape[a] != rows[a]) return false;
        if (v->shape[a] > 1 && v->strides[a] != want) return false;
        if (v->has_mask && (v->mask_begin[a] != 0 || v->mask_end[a] != v->shape[a])) return false;
        want *= rows[a];
    }
    int64_t lo = v->offset, hi = v->offset;
    for (int a = nr; a < v->ndim; a++) {
        int64_t b = v->has_mask ? v->mask_begin[a] : 0,
                e = v->has_mask ? v->mask_end[a] : v->shape[a];
        if (b >= e) return false;
        int64_t x = v->strides[a] * b, y = v->strides[a] * (e - 1);
        lo += x < y ? x : y;
        hi += x < y ? y : x;
    }
    return lo >= 0 && hi < *inner;
}

/* does the element st reads change along loop axis a? (several views:
 * taken as yes) */
static bool moves_along(const tc_st *st, int a) {
    const tc_view *v = &st->views[st->n_views - 1];
    return st->n_views > 1 || (v->shape[a] > 1 && v->strides[a] != 0);
}

/* a load that every row reads whole: fixed along each row axis, moving
 * along two or more of the others */
static bool is_shared_matrix(const tc_st *st, int nr, int ndim) {
    for (int a = 0; a < nr; a++)
        if (moves_along(st, a)) return false;
    int moving = 0;
    for (int a = nr; a < ndim; a++) moving += moves_along(st, a);
    return moving >= 2;
}

typedef struct {
    rows_ctx *r;
    const tc_sched_item *it; /* the kernel checked */
    int index;               /* its place in the schedule */
    int first;               /* the run's first item (run_of of its members) */
    int nr;                  /* row axes */
    const int64_t *rows;     /* their sizes */
    bool links;              /* it reads an output of the run */
    tc_ptrmap seen[2];       /* AST nodes visited outside / inside a reduce */
} part_check;

/* the store of node b in item it is row-local */
static bool store_row_local(const tc_sched_item *it, const tc_node *b, int nr,
                            const int64_t *rows) {
    const tc_ast *sink = it->ast;
    for (int i = 0; i < sink->n_srcs; i++) {
        const tc_ast *st = sink->srcs[i];
        int64_t inner;
        if (it->bufs[st->buf] == b) return row_local(st->st, nr, rows, tc_node_numel(b), &inner);
    }
    return false;
}

/* the rules for one AST node (and those under it) of the kernel checked */
static bool check_node(part_check *p, const tc_ast *a, bool under) {
    if (!tc_ptrset_add(&p->seen[under], a)) {
        p->r->failed |= p->seen[under].failed;
        return true;
    }
    if ((a->op == TC_OP_LOAD || a->op == TC_OP_GATHER) && a->buf >= 0) {
        const tc_node *b = p->it->bufs[a->buf];
        int at = producer(p->r, b);
        int64_t inner;
        if (at >= p->first && p->r->run_of[at] == p->first) {
            p->links = true;
            if (a->op == TC_OP_GATHER ||
                !row_local(a->st, p->nr, p->rows, tc_node_numel(b), &inner) ||
                !store_row_local(&p->r->s->items[at], b, p->nr, p->rows))
                return false;
        } else if (under && is_shared_matrix(a->st, p->nr, p->it->ndim)) {
            return false;
        }
    }
    under |= tc_op_is_reduce(a->op);
    for (int i = 0; i < a->n_srcs; i++)
        if (!check_node(p, a->srcs[i], under)) return false;
    return true;
}

/* does item index read an output of an item after first that is not in
 * first's run (one it would have to move ahead of)? */
static bool reads_gap(const rows_ctx *r, int first, int index) {
    const tc_sched_item *it = &r->s->items[index];
    for (int k = it->n_outs; k < it->n_bufs; k++) {
        int at = producer(r, it->bufs[k]);
        if (at > first && r->run_of[at] != first) return true;
    }
    return false;
}

/* may item index join the run whose first item is first (the members so
 * far: run_of), with nr row axes? It moves ahead of the items in between
 * that are not in the run, so it must not read them. */
static bool part_ok(rows_ctx *r, int first, int index, int nr, const int64_t *rows) {
    const tc_sched_item *it = &r->s->items[index];
    if (!has_rows(it, nr, rows) || reads_gap(r, first, index)) return false;
    part_check p = {.r = r, .it = it, .index = index, .first = first, .nr = nr, .rows = rows};
    bool ok = true;
    const tc_ast *sink = it->ast;
    for (int i = 0; i < sink->n_srcs && ok; i++)
        ok = sink->srcs[i]->op == TC_OP_STORE && check_node(&p, sink->srcs[i]->srcs[0], false);
    tc_ptrmap_free(&p.seen[0]);
    tc_ptrmap_free(&p.seen[1]);
    return ok && (p.links || first == index);
}

/* the longest row prefix on which items i and j = i + 1 form a run; 0: none */
static int pair_rows(rows_ctx *r, int i, int j) {
    const tc_sched_item *a = &r->s->items[i], *b = &r->s->items[j];
    int nr = 0;
    while (nr < a->ndim && nr < b->ndim && !((a->reduce_axes >> nr) & 1) &&
           !((b->reduce_axes >> nr) & 1) && a->full_shape[nr] == b->full_shape[nr])
        nr++;
    r->run_of[i] = i; /* i alone: j's run-mate if a prefix fits */
    for (; nr > 0 && !r->failed; nr--) {
        if (rows_of(a->full_shape, nr) < 2) break;
        if (part_ok(r, i, i, nr, a->full_shape) && part_ok(r, i, j, nr, a->full_shape)) return nr;
    }
    r->run_of[i] = -1;
    return 0;
}

/* ---- building a row kernel from the members of the run of first ---- */

typedef struct {
    tc_ptrmap code;  /* node -> its buffer in the row kernel + 1 + n_scratch (slot >= 0,
                         scratch -1 - k) */
    tc_ptrvec slots; /* the row kernel's buffers: outputs, then inputs */
    int n_outs;      /* outputs among them */
    int n_scratch;   /* scratch arrays */
    int64_t scratch_bytes; /* bytes of one row of all of them (at most ROW_SCRATCH_BYTES) */
} rk_bufs;

static void set_code(rows_ctx *r, rk_bufs *k, const tc_node *n, int code) {
    put_int(r, &k->code, n, (int64_t)code + (1 << 20));
}

static bool get_code(const rk_bufs *k, const tc_node *n, int *code) {
    int64_t v = get_int(&k->code, n);
    *code = (int)(v - (1 << 20));
    return v != 0;
}

/* output n of the run is kept in a row scratch array: nothing outside the
 * run reads it (in_run: the readers inside), it was not asked for, no node
 * outside the schedule's graph reads it (tc_graph_held: a later realize
 * would compute it again, as gradients realized one at a time, autograd's
 * gc_check, read what the first one's row kernel kept in scratch), a row of
 * it (n_rows rows) is at most ROW_SCRATCH_MAX elements, and its dtype is
 * not float16 (which the GPU dialects store through conversions that only
 * their global loads and stores make) */
static bool is_scratch(const rows_ctx *r, const tc_node *n, int64_t in_run, int64_t n_rows) {
    int64_t all = get_int(&r->readers, n);
    return all > 0 && all == in_run && !tc_ptrmap_get(&r->asked, n, NULL) &&
           !tc_ptrmap_get(r->held, n, NULL) &&
           n->op != TC_OP_ASSIGN && tc_node_numel(n) / n_rows <= ROW_SCRATCH_MAX &&
           n->dtype != TC_FLOAT16;
}

static void collect_bufs(rows_ctx *r, int first, int end, int nr, rk_bufs *k) {
    tc_ptrmap in_run = {0}; /* output node -> readers inside the run */
    int64_t n_rows = rows_of(r->s->items[first].full_shape, nr);
    for (int i = first; i < end; i++) {
        const tc_sched_item *it = &r->s->items[i];
        if (r->run_of[i] != first) continue;
        for (int s = it->n_outs; s < it->n_bufs; s++) {
            int at = producer(r, it->bufs[s]);
            if (at >= first && r->run_of[at] == first)
                put_int(r, &in_run, it->bufs[s], get_int(&in_run, it->bufs[s]) + 1);
        }
    }
    for (int i = first; i < end; i++) {
        const tc_sched_item *it = &r->s->items[i];
        if (r->run_of[i] != first) continue;
        for (int s = 0; s < it->n_outs; s++) {
            tc_node *n = it->bufs[s];
            int64_t bytes = tc_node_numel(n) / n_rows * (int64_t)tc_dtypes[n->dtype].size;
            if (is_scratch(r, n, get_int(&in_run, n), n_rows) &&
                k->scratch_bytes + bytes <= ROW_SCRATCH_BYTES) {
                k->scratch_bytes += bytes;
                set_code(r, k, n, -1 - k->n_scratch++);
            } else {
                set_code(r, k, n, k->slots.n);
                if (tc_ptrvec_push(&k->slots, n) != TC_OK) r->failed = true;
            }
        }
    }
    k->n_outs = k->slots.n;
    for (int i = first; i < end; i++) {
        const tc_sched_item *it = &r->s->items[i];
        if (r->run_of[i] != first) continue;
        for (int s = it->n_outs; s < it->n_bufs; s++) {
            int code;
            if (get_code(k, it->bufs[s], &code)) continue;
            set_code(r, k, it->bufs[s], k->slots.n);
            if (tc_ptrvec_push(&k->slots, it->bufs[s]) != TC_OK) r->failed = true;
        }
    }
    r->failed |= in_run.failed || k->code.failed;
    tc_ptrmap_free(&in_run);
}

/* st with the row axes' strides zeroed: the place inside the row */
static tc_st *in_row(rows_ctx *r, const tc_st *st, int nr) {
    tc_st *z = tc_st_copy(st);
    if (!z || tc_ptrvec_push(&r->s->sts, z) != TC_OK) {
        tc_st_free(z);
        r->failed = true;
        return NULL;
    }
    for (int a = 0; a < nr; a++) z->views[0].strides[a] = 0;
    z->views[0].is_contiguous = false;
    return z;
}

/* the buffers of part it's AST become the row kernel's (each node once) */
static void remap(rows_ctx *r, const tc_sched_item *it, const rk_bufs *k, int nr,
                  const int64_t *rows) {
    tc_ptrvec stack = {0};
    tc_ptrmap seen = {0};
    if (tc_ptrvec_push(&stack, it->ast) != TC_OK) r->failed = true;
    while (stack.n && !r->failed) {
        tc_ast *a = stack.items[--stack.n];
        if (!tc_ptrset_add(&seen, a)) {
            r->failed |= seen.failed;
            continue;
        }
        for (int i = 0; i < a->n_srcs; i++)
            if (tc_ptrvec_push(&stack, a->srcs[i]) != TC_OK) r->failed = true;
        if (a->op != TC_OP_LOAD && a->op != TC_OP_STORE && a->op != TC_OP_GATHER) continue;
        if (a->buf < 0) continue;
        const tc_node *n = it->bufs[a->buf];
        int code;
        if (!get_code(k, n, &code)) {
            r->failed = true;
            TC_INTERNAL("buffer %d of %s has no place in its row kernel", a->buf, it->name);
            break;
        }
        a->buf = code;
        if (code >= 0) continue;
        int64_t inner = 0;
        if (!row_local(a->st, nr, rows, tc_node_numel(n), &inner)) {
            r->failed = true;
            TC_INTERNAL("a row scratch access of %s left its row", it->name);
            break;
        }
        a->index_size = inner;
        a->st = in_row(r, a->st, nr);
    }
    tc_ptrvec_free(&stack);
    tc_ptrmap_free(&seen);
}

/* the item of the run of first (members up to end, n_parts of them) with
 * nr row axes, into *out; references to its buffers taken (the run's items
 * keep theirs) */
static bool build_rows(rows_ctx *r, int first, int end, int n_parts, int nr, tc_sched_item *out) {
    const tc_sched_item *head = &r->s->items[first];
    rk_bufs k = {0};
    collect_bufs(r, first, end, nr, &k);
    tc_ast *sink = r->failed ? NULL : tc_arena_alloc(&r->s->arena, sizeof *sink);
    tc_node **bufs =
        sink ? tc_arena_alloc(&r->s->arena, sizeof(tc_node *) * (size_t)k.slots.n) : NULL;
    if (sink) sink->srcs = tc_arena_alloc(&r->s->arena, sizeof(tc_ast *) * (size_t)n_parts);
    if (!bufs || !sink->srcs) r->failed = true;
    for (int i = first; i < end && !r->failed; i++) {
        tc_sched_item *it = &r->s->items[i];
        if (r->run_of[i] != first) continue;
        tc_ast *part = it->ast;
        part->st = tc_st_from_shape(it->ndim, it->full_shape);
        if (!part->st || tc_ptrvec_push(&r->s->sts, part->st) != TC_OK) {
            tc_st_free(part->st);
            r->failed = true;
            break;
        }
        part->axes = it->reduce_axes;
        remap(r, it, &k, nr, head->full_shape);
        sink->srcs[sink->n_srcs++] = part;
    }
    if (!r->failed) {
        *out = (tc_sched_item){.has_parts = true,
                               .ast = sink,
                               .ndim = nr,
                               .n_outs = k.n_outs,
                               .n_bufs = k.slots.n,
                               .bufs = bufs};
        memcpy(out->full_shape, head->full_shape, sizeof(int64_t) * (size_t)nr);
        sink->op = TC_OP_SINK;
        sink->dtype = head->ast->dtype;
        sink->buf = -1;
        for (int i = 0; i < k.slots.n; i++) bufs[i] = tc_node_retain(k.slots.items[i]);
        size_t at = (size_t)snprintf(out->name, sizeof out->name, "R%d", n_parts);
        for (int a = 0; a < nr && at + 24 < sizeof out->name; a++)
            at += (size_t)snprintf(out->name + at, sizeof out->name - at, "_%lld",
                                   (long long)out->full_shape[a]);
    }
    tc_ptrvec_free(&k.slots);
    tc_ptrmap_free(&k.code);
    return !r->failed;
}

/* does the run of first (members up to end) keep a row of more than one
 * element in a row scratch array? */
static bool is_wide(rows_ctx *r, int first, int end, int nr) {
    rk_bufs k = {0};
    collect_bufs(r, first, end, nr, &k);
    bool wide = false;
    int64_t n_rows = rows_of(r->s->items[first].full_shape, nr);
    for (int i = first; i < end && !wide; i++) {
        const tc_sched_item *it = &r->s->items[i];
        for (int s = 0; s < it->n_outs && r->run_of[i] == first; s++) {
            int code;
            if (get_code(&k, it->bufs[s], &code) && code < 0 && tc_node_numel(it->bufs[s]) > n_rows)
                wide = true;
        }
    }
    tc_ptrvec_free(&k.slots);
    tc_ptrmap_free(&k.code);
    return wide;
}

/* ---- the pass ---- */

static void index_items(rows_ctx *r, tc_node *const *nodes, int n) {
    for (int i = 0; i < n; i++)
        if (!tc_ptrset_add(&r->asked, tc_node_base(nodes[i])) && r->asked.failed) r->failed = true;
    for (int i = 0; i < r->s->n_items; i++) {
        const tc_sched_item *it = &r->s->items[i];
        for (int k = 0; k < it->n_outs && !it->is_copy; k++)
            put_int(r, &r->made, it->bufs[k], i + 1);
        for (int k = it->n_outs; k < it->n_bufs; k++)
            put_int(r, &r->readers, it->bufs[k], get_int(&r->readers, it->bufs[k]) + 1);
        if (it->is_copy) put_int(r, &r->made, it->bufs[0], i + 1);
    }
}

/* The runs, in one pass: an item joins the open run when it may (its
 * inputs from the run row-local, none from the items it would move ahead
 * of), else it may pair with the item just before it (which then starts a
 * new run, the open one closing); else the run stays open past it. Sets
 * run_of of the members, and per run's first item run_end (one past its
 * last member), run_nr (its row axes) and run_n (its members). */
static void find_runs(rows_ctx *r, int *run_end, int *run_nr, int *run_n) {
    int first = -1, prev = -1; /* the open run; the last item no run took */
    for (int j = 0; j < r->s->n_items && !r->failed; j++) {
        r->run_of[j] = -1;
        if (!eligible(&r->s->items[j])) {
            prev = -1;
            continue;
        }
        if (first >= 0 && part_ok(r, first, j, run_nr[first], r->s->items[first].full_shape)) {
            r->run_of[j] = first;
            run_end[first] = j + 1;
            run_n[first]++;
            continue;
        }
        int nr = prev == j - 1 && prev >= 0 ? pair_rows(r, prev, j) : 0;
        if (nr > 0) {
            first = prev;
            r->run_of[prev] = r->run_of[j] = first;
            run_end[first] = j + 1;
            run_nr[first] = nr;
            run_n[first] = 2;
            prev = -1;
            continue;
        }
        prev = j;
    }
}

TC_MUST_USE tc_status tc_rows_fuse(tc_sched_ctx *c, tc_node *const *nodes, int n) {
    tc_schedule *s = c->s;
    if (tc_flag_get(TC_FLAG_NOFUSE) || tc_flag_get(TC_FLAG_NOROWS) || s->n_items < 2) return TC_OK;
    rows_ctx r = {.s = s, .held = &c->held};
    size_t n_items = (size_t)s->n_items;
    int *run_end = tc_calloc(n_items, sizeof(int)), *run_nr = tc_calloc(n_items, sizeof(int));
    int *run_n = tc_calloc(n_items, sizeof(int));
    r.run_of = tc_calloc(n_items, sizeof(int));
    tc_sched_item *items = tc_arena_alloc(&s->arena, sizeof *items * n_items);
    r.failed = !run_end || !run_nr || !run_n || !r.run_of || !items;
    if (!r.failed) index_items(&r, nodes, n);
    if (!r.failed) find_runs(&r, run_end, run_nr, run_n);
    for (int i = 0; i < s->n_items && !r.failed; i++) /* runs not worth it: items again */
        if (r.run_of[i] == i && !is_wide(&r, i, run_end[i], run_nr[i]))
            for (int j = i; j < run_end[i]; j++)
                if (r.run_of[j] == i) r.run_of[j] = -1;
    int m = 0, built = 0;
    for (int i = 0; i < s->n_items && !r.failed; i++) { /* a run where its first item was */
        if (r.run_of[i] < 0) items[m++] = s->items[i];
        else if (r.run_of[i] == i && build_rows(&r, i, run_end[i], run_n[i], run_nr[i], &items[m]))
            m++, built++;
    }
    tc_status st = r.failed ? tc_error_or(TC_ERR_MEMORY) : TC_OK;
    if (st != TC_OK) { /* the row kernels built so far drop their references */
        for (int i = 0; i < m; i++)
            for (int k = 0; items[i].has_parts && k < items[i].n_bufs; k++)
                tc_node_release(items[i].bufs[k]);
    } else if (built) { /* the merged items drop theirs; the row kernels hold what they need */
        for (int i = 0; i < s->n_items; i++)
            for (int k = 0; r.run_of[i] >= 0 && k < s->items[i].n_bufs; k++)
                tc_node_release(s->items[i].bufs[k]);
        s->items = items;
        s->n_items = m;
    }
    tc_free(run_end);
    tc_free(run_nr);
    tc_free(run_n);
    tc_free(r.run_of);
    tc_ptrmap_free(&r.made);
    tc_ptrmap_free(&r.readers);
    tc_ptrmap_free(&r.asked);
    return st;
}
