/* resample.c - tc_interpolate: torch's F.interpolate and tinygrad's
 * Tensor.interpolate with an output size, one axis at a time.
 *
 * The source places of each output element along an axis depend only on
 * the sizes, so they are computed here, on the host, in float as torch
 * computes them (so nearest picks the same elements at exact boundaries),
 * and become small int32 tensors read through tc_index: an indexed load,
 * O(output) work, fused with the weights' multiply-add (and with whatever
 * reads the result). The gradient is tc_index's (it adds at the same
 * places). Per axis, with scale = in / out:
 *   nearest        src = min(floor(dst * scale), in - 1)
 *   nearest-exact  src = min(floor((dst + 0.5) * scale), in - 1)
 *   linear         src = max(scale * (dst + 0.5) - 0.5, 0), or with
 *                  align_corners src = dst * (in - 1) / (out - 1);
 *                  lo = floor(src), hi = lo + 1 (lo at the last element),
 *                  out = x[lo] * (1 - l) + x[hi] * l with l = src - lo
 * O(product of the sizes) host work and memory for the index and weight
 * tensors (a few bytes per output position of each axis). */
#include "tensor.h"

#include <math.h>

/* the source index of output dst along an axis of in elements, and the
 * weight of the next one (linear only) */
static int32_t source(tc_interp_mode mode, bool align, int64_t in, int64_t out, int64_t dst,
                      float *lam) {
    float scale = (float)in / (float)out, src;
    *lam = 0;
    if (mode == TC_INTERP_NEAREST || mode == TC_INTERP_NEAREST_EXACT) {
        float at = mode == TC_INTERP_NEAREST ? (float)dst * scale : ((float)dst + 0.5f) * scale;
        int64_t i = (int64_t)floorf(at);
        return (int32_t)(i < in - 1 ? i : in - 1);
    }
    if (align) src = out > 1 ? (float)dst * ((float)(in - 1) / (float)(out - 1)) : 0.0f;
    else src = fmaxf(scale * ((float)dst + 0.5f) - 0.5f, 0.0f);
    int64_t lo = (int64_t)src;
    if (lo > in - 1) lo = in - 1;
    *lam = lo < in - 1 ? src - (float)lo : 0.0f;
    return (int32_t)lo;
}

/* nearest along ax as a view when lo is a whole-number pattern: each of the
 * in elements repeated f times (out = in * f), or every f-th (in = out * f).
 * Views fuse with anything (a conv reading the result reads x), where an
 * indexed load's source must be a buffer. NULL (and no error) otherwise. */
static tc_tensor *as_view(tc_scope *s, tc_tensor *x, int ax, int64_t out, const int32_t *lo) {
    int nd = x->node->ndim;
    int64_t in = x->node->shape[ax], f = out >= in ? out / in : in / out;
    if (out % in != 0 && in % out != 0) return NULL;
    for (int64_t d = 0; d < out; d++)
        if (lo[d] != (out >= in ? d / f : d * f)) return NULL;
    int64_t split[TC_MAX_DIMS + 1], bounds[2 * (TC_MAX_DIMS + 1)], back[TC_MAX_DIMS];
    for (int i = 0, j = 0; i < nd; i++) {
        back[i] = i == ax ? out : x->node->shape[i];
        if (i == ax) {
            split[j] = out >= in ? in : out, bounds[2 * j] = 0, bounds[2 * j + 1] = split[j], j++;
            split[j] = out >= in ? 1 : f, bounds[2 * j] = 0, bounds[2 * j + 1] = 1, j++;
        } else {
            split[j] = x->node->shape[i], bounds[2 * j] = 0, bounds[2 * j + 1] = split[j], j++;
        }
    }
    tc_tensor *y = TC_S(s, tc_reshape(x, nd + 1, split)); /* (..., in or out, 1 or f, ...) */
    if (out >= in) {
        split[ax + 1] = f;
        y = TC_S(s, tc_expand(y, nd + 1, split)); /* each element f times */
    } else {
        y = TC_S(s, tc_shrink(y, bounds)); /* the first of every f */
    }
    return TC_S(s, tc_reshape(y, nd, back));
}

/* x resampled along axis ax to out elements (a new reference); NULL on failure */
static tc_tensor *along(tc_tensor *x, int ax, int64_t out, tc_interp_mode mode, bool align) {
    int64_t in = x->node->shape[ax];
    int32_t *lo = tc_malloc(sizeof(int32_t) * 2 * (size_t)out);
    float *w = lo ? tc_malloc(sizeof(float) * 2 * (size_t)out) : NULL;
    if (!w) {
        tc_free(lo);
        return NULL;
    }
    tc_scope scope = {0}, *s = &scope;
    int32_t *hi = lo + out;
    float *wlo = w, *whi = w + out;
    for (int64_t d = 0; d < out; d++) {
        lo[d] = source(mode, align, in, out, d, &whi[d]);
        hi[d] = whi[d] > 0 ? lo[d] + 1 : lo[d];
        wlo[d] = 1.0f - whi[d];
    }
    const char *dev = tc_device(x);
    tc_tensor *y = mode != TC_INTERP_LINEAR ? as_view(s, x, ax, out, lo) : NULL;
    if (!y && !s->failed) y = TC_S(s, tc_index(x, ax, TC_S(s, tc_from_data(lo, TC_INT32, 1, &out, dev))));
    if (mode == TC_INTERP_LINEAR) {
        int64_t wshape[TC_MAX_DIMS];
        int nd = x->node->ndim;
        for (int i = 0; i < nd; i++) wshape[i] = i == ax ? out : 1;
        tc_tensor *ihi = TC_S(s, tc_from_data(hi, TC_INT32, 1, &out, dev));
        tc_tensor *yhi = TC_S(s, tc_index(x, ax, ihi));
        tc_tensor *a = TC_S(s, tc_from_data(wlo, TC_FLOAT32, nd, wshape, dev));
        tc_tensor *b = TC_S(s, tc_from_data(whi, TC_FLOAT32, nd, wshape, dev));
        if (!s->failed && x->node->dtype != TC_FLOAT32) {
            a = TC_S(s, tc_cast(a, x->node->dtype));
            b = TC_S(s, tc_cast(b, x->node->dtype));
        }
        y = TC_S(s, tc_add(TC_S(s, tc_mul(y, a)), TC_S(s, tc_mul(yhi, b))));
    }
    tc_free(lo), tc_free(w);
    return tc_scope_end(s, y);
}

TC_MUST_USE static tc_status check_interp(tc_tensor *x, int n, const int64_t *size,
                                          tc_interp_mode mode, bool align) {
    const char *api = "tc_interpolate";
    tc_status st = tc_tensor_check(x, api, "x");
    if (st != TC_OK) return st;
    int nd = x->node->ndim;
    char b[256];
    tc_fmt_shape(b, sizeof b, nd, x->node->shape);
    if (n < 1 || n > nd)
        return tc_error_set(TC_ERR_SHAPE, "%s: %d sizes for x %s (1 to %d: the last axes)", api,
                            n, b, nd);
    if (!size) return tc_error_set(TC_ERR_INVALID, "%s: size is NULL", api);
    if ((int)mode < 0 || mode >= TC_INTERP_COUNT)
        return tc_error_set(TC_ERR_INVALID, "%s: unknown mode %d", api, (int)mode);
    if (align && mode != TC_INTERP_LINEAR)
        return tc_error_set(TC_ERR_INVALID, "%s: align_corners applies to linear mode only", api);
    if (mode == TC_INTERP_LINEAR && !tc_dtypes[x->node->dtype].is_float)
        return tc_error_set(TC_ERR_DTYPE, "%s: linear mode needs a float x, got %s", api,
                            tc_dtypes[x->node->dtype].name);
    for (int j = 0; j < n; j++) {
        int64_t in = x->node->shape[nd - n + j];
        if (size[j] < 1 || size[j] > INT32_MAX || in < 1 || in > INT32_MAX)
            return tc_error_set(TC_ERR_SHAPE, "%s: size[%d] = %lld for axis %d of x %s (both "
                                "must be 1 to 2^31-1)", api, j, (long long)size[j], nd - n + j, b);
    }
    return TC_OK;
}

TC_API tc_tensor *tc_interpolate(tc_tensor *x, int n, const int64_t *size, tc_interp_mode mode,
                                 bool align_corners) {
    TC_API_ENTER();
    tc_lock();
    tc_tensor *out = NULL;
    if (check_interp(x, n, size, mode, align_corners) == TC_OK) {
        tc_scope s = {0};
        tc_tensor *y = x;
        int nd = x->node->ndim;
        for (int j = n - 1; j >= 0 && !s.failed; j--) /* the last axis first, as tinygrad */
            if (size[j] != y->node->shape[nd - n + j]) /* the same size: every mode is the identity */
                y = TC_S(&s, along(y, nd - n + j, size[j], mode, align_corners));
        out = s.failed ? tc_scope_end(&s, NULL) : y == x ? tc_retain(x) : tc_scope_end(&s, y);
    }
    tc_unlock();
    return out;
}
