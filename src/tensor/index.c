/* index.c - reading by integer tensors: tc_gather (tinygrad's and torch's
 * gather along one axis) and tc_index (x[..., index, ...] on one axis: an
 * embedding lookup), both on the GATHER primitive: a load whose place along
 * the axis is the index tensor's value, so the work is O(output), not
 * O(size of the axis x output) as a one-hot product would be. Its gradient
 * is a SCATTER: one kernel that adds the output's gradient at the same
 * places (grad_rules.c).
 *
 *   gather(x, axis, index): out has index's shape; index.shape[d] <= x.shape[d]
 *     off the axis (x is shrunk to it); out[i] = x[i with i[axis] = index[i]]
 *   index(x, axis, index): out = x.shape[:axis] + index.shape + x.shape[axis+1:];
 *     negative indices count from the end; the index is flattened, broadcast
 *     over x's other axes and gathered, then the result reshaped
 * An index outside the axis (after index's wrap) reads 0 in a kernel: the
 * documented result, never a read outside the buffer. Indices are any
 * integer dtype. */
#include "tensor.h"

#include <string.h>

static bool is_int_dtype(tc_dtype dt) {
    return dt == TC_INT32 || dt == TC_INT64 || dt == TC_UINT8;
}

TC_MUST_USE static tc_status check_args(const char *api, tc_tensor *x, int axis, tc_tensor *index, int *ax) {
    static const char *const names[2] = {"x", "index"};
    tc_tensor *ts[2] = {x, index};
    tc_status s = tc_tensor_check(x, api, "x");
    if (s == TC_OK) s = tc_tensor_check(index, api, "index");
    if (s == TC_OK) s = tc_tensor_same_device(api, 2, ts, names);
    if (s == TC_OK && x->node->ndim == 0)
        s = tc_error_set(TC_ERR_SHAPE, "%s: x is 0-d: it has no axis to index", api);
    if (s == TC_OK) s = tc_tensor_axis(api, x->node->ndim, axis, ax);
    if (s == TC_OK && !is_int_dtype(index->node->dtype))
        s = tc_error_set(TC_ERR_DTYPE, "%s: index is %s, not an integer dtype", api,
                         tc_dtypes[index->node->dtype].name);
    return s;
}

/* x read at index along axis: index's shape O, x's shape O but along axis.
 * x is made one view, unmasked along the axis, first (the kernel adds
 * index * stride to the address of row 0). */
static tc_tensor *gather_prim(tc_scope *s, tc_tensor *x, tc_tensor *index, int axis) {
    if (s->failed) return NULL;
    const tc_node *xn = x->node;
    bool plain = xn->op != TC_OP_VIEW ||
                 (xn->st->n_views == 1 && (!xn->st->views[0].has_mask ||
                                           (xn->st->views[0].mask_begin[axis] == 0 &&
                                            xn->st->views[0].mask_end[axis] == xn->shape[axis])));
    if (!plain) x = TC_S(s, tc_contiguous(x));
    if (!x) return NULL;
    tc_ag_args args = {.axes = 1u << axis};
    tc_tensor *ins[2] = {x, index};
    return TC_S(s, tc_ag_record(tc_tensor_wrap(tc_node_gather(x->node, index->node, axis)),
                                TC_AG_GATHER, 2, ins, &args));
}

TC_API tc_tensor *tc_gather(tc_tensor *x, int axis, tc_tensor *index) {
    TC_API_ENTER();
    tc_lock();
    tc_tensor *out = NULL;
    int ax = 0;
    char b1[160], b2[160];
    if (check_args("tc_gather", x, axis, index, &ax) != TC_OK) goto done;
    const tc_node *xn = x->node, *in = index->node;
    if (in->ndim != xn->ndim) {
        tc_error_set(TC_ERR_SHAPE, "tc_gather: index has %d dims, x has %d", in->ndim, xn->ndim);
        goto done;
    }
    bool fits = true;
    for (int d = 0; d < in->ndim && fits; d++) fits = d == ax || in->shape[d] <= xn->shape[d];
    if (!fits) {
        tc_error_set(TC_ERR_SHAPE, "tc_gather: index %s does not fit x %s along the axes but %d",
                     tc_fmt_shape(b1, sizeof b1, in->ndim, in->shape),
                     tc_fmt_shape(b2, sizeof b2, xn->ndim, xn->shape), ax);
        goto done;
    }
    int64_t be[2 * TC_MAX_DIMS];
    for (int d = 0; d < xn->ndim; d++) be[2 * d] = 0, be[2 * d + 1] = d == ax ? xn->shape[d] : in->shape[d];
    tc_scope s = {0};
    tc_tensor *xs = TC_S(&s, tc_shrink(x, be));
    out = tc_scope_end(&s, gather_prim(&s, xs, index, ax));
done:
    tc_unlock();
    return out;
}

TC_API tc_tensor *tc_index(tc_tensor *x, int axis, tc_tensor *index) {
    TC_API_ENTER();
    tc_lock();
    tc_tensor *out = NULL;
    int ax = 0;
    if (check_args("tc_index", x, axis, index, &ax) != TC_OK) goto done;
    const tc_node *xn = x->node, *in = index->node;
    int ndim = xn->ndim - 1 + in->ndim;
    if (ndim > TC_MAX_DIMS) {
        tc_error_set(TC_ERR_SHAPE, "tc_index: the result would have %d dims (at most %d)", ndim,
                     TC_MAX_DIMS);
        goto done;
    }
    int64_t m = tc_node_numel(in), n = xn->shape[ax];
    int64_t out_shape[TC_MAX_DIMS], flat[TC_MAX_DIMS], one_row[TC_MAX_DIMS];
    int k = 0;
    for (int d = 0; d < ax; d++) out_shape[k++] = xn->shape[d];
    for (int d = 0; d < in->ndim; d++) out_shape[k++] = in->shape[d];
    for (int d = ax + 1; d < xn->ndim; d++) out_shape[k++] = xn->shape[d];
    for (int d = 0; d < xn->ndim; d++) flat[d] = d == ax ? m : xn->shape[d], one_row[d] = d == ax ? m : 1;
    tc_scope s = {0};
    tc_tensor *zero = TC_S(&s, tc_full(0, NULL, 0, in->dtype, tc_device(index)));
    tc_tensor *size = TC_S(&s, tc_full(0, NULL, (double)n, in->dtype, tc_device(index)));
    tc_tensor *neg = TC_S(&s, tc_lt(index, zero)), *up = TC_S(&s, tc_add(index, size));
    tc_tensor *wrapped = TC_S(&s, tc_where(neg, up, index)); /* -1 is the last */
    tc_tensor *row = TC_S(&s, tc_reshape(wrapped, xn->ndim, one_row));
    tc_tensor *idx = TC_S(&s, tc_expand(row, xn->ndim, flat));
    tc_tensor *g = gather_prim(&s, x, idx, ax);
    out = tc_scope_end(&s, TC_S(&s, tc_reshape(g, ndim, out_shape)));
done:
    tc_unlock();
    return out;
}
