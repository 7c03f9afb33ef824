/* movement.c - reshape, permute, transpose, expand, pad, shrink, flip and
 * contiguous. All but contiguous are views: they check the user's arguments
 * here (so messages name the public call and its values), then build a VIEW
 * node through graph.h without copying. An identity movement returns a new
 * handle on the same node. */
#include "tensor.h"

#include <string.h>

/* the handle check shared by every call here */
static bool arg_ok(const char *api, const tc_tensor *a, const void *p, const char *what) {
    if (tc_tensor_check(a, api, "a") != TC_OK) return false;
    if (a->node->ndim > 0 && !p) {
        tc_error_set(TC_ERR_INVALID, "%s: %s is NULL", api, what);
        return false;
    }
    return true;
}

/* ---- reshape ---- */

/* shape with its -1 resolved against numel into out; TC_ERR_SHAPE otherwise */
TC_MUST_USE static tc_status resolve_reshape(const tc_node *x, int ndim, const int64_t *shape, int64_t *out) {
    char b1[256], b2[256];
    int infer = -1;
    int64_t known = 1;
    bool has_zero = false, is_overflow = false;
    for (int i = 0; i < ndim; i++) {
        out[i] = shape[i];
        if (shape[i] == -1 && infer < 0) infer = i;
        else if (shape[i] == -1)
            return tc_error_set(TC_ERR_SHAPE, "tc_reshape: only one -1 allowed in %s",
                                tc_fmt_shape(b1, sizeof b1, ndim, shape));
        else if (shape[i] < 0)
            return tc_error_set(TC_ERR_SHAPE, "tc_reshape: negative size %lld in %s",
                                (long long)shape[i], tc_fmt_shape(b1, sizeof b1, ndim, shape));
        else if (shape[i] == 0) has_zero = true;
        else if (known > INT64_MAX / shape[i]) is_overflow = true;
        else known *= shape[i];
    }
    int64_t numel = tc_node_numel(x);
    if (has_zero) known = 0;
    bool is_ok = !is_overflow || has_zero;
    if (is_ok && infer >= 0) {
        is_ok = known != 0 && numel % known == 0;
        if (is_ok) out[infer] = numel / known;
    } else {
        is_ok = is_ok && known == numel;
    }
    if (!is_ok)
        return tc_error_set(TC_ERR_SHAPE, "tc_reshape: cannot reshape %s to %s",
                            tc_fmt_shape(b1, sizeof b1, x->ndim, x->shape),
                            tc_fmt_shape(b2, sizeof b2, ndim, shape));
    return TC_OK;
}

TC_API tc_tensor *tc_reshape(tc_tensor *a, int ndim, const int64_t *shape) {
    TC_API_ENTER();
    tc_lock();
    tc_tensor *out = NULL;
    int64_t s[TC_MAX_DIMS];
    if (tc_tensor_check(a, "tc_reshape", "a") != TC_OK) goto done;
    if (ndim < 0 || ndim > TC_MAX_DIMS) {
        tc_error_set(TC_ERR_SHAPE, "tc_reshape: ndim %d is out of range 0..%d", ndim, TC_MAX_DIMS);
        goto done;
    }
    if (ndim > 0 && !shape) {
        tc_error_set(TC_ERR_INVALID, "tc_reshape: shape is NULL for ndim %d", ndim);
        goto done;
    }
    if (resolve_reshape(a->node, ndim, shape, s) == TC_OK)
        out = tc_ag_record(tc_tensor_wrap(tc_node_reshape(a->node, ndim, s)), TC_AG_RESHAPE, 1,
                           &a, NULL);
done:
    tc_unlock();
    return out;
}

/* ---- permute, transpose ---- */

static tc_tensor *permute(const char *api, tc_tensor *a, const int *order) {
    int ndim = a->node->ndim;
    tc_ag_args args = {0};
    int *norm = args.order;
    uint32_t seen = 0;
    for (int i = 0; i < ndim; i++) {
        if (tc_tensor_axis(api, ndim, order[i], &norm[i]) != TC_OK) return NULL;
        if (seen & (1u << norm[i])) {
            tc_error_set(TC_ERR_SHAPE, "%s: axis %d appears twice in the order", api, order[i]);
            return NULL;
        }
        seen |= 1u << norm[i];
    }
    return tc_ag_record(tc_tensor_wrap(tc_node_permute(a->node, norm)), TC_AG_PERMUTE, 1, &a,
                        &args);
}

TC_API tc_tensor *tc_permute(tc_tensor *a, const int *order) {
    TC_API_ENTER();
    tc_lock();
    tc_tensor *out =
        arg_ok("tc_permute", a, order, "order") ? permute("tc_permute", a, order) : NULL;
    tc_unlock();
    return out;
}

TC_API tc_tensor *tc_transpose(tc_tensor *a, int axis0, int axis1) {
    TC_API_ENTER();
    tc_lock();
    tc_tensor *out = NULL;
    int ax0 = 0, ax1 = 0, order[TC_MAX_DIMS];
    if (tc_tensor_check(a, "tc_transpose", "a") == TC_OK &&
        tc_tensor_axis("tc_transpose", a->node->ndim, axis0, &ax0) == TC_OK &&
        tc_tensor_axis("tc_transpose", a->node->ndim, axis1, &ax1) == TC_OK) {
        for (int i = 0; i < a->node->ndim; i++) order[i] = i;
        order[ax0] = ax1;
        order[ax1] = ax0;
        out = permute("tc_transpose", a, order);
    }
    tc_unlock();
    return out;
}

/* ---- expand ---- */

TC_MUST_USE static tc_status resolve_expand(const tc_node *x, int ndim, const int64_t *shape, int64_t *out) {
    char b1[256], b2[256];
    int extra = ndim - x->ndim;
    if (ndim < x->ndim || ndim > TC_MAX_DIMS)
        return tc_error_set(TC_ERR_SHAPE, "tc_expand: cannot expand %d dims to %d", x->ndim, ndim);
    for (int i = 0; i < ndim; i++) {
        int64_t src = i < extra ? 1 : x->shape[i - extra];
        out[i] = shape[i] == -1 && i >= extra ? src : shape[i];
        if (out[i] < 0 || (out[i] != src && src != 1))
            return tc_error_set(TC_ERR_SHAPE, "tc_expand: cannot expand %s to %s",
                                tc_fmt_shape(b1, sizeof b1, x->ndim, x->shape),
                                tc_fmt_shape(b2, sizeof b2, ndim, shape));
    }
    return tc_tensor_check_shape("tc_expand", ndim, out);
}

TC_API tc_tensor *tc_expand(tc_tensor *a, int ndim, const int64_t *shape) {
    TC_API_ENTER();
    tc_lock();
    tc_tensor *out = NULL;
    int64_t s[TC_MAX_DIMS];
    if (tc_tensor_check(a, "tc_expand", "a") != TC_OK) goto done;
    if (ndim > 0 && !shape) {
        tc_error_set(TC_ERR_INVALID, "tc_expand: shape is NULL for ndim %d", ndim);
        goto done;
    }
    if (resolve_expand(a->node, ndim, shape, s) == TC_OK)
        out = tc_ag_record(tc_tensor_wrap(tc_ew_broadcast(tc_node_retain(a->node), ndim, s)),
                           TC_AG_EXPAND, 1, &a, NULL);
done:
    tc_unlock();
    return out;
}

/* ---- pad, shrink, flip ---- */

/* a through `move` (pad or shrink) by the 2*ndim checked numbers ba, recorded
 * as ag with ba as its args; a no-op gives a's node itself */
static tc_tensor *pad_or_shrink(tc_tensor *a, const int64_t *ba, bool is_noop, tc_ag_op ag,
                                tc_node *(*move)(tc_node *, const int64_t *)) {
    tc_ag_args args = {0};
    memcpy(args.pads, ba, sizeof(int64_t) * 2 * (size_t)a->node->ndim);
    tc_node *n = is_noop ? tc_node_retain(a->node) : move(a->node, ba);
    return tc_ag_record(tc_tensor_wrap(n), ag, 1, &a, &args);
}

TC_API tc_tensor *tc_pad(tc_tensor *a, const int64_t *before_after) {
    TC_API_ENTER();
    tc_lock();
    tc_tensor *out = NULL;
    if (!arg_ok("tc_pad", a, before_after, "before_after")) goto done;
    const tc_node *x = a->node;
    int64_t s[TC_MAX_DIMS];
    bool is_noop = true;
    for (int i = 0; i < x->ndim; i++) {
        int64_t b = before_after[2 * i], e = before_after[2 * i + 1];
        if (b < 0 || e < 0 || b > INT64_MAX / 4 || e > INT64_MAX / 4) {
            tc_error_set(TC_ERR_SHAPE,
                         "tc_pad: padding (%lld,%lld) for axis %d must be >= 0 "
                         "and not huge",
                         (long long)b, (long long)e, i);
            goto done;
        }
        s[i] = x->shape[i] + b + e;
        is_noop = is_noop && b == 0 && e == 0;
    }
    if (tc_tensor_check_shape("tc_pad", x->ndim, s) != TC_OK) goto done;
    out = pad_or_shrink(a, before_after, is_noop, TC_AG_PAD, tc_node_pad);
done:
    tc_unlock();
    return out;
}

TC_API tc_tensor *tc_shrink(tc_tensor *a, const int64_t *begin_end) {
    TC_API_ENTER();
    tc_lock();
    tc_tensor *out = NULL;
    if (!arg_ok("tc_shrink", a, begin_end, "begin_end")) goto done;
    const tc_node *x = a->node;
    bool is_noop = true;
    for (int i = 0; i < x->ndim; i++) {
        int64_t b = begin_end[2 * i], e = begin_end[2 * i + 1];
        if (b < 0 || b > e || e > x->shape[i]) {
            tc_error_set(TC_ERR_SHAPE,
                         "tc_shrink: range [%lld,%lld) is out of bounds for axis "
                         "%d of size %lld",
                         (long long)b, (long long)e, i, (long long)x->shape[i]);
            goto done;
        }
        is_noop = is_noop && b == 0 && e == x->shape[i];
    }
    out = pad_or_shrink(a, begin_end, is_noop, TC_AG_SHRINK, tc_node_shrink);
done:
    tc_unlock();
    return out;
}

/* naxes 0 flips every axis (numpy's flip(a, axis=None)) */
TC_API tc_tensor *tc_flip(tc_tensor *a, int naxes, const int *axes) {
    TC_API_ENTER();
    tc_lock();
    tc_tensor *out = NULL;
    uint32_t mask = 0;
    if (tc_tensor_check(a, "tc_flip", "a") == TC_OK &&
        tc_tensor_axes_mask("tc_flip", a->node->ndim, naxes, axes, &mask) == TC_OK) {
        bool flags[TC_MAX_DIMS];
        for (int i = 0; i < a->node->ndim; i++) flags[i] = (mask >> i) & 1;
        tc_ag_args args = {.axes = mask};
        out = tc_ag_record(
            tc_tensor_wrap(mask ? tc_node_flip(a->node, flags) : tc_node_retain(a->node)),
            TC_AG_FLIP, 1, &a, &args);
    }
    tc_unlock();
    return out;
}

/* ---- contiguous ---- */

/* n reads a realized buffer in its own row-major order (a BUFFER, or a
 * contiguous reshape of one) */
bool tc_tensor_is_contiguous_buffer(const tc_node *n) {
    const tc_node *base = n->op == TC_OP_VIEW ? n->srcs[0] : n;
    if (base->op != TC_OP_BUFFER) return false;
    return n == base || (tc_st_is_contiguous(n->st) && tc_node_numel(n) == tc_node_numel(base));
}

TC_API tc_tensor *tc_contiguous(tc_tensor *a) {
    TC_API_ENTER();
    tc_lock();
    tc_tensor *out = NULL;
    if (tc_tensor_check(a, "tc_contiguous", "a") == TC_OK) {
        tc_node *x = a->node;
        out = tc_ag_record(tc_tensor_wrap(tc_tensor_is_contiguous_buffer(x)
                                              ? tc_node_retain(x)
                                              : tc_node_meta(TC_OP_CONTIGUOUS, x->device, 1, &x)),
                           TC_AG_CONTIGUOUS, 1, &a, NULL);
    }
    tc_unlock();
    return out;
}

TC_API tc_tensor *tc_contiguous_backward(tc_tensor *a) {
    TC_API_ENTER();
    tc_lock();
    tc_tensor *out = NULL;
    if (tc_tensor_check(a, "tc_contiguous_backward", "a") == TC_OK)
        out = tc_ag_record(tc_tensor_wrap(tc_node_retain(a->node)), TC_AG_CONTIG_BW, 1, &a, NULL);
    tc_unlock();
    return out;
}
