/* realize.c - runs schedules: the graph's key finds the plan cached for a
 * graph of the same structure (scache.c), or the scheduler makes a schedule
 * of which a plan is made and each kernel lowered (codegen -> render; the
 * device compiles, cached by source on disk and in memory). Then for each
 * item: allocate its outputs, launch it with the plan's program, and turn
 * its output nodes into BUFFER nodes. Also host transfers, counters and
 * TC_DEBUG output.
 */
#include "engine.h"

#include "render/render.h"
#include "schedule/schedule.h"

#include <stdlib.h>
#include <string.h>

static tc_counters counters; /* since start or the last reset */
static tc_engine_stats stats; /* the same */
static double graph_walk_s;   /* the current realize's node count walk (not scheduling) */

void tc_engine_get_counters(tc_counters *out) {
    *out = counters;
    tc_runtime_mem(&out->mem_used, &out->mem_peak, &out->mem_cached);
}

void tc_engine_get_stats(tc_engine_stats *out) {
    *out = stats;
}

void tc_engine_reset_counters(void) {
    memset(&counters, 0, sizeof counters);
    memset(&stats, 0, sizeof stats);
    tc_runtime_mem_reset_peak();
}

/* programs built from source so far, by every device that counts them */
static int64_t builds(void) {
    return tc_cpu_build_count() + tc_opencl_build_count();
}

void tc_engine_shutdown(void) {
    tc_engine_reset_counters();
    tc_scache_clear(); /* before the devices close: plans hold their programs */
    tc_lcache_clear();
}

static size_t node_bytes(const tc_node *n) {
    return (size_t)tc_node_numel(n) * tc_dtypes[n->dtype].size;
}

TC_MUST_USE tc_status tc_engine_launch(tc_dev *dev, tc_program *prog, tc_buffer *const *bufs, int n_bufs,
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

TC_MUST_USE tc_status tc_engine_copy(tc_buffer *dst, tc_buffer *src, size_t nbytes) {
    tc_status st = tc_buffer_copy(dst, src, nbytes);
    return st == TC_OK ? tc_capture_record_copy(dst, src, nbytes) : st;
}

/* codegen + render of a kernel item for the device of its output (or the
 * lowering cache's copy of the same) into pi->low */
TC_MUST_USE static tc_status lower_item(const tc_sched_item *it, tc_plan_item *pi) {
    int64_t debug = tc_flag_get(TC_FLAG_DEBUG);
    tc_dev *dev = tc_device_get(it->bufs[0]->device);
    if (!dev) return tc_error_code();
    if (debug >= 3) tc_ast_dump(stderr, it->ast);
    tc_kopt plan; /* TC_BEAM's search (compiles and runs candidates) is not lowering time */
    if (tc_beam_plan(dev, it, &plan) != TC_OK) return tc_error_code();
    double t0 = tc_time_now();
    tc_status st = tc_lcache_lower(dev, it, &plan, &pi->low);
    counters.lower_s += tc_time_now() - t0;
    stats.items_lowered++;
    if (st != TC_OK) return st;
    pi->dev_serial = dev->serial;
    counters.codegen_s += pi->low.codegen_s;
    counters.render_s += pi->low.render_s;
    if (debug >= 3 && !dev->target.has_local) { /* the CPU optimizer's plan (opt.c's text) */
        char text[96];
        if (tc_opt_format(&plan, text, sizeof text) >= 0) fprintf(stderr, "plan %s %s\n", pi->low.name, text);
    }
    if (debug >= 4) fprintf(stderr, "%s", pi->low.src);
    return TC_OK;
}

/* lowers every kernel of s into its plan's item, then has each device that
 * can build the new ones ahead, all at once (compile then finds them cached) */
TC_MUST_USE static tc_status lower_all(const tc_schedule *s, tc_plan *p) {
    tc_status st = TC_OK;
    for (int i = 0; i < s->n_items && st == TC_OK; i++)
        if (!s->items[i].is_copy) st = lower_item(&s->items[i], &p->items[i]);
    const char **srcs = st == TC_OK ? tc_malloc(sizeof(char *) * (size_t)(s->n_items + 1)) : NULL;
    const char **names = srcs ? tc_malloc(sizeof(char *) * (size_t)(s->n_items + 1)) : NULL;
    if (st == TC_OK && !names) st = TC_ERR_MEMORY;
    for (int i = 0; i < s->n_items && st == TC_OK; i++) {
        if (!p->items[i].low.src) continue;
        int device = p->items[i].device, m = 0;
        bool is_done = false; /* an earlier item on this device handled it */
        for (int j = 0; j < i && !is_done; j++)
            is_done = p->items[j].low.src && p->items[j].device == device;
        tc_dev *dev = tc_device_get(device);
        if (is_done || !dev || !dev->prebuild) continue;
        for (int j = i; j < s->n_items; j++) {
            if (!p->items[j].low.src || p->items[j].device != device) continue;
            srcs[m] = p->items[j].low.src;
            names[m++] = p->items[j].low.name;
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

/* launch of one lowered kernel item on bufs, with the plan's program (or
 * compiled now: found in a cache when lower_all built it, and kept) */
TC_MUST_USE static tc_status run_kernel(const tc_sched_item *it, tc_plan_item *pi, tc_buffer **bufs,
                            int index) {
    tc_dev *dev = tc_device_get(bufs[0]->device);
    if (!dev) return tc_error_code();
    const tc_lowered *l = &pi->low;
    if (!pi->prog || pi->dev_serial != dev->serial) {
        double t0 = tc_time_now();
        int64_t built = builds();
        pi->prog = dev->compile(dev, l->src, l->name);
        counters.compile_s += tc_time_now() - t0;
        counters.compile_count += builds() - built;
        if (!pi->prog) return tc_error_code();
    }
    tc_status st = tc_engine_launch(dev, pi->prog, bufs, it->n_bufs, it->n_outs, &l->dims,
                                    l->est_ops, l->est_mem, l->name, index);
    if (st == TC_OK && tc_cuda_check_enabled()) st = tc_cuda_check_item(it); /* TC_CUDA_CHECK=1 */
    return st;
}

/* allocates (or, for ASSIGN, borrows the target's) output buffers of item */
TC_MUST_USE static tc_status out_buffer(const tc_sched_item *it, int k, tc_buffer **out) {
    tc_node *o = it->bufs[k];
    if (o->op == TC_OP_ASSIGN) {
        *out = tc_buffer_retain(tc_node_base(o->srcs[1])->buffer);
        return TC_OK;
    }
    *out = tc_buffer_new(o->device, node_bytes(o));
    return *out ? TC_OK : tc_error_code();
}

TC_MUST_USE static tc_status run_item(const tc_sched_item *it, tc_plan_item *pi, int index) {
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
        else st = run_kernel(it, pi, bufs, index);
    }
    for (int k = 0; k < made; k++) {
        if (st == TC_OK) tc_node_set_realized(it->bufs[k], bufs[k]);
        tc_buffer_release(bufs[k]);
    }
    if (bufs != stack_bufs) tc_free(bufs);
    return st;
}

/* after item i: the references of s (p's schedule) no later item needs
 * (scache.c's plan_drops) */
static void release_done(tc_schedule *s, const tc_plan *p, int i) {
    for (int d = p->drop_start[i]; d < p->drop_start[i + 1]; d++) {
        tc_node **slot = &s->items[p->drops[2 * d]].bufs[p->drops[2 * d + 1]];
        tc_node_release(*slot);
        *slot = NULL;
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

/* the schedule of nodes[0..n-1], with the graph's nodes counted (a walk
 * timed apart: graph_walk_s, taken out of schedule_s by the caller) */
static tc_schedule *schedule_counted(tc_node *const *nodes, int n) {
    double t0 = tc_time_now();
    int64_t walked = tc_graph_count(nodes, n);
    graph_walk_s += tc_time_now() - t0;
    if (walked < 0) return NULL;
    counters.graph_nodes += walked;
    return tc_schedule_create(nodes, n);
}

/* TC_SCHEDULE_LOG (the scheduler's process replay, tools/schedule_replay.sh)
 * wants every schedule a realize makes, so no plan comes from the cache */
static bool replaying(void) {
    const char *log = getenv("TC_SCHEDULE_LOG");
    return log && *log;
}

/* the plan realizing the graph k describes: the cache's, or (*is_new) one
 * made from a new schedule of nodes. TC_DEBUG>=3 shows every stage (ASTs,
 * sources, UOps), so it always schedules and lowers. */
TC_MUST_USE static tc_status find_plan(const tc_skey *k, tc_node *const *nodes, int n, tc_plan **out,
                           bool *is_new) {
    *out = tc_flag_get(TC_FLAG_DEBUG) >= 3 || replaying() ? NULL : tc_scache_find(k);
    *is_new = !*out;
    if (*out) {
        stats.plan_hits++;
        return TC_OK;
    }
    stats.plan_misses++;
    stats.schedules_made++;
    tc_schedule *s = schedule_counted(nodes, n);
    if (!s) return tc_error_or(TC_ERR_MEMORY);
    *out = tc_plan_make(s, k);
    tc_schedule_free(s); /* the caller's nodes hold the graph */
    return *out ? TC_OK : tc_error_or(TC_ERR_MEMORY);
}

/* TC_DEBUG>=1: one line per realize */
static void print_summary(const tc_schedule *s, const tc_counters *c0, double t0, bool is_new) {
    int64_t used, peak, cached;
    tc_runtime_mem(&used, &peak, &cached);
    fprintf(stderr,
            "realize: %d kernels, %d items%s, %lld nodes in %.3f ms (schedule %.3f, lower %.3f "
            "[codegen %.3f, render %.3f], compile %.3f for %lld built, launch %.3f ms; memory "
            "%.1f MB, peak %.1f MB, cached %.1f MB)\n",
            tc_schedule_n_kernels(s), s->n_items, is_new ? "" : " (cached plan)",
            (long long)(counters.graph_nodes - c0->graph_nodes), (tc_time_now() - t0) * 1e3,
            (counters.schedule_s - c0->schedule_s) * 1e3, (counters.lower_s - c0->lower_s) * 1e3,
            (counters.codegen_s - c0->codegen_s) * 1e3, (counters.render_s - c0->render_s) * 1e3,
            (counters.compile_s - c0->compile_s) * 1e3,
            (long long)(counters.compile_count - c0->compile_count),
            (counters.launch_s - c0->launch_s) * 1e3, (double)used / 1e6, (double)peak / 1e6,
            (double)cached / 1e6);
}

/* Realize: the graph's key (scache.c) finds the plan of a graph of the same
 * structure, or the scheduler makes one, which is lowered here; the plan's
 * items then run on this graph's nodes, and a new plan is kept. */
TC_MUST_USE tc_status tc_engine_realize(tc_node *const *nodes, int n, const char *api) {
    (void)api;
    tc_counters c0 = counters;
    double t0 = tc_time_now();
    tc_skey *k = NULL;
    tc_plan *p = NULL;
    bool is_new = false;
    tc_status st = tc_skey_make(nodes, n, &k);
    if (st == TC_OK) st = find_plan(k, nodes, n, &p, &is_new);
    tc_schedule *s = st == TC_OK ? tc_plan_schedule(p, k) : NULL;
    if (st == TC_OK && !s) st = TC_ERR_MEMORY;
    /* keying and planning are scheduling; counting the graph's nodes is not */
    counters.schedule_s += tc_time_now() - t0 - graph_walk_s;
    graph_walk_s = 0;
    if (s) save_schedule(s);
    if (s && is_new) st = lower_all(s, p);
    for (int i = 0; s && i < s->n_items && st == TC_OK; i++) {
        st = run_item(&s->items[i], &p->items[i], i);
        if (st == TC_OK) release_done(s, p, i);
    }
    if (st == TC_OK && tc_flag_get(TC_FLAG_DEBUG) >= 1 && s->n_items)
        print_summary(s, &c0, t0, is_new);
    tc_schedule_free(s);
    if (is_new && st == TC_OK && p->n_items) tc_scache_insert(k, p); /* nothing to run: no plan */
    else if (is_new) tc_plan_free(p); /* a failed run keeps no plan */
    tc_skey_free(k);
    return st;
}

int tc_engine_kernel_count(tc_node *const *nodes, int n) {
    double t0 = tc_time_now();
    stats.schedules_made++;
    tc_schedule *s = schedule_counted(nodes, n);
    counters.schedule_s += tc_time_now() - t0 - graph_walk_s;
    graph_walk_s = 0;
    if (!s) return -1;
    int k = tc_schedule_n_kernels(s);
    tc_schedule_free(s);
    return k;
}

bool tc_engine_plain_run(const tc_node *n, int64_t *offset) {
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

TC_MUST_USE tc_status tc_engine_to_host(tc_node *n, void *dst, size_t nbytes, const char *api) {
    if (nbytes == 0) return TC_OK;
    int64_t off;
    tc_node *src = tc_node_retain(n);
    if (!tc_engine_plain_run(n, &off)) {
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
