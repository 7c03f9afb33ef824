/* loss.c - cross-entropy of logits (N, C) against integer class ids (N):
 * tc_cross_entropy (the mean) and tc_cross_entropy_ex (torch's reduction,
 * ignore_index and label_smoothing), composed from the public ops so that
 * the one-hot pick fuses into the reduce over the classes (no (N, C)
 * buffer beyond what log_softmax needs). O(1) graph nodes per call; the
 * label check reads realized labels once, O(N).
 *
 *   with keep[n] = labels[n] != ignore_index (tc_cross_entropy: every row)
 *   and w[n,c] = keep[n] * ((1 - eps) * (c == labels[n]) + eps / C),
 *     loss[n] = -sum_c log_softmax(logits)[n,c] * w[n,c]   (torch's formula)
 *   none: loss (N); sum: sum(loss); mean: sum(loss) / sum(keep) (NaN when
 *   every label is ignored, as torch).
 * Kernels (tests/autograd/test_loss.c pins them): the rows' losses are one
 * kernel with log_softmax and are realized (N floats), so the mean or sum
 * over them, with the count of rows kept, is a second kernel; the backward
 * is one or two. */
#include "tensor.h"

#include <math.h>
#include <string.h>

/* labels realized and read whole: every value in [0, c) or == ignore (when
 * has_ignore) */
TC_MUST_USE static tc_status check_labels(const char *api, tc_tensor *labels, int64_t c, bool has_ignore,
                              int64_t ignore) {
    tc_node *n = labels->node;
    if (!tc_tensor_is_contiguous_buffer(n)) return TC_OK; /* lazy: documented, not checked */
    int64_t count = tc_node_numel(n);
    size_t nbytes = (size_t)count * tc_dtypes[n->dtype].size;
    void *host = tc_malloc(nbytes ? nbytes : 1);
    if (!host) return TC_ERR_MEMORY;
    tc_status s = tc_engine_to_host(n, host, nbytes, api);
    for (int64_t i = 0; i < count && s == TC_OK; i++) {
        int64_t v = tc_scalar_load_int(host, n->dtype, i);
        if ((v < 0 || v >= c) && !(has_ignore && v == ignore))
            s = tc_error_set(TC_ERR_INVALID,
                             "%s: labels[%lld] = %lld is out of range for %lld "
                             "classes",
                             api, (long long)i, (long long)v, (long long)c);
    }
    tc_free(host);
    return s;
}

/* shapes, dtypes and devices; not the labels' values */
TC_MUST_USE static tc_status check_args(const char *api, tc_tensor *logits, tc_tensor *labels) {
    static const char *const names[2] = {"logits", "labels"};
    tc_tensor *ts[2] = {logits, labels};
    tc_status s = tc_tensor_check(logits, api, "logits");
    if (s == TC_OK) s = tc_tensor_check(labels, api, "labels");
    if (s == TC_OK) s = tc_tensor_same_device(api, 2, ts, names);
    if (s != TC_OK) return s;
    const tc_node *x = logits->node, *y = labels->node;
    char b1[256], b2[256];
    if (x->ndim != 2 || y->ndim != 1 || y->shape[0] != x->shape[0])
        return tc_error_set(TC_ERR_SHAPE, "%s: logits %s must be (N,C) and labels %s (N)", api,
                            tc_fmt_shape(b1, sizeof b1, x->ndim, x->shape),
                            tc_fmt_shape(b2, sizeof b2, y->ndim, y->shape));
    if (tc_dtypes[y->dtype].is_float || y->dtype == TC_BOOL)
        return tc_error_set(TC_ERR_DTYPE, "%s: labels must be integer class ids, got %s", api,
                            tc_dtypes[y->dtype].name);
    return TC_OK;
}

/* (N, C) bool: labels[n] == c (labels borrowed) */
static tc_tensor *one_hot(tc_scope *s, tc_tensor *logits, tc_tensor *labels) {
    int64_t n = logits->node->shape[0], c = logits->node->shape[1], col[2] = {n, 1};
    tc_tensor *classes = TC_S(s, tc_arange(0, c, 1, TC_INT32, tc_device(logits)));
    tc_tensor *lab = TC_S(s, tc_reshape(labels, 2, col));
    return TC_S(s, tc_eq(classes, lab));
}

/* ignore_index can equal a value of dtype dt (else no label is ignored) */
static bool representable(tc_dtype dt, int64_t v) {
    int64_t lo, hi;
    return dt != TC_BOOL && tc_dtype_int_range(dt, &lo, &hi) && v >= lo && v <= hi;
}

/* the weights w (N, C) of the formula above, and keep (N, 1) bool or NULL
 * when no label can be ignored */
static tc_tensor *weights(tc_scope *s, tc_tensor *logits, tc_tensor *labels, bool has_ignore,
                          int64_t ignore, double eps, tc_tensor **keep_out) {
    int64_t n = logits->node->shape[0], c = logits->node->shape[1], col[2] = {n, 1};
    tc_dtype lt = labels->node->dtype;
    const char *dev = tc_device(logits);
    tc_tensor *hot = one_hot(s, logits, labels), *keep = NULL;
    if (has_ignore && representable(lt, ignore)) {
        tc_tensor *ig = TC_S(s, tc_full(0, NULL, (double)ignore, lt, dev));
        tc_tensor *ne = TC_S(s, tc_ne(labels, ig));
        keep = TC_S(s, tc_reshape(ne, 2, col));
        if (ignore >= 0 && ignore < c) hot = TC_S(s, tc_logical_and(hot, keep));
    }
    *keep_out = keep;
    if (eps == 0) return hot;
    tc_tensor *hf = TC_S(s, tc_cast(hot, logits->node->dtype));
    tc_tensor *on = s->failed ? NULL : tc_scope_scalar(s, logits, 1 - eps);
    tc_tensor *spread = s->failed ? NULL : tc_scope_scalar(s, logits, eps / (double)c);
    tc_tensor *hon = TC_S(s, tc_mul(hf, on));
    tc_tensor *w = TC_S(s, tc_add(hon, spread));
    if (!keep) return w;
    tc_tensor *zero = s->failed ? NULL : tc_scope_scalar(s, logits, 0);
    return TC_S(s, tc_where(keep, w, zero));
}

static const char *const reduction_names[TC_REDUCTION_COUNT] = {
    [TC_REDUCTION_MEAN] = "mean",
    [TC_REDUCTION_SUM] = "sum",
    [TC_REDUCTION_NONE] = "none",
};

/* the loss of the formula above; arguments checked. The mean and the sum
 * reduce the rows' losses (N), so that the reduce over the classes stays
 * in one kernel with log_softmax and the count of rows kept shares the
 * second kernel's loop. */
static tc_tensor *cross_entropy_ex(tc_scope *s, tc_tensor *logits, tc_tensor *labels,
                                   tc_reduction reduction, bool has_ignore, int64_t ignore,
                                   double eps) {
    tc_tensor *keep = NULL, *w = weights(s, logits, labels, has_ignore, ignore, eps, &keep);
    tc_tensor *lsm = TC_S(s, tc_log_softmax(logits, 1));
    tc_tensor *lw = TC_S(s, tc_mul(lsm, w));
    tc_tensor *picked = TC_S(s, tc_neg(lw));
    static const int classes[1] = {1};
    tc_tensor *rows = TC_S(s, tc_sum(picked, 1, classes, false)); /* (N) */
    if (reduction != TC_REDUCTION_NONE) rows = TC_S(s, tc_contiguous(rows));
    switch (reduction) {
    case TC_REDUCTION_NONE: return rows;
    case TC_REDUCTION_SUM: return TC_S(s, tc_sum(rows, 0, NULL, false));
    case TC_REDUCTION_MEAN: {
        tc_tensor *total = TC_S(s, tc_sum(rows, 0, NULL, false));
        int64_t n = logits->node->shape[0];
        if (keep) { /* rows kept: n - sum(labels == ignore), not read from keep */
            tc_dtype lt = labels->node->dtype, ft = logits->node->dtype;
            tc_tensor *ig = TC_S(s, tc_full(0, NULL, (double)ignore, lt, tc_device(logits)));
            tc_tensor *is_ig = TC_S(s, tc_eq(labels, ig));
            tc_tensor *drop = TC_S(s, tc_cast(is_ig, ft));
            tc_tensor *nt = s->failed ? NULL : tc_scope_scalar(s, total, (double)n);
            tc_tensor *dropped = TC_S(s, tc_sum(drop, 0, NULL, false));
            tc_tensor *kept = TC_S(s, tc_sub(nt, dropped));
            return TC_S(s, tc_div(total, kept));
        }
        tc_tensor *k = s->failed ? NULL : tc_scope_scalar(s, total, n > 0 ? 1.0 / (double)n : NAN);
        return TC_S(s, tc_mul(total, k));
    }
    case TC_REDUCTION_COUNT: break;
    }
    return NULL;
}

TC_API tc_tensor *tc_cross_entropy_ex(tc_tensor *logits, tc_tensor *labels, tc_reduction reduction,
                                      int64_t ignore_index, double label_smoothing) {
    TC_API_ENTER();
    const char *api = "tc_cross_entropy_ex";
    tc_lock();
    tc_tensor *out = NULL;
    if (check_args(api, logits, labels) != TC_OK) goto done;
    if ((int)reduction < 0 || reduction >= TC_REDUCTION_COUNT) {
        tc_error_set(TC_ERR_INVALID,
                     "%s: reduction %d is not one of TC_REDUCTION_MEAN, _SUM, "
                     "_NONE",
                     api, (int)reduction);
        goto done;
    }
    if (!(label_smoothing >= 0 && label_smoothing <= 1)) {
        tc_error_set(TC_ERR_INVALID, "%s: label_smoothing %g must be in [0, 1]", api,
                     label_smoothing);
        goto done;
    }
    if (!tc_dtypes[logits->node->dtype].is_float) {
        tc_error_set(TC_ERR_DTYPE, "%s: logits must be float, got %s", api,
                     tc_dtypes[logits->node->dtype].name);
        goto done;
    }
    if (check_labels(api, labels, logits->node->shape[1], true, ignore_index) != TC_OK) goto done;
    tc_scope s = {0};
    tc_tensor *r =
        cross_entropy_ex(&s, logits, labels, reduction, true, ignore_index, label_smoothing);
    if (!r && !s.failed)
        TC_INTERNAL("%s: reduction %s gave no tensor", api, reduction_names[reduction]);
    out = tc_scope_end(&s, r);
done:
    tc_unlock();
    return out;
}

TC_API tc_tensor *tc_cross_entropy(tc_tensor *logits, tc_tensor *labels) {
    TC_API_ENTER();
    const char *api = "tc_cross_entropy";
    tc_lock();
    tc_tensor *out = NULL;
    if (check_args(api, logits, labels) == TC_OK &&
        check_labels(api, labels, logits->node->shape[1], false, 0) == TC_OK) {
        tc_scope s = {0};
        out =
            tc_scope_end(&s, cross_entropy_ex(&s, logits, labels, TC_REDUCTION_MEAN, false, 0, 0));
    }
    tc_unlock();
    return out;
}
