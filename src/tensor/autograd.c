/* autograd.c - reverse-mode differentiation at the level of the public
 * tensor ops: contexts (recorded by every differentiable op), their release,
 * the public calls (requires_grad, backward, grad, zero_grad, detach, grad
 * mode) and the backward pass.
 *
 * Ownership: a result tensor owns its context; the context owns handles on
 * the inputs that require grad and references to the input and output nodes
 * as they were at the call. Gradients are plain tensors with no context, held
 * by their leaf, and never point back at it, so there are no cycles. Handles
 * die through a worklist (tc_tensor_destroy): a chain of a million contexts
 * frees without recursion.
 *
 * tc_backward(loss): a depth-first post-order of the tensors reachable from
 * loss through contexts (explicit stack, visit epochs instead of a set), then
 * one sweep in reverse: each tensor's summed gradient (ag_pending) goes
 * through its op's rule (grad_rules.c) and is added to its parents' pending
 * gradients. Every consumer of a tensor comes before it in the sweep, so a
 * shared subexpression is differentiated once, with all its uses summed.
 * Leaves (requires_grad, no context) get grad += pending, committed only
 * when the whole sweep succeeded. Everything stays lazy: the gradients are
 * graph nodes that run when the user realizes them. */
#include "tensor.h"

#include <string.h>

static bool grad_enabled = true; /* tc_set_grad_enabled; guarded by the API lock */
static uint64_t ag_epoch;        /* bumped by each tc_backward, for ag_mark */

/* ---- contexts and release ---- */

static bool any_requires_grad(int n, tc_tensor *const *ins) {
    for (int i = 0; i < n; i++)
        if (ins[i] && ins[i]->requires_grad) return true;
    return false;
}

tc_tensor *tc_ag_record(tc_tensor *out, tc_ag_op op, int n_inputs, tc_tensor *const *ins,
                        const tc_ag_args *args) {
    if (!out || op == TC_AG_NONE || !grad_enabled || !any_requires_grad(n_inputs, ins))
        return out;
    tc_ag_ctx *c = tc_calloc(1, sizeof *c);
    if (!c) {
        tc_release(out);
        return NULL;
    }
    c->op = op;
    c->n_inputs = n_inputs;
    for (int i = 0; i < n_inputs; i++) {
        c->inputs[i] = tc_node_retain(ins[i]->node);
        bool is_diff = ins[i]->requires_grad && !(op == TC_AG_WHERE && i == 0);
        if (is_diff) c->parents[i] = tc_retain(ins[i]);
    }
    c->out = tc_node_retain(out->node);
    if (args) c->args = *args;
    out->ctx = c;
    out->requires_grad = true;
    return out;
}

/* drops one handle reference held by the library; a dead handle joins the
 * worklist headed by *list */
static void drop(tc_tensor *t, tc_tensor **list) {
    if (t && --t->refcount == 0) {
        t->ag_next = *list;
        *list = t;
    }
}

/* releases ctx's node references and pushes its dying parents onto *list */
static void ctx_free(tc_ag_ctx *c, tc_tensor **list) {
    if (!c) return;
    for (int i = 0; i < c->n_inputs; i++) {
        drop(c->parents[i], list);
        tc_node_release(c->inputs[i]);
    }
    tc_node_release(c->out);
    tc_free(c);
}

/* frees the handles on the worklist headed by list and every one that dies with them */
static void destroy_list(tc_tensor *list) {
    while (list) {
        tc_tensor *x = list;
        list = x->ag_next;
        ctx_free(x->ctx, &list);
        drop(x->grad, &list);
        tc_node_release(x->ag_pending);
        tc_node_release(x->node);
        tc_free(x);
    }
}

void tc_tensor_destroy(tc_tensor *t) {
    t->ag_next = NULL;
    destroy_list(t);
}

/* ---- public calls ---- */

TC_API bool tc_set_grad_enabled(bool on) {
    TC_API_ENTER();
    tc_lock();
    bool was = grad_enabled;
    grad_enabled = on;
    tc_unlock();
    return was;
}

TC_API bool tc_is_grad_enabled(void) {
    TC_API_ENTER();
    tc_lock();
    bool on = grad_enabled;
    tc_unlock();
    return on;
}

TC_API tc_status tc_set_requires_grad(tc_tensor *t, bool on) {
    TC_API_ENTER();
    tc_lock();
    tc_status s = tc_tensor_check(t, "tc_set_requires_grad", "t");
    if (s == TC_OK && on && !tc_dtypes[t->node->dtype].is_float)
        s = tc_error_set(TC_ERR_DTYPE, "tc_set_requires_grad: only float tensors can require grad, "
                         "got %s", tc_dtypes[t->node->dtype].name);
    if (s == TC_OK && !on && t->ctx)
        s = tc_error_set(TC_ERR_INVALID, "tc_set_requires_grad: t is the result of a "
                         "differentiable op, not a leaf; use tc_detach to cut it off");
    if (s == TC_OK) t->requires_grad = on;
    tc_unlock();
    return s;
}

TC_API bool tc_requires_grad(const tc_tensor *t) {
    TC_API_ENTER();
    tc_lock();
    bool r = t && t->requires_grad;
    tc_unlock();
    return r;
}

TC_API tc_tensor *tc_grad(tc_tensor *t) {
    TC_API_ENTER();
    tc_lock();
    tc_tensor *g = NULL;
    if (tc_tensor_check(t, "tc_grad", "t") == TC_OK) {
        tc_error_clear(); /* no gradient is not an error */
        g = t->grad ? tc_retain(t->grad) : NULL;
    }
    tc_unlock();
    return g;
}

TC_API tc_status tc_zero_grad(tc_tensor *t) {
    TC_API_ENTER();
    tc_lock();
    tc_status s = tc_tensor_check(t, "tc_zero_grad", "t");
    if (s == TC_OK && t->grad) {
        tc_tensor *g = t->grad;
        t->grad = NULL;
        tc_release(g);
    }
    tc_unlock();
    return s;
}

TC_API tc_tensor *tc_detach(tc_tensor *t) {
    TC_API_ENTER();
    tc_lock();
    tc_tensor *out = NULL;
    if (tc_tensor_check(t, "tc_detach", "t") == TC_OK)
        out = tc_tensor_wrap(tc_node_retain(t->node));
    tc_unlock();
    return out;
}

/* ---- backward ---- */

/* the tensors reachable from loss through contexts, in post-order (inputs
 * before the tensors made from them), linked through ag_next from *head
 * (the last in post-order, i.e. loss, comes first) */
TC_MUST_USE static tc_status topo_sort(tc_tensor *loss, tc_tensor **head) {
    uint64_t mark = ++ag_epoch;
    tc_ptrvec stack = {0}; /* tensor pointers; the low bit set means "emit" */
    tc_tensor *order = NULL;
    tc_status s = tc_ptrvec_push(&stack, loss);
    while (s == TC_OK && stack.n) {
        uintptr_t item = (uintptr_t)stack.items[--stack.n];
        tc_tensor *t = (tc_tensor *)(item & ~(uintptr_t)1);
        if (item & 1) { /* all its inputs are emitted: prepend it */
            t->ag_next = order;
            order = t;
            continue;
        }
        if (t->ag_mark == mark) continue; /* marked when expanded, so post-order holds */
        t->ag_mark = mark;
        s = tc_ptrvec_push(&stack, (void *)(item | 1));
        for (int i = 0; t->ctx && i < t->ctx->n_inputs && s == TC_OK; i++) {
            tc_tensor *p = t->ctx->parents[i];
            if (p && p->ag_mark != mark) s = tc_ptrvec_push(&stack, p);
        }
    }
    tc_ptrvec_free(&stack);
    *head = order;
    return s;
}

/* adds g (consumed) to t's pending gradient */
TC_MUST_USE static tc_status accumulate(tc_tensor *t, tc_node *g) {
    if (!g) return tc_error_or(TC_ERR_MEMORY);
    t->ag_pending = t->ag_pending ? tc_ew_binary(TC_OP_ADD, t->ag_pending, g) : g;
    return t->ag_pending ? TC_OK : tc_error_code();
}

/* one step of the sweep: t's pending gradient through its rule to its
 * parents, or (a leaf) onto *leaves as a pair (t, new grad node) */
TC_MUST_USE static tc_status step(const char *api, tc_tensor *t, tc_ptrvec *leaves) {
    tc_node *g = t->ag_pending;
    t->ag_pending = NULL;
    if (!g) return TC_OK; /* no path from loss carries a gradient here */
    if (t->graph_freed) {
        tc_node_release(g);
        return tc_error_set(TC_ERR_INVALID, "%s: the loss depends on a tensor whose graph an "
                            "earlier backward freed (retain_graph false); pass retain_graph true "
                            "to that backward to differentiate through it again", api);
    }
    if (!t->ctx) {
        if (g->device != t->node->device) { /* a leaf moved since it was used */
            tc_node *moved = tc_tensor_copy_node(g, t->node->device);
            tc_node_release(g);
            if (!(g = moved)) return tc_error_code();
        }
        tc_node *total = t->grad ? tc_ew_binary(TC_OP_ADD, tc_node_retain(t->grad->node), g) : g;
        if (!total) return tc_error_code();
        tc_status s = tc_ptrvec_push(leaves, t);
        if (s == TC_OK) s = tc_ptrvec_push(leaves, total);
        if (s != TC_OK) {
            if (leaves->n % 2) leaves->n--;
            tc_node_release(total);
        }
        return s;
    }
    tc_node *grads[3] = {NULL, NULL, NULL};
    tc_status s = tc_ag_rule(t->ctx, g, grads);
    for (int i = 0; i < t->ctx->n_inputs; i++) {
        if (!grads[i]) continue;
        if (s == TC_OK) s = accumulate(t->ctx->parents[i], grads[i]);
        else tc_node_release(grads[i]);
    }
    return s;
}

/* swaps the new leaf gradients in when every step succeeded (wrapping them
 * all first, so a failure changes no leaf) and frees what is left */
TC_MUST_USE static tc_status finish(tc_tensor *order, tc_ptrvec *leaves, tc_status s) {
    for (int i = 1; i < leaves->n; i += 2) { /* node -> handle, in place */
        tc_node *g = leaves->items[i];
        leaves->items[i] = s == TC_OK ? tc_tensor_wrap(g) : NULL;
        if (s != TC_OK) tc_node_release(g);
        else if (!leaves->items[i]) s = tc_error_code();
    }
    for (int i = 0; i < leaves->n; i += 2) {
        tc_tensor *t = leaves->items[i], *gt = leaves->items[i + 1];
        if (s != TC_OK || !gt) {
            tc_release(gt);
            continue;
        }
        tc_release(t->grad);
        t->grad = gt;
    }
    tc_ptrvec_free(leaves);
    for (tc_tensor *t = order; t; t = t->ag_next) {
        tc_node_release(t->ag_pending);
        t->ag_pending = NULL;
    }
    return s;
}

/* loss and its seed: gradient (loss's shape, a float dtype, its device), or
 * none for a loss of one element */
TC_MUST_USE static tc_status check_loss(const char *api, tc_tensor *loss, tc_tensor *gradient) {
    tc_status s = tc_tensor_check(loss, api, "loss");
    if (s == TC_OK && gradient) s = tc_tensor_check(gradient, api, "gradient");
    if (s != TC_OK) return s;
    const tc_node *n = loss->node;
    char buf[256], b2[256];
    if (!gradient && tc_node_numel(n) != 1)
        return tc_error_set(TC_ERR_SHAPE, "%s: loss must be a scalar (one element), got shape %s; "
                            "pass a gradient of its shape (tc_backward_ex)", api,
                            tc_fmt_shape(buf, sizeof buf, n->ndim, n->shape));
    if (gradient) {
        const tc_node *g = gradient->node;
        if (g->ndim != n->ndim || memcmp(g->shape, n->shape, sizeof(int64_t) * (size_t)n->ndim))
            return tc_error_set(TC_ERR_SHAPE, "%s: gradient of shape %s for loss of shape %s (they "
                                "must be equal)", api, tc_fmt_shape(buf, sizeof buf, g->ndim, g->shape),
                                tc_fmt_shape(b2, sizeof b2, n->ndim, n->shape));
        if (!tc_dtypes[g->dtype].is_float)
            return tc_error_set(TC_ERR_DTYPE, "%s: gradient must be a float tensor, got %s", api,
                                tc_dtypes[g->dtype].name);
        if (g->device != n->device)
            return tc_error_set(TC_ERR_DEVICE, "%s: gradient is on another device than loss", api);
    }
    if (!loss->requires_grad)
        return tc_error_set(TC_ERR_INVALID, "%s: loss does not require grad (no tensor "
                            "it was made from has tc_set_requires_grad)", api);
    return TC_OK;
}

/* frees the contexts of the tensors in order (a backward's, linked through
 * ag_next): the nodes they held for the rules go, and the handles that die
 * with them. Detaches all first, as freeing reuses ag_next. O(tensors). */
static void free_graph(tc_tensor *order) {
    tc_ptrvec ctxs = {0};
    tc_error_state es; /* a failed push is no failure of the backward */
    tc_error_save(&es);
    for (tc_tensor *t = order; t; t = t->ag_next) {
        if (!t->ctx) continue;
        if (tc_ptrvec_push(&ctxs, t->ctx) != TC_OK) break; /* out of memory: the rest stay */
        t->ctx = NULL;
        t->graph_freed = true;
    }
    tc_error_restore(&es);
    for (int i = 0; i < ctxs.n; i++) {
        tc_tensor *list = NULL;
        ctx_free(ctxs.items[i], &list);
        destroy_list(list);
    }
    tc_ptrvec_free(&ctxs);
}

static tc_status backward(const char *api, tc_tensor *loss, tc_tensor *gradient, bool retain_graph) {
    tc_tensor *order = NULL;
    tc_ptrvec leaves = {0}; /* pairs (leaf, its new grad node) */
    tc_status s = check_loss(api, loss, gradient);
    if (s == TC_OK) s = topo_sort(loss, &order);
    if (s == TC_OK) {
        loss->ag_pending = gradient ? tc_ew_cast(tc_node_retain(gradient->node), loss->node->dtype)
                                    : tc_ew_const(loss->node, 1.0);
        if (!loss->ag_pending) s = tc_error_or(TC_ERR_MEMORY);
    }
    for (tc_tensor *t = order; t && s == TC_OK; t = t->ag_next) s = step(api, t, &leaves);
    s = finish(order, &leaves, s);
    if (s == TC_OK && !retain_graph) free_graph(order);
    return s;
}

TC_API tc_status tc_backward(tc_tensor *loss) {
    TC_API_ENTER();
    tc_lock();
    tc_status s = backward("tc_backward", loss, NULL, true);
    tc_unlock();
    return s;
}

TC_API tc_status tc_backward_ex(tc_tensor *loss, tc_tensor *gradient) {
    TC_API_ENTER();
    tc_lock();
    tc_status s = backward("tc_backward_ex", loss, gradient, true);
    tc_unlock();
    return s;
}

TC_API tc_status tc_backward_opts(tc_tensor *loss, tc_tensor *gradient, bool retain_graph) {
    TC_API_ENTER();
    tc_lock();
    tc_status s = backward("tc_backward_opts", loss, gradient, retain_graph);
    tc_unlock();
    return s;
}
