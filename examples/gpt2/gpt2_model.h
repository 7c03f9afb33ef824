/* gpt2_model.h - a GPT-2 (Radford et al. 2019; the shapes and names of
 * Hugging Face's GPT2Model and llm.c) built on libtinyc's public API, shared
 * by examples/gpt2.c and tests/nn/test_gpt2.c.
 *
 * The model: token embedding wte (V, C) plus learned positions wpe (n_ctx,
 * C); n_layer pre-LayerNorm blocks, each x += attn(ln_1(x)) (causal
 * self-attention, n_head heads) and x += mlp(ln_2(x)) (C -> 4C, gelu tanh,
 * 4C -> C); ln_f; logits = x @ wte^T (the output head tied to wte).
 *
 * Tensors are named as in Hugging Face's GPT-2 checkpoints (model.safetensors
 * of "gpt2"): wte.weight, wpe.weight, h.<i>.ln_1.weight, h.<i>.ln_1.bias,
 * h.<i>.attn.c_attn.weight/bias, h.<i>.attn.c_proj.weight/bias,
 * h.<i>.ln_2.weight/bias, h.<i>.mlp.c_fc.weight/bias,
 * h.<i>.mlp.c_proj.weight/bias, ln_f.weight, ln_f.bias; the four projections
 * are Conv1D weights stored (in, out), so y = x @ W + b. A file with those
 * names (or with them behind "transformer.", as GPT2LMHeadModel saves them)
 * and matching shapes loads; other entries (attn.bias masks, lm_head) are
 * ignored. Real GPT-2 124M: --config 124M with vocab 50257.
 *
 * Errors: a function that fails returns -1 (or NULL) and gpt2_last_error()
 * says why, naming the function and carrying libtinyc's message. */
#ifndef GPT2_MODEL_H
#define GPT2_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include <tinyc.h>

typedef struct {
    int n_layer;    /* transformer blocks */
    int n_head;     /* attention heads; n_embd % n_head == 0 */
    int64_t n_embd; /* width C */
    int64_t n_ctx;  /* most positions: wpe's rows */
    int64_t vocab;  /* token ids 0..vocab-1: wte's rows */
} gpt2_config;

/* a block's tensors, in the order of its names (gpt2_model.params) */
enum {
    GPT2_LN1_W,        /* ln_1.weight (C) */
    GPT2_LN1_B,        /* ln_1.bias (C) */
    GPT2_ATTN_W,       /* attn.c_attn.weight (C, 3C): q, k, v side by side */
    GPT2_ATTN_B,       /* attn.c_attn.bias (3C) */
    GPT2_APROJ_W,      /* attn.c_proj.weight (C, C) */
    GPT2_APROJ_B,      /* attn.c_proj.bias (C) */
    GPT2_LN2_W,        /* ln_2.weight (C) */
    GPT2_LN2_B,        /* ln_2.bias (C) */
    GPT2_FC_W,         /* mlp.c_fc.weight (C, 4C) */
    GPT2_FC_B,         /* mlp.c_fc.bias (4C) */
    GPT2_MPROJ_W,      /* mlp.c_proj.weight (4C, C) */
    GPT2_MPROJ_B,      /* mlp.c_proj.bias (C) */
    GPT2_BLOCK_TENSORS /* tensors per block */
};

typedef struct {
    gpt2_config cfg;    /* the shapes */
    int n_params;       /* 4 + GPT2_BLOCK_TENSORS * n_layer */
    tc_tensor **params; /* owned, realized float32: wte, wpe, the blocks' tensors, ln_f w, b */
    char **names;       /* params[i]'s Hugging Face name (owned) */
} gpt2_model;

const char *gpt2_last_error(void); /* why the last failing gpt2_ call failed */

/* checks cfg (positive sizes, n_embd divisible by n_head) */
int gpt2_config_check(const gpt2_config *cfg);
/* the model with GPT-2's initialisation drawn after tc_manual_seed(seed):
 * weights N(0, 0.02), the residual projections (attn.c_proj, mlp.c_proj)
 * N(0, 0.02/sqrt(2 n_layer)), biases 0, LayerNorms weight 1, bias 0 */
int gpt2_init(gpt2_model *m, const gpt2_config *cfg, uint64_t seed, const char *device);
void gpt2_free(gpt2_model *m); /* NULL or a zeroed model is fine */

/* the block tensors of layer l */
tc_tensor *gpt2_block_tensor(const gpt2_model *m, int l, int which);

/* logits (B, T, V) of token ids idx (B, T) (int32, T <= n_ctx), lazy */
tc_tensor *gpt2_forward(const gpt2_model *m, tc_tensor *idx);
/* mean cross-entropy of the next-token predictions: idx, targets (B, T) */
tc_tensor *gpt2_loss(const gpt2_model *m, tc_tensor *idx, tc_tensor *targets);

/* every tensor to / from a safetensors file under the names above */
int gpt2_save(const gpt2_model *m, const char *path);
int gpt2_load(gpt2_model *m, const char *path);

/* ---- generation (gpt2_generate.c) ---------------------------------------- */
typedef struct {
    int max_new_tokens; /* tokens to append; n_prompt + max_new_tokens <= n_ctx */
    double temperature; /* <= 0: greedy (the first largest logit); else softmax(logits/T) */
    int top_k;          /* > 0: sample among the top_k largest logits (ties kept) */
    uint64_t seed;      /* the sampler's stream (splitmix64) */
    bool use_cache;     /* true: one position a step against a KV cache (a tc_jit replays
                           the step after its second call); false: the whole sequence again
                           each step, as gpt2_forward computes it (the reference) */
    double *seconds;    /* optional output: max_new_tokens wall times, each new token's step */
} gpt2_sampling;

/* appends s->max_new_tokens tokens to prompt[0..n_prompt-1] (n_prompt >= 1,
 * batch 1) into out[0..max_new_tokens-1]; logits (optional, max_new_tokens *
 * vocab floats) receives the logits each new token was drawn from */
int gpt2_generate(const gpt2_model *m, const int32_t *prompt, int n_prompt, const gpt2_sampling *s,
                  int32_t *out, float *logits);

/* the next token from logits[0..vocab-1] by s's rule; *rng advances */
int32_t gpt2_sample(const float *logits, int64_t vocab, const gpt2_sampling *s, uint64_t *rng);

uint64_t gpt2_splitmix64(uint64_t *state); /* the sampler's (and the example's) stream */
double gpt2_now(void);                     /* a monotonic clock, seconds */

/* internal to the two files: records a failure of api (with libtinyc's last
 * error when lib_error is true); returns -1 */
int gpt2_fail(const char *api, bool lib_error, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* the pieces of a block both passes share (gpt2_model.c); x, w, b, qkv
 * borrowed unless said otherwise, results new and lazy */
tc_tensor *gpt2_ln(tc_tensor *x, tc_tensor *w, tc_tensor *b);     /* layernorm(x) * w + b */
tc_tensor *gpt2_conv1d(tc_tensor *x, tc_tensor *w, tc_tensor *b); /* x @ w + b, w (in, out) */
/* part 0 (q), 1 (k), 2 (v) of qkv (B, T, 3C) as (B, H, T, hd) */
tc_tensor *gpt2_heads(const gpt2_config *c, tc_tensor *qkv, int part);
tc_tensor *gpt2_merge_heads(tc_tensor *y); /* (B, H, T, hd) -> (B, T, C); releases y */
/* q, k, v (B, H, T, hd) of block l's attention for its input x (B, T, C):
 * ln_1, c_attn, split into heads; -1 (all three NULL) on failure */
int gpt2_qkv(const gpt2_model *m, int l, tc_tensor *x, tc_tensor **q, tc_tensor **k, tc_tensor **v);
/* x + c_proj(gelu(c_fc(ln_2(x)))) of block l; releases x */
tc_tensor *gpt2_mlp(const gpt2_model *m, int l, tc_tensor *x);
/* x + c_proj(y) of block l for the attention's output y (B, H, T, hd);
 * releases x and y */
tc_tensor *gpt2_attn_out(const gpt2_model *m, int l, tc_tensor *x, tc_tensor *y);
/* logits (B, T, V) = ln_f(x) @ wte^T; releases x */
tc_tensor *gpt2_head(const gpt2_model *m, tc_tensor *x);

#endif /* GPT2_MODEL_H */
