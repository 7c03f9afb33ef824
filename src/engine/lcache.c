/* lcache.c - the lowering cache: a kernel item already lowered in this
 * process is not lowered again. An eager training step schedules the same
 * kernels every step; codegen + render of its large unrolled kernels cost
 * tens of milliseconds a step that this skips (the device's own program
 * cache then finds the source).
 *
 * The key is an exact serialization of what lowering reads: the device, the
 * optimizer's plan, TC_NOOPT, the loop space, and the AST in pre-order (each
 * node's op, dtype, buffer slot, constant, reduced axes and every view of its
 * tracker; a node reached again is written as a back reference, so shared
 * subtrees stay linear). Lookups hash the key and compare it byte for byte:
 * a collision cannot return another kernel. The cache holds at most
 * MAX_ENTRIES entries and is emptied when full and at shutdown.
 */
#include "engine.h"

#include <string.h>

enum { BUCKETS = 1024, MAX_ENTRIES = 4096 };

typedef struct entry {
    struct entry *next; /* chain */
    uint64_t hash;
    char *key;          /* the serialization (owned) */
    size_t key_len;
    tc_lowered val;     /* src owned */
} entry;

static entry *buckets[BUCKETS]; /* guarded by the API lock */
static int n_entries;

typedef struct {
    tc_strbuf b;
    tc_ptrmap seen; /* nodes written so far -> their number + 1 */
    int n_seen;
} ser;

static void put_i64(ser *s, int64_t v) {
    tc_sb_append(&s->b, &v, sizeof v);
}

static void put_st(ser *s, const tc_st *st) {
    put_i64(s, st->n_views);
    for (int i = 0; i < st->n_views; i++) {
        const tc_view *v = &st->views[i];
        put_i64(s, v->ndim);
        put_i64(s, v->offset);
        put_i64(s, v->has_mask);
        for (int d = 0; d < v->ndim; d++) {
            put_i64(s, v->shape[d]);
            put_i64(s, v->strides[d]);
            if (v->has_mask) put_i64(s, v->mask_begin[d]), put_i64(s, v->mask_end[d]);
        }
    }
}

static void put_ast(ser *s, const tc_ast *a) {
    void *at = NULL;
    if (tc_ptrmap_get(&s->seen, a, &at)) { /* a back reference: -number */
        put_i64(s, -(int64_t)(intptr_t)at);
        return;
    }
    if (!tc_ptrmap_put(&s->seen, a, (void *)(intptr_t)++s->n_seen)) return; /* failed: no key */
    int64_t head[9] = {a->op, a->dtype, a->n_srcs, a->buf, 0, a->ivalue, a->axes, a->index_stride,
                       a->index_size};
    memcpy(&head[4], &a->value, sizeof a->value); /* the exact bits (-0.0, NaN payloads) */
    tc_sb_append(&s->b, head, sizeof head);
    put_i64(s, a->st != NULL);
    if (a->st) put_st(s, a->st);
    for (int i = 0; i < a->n_srcs && !s->seen.failed; i++) put_ast(s, a->srcs[i]);
}

/* the key of item it lowered on dev with plan; false when it cannot be made
 * (no memory): the caller lowers without the cache. O(AST nodes) */
static bool make_key(ser *s, const tc_dev *dev, const tc_sched_item *it, const tc_kopt *plan) {
    memset(s, 0, sizeof *s);
    tc_sb_printf(&s->b, "dev %d noopt %lld plan", dev->id, (long long)tc_flag_get(TC_FLAG_NOOPT));
    for (int i = 0; i < plan->n; i++) tc_sb_printf(&s->b, " %d:%lld", plan->axis[i], (long long)plan->amt[i]);
    tc_sb_printf(&s->b, " lanes %d kblock %lld epi %d pack %d %d mblock %lld", plan->lanes,
                 (long long)plan->kblock, plan->epi_loop, plan->pack, plan->row_pack, (long long)plan->mblock);
    tc_sb_printf(&s->b, " space %d %u %d %d:", it->ndim, (unsigned)it->reduce_axes, it->n_outs, it->n_bufs);
    for (int d = 0; d < it->ndim; d++) put_i64(s, it->full_shape[d]);
    for (int i = 0; i < it->n_bufs; i++) put_i64(s, it->bufs[i]->dtype);
    put_ast(s, it->ast);
    tc_sb_printf(&s->b, "%s", it->name);
    bool failed = s->b.failed || s->seen.failed;
    tc_ptrmap_free(&s->seen);
    if (failed) {
        tc_sb_free(&s->b);
        return false;
    }
    return true;
}

static entry *find(const ser *s, uint64_t h) {
    for (entry *e = buckets[h % BUCKETS]; e; e = e->next)
        if (e->hash == h && e->key_len == s->b.len && !memcmp(e->key, s->b.s, s->b.len)) return e;
    return NULL;
}

int tc_lcache_size(void) {
    return n_entries;
}

void tc_lcache_clear(void) {
    for (int i = 0; i < BUCKETS; i++) {
        for (entry *e = buckets[i], *next; e; e = next) {
            next = e->next;
            tc_free(e->key);
            tc_free(e->val.src);
            tc_free(e);
        }
        buckets[i] = NULL;
    }
    n_entries = 0;
}

TC_MUST_USE tc_status tc_lcache_lower(tc_dev *dev, const tc_sched_item *it, const tc_kopt *plan, tc_lowered *out) {
    memset(out, 0, sizeof *out);
    ser *s = tc_malloc(sizeof *s);
    bool keyed = s && make_key(s, dev, it, plan);
    uint64_t h = keyed ? tc_hash_bytes(s->b.s, s->b.len, 0x4c43) : 0;
    entry *e = keyed ? find(s, h) : NULL;
    if (e) {
        *out = e->val;
        out->codegen_s = out->render_s = 0; /* nothing was lowered this time */
        out->src = tc_strdup(e->val.src);
        tc_sb_free(&s->b);
        tc_free(s);
        return out->src ? TC_OK : TC_ERR_MEMORY;
    }
    double t0 = tc_time_now();
    tc_kernel_uops *k = tc_codegen_plan(it, &dev->target, plan);
    double t1 = tc_time_now();
    char *src = k ? tc_render(dev->dialect, k) : NULL;
    double t2 = tc_time_now();
    tc_status st = src ? TC_OK : tc_error_or(TC_ERR_MEMORY);
    if (src) {
        *out = (tc_lowered){.src = src, .dims = {.cpu_range = k->cpu_range}, .est_ops = k->est_ops,
                            .est_mem = k->est_mem, .codegen_s = t1 - t0, .render_s = t2 - t1};
        memcpy(out->dims.global, k->global_size, sizeof out->dims.global);
        memcpy(out->dims.local, k->local_size, sizeof out->dims.local);
        snprintf(out->name, sizeof out->name, "%s", k->name);
        if (tc_flag_get(TC_FLAG_DEBUG) >= 5) tc_uops_dump(stderr, k);
    }
    tc_kernel_uops_free(k);
    if (src && keyed) { /* keep a copy; a failure to keep it only costs a later lowering */
        if (n_entries >= MAX_ENTRIES) tc_lcache_clear();
        entry *n = tc_malloc(sizeof *n);
        char *copy = n ? tc_strdup(src) : NULL;
        if (copy) {
            *n = (entry){buckets[h % BUCKETS], h, s->b.s, s->b.len, *out};
            n->val.src = copy;
            buckets[h % BUCKETS] = n;
            n_entries++;
            s->b.s = NULL; /* the entry owns the key now */
        } else {
            tc_free(n);
        }
    }
    if (keyed) tc_sb_free(&s->b);
    tc_free(s);
    return st;
}
