/* gpt2_generate.c - GPT-2 text generation: tokens in, tokens out (batch 1).
 *
 * With a KV cache (tinygrad's scheme, fixed shapes so a tc_jit replays the
 * step): each layer keeps K and V as realized (1, H, S, hd) buffers, S =
 * n_prompt + max_new_tokens positions. One step takes one token id and its
 * position p as (tiny) input tensors, runs that position through the blocks,
 * writes its k and v at row p of each cache (tc_index_copy with p as the
 * index: one kernel per layer writes the two rows, reading them straight
 * out of the qkv projection; nothing else of the caches is touched) and
 * attends over rows 0..p (rows past p are masked off). Every step has the
 * same graph, so from the third on the jit replays the recorded kernels with
 * the new token and position: O(n_layer (C^2 + S C) + V C) work a token,
 * the S C term the attention's reads of the caches.
 *
 * Without the cache (the reference): the whole sequence so far, padded to S
 * positions, through gpt2_forward each step (causal attention: the padding
 * cannot change position p's logits), the logits of position p taken.
 *
 * Sampling is on the host (gpt2_sample): greedy, or softmax(logits / T) over
 * the top_k largest, from a splitmix64 stream. */
#include "gpt2_model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    const gpt2_model *m; /* the weights (borrowed) */
    int64_t S;           /* positions the caches hold */
    tc_tensor **k, **v;  /* per layer: (1, H, S, hd) float32 caches, owned */
    tc_tensor *rows_r;   /* arange(S) int32 as (1, 1, 1, S): the rows read */
} kv_cache;

static void kv_free(kv_cache *kv) {
    for (int l = 0; kv->k && l < kv->m->cfg.n_layer; l++) tc_release(kv->k[l]);
    for (int l = 0; kv->v && l < kv->m->cfg.n_layer; l++) tc_release(kv->v[l]);
    free(kv->k), free(kv->v);
    tc_release(kv->rows_r);
    memset(kv, 0, sizeof *kv);
}

/* a realized zero-filled float32 tensor of shape (1, H, S, hd) */
static tc_tensor *zero_cache(const gpt2_config *c, int64_t S, const char *dev) {
    int64_t shape[4] = {1, c->n_head, S, c->n_embd / c->n_head};
    tc_tensor *z = tc_zeros(4, shape, TC_FLOAT32, dev);
    tc_tensor *r = z ? tc_contiguous(z) : NULL;
    tc_release(z);
    if (r && tc_realize(&r, 1) != TC_OK) {
        tc_release(r);
        return NULL;
    }
    return r;
}

/* arange(S) int32 seen as the 4-d shape given */
static tc_tensor *rows(int64_t S, const int64_t *shape, const char *dev) {
    tc_tensor *a = tc_arange(0, S, 1, TC_INT32, dev);
    tc_tensor *r = a ? tc_reshape(a, 4, shape) : NULL;
    tc_release(a);
    return r;
}

static int kv_init(kv_cache *kv, const gpt2_model *m, int64_t S) {
    memset(kv, 0, sizeof *kv);
    kv->m = m, kv->S = S;
    int L = m->cfg.n_layer;
    const char *dev = tc_device(m->params[0]);
    kv->k = calloc((size_t)L, sizeof *kv->k);
    kv->v = calloc((size_t)L, sizeof *kv->v);
    bool ok = kv->k && kv->v;
    for (int l = 0; ok && l < L; l++)
        ok = (kv->k[l] = zero_cache(&m->cfg, S, dev)) && (kv->v[l] = zero_cache(&m->cfg, S, dev));
    ok = ok && (kv->rows_r = rows(S, (int64_t[]){1, 1, 1, S}, dev));
    if (!ok) {
        kv_free(kv);
        return gpt2_fail("gpt2_generate", true, "making the KV cache of %lld positions",
                         (long long)S);
    }
    return 0;
}

/* ---- one position through the model against the caches ------------------------ */

/* block l for the one position in x (1, 1, C); pos (1) int32 is the row p
 * written, upto (1, 1, 1, S) marks the rows 0..p read; x released */
static tc_tensor *decode_block(kv_cache *kv, int l, tc_tensor *x, tc_tensor *pos,
                               tc_tensor *upto) {
    const gpt2_model *m = kv->m;
    tc_tensor *q = NULL, *k = NULL, *v = NULL;
    bool ok = gpt2_qkv(m, l, x, &q, &k, &v) == 0 && tc_index_copy(kv->k[l], 2, pos, k) == TC_OK &&
              tc_index_copy(kv->v[l], 2, pos, v) == TC_OK;
    /* the caches now read as written: q against rows 0..p of K and V */
    tc_tensor *y = ok ? tc_scaled_dot_product_attention(q, kv->k[l], kv->v[l], upto, false) : NULL;
    tc_release(q), tc_release(k), tc_release(v);
    if (!y) {
        tc_release(x);
        return NULL;
    }
    return gpt2_mlp(m, l, gpt2_attn_out(m, l, x, y));
}

/* the jit's step: in[0] the token (1, 1) int32, in[1] its position (1) int32;
 * out[0] its logits (1, V); the caches' new rows realized with them */
static tc_status decode_step(void *user, tc_tensor *const *in, int n_in, tc_tensor **out,
                             int n_out) {
    kv_cache *kv = user;
    const gpt2_model *m = kv->m;
    int L = m->cfg.n_layer;
    (void)n_in, (void)n_out;
    tc_tensor *tok = tc_index(m->params[0], 0, in[0]);             /* (1, 1, C) */
    tc_tensor *pe = tok ? tc_index(m->params[1], 0, in[1]) : NULL; /* (1, C) */
    tc_tensor *x = tok && pe ? tc_add(tok, pe) : NULL;
    tc_release(tok), tc_release(pe);
    tc_tensor *p = x ? tc_reshape(in[1], 4, (int64_t[]){1, 1, 1, 1}) : NULL;
    tc_tensor *upto = p ? tc_le(kv->rows_r, p) : NULL;
    tc_release(p);
    for (int l = 0; l < L && x && upto; l++) x = decode_block(kv, l, x, in[1], upto);
    tc_release(upto);
    tc_tensor *logits = x ? gpt2_head(m, x) : NULL;
    tc_tensor *flat = logits ? tc_reshape(logits, 2, (int64_t[]){1, m->cfg.vocab}) : NULL;
    tc_release(logits);
    tc_status s = flat ? TC_OK : tc_last_status();
    tc_tensor **all = s == TC_OK ? malloc(sizeof *all * (size_t)(1 + 2 * L)) : NULL;
    if (s == TC_OK && !all) s = TC_ERR_MEMORY;
    if (all) {
        all[0] = flat;
        memcpy(all + 1, kv->k, sizeof *all * (size_t)L);
        memcpy(all + 1 + L, kv->v, sizeof *all * (size_t)L);
        s = tc_realize(all, 1 + 2 * L);
        free(all);
    }
    if (s == TC_OK) out[0] = flat;
    else tc_release(flat);
    return s;
}

/* ---- sampling ------------------------------------------------------------------ */

double gpt2_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

uint64_t gpt2_splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static int desc(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x < y) - (x > y);
}

int32_t gpt2_sample(const float *logits, int64_t V, const gpt2_sampling *s, uint64_t *rng) {
    int64_t best = 0;
    for (int64_t i = 1; i < V; i++)
        if (logits[i] > logits[best]) best = i;
    if (s->temperature <= 0) return (int32_t)best;
    float cut = -INFINITY; /* logits below it are never drawn */
    if (s->top_k > 0 && s->top_k < V) {
        float *sorted = malloc(sizeof *sorted * (size_t)V);
        if (!sorted) return gpt2_fail("gpt2_sample", false, "out of memory");
        memcpy(sorted, logits, sizeof *sorted * (size_t)V);
        qsort(sorted, (size_t)V, sizeof *sorted, desc);
        cut = sorted[s->top_k - 1];
        free(sorted);
    }
    double sum = 0, top = logits[best];
    for (int64_t i = 0; i < V; i++)
        if (logits[i] >= cut) sum += exp((logits[i] - top) / s->temperature);
    double u = (double)(gpt2_splitmix64(rng) >> 11) * 0x1.0p-53 * sum;
    int64_t last = best;
    for (int64_t i = 0; i < V; i++) {
        if (logits[i] < cut) continue;
        last = i;
        if ((u -= exp((logits[i] - top) / s->temperature)) < 0) break;
    }
    return (int32_t)last;
}

/* ---- the loop ------------------------------------------------------------------ */

typedef struct {
    const gpt2_model *m; /* the weights */
    const char *dev;     /* their device */
    int64_t S;           /* positions: prompt plus new tokens */
    int32_t *seq;        /* the tokens so far (S, malloc'ed) */
    kv_cache kv;         /* with the cache: the caches */
    tc_jit *jit;         /* with the cache: decode_step's capture */
} gen;

/* the logits of position p given seq[0..p], with the cache (positions fed
 * one at a time, in order) */
static int step_cached(gen *g, int64_t p, float *row) {
    int32_t pos = (int32_t)p;
    tc_tensor *in[2] = {tc_from_data(&g->seq[p], TC_INT32, 2, (int64_t[]){1, 1}, g->dev),
                        tc_from_data(&pos, TC_INT32, 1, (int64_t[]){1}, g->dev)};
    tc_tensor *logits = NULL;
    tc_status s = in[0] && in[1] ? tc_jit_run(g->jit, in, 2, &logits, 1) : tc_last_status();
    if (s == TC_OK) s = tc_to_host(logits, row, sizeof *row * (size_t)g->m->cfg.vocab);
    tc_release(in[0]), tc_release(in[1]), tc_release(logits);
    return s == TC_OK ? 0 : gpt2_fail("gpt2_generate", true, "position %lld", (long long)p);
}

/* the same from the whole sequence, padded with token 0 to S positions */
static int step_full(gen *g, int64_t p, float *row) {
    int64_t S = g->S, V = g->m->cfg.vocab;
    int32_t *idx = calloc((size_t)S, sizeof *idx);
    if (!idx) return gpt2_fail("gpt2_generate", false, "out of memory");
    memcpy(idx, g->seq, sizeof *idx * (size_t)(p + 1));
    tc_tensor *t = tc_from_data(idx, TC_INT32, 2, (int64_t[]){1, S}, g->dev);
    free(idx);
    tc_tensor *logits = t ? gpt2_forward(g->m, t) : NULL; /* (1, S, V) */
    tc_tensor *at = logits ? tc_shrink(logits, (int64_t[]){0, 1, p, p + 1, 0, V}) : NULL;
    tc_status s = at ? tc_to_host(at, row, sizeof *row * (size_t)V) : tc_last_status();
    tc_release(t), tc_release(logits), tc_release(at);
    return s == TC_OK ? 0 : gpt2_fail("gpt2_generate", true, "position %lld", (long long)p);
}

static int check_args(const gpt2_model *m, const int32_t *prompt, int n_prompt,
                      const gpt2_sampling *s, const int32_t *out) {
    const gpt2_config *c = &m->cfg;
    if (!prompt || !s || (!out && s->max_new_tokens > 0) || n_prompt < 1 || s->max_new_tokens < 0)
        return gpt2_fail("gpt2_generate", false,
                         "needs a prompt of at least one token, "
                         "settings, max_new_tokens >= 0 and room for them");
    if ((int64_t)n_prompt + s->max_new_tokens > c->n_ctx)
        return gpt2_fail("gpt2_generate", false,
                         "%d prompt tokens + %d new ones exceed the "
                         "context of %lld",
                         n_prompt, s->max_new_tokens, (long long)c->n_ctx);
    for (int i = 0; i < n_prompt; i++)
        if (prompt[i] < 0 || prompt[i] >= c->vocab)
            return gpt2_fail("gpt2_generate", false,
                             "prompt[%d] = %d is not a token id in "
                             "[0, %lld)",
                             i, prompt[i], (long long)c->vocab);
    return 0;
}

/* runs the positions; new tokens go to out (and their logits to logits) */
static int run(gen *g, int n_prompt, const gpt2_sampling *s, int32_t *out, float *logits) {
    int64_t V = g->m->cfg.vocab;
    float *row = malloc(sizeof *row * (size_t)V);
    if (!row) return gpt2_fail("gpt2_generate", false, "out of memory");
    uint64_t rng = s->seed;
    int rc = 0;
    for (int64_t p = s->use_cache ? 0 : n_prompt - 1; p < g->S - 1 && rc == 0; p++) {
        double t0 = gpt2_now();
        rc = s->use_cache ? step_cached(g, p, row) : step_full(g, p, row);
        if (rc || p < n_prompt - 1) continue; /* a prompt position: only its K and V matter */
        int64_t i = p + 1 - n_prompt;
        if (s->seconds) s->seconds[i] = gpt2_now() - t0;
        int32_t next = gpt2_sample(row, V, s, &rng);
        if (next < 0) rc = -1;
        g->seq[p + 1] = out[i] = next;
        if (logits) memcpy(logits + i * V, row, sizeof *row * (size_t)V);
    }
    free(row);
    return rc;
}

int gpt2_generate(const gpt2_model *m, const int32_t *prompt, int n_prompt, const gpt2_sampling *s,
                  int32_t *out, float *logits) {
    if (!m || !m->params) return gpt2_fail("gpt2_generate", false, "no model");
    if (check_args(m, prompt, n_prompt, s, out)) return -1;
    if (s->max_new_tokens == 0) return 0;
    gen g = {.m = m, .dev = tc_device(m->params[0]), .S = n_prompt + s->max_new_tokens};
    if (!(g.seq = malloc(sizeof *g.seq * (size_t)g.S)))
        return gpt2_fail("gpt2_generate", false, "out of memory");
    memcpy(g.seq, prompt, sizeof *g.seq * (size_t)n_prompt);
    int rc = 0;
    if (s->use_cache && (rc = kv_init(&g.kv, m, g.S)) == 0 &&
        !(g.jit = tc_jit_new(decode_step, &g.kv)))
        rc = gpt2_fail("gpt2_generate", true, "tc_jit_new");
    bool was = tc_set_grad_enabled(false); /* no autograd history */
    if (rc == 0) rc = run(&g, n_prompt, s, out, logits);
    tc_set_grad_enabled(was);
    tc_jit_free(g.jit);
    if (s->use_cache && g.kv.m) kv_free(&g.kv);
    free(g.seq);
    return rc;
}
