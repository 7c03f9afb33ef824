/* null.c - the NULL device (TC_DEVICE=NULL, tinygrad's NULL=1): everything
 * up to the kernel's source, nothing after it.
 *
 * Kernels on it are scheduled, lowered and rendered exactly as on the CPU
 * (the C dialect and the CPU's target, SIMD width included, so lowering
 * costs what it costs there), but no compiler runs, nothing is loaded and
 * nothing executes. It measures and tests the front end, the scheduler and
 * codegen on graphs too big or too slow to run.
 * Memory: alloc hands out distinct fake addresses with no memory behind them
 * (a buffer of any size reserves no host memory); copyin discards its bytes;
 * copyout writes zeros, so every value read back from the device is 0.
 * compile: returns the device's one program, whatever the source (nothing
 * is built, so there is nothing to tell programs apart by).
 * launch: checks its arguments and returns; the engine counts it as a
 * launch (kernel_count, global_ops, global_mem) like any other.
 * Every entry is O(1) but copyout, which is O(bytes). Callers hold the API
 * lock.
 */
#include "runtime/runtime.h"

#include <stdint.h>
#include <string.h>

#define FAKE_ALIGN 64 /* spacing of the fake addresses, as the CPU aligns its buffers */

struct tc_program {
    int unused; /* nothing is compiled: the program carries no code */
};

typedef struct {
    uintptr_t next;     /* the next fake address alloc hands out */
    tc_program program; /* what every compile returns */
} null_ctx;

/* a fake address nbytes wide (rounded up), never NULL and never reused
 * while the process lives, so buffers stay distinct for the cache and the
 * JIT's memory planner */
static void *null_alloc(tc_dev *d, size_t nbytes) {
    null_ctx *c = d->ctx;
    size_t step = nbytes / FAKE_ALIGN * FAKE_ALIGN + FAKE_ALIGN; /* > nbytes, and never 0 */
    if (nbytes > UINTPTR_MAX - FAKE_ALIGN || c->next > UINTPTR_MAX - step) {
        tc_error_set(TC_ERR_MEMORY, "NULL: cannot hand out %zu more bytes of addresses", nbytes);
        return NULL;
    }
    void *p = (void *)c->next;
    c->next += step;
    return p;
}

static void null_free(tc_dev *d, void *ptr) {
    (void)d, (void)ptr; /* nothing was reserved */
}

TC_MUST_USE static tc_status null_copyin(tc_dev *d, void *dst, size_t offset, const void *src, size_t nbytes) {
    (void)d, (void)dst, (void)offset, (void)src, (void)nbytes; /* the bytes go nowhere */
    return TC_OK;
}

TC_MUST_USE static tc_status null_copyout(tc_dev *d, void *dst, const void *src, size_t offset, size_t nbytes) {
    (void)d, (void)src, (void)offset;
    if (nbytes) memset(dst, 0, nbytes);
    return TC_OK;
}

static tc_program *null_compile(tc_dev *d, const char *src, const char *fn_name) {
    null_ctx *c = d->ctx;
    if (!src || !fn_name) {
        tc_error_set(TC_ERR_INVALID, "NULL compile: %s is NULL", src ? "fn_name" : "src");
        return NULL;
    }
    return &c->program;
}

TC_MUST_USE static tc_status null_launch(tc_dev *d, tc_program *p, void **bufs, int n_bufs,
                             const tc_launch_dims *dims) {
    null_ctx *c = d->ctx;
    (void)dims;
    if (p != &c->program)
        return tc_error_set(TC_ERR_INVALID, "NULL launch: program %p is not the NULL device's",
                            (void *)p);
    if (n_bufs < 0 || (n_bufs > 0 && !bufs))
        return tc_error_set(TC_ERR_INVALID, "NULL launch: bad arguments (%d buffers at %p)", n_bufs,
                            (void *)bufs);
    return TC_OK;
}

TC_MUST_USE static tc_status null_synchronize(tc_dev *d) {
    (void)d;
    return TC_OK;
}

static void null_close(tc_dev *d) {
    tc_free(d->ctx);
    tc_free(d);
}

tc_dev *tc_null_device_create(int id) {
    tc_dev *d = tc_calloc(1, sizeof *d);
    null_ctx *ctx = d ? tc_calloc(1, sizeof *ctx) : NULL;
    if (!ctx) {
        tc_free(d);
        return NULL;
    }
    ctx->next = FAKE_ALIGN; /* not 0: a buffer's pointer is never NULL */
    snprintf(d->name, sizeof d->name, "NULL");
    d->id = id;
    d->ctx = ctx;
    d->is_null = true;
    d->dialect = &tc_dialect_c;
    if (tc_cpu_target(&d->target, NULL, 0) != TC_OK) {
        tc_free(ctx);
        tc_free(d);
        return NULL;
    }
    d->alloc = null_alloc;
    d->free = null_free;
    d->copyin = null_copyin;
    d->copyout = null_copyout;
    d->compile = null_compile;
    d->prebuild = NULL; /* nothing to build ahead */
    d->launch = null_launch;
    d->synchronize = null_synchronize;
    d->close = null_close;
    return d;
}
