/* realize.c - runs schedules: for each item, allocate its outputs, lower the
 * kernel (codegen -> render -> device compile, cached by source on disk and
 * in memory by the runtime), launch it, and turn its output nodes into
 * BUFFER nodes. Also host transfers, counters and TC_DEBUG output.
 */
#include "engine.h"

#include "render/render.h"
#include "schedule/schedule.h"

#include <stdlib.h>
#include <string.h>

static tc_counters counters; /* since start or the last reset */

void tc_engine_get_counters(tc_counters *out) {
    *out = counters;
    tc_runtime_mem(&out->mem_used, &out->mem_peak, &out->mem_cached);
}

void tc_engine_reset_counters(void) {
    memset(&counters, 0, sizeof counters);
    tc_runtime_mem_reset_peak();
}

/* programs built from source so far, by every device that counts them */
static int64_t builds(void) {
    return tc_cpu_build_count() + tc_opencl_build_count();
}

void tc_engine_shutdown(void) {
    tc_engine_reset_counters();
    tc_lcache_clear();
}

static size_t node_bytes(const tc_node *n) {
    return (size_t)tc_node_numel(n) * tc_dtypes[n->dtype].size;
}

tc_status tc_engine_launch(tc_dev *dev, tc_program *prog, tc_buffer *const *bufs, int n_bufs,
                           int n_outs, const tc_launch_dims *dims, int64_t est_ops,
                           int64_t est_mem, const char *name, int index) {
    int64_t debug = tc_flag_get(TC_FLAG_DEBUG);
    void *ptrs[64], **p = n_bufs <= 64 ? ptrs : tc_malloc(sizeof(void *) * (size_t)n_bufs);
    if (!p) return TC_ERR_MEMORY;
    for (int i = 0; i < n_bufs; i++) p[i] = bufs[i]->ptr;
    double t0 = tc_time_now();
    tc_status st = dev->launch(dev, prog, p, n_bufs, dims);
    if (st == TC_OK && debug >= 2) st = dev->synchronize(dev);
    double dt = tc_time_now() - t0;
    if (p != ptrs) tc_free(p);
    if (st != TC_OK) return st;
    counters.launch_s += dt;
    counters.kernel_count++;
    counters.global_ops += est_ops;
    counters.global_mem += est_mem;
    if (debug >= 2) {
        counters.time_sum_s += dt;
        fprintf(stderr, "  kernel %3d %-28s %8lld ops %9.3f ms %7.2f GB/s\n", index, name,
                (long long)est_ops, dt * 1e3, dt > 0 ? (double)est_mem / dt * 1e-9 : 0.0);
    }
    return tc_capture_record_launch(dev, prog, bufs, n_bufs, n_outs, dims, est_ops, est_mem,
                                    name);
}

tc_status tc_engine_copy(tc_buffer *dst, tc_buffer *src, size_t nbytes) {
    tc_status st = tc_buffer_copy(dst, src, nbytes);
    return st == TC_OK ? tc_capture_record_copy(dst, src, nbytes) : st;
}

typedef tc_lowered lowered; /* src owned */

/* codegen + render of a kernel item for the device of its output (or the
 * lowering cache's copy of the same) */
static tc_status lower_item(const tc_sched_item *it, lowered *out) {
    int64_t debug = tc_flag_get(TC_FLAG_DEBUG);
    tc_dev *dev = tc_device_get(it->bufs[0]->device);
    if (!dev) return tc_error_code();
    if (debug >= 3) tc_ast_dump(stderr, it->ast);
    tc_kopt plan; /* TC_BEAM's search (compiles and runs candidates) is not lowering time */
    if (tc_beam_plan(dev, it, &plan) != TC_OK) return tc_error_code();
    double t0 = tc_time_now();
    tc_status st = tc_lcache_lower(dev, it, &plan, out);
    counters.lower_s += tc_time_now() - t0;
    if (st != TC_OK) return st;
    if (debug >= 4) fprintf(stderr, "%s", out->src);
    return TC_OK;
}

/* lowers every kernel of s into low[i], then has each device that can build
 * the new ones ahead, all at once (compile then finds them cached) */
static tc_status lower_all(const tc_schedule *s, lowered *low) {
    tc_status st = TC_OK;
    for (int i = 0; i < s->n_items && st == TC_OK; i++)
        if (!s->items[i].is_copy) st = lower_item(&s->items[i], &low[i]);
    const char **srcs = st == TC_OK ? tc_malloc(sizeof(char *) * (size_t)(s->n_items + 1)) : NULL;
    const char **names = srcs ? tc_malloc(sizeof(char *) * (size_t)(s->n_items + 1)) : NULL;
    if (st == TC_OK && !names) st = TC_ERR_MEMORY;
    for (int i = 0; i < s->n_items && st == TC_OK; i++) {
        if (!low[i].src) continue;
        int device = s->items[i].bufs[0]->device, m = 0;
        bool is_done = false; /* an earlier item on this device handled it */
        for (int j = 0; j < i && !is_done; j++)
            is_done = low[j].src && s->items[j].bufs[0]->device == device;
        tc_dev *dev = tc_device_get(device);
        if (is_done || !dev || !dev->prebuild) continue;
        for (int j = i; j < s->n_items; j++) {
            if (!low[j].src || s->items[j].bufs[0]->device != device) continue;
            srcs[m] = low[j].src;
            names[m++] = low[j].name;
        }
        double t0 = tc_time_now();
        int64_t built = builds();
        st = dev->prebuild(dev, srcs, names, m);
        counters.compile_s += tc_time_now() - t0;
        counters.compile_count += builds() - built;
    }
    tc_free(srcs);
    tc_free(names);
    return st;
}

static void lowered_free(lowered *low, int n) {
    for (int i = 0; low && i < n; i++) tc_free(low[i].src);
    tc_free(low);
}

/* compile (found in a cache when lower_all built it) + launch of one lowered
 * kernel item on bufs */
static tc_status run_kernel(const tc_sched_item *it, const lowered *l, tc_buffer **bufs,
                            int index) {
    tc_dev *dev = tc_device_get(bufs[0]->device);
    if (!dev) return tc_error_code();
    double t0 = tc_time_now();
    int64_t built = builds();
    tc_program *prog = dev->compile(dev, l->src, l->name);
    counters.compile_s += tc_time_now() - t0;
    counters.compile_count += builds() - built;
    if (!prog) return tc_error_code();
    tc_status st = tc_engine_launch(dev, prog, bufs, it->n_bufs, it->n_outs, &l->dims, l->est_ops,
                                    l->est_mem, l->name, index);
    if (st == TC_OK && tc_cuda_check_enabled()) st = tc_cuda_check_item(it); /* TC_CUDA_CHECK=1 */
    return st;
}

/* allocates (or, for ASSIGN, borrows the target's) output buffers of item */
static tc_status out_buffer(const tc_sched_item *it, int k, tc_buffer **out) {
    tc_node *o = it->bufs[k];
    if (o->op == TC_OP_ASSIGN) {
        *out = tc_buffer_retain(tc_node_base(o->srcs[1])->buffer);
        return TC_OK;
    }
    *out = tc_buffer_new(o->device, node_bytes(o));
    return *out ? TC_OK : tc_error_code();
}

static tc_status run_item(const tc_sched_item *it, const lowered *l, int index) {
    tc_buffer *stack_bufs[16], **bufs = stack_bufs;
    if (it->n_bufs > 16 && !(bufs = tc_calloc((size_t)it->n_bufs, sizeof *bufs))) return TC_ERR_MEMORY;
    tc_status st = TC_OK;
    int made = 0;
    for (; made < it->n_outs && st == TC_OK; made++) st = out_buffer(it, made, &bufs[made]);
    if (st != TC_OK) made--;
    for (int i = it->n_outs; i < it->n_bufs && st == TC_OK; i++) {
        bufs[i] = it->bufs[i]->buffer;
        if (it->bufs[i]->op != TC_OP_BUFFER) st = TC_INTERNAL("input %d of %s is not realized", i, it->name);
    }
    if (st == TC_OK) {
        if (it->is_copy) st = tc_engine_copy(bufs[0], bufs[1], node_bytes(it->bufs[0]));
        else st = run_kernel(it, l, bufs, index);
    }
    for (int k = 0; k < made; k++) {
        if (st == TC_OK) tc_node_set_realized(it->bufs[k], bufs[k]);
        tc_buffer_release(bufs[k]);
    }
    if (bufs != stack_bufs) tc_free(bufs);
    return st;
}

/* Memory is shared inside a schedule: after item i runs, the schedule lets
 * go of every node no later item reads or writes. An intermediate that
 * nothing else holds (no tensor, no unrealized node) then goes back to the
 * buffer cache at once, and a later item's output of a size class it fits
 * reuses its memory: a chain of temporaries peaks at two of them, not all. */
static void release_done(tc_schedule *s, int i) {
    tc_sched_item *it = &s->items[i];
    for (int k = 0; k < it->n_bufs; k++) {
        tc_node *n = it->bufs[k];
        bool later = false;
        for (int j = i + 1; j < s->n_items && !later && n; j++)
            for (int m = 0; m < s->items[j].n_bufs && !later; m++) later = s->items[j].bufs[m] == n;
        if (!n || later) continue;
        for (int j = 0; j <= i; j++) { /* every reference the schedule holds to it */
            tc_sched_item *e = &s->items[j];
            for (int m = 0; m < e->n_bufs; m++) {
                if (e->bufs[m] != n) continue;
                e->bufs[m] = NULL;
                tc_node_release(n);
            }
        }
    }
}

/* TC_SAVE_SCHEDULE=path writes each realize's schedule as Graphviz to path
 * (replaced each time), or to path formatted with a counter when it holds
 * one "%d" (tools/render_schedule.sh turns them into SVG) */
static void save_schedule(const tc_schedule *s) {
    static int counter;
    const char *pattern = getenv("TC_SAVE_SCHEDULE");
    if (!pattern || !*pattern || !s->n_items) return;
    char path[4096];
    const char *pct = strstr(pattern, "%d");
    if (pct && !strchr(pct + 2, '%') && strchr(pattern, '%') == pct) {
        snprintf(path, sizeof path, "%.*s%d%s", (int)(pct - pattern), pattern, counter++, pct + 2);
    } else {
        snprintf(path, sizeof path, "%s", pattern);
    }
    FILE *f = fopen(path, "w");
    if (!f) return; /* a debugging aid: never fails a realize */
    tc_schedule_write_dot(f, s);
    fclose(f);
}

tc_status tc_engine_realize(tc_node *const *nodes, int n, const char *api) {
    (void)api;
    tc_counters c0 = counters;
    double t0 = tc_time_now();
    tc_schedule *s = tc_schedule_create(nodes, n);
    counters.schedule_s += tc_time_now() - t0;
    if (!s) return tc_error_code() ? tc_error_code() : TC_ERR_MEMORY;
    save_schedule(s);
    lowered *low = tc_calloc((size_t)s->n_items + 1, sizeof *low);
    tc_status st = low ? lower_all(s, low) : TC_ERR_MEMORY;
    for (int i = 0; i < s->n_items && st == TC_OK; i++) {
        st = run_item(&s->items[i], &low[i], i);
        if (st == TC_OK) release_done(s, i);
    }
    lowered_free(low, s->n_items);
    if (st == TC_OK && tc_flag_get(TC_FLAG_DEBUG) >= 1 && s->n_items) {
        int64_t used, peak, cached;
        tc_runtime_mem(&used, &peak, &cached);
        fprintf(stderr,
                "realize: %d kernels, %d items in %.3f ms (schedule %.3f, lower %.3f, compile "
                "%.3f for %lld built, launch %.3f ms; memory %.1f MB, peak %.1f MB, cached %.1f "
                "MB)\n",
                tc_schedule_n_kernels(s), s->n_items, (tc_time_now() - t0) * 1e3,
                (counters.schedule_s - c0.schedule_s) * 1e3, (counters.lower_s - c0.lower_s) * 1e3,
                (counters.compile_s - c0.compile_s) * 1e3,
                (long long)(counters.compile_count - c0.compile_count),
                (counters.launch_s - c0.launch_s) * 1e3, (double)used / 1e6, (double)peak / 1e6,
                (double)cached / 1e6);
    }
    tc_schedule_free(s);
    return st;
}

int tc_engine_kernel_count(tc_node *const *nodes, int n) {
    double t0 = tc_time_now();
    tc_schedule *s = tc_schedule_create(nodes, n);
    counters.schedule_s += tc_time_now() - t0;
    if (!s) return -1;
    int k = tc_schedule_n_kernels(s);
    tc_schedule_free(s);
    return k;
}

/* a view that reads a contiguous run of its base (maybe at an offset) */
static bool is_plain_run(const tc_node *n, int64_t *offset) {
    if (n->op != TC_OP_VIEW) {
        *offset = 0;
        return true;
    }
    const tc_st *st = n->st;
    if (st->n_views != 1 || st->views[0].has_mask) return false;
    const tc_view *v = &st->views[0];
    int64_t expect = 1;
    for (int a = v->ndim - 1; a >= 0; a--) {
        if (v->shape[a] != 1 && v->strides[a] != expect) return false;
        expect *= v->shape[a];
    }
    *offset = v->offset;
    return true;
}

tc_status tc_engine_to_host(tc_node *n, void *dst, size_t nbytes, const char *api) {
    if (nbytes == 0) return TC_OK;
    int64_t off;
    tc_node *src = tc_node_retain(n);
    if (!is_plain_run(n, &off)) {
        tc_node_release(src);
        src = tc_node_meta(TC_OP_CONTIGUOUS, n->device, 1, &n);
        if (!src) return tc_error_code();
        off = 0;
    }
    tc_node *b = tc_node_base(src);
    tc_status st = b->op == TC_OP_BUFFER ? TC_OK : tc_engine_realize(&src, 1, api);
    if (st == TC_OK)
        st = tc_buffer_copyout(b->buffer, (size_t)off * tc_dtypes[n->dtype].size, dst, nbytes);
    tc_node_release(src);
    return st;
}

tc_node *tc_engine_from_host(const void *data, tc_dtype dt, int ndim, const int64_t *shape,
                             int device) {
    int64_t numel = 1;
    for (int i = 0; i < ndim; i++) numel *= shape[i];
    size_t nbytes = (size_t)numel * tc_dtypes[dt].size;
    tc_buffer *b = tc_buffer_new(device, nbytes);
    if (!b) return NULL;
    tc_node *n = NULL;
    if (tc_buffer_copyin(b, 0, data, nbytes) == TC_OK) n = tc_node_buffer(b, dt, ndim, shape);
    tc_buffer_release(b);
    return n;
}
