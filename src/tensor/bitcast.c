/* bitcast.c - tc_bitcast: a's bits read as another dtype of the same size
 * (tinygrad's Tensor.bitcast, torch's Tensor.view(dtype)), elementwise, so
 * it fuses with what is around it. Not differentiable: a tensor that
 * requires grad is refused, as tinygrad does.
 *
 * Between integer, float32 and float64 dtypes the graph holds one BITCAST
 * node, which every renderer prints as a reinterpretation. float16 and
 * bfloat16 are held in float32 registers by some dialects (render.h), where a
 * BITCAST of their value would read a float32's bits, so their bits are
 * computed here from exact float32 arithmetic and integer ops instead:
 *   bfloat16 -> bits: the float32 (exact) bitcast to uint32, >> 16
 *   bits -> bfloat16: the bits << 16 bitcast to float32, cast (exact)
 *   float16 -> bits: from the float32 f (exact) and its bits u: sign u>>16
 *            & 0x8000; |f| >= 2^-14 (normal, inf, NaN): the exponent rebased
 *            ((u>>23 & 0xff) - 112, 31 for inf and NaN) << 10 | the top 10
 *            mantissa bits (u>>13 & 0x3ff); below (subnormal, zero): |f|*2^24
 *            as an integer (exact)
 *   bits -> float16: exponent e = b>>10 & 0x1f, mantissa m = b & 0x3ff;
 *            e = 0: m*2^-24 with the sign; e = 31: float32 bits of inf/NaN
 *            (0x7f800000 | m<<13); else float32 bits (e+112)<<23 | m<<13;
 *            cast to float16 (exact)
 * so a 16-bit float's bits go through uint16 (both ways for float16 <->
 * bfloat16). A NaN's payload survives; a signalling NaN may come out quiet
 * (the float32 conversions quiet it), as on most hardware. O(1) nodes. */
#include "tensor.h"

/* x (consumed) with op against an integer constant of x's dtype */
static tc_node *op_c(tc_op op, tc_node *x, int64_t v) {
    return tc_ew_binary(op, x, tc_ew_const(x, (double)v));
}

static tc_node *bits_as(tc_node *x, tc_dtype dt) { /* one BITCAST node (x consumed) */
    if (!x || x->dtype == dt) return x;
    tc_node *r = tc_node_alu(TC_OP_BITCAST, dt, 1, &x);
    tc_node_release(x);
    return r;
}

/* x < v (x borrowed), bool */
static tc_node *lt_c(tc_node *x, double v) {
    return tc_ew_binary(TC_OP_CMPLT, tc_ew_keep(x), tc_ew_const(x, v));
}

/* the uint16 bits of a float16 x (consumed) */
static tc_node *half_to_bits(tc_node *x) {
    /* int32 arithmetic: the masks drop what >> of a negative value shifts in */
    tc_node *f = tc_ew_cast(x, TC_FLOAT32), *u = bits_as(tc_ew_keep(f), TC_INT32);
    tc_node *sign = op_c(TC_OP_AND, op_c(TC_OP_SHR, tc_ew_keep(u), 16), 0x8000);
    tc_node *e = op_c(TC_OP_AND, op_c(TC_OP_SHR, tc_ew_keep(u), 23), 0xff);
    tc_node *is_special = tc_ew_not(lt_c(e, 255)); /* inf, NaN */
    tc_node *eh = tc_ew_where(is_special, e ? tc_ew_const(e, 31) : NULL,
                              op_c(TC_OP_ADD, tc_ew_keep(e), -112));
    tc_node_release(e);
    tc_node *normal = tc_ew_binary(TC_OP_OR, op_c(TC_OP_SHL, eh, 10),
                                   op_c(TC_OP_AND, op_c(TC_OP_SHR, u, 13), 0x3ff));
    tc_node *a = tc_ew_abs(tc_ew_keep(f));
    tc_node *is_small = lt_c(a, 1.0 / 16384); /* subnormal or zero in float16 (NaN: false) */
    tc_node *sub =
        tc_ew_cast(tc_ew_binary(TC_OP_MUL, a, f ? tc_ew_const(f, 16777216.0) : NULL), TC_INT32);
    tc_node_release(f);
    tc_node *mag = tc_ew_where(is_small, sub, normal);
    return tc_ew_cast(tc_ew_binary(TC_OP_OR, sign, mag), TC_UINT16);
}

/* the float16 with the uint16 bits b (consumed) */
static tc_node *bits_to_half(tc_node *b) {
    tc_node *w = tc_ew_cast(b, TC_UINT32);
    tc_node *sign = op_c(TC_OP_AND, tc_ew_keep(w), 0x8000);
    tc_node *e = op_c(TC_OP_AND, op_c(TC_OP_SHR, tc_ew_keep(w), 10), 0x1f);
    tc_node *m = op_c(TC_OP_AND, w, 0x3ff);
    tc_node *is_sub = lt_c(e, 1), *is_special = tc_ew_not(lt_c(e, 31));
    tc_node *exp32 = tc_ew_where(is_special, e ? tc_ew_const(e, 255) : NULL,
                                 op_c(TC_OP_ADD, tc_ew_keep(e), 112));
    tc_node_release(e);
    tc_node *bits = tc_ew_binary(
        TC_OP_OR, op_c(TC_OP_SHL, tc_ew_keep(sign), 16),
        tc_ew_binary(TC_OP_OR, op_c(TC_OP_SHL, exp32, 23), op_c(TC_OP_SHL, tc_ew_keep(m), 13)));
    tc_node *normal = bits_as(bits, TC_FLOAT32);
    tc_node *mf = tc_ew_cast(m, TC_FLOAT32);
    tc_node *sub = tc_ew_binary(TC_OP_MUL, mf, mf ? tc_ew_const(mf, 1.0 / 16777216.0) : NULL);
    tc_node *neg_sub = tc_ew_unary(TC_OP_NEG, tc_ew_keep(sub));
    tc_node *is_neg = tc_ew_binary(TC_OP_CMPNE, sign, sign ? tc_ew_const(sign, 0) : NULL);
    tc_node *signed_sub = tc_ew_where(is_neg, neg_sub, sub); /* -0 for a negative zero */
    return tc_ew_cast(tc_ew_where(is_sub, signed_sub, normal), TC_FLOAT16);
}

/* x (consumed, a 16-bit dtype) as its uint16 bits */
static tc_node *to_u16(tc_node *x) {
    if (!x) return NULL;
    if (x->dtype == TC_FLOAT16) return half_to_bits(x);
    if (x->dtype != TC_BFLOAT16) return bits_as(x, TC_UINT16);
    return tc_ew_cast(op_c(TC_OP_SHR, bits_as(tc_ew_cast(x, TC_FLOAT32), TC_UINT32), 16),
                      TC_UINT16);
}

/* uint16 bits b (consumed) as 16-bit dtype dt */
static tc_node *from_u16(tc_node *b, tc_dtype dt) {
    if (!b) return NULL;
    if (dt == TC_FLOAT16) return bits_to_half(b);
    if (dt != TC_BFLOAT16) return bits_as(b, dt);
    return tc_ew_cast(bits_as(op_c(TC_OP_SHL, tc_ew_cast(b, TC_UINT32), 16), TC_FLOAT32),
                      TC_BFLOAT16);
}

static bool is_half(tc_dtype dt) {
    return dt == TC_FLOAT16 || dt == TC_BFLOAT16;
}

TC_API tc_tensor *tc_bitcast(tc_tensor *a, tc_dtype dt) {
    TC_API_ENTER();
    tc_lock();
    tc_tensor *out = NULL;
    if (tc_tensor_check(a, "tc_bitcast", "a") != TC_OK ||
        tc_tensor_check_dtype("tc_bitcast", dt) != TC_OK)
        goto done;
    tc_dtype from = a->node->dtype;
    size_t fs = tc_dtypes[from].size, ts = tc_dtypes[dt].size;
    if (fs != ts) {
        tc_error_set(TC_ERR_DTYPE, "tc_bitcast: %s (%zu bytes) to %s (%zu bytes): the sizes differ",
                     tc_dtypes[from].name, fs, tc_dtypes[dt].name, ts);
        goto done;
    }
    if (dt == TC_BOOL && from != TC_BOOL) { /* bytes other than 0 and 1 are no bools */
        tc_error_set(TC_ERR_DTYPE,
                     "tc_bitcast: %s to bool (only 0 and 1 are bools; compare with 0)",
                     tc_dtypes[from].name);
        goto done;
    }
    if (a->requires_grad && from != dt) {
        tc_error_set(TC_ERR_INVALID, "tc_bitcast: a requires grad and a bitcast has no gradient "
                                     "(detach it first)");
        goto done;
    }
    tc_node *x = tc_node_retain(a->node);
    tc_node *r = is_half(from) || is_half(dt) ? from_u16(to_u16(x), dt)
                 : from == TC_BOOL            ? tc_ew_cast(x, dt) /* 0 and 1: the same bytes */
                                              : bits_as(x, dt);
    out = tc_tensor_wrap(r);
done:
    tc_unlock();
    return out;
}
