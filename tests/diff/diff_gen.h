/* diff_gen.h - the random graph generator and checker of test_diff.c (see
 * the comment there). Included by test_diff.c only: the build makes one
 * executable per tests/<stage>/test_*.c, so the generator lives in a header
 * of static functions rather than a second translation unit.
 *
 * Values live in a per-case pool (gen.pool, owned tensors). Every v_*
 * builder takes pool indices (borrowed), builds the op through tinyc.h,
 * pushes the result with its facts (interval, error bound, exactness) and a
 * line of the expression log, and returns its index: -1 when an API call
 * failed (the case has failed and says why), -2 when the op is refused
 * because its safety guard does not hold (the caller tries something else).
 */
#ifndef DIFF_GEN_H
#define DIFF_GEN_H

#include "tc_test.h"

#include "tensor/tensor.h" /* tc_tensor_node; engine.h: tc_ref_eval; graph.h: tc_node_dump */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define POOL_MAX  96    /* values a case may create */
#define NUMEL_MAX 4096  /* largest tensor a case builds */
#define NDIM_MAX  6     /* highest rank a case builds */
#define LOG_MAX   12000 /* bytes of expression log */

typedef enum {
    FAM_ELEMENTWISE, /* float32 chains of every elementwise function, broadcasting */
    FAM_MOVEMENT,    /* movement ops on leaves and intermediates, midway realizes */
    FAM_REDUCE,      /* reductions with random axes, softmax-like patterns, long axes */
    FAM_INT,         /* int32/int64/uint8/bool: idiv, mod, logical ops, casts */
    FAM_HALF,        /* float16 through casts */
    FAM_EDGE,        /* 0-size, 1-element and 0-d shapes */
    FAM_MIXED,       /* everything, large shapes, TC_NOOPT and TC_NOFUSE cases */
    FAM_COMPOSITE,   /* composites (matmul, conv2d, softmax, ...), gradients, tc_assign */
    FAM_COUNT
} family;
static const char *const fam_names[FAM_COUNT] = {
    "elementwise", "movement", "reduce", "int_bool", "half", "edge_shapes", "mixed", "composite"};

/* what one generator step does */
typedef enum {
    ST_LEAF,      /* a new leaf of the case's shape or a broadcasting one */
    ST_UNARY,     /* a unary float function */
    ST_BINARY,    /* add sub mul div maximum minimum pow */
    ST_COMPARE,   /* a comparison, then where, a cast or a logical op on it */
    ST_MOVE,      /* a movement op */
    ST_REDUCE,    /* sum max min mean var std */
    ST_INT,       /* an integer or bool op */
    ST_CAST,      /* a cast to a random dtype */
    ST_PATTERN,   /* softmax, logsumexp, x - mean, normalise, argmax mask, x * sum */
    ST_HALF,      /* a few float16 ops */
    ST_REALIZE,   /* realize an intermediate now and check it */
    ST_COMPOSITE, /* a composite op (compop) */
    ST_GRAD,      /* gradients of a random loss of two fresh leaves (tc_backward) */
    ST_ASSIGN,    /* an in-place update of a fresh leaf (tc_assign) */
    ST_COUNT
} stepkind;
typedef enum { LF_DATA, LF_FULL, LF_ARANGE, LF_RAND, LF_EYE, LF_COUNT } leafkind; /* tc_<name> */
/* the public unary functions: tc_neg, tc_exp, ... */
typedef enum {
    UN_NEG,     /* tc_neg */
    UN_EXP,     /* tc_exp */
    UN_LOG,     /* tc_log (argument abs(x)+0.1 unless >= 0.1) */
    UN_EXP2,    /* tc_exp2 */
    UN_LOG2,    /* tc_log2 (likewise) */
    UN_SQRT,    /* tc_sqrt (likewise) */
    UN_SIN,     /* tc_sin */
    UN_COS,     /* tc_cos */
    UN_RELU,    /* tc_relu */
    UN_SIGMOID, /* tc_sigmoid */
    UN_TANH,    /* tc_tanh */
    UN_RECIP,   /* tc_recip (argument abs(x)+0.5 unless >= 0.5) */
    UN_ABS,     /* tc_abs */
    UN_SQUARE,  /* tc_square */
    UN_COUNT
} unop;
typedef enum { BI_ADD, BI_SUB, BI_MUL, BI_DIV, BI_MAX, BI_MIN, BI_POW, BI_COUNT } binop; /* tc_* */
typedef enum { CMP_LT, CMP_GT, CMP_LE, CMP_GE, CMP_EQ, CMP_NE, CMP_COUNT } cmpop;        /* tc_* */
/* integer and bool ops; NOT, NEG and ABS are unary */
typedef enum {
    IO_ADD,  /* tc_add (wraps for uint8, or for bool) */
    IO_SUB,  /* tc_sub */
    IO_MUL,  /* tc_mul (and for bool) */
    IO_IDIV, /* tc_idiv by max(abs(b), 1), sometimes negated */
    IO_MOD,  /* tc_mod, the same divisor */
    IO_MAX,  /* tc_maximum */
    IO_MIN,  /* tc_minimum */
    IO_AND,  /* tc_logical_and */
    IO_OR,   /* tc_logical_or */
    IO_XOR,  /* tc_logical_xor */
    IO_NOT,  /* tc_logical_not */
    IO_NEG,  /* tc_neg of int32/int64 */
    IO_ABS,  /* tc_abs of int32/int64 */
    IO_COUNT
} intop;
typedef enum {
    MV_PERMUTE,    /* tc_permute, a random order */
    MV_TRANSPOSE,  /* tc_transpose, two random axes */
    MV_RESHAPE,    /* tc_reshape to a random factorisation, sometimes with -1 */
    MV_EXPAND,     /* tc_expand of size-1 dims, or a new leading dim */
    MV_PAD,        /* tc_pad by 0..2 per side */
    MV_SHRINK,     /* tc_shrink to a random sub-box (empty ones in FAM_EDGE) */
    MV_FLIP,       /* tc_flip of random axes */
    MV_CONTIGUOUS, /* tc_contiguous */
    MV_COUNT
} moveop;
typedef enum { RD_SUM, RD_MAX, RD_MIN, RD_MEAN, RD_VAR, RD_STD, RD_COUNT } redop; /* tc_* */
typedef enum {
    PAT_SOFTMAX,   /* exp(x - max) / sum(exp(x - max)) */
    PAT_LOGSUMEXP, /* max + log(sum(exp(x - max))) */
    PAT_CENTER,    /* x - mean */
    PAT_NORM,      /* (x - mean) / (std + 0.5) */
    PAT_ARGMAX,    /* where(x == max, x, 0) */
    PAT_SUMMUL,    /* x * sum(x) */
    PAT_COUNT
} patop;
typedef enum {
    C_MATMUL,        /* tc_matmul with a fresh (K,N) or (K) weight */
    C_LINEAR,        /* tc_linear with a fresh (N,K) weight, sometimes a bias */
    C_SOFTMAX,       /* tc_softmax over a random axis */
    C_LOG_SOFTMAX,   /* tc_log_softmax */
    C_LAYERNORM,     /* tc_layernorm from a random axis on */
    C_CONV2D,        /* tc_conv2d or tc_conv2d_ex of fresh leaves */
    C_MAXPOOL,       /* tc_max_pool2d */
    C_AVGPOOL,       /* tc_avg_pool2d */
    C_ARGMAX,        /* tc_argmax of an exact value */
    C_CROSS_ENTROPY, /* tc_cross_entropy with int32 labels */
    C_DROPOUT,       /* tc_dropout in training mode */
    C_BATCHNORM,     /* tc_batchnorm in training mode */
    C_COUNT
} compop;
static const char *const comp_names[C_COUNT] = {
    "matmul",     "linear",     "softmax", "log_softmax",   "layernorm", "conv2d",
    "max_pool2d", "avg_pool2d", "argmax",  "cross_entropy", "dropout",   "batchnorm"};
/* operand kinds: NUM is every dtype but bool */
typedef enum { CAT_FLOAT, CAT_INT, CAT_BOOL, CAT_NUM, CAT_ANY } category;

/* how often each op ran over the whole suite (test_coverage checks none is 0) */
typedef enum {
    COV_STEP,      /* stepkind */
    COV_LEAF,      /* leafkind */
    COV_UNARY,     /* unop */
    COV_BINARY,    /* binop */
    COV_CMP,       /* cmpop */
    COV_INT,       /* intop */
    COV_MOVE,      /* moveop */
    COV_REDUCE,    /* redop */
    COV_CAST,      /* target tc_dtype */
    COV_PATTERN,   /* patop */
    COV_COMPOSITE, /* compop */
    COV_COUNT
} covkind;
static int cov[COV_COUNT][16];
static const int cov_len[COV_COUNT] = {ST_COUNT,       LF_COUNT,  UN_COUNT, BI_COUNT,
                                       CMP_COUNT,      IO_COUNT,  MV_COUNT, RD_COUNT,
                                       TC_INT8 /* the dtypes drawn: the ones before int8 */,
                                       PAT_COUNT, C_COUNT};
static const char *const cov_names[COV_COUNT] = {"step",          "leaf",    "unary",    "binary",
                                                 "compare",       "intop",   "move",     "reduce",
                                                 "cast to dtype", "pattern", "composite"};

typedef struct {
    tc_tensor *t;  /* owned reference */
    double lo, hi; /* every element lies in [lo, hi] */
    double err;    /* bound on |pipeline - oracle| */
    bool exact;    /* the pipeline must match the oracle bit for bit */
    bool has_half; /* float16 arithmetic upstream: the pipeline may keep more precision */
    bool is_leaf;  /* made from data or a scalar, not computed */
    bool is_used;  /* an operand of a later value (else a sink: checked at the end) */
} val;

typedef struct {
    family fam;        /* which family the case belongs to */
    uint64_t seed, rs; /* the case's seed; generator state */
    int ndim;          /* the case's main shape */
    int64_t shape[NDIM_MAX];
    val pool[POOL_MAX]; /* values; v<i> in the log is pool[i] */
    int n;
    char log[LOG_MAX]; /* the expression, one line per value */
    size_t len;
    bool failed;           /* an API call failed or a check mismatched */
    int kernels, realizes; /* kernels launched; midway realizes */
} gen;

/* ---- random numbers (splitmix64: fixed seeds give the same cases everywhere) ---- */

static uint64_t rnext(gen *g) {
    uint64_t z = (g->rs += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}
static int64_t rint_(gen *g, int64_t lo, int64_t hi) { /* uniform in [lo, hi] */
    return lo + (int64_t)(rnext(g) % (uint64_t)(hi - lo + 1));
}
static double runif(gen *g) {
    return (double)(rnext(g) >> 11) * 0x1p-53;
}
static bool chance(gen *g, double p) {
    return runif(g) < p;
}

/* ---- small facts ---- */

static bool is_float(tc_dtype dt) {
    return dt == TC_FLOAT32 || dt == TC_FLOAT16;
}
static tc_dtype float_of(tc_dtype dt) {
    return is_float(dt) ? dt : TC_FLOAT32;
}
static tc_dtype promote(tc_dtype a, tc_dtype b) { /* mirrors the documented priority order */
    static const int prio[TC_DTYPE_COUNT] = {[TC_BOOL] = 0,  [TC_UINT8] = 1,   [TC_INT32] = 2,
                                             [TC_INT64] = 3, [TC_FLOAT16] = 4, [TC_FLOAT32] = 5};
    return prio[a] >= prio[b] ? a : b;
}
static double mag(double lo, double hi) {
    return fmax(fabs(lo), fabs(hi));
}
static double minabs(double lo, double hi) {
    return lo <= 0 && hi >= 0 ? 0 : fmin(fabs(lo), fabs(hi));
}
/* largest magnitude a value of dt may reach in a case */
static double limit(tc_dtype dt) {
    switch (dt) {
    case TC_FLOAT32: return 1e6;
    case TC_FLOAT16: return 3e4;
    case TC_INT32: return 0x1p30;
    case TC_INT64: return 0x1p50;
    case TC_UINT8: return 255;
    case TC_BOOL: return 1;
    case TC_INT8: /* not generated: tests/diff/test_int_dtypes.c checks these */
    case TC_INT16:
    case TC_UINT16:
    case TC_UINT32:
    case TC_FLOAT64: /* not generated: tests/diff/test_float64.c checks it */
    case TC_UINT64:  /* nor this: tests/diff/test_int_dtypes.c */
    case TC_BFLOAT16: /* nor this: tests/diff/test_bfloat16.c */
    case TC_DTYPE_COUNT: break;
    }
    return 0;
}
/* the rounding one op of dt may add when the pipeline computes differently */
static double rnd(tc_dtype dt, double m) {
    return dt == TC_FLOAT16 ? 0x1p-10 * m : dt == TC_FLOAT32 ? 0x1p-22 * m : 0;
}
static void corners(double a, double b, double c, double d, double *lo, double *hi) {
    double p[4] = {a * c, a * d, b * c, b * d};
    *lo = fmin(fmin(p[0], p[1]), fmin(p[2], p[3]));
    *hi = fmax(fmax(p[0], p[1]), fmax(p[2], p[3]));
}
static tc_dtype dt_of(const gen *g, int i) {
    return tc_get_dtype(g->pool[i].t);
}
/* arithmetic on pool[i] is (or was) float16 math */
static bool half_math(const gen *g, int i) {
    return dt_of(g, i) == TC_FLOAT16 || g->pool[i].has_half;
}
/* sets pool[v].has_half (v may be a failure code); returns v */
static int set_half(gen *g, int v, bool has_half) {
    if (v >= 0) g->pool[v].has_half = has_half;
    return v;
}
/* an error bound too large for the value to mean anything: refuse the op */
static bool too_noisy(bool has_half, double err, double lo, double hi) {
    return has_half && err > 2e-2 * fmax(1, mag(lo, hi));
}
static const char *shape_str(const tc_tensor *t, char *buf, size_t n) {
    size_t len = (size_t)snprintf(buf, n, "(");
    for (int d = 0; d < tc_ndim(t) && len < n; d++)
        len +=
            (size_t)snprintf(buf + len, n - len, d ? ",%lld" : "%lld", (long long)tc_shape(t)[d]);
    if (len < n) snprintf(buf + len, n - len, ")");
    return buf;
}

/* ---- the log, failures, the pool ---- */

static void say(gen *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(gen *g, const char *fmt, ...) {
    if (g->len >= LOG_MAX - 1) return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(g->log + g->len, LOG_MAX - g->len, fmt, ap);
    va_end(ap);
    g->len = k < 0 ? g->len : g->len + (size_t)k < LOG_MAX ? g->len + (size_t)k : LOG_MAX - 1;
}

/* prints a failed case (seed 0: a hand-built regression case) and marks it failed */
static void report(gen *g, const char *why, const char *detail, const char *dump) {
    if (g->seed)
        fprintf(stderr, "\n==== diff FAILED: family %s, seed %llu, %s ====\n", fam_names[g->fam],
                (unsigned long long)g->seed, why);
    else fprintf(stderr, "\n==== diff FAILED: %s ====\n", why);
    fprintf(stderr, "%s\nexpression:\n%s", detail, g->log);
    if (dump) fprintf(stderr, "graph before realize:\n%s", dump);
    if (g->seed)
        fprintf(stderr, "==== (rerun alone: TC_DIFF_SEED=%llu) ====\n",
                (unsigned long long)g->seed);
    g->failed = true;
}

static int push(gen *g, tc_tensor *t, double lo, double hi, double err, bool exact, const char *fmt,
                ...) __attribute__((format(printf, 7, 8)));
static int push(gen *g, tc_tensor *t, double lo, double hi, double err, bool exact, const char *fmt,
                ...) {
    char expr[256], sh[96], detail[2400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(expr, sizeof expr, fmt, ap);
    va_end(ap);
    if (!t || g->n == POOL_MAX) {
        snprintf(detail, sizeof detail, "building v%d = %s failed: %s", g->n, expr,
                 t ? "the pool is full" : tc_last_error());
        tc_release(t);
        report(g, "an API call failed", detail, NULL);
        return -1;
    }
    g->pool[g->n] = (val){.t = t, .lo = lo, .hi = hi, .err = err, .exact = exact};
    say(g, "  v%d = %s  : %s %s in [%.4g, %.4g]%s, err %.2g\n", g->n, expr,
        tc_dtype_name(tc_get_dtype(t)), shape_str(t, sh, sizeof sh), lo, hi, exact ? " exact" : "",
        err);
    return g->n++;
}

/* push for leaves and scalars */
static int push_leaf(gen *g, int v) {
    if (v >= 0) g->pool[v].is_leaf = true;
    return v;
}

static gen *gen_new(family fam, uint64_t seed) {
    gen *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->fam = fam;
    g->seed = g->rs = seed;
    tc_manual_seed(seed);
    return g;
}

static void gen_free(gen *g) {
    for (int i = 0; i < g->n; i++) tc_release(g->pool[i].t);
    free(g);
}

/* ---- tensor helpers: U and B consume their tensor arguments; NULL passes through
 * without another call, so tc_last_error keeps the first failure ---- */

static tc_tensor *U(tc_tensor *(*f)(tc_tensor *), tc_tensor *a) {
    tc_tensor *r = a ? f(a) : NULL;
    tc_release(a);
    return r;
}
static tc_tensor *B(tc_tensor *(*f)(tc_tensor *, tc_tensor *), tc_tensor *a, tc_tensor *b) {
    tc_tensor *r = a && b ? f(a, b) : NULL;
    tc_release(a);
    tc_release(b);
    return r;
}
static tc_tensor *R(gen *g, int i) { /* pool[i] as an operand: a new reference */
    g->pool[i].is_used = true;
    return tc_retain(g->pool[i].t);
}
static tc_tensor *S(double v, tc_dtype dt) { /* a 0-d scalar: broadcasts anywhere */
    return tc_full(0, NULL, v, dt, NULL);
}

/* ---- choosing operands ---- */

static bool in_cat(tc_dtype dt, category c) {
    switch (c) {
    case CAT_FLOAT: return is_float(dt);
    case CAT_INT: return dt == TC_INT32 || dt == TC_INT64 || dt == TC_UINT8;
    case CAT_BOOL: return dt == TC_BOOL;
    case CAT_NUM: return dt != TC_BOOL;
    case CAT_ANY: return true;
    }
    return false;
}

/* a random value of category c (exact if asked), often the newest one; -1 if none */
static int pick(gen *g, category c, bool need_exact) {
    int cand[POOL_MAX], k = 0;
    for (int i = 0; i < g->n; i++)
        if (in_cat(dt_of(g, i), c) && (!need_exact || g->pool[i].exact)) cand[k++] = i;
    if (!k) return -1;
    return chance(g, 0.6) ? cand[k - 1] : cand[rint_(g, 0, k - 1)];
}

/* numpy broadcast of a's and b's shapes, false if they do not fit or grow too big */
static bool bcast(const tc_tensor *a, const tc_tensor *b) {
    int na = tc_ndim(a), nb = tc_ndim(b), nd = na > nb ? na : nb;
    int64_t numel = 1;
    for (int d = 0; d < nd; d++) {
        int64_t sa = d - (nd - na) >= 0 ? tc_shape(a)[d - (nd - na)] : 1;
        int64_t sb = d - (nd - nb) >= 0 ? tc_shape(b)[d - (nd - nb)] : 1;
        if (sa != sb && sa != 1 && sb != 1) return false;
        numel *= sa == 1 ? sb : sa;
    }
    return nd <= NDIM_MAX && numel <= NUMEL_MAX;
}

/* a shape that broadcasts against shape: some dims 1, maybe fewer leading dims */
static int variant_shape(gen *g, int nd, const int64_t *shape, int64_t *out) {
    if (chance(g, 0.1)) return 0;
    int drop = chance(g, 0.2) && nd ? (int)rint_(g, 1, nd) : 0;
    for (int d = drop; d < nd; d++) out[d - drop] = chance(g, 0.25) ? 1 : shape[d];
    return nd - drop;
}

static int v_cast(gen *g, int a, tc_dtype dt);

/* "(a,b,c)" of k int64 values (or ints when i32 is set) */
static const char *fmt_list(char *buf, size_t n, const int64_t *v64, const int *v32, int k) {
    size_t len = (size_t)snprintf(buf, n, "(");
    for (int i = 0; i < k && len < n; i++)
        len += (size_t)snprintf(buf + len, n - len, i ? ",%lld" : "%lld",
                                (long long)(v64 ? v64[i] : v32[i]));
    if (len < n) snprintf(buf + len, n - len, ")");
    return buf;
}

static void shuffle(gen *g, int *v, int k) {
    for (int i = k - 1; i > 0; i--) {
        int j = (int)rint_(g, 0, i), t = v[i];
        v[i] = v[j];
        v[j] = t;
    }
}

/* a tensor of random data in [lo, hi] (uniform floats, integers) */
static tc_tensor *data_tensor(gen *g, tc_dtype dt, int nd, const int64_t *shape, int64_t numel,
                              double lo, double hi) {
    size_t size = tc_dtype_size(dt);
    unsigned char *data = malloc((size_t)numel * size + 1);
    assert_non_null(data);
    for (int64_t i = 0; i < numel; i++) {
        unsigned char *p = data + (size_t)i * size;
        if (dt == TC_FLOAT32) {
            float f = (float)(lo + (hi - lo) * runif(g));
            memcpy(p, &f, size);
        } else {
            int64_t v = rint_(g, (int64_t)lo, (int64_t)hi);
            int32_t v32 = (int32_t)v;
            uint8_t v8 = (uint8_t)v;
            memcpy(p,
                   dt == TC_INT64   ? (void *)&v
                   : dt == TC_INT32 ? (void *)&v32
                                    : (void *)&v8,
                   size);
        }
    }
    tc_tensor *t = tc_from_data(data, dt, nd, shape, NULL);
    free(data);
    return t;
}

/* a leaf of dtype dt (float16: a float32 leaf cast) and the given shape */
static int leaf(gen *g, tc_dtype dt, int nd, const int64_t *shape) {
    if (dt == TC_FLOAT16) {
        int v = leaf(g, TC_FLOAT32, nd, shape);
        return v < 0 ? v : v_cast(g, v, TC_FLOAT16);
    }
    int64_t numel = 1, zero[1] = {0};
    for (int d = 0; d < nd; d++) numel *= shape[d];
    char sh[96];
    double r = runif(g);
    leafkind k = r < 0.7 ? LF_DATA : r < 0.8 ? LF_FULL : r < 0.9 ? LF_ARANGE : LF_RAND;
    if (nd == 2 && shape[0] == shape[1] && chance(g, 0.3)) k = LF_EYE;
    if (k == LF_RAND && dt != TC_FLOAT32) k = LF_DATA;
    if (k == LF_ARANGE && (dt == TC_BOOL || dt == TC_UINT8)) k = LF_FULL;
    fmt_list(sh, sizeof sh, shape, NULL, nd);
    const char *dn = tc_dtype_name(dt);
    double lo = dt == TC_FLOAT32 ? -2 : dt == TC_INT32 ? -20 : dt == TC_INT64 ? -1000 : 0;
    double hi = dt == TC_FLOAT32 ? 2
                : dt == TC_INT32 ? 20
                : dt == TC_INT64 ? 1000
                : dt == TC_UINT8 ? 60
                                 : 1;
    cov[COV_LEAF][k]++;
    switch (k) {
    case LF_FULL: {
        double v = is_float(dt) ? round(runif(g) * 400 - 200) / 100
                                : (double)rint_(g, (int64_t)lo, (int64_t)hi);
        return push_leaf(g, push(g, tc_full(nd, shape, v, dt, NULL), v, v, 0, true,
                                 "full(%s, %g, %s)", sh, v, dn));
    }
    case LF_ARANGE: {
        tc_tensor *t = tc_arange(0, numel, 1, dt, NULL);
        tc_tensor *shaped = t ? tc_reshape(t, nd, nd ? shape : zero) : NULL;
        tc_release(t);
        return push_leaf(g, push(g, shaped, 0, (double)(numel ? numel - 1 : 0), 0, true,
                                 "arange(%lld, %s) reshaped to %s", (long long)numel, dn, sh));
    }
    case LF_RAND:
        return push_leaf(g, push(g, tc_rand(nd, shape, dt, NULL), 0, 1, 0, true, "rand(%s)", sh));
    case LF_EYE:
        return push_leaf(g, push(g, tc_eye(shape[0], dt, NULL), 0, 1, 0, true, "eye(%lld, %s)",
                                 (long long)shape[0], dn));
    case LF_DATA:
    case LF_COUNT: break;
    }
    tc_tensor *t = data_tensor(g, dt, nd, shape, numel, lo, hi);
    return push_leaf(g, push(g, t, lo, hi, 0, true, "data(%s, %s, [%g, %g])", sh, dn, lo, hi));
}

/* an operand for an op with pool[a]: a pool value that broadcasts with it, a new leaf of
 * a broadcasting shape, or a 0-d scalar; category c, exact if asked */
static int partner(gen *g, int a, category c, bool need_exact) {
    tc_dtype da = dt_of(g, a), dt = in_cat(da, c)   ? da
                                    : c == CAT_BOOL ? TC_BOOL
                                    : c == CAT_INT  ? TC_INT32
                                                    : TC_FLOAT32;
    if (c != CAT_BOOL && chance(g, 0.15))
        dt = c == CAT_INT ? TC_INT64 : c == CAT_FLOAT ? TC_FLOAT32 : TC_INT32;
    double r = runif(g);
    if (r < 0.45) {
        int cand[POOL_MAX], k = 0;
        for (int i = 0; i < g->n; i++)
            if (in_cat(dt_of(g, i), c) && (!need_exact || g->pool[i].exact) &&
                bcast(g->pool[a].t, g->pool[i].t))
                cand[k++] = i;
        if (k) return cand[rint_(g, 0, k - 1)];
    }
    if (r < 0.8) {
        int64_t s[NDIM_MAX];
        int nd = variant_shape(g, tc_ndim(g->pool[a].t), tc_shape(g->pool[a].t), s);
        return leaf(g, dt, nd, s);
    }
    double v = dt == TC_BOOL    ? (double)rint_(g, 0, 1)
               : dt == TC_UINT8 ? (double)rint_(g, 0, 5)
               : is_float(dt)   ? round(runif(g) * 400 - 200) / 100
                                : (double)rint_(g, -5, 5);
    if (dt == TC_FLOAT16) v = round(v * 8) / 8; /* exact in half */
    return push_leaf(g, push(g, S(v, dt), v, v, 0, true, "%g (0-d %s)", v, tc_dtype_name(dt)));
}

#include "diff_check.h"
#include "diff_ops.h"
#include "diff_comp.h"

#endif /* DIFF_GEN_H */
