/* engine.h - the interface of src/engine: realize (schedule -> codegen ->
 * render -> runtime for each kernel), host transfers, counters, and the
 * reference evaluator that tests use as the oracle.
 */
#ifndef TC_ENGINE_H
#define TC_ENGINE_H

#include "runtime/runtime.h"

/* realizes the bases of nodes[0..n-1]: schedules, compiles and runs the
 * kernels; on success each base is a BUFFER. `api` names the public call for
 * error messages. */
TC_MUST_USE tc_status tc_engine_realize(tc_node *const *nodes, int n, const char *api);
/* kernels tc_engine_realize would launch now (copies excluded), -1 on error */
int tc_engine_kernel_count(tc_node *const *nodes, int n);
/* realizes n if needed and copies its elements (row-major, n's dtype) to dst */
TC_MUST_USE tc_status tc_engine_to_host(tc_node *n, void *dst, size_t nbytes, const char *api);
/* n reads a contiguous run of its base's elements in order (n is a base, or
 * a view of one view without a mask and with row-major strides); *offset:
 * the run's first element */
bool tc_engine_plain_run(const tc_node *n, int64_t *offset);
/* a new realized BUFFER node holding a copy of data */
tc_node *tc_engine_from_host(const void *data, tc_dtype dt, int ndim, const int64_t *shape,
                             int device);
void tc_engine_get_counters(tc_counters *out);
void tc_engine_reset_counters(void);
void tc_engine_shutdown(void); /* frees the program cache */

/* ahead-of-time export (export.c, export_emit.c): writes <dir>/<name>.c and
 * <dir>/<name>.h computing outs[0..n_outs-1] from the realized buffers
 * ins[0..n_ins-1] (run-time arguments); every other realized buffer the
 * graph reads is embedded as data, and those it assigns to become state the
 * generated code keeps. Schedules the graph but changes nothing in it. */
TC_MUST_USE tc_status tc_engine_export_c(const char *dir, const char *name, tc_node *const *outs, int n_outs,
                             tc_node *const *ins, int n_ins, const char *api);

/* ---- launching and capture (realize.c, capture.c) ------------------------
 * Every kernel launch and copy of a realize goes through these two calls; a
 * JIT capture, while active, records them (program, buffers, sizes) so they
 * can be replayed later without scheduling, lowering or compiling again. */
/* bufs[0..n_outs-1] are written, the rest read */
TC_MUST_USE tc_status tc_engine_launch(tc_dev *dev, tc_program *prog, tc_buffer *const *bufs, int n_bufs,
                           int n_outs, const tc_launch_dims *dims, int64_t est_ops,
                           int64_t est_mem, const char *name, int index);
TC_MUST_USE tc_status tc_engine_copy(tc_buffer *dst, tc_buffer *src, size_t nbytes);

typedef struct tc_capture tc_capture; /* a recorded list of launches and copies */
tc_capture *tc_capture_begin(void);   /* starts recording (one capture at a time) */
void tc_capture_end(void);            /* stops recording (the capture stays valid) */
int tc_capture_kernels(const tc_capture *c); /* kernels recorded */
/* replays c: every recorded use of from[i] uses to[i] instead */
TC_MUST_USE tc_status tc_capture_replay(tc_capture *c, tc_buffer *const *from, tc_buffer *const *to, int n);
void tc_capture_free(tc_capture *c); /* releases every buffer it holds */
/* memory planning, once a capture is complete and its owner holds its
 * inputs and outputs: buffers only the capture holds, first written by one
 * of its steps, are intermediates; those whose lifetimes (first write to
 * last use) do not overlap get one shared buffer per group. *before and
 * *after: the intermediates' bytes without and with sharing. On failure
 * (out of memory) the capture is unchanged and still replays right. */
TC_MUST_USE tc_status tc_capture_plan(tc_capture *c, int64_t *before, int64_t *after);
/* the planner of tc_capture_plan, also used by tc_export_c for its arena:
 * buffers that live from step `first` (their first write) to step `last`
 * (their last use) get blocks to share, greedy by size: the biggest buffer
 * left takes the smallest block of its device that holds no buffer whose
 * life overlaps its own, or else a new block of its size (bigger buffers
 * came first, so every block fits; a block is as big as its first buffer).
 * A ResNet-18 training step's intermediates, 131.5 MB alive at most: 149
 * MB of blocks, where first fit in order of first use (the planner before)
 * made 207. O(n^2) in the buffers; no memory of its own. */
typedef struct {
    int device;    /* where it lives */
    size_t nbytes; /* its size */
    int first;     /* the step that first writes it */
    int last;      /* the step that last uses it */
    int block;     /* out: the block it shares */
} tc_mem_life;
typedef struct {
    int device;     /* where it lives */
    size_t nbytes;  /* its largest member's size */
    int mark;       /* the planner's scratch */
} tc_mem_block;
/* fills lives[i].block; blocks has room for n; returns the blocks used */
int tc_mem_plan(tc_mem_life *lives, int n, tc_mem_block *blocks);
/* called by tc_engine_launch/copy: record when a capture is active */
TC_MUST_USE tc_status tc_capture_record_launch(tc_dev *dev, tc_program *prog, tc_buffer *const *bufs,
                                   int n_bufs, int n_outs, const tc_launch_dims *dims,
                                   int64_t est_ops, int64_t est_mem, const char *name);
TC_MUST_USE tc_status tc_capture_record_copy(tc_buffer *dst, tc_buffer *src, size_t nbytes);

/* ---- the lowering cache (lcache.c) ------------------------------------------
 * A kernel item lowered once in this process (codegen + render for a device
 * and plan) is not lowered again: the cache keys an exact serialization of
 * the item (device, plan, TC_NOOPT, loop space, AST with its views). */
typedef struct {
    char *src;          /* the kernel source (owned by whoever holds the struct) */
    char name[96];      /* its function name */
    tc_launch_dims dims; /* what its launch needs */
    int64_t est_ops;    /* counters: as tc_kernel_uops */
    int64_t est_mem;
    double codegen_s;   /* seconds this lowering spent in codegen (0: the cache had it) */
    double render_s;    /* ... and in the renderer */
} tc_lowered;
/* out: the lowered item (out->src owned by the caller) */
TC_MUST_USE tc_status tc_lcache_lower(tc_dev *dev, const tc_sched_item *it, const tc_kopt *plan,
                          tc_lowered *out);
void tc_lcache_clear(void); /* empties it (tc_shutdown) */
int tc_lcache_size(void);   /* entries (tests) */

/* ---- the schedule cache (scache.c) -----------------------------------------
 * A realize of a graph with the same structure as one realized before (the
 * same ops, shapes, dtypes, views, devices, constants, creation order and
 * storage sharing; other nodes and buffers) runs the plan made the first
 * time: no scheduling, lowering or compiling. Keyed exactly (see scache.c). */
typedef struct tc_skey tc_skey; /* a graph in canonical form: its bases numbered, its key */
/* the canonical form of the graph under nodes[0..n-1]; *out owned by the
 * caller. It points at the graph's nodes without holding them. */
TC_MUST_USE tc_status tc_skey_make(tc_node *const *nodes, int n, tc_skey **out);
void tc_skey_free(tc_skey *k); /* NULL is fine */

typedef struct {
    tc_sched_item it;    /* the item; it.ast is the plan's copy, it.bufs NULL */
    int *slots;          /* it.n_bufs base numbers of the key: the item's buffers */
    tc_lowered low;      /* kernels: the lowered kernel (low.src owned; NULL until lowered) */
    int device;          /* the device it runs on (its first buffer's) */
    uint64_t dev_serial; /* kernels: the opening of that device low and prog are for */
    tc_program *prog;    /* kernels: the compiled program (the device's), or NULL */
} tc_plan_item;

typedef struct {
    tc_arena arena;      /* items, slots, ASTs */
    tc_ptrvec sts;       /* trackers the ASTs read (owned) */
    int n_items;         /* as the schedule's */
    tc_plan_item *items; /* n_items, in run order */
    int *drop_start;     /* n_items + 1: after item i the schedule lets go of the buffers
                            listed in drops[2*drop_start[i] .. 2*drop_start[i+1]) */
    int *drops;          /* (item, buffer index) pairs: references no later item needs */
    size_t bytes;        /* memory it holds (the cache's bound) */
} tc_plan;

/* a plan of schedule s, which the scheduler made for the graph k describes;
 * NULL with an error set */
tc_plan *tc_plan_make(const tc_schedule *s, const tc_skey *k);
/* the schedule of p over k's nodes (new references); NULL on out of memory */
tc_schedule *tc_plan_schedule(const tc_plan *p, const tc_skey *k);
void tc_plan_free(tc_plan *p); /* NULL is fine */
/* the cached plan of k's key (the cache keeps it), or NULL; a plan whose
 * devices were closed since is dropped */
tc_plan *tc_scache_find(const tc_skey *k);
/* keeps p (lowered and run) under k's key; takes p (freed when it does not
 * fit) and k's bytes */
void tc_scache_insert(tc_skey *k, tc_plan *p);
void tc_scache_clear(void); /* empties it (tc_shutdown) */
int tc_scache_size(void);   /* plans kept (tests) */
/* tests: at most `entries` plans and `bytes` of memory (0: the defaults),
 * evicting the least recently used ones now if needed */
void tc_scache_limit(int entries, size_t bytes);

/* what the engine did since start or the last counter reset, beyond
 * tc_counters (tests) */
typedef struct {
    int64_t schedules_made; /* tc_schedule_create calls */
    int64_t items_lowered;  /* kernel items lowered (codegen + render, or the lowering cache) */
    int64_t plan_hits;      /* realizes that ran a cached plan */
    int64_t plan_misses;    /* realizes that made a plan */
} tc_engine_stats;
void tc_engine_get_stats(tc_engine_stats *out);

/* TC_BEAM=n (beam.c): the CPU optimizer's plan for item on dev, searched by
 * timing with a beam of n (cached on disk); without TC_BEAM, on targets with
 * work-groups and for small kernels: opt.c's heuristic plan */
TC_MUST_USE tc_status tc_beam_plan(tc_dev *dev, const tc_sched_item *it, tc_kopt *plan);

/* The reference evaluator (ref.c): evaluates the lazy graph under n op by op
 * on the host with plain loops over views, and writes n's elements
 * (row-major, n's dtype) to out. It shares no code with the scheduler,
 * codegen or renderers, so tests use it as the oracle. Realized buffers are
 * read back from their devices. */
TC_MUST_USE tc_status tc_ref_eval(tc_node *n, void *out);

#endif /* TC_ENGINE_H */
