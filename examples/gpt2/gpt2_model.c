/* gpt2_model.c - GPT-2's parameters (named as Hugging Face names them), its
 * initialisation, the training forward pass and the safetensors save/load.
 * The forward is O(B T C (C + T) n_layer + B T C V) work, all of it lazy
 * libtinyc ops: the caller realizes (or backpropagates) the result. See
 * gpt2_model.h for the model and its names. */
#include "gpt2_model.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local char last_error[1024]; /* gpt2_last_error's message */

const char *gpt2_last_error(void) {
    return last_error;
}

int gpt2_fail(const char *api, bool lib_error, const char *fmt, ...) {
    int n = snprintf(last_error, sizeof last_error, "%s: ", api);
    va_list ap;
    va_start(ap, fmt);
    if (n >= 0 && (size_t)n < sizeof last_error)
        n += vsnprintf(last_error + n, sizeof last_error - (size_t)n, fmt, ap);
    va_end(ap);
    if (lib_error && n >= 0 && (size_t)n < sizeof last_error)
        snprintf(last_error + n, sizeof last_error - (size_t)n, ": %s", tc_last_error());
    return -1;
}

/* ---- parameters ---------------------------------------------------------------- */

static const char *const block_names[GPT2_BLOCK_TENSORS] = {
    [GPT2_LN1_W] = "ln_1.weight",          [GPT2_LN1_B] = "ln_1.bias",
    [GPT2_ATTN_W] = "attn.c_attn.weight",  [GPT2_ATTN_B] = "attn.c_attn.bias",
    [GPT2_APROJ_W] = "attn.c_proj.weight", [GPT2_APROJ_B] = "attn.c_proj.bias",
    [GPT2_LN2_W] = "ln_2.weight",          [GPT2_LN2_B] = "ln_2.bias",
    [GPT2_FC_W] = "mlp.c_fc.weight",       [GPT2_FC_B] = "mlp.c_fc.bias",
    [GPT2_MPROJ_W] = "mlp.c_proj.weight",  [GPT2_MPROJ_B] = "mlp.c_proj.bias",
};

int gpt2_config_check(const gpt2_config *c) {
    if (!c) return gpt2_fail("gpt2_config_check", false, "config is NULL");
    if (c->n_layer < 1 || c->n_head < 1 || c->n_embd < 1 || c->n_ctx < 1 || c->vocab < 1)
        return gpt2_fail("gpt2_config_check", false,
                         "layers %d, heads %d, width %lld, context %lld, vocab %lld must all "
                         "be positive",
                         c->n_layer, c->n_head, (long long)c->n_embd, (long long)c->n_ctx,
                         (long long)c->vocab);
    if (c->n_embd % c->n_head)
        return gpt2_fail("gpt2_config_check", false, "width %lld is not a multiple of heads %d",
                         (long long)c->n_embd, c->n_head);
    return 0;
}

tc_tensor *gpt2_block_tensor(const gpt2_model *m, int l, int which) {
    return m->params[2 + GPT2_BLOCK_TENSORS * l + which];
}

/* shape (rows, cols) (cols 0: a vector) and initial value of block tensor k:
 * std > 0 is N(0, std), else the constant `value` */
static void block_init(const gpt2_config *c, int k, int64_t *rows, int64_t *cols, double *std,
                       double *value) {
    int64_t C = c->n_embd;
    double s = 0.02, proj = 0.02 / sqrt(2.0 * c->n_layer);
    static const int64_t in[GPT2_BLOCK_TENSORS] = {0, 0, 1, 0, 1, 0, 0, 0, 1, 0, 4, 0};
    static const int64_t out[GPT2_BLOCK_TENSORS] = {1, 1, 3, 3, 1, 1, 1, 1, 4, 4, 1, 1};
    bool is_matrix = k == GPT2_ATTN_W || k == GPT2_APROJ_W || k == GPT2_FC_W || k == GPT2_MPROJ_W;
    *rows = is_matrix ? in[k] * C : out[k] * C;
    *cols = is_matrix ? out[k] * C : 0;
    *std = !is_matrix ? 0 : k == GPT2_APROJ_W || k == GPT2_MPROJ_W ? proj : s;
    *value = k == GPT2_LN1_W || k == GPT2_LN2_W ? 1.0 : 0.0;
}

/* a realized float32 tensor: N(0, std) when std > 0, else filled with value */
static tc_tensor *param(int64_t rows, int64_t cols, double std, double value, const char *dev) {
    int64_t shape[2] = {rows, cols};
    int nd = cols ? 2 : 1;
    tc_tensor *t = std > 0 ? tc_normal(nd, shape, 0.0, std, TC_FLOAT32, dev)
                           : tc_full(nd, shape, value, TC_FLOAT32, dev);
    tc_tensor *c = t ? tc_contiguous(t) : NULL; /* a buffer of its own (tc_full is one element) */
    tc_release(t);
    if (c && (tc_realize(&c, 1) != TC_OK || tc_set_requires_grad(c, true) != TC_OK)) {
        tc_release(c);
        return NULL;
    }
    return c;
}

static char *dup(const char *s) {
    char *d = malloc(strlen(s) + 1);
    if (d) strcpy(d, s);
    return d;
}

/* params[i] and names[i] of the model, drawn in the names' order */
static int make_param(gpt2_model *m, int i, const char *dev) {
    const gpt2_config *c = &m->cfg;
    int64_t rows, cols;
    double std, value = 0;
    char name[96];
    if (i < 2) { /* wte (V, C), wpe (n_ctx, C) */
        rows = i == 0 ? c->vocab : c->n_ctx, cols = c->n_embd, std = 0.02;
        snprintf(name, sizeof name, "%s.weight", i == 0 ? "wte" : "wpe");
    } else if (i >= m->n_params - 2) { /* ln_f */
        bool is_w = i == m->n_params - 2;
        rows = c->n_embd, cols = 0, std = 0, value = is_w ? 1.0 : 0.0;
        snprintf(name, sizeof name, "ln_f.%s", is_w ? "weight" : "bias");
    } else {
        int k = (i - 2) % GPT2_BLOCK_TENSORS;
        block_init(c, k, &rows, &cols, &std, &value);
        snprintf(name, sizeof name, "h.%d.%s", (i - 2) / GPT2_BLOCK_TENSORS, block_names[k]);
    }
    m->names[i] = dup(name);
    if (!m->names[i]) return gpt2_fail("gpt2_init", false, "out of memory");
    if (!(m->params[i] = param(rows, cols, std, value, dev)))
        return gpt2_fail("gpt2_init", true, "making %s", m->names[i]);
    return 0;
}

int gpt2_init(gpt2_model *m, const gpt2_config *cfg, uint64_t seed, const char *device) {
    memset(m, 0, sizeof *m);
    if (gpt2_config_check(cfg)) return -1;
    m->cfg = *cfg;
    m->n_params = 4 + GPT2_BLOCK_TENSORS * cfg->n_layer;
    m->params = calloc((size_t)m->n_params, sizeof *m->params);
    m->names = calloc((size_t)m->n_params, sizeof *m->names);
    if (!m->params || !m->names) {
        gpt2_free(m);
        return gpt2_fail("gpt2_init", false, "out of memory");
    }
    tc_manual_seed(seed);
    for (int i = 0; i < m->n_params; i++)
        if (make_param(m, i, device)) {
            gpt2_free(m);
            return -1;
        }
    return 0;
}

void gpt2_free(gpt2_model *m) {
    if (!m) return;
    for (int i = 0; m->params && i < m->n_params; i++) tc_release(m->params[i]);
    for (int i = 0; m->names && i < m->n_params; i++) free(m->names[i]);
    free(m->params), free(m->names);
    memset(m, 0, sizeof *m);
}

/* ---- forward ------------------------------------------------------------------- */

/* f(a, b) with a released (the running value of a chain) and b borrowed; NULL
 * in gives NULL out without a call, so the first failure's message stays */
static tc_tensor *bin(tc_tensor *(*f)(tc_tensor *, tc_tensor *), tc_tensor *a, tc_tensor *b) {
    tc_tensor *r = a && b ? f(a, b) : NULL;
    tc_release(a);
    return r;
}

static tc_tensor *reshaped(tc_tensor *a, int ndim, const int64_t *shape) {
    tc_tensor *r = a ? tc_reshape(a, ndim, shape) : NULL;
    tc_release(a);
    return r;
}

static tc_tensor *permuted(tc_tensor *a, const int *order) {
    tc_tensor *r = a ? tc_permute(a, order) : NULL;
    tc_release(a);
    return r;
}

/* layernorm(x) * w + b over the last dim (eps 1e-5, GPT-2's); x borrowed */
tc_tensor *gpt2_ln(tc_tensor *x, tc_tensor *w, tc_tensor *b) {
    return bin(tc_add, bin(tc_mul, tc_layernorm(x, -1, 1e-5), w), b);
}

/* Conv1D: x @ w + b with w (in, out); x borrowed */
tc_tensor *gpt2_conv1d(tc_tensor *x, tc_tensor *w, tc_tensor *b) {
    return bin(tc_add, tc_matmul(x, w), b);
}

/* head part `part` (0 q, 1 k, 2 v) of qkv (B, T, 3C) as (B, H, T, hd); qkv borrowed */
tc_tensor *gpt2_heads(const gpt2_config *c, tc_tensor *qkv, int part) {
    const int64_t *s = tc_shape(qkv);
    int64_t B = s[0], T = s[1], C = c->n_embd, H = c->n_head;
    int64_t box[6] = {0, B, 0, T, part * C, (part + 1) * C};
    tc_tensor *r = tc_shrink(qkv, box);
    r = reshaped(r, 4, (int64_t[]){B, T, H, C / H});
    return permuted(r, (int[]){0, 2, 1, 3});
}

/* y (B, H, T, hd) back to (B, T, C), made contiguous (a matmul reading the
 * permuted view runs slower than the copy costs); y released */
tc_tensor *gpt2_merge_heads(tc_tensor *y) {
    const int64_t *s = y ? tc_shape(y) : NULL;
    int64_t B = s ? s[0] : 0, T = s ? s[2] : 0, C = s ? s[1] * s[3] : 0;
    tc_tensor *r = permuted(y, (int[]){0, 2, 1, 3});
    tc_tensor *c = r ? tc_contiguous(r) : NULL;
    tc_release(r);
    return reshaped(c, 3, (int64_t[]){B, T, C});
}

/* block l's ln(x) @ W + b, with the LayerNorm tensors at ln, ln + 1 and the
 * projection's at w, w + 1; x borrowed */
static tc_tensor *ln_proj(const gpt2_model *m, int l, tc_tensor *x, int ln, int w) {
    tc_tensor *a = gpt2_ln(x, gpt2_block_tensor(m, l, ln), gpt2_block_tensor(m, l, ln + 1));
    tc_tensor *h =
        a ? gpt2_conv1d(a, gpt2_block_tensor(m, l, w), gpt2_block_tensor(m, l, w + 1)) : NULL;
    tc_release(a);
    return h;
}

/* x + in @ W + b with block l's projection at w, w + 1; x and in released */
static tc_tensor *add_proj(const gpt2_model *m, int l, tc_tensor *x, tc_tensor *in, int w) {
    tc_tensor *o =
        in ? gpt2_conv1d(in, gpt2_block_tensor(m, l, w), gpt2_block_tensor(m, l, w + 1)) : NULL;
    tc_release(in);
    tc_tensor *r = bin(tc_add, x, o);
    tc_release(o);
    return r;
}

int gpt2_qkv(const gpt2_model *m, int l, tc_tensor *x, tc_tensor **q, tc_tensor **k,
             tc_tensor **v) {
    tc_tensor *qkv = ln_proj(m, l, x, GPT2_LN1_W, GPT2_ATTN_W); /* (B, T, 3C) */
    *q = qkv ? gpt2_heads(&m->cfg, qkv, 0) : NULL;
    *k = *q ? gpt2_heads(&m->cfg, qkv, 1) : NULL;
    *v = *k ? gpt2_heads(&m->cfg, qkv, 2) : NULL;
    tc_release(qkv);
    if (*v) return 0;
    tc_release(*q), tc_release(*k);
    *q = *k = NULL;
    return -1;
}

tc_tensor *gpt2_mlp(const gpt2_model *m, int l, tc_tensor *x) {
    tc_tensor *h = x ? ln_proj(m, l, x, GPT2_LN2_W, GPT2_FC_W) : NULL;
    tc_tensor *g = h ? tc_gelu(h, true) : NULL;
    tc_release(h);
    return add_proj(m, l, x, g, GPT2_MPROJ_W);
}

tc_tensor *gpt2_attn_out(const gpt2_model *m, int l, tc_tensor *x, tc_tensor *y) {
    return add_proj(m, l, x, gpt2_merge_heads(y), GPT2_APROJ_W);
}

tc_tensor *gpt2_head(const gpt2_model *m, tc_tensor *x) {
    tc_tensor *h = x ? gpt2_ln(x, m->params[m->n_params - 2], m->params[m->n_params - 1]) : NULL;
    tc_release(x);
    tc_tensor *wt = h ? tc_transpose(m->params[0], 0, 1) : NULL; /* (C, V) */
    tc_tensor *logits = bin(tc_matmul, h, wt);
    tc_release(wt);
    return logits;
}

/* block l over the whole sequence x (B, T, C), causal attention; x released */
static tc_tensor *block(const gpt2_model *m, int l, tc_tensor *x) {
    tc_tensor *q = NULL, *k = NULL, *v = NULL;
    tc_tensor *y = x && gpt2_qkv(m, l, x, &q, &k, &v) == 0
                       ? tc_scaled_dot_product_attention(q, k, v, NULL, true)
                       : NULL;
    tc_release(q), tc_release(k), tc_release(v);
    if (!y) {
        tc_release(x);
        return NULL;
    }
    return gpt2_mlp(m, l, gpt2_attn_out(m, l, x, y));
}

tc_tensor *gpt2_forward(const gpt2_model *m, tc_tensor *idx) {
    const gpt2_config *c = &m->cfg;
    if (!idx || tc_ndim(idx) != 2 || tc_shape(idx)[1] > c->n_ctx || tc_shape(idx)[1] < 1) {
        gpt2_fail("gpt2_forward", false, "idx must be (B, T) with 1 <= T <= context %lld",
                  (long long)c->n_ctx);
        return NULL;
    }
    int64_t T = tc_shape(idx)[1];
    tc_tensor *tok = tc_index(m->params[0], 0, idx); /* (B, T, C) */
    tc_tensor *pos = tok ? tc_shrink(m->params[1], (int64_t[]){0, T, 0, c->n_embd}) : NULL;
    tc_tensor *x = bin(tc_add, tok, pos);
    tc_release(pos);
    for (int l = 0; l < c->n_layer && x; l++) x = block(m, l, x);
    tc_tensor *logits = gpt2_head(m, x);
    if (!logits) gpt2_fail("gpt2_forward", true, "building the graph");
    return logits;
}

tc_tensor *gpt2_loss(const gpt2_model *m, tc_tensor *idx, tc_tensor *targets) {
    tc_tensor *logits = gpt2_forward(m, idx);
    if (!logits) return NULL;
    int64_t n = tc_numel(idx), rows[2] = {n, m->cfg.vocab};
    tc_tensor *flat = reshaped(logits, 2, rows);
    tc_tensor *y = flat ? tc_reshape(targets, 1, &n) : NULL;
    tc_tensor *loss = y ? tc_cross_entropy(flat, y) : NULL;
    tc_release(flat), tc_release(y);
    if (!loss)
        gpt2_fail("gpt2_loss", true, "targets must be idx's shape %lld tokens", (long long)n);
    return loss;
}

/* ---- files --------------------------------------------------------------------- */

int gpt2_save(const gpt2_model *m, const char *path) {
    if (tc_safe_save(path, (const char *const *)m->names, m->params, m->n_params) != TC_OK)
        return gpt2_fail("gpt2_save", true, "%s", path ? path : "(null)");
    return 0;
}

/* m's names behind prefix ("transformer."), malloc'ed; NULL when out of memory */
static char **prefixed(const gpt2_model *m, const char *prefix) {
    char **out = calloc((size_t)m->n_params, sizeof *out);
    for (int i = 0; out && i < m->n_params; i++) {
        size_t n = strlen(prefix) + strlen(m->names[i]) + 1;
        if (!(out[i] = malloc(n))) {
            for (int j = 0; j < i; j++) free(out[j]);
            free(out);
            return NULL;
        }
        snprintf(out[i], n, "%s%s", prefix, m->names[i]);
    }
    return out;
}

int gpt2_load(gpt2_model *m, const char *path) {
    if (tc_safe_load(path, (const char *const *)m->names, m->params, m->n_params) == TC_OK)
        return 0;
    /* GPT2LMHeadModel's files put the names behind "transformer.": tried when
     * a name was missing (TC_ERR_IO); the error reported is the second one
     * when that got further (past the names), else the first */
    tc_status first_status = tc_last_status();
    gpt2_fail("gpt2_load", true, "%s", path ? path : "(null)");
    char first[sizeof last_error];
    memcpy(first, last_error, sizeof first);
    char **names = path && first_status == TC_ERR_IO ? prefixed(m, "transformer.") : NULL;
    bool ok =
        names && tc_safe_load(path, (const char *const *)names, m->params, m->n_params) == TC_OK;
    bool got_further = names && !ok && tc_last_status() != TC_ERR_IO;
    if (got_further) gpt2_fail("gpt2_load", true, "%s", path);
    else memcpy(last_error, first, sizeof first);
    for (int i = 0; names && i < m->n_params; i++) free(names[i]);
    free(names);
    return ok ? 0 : -1;
}
