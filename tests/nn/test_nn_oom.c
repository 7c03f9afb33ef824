/* test_nn_oom.c - out of memory in the nn calls: every library allocation of
 * tc_idx_load, tc_mnist_load, tc_safe_save/tc_safe_load, the layer and
 * optimizer constructors, and whole training steps (a linear layer; a conv
 * net and an attention block under one AdamW) is made to fail in turn. Each failure must report TC_ERR_MEMORY with a message that starts
 * with the name of the public call that failed, crash nothing and leak no
 * graph node; ASan's leak check covers every other allocation. (zlib's own
 * allocations are not ours and are not failed.) Each training step is swept
 * cold (its first run schedules, lowers and compiles every kernel) and then
 * warm (the plan and kernels cached). The model step found an underread
 * (schedule/hazard.c's walk popped half a pair after a failed push). */
#include <stdlib.h>

#include "nn_helpers.h"

#include "graph/graph.h"
#include "util/util.h"

typedef bool (*op_fn)(void *ctx); /* true on success (and it cleaned up) */

static const char *failed_call; /* the public call an op_fn saw fail; NULL: one of a chain */

/* ok, recording name as the failed call when it is not */
static bool called(const char *name, bool ok) {
    if (!ok) failed_call = name;
    return ok;
}

/* runs op with allocation n failing, n = 1, 2, ... until it succeeds; with
 * exact_nodes every failure must leave the live graph nodes as they were,
 * otherwise (calls that may change things part-way: loads, steps) only the
 * code is checked */
static void sweep_ex(const char *name, op_fn op, void *ctx, bool exact_nodes) {
    int64_t base = tc_graph_live_nodes();
    for (int n = 1; n < 100000; n++) {
        failed_call = NULL;
        tc_error_set(TC_ERR_SHAPE, "an earlier, unrelated error"); /* must not leak into the next */
        tc_mem_fail_after(n);
        bool ok = op(ctx);
        tc_mem_fail_after(0);
        if (ok) {
            if (exact_nodes) assert_int_equal(tc_graph_live_nodes(), base);
            return;
        }
        if (tc_last_status() != TC_ERR_MEMORY)
            fprintf(stderr, "%s: allocation %d failed with %s\n", name, n, tc_last_error());
        assert_int_equal(tc_last_status(), TC_ERR_MEMORY);
        const char *msg = tc_last_error();
        size_t len = failed_call ? strlen(failed_call) : strspn(msg, "abcdefghijklmnopqrstuvwxyz0123456789_");
        bool named = failed_call ? strncmp(msg, failed_call, len) == 0 : strncmp(msg, "tc_", 3) == 0;
        if (!named || msg[len] != ':')
            fail_msg("%s: allocation %d: %s failed with '%s'", name, n,
                     failed_call ? failed_call : "a public call", msg);
        if (exact_nodes) assert_int_equal(tc_graph_live_nodes(), base);
    }
    fail_msg("%s never succeeded", name);
}

static void sweep(const char *name, op_fn op, void *ctx) {
    sweep_ex(name, op, ctx, true);
}

static bool idx_load(void *path) {
    tc_tensor *t = tc_idx_load(path, NULL);
    tc_release(t);
    return called("tc_idx_load", t != NULL);
}

static bool mnist_load(void *dir) {
    tc_mnist m;
    if (!called("tc_mnist_load", tc_mnist_load(dir, NULL, &m) == TC_OK)) return false;
    tc_mnist_release(&m);
    return true;
}

static void test_data(void **state) {
    (void)state;
    char dir[256], p[1024];
    make_tmpdir(dir, sizeof dir);
    uint8_t px[2 * 4 * 4] = {1, 2, 3}, lb[2] = {3, 4};
    const char *names[4] = {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte",
                            "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte.gz"};
    for (int i = 0; i < 4; i++)
        if (i % 2 == 0)
            write_idx_u8(join(p, sizeof p, dir, names[i]), 3, (uint32_t[]){2, 4, 4}, px, 32,
                         i == 0);
        else write_idx_u8(join(p, sizeof p, dir, names[i]), 1, (uint32_t[]){2}, lb, 2, i == 3);
    join(p, sizeof p, dir, names[0]);
    sweep("tc_idx_load gz", idx_load, p);
    join(p, sizeof p, dir, names[2]);
    sweep("tc_idx_load raw", idx_load, p);
    sweep("tc_mnist_load", mnist_load, dir);
    remove_tmpdir(dir, names, 4);
}

typedef struct {
    const char *path;
    const char *names[3];
    tc_tensor *ts[3];
} save_ctx;

static bool safe_save(void *ctx) {
    save_ctx *c = ctx;
    return called("tc_safe_save", tc_safe_save(c->path, c->names, c->ts, 3) == TC_OK);
}

static bool safe_load(void *ctx) {
    save_ctx *c = ctx;
    return called("tc_safe_load", tc_safe_load(c->path, c->names, c->ts, 3) == TC_OK);
}

/* saves three tensors with every allocation failing in turn; with load,
 * loads them back the same way */
static void saving(bool load) {
    char dir[256], p[1024];
    make_tmpdir(dir, sizeof dir);
    float v[6] = {1, 2, 3, 4, 5, 6};
    int32_t iv[2] = {7, 8};
    save_ctx c = {join(p, sizeof p, dir, "s.safetensors"), {"a", "b", "c"}, {NULL}};
    c.ts[0] = tc_from_data(v, TC_FLOAT32, 2, SHAPE(2, 3), NULL);
    c.ts[1] = tc_from_data(iv, TC_INT32, 1, SHAPE(2), NULL);
    c.ts[2] = tc_from_data(v, TC_FLOAT32, 1, SHAPE(6), NULL);
    sweep("tc_safe_save", safe_save, &c);
    if (load) {
        int64_t base = tc_graph_live_nodes();
        sweep_ex("tc_safe_load", safe_load, &c, false);
        CHECK_OK(tc_realize(c.ts, 3)); /* whatever a failure left pending */
        assert_int_equal(tc_graph_live_nodes(), base);
        float got[6];
        CHECK_OK(tc_to_host(c.ts[0], got, sizeof got));
        assert_memory_equal(got, v, sizeof v);
    }
    for (int i = 0; i < 3; i++) tc_release(c.ts[i]);
    remove_tmpdir(dir, (const char *[]){"s.safetensors"}, 1);
}

static void test_saving(void **state) {
    (void)state;
    saving(false);
}

static void test_loading(void **state) {
    (void)state;
    saving(true);
}

static bool make_layers(void *ctx) {
    (void)ctx;
    tc_layer *a = tc_nn_linear(5, 3, true, NULL), *b = NULL, *c = NULL;
    bool ok = called("tc_nn_linear", a != NULL) &&
              called("tc_nn_conv2d", (b = tc_nn_conv2d(2, 3, 3, 1, 1, true, NULL)) != NULL) &&
              called("tc_nn_batchnorm2d", (c = tc_nn_batchnorm2d(3, 1e-5, 0.1, NULL)) != NULL);
    tc_layer_free(a), tc_layer_free(b), tc_layer_free(c);
    return ok;
}

typedef struct {
    tc_layer *lin;
    tc_optimizer *opt;
    tc_tensor *x, *y;
} step_ctx;

static bool make_optimizers(void *ctx) {
    step_ctx *c = ctx;
    tc_tensor *ps[2];
    tc_layer_parameters(c->lin, ps, 2);
    tc_optimizer *a = tc_adamw(ps, 2, 1e-3, 0.9, 0.999, 1e-8, 0.01), *s = NULL;
    bool ok = called("tc_adamw", a != NULL) && called("tc_sgd", (s = tc_sgd(ps, 2, 0.1, 0.9)) != NULL);
    tc_optimizer_free(a), tc_optimizer_free(s);
    return ok;
}

/* forward, backward and a step (the loss realized with it) */
static bool train_step(void *ctx) {
    step_ctx *c = ctx;
    tc_tensor *logits = NULL, *loss = NULL;
    bool ok = called("tc_optimizer_zero_grad", tc_optimizer_zero_grad(c->opt) == TC_OK) &&
              called("tc_layer_forward", (logits = tc_layer_forward(c->lin, c->x)) != NULL) &&
              called("tc_cross_entropy", (loss = tc_cross_entropy(logits, c->y)) != NULL) &&
              called("tc_backward", tc_backward(loss) == TC_OK) &&
              called("tc_optimizer_step_with", tc_optimizer_step_with(c->opt, &loss, 1) == TC_OK);
    tc_release(logits), tc_release(loss);
    return ok;
}

static void test_layers_and_optimizers(void **state) {
    (void)state;
    sweep("layers", make_layers, NULL);
    step_ctx c = {tc_nn_linear(5, 3, true, NULL), NULL, NULL, NULL};
    CHECK_T(c.lin);
    sweep("optimizers", make_optimizers, &c);
    tc_layer_free(c.lin);
}

static void test_optimizer_step(void **state) {
    (void)state;
    step_ctx c = {tc_nn_linear(5, 3, true, NULL), NULL, NULL, NULL};
    CHECK_T(c.lin);
    tc_tensor *ps[2];
    tc_layer_parameters(c.lin, ps, 2);
    c.opt = tc_adam(ps, 2, 1e-3, 0.9, 0.999, 1e-8);
    float x[10] = {1, -2, 3, 0.5f, 1, 2, 0, -1, 1, 3};
    int32_t y[2] = {2, 0};
    c.x = tc_from_data(x, TC_FLOAT32, 2, SHAPE(2, 5), NULL);
    c.y = tc_from_data(y, TC_INT32, 1, SHAPE(2), NULL);
    sweep_ex("optimizer step, cold", train_step, &c, false);
    CHECK_OK(tc_optimizer_zero_grad(c.opt));
    int64_t base = tc_graph_live_nodes();
    sweep_ex("optimizer step, warm", train_step, &c, false);
    assert_true(train_step(&c)); /* usable afterwards, and back to the same graph */
    CHECK_OK(tc_optimizer_zero_grad(c.opt));
    assert_int_equal(tc_graph_live_nodes(), base);
    tc_optimizer_free(c.opt);
    tc_layer_free(c.lin);
    tc_release(c.x), tc_release(c.y);
}

/* a small conv net and an attention block, trained together: conv2d,
 * batchnorm (training), relu, max-pool, linear, cross-entropy; embedding,
 * layernorm, causal attention, linear; one AdamW step over all of them */
typedef struct {
    tc_layer *l[6]; /* conv bn fc emb ln head */
    tc_optimizer *opt;
    tc_tensor *img, *cls, *tok, *next;
} model_ctx;

static tc_tensor *conv_loss(model_ctx *m) {
    tc_tensor *a = tc_layer_forward(m->l[0], m->img), *b = a ? tc_layer_forward(m->l[1], a) : NULL;
    tc_tensor *r = b ? tc_relu(b) : NULL, *p = r ? tc_max_pool2d(r, 2, 2) : NULL;
    tc_tensor *f = p ? tc_reshape(p, 2, SHAPE(2, -1)) : NULL;
    tc_tensor *o = f ? tc_layer_forward(m->l[2], f) : NULL;
    tc_tensor *loss = o ? tc_cross_entropy(o, m->cls) : NULL;
    tc_release(a), tc_release(b), tc_release(r), tc_release(p), tc_release(f), tc_release(o);
    return loss;
}

static tc_tensor *attention_loss(model_ctx *m) {
    tc_tensor *e = tc_layer_forward(m->l[3], m->tok), *n = e ? tc_layer_forward(m->l[4], e) : NULL;
    tc_tensor *q = n ? tc_reshape(n, 4, SHAPE(1, 1, 6, 8)) : NULL;
    tc_tensor *att = q ? tc_scaled_dot_product_attention(q, q, q, NULL, true) : NULL;
    tc_tensor *h = att ? tc_reshape(att, 2, SHAPE(6, 8)) : NULL;
    tc_tensor *o = h ? tc_layer_forward(m->l[5], h) : NULL;
    tc_tensor *loss = o ? tc_cross_entropy(o, m->next) : NULL;
    tc_release(e), tc_release(n), tc_release(q), tc_release(att), tc_release(h), tc_release(o);
    return loss;
}

static bool model_step(void *ctx) {
    model_ctx *m = ctx;
    tc_tensor *a = NULL, *b = NULL, *loss = NULL;
    bool ok = called("tc_optimizer_zero_grad", tc_optimizer_zero_grad(m->opt) == TC_OK) &&
              (a = conv_loss(m)) && (b = attention_loss(m)) &&
              called("tc_add", (loss = tc_add(a, b)) != NULL) &&
              called("tc_backward", tc_backward(loss) == TC_OK) &&
              called("tc_optimizer_step_with", tc_optimizer_step_with(m->opt, &loss, 1) == TC_OK);
    tc_release(a), tc_release(b), tc_release(loss);
    return ok;
}

static void test_model_step(void **state) {
    (void)state;
    model_ctx m = {{tc_nn_conv2d(2, 4, 3, 1, 1, true, NULL), tc_nn_batchnorm2d(4, 1e-5, 0.1, NULL),
                    tc_nn_linear(4 * 3 * 3, 5, true, NULL), tc_nn_embedding(11, 8, NULL),
                    tc_nn_layernorm(8, 1e-5, true, true, NULL), tc_nn_linear(8, 11, false, NULL)},
                   NULL, NULL, NULL, NULL, NULL};
    tc_tensor *ps[16];
    int np = tc_nn_parameters(m.l, 6, ps, 16);
    assert_true(np > 0 && np <= 16);
    m.opt = tc_adamw(ps, np, 1e-3, 0.9, 0.999, 1e-8, 0.01);
    float img[2 * 2 * 6 * 6];
    for (int i = 0; i < 2 * 2 * 6 * 6; i++) img[i] = (float)((i * 7) % 13) / 13.0f - 0.5f;
    int32_t cls[2] = {1, 4}, tok[6] = {3, 1, 4, 1, 5, 9}, next[6] = {1, 4, 1, 5, 9, 2};
    m.img = tc_from_data(img, TC_FLOAT32, 4, SHAPE(2, 2, 6, 6), NULL);
    m.cls = tc_from_data(cls, TC_INT32, 1, SHAPE(2), NULL);
    m.tok = tc_from_data(tok, TC_INT32, 1, SHAPE(6), NULL);
    m.next = tc_from_data(next, TC_INT32, 1, SHAPE(6), NULL);
    sweep_ex("model step, cold", model_step, &m, false);
    CHECK_OK(tc_optimizer_zero_grad(m.opt));
    int64_t base = tc_graph_live_nodes();
    sweep_ex("model step, warm", model_step, &m, false);
    CHECK_OK(tc_optimizer_zero_grad(m.opt));
    assert_int_equal(tc_graph_live_nodes(), base);
    tc_optimizer_free(m.opt);
    for (int i = 0; i < 6; i++) tc_layer_free(m.l[i]);
    tc_release(m.img), tc_release(m.cls), tc_release(m.tok), tc_release(m.next);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TEST(test_data),           TEST(test_saving),
        TEST(test_loading),        TEST(test_layers_and_optimizers),
        TEST(test_optimizer_step), TEST(test_model_step),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
