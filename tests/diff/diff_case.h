/* diff_case.h - how the differential suite builds a case: the main shape,
 * the step weights per family and the steps (leaves, ops, midway realizes,
 * composites, gradients, assigns) drawn from the generator of diff_gen.h.
 * Included after diff_gen.h by test_diff.c, which checks the sinks against
 * the oracle, and by tests/engine/test_export.c, which exports them. */
#ifndef DIFF_CASE_H
#define DIFF_CASE_H

/* cases per family: 300 in all */
static const int fam_cases[FAM_COUNT] = {
    [FAM_ELEMENTWISE] = 50, [FAM_MOVEMENT] = 40, [FAM_REDUCE] = 50, [FAM_INT] = 40,
    [FAM_HALF] = 25,        [FAM_EDGE] = 25,     [FAM_MIXED] = 30,  [FAM_COMPOSITE] = 40,
};

/* step weights per family (a row sums to anything) */
static const int fam_weights[FAM_COUNT][ST_COUNT] = {
    /* leaf un bin cmp move red int cast pat half realize composite grad assign */
    [FAM_ELEMENTWISE] = {1, 5, 5, 2, 0, 0, 0, 1, 0, 0, 0},
    [FAM_MOVEMENT] = {1, 2, 2, 1, 6, 1, 0, 0, 0, 0, 1},
    [FAM_REDUCE] = {1, 2, 2, 1, 1, 4, 0, 0, 3, 0, 1},
    [FAM_INT] = {1, 1, 0, 2, 1, 1, 6, 2, 0, 0, 0},
    [FAM_HALF] = {1, 2, 2, 0, 1, 1, 0, 1, 0, 4, 0},
    [FAM_EDGE] = {1, 2, 2, 1, 3, 3, 1, 1, 0, 0, 0},
    [FAM_MIXED] = {1, 2, 2, 1, 2, 2, 1, 1, 1, 1, 2, 1, 0, 0},
    [FAM_COMPOSITE] = {1, 1, 1, 0, 1, 1, 0, 0, 0, 0, 1, 6, 2, 1},
};

/* the case's main shape: small dims, 0-size and 1-element shapes in FAM_EDGE */
static void main_shape(gen *g) {
    int lo_nd = g->fam == FAM_MOVEMENT || g->fam == FAM_REDUCE || g->fam == FAM_COMPOSITE;
    g->ndim = (int)rint_(g, lo_nd, g->fam == FAM_MOVEMENT ? 4 : 3);
    for (int d = 0; d < g->ndim; d++) {
        if (g->fam == FAM_EDGE) g->shape[d] = (int64_t[]){0, 1, 1, 2, 3}[rint_(g, 0, 4)];
        else g->shape[d] = rint_(g, 1, g->fam == FAM_REDUCE ? 6 : 5);
    }
    if (g->fam == FAM_REDUCE && g->ndim && chance(g, 0.2)) /* a long reduction */
        g->shape[rint_(g, 0, g->ndim - 1)] = rint_(g, 30, 200);
    if (g->fam == FAM_EDGE && chance(g, 0.3))
        for (int d = 0; d < g->ndim; d++) g->shape[d] = 1;
    if (g->fam == FAM_MIXED && chance(g, 0.3)) { /* large enough for upcasts, locals, groups */
        int64_t numel = 1;
        g->ndim = (int)rint_(g, 1, 3);
        for (int d = 0; d < g->ndim; d++) {
            g->shape[d] = (int64_t[]){7, 16, 32, 64, 100}[rint_(g, 0, 4)];
            if (numel * g->shape[d] > NUMEL_MAX) g->shape[d] = NUMEL_MAX / numel;
            numel *= g->shape[d];
        }
    }
}

/* the dtype of a new leaf, by family */
static tc_dtype leaf_dtype(gen *g) {
    if (g->fam == FAM_INT)
        return (tc_dtype[]){TC_INT32, TC_INT32, TC_INT64, TC_UINT8, TC_BOOL}[rint_(g, 0, 4)];
    if (g->fam == FAM_EDGE && chance(g, 0.3)) return TC_INT32;
    return chance(g, 0.1) ? TC_INT32 : TC_FLOAT32;
}

static int step_leaf(gen *g) {
    int64_t s[NDIM_MAX];
    int nd = variant_shape(g, g->ndim, g->shape, s);
    int v = leaf(g, leaf_dtype(g), nd, s);
    if (v >= 0 && g->fam == FAM_HALF && chance(g, 0.6)) v = v_cast(g, v, TC_FLOAT16);
    return v;
}

static int step_unary(gen *g) {
    int a = pick(g, CAT_NUM, false);
    return a < 0 ? -2 : v_unary(g, a, (unop)rint_(g, 0, UN_COUNT - 1));
}

static int step_binary(gen *g) {
    int a = pick(g, CAT_NUM, false);
    if (a < 0) return -2;
    binop op = (binop)rint_(g, 0, BI_COUNT - 1);
    int b = partner(g, a, CAT_NUM, false);
    return b < 0 ? b : v_binary(g, a, b, op);
}

/* a comparison, then a use of the bool: where, a cast, or a logical op */
static int step_compare(gen *g) {
    int a = pick(g, CAT_NUM, true);
    if (a < 0) return -2;
    int b = partner(g, a, CAT_NUM, true);
    int c = b < 0 ? b : v_compare(g, a, b, (cmpop)rint_(g, 0, CMP_COUNT - 1));
    if (c < 0) return c;
    switch (rint_(g, 0, 3)) {
    case 0: {
        int x = partner(g, c, CAT_NUM, false), y = x < 0 ? x : partner(g, c, CAT_NUM, false);
        return y < 0 ? y : v_where(g, c, x, y);
    }
    case 1: return v_cast(g, c, chance(g, 0.5) ? TC_FLOAT32 : TC_INT32);
    case 2: {
        int d = partner(g, c, CAT_BOOL, true);
        return d < 0 ? d : v_intop(g, c, d, (intop)rint_(g, IO_AND, IO_XOR));
    }
    default: return v_intop(g, c, c, IO_NOT);
    }
}

static int step_move(gen *g) {
    int a = pick(g, CAT_ANY, false);
    return a < 0 ? -2 : v_move(g, a, (moveop)rint_(g, 0, MV_COUNT - 1));
}

static int step_reduce(gen *g) {
    int a = pick(g, CAT_NUM, false);
    if (a < 0) return -2;
    int axes[NDIM_MAX], naxes = random_axes(g, a, axes);
    redop op = (redop)rint_(g, 0, RD_COUNT - 1);
    bool keepdim = chance(g, 0.5);
    int correction = (int)rint_(g, 0, 1);
    return v_reduce(g, a, op, naxes, axes, keepdim, correction);
}

static int step_int(gen *g) {
    int a = pick(g, chance(g, 0.7) ? CAT_INT : CAT_BOOL, false);
    if (a < 0) a = step_leaf(g);
    if (a < 0 || is_float(dt_of(g, a))) return -2;
    intop op = (intop)rint_(g, 0, IO_COUNT - 1);
    if (op >= IO_NOT) return v_intop(g, a, a, op);
    int b = partner(g, a, chance(g, 0.8) ? CAT_INT : CAT_BOOL, false);
    return b < 0 ? b : v_intop(g, a, b, op);
}

static int step_cast(gen *g) {
    int a = pick(g, CAT_ANY, false);
    /* drawn from the dtypes up to uint32 (those there when the seeds were
     * soaked): a dtype added to the enum must not reshuffle every seed's case
     * (float64 and later ones have tests/diff/test_float64.c and the like) */
    return a < 0 ? -2 : v_cast(g, a, (tc_dtype)rint_(g, 0, TC_UINT32));
}

static int step_pattern(gen *g) {
    int a = pick(g, CAT_FLOAT, false);
    return a < 0 ? -2 : v_pattern(g, a, (patop)rint_(g, 0, PAT_COUNT - 1));
}

/* a float value moved to float16, then one to three float16 ops */
static int step_half(gen *g) {
    int a = pick(g, CAT_FLOAT, false);
    if (a < 0) return -2;
    if (dt_of(g, a) != TC_FLOAT16) a = v_cast(g, a, TC_FLOAT16);
    for (int k = (int)rint_(g, 1, 3); k > 0 && a >= 0; k--) {
        int r;
        if (chance(g, 0.5)) {
            r = v_unary(g, a, (unop)rint_(g, 0, UN_COUNT - 1));
        } else {
            int b = partner(g, a, CAT_FLOAT, false);
            if (b >= 0 && dt_of(g, b) != TC_FLOAT16) b = v_cast(g, b, TC_FLOAT16);
            r = b < 0 ? b : v_binary(g, a, b, (binop)rint_(g, 0, BI_COUNT - 1));
        }
        if (r == -1) return -1;
        if (r >= 0) a = r;
    }
    return a;
}

/* realizes a random intermediate now, checking it against the oracle */
static int step_realize(gen *g) {
    int a = pick(g, CAT_ANY, false);
    if (a < 0 || tc_is_realized(g->pool[a].t)) return -2;
    check(g, &a, 1, "midway realize");
    g->pool[a].err = 0; /* downstream oracles now read the realized buffer */
    g->pool[a].exact = true;
    g->realizes++;
    return a;
}

static int step_composite(gen *g) {
    int a = pick(g, CAT_FLOAT, false);
    return a < 0 ? -2 : v_composite(g, a, (compop)rint_(g, 0, C_COUNT - 1));
}

static int do_step(gen *g, stepkind k) {
    cov[COV_STEP][k]++;
    switch (k) {
    case ST_LEAF: return step_leaf(g);
    case ST_UNARY: return step_unary(g);
    case ST_BINARY: return step_binary(g);
    case ST_COMPARE: return step_compare(g);
    case ST_MOVE: return step_move(g);
    case ST_REDUCE: return step_reduce(g);
    case ST_INT: return step_int(g);
    case ST_CAST: return step_cast(g);
    case ST_PATTERN: return step_pattern(g);
    case ST_HALF: return step_half(g);
    case ST_REALIZE: return step_realize(g);
    case ST_COMPOSITE: return step_composite(g);
    case ST_GRAD: return v_grad(g);
    case ST_ASSIGN: return v_assign(g);
    case ST_COUNT: break;
    }
    return -2;
}

static stepkind pick_step(gen *g) {
    const int *w = fam_weights[g->fam];
    int total = 0;
    for (int k = 0; k < ST_COUNT; k++) total += w[k];
    int r = (int)rint_(g, 0, total - 1);
    for (int k = 0; k < ST_COUNT; k++)
        if ((r -= w[k]) < 0) return (stepkind)k;
    return ST_LEAF;
}

/* builds a case: its main shape, leaves, then 4..12 steps; puts the sinks
 * (computed values no later value uses, newest first) in targets and
 * returns how many (0 when the case failed or made nothing) */
static int build_case(gen *g, int targets[TARGETS_MAX]) {
    main_shape(g);
    for (int k = (int)rint_(g, 1, 2); k > 0 && !g->failed; k--) step_leaf(g);
    int steps = (int)rint_(g, 4, 12), done = 0;
    for (int tries = 0; done < steps && tries < 4 * steps && !g->failed; tries++) {
        int r = do_step(g, pick_step(g));
        if (r >= 0) done++;
    }
    if (g->failed || g->n == 0) return 0;
    int nt = 0;
    targets[0] = g->n - 1;
    for (int i = g->n - 1; i >= 0 && nt < TARGETS_MAX; i--)
        if (!g->pool[i].is_used && (!g->pool[i].is_leaf || i == g->n - 1)) targets[nt++] = i;
    return nt;
}

#endif /* DIFF_CASE_H */
