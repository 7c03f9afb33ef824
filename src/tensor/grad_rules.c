/* grad_rules.c - the backward rule of every differentiable public op:
 * (context, gradient of the output) -> gradients of the inputs, as lazy
 * nodes built with the tc_ew_* combinators (so they fuse like any other
 * graph and record no contexts of their own).
 *
 * Conventions: g has the output's shape and dtype. Binary ops broadcast and
 * promote their inputs, so a rule works at the output's shape and dtype and
 * `unbroadcast` sums the gradient back to each input's shape and casts it to
 * the input's dtype. Saved nodes are borrowed from the context: every use
 * takes its own reference (K), since the combinators consume their
 * arguments. Rules (g the output gradient, y the output):
 *   add: g, g   sub: g, -g   mul: g*b, g*a   div: g/b, -g*y/b
 *   maximum/minimum: g*m, g*(1-m), m = 1 where a wins, 1/2 on ties, else 0
 *   pow: g*b*a^(b-1) (0 where b == 0), g*y*ln a (0 where a == 0 and b >= 0,
 *   as torch)
 *   neg -g  exp g*y  log g/x  exp2 g*y*ln2  log2 g/(x ln2)  sqrt g/(2y)
 *   sin g*cos x  cos -g*sin x  relu g*(x>0)  sigmoid g*y*(1-y)
 *   tanh g*(1-y^2)  recip -g*y^2  abs g*sign x  square 2*g*x
 *   floor/ceil/round/trunc/sign: 0   sinh .. quick_gelu: math.c's factor
 *   where: where(c,g,0), where(c,0,g)   cast: g cast back
 *   sum: g expanded   mean: g/n expanded   max/min: g spread evenly over
 *   the elements equal to the result   var: g*2(x-mean)/(n-c)
 *   std: g*(x-mean)/((n-c)*y), 0 where y == 0 (torch)   movement: the inverse movement (reshape
 *   back, inverse permutation, sum over expanded dims, shrink a pad, pad a
 *   shrink, flip again)   contiguous: g   copy: g copied back
 *   cumsum: the running sums of g from the end; cumprod: scan.c's rule. */
#include "ew_short.h"

#include <math.h>
#include <string.h>

#define LN_2    0.69314718055994530942
#define HALF_PI 1.57079632679489661923

/* x * v for a float node x (consumed) */
static tc_node *scale(tc_node *x, double v) {
    tc_node *c = cnst(x, v);
    return mul(x, c);
}
/* a < b as a float of a's dtype (1 or 0) */
static tc_node *less(tc_node *a, tc_node *b) {
    tc_dtype dt = a ? a->dtype : TC_FLOAT32;
    return tc_ew_cast(tc_ew_binary(TC_OP_CMPLT, a, b), dt);
}
/* a == b as a float of a's dtype */
static tc_node *equal(tc_node *a, tc_node *b) {
    tc_dtype dt = a ? a->dtype : TC_FLOAT32;
    return tc_ew_cast(tc_ew_not(tc_ew_binary(TC_OP_CMPNE, a, b)), dt);
}

static bool same_shape(const tc_node *a, int ndim, const int64_t *shape) {
    return a->ndim == ndim && memcmp(a->shape, shape, sizeof(int64_t) * (size_t)ndim) == 0;
}

/* x (consumed) reshaped to the shape of like (a no-op when equal) */
static tc_node *reshape_like(tc_node *x, const tc_node *like) {
    if (!x || same_shape(x, like->ndim, like->shape)) return x;
    return tc_ew_reshape(x, like->ndim, like->shape);
}

/* the saved input node x cast to dt and broadcast to out's shape (new ref) */
static tc_node *operand(tc_node *x, tc_dtype dt, const tc_node *out) {
    return tc_ew_broadcast(tc_ew_cast(K(x), dt), out->ndim, out->shape);
}

/* g (consumed) summed over the dims that broadcasting added or stretched to
 * reach g's shape from target's, reshaped and cast to target's */
static tc_node *unbroadcast(tc_node *g, const tc_node *target) {
    if (!g) return NULL;
    int extra = g->ndim - target->ndim;
    uint32_t mask = 0;
    for (int i = 0; i < g->ndim; i++) {
        int64_t ts = i < extra ? 1 : target->shape[i - extra];
        if (ts == 1 && g->shape[i] != 1) mask |= 1u << i;
    }
    if (mask) {
        tc_dtype dt = g->dtype;
        g = tc_ew_cast(tc_ew_reduce(tc_ew_cast(g, tc_dtype_float_acc(dt)), TC_OP_REDUCE_SUM, mask), dt);
    }
    return tc_ew_cast(reshape_like(g, target), target->dtype);
}

/* g (consumed, a reduce's output gradient) reshaped to the kept-dims shape
 * and expanded back over the reduced dims of x */
static tc_node *expand_back(tc_node *g, const tc_node *x, uint32_t mask) {
    if (!g) return NULL;
    int64_t k[TC_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) k[i] = (mask >> i) & 1 ? 1 : x->shape[i];
    if (!same_shape(g, x->ndim, k)) g = tc_ew_reshape(g, x->ndim, k);
    return tc_ew_broadcast(g, x->ndim, x->shape);
}

static int64_t reduced_count(const tc_node *x, uint32_t mask) {
    int64_t n = 1;
    for (int i = 0; i < x->ndim; i++)
        if ((mask >> i) & 1) n *= x->shape[i];
    return n;
}

/* ---- binary ops: a, b at the output's shape and dtype; y the output ---- */

typedef void (*binary_fn)(tc_node *a, tc_node *b, tc_node *y, tc_node *g, tc_node **ga,
                          tc_node **gb); /* a, b, y borrowed; g consumed */

static void d_add(tc_node *a, tc_node *b, tc_node *y, tc_node *g, tc_node **ga, tc_node **gb) {
    (void)a, (void)b, (void)y;
    *gb = K(g);
    *ga = g;
}
static void d_sub(tc_node *a, tc_node *b, tc_node *y, tc_node *g, tc_node **ga, tc_node **gb) {
    (void)a, (void)b, (void)y;
    *gb = neg(K(g));
    *ga = g;
}
static void d_mul(tc_node *a, tc_node *b, tc_node *y, tc_node *g, tc_node **ga, tc_node **gb) {
    (void)y;
    *gb = mul(K(g), K(a));
    *ga = mul(g, K(b));
}
static void d_div(tc_node *a, tc_node *b, tc_node *y, tc_node *g, tc_node **ga, tc_node **gb) {
    (void)a;
    *gb = neg(mul(mul(K(g), K(y)), recip(K(b))));
    *ga = mul(g, recip(K(b)));
}
/* maximum (is_max) or minimum: a gets g where it wins, half of g on ties */
static void d_extreme(tc_node *a, tc_node *b, tc_node *g, bool is_max, tc_node **ga,
                      tc_node **gb) {
    tc_node *wins = is_max ? less(K(b), K(a)) : less(K(a), K(b));
    tc_node *m = add(wins, scale(equal(K(a), K(b)), 0.5));
    tc_node *one = cnst(m, 1), *m2 = K(m);
    *gb = mul(K(g), add(one, neg(m2)));
    *ga = mul(g, m);
}
static void d_maximum(tc_node *a, tc_node *b, tc_node *y, tc_node *g, tc_node **ga,
                      tc_node **gb) {
    (void)y;
    d_extreme(a, b, g, true, ga, gb);
}
static void d_minimum(tc_node *a, tc_node *b, tc_node *y, tc_node *g, tc_node **ga,
                      tc_node **gb) {
    (void)y;
    d_extreme(a, b, g, false, ga, gb);
}
/* d/da = b*a^(b-1), 0 where b == 0 (x**0 is constant: torch); d/db =
 * y*ln(a), 0 where a == 0 and b >= 0 (torch) */
static void d_pow(tc_node *a, tc_node *b, tc_node *y, tc_node *g, tc_node **ga, tc_node **gb) {
    tc_node *b_zero = tc_ew_not(tc_ew_binary(TC_OP_CMPNE, K(b), cnst(b, 0)));
    tc_node *da = tc_ew_where(b_zero, cnst(a, 0),
                              mul(K(b), tc_ew_pow(K(a), add(K(b), cnst(b, -1)))));
    tc_node *a_zero = tc_ew_not(tc_ew_binary(TC_OP_CMPNE, K(a), cnst(a, 0)));
    tc_node *b_nonneg = tc_ew_not(tc_ew_binary(TC_OP_CMPLT, K(b), cnst(b, 0)));
    tc_node *ln_a = scale(tc_ew_unary(TC_OP_LOG2, K(a)), LN_2);
    tc_node *db = tc_ew_where(tc_ew_binary(TC_OP_AND, a_zero, b_nonneg), cnst(a, 0),
                              mul(K(y), ln_a));
    *gb = mul(K(g), db);
    *ga = mul(g, da);
}

/* ---- unary ops: the factor g is multiplied by; x the input (in the
 * output's dtype), y the output, both borrowed ---- */

typedef tc_node *(*factor_fn)(tc_node *x, tc_node *y);

static tc_node *f_neg(tc_node *x, tc_node *y) {
    (void)y;
    return cnst(x, -1);
}
static tc_node *f_exp(tc_node *x, tc_node *y) {
    (void)x;
    return K(y);
}
static tc_node *f_log(tc_node *x, tc_node *y) {
    (void)y;
    return recip(K(x));
}
static tc_node *f_exp2(tc_node *x, tc_node *y) {
    (void)x;
    return scale(K(y), LN_2);
}
static tc_node *f_log2(tc_node *x, tc_node *y) {
    (void)y;
    return recip(scale(K(x), LN_2));
}
static tc_node *f_sqrt(tc_node *x, tc_node *y) {
    (void)x;
    return recip(scale(K(y), 2));
}
static tc_node *f_sin(tc_node *x, tc_node *y) { /* cos x = sin(pi/2 - x) */
    (void)y;
    return tc_ew_unary(TC_OP_SIN, add(neg(K(x)), cnst(x, HALF_PI)));
}
static tc_node *f_cos(tc_node *x, tc_node *y) {
    (void)y;
    return neg(tc_ew_unary(TC_OP_SIN, K(x)));
}
static tc_node *f_relu(tc_node *x, tc_node *y) {
    (void)y;
    return less(cnst(x, 0), K(x));
}
static tc_node *f_sigmoid(tc_node *x, tc_node *y) {
    (void)x;
    return mul(K(y), add(cnst(y, 1), neg(K(y))));
}
static tc_node *f_tanh(tc_node *x, tc_node *y) {
    (void)x;
    return add(cnst(y, 1), neg(mul(K(y), K(y))));
}
static tc_node *f_recip(tc_node *x, tc_node *y) {
    (void)x;
    return neg(mul(K(y), K(y)));
}
static tc_node *f_abs(tc_node *x, tc_node *y) { /* sign(x), 0 at 0 */
    (void)y;
    return add(less(cnst(x, 0), K(x)), neg(less(K(x), cnst(x, 0))));
}
static tc_node *f_square(tc_node *x, tc_node *y) {
    (void)y;
    return scale(K(x), 2);
}

/* ---- reduces: x the input, mask the reduced dims, y the output ---- */

static tc_node *d_reduce(const tc_ag_ctx *c, tc_node *g) {
    tc_node *x = c->inputs[0], *y = c->out;
    uint32_t mask = c->args.axes;
    double n = (double)reduced_count(x, mask);
    if (c->op == TC_AG_SUM) return tc_ew_cast(expand_back(g, x, mask), x->dtype);
    if (c->op == TC_AG_MEAN)
        return tc_ew_cast(scale(expand_back(g, x, mask), n > 0 ? 1 / n : 0), x->dtype);
    if (c->op == TC_AG_MAX || c->op == TC_AG_MIN) {
        tc_node *hit = equal(K(x), expand_back(K(y), x, mask)); /* 1 at every extreme */
        tc_node *count = tc_ew_reduce(K(hit), TC_OP_REDUCE_SUM, mask);
        tc_node *share = mul(hit, tc_ew_broadcast(recip(count), x->ndim, x->shape));
        return mul(expand_back(tc_ew_cast(g, x->dtype), x, mask), share);
    }
    /* VAR, STD */
    double dof = n - c->args.correction;
    tc_dtype acc = tc_dtype_float_acc(x->dtype);
    tc_node *xf = tc_ew_cast(K(x), acc), *xf2 = K(xf);
    tc_node *mean = scale(tc_ew_reduce(xf2, TC_OP_REDUCE_SUM, mask), n > 0 ? 1 / n : 0);
    tc_node *d = add(xf, neg(tc_ew_broadcast(mean, x->ndim, x->shape)));
    tc_node *gf = tc_ew_cast(g, acc);
    if (c->op == TC_AG_STD) { /* g/std, 0 where std == 0 (all equal, or size-1 axes: torch) */
        tc_node *yf = tc_ew_cast(K(y), acc);
        tc_node *is_zero = tc_ew_not(tc_ew_binary(TC_OP_CMPNE, K(yf), cnst(yf, 0)));
        tc_node *inv = tc_ew_where(is_zero, cnst(yf, 0), recip(K(yf)));
        tc_node_release(yf);
        gf = mul(gf, inv);
    }
    double k = (c->op == TC_AG_VAR ? 2.0 : 1.0) / dof;
    return tc_ew_cast(mul(scale(expand_back(gf, x, mask), k), d), x->dtype);
}

/* ---- movement: the inverse movement of g ---- */

static tc_node *d_movement(const tc_ag_ctx *c, tc_node *g) {
    const tc_node *x = c->inputs[0];
    int nd = x->ndim;
    if (c->op == TC_AG_RESHAPE) return reshape_like(g, x);
    if (c->op == TC_AG_EXPAND) return unbroadcast(g, x);
    int inv[TC_MAX_DIMS];
    int64_t be[2 * TC_MAX_DIMS];
    bool flags[TC_MAX_DIMS];
    for (int i = 0; i < nd; i++) {
        inv[c->args.order[i]] = i;
        be[2 * i] = c->args.pads[2 * i];
        be[2 * i + 1] = c->op == TC_AG_PAD ? c->args.pads[2 * i] + x->shape[i]  /* shrink end */
                                           : x->shape[i] - c->args.pads[2 * i + 1]; /* pad after */
        flags[i] = (c->args.axes >> i) & 1;
    }
    tc_node *r = NULL;
    if (c->op == TC_AG_PERMUTE) r = tc_node_permute(g, inv);
    else if (c->op == TC_AG_PAD) r = tc_node_shrink(g, be);
    else if (c->op == TC_AG_SHRINK) r = tc_node_pad(g, be);
    else if (c->op == TC_AG_FLIP) r = tc_node_flip(g, flags);
    else TC_INTERNAL("no movement rule for autograd op %d", (int)c->op);
    tc_node_release(g);
    return r;
}

/* ---- the rest ---- */

/* COPY: g back to the input's device (contiguous first: a copy reads a
 * whole buffer) */
static tc_node *d_copy(const tc_ag_ctx *c, tc_node *g) {
    int dev = c->inputs[0]->device;
    if (g->device == dev) return g;
    tc_node *flat = tc_node_meta(TC_OP_CONTIGUOUS, g->device, 1, &g);
    tc_node_release(g);
    tc_node *r = flat ? tc_node_meta(TC_OP_COPY, dev, 1, &flat) : NULL;
    tc_node_release(flat);
    return r;
}

/* CONTIG_BW (contiguous_backward): g in a buffer of its own (a realize point in the
 * backward graph), unless it already reads one whole */
static tc_node *d_contiguous_backward(const tc_ag_ctx *c, tc_node *g) {
    g = tc_ew_cast(g, c->inputs[0]->dtype);
    if (!g || tc_tensor_is_contiguous_buffer(g)) return g;
    tc_node *r = tc_node_meta(TC_OP_CONTIGUOUS, g->device, 1, &g);
    tc_node_release(g);
    return r;
}

typedef enum {
    RK_NONE,     /* no rule (TC_AG_NONE) */
    RK_BINARY,   /* .binary at the output's shape, then unbroadcast */
    RK_UNARY,    /* g * .factor */
    RK_MATH,     /* g * tc_math_grad (math.c's ops) */
    RK_ZERO,     /* zeros of the input's shape and dtype */
    RK_WHERE,    /* where(cond, g, 0) and where(cond, 0, g) */
    RK_PASS,     /* g cast to the input's dtype (cast, contiguous) */
    RK_REDUCE,   /* d_reduce */
    RK_MOVEMENT, /* d_movement */
    RK_COPY,     /* d_copy */
    RK_CONTIG,   /* d_contiguous_backward */
    RK_CUMSUM,   /* tc_cumsum_grad (scan.c) */
    RK_CUMPROD,  /* tc_cumprod_grad (scan.c) */
    RK_CONV,     /* tc_conv2d_grad (nnops.c) */
    RK_GATHER,   /* a SCATTER of g at the same places */
} rule_kind;

typedef struct {
    rule_kind kind;   /* how the rule is applied */
    binary_fn binary; /* RK_BINARY */
    factor_fn factor; /* RK_UNARY */
} rule_info;

static const rule_info rules[TC_AG_COUNT] = {
    [TC_AG_NONE] = {RK_NONE, NULL, NULL},
    [TC_AG_ADD] = {RK_BINARY, d_add, NULL},
    [TC_AG_SUB] = {RK_BINARY, d_sub, NULL},
    [TC_AG_MUL] = {RK_BINARY, d_mul, NULL},
    [TC_AG_DIV] = {RK_BINARY, d_div, NULL},
    [TC_AG_MAXIMUM] = {RK_BINARY, d_maximum, NULL},
    [TC_AG_MINIMUM] = {RK_BINARY, d_minimum, NULL},
    [TC_AG_POW] = {RK_BINARY, d_pow, NULL},
    [TC_AG_NEG] = {RK_UNARY, NULL, f_neg},
    [TC_AG_EXP] = {RK_UNARY, NULL, f_exp},
    [TC_AG_LOG] = {RK_UNARY, NULL, f_log},
    [TC_AG_EXP2] = {RK_UNARY, NULL, f_exp2},
    [TC_AG_LOG2] = {RK_UNARY, NULL, f_log2},
    [TC_AG_SQRT] = {RK_UNARY, NULL, f_sqrt},
    [TC_AG_SIN] = {RK_UNARY, NULL, f_sin},
    [TC_AG_COS] = {RK_UNARY, NULL, f_cos},
    [TC_AG_RELU] = {RK_UNARY, NULL, f_relu},
    [TC_AG_SIGMOID] = {RK_UNARY, NULL, f_sigmoid},
    [TC_AG_TANH] = {RK_UNARY, NULL, f_tanh},
    [TC_AG_RECIP] = {RK_UNARY, NULL, f_recip},
    [TC_AG_ABS] = {RK_UNARY, NULL, f_abs},
    [TC_AG_SQUARE] = {RK_UNARY, NULL, f_square},
    [TC_AG_STEP] = {RK_ZERO, NULL, NULL},
    [TC_AG_SINH] = {RK_MATH, NULL, NULL},
    [TC_AG_COSH] = {RK_MATH, NULL, NULL},
    [TC_AG_ASINH] = {RK_MATH, NULL, NULL},
    [TC_AG_ACOSH] = {RK_MATH, NULL, NULL},
    [TC_AG_ATANH] = {RK_MATH, NULL, NULL},
    [TC_AG_SOFTSIGN] = {RK_MATH, NULL, NULL},
    [TC_AG_HARDSWISH] = {RK_MATH, NULL, NULL},
    [TC_AG_MISH] = {RK_MATH, NULL, NULL},
    [TC_AG_QUICK_GELU] = {RK_MATH, NULL, NULL},
    [TC_AG_WHERE] = {RK_WHERE, NULL, NULL},
    [TC_AG_CAST] = {RK_PASS, NULL, NULL},
    [TC_AG_SUM] = {RK_REDUCE, NULL, NULL},
    [TC_AG_MAX] = {RK_REDUCE, NULL, NULL},
    [TC_AG_MIN] = {RK_REDUCE, NULL, NULL},
    [TC_AG_MEAN] = {RK_REDUCE, NULL, NULL},
    [TC_AG_VAR] = {RK_REDUCE, NULL, NULL},
    [TC_AG_STD] = {RK_REDUCE, NULL, NULL},
    [TC_AG_RESHAPE] = {RK_MOVEMENT, NULL, NULL},
    [TC_AG_PERMUTE] = {RK_MOVEMENT, NULL, NULL},
    [TC_AG_EXPAND] = {RK_MOVEMENT, NULL, NULL},
    [TC_AG_PAD] = {RK_MOVEMENT, NULL, NULL},
    [TC_AG_SHRINK] = {RK_MOVEMENT, NULL, NULL},
    [TC_AG_FLIP] = {RK_MOVEMENT, NULL, NULL},
    [TC_AG_CONTIGUOUS] = {RK_PASS, NULL, NULL},
    [TC_AG_COPY] = {RK_COPY, NULL, NULL},
    [TC_AG_CONTIG_BW] = {RK_CONTIG, NULL, NULL},
    [TC_AG_CUMSUM] = {RK_CUMSUM, NULL, NULL},
    [TC_AG_CUMPROD] = {RK_CUMPROD, NULL, NULL},
    [TC_AG_CONV2D] = {RK_CONV, NULL, NULL},
    [TC_AG_GATHER] = {RK_GATHER, NULL, NULL},
};

/* gather's gradient: zeros of x's shape plus g at the gathered places */
static tc_node *d_gather(const tc_ag_ctx *c, tc_node *g) {
    int axis = 0;
    while (axis < TC_MAX_DIMS - 1 && !((c->args.axes >> axis) & 1)) axis++;
    tc_node *x = c->inputs[0];
    tc_node *gx = g ? tc_node_scatter(c->inputs[1], g, axis, x->shape) : NULL;
    tc_node_release(g);
    return gx;
}

static void binary_rule(const tc_ag_ctx *c, tc_node *g, tc_node **grads) {
    tc_node *y = c->out, *ga = NULL, *gb = NULL;
    tc_node *a = operand(c->inputs[0], y->dtype, y), *b = operand(c->inputs[1], y->dtype, y);
    if (a && b) rules[c->op].binary(a, b, y, g, &ga, &gb);
    else tc_node_release(g);
    tc_node_release(a);
    tc_node_release(b);
    grads[0] = c->parents[0] ? unbroadcast(ga, c->inputs[0]) : (tc_node_release(ga), NULL);
    grads[1] = c->parents[1] ? unbroadcast(gb, c->inputs[1]) : (tc_node_release(gb), NULL);
}

/* g times the op's derivative, in the output's dtype, cast to the input's */
static tc_node *unary_rule(const tc_ag_ctx *c, tc_node *g) {
    tc_node *x = c->inputs[0];
    tc_node *xf = tc_ew_cast(K(x), c->out->dtype), *f = NULL;
    if (xf && rules[c->op].kind == RK_MATH) f = tc_math_grad(c->op, xf, c->out);
    else if (xf) f = rules[c->op].factor(xf, c->out);
    tc_node_release(xf);
    return tc_ew_cast(mul(g, f), x->dtype);
}

/* where(cond, a, b): grads[1] = where(cond, g, 0), grads[2] = where(cond, 0, g) */
static void where_rule(const tc_ag_ctx *c, tc_node *g, tc_node **grads) {
    tc_node *cond = tc_ew_broadcast(tc_ew_cast(K(c->inputs[0]), TC_BOOL), g->ndim, g->shape);
    tc_node *zero = cnst(g, 0), *zero2 = cnst(g, 0), *cond2 = K(cond), *g2 = K(g);
    tc_node *ga = tc_ew_where(cond, g, zero), *gb = tc_ew_where(cond2, zero2, g2);
    grads[1] = c->parents[1] ? unbroadcast(ga, c->inputs[1]) : (tc_node_release(ga), NULL);
    grads[2] = c->parents[2] ? unbroadcast(gb, c->inputs[2]) : (tc_node_release(gb), NULL);
}

TC_MUST_USE tc_status tc_ag_rule(const tc_ag_ctx *c, tc_node *g, tc_node **grads) {
    for (int i = 0; i < 3; i++) grads[i] = NULL;
    if (c->op <= TC_AG_NONE || c->op >= TC_AG_COUNT) {
        tc_node_release(g);
        return TC_INTERNAL("autograd context with op %d", (int)c->op);
    }
    switch (rules[c->op].kind) {
    case RK_NONE:
        tc_node_release(g);
        return TC_INTERNAL("autograd context with op %d", (int)c->op);
    case RK_BINARY: binary_rule(c, g, grads); break;
    case RK_WHERE: where_rule(c, g, grads); break;
    case RK_UNARY:
    case RK_MATH: grads[0] = unary_rule(c, g); break;
    case RK_ZERO:
        grads[0] = cnst(c->inputs[0], 0);
        tc_node_release(g);
        break;
    case RK_PASS: grads[0] = tc_ew_cast(g, c->inputs[0]->dtype); break;
    case RK_REDUCE: grads[0] = d_reduce(c, g); break;
    case RK_MOVEMENT: grads[0] = d_movement(c, g); break;
    case RK_COPY: grads[0] = d_copy(c, g); break;
    case RK_CONTIG: grads[0] = d_contiguous_backward(c, g); break;
    case RK_CUMSUM: tc_cumsum_grad(c, g, grads); break;
    case RK_CUMPROD: tc_cumprod_grad(c, g, grads); break;
    case RK_CONV: tc_conv2d_grad(c, g, grads); break;
    case RK_GATHER: grads[0] = d_gather(c, g); break;
    }
    bool ok = true;
    for (int i = 0; i < c->n_inputs; i++)
        if (c->parents[i] && !grads[i]) ok = false;
    if (ok) return TC_OK;
    for (int i = 0; i < 3; i++) {
        tc_node_release(grads[i]);
        grads[i] = NULL;
    }
    return tc_error_or(TC_ERR_MEMORY);
}
