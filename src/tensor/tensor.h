/* tensor.h - the interface of src/tensor: the public tc_tensor handle over a
 * graph node, with broadcasting, type promotion and argument checks. */
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

#endif /* TC_TENSOR_H */
