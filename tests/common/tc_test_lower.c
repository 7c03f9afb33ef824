/* tc_test_lower.c - see tc_test_lower.h */
#include "tc_test.h"
#include "tc_test_lower.h"

#include <stdio.h>

#include "tensor/tensor.h"

tc_test_lowered tc_test_lower(tc_tensor *t, const tc_target *target) {
    tc_node *b = tc_node_base(tc_tensor_node(t));
    tc_test_lowered l = {tc_schedule_create(&b, 1), NULL};
    assert_non_null(l.s);
    const tc_sched_item *it = NULL;
    for (int i = 0; i < l.s->n_items; i++)
        if (!l.s->items[i].is_copy) it = &l.s->items[i];
    assert_non_null(it);
    l.k = tc_codegen(it, target);
    if (!l.k) fprintf(stderr, "codegen: %s\n", tc_last_error());
    assert_non_null(l.k);
    return l;
}

void tc_test_lowered_free(tc_test_lowered *l) {
    tc_kernel_uops_free(l->k);
    tc_schedule_free(l->s);
}

int tc_test_count_uops(const tc_kernel_uops *k, tc_uop_op op) {
    int n = 0;
    for (int i = 0; i < k->n_uops; i++) n += k->uops[i]->op == op;
    return n;
}

tc_tensor *tc_test_softmax(tc_tensor *x, int axis) {
    tc_tensor *m = tc_max(x, 1, &axis, true), *d = tc_sub(x, m), *e = tc_exp(d);
    tc_tensor *s = tc_sum(e, 1, &axis, true), *r = tc_div(e, s);
    tc_release(m), tc_release(d), tc_release(e), tc_release(s);
    return r;
}

tc_tensor *tc_test_layernorm(tc_tensor *x, int axis) {
    tc_tensor *mu = tc_mean(x, 1, &axis, true), *c = tc_sub(x, mu), *c2 = tc_mul(c, c);
    tc_tensor *var = tc_mean(c2, 1, &axis, true);
    tc_tensor *eps = tc_full(0, NULL, 1e-5, TC_FLOAT32, tc_device(x)), *ve = tc_add(var, eps);
    tc_tensor *sd = tc_sqrt(ve), *r = tc_div(c, sd);
    tc_release(mu), tc_release(c), tc_release(c2), tc_release(var), tc_release(eps);
    tc_release(ve), tc_release(sd);
    return r;
}

tc_tensor *tc_test_chain(tc_tensor *x, int n_ops, bool is_max_only) {
    bool is_int = tc_get_dtype(x) != TC_FLOAT32 && tc_get_dtype(x) != TC_FLOAT16;
    tc_tensor *half = tc_full_like(x, is_int ? 3 : 0.5), *lo = tc_full_like(x, is_int ? 7 : -0.75);
    tc_tensor *y = tc_retain(x);
    for (int i = 0; i < n_ops && y; i++) {
        tc_tensor *next = NULL;
        switch (is_max_only ? 2 * (i % 2) : i % 4) {
        case 0: next = tc_mul(y, half); break;
        case 1: next = tc_add(y, x); break;
        case 2: next = tc_maximum(y, is_max_only ? x : lo); break;
        default: next = tc_neg(y); break;
        }
        tc_release(y);
        y = next;
    }
    tc_release(half), tc_release(lo);
    return y;
}
