/* capture.c - records the launches and copies of realizes (a JIT capture)
 * and replays them: the same programs on the same buffers, except the
 * buffers the caller swaps (a step's new inputs). Nothing is scheduled,
 * lowered, rendered, hashed or compiled on replay.
 *
 * Ownership: a capture holds a reference to every buffer it recorded, so
 * intermediates and outputs stay allocated between replays. Programs belong
 * to the runtime's cache and live until tc_shutdown; free captures first.
 */
#include "engine.h"

#include <string.h>

typedef struct {
    bool is_copy;          /* a copy (bufs[0] <- bufs[1]) instead of a kernel */
    tc_dev *dev;           /* the kernel's device */
    tc_program *prog;      /* the compiled kernel */
    int n_bufs;            /* arguments */
    tc_buffer **bufs;      /* arguments, owned references */
    tc_launch_dims dims;   /* launch sizes */
    int64_t est_ops;       /* counters: ops per launch */
    int64_t est_mem;       /* counters: bytes per launch */
    size_t nbytes;         /* copies: bytes */
    char name[96];         /* kernel name, for TC_DEBUG */
} record;

struct tc_capture {
    record *recs; /* recorded steps, in order */
    int n;        /* used */
    int cap;      /* allocated */
};

static tc_capture *active; /* the capture recording now, if any */

tc_capture *tc_capture_begin(void) {
    tc_capture *c = tc_calloc(1, sizeof *c);
    if (c) active = c;
    return c;
}

void tc_capture_end(void) {
    active = NULL;
}

int tc_capture_kernels(const tc_capture *c) {
    int k = 0;
    for (int i = 0; i < c->n; i++) k += !c->recs[i].is_copy;
    return k;
}

static record *add(tc_capture *c, int n_bufs, tc_buffer *const *bufs) {
    if (c->n == c->cap) {
        int cap = c->cap ? c->cap * 2 : 32;
        record *r = tc_realloc(c->recs, sizeof *r * (size_t)cap);
        if (!r) return NULL;
        c->recs = r;
        c->cap = cap;
    }
    record *r = &c->recs[c->n];
    memset(r, 0, sizeof *r);
    r->bufs = tc_malloc(sizeof(tc_buffer *) * (size_t)(n_bufs ? n_bufs : 1));
    if (!r->bufs) return NULL;
    r->n_bufs = n_bufs;
    for (int i = 0; i < n_bufs; i++) r->bufs[i] = tc_buffer_retain(bufs[i]);
    c->n++;
    return r;
}

tc_status tc_capture_record_launch(tc_dev *dev, tc_program *prog, tc_buffer *const *bufs,
                                   int n_bufs, const tc_launch_dims *dims, int64_t est_ops,
                                   int64_t est_mem, const char *name) {
    if (!active) return TC_OK;
    record *r = add(active, n_bufs, bufs);
    if (!r) return TC_ERR_MEMORY;
    r->dev = dev;
    r->prog = prog;
    r->dims = *dims;
    r->est_ops = est_ops;
    r->est_mem = est_mem;
    snprintf(r->name, sizeof r->name, "%s", name);
    return TC_OK;
}

tc_status tc_capture_record_copy(tc_buffer *dst, tc_buffer *src, size_t nbytes) {
    if (!active) return TC_OK;
    tc_buffer *bufs[2] = {dst, src};
    record *r = add(active, 2, bufs);
    if (!r) return TC_ERR_MEMORY;
    r->is_copy = true;
    r->nbytes = nbytes;
    return TC_OK;
}

tc_status tc_capture_replay(tc_capture *c, tc_buffer *const *from, tc_buffer *const *to, int n) {
    tc_buffer *stack_args[64];
    for (int i = 0; i < c->n; i++) {
        record *r = &c->recs[i];
        tc_buffer **args = r->n_bufs <= 64 ? stack_args : tc_malloc(sizeof(tc_buffer *) * (size_t)r->n_bufs);
        if (!args) return TC_ERR_MEMORY;
        for (int k = 0; k < r->n_bufs; k++) {
            args[k] = r->bufs[k];
            for (int j = 0; j < n; j++)
                if (r->bufs[k] == from[j]) args[k] = to[j];
        }
        tc_status st = r->is_copy ? tc_engine_copy(args[0], args[1], r->nbytes)
                                  : tc_engine_launch(r->dev, r->prog, args, r->n_bufs, &r->dims,
                                                     r->est_ops, r->est_mem, r->name, i);
        if (args != stack_args) tc_free(args);
        if (st != TC_OK) return st;
    }
    return TC_OK;
}

void tc_capture_free(tc_capture *c) {
    if (!c) return;
    if (active == c) active = NULL;
    for (int i = 0; i < c->n; i++) {
        for (int k = 0; k < c->recs[i].n_bufs; k++) tc_buffer_release(c->recs[i].bufs[k]);
        tc_free(c->recs[i].bufs);
    }
    tc_free(c->recs);
    tc_free(c);
}
