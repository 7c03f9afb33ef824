/* test_diff.c - the differential suite: random lazy graphs built through the
 * public API, realized by the whole pipeline (schedule -> codegen -> render
 * -> runtime), and compared with the reference evaluator (src/engine/ref.c).
 *
 * How a case works
 * - A case is a fixed seed. The generator (diff_gen.h, diff_ops.h) builds a
 *   random graph using tinyc.h only: leaves (data, full, arange, rand, eye)
 *   of float32, int32, int64, uint8 and bool, float16 through casts; chains
 *   of every elementwise function with broadcast partners; movement ops on
 *   leaves and intermediates; reductions with random axes and keepdim;
 *   softmax-like patterns that feed reductions back into elementwise ops;
 *   0-size, 1-element and 0-d shapes; and sometimes an intermediate realized
 *   midway (and checked on the spot).
 * - Each value carries facts that keep the arithmetic safe and size the
 *   tolerance: an interval holding every element, an error bound `err` on
 *   |pipeline - oracle| (Lipschitz factor of each op plus a rounding term;
 *   reductions add n*n*eps*max|x| because the pipeline may sum in another
 *   order), and `exact` (no sum-like reduce or float16 math upstream, so the
 *   pipeline must agree bit for bit). Comparisons and float->int casts take
 *   only exact operands, so rounding can never flip a bool.
 * - At the end every sink (a computed value nothing else uses) is checked
 *   (diff_check.h): the oracle evaluates its unrealized graph
 *   (tc_ref_eval(tc_tensor_node(t))) and the graph is dumped to a string,
 *   since realize drops it; then tc_realize of all sinks together (or one by
 *   one, in 30% of cases), tc_to_host and tc_allclose. Tolerances: ints and
 *   bools exact; float32 rtol 1e-5, float16 rtol 4e-3; atol = 1e-6*max(1,
 *   max|oracle|) plus, for values that need not be exact, min(2*err,
 *   c*max(1, max|oracle|)) with c = 1e-3 (float32) or 2e-2 (float16). The
 *   kernels tc_realize launched must be the count tc_schedule_kernel_count
 *   predicted.
 * - Every movement op is also checked on its own: its oracle must equal the
 *   movement done on the host to its input's oracle, byte for byte (the
 *   oracle reads views through graph's trackers, which the pipeline shares).
 * - A failure prints the seed, the expression (one line per value), the
 *   tolerance, the kernel counts and the graph, then the case stops; the
 *   family's test fails after all its cases ran.
 *
 * Output and knobs: one summary line per family (cases, kernels, midway
 * realizes, failures). TC_DIFF_VERBOSE=1 prints one line per case, 2 also
 * its expression; TC_DIFF_SEED=<seed> runs only that case, TC_DIFF_FAMILY=<name>
 * only that family (the names the summaries print); TC_DIFF_SCALE=<k>
 * runs k times as many cases (soak runs), TC_DIFF_SKIP=<k> leaves out the
 * cases a run at scale k covers (a wide run beside the default one),
 * TC_DIFF_CASES=<n> at most the first n of each family. A last test checks
 * that every generator op ran at least once.
 */
#include "diff_gen.h"
#include "diff_case.h"

/* builds and checks one case */
static void run_case(gen *g) {
    int targets[TARGETS_MAX], nt = build_case(g, targets);
    if (nt == 0) return;
    if (nt > 1 && chance(g, 0.3)) { /* one realize each instead of one for all */
        for (int i = 0; i < nt && !g->failed; i++)
            check(g, &targets[i], 1, "final (one of several)");
        return;
    }
    check(g, targets, nt, nt > 1 ? "final (several outputs in one realize)" : "final");
}

/* FAM_MIXED also runs the unoptimised and unfused paths: flags set on top of the
 * environment's (noopt, nofuse), which run_family restores after the family */
static void mixed_flags(gen *g, int i, int64_t noopt, int64_t nofuse) {
    bool is_noopt = noopt > 0 || i % 3 == 1, is_nofuse = nofuse > 0 || i % 3 == 2;
    assert_int_equal(tc_set_flag("TC_NOOPT", is_noopt), TC_OK);
    assert_int_equal(tc_set_flag("TC_NOFUSE", is_nofuse), TC_OK);
    say(g, "  (TC_NOOPT=%d TC_NOFUSE=%d)\n", is_noopt, is_nofuse);
}

static void run_family(family fam) {
    const char *only = getenv("TC_DIFF_SEED"), *fam_only = getenv("TC_DIFF_FAMILY");
    if (fam_only && strcmp(fam_only, fam_names[fam]) != 0) skip();
    int verbose = getenv("TC_DIFF_VERBOSE") ? atoi(getenv("TC_DIFF_VERBOSE")) : 0;
    int failures = 0, cases = 0, kmin = 1 << 30, kmax = 0, realizes = 0;
    int64_t kernels = 0;
    int scale = getenv("TC_DIFF_SCALE") ? atoi(getenv("TC_DIFF_SCALE")) : 1;
    int most = getenv("TC_DIFF_CASES") ? atoi(getenv("TC_DIFF_CASES")) : 0;
    int skip_scales = getenv("TC_DIFF_SKIP") ? atoi(getenv("TC_DIFF_SKIP")) : 0;
    int n_cases = fam_cases[fam] * (scale > 1 ? scale : 1);
    if (most > 0 && most < n_cases) n_cases = most;
    int first = skip_scales > 0 ? fam_cases[fam] * skip_scales : 0;
    int64_t noopt = tc_get_flag("TC_NOOPT"), nofuse = tc_get_flag("TC_NOFUSE");
    for (int i = first; i < n_cases; i++) {
        uint64_t seed = (uint64_t)fam * 100003u + (uint64_t)i * 7919u + 17u;
        if (only && strtoull(only, NULL, 0) != seed) continue;
        gen *g = gen_new(fam, seed);
        assert_non_null(g);
        if (fam == FAM_MIXED) mixed_flags(g, i, noopt, nofuse);
        run_case(g);
        cases++;
        failures += g->failed;
        kernels += g->kernels;
        realizes += g->realizes;
        if (g->kernels < kmin) kmin = g->kernels;
        if (g->kernels > kmax) kmax = g->kernels;
        if (verbose || g->failed)
            printf("diff %s seed %llu: %d values, %d kernels, %d midway realizes%s\n",
                   fam_names[fam], (unsigned long long)seed, g->n, g->kernels, g->realizes,
                   g->failed ? " FAILED" : "");
        if (verbose > 1) printf("%s", g->log);
        gen_free(g);
        if (tc_graph_live_nodes() != 0) {
            printf("diff %s seed %llu: %lld graph nodes leaked after releasing every tensor\n",
                   fam_names[fam], (unsigned long long)seed, (long long)tc_graph_live_nodes());
            failures++;
        }
    }
    tc_set_flag("TC_NOOPT", noopt);
    tc_set_flag("TC_NOFUSE", nofuse);
    printf("diff %s: %d cases, %lld kernels (%d..%d per case), %d midway realizes, %d failed\n",
           fam_names[fam], cases, (long long)kernels, cases ? kmin : 0, kmax, realizes, failures);
    fflush(stdout);
    tc_shutdown();
    assert_int_equal(failures, 0);
}

static void test_elementwise(void **state) {
    (void)state;
    run_family(FAM_ELEMENTWISE);
}
static void test_movement(void **state) {
    (void)state;
    run_family(FAM_MOVEMENT);
}
static void test_reduce(void **state) {
    (void)state;
    run_family(FAM_REDUCE);
}
static void test_int_bool(void **state) {
    (void)state;
    run_family(FAM_INT);
}
static void test_half(void **state) {
    (void)state;
    run_family(FAM_HALF);
}
static void test_edge_shapes(void **state) {
    (void)state;
    run_family(FAM_EDGE);
}
static void test_mixed_realize(void **state) {
    (void)state;
    run_family(FAM_MIXED);
}

/* every op of the generator ran at least once over the whole suite */
static void test_coverage(void **state) {
    (void)state;
    if (getenv("TC_DIFF_SEED") || getenv("TC_DIFF_FAMILY")) skip();
    int missing = 0;
    for (int k = 0; k < COV_COUNT; k++)
        for (int i = 0; i < cov_len[k]; i++)
            if (!cov[k][i]) {
                printf("diff coverage: %s #%d never ran\n", cov_names[k], i);
                missing++;
            }
    tc_shutdown();
    assert_int_equal(missing, 0);
}

/* ---- regressions: small hand-built graphs that exposed pipeline bugs in soak runs
 * (TC_DIFF_SCALE=20), checked the same way as the random cases ---- */

/* pushes a given leaf (a tensor the case made by hand) */
static int given(gen *g, tc_tensor *t, double lo, double hi, const char *what) {
    return push_leaf(g, push(g, t, lo, hi, 0, true, "%s", what));
}

/* uint8 math wraps at every op, also inside a fused kernel (soak seeds int_bool
 * 624705, 2430237, 2469832, 4988074): cast(x - 4, int32) is (x - 4) mod 256 */
static void reg_uint8_wrap(gen *g) {
    const uint8_t x[4] = {1, 50, 3, 200};
    int a = given(g, tc_from_data(x, TC_UINT8, 1, (int64_t[]){4}, NULL), 1, 200,
                  "data(uint8, {1, 50, 3, 200})");
    int four = a < 0 ? a : v_scalar(g, 4, TC_UINT8);
    int d = four < 0 ? four : v_intop(g, a, four, IO_SUB);
    int c = d < 0 ? d : v_cast(g, d, TC_INT32);
    if (c >= 0) check(g, &c, 1, "regression: uint8 wrap inside a fused kernel");
}

/* integer division of a negative constant (soak seeds int_bool 4845532, 5075183,
 * 5653270): the guard for a divisor of -1 was rendered as "--5" */
static void reg_idiv_negative_const(gen *g) {
    const int32_t x[3] = {-3, 1, 7};
    int a =
        given(g, tc_full(1, (int64_t[]){3}, -5, TC_INT32, NULL), -5, -5, "full((3), -5, int32)");
    int b = a < 0 ? a
                  : given(g, tc_from_data(x, TC_INT32, 1, (int64_t[]){3}, NULL), -3, 7,
                          "data(int32, {-3, 1, 7})");
    int q = b < 0 ? b : push(g, B(tc_idiv, R(g, a), R(g, b)), -5, 5, 0, true, "idiv(v0, v1)");
    if (q >= 0) check(g, &q, 1, "regression: idiv of a negative constant");
}

/* a 0-element view of a reduce feeding an elementwise op (soak seed edge_shapes
 * 2891570): scheduling failed with an internal error */
static void reg_empty_view_of_reduce(gen *g) {
    const float one = 1;
    int x = given(g, tc_from_data(&one, TC_FLOAT32, 0, NULL, NULL), 1, 1, "data(float32, 1)");
    int e = x < 0 ? x
                  : push(g, tc_expand(g->pool[x].t, 1, (int64_t[]){2}), 1, 1, 0, true,
                         "expand(v0, (2))");
    int m = e < 0 ? e
                  : push(g, tc_min(g->pool[e].t, 0, NULL, true), 1, 1, 0, true,
                         "min(v1, axes=all, keepdim)");
    int z = m < 0 ? m
                  : push(g, tc_shrink(g->pool[m].t, (int64_t[]){1, 1}), 1, 1, 0, true,
                         "shrink(v2, (1,1))");
    int r = z < 0 ? z : push(g, U(tc_exp, R(g, z)), 1, 1, 0, true, "exp(v3)");
    if (r >= 0) check(g, &r, 1, "regression: 0-element view of a reduce");
}

static tc_tensor *cast_f32(tc_tensor *t) {
    return tc_cast(t, TC_FLOAT32);
}

/* float16 ops round to half after each op, also inside one kernel (soak seeds
 * elementwise 7016251, half 637599): cast(h * c * c, float32), h float16 */
static void reg_half_rounding(gen *g) {
    const float x[3] = {1.0f, 0.3f, 1.7f};
    int f = given(g, tc_from_data(x, TC_FLOAT32, 1, (int64_t[]){3}, NULL), 0.3, 1.7,
                  "data(float32, {1, 0.3, 1.7})");
    int h = f < 0 ? f : v_cast(g, f, TC_FLOAT16);
    int c = h < 0 ? h : v_scalar(g, 0.3333, TC_FLOAT16);
    tc_tensor *p = h < 0 || c < 0 ? NULL : B(tc_mul, B(tc_mul, R(g, h), R(g, c)), R(g, c));
    int r = c < 0 ? c : push(g, U(cast_f32, p), 0, 1, 0, true, "cast(v1 * v2 * v2, float32)");
    if (r >= 0) check(g, &r, 1, "regression: float16 rounding between fused ops");
}

static void test_composite(void **state) {
    (void)state;
    run_family(FAM_COMPOSITE);
}

/* a value that reads a buffer's old contents, used together with a pending tc_assign
 * to that buffer (soak seeds composite 1547371, 5665251, 6140391): x := x * 0.5, then
 * (x_old * 0.5) + x failed with "cycle in the schedule"; the API promises that readers
 * of the old value are scheduled first */
static void reg_assign_old_reader(gen *g) {
    const float x[3] = {1, -2, 3};
    int d = given(g, tc_from_data(x, TC_FLOAT32, 1, (int64_t[]){3}, NULL), -2, 3,
                  "data(float32, {1, -2, 3})");
    int h = d < 0 ? d : v_scalar(g, 0.5, TC_FLOAT32);
    int v = h < 0 ? h : push(g, B(tc_mul, R(g, d), R(g, h)), -1, 1.5, 0, true, "v0 * v1");
    if (v < 0) return;
    if (tc_assign(g->pool[d].t, g->pool[v].t) != TC_OK) {
        push(g, NULL, 0, 0, 0, false, "tc_assign(v0, v2)");
        return;
    }
    say(g, "  v0 := assign(v0, v2)\n");
    int y = push(g, B(tc_add, R(g, v), R(g, d)), -2, 3, 0, true, "v2 + v0");
    if (y >= 0) check(g, &y, 1, "regression: a reader of the old value beside its assign");
}

/* three outputs in one realize, no assign anywhere (soak seed half 685113):
 * {h * c, -h[0:1] + x, h} with h = cast(x, float16) failed with "cycle in the
 * schedule: a kernel reads a buffer that an assign overwrites" */
static void reg_multi_output_cycle(gen *g) {
    const float x[4] = {1, -2, 3, 0.5f}, c = 0.7f;
    int a = given(g, tc_from_data(x, TC_FLOAT32, 1, (int64_t[]){4}, NULL), -2, 3,
                  "data(float32, {1, -2, 3, 0.5})");
    int b = a < 0 ? a
                  : given(g, tc_from_data(&c, TC_FLOAT32, 1, (int64_t[]){1}, NULL), 0.7, 0.7,
                          "data(float32, {0.7})");
    int h = b < 0 ? b : v_cast(g, a, TC_FLOAT16);
    int hc = h < 0 ? h : v_cast(g, b, TC_FLOAT16);
    int p = hc < 0 ? hc : v_binary(g, h, hc, BI_MUL);
    tc_tensor *first = h < 0 ? NULL : tc_shrink(g->pool[h].t, (int64_t[]){0, 1});
    int q = p < 0 ? p
                  : push(g, B(tc_add, U(tc_neg, first), R(g, a)), -4, 5, 0.01, false,
                         "-shrink(v2, (0,1)) + v0");
    if (q < 0) return;
    g->pool[q].has_half = true;
    int targets[3] = {p, q, h};
    check(g, targets, 3, "regression: three outputs in one realize, no assign");
}

/* pushes pool[x] * pool[d] for the assign regression */
static int scaled(gen *g, int x, int d, const char *what) {
    return push(g, B(tc_mul, R(g, x), R(g, d)), -8, 8, 0, true, "%s", what);
}

/* three assigns in one realize, two beside readers of the old value, one reading
 * another's new value (soak seed composite 2980710): x := x*0.5 beside x*0.5 - x*0.5,
 * a := a*b, y := y*|a| beside -(y*|a|) failed with "cycle in the schedule" */
static void reg_three_assigns(gen *g) {
    const float d[5] = {-1.1f, -0.7f, 0.2f, 0.9f, 1.4f};
    int64_t s5[1] = {5};
    int x = given(g, tc_from_data(d, TC_FLOAT32, 1, s5, NULL), -1.1, 1.4, "x: data(5)");
    int a = x < 0 ? x : given(g, tc_from_data(d, TC_FLOAT32, 1, s5, NULL), -1.1, 1.4, "a");
    int b = a < 0 ? a : given(g, tc_from_data(d, TC_FLOAT32, 1, s5, NULL), -1.1, 1.4, "b");
    int y = b < 0 ? b : given(g, tc_from_data(d, TC_FLOAT32, 1, s5, NULL), -1.1, 1.4, "y");
    int h = y < 0 ? y : v_scalar(g, 0.5, TC_FLOAT32);
    int xv = h < 0 ? h : scaled(g, x, h, "v0 * 0.5");
    int r1 = xv < 0 ? xv : push(g, B(tc_sub, R(g, xv), R(g, xv)), 0, 0, 0, true, "v5 - v5");
    int av = r1 < 0 ? r1 : scaled(g, a, b, "v1 * v2");
    if (av < 0) return;
    if (tc_assign(g->pool[x].t, g->pool[xv].t) != TC_OK ||
        tc_assign(g->pool[a].t, g->pool[av].t) != TC_OK) {
        push(g, NULL, 0, 0, 0, false, "tc_assign");
        return;
    }
    say(g, "  v0 := assign(v0, v5); v1 := assign(v1, v7)\n");
    int ya = push(g, U(tc_abs, R(g, a)), 0, 8, 0, true, "abs(v1)");
    int yv = ya < 0 ? ya : scaled(g, y, ya, "v3 * v8");
    if (yv < 0) return;
    if (tc_assign(g->pool[y].t, g->pool[yv].t) != TC_OK) {
        push(g, NULL, 0, 0, 0, false, "tc_assign");
        return;
    }
    say(g, "  v3 := assign(v3, v9)\n");
    int r2 = push(g, U(tc_neg, R(g, yv)), -8, 8, 0, true, "-v9");
    int targets[4] = {r2, y, r1, x};
    if (r2 >= 0) check(g, targets, 4, "regression: three assigns in one realize");
}

static void test_regressions(void **state) {
    (void)state;
    if (getenv("TC_DIFF_SEED") || getenv("TC_DIFF_FAMILY")) skip();
    static void (*const cases[])(gen *) = {
        reg_uint8_wrap,        reg_idiv_negative_const, reg_empty_view_of_reduce, reg_half_rounding,
        reg_assign_old_reader, reg_multi_output_cycle,  reg_three_assigns};
    int failures = 0, n = (int)(sizeof cases / sizeof cases[0]);
    for (int i = 0; i < n; i++) {
        gen *g = gen_new(FAM_MIXED, 0);
        assert_non_null(g);
        cases[i](g);
        failures += g->failed;
        gen_free(g);
    }
    printf("diff regressions: %d cases, %d failed\n", n, failures);
    tc_shutdown();
    assert_int_equal(failures, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_elementwise),   cmocka_unit_test(test_movement),
        cmocka_unit_test(test_reduce),        cmocka_unit_test(test_int_bool),
        cmocka_unit_test(test_half),          cmocka_unit_test(test_edge_shapes),
        cmocka_unit_test(test_mixed_realize), cmocka_unit_test(test_composite),
        cmocka_unit_test(test_regressions),   cmocka_unit_test(test_coverage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
