/* assign.c - tc_assign: an in-place update of a realized buffer, scheduled
 * lazily. Input: dst (a tensor whose node reads a buffer whole and in order)
 * and value (broadcast to dst's shape, cast to its dtype). Output: dst's node
 * becomes ASSIGN(value, dst's buffer node) (seen through a reshape when dst's
 * shape is not its buffer's); the scheduler writes value into that buffer
 * when dst is realized, after every reader of the old contents.
 *
 * A lazy dst, or a broadcast of a smaller buffer (a realized constant such as
 * tc_zeros), is realized first: an ASSIGN, CONTIGUOUS or COPY base in place
 * (it is dst's own buffer: an earlier pending assign lands in the same
 * storage), anything else through a CONTIGUOUS node, so dst gets a buffer of
 * its own even when its graph is shared with other tensors (interned nodes,
 * constants). Assign is not differentiable: a dst with recorded history
 * loses it (and with it requires_grad); a leaf keeps its flag and gradient. */
#include "tensor.h"

#include <string.h>

/* value's shape broadcasts to dst's (one way: value's dims are 1 or equal) */
TC_MUST_USE static tc_status check_shapes(const tc_node *dst, const tc_node *value) {
    bool ok = value->ndim <= dst->ndim;
    int extra = dst->ndim - value->ndim;
    for (int i = 0; ok && i < value->ndim; i++)
        ok = value->shape[i] == 1 || value->shape[i] == dst->shape[i + extra];
    if (ok) return TC_OK;
    char b1[256], b2[256];
    return tc_error_set(TC_ERR_SHAPE, "tc_assign: cannot broadcast value of shape %s to dst's "
                        "shape %s", tc_fmt_shape(b1, sizeof b1, value->ndim, value->shape),
                        tc_fmt_shape(b2, sizeof b2, dst->ndim, dst->shape));
}

/* makes dst's node read a realized buffer (see the file comment) */
TC_MUST_USE static tc_status realize_dst(tc_tensor *dst, const char *api) {
    tc_node *base = tc_node_base(dst->node);
    /* a broadcast of a smaller buffer (a realized tc_zeros: one element seen
     * everywhere) has no place to write each element: it gets its own */
    bool is_broadcast = tc_node_numel(base) < tc_node_numel(dst->node);
    if (base->op == TC_OP_BUFFER && !is_broadcast) return TC_OK;
    bool is_own = !is_broadcast && (base->op == TC_OP_ASSIGN || base->op == TC_OP_CONTIGUOUS ||
                                    base->op == TC_OP_COPY);
    tc_node *n = is_own ? tc_node_retain(dst->node)
                        : tc_node_meta(TC_OP_CONTIGUOUS, dst->node->device, 1, &dst->node);
    if (!n) return tc_error_code();
    tc_status s = tc_engine_realize(&n, 1, api);
    if (s != TC_OK) {
        tc_node_release(n);
        return s;
    }
    tc_node_release(dst->node);
    dst->node = n;
    return TC_OK;
}

/* ASSIGN(value's node fitted to the buffer, the buffer node), seen in dst's
 * shape; a new reference */
static tc_node *assign_node(const tc_tensor *dst, const tc_tensor *value) {
    tc_node *d = dst->node, *target = tc_node_base(d);
    tc_node *v = tc_ew_broadcast(tc_ew_cast(tc_node_retain(value->node), d->dtype), d->ndim,
                                 d->shape);
    if (v && (v->ndim != target->ndim ||
              memcmp(v->shape, target->shape, sizeof(int64_t) * (size_t)v->ndim) != 0))
        v = tc_ew_reshape(v, target->ndim, target->shape);
    if (v && v->op == TC_OP_VIEW && v->srcs[0] == target && !tc_st_is_contiguous(v->st)) {
        /* x.assign(x.flip()): a kernel writing x while reading it elsewhere
         * would see its own writes, so the view is copied out first */
        tc_node *c = tc_node_meta(TC_OP_CONTIGUOUS, v->device, 1, &v);
        tc_node_release(v);
        v = c;
    }
    if (!v) return NULL;
    tc_node *srcs[2] = {v, target};
    tc_node *a = tc_node_meta(TC_OP_ASSIGN, d->device, 2, srcs);
    tc_node_release(v);
    if (!a || a->ndim == d->ndim) return a; /* same rank and numel: same shape */
    tc_node *r = tc_node_reshape(a, d->ndim, d->shape);
    tc_node_release(a);
    return r;
}

TC_MUST_USE tc_status tc_assign_prepare(tc_tensor *dst, const char *api) {
    tc_status s = realize_dst(dst, api);
    if (s == TC_OK && !tc_tensor_is_contiguous_buffer(dst->node)) {
        char b[256];
        s = tc_error_set(TC_ERR_INVALID, "%s: dst of shape %s is a view into part of a "
                         "buffer or out of its order; assign to the tensor that owns the buffer",
                         api, tc_fmt_shape(b, sizeof b, dst->node->ndim, dst->node->shape));
    }
    return s;
}

/* drops dst's recorded history: assign is not differentiable */
void tc_assign_forget_history(tc_tensor *dst) {
    if (!dst->ctx) return;
    tc_tensor *t = tc_tensor_wrap(tc_node_retain(dst->node));
    if (!t) return; /* out of memory: the history stays, harmlessly */
    t->ctx = dst->ctx; /* freed with the temporary handle, through the worklist */
    dst->ctx = NULL;
    dst->requires_grad = false;
    tc_release(t);
}

TC_API tc_status tc_assign(tc_tensor *dst, tc_tensor *value) {
    TC_API_ENTER();
    tc_lock();
    tc_status s = tc_tensor_check(dst, "tc_assign", "dst");
    if (s == TC_OK) s = tc_tensor_check(value, "tc_assign", "value");
    if (s == TC_OK && dst->node->device != value->node->device) {
        tc_dev *dd = tc_device_get(dst->node->device), *vd = tc_device_get(value->node->device);
        s = tc_error_set(TC_ERR_DEVICE, "tc_assign: dst is on %s but value is on %s",
                         dd ? dd->name : "?", vd ? vd->name : "?");
    }
    if (s == TC_OK) s = check_shapes(dst->node, value->node);
    if (s == TC_OK && value->node == dst->node) goto done; /* x = x */
    if (s == TC_OK) s = tc_assign_prepare(dst, "tc_assign");
    tc_node *a = s == TC_OK ? assign_node(dst, value) : NULL;
    if (s == TC_OK && !a) s = tc_error_code();
    if (s == TC_OK) {
        tc_node_release(dst->node);
        dst->node = a;
        tc_assign_forget_history(dst);
    }
done:
    tc_unlock();
    return s;
}
