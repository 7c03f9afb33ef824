/* graph.c - lazy graph nodes: construction, interning (hash-consing) and
 * reference counting, the refcounted storage handles they hold, and the
 * size of the graph under some nodes (tc_graph_count, linear).
 *
 * Ownership: a node owns references to its srcs, its st and its buffer.
 * The intern table maps (op, dtype, device, srcs, arg) to the live node and
 * holds no reference; a node leaves it when it dies or is realized.
 */
#include "graph.h"

#include <string.h>

static tc_node **table;     /* intern buckets, chained through hash_next */
static size_t table_cap;    /* number of buckets (power of two) */
static size_t table_count;  /* interned nodes */
static int64_t live_nodes;  /* nodes allocated and not yet freed */
static uint64_t next_id;    /* creation counter for node->id */

tc_buffer *tc_buffer_retain(tc_buffer *b) {
    if (b) b->refcount++;
    return b;
}

void tc_buffer_release(tc_buffer *b) {
    if (!b) return;
    if (--b->refcount == 0) b->release(b);
    else if (b->droppable && b->refcount == b->captured && b->ptr) b->drop(b);
}

int64_t tc_node_numel(const tc_node *n) {
    int64_t s = 1;
    for (int i = 0; i < n->ndim; i++) s *= n->shape[i];
    return s;
}

int64_t tc_graph_live_nodes(void) {
    return live_nodes;
}

/* ---- interning ---- */

static uint64_t node_key(const tc_node *n) {
    uint64_t h = tc_hash_combine((uint64_t)n->op, (uint64_t)n->dtype);
    h = tc_hash_combine(h, (uint64_t)n->device);
    for (int i = 0; i < n->n_srcs; i++) h = tc_hash_combine(h, (uint64_t)(uintptr_t)n->srcs[i]);
    h = tc_hash_combine(h, n->axes);
    h = tc_hash_combine(h, tc_hash_bytes(&n->value, sizeof n->value, 0));
    h = tc_hash_combine(h, (uint64_t)n->ivalue);
    h = tc_hash_combine(h, tc_hash_bytes(n->shape, sizeof(int64_t) * (size_t)n->ndim, n->ndim));
    if (n->st) h = tc_hash_combine(h, tc_st_hash(n->st));
    return h;
}

static bool node_same(const tc_node *a, const tc_node *b) {
    if (a->op != b->op || a->dtype != b->dtype || a->device != b->device ||
        a->n_srcs != b->n_srcs || a->axes != b->axes || a->ivalue != b->ivalue ||
        a->ndim != b->ndim || memcmp(&a->value, &b->value, sizeof a->value) != 0)
        return false;
    for (int i = 0; i < a->n_srcs; i++)
        if (a->srcs[i] != b->srcs[i]) return false;
    if (memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->ndim) != 0) return false;
    if (!a->st != !b->st) return false;
    return !a->st || tc_st_equal(a->st, b->st);
}

static bool table_grow(void) {
    size_t cap = table_cap ? table_cap * 2 : 1024;
    tc_node **t = tc_calloc(cap, sizeof *t);
    if (!t) return false;
    for (size_t i = 0; i < table_cap; i++) {
        tc_node *n = table[i];
        while (n) {
            tc_node *next = n->hash_next;
            n->hash_next = t[n->hash & (cap - 1)];
            t[n->hash & (cap - 1)] = n;
            n = next;
        }
    }
    tc_free(table);
    table = t;
    table_cap = cap;
    return true;
}

static void unintern(tc_node *n) {
    if (!n->is_interned) return;
    tc_node **p = &table[n->hash & (table_cap - 1)];
    while (*p != n) p = &(*p)->hash_next;
    *p = n->hash_next;
    n->hash_next = NULL;
    n->is_interned = false;
    table_count--;
}

/* frees a node that was never interned and holds no references yet */
static void free_bare(tc_node *n) {
    tc_st_free(n->st);
    tc_free(n);
    live_nodes--;
}

/* n's sources gain (delta 1) or lose (-1) n as a reader (n_readers); a
 * view reads nothing itself (its readers count on its base) */
static void count_reads(tc_node *n, int delta) {
    if (n->op == TC_OP_VIEW) return;
    for (int i = 0; i < n->n_srcs; i++) tc_node_base(n->srcs[i])->n_readers += delta;
}

/* Interns the candidate `n` (built on the stack-like heap object with srcs
 * not yet retained). Returns the existing equal node (retained) and frees n,
 * or retains n's srcs and inserts it. NULL on OOM (n freed). */
static tc_node *intern(tc_node *n) {
    n->hash = node_key(n);
    if (table_cap) {
        for (tc_node *m = table[n->hash & (table_cap - 1)]; m; m = m->hash_next) {
            if (m->hash == n->hash && node_same(m, n)) {
                free_bare(n);
                return tc_node_retain(m);
            }
        }
    }
    if ((table_count + 1) * 2 > table_cap && !table_grow()) {
        free_bare(n);
        return NULL;
    }
    for (int i = 0; i < n->n_srcs; i++) tc_node_retain(n->srcs[i]);
    count_reads(n, 1);
    n->hash_next = table[n->hash & (table_cap - 1)];
    table[n->hash & (table_cap - 1)] = n;
    n->is_interned = true;
    table_count++;
    return n;
}

static tc_node *node_alloc(tc_op op, tc_dtype dt, int device) {
    tc_node *n = tc_calloc(1, sizeof *n);
    if (!n) return NULL;
    n->op = op;
    n->dtype = dt;
    n->device = device;
    n->refcount = 1;
    n->id = ++next_id;
    live_nodes++;
    return n;
}

/* ---- refcounting ---- */

tc_node *tc_node_retain(tc_node *n) {
    if (n) n->refcount++;
    return n;
}

void tc_node_release(tc_node *n) {
    if (!n || --n->refcount > 0) return;
    /* worklist through hash_next of dead nodes: a 100k-node chain must not
     * overflow the stack */
    tc_node *dead = n;
    unintern(n);
    n->hash_next = NULL;
    while (dead) {
        tc_node *d = dead;
        dead = d->hash_next;
        count_reads(d, -1); /* its sources are alive until released below */
        for (int i = 0; i < d->n_srcs; i++) {
            tc_node *s = d->srcs[i];
            if (--s->refcount == 0) {
                unintern(s);
                s->hash_next = dead;
                dead = s;
            }
        }
        tc_st_free(d->st);
        tc_buffer_release(d->buffer);
        tc_free(d);
        live_nodes--;
    }
}

void tc_graph_shutdown(void) {
    tc_free(table);
    table = NULL;
    table_cap = table_count = 0;
}

/* ---- constructors ---- */

static tc_node *make_view(tc_node *base, tc_st *st) {
    /* st is consumed */
    if (!st) return NULL;
    const int64_t *shape = tc_st_shape(st);
    int ndim = tc_st_ndim(st);
    if (tc_st_is_contiguous(st) && ndim == base->ndim &&
        memcmp(shape, base->shape, sizeof(int64_t) * (size_t)ndim) == 0) {
        tc_st_free(st);
        return tc_node_retain(base);
    }
    tc_node *v = node_alloc(TC_OP_VIEW, base->dtype, base->device);
    if (!v) {
        tc_st_free(st);
        return NULL;
    }
    v->n_srcs = 1;
    v->srcs[0] = base;
    v->st = st;
    v->ndim = ndim;
    memcpy(v->shape, shape, sizeof(int64_t) * (size_t)ndim);
    return intern(v);
}

tc_st *tc_node_st(const tc_node *n) {
    return n->op == TC_OP_VIEW ? tc_st_copy(n->st) : tc_st_from_shape(n->ndim, n->shape);
}

static tc_node *const_base(double value, int64_t ivalue, tc_dtype dt, int device) {
    tc_node *c = node_alloc(TC_OP_CONST, dt, device);
    if (!c) return NULL;
    c->value = value;
    c->ivalue = ivalue;
    return intern(c);
}

static tc_node *const_to_shape(tc_node *c, int ndim, const int64_t *shape) {
    if (!c || ndim == 0) return c;
    int64_t ones[TC_MAX_DIMS];
    for (int i = 0; i < ndim; i++) ones[i] = 1;
    tc_node *r = tc_node_reshape(c, ndim, ones);
    tc_node_release(c);
    if (!r) return NULL;
    tc_node *e = tc_node_expand(r, ndim, shape);
    tc_node_release(r);
    return e;
}

tc_node *tc_node_const(double value, tc_dtype dt, int device, int ndim, const int64_t *shape) {
    if (!tc_dtypes[dt].is_float)
        return tc_node_const_int(tc_dtype_double_to_int(dt, value), dt, device, ndim, shape);
    value = tc_dtype_round(dt, value);
    return const_to_shape(const_base(value, 0, dt, device), ndim, shape);
}

tc_node *tc_node_const_int(int64_t value, tc_dtype dt, int device, int ndim,
                           const int64_t *shape) {
    if (tc_dtypes[dt].is_float) return tc_node_const((double)value, dt, device, ndim, shape);
    value = tc_dtype_wrap(dt, value);
    return const_to_shape(const_base(tc_dtype_int_to_double(dt, value), value, dt, device), ndim,
                          shape);
}

tc_node *tc_node_buffer(tc_buffer *b, tc_dtype dt, int ndim, const int64_t *shape) {
    tc_node *n = node_alloc(TC_OP_BUFFER, dt, b->device);
    if (!n) return NULL;
    n->buffer = tc_buffer_retain(b);
    n->ndim = ndim;
    if (ndim) memcpy(n->shape, shape, sizeof(int64_t) * (size_t)ndim);
    return n;
}

tc_node *tc_node_alu(tc_op op, tc_dtype dt, int n_srcs, tc_node *const *srcs) {
    tc_node *n = node_alloc(op, dt, srcs[0]->device);
    if (!n) return NULL;
    n->n_srcs = n_srcs;
    for (int i = 0; i < n_srcs; i++) n->srcs[i] = srcs[i];
    n->ndim = srcs[0]->ndim;
    memcpy(n->shape, srcs[0]->shape, sizeof(int64_t) * (size_t)n->ndim);
    return intern(n);
}

tc_node *tc_node_reduce(tc_op op, tc_node *src, uint32_t axes) {
    tc_node *n = node_alloc(op, src->dtype, src->device);
    if (!n) return NULL;
    n->n_srcs = 1;
    n->srcs[0] = src;
    n->axes = axes;
    n->ndim = src->ndim;
    for (int i = 0; i < n->ndim; i++) n->shape[i] = (axes >> i) & 1 ? 1 : src->shape[i];
    return intern(n);
}

tc_node *tc_node_meta(tc_op op, int device, int n_srcs, tc_node *const *srcs) {
    tc_node *n = node_alloc(op, srcs[0]->dtype, device);
    if (!n) return NULL;
    n->n_srcs = n_srcs;
    for (int i = 0; i < n_srcs; i++) n->srcs[i] = srcs[i];
    n->ndim = srcs[0]->ndim;
    memcpy(n->shape, srcs[0]->shape, sizeof(int64_t) * (size_t)n->ndim);
    if (op == TC_OP_CONTIGUOUS || op == TC_OP_COPY) {
        /* never shared: each call asks for a buffer of its own */
        for (int i = 0; i < n_srcs; i++) tc_node_retain(srcs[i]);
        count_reads(n, 1);
        return n;
    }
    return intern(n);
}

/* an indexed node (GATHER, SCATTER, PUT): its sources, the indexed axis,
 * its shape; interned */
static tc_node *indexed(tc_op op, const tc_node *like, int n_srcs, tc_node *const *srcs, int axis,
                        int ndim, const int64_t *shape) {
    tc_node *n = node_alloc(op, like->dtype, like->device);
    if (!n) return NULL;
    n->n_srcs = n_srcs;
    for (int i = 0; i < n_srcs; i++) n->srcs[i] = srcs[i];
    n->axes = 1u << axis;
    n->ndim = ndim;
    memcpy(n->shape, shape, sizeof(int64_t) * (size_t)ndim);
    return intern(n);
}

tc_node *tc_node_gather(tc_node *x, tc_node *idx, int axis) {
    return indexed(TC_OP_GATHER, x, 2, (tc_node *[]){x, idx}, axis, idx->ndim, idx->shape);
}

tc_node *tc_node_scatter(tc_node *idx, tc_node *src, int axis, const int64_t *x_shape) {
    return indexed(TC_OP_SCATTER, src, 2, (tc_node *[]){idx, src}, axis, src->ndim, x_shape);
}

tc_node *tc_node_put(tc_node *idx, tc_node *src, tc_node *target, int axis, const int64_t *x_shape) {
    return indexed(TC_OP_PUT, target, 3, (tc_node *[]){idx, src, target}, axis, src->ndim, x_shape);
}

/* ---- movement: compose onto the base's tracker ---- */

static tc_st *st_of(const tc_node *n) {
    return tc_node_st(n);
}

#define MOVEMENT(name, call)                          \
    tc_st *st = st_of(n);                             \
    if (!st) return NULL;                             \
    tc_st *nst = call;                                \
    tc_st_free(st);                                   \
    return make_view(tc_node_base(n), nst);

tc_node *tc_node_reshape(tc_node *n, int ndim, const int64_t *shape) {
    MOVEMENT(reshape, tc_st_reshape(st, ndim, shape))
}
tc_node *tc_node_permute(tc_node *n, const int *order) {
    MOVEMENT(permute, tc_st_permute(st, order))
}
tc_node *tc_node_pad(tc_node *n, const int64_t *before_after) {
    MOVEMENT(pad, tc_st_pad(st, before_after))
}
tc_node *tc_node_shrink(tc_node *n, const int64_t *begin_end) {
    MOVEMENT(shrink, tc_st_shrink(st, begin_end))
}
tc_node *tc_node_flip(tc_node *n, const bool *axes) {
    MOVEMENT(flip, tc_st_flip(st, axes))
}

tc_node *tc_node_expand(tc_node *n, int ndim, const int64_t *shape) {
    tc_node *src = tc_node_retain(n);
    if (ndim > n->ndim) { /* prepend size-1 dims first */
        int64_t s[TC_MAX_DIMS];
        int extra = ndim - n->ndim;
        for (int i = 0; i < ndim; i++) s[i] = i < extra ? 1 : n->shape[i - extra];
        tc_node_release(src);
        src = tc_node_reshape(n, ndim, s);
        if (!src) return NULL;
    }
    tc_st *st = st_of(src);
    tc_node *r = NULL;
    if (st) {
        r = make_view(tc_node_base(src), tc_st_expand(st, shape));
        tc_st_free(st);
    }
    tc_node_release(src);
    return r;
}

void tc_node_set_realized(tc_node *n, tc_buffer *b) {
    unintern(n);
    count_reads(n, -1);
    for (int i = 0; i < n->n_srcs; i++) {
        tc_node_release(n->srcs[i]);
        n->srcs[i] = NULL;
    }
    n->n_srcs = 0;
    n->op = TC_OP_BUFFER;
    n->buffer = tc_buffer_retain(b);
}

/* ---- counting: how big the graph under some nodes is ----
 * A walk with a worklist and an open-addressing set of the nodes seen
 * (keyed by id, grown at half full): O(nodes + edges) expected. */

typedef struct {
    tc_node **slots; /* cap entries, NULL = free */
    int64_t cap;     /* a power of two */
    int64_t n;       /* nodes held */
} node_set;

/* puts x into a set with a free slot; 1 if it was new, 0 if held already */
static int slot_put(node_set *s, tc_node *x) {
    uint64_t mask = (uint64_t)s->cap - 1;
    for (uint64_t i = tc_hash_combine(x->id, 0x6e6f6465) & mask;; i = (i + 1) & mask) {
        if (s->slots[i] == x) return 0;
        if (!s->slots[i]) {
            s->slots[i] = x;
            s->n++;
            return 1;
        }
    }
}

/* adds x, growing the set first when it would be over half full; 1 if x was
 * new, 0 if held already, -1 out of memory */
static int set_add(node_set *s, tc_node *x) {
    if (2 * (s->n + 1) > s->cap) {
        int64_t cap = s->cap ? s->cap * 2 : 256;
        node_set g = {tc_calloc((size_t)cap, sizeof(tc_node *)), cap, 0};
        if (!g.slots) return -1;
        for (int64_t i = 0; i < s->cap; i++)
            if (s->slots[i]) slot_put(&g, s->slots[i]);
        tc_free(s->slots);
        *s = g;
    }
    return slot_put(s, x);
}

int64_t tc_graph_count(tc_node *const *nodes, int n) {
    node_set seen = {0};
    tc_ptrvec stack = {0};
    int64_t count = 0;
    for (int i = 0; i < n && count >= 0; i++)
        if (nodes[i] && tc_ptrvec_push(&stack, nodes[i]) != TC_OK) count = -1;
    while (stack.n && count >= 0) {
        tc_node *x = stack.items[--stack.n];
        int added = set_add(&seen, x);
        if (added < 0) count = -1;
        if (added <= 0) continue;
        count++;
        for (int i = 0; i < x->n_srcs && count >= 0; i++)
            if (tc_ptrvec_push(&stack, x->srcs[i]) != TC_OK) count = -1;
    }
    tc_free(seen.slots);
    tc_ptrvec_free(&stack);
    return count;
}

static int64_t count_of(const tc_ptrmap *m, const tc_node *x) {
    void *v = NULL;
    return tc_ptrmap_get(m, x, &v) ? (int64_t)(intptr_t)v : 0;
}

tc_status tc_graph_held(tc_node *const *bases, int n, tc_ptrmap *held) {
    tc_ptrmap reads = {0}; /* base -> the listed bases' source slots that read it */
    for (int i = 0; i < n && !reads.failed; i++) {
        for (int s = 0; s < bases[i]->n_srcs; s++) {
            tc_node *b = tc_node_base(bases[i]->srcs[s]);
            if (!tc_ptrmap_put(&reads, b, (void *)(intptr_t)(count_of(&reads, b) + 1))) break;
        }
    }
    for (int i = 0; i < n && !reads.failed; i++)
        if (bases[i]->n_readers > count_of(&reads, bases[i])) (void)tc_ptrset_add(held, bases[i]);
    bool failed = reads.failed || held->failed;
    tc_ptrmap_free(&reads);
    return failed ? tc_error_or(TC_ERR_MEMORY) : TC_OK;
}

/* ---- dump ---- */

void tc_node_dump(FILE *f, tc_node *n) {
    tc_ptrvec stack = {0};
    tc_ptrmap seen = {0};
    bool oom = tc_ptrvec_push(&stack, n) != TC_OK;
    while (stack.n && !oom) {
        tc_node *x = stack.items[--stack.n];
        if (!tc_ptrset_add(&seen, x)) {
            oom = seen.failed;
            continue;
        }
        char shape[128];
        fprintf(f, "  n%llu %-10s %-7s %s", (unsigned long long)x->id, tc_ops[x->op].name,
                tc_dtypes[x->dtype].name, tc_fmt_shape(shape, sizeof shape, x->ndim, x->shape));
        for (int i = 0; i < x->n_srcs; i++)
            fprintf(f, " n%llu", (unsigned long long)x->srcs[i]->id);
        if (x->op == TC_OP_CONST) fprintf(f, " value=%g", x->value);
        if (tc_op_is_reduce(x->op)) fprintf(f, " axes=0x%x", x->axes);
        if (x->st) {
            fprintf(f, " ");
            tc_st_dump(f, x->st);
        } else {
            fprintf(f, "\n");
        }
        for (int i = x->n_srcs - 1; i >= 0 && !oom; i--)
            oom = tc_ptrvec_push(&stack, x->srcs[i]) != TC_OK;
    }
    if (oom) fprintf(f, "  (the rest is not shown: out of memory)\n");
    tc_ptrmap_free(&seen);
    tc_ptrvec_free(&stack);
}
