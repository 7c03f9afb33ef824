/* gpu.c - the UOp builder's work-group parts: thread ids (SPECIAL), local
 * arrays (DEFINE_LOCAL), loads and stores of local arrays with the
 * automatic BARRIER, and the broadcast of a scalar to a vector (GPU vector
 * kernels: their ALUs take vector operands only).
 *
 * The builder remembers, per DEFINE_LOCAL, whether some lane stored to it
 * or every lane read it since the last BARRIER (tc_ub_local), and puts a
 * BARRIER before a load that follows a store (read after write) or a store
 * that follows an all-lane read (write after read): exactly one after each
 * phase of stores, none where no lane could see another's data. A BARRIER
 * never goes inside an IF block (every lane must reach it): it goes just
 * before the outermost open one. Reads inside IF blocks count as one lane's
 * (the lane that combines), so that lane's own later stores need none. Each
 * local load takes the last BARRIER as a source, so loads on either side of
 * a barrier are never merged by hash-consing.
 *
 * A scratch array (tc_ub_define_scratch) is a DEFINE_LOCAL of a kernel that
 * runs on one thread (the CPU's tile of reduce values, lower.c): no barrier,
 * no lane bookkeeping; its loads and stores are ordered by their loops.
 */
#include "codegen.h"

static tc_ub_local *find_local(tc_ub *ub, const tc_uop *buf) {
    for (int i = 0; i < ub->n_locals; i++)
        if (ub->locals[i].buf == buf) return &ub->locals[i];
    return NULL;
}

/* puts a BARRIER before a store (is_store) or load of local buffer l when
 * its state since the last one asks for it: a load after a store, a store
 * after a read by every lane. The BARRIER goes at the current depth, or
 * just before the outermost open IF (every lane must reach it). */
static bool sync_local(tc_ub *ub, tc_ub_local *l, bool is_store) {
    if (!(is_store ? l->is_read : l->is_stored)) return true;
    if (!is_store && l->store_if && l->store_if == ub->if_serial) {
        TC_INTERNAL("local buffer temp%lld is read in the IF block that stored it",
                    (long long)l->buf->arg);
        ub->failed = true;
        return false;
    }
    tc_uop *b = tc_ub_new(ub, TC_UOP_BARRIER, TC_BOOL, 0, NULL);
    if (!b || !tc_ub_put(ub, b, ub->if_depth >= 0 ? ub->if_depth : ub->depth)) return false;
    ub->barrier = b;
    for (int i = 0; i < ub->n_locals; i++) {
        ub->locals[i].is_stored = ub->locals[i].is_read = false;
        ub->locals[i].store_if = 0;
    }
    return true;
}

tc_uop *tc_ub_define_local(tc_ub *ub, tc_dtype dt, int64_t n) {
    if (ub->n_locals >= TC_UB_MAX_LOCALS) {
        TC_INTERNAL("more than %d local buffers in one kernel", TC_UB_MAX_LOCALS);
        ub->failed = true;
        return NULL;
    }
    tc_uop *u = tc_ub_new(ub, TC_UOP_DEFINE_LOCAL, dt, 0, NULL);
    if (!u) return NULL;
    u->arg = ub->n_locals;
    u->ivalue = n;
    if (!tc_ub_insert_first(ub, u)) return NULL; /* first in the kernel, never hash-consed */
    ub->locals[ub->n_locals++] = (tc_ub_local){.buf = u};
    return u;
}

tc_uop *tc_ub_define_scratch(tc_ub *ub, tc_dtype dt, int64_t n) {
    tc_uop *u = tc_ub_new(ub, TC_UOP_DEFINE_LOCAL, dt, 0, NULL);
    if (!u) return NULL;
    u->arg = ub->n_scratch++;
    u->ivalue = n;
    u->is_scratch = true;
    return tc_ub_insert_first(ub, u) ? u : NULL; /* first in the kernel, never hash-consed */
}

tc_uop *tc_ub_special(tc_ub *ub, int dim, bool is_lane, tc_dtype dt, int64_t size) {
    tc_uop *u = tc_ub_new(ub, TC_UOP_SPECIAL, dt, 0, NULL);
    if (!u) return NULL;
    u->arg = dim;
    u->ivalue = size;
    u->is_lane = is_lane;
    u->vmin = 0;
    u->vmax = size > 0 ? size - 1 : 0;
    u->is_index = true;
    return tc_ub_intern(ub, u);
}

tc_uop *tc_ub_local_load(tc_ub *ub, tc_uop *buf, tc_uop *idx) {
    tc_ub_local *l = find_local(ub, buf);
    if (!l) {
        TC_INTERNAL("a load from a local buffer the builder did not make");
        ub->failed = true;
        return NULL;
    }
    if (!sync_local(ub, l, false)) return NULL;
    if (ub->if_depth < 0) l->is_read = true;
    tc_uop *s[3] = {buf, idx, ub->barrier}; /* srcs: buffer, index[, last BARRIER] */
    tc_uop *u = tc_ub_new(ub, TC_UOP_LOAD, buf->dtype, ub->barrier ? 3 : 2, s);
    if (u) u->vcount = buf->vcount; /* a local array of vectors (GPU vector lanes) */
    return u ? tc_ub_intern(ub, u) : NULL;
}

bool tc_ub_local_store_sync(tc_ub *ub, tc_uop *buf) {
    tc_ub_local *l = find_local(ub, buf);
    if (!l) {
        TC_INTERNAL("a store to a local buffer the builder did not make");
        ub->failed = true;
        return false;
    }
    if (!sync_local(ub, l, true)) return false;
    l->is_stored = true;
    l->store_if = ub->if_serial;
    return true;
}

tc_uop *tc_ub_broadcast(tc_ub *ub, tc_uop *x, int lanes) {
    if (!x || x->vcount > 1 || lanes <= 1) return x;
    tc_uop *u = tc_ub_new(ub, x->op == TC_UOP_CONST ? TC_UOP_CONST : TC_UOP_CAST, x->dtype,
                          x->op == TC_UOP_CONST ? 0 : 1, &x);
    if (!u) return NULL;
    u->vcount = lanes;
    if (x->op == TC_UOP_CONST) {
        u->value = x->value;
        u->ivalue = x->ivalue;
        u->vmin = x->vmin;
        u->vmax = x->vmax;
    }
    return tc_ub_intern(ub, u);
}
