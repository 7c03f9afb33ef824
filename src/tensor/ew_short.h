/* ew_short.h - short names for the node combinators of elementwise.c, for
 * the files that write formulas with many of them (math.c's ops and
 * grad_rules.c's derivatives). Each consumes its node arguments as the
 * tc_ew_* call it wraps does; K keeps a node for one more use. Private to
 * src/tensor. */
#ifndef TC_EW_SHORT_H
#define TC_EW_SHORT_H

#include "tensor.h"

static inline tc_node *K(tc_node *n) {
    return tc_ew_keep(n);
}
static inline tc_node *cnst(const tc_node *like, double v) {
    return tc_ew_const(like, v);
}
static inline tc_node *mul(tc_node *a, tc_node *b) {
    return tc_ew_binary(TC_OP_MUL, a, b);
}
static inline tc_node *add(tc_node *a, tc_node *b) {
    return tc_ew_binary(TC_OP_ADD, a, b);
}
static inline tc_node *neg(tc_node *a) {
    return tc_ew_unary(TC_OP_NEG, a);
}
static inline tc_node *recip(tc_node *a) {
    return tc_ew_unary(TC_OP_RECIP, a);
}

#endif
