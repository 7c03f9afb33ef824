/* run.c - running the graph: tc_realize (all handles in one engine call, so
 * their kernels are scheduled together), tc_to_host, tc_schedule_kernel_count,
 * tc_to_device (a COPY node, of a buffer), tc_move_to_device (the same in place),
 * tc_synchronize, the counters and tc_export_c.
 * The engine does the work; this file checks the user's arguments and names
 * the public call. */
#include "tensor.h"

/* the nodes of ts[0..n-1] in a new array (NULL with an error otherwise) */
static tc_node **nodes_of(const char *api, tc_tensor **ts, int n) {
    if (n < 0 || (n > 0 && !ts)) {
        tc_error_set(TC_ERR_INVALID, "%s: %s", api, n < 0 ? "n is negative" : "ts is NULL");
        return NULL;
    }
    for (int i = 0; i < n; i++)
        if (!ts[i]) {
            tc_error_set(TC_ERR_INVALID, "%s: ts[%d] is NULL", api, i);
            return NULL;
        }
    tc_node **nodes = tc_malloc(sizeof *nodes * (size_t)(n ? n : 1));
    if (!nodes) return NULL;
    for (int i = 0; i < n; i++) nodes[i] = ts[i]->node;
    return nodes;
}

TC_API tc_status tc_realize(tc_tensor **ts, int n) {
    TC_API_ENTER();
    tc_lock();
    tc_node **nodes = nodes_of("tc_realize", ts, n);
    tc_status s = nodes ? tc_engine_realize(nodes, n, "tc_realize") : tc_error_code();
    tc_free(nodes);
    tc_unlock();
    return s;
}

TC_API int tc_schedule_kernel_count(tc_tensor **ts, int n) {
    TC_API_ENTER();
    tc_lock();
    tc_node **nodes = nodes_of("tc_schedule_kernel_count", ts, n);
    int count = nodes ? tc_engine_kernel_count(nodes, n) : -1;
    tc_free(nodes);
    tc_unlock();
    return count;
}

TC_API tc_status tc_to_host(tc_tensor *t, void *dst, size_t nbytes) {
    TC_API_ENTER();
    tc_lock();
    tc_status s = tc_tensor_check(t, "tc_to_host", "t");
    if (s == TC_OK) {
        int64_t numel = tc_node_numel(t->node);
        size_t want = (size_t)numel * tc_dtypes[t->node->dtype].size;
        if (nbytes != want)
            s = tc_error_set(TC_ERR_INVALID,
                             "tc_to_host: nbytes is %zu but %lld elements of %s "
                             "need %zu",
                             nbytes, (long long)numel, tc_dtypes[t->node->dtype].name, want);
        else if (!dst && nbytes > 0) s = tc_error_set(TC_ERR_INVALID, "tc_to_host: dst is NULL");
        else s = tc_engine_to_host(t->node, dst, nbytes, "tc_to_host");
    }
    tc_unlock();
    return s;
}

tc_node *tc_tensor_copy_node(tc_node *x, int device) {
    if (x->op != TC_OP_VIEW && x->op != TC_OP_CONST) return tc_node_meta(TC_OP_COPY, device, 1, &x);
    tc_node *base = tc_node_base(x);
    if (x->op == TC_OP_VIEW && base->op != TC_OP_CONST && tc_st_is_contiguous(x->st) &&
        tc_node_numel(x) == tc_node_numel(base)) /* all of its base in order: copy that */
        return tc_ew_reshape(tc_node_meta(TC_OP_COPY, device, 1, &base), x->ndim, x->shape);
    tc_node *flat = tc_node_meta(TC_OP_CONTIGUOUS, x->device, 1, &x); /* a buffer to copy */
    tc_node *r = flat ? tc_node_meta(TC_OP_COPY, device, 1, &flat) : NULL;
    tc_node_release(flat);
    return r;
}

TC_API tc_tensor *tc_to_device(tc_tensor *t, const char *device) {
    TC_API_ENTER();
    tc_lock();
    tc_tensor *out = NULL;
    int dev = -1;
    if (tc_tensor_check(t, "tc_to_device", "t") == TC_OK &&
        (dev = tc_device_open(device, "tc_to_device")) >= 0) {
        tc_node *x = t->node;
        out = tc_ag_record(
            tc_tensor_wrap(dev == x->device ? tc_node_retain(x) : tc_tensor_copy_node(x, dev)),
            TC_AG_COPY, 1, &t, NULL);
    }
    tc_unlock();
    return out;
}

/* t's history moved behind a COPY: a handle `old` takes t's old node and
 * context, and t gets a COPY context on old, so gradients reach t's inputs
 * on their device. With grad mode off nothing is recorded and t keeps no
 * history. Returns TC_OK or the error (t unchanged). */
static tc_status move_history(tc_tensor *t, tc_node *moved) {
    tc_tensor *old = tc_tensor_wrap(tc_node_retain(t->node));
    if (!old) return tc_error_code();
    old->ctx = t->ctx, old->requires_grad = true; /* old owns t's context for now */
    tc_tensor *tmp = tc_ag_record(tc_tensor_wrap(tc_node_retain(moved)), TC_AG_COPY, 1, &old, NULL);
    if (!tmp) {
        old->ctx = NULL;
        tc_release(old);
        return tc_error_code();
    }
    t->ctx = tmp->ctx; /* NULL with grad mode off: then old frees the history */
    t->requires_grad = t->ctx != NULL;
    tmp->ctx = NULL;
    tc_release(tmp);
    tc_release(old); /* t's new context holds it */
    return TC_OK;
}

TC_API tc_status tc_move_to_device(tc_tensor *t, const char *device) {
    TC_API_ENTER();
    tc_lock();
    tc_status s = tc_tensor_check(t, "tc_move_to_device", "t");
    int dev = s == TC_OK ? tc_device_open(device, "tc_move_to_device") : -1;
    if (s == TC_OK && dev < 0) s = tc_error_code();
    if (s != TC_OK || dev == t->node->device) goto done;
    tc_node *moved = tc_tensor_copy_node(t->node, dev), *gx = t->grad ? t->grad->node : NULL;
    tc_tensor *grad = NULL;
    if (moved && gx)
        grad =
            tc_tensor_wrap(gx->device == dev ? tc_node_retain(gx) : tc_tensor_copy_node(gx, dev));
    if (!moved || (t->grad && !grad) || (t->ctx && (s = move_history(t, moved)) != TC_OK)) {
        s = s != TC_OK ? s : tc_error_or(TC_ERR_MEMORY);
        tc_node_release(moved);
        tc_release(grad);
        goto done;
    }
    tc_node_release(t->node);
    t->node = moved;
    if (grad) {
        tc_release(t->grad);
        t->grad = grad;
    }
done:
    tc_unlock();
    return s;
}

TC_API tc_status tc_synchronize(const char *device) {
    TC_API_ENTER();
    tc_lock();
    int id = tc_device_open(device, "tc_synchronize");
    tc_dev *d = id >= 0 ? tc_device_get(id) : NULL;
    tc_status s = d ? d->synchronize(d) : tc_error_code();
    tc_unlock();
    return s;
}

TC_API void tc_get_counters(tc_counters *out) {
    TC_API_ENTER();
    if (!out) {
        tc_error_set(TC_ERR_INVALID, "tc_get_counters: out is NULL");
        return;
    }
    tc_lock();
    tc_engine_get_counters(out);
    tc_unlock();
}

TC_API void tc_reset_counters(void) {
    TC_API_ENTER();
    tc_lock();
    tc_engine_reset_counters();
    tc_unlock();
}

TC_API tc_status tc_export_c(const char *dir, const char *name, tc_tensor **outs, int n_outs,
                             tc_tensor **ins, int n_ins) {
    TC_API_ENTER();
    const char *api = "tc_export_c";
    if (n_outs <= 0 || !outs)
        return tc_error_set(TC_ERR_INVALID, "%s: %s", api,
                            n_outs <= 0 ? "nothing to export (n_outs <= 0)" : "outs is NULL");
    if (n_ins < 0 || (n_ins > 0 && !ins))
        return tc_error_set(TC_ERR_INVALID, "%s: %s", api,
                            n_ins < 0 ? "n_ins is negative" : "ins is NULL");
    for (int i = 0; i < n_outs; i++)
        if (!outs[i]) return tc_error_set(TC_ERR_INVALID, "%s: outs[%d] is NULL", api, i);
    for (int i = 0; i < n_ins; i++)
        if (!ins[i]) return tc_error_set(TC_ERR_INVALID, "%s: ins[%d] is NULL", api, i);
    tc_lock();
    tc_node **o = tc_malloc(sizeof *o * (size_t)n_outs);
    tc_node **in = o ? tc_malloc(sizeof *in * (size_t)(n_ins ? n_ins : 1)) : NULL;
    tc_status s = in ? TC_OK : TC_ERR_MEMORY;
    for (int i = 0; s == TC_OK && i < n_outs; i++) o[i] = outs[i]->node;
    for (int i = 0; s == TC_OK && i < n_ins; i++) in[i] = ins[i]->node;
    if (s == TC_OK) s = tc_engine_export_c(dir, name, o, n_outs, in, n_ins, api);
    tc_free(o);
    tc_free(in);
    tc_unlock();
    return s;
}
