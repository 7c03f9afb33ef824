/* tc_test_lower.h - for codegen tests: the last kernel of a tensor's
 * schedule lowered to UOps for a given target (no device needed). */
#ifndef TC_TEST_LOWER_H
#define TC_TEST_LOWER_H

#include "codegen/codegen.h"

typedef struct {
    tc_schedule *s;    /* the schedule */
    tc_kernel_uops *k; /* its last kernel (copies skipped), lowered */
} tc_test_lowered;

/* schedules t and lowers the last kernel for target (fails the test on error) */
tc_test_lowered tc_test_lower(tc_tensor *t, const tc_target *target);
void tc_test_lowered_free(tc_test_lowered *l);
/* UOps of kind op in k */
int tc_test_count_uops(const tc_kernel_uops *k, tc_uop_op op);
/* softmax and layernorm (no affine, eps 1e-5) along axis, from primitives */
tc_tensor *tc_test_softmax(tc_tensor *x, int axis);
tc_tensor *tc_test_layernorm(tc_tensor *x, int axis);
/* n_ops elementwise ops in a chain on x, one kernel: y = y*0.5, y + x,
 * max(y, -0.75), -y in turn (a contraction: values stay near x, rounding
 * errors shrink; integers: y*3, y + x, max(y, 7), -y, wrapping);
 * is_max_only: y*0.5 and max(y, x) in turn (a max whose operand is the
 * chain, which some dialects print 4 times) */
tc_tensor *tc_test_chain(tc_tensor *x, int n_ops, bool is_max_only);

#endif
