/* plan_time.c - one matmul kernel of any operand layout timed under the CPU
 * optimizer's plan and under plans given as text (TC_BEAM's form, e.g.
 * "0:6,1:64/16/k256/p": axis:amount entries, /lanes, /k<block>, /e stores
 * in loops, /p packed panel, /a row panel of the rows' operand, /m<rows>
 * row blocks), for asking what a plan change is worth before teaching the
 * heuristic it.
 *
 *   build/bench/plan_time [PLAN ...]
 *   environment: N (columns and, unless set, rows and reduce; 1024), M, K,
 *   LAYOUT (two letters, a's then b's: n as stored, t transposed, so "tn"
 *   is a.T @ b with a stored (K, M); default "nn"), EPI=1 adds a residual
 *   (an epilogue, stored after the last of the reduce's blocks), TC_THREADS,
 *   SRC=1 prints each plan's C source on stderr.
 *
 *   CONV=Ci,Co,S,stride[,K] times a KxK (3x3) convolution instead: BATCH (16) images
 *   of Ci channels, S x S, read already padded, a weight stored channels-last
 *   (Ci, 3, 3, Co) as the step's copy leaves it, EPI=1 multiplies it by a
 *   tensor of its shape; GFLOPS counts 2 x its MACs.
 *
 * Prints the heuristic's plan, then per plan the least of 7 launches in ms
 * and GFLOPS (2MKN / t); a plan the item does not accept is reported and
 * skipped. Uses the library's internal headers (linked statically). */
#include "codegen/codegen.h"
#include "engine/engine.h"
#include "runtime/runtime.h"
#include "tensor/tensor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int64_t env_int(const char *name, int64_t fallback) {
    const char *v = getenv(name);
    return v && *v ? atoll(v) : fallback;
}

/* the least of 7 launches of item it under plan text (or p when text is
 * NULL), in seconds; -1 when the plan is refused or fails */
static double time_plan(tc_dev *d, const tc_sched_item *it, const char *text, tc_kopt p, int64_t out_bytes) {
    if (text && !tc_opt_parse(it, text, &p)) return -1;
    tc_lowered l;
    if (tc_lcache_lower(d, it, &p, &l) != TC_OK) return -1;
    if (getenv("SRC")) fprintf(stderr, "%s\n", l.src);
    tc_program *prog = d->compile(d, l.src, l.name);
    void *ptrs[8], *out = prog && it->n_bufs <= 8 ? d->alloc(d, (size_t)out_bytes) : NULL;
    double best = -1;
    if (out) {
        ptrs[0] = out;
        for (int k = 1; k < it->n_bufs; k++) ptrs[k] = it->bufs[k]->buffer->ptr;
        for (int r = 0; r < 7; r++) {
            double t0 = now();
            if (d->launch(d, prog, ptrs, it->n_bufs, &l.dims) != TC_OK) break;
            double dt = now() - t0;
            if (best < 0 || dt < best) best = dt;
        }
        d->free(d, out);
    }
    free(l.src);
    return best;
}

/* CONV's kernel: e = conv of a (padded images) by b (channels-last weight
 * seen as (Co, Ci, K, K)); m, k, n become the matmul it counts as */
static tc_tensor *conv_case(const char *spec, tc_tensor **a, tc_tensor **b, int64_t *m, int64_t *k, int64_t *n,
                            char *label, size_t size) {
    long long ci, co, sz, st, kk = 3;
    int got = sscanf(spec, "%lld,%lld,%lld,%lld,%lld", &ci, &co, &sz, &st, &kk);
    if (got < 4 || ci < 1 || co < 1 || sz < 1 || st < 1 || kk < 1) {
        fprintf(stderr, "plan_time: CONV='%s' is not Ci,Co,S,stride[,K]\n", spec);
        return NULL;
    }
    int64_t batch = env_int("BATCH", 16), sx[4] = {batch, ci, sz + kk - 1, sz + kk - 1}, sw[4] = {ci, kk, kk, co};
    int order[4] = {3, 0, 1, 2};
    *a = tc_rand(4, sx, TC_FLOAT32, NULL), *b = tc_rand(4, sw, TC_FLOAT32, NULL);
    tc_tensor *in[2] = {*a, *b}, *w = *a && *b && tc_realize(in, 2) == TC_OK ? tc_permute(*b, order) : NULL;
    tc_tensor *e = w ? tc_conv2d(*a, w, NULL, (int)st, 0) : NULL;
    tc_release(w);
    int64_t out = (sz - 1) / st + 1, so[4] = {batch, co, out, out};
    if (e && getenv("EPI")) { /* times a tensor of the output's shape: a relu mask's place */
        tc_tensor *r = tc_rand(4, so, TC_FLOAT32, NULL), *er = r && tc_realize(&r, 1) == TC_OK ? tc_mul(e, r) : NULL;
        tc_release(r), tc_release(e);
        e = er;
    }
    *m = batch * out * out, *k = ci * kk * kk, *n = co;
    snprintf(label, size, "conv %lldx%lldx%lldx%lld by %lldx%lldx%lldx%lld stride %lld", (long long)batch, ci, sz, sz,
             ci, kk, kk, co, st);
    return e;
}

int main(int argc, char **argv) {
    int64_t n = env_int("N", 1024), m = env_int("M", n), k = env_int("K", n);
    const char *lay = getenv("LAYOUT") && strlen(getenv("LAYOUT")) == 2 ? getenv("LAYOUT") : "nn";
    bool at = lay[0] == 't', bt = lay[1] == 't';
    int64_t sa[2] = {at ? k : m, at ? m : k}, sb[2] = {bt ? n : k, bt ? k : n}, so[2] = {m, n};
    char label[128];
    tc_tensor *a = NULL, *b = NULL, *r = NULL, *x = NULL, *y = NULL, *c = NULL, *e;
    if (getenv("CONV")) {
        e = conv_case(getenv("CONV"), &a, &b, &m, &k, &n, label, sizeof label);
    } else {
        a = tc_rand(2, sa, TC_FLOAT32, NULL), b = tc_rand(2, sb, TC_FLOAT32, NULL);
        r = tc_rand(2, so, TC_FLOAT32, NULL);
        tc_tensor *in[3] = {a, b, r};
        if (a && b && r && tc_realize(in, 3) == TC_OK) {
            x = at ? tc_transpose(a, 0, 1) : tc_retain(a), y = bt ? tc_transpose(b, 0, 1) : tc_retain(b);
            c = tc_matmul(x, y);
        }
        e = !c ? NULL : getenv("EPI") ? tc_add(c, r) : tc_retain(c);
        snprintf(label, sizeof label, "%s %lldx%lldx%lld", lay, (long long)m, (long long)k, (long long)n);
    }
    if (!e) {
        fprintf(stderr, "plan_time: %s\n", tc_last_error());
        return 1;
    }
    tc_dev *d = tc_device_get(0);
    tc_node *base = e ? tc_node_base(tc_tensor_node(e)) : NULL;
    tc_schedule *s = base && d ? tc_schedule_create(&base, 1) : NULL;
    int status = 0;
    if (!s || s->n_items != 1) {
        fprintf(stderr, "plan_time: not one kernel (%s)\n", s ? "several items" : tc_last_error());
        status = 1;
    } else {
        const tc_sched_item *it = &s->items[0];
        tc_kopt p;
        char text[128];
        tc_opt_choose(it, &d->target, &p);
        if (tc_opt_format(&p, text, sizeof text) < 0) text[0] = 0;
        printf("%s, heuristic plan %s\n", label, text);
        for (int i = 0; i < argc; i++) {
            const char *plan = i == 0 ? text : argv[i];
            double t = time_plan(d, it, i == 0 ? NULL : plan, p, m * n * 4);
            if (t < 0) printf("%-28s refused or failed\n", plan);
            else printf("%-28s %9.3f ms %7.1f GFLOPS\n", plan, t * 1e3, 2.0 * (double)(m * k * n) / t * 1e-9);
        }
    }
    tc_schedule_free(s);
    tc_release(e), tc_release(c), tc_release(x), tc_release(y), tc_release(a), tc_release(b), tc_release(r);
    tc_shutdown();
    return status;
}
