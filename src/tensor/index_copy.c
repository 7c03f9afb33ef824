/* index_copy.c - writing by integer tensors: tc_index_copy, torch's
 * index_copy_ (an indexed store into an existing buffer, in place, as an
 * assign): dst[..., index[j], ...] = value[..., j, ...] along one axis.
 *
 * Input: dst (a tensor owning its buffer, as tc_assign's dst), an axis, a
 * 0-d or 1-d integer index of m entries, value (broadcast to dst's shape
 * with the axis at m, cast to dst's dtype). Output: dst's node becomes
 * ASSIGN(PUT(index, value, target), target): the scheduler gives it a kernel
 * of its own kind that loops over value's m rows only and writes them into
 * dst's buffer (O(m x the other axes), not O(dst)), computing value and
 * index in the same loops (elementwise work on them fuses; a reduce is
 * realized first), after every reader of the old contents.
 *
 * Out of range: an index outside [0, size along the axis) is an error at the
 * call when the index is known on the host (a realized buffer or a
 * constant, read here: O(m)); in a kernel (a lazy index, or a jit replay
 * with new index data) such an entry writes nothing. Two equal indices: the
 * later entry's values stay (the kernel writes in order, one thread).
 * Not differentiable: dst loses its recorded history, as with tc_assign. */
#include "tensor.h"

#include <string.h>

static bool is_int_dtype(tc_dtype dt) {
    return dt == TC_INT32 || dt == TC_INT64 || dt == TC_UINT8;
}

TC_MUST_USE static tc_status check_args(tc_tensor *dst, int axis, tc_tensor *index,
                                        tc_tensor *value, int *ax) {
    static const char *const names[3] = {"dst", "index", "value"};
    tc_tensor *ts[3] = {dst, index, value};
    const char *api = "tc_index_copy";
    tc_status s = tc_tensor_check(dst, api, "dst");
    if (s == TC_OK) s = tc_tensor_check(index, api, "index");
    if (s == TC_OK) s = tc_tensor_check(value, api, "value");
    if (s == TC_OK) s = tc_tensor_same_device(api, 3, ts, names);
    if (s == TC_OK && dst->node->ndim == 0)
        s = tc_error_set(TC_ERR_SHAPE, "%s: dst is 0-d: it has no axis to index", api);
    if (s == TC_OK) s = tc_tensor_axis(api, dst->node->ndim, axis, ax);
    if (s == TC_OK && !is_int_dtype(index->node->dtype))
        s = tc_error_set(TC_ERR_DTYPE, "%s: index is %s, not an integer dtype", api,
                         tc_dtypes[index->node->dtype].name);
    if (s == TC_OK && index->node->ndim > 1)
        s = tc_error_set(TC_ERR_SHAPE, "%s: index has %d dims; it must be 0-d or 1-d", api,
                         index->node->ndim);
    return s;
}

/* value's shape broadcasts (one way) to want */
TC_MUST_USE static tc_status check_value(const tc_node *value, int ndim, const int64_t *want,
                                         int ax, int64_t m) {
    bool ok = value->ndim <= ndim;
    int extra = ndim - value->ndim;
    for (int i = 0; ok && i < value->ndim; i++)
        ok = value->shape[i] == 1 || value->shape[i] == want[i + extra];
    if (ok) return TC_OK;
    char b1[256], b2[256];
    return tc_error_set(TC_ERR_SHAPE,
                        "tc_index_copy: value of shape %s does not broadcast to %s "
                        "(dst's shape with axis %d at the %lld indices)",
                        tc_fmt_shape(b1, sizeof b1, value->ndim, value->shape),
                        tc_fmt_shape(b2, sizeof b2, ndim, want), ax, (long long)m);
}

/* an index known on the host (a realized buffer or a constant, seen through
 * views) is checked against [0, n) here; a lazy one is left to the kernel */
TC_MUST_USE static tc_status check_host_index(tc_node *index, int ax, int64_t n) {
    tc_op op = tc_node_base(index)->op;
    if (op != TC_OP_BUFFER && op != TC_OP_CONST) return TC_OK;
    int64_t m = tc_node_numel(index);
    size_t size = tc_dtypes[index->dtype].size;
    unsigned char *v = tc_malloc(m ? (size_t)m * size : 1);
    if (!v) return tc_error_set(TC_ERR_MEMORY, "tc_index_copy: out of memory reading the index");
    tc_status s = tc_ref_eval(index, v);
    for (int64_t i = 0; s == TC_OK && i < m; i++) {
        int64_t k = index->dtype == TC_INT64   ? ((int64_t *)v)[i]
                    : index->dtype == TC_INT32 ? ((int32_t *)v)[i]
                                               : ((uint8_t *)v)[i];
        if (k < 0 || k >= n)
            s = tc_error_set(TC_ERR_INVALID,
                             "tc_index_copy: index[%lld] = %lld is outside "
                             "[0, %lld), the size of dst's axis %d",
                             (long long)i, (long long)k, (long long)n, ax);
    }
    tc_free(v);
    return s;
}

/* n, or a contiguous copy of it when it reads dst's buffer itself (the
 * kernel writing the buffer must not read it); consumes n */
static tc_node *not_from(tc_node *n, const tc_node *buffer) {
    if (!n || tc_node_base(n) != buffer) return n;
    tc_node *c = tc_node_meta(TC_OP_CONTIGUOUS, n->device, 1, &n);
    tc_node_release(n);
    return c;
}

/* ASSIGN(PUT(index, value, target), target) in dst's shape; a new reference */
static tc_node *put_node(const tc_tensor *dst, int ax, const tc_tensor *index,
                         const tc_tensor *value, int64_t m) {
    tc_node *d = dst->node, *target = tc_node_base(d);
    int64_t shape[TC_MAX_DIMS], one[TC_MAX_DIMS];
    for (int i = 0; i < d->ndim; i++)
        shape[i] = i == ax ? m : d->shape[i], one[i] = i == ax ? m : 1;
    tc_node *v = tc_ew_broadcast(tc_ew_cast(tc_node_retain(value->node), d->dtype), d->ndim, shape);
    tc_node *k =
        tc_ew_broadcast(tc_ew_reshape(tc_node_retain(index->node), d->ndim, one), d->ndim, shape);
    v = not_from(v, target);
    k = not_from(k, target);
    tc_node *put = v && k ? tc_node_put(k, v, target, ax, d->shape) : NULL;
    tc_node_release(v);
    tc_node_release(k);
    if (!put) return NULL;
    tc_node *srcs[2] = {put, target};
    tc_node *a = tc_node_meta(TC_OP_ASSIGN, d->device, 2, srcs);
    tc_node_release(put);
    return a;
}

TC_API tc_status tc_index_copy(tc_tensor *dst, int axis, tc_tensor *index, tc_tensor *value) {
    TC_API_ENTER();
    tc_lock();
    int ax = 0;
    tc_status s = check_args(dst, axis, index, value, &ax);
    int64_t m = s == TC_OK ? tc_node_numel(index->node) : 0, want[TC_MAX_DIMS];
    for (int i = 0; s == TC_OK && i < dst->node->ndim; i++)
        want[i] = i == ax ? m : dst->node->shape[i];
    if (s == TC_OK) s = check_value(value->node, dst->node->ndim, want, ax, m);
    if (s == TC_OK) s = check_host_index(index->node, ax, dst->node->shape[ax]);
    if (s == TC_OK) s = tc_assign_prepare(dst, "tc_index_copy");
    tc_node *a = s == TC_OK ? put_node(dst, ax, index, value, m) : NULL;
    if (s == TC_OK && !a) s = tc_error_code();
    if (s == TC_OK) {
        tc_node_release(dst->node);
        dst->node = a;
        tc_assign_forget_history(dst);
    }
    tc_unlock();
    return s;
}
