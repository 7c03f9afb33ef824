/* diff_ops.h - the op builders (v_*) and the checker of the differential
 * suite. Part of diff_gen.h (included at its end); see there for the
 * conventions: pool indices in, a pool index out, -1 failed, -2 refused.
 * Each builder first works out the result's facts from its operands' facts
 * (interval arithmetic, Lipschitz factors), refuses when a guard fails, and
 * only then calls the API.
 */
#ifndef DIFF_OPS_H
#define DIFF_OPS_H

#define LN2 0.69314718055994530942

/* The run's device computes float math as the oracle does, bit for bit:
 * the CPU's kernels use the oracle's own exp2/log2/sin and plain IEEE ops.
 * GPU dialects call the device's math library (a few ulp off) and may fuse
 * a*b+c into one rounding, so there an add, a division or a transcendental
 * result is not exact (a float->int cast of pow(x, 2) gave 35 for 36 on
 * OpenCL and CUDA, TC_DIFF_SCALE=5 seed 1647169). TC_DEVICE decides. */
static bool rounds_like_oracle(void) {
    static int cached = -1;
    if (cached < 0) {
        const char *d = getenv("TC_DEVICE");
        cached = !d || !*d || ((d[0] == 'c' || d[0] == 'C') && (d[1] == 'p' || d[1] == 'P') &&
                               (d[2] == 'u' || d[2] == 'U'));
    }
    return cached != 0;
}

static int v_scalar(gen *g, double v, tc_dtype dt) {
    return push_leaf(g, push(g, S(v, dt), v, v, 0, true, "%g (0-d %s)", v, tc_dtype_name(dt)));
}

/* ---- unary float functions ---- */

static const struct {
    const char *name;              /* in the log */
    tc_tensor *(*fn)(tc_tensor *); /* the public call */
    double floor;                  /* > 0: the argument must be >= floor, else abs(x)+floor */
    int steps;                     /* primitive ops that may round */
} un_info[UN_COUNT] = {
    [UN_NEG] = {"neg", tc_neg, 0, 1},      [UN_EXP] = {"exp", tc_exp, 0, 2},
    [UN_LOG] = {"log", tc_log, 0.1, 2},    [UN_EXP2] = {"exp2", tc_exp2, 0, 1},
    [UN_LOG2] = {"log2", tc_log2, 0.1, 1}, [UN_SQRT] = {"sqrt", tc_sqrt, 0.1, 1},
    [UN_SIN] = {"sin", tc_sin, 0, 1},      [UN_COS] = {"cos", tc_cos, 0, 2},
    [UN_RELU] = {"relu", tc_relu, 0, 1},   [UN_SIGMOID] = {"sigmoid", tc_sigmoid, 0, 4},
    [UN_TANH] = {"tanh", tc_tanh, 0, 6},   [UN_RECIP] = {"recip", tc_recip, 0.5, 1},
    [UN_ABS] = {"abs", tc_abs, 0, 1},      [UN_SQUARE] = {"square", tc_square, 0, 1},
};

/* op over [lo, hi]: the result's interval and a Lipschitz bound; false where unsafe */
static bool un_facts(unop op, double lo, double hi, double *olo, double *ohi, double *L) {
    double m = mag(lo, hi), mn = minabs(lo, hi);
    *L = 1;
    switch (op) {
    case UN_NEG: *olo = -hi, *ohi = -lo; return true;
    case UN_EXP: *olo = exp(lo), *ohi = exp(hi), *L = *ohi; return hi <= 10;
    case UN_EXP2: *olo = exp2(lo), *ohi = exp2(hi), *L = *ohi * LN2; return hi <= 14;
    case UN_LOG: *olo = log(lo), *ohi = log(hi), *L = 1 / lo; return true;
    case UN_LOG2: *olo = log2(lo), *ohi = log2(hi), *L = 1 / (lo * LN2); return true;
    case UN_SQRT: *olo = sqrt(lo), *ohi = sqrt(hi), *L = 0.5 / sqrt(lo); return true;
    case UN_SIN:
    case UN_COS: *olo = -1, *ohi = 1; return m < 1e4;
    case UN_RELU: *olo = fmax(lo, 0), *ohi = fmax(hi, 0); return true;
    case UN_SIGMOID: *olo = 1 / (1 + exp(-lo)), *ohi = 1 / (1 + exp(-hi)), *L = 0.25; return true;
    case UN_TANH: *olo = tanh(lo), *ohi = tanh(hi); return true;
    case UN_RECIP: *olo = 1 / hi, *ohi = 1 / lo, *L = 1 / (lo * lo); return true;
    case UN_ABS: *olo = mn, *ohi = m; return true;
    case UN_SQUARE: *olo = mn * mn, *ohi = m * m, *L = 2 * m; return m <= 100;
    case UN_COUNT: break;
    }
    return false;
}

static int v_unary(gen *g, int a, unop op) {
    const val *x = &g->pool[a];
    tc_dtype dt = dt_of(g, a);
    if (dt == TC_UINT8 || dt == TC_BOOL) return -2; /* wrapping and bool math: v_intop */
    bool keeps = op == UN_NEG || op == UN_RELU || op == UN_ABS || op == UN_SQUARE;
    tc_dtype odt = keeps ? dt : float_of(dt);
    double lo = x->lo, hi = x->hi, c = un_info[op].floor, olo, ohi, L;
    bool shift = c > 0 && lo < c;
    if (shift) {
        double m = mag(lo, hi);
        lo = minabs(lo, hi) + c;
        hi = m + c;
    }
    bool h = half_math(g, a) || odt == TC_FLOAT16;
    if (!un_facts(op, lo, hi, &olo, &ohi, &L) || mag(olo, ohi) > limit(odt)) return -2;
    if ((op == UN_SIN || op == UN_COS) && x->err > 0.05) return -2; /* phase lost */
    double err = L * x->err + un_info[op].steps * rnd(odt, mag(olo, ohi));
    if (too_noisy(h, err, olo, ohi)) return -2;
    tc_tensor *arg = R(g, a);
    char in[48];
    if (shift) {
        arg = B(tc_add, U(tc_abs, arg), S(c, float_of(dt)));
        snprintf(in, sizeof in, "abs(v%d) + %g", a, c);
    } else {
        snprintf(in, sizeof in, "v%d", a);
    }
    cov[COV_UNARY][op]++;
    bool same_everywhere = op == UN_NEG || op == UN_RELU || op == UN_ABS || op == UN_SQUARE;
    int v = push(g, U(un_info[op].fn, arg), olo, ohi, err,
                 x->exact && !h && (same_everywhere || rounds_like_oracle()), "%s(%s)", un_info[op].name, in);
    return set_half(g, v, h);
}

/* ---- binary arithmetic (floats, and int32/int64 that cannot wrap) ---- */

/* the facts of a op b into lo/hi/La/Lb; *how: DIV 1 = raw denominator, POW 1..3 = integer
 * exponent (0 = pow(abs(a)+0.5, 2*sin(b))); false when a guard fails */
static bool bi_facts(gen *g, binop op, const val *x, const val *y, double *lo, double *hi,
                     double *La, double *Lb, int *how) {
    double Ma = mag(x->lo, x->hi), Mb = mag(y->lo, y->hi);
    *La = *Lb = 1;
    *how = 0;
    switch (op) {
    case BI_ADD: *lo = x->lo + y->lo, *hi = x->hi + y->hi; return true;
    case BI_SUB: *lo = x->lo - y->hi, *hi = x->hi - y->lo; return true;
    case BI_MUL:
        corners(x->lo, x->hi, y->lo, y->hi, lo, hi);
        *La = Mb, *Lb = Ma;
        return Ma * Mb <= 1e5;
    case BI_DIV: {
        *how = y->lo >= 0.5;
        double dlo = *how ? y->lo : minabs(y->lo, y->hi) + 0.5, dhi = *how ? y->hi : Mb + 0.5;
        corners(x->lo, x->hi, 1 / dhi, 1 / dlo, lo, hi);
        *La = 1 / dlo, *Lb = Ma / (dlo * dlo);
        return true;
    }
    case BI_MAX: *lo = fmax(x->lo, y->lo), *hi = fmax(x->hi, y->hi); return true;
    case BI_MIN: *lo = fmin(x->lo, y->lo), *hi = fmin(x->hi, y->hi); return true;
    case BI_POW:
        if (chance(g, 0.4)) {
            *how = (int)rint_(g, 2, 3);
            *lo = *how == 2 ? pow(minabs(x->lo, x->hi), 2) : pow(x->lo, 3);
            *hi = *how == 2 ? Ma * Ma : pow(x->hi, 3);
            *La = *how * pow(Ma, *how - 1), *Lb = 0;
        } else {
            double b0 = minabs(x->lo, x->hi) + 0.5, b1 = Ma + 0.5;
            double p[5] = {1, pow(b0, -2), pow(b0, 2), pow(b1, -2), pow(b1, 2)};
            *lo = *hi = 1;
            for (int i = 1; i < 5; i++) *lo = fmin(*lo, p[i]), *hi = fmax(*hi, p[i]);
            *La = 2 * fmax(b1, pow(b0, -3));
            *Lb = 2 * fmax(fabs(log(b0)), fabs(log(b1))) * *hi;
        }
        return Ma <= 20;
    case BI_COUNT: break;
    }
    return false;
}

static int v_binary(gen *g, int a, int b, binop op) {
    static const char *const names[BI_COUNT] = {"+", "-", "*", "/", "maximum", "minimum", "pow"};
    static const int steps[BI_COUNT] = {1, 2, 1, 2, 1, 3, 4};
    const val *x = &g->pool[a], *y = &g->pool[b];
    tc_dtype da = dt_of(g, a), db = dt_of(g, b), pd = promote(da, db);
    if (pd == TC_BOOL || pd == TC_UINT8) return -2; /* wrapping and bool math: v_intop */
    tc_dtype odt = op == BI_DIV || op == BI_POW ? float_of(pd) : pd;
    double lo, hi, La, Lb;
    int how;
    bool h = half_math(g, a) || half_math(g, b) || odt == TC_FLOAT16;
    if (!bi_facts(g, op, x, y, &lo, &hi, &La, &Lb, &how) || mag(lo, hi) > limit(odt)) return -2;
    double err = La * x->err + Lb * y->err + steps[op] * rnd(odt, mag(lo, hi));
    if (too_noisy(h, err, lo, hi)) return -2;
    tc_tensor *r = NULL;
    char e[96];
    snprintf(e, sizeof e, op >= BI_MAX ? "%s(v%d, v%d)" : "v%2$d %1$s v%3$d", names[op], a, b);
    switch (op) {
    case BI_ADD: r = B(tc_add, R(g, a), R(g, b)); break;
    case BI_SUB: r = B(tc_sub, R(g, a), R(g, b)); break;
    case BI_MUL: r = B(tc_mul, R(g, a), R(g, b)); break;
    case BI_MAX: r = B(tc_maximum, R(g, a), R(g, b)); break;
    case BI_MIN: r = B(tc_minimum, R(g, a), R(g, b)); break;
    case BI_DIV:
        if (how) {
            r = B(tc_div, R(g, a), R(g, b));
        } else {
            r = B(tc_div, R(g, a), B(tc_add, U(tc_abs, R(g, b)), S(0.5, float_of(db))));
            snprintf(e, sizeof e, "v%d / (abs(v%d) + 0.5)", a, b);
        }
        break;
    case BI_POW:
    case BI_COUNT:
        if (how) {
            r = B(tc_pow, R(g, a), S(how, float_of(da)));
            snprintf(e, sizeof e, "pow(v%d, %d)", a, how);
        } else {
            r = B(tc_pow, B(tc_add, U(tc_abs, R(g, a)), S(0.5, float_of(da))),
                  B(tc_mul, U(tc_sin, R(g, b)), S(2, float_of(db))));
            snprintf(e, sizeof e, "pow(abs(v%d) + 0.5, 2*sin(v%d))", a, b);
        }
        break;
    }
    cov[COV_BINARY][op]++;
    bool same_everywhere = op == BI_MUL || op == BI_MAX || op == BI_MIN;
    return set_half(g, push(g, r, lo, hi, err, x->exact && y->exact && !h && (same_everywhere || rounds_like_oracle()),
                            "%s", e), h);
}

/* ---- comparisons, where, casts ---- */

static int v_compare(gen *g, int a, int b, cmpop op) {
    static const char *const names[CMP_COUNT] = {"<", ">", "<=", ">=", "==", "!="};
    static tc_tensor *(*const fns[CMP_COUNT])(tc_tensor *, tc_tensor *) = {tc_lt, tc_gt, tc_le,
                                                                           tc_ge, tc_eq, tc_ne};
    if (!g->pool[a].exact || !g->pool[b].exact) return -2; /* rounding could flip it */
    cov[COV_CMP][op]++;
    return push(g, B(fns[op], R(g, a), R(g, b)), 0, 1, 0, true, "v%d %s v%d", a, names[op], b);
}

static int v_where(gen *g, int c, int a, int b) {
    const val *x = &g->pool[a], *y = &g->pool[b];
    if (dt_of(g, c) != TC_BOOL || !g->pool[c].exact || !bcast(x->t, y->t) ||
        !bcast(g->pool[c].t, x->t) || !bcast(g->pool[c].t, y->t))
        return -2;
    tc_tensor *cond = R(g, c), *ta = R(g, a), *tb = R(g, b);
    tc_tensor *r = cond && ta && tb ? tc_where(cond, ta, tb) : NULL;
    tc_release(cond);
    tc_release(ta);
    tc_release(tb);
    int v = push(g, r, fmin(x->lo, y->lo), fmax(x->hi, y->hi), fmax(x->err, y->err),
                 x->exact && y->exact, "where(v%d, v%d, v%d)", c, a, b);
    return set_half(g, v, x->has_half || y->has_half);
}

static int v_cast(gen *g, int a, tc_dtype dt) {
    const val *x = &g->pool[a];
    tc_dtype src = dt_of(g, a);
    double lo = x->lo, hi = x->hi, err = x->err, m = mag(lo, hi);
    if (src == dt) return -2;
    if (dt == TC_BOOL) {
        if (!x->exact) return -2;
        lo = 0, hi = 1;
    } else if (is_float(src) && !is_float(dt)) { /* truncation: exact values in range only */
        if (!x->exact || m >= limit(dt) || (dt == TC_UINT8 && lo <= -1)) return -2;
        lo = fmax(trunc(lo), dt == TC_UINT8 ? 0 : -limit(dt)), hi = trunc(hi), err = 0;
    } else if (is_float(dt)) {
        if (m > limit(dt)) return -2;
        if (dt == TC_FLOAT16) err += 0x1p-11 * m; /* rounding is deterministic: exact stays */
    } else if (dt == TC_UINT8 && (lo < 0 || hi > 255)) {
        lo = 0, hi = 255; /* wraps, as C does */
    } else if (m > limit(dt)) {
        return -2;
    }
    tc_tensor *t = R(g, a), *r = t ? tc_cast(t, dt) : NULL;
    tc_release(t);
    cov[COV_CAST][dt]++;
    int v = push(g, r, lo, hi, err, x->exact, "cast(v%d, %s)", a, tc_dtype_name(dt));
    return set_half(g, v, x->has_half && is_float(dt));
}

/* ---- integer and bool ops (exact; uint8 and bool wrap as C does) ---- */

static bool io_facts(gen *g, intop op, const val *x, const val *y, tc_dtype da, tc_dtype db,
                     tc_dtype pd, double *lo, double *hi, bool *neg_div) {
    double Ma = mag(x->lo, x->hi), Mb = mag(y->lo, y->hi), p = 1, k;
    bool is_sint = da == TC_INT32 || da == TC_INT64;
    *neg_div = false;
    switch (op) {
    case IO_NOT: *lo = 0, *hi = 1; return da == TC_BOOL;
    case IO_NEG: *lo = -x->hi, *hi = -x->lo; return is_sint;
    case IO_ABS: *lo = minabs(x->lo, x->hi), *hi = Ma; return is_sint;
    case IO_ADD: *lo = x->lo + y->lo, *hi = x->hi + y->hi; return true;
    case IO_SUB: *lo = x->lo - y->hi, *hi = x->hi - y->lo; return pd != TC_BOOL;
    case IO_MUL: corners(x->lo, x->hi, y->lo, y->hi, lo, hi); return true;
    case IO_IDIV:
    case IO_MOD: /* divisor max(abs(b), 1), sometimes negated: never 0 */
        *neg_div = (db == TC_INT32 || db == TC_INT64) && chance(g, 0.3);
        k = fmin(Ma, fmax(Mb, 1) - 1);
        *lo = op == IO_IDIV ? (x->lo < 0 || *neg_div ? -Ma : 0) : (x->lo < 0 ? -k : 0);
        *hi = op == IO_IDIV ? Ma : (x->hi > 0 ? k : 0);
        return pd != TC_BOOL;
    case IO_MAX: *lo = fmax(x->lo, y->lo), *hi = fmax(x->hi, y->hi); return true;
    case IO_MIN: *lo = fmin(x->lo, y->lo), *hi = fmin(x->hi, y->hi); return true;
    case IO_AND:
    case IO_OR:
    case IO_XOR:
        while (p <= fmax(Ma, Mb)) p *= 2;
        *lo = x->lo < 0 || y->lo < 0 ? -p : 0, *hi = p - 1;
        return true;
    case IO_COUNT: break;
    }
    return false;
}

static int v_intop(gen *g, int a, int b, intop op) {
    static const char *const names[IO_COUNT] = {
        "+",           "-",          "*",           "idiv",        "mod", "maximum", "minimum",
        "logical_and", "logical_or", "logical_xor", "logical_not", "-",   "abs"};
    static tc_tensor *(*const fns[IO_COUNT])(tc_tensor *, tc_tensor *) = {
        tc_add,         tc_sub,        tc_mul,         tc_idiv, tc_mod, tc_maximum, tc_minimum,
        tc_logical_and, tc_logical_or, tc_logical_xor, NULL,    NULL,   NULL};
    const val *x = &g->pool[a], *y = &g->pool[b];
    tc_dtype da = dt_of(g, a), db = dt_of(g, b), pd = promote(da, db);
    double lo, hi;
    bool neg_div;
    if (is_float(pd) || !io_facts(g, op, x, y, da, db, pd, &lo, &hi, &neg_div)) return -2;
    if (pd == TC_BOOL) lo = 0, hi = 1;
    else if (pd == TC_UINT8 && (lo < 0 || hi > 255)) lo = 0, hi = 255;
    if (mag(lo, hi) > limit(pd)) return -2;
    tc_tensor *r = NULL;
    char e[96];
    snprintf(e, sizeof e,
             op >= IO_NOT    ? "%s(v%d)"
             : op >= IO_IDIV ? "%s(v%d, v%d)"
                             : "v%2$d %1$s v%3$d",
             names[op], a, b);
    if (op == IO_NOT) {
        r = U(tc_logical_not, R(g, a));
    } else if (op == IO_NEG || op == IO_ABS) {
        r = U(op == IO_NEG ? tc_neg : tc_abs, R(g, a));
    } else if (op == IO_IDIV || op == IO_MOD) {
        tc_tensor *den = B(tc_maximum, U(tc_abs, R(g, b)), S(1, db));
        if (neg_div) den = U(tc_neg, den);
        r = B(fns[op], R(g, a), den);
        snprintf(e, sizeof e, "%s(v%d, %smax(abs(v%d), 1))", names[op], a, neg_div ? "-" : "", b);
    } else {
        r = B(fns[op], R(g, a), R(g, b));
    }
    cov[COV_INT][op]++;
    return push(g, r, lo, hi, 0, x->exact && y->exact, "%s", e);
}

/* ---- movement ---- */

/* a random shape of numel elements into ns; returns its rank */
static int random_reshape(gen *g, int64_t numel, int64_t *ns) {
    int n2 = (int)rint_(g, numel == 1 ? 0 : 1, 4);
    for (int d = 0; d < n2; d++) ns[d] = numel ? 1 : rint_(g, 1, 3);
    if (!numel) {
        ns[rint_(g, 0, n2 - 1)] = 0;
        return n2;
    }
    int64_t m = numel;
    for (int64_t p = 2; p * p <= m; p++)
        while (m % p == 0) ns[rint_(g, 0, n2 - 1)] *= p, m /= p;
    if (m > 1) ns[rint_(g, 0, n2 - 1)] *= m;
    if (n2 && chance(g, 0.2)) ns[rint_(g, 0, n2 - 1)] = -1;
    return n2;
}

/* size-1 dims grow, or a new leading dim appears; -1 keeps a dim; -1 returned if too big */
static int random_expand(gen *g, int nd, const int64_t *sh, int64_t numel, int64_t *ns) {
    bool has_one = false;
    int64_t grow = 1;
    for (int d = 0; d < nd; d++) has_one |= sh[d] == 1;
    if (has_one && chance(g, 0.7)) {
        for (int d = 0; d < nd; d++) {
            ns[d] = sh[d] == 1 && chance(g, 0.7) ? rint_(g, 1, 3) : chance(g, 0.3) ? -1 : sh[d];
            grow *= ns[d] > 0 && sh[d] == 1 ? ns[d] : 1;
        }
        return numel * grow <= NUMEL_MAX ? nd : -1;
    }
    if (nd >= NDIM_MAX) return -1;
    ns[0] = rint_(g, 2, 3);
    for (int d = 0; d < nd; d++) ns[d + 1] = chance(g, 0.3) ? -1 : sh[d];
    return numel * ns[0] <= NUMEL_MAX ? nd + 1 : -1;
}

/* 0..2 before and after per dim into ns; returns the padded numel */
static int64_t pad_args(gen *g, int nd, const int64_t *sh, int64_t *ns) {
    int64_t grown = 1;
    for (int d = 0; d < nd; d++) {
        ns[2 * d] = chance(g, 0.4) ? rint_(g, 0, 2) : 0;
        ns[2 * d + 1] = chance(g, 0.4) ? rint_(g, 0, 2) : 0;
        grown *= sh[d] + ns[2 * d] + ns[2 * d + 1];
    }
    return grown;
}

/* a random sub-box (sometimes empty in FAM_EDGE) as begin/end per dim into ns */
static void shrink_args(gen *g, int nd, const int64_t *sh, int64_t *ns) {
    for (int d = 0; d < nd; d++) {
        ns[2 * d] = 0, ns[2 * d + 1] = sh[d];
        if (g->fam == FAM_EDGE && chance(g, 0.15)) {
            ns[2 * d] = ns[2 * d + 1] = rint_(g, 0, sh[d]); /* empty */
        } else if (sh[d] >= 2 && chance(g, 0.6)) {
            ns[2 * d] = rint_(g, 0, sh[d] - 1);
            ns[2 * d + 1] = rint_(g, ns[2 * d] + 1, sh[d]);
        }
    }
}

/* 1..nd distinct axes (some negative) into ax, normalised into m; returns how many */
static int flip_args(gen *g, int nd, int *ax, movedesc *m) {
    shuffle(g, ax, nd);
    int k = (int)rint_(g, 1, nd);
    for (int i = 0; i < k; i++) ax[i] -= chance(g, 0.3) ? nd : 0;
    for (int i = 0; i < k; i++) m->ax[i] = ax[i] < 0 ? ax[i] + nd : ax[i];
    m->k = k;
    return k;
}

static int v_move(gen *g, int a, moveop op) {
    movedesc m = {.op = op};
    const val *x = &g->pool[a];
    tc_tensor *t = x->t, *r = NULL;
    int nd = tc_ndim(t), ax[NDIM_MAX], k = 0, n2;
    const int64_t *sh = tc_shape(t);
    int64_t numel = tc_numel(t), ns[2 * NDIM_MAX];
    double lo = x->lo, hi = x->hi;
    char e[160], l[96];
    if (nd == 0 && op != MV_RESHAPE && op != MV_EXPAND && op != MV_CONTIGUOUS) return -2;
    for (int d = 0; d < nd; d++) ax[d] = d;
    switch (op) {
    case MV_PERMUTE:
        shuffle(g, ax, nd);
        r = tc_permute(t, ax);
        memcpy(m.ax, ax, sizeof ax);
        snprintf(e, sizeof e, "permute(v%d, %s)", a, fmt_list(l, sizeof l, NULL, ax, nd));
        break;
    case MV_TRANSPOSE:
        ax[0] = (int)rint_(g, -nd, nd - 1), ax[1] = (int)rint_(g, -nd, nd - 1);
        r = tc_transpose(t, ax[0], ax[1]);
        m.ax[0] = ax[0] < 0 ? ax[0] + nd : ax[0], m.ax[1] = ax[1] < 0 ? ax[1] + nd : ax[1];
        snprintf(e, sizeof e, "transpose(v%d, %d, %d)", a, ax[0], ax[1]);
        break;
    case MV_RESHAPE:
        n2 = random_reshape(g, numel, ns);
        r = tc_reshape(t, n2, ns);
        snprintf(e, sizeof e, "reshape(v%d, %s)", a, fmt_list(l, sizeof l, ns, NULL, n2));
        break;
    case MV_EXPAND:
        if ((n2 = random_expand(g, nd, sh, numel, ns)) < 0) return -2;
        r = tc_expand(t, n2, ns);
        snprintf(e, sizeof e, "expand(v%d, %s)", a, fmt_list(l, sizeof l, ns, NULL, n2));
        break;
    case MV_PAD:
        if (pad_args(g, nd, sh, ns) > NUMEL_MAX) return -2;
        lo = fmin(lo, 0), hi = fmax(hi, 0);
        r = tc_pad(t, ns);
        memcpy(m.arg, ns, sizeof ns);
        snprintf(e, sizeof e, "pad(v%d, %s)", a, fmt_list(l, sizeof l, ns, NULL, 2 * nd));
        break;
    case MV_SHRINK:
        shrink_args(g, nd, sh, ns);
        r = tc_shrink(t, ns);
        memcpy(m.arg, ns, sizeof ns);
        snprintf(e, sizeof e, "shrink(v%d, %s)", a, fmt_list(l, sizeof l, ns, NULL, 2 * nd));
        break;
    case MV_FLIP:
        k = flip_args(g, nd, ax, &m);
        r = tc_flip(t, k, ax);
        snprintf(e, sizeof e, "flip(v%d, %s)", a, fmt_list(l, sizeof l, NULL, ax, k));
        break;
    case MV_CONTIGUOUS:
    case MV_COUNT:
        r = tc_contiguous(t);
        snprintf(e, sizeof e, "contiguous(v%d)", a);
        break;
    }
    g->pool[a].is_used = true;
    cov[COV_MOVE][op]++;
    int v = set_half(g, push(g, r, lo, hi, x->err, x->exact, "%s", e), x->has_half);
    if (v >= 0) check_move(g, a, v, &m);
    return v;
}

/* ---- reductions ---- */

/* random axes of pool[a] into axes (distinct, some negative); 0 means all */
static int random_axes(gen *g, int a, int *axes) {
    int nd = tc_ndim(g->pool[a].t);
    if (nd == 0 || chance(g, 0.2)) return 0;
    int k = (int)rint_(g, 1, nd);
    for (int d = 0; d < nd; d++) axes[d] = d;
    shuffle(g, axes, nd);
    for (int i = 0; i < k; i++) axes[i] -= chance(g, 0.3) ? nd : 0;
    return k;
}

/* facts of a reduction over n elements each; false when a guard fails */
static bool rd_facts(redop op, const val *x, tc_dtype dt, tc_dtype odt, double n, int corr,
                     double *lo, double *hi, double *err) {
    double M = mag(x->lo, x->hi), R = x->hi - x->lo;
    double eps = is_float(dt) || op >= RD_MEAN ? 0x1p-23 : 0, half = odt == TC_FLOAT16 ? 0x1p-8 : 0;
    double vhi = n > corr ? R * R * n / (n - corr) : 0;
    double verr =
        n > corr
            ? (2 * R * (2 * x->err + 2 * eps * n * M) * n + 2 * eps * n * n * R * R) / (n - corr) +
                  half * vhi
            : 0;
    *lo = x->lo, *hi = x->hi, *err = x->err;
    switch (op) {
    case RD_SUM:
        *lo = n * x->lo, *hi = n * x->hi, *err = n * x->err + eps * n * n * M + half * n * M;
        return true;
    case RD_MAX:
    case RD_MIN: return true;
    case RD_MEAN: *err = x->err + 2 * eps * n * M + half * M; return true;
    case RD_VAR: *lo = 0, *hi = vhi, *err = verr; return n - corr >= 1;
    case RD_STD:
        *lo = 0, *hi = sqrt(vhi), *err = sqrt(verr) + half * sqrt(vhi);
        return n - corr >= 1;
    case RD_COUNT: break;
    }
    return false;
}

static int v_reduce(gen *g, int a, redop op, int naxes, const int *axes, bool keepdim, int corr) {
    static const char *const names[RD_COUNT] = {"sum", "max", "min", "mean", "var", "std"};
    static tc_tensor *(*const fns[RD_MEAN + 1])(tc_tensor *, int, const int *,
                                                bool) = {tc_sum, tc_max, tc_min, tc_mean};
    const val *x = &g->pool[a];
    tc_tensor *t = x->t;
    int nd = tc_ndim(t);
    uint32_t mask = naxes ? 0 : (1u << nd) - 1;
    for (int i = 0; i < naxes; i++) mask |= 1u << (axes[i] < 0 ? axes[i] + nd : axes[i]);
    double n = 1, out = 1, lo, hi, err;
    for (int d = 0; d < nd; d++) {
        if ((mask >> d) & 1) n *= (double)tc_shape(t)[d];
        else out *= (double)tc_shape(t)[d];
    }
    tc_dtype dt = dt_of(g, a), odt = dt;
    if (op == RD_SUM && !is_float(dt)) odt = dt == TC_INT64 ? TC_INT64 : TC_INT32;
    if (op >= RD_MEAN) odt = dt == TC_FLOAT16 ? TC_FLOAT16 : TC_FLOAT32;
    if (n == 0 && out > 0 && op != RD_SUM) return -2; /* -inf, NaN: identities, not data */
    bool h = op == RD_MAX || op == RD_MIN ? x->has_half : half_math(g, a);
    if (!rd_facts(op, x, dt, odt, n, corr, &lo, &hi, &err) || mag(lo, hi) > limit(odt) ||
        too_noisy(h, err, lo, hi))
        return -2;
    g->pool[a].is_used = true;
    tc_tensor *r = op <= RD_MEAN ? fns[op](t, naxes, axes, keepdim)
                                 : (op == RD_VAR ? tc_var : tc_std)(t, naxes, axes, keepdim, corr);
    char l[64], c[24] = "";
    if (op >= RD_VAR) snprintf(c, sizeof c, ", correction=%d", corr);
    cov[COV_REDUCE][op]++;
    bool exact = x->exact && (op == RD_MAX || op == RD_MIN || ((n <= 1 || !is_float(dt)) && !h));
    int v = push(g, r, lo, hi, err, exact, "%s(v%d, axes=%s%s%s)", names[op], a,
                 naxes ? fmt_list(l, sizeof l, NULL, axes, naxes) : "all",
                 keepdim ? ", keepdim" : "", c);
    return set_half(g, v, h);
}

/* ---- patterns: reductions fed back into elementwise ops over the same axes ---- */

static int v_pattern(gen *g, int a, patop op) {
    int nd = tc_ndim(g->pool[a].t), ax[NDIM_MAX];
    if (nd == 0) return -2;
    for (int d = 0; d < nd; d++) ax[d] = d;
    shuffle(g, ax, nd);
    int k = (int)rint_(g, 1, nd < 2 ? nd : 2), m, d, e, s;
    tc_dtype fdt = float_of(dt_of(g, a));
    cov[COV_PATTERN][op]++;
    switch (op) {
    case PAT_SOFTMAX:   /* exp(x - max) / sum(exp(x - max)) */
    case PAT_LOGSUMEXP: /* max + log(sum(exp(x - max))) */
        if ((m = v_reduce(g, a, RD_MAX, k, ax, true, 0)) < 0) return m;
        if ((d = v_binary(g, a, m, BI_SUB)) < 0) return d;
        if ((e = v_unary(g, d, UN_EXP)) < 0) return e;
        if ((s = v_reduce(g, e, RD_SUM, k, ax, true, 0)) < 0) return s;
        if (op == PAT_SOFTMAX) return v_binary(g, e, s, BI_DIV);
        if ((s = v_unary(g, s, UN_LOG)) < 0) return s;
        return v_binary(g, m, s, BI_ADD);
    case PAT_CENTER: /* x - mean */
        if ((m = v_reduce(g, a, RD_MEAN, k, ax, true, 0)) < 0) return m;
        return v_binary(g, a, m, BI_SUB);
    case PAT_NORM: /* (x - mean) / (std + 0.5) */
        if ((m = v_reduce(g, a, RD_MEAN, k, ax, true, 0)) < 0) return m;
        if ((d = v_binary(g, a, m, BI_SUB)) < 0) return d;
        if ((s = v_reduce(g, a, RD_STD, k, ax, true, 0)) < 0) return s;
        if ((e = v_scalar(g, 0.5, fdt)) < 0) return e;
        if ((s = v_binary(g, s, e, BI_ADD)) < 0) return s;
        return v_binary(g, d, s, BI_DIV);
    case PAT_ARGMAX: /* where(x == max, x, 0) */
        if (!g->pool[a].exact) return -2;
        if ((m = v_reduce(g, a, RD_MAX, k, ax, true, 0)) < 0) return m;
        if ((d = v_compare(g, a, m, CMP_EQ)) < 0) return d;
        if ((e = v_scalar(g, 0, fdt)) < 0) return e;
        return v_where(g, d, a, e);
    case PAT_SUMMUL: /* x * sum(x) */
    case PAT_COUNT:
        if ((s = v_reduce(g, a, RD_SUM, k, ax, true, 0)) < 0) return s;
        return v_binary(g, a, s, BI_MUL);
    }
    return -2;
}

#endif /* DIFF_OPS_H */
