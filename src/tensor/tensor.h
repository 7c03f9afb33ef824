/* tensor.h - the interface of src/tensor: the public tc_tensor handle over a
 * graph node, with broadcasting, type promotion and argument checks.
 *
 * Files: tensor.c (handles, properties, library calls, shared argument
 * checks), creation.c, random.c, elementwise.c (node combinators and the
 * unary ops), binary.c (binary ops, where, cast), reduce.c, movement.c,
 * run.c (realize, transfers, counters). */
#ifndef TC_TENSOR_H
#define TC_TENSOR_H

#include "engine/engine.h"

struct tc_tensor {
    int64_t refcount; /* handle references held by the user and the library */
    tc_node *node;    /* owned reference; its shape and dtype are the tensor's */
};

/* a new handle owning the reference `n` (consumed even on failure); NULL if n is NULL */
tc_tensor *tc_tensor_wrap(tc_node *n);
static inline tc_node *tc_tensor_node(const tc_tensor *t) {
    return t->node;
}

/* ---- argument checks (tensor.c): each sets an error naming `api` ---------- */
/* TC_ERR_INVALID when t is NULL (`arg` names the parameter: "a", "cond") */
tc_status tc_tensor_check(const tc_tensor *t, const char *api, const char *arg);
/* 0..TC_MAX_DIMS dims, shape non-NULL when ndim > 0, sizes >= 0, numel fits int64 */
tc_status tc_tensor_check_shape(const char *api, int ndim, const int64_t *shape);
tc_status tc_tensor_check_dtype(const char *api, int dt); /* a valid tc_dtype */
/* one axis in -ndim..ndim-1 -> 0..ndim-1 in *out */
tc_status tc_tensor_axis(const char *api, int ndim, int axis, int *out);
/* axes -> bitmask of dims; naxes 0 = all dims; duplicates are errors */
tc_status tc_tensor_axes_mask(const char *api, int ndim, int naxes, const int *axes,
                              uint32_t *mask);

/* ---- node combinators (elementwise.c) -------------------------------------
 * Each consumes the node references it is given (also on failure) and returns
 * a new reference, or NULL with the error set. A NULL argument gives NULL (its
 * error is already set), so combinators nest without checks in between.
 * Sources of one op must have equal shapes and (except WHERE's condition)
 * equal dtypes. */
tc_node *tc_ew_keep(tc_node *n);                         /* NULL-safe retain */
tc_node *tc_ew_unary(tc_op op, tc_node *x);              /* result in x's dtype */
tc_node *tc_ew_binary(tc_op op, tc_node *a, tc_node *b); /* CMPLT/CMPNE give bool */
tc_node *tc_ew_where(tc_node *cond, tc_node *a, tc_node *b);
tc_node *tc_ew_cast(tc_node *x, tc_dtype dt); /* x itself when already dt */
tc_node *tc_ew_float(tc_node *x);             /* ints and bool -> float32 */
/* a CONST of like's dtype, device and shape; borrows like (NULL -> NULL) */
tc_node *tc_ew_const(const tc_node *like, double value);
tc_node *tc_ew_not(tc_node *x);             /* bool: x != true */
tc_node *tc_ew_order_flip(tc_node *x);      /* order-reversing involution: -x, ~x, x^255, !x */
tc_node *tc_ew_exp(tc_node *x);             /* float: exp2(x*log2(e)) */
tc_node *tc_ew_abs(tc_node *x);             /* max(x, -x); x itself for uint8 and bool */
tc_node *tc_ew_sub(tc_node *a, tc_node *b); /* a + -b */
/* reshape (prepend 1s) then expand n to shape; numpy rules already checked */
tc_node *tc_ew_broadcast(tc_node *n, int ndim, const int64_t *shape);
tc_node *tc_ew_reshape(tc_node *n, int ndim, const int64_t *shape);

/* ---- random (random.c) ---------------------------------------------------- */
void tc_random_reset(void); /* seed 0, counter 0: the state at start (tc_shutdown) */

#endif /* TC_TENSOR_H */
