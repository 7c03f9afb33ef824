/* scache.c - the schedule cache: an eager training step builds a graph of
 * the same structure every step (the same ops, shapes, dtypes, views and
 * devices over new buffers). The first realize of a structure schedules,
 * lowers and compiles it; this file keeps a *plan* of the result (the items
 * with copies of their ASTs, which of the graph's bases each item reads and
 * writes, the lowered kernels and their programs), so a later realize of the
 * same structure runs the plan on its own nodes with no scheduling, lowering
 * or compiling.
 *
 * The key is exact. One walk from the requested nodes through unrealized
 * bases (the scheduler's walk) lists every base reached. The unrealized ones
 * (constants included) are numbered by creation order: node ids, by which
 * the scheduler orders reduces (group.c) and a kernel's outputs (ast.c). The
 * realized leaves, which it never orders by id, are numbered in the order
 * the key first reads them, so a step whose parameters were made in another
 * order than the last step's still matches. The key writes, after the flags
 * the scheduler and codegen read (TC_NOFUSE, TC_NOOPT, TC_BEAM, TC_NOROWS)
 * and the requested bases in order, each base: op, dtype, device, shape,
 * reduced axes, constant (its bits, so -0.0 is not 0.0), whether a node
 * outside the graph reads it (tc_graph_held: row kernels keep no such base
 * in scratch), then its sources, each a
 * base number or a view (its tracker and base, numbered at first use, so a
 * view read twice is one view); and each leaf with the number of the first
 * leaf sharing its storage (assigns and hazards depend on which leaves are
 * one buffer). Two graphs with equal keys are one graph up to renaming its
 * nodes by number, with the same order of creation among unrealized bases
 * and the same storage sharing; the scheduler reads nothing else (node
 * pointers are compared, or hashed to be found again, never ordered), so
 * it gives both the same schedule. Integers are written as varints (zigzag for signed ones),
 * each list after its length, so equal bytes mean equal fields. A lookup
 * hashes the key and compares it byte for byte: a collision is a miss.
 * If the scheduler comes to order realized buffers by id, number_of must
 * number leaves by id too.
 * A plan's lowering and programs belong to one opening of each device
 * (tc_dev.serial): a device closed and opened again makes the plan stale,
 * and a stale plan is dropped, never run.
 *
 * Cost: the walk and the key are O(n) in the nodes reached (hash maps keyed
 * by pointer), the numbering a sort of the unrealized bases, O(n log n); a
 * hit instantiates the plan in O(items + buffers) and lets go of buffers in
 * O(buffers) (plan_drops). A plan is made in O(AST nodes) from a schedule.
 * Bounds: MAX_ENTRIES plans and MAX_BYTES of keys, ASTs and kernel sources
 * (tests lower them with tc_scache_limit); the least recently used plan goes
 * first; a plan larger than the whole bound is not kept. Emptied at
 * tc_shutdown. The cache is guarded by the API lock.
 */
#include "engine.h"

#include <stdlib.h>
#include <string.h>

enum {
    BUCKETS = 256,     /* hash chains of the cache */
    MAX_ENTRIES = 256, /* plans kept */
    KEY_VERSION = 2,   /* first varint of every key */
};
#define MAX_BYTES ((size_t)256 << 20) /* keys + plans kept, bytes */

/* ---- pointer -> int maps (open addressing, linear probing) ---- */

typedef struct {
    const void **keys; /* cap slots, NULL: empty */
    int *vals;         /* cap values */
    size_t cap;        /* power of two, or 0 */
    size_t n;          /* keys held */
} pmap;

static size_t slot_of(const pmap *m, const void *p) {
    uint64_t h = (uint64_t)(uintptr_t)p * 0x9E3779B97F4A7C15ULL;
    size_t i = (size_t)(h >> 32) & (m->cap - 1);
    while (m->keys[i] && m->keys[i] != p) i = (i + 1) & (m->cap - 1);
    return i;
}

static int pmap_get(const pmap *m, const void *p) {
    if (!m->cap) return -1;
    size_t i = slot_of(m, p);
    return m->keys[i] ? m->vals[i] : -1;
}

TC_MUST_USE static tc_status pmap_put(pmap *m, const void *p, int v) {
    if ((m->n + 1) * 2 > m->cap) {
        pmap g = {.cap = m->cap ? m->cap * 2 : 256};
        g.keys = tc_calloc(g.cap, sizeof *g.keys);
        g.vals = g.keys ? tc_malloc(g.cap * sizeof *g.vals) : NULL;
        if (!g.vals) {
            tc_free(g.keys);
            return TC_ERR_MEMORY;
        }
        for (size_t i = 0; i < m->cap; i++) {
            if (!m->keys[i]) continue;
            size_t j = slot_of(&g, m->keys[i]);
            g.keys[j] = m->keys[i];
            g.vals[j] = m->vals[i];
        }
        g.n = m->n;
        tc_free(m->keys);
        tc_free(m->vals);
        *m = g;
    }
    size_t i = slot_of(m, p);
    if (!m->keys[i]) m->n++;
    m->keys[i] = p;
    m->vals[i] = v;
    return TC_OK;
}

static void pmap_free(pmap *m) {
    tc_free(m->keys);
    tc_free(m->vals);
    *m = (pmap){0};
}

/* ---- the key ---- */

struct tc_skey {
    tc_ptrvec bases; /* every base reached, by number: the unrealized ones by node
                        id, then the realized leaves in the order the key first reads them */
    int n_computed;  /* unrealized bases: bases[0..n_computed-1] */
    pmap at;         /* base -> its number (UNNUMBERED: a leaf not read yet) */
    pmap views;      /* view -> its number (in the order the key first reads them) */
    pmap storage;    /* tc_buffer -> number of the first leaf holding it */
    tc_ptrmap held;  /* unrealized bases that nodes outside the graph read (tc_graph_held) */
    uint8_t *bytes;  /* the serialization (owned) */
    size_t len;      /* bytes used */
    size_t cap;      /* bytes allocated */
    bool failed;     /* an allocation failed */
    uint64_t hash;   /* of bytes */
};

enum { UNNUMBERED = -2 }; /* pmap_get's -1 is "absent" */

/* the key's hash, 8 bytes a step (the key of a big graph is megabytes) */
static uint64_t hash_key(const uint8_t *p, size_t n) {
    uint64_t h = 0x5343u ^ (n * 0x9E3779B97F4A7C15ULL), w;
    for (; n >= 8; p += 8, n -= 8) {
        memcpy(&w, p, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdULL;
        h ^= h >> 29;
    }
    w = 0;
    memcpy(&w, p, n);
    return tc_hash_combine(h, w);
}

static void put_u(tc_skey *k, uint64_t v) {
    if (k->len + 10 > k->cap && !k->failed) {
        size_t cap = k->cap ? k->cap * 2 : 4096;
        uint8_t *p = tc_realloc(k->bytes, cap);
        if (p) k->bytes = p, k->cap = cap;
        else k->failed = true;
    }
    if (k->failed) return;
    while (v >= 0x80) {
        k->bytes[k->len++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    k->bytes[k->len++] = (uint8_t)v;
}

static void put_i(tc_skey *k, int64_t v) {
    put_u(k, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63)); /* zigzag: small magnitudes, few bytes */
}

static void put_st(tc_skey *k, const tc_st *st) {
    put_u(k, (uint64_t)st->n_views);
    for (int i = 0; i < st->n_views; i++) {
        const tc_view *v = &st->views[i];
        put_u(k, (uint64_t)v->ndim);
        put_i(k, v->offset);
        put_u(k, v->has_mask);
        for (int d = 0; d < v->ndim; d++) {
            put_i(k, v->shape[d]);
            put_i(k, v->strides[d]);
            if (v->has_mask) put_i(k, v->mask_begin[d]), put_i(k, v->mask_end[d]);
        }
    }
}

/* the number of base b (a leaf gets the next one when first read) */
static uint64_t number_of(tc_skey *k, tc_node *b) {
    int v = pmap_get(&k->at, b);
    if (v != UNNUMBERED) return (uint64_t)v;
    v = k->bases.n;
    if (tc_ptrvec_push(&k->bases, b) != TC_OK || pmap_put(&k->at, b, v) != TC_OK) k->failed = true;
    return (uint64_t)v;
}

/* a source: 3*number for a base, 3*number+1 for a view read before, 2 then
 * the view's tracker and base for a new one */
static void put_src(tc_skey *k, tc_node *src) {
    if (src->op != TC_OP_VIEW) {
        put_u(k, 3 * number_of(k, src));
        return;
    }
    int v = pmap_get(&k->views, src);
    if (v >= 0) {
        put_u(k, 3 * (uint64_t)v + 1);
        return;
    }
    put_u(k, 2);
    put_st(k, src->st);
    put_u(k, number_of(k, src->srcs[0]));
    if (pmap_put(&k->views, src, (int)k->views.n) != TC_OK) k->failed = true;
}

/* base number i: its fields, then its sources or (a leaf) its storage */
static void put_base(tc_skey *k, int i) {
    tc_node *b = k->bases.items[i];
    uint64_t bits;
    memcpy(&bits, &b->value, sizeof bits);
    put_u(k, (uint64_t)b->op);
    put_u(k, (uint64_t)b->dtype);
    put_i(k, b->device);
    put_u(k, (uint64_t)b->ndim);
    for (int d = 0; d < b->ndim; d++) put_i(k, b->shape[d]);
    put_u(k, b->axes);
    put_u(k, bits);
    put_i(k, b->ivalue);
    put_u(k, tc_ptrmap_get(&k->held, b, NULL));
    if (b->op == TC_OP_BUFFER) { /* which earlier leaf is the same storage */
        int first = pmap_get(&k->storage, b->buffer);
        put_u(k, (uint64_t)(first < 0 ? i : first));
        if (first < 0 && pmap_put(&k->storage, b->buffer, i) != TC_OK) k->failed = true;
        return;
    }
    put_u(k, (uint64_t)b->n_srcs);
    for (int s = 0; s < b->n_srcs; s++) put_src(k, b->srcs[s]);
}

TC_MUST_USE static tc_status visit(tc_skey *k, tc_ptrvec *stack, tc_node *src) {
    tc_node *b = tc_node_base(src);
    if (pmap_get(&k->at, b) != -1) return TC_OK;
    if (b->op == TC_OP_BUFFER) return pmap_put(&k->at, b, UNNUMBERED);
    tc_status st = pmap_put(&k->at, b, 0); /* numbered once all are known */
    if (st == TC_OK) st = tc_ptrvec_push(&k->bases, b);
    if (st == TC_OK) st = tc_ptrvec_push(stack, b);
    return st;
}

/* lists every unrealized base under nodes (and marks the realized leaves
 * where the walk stops), each once */
TC_MUST_USE static tc_status collect(tc_skey *k, tc_node *const *nodes, int n) {
    tc_ptrvec stack = {0};
    tc_status st = TC_OK;
    for (int i = 0; i < n && st == TC_OK; i++) st = visit(k, &stack, nodes[i]);
    while (stack.n && st == TC_OK) {
        tc_node *x = stack.items[--stack.n];
        for (int s = 0; s < x->n_srcs && st == TC_OK; s++) st = visit(k, &stack, x->srcs[s]);
    }
    tc_ptrvec_free(&stack);
    return st;
}

static int by_id(const void *a, const void *b) {
    const tc_node *x = *(tc_node *const *)a, *y = *(tc_node *const *)b;
    return x->id < y->id ? -1 : x->id > y->id;
}

void tc_skey_free(tc_skey *k) {
    if (!k) return;
    tc_ptrvec_free(&k->bases);
    pmap_free(&k->at);
    pmap_free(&k->views);
    pmap_free(&k->storage);
    tc_ptrmap_free(&k->held);
    tc_free(k->bytes);
    tc_free(k);
}

/* the serialization: flags, requested bases, unrealized bases, leaves */
static void serialize(tc_skey *k, tc_node *const *nodes, int n) {
    put_u(k, KEY_VERSION);
    put_u(k, (uint64_t)tc_flag_get(TC_FLAG_NOFUSE));
    put_u(k, (uint64_t)tc_flag_get(TC_FLAG_NOOPT));
    put_u(k, (uint64_t)tc_flag_get(TC_FLAG_BEAM));
    put_u(k, (uint64_t)tc_flag_get(TC_FLAG_NOROWS));
    put_u(k, (uint64_t)tc_flag_get(TC_FLAG_KERNEL_OPS));
    put_u(k, (uint64_t)n);
    put_u(k, (uint64_t)k->n_computed);
    for (int i = 0; i < n; i++) put_u(k, number_of(k, tc_node_base(nodes[i])));
    for (int i = 0; i < k->n_computed; i++) put_base(k, i);
    put_u(k, (uint64_t)(k->bases.n - k->n_computed)); /* every leaf is numbered now */
    for (int i = k->n_computed; i < k->bases.n && !k->failed; i++) put_base(k, i);
}

TC_MUST_USE tc_status tc_skey_make(tc_node *const *nodes, int n, tc_skey **out) {
    *out = NULL;
    tc_skey *k = tc_calloc(1, sizeof *k);
    tc_status st = k ? collect(k, nodes, n) : TC_ERR_MEMORY;
    if (st == TC_OK && k->bases.n > 1)
        qsort(k->bases.items, (size_t)k->bases.n, sizeof(void *), by_id);
    for (int i = 0; st == TC_OK && i < k->bases.n; i++) st = pmap_put(&k->at, k->bases.items[i], i);
    if (st == TC_OK) st = tc_graph_held((tc_node *const *)k->bases.items, k->bases.n, &k->held);
    if (st == TC_OK) {
        k->n_computed = k->bases.n;
        serialize(k, nodes, n);
        if (k->failed) st = TC_ERR_MEMORY;
    }
    if (st != TC_OK) {
        tc_skey_free(k);
        return tc_error_or(TC_ERR_MEMORY);
    }
    k->hash = hash_key(k->bytes, k->len);
    *out = k;
    return TC_OK;
}

/* ---- plans ---- */

typedef struct {
    tc_plan *p;     /* the plan being filled */
    pmap asts;      /* schedule AST node -> index in olds/news */
    tc_ptrvec olds; /* the schedule's AST nodes, in copy order */
    tc_ptrvec news; /* their copies in p's arena */
    pmap sts;       /* schedule tracker -> index in p->sts */
} copier;

static void *plan_alloc(tc_plan *p, size_t n) {
    p->bytes += n;
    return tc_arena_alloc(&p->arena, n);
}

/* p's copy of tracker st (one per tracker however often it is read) */
static tc_st *copy_st(copier *c, const tc_st *st) {
    int at = pmap_get(&c->sts, st);
    if (at >= 0) return c->p->sts.items[at];
    tc_st *n = tc_st_copy(st);
    if (n && tc_ptrvec_push(&c->p->sts, n) != TC_OK) {
        tc_st_free(n);
        return NULL;
    }
    if (n && pmap_put(&c->sts, st, c->p->sts.n - 1) != TC_OK) return NULL; /* p owns n */
    if (n) c->p->bytes += sizeof *n + sizeof(tc_view) * (size_t)n->n_views;
    return n;
}

/* a copy of one AST node without its sources; codegen's scratch cleared */
TC_MUST_USE static tc_status copy_node(copier *c, tc_ast *a, tc_ptrvec *stack) {
    tc_ast *n = plan_alloc(c->p, sizeof *n);
    if (!n) return TC_ERR_MEMORY;
    *n = *a;
    n->lowered = NULL;
    n->lowered_epoch = 0;
    n->mark = 0;
    n->srcs = a->n_srcs ? plan_alloc(c->p, sizeof(tc_ast *) * (size_t)a->n_srcs) : NULL;
    if ((a->n_srcs && !n->srcs) || (a->st && !(n->st = copy_st(c, a->st)))) return TC_ERR_MEMORY;
    tc_status st = pmap_put(&c->asts, a, c->olds.n);
    if (st == TC_OK) st = tc_ptrvec_push(&c->olds, a);
    if (st == TC_OK) st = tc_ptrvec_push(&c->news, n);
    for (int i = 0; i < a->n_srcs && st == TC_OK; i++) st = tc_ptrvec_push(stack, a->srcs[i]);
    return st;
}

/* the copy of the DAG under root (with a worklist: kernels can be deep);
 * shared nodes stay shared */
static tc_ast *copy_ast(copier *c, tc_ast *root) {
    int first = c->olds.n;
    tc_ptrvec stack = {0};
    tc_status st = tc_ptrvec_push(&stack, root);
    while (stack.n && st == TC_OK) {
        tc_ast *a = stack.items[--stack.n];
        if (pmap_get(&c->asts, a) < 0) st = copy_node(c, a, &stack);
    }
    tc_ptrvec_free(&stack);
    if (st != TC_OK) return NULL;
    for (int i = first; i < c->olds.n; i++) {
        const tc_ast *a = c->olds.items[i];
        tc_ast *n = c->news.items[i];
        for (int s = 0; s < a->n_srcs; s++)
            n->srcs[s] = c->news.items[pmap_get(&c->asts, a->srcs[s])];
    }
    return c->news.items[pmap_get(&c->asts, root)];
}

/* item i of the plan from the schedule's item it */
TC_MUST_USE static tc_status plan_item(copier *c, const tc_skey *k, const tc_sched_item *it, int i) {
    tc_plan_item *pi = &c->p->items[i];
    pi->it = *it;
    pi->it.bufs = NULL;
    pi->it.ast = NULL;
    pi->device = it->bufs[0]->device;
    pi->slots = plan_alloc(c->p, sizeof(int) * (size_t)(it->n_bufs ? it->n_bufs : 1));
    if (!pi->slots) return TC_ERR_MEMORY;
    for (int j = 0; j < it->n_bufs; j++) {
        int at = pmap_get(&k->at, it->bufs[j]);
        if (at < 0 || at >= k->bases.n)
            return TC_INTERNAL("buffer %d of %s (node %llu) is not a base of the graph", j,
                               it->name, (unsigned long long)it->bufs[j]->id);
        pi->slots[j] = at;
    }
    if (!it->is_copy && !(pi->it.ast = copy_ast(c, it->ast))) return TC_ERR_MEMORY;
    return TC_OK;
}

/* Memory is shared inside a schedule: after item i runs, the schedule lets
 * go of every node no later item reads or writes (an intermediate nothing
 * else holds then goes back to the buffer cache at once, for a later item's
 * output to reuse). The drops are bucketed by item once, in O(buffers). */
TC_MUST_USE static tc_status plan_drops(tc_plan *p, int n_bases) {
    int *last = tc_malloc(sizeof(int) * (size_t)(n_bases ? n_bases : 1)), total = 0;
    p->drop_start = plan_alloc(p, sizeof(int) * (size_t)(p->n_items + 1));
    if (!last || !p->drop_start) {
        tc_free(last);
        return TC_ERR_MEMORY;
    }
    for (int i = 0; i < p->n_items; i++)
        for (int j = 0; j < p->items[i].it.n_bufs; j++) last[p->items[i].slots[j]] = i, total++;
    for (int i = 0; i < p->n_items; i++) /* counts per item, then starts */
        for (int j = 0; j < p->items[i].it.n_bufs; j++)
            p->drop_start[last[p->items[i].slots[j]] + 1]++;
    for (int i = 0; i < p->n_items; i++) p->drop_start[i + 1] += p->drop_start[i];
    p->drops = plan_alloc(p, sizeof(int) * 2 * (size_t)(total ? total : 1));
    int *fill = p->drops ? tc_calloc((size_t)p->n_items + 1, sizeof(int)) : NULL;
    for (int i = 0; fill && i < p->n_items; i++) {
        for (int j = 0; j < p->items[i].it.n_bufs; j++) {
            int at = last[p->items[i].slots[j]], d = p->drop_start[at] + fill[at]++;
            p->drops[2 * d] = i;
            p->drops[2 * d + 1] = j;
        }
    }
    tc_free(last);
    tc_free(fill);
    return fill ? TC_OK : TC_ERR_MEMORY;
}

void tc_plan_free(tc_plan *p) {
    if (!p) return;
    for (int i = 0; i < p->n_items; i++) tc_free(p->items[i].low.src);
    for (int i = 0; i < p->sts.n; i++) tc_st_free(p->sts.items[i]);
    tc_ptrvec_free(&p->sts);
    tc_arena_free(&p->arena);
    tc_free(p);
}

tc_plan *tc_plan_make(const tc_schedule *s, const tc_skey *k) {
    tc_plan *p = tc_calloc(1, sizeof *p);
    if (!p) return NULL;
    p->bytes = sizeof *p;
    p->items = plan_alloc(p, sizeof *p->items * (size_t)(s->n_items ? s->n_items : 1));
    tc_status st = p->items ? TC_OK : TC_ERR_MEMORY;
    copier c = {.p = p};
    for (int i = 0; i < s->n_items && st == TC_OK; i++) {
        st = plan_item(&c, k, &s->items[i], i);
        if (st == TC_OK) p->n_items++;
    }
    pmap_free(&c.asts);
    pmap_free(&c.sts);
    tc_ptrvec_free(&c.olds);
    tc_ptrvec_free(&c.news);
    if (st == TC_OK) st = plan_drops(p, k->bases.n);
    if (st == TC_OK) return p;
    tc_plan_free(p);
    return NULL;
}

tc_schedule *tc_plan_schedule(const tc_plan *p, const tc_skey *k) {
    tc_schedule *s = tc_calloc(1, sizeof *s);
    if (!s) return NULL;
    s->items = tc_arena_alloc(&s->arena, sizeof *s->items * (size_t)(p->n_items ? p->n_items : 1));
    for (int i = 0; s->items && i < p->n_items; i++) {
        const tc_plan_item *pi = &p->items[i];
        tc_sched_item *it = &s->items[i];
        *it = pi->it;
        it->bufs =
            tc_arena_alloc(&s->arena, sizeof(tc_node *) * (size_t)(it->n_bufs ? it->n_bufs : 1));
        if (!it->bufs) break;
        for (int j = 0; j < it->n_bufs; j++)
            it->bufs[j] = tc_node_retain(k->bases.items[pi->slots[j]]);
        s->n_items++;
    }
    if (s->n_items == p->n_items) return s;
    tc_schedule_free(s); /* releases what the items made so far hold */
    return NULL;
}

/* ---- the cache ---- */

typedef struct entry {
    struct entry *next; /* chain */
    uint64_t hash;      /* of key */
    uint8_t *key;       /* the key's bytes (owned) */
    size_t key_len;     /* their number */
    size_t bytes;       /* memory it holds: key, plan, this struct */
    tc_plan *plan;      /* owned */
    uint64_t last_use;  /* `uses` at its last hit or insert */
} entry;

static entry *buckets[BUCKETS];       /* guarded by the API lock */
static int n_entries;                 /* plans held */
static size_t n_bytes;                /* memory held by them */
static uint64_t uses;                 /* hits and inserts so far: the LRU clock */
static int max_entries = MAX_ENTRIES; /* the bounds in force (tc_scache_limit) */
static size_t max_bytes = MAX_BYTES;

static void entry_free(entry *e) {
    n_entries--;
    n_bytes -= e->bytes;
    tc_plan_free(e->plan);
    tc_free(e->key);
    tc_free(e);
}

static void unlink_entry(entry *e) {
    entry **p = &buckets[e->hash % BUCKETS];
    while (*p != e) p = &(*p)->next;
    *p = e->next;
    entry_free(e);
}

/* were p's lowering and programs made for the devices open now? */
static bool is_current(const tc_plan *p) {
    for (int i = 0; i < p->n_items; i++) {
        const tc_plan_item *pi = &p->items[i];
        if (pi->it.is_copy) continue;
        tc_error_state es;
        tc_error_save(&es);
        tc_dev *d = tc_device_get(pi->device);
        if (!d || d->serial != pi->dev_serial) {
            tc_error_restore(&es); /* a closed device is not this realize's error */
            return false;
        }
    }
    return true;
}

tc_plan *tc_scache_find(const tc_skey *k) {
    for (entry *e = buckets[k->hash % BUCKETS]; e; e = e->next) {
        if (e->hash != k->hash || e->key_len != k->len || memcmp(e->key, k->bytes, k->len) != 0)
            continue;
        if (!is_current(e->plan)) {
            unlink_entry(e);
            return NULL;
        }
        e->last_use = ++uses;
        return e->plan;
    }
    return NULL;
}

static void evict_oldest(void) {
    entry *old = NULL;
    for (int i = 0; i < BUCKETS; i++)
        for (entry *e = buckets[i]; e; e = e->next)
            if (!old || e->last_use < old->last_use) old = e;
    if (old) unlink_entry(old);
}

void tc_scache_insert(tc_skey *k, tc_plan *p) {
    for (int i = 0; i < p->n_items; i++)
        if (p->items[i].low.src) p->bytes += strlen(p->items[i].low.src) + 1;
    size_t bytes = p->bytes + k->len + sizeof(entry);
    tc_error_state es;
    tc_error_save(&es);
    entry *e = bytes <= max_bytes ? tc_malloc(sizeof *e) : NULL;
    if (!e) { /* too big to keep, or no memory: a later realize schedules again */
        tc_error_restore(&es);
        tc_plan_free(p);
        return;
    }
    while (n_entries && (n_entries >= max_entries || n_bytes + bytes > max_bytes)) evict_oldest();
    *e = (entry){buckets[k->hash % BUCKETS], k->hash, k->bytes, k->len, bytes, p, ++uses};
    k->bytes = NULL; /* the entry owns the key's bytes now */
    k->len = k->cap = 0;
    buckets[e->hash % BUCKETS] = e;
    n_entries++;
    n_bytes += bytes;
}

void tc_scache_clear(void) {
    for (int i = 0; i < BUCKETS; i++) {
        for (entry *e = buckets[i], *next; e; e = next) {
            next = e->next;
            entry_free(e);
        }
        buckets[i] = NULL;
    }
    uses = 0;
}

void tc_scache_limit(int entries, size_t bytes) {
    max_entries = entries > 0 ? entries : MAX_ENTRIES;
    max_bytes = bytes > 0 ? bytes : MAX_BYTES;
    while (n_entries && (n_entries > max_entries || n_bytes > max_bytes)) evict_oldest();
}

int tc_scache_size(void) {
    return n_entries;
}
