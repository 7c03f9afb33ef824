/* gpt2.c - trains a GPT-2 (examples/gpt2/gpt2_model.h) on Debian's fortunes
 * (the `fortunes` package: /usr/share/games/fortunes) with libtinyc, then
 * samples text from it with a KV cache.
 *
 * Data: every fortune file of --data (regular files without a dot in the
 * name: not the .dat indexes, not the .u8 links), in name order, cut into
 * its fortunes (each ends at a line "%"); every tenth fortune goes to the
 * validation text, the rest to the training text. Tokens are bytes (vocab
 * 256; a larger --vocab only widens the embedding, for loading GPT-2's own
 * weights). A step draws --batch windows of --seq tokens at random offsets
 * of the training text (splitmix64 from --seed) and predicts each next byte.
 *
 * Training: AdamW (b1 0.9, b2 0.999, eps 1e-8; weight decay 0.1 on the
 * matrices, none on biases and LayerNorms, as nanoGPT groups them), the
 * gradients clipped to norm 1; forward, backward, clipping and both updates
 * realized together, the step captured by a tc_jit and replayed. Each step
 * prints its loss, gradient norm, time and tokens/s; every --val-every steps
 * (and after the last) the mean loss over --val-batches fixed windows of the
 * validation text. Then --sample N tokens follow --prompt (default "%\n",
 * the start of a fortune), drawn with --temperature and --top-k through the
 * KV cache, printed as text (as token ids when vocab > 256 or --ids 1).
 *
 * Usage: gpt2 [--layers L] [--heads H] [--width C] [--context N] [--vocab V]
 *             [--config 124M] [--steps N] [--batch B] [--seq T] [--lr X]
 *             [--seed S] [--val-every N] [--val-batches N] [--sample N]
 *             [--prompt TEXT] [--temperature X] [--top-k K] [--ids 0|1]
 *             [--load FILE] [--save FILE] [--data DIR] [--device D] [--jit 0|1]
 * Defaults: 4 layers, 4 heads, width 128, context 128, vocab 256, 200 steps,
 * batch 8, seq 64, lr 1e-3, seed 1337, validation every 50 steps over 8
 * batches, 300 sampled tokens at temperature 0.8, top-k 40. --config 124M is
 * GPT-2 small: 12 layers, 12 heads, width 768, context 1024. --load reads
 * weights (Hugging Face names) before training; --steps 0 only samples. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gpt2/gpt2_model.h"

typedef struct {
    gpt2_config cfg;         /* the model's shapes */
    int steps, batch, seq;   /* training steps, windows a step, tokens a window */
    double lr;               /* AdamW's learning rate */
    uint64_t seed;           /* weights, batches and the sampler */
    int val_every;           /* steps between validation losses */
    int val_batches;         /* batches of the validation loss */
    gpt2_sampling sampling;  /* the text sampled at the end */
    const char *prompt;      /* its beginning */
    int print_ids;           /* print the sample as token ids */
    const char *load, *save; /* safetensors files, or NULL */
    const char *data;        /* the fortunes directory */
    const char *device;      /* NULL: the default */
    int use_jit;             /* replay the captured training step */
} options;

typedef struct {
    unsigned char *train, *val; /* the two texts (malloc'ed) */
    int64_t n_train, n_val;     /* their bytes */
    int files;                  /* fortune files read */
} corpus;

typedef struct {
    gpt2_model m;          /* the weights */
    tc_optimizer *decay;   /* AdamW over the matrices (weight decay 0.1) */
    tc_optimizer *nodecay; /* AdamW over biases and LayerNorm weights (none) */
} trainer;

static int fail(const char *what, const char *why) {
    fprintf(stderr, "gpt2: %s failed: %s\n", what, why);
    return 1;
}

/* ---- the corpus ---------------------------------------------------------------- */

/* appends n bytes to *buf (of *len, room *cap); false when out of memory */
static bool append(unsigned char **buf, int64_t *len, int64_t *cap, const void *p, int64_t n) {
    if (*len + n > *cap) {
        int64_t c = (*cap ? *cap * 2 : 1 << 16) + n;
        unsigned char *b = realloc(*buf, (size_t)c);
        if (!b) return false;
        *buf = b, *cap = c;
    }
    memcpy(*buf + *len, p, (size_t)n);
    *len += n;
    return true;
}

/* cuts text[0..n-1] into fortunes (each up to and with its "%" line): every
 * tenth one (counted over all files by *k) to val, the others to train */
static bool split(corpus *c, const unsigned char *text, int64_t n, int64_t *k, int64_t *cap_t,
                  int64_t *cap_v) {
    int64_t start = 0;
    for (int64_t i = 0; i < n; i++) {
        bool at_end = i == n - 1;
        bool is_sep =
            text[i] == '%' && (i == 0 || text[i - 1] == '\n') && (at_end || text[i + 1] == '\n');
        if (!is_sep && !at_end) continue;
        int64_t end = is_sep && !at_end ? i + 2 : n; /* past "%\n" */
        bool to_val = (*k)++ % 10 == 9;
        if (!(to_val ? append(&c->val, &c->n_val, cap_v, text + start, end - start)
                     : append(&c->train, &c->n_train, cap_t, text + start, end - start)))
            return false;
        start = end;
        i = end - 1; /* the loop goes on at end */
    }
    return true;
}

static bool is_fortune_file(const char *dir, const char *name) {
    char path[4096];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return !strchr(name, '.') && lstat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* one file's text (malloc'ed, *n bytes), NULL when unreadable */
static unsigned char *read_file(const char *dir, const char *name, int64_t *n) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    unsigned char *p = NULL;
    long len = f && fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (len >= 0 && fseek(f, 0, SEEK_SET) == 0 && (p = malloc((size_t)len + 1)) &&
        fread(p, 1, (size_t)len, f) != (size_t)len) {
        free(p);
        p = NULL;
    }
    if (f) fclose(f);
    *n = len;
    return p;
}

static int load_corpus(const char *dir, corpus *c) {
    struct dirent **names = NULL;
    int n = scandir(dir, &names, NULL, alphasort), rc = 0;
    if (n < 0) {
        fprintf(stderr, "gpt2: cannot read %s (Debian: apt-get install fortunes)\n", dir);
        return 1;
    }
    int64_t k = 0, cap_t = 0, cap_v = 0;
    for (int i = 0; i < n; i++) {
        if (rc == 0 && is_fortune_file(dir, names[i]->d_name)) {
            int64_t len;
            unsigned char *text = read_file(dir, names[i]->d_name, &len);
            if (!text) rc = fail("reading the corpus", names[i]->d_name);
            else if (!split(c, text, len, &k, &cap_t, &cap_v)) rc = fail("the corpus", "no memory");
            free(text);
            c->files += rc == 0;
        }
        free(names[i]);
    }
    free(names);
    if (rc == 0 && (c->files == 0 || c->n_val < 2))
        rc = fail("reading the corpus", "no fortune files (apt-get install fortunes)");
    return rc;
}

/* ---- training ------------------------------------------------------------------ */

static void free_trainer(trainer *t) {
    tc_optimizer_free(t->decay), tc_optimizer_free(t->nodecay);
    gpt2_free(&t->m);
}

/* the model (loaded when asked) and its two AdamW groups */
static int build(trainer *t, const options *o) {
    memset(t, 0, sizeof *t);
    if (gpt2_init(&t->m, &o->cfg, o->seed, o->device)) return fail("gpt2_init", gpt2_last_error());
    if (o->load && gpt2_load(&t->m, o->load)) return fail("--load", gpt2_last_error());
    int n = t->m.n_params, n2 = 0, n1 = 0;
    tc_tensor **mats = malloc(sizeof *mats * (size_t)n), **vecs = malloc(sizeof *vecs * (size_t)n);
    for (int i = 0; mats && vecs && i < n; i++) {
        if (tc_ndim(t->m.params[i]) == 2) mats[n2++] = t->m.params[i];
        else vecs[n1++] = t->m.params[i];
    }
    if (mats && vecs) {
        t->decay = tc_adamw(mats, n2, o->lr, 0.9, 0.999, 1e-8, 0.1);
        t->nodecay = t->decay ? tc_adamw(vecs, n1, o->lr, 0.9, 0.999, 1e-8, 0.0) : NULL;
    }
    free(mats), free(vecs);
    return t->nodecay ? 0 : fail("tc_adamw", tc_last_error());
}

/* the step (also tc_jit's): in x, y (B, T); out the loss and the gradient
 * norm before clipping; everything realized in one tc_realize */
static tc_status train_step(void *user, tc_tensor *const *in, int n_in, tc_tensor **out,
                            int n_out) {
    trainer *t = user;
    (void)n_in, (void)n_out;
    tc_status s = tc_optimizer_zero_grad(t->decay);
    if (s == TC_OK) s = tc_optimizer_zero_grad(t->nodecay);
    tc_tensor *loss = s == TC_OK ? gpt2_loss(&t->m, in[0], in[1]) : NULL;
    if (s == TC_OK) s = loss ? tc_backward_opts(loss, NULL, false) : tc_last_status();
    tc_tensor *norm = s == TC_OK ? tc_clip_grad_norm(t->m.params, t->m.n_params, 1.0, 2.0) : NULL;
    if (s == TC_OK && !norm) s = tc_last_status();
    int cap = 4 * t->m.n_params + 16, n = 2;
    tc_tensor **all = s == TC_OK ? malloc(sizeof *all * (size_t)cap) : NULL;
    if (s == TC_OK && !all) s = TC_ERR_MEMORY;
    if (all) {
        all[0] = loss, all[1] = norm;
        int a = tc_optimizer_schedule_step(t->decay, all + n, cap - n);
        n += a > 0 ? a : 0;
        int b = a >= 0 ? tc_optimizer_schedule_step(t->nodecay, all + n, cap - n) : -1;
        n += b > 0 ? b : 0;
        s = a < 0 || b < 0 ? tc_last_status() : n > cap ? TC_ERR_INTERNAL : tc_realize(all, n);
        free(all);
    }
    if (s == TC_OK) {
        out[0] = loss, out[1] = norm;
        return TC_OK;
    }
    tc_release(loss), tc_release(norm);
    return s;
}

/* x, y (B, T) int32 for windows starting at offs[0..B-1] of text */
static int make_batch(const unsigned char *text, const int64_t *offs, int B, int T, const char *dev,
                      tc_tensor **x, tc_tensor **y) {
    int32_t *ids = malloc(sizeof *ids * 2 * (size_t)B * (size_t)T);
    if (!ids) return fail("make_batch", "out of memory");
    for (int b = 0; b < B; b++)
        for (int i = 0; i < T; i++) {
            ids[b * T + i] = text[offs[b] + i];
            ids[B * T + b * T + i] = text[offs[b] + i + 1];
        }
    int64_t shape[2] = {B, T};
    *x = tc_from_data(ids, TC_INT32, 2, shape, dev);
    *y = *x ? tc_from_data(ids + B * T, TC_INT32, 2, shape, dev) : NULL;
    free(ids);
    return *y ? 0 : fail("tc_from_data", tc_last_error());
}

/* the mean loss over o->val_batches windows spread evenly over the text */
static int validate(trainer *t, const corpus *c, const options *o, double *out) {
    int B = o->batch, T = o->seq, nb = o->val_batches, rc = 0;
    int64_t *offs = malloc(sizeof *offs * (size_t)B);
    bool was = tc_set_grad_enabled(false);
    double sum = 0;
    for (int k = 0; k < nb && rc == 0 && offs; k++) {
        for (int b = 0; b < B; b++)
            offs[b] = (int64_t)(k * B + b) * (c->n_val - T - 1) / ((int64_t)nb * B);
        tc_tensor *x = NULL, *y = NULL, *loss = NULL;
        float lv = 0;
        rc = make_batch(c->val, offs, B, T, o->device, &x, &y);
        if (rc == 0 &&
            (!(loss = gpt2_loss(&t->m, x, y)) || tc_to_host(loss, &lv, sizeof lv) != TC_OK))
            rc = fail("the validation loss", loss ? tc_last_error() : gpt2_last_error());
        sum += lv;
        tc_release(x), tc_release(y), tc_release(loss);
    }
    tc_set_grad_enabled(was);
    if (!offs) rc = fail("validate", "out of memory");
    free(offs);
    *out = sum / nb;
    return rc;
}

static int train(trainer *t, const corpus *c, const options *o) {
    int B = o->batch, T = o->seq, rc = 0;
    tc_jit *jit = o->use_jit ? tc_jit_new(train_step, t) : NULL;
    int64_t *offs = malloc(sizeof *offs * (size_t)B);
    if ((o->use_jit && !jit) || !offs) rc = fail("setting up training", tc_last_error());
    uint64_t rng = o->seed;
    double t_all = gpt2_now(), tokens = 0, busy = 0;
    for (int step = 1; step <= o->steps && rc == 0; step++) {
        for (int b = 0; b < B; b++)
            offs[b] = (int64_t)(gpt2_splitmix64(&rng) % (uint64_t)(c->n_train - T - 1));
        tc_tensor *x = NULL, *y = NULL, *out[2] = {NULL, NULL};
        if ((rc = make_batch(c->train, offs, B, T, o->device, &x, &y))) break;
        double t0 = gpt2_now();
        tc_tensor *in[2] = {x, y};
        tc_status s = jit ? tc_jit_run(jit, in, 2, out, 2) : train_step(t, in, 2, out, 2);
        float lv = 0, norm = 0;
        if (s == TC_OK) s = tc_to_host(out[0], &lv, sizeof lv);
        if (s == TC_OK) s = tc_to_host(out[1], &norm, sizeof norm);
        double dt = gpt2_now() - t0;
        if (s != TC_OK) rc = fail("the training step", tc_last_error());
        if (step > 2) tokens += (double)B * T, busy += dt; /* 1 and 2 compile and capture */
        if (rc == 0)
            printf("step %4d/%d  loss %.4f  norm %.3f  %7.1f ms  %7.0f tok/s\n", step, o->steps, lv,
                   norm, 1e3 * dt, (double)B * T / dt);
        tc_release(x), tc_release(y), tc_release(out[0]), tc_release(out[1]);
        double val;
        if (rc == 0 && (step % o->val_every == 0 || step == o->steps) &&
            (rc = validate(t, c, o, &val)) == 0)
            printf("step %4d/%d  val loss %.4f\n", step, o->steps, val);
        fflush(stdout);
    }
    if (rc == 0 && busy > 0)
        printf("trained %d steps in %.1f s; %.0f tok/s after the first two steps\n", o->steps,
               gpt2_now() - t_all, tokens / busy);
    free(offs);
    tc_jit_free(jit);
    return rc;
}

/* ---- sampling ------------------------------------------------------------------ */

static int sample(trainer *t, const options *o) {
    int n_prompt = (int)strlen(o->prompt), n_new = o->sampling.max_new_tokens;
    int32_t *ids = malloc(sizeof *ids * (size_t)(n_prompt + n_new + 1));
    if (!ids) return fail("sampling", "out of memory");
    for (int i = 0; i < n_prompt; i++) ids[i] = (unsigned char)o->prompt[i];
    double *secs = malloc(sizeof *secs * (size_t)(n_new + 1)), t0 = gpt2_now(), busy = 0;
    gpt2_sampling how = o->sampling;
    how.seconds = secs;
    int rc = secs ? gpt2_generate(&t->m, ids, n_prompt, &how, ids + n_prompt, NULL) : -1;
    double dt = gpt2_now() - t0;
    for (int i = 0; rc == 0 && i < n_new; i++) busy += secs[i];
    free(secs);
    if (rc) {
        free(ids);
        return fail("gpt2_generate", secs ? gpt2_last_error() : "out of memory");
    }
    bool as_ids = o->print_ids || t->m.cfg.vocab > 256;
    printf("---- %d tokens after %d of prompt (temperature %g, top-k %d) ----\n", n_new, n_prompt,
           o->sampling.temperature, o->sampling.top_k);
    for (int i = as_ids ? n_prompt : 0; i < n_prompt + n_new; i++) {
        if (as_ids) printf("%d%c", ids[i], i + 1 < n_prompt + n_new ? ' ' : '\n');
        else putchar(ids[i]);
    }
    /* the new tokens' own steps: after a prompt of 3 or more, jit replays */
    printf("%s---- generated %d tokens in %.2f s: %.1f tok/s (KV cache, batch 1); the new "
           "tokens' steps alone: %.1f tok/s ----\n",
           as_ids ? "" : "\n", n_new, dt, n_new / dt, n_new / busy);
    free(ids);
    return 0;
}

/* ---- main ---------------------------------------------------------------------- */

static int usage(void) {
    fprintf(stderr,
            "usage: gpt2 [--layers L] [--heads H] [--width C] [--context N] [--vocab V]\n"
            "            [--config 124M] [--steps N] [--batch B] [--seq T] [--lr X] [--seed S]\n"
            "            [--val-every N] [--val-batches N] [--sample N] [--prompt TEXT]\n"
            "            [--temperature X] [--top-k K] [--ids 0|1] [--load FILE] [--save FILE]\n"
            "            [--data DIR] [--device D] [--jit 0|1]\n");
    return 2;
}

/* sets the option called a from v; false for an unknown name */
static bool set_option(options *o, const char *a, const char *v) {
    gpt2_config *c = &o->cfg;
    if (!strcmp(a, "--layers")) c->n_layer = atoi(v);
    else if (!strcmp(a, "--heads")) c->n_head = atoi(v);
    else if (!strcmp(a, "--width")) c->n_embd = atoll(v);
    else if (!strcmp(a, "--context")) c->n_ctx = atoll(v);
    else if (!strcmp(a, "--vocab")) c->vocab = atoll(v);
    else if (!strcmp(a, "--config") && !strcmp(v, "124M"))
        c->n_layer = 12, c->n_head = 12, c->n_embd = 768, c->n_ctx = 1024;
    else if (!strcmp(a, "--steps")) o->steps = atoi(v);
    else if (!strcmp(a, "--batch")) o->batch = atoi(v);
    else if (!strcmp(a, "--seq")) o->seq = atoi(v);
    else if (!strcmp(a, "--lr")) o->lr = atof(v);
    else if (!strcmp(a, "--seed")) o->seed = strtoull(v, NULL, 10);
    else if (!strcmp(a, "--val-every")) o->val_every = atoi(v);
    else if (!strcmp(a, "--val-batches")) o->val_batches = atoi(v);
    else if (!strcmp(a, "--sample")) o->sampling.max_new_tokens = atoi(v);
    else if (!strcmp(a, "--prompt")) o->prompt = v;
    else if (!strcmp(a, "--temperature")) o->sampling.temperature = atof(v);
    else if (!strcmp(a, "--top-k")) o->sampling.top_k = atoi(v);
    else if (!strcmp(a, "--ids")) o->print_ids = atoi(v);
    else if (!strcmp(a, "--load")) o->load = v;
    else if (!strcmp(a, "--save")) o->save = v;
    else if (!strcmp(a, "--data")) o->data = v;
    else if (!strcmp(a, "--device")) o->device = v;
    else if (!strcmp(a, "--jit")) o->use_jit = atoi(v);
    else return false;
    return true;
}

static int parse(int argc, char **argv, options *o) {
    *o = (options){.cfg = {4, 4, 128, 128, 256},
                   .steps = 200,
                   .batch = 8,
                   .seq = -1,
                   .lr = 1e-3,
                   .seed = 1337,
                   .val_every = 50,
                   .val_batches = 8,
                   .sampling = {300, 0.8, 40, 0, true},
                   .prompt = "%\n",
                   .data = "/usr/share/games/fortunes",
                   .use_jit = 1};
    for (int i = 1; i < argc; i += 2)
        if (i + 1 >= argc || !set_option(o, argv[i], argv[i + 1])) return usage();
    if (o->seq < 0) o->seq = o->cfg.n_ctx < 64 ? (int)o->cfg.n_ctx : 64;
    o->sampling.seed = o->seed;
    if (gpt2_config_check(&o->cfg)) {
        fail("the options", gpt2_last_error());
        return 2;
    }
    if (o->steps < 0 || o->batch < 1 || o->seq < 1 || o->seq > o->cfg.n_ctx || o->val_every < 1 ||
        o->val_batches < 1 || o->sampling.max_new_tokens < 0) {
        fprintf(stderr, "gpt2: steps >= 0, batch, seq, val-every, val-batches >= 1, "
                        "seq <= context and sample >= 0, please\n");
        return usage();
    }
    if (o->cfg.vocab < 256 && (o->steps > 0 || o->sampling.max_new_tokens > 0)) {
        fail("the options", "byte-level text needs --vocab >= 256");
        return 2;
    }
    return 0;
}

int main(int argc, char **argv) {
    options o;
    int rc = parse(argc, argv, &o);
    if (rc) return rc;
    corpus c = {0};
    trainer t = {0};
    if (o.steps > 0) rc = load_corpus(o.data, &c);
    if (rc == 0 && o.steps > 0 && c.n_train < o.seq + 2)
        rc = fail("the corpus", "shorter than one window");
    if (rc == 0) rc = build(&t, &o);
    if (rc == 0) {
        const gpt2_config *g = &o.cfg;
        int64_t n = 0;
        for (int i = 0; i < t.m.n_params; i++) n += tc_numel(t.m.params[i]);
        printf("GPT-2: %d layers, %d heads, width %lld, context %lld, vocab %lld: %.2fM "
               "parameters\n",
               g->n_layer, g->n_head, (long long)g->n_embd, (long long)g->n_ctx,
               (long long)g->vocab, n / 1e6);
        if (o.steps > 0)
            printf("data: %d files of %s, %lld train / %lld val bytes; %d steps of %d x %d "
                   "tokens, AdamW lr %g, seed %llu\n",
                   c.files, o.data, (long long)c.n_train, (long long)c.n_val, o.steps, o.batch,
                   o.seq, o.lr, (unsigned long long)o.seed);
        fflush(stdout);
        if (o.steps > 0) rc = train(&t, &c, &o);
        if (rc == 0 && o.save && gpt2_save(&t.m, o.save)) rc = fail("--save", gpt2_last_error());
        if (rc == 0 && o.sampling.max_new_tokens > 0) rc = sample(&t, &o);
    }
    free_trainer(&t);
    free(c.train), free(c.val);
    tc_shutdown();
    return rc;
}
