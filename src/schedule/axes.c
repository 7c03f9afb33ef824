/* axes.c - the scheduler's last step: each kernel's loop space with its
 * adjacent axes merged wherever every view indexes them as one (tinygrad's
 * merge of adjacent dimensions). Axes i and i+1 merge when both are kept or
 * both reduced (by the item and by every reduce in it) and every tracker's
 * last view steps along i by exactly the span of i+1 (stride[i] ==
 * stride[i+1] * shape[i+1], which holds for any broadcast too) with no mask
 * cutting either: index i * n + j then addresses what (i, j) did. A mask on
 * i alone would merge too, but its gate then falls inside a row and the
 * row's vector lanes go scalar (a padded input's rows on a GPU). Earlier views
 * re-split the flat offset the last one makes, so only the last one changes.
 *
 * Why: a matmul over (B, T, C) activations is a loop space (B, T, N, K) whose
 * rows are T alone; merged, (B*T, N, K), its register tile's rows, its
 * packed panels and its threads run over all B*T rows (GPT-2's logits:
 * 4 x 64 rows repacked per batch row, 10 GFLOP/s; 256 rows, one panel).
 * Fewer loops also mean fewer index computations in every kernel.
 *
 * Before merging, an axis that a tracker reads through two views is split
 * where that makes it one view (split_once): merged attention heads, (B, H,
 * T, d) permuted and reshaped to (B, T, H * d), are read in a matmul over
 * H * d through an index divided and taken modulo d, one scalar at a time
 * (GPT-2's c_proj: 1.4 GFLOP/s); split into (H, d) the read is strided and
 * the register tiles and vector loads apply again (about 50 GFLOP/s on a
 * Zen 4 core). Where no single split drops the view, the loop space is
 * split into the first view's whole shape when that makes it one view
 * (split_to_view: a permuted buffer read flat, 7 -> 1.8 ms for 1M
 * elements). A split is a reshape of the loop space: every tracker is
 * reshaped the same way, so it holds for a gather's index too (its index
 * stride counts buffer elements, not loop axes).
 *
 * Left alone: row kernels (their parts share the row axes), scatters,
 * indexed stores, copies; kernels with a gather are split but not merged.
 *
 * Input: the ordered items; output: the same items, kernels with split and
 * merged loop spaces and new trackers (owned by the schedule, like the
 * others), renamed by their new shapes. Cost: O(AST nodes x TC_MAX_DIMS)
 * per item for the merges; for the splits, per tracker of two or more
 * views, axes x divisors trial reshapes of the item's trackers, and one
 * more for split_to_view (none in a kernel whose views are all single).
 */
#include "internal.h"

#include <string.h>

typedef struct {
    tc_ptrmap seen;   /* AST nodes visited */
    tc_ptrmap st_set; /* trackers met */
    tc_ptrvec sts;    /* the distinct trackers of the item's loads, stores and consts */
    tc_ptrvec users;  /* the AST nodes with a tracker */
    tc_ptrvec reds;   /* its REDUCE nodes */
    bool has_index;   /* a GATHER or SCATTER: left alone */
    bool failed;      /* out of memory */
} item_walk;

/* the item's nodes under a: depth-first over a DAG of at most a kernel's
 * size (the builder's recursion bounds its depth the same way) */
static void walk(item_walk *w, tc_ast *a) {
    if (!tc_ptrset_add(&w->seen, a)) return;
    if (a->op == TC_OP_GATHER || a->op == TC_OP_SCATTER || a->op == TC_OP_PUT) w->has_index = true;
    if (tc_op_is_reduce(a->op)) w->failed |= tc_ptrvec_push(&w->reds, a) != TC_OK;
    if (a->st) {
        w->failed |= tc_ptrvec_push(&w->users, a) != TC_OK;
        if (tc_ptrset_add(&w->st_set, a->st)) w->failed |= tc_ptrvec_push(&w->sts, a->st) != TC_OK;
    }
    for (int i = 0; i < a->n_srcs; i++) walk(w, a->srcs[i]);
}

static bool bit(uint32_t mask, int a) {
    return (mask >> a) & 1;
}

/* view v's mask cuts axis a */
static bool masked(const tc_view *v, int a) {
    return v->mask_begin[a] != 0 || v->mask_end[a] != v->shape[a];
}

/* axes a and a + 1 of the item may be one axis (see the charter) */
static bool mergeable(const tc_sched_item *it, const item_walk *w, int a) {
    if (bit(it->reduce_axes, a) != bit(it->reduce_axes, a + 1)) return false;
    for (int i = 0; i < w->reds.n; i++) {
        const tc_ast *r = w->reds.items[i];
        if (bit(r->axes, a) != bit(r->axes, a + 1)) return false;
    }
    for (int i = 0; i < w->sts.n; i++) {
        const tc_st *st = w->sts.items[i];
        const tc_view *v = &st->views[st->n_views - 1];
        if (v->ndim != it->ndim) return false;
        if (v->strides[a] != v->strides[a + 1] * v->shape[a + 1]) return false;
        if (v->has_mask && (masked(v, a) || masked(v, a + 1))) return false;
    }
    return true;
}

/* mask m without bit a + 1: the bits above it one lower */
static uint32_t drop_bit(uint32_t m, int a) {
    uint32_t low = m & ((1u << (a + 1)) - 1), high = m >> (a + 2);
    return low | (high << (a + 1));
}

/* mask m with bit a doubled: the bits above a one higher */
static uint32_t split_bit(uint32_t m, int a) {
    uint32_t low = m & ((1u << (a + 1)) - 1), high = m >> (a + 1);
    return low | (high << (a + 2)) | (bit(m, a) ? 1u << (a + 1) : 0u);
}

/* view v with axes a and a + 1 as one */
static void merge_view(tc_view *v, int a) {
    int64_t n = v->shape[a + 1];
    v->shape[a] *= n;
    v->strides[a] = v->strides[a + 1];
    if (v->has_mask) {
        v->mask_begin[a] *= n;
        v->mask_end[a] *= n;
    }
    for (int d = a + 1; d + 1 < v->ndim; d++) {
        v->shape[d] = v->shape[d + 1];
        v->strides[d] = v->strides[d + 1];
        v->mask_begin[d] = v->mask_begin[d + 1];
        v->mask_end[d] = v->mask_end[d + 1];
    }
    v->ndim--;
}

/* the item's nodes read through the trackers copies maps old to new, and
 * its reduces' axes renumbered by remap (a merge or a split at axis a) */
static void retrack(item_walk *w, const tc_ptrmap *copies, uint32_t (*remap)(uint32_t, int), int a) {
    for (int i = 0; i < w->users.n; i++) {
        tc_ast *n = w->users.items[i];
        void *st = NULL;
        if (tc_ptrmap_get(copies, n->st, &st)) n->st = st;
    }
    for (int i = 0; i < w->reds.n; i++) {
        tc_ast *r = w->reds.items[i];
        r->axes = remap(r->axes, a);
    }
}

/* the item with axes a and a + 1 as one: its trackers replaced by merged
 * copies (owned by the schedule), its reduces' axes, its loop space */
TC_MUST_USE static tc_status merge_axis(tc_sched_ctx *c, tc_sched_item *it, item_walk *w, tc_ptrmap *copies,
                                        int a) {
    tc_ptrmap_clear(copies);
    for (int i = 0; i < w->sts.n; i++) {
        tc_st *st = tc_st_copy(w->sts.items[i]);
        if (!st || tc_ptrvec_push(&c->s->sts, st) != TC_OK) {
            tc_st_free(st);
            return TC_ERR_MEMORY;
        }
        merge_view(&st->views[st->n_views - 1], a);
        if (!tc_ptrmap_put(copies, w->sts.items[i], st)) return TC_ERR_MEMORY;
        w->sts.items[i] = st;
    }
    retrack(w, copies, drop_bit, a);
    it->full_shape[a] *= it->full_shape[a + 1];
    memmove(&it->full_shape[a + 1], &it->full_shape[a + 2], sizeof(int64_t) * (size_t)(it->ndim - a - 2));
    it->reduce_axes = drop_bit(it->reduce_axes, a);
    it->ndim--;
    return TC_OK;
}

/* ---- splits ---- */


/* shape (of ndim axes) with axis a as (n / q, q), or as (1, 1) where it is
 * 1 (a store's reduced axis) */
static void split_shape(int ndim, const int64_t *from, int a, int64_t q, int64_t *shape) {
    memcpy(shape, from, sizeof(int64_t) * (size_t)a);
    shape[a] = from[a] == 1 ? 1 : from[a] / q;
    shape[a + 1] = from[a] == 1 ? 1 : q;
    memcpy(&shape[a + 2], &from[a + 1], sizeof(int64_t) * (size_t)(ndim - a - 1));
}

enum { MAX_DIVISORS = 64 }; /* divisors up to sqrt(n) a split tries (n = 50304: 16) */

/* the divisors of n strictly between 1 and n, smallest first (at most
 * 2 * MAX_DIVISORS); O(sqrt(n)) */
static int divisors(int64_t n, int64_t *out) {
    int64_t lo[MAX_DIVISORS], hi[MAX_DIVISORS];
    int n_lo = 0, n_hi = 0;
    for (int64_t d = 2; d * d <= n && n_lo < MAX_DIVISORS; d++) {
        if (n % d) continue;
        lo[n_lo++] = d;
        if (d * d != n) hi[n_hi++] = n / d;
    }
    int k = 0;
    for (int i = 0; i < n_lo; i++) out[k++] = lo[i];
    for (int i = n_hi - 1; i >= 0; i--) out[k++] = hi[i];
    return k;
}

/* would splitting axis a into (n / q, q) let tracker `at` drop a view while
 * no tracker gains one? trial gets every tracker so reshaped (NULL where
 * that failed or was not tried); the caller frees or keeps them */
static bool split_helps(const tc_sched_item *it, const item_walk *w, int a, int64_t q, int at,
                        tc_st **trial) {
    bool ok = true;
    for (int i = 0; i < w->sts.n && ok; i++) {
        const tc_st *st = w->sts.items[i];
        int64_t shape[TC_MAX_DIMS];
        const int64_t *from = tc_st_shape(st);
        ok = tc_st_ndim(st) == it->ndim && (from[a] == 1 || from[a] == it->full_shape[a]);
        if (ok) split_shape(it->ndim, from, a, q, shape);
        trial[i] = ok ? tc_st_reshape(st, it->ndim + 1, shape) : NULL;
        ok = trial[i] && trial[i]->n_views <= st->n_views &&
             (i != at || trial[i]->n_views < st->n_views);
    }
    return ok;
}

/* the item's trackers replaced by trial (now owned by the schedule; on
 * failure the rest freed), copies mapping old to new */
TC_MUST_USE static tc_status adopt_trials(tc_sched_ctx *c, item_walk *w, tc_ptrmap *copies,
                                          tc_st **trial) {
    tc_ptrmap_clear(copies);
    tc_status st = TC_OK;
    for (int i = 0; i < w->sts.n; i++) {
        if (st == TC_OK && tc_ptrvec_push(&c->s->sts, trial[i]) != TC_OK) st = TC_ERR_MEMORY;
        if (st != TC_OK) {
            tc_st_free(trial[i]);
            continue;
        }
        if (!tc_ptrmap_put(copies, w->sts.items[i], trial[i])) st = TC_ERR_MEMORY;
        w->sts.items[i] = trial[i];
    }
    return st;
}

/* the item with axis a split: its trackers replaced by trial (split_helps's),
 * its reduces' axes, its loop space */
TC_MUST_USE static tc_status apply_split(tc_sched_ctx *c, tc_sched_item *it, item_walk *w,
                                         tc_ptrmap *copies, int a, int64_t q, tc_st **trial) {
    tc_status st = adopt_trials(c, w, copies, trial);
    if (st != TC_OK) return st;
    retrack(w, copies, split_bit, a);
    int64_t shape[TC_MAX_DIMS];
    split_shape(it->ndim, it->full_shape, a, q, shape);
    memcpy(it->full_shape, shape, sizeof(int64_t) * (size_t)(it->ndim + 1));
    it->reduce_axes = split_bit(it->reduce_axes, a);
    it->ndim++;
    return TC_OK;
}

/* Splits one axis where a tracker reads it through two views that one view
 * indexes once the axis is split: a matmul reading merged attention heads,
 * (B, H, T, d) permuted and reshaped to (B, T, H * d), reduces over H * d
 * through an index divided and taken modulo d; split into (H, d) it is a
 * strided load again (one view), which register tiles and vector loads
 * need. Tries the multi-view trackers' axes, innermost first, and the
 * divisors q of each, smallest first. *split: it split one. Cost: per
 * multi-view tracker, axes x (sqrt(n) + divisors x the item's trackers'
 * trial reshapes). */
TC_MUST_USE static tc_status split_once(tc_sched_ctx *c, tc_sched_item *it, item_walk *w,
                                        tc_ptrmap *copies, bool *split) {
    *split = false;
    if (it->ndim >= TC_MAX_DIMS) return TC_OK;
    tc_st **trial = tc_calloc((size_t)w->sts.n + 1, sizeof *trial);
    if (!trial) return TC_ERR_MEMORY;
    tc_status st = TC_OK;
    for (int at = 0; at < w->sts.n && !*split && st == TC_OK; at++) {
        const tc_st *t = w->sts.items[at];
        if (t->n_views < 2 || tc_st_ndim(t) != it->ndim) continue;
        for (int a = it->ndim - 1; a >= 0 && !*split && st == TC_OK; a--) {
            int64_t qs[2 * MAX_DIVISORS];
            int n_q = divisors(it->full_shape[a], qs);
            for (int i = 0; i < n_q && !*split && st == TC_OK; i++) {
                int64_t q = qs[i];
                memset(trial, 0, sizeof *trial * (size_t)w->sts.n);
                if (split_helps(it, w, a, q, at, trial)) {
                    *split = true;
                    st = apply_split(c, it, w, copies, a, q, trial);
                } else
                    for (int k = 0; k < w->sts.n; k++) tc_st_free(trial[k]);
            }
        }
    }
    tc_free(trial);
    return st;
}

static uint32_t keep_bits(uint32_t m, int a) {
    (void)a;
    return m;
}

/* Splits the loop space into the first view's shape of a tracker whose
 * second view only reshapes it (contiguous): a sum of two strided convs'
 * dx, each its phases interleaved by a permute then reshaped, ran over a
 * flat loop of 1,048,576 with six divisions and modulos per element (7
 * ms); split as the permute's (16, 64, 16, 2, 16, 2), each load is one
 * strided view. split_once cannot get there: no single split drops the
 * view. Every tracker is reshaped the same way (broadcast axes to ones)
 * and the split is kept only if that tracker drops its view and none
 * gains one. *split: it split. Cost: per two-view tracker, O(TC_MAX_DIMS)
 * plus one trial reshape of each of the item's trackers. */
TC_MUST_USE static tc_status split_to_view(tc_sched_ctx *c, tc_sched_item *it, item_walk *w,
                                           tc_ptrmap *copies, bool *split) {
    *split = false;
    tc_st **trial = tc_calloc((size_t)w->sts.n + 1, sizeof *trial);
    if (!trial) return TC_ERR_MEMORY;
    tc_status st = TC_OK;
    for (int at = 0; at < w->sts.n && !*split && st == TC_OK; at++) {
        const tc_st *t = w->sts.items[at];
        if (t->n_views != 2 || !t->views[1].is_contiguous || tc_st_ndim(t) != it->ndim) continue;
        /* group the first view's dims (size-1 ones left out) by loop axis */
        const tc_view *v = &t->views[0];
        int64_t dims[TC_MAX_DIMS];
        int group[TC_MAX_DIMS], n_dims = 0, d = 0;
        bool ok = true;
        for (int a = 0; a < it->ndim && ok; a++) {
            int64_t prod = 1;
            group[a] = 0;
            while (prod < it->full_shape[a] && d < v->ndim) {
                if (v->shape[d] > 1) prod *= v->shape[d], dims[n_dims++] = v->shape[d], group[a]++;
                d++;
            }
            if (group[a] == 0) dims[n_dims++] = it->full_shape[a], group[a] = 1; /* a 1 axis */
            ok = prod == it->full_shape[a] || (group[a] == 1 && it->full_shape[a] == 1);
        }
        while (ok && d < v->ndim) ok = v->shape[d++] == 1;
        if (!ok || n_dims == it->ndim || n_dims > TC_MAX_DIMS) continue;
        for (int i = 0; i < w->sts.n && ok; i++) { /* every tracker reshaped alike */
            const tc_st *si = w->sts.items[i];
            const int64_t *from = tc_st_shape(si);
            int64_t shape[TC_MAX_DIMS];
            ok = tc_st_ndim(si) == it->ndim;
            for (int a = 0, k = 0; a < it->ndim && ok; a++) {
                ok = from[a] == 1 || from[a] == it->full_shape[a];
                for (int g = 0; g < group[a]; g++, k++) shape[k] = from[a] == 1 ? 1 : dims[k];
            }
            trial[i] = ok ? tc_st_reshape(si, n_dims, shape) : NULL;
            ok = trial[i] && trial[i]->n_views <= si->n_views && (i != at || trial[i]->n_views < 2);
        }
        if (!ok) {
            for (int i = 0; i < w->sts.n; i++) tc_st_free(trial[i]), trial[i] = NULL;
            continue;
        }
        *split = true;
        st = adopt_trials(c, w, copies, trial);
        if (st != TC_OK) break;
        retrack(w, copies, keep_bits, 0);
        for (int a = it->ndim - 1; a >= 0; a--) /* a group of g dims: bit a doubled g - 1 times */
            for (int g = 1; g < group[a]; g++) {
                it->reduce_axes = split_bit(it->reduce_axes, a);
                for (int r = 0; r < w->reds.n; r++) {
                    tc_ast *red = w->reds.items[r];
                    red->axes = split_bit(red->axes, a);
                }
            }
        memcpy(it->full_shape, dims, sizeof(int64_t) * (size_t)n_dims);
        it->ndim = n_dims;
    }
    tc_free(trial);
    return st;
}

/* ---- the pass ---- */

/* merges the adjacent axes of one kernel item, innermost pairs first, after
 * splitting the axes that a two-view tracker needs split */
TC_MUST_USE static tc_status merge_item(tc_sched_ctx *c, tc_sched_item *it) {
    item_walk w = {0};
    tc_ptrmap copies = {0};
    walk(&w, it->ast);
    tc_status st = w.failed || w.seen.failed || w.st_set.failed ? TC_ERR_MEMORY : TC_OK;
    bool changed = false;
    for (bool split = true; split && st == TC_OK;) {
        st = split_once(c, it, &w, &copies, &split);
        if (st == TC_OK && !split && !w.has_index) st = split_to_view(c, it, &w, &copies, &split);
        changed |= split;
    }
    for (int a = it->ndim - 2; a >= 0 && st == TC_OK && !w.has_index; a--) {
        if (!mergeable(it, &w, a)) continue;
        st = merge_axis(c, it, &w, &copies, a);
        changed = true;
    }
    if (st == TC_OK && changed) tc_name_kernel(it);
    tc_ptrmap_free(&w.seen), tc_ptrmap_free(&w.st_set), tc_ptrmap_free(&copies);
    tc_ptrvec_free(&w.sts), tc_ptrvec_free(&w.users), tc_ptrvec_free(&w.reds);
    return st == TC_OK && copies.failed ? TC_ERR_MEMORY : st;
}

TC_MUST_USE tc_status tc_merge_axes(tc_sched_ctx *c) {
    for (int i = 0; i < c->s->n_items; i++) {
        tc_sched_item *it = &c->s->items[i];
        if (it->is_copy || it->is_scatter || it->is_put || it->has_parts || !it->ast) continue;
        tc_status st = merge_item(c, it);
        if (st != TC_OK) return st;
    }
    return TC_OK;
}
