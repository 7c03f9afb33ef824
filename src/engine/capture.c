/* capture.c - records the launches and copies of realizes (a JIT capture)
 * and replays them: the same programs on the same buffers, except the
 * buffers the caller swaps (a step's new inputs). Nothing is scheduled,
 * lowered, rendered, hashed or compiled on replay.
 *
 * Ownership: a capture holds a reference to every buffer it recorded, so
 * intermediates and outputs stay allocated between replays. Programs belong
 * to the runtime's cache and live until tc_shutdown; free captures first.
 * While it records, a buffer that it writes before it reads and that
 * nothing else holds any more loses its memory (graph.h's drop: the step
 * no longer needs the contents, a replay writes them again), so the
 * capture's step peaks where an eager step does; tc_capture_plan then gives
 * every intermediate, dropped or not, its block.
 */
#include "engine.h"

#include <string.h>

typedef struct {
    bool is_copy;          /* a copy (bufs[0] <- bufs[1]) instead of a kernel */
    tc_dev *dev;           /* the kernel's device */
    tc_program *prog;      /* the compiled kernel */
    int n_bufs;            /* arguments */
    int n_outs;            /* bufs[0..n_outs-1] are written (a copy: 1) */
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

/* c's buffers no longer counted as a recording's (nothing is dropped after) */
static void forget_counts(tc_capture *c) {
    for (int i = 0; i < c->n; i++)
        for (int k = 0; k < c->recs[i].n_bufs; k++) {
            c->recs[i].bufs[k]->captured = 0;
            c->recs[i].bufs[k]->droppable = false;
        }
}

void tc_capture_end(void) {
    if (active) forget_counts(active);
    active = NULL;
}

int tc_capture_kernels(const tc_capture *c) {
    int k = 0;
    for (int i = 0; i < c->n; i++) k += !c->recs[i].is_copy;
    return k;
}

/* whether b is among the inputs (bufs[n_outs..n_bufs)) */
static bool reads(tc_buffer *const *bufs, int n_bufs, int n_outs, const tc_buffer *b) {
    for (int i = n_outs; i < n_bufs; i++)
        if (bufs[i] == b) return true;
    return false;
}

static record *add(tc_capture *c, int n_bufs, int n_outs, tc_buffer *const *bufs) {
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
    r->n_outs = n_outs;
    for (int i = 0; i < n_bufs; i++) {
        tc_buffer *b = r->bufs[i] = tc_buffer_retain(bufs[i]);
        if (b->captured++ == 0) /* its first record here: written before it is read? */
            b->droppable = i < n_outs && !reads(bufs, n_bufs, n_outs, b);
    }
    c->n++;
    return r;
}

TC_MUST_USE tc_status tc_capture_record_launch(tc_dev *dev, tc_program *prog, tc_buffer *const *bufs,
                                   int n_bufs, int n_outs, const tc_launch_dims *dims,
                                   int64_t est_ops, int64_t est_mem, const char *name) {
    if (!active) return TC_OK;
    record *r = add(active, n_bufs, n_outs, bufs);
    if (!r) return TC_ERR_MEMORY;
    r->dev = dev;
    r->prog = prog;
    r->dims = *dims;
    r->est_ops = est_ops;
    r->est_mem = est_mem;
    snprintf(r->name, sizeof r->name, "%s", name);
    return TC_OK;
}

TC_MUST_USE tc_status tc_capture_record_copy(tc_buffer *dst, tc_buffer *src, size_t nbytes) {
    if (!active) return TC_OK;
    tc_buffer *bufs[2] = {dst, src};
    record *r = add(active, 2, 1, bufs);
    if (!r) return TC_ERR_MEMORY;
    r->is_copy = true;
    r->nbytes = nbytes;
    return TC_OK;
}

TC_MUST_USE tc_status tc_capture_replay(tc_capture *c, tc_buffer *const *from, tc_buffer *const *to, int n) {
    tc_buffer *stack_args[64];
    for (int i = 0; i < c->n; i++) {
        record *r = &c->recs[i];
        tc_buffer **args = r->n_bufs <= 64 ? stack_args : tc_malloc(sizeof(tc_buffer *) * (size_t)r->n_bufs);
        if (!args) return TC_ERR_MEMORY;
        bool bare = false;
        for (int k = 0; k < r->n_bufs; k++) {
            args[k] = r->bufs[k];
            for (int j = 0; j < n; j++)
                if (r->bufs[k] == from[j]) args[k] = to[j];
            bare |= !args[k]->ptr;
        }
        if (bare) { /* dropped, and tc_capture_plan found no memory for it */
            if (args != stack_args) tc_free(args);
            return tc_error_set(TC_ERR_MEMORY, "jit replay: a buffer of the captured step has no "
                                               "memory (out of memory when the capture was planned)");
        }
        tc_status st = r->is_copy ? tc_engine_copy(args[0], args[1], r->nbytes)
                                  : tc_engine_launch(r->dev, r->prog, args, r->n_bufs, r->n_outs,
                                                     &r->dims, r->est_ops, r->est_mem, r->name, i);
        if (args != stack_args) tc_free(args);
        if (st != TC_OK) return st;
    }
    return TC_OK;
}

void tc_capture_free(tc_capture *c) {
    if (!c) return;
    if (active == c) active = NULL;
    forget_counts(c); /* its releases below drop nothing */
    for (int i = 0; i < c->n; i++) {
        for (int k = 0; k < c->recs[i].n_bufs; k++) tc_buffer_release(c->recs[i].bufs[k]);
        tc_free(c->recs[i].bufs);
    }
    tc_free(c->recs);
    tc_free(c);
}

/* ---- memory planning ---------------------------------------------------------- */

/* a buffer the capture uses */
typedef struct {
    tc_buffer *buf;        /* the buffer */
    int64_t uses;          /* references the records hold */
    int first, last;       /* records of its first and last use */
    bool is_written_first; /* its first record writes it and does not read it */
    int slot;              /* shared block it moves to; -1: stays */
} use_info;

static int find_use(const use_info *u, int n, const tc_buffer *b) {
    for (int i = 0; i < n; i++)
        if (u[i].buf == b) return i;
    return -1;
}

/* the buffers the records use, each with its uses and lifetime */
static use_info *collect_uses(const tc_capture *c, int *n_out) {
    int cap = 0, n = 0;
    for (int i = 0; i < c->n; i++) cap += c->recs[i].n_bufs;
    use_info *u = tc_calloc((size_t)cap + 1, sizeof *u);
    if (!u) return NULL;
    for (int i = 0; i < c->n; i++) {
        const record *r = &c->recs[i];
        for (int k = 0; k < r->n_bufs; k++) {
            int at = find_use(u, n, r->bufs[k]);
            if (at < 0) {
                at = n++;
                u[at] = (use_info){r->bufs[k], 0, i, i, k < r->n_outs, -1};
            } else if (u[at].first == i && k >= r->n_outs) {
                u[at].is_written_first = false; /* read by the record that writes it */
            }
            u[at].uses++;
            u[at].last = i;
        }
    }
    *n_out = n;
    return u;
}

/* whether lives a and b are in use at one step (a block cannot hold both) */
static bool overlap(const tc_mem_life *a, const tc_mem_life *b) {
    return a->first <= b->last && b->first <= a->last;
}

int tc_mem_plan(tc_mem_life *lives, int n, tc_mem_block *blocks) {
    for (int i = 0; i < n; i++) lives[i].block = -1;
    int n_blocks = 0;
    for (int round = 1; round <= n; round++) {
        int x = -1; /* the biggest life left (of equal ones, the first) */
        for (int i = 0; i < n; i++)
            if (lives[i].block < 0 && (x < 0 || lives[i].nbytes > lives[x].nbytes)) x = i;
        const tc_mem_life *lx = &lives[x];
        for (int j = 0; j < n; j++) /* the blocks holding a life that overlaps it */
            if (lives[j].block >= 0 && overlap(&lives[j], lx)) blocks[lives[j].block].mark = round;
        int b = -1; /* of the others on its device, the smallest (all fit: bigger lives came first) */
        for (int k = 0; k < n_blocks; k++)
            if (blocks[k].device == lx->device && blocks[k].mark != round &&
                (b < 0 || blocks[k].nbytes < blocks[b].nbytes))
                b = k;
        if (b < 0) {
            b = n_blocks++;
            blocks[b] = (tc_mem_block){lx->device, lx->nbytes, 0};
        }
        lives[x].block = b;
    }
    return n_blocks;
}

TC_MUST_USE tc_status tc_capture_plan(tc_capture *c, int64_t *before, int64_t *after) {
    *before = *after = 0;
    int n = 0, n_lives = 0;
    use_info *u = collect_uses(c, &n);
    if (!u) return TC_ERR_MEMORY;
    tc_mem_life *lives = tc_calloc((size_t)n + 1, sizeof *lives);
    tc_mem_block *blocks = lives ? tc_calloc((size_t)n + 1, sizeof *blocks) : NULL;
    tc_buffer **bufs = blocks ? tc_calloc((size_t)n + 1, sizeof *bufs) : NULL;
    if (!bufs) {
        tc_free(u), tc_free(lives), tc_free(blocks);
        return TC_ERR_MEMORY;
    }
    /* the intermediates, in order of first use (as collect_uses lists them) */
    for (int i = 0; i < n; i++) {
        use_info *x = &u[i];
        if (x->buf->refcount != x->uses || !x->is_written_first) continue; /* held elsewhere */
        lives[n_lives++] = (tc_mem_life){x->buf->device, x->buf->nbytes, x->first, x->last, -1};
        x->slot = n_lives - 1; /* its life, until the blocks are known */
        *before += (int64_t)x->buf->nbytes;
    }
    int n_blocks = tc_mem_plan(lives, n_lives, blocks);
    for (int i = 0; i < n; i++)
        if (u[i].slot >= 0) u[i].slot = lives[u[i].slot].block;
    tc_status st = TC_OK;
    for (int i = 0; i < n_blocks && st == TC_OK; i++) {
        bufs[i] = tc_buffer_new(blocks[i].device, blocks[i].nbytes);
        if (!bufs[i]) st = tc_error_or(TC_ERR_MEMORY);
        else *after += (int64_t)blocks[i].nbytes;
    }
    if (st == TC_OK) { /* every record now uses the shared buffers */
        for (int i = 0; i < c->n; i++) {
            record *r = &c->recs[i];
            for (int k = 0; k < r->n_bufs; k++) {
                int at = find_use(u, n, r->bufs[k]);
                if (u[at].slot >= 0) r->bufs[k] = tc_buffer_retain(bufs[u[at].slot]);
            }
        }
        for (int i = 0; i < n; i++) /* the records' references to the old buffers */
            for (int64_t k = 0; u[i].slot >= 0 && k < u[i].uses; k++) tc_buffer_release(u[i].buf);
    } else { /* the buffers dropped while recording get memory of their own again */
        *before = *after = 0;
        for (int i = 0; i < n; i++)
            if (tc_buffer_restore(u[i].buf) != TC_OK) break; /* replay says so */
    }
    for (int i = 0; i < n_blocks; i++) tc_buffer_release(bufs[i]);
    tc_free(bufs), tc_free(blocks), tc_free(lives), tc_free(u);
    return st;
}
