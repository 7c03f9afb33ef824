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
tc_status tc_engine_realize(tc_node *const *nodes, int n, const char *api);
/* kernels tc_engine_realize would launch now (copies excluded), -1 on error */
int tc_engine_kernel_count(tc_node *const *nodes, int n);
/* realizes n if needed and copies its elements (row-major, n's dtype) to dst */
tc_status tc_engine_to_host(tc_node *n, void *dst, size_t nbytes, const char *api);
/* a new realized BUFFER node holding a copy of data */
tc_node *tc_engine_from_host(const void *data, tc_dtype dt, int ndim, const int64_t *shape,
                             int device);
void tc_engine_get_counters(tc_counters *out);
void tc_engine_reset_counters(void);
void tc_engine_shutdown(void); /* frees the program cache */

/* ---- launching and capture (realize.c, capture.c) ------------------------
 * Every kernel launch and copy of a realize goes through these two calls; a
 * JIT capture, while active, records them (program, buffers, sizes) so they
 * can be replayed later without scheduling, lowering or compiling again. */
/* bufs[0..n_outs-1] are written, the rest read */
tc_status tc_engine_launch(tc_dev *dev, tc_program *prog, tc_buffer *const *bufs, int n_bufs,
                           int n_outs, const tc_launch_dims *dims, int64_t est_ops,
                           int64_t est_mem, const char *name, int index);
tc_status tc_engine_copy(tc_buffer *dst, tc_buffer *src, size_t nbytes);

typedef struct tc_capture tc_capture; /* a recorded list of launches and copies */
tc_capture *tc_capture_begin(void);   /* starts recording (one capture at a time) */
void tc_capture_end(void);            /* stops recording (the capture stays valid) */
int tc_capture_kernels(const tc_capture *c); /* kernels recorded */
/* replays c: every recorded use of from[i] uses to[i] instead */
tc_status tc_capture_replay(tc_capture *c, tc_buffer *const *from, tc_buffer *const *to, int n);
void tc_capture_free(tc_capture *c); /* releases every buffer it holds */
/* memory planning, once a capture is complete and its owner holds its
 * inputs and outputs: buffers only the capture holds, first written by one
 * of its steps, are intermediates; those whose lifetimes (first write to
 * last use) do not overlap get one shared buffer per group. *before and
 * *after: the intermediates' bytes without and with sharing. On failure
 * (out of memory) the capture is unchanged and still replays right. */
tc_status tc_capture_plan(tc_capture *c, int64_t *before, int64_t *after);
/* called by tc_engine_launch/copy: record when a capture is active */
tc_status tc_capture_record_launch(tc_dev *dev, tc_program *prog, tc_buffer *const *bufs,
                                   int n_bufs, int n_outs, const tc_launch_dims *dims,
                                   int64_t est_ops, int64_t est_mem, const char *name);
tc_status tc_capture_record_copy(tc_buffer *dst, tc_buffer *src, size_t nbytes);

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
tc_status tc_lcache_lower(tc_dev *dev, const tc_sched_item *it, const tc_kopt *plan,
                          tc_lowered *out);
void tc_lcache_clear(void); /* empties it (tc_shutdown) */
int tc_lcache_size(void);   /* entries (tests) */

/* TC_BEAM=n (beam.c): the CPU optimizer's plan for item on dev, searched by
 * timing with a beam of n (cached on disk); without TC_BEAM, on targets with
 * work-groups and for small kernels: opt.c's heuristic plan */
tc_status tc_beam_plan(tc_dev *dev, const tc_sched_item *it, tc_kopt *plan);

/* The reference evaluator (ref.c): evaluates the lazy graph under n op by op
 * on the host with plain loops over views, and writes n's elements
 * (row-major, n's dtype) to out. It shares no code with the scheduler,
 * codegen or renderers, so tests use it as the oracle. Realized buffers are
 * read back from their devices. */
tc_status tc_ref_eval(tc_node *n, void *out);

#endif /* TC_ENGINE_H */
