/* optim.c - optimizers: SGD (momentum, dampening, weight decay, nesterov),
 * Adam and AdamW, with PyTorch's formulas (torch.optim, single-tensor path).
 *
 * tc_optimizer_step builds every update lazily (tc_assign on each parameter
 * and each state tensor) and realizes all of them, and whatever the caller
 * adds (the loss, BatchNorm's running statistics), in ONE tc_realize, so the
 * scheduler sees the whole step at once (tinygrad's schedule_step). State
 * lives in realized tensors that the updates overwrite in place: momentum
 * buffers, Adam's m and v, and the step-dependent scalars lr, b1^t and b2^t
 * as 0-d tensors, so every step runs the same kernels (and a tc_jit can
 * replay them). The optimizer holds a reference to each parameter and owns
 * its state; tc_optimizer_free releases both. */
#include "nn.h"

#include <math.h>
#include <string.h>

typedef enum {
    OPT_SGD,  /* torch.optim.SGD */
    OPT_ADAM, /* torch.optim.Adam (weight_decay 0) */
    OPT_ADAMW /* torch.optim.AdamW: decoupled weight decay */
} opt_kind;

struct tc_optimizer {
    opt_kind kind;       /* which update */
    const char *api;     /* the constructor's name, for messages */
    int n;               /* number of parameters */
    tc_tensor **params;  /* n retained parameters, updated in place */
    tc_tensor **m;       /* n: SGD momentum buffers / Adam first moments (NULL: none) */
    tc_tensor **v;       /* n: Adam second moments (NULL for SGD) */
    tc_tensor *lr;       /* 0-d float32 learning rate, realized */
    tc_tensor *b1_t;     /* Adam: 0-d b1^t (t = steps taken), realized */
    tc_tensor *b2_t;     /* Adam: 0-d b2^t */
    double lr_value;     /* the learning rate lr holds */
    double momentum;     /* SGD momentum (0: plain SGD) */
    double dampening;    /* SGD: the new gradient's weight is 1 - dampening */
    double weight_decay; /* SGD: L2 added to the gradient; AdamW: decoupled decay */
    bool nesterov;       /* SGD: nesterov momentum */
    double b1, b2, eps;  /* Adam's betas and epsilon */
    int64_t steps;       /* steps taken */
};

/* ---- construction ------------------------------------------------------------ */

/* a realized 0-d float32 tensor holding v on device */
static tc_tensor *scalar(double v, const char *device) {
    float f = (float)v;
    return tc_from_data(&f, TC_FLOAT32, 0, NULL, device);
}

/* a realized tensor of zeros like p (uploaded: no kernel) */
static tc_tensor *zeros_like(tc_tensor *p) {
    size_t nbytes = (size_t)tc_numel(p) * tc_dtype_size(tc_get_dtype(p));
    void *z = tc_calloc(nbytes ? nbytes : 1, 1);
    if (!z) return NULL;
    tc_tensor *t = tc_from_data(z, tc_get_dtype(p), tc_ndim(p), tc_shape(p), tc_device(p));
    tc_free(z);
    return t;
}

/* params: non-NULL, distinct, float, on one device */
TC_MUST_USE static tc_status check_params(const char *api, tc_tensor **params, int n) {
    if (n <= 0 || !params)
        return tc_error_set(TC_ERR_INVALID, "%s: %s", api,
                            n <= 0 ? "got no parameters (n <= 0)" : "params is NULL");
    for (int i = 0; i < n; i++) {
        if (!params[i]) return tc_error_set(TC_ERR_INVALID, "%s: params[%d] is NULL", api, i);
        tc_dtype dt = tc_get_dtype(params[i]);
        if (!tc_dtypes[dt].is_float)
            return tc_error_set(TC_ERR_DTYPE, "%s: params[%d] is %s; parameters are float", api, i,
                                tc_dtype_name(dt));
        if (strcmp(tc_device(params[i]), tc_device(params[0])) != 0)
            return tc_error_set(TC_ERR_DEVICE, "%s: params[%d] is on %s but params[0] on %s", api,
                                i, tc_device(params[i]), tc_device(params[0]));
        for (int j = 0; j < i; j++)
            if (params[j] == params[i])
                return tc_error_set(TC_ERR_INVALID, "%s: params[%d] is params[%d] again", api, i,
                                    j);
    }
    return TC_OK;
}

/* a hyperparameter >= 0, and below 1 when is_beta */
TC_MUST_USE static tc_status check_value(const char *api, const char *name, double v, bool is_beta) {
    if (!(v >= 0) || isinf(v) || (is_beta && !(v < 1)))
        return tc_error_set(TC_ERR_INVALID, "%s: %s must be %s, got %g", api, name,
                            is_beta ? "in [0, 1)" : "finite and >= 0", v);
    return TC_OK;
}

/* the optimizer with its parameters retained (marked requires_grad) and its
 * state allocated: m when has_m, v when has_v */
static tc_optimizer *create(opt_kind kind, const char *api, tc_tensor **params, int n, double lr,
                            bool has_m, bool has_v) {
    tc_optimizer *o = tc_calloc(1, sizeof *o);
    if (!o) return NULL;
    o->kind = kind, o->api = api, o->lr_value = lr;
    o->params = tc_calloc((size_t)n, sizeof *o->params);
    o->m = tc_calloc((size_t)n, sizeof *o->m);
    o->v = tc_calloc((size_t)n, sizeof *o->v);
    bool ok = o->params && o->m && o->v;
    for (int i = 0; ok && i < n; i++) {
        ok = tc_set_requires_grad(params[i], true) == TC_OK;
        if (ok) o->params[i] = tc_retain(params[i]);
        o->n = i + 1;
        if (ok && has_m) ok = (o->m[i] = zeros_like(params[i])) != NULL;
        if (ok && has_v) ok = (o->v[i] = zeros_like(params[i])) != NULL;
    }
    const char *dev = tc_device(params[0]);
    if (ok) ok = (o->lr = scalar(lr, dev)) != NULL;
    if (ok && kind != OPT_SGD)
        ok = (o->b1_t = scalar(1, dev)) != NULL && (o->b2_t = scalar(1, dev)) != NULL;
    if (!ok) {
        tc_optimizer_free(o);
        return NULL;
    }
    return o;
}

TC_API tc_optimizer *tc_sgd_ex(tc_tensor **params, int n, double lr, double momentum,
                               double dampening, double weight_decay, bool nesterov) {
    TC_API_ENTER();
    const char *api = "tc_sgd";
    if (check_params(api, params, n) != TC_OK || check_value(api, "lr", lr, false) != TC_OK ||
        check_value(api, "momentum", momentum, false) != TC_OK ||
        check_value(api, "dampening", dampening, false) != TC_OK ||
        check_value(api, "weight_decay", weight_decay, false) != TC_OK)
        return NULL;
    if (nesterov && (momentum <= 0 || dampening != 0)) {
        tc_error_set(TC_ERR_INVALID,
                     "%s: nesterov needs a momentum > 0 and zero dampening "
                     "(got momentum %g, dampening %g)",
                     api, momentum, dampening);
        return NULL;
    }
    tc_optimizer *o = create(OPT_SGD, api, params, n, lr, momentum != 0, false);
    if (!o) return NULL;
    o->momentum = momentum, o->dampening = dampening;
    o->weight_decay = weight_decay, o->nesterov = nesterov;
    return o;
}

TC_API tc_optimizer *tc_sgd(tc_tensor **params, int n, double lr, double momentum) {
    TC_API_ENTER();
    return tc_sgd_ex(params, n, lr, momentum, 0, 0, false);
}

static tc_optimizer *adam_common(opt_kind kind, const char *api, tc_tensor **params, int n,
                                 double lr, double b1, double b2, double eps, double wd) {
    if (check_params(api, params, n) != TC_OK || check_value(api, "lr", lr, false) != TC_OK ||
        check_value(api, "b1", b1, true) != TC_OK || check_value(api, "b2", b2, true) != TC_OK ||
        check_value(api, "eps", eps, false) != TC_OK ||
        check_value(api, "weight_decay", wd, false) != TC_OK)
        return NULL;
    tc_optimizer *o = create(kind, api, params, n, lr, true, true);
    if (!o) return NULL;
    o->b1 = b1, o->b2 = b2, o->eps = eps, o->weight_decay = wd;
    return o;
}

TC_API tc_optimizer *tc_adam(tc_tensor **params, int n, double lr, double b1, double b2,
                             double eps) {
    TC_API_ENTER();
    return adam_common(OPT_ADAM, "tc_adam", params, n, lr, b1, b2, eps, 0);
}

TC_API tc_optimizer *tc_adamw(tc_tensor **params, int n, double lr, double b1, double b2,
                              double eps, double weight_decay) {
    TC_API_ENTER();
    return adam_common(OPT_ADAMW, "tc_adamw", params, n, lr, b1, b2, eps, weight_decay);
}

TC_API void tc_optimizer_free(tc_optimizer *o) {
    TC_API_ENTER();
    if (!o) return;
    for (int i = 0; i < o->n; i++) {
        if (o->params) tc_release(o->params[i]);
        if (o->m) tc_release(o->m[i]);
        if (o->v) tc_release(o->v[i]);
    }
    tc_free(o->params);
    tc_free(o->m);
    tc_free(o->v);
    tc_release(o->lr);
    tc_release(o->b1_t);
    tc_release(o->b2_t);
    tc_free(o);
}

/* ---- building the update ----------------------------------------------------
 * These helpers take ownership of their tensor arguments (they release them)
 * and return a new tensor, or NULL when an argument is NULL or the call
 * fails, so expressions nest without checks in between. */

typedef tc_tensor *(*binary_fn)(tc_tensor *, tc_tensor *);

static tc_tensor *own2(binary_fn f, tc_tensor *a, tc_tensor *b) {
    tc_tensor *r = a && b ? f(a, b) : NULL;
    tc_release(a);
    tc_release(b);
    return r;
}
#define ADD(a, b) own2(tc_add, (a), (b))
#define SUB(a, b) own2(tc_sub, (a), (b))
#define MUL(a, b) own2(tc_mul, (a), (b))
#define DIV(a, b) own2(tc_div, (a), (b))

static tc_tensor *own_sqrt(tc_tensor *a) {
    tc_tensor *r = a ? tc_sqrt(a) : NULL;
    tc_release(a);
    return r;
}

/* a 0-d float32 constant on o's device (no buffer) */
static tc_tensor *K(const tc_optimizer *o, double v) {
    return tc_full(0, NULL, v, TC_FLOAT32, tc_device(o->params[0]));
}
#define R(t) tc_retain(t) /* a borrowed tensor as an owned one */

/* assigns value (consumed) to dst; records dst in out[*n] */
TC_MUST_USE static tc_status put(tc_tensor *dst, tc_tensor *value, tc_tensor **out, int *n) {
    tc_status s = value ? tc_assign(dst, value) : tc_last_status();
    tc_release(value);
    if (s == TC_OK) out[(*n)++] = dst;
    return s;
}

/* SGD for parameter i with gradient g (consumed):
 *   d = g + wd*p;  b = momentum*b + (1-dampening)*d  (b = d on the first step);
 *   d = nesterov ? d + momentum*b : b;  p = p - lr*d */
TC_MUST_USE static tc_status sgd_param(tc_optimizer *o, int i, tc_tensor *g, tc_tensor **out, int *n) {
    tc_tensor *p = o->params[i], *b = o->m[i];
    tc_tensor *d = o->weight_decay ? ADD(g, MUL(R(p), K(o, o->weight_decay))) : g;
    if (o->momentum) {
        tc_tensor *nb;
        if (o->dampening && o->steps == 0) nb = R(d);
        else if (o->dampening)
            nb = ADD(MUL(R(b), K(o, o->momentum)), MUL(R(d), K(o, 1 - o->dampening)));
        else nb = ADD(MUL(R(b), K(o, o->momentum)), R(d));
        tc_status s = put(b, nb, out, n);
        if (s != TC_OK) {
            tc_release(d);
            return s;
        }
        if (o->nesterov) {
            d = ADD(d, MUL(R(b), K(o, o->momentum)));
        } else {
            tc_release(d);
            d = R(b);
        }
    }
    return put(p, SUB(R(p), MUL(R(o->lr), d)), out, n);
}

/* Adam / AdamW for parameter i with gradient g (consumed), after b1_t and
 * b2_t were assigned b1^t and b2^t:
 *   m = b1*m + (1-b1)*g;  v = b2*v + (1-b2)*g*g;
 *   p = p*(1 - lr*wd) (AdamW only);
 *   p = p - lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps) */
TC_MUST_USE static tc_status adam_param(tc_optimizer *o, int i, tc_tensor *g, tc_tensor *b1_t, tc_tensor *b2_t,
                            tc_tensor **out, int *n) {
    tc_tensor *p = o->params[i], *m = o->m[i], *v = o->v[i];
    tc_tensor *gg = MUL(R(g), R(g));
    tc_status s = put(m, ADD(MUL(R(m), K(o, o->b1)), MUL(g, K(o, 1 - o->b1))), out, n);
    if (s != TC_OK) {
        tc_release(gg);
        return s;
    }
    s = put(v, ADD(MUL(R(v), K(o, o->b2)), MUL(gg, K(o, 1 - o->b2))), out, n);
    if (s != TC_OK) return s;
    tc_tensor *base = R(p);
    if (o->kind == OPT_ADAMW && o->weight_decay)
        base = MUL(base, SUB(K(o, 1), MUL(R(o->lr), K(o, o->weight_decay))));
    tc_tensor *step_size = DIV(R(o->lr), SUB(K(o, 1), R(b1_t)));
    tc_tensor *denom = ADD(DIV(own_sqrt(R(v)), own_sqrt(SUB(K(o, 1), R(b2_t)))), K(o, o->eps));
    return put(p, SUB(base, DIV(MUL(step_size, R(m)), denom)), out, n);
}

/* assigns every update; the tensors to realize go to out[0..*n-1] */
TC_MUST_USE static tc_status build_step(tc_optimizer *o, tc_tensor **out, int *n) {
    tc_status s = TC_OK;
    tc_tensor *b1_t = NULL, *b2_t = NULL; /* b1^t and b2^t of this step (lazy) */
    if (o->kind != OPT_SGD) {
        b1_t = MUL(R(o->b1_t), K(o, o->b1));
        b2_t = MUL(R(o->b2_t), K(o, o->b2));
        if (!b1_t || !b2_t) s = tc_last_status();
    }
    for (int i = 0; s == TC_OK && i < o->n; i++) {
        tc_tensor *g = tc_grad(o->params[i]);
        if (!g) continue; /* no gradient: this parameter did not take part (PyTorch skips it) */
        s = o->kind == OPT_SGD ? sgd_param(o, i, g, out, n)
                               : adam_param(o, i, g, b1_t, b2_t, out, n);
    }
    if (s == TC_OK && b1_t) s = put(o->b1_t, R(b1_t), out, n);
    if (s == TC_OK && b2_t) s = put(o->b2_t, R(b2_t), out, n);
    tc_release(b1_t);
    tc_release(b2_t);
    return s;
}

TC_API tc_status tc_optimizer_step_with(tc_optimizer *o, tc_tensor **also, int n_also) {
    TC_API_ENTER();
    if (!o) return tc_error_set(TC_ERR_INVALID, "tc_optimizer_step: optimizer is NULL");
    if (n_also < 0 || (n_also > 0 && !also))
        return tc_error_set(TC_ERR_INVALID, "tc_optimizer_step: %s",
                            n_also < 0 ? "n_also is negative" : "also is NULL");
    for (int i = 0; i < n_also; i++)
        if (!also[i]) return tc_error_set(TC_ERR_INVALID, "tc_optimizer_step: also[%d] is NULL", i);
    /* at most: b1_t, b2_t, per parameter m, v, p and its gradient */
    tc_tensor **ts = tc_malloc(sizeof *ts * (size_t)(2 + 4 * o->n + n_also));
    if (!ts) return TC_ERR_MEMORY;
    /* the gradients still lazy are realized with the step, each stored by
     * the kernel that computes it and its update (group.c: no kernel more).
     * Left lazy, their graphs would keep the step's activations alive until
     * the next zero_grad (out of a JIT's memory plan), and read after the
     * update they would be recomputed from the updated parameters (torch's
     * .grad holds the values the step used) */
    int n = 0;
    for (int i = 0; i < o->n; i++) {
        tc_tensor *g = tc_grad(o->params[i]);
        if (g && !tc_is_realized(g)) ts[n++] = g;
        else tc_release(g);
    }
    int n_grads = n;
    tc_status s = build_step(o, ts, &n);
    for (int i = 0; i < n_also; i++) ts[n++] = also[i];
    if (s == TC_OK) s = tc_realize(ts, n);
    if (s == TC_OK) o->steps++;
    for (int i = 0; i < n_grads; i++) tc_release(ts[i]);
    tc_free(ts);
    return s;
}

TC_API int tc_optimizer_schedule_step(tc_optimizer *o, tc_tensor **out, int cap) {
    TC_API_ENTER();
    if (!o || cap < 0 || (cap > 0 && !out)) {
        tc_error_set(TC_ERR_INVALID, "tc_optimizer_schedule_step: %s",
                     !o        ? "optimizer is NULL"
                     : cap < 0 ? "cap is negative"
                               : "out is NULL");
        return -1;
    }
    tc_tensor **ts = tc_malloc(sizeof *ts * (size_t)(2 + 3 * o->n));
    if (!ts) return -1;
    int n = 0;
    tc_status s = build_step(o, ts, &n);
    for (int i = 0; s == TC_OK && i < n && i < cap; i++) out[i] = ts[i];
    tc_free(ts);
    return s == TC_OK ? n : -1;
}

TC_API tc_status tc_optimizer_step(tc_optimizer *o) {
    TC_API_ENTER();
    return tc_optimizer_step_with(o, NULL, 0);
}

TC_API tc_status tc_optimizer_zero_grad(tc_optimizer *o) {
    TC_API_ENTER();
    if (!o) return tc_error_set(TC_ERR_INVALID, "tc_optimizer_zero_grad: optimizer is NULL");
    for (int i = 0; i < o->n; i++) {
        tc_status s = tc_zero_grad(o->params[i]);
        if (s != TC_OK) return s;
    }
    return TC_OK;
}

TC_API tc_status tc_optimizer_set_lr(tc_optimizer *o, double lr) {
    TC_API_ENTER();
    if (!o) return tc_error_set(TC_ERR_INVALID, "tc_optimizer_set_lr: optimizer is NULL");
    if (check_value("tc_optimizer_set_lr", "lr", lr, false) != TC_OK) return TC_ERR_INVALID;
    tc_tensor *v = scalar(lr, tc_device(o->lr));
    tc_status s = v ? tc_assign(o->lr, v) : tc_last_status();
    tc_release(v);
    if (s == TC_OK) s = tc_realize(&o->lr, 1); /* in place: a tc_jit replay sees it */
    if (s == TC_OK) o->lr_value = lr;
    return s;
}

TC_API double tc_optimizer_get_lr(const tc_optimizer *o) {
    TC_API_ENTER();
    if (!o) {
        tc_error_set(TC_ERR_INVALID, "tc_optimizer_get_lr: optimizer is NULL");
        return NAN;
    }
    return o->lr_value;
}
