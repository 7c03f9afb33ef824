/* diff_check.h - the checks of the differential suite. Part of diff_gen.h
 * (included by it before the op builders).
 * - check: the oracle of some values (tc_ref_eval on the unrealized graph),
 *   then one tc_realize of all of them, tc_to_host and tc_allclose; the
 *   kernels launched must be the kernels tc_schedule_kernel_count predicted.
 * - check_move: a movement op's oracle must equal the movement applied on the
 *   host to its input's oracle, byte for byte. The oracle reads views through
 *   graph's trackers (tc_st_index), which the pipeline shares, so this is
 *   what checks the trackers themselves (reshape merging, masks, compose).
 */
#ifndef DIFF_CHECK_H
#define DIFF_CHECK_H

#define TARGETS_MAX 8 /* values one check realizes together */

/* a movement op as applied (axes normalised to 0..ndim-1) */
typedef struct {
    moveop op;                 /* which one */
    int ax[NDIM_MAX];          /* PERMUTE: the order; TRANSPOSE: ax[0], ax[1]; FLIP: k axes */
    int k;                     /* FLIP: number of axes */
    int64_t arg[2 * NDIM_MAX]; /* PAD: before/after per dim; SHRINK: begin/end per dim */
} movedesc;

/* the input element read for output index o (row-major flat index into in), or -1 for
 * padding. nd/sh: the input; nd2/o: the output rank and index. */
static int64_t move_src(const movedesc *m, int nd, const int64_t *sh, int nd2, const int64_t *o) {
    int64_t in[NDIM_MAX], flat = 0;
    for (int d = 0; d < nd; d++) in[d] = o[d];
    switch (m->op) {
    case MV_PERMUTE:
        for (int d = 0; d < nd; d++) in[m->ax[d]] = o[d];
        break;
    case MV_TRANSPOSE: in[m->ax[0]] = o[m->ax[1]], in[m->ax[1]] = o[m->ax[0]]; break;
    case MV_EXPAND:
        for (int d = 0; d < nd; d++) in[d] = sh[d] == 1 ? 0 : o[d + nd2 - nd];
        break;
    case MV_PAD:
        for (int d = 0; d < nd; d++) {
            in[d] = o[d] - m->arg[2 * d];
            if (in[d] < 0 || in[d] >= sh[d]) return -1;
        }
        break;
    case MV_SHRINK:
        for (int d = 0; d < nd; d++) in[d] = o[d] + m->arg[2 * d];
        break;
    case MV_FLIP:
        for (int i = 0; i < m->k; i++) in[m->ax[i]] = sh[m->ax[i]] - 1 - o[m->ax[i]];
        break;
    case MV_RESHAPE:
    case MV_CONTIGUOUS:
    case MV_COUNT: return -2; /* the same row-major elements */
    }
    for (int d = 0; d < nd; d++) flat = flat * sh[d] + in[d];
    return flat;
}

static void check_move(gen *g, int a, int v, const movedesc *m) {
    tc_tensor *x = g->pool[a].t, *y = g->pool[v].t;
    size_t es = tc_dtype_size(tc_get_dtype(x));
    int64_t nx = tc_numel(x), ny = tc_numel(y), o[NDIM_MAX] = {0}, bad = -1;
    unsigned char *in = calloc(1, (size_t)nx * es + 1), *out = calloc(1, (size_t)ny * es + 1);
    unsigned char *want = calloc(1, (size_t)ny * es + 1);
    assert_true(in && out && want);
    char detail[512];
    if (tc_ref_eval(tc_tensor_node(x), in) != TC_OK ||
        tc_ref_eval(tc_tensor_node(y), out) != TC_OK) {
        snprintf(detail, sizeof detail, "tc_ref_eval failed: %s\n", tc_last_error());
        report(g, "oracle of a movement op", detail, NULL);
    } else {
        for (int64_t i = 0; i < ny; i++) {
            int64_t src = move_src(m, tc_ndim(x), tc_shape(x), tc_ndim(y), o);
            if (src == -2) src = i;
            if (src >= 0) memcpy(want + (size_t)i * es, in + (size_t)src * es, es);
            if (bad < 0 && memcmp(want + (size_t)i * es, out + (size_t)i * es, es) != 0) bad = i;
            for (int d = tc_ndim(y) - 1; d >= 0 && ++o[d] == tc_shape(y)[d]; d--) o[d] = 0;
        }
    }
    if (bad >= 0) {
        char *dump = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&dump, &len);
        if (f) tc_node_dump(f, tc_tensor_node(y));
        if (f) fclose(f);
        snprintf(detail, sizeof detail,
                 "the oracle of v%d differs from its movement op applied "
                 "on the host to the oracle of v%d, first at element %lld: a view tracker "
                 "(graph/view.c) or tc_st_index is wrong\n",
                 v, a, (long long)bad);
        report(g, "movement semantics", detail, dump);
        free(dump);
    }
    free(in);
    free(out);
    free(want);
}

/* ---- the check: oracle, realize, compare ---- */

/* largest finite |element| of n elements of dt */
static double max_abs(const void *p, tc_dtype dt, int64_t n) {
    double m = 0;
    for (int64_t i = 0; i < n; i++) {
        double x =
            dt == TC_FLOAT32 ? ((const float *)p)[i] : tc_half_to_float(((const uint16_t *)p)[i]);
        if (isfinite(x)) m = fmax(m, fabs(x));
    }
    return m;
}

/* the tolerance of value v whose oracle is want: tight where the value must be exact;
 * else the error bound, capped at a small fraction of the data's magnitude (interval
 * arithmetic forgets correlations, so the bound alone can be far too loose). float16
 * math upstream loosens both: the pipeline may keep float precision between ops. */
static void tolerance(const val *v, tc_dtype dt, const void *want, int64_t n, double *rtol,
                      double *atol) {
    bool half = v->has_half || dt == TC_FLOAT16;
    double m = fmax(1, max_abs(want, dt, n)), cap = half ? 2e-2 : 1e-3;
    *rtol = half ? 4e-3 : 1e-5;
    *atol = 1e-6 * m + (v->exact ? 0 : fmin(2 * v->err, cap * m));
}

/* reads pool[idx[i]] back after realize and compares it with want; false on a mismatch */
static bool compare_one(gen *g, int v, const void *want, size_t nbytes, char *detail, size_t n) {
    tc_tensor *t = g->pool[v].t;
    tc_dtype dt = tc_get_dtype(t);
    void *got = calloc(1, nbytes + 1);
    assert_non_null(got);
    size_t len = strlen(detail);
    bool ok = tc_to_host(t, got, nbytes) == TC_OK;
    if (!ok) {
        snprintf(detail + len, n - len, "tc_to_host(v%d) failed: %s\n", v, tc_last_error());
    } else {
        double rtol, atol;
        char what[64], sh[96];
        if (is_float(dt)) tolerance(&g->pool[v], dt, want, tc_numel(t), &rtol, &atol);
        else rtol = atol = 0;
        snprintf(what, sizeof what, "seed %llu v%d", (unsigned long long)g->seed, v);
        ok = tc_allclose(got, want, dt, tc_numel(t), rtol, atol, what);
        if (!ok)
            snprintf(detail + len, n - len,
                     "v%d (%s %s) differs from the oracle (rtol %g, "
                     "atol %g)\n",
                     v, tc_dtype_name(dt), shape_str(t, sh, sizeof sh), rtol, atol);
    }
    free(got);
    return ok;
}

/* computes the oracle of the values idx[0..k-1], realizes them in one call and
 * compares; the kernels launched must be the kernels predicted */
static void check(gen *g, const int *idx, int k, const char *why) {
    tc_tensor *ts[TARGETS_MAX];
    void *want[TARGETS_MAX] = {NULL};
    size_t nbytes[TARGETS_MAX];
    char *dump = NULL, detail[2048] = "";
    size_t dump_len = 0;
    FILE *f = open_memstream(&dump, &dump_len);
    bool ok = true;
    for (int i = 0; i < k; i++) {
        ts[i] = g->pool[idx[i]].t;
        nbytes[i] = (size_t)tc_numel(ts[i]) * tc_dtype_size(tc_get_dtype(ts[i]));
        want[i] = calloc(1, nbytes[i] + 1);
        assert_non_null(want[i]);
        if (f) fprintf(f, "  v%d:\n", idx[i]);
        if (f) tc_node_dump(f, tc_tensor_node(ts[i]));
        if (ok && tc_ref_eval(tc_tensor_node(ts[i]), want[i]) != TC_OK) {
            snprintf(detail, sizeof detail, "tc_ref_eval(v%d) failed: %s\n", idx[i],
                     tc_last_error());
            ok = false;
        }
    }
    if (f) fclose(f);
    int predicted = ok ? tc_schedule_kernel_count(ts, k) : 0;
    if (ok && predicted < 0) {
        snprintf(detail, sizeof detail, "tc_schedule_kernel_count failed: %s\n", tc_last_error());
        ok = false;
    }
    tc_counters c0, c1;
    tc_get_counters(&c0);
    if (ok && tc_realize(ts, k) != TC_OK) {
        snprintf(detail, sizeof detail, "tc_realize failed: %s\n", tc_last_error());
        ok = false;
    }
    tc_get_counters(&c1);
    int launched = (int)(c1.kernel_count - c0.kernel_count);
    g->kernels += launched;
    for (int i = 0; ok && i < k; i++)
        ok = compare_one(g, idx[i], want[i], nbytes[i], detail, sizeof detail);
    if (ok && predicted != launched)
        snprintf(detail, sizeof detail,
                 "tc_schedule_kernel_count predicted %d kernels, "
                 "tc_realize launched %d\n",
                 predicted, launched),
            ok = false;
    if (!ok) {
        size_t len = strlen(detail);
        snprintf(detail + len, sizeof detail - len, "kernels: predicted %d, launched %d\n",
                 predicted, launched);
        report(g, why, detail, dump);
    }
    free(dump);
    for (int i = 0; i < k; i++) free(want[i]);
}

#endif /* DIFF_CHECK_H */
