/* binary.c - the public binary ops, tc_where and tc_cast: checks (NULL
 * handles, same device, numpy broadcasting, dtype rules), then promotion with
 * tc_dtype_promote, broadcasting by reshape+expand, and the op composed from
 * primitives:
 *   sub = a + -b       div = a * recip(b) (ints -> float32)    idiv, mod: ints only
 *   minimum = flip(max(flip a, flip b)) with an order-reversing flip per dtype
 *   lt = CMPLT  gt = CMPLT(b,a)  ne = CMPNE  eq = !CMPNE  ge = !lt  le = !gt
 *   lshift, rshift = SHL, SHR (ints only) with out-of-range counts defined
 *   (floats: le = lt|eq and ge = gt|eq, so comparisons with NaN are false)
 *   pow = exp2(b*log2|a|), sign fixed for negative a (odd integer b: negative,
 *   non-integer b: NaN), 1 where b == 0 or a == 1 (C's pow, even for NaN). */
#include "tensor.h"

#include <math.h>
#include <string.h>

/* ---- operands ---- */

static const char *device_name(int id) {
    tc_dev *d = tc_device_get(id);
    return d ? d->name : "?";
}

/* checks n handles (names[i] for messages) for NULL, one device and
 * broadcastable shapes; the broadcast shape goes to ndim/shape */
TC_MUST_USE static tc_status check_operands(const char *api, int n, tc_tensor *const *ts,
                                const char *const *names, int *ndim, int64_t *shape) {
    for (int i = 0; i < n; i++)
        if (tc_tensor_check(ts[i], api, names[i]) != TC_OK) return TC_ERR_INVALID;
    for (int i = 1; i < n; i++)
        if (ts[i]->node->device != ts[0]->node->device)
            return tc_error_set(TC_ERR_DEVICE, "%s: %s is on %s but %s is on %s", api, names[0],
                                device_name(ts[0]->node->device), names[i],
                                device_name(ts[i]->node->device));
    *ndim = ts[0]->node->ndim;
    memcpy(shape, ts[0]->node->shape, sizeof(int64_t) * (size_t)*ndim);
    for (int i = 1; i < n; i++) {
        const tc_node *x = ts[i]->node;
        int nd = x->ndim > *ndim ? x->ndim : *ndim;
        int64_t out[TC_MAX_DIMS];
        for (int d = 0; d < nd; d++) {
            int ia = d - (nd - *ndim), ib = d - (nd - x->ndim);
            int64_t sa = ia >= 0 ? shape[ia] : 1, sb = ib >= 0 ? x->shape[ib] : 1;
            if (sa != sb && sa != 1 && sb != 1) {
                char b1[256], b2[256];
                return tc_error_set(TC_ERR_SHAPE, "%s: cannot broadcast %s with %s", api,
                                    tc_fmt_shape(b1, sizeof b1, *ndim, shape),
                                    tc_fmt_shape(b2, sizeof b2, x->ndim, x->shape));
            }
            out[d] = sa == 1 ? sb : sa;
        }
        *ndim = nd;
        memcpy(shape, out, sizeof(int64_t) * (size_t)nd);
    }
    return TC_OK;
}

/* t's node cast to dt and broadcast to shape (new reference) */
static tc_node *operand(const tc_tensor *t, tc_dtype dt, int ndim, const int64_t *shape) {
    return tc_ew_broadcast(tc_ew_cast(tc_node_retain(t->node), dt), ndim, shape);
}

/* ---- binary builders: a and b consumed, same shape and dtype (an op that
 * is one primitive needs none: binary() takes the primitive) ---- */

static tc_node *build_div(tc_node *a, tc_node *b) {
    return tc_ew_binary(TC_OP_MUL, a, tc_ew_unary(TC_OP_RECIP, b));
}
static tc_node *build_minimum(tc_node *a, tc_node *b) {
    return tc_ew_order_flip(tc_ew_binary(TC_OP_MAX, tc_ew_order_flip(a), tc_ew_order_flip(b)));
}

static tc_node *build_lt(tc_node *a, tc_node *b) {
    return tc_ew_binary(TC_OP_CMPLT, a, b);
}
static tc_node *build_gt(tc_node *a, tc_node *b) {
    return tc_ew_binary(TC_OP_CMPLT, b, a);
}
static tc_node *build_eq(tc_node *a, tc_node *b) {
    return tc_ew_not(tc_ew_binary(TC_OP_CMPNE, a, b));
}
/* a <= b: !(b < a) for ints and bool; (a < b) | (a == b) for floats (NaN -> false) */
static tc_node *build_le(tc_node *a, tc_node *b) {
    if (a && !tc_dtypes[a->dtype].is_float) return tc_ew_not(build_gt(a, b));
    tc_node *a2 = tc_ew_keep(a), *b2 = tc_ew_keep(b);
    return tc_ew_binary(TC_OP_OR, build_lt(a, b), build_eq(a2, b2));
}
static tc_node *build_ge(tc_node *a, tc_node *b) {
    return build_le(b, a);
}

/* a << b and a >> b with every count defined: a count outside 0..bits-1
 * shifts everything out (lshift: 0; rshift: 0, or -1 for a negative signed
 * a, as one more arithmetic shift would give). The shift itself only ever
 * sees counts in range, so no kernel shifts by more than its width. */
static tc_node *build_shift(tc_node *a, tc_node *b, bool is_left) {
    if (!a || !b) {
        tc_node_release(a);
        tc_node_release(b);
        return NULL;
    }
    int64_t bits = (int64_t)tc_dtypes[a->dtype].size * 8;
    bool is_signed = tc_dtypes[a->dtype].is_signed;
    tc_node *lo = tc_ew_const(b, 0), *hi = tc_ew_const(b, (double)bits), *b2 = tc_ew_keep(b);
    tc_node *in_range = tc_ew_binary(TC_OP_AND, tc_ew_not(tc_ew_binary(TC_OP_CMPLT, b2, lo)),
                                     tc_ew_binary(TC_OP_CMPLT, tc_ew_keep(b), hi));
    /* out of range: shift by 0 (then replaced), or by bits-1 (the sign fill) */
    bool is_fill = !is_left && is_signed;
    tc_node *spare = tc_ew_const(b, is_fill ? (double)(bits - 1) : 0);
    tc_node *count = tc_ew_where(tc_ew_keep(in_range), b, spare);
    tc_node *zero = tc_ew_const(a, 0);
    tc_node *r = tc_ew_binary(is_left ? TC_OP_SHL : TC_OP_SHR, a, count);
    if (is_fill) {
        tc_node_release(in_range);
        tc_node_release(zero);
        return r;
    }
    return tc_ew_where(in_range, r, zero);
}
static tc_node *build_lshift(tc_node *a, tc_node *b) {
    return build_shift(a, b, true);
}
static tc_node *build_rshift(tc_node *a, tc_node *b) {
    return build_shift(a, b, false);
}

/* for float b (borrowed): is_int = b is a whole number, is_odd = an odd one.
 * |b| >= 2^24, inf and NaN become 0 first (all such floats are even
 * integers), so the int32 cast never overflows. */
static void int_parts(tc_node *b, tc_node **is_int, tc_node **is_odd) {
    tc_node *lim = tc_ew_const(b, 16777216.0), *zero = tc_ew_const(b, 0);
    tc_node *abs_b = tc_ew_abs(tc_ew_keep(b));
    tc_node *t = tc_ew_where(tc_ew_binary(TC_OP_CMPLT, abs_b, lim), tc_ew_keep(b), zero);
    tc_node *ti = tc_ew_cast(tc_ew_keep(t), TC_INT32);
    tc_node *ti2 = tc_ew_keep(ti), *one_i = tc_ew_const(ti, 1), *zero_i = tc_ew_const(ti, 0);
    tc_dtype dt = b->dtype;
    *is_int = tc_ew_not(tc_ew_binary(TC_OP_CMPNE, tc_ew_cast(ti, dt), t));
    *is_odd = tc_ew_binary(TC_OP_CMPNE, tc_ew_binary(TC_OP_AND, ti2, one_i), zero_i);
}

tc_node *tc_ew_pow(tc_node *a, tc_node *b) {
    if (!a || !b) {
        tc_node_release(a);
        tc_node_release(b);
        return NULL;
    }
    tc_node *is_int, *is_odd;
    int_parts(b, &is_int, &is_odd);
    tc_node *zero_a = tc_ew_const(a, 0), *zero_b = tc_ew_const(b, 0), *one = tc_ew_const(a, 1);
    tc_node *one_cmp = tc_ew_const(a, 1), *nan = tc_ew_const(a, NAN);
    tc_node *abs_a = tc_ew_abs(tc_ew_keep(a)), *a2 = tc_ew_keep(a), *b1 = tc_ew_keep(b);
    tc_node *mag =
        tc_ew_unary(TC_OP_EXP2, tc_ew_binary(TC_OP_MUL, b1, tc_ew_unary(TC_OP_LOG2, abs_a)));
    tc_node *mag2 = tc_ew_keep(mag), *mag3 = tc_ew_keep(mag);
    tc_node *signed_mag = tc_ew_where(is_odd, tc_ew_unary(TC_OP_NEG, mag), mag2);
    tc_node *neg_base = tc_ew_where(is_int, signed_mag, nan);
    tc_node *r = tc_ew_where(tc_ew_binary(TC_OP_CMPLT, a, zero_a), neg_base, mag3);
    tc_node *b_is_zero = tc_ew_not(tc_ew_binary(TC_OP_CMPNE, b, zero_b));
    tc_node *a_is_one = tc_ew_not(tc_ew_binary(TC_OP_CMPNE, a2, one_cmp));
    return tc_ew_where(tc_ew_binary(TC_OP_OR, b_is_zero, a_is_one), one, r);
}

/* ---- public binary ops ---- */

typedef enum {
    B_ANY,    /* every dtype */
    B_NOBOOL, /* every dtype but bool (sub) */
    B_FLOAT,  /* ints and bool are computed in float32 (div, pow) */
    B_INT,    /* int32, int64, uint8 only (idiv, mod) */
    B_LOGIC,  /* bool and integer dtypes (and, or, xor) */
} binary_kind;

/* the promoted dtype of a op b into *dt, or a TC_ERR_DTYPE naming api */
TC_MUST_USE static tc_status binary_dtype(const char *api, binary_kind kind, tc_dtype a, tc_dtype b,
                              tc_dtype *dt) {
    tc_dtype p = tc_dtype_promote(a, b);
    bool is_float = tc_dtypes[p].is_float;
    const char *need = NULL;
    if (kind == B_NOBOOL && p == TC_BOOL) need = "not defined for bool tensors";
    if (kind == B_INT && (is_float || p == TC_BOOL)) need = "needs integer tensors";
    if (kind == B_LOGIC && is_float) need = "needs bool or integer tensors";
    if (need)
        return tc_error_set(TC_ERR_DTYPE, "%s: %s, got %s and %s", api, need, tc_dtypes[a].name,
                            tc_dtypes[b].name);
    *dt = kind == B_FLOAT && !is_float ? TC_FLOAT32 : p;
    return TC_OK;
}

/* the public binary op `api`: checks, promotes, broadcasts, builds (with
 * build, or as the primitive op when build is NULL), and records `ag` for
 * autograd */
static tc_tensor *binary_make(const char *api, tc_tensor *a, tc_tensor *b, binary_kind kind,
                              tc_op op, tc_node *(*build)(tc_node *, tc_node *), tc_ag_op ag) {
    tc_lock();
    tc_tensor *out = NULL, *ts[2] = {a, b};
    static const char *const names[2] = {"a", "b"};
    int ndim = 0;
    int64_t shape[TC_MAX_DIMS];
    tc_dtype dt = TC_FLOAT32;
    if (check_operands(api, 2, ts, names, &ndim, shape) == TC_OK &&
        binary_dtype(api, kind, a->node->dtype, b->node->dtype, &dt) == TC_OK) {
        tc_node *x = operand(a, dt, ndim, shape), *y = operand(b, dt, ndim, shape);
        tc_node *r = build ? build(x, y) : tc_ew_binary(op, x, y);
        out = tc_ag_record(tc_tensor_wrap(r), ag, 2, ts, NULL);
    }
    tc_unlock();
    return out;
}

/* an op composed by build */
static tc_tensor *binary(const char *api, tc_tensor *a, tc_tensor *b, binary_kind kind,
                         tc_node *(*build)(tc_node *, tc_node *), tc_ag_op ag) {
    return binary_make(api, a, b, kind, TC_OP_COUNT, build, ag);
}

/* an op that is one primitive */
static tc_tensor *binary_op(const char *api, tc_tensor *a, tc_tensor *b, binary_kind kind, tc_op op,
                            tc_ag_op ag) {
    return binary_make(api, a, b, kind, op, NULL, ag);
}

TC_API tc_tensor *tc_add(tc_tensor *a, tc_tensor *b) {
    TC_API_ENTER();
    return binary_op("tc_add", a, b, B_ANY, TC_OP_ADD, TC_AG_ADD);
}
TC_API tc_tensor *tc_sub(tc_tensor *a, tc_tensor *b) {
    TC_API_ENTER();
    return binary("tc_sub", a, b, B_NOBOOL, tc_ew_sub, TC_AG_SUB);
}
TC_API tc_tensor *tc_mul(tc_tensor *a, tc_tensor *b) {
    TC_API_ENTER();
    return binary_op("tc_mul", a, b, B_ANY, TC_OP_MUL, TC_AG_MUL);
}
TC_API tc_tensor *tc_div(tc_tensor *a, tc_tensor *b) {
    TC_API_ENTER();
    return binary("tc_div", a, b, B_FLOAT, build_div, TC_AG_DIV);
}
TC_API tc_tensor *tc_idiv(tc_tensor *a, tc_tensor *b) {
    TC_API_ENTER();
    return binary_op("tc_idiv", a, b, B_INT, TC_OP_IDIV, TC_AG_NONE);
}
TC_API tc_tensor *tc_mod(tc_tensor *a, tc_tensor *b) {
    TC_API_ENTER();
    return binary_op("tc_mod", a, b, B_INT, TC_OP_MOD, TC_AG_NONE);
}
TC_API tc_tensor *tc_maximum(tc_tensor *a, tc_tensor *b) {
    TC_API_ENTER();
    return binary_op("tc_maximum", a, b, B_ANY, TC_OP_MAX, TC_AG_MAXIMUM);
}
TC_API tc_tensor *tc_minimum(tc_tensor *a, tc_tensor *b) {
    TC_API_ENTER();
    return binary("tc_minimum", a, b, B_ANY, build_minimum, TC_AG_MINIMUM);
}
TC_API tc_tensor *tc_pow(tc_tensor *a, tc_tensor *b) {
    TC_API_ENTER();
    return binary("tc_pow", a, b, B_FLOAT, tc_ew_pow, TC_AG_POW);
}
TC_API tc_tensor *tc_lt(tc_tensor *a, tc_tensor *b) {
    TC_API_ENTER();
    return binary_op("tc_lt", a, b, B_ANY, TC_OP_CMPLT, TC_AG_NONE);
}
TC_API tc_tensor *tc_gt(tc_tensor *a, tc_tensor *b) {
    TC_API_ENTER();
    return binary("tc_gt", a, b, B_ANY, build_gt, TC_AG_NONE);
}
TC_API tc_tensor *tc_le(tc_tensor *a, tc_tensor *b) {
    TC_API_ENTER();
    return binary("tc_le", a, b, B_ANY, build_le, TC_AG_NONE);
}
TC_API tc_tensor *tc_ge(tc_tensor *a, tc_tensor *b) {
    TC_API_ENTER();
    return binary("tc_ge", a, b, B_ANY, build_ge, TC_AG_NONE);
}
TC_API tc_tensor *tc_eq(tc_tensor *a, tc_tensor *b) {
    TC_API_ENTER();
    return binary("tc_eq", a, b, B_ANY, build_eq, TC_AG_NONE);
}
TC_API tc_tensor *tc_ne(tc_tensor *a, tc_tensor *b) {
    TC_API_ENTER();
    return binary_op("tc_ne", a, b, B_ANY, TC_OP_CMPNE, TC_AG_NONE);
}
TC_API tc_tensor *tc_lshift(tc_tensor *a, tc_tensor *b) {
    TC_API_ENTER();
    return binary("tc_lshift", a, b, B_INT, build_lshift, TC_AG_NONE);
}
TC_API tc_tensor *tc_rshift(tc_tensor *a, tc_tensor *b) {
    TC_API_ENTER();
    return binary("tc_rshift", a, b, B_INT, build_rshift, TC_AG_NONE);
}
TC_API tc_tensor *tc_logical_and(tc_tensor *a, tc_tensor *b) {
    TC_API_ENTER();
    return binary_op("tc_logical_and", a, b, B_LOGIC, TC_OP_AND, TC_AG_NONE);
}
TC_API tc_tensor *tc_logical_or(tc_tensor *a, tc_tensor *b) {
    TC_API_ENTER();
    return binary_op("tc_logical_or", a, b, B_LOGIC, TC_OP_OR, TC_AG_NONE);
}
TC_API tc_tensor *tc_logical_xor(tc_tensor *a, tc_tensor *b) {
    TC_API_ENTER();
    return binary_op("tc_logical_xor", a, b, B_LOGIC, TC_OP_XOR, TC_AG_NONE);
}

/* ---- where and cast ---- */

TC_API tc_tensor *tc_where(tc_tensor *cond, tc_tensor *a, tc_tensor *b) {
    TC_API_ENTER();
    tc_lock();
    tc_tensor *out = NULL, *ts[3] = {cond, a, b};
    static const char *const names[3] = {"cond", "a", "b"};
    int ndim = 0;
    int64_t shape[TC_MAX_DIMS];
    if (check_operands("tc_where", 3, ts, names, &ndim, shape) == TC_OK) {
        tc_dtype dt = tc_dtype_promote(a->node->dtype, b->node->dtype);
        tc_node *c = operand(cond, TC_BOOL, ndim, shape);
        tc_node *x = operand(a, dt, ndim, shape), *y = operand(b, dt, ndim, shape);
        out = tc_ag_record(tc_tensor_wrap(tc_ew_where(c, x, y)), TC_AG_WHERE, 3, ts, NULL);
    }
    tc_unlock();
    return out;
}

TC_API tc_tensor *tc_cast(tc_tensor *a, tc_dtype dt) {
    TC_API_ENTER();
    tc_lock();
    tc_tensor *out = NULL;
    if (tc_tensor_check(a, "tc_cast", "a") == TC_OK &&
        tc_tensor_check_dtype("tc_cast", dt) == TC_OK) {
        bool is_diff = tc_dtypes[a->node->dtype].is_float && tc_dtypes[dt].is_float;
        out = tc_ag_record(tc_tensor_wrap(tc_ew_cast(tc_node_retain(a->node), dt)),
                           is_diff ? TC_AG_CAST : TC_AG_NONE, 1, &a, NULL);
    }
    tc_unlock();
    return out;
}
