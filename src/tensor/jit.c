/* jit.c - tc_jit: capture a step once, replay its kernels after (tinygrad's
 * TinyJit). Call 1 runs the step normally (it compiles what it needs).
 * Call 2 runs it again while the engine records every launch and copy.
 * Later calls replay the recording with the new inputs' buffers swapped in:
 * no scheduling, lowering, hashing or compiling. A change in the inputs'
 * count, shapes, dtypes or devices is detected and the step is captured
 * again, never replayed wrongly.
 *
 * What replays is kernels and device copies, not host work: a step that
 * uploads host data or draws random numbers on the host inside must take
 * those as inputs instead. Outputs of a replay are new handles on the same
 * buffers each time (the next call overwrites them), as in tinygrad.
 * Ownership: the jit holds the capture (and through it every buffer the step
 * used); free jits before tc_shutdown. After capture, the step's
 * intermediates (buffers nothing but the capture holds) whose lifetimes do
 * not overlap share memory (tc_capture_plan).
 */
#include "tensor.h"

#include <string.h>

typedef struct {
    tc_dtype dtype;             /* element type */
    int device;                 /* device id */
    int ndim;                   /* rank */
    int64_t shape[TC_MAX_DIMS]; /* shape */
} sig;

struct tc_jit {
    tc_jit_fn fn;          /* the step */
    void *user;            /* its context */
    int calls;             /* runs so far (0: warm up next, 1: capture next) */
    tc_capture *capture;   /* the recording (after the capture call) */
    int n_in;              /* inputs at capture */
    sig *in_sig;           /* their signatures */
    tc_buffer **in_bufs;   /* their buffers at capture (owned references) */
    int n_out;             /* outputs at capture */
    sig *out_sig;          /* their signatures */
    tc_buffer **out_bufs;  /* their buffers (owned references) */
};

static void sig_of(const tc_node *n, sig *s) {
    s->dtype = n->dtype;
    s->device = n->device;
    s->ndim = n->ndim;
    memcpy(s->shape, n->shape, sizeof(int64_t) * (size_t)n->ndim);
}

static bool sig_same(const sig *a, const sig *b) {
    return a->dtype == b->dtype && a->device == b->device && a->ndim == b->ndim &&
           memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->ndim) == 0;
}

static void drop_capture(tc_jit *j) {
    tc_capture_free(j->capture);
    for (int i = 0; i < j->n_in; i++) tc_buffer_release(j->in_bufs[i]);
    for (int i = 0; i < j->n_out; i++) tc_buffer_release(j->out_bufs[i]);
    tc_free(j->in_sig), tc_free(j->in_bufs), tc_free(j->out_sig), tc_free(j->out_bufs);
    j->capture = NULL;
    j->in_sig = j->out_sig = NULL;
    j->in_bufs = j->out_bufs = NULL;
    j->n_in = j->n_out = 0;
}

TC_API tc_jit *tc_jit_new(tc_jit_fn fn, void *user) {
    TC_API_ENTER();
    if (!fn) {
        tc_error_set(TC_ERR_INVALID, "tc_jit_new: the step function is NULL");
        return NULL;
    }
    tc_jit *j = tc_calloc(1, sizeof *j);
    if (j) {
        j->fn = fn;
        j->user = user;
    }
    return j;
}

TC_API void tc_jit_free(tc_jit *j) {
    TC_API_ENTER();
    if (!j) return;
    tc_lock();
    drop_capture(j);
    tc_free(j);
    tc_unlock();
}

TC_API int tc_jit_kernel_count(const tc_jit *j) {
    TC_API_ENTER();
    if (!j) {
        tc_error_set(TC_ERR_INVALID, "tc_jit_kernel_count: jit is NULL");
        return -1;
    }
    return j->capture ? tc_capture_kernels(j->capture) : 0;
}

/* the buffer holding n's elements in order, or NULL (lazy, or a strided view) */
static tc_buffer *whole_buffer(const tc_node *n) {
    const tc_node *base = n->op == TC_OP_VIEW ? n->srcs[0] : n;
    if (base->op != TC_OP_BUFFER) return NULL;
    bool whole = n == base || (tc_st_is_contiguous(n->st) && tc_node_numel(n) == tc_node_numel(base));
    return whole ? base->buffer : NULL;
}

/* inputs must be realized buffers seen whole: realize (and copy) them first */
TC_MUST_USE static tc_status prepare_inputs(tc_tensor *const *in, int n, tc_tensor **plain) {
    for (int i = 0; i < n; i++) plain[i] = NULL;
    for (int i = 0; i < n; i++) {
        if (!in[i]) return tc_error_set(TC_ERR_INVALID, "tc_jit_run: input %d is NULL", i);
        plain[i] = tc_retain(in[i]);
        tc_status st = tc_realize(&plain[i], 1);
        if (st != TC_OK) return st;
        if (!whole_buffer(tc_tensor_node(plain[i]))) {
            tc_tensor *c = tc_contiguous(plain[i]); /* a view of a realized copy */
            tc_release(plain[i]);
            plain[i] = c;
            if (!c || (st = tc_realize(&plain[i], 1)) != TC_OK) return c ? st : tc_error_code();
        }
    }
    return TC_OK;
}

/* outputs must be realized buffers too: the capture records whatever it takes */
TC_MUST_USE static tc_status realize_outputs(tc_tensor **out, int n) {
    for (int i = 0; i < n; i++) {
        if (!out[i]) return tc_error_set(TC_ERR_INVALID, "tc_jit_run: the step left output %d NULL", i);
        tc_status st = tc_realize(&out[i], 1);
        if (st != TC_OK) return st;
        if (!whole_buffer(tc_tensor_node(out[i]))) {
            tc_tensor *c = tc_contiguous(out[i]);
            if (!c) return tc_error_code();
            tc_release(out[i]);
            out[i] = c;
            if ((st = tc_realize(&out[i], 1)) != TC_OK) return st;
        }
    }
    return TC_OK;
}

TC_MUST_USE static tc_status run_step(tc_jit *j, tc_tensor *const *in, int n_in, tc_tensor **out, int n_out) {
    for (int i = 0; i < n_out; i++) out[i] = NULL;
    tc_status st = j->fn(j->user, in, n_in, out, n_out);
    if (st == TC_OK) st = realize_outputs(out, n_out);
    return st;
}

TC_MUST_USE static tc_status capture(tc_jit *j, tc_tensor *const *in, int n_in, tc_tensor **out, int n_out) {
    drop_capture(j);
    j->capture = tc_capture_begin();
    if (!j->capture) return tc_error_code();
    tc_status st = run_step(j, in, n_in, out, n_out);
    tc_capture_end();
    j->in_sig = tc_calloc((size_t)n_in + 1, sizeof(sig));
    j->in_bufs = tc_calloc((size_t)n_in + 1, sizeof(tc_buffer *));
    j->out_sig = tc_calloc((size_t)n_out + 1, sizeof(sig));
    j->out_bufs = tc_calloc((size_t)n_out + 1, sizeof(tc_buffer *));
    if (st == TC_OK && (!j->in_sig || !j->in_bufs || !j->out_sig || !j->out_bufs)) st = TC_ERR_MEMORY;
    if (st != TC_OK) {
        drop_capture(j);
        return st;
    }
    j->n_in = n_in;
    j->n_out = n_out;
    for (int i = 0; i < n_in; i++) {
        sig_of(tc_tensor_node(in[i]), &j->in_sig[i]);
        j->in_bufs[i] = tc_buffer_retain(whole_buffer(tc_tensor_node(in[i])));
    }
    for (int i = 0; i < n_out; i++) {
        sig_of(tc_tensor_node(out[i]), &j->out_sig[i]);
        j->out_bufs[i] = tc_buffer_retain(whole_buffer(tc_tensor_node(out[i])));
    }
    /* intermediates whose lifetimes do not overlap share memory from now on
     * (the inputs and outputs are held above, so they stay apart) */
    int64_t before = 0, after = 0;
    tc_error_state es;
    tc_error_save(&es);
    if (tc_capture_plan(j->capture, &before, &after) != TC_OK) tc_error_restore(&es); /* replays anyway */
    if (tc_flag_get(TC_FLAG_DEBUG) >= 1)
        fprintf(stderr, "jit: captured %d kernels; intermediates %.3f MB -> %.3f MB shared\n",
                tc_capture_kernels(j->capture), (double)before / 1e6, (double)after / 1e6);
    return TC_OK;
}

static bool matches(const tc_jit *j, tc_tensor *const *in, int n_in, int n_out) {
    if (!j->capture || n_in != j->n_in || n_out != j->n_out) return false;
    for (int i = 0; i < n_in; i++) {
        sig s;
        sig_of(tc_tensor_node(in[i]), &s);
        if (!sig_same(&s, &j->in_sig[i])) return false;
    }
    return true;
}

TC_MUST_USE static tc_status replay(tc_jit *j, tc_tensor *const *in, tc_tensor **out) {
    tc_buffer *stack_to[16], **to = j->n_in <= 16 ? stack_to : tc_malloc(sizeof(tc_buffer *) * (size_t)j->n_in);
    if (!to) return TC_ERR_MEMORY;
    for (int i = 0; i < j->n_in; i++) to[i] = whole_buffer(tc_tensor_node(in[i]));
    tc_status st = tc_capture_replay(j->capture, j->in_bufs, to, j->n_in);
    if (to != stack_to) tc_free(to);
    for (int i = 0; i < j->n_out && st == TC_OK; i++) {
        const sig *s = &j->out_sig[i];
        out[i] = tc_tensor_wrap(tc_node_buffer(j->out_bufs[i], s->dtype, s->ndim, s->shape));
        if (!out[i]) st = tc_error_code();
    }
    return st;
}

TC_API tc_status tc_jit_run(tc_jit *j, tc_tensor *const *inputs, int n_inputs, tc_tensor **outputs,
                            int n_outputs) {
    TC_API_ENTER();
    if (!j || n_inputs < 0 || n_outputs < 0 || (n_inputs && !inputs) || (n_outputs && !outputs))
        return tc_error_set(TC_ERR_INVALID, "tc_jit_run: NULL jit or bad input/output arrays");
    tc_lock();
    for (int i = 0; i < n_outputs; i++) outputs[i] = NULL;
    tc_tensor *stack_in[16], **in = n_inputs <= 16 ? stack_in : tc_malloc(sizeof(tc_tensor *) * (size_t)n_inputs);
    tc_status st = in ? prepare_inputs(inputs, n_inputs, in) : TC_ERR_MEMORY;
    if (st == TC_OK) {
        if (j->calls >= 2 && matches(j, in, n_inputs, n_outputs)) st = replay(j, in, outputs);
        else if (j->calls >= 1) st = capture(j, in, n_inputs, outputs, n_outputs);
        else st = run_step(j, in, n_inputs, outputs, n_outputs);
        if (st == TC_OK) j->calls = j->calls >= 2 ? j->calls : j->calls + 1;
    }
    if (st != TC_OK)
        for (int i = 0; i < n_outputs; i++) tc_release(outputs[i]), outputs[i] = NULL;
    for (int i = 0; in && i < n_inputs; i++) tc_release(in[i]);
    if (in != stack_in) tc_free(in);
    tc_unlock();
    return st;
}
