/* test_view.c - views and shape trackers (src/graph/view.c).
 *
 * The main check is a naive model: a tensor is an explicit dense array of
 * base offsets (-1 where an element is padding), and each movement op is an
 * explicit gather. Thousands of random chains of movement ops (fixed seeds)
 * run on both, and tc_st_index must agree with the model at every index.
 * The model also says when one view could express the result, which gives
 * the merge rate printed at the end. Exact tests pin the cases tinygrad's
 * reference table lists, canonical forms, compose, hashing and OOM.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "graph/graph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- random numbers (xorshift64, fixed seeds) ---------------------------- */
typedef struct {
    uint64_t s;
} rng;
static uint64_t rnext(rng *r) {
    r->s ^= r->s << 13;
    r->s ^= r->s >> 7;
    r->s ^= r->s << 17;
    return r->s;
}
static int64_t rnd(rng *r, int64_t n) { /* uniform in [0, n), n > 0 */
    return (int64_t)(rnext(r) % (uint64_t)n);
}

/* ---- movement ops, described as data --------------------------------------- */
typedef enum { MOP_RESHAPE, MOP_PERMUTE, MOP_EXPAND, MOP_PAD, MOP_SHRINK, MOP_FLIP } mop_kind;
typedef struct {
    mop_kind kind;                  /* which movement */
    int ndim;                       /* rank after the op */
    int64_t shape[TC_MAX_DIMS];     /* shape after the op */
    int order[TC_MAX_DIMS];         /* PERMUTE: new dim i = old dim order[i] */
    int64_t pairs[2 * TC_MAX_DIMS]; /* PAD before/after, SHRINK begin/end */
    bool axes[TC_MAX_DIMS];         /* FLIP: flipped dims */
} mop;

static const char *mop_names[] = {"reshape", "permute", "expand", "pad", "shrink", "flip"};

static void print_shape(int n, const int64_t *s) {
    fprintf(stderr, "(");
    for (int d = 0; d < n; d++) fprintf(stderr, "%s%lld", d ? "," : "", (long long)s[d]);
    fprintf(stderr, ")");
}

static void mop_print(const mop *op) {
    fprintf(stderr, "  %s -> ", mop_names[op->kind]);
    print_shape(op->ndim, op->shape);
    if (op->kind == MOP_PERMUTE || op->kind == MOP_PAD || op->kind == MOP_SHRINK ||
        op->kind == MOP_FLIP) {
        fprintf(stderr, " arg");
        for (int d = 0; d < op->ndim; d++) {
            if (op->kind == MOP_PERMUTE) fprintf(stderr, " %d", op->order[d]);
            if (op->kind == MOP_FLIP) fprintf(stderr, " %d", op->axes[d]);
            if (op->kind == MOP_PAD || op->kind == MOP_SHRINK)
                fprintf(stderr, " (%lld,%lld)", (long long)op->pairs[2 * d],
                        (long long)op->pairs[2 * d + 1]);
        }
    }
    fprintf(stderr, "\n");
}

static tc_st *st_apply(const tc_st *st, const mop *op) {
    switch (op->kind) {
    case MOP_RESHAPE: return tc_st_reshape(st, op->ndim, op->shape);
    case MOP_PERMUTE: return tc_st_permute(st, op->order);
    case MOP_EXPAND: return tc_st_expand(st, op->shape);
    case MOP_PAD: return tc_st_pad(st, op->pairs);
    case MOP_SHRINK: return tc_st_shrink(st, op->pairs);
    case MOP_FLIP: return tc_st_flip(st, op->axes);
    }
    return NULL;
}

/* ---- the naive model ------------------------------------------------------- */
typedef struct {
    int ndim;                   /* rank */
    int64_t shape[TC_MAX_DIMS]; /* shape */
    int64_t n;                  /* numel */
    int64_t *off;               /* n base offsets, -1 for an invalid element (malloc) */
} model;

static int64_t numel_of(int n, const int64_t *s) {
    int64_t r = 1;
    for (int d = 0; d < n; d++) r *= s[d];
    return r;
}

static void unravel(int n, const int64_t *s, int64_t i, int64_t *idx) {
    for (int d = n - 1; d >= 0; d--) {
        idx[d] = i % s[d];
        i /= s[d];
    }
}

static int64_t ravel(int n, const int64_t *s, const int64_t *idx) {
    int64_t i = 0;
    for (int d = 0; d < n; d++) i = i * s[d] + idx[d];
    return i;
}

static model model_new(int ndim, const int64_t *shape) {
    model m = {.ndim = ndim, .n = numel_of(ndim, shape)};
    memcpy(m.shape, shape, ndim * sizeof *shape);
    m.off = malloc((size_t)(m.n ? m.n : 1) * sizeof *m.off);
    for (int64_t i = 0; i < m.n; i++) m.off[i] = i;
    return m;
}

/* the old index that new index idx reads, or false when it reads padding */
static bool mop_source(const model *m, const mop *op, const int64_t *idx, int64_t *old) {
    for (int d = 0; d < m->ndim; d++) {
        switch (op->kind) {
        case MOP_RESHAPE: break;
        case MOP_PERMUTE: old[op->order[d]] = idx[d]; break;
        case MOP_EXPAND: old[d] = m->shape[d] == 1 ? 0 : idx[d]; break;
        case MOP_PAD:
            old[d] = idx[d] - op->pairs[2 * d];
            if (old[d] < 0 || old[d] >= m->shape[d]) return false;
            break;
        case MOP_SHRINK: old[d] = idx[d] + op->pairs[2 * d]; break;
        case MOP_FLIP: old[d] = op->axes[d] ? m->shape[d] - 1 - idx[d] : idx[d]; break;
        }
    }
    return true;
}

static model model_apply(const model *m, const mop *op) {
    model r = model_new(op->ndim, op->shape);
    int64_t idx[TC_MAX_DIMS], old[TC_MAX_DIMS];
    for (int64_t i = 0; i < r.n; i++) {
        if (op->kind == MOP_RESHAPE) {
            r.off[i] = m->off[i];
            continue;
        }
        unravel(r.ndim, r.shape, i, idx);
        r.off[i] = mop_source(m, op, idx, old) ? m->off[ravel(m->ndim, m->shape, old)] : -1;
    }
    return r;
}

/* outer's offsets index inner's elements: the model of inner then outer */
static model model_compose(const model *inner, const model *outer) {
    model r = model_new(outer->ndim, outer->shape);
    for (int64_t i = 0; i < r.n; i++) r.off[i] = outer->off[i] < 0 ? -1 : inner->off[outer->off[i]];
    return r;
}

/* true when one view could map like m: the valid elements form a box and
 * their offsets are affine in the index */
static bool model_one_view(const model *m) {
    int64_t lo[TC_MAX_DIMS], hi[TC_MAX_DIMS], idx[TC_MAX_DIMS], nvalid = 0;
    for (int d = 0; d < m->ndim; d++) lo[d] = INT64_MAX, hi[d] = -1;
    for (int64_t i = 0; i < m->n; i++) {
        if (m->off[i] < 0) continue;
        nvalid++;
        unravel(m->ndim, m->shape, i, idx);
        for (int d = 0; d < m->ndim; d++) {
            if (idx[d] < lo[d]) lo[d] = idx[d];
            if (idx[d] > hi[d]) hi[d] = idx[d];
        }
    }
    if (nvalid == 0) return m->ndim > 0 || m->n == 0;
    int64_t box = 1, st[TC_MAX_DIMS], base = m->off[ravel(m->ndim, m->shape, lo)];
    for (int d = 0; d < m->ndim; d++) box *= hi[d] - lo[d] + 1;
    if (box != nvalid) return false;
    for (int d = 0; d < m->ndim; d++) {
        memcpy(idx, lo, sizeof idx);
        idx[d] += hi[d] > lo[d];
        st[d] = m->off[ravel(m->ndim, m->shape, idx)] - base;
    }
    for (int64_t i = 0; i < m->n; i++) {
        if (m->off[i] < 0) continue;
        unravel(m->ndim, m->shape, i, idx);
        int64_t want = base;
        for (int d = 0; d < m->ndim; d++) want += (idx[d] - lo[d]) * st[d];
        if (m->off[i] != want) return false;
    }
    return true;
}

/* ---- checks ------------------------------------------------------------------ */

/* the canonical-form rules every view of every tracker must follow */
static bool st_canonical(const tc_st *st) {
    if (st->n_views < 1 || (tc_st_numel(st) == 0 && st->n_views != 1)) return false;
    for (int i = 0; i < st->n_views; i++) {
        const tc_view *v = &st->views[i];
        int64_t acc = 1;
        bool rowmajor = true, full = true;
        for (int d = v->ndim - 1; d >= 0; d--) {
            if (v->shape[d] == 1 && v->strides[d] != 0) return false;
            if (v->strides[d] != (v->shape[d] == 1 ? 0 : acc)) rowmajor = false;
            acc *= v->shape[d];
            if (v->has_mask && (v->mask_begin[d] != 0 || v->mask_end[d] != v->shape[d]))
                full = false;
            if (v->has_mask && v->mask_end[d] - v->mask_begin[d] == 1 && v->strides[d] != 0)
                return false;
        }
        if (v->has_mask && full) return false;
        if (v->is_contiguous != (rowmajor && !v->has_mask && v->offset == 0)) return false;
    }
    return true;
}

/* compares st with m at every index; prints the chain and the tracker on a mismatch */
static bool check(const tc_st *st, const model *m, const mop *chain, int n_ops, const char *what) {
    int64_t idx[TC_MAX_DIMS];
    bool ok = tc_st_ndim(st) == m->ndim && st_canonical(st) &&
              !memcmp(tc_st_shape(st), m->shape, m->ndim * sizeof(int64_t));
    int64_t bad = -1;
    for (int64_t i = 0; ok && i < m->n; i++) {
        bool valid;
        unravel(m->ndim, m->shape, i, idx);
        int64_t off = tc_st_index(st, idx, &valid);
        if (valid != (m->off[i] >= 0) || (valid && off != m->off[i])) ok = false, bad = i;
    }
    if (ok) return true;
    fprintf(stderr, "%s: mismatch at flat index %lld (want %lld)\nchain:\n", what, (long long)bad,
            bad >= 0 ? (long long)m->off[bad] : 0LL);
    for (int k = 0; k < n_ops; k++) mop_print(&chain[k]);
    tc_st_dump(stderr, st);
    return false;
}

/* ---- random chains ---------------------------------------------------------- */
#define MAX_NUMEL 1200
#define MAX_RANK  6

/* a random shape with numel n (n >= 0), rank 0..MAX_RANK */
static int random_factorization(rng *r, int64_t n, int64_t *shape) {
    int k = (int)rnd(r, MAX_RANK) + 1;
    if (n == 1 && rnd(r, 4) == 0) return 0;
    for (int d = 0; d < k; d++) shape[d] = 1;
    if (n == 0) {
        for (int d = 0; d < k; d++) shape[d] = rnd(r, 3) + 1;
        shape[rnd(r, k)] = 0;
        return k;
    }
    for (int64_t p = 2; n > 1; p++) {
        while (n % p == 0) {
            shape[rnd(r, k)] *= p;
            n /= p;
        }
    }
    return k;
}

/* a random reshape target for the shape in op (in place); hist holds earlier shapes */
static void random_reshape(rng *r, mop *op, const model *hist, int n_hist) {
    int n = op->ndim, d = n ? (int)rnd(r, n) : 0;
    int64_t *s = op->shape, numel = numel_of(n, s);
    switch (rnd(r, 7)) {
    case 0: /* merge two neighbours */
        if (n < 2 || d == n - 1) break;
        s[d] *= s[d + 1];
        memmove(s + d + 1, s + d + 2, (n - d - 2) * sizeof *s);
        op->ndim--;
        return;
    case 1: /* split one dim into (f, size/f) */
    case 2:
        if (n == 0 || n >= MAX_RANK) break;
        for (int64_t f = rnd(r, s[d] + 1); f >= 1; f--) {
            if (s[d] % f) continue;
            memmove(s + d + 1, s + d, (n - d) * sizeof *s);
            s[d] = f;
            s[d + 1] /= f;
            op->ndim++;
            return;
        }
        break;
    case 3: /* insert or remove a 1 */
        if (n < MAX_RANK && rnd(r, 2)) {
            d = (int)rnd(r, n + 1);
            memmove(s + d + 1, s + d, (n - d) * sizeof *s);
            s[d] = 1;
            op->ndim++;
            return;
        }
        for (int k = 0; k < n; k++) {
            if (s[k] != 1) continue;
            memmove(s + k, s + k + 1, (n - k - 1) * sizeof *s);
            op->ndim--;
            return;
        }
        break;
    case 4: /* back to an earlier shape */
        for (int t = 0; t < 4 && n_hist > 0; t++) {
            const model *h = &hist[rnd(r, n_hist)];
            if (h->n != numel) continue;
            op->ndim = h->ndim;
            memcpy(s, h->shape, sizeof h->shape);
            return;
        }
        break;
    case 5: /* flatten */
        if (n == 0) break;
        op->ndim = 1;
        s[0] = numel;
        return;
    default: break;
    }
    op->ndim = random_factorization(r, numel, s);
}

/* one random movement op for the shape of m */
static void random_mop(rng *r, const model *m, const model *hist, int n_hist, mop *op) {
    int n = m->ndim;
    memset(op, 0, sizeof *op);
    op->ndim = n;
    memcpy(op->shape, m->shape, sizeof m->shape);
    op->kind = (mop_kind)rnd(r, 6);
    if (op->kind == MOP_RESHAPE || n == 0) {
        op->kind = MOP_RESHAPE;
        random_reshape(r, op, hist, n_hist);
        return;
    }
    int64_t numel = m->n;
    for (int d = 0; d < n; d++) {
        int64_t s = m->shape[d], rest = s ? numel / s : 0;
        switch (op->kind) {
        case MOP_PERMUTE: op->order[d] = d; break;
        case MOP_EXPAND:
            if (s == 1 && rnd(r, 2)) op->shape[d] = rnd(r, 4) + 1;
            if (rest * op->shape[d] > MAX_NUMEL) op->shape[d] = 1;
            break;
        case MOP_PAD:
            op->pairs[2 * d] = rnd(r, 3) ? 0 : rnd(r, 3);
            op->pairs[2 * d + 1] = rnd(r, 3) ? 0 : rnd(r, 3);
            if (rest * (s + op->pairs[2 * d] + op->pairs[2 * d + 1]) > MAX_NUMEL)
                op->pairs[2 * d] = op->pairs[2 * d + 1] = 0;
            op->shape[d] = s + op->pairs[2 * d] + op->pairs[2 * d + 1];
            break;
        case MOP_SHRINK: {
            int64_t b = rnd(r, 2) ? 0 : rnd(r, s + 1), e = rnd(r, 2) ? s : b + rnd(r, s - b + 1);
            if (e == b && s > 0 && rnd(r, 8)) e = s, b = 0; /* mostly not empty */
            op->pairs[2 * d] = b;
            op->pairs[2 * d + 1] = e;
            op->shape[d] = e - b;
            break;
        }
        case MOP_FLIP: op->axes[d] = rnd(r, 2); break;
        case MOP_RESHAPE: break;
        }
        numel = numel_of(n, op->shape);
    }
    for (int d = n - 1; op->kind == MOP_PERMUTE && d > 0; d--) {
        int k = (int)rnd(r, d + 1), t = op->order[d];
        op->order[d] = op->order[k];
        op->order[k] = t;
    }
    for (int d = 0; op->kind == MOP_PERMUTE && d < n; d++) op->shape[d] = m->shape[op->order[d]];
}

static void random_base(rng *r, int *ndim, int64_t *shape) {
    *ndim = (int)rnd(r, 5);
    for (int d = 0; d < *ndim; d++) shape[d] = rnd(r, 5) + 1;
    if (rnd(r, 40) == 0 && *ndim > 0) shape[rnd(r, *ndim)] = 0;
}

typedef struct {
    int64_t steps;      /* ops applied */
    int64_t one_view;   /* results one view could express */
    int64_t missed;     /* ... which the tracker kept as several views */
    int64_t multi_view; /* results with several views */
} chain_stats;

#define MAX_CHAIN 10

/* runs a random chain of n_ops from a contiguous array of start's shape (a
 * random shape when start is NULL); returns the tracker and its model (both
 * owned by the caller); false on a mismatch */
static bool run_chain(rng *r, int n_ops, const model *start, tc_st **out_st, model *out_m,
                      chain_stats *cs) {
    int ndim;
    int64_t shape[TC_MAX_DIMS];
    if (start) {
        ndim = start->ndim;
        memcpy(shape, start->shape, sizeof shape);
    } else {
        random_base(r, &ndim, shape);
    }
    model hist[MAX_CHAIN + 1];
    mop chain[MAX_CHAIN];
    hist[0] = model_new(ndim, shape);
    tc_st *st = tc_st_from_shape(ndim, shape);
    bool ok = st != NULL;
    int k = 0;
    for (; ok && k < n_ops; k++) {
        random_mop(r, &hist[k], hist, k + 1, &chain[k]);
        tc_st *next = st_apply(st, &chain[k]);
        tc_st_free(st);
        st = next;
        hist[k + 1] = model_apply(&hist[k], &chain[k]);
        ok = st && check(st, &hist[k + 1], chain, k + 1, "chain");
        bool one = model_one_view(&hist[k + 1]);
        cs->steps++;
        cs->one_view += one;
        cs->missed += ok && one && st->n_views > 1;
        cs->multi_view += ok && st->n_views > 1;
    }
    for (int i = 0; i < k; i++) free(hist[i].off);
    *out_st = st;
    *out_m = hist[k];
    return ok;
}

static void report(const char *what, const chain_stats *cs) {
    printf("%s: %lld steps, %lld with several views; %lld of %lld one-view-expressible results "
           "kept as several views\n",
           what, (long long)cs->steps, (long long)cs->multi_view, (long long)cs->missed,
           (long long)cs->one_view);
}

static void test_random_chains(void **state) {
    (void)state;
    chain_stats cs = {0};
    for (uint64_t seed = 1; seed <= 8000; seed++) {
        rng r = {seed * 0x9E3779B97F4A7C15ULL};
        tc_st *st;
        model m;
        bool ok = run_chain(&r, (int)rnd(&r, MAX_CHAIN) + 1, NULL, &st, &m, &cs);
        if (!ok) fprintf(stderr, "seed %llu\n", (unsigned long long)seed);
        assert_true(ok);
        tc_st *c = tc_st_copy(st);
        assert_true(tc_st_equal(st, c) && tc_st_hash(st) == tc_st_hash(c));
        tc_st_free(c);
        tc_st_free(st);
        free(m.off);
    }
    report("random chains", &cs);
    /* a loose floor on the merge rate; printed numbers are the real measure */
    assert_true(cs.missed * 100 < cs.one_view);
}

/* two random chains, the second from a contiguous array of the first's
 * shape: compose must map like the first's model seen through the second's */
static void test_random_compose(void **state) {
    (void)state;
    chain_stats cs = {0}, cc = {0};
    for (uint64_t seed = 1; seed <= 4000; seed++) {
        rng r = {seed * 0xD1B54A32D192ED03ULL};
        tc_st *a, *b;
        model ma, mb;
        assert_true(run_chain(&r, (int)rnd(&r, 6) + 1, NULL, &a, &ma, &cs));
        assert_true(run_chain(&r, (int)rnd(&r, 6) + 1, &ma, &b, &mb, &cs));
        tc_st *c = tc_st_compose(a, b);
        model mc = model_compose(&ma, &mb);
        bool ok = c && check(c, &mc, NULL, 0, "compose");
        if (!ok) {
            fprintf(stderr, "seed %llu; inner: ", (unsigned long long)seed);
            tc_st_dump(stderr, a);
            fprintf(stderr, "outer: ");
            tc_st_dump(stderr, b);
        }
        assert_true(ok);
        bool one = model_one_view(&mc);
        cc.steps++;
        cc.one_view += one;
        cc.missed += one && c->n_views > 1;
        cc.multi_view += c->n_views > 1;
        tc_st_free(a);
        tc_st_free(b);
        tc_st_free(c);
        free(ma.off);
        free(mb.off);
        free(mc.off);
    }
    report("compose", &cc);
    assert_true(cc.missed * 100 < cc.one_view);
}

/* ---- exact cases ------------------------------------------------------------ */
static const int64_t S4[] = {4}, S44[] = {4, 4};
static const int PERM10[] = {1, 0};

static void assert_view(const tc_view *v, int ndim, const int64_t *shape, const int64_t *strides,
                        int64_t offset) {
    assert_int_equal(v->ndim, ndim);
    for (int d = 0; d < ndim; d++) {
        assert_int_equal(v->shape[d], shape[d]);
        assert_int_equal(v->strides[d], strides[d]);
    }
    assert_int_equal(v->offset, offset);
}

/* applies op to *st, freeing the old tracker */
static void step(tc_st **st, tc_st *next) {
    assert_non_null(next);
    tc_st_free(*st);
    *st = next;
}

static void test_table_permute_reshape(void **state) {
    (void)state;
    tc_st *st = tc_st_from_shape(2, S44);
    step(&st, tc_st_permute(st, PERM10));
    assert_int_equal(st->n_views, 1);
    assert_view(&st->views[0], 2, S44, (int64_t[]){1, 4}, 0);
    /* merging permuted dims cannot be one view */
    tc_st *flat = tc_st_reshape(st, 1, (int64_t[]){16});
    assert_int_equal(flat->n_views, 2);
    assert_view(&flat->views[0], 2, S44, (int64_t[]){1, 4}, 0);
    assert_true(flat->views[1].is_contiguous);
    /* reshaping back merges the two views again */
    tc_st *back = tc_st_reshape(flat, 2, S44);
    assert_int_equal(back->n_views, 1);
    assert_true(tc_st_equal(back, st));
    /* splitting a permuted dim is one view */
    tc_st *split = tc_st_reshape(st, 3, (int64_t[]){2, 2, 4});
    assert_int_equal(split->n_views, 1);
    assert_view(&split->views[0], 3, (int64_t[]){2, 2, 4}, (int64_t[]){2, 1, 4}, 0);
    tc_st_free(split);
    tc_st_free(back);
    tc_st_free(flat);
    tc_st_free(st);
}

static void test_table_expand(void **state) {
    (void)state;
    tc_st *st = tc_st_from_shape(1, S4);
    step(&st, tc_st_reshape(st, 2, (int64_t[]){4, 1}));
    step(&st, tc_st_expand(st, (int64_t[]){4, 3}));
    assert_int_equal(st->n_views, 1);
    assert_view(&st->views[0], 2, (int64_t[]){4, 3}, (int64_t[]){1, 0}, 0);
    tc_st *flat = tc_st_reshape(st, 1, (int64_t[]){12});
    assert_int_equal(flat->n_views, 2); /* an expand cannot be flattened */
    tc_st_free(flat);
    /* expanded dims split into expanded dims */
    step(&st, tc_st_reshape(st, 3, (int64_t[]){4, 1, 3}));
    step(&st, tc_st_expand(st, (int64_t[]){4, 2, 3}));
    step(&st, tc_st_reshape(st, 2, (int64_t[]){4, 6}));
    assert_int_equal(st->n_views, 1);
    assert_view(&st->views[0], 2, (int64_t[]){4, 6}, (int64_t[]){1, 0}, 0);
    step(&st, tc_st_reshape(st, 4, (int64_t[]){2, 2, 3, 2}));
    assert_int_equal(st->n_views, 1);
    assert_view(&st->views[0], 4, (int64_t[]){2, 2, 3, 2}, (int64_t[]){2, 1, 0, 0}, 0);
    tc_st_free(st);
}

static void test_table_pad_shrink(void **state) {
    (void)state;
    tc_st *st = tc_st_from_shape(1, S4);
    tc_st *p = tc_st_pad(st, (int64_t[]){1, 1});
    assert_int_equal(p->n_views, 1);
    assert_view(&p->views[0], 1, (int64_t[]){6}, (int64_t[]){1}, -1);
    assert_true(p->views[0].has_mask);
    assert_int_equal(p->views[0].mask_begin[0], 1);
    assert_int_equal(p->views[0].mask_end[0], 5);
    tc_st *r = tc_st_reshape(p, 2, (int64_t[]){3, 2});
    assert_int_equal(r->n_views, 2); /* the mask does not split */
    tc_st *s = tc_st_shrink(p, (int64_t[]){1, 5});
    assert_true(tc_st_is_contiguous(s)); /* pad then shrink back */
    tc_st_free(r);
    tc_st_free(s);
    /* shrink then pad: one view, mask (1,4), offset 0 */
    s = tc_st_shrink(st, (int64_t[]){1, 4});
    step(&s, tc_st_pad(s, (int64_t[]){1, 0}));
    assert_int_equal(s->n_views, 1);
    assert_view(&s->views[0], 1, S4, (int64_t[]){1}, 0);
    assert_int_equal(s->views[0].mask_begin[0], 1);
    assert_int_equal(s->views[0].mask_end[0], 4);
    assert_false(tc_st_is_contiguous(s));
    tc_st_free(s);
    tc_st_free(p);
    tc_st_free(st);

    st = tc_st_from_shape(2, S44);
    p = tc_st_pad(st, (int64_t[]){0, 0, 1, 1});
    r = tc_st_reshape(p, 1, (int64_t[]){24});
    assert_int_equal(r->n_views, 2);
    s = tc_st_shrink(st, (int64_t[]){0, 4, 1, 3});
    assert_view(&s->views[0], 2, (int64_t[]){4, 2}, (int64_t[]){4, 1}, 1);
    tc_st *f = tc_st_reshape(s, 1, (int64_t[]){8});
    assert_int_equal(f->n_views, 2);
    tc_st_free(f);
    tc_st_free(s);
    tc_st_free(r);
    tc_st_free(p);
    tc_st_free(st);
}

static void test_canonical_masks(void **state) {
    (void)state;
    tc_st *st = tc_st_from_shape(1, S4);
    /* a mask keeping one index: stride 0, start folded into the offset */
    tc_st *one = tc_st_pad(st, (int64_t[]){1, 1});
    step(&one, tc_st_shrink(one, (int64_t[]){0, 2}));
    assert_view(&one->views[0], 1, (int64_t[]){2}, (int64_t[]){0}, 0);
    assert_int_equal(one->views[0].mask_begin[0], 1);
    /* an empty mask: the all-invalid view */
    tc_st *none = tc_st_pad(st, (int64_t[]){2, 0});
    step(&none, tc_st_shrink(none, (int64_t[]){0, 2}));
    assert_view(&none->views[0], 1, (int64_t[]){2}, (int64_t[]){0}, 0);
    assert_true(none->views[0].has_mask);
    assert_int_equal(none->views[0].mask_end[0], 0);
    bool valid = true;
    tc_st_index(none, (int64_t[]){1}, &valid);
    assert_false(valid);
    /* flip: negative stride, offset at the end, mask mirrored */
    tc_st *fl = tc_st_pad(st, (int64_t[]){1, 0});
    step(&fl, tc_st_flip(fl, (bool[]){true}));
    assert_view(&fl->views[0], 1, (int64_t[]){5}, (int64_t[]){-1}, 3);
    assert_int_equal(fl->views[0].mask_begin[0], 0);
    assert_int_equal(fl->views[0].mask_end[0], 4);
    /* expand a masked size-1 dim: mask (0,1) grows to (0,new) */
    tc_st *ex = tc_st_from_shape(2, (int64_t[]){3, 1});
    step(&ex, tc_st_pad(ex, (int64_t[]){1, 0, 0, 0}));
    step(&ex, tc_st_expand(ex, (int64_t[]){4, 5}));
    assert_view(&ex->views[0], 2, (int64_t[]){4, 5}, (int64_t[]){1, 0}, -1);
    assert_int_equal(ex->views[0].mask_begin[0], 1);
    assert_int_equal(ex->views[0].mask_end[1], 5);
    tc_st_free(ex);
    tc_st_free(fl);
    tc_st_free(none);
    tc_st_free(one);
    tc_st_free(st);
}

static void test_zero_and_scalar_shapes(void **state) {
    (void)state;
    tc_st *st = tc_st_from_shape(2, (int64_t[]){3, 4});
    tc_st *z = tc_st_shrink(st, (int64_t[]){1, 1, 0, 4});
    assert_int_equal(tc_st_numel(z), 0);
    assert_true(tc_st_is_contiguous(z));
    step(&z, tc_st_reshape(z, 3, (int64_t[]){4, 0, 2}));
    step(&z, tc_st_pad(z, (int64_t[]){0, 0, 1, 1, 0, 0}));
    assert_int_equal(tc_st_numel(z), 16);
    bool valid = true;
    tc_st_index(z, (int64_t[]){3, 1, 1}, &valid);
    assert_false(valid); /* padding around nothing */
    tc_st_free(z);
    /* rank 0 */
    tc_st *s0 = tc_st_from_shape(0, NULL);
    assert_true(tc_st_is_contiguous(s0) && tc_st_numel(s0) == 1);
    step(&s0, tc_st_reshape(s0, 2, (int64_t[]){1, 1}));
    step(&s0, tc_st_expand(s0, (int64_t[]){3, 1}));
    assert_view(&s0->views[0], 2, (int64_t[]){3, 1}, (int64_t[]){0, 0}, 0);
    tc_st_free(s0);
    /* an invalid 1-element view reshaped to rank 0 needs a second view */
    tc_st *inv = tc_st_from_shape(1, (int64_t[]){1});
    step(&inv, tc_st_pad(inv, (int64_t[]){1, 0}));
    step(&inv, tc_st_shrink(inv, (int64_t[]){0, 1}));
    step(&inv, tc_st_reshape(inv, 0, NULL));
    assert_int_equal(inv->n_views, 2);
    valid = true;
    tc_st_index(inv, NULL, &valid);
    assert_false(valid);
    tc_st_free(inv);
    tc_st_free(st);
}

static void test_compose_cases(void **state) {
    (void)state;
    tc_st *c44 = tc_st_from_shape(2, S44), *c16 = tc_st_from_shape(1, (int64_t[]){16});
    tc_st *perm = tc_st_permute(c44, PERM10);
    /* contiguous inner: the result is outer */
    tc_st *r = tc_st_compose(c44, perm);
    assert_true(tc_st_equal(r, perm));
    tc_st_free(r);
    /* contiguous outer of the same shape: the result is inner */
    r = tc_st_compose(perm, c44);
    assert_true(tc_st_equal(r, perm));
    tc_st_free(r);
    /* two transposes cancel */
    r = tc_st_compose(perm, perm);
    assert_true(tc_st_is_contiguous(r));
    tc_st_free(r);
    /* a transposed buffer read flat stays two views */
    tc_st *flat = tc_st_reshape(c44, 1, (int64_t[]){16});
    r = tc_st_compose(perm, flat);
    assert_int_equal(r->n_views, 2);
    tc_st_free(r);
    /* pad inside, shrink outside: back to contiguous */
    tc_st *pad = tc_st_pad(c16, (int64_t[]){2, 3});
    tc_st *shr = tc_st_from_shape(1, (int64_t[]){21});
    step(&shr, tc_st_shrink(shr, (int64_t[]){2, 18}));
    r = tc_st_compose(pad, shr);
    assert_true(tc_st_is_contiguous(r));
    tc_st_free(r);
    /* a strided read of a padded buffer keeps the mask, projected */
    tc_st *ev = tc_st_from_shape(1, (int64_t[]){21});
    step(&ev, tc_st_reshape(ev, 2, (int64_t[]){7, 3}));
    step(&ev, tc_st_shrink(ev, (int64_t[]){0, 7, 0, 1}));
    r = tc_st_compose(pad, ev);
    assert_int_equal(r->n_views, 1);
    assert_view(&r->views[0], 2, (int64_t[]){7, 1}, (int64_t[]){3, 0}, -2);
    assert_int_equal(r->views[0].mask_begin[0], 1);
    assert_int_equal(r->views[0].mask_end[0], 6);
    tc_st_free(r);
    tc_st_free(ev);
    tc_st_free(shr);
    tc_st_free(pad);
    tc_st_free(flat);
    tc_st_free(perm);
    tc_st_free(c16);
    tc_st_free(c44);
}

static void test_hash_equal_dump(void **state) {
    (void)state;
    tc_st *a = tc_st_from_shape(2, S44), *b = tc_st_from_shape(2, S44);
    assert_true(tc_st_equal(a, b) && tc_st_hash(a) == tc_st_hash(b));
    tc_st *p = tc_st_pad(a, (int64_t[]){0, 0, 1, 0});
    assert_false(tc_st_equal(a, p));
    assert_true(tc_st_hash(a) != tc_st_hash(p));
    tc_st *q = tc_st_permute(a, PERM10);
    assert_false(tc_st_equal(a, q));
    tc_st *f = tc_st_reshape(q, 1, (int64_t[]){16});
    char *text = NULL;
    size_t len = 0;
    FILE *mf = open_memstream(&text, &len);
    tc_st_dump(mf, f);
    fclose(mf);
    assert_non_null(strstr(text, "strides=(1,4)"));
    assert_non_null(strstr(text, "contiguous"));
    assert_ptr_equal(strchr(text, '\n'), text + len - 1); /* one line */
    free(text);
    tc_st_free(f);
    tc_st_free(q);
    tc_st_free(p);
    tc_st_free(b);
    tc_st_free(a);
}

/* each allocation failing in turn: NULL with TC_ERR_MEMORY, inputs untouched */
static void test_out_of_memory(void **state) {
    (void)state;
    tc_st *st = tc_st_from_shape(2, S44), *copy = tc_st_copy(st);
    tc_mem_fail_after(1);
    assert_null(tc_st_reshape(st, 1, (int64_t[]){16}));
    assert_int_equal(tc_error_code(), TC_ERR_MEMORY);
    tc_mem_fail_after(1);
    assert_null(tc_st_compose(st, st));
    tc_mem_fail_after(1);
    assert_null(tc_st_permute(st, PERM10));
    tc_mem_fail_after(0);
    assert_true(tc_st_equal(st, copy));
    tc_error_clear();
    tc_st_free(copy);
    tc_st_free(st);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_permute_reshape),  cmocka_unit_test(test_table_expand),
        cmocka_unit_test(test_table_pad_shrink),       cmocka_unit_test(test_canonical_masks),
        cmocka_unit_test(test_zero_and_scalar_shapes), cmocka_unit_test(test_compose_cases),
        cmocka_unit_test(test_hash_equal_dump),        cmocka_unit_test(test_out_of_memory),
        cmocka_unit_test(test_random_chains),          cmocka_unit_test(test_random_compose),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
