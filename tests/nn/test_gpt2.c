/* test_gpt2.c - the GPT-2 of examples/gpt2 (gpt2_model.h): weights saved
 * and loaded as safetensors under Hugging Face's names give the same logits
 * in a fresh model (also behind GPT2LMHeadModel's "transformer." prefix);
 * greedy generation with the KV cache (one position a step, replayed by a
 * tc_jit) gives exactly the tokens of recomputing the whole sequence each
 * step, with logits that agree to float rounding, in 8 kernels a layer a
 * step (the K and V rows one indexed store); a tiny model's loss falls
 * under AdamW on a learnable text; and misuse is a clear error. Public API
 * plus the example's model. */
#include <math.h>

#include "gpt2_model.h"
#include "nn_helpers.h"

static const gpt2_config tiny = {.n_layer = 2, .n_head = 2, .n_embd = 32, .n_ctx = 24, .vocab = 61};

#define CHECK_G(call)                                                                   \
    do {                                                                                \
        int rc_ = (call);                                                               \
        if (rc_) fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, gpt2_last_error()); \
        assert_int_equal(rc_, 0);                                                       \
    } while (0)

/* logits (2, 7, V) of a fixed batch, read to the host */
static float *logits_of(const gpt2_model *m) {
    int32_t ids[14];
    for (int i = 0; i < 14; i++) ids[i] = (int32_t)((i * 17 + 5) % m->cfg.vocab);
    tc_tensor *idx = tc_from_data(ids, TC_INT32, 2, SHAPE(2, 7), NULL);
    CHECK_T(idx);
    tc_tensor *logits = gpt2_forward(m, idx);
    if (!logits) fprintf(stderr, "%s\n", gpt2_last_error());
    assert_non_null(logits);
    assert_int_equal(tc_ndim(logits), 3);
    assert_int_equal(tc_shape(logits)[2], m->cfg.vocab);
    float *out = tc_test_read(logits);
    tc_release(idx), tc_release(logits);
    return out;
}

static bool same(const float *a, const float *b, int64_t n) {
    return memcmp(a, b, sizeof *a * (size_t)n) == 0;
}

static void test_gpt2_save_load(void **state) {
    (void)state;
    char dir[512], path[1024], other[1024];
    make_tmpdir(dir, sizeof dir);
    join(path, sizeof path, dir, "gpt2.safetensors");
    join(other, sizeof other, dir, "lmhead.safetensors");
    gpt2_model a, b;
    CHECK_G(gpt2_init(&a, &tiny, 1, NULL));
    CHECK_G(gpt2_init(&b, &tiny, 2, NULL));
    assert_string_equal(a.names[0], "wte.weight");
    assert_string_equal(a.names[2 + GPT2_BLOCK_TENSORS + GPT2_ATTN_W], "h.1.attn.c_attn.weight");
    assert_string_equal(a.names[a.n_params - 1], "ln_f.bias");
    tc_tensor *w = gpt2_block_tensor(&a, 0, GPT2_FC_W); /* Conv1D: (in, out) */
    assert_int_equal(tc_shape(w)[0], 32), assert_int_equal(tc_shape(w)[1], 128);
    int64_t n = 2 * 7 * tiny.vocab;
    float *la = logits_of(&a), *lb = logits_of(&b);
    assert_false(same(la, lb, n)); /* different seeds: different models */
    CHECK_G(gpt2_save(&a, path));
    CHECK_G(gpt2_load(&b, path));
    float *lc = logits_of(&b);
    assert_true(tc_allclose_f32(lc, la, n, 0, 0, "logits after save and load"));
    /* the names behind "transformer.", as GPT2LMHeadModel saves them */
    char **names = malloc(sizeof *names * (size_t)a.n_params);
    assert_non_null(names);
    for (int i = 0; i < a.n_params; i++) {
        names[i] = malloc(strlen(a.names[i]) + 13);
        sprintf(names[i], "transformer.%s", a.names[i]);
    }
    CHECK_OK(tc_safe_save(other, (const char *const *)names, a.params, a.n_params));
    gpt2_model c;
    CHECK_G(gpt2_init(&c, &tiny, 3, NULL));
    CHECK_G(gpt2_load(&c, other));
    float *ld = logits_of(&c);
    assert_true(tc_allclose_f32(ld, la, n, 0, 0, "logits after loading transformer.*"));
    /* a model of another width: the shape error names the tensor */
    gpt2_config wide = tiny;
    wide.n_embd = 64;
    gpt2_model d;
    CHECK_G(gpt2_init(&d, &wide, 4, NULL));
    assert_int_equal(gpt2_load(&d, path), -1);
    assert_non_null(strstr(gpt2_last_error(), "gpt2_load"));
    assert_non_null(strstr(gpt2_last_error(), "wte.weight"));
    for (int i = 0; i < a.n_params; i++) free(names[i]);
    free(names), free(la), free(lb), free(lc), free(ld);
    gpt2_free(&a), gpt2_free(&b), gpt2_free(&c), gpt2_free(&d);
    remove_tmpdir(dir, (const char *[]){"gpt2.safetensors", "lmhead.safetensors"}, 2);
}

/* m's matrices redrawn from N(0, 1/sqrt(rows)): GPT-2's small init makes a
 * random model repeat one token, these make its greedy choices vary */
static void roughen(gpt2_model *m) {
    for (int i = 0; i < m->n_params; i++) {
        tc_tensor *p = m->params[i];
        if (tc_ndim(p) != 2) continue;
        tc_tensor *r =
            tc_normal(2, tc_shape(p), 0.0, 1.0 / sqrt((double)tc_shape(p)[0]), TC_FLOAT32, NULL);
        CHECK_T(r);
        CHECK_OK(tc_assign(p, r));
        CHECK_OK(tc_realize(&p, 1));
        tc_release(r);
    }
}

/* greedy tokens and their logits with and without the KV cache */
static void test_gpt2_kv_cache_matches_full(void **state) {
    (void)state;
    gpt2_model m;
    CHECK_G(gpt2_init(&m, &tiny, 7, NULL));
    roughen(&m);
    enum { PROMPT = 3, NEW = 12 };
    int32_t prompt[PROMPT] = {5, 40, 17}, cached[NEW], full[NEW];
    int64_t V = tiny.vocab;
    float *lc = malloc(sizeof *lc * NEW * (size_t)V), *lf = malloc(sizeof *lf * NEW * (size_t)V);
    assert_non_null(lc), assert_non_null(lf);
    gpt2_sampling s = {.max_new_tokens = NEW, .temperature = 0, .use_cache = true};
    CHECK_G(gpt2_generate(&m, prompt, PROMPT, &s, cached, lc));
    s.use_cache = false;
    CHECK_G(gpt2_generate(&m, prompt, PROMPT, &s, full, lf));
    for (int i = 0; i < NEW; i++) fprintf(stderr, "%d/%d ", cached[i], full[i]);
    fprintf(stderr, "(cached/full)\n");
    assert_memory_equal(cached, full, sizeof cached);
    int distinct = 0;
    for (int i = 0; i < NEW; i++) {
        bool is_new = true;
        for (int j = 0; j < i; j++) is_new = is_new && cached[j] != cached[i];
        distinct += is_new;
    }
    assert_true(distinct >= 4); /* not one token repeated: the test can tell paths apart */
    /* float32 sums in another order (S keys a step vs a causal mask) */
    assert_true(tc_allclose_f32(lc, lf, NEW * V, 1e-4, 1e-5, "logits: cache vs full"));
    /* sampled: the same stream draws the same tokens from (nearly) the same logits */
    int32_t t1[NEW], t2[NEW];
    gpt2_sampling r = {
        .max_new_tokens = NEW, .temperature = 0.9, .top_k = 10, .seed = 11, .use_cache = true};
    CHECK_G(gpt2_generate(&m, prompt, PROMPT, &r, t1, NULL));
    CHECK_G(gpt2_generate(&m, prompt, PROMPT, &r, t2, NULL));
    assert_memory_equal(t1, t2, sizeof t1); /* reproducible for a seed */
    for (int i = 0; i < NEW; i++) assert_true(t1[i] >= 0 && t1[i] < V);
    free(lc), free(lf);
    gpt2_free(&m);
}

/* kernels of one KV-cache step, pinned: every step (eager, captured or
 * replayed) runs the same schedule. A layer is 8: ln_1 (the embedding
 * lookups fused into layer 0's), the qkv projection, one kernel writing
 * the position's K and V rows into both caches (tc_index_copy, reading them
 * out of qkv: no copy of the caches), attention over the caches (one row
 * kernel), c_proj, ln_2, c_fc, c_proj; then the rows-read mask, ln_f and
 * the head: 8 L + 3 */
static void test_gpt2_decode_kernels(void **state) {
    (void)state;
    for (int L = 1; L <= 2; L++) {
        gpt2_config c = tiny;
        c.n_layer = L;
        gpt2_model m;
        CHECK_G(gpt2_init(&m, &c, 3, NULL));
        enum { PROMPT = 2, NEW = 5 };
        int32_t prompt[PROMPT] = {1, 2}, out[NEW];
        gpt2_sampling s = {.max_new_tokens = NEW, .temperature = 0, .use_cache = true};
        tc_counters c0, c1;
        tc_get_counters(&c0);
        CHECK_G(gpt2_generate(&m, prompt, PROMPT, &s, out, NULL));
        tc_get_counters(&c1);
        int64_t steps = PROMPT + NEW - 1, kernels = c1.kernel_count - c0.kernel_count;
        fprintf(stderr, "  %d layer(s): %lld kernels in %lld steps\n", L, (long long)kernels,
                (long long)steps);
        assert_int_equal(kernels, 2 * L + steps * (8 * L + 3)); /* 2 L: the zeroed caches */
        gpt2_free(&m);
    }
}

/* top_k 1 is greedy; a temperature near 0 is greedy; top_k keeps ties */
static void test_gpt2_sample(void **state) {
    (void)state;
    float l[6] = {0.5f, 2.0f, -1.0f, 2.0f, 1.9f, 0.0f};
    uint64_t rng = 1;
    gpt2_sampling g = {.temperature = 0};
    assert_int_equal(gpt2_sample(l, 6, &g, &rng), 1); /* the first largest */
    gpt2_sampling k1 = {.temperature = 1.0, .top_k = 1};
    int seen[6] = {0};
    for (int i = 0; i < 400; i++) seen[gpt2_sample(l, 6, &k1, &rng)]++;
    assert_int_equal(seen[1] + seen[3], 400); /* ties at the cut stay in */
    assert_true(seen[1] > 100 && seen[3] > 100);
    gpt2_sampling k3 = {.temperature = 1.0, .top_k = 3};
    memset(seen, 0, sizeof seen);
    for (int i = 0; i < 600; i++) seen[gpt2_sample(l, 6, &k3, &rng)]++;
    assert_int_equal(seen[0] + seen[2] + seen[5], 0);
    assert_true(seen[4] > 100); /* exp(-0.1) of the weight of 1 and 3 */
}

/* 30 AdamW steps on a periodic text: the loss must fall well below its start */
static void test_gpt2_training_loss_drops(void **state) {
    (void)state;
    gpt2_config c = {.n_layer = 2, .n_head = 2, .n_embd = 64, .n_ctx = 32, .vocab = 256};
    gpt2_model m;
    CHECK_G(gpt2_init(&m, &c, 3, NULL));
    const char *text = "the quick brown fox jumps over the lazy dog. ";
    int64_t len = (int64_t)strlen(text), B = 4, T = 32;
    int32_t x[4 * 32], y[4 * 32];
    tc_optimizer *opt = tc_adamw(m.params, m.n_params, 3e-3, 0.9, 0.999, 1e-8, 0.0);
    CHECK_T(opt);
    float first = 0, last = 0;
    for (int step = 0; step < 30; step++) {
        for (int64_t b = 0; b < B; b++)
            for (int64_t t = 0; t < T; t++) {
                int64_t at = (step * 7 + b * 13 + t) % len;
                x[b * T + t] = (unsigned char)text[at];
                y[b * T + t] = (unsigned char)text[(at + 1) % len];
            }
        tc_tensor *xt = tc_from_data(x, TC_INT32, 2, SHAPE(4, 32), NULL);
        tc_tensor *yt = tc_from_data(y, TC_INT32, 2, SHAPE(4, 32), NULL);
        CHECK_OK(tc_optimizer_zero_grad(opt));
        tc_tensor *loss = gpt2_loss(&m, xt, yt);
        CHECK_T(loss);
        CHECK_OK(tc_backward(loss));
        CHECK_OK(tc_optimizer_step_with(opt, &loss, 1));
        float lv;
        CHECK_OK(tc_to_host(loss, &lv, sizeof lv));
        if (step == 0) first = lv;
        last = lv;
        tc_release(xt), tc_release(yt), tc_release(loss);
    }
    fprintf(stderr, "  loss %.4f -> %.4f over 30 steps\n", first, last);
    assert_true(fabsf(first - logf(256)) < 0.3f); /* about uniform at the start */
    assert_true(last < 0.5f * first);
    tc_optimizer_free(opt);
    gpt2_free(&m);
}

/* kernels of a model's forward (the loss) and of a whole AdamW training
 * step, at L layers of a small config */
static void step_kernels(int L, int *fwd, int *step) {
    gpt2_config c = {.n_layer = L, .n_head = 2, .n_embd = 32, .n_ctx = 16, .vocab = 61};
    gpt2_model m;
    CHECK_G(gpt2_init(&m, &c, 3, NULL));
    int32_t x[2 * 16], y[2 * 16];
    for (int i = 0; i < 32; i++) x[i] = i % 61, y[i] = (i * 7) % 61;
    tc_tensor *xt = tc_from_data(x, TC_INT32, 2, SHAPE(2, 16), NULL);
    tc_tensor *yt = tc_from_data(y, TC_INT32, 2, SHAPE(2, 16), NULL);
    tc_optimizer *o = tc_adamw(m.params, m.n_params, 1e-3, 0.9, 0.999, 1e-8, 0.01);
    CHECK_T(o);
    tc_tensor *loss = gpt2_loss(&m, xt, yt);
    CHECK_T(loss);
    *fwd = tc_schedule_kernel_count(&loss, 1);
    CHECK_OK(tc_backward(loss));
    tc_tensor *outs[256];
    int n = tc_optimizer_schedule_step(o, outs, 255);
    assert_true(n > 0 && n < 255);
    outs[n] = loss;
    *step = tc_schedule_kernel_count(outs, n + 1);
    tc_release(loss), tc_release(xt), tc_release(yt);
    tc_optimizer_free(o);
    gpt2_free(&m);
}

/* the kernel counts of a transformer block, pinned: each block adds 7
 * kernels to the forward and 36 to a training step (forward, backward and
 * AdamW's updates of its 12 parameters); the embeddings, final layernorm,
 * tied head and loss are 4 and 19 (3 AdamW updates of gradients that come
 * out of their reduce permuted are kernels of their own: group.c). Causal attention is one row kernel
 * forward (scores, softmax and the product with v: 3 kernels before row
 * kernels, when a block was 9 and 39) */
static void test_gpt2_kernel_counts(void **state) {
    (void)state;
    int f1, s1, f2, s2, f3, s3;
    step_kernels(1, &f1, &s1);
    step_kernels(2, &f2, &s2);
    step_kernels(3, &f3, &s3);
    fprintf(stderr, "  kernels: forward %d/%d/%d, step %d/%d/%d at 1/2/3 layers\n", f1, f2, f3,
            s1, s2, s3);
    assert_int_equal(f1, 11);
    assert_int_equal(s1, 55);
    assert_int_equal(f2 - f1, 7);
    assert_int_equal(f3 - f2, 7);
    assert_int_equal(s2 - s1, 36);
    assert_int_equal(s3 - s2, 36);
}

static void test_gpt2_errors(void **state) {
    (void)state;
    gpt2_config bad = tiny;
    bad.n_head = 3; /* 32 is not a multiple of 3 */
    gpt2_model m;
    assert_int_equal(gpt2_init(&m, &bad, 1, NULL), -1);
    assert_non_null(strstr(gpt2_last_error(), "width 32 is not a multiple of heads 3"));
    assert_null(m.params);
    CHECK_G(gpt2_init(&m, &tiny, 1, NULL));
    int32_t prompt[2] = {1, 2}, out[30];
    gpt2_sampling s = {.max_new_tokens = 23, .use_cache = true};
    assert_int_equal(gpt2_generate(&m, prompt, 2, &s, out, NULL), -1);
    assert_non_null(strstr(gpt2_last_error(), "exceed the context of 24"));
    s.max_new_tokens = 2;
    prompt[1] = 61;
    assert_int_equal(gpt2_generate(&m, prompt, 2, &s, out, NULL), -1);
    assert_non_null(strstr(gpt2_last_error(), "prompt[1] = 61"));
    int32_t ids[25] = {0};
    tc_tensor *idx = tc_from_data(ids, TC_INT32, 2, SHAPE(1, 25), NULL);
    assert_null(gpt2_forward(&m, idx));
    assert_non_null(strstr(gpt2_last_error(), "T <= context 24"));
    assert_int_equal(gpt2_load(&m, "/nonexistent/gpt2.safetensors"), -1);
    assert_non_null(strstr(gpt2_last_error(), "cannot open"));
    tc_release(idx);
    gpt2_free(&m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TEST(test_gpt2_save_load), TEST(test_gpt2_kv_cache_matches_full),
        TEST(test_gpt2_sample),    TEST(test_gpt2_training_loss_drops),
        TEST(test_gpt2_errors),    TEST(test_gpt2_kernel_counts),
        TEST(test_gpt2_decode_kernels),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
