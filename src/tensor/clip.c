/* clip.c - tc_clip_grad_norm, torch.nn.utils.clip_grad_norm_: the norm of
 * every gradient taken together, and the gradients scaled so that their
 * norm is at most max_norm. Lazy like the gradients: the norm and the scaled
 * gradients run when they are next realized (an optimizer step realizes
 * the gradients; pass the norm to tc_optimizer_step_with to get it in the
 * same schedule). O(number of parameters) graph nodes.
 *
 *   total = (sum over parameters p of sum |g_p|^q)^(1/q)  (q = norm_type;
 *           q = 2: sqrt of sums of squares; q = inf: max of max |g_p|)
 *   g_p  <- g_p * min(max_norm / (total + 1e-6), 1)
 * Each gradient's reduce runs over its own shape: one kernel per parameter
 * with a gradient, the total riding on the last; the coefficient is
 * recomputed in each scaled gradient's reader (tests/autograd/test_clip.c
 * pins the counts). */
#include "tensor.h"

#include <math.h>

/* |g|^q summed (or max |g| for q = inf), as a 0-d tensor; g borrowed */
static tc_tensor *part(tc_tensor *g, double q) {
    tc_scope s = {0};
    tc_tensor *r = NULL;
    if (q == 2) {
        tc_tensor *g2 = TC_S(&s, tc_mul(g, g));
        r = TC_S(&s, tc_sum(g2, 0, NULL, false));
    } else {
        tc_tensor *a = TC_S(&s, tc_abs(g));
        if (isinf(q)) {
            r = TC_S(&s, tc_max(a, 0, NULL, false));
        } else {
            tc_tensor *e = s.failed ? NULL : tc_scope_scalar(&s, a, q);
            tc_tensor *aq = TC_S(&s, tc_pow(a, e));
            r = TC_S(&s, tc_sum(aq, 0, NULL, false));
        }
    }
    return tc_scope_end(&s, s.failed ? NULL : TC_S(&s, tc_cast(r, TC_FLOAT32)));
}

TC_MUST_USE static tc_status check_clip(tc_tensor **params, int n, double max_norm, double q) {
    const char *api = "tc_clip_grad_norm";
    if (n < 0 || (n > 0 && !params))
        return tc_error_set(TC_ERR_INVALID, "%s: %s", api, n < 0 ? "n < 0" : "params is NULL");
    if (!(max_norm >= 0) || isinf(max_norm))
        return tc_error_set(TC_ERR_INVALID, "%s: max_norm %g must be finite and >= 0", api,
                            max_norm);
    if (!(q > 0))
        return tc_error_set(TC_ERR_INVALID, "%s: norm_type %g must be > 0 (or inf)", api, q);
    for (int i = 0; i < n; i++)
        if (!params[i]) return tc_error_set(TC_ERR_INVALID, "%s: params[%d] is NULL", api, i);
    return TC_OK;
}

/* the total norm of the gradients of params (0 when none has one) */
static tc_tensor *total_norm(tc_tensor **params, int n, double q, const char *device) {
    tc_tensor *acc = NULL;
    for (int i = 0; i < n; i++) {
        if (!params[i]->grad) continue;
        tc_tensor *p = part(params[i]->grad, q), *next = NULL;
        if (p && acc) next = isinf(q) ? tc_maximum(acc, p) : tc_add(acc, p);
        else next = p ? tc_retain(p) : NULL;
        tc_release(p);
        tc_release(acc);
        acc = next;
        if (!acc) return NULL;
    }
    if (!acc) return tc_full(0, NULL, 0, TC_FLOAT32, device);
    if (isinf(q)) return acc;
    tc_tensor *e = q == 2 ? NULL : tc_full(0, NULL, 1 / q, TC_FLOAT32, device);
    tc_tensor *r = q == 2 ? tc_sqrt(acc) : e ? tc_pow(acc, e) : NULL;
    tc_release(e);
    tc_release(acc);
    return r;
}

/* min(max_norm / (total + 1e-6), 1), float32 0-d */
static tc_tensor *coefficient(tc_tensor *total, double max_norm) {
    tc_scope s = {0};
    const char *dev = tc_device(total);
    tc_tensor *m = TC_S(&s, tc_full(0, NULL, max_norm, TC_FLOAT32, dev));
    tc_tensor *e = TC_S(&s, tc_full(0, NULL, 1e-6, TC_FLOAT32, dev));
    tc_tensor *one = TC_S(&s, tc_full(0, NULL, 1, TC_FLOAT32, dev));
    tc_tensor *te = TC_S(&s, tc_add(total, e));
    tc_tensor *c = TC_S(&s, tc_div(m, te));
    return tc_scope_end(&s, TC_S(&s, tc_minimum(c, one)));
}

/* every gradient times coef, all made before any is replaced: a failure
 * changes nothing */
TC_MUST_USE static tc_status scale_grads(tc_tensor **params, int n, tc_tensor *coef) {
    tc_tensor **scaled = tc_calloc((size_t)(n > 0 ? n : 1), sizeof *scaled);
    if (!scaled) return TC_ERR_MEMORY;
    bool ok = true;
    for (int i = 0; i < n && ok; i++) {
        tc_tensor *g = params[i]->grad;
        if (!g) continue;
        tc_tensor *cg = tc_cast(coef, g->node->dtype);
        scaled[i] = cg ? tc_mul(g, cg) : NULL;
        ok = scaled[i] != NULL;
        tc_release(cg);
    }
    for (int i = 0; i < n; i++) {
        if (ok && scaled[i]) {
            tc_release(params[i]->grad);
            params[i]->grad = scaled[i];
        } else {
            tc_release(scaled[i]);
        }
    }
    tc_free(scaled);
    return ok ? TC_OK : tc_error_code();
}

TC_API tc_tensor *tc_clip_grad_norm(tc_tensor **params, int n, double max_norm, double norm_type) {
    TC_API_ENTER();
    tc_lock();
    tc_tensor *total = NULL, *coef = NULL;
    if (check_clip(params, n, max_norm, norm_type) != TC_OK) goto done;
    total = total_norm(params, n, norm_type, n > 0 ? tc_device(params[0]) : NULL);
    coef = total ? coefficient(total, max_norm) : NULL;
    if (!coef || scale_grads(params, n, coef) != TC_OK) {
        tc_release(total);
        total = NULL;
    }
done:
    tc_release(coef);
    tc_unlock();
    return total;
}
