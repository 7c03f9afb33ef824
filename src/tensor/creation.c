/* creation.c - tensors from user data and from scalars: tc_from_data (a copy
 * uploaded with tc_engine_from_host), tc_empty (a buffer left as allocated),
 * tc_full/zeros/ones/full_like (CONST
 * nodes: no buffer until used), tc_arange (values computed on the host and
 * uploaded) and tc_eye (a movement trick on a constant, as tinygrad does:
 * ones (n,1) padded to (n,n+1), flattened, cut to n*n, reshaped to (n,n)). */
#include "tensor.h"

#include <math.h>
#include <string.h>

/* checks the arguments every creation call shares; the device id goes to *dev */
TC_MUST_USE static tc_status creation_args(const char *api, int ndim, const int64_t *shape, int dt,
                               const char *device, int *dev) {
    tc_status s = tc_tensor_check_shape(api, ndim, shape);
    if (s == TC_OK) s = tc_tensor_check_dtype(api, dt);
    if (s != TC_OK) return s;
    *dev = tc_device_open(device, api);
    return *dev < 0 ? TC_ERR_DEVICE : TC_OK;
}

static int64_t shape_numel(int ndim, const int64_t *shape) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    return n;
}

TC_API tc_tensor *tc_from_data(const void *data, tc_dtype dt, int ndim, const int64_t *shape,
                               const char *device) {
    TC_API_ENTER();
    tc_lock();
    tc_tensor *out = NULL;
    int dev = -1;
    if (creation_args("tc_from_data", ndim, shape, dt, device, &dev) != TC_OK) goto done;
    if (!data && shape_numel(ndim, shape) > 0) {
        tc_error_set(TC_ERR_INVALID, "tc_from_data: data is NULL");
        goto done;
    }
    static const int64_t no_dims[1] = {0}; /* shape may be NULL for ndim 0, data for numel 0 */
    out = tc_tensor_wrap(
        tc_engine_from_host(data ? data : no_dims, dt, ndim, shape ? shape : no_dims, dev));
done:
    tc_unlock();
    return out;
}

TC_API tc_tensor *tc_empty(int ndim, const int64_t *shape, tc_dtype dt, const char *device) {
    TC_API_ENTER();
    tc_lock();
    tc_tensor *out = NULL;
    int dev = -1;
    if (creation_args("tc_empty", ndim, shape, dt, device, &dev) != TC_OK) goto done;
    int64_t n = shape_numel(ndim, shape);
    if ((uint64_t)n > SIZE_MAX / tc_dtypes[dt].size) {
        tc_error_set(TC_ERR_MEMORY, "tc_empty: %lld elements do not fit in memory", (long long)n);
        goto done;
    }
    tc_buffer *b = tc_buffer_new(dev, (size_t)n * tc_dtypes[dt].size);
    static const int64_t no_dims[1] = {0}; /* shape may be NULL for ndim 0 */
    if (b) out = tc_tensor_wrap(tc_node_buffer(b, dt, ndim, shape ? shape : no_dims));
    tc_buffer_release(b);
done:
    tc_unlock();
    return out;
}

/* value must be representable in the integer dtype dt (after truncation) */
TC_MUST_USE static tc_status check_value(const char *api, double value, tc_dtype dt) {
    int64_t ilo, ihi;
    if (dt == TC_BOOL || !tc_dtype_int_range(dt, &ilo, &ihi))
        return TC_OK; /* floats hold anything; bool is value != 0 */
    /* valid: lo <= trunc(value) < hi (hi one past the largest: exact in double) */
    double lo = (double)ilo, hi = ihi == INT64_MAX ? 9223372036854775808.0 : (double)ihi + 1;
    if (dt == TC_UINT64) hi = 18446744073709551616.0;
    double t = trunc(value);
    if (!(t >= lo && t < hi))
        return tc_error_set(TC_ERR_INVALID, "%s: value %g does not fit in %s", api, value,
                            tc_dtypes[dt].name);
    return TC_OK;
}

/* a CONST of value, dt and shape on dev (value already checked) */
static tc_node *const_node(double value, tc_dtype dt, int dev, int ndim, const int64_t *shape) {
    if (dt == TC_BOOL) return tc_node_const_int(value != 0, dt, dev, ndim, shape);
    if (tc_dtypes[dt].is_float) return tc_node_const(value, dt, dev, ndim, shape);
    return tc_node_const_int(tc_dtype_double_to_int(dt, value), dt, dev, ndim, shape);
}

static tc_tensor *full(const char *api, int ndim, const int64_t *shape, double value, tc_dtype dt,
                       const char *device) {
    tc_lock();
    tc_tensor *out = NULL;
    int dev = -1;
    if (creation_args(api, ndim, shape, dt, device, &dev) == TC_OK &&
        check_value(api, value, dt) == TC_OK)
        out = tc_tensor_wrap(const_node(value, dt, dev, ndim, shape));
    tc_unlock();
    return out;
}

TC_API tc_tensor *tc_full(int ndim, const int64_t *shape, double value, tc_dtype dt,
                          const char *device) {
    TC_API_ENTER();
    return full("tc_full", ndim, shape, value, dt, device);
}

TC_API tc_tensor *tc_zeros(int ndim, const int64_t *shape, tc_dtype dt, const char *device) {
    TC_API_ENTER();
    return full("tc_zeros", ndim, shape, 0, dt, device);
}

TC_API tc_tensor *tc_ones(int ndim, const int64_t *shape, tc_dtype dt, const char *device) {
    TC_API_ENTER();
    return full("tc_ones", ndim, shape, 1, dt, device);
}

TC_API tc_tensor *tc_full_like(tc_tensor *a, double value) {
    TC_API_ENTER();
    tc_lock();
    tc_tensor *out = NULL;
    if (tc_tensor_check(a, "tc_full_like", "a") == TC_OK &&
        check_value("tc_full_like", value, a->node->dtype) == TC_OK) {
        const tc_node *x = a->node;
        out = tc_tensor_wrap(const_node(value, x->dtype, x->device, x->ndim, x->shape));
    }
    tc_unlock();
    return out;
}

/* ---- arange ---- */

/* number of values start, start+step, ... strictly before stop; -1 if that
 * many would not fit in memory */
static int64_t arange_count(int64_t start, int64_t stop, int64_t step, size_t elem) {
    uint64_t span, ustep;
    if (step > 0 && stop > start) {
        span = (uint64_t)stop - (uint64_t)start;
        ustep = (uint64_t)step;
    } else if (step < 0 && stop < start) {
        span = (uint64_t)start - (uint64_t)stop;
        ustep = (uint64_t)0 - (uint64_t)step;
    } else {
        return 0;
    }
    uint64_t n = (span - 1) / ustep + 1;
    return n > (uint64_t)INT64_MAX / 16 || n > SIZE_MAX / elem ? -1 : (int64_t)n;
}

TC_API tc_tensor *tc_arange(int64_t start, int64_t stop, int64_t step, tc_dtype dt,
                            const char *device) {
    TC_API_ENTER();
    tc_lock();
    tc_tensor *out = NULL;
    int dev = -1;
    if (step == 0) {
        tc_error_set(TC_ERR_INVALID, "tc_arange: step must not be 0");
        goto done;
    }
    if (tc_tensor_check_dtype("tc_arange", dt) != TC_OK) goto done;
    if (dt == TC_BOOL) {
        tc_error_set(TC_ERR_DTYPE, "tc_arange: bool is not a numeric dtype");
        goto done;
    }
    if ((dev = tc_device_open(device, "tc_arange")) < 0) goto done;
    int64_t n = arange_count(start, stop, step, tc_dtypes[dt].size);
    if (n < 0) {
        tc_error_set(TC_ERR_MEMORY, "tc_arange: [%lld, %lld) by %lld has too many values",
                     (long long)start, (long long)stop, (long long)step);
        goto done;
    }
    void *data = tc_malloc((size_t)n * tc_dtypes[dt].size);
    if (!data) goto done;
    for (int64_t i = 0; i < n; i++) {
        /* in range by construction; unsigned arithmetic keeps the sum defined */
        int64_t v = (int64_t)((uint64_t)start + (uint64_t)i * (uint64_t)step);
        if (tc_dtypes[dt].is_float) tc_scalar_store(data, dt, i, (double)v);
        else tc_scalar_store_int(data, dt, i, v);
    }
    out = tc_tensor_wrap(tc_engine_from_host(data, dt, 1, &n, dev));
    tc_free(data);
done:
    tc_unlock();
    return out;
}

/* ---- eye ---- */

static tc_node *eye_node(int64_t n, tc_dtype dt, int dev) {
    int64_t col[2] = {n, 1}, pad[4] = {0, 0, 0, n}, flat = n * (n + 1), cut[2] = {0, n * n};
    int64_t square[2] = {n, n};
    if (n == 0) return tc_node_const_int(0, dt, dev, 2, square);
    tc_node *ones = tc_node_const_int(1, dt, dev, 2, col);
    if (!ones) return NULL;
    tc_node *padded = tc_node_pad(ones, pad);
    tc_node_release(ones);
    tc_node *line = tc_ew_reshape(padded, 1, &flat);
    tc_node *cut_line = line ? tc_node_shrink(line, cut) : NULL;
    tc_node_release(line);
    return tc_ew_reshape(cut_line, 2, square);
}

TC_API tc_tensor *tc_eye(int64_t n, tc_dtype dt, const char *device) {
    TC_API_ENTER();
    tc_lock();
    tc_tensor *out = NULL;
    int dev = -1;
    if (n < 0 || n >= 3037000499LL) { /* n*(n+1) must fit in int64 */
        tc_error_set(TC_ERR_SHAPE, "tc_eye: size %lld is out of range", (long long)n);
        goto done;
    }
    if (tc_tensor_check_dtype("tc_eye", dt) == TC_OK &&
        (dev = tc_device_open(device, "tc_eye")) >= 0)
        out = tc_tensor_wrap(eye_node(n, dt, dev));
done:
    tc_unlock();
    return out;
}
