/* lower_index.c - the indexed reads and writes of a kernel: GATHER, a load
 * whose place along one axis is a value the kernel loads (an embedding's
 * rows), SCATTER, the kernel that adds values at such places (its
 * gradient), and PUT, the kernel that writes values at such places into
 * buffers it updates in place (tc_index_copy: a KV cache's new row).
 *
 * The AST gives the tracker to the element at index 0 of the indexed axis
 * (its stride there set to 0, schedule/ast.c) and that axis's stride and
 * size: the address is that element's plus index * stride. An index outside
 * [0, size) reads 0 and adds nothing; its address is computed from 0, so a
 * bad index never reaches memory it should not; a store there is skipped.
 * A GATHER whose index is the same for every lane of a CPU vector (an
 * embedding row read along its columns: opt.c's uniform_along) is a vector
 * load of consecutive elements at that index, gated as a whole; elsewhere
 * values at indexed places differ from lane to lane and stay scalar (the
 * GPU vectors keep every kernel with a GATHER scalar). A SCATTER kernel is plain
 * loops on one thread (two places of one index would race otherwise),
 * after a loop that zeroes its output: its cost is O(output + sources).
 * GPU targets would need atomic adds for it: they report an error. A PUT
 * kernel is the same loops without the zeroing, one store per output (the
 * K and V rows of a layer share the loops): O(sources), whatever the size
 * of the buffers it writes; of two equal indices the later one's values
 * stay. On GPU targets it runs as those loops in one work-item (a launch of
 * 1 x 1): no races, and a KV cache's row is a few thousand elements.
 */
#include "lower.h"

/* a's buffer address for the index UOp k (any integer dtype), and whether
 * it is inside the axis (and a's own mask) */
TC_MUST_USE static tc_status indexed(lower_ctx *c, const tc_ast *a, tc_uop *k, tc_uop **addr, tc_uop **valid) {
    tc_uop *base, *in;
    if (tc_lw_st_index(c, a->st, &base, &in) != TC_OK) return tc_error_code();
    tc_ub *ub = &c->ub;
    ub->index_mode = true;
    k = tc_ub_cast(ub, k, c->idt, false);
    tc_uop *inside = tc_ub_alu(ub, TC_OP_AND, TC_BOOL, 2, ix(c, TC_OP_CMPLT, ic(c, -1), k),
                               ix(c, TC_OP_CMPLT, k, ic(c, a->index_size)), NULL);
    *valid = tc_ub_alu(ub, TC_OP_AND, TC_BOOL, 2, in, inside, NULL);
    tc_uop *safe = tc_ub_alu(ub, TC_OP_WHERE, c->idt, 3, *valid, k, ic(c, 0));
    *addr = ix(c, TC_OP_ADD, base, ix(c, TC_OP_MUL, safe, ic(c, a->index_stride)));
    ub->index_mode = false;
    return *addr && *valid ? TC_OK : TC_ERR_MEMORY;
}

tc_uop *tc_lw_gather(lower_ctx *c, tc_ast *a) {
    if (c->gvl > 1) {
        TC_INTERNAL("a GATHER in a GPU-vectorized stage");
        return NULL;
    }
    tc_uop *k = tc_lw_lower(c, a->srcs[0]), *addr, *valid;
    if (!k || indexed(c, a, k, &addr, &valid) != TC_OK) return NULL;
    int lanes = tc_lw_vec_lanes_now(c);
    if (lanes > 1) /* opt.c: one index for every lane, the row contiguous along the lanes */
        return tc_ub_load_vec(&c->ub, c->globals[a->buf], addr, valid, lanes);
    return tc_ub_load(&c->ub, c->globals[a->buf], addr, valid);
}

/* zeroes the output: a loop over its elements */
static void zero_output(lower_ctx *c) {
    const tc_node *out = c->it->bufs[0];
    int64_t n = tc_node_numel(out);
    if (n == 0) return;
    tc_uop *i = tc_ub_range(&c->ub, TC_MAX_DIMS, c->idt, n);
    tc_ub_store(&c->ub, c->globals[0], i, tc_ub_const(&c->ub, out->dtype, 0, 0));
    tc_ub_end_range(&c->ub);
}

/* one indexed store st (SCATTER: added; PUT: written) at the current loop
 * indices, gated by the index being inside the axis */
TC_MUST_USE static tc_status indexed_store(lower_ctx *c, const tc_ast *st) {
    tc_uop *v = tc_lw_lower(c, st->srcs[0]);
    tc_uop *idx = tc_lw_lower(c, st->srcs[1]), *addr, *valid;
    if (!v || !idx || indexed(c, st, idx, &addr, &valid) != TC_OK) return tc_error_or(TC_ERR_MEMORY);
    tc_uop *out = c->globals[st->buf];
    bool gated = tc_ub_if(&c->ub, valid);
    v = tc_ub_cast(&c->ub, v, st->dtype, false);
    if (st->op == TC_OP_SCATTER)
        v = tc_ub_alu(&c->ub, TC_OP_ADD, st->dtype, 2, tc_ub_load(&c->ub, out, addr, NULL), v, NULL);
    tc_ub_store(&c->ub, out, addr, v);
    if (gated) tc_ub_end_if(&c->ub);
    return TC_OK;
}

TC_MUST_USE tc_status tc_lw_scatter_kernel(lower_ctx *c, tc_kernel_uops *k) {
    const tc_sched_item *it = c->it;
    if (c->tg->has_local && !it->is_put)
        return tc_error_set(TC_ERR_DEVICE, "tc_realize: kernel %s adds at indexed places (the "
                                           "gradient of a gather), which runs on the CPU only",
                            it->name);
    c->n_reps = 1;
    if (!it->is_put) zero_output(c);
    bool empty = false;
    for (int a = 0; a < it->ndim; a++) empty |= it->full_shape[a] == 0;
    for (int a = 0; a < it->ndim && !empty; a++)
        c->idx[a] = it->full_shape[a] == 1 ? ic(c, 0) : tc_ub_range(&c->ub, a, c->idt, it->full_shape[a]);
    c->outer_depth = c->ub.depth;
    for (int s = 0; s < it->ast->n_srcs && !empty; s++)
        if (indexed_store(c, it->ast->srcs[s]) != TC_OK) return tc_error_or(TC_ERR_MEMORY);
    while (c->ub.depth > 0) tc_ub_end_range(&c->ub);
    (void)k; /* lower.c estimates its ops and bytes */
    return c->ub.failed ? tc_error_or(TC_ERR_MEMORY) : tc_ub_linearize(&c->ub);
}
