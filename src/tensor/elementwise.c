/* elementwise.c - node combinators (tc_ew_*: consume their node arguments,
 * return a new reference, pass NULL through) and the public unary ops, each
 * composed from the primitive ops so the scheduler sees and fuses it:
 *   exp(x) = exp2(x*log2(e))     log(x) = log2(x)*ln(2)   cos(x) = sin(pi/2 - x)
 *   sigmoid(x) = 1/(1+exp(-x))   tanh(x) = 2*sigmoid(2x) - 1
 *   relu(x) = max(x, 0)          abs(x) = max(x, -x)      square(x) = x*x
 * Float math on integer or bool inputs casts them to float32 first.
 *
 * Rule for readers: a combinator may consume x only after every other use of
 * x in the same expression, so extra references (tc_ew_keep) and constants
 * shaped like x are taken before the call that consumes it. */
#include "tensor.h"

#include <math.h>
#include <string.h>

#define LOG2_E  1.4426950408889634074
#define LN_2    0.69314718055994530942
#define HALF_PI 1.57079632679489661923

/* ---- combinators ---- */

tc_node *tc_ew_keep(tc_node *n) {
    return n ? tc_node_retain(n) : NULL;
}

tc_node *tc_ew_unary(tc_op op, tc_node *x) {
    if (!x) return NULL;
    tc_node *r = tc_node_alu(op, x->dtype, 1, &x);
    tc_node_release(x);
    return r;
}

tc_node *tc_ew_binary(tc_op op, tc_node *a, tc_node *b) {
    tc_node *r = NULL;
    if (a && b) {
        tc_node *srcs[2] = {a, b};
        bool is_cmp = op == TC_OP_CMPLT || op == TC_OP_CMPNE;
        r = tc_node_alu(op, is_cmp ? TC_BOOL : a->dtype, 2, srcs);
    }
    tc_node_release(a);
    tc_node_release(b);
    return r;
}

tc_node *tc_ew_where(tc_node *cond, tc_node *a, tc_node *b) {
    tc_node *r = NULL;
    if (cond && a && b) {
        tc_node *srcs[3] = {cond, a, b};
        r = tc_node_alu(TC_OP_WHERE, a->dtype, 3, srcs);
    }
    tc_node_release(cond);
    tc_node_release(a);
    tc_node_release(b);
    return r;
}

tc_node *tc_ew_cast(tc_node *x, tc_dtype dt) {
    if (!x || x->dtype == dt) return x;
    tc_node *r = tc_node_alu(TC_OP_CAST, dt, 1, &x);
    tc_node_release(x);
    return r;
}

tc_node *tc_ew_float(tc_node *x) {
    return x && !tc_dtypes[x->dtype].is_float ? tc_ew_cast(x, TC_FLOAT32) : x;
}

tc_node *tc_ew_const(const tc_node *like, double value) {
    if (!like) return NULL;
    if (tc_dtypes[like->dtype].is_float)
        return tc_node_const(value, like->dtype, like->device, like->ndim, like->shape);
    return tc_node_const_int(tc_dtype_double_to_int(like->dtype, value), like->dtype, like->device,
                             like->ndim, like->shape);
}

tc_node *tc_ew_not(tc_node *x) {
    return tc_ew_binary(TC_OP_CMPNE, x, tc_ew_const(x, 1));
}

tc_node *tc_ew_order_flip(tc_node *x) {
    if (!x) return NULL;
    switch (x->dtype) {
    case TC_FLOAT32:
    case TC_FLOAT16:
    case TC_FLOAT64:
    case TC_BFLOAT16: return tc_ew_unary(TC_OP_NEG, x);
    case TC_INT8:
    case TC_INT16:
    case TC_INT32:
    case TC_INT64:
    case TC_UINT64: return tc_ew_binary(TC_OP_XOR, x, tc_ew_const(x, -1)); /* ~x: no overflow */
    case TC_UINT8:
    case TC_UINT16:
    case TC_UINT32: { /* max - x, as x ^ max */
        int64_t lo, hi;
        (void)tc_dtype_int_range(x->dtype, &lo, &hi);
        return tc_ew_binary(TC_OP_XOR, x, tc_ew_const(x, (double)hi));
    }
    case TC_BOOL: return tc_ew_not(x);
    case TC_DTYPE_COUNT: break;
    }
    TC_INTERNAL("bad dtype %d", (int)x->dtype);
    tc_node_release(x);
    return NULL;
}

tc_node *tc_ew_exp(tc_node *x) {
    return tc_ew_unary(TC_OP_EXP2, tc_ew_binary(TC_OP_MUL, x, tc_ew_const(x, LOG2_E)));
}

tc_node *tc_ew_abs(tc_node *x) {
    if (!x || !tc_dtypes[x->dtype].is_signed) return x; /* uint8, bool: already >= 0 */
    tc_node *y = tc_ew_keep(x);
    return tc_ew_binary(TC_OP_MAX, x, tc_ew_unary(TC_OP_NEG, y));
}

tc_node *tc_ew_sub(tc_node *a, tc_node *b) {
    return tc_ew_binary(TC_OP_ADD, a, tc_ew_unary(TC_OP_NEG, b));
}

tc_node *tc_ew_reshape(tc_node *n, int ndim, const int64_t *shape) {
    if (!n) return NULL;
    tc_node *r = tc_node_reshape(n, ndim, shape);
    tc_node_release(n);
    return r;
}

tc_node *tc_ew_broadcast(tc_node *n, int ndim, const int64_t *shape) {
    if (!n) return NULL;
    if (n->ndim == ndim && memcmp(n->shape, shape, sizeof(int64_t) * (size_t)ndim) == 0) return n;
    int64_t ones[TC_MAX_DIMS];
    int extra = ndim - n->ndim;
    for (int i = 0; i < ndim; i++) ones[i] = i < extra ? 1 : n->shape[i - extra];
    if (extra > 0) n = tc_ew_reshape(n, ndim, ones);
    if (!n) return NULL;
    tc_node *r = tc_node_expand(n, ndim, shape);
    tc_node_release(n);
    return r;
}

/* ---- unary builders: x consumed, result new ---- */

static tc_node *build_neg(tc_node *x) {
    return tc_ew_unary(TC_OP_NEG, x);
}

static tc_node *build_exp2(tc_node *x) {
    return tc_ew_unary(TC_OP_EXP2, x);
}

static tc_node *build_log2(tc_node *x) {
    return tc_ew_unary(TC_OP_LOG2, x);
}

static tc_node *build_sqrt(tc_node *x) {
    return tc_ew_unary(TC_OP_SQRT, x);
}

static tc_node *build_sin(tc_node *x) {
    return tc_ew_unary(TC_OP_SIN, x);
}

static tc_node *build_recip(tc_node *x) {
    return tc_ew_unary(TC_OP_RECIP, x);
}

tc_node *tc_ew_log(tc_node *x) {
    tc_node *ln2 = tc_ew_const(x, LN_2);
    return tc_ew_binary(TC_OP_MUL, tc_ew_unary(TC_OP_LOG2, x), ln2);
}

static tc_node *build_cos(tc_node *x) {
    tc_node *half_pi = tc_ew_const(x, HALF_PI);
    return tc_ew_unary(TC_OP_SIN, tc_ew_sub(half_pi, x));
}

static tc_node *build_relu(tc_node *x) {
    return tc_ew_binary(TC_OP_MAX, x, tc_ew_const(x, 0));
}

tc_node *tc_ew_sigmoid(tc_node *x) {
    tc_node *one = tc_ew_const(x, 1);
    return tc_ew_unary(TC_OP_RECIP,
                       tc_ew_binary(TC_OP_ADD, one, tc_ew_exp(tc_ew_unary(TC_OP_NEG, x))));
}

tc_node *tc_ew_tanh(tc_node *x) {
    tc_node *two = tc_ew_const(x, 2), *two_b = tc_ew_const(x, 2), *minus_one = tc_ew_const(x, -1);
    tc_node *s = tc_ew_sigmoid(tc_ew_binary(TC_OP_MUL, x, two));
    return tc_ew_binary(TC_OP_ADD, tc_ew_binary(TC_OP_MUL, two_b, s), minus_one);
}

/* x == 0 (bool: !x), so any dtype gives bool (NaN is true, as in torch) */
static tc_node *build_logical_not(tc_node *x) {
    if (!x || x->dtype == TC_BOOL) return tc_ew_not(x);
    return tc_ew_not(tc_ew_binary(TC_OP_CMPNE, x, tc_ew_const(x, 0)));
}

static tc_node *build_square(tc_node *x) {
    tc_node *y = tc_ew_keep(x);
    return tc_ew_binary(TC_OP_MUL, x, y);
}

/* ---- public unary ops ---- */

tc_tensor *tc_unary_api(const char *api, tc_tensor *a, tc_unary_kind kind,
                        tc_node *(*build)(tc_node *), tc_ag_op ag) {
    tc_lock();
    tc_tensor *out = NULL;
    if (tc_tensor_check(a, api, "a") != TC_OK) goto done;
    tc_dtype dt = a->node->dtype;
    if (kind == U_NOBOOL && dt == TC_BOOL) {
        tc_error_set(TC_ERR_DTYPE, "%s: not defined for bool tensors (use tc_logical_not)", api);
        goto done;
    }
    if (kind == U_INT && (tc_dtypes[dt].is_float || dt == TC_BOOL)) {
        tc_error_set(TC_ERR_DTYPE, "%s: needs an integer tensor, got %s", api, tc_dtypes[dt].name);
        goto done;
    }
    tc_node *x = tc_node_retain(a->node);
    if (kind == U_FLOAT) x = tc_ew_float(x);
    out = tc_ag_record(tc_tensor_wrap(build(x)), ag, 1, &a, NULL);
done:
    tc_unlock();
    return out;
}

TC_API tc_tensor *tc_neg(tc_tensor *a) {
    TC_API_ENTER();
    return tc_unary_api("tc_neg", a, U_NOBOOL, build_neg, TC_AG_NEG);
}
TC_API tc_tensor *tc_exp(tc_tensor *a) {
    TC_API_ENTER();
    return tc_unary_api("tc_exp", a, U_FLOAT, tc_ew_exp, TC_AG_EXP);
}
TC_API tc_tensor *tc_log(tc_tensor *a) {
    TC_API_ENTER();
    return tc_unary_api("tc_log", a, U_FLOAT, tc_ew_log, TC_AG_LOG);
}
TC_API tc_tensor *tc_exp2(tc_tensor *a) {
    TC_API_ENTER();
    return tc_unary_api("tc_exp2", a, U_FLOAT, build_exp2, TC_AG_EXP2);
}
TC_API tc_tensor *tc_log2(tc_tensor *a) {
    TC_API_ENTER();
    return tc_unary_api("tc_log2", a, U_FLOAT, build_log2, TC_AG_LOG2);
}
TC_API tc_tensor *tc_sqrt(tc_tensor *a) {
    TC_API_ENTER();
    return tc_unary_api("tc_sqrt", a, U_FLOAT, build_sqrt, TC_AG_SQRT);
}
TC_API tc_tensor *tc_sin(tc_tensor *a) {
    TC_API_ENTER();
    return tc_unary_api("tc_sin", a, U_FLOAT, build_sin, TC_AG_SIN);
}
TC_API tc_tensor *tc_cos(tc_tensor *a) {
    TC_API_ENTER();
    return tc_unary_api("tc_cos", a, U_FLOAT, build_cos, TC_AG_COS);
}
TC_API tc_tensor *tc_relu(tc_tensor *a) {
    TC_API_ENTER();
    return tc_unary_api("tc_relu", a, U_ANY, build_relu, TC_AG_RELU);
}
TC_API tc_tensor *tc_sigmoid(tc_tensor *a) {
    TC_API_ENTER();
    return tc_unary_api("tc_sigmoid", a, U_FLOAT, tc_ew_sigmoid, TC_AG_SIGMOID);
}
TC_API tc_tensor *tc_tanh(tc_tensor *a) {
    TC_API_ENTER();
    return tc_unary_api("tc_tanh", a, U_FLOAT, tc_ew_tanh, TC_AG_TANH);
}
TC_API tc_tensor *tc_recip(tc_tensor *a) {
    TC_API_ENTER();
    return tc_unary_api("tc_recip", a, U_FLOAT, build_recip, TC_AG_RECIP);
}
TC_API tc_tensor *tc_abs(tc_tensor *a) {
    TC_API_ENTER();
    return tc_unary_api("tc_abs", a, U_ANY, tc_ew_abs, TC_AG_ABS);
}
TC_API tc_tensor *tc_square(tc_tensor *a) {
    TC_API_ENTER();
    return tc_unary_api("tc_square", a, U_ANY, build_square, TC_AG_SQUARE);
}
TC_API tc_tensor *tc_logical_not(tc_tensor *a) {
    TC_API_ENTER();
    return tc_unary_api("tc_logical_not", a, U_ANY, build_logical_not, TC_AG_NONE);
}
