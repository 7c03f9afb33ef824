/* nnops.c - the network composites: convolutions (N-d, transposed), max/avg pooling and batchnorm,
 * built from the public ops like composite.c (cross-entropy is in loss.c).
 *
 * Pooling windows come from tinygrad's _pool, with views only: for x
 * (..., H, W), kernel k, stride s, dilation d it makes (..., oh, ow, kh, kw).
 *   k <= s and d == 1: pad or shrink H to o*s, reshape (o, s), keep (o, k).
 *   otherwise: repeat H ceil(k*(H+d)/H) times (reshape, expand, reshape),
 *   take k*(H+d) elements, reshape (k, H+d): row j starts j*d elements
 *   further into x; fit H+d to o*s (shrink, or pad: only the first (o-1)*s +
 *   1 columns are read), reshape (k, o, s) and keep (k, o, 1).
 * Each spatial axis is windowed the same way, so the pools take any number
 * of trailing axes.
 * conv (any nd, tc_conv_nd; tc_conv2d is nd = 2): pad x, pool it to
 *   (N, G*cin, *o, *k), reshape to (N, G, cin, 1, *o, *k), expand over
 *   rcout = cout/G, move cin next to the kernel dims, multiply by w seen as
 *   (1, G, rcout, 1 per axis, cin, *k) and sum the last nd+1 axes:
 *   (N, cout, *o), one reduce kernel.
 * transposed conv: the conv, stride 1, of x with stride-1 zeros between its
 *   elements (views: reshape, pad, reshape, shrink), padded d*(k-1)-p (and
 *   output_padding more at the end), with w flipped and its in and out
 *   channels swapped per group; its gradients are the ops'. */
#include "tensor.h"

#include <math.h>
#include <string.h>

/* ---- view helpers (all keep their results in s) ---- */

/* x reshaped to its first `pre` dims followed by tail[0..nt-1] */
static tc_tensor *reshape_tail(tc_scope *s, tc_tensor *x, int pre, int nt, const int64_t *tail) {
    if (s->failed) return NULL;
    int64_t shp[TC_MAX_DIMS];
    memcpy(shp, x->node->shape, sizeof(int64_t) * (size_t)pre);
    memcpy(shp + pre, tail, sizeof(int64_t) * (size_t)nt);
    return TC_S(s, tc_reshape(x, pre + nt, shp));
}

/* x with its last nt dims cut or zero-padded at the end to sizes end[] */
static tc_tensor *fit_tail(tc_scope *s, tc_tensor *x, int nt, const int64_t *end) {
    if (s->failed) return NULL;
    int nd = x->node->ndim, pre = nd - nt;
    int64_t pad[2 * TC_MAX_DIMS] = {0}, cut[2 * TC_MAX_DIMS];
    bool has_pad = false;
    for (int i = 0; i < nd; i++) {
        int64_t size = x->node->shape[i], want = i < pre ? size : end[i - pre];
        pad[2 * i + 1] = want > size ? want - size : 0;
        has_pad = has_pad || want > size;
        cut[2 * i] = 0;
        cut[2 * i + 1] = want;
    }
    tc_tensor *p = has_pad ? TC_S(s, tc_pad(x, pad)) : x;
    return TC_S(s, tc_shrink(p, cut));
}

/* the pooling windows of x (..., H1..Hnk) over its last nk dims:
 * (..., o1..onk, k1..knk); arguments checked (every window fits) */
static tc_tensor *pool_axes(tc_scope *s, tc_tensor *x, int nk, const int64_t *k,
                            const int64_t *st, const int64_t *d, int *win);

static tc_tensor *pool(tc_scope *s, tc_tensor *x, int nk, const int64_t *k, const int64_t *st,
                       const int64_t *d) {
    return pool_axes(s, x, nk, k, st, d, NULL);
}

/* the k <= s, d == 1 windows of pool_axes: (..., o1, k1, ..., onk, knk) */
static tc_tensor *pool_split(tc_scope *s, tc_tensor *x, int nk, const int64_t *k,
                             const int64_t *st) {
    int pre = x->node->ndim - nk;
    const int64_t *in = x->node->shape + pre;
    int64_t fit[TC_MAX_DIMS] = {0}, split[TC_MAX_DIMS] = {0}, keep[TC_MAX_DIMS] = {0};
    for (int j = 0; j < nk; j++) {
        int64_t o = (in[j] - k[j]) / st[j] + 1;
        fit[j] = o * st[j];
        split[2 * j] = o, split[2 * j + 1] = st[j];
        keep[2 * j] = o, keep[2 * j + 1] = k[j];
    }
    tc_tensor *y = reshape_tail(s, fit_tail(s, x, nk, fit), pre, 2 * nk, split);
    return fit_tail(s, y, 2 * nk, keep);
}

/* pool's windows; with win, the windows of the k <= s path stay where the
 * reshape put them, (..., o1, k1, o2, k2, ...), and win gets their nk axes
 * (else the last nk): a reduce over them reads x in its own order, and the
 * reduce's gradient comes back in it (a max-pool's backward, read by
 * batchnorm's sums: contiguous instead of through a permute) */
static tc_tensor *pool_axes(tc_scope *s, tc_tensor *x, int nk, const int64_t *k,
                            const int64_t *st, const int64_t *d, int *win) {
    int nd = x->node->ndim, pre = nd - nk;
    const int64_t *in = x->node->shape + pre;
    int order[TC_MAX_DIMS];
    for (int i = 0; i < pre; i++) order[i] = i;
    bool split_only = true;
    for (int j = 0; j < nk; j++) split_only = split_only && k[j] <= st[j] && d[j] == 1;
    if (split_only) {
        tc_tensor *y = pool_split(s, x, nk, k, st); /* (..., o1, k1, o2, k2, ...) */
        for (int j = 0; j < nk; j++) {
            if (win) win[j] = pre + 2 * j + 1;
            order[pre + j] = pre + 2 * j, order[pre + nk + j] = pre + 2 * j + 1;
        }
        return win ? y : TC_S(s, tc_permute(y, order));
    }
    int64_t ones[TC_MAX_DIMS], tiled[TC_MAX_DIMS], flat[TC_MAX_DIMS], taken[TC_MAX_DIMS];
    int64_t rows[TC_MAX_DIMS], fit[TC_MAX_DIMS], split[TC_MAX_DIMS], keep[TC_MAX_DIMS];
    int64_t ko[TC_MAX_DIMS];
    for (int j = 0; j < nk; j++) {
        int64_t o = (in[j] - d[j] * (k[j] - 1) - 1) / st[j] + 1;
        int64_t rep = (k[j] * (in[j] + d[j]) + in[j] - 1) / in[j];
        ones[2 * j] = 1, ones[2 * j + 1] = in[j];
        tiled[2 * j] = rep, tiled[2 * j + 1] = in[j];
        flat[j] = rep * in[j];
        taken[j] = k[j] * (in[j] + d[j]);
        rows[2 * j] = k[j], rows[2 * j + 1] = in[j] + d[j];
        fit[2 * j] = k[j], fit[2 * j + 1] = o * st[j];
        split[3 * j] = k[j], split[3 * j + 1] = o, split[3 * j + 2] = st[j];
        keep[3 * j] = k[j], keep[3 * j + 1] = o, keep[3 * j + 2] = 1;
        ko[2 * j] = k[j], ko[2 * j + 1] = o;
        order[pre + j] = pre + 2 * j + 1, order[pre + nk + j] = pre + 2 * j;
        if (win) win[j] = pre + nk + j;
    }
    int64_t full[TC_MAX_DIMS];
    memcpy(full, x->node->shape, sizeof(int64_t) * (size_t)pre);
    memcpy(full + pre, tiled, sizeof(int64_t) * (size_t)(2 * nk));
    tc_tensor *y = reshape_tail(s, x, pre, 2 * nk, ones); /* (..., 1, H, 1, W) */
    y = TC_S(s, tc_expand(y, pre + 2 * nk, full));        /* (..., rh, H, rw, W) */
    y = reshape_tail(s, y, pre, nk, flat);
    y = reshape_tail(s, fit_tail(s, y, nk, taken), pre, 2 * nk, rows); /* (..., kh, H+dh, ...) */
    y = reshape_tail(s, fit_tail(s, y, 2 * nk, fit), pre, 3 * nk, split); /* (.., kh, oh, sh, ..) */
    y = reshape_tail(s, fit_tail(s, y, 3 * nk, keep), pre, 2 * nk, ko);   /* (..., kh, oh, ...) */
    return TC_S(s, tc_permute(y, order));
}

/* output size of a window k with stride st and dilation d over n (after
 * padding); 0 when not even one window fits */
static int64_t out_size(int64_t n, int64_t k, int64_t st, int64_t d) {
    int64_t span = d * (k - 1) + 1;
    return n < span ? 0 : (n - span) / st + 1;
}

/* ---- convolutions ---- */

/* the most spatial axes a conv takes: the pool's widest view of x is
 * (N, C, then k, o, s per axis), 2 + 3*nd dims */
enum { CONV_MAX_ND = (TC_MAX_DIMS - 2) / 3 };

typedef struct {
    int nd;                        /* spatial axes, 1..CONV_MAX_ND */
    int64_t stride[CONV_MAX_ND];   /* per axis, >= 1 */
    int64_t pad[2 * CONV_MAX_ND];  /* before, after per axis; negative crops */
    int64_t dilation[CONV_MAX_ND]; /* per axis, >= 1 */
    int64_t groups;                /* >= 1, divides cin and cout */
} conv_args;

/* x and w given, live, and on bias's device (bias may be NULL) */
TC_MUST_USE static tc_status check_operands(const char *api, tc_tensor *x, tc_tensor *w,
                                            tc_tensor *bias) {
    static const char *const names[3] = {"x", "w", "bias"};
    tc_tensor *ts[3] = {x, w, bias};
    tc_status s = tc_tensor_check(x, api, "x");
    if (s == TC_OK) s = tc_tensor_check(w, api, "w");
    if (s == TC_OK) s = tc_tensor_same_device(api, 3, ts, names);
    return s;
}

/* x, w and bias (may be NULL) fit a: ranks 2+nd, channels and groups, every
 * kernel within its padded input. With is_crop_ok false (tc_conv2d) padding
 * must be >= 0. Messages name api. */
TC_MUST_USE static tc_status check_conv(const char *api, tc_tensor *x, tc_tensor *w,
                                        tc_tensor *bias, const conv_args *a, bool is_crop_ok) {
    tc_status s = check_operands(api, x, w, bias);
    if (s != TC_OK) return s;
    int nd = a->nd;
    bool bad = a->groups < 1;
    for (int j = 0; j < nd; j++)
        bad = bad || a->stride[j] < 1 || a->dilation[j] < 1 ||
              (!is_crop_ok && (a->pad[2 * j] < 0 || a->pad[2 * j + 1] < 0));
    char b1[256], b2[256], b3[256], b4[256];
    if (bad)
        return tc_error_set(TC_ERR_INVALID, "%s: stride %s and dilation %s must be >= 1, "
                            "padding %s%s, groups %lld >= 1", api,
                            tc_fmt_shape(b1, sizeof b1, nd, a->stride),
                            tc_fmt_shape(b2, sizeof b2, nd, a->dilation),
                            tc_fmt_shape(b3, sizeof b3, 2 * nd, a->pad), is_crop_ok ? "" : " >= 0",
                            (long long)a->groups);
    const tc_node *xn = x->node, *wn = w->node;
    tc_fmt_shape(b1, sizeof b1, xn->ndim, xn->shape);
    tc_fmt_shape(b2, sizeof b2, wn->ndim, wn->shape);
    if (xn->ndim != 2 + nd || wn->ndim != 2 + nd)
        return tc_error_set(TC_ERR_SHAPE, "%s: x %s must be (N,Cin,%d spatial dims) and w %s "
                            "(Cout,Cin/groups,%d kernel dims)", api, b1, nd, b2, nd);
    if (wn->shape[1] * a->groups != xn->shape[1] || wn->shape[0] % a->groups != 0)
        return tc_error_set(TC_ERR_SHAPE, "%s: x %s and w %s do not fit groups %lld "
                            "(need Cin = w.shape[1]*groups, Cout divisible by groups)", api, b1,
                            b2, (long long)a->groups);
    for (int j = 0; j < nd; j++)
        if (out_size(xn->shape[2 + j] + a->pad[2 * j] + a->pad[2 * j + 1], wn->shape[2 + j],
                     a->stride[j], a->dilation[j]) < 1)
            return tc_error_set(TC_ERR_SHAPE, "%s: kernel %s (dilation %s) does not fit input %s "
                                "with padding %s", api, b2,
                                tc_fmt_shape(b3, sizeof b3, nd, a->dilation), b1,
                                tc_fmt_shape(b4, sizeof b4, 2 * nd, a->pad));
    if (bias && (bias->node->ndim != 1 || bias->node->shape[0] != wn->shape[0]))
        return tc_error_set(TC_ERR_SHAPE, "%s: bias %s must be (%lld) for w %s", api,
                            tc_fmt_shape(b1, sizeof b1, bias->node->ndim, bias->node->shape),
                            (long long)wn->shape[0], b2);
    return TC_OK;
}

/* A conv reads its weight through a channels-last copy, w[o,i,y,x] stored
 * at (i,y,x,o), when the output channels fill vectors (at least 16, a
 * multiple of 8): the reduce kernel's register tile then runs along the
 * output channels, which the weight load gives contiguously, with the
 * output columns as rows, instead of along the output columns, whose 20 or
 * 24 (beautiful_mnist) leave vector lanes idle and whose 6 or 8 do not fill
 * one. The copy is one small kernel for a weight; for the weight gradient,
 * a conv whose "weight" is dy, it is a copy of dy. beautiful_mnist's step at
 * batch 512, one thread: 1330 -> 650 ms, 52 -> 67 kernels. */
enum { CL_MIN_COUT = 16 };

/* x (N, G*cin, *in) padded by a (zeros; negative values crop what the pad
 * gave). Padded, it is copied to a buffer of its own: a conv reading a
 * padded view gates every load of its windows, which keeps the register
 * tile scalar, 7-20x slower on the CPU than the conv of the copy (a
 * ResNet-18 3x3 conv, 16x64x32x32: 384 -> 17 ms at 1 thread; a 2x3x9x9 one
 * still 0.10 -> 0.08 ms). Cropped only, it stays a view. */
static tc_tensor *pad_input(tc_scope *s, tc_tensor *x, const conv_args *a) {
    int r = 2 + a->nd;
    int64_t pads[2 * TC_MAX_DIMS] = {0}, crop[2 * TC_MAX_DIMS];
    bool has_crop = false, has_pad = false;
    for (int j = 0; j < a->nd; j++) {
        int64_t before = a->pad[2 * j], after = a->pad[2 * j + 1];
        has_pad = has_pad || before > 0 || after > 0;
        pads[2 * (2 + j)] = before > 0 ? before : 0;
        pads[2 * (2 + j) + 1] = after > 0 ? after : 0;
        has_crop = has_crop || before < 0 || after < 0;
    }
    tc_tensor *src = has_pad ? TC_S(s, tc_contiguous(x)) : x;
    if (s->failed) return NULL;
    tc_tensor *xp = TC_S(s, tc_pad(src, pads));
    if (has_pad) xp = TC_S(s, tc_contiguous(xp));
    if (!has_crop || s->failed) return xp;
    for (int i = 0; i < r; i++) crop[2 * i] = 0, crop[2 * i + 1] = xp->node->shape[i];
    for (int j = 0; j < a->nd; j++) {
        if (a->pad[2 * j] < 0) crop[2 * (2 + j)] = -a->pad[2 * j];
        if (a->pad[2 * j + 1] < 0) crop[2 * (2 + j) + 1] += a->pad[2 * j + 1];
    }
    return TC_S(s, tc_shrink(xp, crop));
}

/* w (G*rcout, cin, *k) as conv_of reads it: a view of a channels-last copy
 * when its output channels fill vectors (CL_MIN_COUT), else w itself */
static tc_tensor *weight_for_conv(tc_scope *s, tc_tensor *w, const conv_args *a) {
    int r = 2 + a->nd, to_last[TC_MAX_DIMS], from_last[TC_MAX_DIMS] = {a->nd + 1};
    int64_t rcout = w->node->shape[0] / a->groups;
    if (rcout < CL_MIN_COUT || rcout % 8 != 0) return w;
    for (int i = 0; i < r; i++) to_last[i] = (i + 1) % r;
    for (int i = 1; i < r; i++) from_last[i] = i - 1;
    tc_tensor *wl = TC_S(s, tc_permute(w, to_last));
    wl = TC_S(s, tc_contiguous(wl));
    return TC_S(s, tc_permute(wl, from_last));
}

/* the conv of xp (N, G*cin, *in), already padded (a's pads are not read),
 * with w (G*rcout, cin, *k): pool xp to (N, G*cin, *o, *k), reshape to
 * (N, G, cin, 1, *o, *k), expand over rcout, move cin next to the kernel
 * dims, multiply by w seen as (1, G, rcout, 1 per axis, cin, *k) and sum
 * the last nd+1 axes: (N, G*rcout, *o) */
static tc_tensor *conv_of(tc_scope *s, tc_tensor *xp, tc_tensor *w, const conv_args *a) {
    int nd = a->nd, r = 2 + nd, wide_r = 4 + 2 * nd;
    const int64_t *ws = w->node->shape;
    int64_t n = xp->node->shape[0], g = a->groups, cin = ws[1], rcout = ws[0] / g;
    tc_tensor *p = s->failed ? NULL : pool(s, xp, nd, ws + 2, a->stride, a->dilation);
    if (s->failed) return NULL;
    const int64_t *o = p->node->shape + 2;
    int64_t grouped[TC_MAX_DIMS] = {n, g, cin, 1}, wide[TC_MAX_DIMS] = {n, g, cin, rcout};
    int64_t wshape[TC_MAX_DIMS] = {1, g, rcout}, out[TC_MAX_DIMS] = {n, g * rcout};
    int order[TC_MAX_DIMS] = {0, 1, 3}, kernel_axes[CONV_MAX_ND + 1];
    for (int j = 0; j < nd; j++) {
        grouped[4 + j] = wide[4 + j] = o[j];
        grouped[4 + nd + j] = wide[4 + nd + j] = ws[2 + j];
        wshape[3 + j] = 1, wshape[4 + nd + j] = ws[2 + j];
        out[2 + j] = o[j];
        order[3 + j] = 4 + j, order[4 + nd + j] = 4 + nd + j;
        kernel_axes[1 + j] = 4 + nd + j;
    }
    wshape[3 + nd] = cin, order[3 + nd] = 2, kernel_axes[0] = 3 + nd;
    tc_tensor *y = TC_S(s, tc_reshape(p, wide_r, grouped));
    y = TC_S(s, tc_expand(y, wide_r, wide));
    y = TC_S(s, tc_permute(y, order)); /* (N, G, rcout, *o, cin, *k) */
    tc_tensor *wr = TC_S(s, tc_reshape(w, wide_r, wshape));
    y = TC_S(s, tc_mul(y, wr));
    y = TC_S(s, tc_sum(y, nd + 1, kernel_axes, false));
    return TC_S(s, tc_reshape(y, r, out));
}

static tc_tensor *add_bias(tc_scope *s, tc_tensor *y, tc_tensor *bias) {
    int64_t bshape[TC_MAX_DIMS] = {1, bias->node->shape[0]};
    for (int j = 2; j < y->node->ndim; j++) bshape[j] = 1;
    tc_tensor *br = TC_S(s, tc_reshape(bias, y->node->ndim, bshape));
    return TC_S(s, tc_add(y, br));
}

/* y + part, y and part released (y NULL: part as it is); NULL when part is
 * or the add fails. Sums of more parts than a scope holds (the row runs,
 * the phase groups) keep their sum so far in hand with it. */
static tc_tensor *add_owned(tc_tensor *y, tc_tensor *part) {
    tc_tensor *sum = part && y ? tc_add(y, part) : part;
    if (sum != part) tc_release(part);
    tc_release(y);
    return sum;
}

/* the conv of x (N, G*cin, *in) with w (G*rcout, cin, *k), checked: x
 * padded (pad_input), w as conv_of reads it (N, G*rcout, *o) */
static tc_tensor *conv(tc_scope *s, tc_tensor *x, tc_tensor *w, tc_tensor *bias,
                       const conv_args *a) {
    tc_tensor *xp = pad_input(s, x, a);
    tc_tensor *wl = s->failed ? NULL : weight_for_conv(s, w, a);
    tc_tensor *y = s->failed ? NULL : conv_of(s, xp, wl, a);
    return bias && !s->failed ? add_bias(s, y, bias) : y;
}

/* A conv padded along its first spatial axis multiplies zeros wherever a
 * window reaches into the padding: 1/12 of a 3x3 pad-1 conv's products
 * along that axis over 8 rows, 1/6 over 4, 1/5 of beautiful_mnist's 3x3
 * input gradient (10 rows, padded 2). conv_by_rows computes the output rows
 * in runs that read the same taps m = lo .. hi-1 (the top rows that reach
 * above the input, the middle, the bottom ones), each run one conv with no
 * padding along that axis of the rows it reads and the taps it takes (views
 * of one copy of x padded along the other axes, and of one weight copy);
 * the runs' outputs, padded to their places, add up in one elementwise
 * kernel. The other axes keep their padding (a run that split them too
 * would tile a few columns). Taken when the products saved are at least
 * 1/ROW_WASTE of the conv's (an 8-row image; not a 16-row one) and at
 * least ROW_PASS per output element: the sum's pass over the output, a load
 * and a store per element, costs about that many products at the FMA rate
 * (not the tests' 3-channel convs), and where every run has at least
 * ROW_MIN_POSITIONS output positions (images x its rows x the columns): a
 * run of one row of ResNet-18's 16 4x4 images, 64 positions, is too few
 * rows for the tile's packed weight panel, 77 GFLOPS with AVX2 against the
 * whole conv's 125 (176-190 against 208-214 with AVX-512). Cost: O(output
 * rows) to find the runs; a conv per run, at most ROW_RUNS. */
enum { ROW_RUNS = 5, ROW_WASTE = 12, ROW_PASS = 32, ROW_MIN_POSITIONS = 128 };

typedef struct {
    int64_t o0, o1, lo, hi; /* output rows o0 .. o1-1 take taps lo .. hi-1 */
} row_run;

/* the runs of a's first spatial axis (input size n, kernel k, o outputs)
 * and the taps they take in all; 0 runs when more than ROW_RUNS */
static int row_runs(const conv_args *a, int64_t n, int64_t k, int64_t o, row_run *runs, int64_t *taps) {
    int64_t st = a->stride[0], d = a->dilation[0];
    int cnt = 0;
    *taps = 0;
    for (int64_t i = 0; i < o; i++) {
        int64_t first = i * st - a->pad[0]; /* the input row tap 0 reads */
        int64_t lo = first >= 0 ? 0 : (-first + d - 1) / d;
        int64_t hi = n > first ? (n - first + d - 1) / d : 0;
        if (hi > k) hi = k;
        if (hi <= lo) return 0;
        *taps += hi - lo;
        if (cnt > 0 && runs[cnt - 1].o1 == i && runs[cnt - 1].lo == lo && runs[cnt - 1].hi == hi)
            runs[cnt - 1].o1 = i + 1;
        else if (cnt == ROW_RUNS)
            return 0;
        else
            runs[cnt++] = (row_run){i, i + 1, lo, hi};
    }
    return cnt;
}

/* one run's rows: the conv (b: no padding along axis 0, which a padded by
 * pb before) of the rows of xp it reads with taps lo .. hi-1 of wl, padded
 * to its place among the o output rows */
static tc_tensor *row_part(tc_tensor *xp, tc_tensor *wl, const conv_args *b, int64_t pb, const row_run *r,
                           int64_t o) {
    tc_scope s = {0};
    int64_t xcut[2 * TC_MAX_DIMS], wcut[2 * TC_MAX_DIMS], pads[2 * TC_MAX_DIMS] = {0};
    int rank = xp->node->ndim;
    for (int i = 0; i < rank; i++) {
        xcut[2 * i] = wcut[2 * i] = 0;
        xcut[2 * i + 1] = xp->node->shape[i], wcut[2 * i + 1] = wl->node->shape[i];
    }
    int64_t st = b->stride[0], d = b->dilation[0];
    xcut[4] = r->o0 * st - pb + r->lo * d;
    xcut[5] = (r->o1 - 1) * st - pb + (r->hi - 1) * d + 1;
    wcut[4] = r->lo, wcut[5] = r->hi;
    pads[4] = r->o0, pads[5] = o - r->o1;
    tc_tensor *x = TC_S(&s, tc_shrink(xp, xcut));
    tc_tensor *w = TC_S(&s, tc_shrink(wl, wcut));
    tc_tensor *y = s.failed ? NULL : conv_of(&s, x, w, b);
    y = TC_S(&s, tc_pad(y, pads));
    return tc_scope_end(&s, y);
}

/* conv (checked), its output rows by runs where that saves enough */
static tc_tensor *conv_by_rows(tc_scope *s, tc_tensor *x, tc_tensor *w, tc_tensor *bias,
                               const conv_args *a) {
    row_run runs[ROW_RUNS];
    int64_t n = x->node->shape[2], k = w->node->shape[2], taps = 0;
    int64_t o = out_size(n + a->pad[0] + a->pad[1], k, a->stride[0], a->dilation[0]);
    int nr = a->pad[0] >= 0 && a->pad[1] >= 0 && o > 0 ? row_runs(a, n, k, o, runs, &taps) : 0;
    int64_t per_tap = w->node->shape[1]; /* products of one tap of axis 0 for one output */
    for (int j = 1; j < a->nd; j++) per_tap *= w->node->shape[2 + j];
    int64_t fewest = o, per_row = x->node->shape[0]; /* a run's output positions: rows x per_row */
    for (int u = 0; u < nr; u++) fewest = runs[u].o1 - runs[u].o0 < fewest ? runs[u].o1 - runs[u].o0 : fewest;
    for (int j = 1; j < a->nd; j++)
        per_row *= out_size(x->node->shape[2 + j] + a->pad[2 * j] + a->pad[2 * j + 1], w->node->shape[2 + j],
                            a->stride[j], a->dilation[j]);
    if (nr < 2 || (o * k - taps) * ROW_WASTE < o * k || per_tap * (o * k - taps) < ROW_PASS * o ||
        fewest * per_row < ROW_MIN_POSITIONS)
        return conv(s, x, w, bias, a);
    conv_args b = *a;
    b.pad[0] = b.pad[1] = 0;
    bool other_pads = false;
    for (int j = 2; j < 2 * a->nd; j++) other_pads = other_pads || a->pad[j] != 0;
    /* read by every run: x computed once (pad_input copies it when it pads) */
    tc_tensor *xp = other_pads ? pad_input(s, x, &b) : TC_S(s, tc_contiguous(x));
    tc_tensor *wl = s->failed ? NULL : weight_for_conv(s, w, a);
    tc_tensor *y = NULL; /* the sum so far, owned here */
    bool ok = !s->failed;
    for (int u = 0; u < nr && ok; u++) {
        y = add_owned(y, row_part(xp, wl, &b, a->pad[0], &runs[u], o));
        ok = y != NULL;
    }
    y = TC_S(s, y);
    y = TC_S(s, tc_contiguous(y));
    return bias && !s->failed ? add_bias(s, y, bias) : y;
}

/* A conv with no dilation, one group and padding 0 <= p < k, the same on
 * both sides, records one context of its own (TC_AG_CONV2D, any nd, any
 * stride) instead of its ops': the gradients are convolutions again
 * (tc_conv2d_grad), each one reduce kernel, where differentiating the
 * pool's views would give a product over every window element and then a
 * sum over the overlapping windows (a buffer prod(k) times the input's
 * size, and masked multi-view loads: ResNet-18's stride-2 convs' gradients
 * ran at 5 GFLOP/s and their window sums at 0.1 GB/s). */
static bool has_conv_rule(const tc_tensor *w, const conv_args *a) {
    const int64_t *ws = w->node->shape;
    bool ok = a->groups == 1;
    for (int j = 0; j < a->nd; j++)
        ok = ok && a->dilation[j] == 1 && a->pad[2 * j] == a->pad[2 * j + 1] &&
             a->pad[2 * j] >= 0 && a->pad[2 * j] < ws[2 + j];
    return ok;
}

/* conv of checked x, w, bias as a new reference, with its own autograd
 * context where has_conv_rule (else the ops' own); NULL on failure */
static tc_tensor *conv_recorded(tc_tensor *x, tc_tensor *w, tc_tensor *bias, const conv_args *a) {
    bool own = has_conv_rule(w, a) && tc_is_grad_enabled();
    if (own) tc_set_grad_enabled(false);
    tc_scope s = {0};
    tc_tensor *out = tc_scope_end(&s, conv_by_rows(&s, x, w, bias, a));
    if (own) {
        tc_set_grad_enabled(true);
        tc_tensor *ins[3] = {x, w, bias};
        tc_ag_args args = {0};
        for (int j = 0; j < a->nd; j++)
            args.pads[j] = a->pad[2 * j], args.pads[TC_MAX_DIMS + j] = a->stride[j];
        out = tc_ag_record(out, TC_AG_CONV2D, bias ? 3 : 2, ins, &args);
    }
    return out;
}

TC_API tc_tensor *tc_conv2d_ex(tc_tensor *x, tc_tensor *w, tc_tensor *bias, int stride_h,
                               int stride_w, int pad_h, int pad_w, int dilation, int groups) {
    TC_API_ENTER();
    tc_lock();
    tc_tensor *out = NULL;
    conv_args a = {2, {stride_h, stride_w}, {pad_h, pad_h, pad_w, pad_w}, {dilation, dilation},
                   groups};
    if (check_conv("tc_conv2d", x, w, bias, &a, false) == TC_OK)
        out = conv_recorded(x, w, bias, &a);
    tc_unlock();
    return out;
}

/* the node of t (a new reference); t released */
static tc_node *unwrap(tc_tensor *t) {
    tc_node *n = t ? tc_node_retain(t->node) : NULL;
    tc_release(t);
    return n;
}

/* x (N, C, *in) with s-1 zeros between neighbours along each spatial axis:
 * (N, C, *(in-1)*s+1), views only (reshape to (.., in, 1, ..), pad the 1s
 * to s, reshape back, cut the trailing zeros) */
static tc_tensor *zero_insert(tc_scope *s, tc_tensor *x, int nd, const int64_t *st) {
    const int64_t *xs = x->node->shape;
    int64_t split[TC_MAX_DIMS], pads[2 * TC_MAX_DIMS] = {0}, joined[TC_MAX_DIMS];
    int64_t cut[CONV_MAX_ND];
    bool is_strided = false;
    for (int j = 0; j < nd; j++) {
        split[2 * j] = xs[2 + j], split[2 * j + 1] = 1;
        pads[2 * (3 + 2 * j) + 1] = st[j] - 1;
        joined[j] = xs[2 + j] * st[j];
        cut[j] = (xs[2 + j] - 1) * st[j] + 1;
        is_strided = is_strided || st[j] > 1;
    }
    if (!is_strided) return x;
    tc_tensor *y = reshape_tail(s, x, 2, 2 * nd, split);
    y = TC_S(s, tc_pad(y, pads));
    y = reshape_tail(s, y, 2, nd, joined);
    return fit_tail(s, y, nd, cut);
}

/* dx of a strided conv by phases: along an axis of stride s, the inputs
 * j = s*i + r of one phase r read dy at i + m - floor(q/s) through the taps
 * t = s*m + (q mod s) - r of v (w flipped, channels swapped, q = k-1-p), m
 * from 0 to k' - 1 with k' = floor((k - 2 - (q mod s) + s) / s) + 1, of
 * which only those with 0 <= t < k exist: m from lo(r) = [r > q mod s] to
 * hi(r) = min(k' - 1, floor((k - 1 - (q mod s) + r) / s)). lo and hi grow
 * with r, so the phases with the same taps form runs of r (at most three
 * per axis: 3x3 stride 2 pad 1 has r = 0 with one tap, r = 1 with two; 1x1
 * stride 2 has r = 1 with none, its dx 0 there). A group of phases (one run
 * per axis) is one stride-1 conv of dy whose output channels are (Cin, the
 * group's phases) and whose weight holds exactly their taps, reading dy
 * padded once for all groups (its own window a view of that); the groups'
 * outputs, padded along their phase axes to the stride, add up to the
 * phases in their places (views). One conv over all phases with k' taps
 * each did 16/9 of the multiply-adds for 3x3 stride 2 and 4x for 1x1
 * stride 2 (zeros in its weight); the zero-inserted dy the transposed conv
 * reads instead costs s^nd. vt is v, gt the realized dy, in the input's
 * spatial sizes, st the strides, q per axis. Cost: a conv per group (at
 * most 3^nd), each of its phases' exact multiply-adds. */
enum { PHASE_RUNS = 3 };

typedef struct {
    int64_t r0, r1, lo, hi; /* phases r0 .. r1-1 take taps m = lo .. hi */
    int64_t before, after;  /* the padding of dy its conv reads (dx_by_phases) */
} phase_run;

/* the runs of phases with the same taps along one axis; returns their count */
static int phase_runs(int64_t s, int64_t k, int64_t qm, int64_t kp, phase_run *runs) {
    int n = 0;
    for (int64_t r = 0; r < s; r++) {
        int64_t lo = r > qm ? 1 : 0, hi = (k - 1 - qm + r) / s;
        if (hi > kp - 1) hi = kp - 1;
        if (hi < lo) continue; /* no taps: dx is 0 at this phase */
        if (n > 0 && runs[n - 1].r1 == r && runs[n - 1].lo == lo && runs[n - 1].hi == hi)
            runs[n - 1].r1 = r + 1;
        else if (n < PHASE_RUNS)
            runs[n++] = (phase_run){r, r + 1, lo, hi, 0, 0};
    }
    return n;
}

/* one group's dx: the conv of dyp (dy padded by gpad, the most any group
 * needs) with the phases r0..r1-1 and taps lo..hi of wv (cin, s1.., cout,
 * k'1..), its result (N, cin, hq1, s1, ...) zero outside the group's phases */
static tc_tensor *phase_group(tc_tensor *dyp, tc_tensor *wv, int nd, const phase_run *const *g,
                              const int64_t *st, const int64_t *hq, const int64_t *gpad) {
    tc_scope s = {0};
    const int64_t *ws = wv->node->shape;
    int64_t cin = ws[0], cout = ws[1 + nd], group = 1, cut[2 * TC_MAX_DIMS], wshape[TC_MAX_DIMS];
    int64_t oshape[TC_MAX_DIMS], pads[2 * TC_MAX_DIMS] = {0};
    int oorder[TC_MAX_DIMS];
    conv_args pa = {.nd = nd, .groups = 1};
    for (int i = 0; i < 2 + 2 * nd; i++) cut[2 * i] = 0, cut[2 * i + 1] = ws[i];
    oshape[0] = dyp->node->shape[0], oshape[1] = cin, oorder[0] = 0, oorder[1] = 1;
    for (int j = 0; j < nd; j++) {
        const phase_run *r = g[j];
        cut[2 * (1 + j)] = r->r0, cut[2 * (1 + j) + 1] = r->r1;
        cut[2 * (2 + nd + j)] = r->lo, cut[2 * (2 + nd + j) + 1] = r->hi + 1;
        wshape[2 + j] = r->hi - r->lo + 1;
        group *= r->r1 - r->r0;
        /* this group's window of dyp: crops only */
        pa.stride[j] = pa.dilation[j] = 1;
        pa.pad[2 * j] = r->before - gpad[2 * (2 + j)];
        pa.pad[2 * j + 1] = r->after - gpad[2 * (2 + j) + 1];
        oshape[2 + j] = r->r1 - r->r0, oshape[2 + nd + j] = hq[j];
        oorder[2 + 2 * j] = 2 + nd + j, oorder[3 + 2 * j] = 2 + j;
        pads[2 * (3 + 2 * j)] = r->r0, pads[2 * (3 + 2 * j) + 1] = st[j] - r->r1;
    }
    wshape[0] = cin * group, wshape[1] = cout;
    tc_tensor *w = TC_S(&s, tc_shrink(wv, cut));
    w = TC_S(&s, tc_reshape(w, 2 + nd, wshape));
    tc_tensor *y = s.failed ? NULL : conv(&s, dyp, w, NULL, &pa); /* (N, cin*group, *hq) */
    y = TC_S(&s, tc_reshape(y, 2 + 2 * nd, oshape));              /* (N, cin, g1.., hq1..) */
    y = TC_S(&s, tc_permute(y, oorder));                          /* (N, cin, hq1, g1, ...) */
    y = TC_S(&s, tc_pad(y, pads));                                /* (N, cin, hq1, s1, ...) */
    return tc_scope_end(&s, y);
}

static tc_tensor *dx_by_phases(tc_scope *s, tc_tensor *gt, tc_tensor *vt, int nd,
                               const int64_t *in, const int64_t *st, const int64_t *q) {
    int64_t vpad[2 * TC_MAX_DIMS] = {0}, vcut[2 * TC_MAX_DIMS], vsplit[TC_MAX_DIMS];
    int64_t joined[TC_MAX_DIMS], cut[CONV_MAX_ND], hq[CONV_MAX_ND];
    int64_t gpad[2 * TC_MAX_DIMS] = {0};
    int vorder[TC_MAX_DIMS], phase_axes[CONV_MAX_ND], nruns[CONV_MAX_ND];
    phase_run runs[CONV_MAX_ND][PHASE_RUNS];
    const int64_t *vs = vt->node->shape, *gs = gt->node->shape;
    int64_t cin = vs[0], cout = vs[1], groups = 1;
    bool has_pad = false;
    vsplit[0] = cin, vsplit[1] = cout;
    vcut[0] = 0, vcut[1] = cin, vcut[2] = 0, vcut[3] = cout;
    vorder[0] = 0, vorder[1 + nd] = 1; /* cin, the phases, cout, the taps */
    for (int j = 0; j < nd; j++) {
        int64_t sj = st[j], k = vs[2 + j], qm = q[j] % sj, kp = (k - 2 - qm + sj) / sj + 1;
        int64_t base = qm - (sj - 1), pb = 0, pa = 0;
        hq[j] = (in[j] + sj - 1) / sj;
        /* taps base .. base + s*k' - 1 of v, zeros outside 0..k-1 */
        vpad[2 * (2 + j)] = -base, vpad[2 * (2 + j) + 1] = base + sj * kp > k ? base + sj * kp - k : 0;
        vcut[2 * (2 + j)] = 0, vcut[2 * (2 + j) + 1] = sj * kp;
        vsplit[2 + 2 * j] = kp, vsplit[3 + 2 * j] = sj;
        vorder[1 + j] = 3 + 2 * j, vorder[2 + nd + j] = 2 + 2 * j;
        phase_axes[j] = 1 + j;
        nruns[j] = phase_runs(sj, k, qm, kp, runs[j]);
        groups *= nruns[j];
        /* dy read at i + m - floor(q/s), m = lo .. hi, for hq outputs: each
         * run's padding, and the most any needs */
        for (int u = 0; u < nruns[j]; u++) {
            phase_run *r = &runs[j][u];
            r->before = q[j] / sj - r->lo;
            r->after = hq[j] + r->hi - r->lo - gs[2 + j] - r->before;
            pb = r->before > pb ? r->before : pb;
            pa = r->after > pa ? r->after : pa;
        }
        gpad[2 * (2 + j)] = pb, gpad[2 * (2 + j) + 1] = pa;
        has_pad = has_pad || pb > 0 || pa > 0;
        joined[j] = hq[j] * sj, cut[j] = in[j];
    }
    tc_tensor *w = TC_S(s, tc_pad(vt, vpad));
    w = TC_S(s, tc_shrink(w, vcut));
    w = TC_S(s, tc_reshape(w, 2 + 2 * nd, vsplit));  /* (cin, cout, k'1, s1, ...) */
    w = TC_S(s, tc_permute(w, vorder));              /* (cin, s1.., cout, k'1..) */
    w = TC_S(s, tc_flip(w, nd, phase_axes));         /* index r: phase r (the split held s-1-r) */
    tc_tensor *dyp = has_pad ? TC_S(s, tc_pad(gt, gpad)) : gt; /* padded once, in a buffer */
    if (has_pad) dyp = TC_S(s, tc_contiguous(dyp));
    tc_tensor *y = NULL; /* the sum so far, owned here (up to 3^nd groups: more than a scope holds) */
    bool ok = !s->failed;
    for (int64_t gi = 0; gi < groups && ok; gi++) {
        const phase_run *g[CONV_MAX_ND];
        for (int j = nd - 1, rest = (int)gi; j >= 0; rest /= nruns[j], j--) g[j] = &runs[j][rest % nruns[j]];
        y = add_owned(y, phase_group(dyp, w, nd, g, st, hq, gpad));
        ok = y != NULL;
    }
    y = TC_S(s, y);
    y = reshape_tail(s, y, 2, nd, joined);
    return fit_tail(s, y, nd, cut);
}

/* The gradients of y = conv(x, w), stride s, padding p, kernel k, per
 * spatial axis; e = (in + 2p - k) % s is what the forward's last window
 * left unread at the end.
 *   dx = the transposed conv: stride 1, the conv of dy padded k-1-p with w
 *        flipped and its in and out channels swapped; strided, by phases
 *        (dx_by_phases).
 *   dw = a conv over the batch: x seen as (Cin, N, *in) padded p before and
 *        p-e after, dy as (Cout, N, *out) its weight with dilation s;
 *        (Cin, Cout, *k) swapped back.
 *   dbias = dy summed over the batch and space. */
void tc_conv2d_grad(const tc_ag_ctx *c, tc_node *g, tc_node **grads) {
    tc_node *xn = c->inputs[0], *wn = c->inputs[1];
    int nd = wn->ndim - 2, sp[CONV_MAX_ND], nsp[CONV_MAX_ND + 1] = {0}, swap01[TC_MAX_DIMS];
    conv_args dxa = {.nd = nd, .groups = 1}, dwa = {.nd = nd, .groups = 1};
    int64_t st[CONV_MAX_ND], qs[CONV_MAX_ND];
    bool is_padded = false, is_strided = false;
    for (int i = 0; i < nd + 2; i++) swap01[i] = i < 2 ? 1 - i : i;
    for (int j = 0; j < nd; j++) {
        int64_t p = c->args.pads[j], k = wn->shape[2 + j], q = k - 1 - p;
        st[j] = c->args.pads[TC_MAX_DIMS + j];
        int64_t e = (xn->shape[2 + j] + 2 * p - k) % st[j];
        sp[j] = nsp[1 + j] = 2 + j;
        dxa.pad[2 * j] = dxa.pad[2 * j + 1] = qs[j] = q;
        is_padded = is_padded || q != 0;
        is_strided = is_strided || st[j] > 1;
        dxa.stride[j] = dxa.dilation[j] = dwa.stride[j] = 1;
        dwa.dilation[j] = st[j];
        dwa.pad[2 * j] = p, dwa.pad[2 * j + 1] = p - e;
    }
    tc_scope s = {0};
    tc_tensor *gt = TC_S(&s, tc_tensor_wrap(tc_node_retain(g)));
    tc_node_release(g);
    if (c->parents[0]) { /* dx: the transposed conv */
        tc_tensor *wt = TC_S(&s, tc_tensor_wrap(tc_node_retain(wn)));
        wt = TC_S(&s, tc_flip(wt, nd, sp)); /* one call a statement: TC_S skips after a failure */
        wt = TC_S(&s, tc_permute(wt, swap01));
        /* dy is realized before conv's pad_input copies it padded: the
         * padded copy of an expression (beautiful_mnist: BatchNorm's and
         * max-pool's backward) gates every load and stays scalar, 76 ms,
         * where dy's own kernel and the copy take 6 + 10 ms. dw below reads
         * the realized dy too: its channels-last copy a transpose. */
        tc_tensor *dx = NULL;
        if (is_padded || is_strided) gt = TC_S(&s, tc_contiguous(gt));
        tc_scope ds = {0}; /* the phases' views and the conv's fill a scope of their own */
        if (!s.failed)
            dx = is_strided ? dx_by_phases(&ds, gt, wt, nd, xn->shape + 2, st, qs)
                            : conv_by_rows(&ds, gt, wt, NULL, &dxa); /* dy padded q */
        dx = tc_scope_end(&ds, dx);
        if (!dx) s.failed = true;
        grads[0] = dx ? unwrap(dx) : NULL;
    }
    if (c->parents[1]) { /* dw: a conv over n, dy the weight with dilation s */
        tc_tensor *xt = TC_S(&s, tc_tensor_wrap(tc_node_retain(xn)));
        xt = TC_S(&s, tc_permute(xt, swap01));
        tc_tensor *gn = TC_S(&s, tc_permute(gt, swap01));
        tc_tensor *dw = s.failed ? NULL : conv(&s, xt, gn, NULL, &dwa);
        grads[1] = s.failed ? NULL : unwrap(tc_retain(TC_S(&s, tc_permute(dw, swap01))));
    }
    if (c->n_inputs > 2 && c->parents[2]) /* dbias = dy summed over n and space */
        grads[2] = s.failed ? NULL : unwrap(tc_retain(TC_S(&s, tc_sum(gt, nd + 1, nsp, false))));
    tc_scope_end(&s, NULL);
}

TC_API tc_tensor *tc_conv2d(tc_tensor *x, tc_tensor *w, tc_tensor *bias, int stride, int padding) {
    TC_API_ENTER();
    return tc_conv2d_ex(x, w, bias, stride, stride, padding, padding, 1, 1);
}

static bool is_big(int64_t v) {
    return v > INT32_MAX || v < -(int64_t)INT32_MAX;
}

/* a's per-axis values from a public call: nd in range, NULL arrays the
 * defaults (stride and dilation 1, padding 0); pad_per_axis: padding holds
 * one value per axis for both sides, else before/after pairs */
TC_MUST_USE static tc_status conv_args_from(const char *api, int nd, const int64_t *stride,
                                            const int64_t *padding, bool pad_per_axis,
                                            const int64_t *dilation, int64_t groups,
                                            conv_args *a) {
    if (nd < 1 || nd > CONV_MAX_ND)
        return tc_error_set(TC_ERR_INVALID, "%s: nd %d must be 1..%d", api, nd, CONV_MAX_ND);
    a->nd = nd, a->groups = groups;
    bool is_huge = is_big(groups); /* sizes computed from these stay far from int64 overflow */
    for (int j = 0; j < nd; j++) {
        a->stride[j] = stride ? stride[j] : 1;
        a->dilation[j] = dilation ? dilation[j] : 1;
        a->pad[2 * j] = padding ? padding[pad_per_axis ? j : 2 * j] : 0;
        a->pad[2 * j + 1] = padding ? padding[pad_per_axis ? j : 2 * j + 1] : 0;
        is_huge = is_huge || is_big(a->stride[j]) || is_big(a->dilation[j]) ||
                  is_big(a->pad[2 * j]) || is_big(a->pad[2 * j + 1]);
    }
    if (is_huge)
        return tc_error_set(TC_ERR_INVALID, "%s: stride, padding, dilation and groups must be "
                            "within +-%d", api, INT32_MAX);
    return TC_OK;
}

TC_API tc_tensor *tc_conv_nd(tc_tensor *x, tc_tensor *w, tc_tensor *bias, int nd,
                             const int64_t *stride, const int64_t *padding,
                             const int64_t *dilation, int64_t groups) {
    TC_API_ENTER();
    tc_lock();
    tc_tensor *out = NULL;
    conv_args a;
    if (conv_args_from("tc_conv_nd", nd, stride, padding, false, dilation, groups, &a) == TC_OK &&
        check_conv("tc_conv_nd", x, w, bias, &a, true) == TC_OK)
        out = conv_recorded(x, w, bias, &a);
    tc_unlock();
    return out;
}

/* ---- transposed convolution ---- */

/* x (N, Cin, *in), w (Cin, Cout/G, *k), bias fit a transposed conv with a
 * (symmetric padding >= 0 in a->pad[2j]) and output_padding op */
TC_MUST_USE static tc_status check_transpose(tc_tensor *x, tc_tensor *w, tc_tensor *bias,
                                             const conv_args *a, const int64_t *op) {
    const char *api = "tc_conv_transpose_nd";
    tc_status s = check_operands(api, x, w, bias);
    if (s != TC_OK) return s;
    int nd = a->nd;
    char b1[256], b2[256], b3[256], b4[256];
    int64_t pads[CONV_MAX_ND];
    bool bad = a->groups < 1;
    for (int j = 0; j < nd; j++) {
        pads[j] = a->pad[2 * j];
        bad = bad || a->stride[j] < 1 || a->dilation[j] < 1 || pads[j] < 0 || op[j] < 0 ||
              (op[j] >= a->stride[j] && op[j] >= a->dilation[j]);
    }
    if (bad)
        return tc_error_set(TC_ERR_INVALID, "%s: stride %s and dilation %s must be >= 1, "
                            "padding %s >= 0, output_padding %s >= 0 and smaller than stride or "
                            "dilation, groups %lld >= 1", api,
                            tc_fmt_shape(b1, sizeof b1, nd, a->stride),
                            tc_fmt_shape(b2, sizeof b2, nd, a->dilation),
                            tc_fmt_shape(b3, sizeof b3, nd, pads),
                            tc_fmt_shape(b4, sizeof b4, nd, op),
                            (long long)a->groups);
    const tc_node *xn = x->node, *wn = w->node;
    tc_fmt_shape(b1, sizeof b1, xn->ndim, xn->shape);
    tc_fmt_shape(b2, sizeof b2, wn->ndim, wn->shape);
    if (xn->ndim != 2 + nd || wn->ndim != 2 + nd)
        return tc_error_set(TC_ERR_SHAPE, "%s: x %s must be (N,Cin,%d spatial dims) and w %s "
                            "(Cin,Cout/groups,%d kernel dims)", api, b1, nd, b2, nd);
    if (wn->shape[0] != xn->shape[1] || xn->shape[1] % a->groups != 0)
        return tc_error_set(TC_ERR_SHAPE, "%s: x %s and w %s do not fit groups %lld (need "
                            "Cin = w.shape[0], divisible by groups)", api, b1, b2,
                            (long long)a->groups);
    for (int j = 0; j < nd; j++) {
        int64_t size = (xn->shape[2 + j] - 1) * a->stride[j] - 2 * pads[j] +
                       a->dilation[j] * (wn->shape[2 + j] - 1) + op[j] + 1;
        if (size < 1)
            return tc_error_set(TC_ERR_SHAPE, "%s: x %s with w %s, padding %s gives output size "
                                "%lld along spatial axis %d", api, b1, b2,
                                tc_fmt_shape(b3, sizeof b3, nd, pads), (long long)size, j);
    }
    int64_t cout = wn->shape[1] * a->groups;
    if (bias && (bias->node->ndim != 1 || bias->node->shape[0] != cout))
        return tc_error_set(TC_ERR_SHAPE, "%s: bias %s must be (%lld) for w %s and groups %lld",
                            api, tc_fmt_shape(b3, sizeof b3, bias->node->ndim, bias->node->shape),
                            (long long)cout, b2, (long long)a->groups);
    return TC_OK;
}

/* w (Cin, Cout/G, *k) as the weight of the equivalent conv: per group in
 * and out swapped, (Cout, Cin/G, *k), the kernel flipped */
static tc_tensor *transpose_weight(tc_scope *s, tc_tensor *w, int nd, int64_t g) {
    const int64_t *ws = w->node->shape;
    int64_t split[TC_MAX_DIMS] = {g, ws[0] / g, ws[1]};
    int64_t joined[TC_MAX_DIMS] = {g * ws[1], ws[0] / g};
    int order[TC_MAX_DIMS] = {0, 2, 1}, axes[CONV_MAX_ND];
    for (int j = 0; j < nd; j++) {
        split[3 + j] = joined[2 + j] = ws[2 + j];
        order[3 + j] = 3 + j;
        axes[j] = 2 + j;
    }
    tc_tensor *y = TC_S(s, tc_reshape(w, 3 + nd, split)); /* (G, Cin/G, Cout/G, *k) */
    y = TC_S(s, tc_permute(y, order));
    y = TC_S(s, tc_reshape(y, 2 + nd, joined));
    return TC_S(s, tc_flip(y, nd, axes));
}

TC_API tc_tensor *tc_conv_transpose_nd(tc_tensor *x, tc_tensor *w, tc_tensor *bias, int nd,
                                       const int64_t *stride, const int64_t *padding,
                                       const int64_t *output_padding, const int64_t *dilation,
                                       int64_t groups) {
    TC_API_ENTER();
    tc_lock();
    tc_tensor *out = NULL;
    conv_args a;
    int64_t op[CONV_MAX_ND] = {0};
    const char *api = "tc_conv_transpose_nd";
    if (conv_args_from(api, nd, stride, padding, true, dilation, groups, &a) != TC_OK) goto done;
    for (int j = 0; j < nd && output_padding; j++) op[j] = output_padding[j];
    if (check_transpose(x, w, bias, &a, op) != TC_OK) goto done;
    /* the equivalent conv: stride 1 over the zero-inserted x, padding
     * d*(k-1)-p before and that plus output_padding after */
    conv_args c = {.nd = nd, .groups = groups};
    for (int j = 0; j < nd; j++) {
        int64_t edge = a.dilation[j] * (w->node->shape[2 + j] - 1) - a.pad[2 * j];
        c.stride[j] = 1, c.dilation[j] = a.dilation[j];
        c.pad[2 * j] = edge, c.pad[2 * j + 1] = edge + op[j];
    }
    tc_scope s = {0};
    tc_tensor *xz = zero_insert(&s, x, nd, a.stride);
    tc_tensor *wt = s.failed ? NULL : transpose_weight(&s, w, nd, groups);
    tc_tensor *y = s.failed ? NULL : TC_S(&s, conv_recorded(xz, wt, bias, &c));
    out = tc_scope_end(&s, y);
done:
    tc_unlock();
    return out;
}

/* ---- pools ---- */

/* max or mean over the checked windows of the last nd axes of x; a new
 * reference, NULL on failure */
static tc_tensor *pool_reduce(tc_tensor *x, int nd, const int64_t *k, const int64_t *st,
                              const int64_t *d, bool is_max) {
    tc_scope s = {0};
    int win[TC_MAX_DIMS];
    tc_tensor *p = pool_axes(&s, x, nd, k, st, d, win);
    tc_tensor *r = s.failed ? NULL
                   : is_max ? TC_S(&s, tc_max(p, nd, win, false))
                            : TC_S(&s, tc_mean(p, nd, win, false));
    return tc_scope_end(&s, r);
}

static tc_tensor *pool2d(const char *api, tc_tensor *x, int kernel, int stride, bool is_max) {
    tc_lock();
    tc_tensor *out = NULL;
    if (tc_tensor_check(x, api, "x") != TC_OK) goto done;
    int64_t st = stride <= 0 ? kernel : stride, k[2] = {kernel, kernel}, ss[2] = {st, st};
    static const int64_t d[2] = {1, 1};
    const tc_node *n = x->node;
    char b[256];
    if (kernel < 1) {
        tc_error_set(TC_ERR_INVALID, "%s: kernel %d must be >= 1", api, kernel);
        goto done;
    }
    if (n->ndim < 2 || n->ndim > TC_MAX_DIMS - 4 || out_size(n->shape[n->ndim - 2], kernel, st, 1) < 1 ||
        out_size(n->shape[n->ndim - 1], kernel, st, 1) < 1) {
        tc_error_set(TC_ERR_SHAPE, "%s: kernel %d does not fit the last two dims of %s", api,
                     kernel, tc_fmt_shape(b, sizeof b, n->ndim, n->shape));
        goto done;
    }
    out = pool_reduce(x, 2, k, ss, d, is_max);
done:
    tc_unlock();
    return out;
}

/* max or mean over windows of the last nd axes of x: kernel, stride (NULL:
 * the kernel) and dilation (NULL: 1) nd values each. The windows' widest
 * view has two dims more per pooled axis (kernel, output and stride rows
 * for each): rank + 2*nd must stay within TC_MAX_DIMS. */
static tc_tensor *pool_nd(const char *api, tc_tensor *x, int nd, const int64_t *kernel,
                          const int64_t *stride, const int64_t *dilation, bool is_max) {
    tc_lock();
    tc_tensor *out = NULL;
    int64_t k[TC_MAX_DIMS], st[TC_MAX_DIMS], d[TC_MAX_DIMS];
    char b1[256], b2[256], b3[256], b4[256];
    if (tc_tensor_check(x, api, "x") != TC_OK) goto done;
    const tc_node *n = x->node;
    if (nd < 1 || nd > n->ndim || n->ndim + 2 * nd > TC_MAX_DIMS) {
        tc_error_set(TC_ERR_SHAPE, "%s: nd %d for x %s (1 to its rank, %d, with rank + 2*nd at "
                     "most %d)", api, nd, tc_fmt_shape(b1, sizeof b1, n->ndim, n->shape),
                     n->ndim, TC_MAX_DIMS);
        goto done;
    }
    if (!kernel) {
        tc_error_set(TC_ERR_INVALID, "%s: kernel is NULL", api);
        goto done;
    }
    bool bad = false;
    for (int j = 0; j < nd; j++) {
        k[j] = kernel[j], st[j] = stride ? stride[j] : kernel[j], d[j] = dilation ? dilation[j] : 1;
        bad |= k[j] < 1 || st[j] < 1 || d[j] < 1 || k[j] > INT32_MAX || st[j] > INT32_MAX ||
               d[j] > INT32_MAX;
    }
    tc_fmt_shape(b1, sizeof b1, nd, k), tc_fmt_shape(b2, sizeof b2, nd, st);
    tc_fmt_shape(b3, sizeof b3, nd, d);
    if (bad) {
        tc_error_set(TC_ERR_INVALID, "%s: kernel %s, stride %s and dilation %s must be 1 to "
                     "2^31-1", api, b1, b2, b3);
        goto done;
    }
    for (int j = 0; j < nd; j++)
        if (out_size(n->shape[n->ndim - nd + j], k[j], st[j], d[j]) < 1) {
            tc_error_set(TC_ERR_SHAPE, "%s: kernel %s (dilation %s) does not fit the last %d "
                         "dims of %s", api, b1, b3, nd,
                         tc_fmt_shape(b4, sizeof b4, n->ndim, n->shape));
            goto done;
        }
    out = pool_reduce(x, nd, k, st, d, is_max);
done:
    tc_unlock();
    return out;
}

TC_API tc_tensor *tc_max_pool_nd(tc_tensor *x, int nd, const int64_t *kernel,
                                 const int64_t *stride, const int64_t *dilation) {
    TC_API_ENTER();
    return pool_nd("tc_max_pool_nd", x, nd, kernel, stride, dilation, true);
}

TC_API tc_tensor *tc_avg_pool_nd(tc_tensor *x, int nd, const int64_t *kernel,
                                 const int64_t *stride, const int64_t *dilation) {
    TC_API_ENTER();
    return pool_nd("tc_avg_pool_nd", x, nd, kernel, stride, dilation, false);
}

TC_API tc_tensor *tc_max_pool2d(tc_tensor *x, int kernel, int stride) {
    TC_API_ENTER();
    return pool2d("tc_max_pool2d", x, kernel, stride, true);
}

TC_API tc_tensor *tc_avg_pool2d(tc_tensor *x, int kernel, int stride) {
    TC_API_ENTER();
    return pool2d("tc_avg_pool2d", x, kernel, stride, false);
}

/* ---- batchnorm ---- */

/* the (C) tensor t (NULL is fine) checked against C */
TC_MUST_USE static tc_status check_channel(const char *name, const tc_tensor *t, int64_t c) {
    if (!t || (t->node->ndim == 1 && t->node->shape[0] == c)) return TC_OK;
    char b[256];
    return tc_error_set(TC_ERR_SHAPE, "tc_batchnorm: %s has shape %s, expected (%lld)", name,
                        tc_fmt_shape(b, sizeof b, t->node->ndim, t->node->shape), (long long)c);
}

TC_MUST_USE static tc_status check_batchnorm(tc_tensor *const *ts, bool training, double momentum,
                                 double eps) {
    static const char *const names[5] = {"x", "weight", "bias", "running_mean", "running_var"};
    tc_status s = tc_tensor_check(ts[0], "tc_batchnorm", "x");
    if (s == TC_OK) s = tc_tensor_same_device("tc_batchnorm", 5, ts, names);
    if (s != TC_OK) return s;
    const tc_node *x = ts[0]->node;
    char b[256];
    if (x->ndim < 2)
        return tc_error_set(TC_ERR_SHAPE, "tc_batchnorm: x %s must be (N,C) or (N,C,...)",
                            tc_fmt_shape(b, sizeof b, x->ndim, x->shape));
    for (int i = 1; i < 5 && s == TC_OK; i++) s = check_channel(names[i], ts[i], x->shape[1]);
    if (s != TC_OK) return s;
    if (!ts[3] != !ts[4])
        return tc_error_set(TC_ERR_INVALID, "tc_batchnorm: give both running_mean and "
                            "running_var, or neither");
    if (!(momentum >= 0 && momentum <= 1) || !(eps >= 0))
        return tc_error_set(TC_ERR_INVALID, "tc_batchnorm: momentum %g must be in [0, 1] and eps "
                            "%g >= 0", momentum, eps);
    int64_t per_channel = tc_node_numel(x) / (x->shape[1] ? x->shape[1] : 1);
    if (training && ts[3] && per_channel < 2)
        return tc_error_set(TC_ERR_SHAPE, "tc_batchnorm: training needs more than 1 value per "
                            "channel, x is %s", tc_fmt_shape(b, sizeof b, x->ndim, x->shape));
    return TC_OK;
}

/* r.assign((1 - momentum) * r + factor * stat.detach()) */
TC_MUST_USE static tc_status update_running(tc_scope *s, tc_tensor *r, tc_tensor *stat, double momentum,
                                double factor) {
    tc_tensor *keep = tc_scope_scalar(s, r, 1 - momentum), *take = tc_scope_scalar(s, r, factor);
    tc_tensor *sd = TC_S(s, tc_detach(stat));
    tc_tensor *old = TC_S(s, tc_mul(keep, r)), *fresh = TC_S(s, tc_mul(take, sd));
    tc_tensor *v = TC_S(s, tc_add(old, fresh));
    return s->failed ? tc_error_code() : tc_assign(r, v);
}

/* x normalized per channel (training, or no running stats: batch stats) */
static tc_tensor *batchnorm(tc_scope *s, tc_tensor *const *ts, bool training, double momentum,
                            double eps) {
    tc_tensor *x = ts[0], *rm = ts[3], *rv = ts[4];
    int nd = x->node->ndim, axes[TC_MAX_DIMS], na = 0;
    int64_t c = x->node->shape[1], bshape[TC_MAX_DIMS];
    for (int i = 0; i < nd; i++) {
        bshape[i] = i == 1 ? c : 1;
        if (i != 1) axes[na++] = i;
    }
    bool use_batch = training || !rm;
    tc_tensor *mean = use_batch ? TC_S(s, tc_mean(x, na, axes, false)) : rm;
    tc_tensor *mean_b = TC_S(s, tc_reshape(mean, nd, bshape));
    tc_tensor *y = TC_S(s, tc_sub(x, mean_b));
    tc_tensor *y2 = use_batch ? TC_S(s, tc_mul(y, y)) : NULL;
    tc_tensor *var = use_batch ? TC_S(s, tc_mean(y2, na, axes, false)) : rv;
    tc_tensor *e = s->failed ? NULL : tc_scope_scalar(s, var, eps);
    tc_tensor *ve = TC_S(s, tc_add(var, e));
    tc_tensor *sd = TC_S(s, tc_sqrt(ve));
    tc_tensor *inv = TC_S(s, tc_recip(sd));
    tc_tensor *inv_b = TC_S(s, tc_reshape(inv, nd, bshape));
    tc_tensor *out = TC_S(s, tc_mul(y, inv_b));
    for (int i = 1; i <= 2; i++) { /* weight, then bias */
        if (!ts[i]) continue;
        tc_tensor *p = TC_S(s, tc_reshape(ts[i], nd, bshape));
        out = i == 1 ? TC_S(s, tc_mul(out, p)) : TC_S(s, tc_add(out, p));
    }
    if (s->failed || !training || !rm) return out;
    double n = (double)(tc_node_numel(x->node) / c);
    if (update_running(s, rm, mean, momentum, momentum) != TC_OK ||
        update_running(s, rv, var, momentum, momentum * n / (n - 1)) != TC_OK)
        s->failed = true;
    return out;
}

TC_API tc_tensor *tc_batchnorm(tc_tensor *x, tc_tensor *weight, tc_tensor *bias,
                               tc_tensor *running_mean, tc_tensor *running_var, bool training,
                               double momentum, double eps) {
    TC_API_ENTER();
    tc_lock();
    tc_tensor *out = NULL, *ts[5] = {x, weight, bias, running_mean, running_var};
    if (check_batchnorm(ts, training, momentum, eps) == TC_OK) {
        tc_scope s = {0};
        out = tc_scope_end(&s, batchnorm(&s, ts, training, momentum, eps));
    }
    tc_unlock();
    return out;
}
