/* run.c - running the graph: tc_realize (all handles in one engine call, so
 * their kernels are scheduled together), tc_to_host, tc_schedule_kernel_count,
 * tc_to_device (a COPY node), tc_synchronize, the counters and tc_export_c.
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

TC_API tc_tensor *tc_to_device(tc_tensor *t, const char *device) {
    TC_API_ENTER();
    tc_lock();
    tc_tensor *out = NULL;
    int dev = -1;
    if (tc_tensor_check(t, "tc_to_device", "t") == TC_OK &&
        (dev = tc_device_open(device, "tc_to_device")) >= 0) {
        tc_node *x = t->node;
        out = tc_ag_record(tc_tensor_wrap(dev == x->device ? tc_node_retain(x)
                                                           : tc_node_meta(TC_OP_COPY, dev, 1, &x)),
                           TC_AG_COPY, 1, &t, NULL);
    }
    tc_unlock();
    return out;
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
