/* test_uops.c - the UOp builder: hash-consing, constant folding, range
 * analysis of index math (div/mod folding, mask elimination), placement of
 * loop-invariant UOps outside loops, and lowering of a hand-built item. */
#include "tc_test.h"

#include "codegen/codegen.h"
#include "render/render.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    tc_kernel_uops k;
    tc_ub ub;
} fixture;

static fixture *fx_new(void) {
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    tc_ub_init(&f->ub, &f->k);
    return f;
}

static void fx_free(fixture *f) {
    tc_arena_free(&f->k.arena);
    free(f);
}

static tc_uop *ic(fixture *f, int64_t v) {
    return tc_ub_iconst(&f->ub, TC_INT32, v);
}

static tc_uop *alu2(fixture *f, tc_op op, tc_uop *a, tc_uop *b) {
    tc_dtype dt = op == TC_OP_CMPLT || op == TC_OP_CMPNE ? TC_BOOL : a->dtype;
    return tc_ub_alu(&f->ub, op, dt, 2, a, b, NULL);
}

static void test_hash_consing(void **state) {
    (void)state;
    fixture *f = fx_new();
    tc_uop *r = tc_ub_range(&f->ub, 0, TC_INT32, 10);
    tc_uop *a = alu2(f, TC_OP_MUL, r, ic(f, 3)), *b = alu2(f, TC_OP_MUL, r, ic(f, 3));
    assert_ptr_equal(a, b);
    assert_ptr_equal(ic(f, 3), ic(f, 3));
    /* constants move right, so 3*r is r*3 */
    assert_ptr_equal(alu2(f, TC_OP_MUL, ic(f, 3), r), a);
    fx_free(f);
}

static void test_constant_folding(void **state) {
    (void)state;
    fixture *f = fx_new();
    tc_uop *x = alu2(f, TC_OP_ADD, ic(f, 2), ic(f, 5));
    assert_int_equal(x->op, TC_UOP_CONST);
    assert_int_equal(x->ivalue, 7);
    tc_uop *fa = tc_ub_const(&f->ub, TC_FLOAT32, 1.5, 0), *fb = tc_ub_const(&f->ub, TC_FLOAT32, 2.0, 0);
    tc_uop *fm = alu2(f, TC_OP_MUL, fa, fb);
    assert_int_equal(fm->op, TC_UOP_CONST);
    assert_true(fm->value == 3.0);
    /* int32 wraps like the C code would */
    tc_uop *w = alu2(f, TC_OP_ADD, ic(f, INT32_MAX), ic(f, 1));
    assert_int_equal(w->ivalue, INT32_MIN);
    /* integer division by zero folds to 0 instead of trapping */
    assert_int_equal(alu2(f, TC_OP_IDIV, ic(f, 7), ic(f, 0))->ivalue, 0);
    fx_free(f);
}

static void test_identities(void **state) {
    (void)state;
    fixture *f = fx_new();
    tc_uop *r = tc_ub_range(&f->ub, 0, TC_INT32, 10);
    assert_ptr_equal(alu2(f, TC_OP_ADD, r, ic(f, 0)), r);
    assert_ptr_equal(alu2(f, TC_OP_MUL, r, ic(f, 1)), r);
    assert_int_equal(alu2(f, TC_OP_MUL, r, ic(f, 0))->ivalue, 0);
    assert_ptr_equal(alu2(f, TC_OP_IDIV, r, ic(f, 1)), r);
    /* (r+2)+3 -> r+5 */
    tc_uop *s = alu2(f, TC_OP_ADD, alu2(f, TC_OP_ADD, r, ic(f, 2)), ic(f, 3));
    assert_ptr_equal(s, alu2(f, TC_OP_ADD, r, ic(f, 5)));
    /* a constant term goes outermost, the others keep their order: (r+2)+q
     * is (r+q)+2, q+(r+2) is (q+r)+2 and (r+2)+(q+3) is (r+q)+5, so a tile's
     * copies index one base at constant offsets */
    tc_uop *q = tc_ub_range(&f->ub, 1, TC_INT32, 4), *rq = alu2(f, TC_OP_ADD, r, q);
    tc_uop *want2 = alu2(f, TC_OP_ADD, rq, ic(f, 2));
    assert_true(want2->op == TC_UOP_ALU && want2->srcs[0] == rq && want2->srcs[1] == ic(f, 2));
    assert_ptr_equal(alu2(f, TC_OP_ADD, alu2(f, TC_OP_ADD, r, ic(f, 2)), q), want2);
    assert_ptr_equal(alu2(f, TC_OP_ADD, q, alu2(f, TC_OP_ADD, r, ic(f, 2))),
                     alu2(f, TC_OP_ADD, alu2(f, TC_OP_ADD, q, r), ic(f, 2)));
    assert_ptr_equal(alu2(f, TC_OP_ADD, alu2(f, TC_OP_ADD, r, ic(f, 2)), alu2(f, TC_OP_ADD, q, ic(f, 3))),
                     alu2(f, TC_OP_ADD, rq, ic(f, 5)));
    fx_free(f);
}

static void test_range_analysis(void **state) {
    (void)state;
    fixture *f = fx_new();
    tc_uop *i = tc_ub_range(&f->ub, 0, TC_INT32, 6), *j = tc_ub_range(&f->ub, 1, TC_INT32, 4);
    tc_uop *flat = alu2(f, TC_OP_ADD, alu2(f, TC_OP_MUL, i, ic(f, 4)), j); /* i*4+j in [0,24) */
    assert_int_equal(flat->vmin, 0);
    assert_int_equal(flat->vmax, 23);
    /* (i*4+j)//4 -> i and (i*4+j)%4 -> j: j is known to lie in [0,4) */
    assert_ptr_equal(alu2(f, TC_OP_IDIV, flat, ic(f, 4)), i);
    assert_ptr_equal(alu2(f, TC_OP_MOD, flat, ic(f, 4)), j);
    /* j//4 -> 0 and j%4 -> j */
    assert_int_equal(alu2(f, TC_OP_IDIV, j, ic(f, 4))->ivalue, 0);
    assert_ptr_equal(alu2(f, TC_OP_MOD, j, ic(f, 4)), j);
    /* (i*8+j)//4 -> i*2 + j//4 -> i*2 */
    tc_uop *f8 = alu2(f, TC_OP_ADD, alu2(f, TC_OP_MUL, i, ic(f, 8)), j);
    assert_ptr_equal(alu2(f, TC_OP_IDIV, f8, ic(f, 4)), alu2(f, TC_OP_MUL, i, ic(f, 2)));
    /* masks that always hold disappear: j < 4 is true, j < 3 is not known */
    tc_uop *t = alu2(f, TC_OP_CMPLT, j, ic(f, 4));
    assert_int_equal(t->op, TC_UOP_CONST);
    assert_int_equal(t->ivalue, 1);
    assert_int_equal(alu2(f, TC_OP_CMPLT, j, ic(f, 3))->op, TC_UOP_ALU);
    assert_int_equal(alu2(f, TC_OP_CMPLT, ic(f, -1), j)->ivalue, 1);
    /* (i*4+j+1)%4 is not j+1: the remainder may reach 4 */
    tc_uop *g = alu2(f, TC_OP_MOD, alu2(f, TC_OP_ADD, flat, ic(f, 1)), ic(f, 4));
    assert_int_equal(g->op, TC_UOP_ALU);
    assert_int_equal(g->alu, TC_OP_MOD);
    fx_free(f);
}

/* the index of a padded view of a pooled one: y, x clamped to the pad's
 * mask [4, 24) (lower.c), an offset of -84 = -(4*20 + 4) */
static void test_padded_divmod(void **state) {
    (void)state;
    fixture *f = fx_new();
    tc_uop *n = tc_ub_range(&f->ub, 0, TC_INT32, 8), *y = tc_ub_range(&f->ub, 1, TC_INT32, 28);
    tc_uop *x = tc_ub_range(&f->ub, 2, TC_INT32, 28);
    tc_uop *yc = alu2(f, TC_OP_MAX, y, ic(f, 4)), *xc = alu2(f, TC_OP_MAX, x, ic(f, 4));
    yc = tc_ub_alu(&f->ub, TC_OP_NEG, TC_INT32, 1, alu2(f, TC_OP_MAX, tc_ub_alu(&f->ub, TC_OP_NEG, TC_INT32, 1, yc, NULL, NULL), ic(f, -23)), NULL, NULL);
    xc = tc_ub_alu(&f->ub, TC_OP_NEG, TC_INT32, 1, alu2(f, TC_OP_MAX, tc_ub_alu(&f->ub, TC_OP_NEG, TC_INT32, 1, xc, NULL, NULL), ic(f, -23)), NULL, NULL);
    assert_int_equal(yc->vmin, 4);
    assert_int_equal(yc->vmax, 23);
    tc_uop *off = alu2(f, TC_OP_ADD, alu2(f, TC_OP_MUL, yc, ic(f, 20)), xc);
    tc_uop *flat = alu2(f, TC_OP_ADD, alu2(f, TC_OP_ADD, alu2(f, TC_OP_MUL, n, ic(f, 400)), off), ic(f, -84));
    assert_int_equal(flat->vmin, 0);
    /* flat // 400 -> n: the rest, y*20 + x - 84, lies in [0, 400) */
    assert_ptr_equal(alu2(f, TC_OP_IDIV, flat, ic(f, 400)), n);
    /* flat % 2 -> x % 2 (-84 is even: split floor-wise, nothing of it is left) */
    assert_ptr_equal(alu2(f, TC_OP_MOD, flat, ic(f, 2)), alu2(f, TC_OP_MOD, xc, ic(f, 2)));
    /* one quotient over the whole range: (x + 16) // 20 = 1, (x + 16) % 20 = x - 4 */
    tc_uop *x16 = alu2(f, TC_OP_ADD, xc, ic(f, 16));
    assert_int_equal(alu2(f, TC_OP_IDIV, x16, ic(f, 20))->ivalue, 1);
    assert_ptr_equal(alu2(f, TC_OP_MOD, x16, ic(f, 20)), alu2(f, TC_OP_ADD, xc, ic(f, -4)));
    fx_free(f);
}

/* a value that does not depend on the inner loop is placed outside it */
static void test_hoisting(void **state) {
    (void)state;
    fixture *f = fx_new();
    tc_uop *i = tc_ub_range(&f->ub, 0, TC_INT32, 6);
    tc_uop *j = tc_ub_range(&f->ub, 1, TC_INT32, 4);
    tc_uop *outer = alu2(f, TC_OP_MUL, i, ic(f, 7)); /* created inside j's loop */
    tc_uop *inner = alu2(f, TC_OP_ADD, outer, j);
    assert_int_equal(outer->depth, 1);
    assert_int_equal(inner->depth, 2);
    tc_ub_end_range(&f->ub);
    tc_ub_end_range(&f->ub);
    assert_int_equal(tc_ub_linearize(&f->ub), TC_OK);
    /* order: ..., RANGE i, outer, RANGE j, inner, ENDRANGE, ENDRANGE */
    int pos_outer = outer->id, pos_j = j->id, pos_inner = inner->id;
    assert_true(i->id < pos_outer && pos_outer < pos_j && pos_j < pos_inner);
    fx_free(f);
}

/* an accumulator update stays in its loop even when its input does not
 * depend on the loop (summing a broadcast value) */
static void test_acc_update_pinned(void **state) {
    (void)state;
    fixture *f = fx_new();
    tc_uop *acc = tc_ub_acc(&f->ub, tc_ub_const(&f->ub, TC_FLOAT32, 0, 0));
    tc_ub_range(&f->ub, 0, TC_INT32, 5);
    tc_uop *x = tc_ub_const(&f->ub, TC_FLOAT32, 2.0, 0);
    tc_uop *upd = tc_ub_acc_update(&f->ub, TC_OP_ADD, acc, x);
    assert_int_equal(upd->depth, 1);
    assert_int_equal(upd->srcs[1]->depth, 1);
    tc_ub_end_range(&f->ub);
    assert_int_equal(tc_ub_linearize(&f->ub), TC_OK);
    fx_free(f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hash_consing),  cmocka_unit_test(test_constant_folding),
        cmocka_unit_test(test_padded_divmod),
        cmocka_unit_test(test_identities),    cmocka_unit_test(test_range_analysis),
        cmocka_unit_test(test_hoisting),      cmocka_unit_test(test_acc_update_pinned),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
