/* tensor.c - the tc_tensor handle (wrap, retain, release), its properties,
 * the library calls (version, dtype facts, flags, shutdown) and the argument
 * checks every other front-end file shares.
 *
 * A handle owns one reference to its node; the node's shape and dtype are
 * the tensor's. tc_last_error, tc_last_status and tc_status_string live in
 * util/error.c next to the thread-local error they read. */
#include "tensor.h"

#include <string.h>

#ifndef PROJECT_VERSION
#define PROJECT_VERSION "0.1.0"
#endif

/* ---- argument checks ---- */

TC_MUST_USE tc_status tc_tensor_check(const tc_tensor *t, const char *api, const char *arg) {
    if (!t) return tc_error_set(TC_ERR_INVALID, "%s: tensor %s is NULL", api, arg);
    return TC_OK;
}

TC_MUST_USE tc_status tc_tensor_check_shape(const char *api, int ndim, const int64_t *shape) {
    if (ndim < 0 || ndim > TC_MAX_DIMS)
        return tc_error_set(TC_ERR_SHAPE, "%s: ndim %d is out of range 0..%d", api, ndim,
                            TC_MAX_DIMS);
    if (ndim > 0 && !shape)
        return tc_error_set(TC_ERR_INVALID, "%s: shape is NULL for ndim %d", api, ndim);
    char buf[256];
    int64_t numel = 1;
    bool is_empty = false;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return tc_error_set(TC_ERR_SHAPE, "%s: negative size %lld in shape %s", api,
                                (long long)shape[i], tc_fmt_shape(buf, sizeof buf, ndim, shape));
        if (shape[i] == 0) is_empty = true;
        else if (numel > TC_MAX_NUMEL / shape[i]) numel = -1;
        else if (numel > 0) numel *= shape[i];
    }
    if (numel < 0 && !is_empty)
        return tc_error_set(TC_ERR_SHAPE,
                            "%s: shape %s has too many elements (TC_MAX_NUMEL: 2^58)", api,
                            tc_fmt_shape(buf, sizeof buf, ndim, shape));
    return TC_OK;
}

TC_MUST_USE tc_status tc_tensor_check_dtype(const char *api, int dt) {
    if (!tc_dtype_valid(dt)) return tc_error_set(TC_ERR_DTYPE, "%s: unknown dtype %d", api, dt);
    return TC_OK;
}

TC_MUST_USE tc_status tc_tensor_axis(const char *api, int ndim, int axis, int *out) {
    if (axis < -ndim || axis >= ndim || ndim == 0)
        return tc_error_set(TC_ERR_SHAPE, "%s: axis %d is out of range for %d dims", api, axis,
                            ndim);
    *out = axis < 0 ? axis + ndim : axis;
    return TC_OK;
}

TC_MUST_USE tc_status tc_tensor_axes_mask(const char *api, int ndim, int naxes, const int *axes,
                              uint32_t *mask) {
    if (naxes > 0 && !axes) return tc_error_set(TC_ERR_INVALID, "%s: axes is NULL", api);
    if (naxes < 0 || naxes > (ndim ? ndim : 1))
        return tc_error_set(TC_ERR_SHAPE, "%s: %d axes given for %d dims", api, naxes, ndim);
    uint32_t m = 0;
    if (naxes == 0) m = ndim ? (uint32_t)((1ULL << ndim) - 1) : 0;
    for (int i = 0; i < naxes; i++) {
        int ax = 0;
        if (ndim == 0 && (axes[i] == 0 || axes[i] == -1)) continue; /* the one element: no dim */
        tc_status s = tc_tensor_axis(api, ndim, axes[i], &ax);
        if (s != TC_OK) return s;
        if (m & (1u << ax))
            return tc_error_set(TC_ERR_SHAPE, "%s: axis %d appears twice", api, axes[i]);
        m |= 1u << ax;
    }
    *mask = m;
    return TC_OK;
}

/* ---- handles ---- */

tc_tensor *tc_tensor_wrap(tc_node *n) {
    if (!n) return NULL;
    tc_tensor *t = tc_malloc(sizeof *t);
    if (!t) {
        tc_node_release(n);
        return NULL;
    }
    *t = (tc_tensor){.refcount = 1, .node = n};
    return t;
}

TC_API tc_tensor *tc_retain(tc_tensor *t) {
    TC_API_ENTER();
    tc_lock();
    if (t) t->refcount++;
    tc_unlock();
    return t;
}

TC_API void tc_release(tc_tensor *t) {
    TC_API_ENTER();
    tc_lock();
    if (t && --t->refcount == 0) tc_tensor_destroy(t);
    tc_unlock();
}

/* ---- properties ---- */

TC_API int tc_ndim(const tc_tensor *t) {
    TC_API_ENTER();
    tc_lock();
    int r = tc_tensor_check(t, "tc_ndim", "t") == TC_OK ? t->node->ndim : -1;
    tc_unlock();
    return r;
}

TC_API const int64_t *tc_shape(const tc_tensor *t) {
    TC_API_ENTER();
    tc_lock();
    const int64_t *r = tc_tensor_check(t, "tc_shape", "t") == TC_OK ? t->node->shape : NULL;
    tc_unlock();
    return r;
}

/* TC_DTYPE_COUNT (not a dtype) for NULL */
TC_API tc_dtype tc_get_dtype(const tc_tensor *t) {
    TC_API_ENTER();
    tc_lock();
    tc_dtype r = tc_tensor_check(t, "tc_get_dtype", "t") == TC_OK ? t->node->dtype : TC_DTYPE_COUNT;
    tc_unlock();
    return r;
}

TC_API int64_t tc_numel(const tc_tensor *t) {
    TC_API_ENTER();
    tc_lock();
    int64_t r = tc_tensor_check(t, "tc_numel", "t") == TC_OK ? tc_node_numel(t->node) : -1;
    tc_unlock();
    return r;
}

TC_API const char *tc_device(const tc_tensor *t) {
    TC_API_ENTER();
    tc_lock();
    const char *r = NULL;
    if (tc_tensor_check(t, "tc_device", "t") == TC_OK) {
        tc_dev *d = tc_device_get(t->node->device);
        r = d ? d->name : NULL;
    }
    tc_unlock();
    return r;
}

TC_API bool tc_is_realized(const tc_tensor *t) {
    TC_API_ENTER();
    tc_lock();
    bool r = false;
    if (tc_tensor_check(t, "tc_is_realized", "t") == TC_OK)
        r = tc_node_base(t->node)->op == TC_OP_BUFFER;
    tc_unlock();
    return r;
}

/* ---- library ---- */

TC_API const char *tc_version(void) {
    TC_API_ENTER();
    return PROJECT_VERSION;
}

TC_API size_t tc_dtype_size(tc_dtype dt) {
    TC_API_ENTER();
    return tc_dtype_valid((int)dt) ? tc_dtypes[dt].size : 0;
}

TC_API const char *tc_dtype_name(tc_dtype dt) {
    TC_API_ENTER();
    return tc_dtype_valid((int)dt) ? tc_dtypes[dt].name : "unknown";
}

static int flag_of(const char *api, const char *name) {
    int f = name ? tc_flag_lookup(name) : -1;
    if (f < 0)
        tc_error_set(TC_ERR_INVALID,
                     "%s: unknown flag '%.64s' (TC_DEBUG, TC_NOOPT, TC_NOFUSE, "
                     "TC_BEAM)",
                     api, name ? name : "(null)");
    return f;
}

TC_API tc_status tc_set_flag(const char *name, int64_t value) {
    TC_API_ENTER();
    tc_lock();
    int f = flag_of("tc_set_flag", name);
    tc_status s = f < 0 ? TC_ERR_INVALID : TC_OK;
    if (f >= 0 && value < 0)
        s = tc_error_set(TC_ERR_INVALID, "tc_set_flag: %s must be >= 0, got %lld", name,
                         (long long)value);
    if (s == TC_OK) tc_flag_put((tc_flag)f, value);
    tc_unlock();
    return s;
}

TC_API int64_t tc_get_flag(const char *name) {
    TC_API_ENTER();
    tc_lock();
    int f = flag_of("tc_get_flag", name);
    int64_t v = f < 0 ? -1 : tc_flag_get((tc_flag)f);
    tc_unlock();
    return v;
}

TC_API void tc_shutdown(void) {
    TC_API_ENTER();
    tc_lock();
    tc_engine_shutdown();
    tc_runtime_shutdown();
    tc_graph_shutdown();
    tc_flags_shutdown();
    tc_random_reset();
    tc_unlock();
}
