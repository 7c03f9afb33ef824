/* layers.c - nn layers with PyTorch's default initialisation: Linear,
 * Conv2d, BatchNorm2d, LayerNorm and Embedding; their tensors by name, parameter and buffer lists,
 * training mode, and saving/loading lists of layers as safetensors.
 *
 * Linear and Conv2d draw weight and bias from U(-1/sqrt(fan_in),
 * 1/sqrt(fan_in)) (torch's kaiming_uniform_ with a = sqrt(5) and its bias
 * rule) with tc_rand, so tc_manual_seed makes them reproducible. BatchNorm2d
 * starts with weight 1, bias 0, running mean 0, running variance 1 and
 * momentum 0.1. LayerNorm starts with weight 1 and bias 0, Embedding's
 * weight is drawn from N(0, 1) with tc_randn. Every tensor is realized at
 * creation, and the layer owns it; forward builds a lazy graph with
 * tc_linear, tc_conv2d, tc_batchnorm, tc_layernorm (times weight, plus
 * bias) or tc_index (a gather of weight's rows). */
#include "nn.h"

#include <math.h>
#include <string.h>

#define MAX_TENSORS 4 /* weight, bias, running_mean, running_var */

struct tc_layer {
    tc_layer_kind kind;              /* which layer */
    int n_tensors;                   /* tensors[0..n_tensors-1] are set */
    int n_params;                    /* the first n_params of them are trainable */
    const char *names[MAX_TENSORS];  /* "weight", "bias", ... (static strings) */
    tc_tensor *tensors[MAX_TENSORS]; /* owned, realized */
    int64_t in, out;                 /* features or channels in and out (BN: in = out) */
    int kernel, stride, padding;     /* Conv2d geometry */
    double eps, momentum;            /* BatchNorm2d; LayerNorm's eps */
    bool is_training;                /* BatchNorm2d: batch statistics (default) or running */
};

static const char *const kind_names[TC_LAYER_COUNT] = {
    [TC_LAYER_LINEAR] = "Linear",
    [TC_LAYER_CONV2D] = "Conv2d",
    [TC_LAYER_BATCHNORM2D] = "BatchNorm2d",
    [TC_LAYER_LAYERNORM] = "LayerNorm",
    [TC_LAYER_EMBEDDING] = "Embedding",
};

/* ---- creation ------------------------------------------------------------------ */

/* a realized float32 tensor of shape drawn from U(-bound, bound) */
static tc_tensor *uniform(int ndim, const int64_t *shape, double bound, const char *device) {
    tc_tensor *u = tc_rand(ndim, shape, TC_FLOAT32, NULL);
    if (!u) return NULL;
    int64_t n = tc_numel(u);
    float *h = tc_malloc(sizeof *h * (size_t)(n ? n : 1));
    tc_status s = h ? tc_to_host(u, h, sizeof *h * (size_t)n) : TC_ERR_MEMORY;
    tc_release(u);
    tc_tensor *t = NULL;
    if (s == TC_OK) {
        for (int64_t i = 0; i < n; i++) h[i] = (float)(((double)h[i] * 2 - 1) * bound);
        t = tc_from_data(h, TC_FLOAT32, ndim, shape, device);
    }
    tc_free(h);
    return t;
}

/* a realized float32 tensor of shape drawn from N(0, 1) */
static tc_tensor *normal(int ndim, const int64_t *shape, const char *device) {
    tc_tensor *r = tc_randn(ndim, shape, TC_FLOAT32, NULL);
    if (!r) return NULL;
    int64_t n = tc_numel(r);
    float *h = tc_malloc(sizeof *h * (size_t)(n ? n : 1));
    tc_status s = h ? tc_to_host(r, h, sizeof *h * (size_t)n) : TC_ERR_MEMORY;
    tc_release(r);
    tc_tensor *t = s == TC_OK ? tc_from_data(h, TC_FLOAT32, ndim, shape, device) : NULL;
    tc_free(h);
    return t;
}

/* a realized float32 tensor of n values v */
static tc_tensor *filled(int64_t n, float v, const char *device) {
    float *h = tc_malloc(sizeof *h * (size_t)(n ? n : 1));
    if (!h) return NULL;
    for (int64_t i = 0; i < n; i++) h[i] = v;
    tc_tensor *t = tc_from_data(h, TC_FLOAT32, 1, &n, device);
    tc_free(h);
    return t;
}

/* adds tensor t (owned; NULL means a failure) as `name`; false on failure */
static bool add(tc_layer *l, const char *name, tc_tensor *t, bool is_param) {
    if (!t) return false;
    l->names[l->n_tensors] = name;
    l->tensors[l->n_tensors++] = t;
    if (is_param) {
        l->n_params++;
        if (tc_set_requires_grad(t, true) != TC_OK) return false;
    }
    return true;
}

/* prefixes the last error with api ("tc_nn_linear: tc_from_data: ...") */
static void blame(const char *api) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", tc_last_error());
    tc_status code = tc_last_status();
    tc_error_set(code ? code : TC_ERR_INTERNAL, "%s: %s", api, msg);
}

/* frees l after a failed creation and names api in the error */
static tc_layer *fail(tc_layer *l, const char *api) {
    blame(api);
    tc_layer_free(l);
    return NULL;
}

static tc_layer *new_layer(tc_layer_kind kind, int64_t in, int64_t out) {
    tc_layer *l = tc_calloc(1, sizeof *l);
    if (l) l->kind = kind, l->in = in, l->out = out, l->is_training = true;
    return l;
}

TC_API tc_layer *tc_nn_linear(int64_t in_features, int64_t out_features, bool bias,
                              const char *device) {
    TC_API_ENTER();
    const char *api = "tc_nn_linear";
    if (in_features <= 0 || out_features <= 0) {
        tc_error_set(TC_ERR_INVALID, "%s: features must be > 0, got in %lld out %lld", api,
                     (long long)in_features, (long long)out_features);
        return NULL;
    }
    tc_layer *l = new_layer(TC_LAYER_LINEAR, in_features, out_features);
    if (!l) return NULL;
    double bound = 1 / sqrt((double)in_features);
    int64_t wshape[2] = {out_features, in_features};
    if (!add(l, "weight", uniform(2, wshape, bound, device), true) ||
        (bias && !add(l, "bias", uniform(1, &out_features, bound, device), true)))
        return fail(l, api);
    return l;
}

TC_API tc_layer *tc_nn_conv2d(int64_t in_channels, int64_t out_channels, int kernel_size,
                              int stride, int padding, bool bias, const char *device) {
    TC_API_ENTER();
    const char *api = "tc_nn_conv2d";
    if (in_channels <= 0 || out_channels <= 0 || kernel_size <= 0 || stride <= 0 || padding < 0) {
        tc_error_set(TC_ERR_INVALID,
                     "%s: bad geometry: in_channels %lld, out_channels %lld, "
                     "kernel_size %d, stride %d, padding %d (sizes and stride > 0, padding >= 0)",
                     api, (long long)in_channels, (long long)out_channels, kernel_size, stride,
                     padding);
        return NULL;
    }
    tc_layer *l = new_layer(TC_LAYER_CONV2D, in_channels, out_channels);
    if (!l) return NULL;
    l->kernel = kernel_size, l->stride = stride, l->padding = padding;
    double bound = 1 / sqrt((double)in_channels * kernel_size * kernel_size);
    int64_t wshape[4] = {out_channels, in_channels, kernel_size, kernel_size};
    if (!add(l, "weight", uniform(4, wshape, bound, device), true) ||
        (bias && !add(l, "bias", uniform(1, &out_channels, bound, device), true)))
        return fail(l, api);
    return l;
}

TC_API tc_layer *tc_nn_batchnorm2d(int64_t channels, double eps, double momentum,
                                   const char *device) {
    TC_API_ENTER();
    const char *api = "tc_nn_batchnorm2d";
    if (channels <= 0 || !(eps > 0) || !(momentum >= 0 && momentum <= 1)) {
        tc_error_set(TC_ERR_INVALID,
                     "%s: channels %lld, eps %g, momentum %g (want channels > 0, "
                     "eps > 0, 0 <= momentum <= 1)",
                     api, (long long)channels, eps, momentum);
        return NULL;
    }
    tc_layer *l = new_layer(TC_LAYER_BATCHNORM2D, channels, channels);
    if (!l) return NULL;
    l->eps = eps, l->momentum = momentum;
    if (!add(l, "weight", filled(channels, 1, device), true) ||
        !add(l, "bias", filled(channels, 0, device), true) ||
        !add(l, "running_mean", filled(channels, 0, device), false) ||
        !add(l, "running_var", filled(channels, 1, device), false))
        return fail(l, api);
    return l;
}

TC_API tc_layer *tc_nn_layernorm(int64_t features, double eps, bool elementwise_affine,
                                 bool bias, const char *device) {
    TC_API_ENTER();
    const char *api = "tc_nn_layernorm";
    if (features <= 0 || !(eps > 0)) {
        tc_error_set(TC_ERR_INVALID, "%s: features %lld, eps %g (want features > 0, eps > 0)",
                     api, (long long)features, eps);
        return NULL;
    }
    tc_layer *l = new_layer(TC_LAYER_LAYERNORM, features, features);
    if (!l) return NULL;
    l->eps = eps;
    if (elementwise_affine && (!add(l, "weight", filled(features, 1, device), true) ||
                               (bias && !add(l, "bias", filled(features, 0, device), true))))
        return fail(l, api);
    return l;
}

TC_API tc_layer *tc_nn_embedding(int64_t num_embeddings, int64_t embedding_dim,
                                 const char *device) {
    TC_API_ENTER();
    const char *api = "tc_nn_embedding";
    if (num_embeddings <= 0 || embedding_dim <= 0) {
        tc_error_set(TC_ERR_INVALID, "%s: num_embeddings %lld, embedding_dim %lld must be > 0",
                     api, (long long)num_embeddings, (long long)embedding_dim);
        return NULL;
    }
    tc_layer *l = new_layer(TC_LAYER_EMBEDDING, num_embeddings, embedding_dim);
    if (!l) return NULL;
    int64_t wshape[2] = {num_embeddings, embedding_dim};
    if (!add(l, "weight", normal(2, wshape, device), true)) return fail(l, api);
    return l;
}

TC_API void tc_layer_free(tc_layer *l) {
    TC_API_ENTER();
    if (!l) return;
    for (int i = 0; i < l->n_tensors; i++) tc_release(l->tensors[i]);
    tc_free(l);
}

/* ---- use --------------------------------------------------------------------- */

/* the tensor called name, borrowed; NULL when the layer has none */
static tc_tensor *get(const tc_layer *l, const char *name) {
    for (int i = 0; i < l->n_tensors; i++)
        if (!strcmp(l->names[i], name)) return l->tensors[i];
    return NULL;
}

/* x's shape fits the layer; the message shows the layer and what it expects */
TC_MUST_USE static tc_status check_input(const tc_layer *l, tc_tensor *x) {
    const char *api = "tc_layer_forward";
    if (!x) return tc_error_set(TC_ERR_INVALID, "%s: x is NULL", api);
    int nd = tc_ndim(x);
    const int64_t *sh = tc_shape(x);
    char buf[256];
    const char *want = NULL;
    switch (l->kind) {
    case TC_LAYER_LINEAR:
        if (nd < 1 || sh[nd - 1] != l->in) want = "(..., in_features)";
        break;
    case TC_LAYER_CONV2D:
        if (nd != 4 || sh[1] != l->in) want = "(N, in_channels, H, W)";
        break;
    case TC_LAYER_BATCHNORM2D:
        if ((nd != 2 && nd != 4) || sh[1] != l->in) want = "(N, channels, H, W) or (N, channels)";
        break;
    case TC_LAYER_LAYERNORM:
        if (nd < 1 || sh[nd - 1] != l->in) want = "(..., features)";
        break;
    case TC_LAYER_EMBEDDING:
        if (tc_dtypes[tc_get_dtype(x)].is_float || tc_get_dtype(x) == TC_BOOL)
            want = "(...) of integer ids";
        break;
    case TC_LAYER_COUNT: break;
    }
    if (want)
        return tc_error_set(TC_ERR_SHAPE, "%s: %s(%lld, %lld) expects x of shape %s, got %s", api,
                            kind_names[l->kind], (long long)l->in, (long long)l->out, want,
                            tc_fmt_shape(buf, sizeof buf, nd, sh));
    return TC_OK;
}

/* tc_layernorm over the last dim, times weight, plus bias (where present) */
static tc_tensor *layernorm_forward(const tc_layer *l, tc_tensor *x) {
    tc_tensor *y = tc_layernorm(x, -1, l->eps), *w = get(l, "weight"), *b = get(l, "bias");
    if (y && w) {
        tc_tensor *yw = tc_mul(y, w);
        tc_release(y);
        y = yw;
    }
    if (y && b) {
        tc_tensor *yb = tc_add(y, b);
        tc_release(y);
        y = yb;
    }
    return y;
}

TC_API tc_tensor *tc_layer_forward(tc_layer *l, tc_tensor *x) {
    TC_API_ENTER();
    if (!l) {
        tc_error_set(TC_ERR_INVALID, "tc_layer_forward: layer is NULL");
        return NULL;
    }
    if (check_input(l, x) != TC_OK) return NULL;
    tc_tensor *y = NULL;
    switch (l->kind) {
    case TC_LAYER_LINEAR: y = tc_linear(x, get(l, "weight"), get(l, "bias")); break;
    case TC_LAYER_CONV2D:
        y = tc_conv2d(x, get(l, "weight"), get(l, "bias"), l->stride, l->padding);
        break;
    case TC_LAYER_BATCHNORM2D:
        y = tc_batchnorm(x, get(l, "weight"), get(l, "bias"), get(l, "running_mean"),
                         get(l, "running_var"), l->is_training, l->momentum, l->eps);
        break;
    case TC_LAYER_LAYERNORM: y = layernorm_forward(l, x); break;
    case TC_LAYER_EMBEDDING: y = tc_index(get(l, "weight"), 0, x); break;
    case TC_LAYER_COUNT: break;
    }
    if (!y) blame("tc_layer_forward");
    return y;
}

TC_API tc_status tc_layer_set_training(tc_layer *l, bool training) {
    TC_API_ENTER();
    if (!l) return tc_error_set(TC_ERR_INVALID, "tc_layer_set_training: layer is NULL");
    l->is_training = training;
    return TC_OK;
}

TC_API tc_layer_kind tc_layer_get_kind(const tc_layer *l) {
    TC_API_ENTER();
    if (!l) {
        tc_error_set(TC_ERR_INVALID, "tc_layer_get_kind: layer is NULL");
        return TC_LAYER_COUNT;
    }
    return l->kind;
}

TC_API tc_tensor *tc_layer_tensor(tc_layer *l, const char *name) {
    TC_API_ENTER();
    if (!l || !name) {
        tc_error_set(TC_ERR_INVALID, "tc_layer_tensor: %s is NULL", l ? "name" : "layer");
        return NULL;
    }
    tc_tensor *t = get(l, name);
    if (!t)
        tc_error_set(TC_ERR_INVALID, "tc_layer_tensor: %s(%lld, %lld) has no tensor %s",
                     kind_names[l->kind], (long long)l->in, (long long)l->out, name);
    return t ? tc_retain(t) : NULL;
}

/* tensors [from, to) of l into out (up to cap); returns to - from */
static int list(const tc_layer *l, int from, int to, tc_tensor **out, int cap) {
    for (int i = from; i < to && i - from < cap; i++) out[i - from] = l->tensors[i];
    return to - from;
}

TC_MUST_USE static tc_status check_list_args(const char *api, const void *l, tc_tensor **out, int cap) {
    if (!l) return tc_error_set(TC_ERR_INVALID, "%s: layer is NULL", api);
    if (cap < 0) return tc_error_set(TC_ERR_INVALID, "%s: cap %d is negative", api, cap);
    if (cap > 0 && !out) return tc_error_set(TC_ERR_INVALID, "%s: out is NULL (cap %d)", api, cap);
    return TC_OK;
}

TC_API int tc_layer_parameters(tc_layer *l, tc_tensor **out, int cap) {
    TC_API_ENTER();
    if (check_list_args("tc_layer_parameters", l, out, cap) != TC_OK) return -1;
    return list(l, 0, l->n_params, out, cap);
}

TC_API int tc_layer_buffers(tc_layer *l, tc_tensor **out, int cap) {
    TC_API_ENTER();
    if (check_list_args("tc_layer_buffers", l, out, cap) != TC_OK) return -1;
    return list(l, l->n_params, l->n_tensors, out, cap);
}

/* ---- lists of layers ------------------------------------------------------------ */

/* params (or buffers) of layers[0..n-1] in order into out (up to cap); the total */
static int collect(const char *api, tc_layer **layers, int n, tc_tensor **out, int cap,
                   bool params) {
    if (n < 0 || (n > 0 && !layers) || check_list_args(api, "", out, cap) != TC_OK) {
        if (n < 0 || (n > 0 && !layers))
            tc_error_set(TC_ERR_INVALID, "%s: %s", api, n < 0 ? "n < 0" : "layers is NULL");
        return -1;
    }
    int total = 0;
    for (int i = 0; i < n; i++) {
        if (!layers[i]) {
            tc_error_set(TC_ERR_INVALID, "%s: layers[%d] is NULL", api, i);
            return -1;
        }
        int from = params ? 0 : layers[i]->n_params;
        int to = params ? layers[i]->n_params : layers[i]->n_tensors;
        int room = cap - total > 0 ? cap - total : 0;
        total += list(layers[i], from, to, out ? out + (total < cap ? total : cap) : NULL, room);
    }
    return total;
}

TC_API int tc_nn_parameters(tc_layer **layers, int n, tc_tensor **out, int cap) {
    TC_API_ENTER();
    return collect("tc_nn_parameters", layers, n, out, cap, true);
}

TC_API int tc_nn_buffers(tc_layer **layers, int n, tc_tensor **out, int cap) {
    TC_API_ENTER();
    return collect("tc_nn_buffers", layers, n, out, cap, false);
}

/* the named tensors of a list of layers: "<i>.<tensor>" -> layer i's tensor */
typedef struct {
    int n;          /* entries */
    char **names;   /* n names, pointing into text */
    tc_tensor **ts; /* n borrowed tensors */
    char *text;     /* the names' characters, 32 per entry */
} layer_state;

static void free_state(layer_state *st) {
    tc_free(st->names);
    tc_free(st->ts);
    tc_free(st->text);
}

TC_MUST_USE static tc_status state_of(const char *api, tc_layer **layers, int n, layer_state *st) {
    memset(st, 0, sizeof *st);
    if (n < 0 || (n > 0 && !layers))
        return tc_error_set(TC_ERR_INVALID, "%s: %s", api, n < 0 ? "n < 0" : "layers is NULL");
    for (int i = 0; i < n; i++) {
        if (!layers[i]) return tc_error_set(TC_ERR_INVALID, "%s: layers[%d] is NULL", api, i);
        st->n += layers[i]->n_tensors;
    }
    st->names = tc_calloc((size_t)st->n + 1, sizeof *st->names);
    st->ts = tc_calloc((size_t)st->n + 1, sizeof *st->ts);
    st->text = tc_malloc((size_t)st->n * 32 + 1);
    if (!st->names || !st->ts || !st->text) {
        free_state(st);
        return TC_ERR_MEMORY;
    }
    int k = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < layers[i]->n_tensors; j++, k++) {
            st->names[k] = st->text + 32 * k;
            snprintf(st->names[k], 32, "%d.%s", i, layers[i]->names[j]);
            st->ts[k] = layers[i]->tensors[j];
        }
    return TC_OK;
}

TC_API tc_status tc_nn_save(const char *path, tc_layer **layers, int n) {
    TC_API_ENTER();
    layer_state st;
    tc_status s = state_of("tc_nn_save", layers, n, &st);
    if (s == TC_OK)
        s = tc_safe_save_as("tc_nn_save", path, (const char *const *)st.names, st.ts, st.n);
    free_state(&st);
    return s;
}

TC_API tc_status tc_nn_load(const char *path, tc_layer **layers, int n) {
    TC_API_ENTER();
    layer_state st;
    tc_status s = state_of("tc_nn_load", layers, n, &st);
    if (s == TC_OK)
        s = tc_safe_load_into("tc_nn_load", path, (const char *const *)st.names, st.ts, st.n, true);
    free_state(&st);
    return s;
}
