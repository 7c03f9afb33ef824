/* view.c - views and shape trackers: how the indices of a tensor map onto the
 * elements of a buffer, so movement ops never copy.
 *
 * A view is (shape, strides, offset, mask), kept canonical (view_canon) so
 * equal mappings usually compare equal. A tracker is a stack of views. Every
 * movement op rewrites the outermost view; a reshape that one view cannot
 * express stacks a new contiguous view. After each op the two outermost views
 * are merged into one while that is possible (simplify), the way tinygrad's
 * View.__add__ does it. Inputs are never modified: each tc_st_* function
 * returns a new tracker (one allocation, freed by tc_st_free) or NULL with
 * TC_ERR_MEMORY set.
 */
#include "graph/graph.h"

#include <string.h>

/* ---- integer helpers ------------------------------------------------------ */
static int64_t floor_div(int64_t a, int64_t b) {
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
static int64_t ceil_div(int64_t a, int64_t b) {
    return -floor_div(-a, b);
}
static int64_t imax(int64_t a, int64_t b) {
    return a > b ? a : b;
}
static int64_t imin(int64_t a, int64_t b) {
    return a < b ? a : b;
}
static int64_t clamp(int64_t x, int64_t lo, int64_t hi) {
    return imin(imax(x, lo), hi);
}

static int64_t shape_numel(int ndim, const int64_t *shape) {
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= shape[d];
    return n;
}

/* row-major strides of shape, 0 for size-1 dims */
static void rowmajor(int ndim, const int64_t *shape, int64_t *strides) {
    int64_t acc = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        strides[d] = shape[d] == 1 ? 0 : acc;
        acc *= shape[d];
    }
}

/* ---- single views ----------------------------------------------------------- */

/* Canonicalises v in place (v->ndim, shape, strides, offset, has_mask and, if
 * set, the mask are the input): size-1 dims get stride 0; an all-full mask is
 * dropped; an empty mask makes the all-invalid view (strides 0, offset 0, mask
 * (0,0) everywhere); a dim whose mask keeps one index gets stride 0 with its
 * start folded into the offset; a 0-element view becomes contiguous. Unused
 * entries are zeroed and is_contiguous is set. */
static void view_canon(tc_view *v) {
    int n = v->ndim;
    int64_t rm[TC_MAX_DIMS];
    rowmajor(n, v->shape, rm);
    for (int d = 0; d < n; d++)
        if (v->shape[d] == 1) v->strides[d] = 0;
    if (shape_numel(n, v->shape) == 0) {
        memcpy(v->strides, rm, sizeof rm);
        v->offset = 0;
        v->has_mask = false;
    }
    if (v->has_mask) {
        bool full = true, empty = false;
        for (int d = 0; d < n; d++) {
            if (v->mask_begin[d] != 0 || v->mask_end[d] != v->shape[d]) full = false;
            if (v->mask_begin[d] >= v->mask_end[d]) empty = true;
        }
        if (full) {
            v->has_mask = false;
        } else if (empty) {
            for (int d = 0; d < n; d++) v->strides[d] = v->mask_begin[d] = v->mask_end[d] = 0;
            v->offset = 0;
        } else {
            for (int d = 0; d < n; d++) {
                if (v->mask_end[d] - v->mask_begin[d] != 1) continue;
                v->offset += v->strides[d] * v->mask_begin[d];
                v->strides[d] = 0;
            }
        }
    }
    if (!v->has_mask) {
        memset(v->mask_begin, 0, sizeof v->mask_begin);
        memset(v->mask_end, 0, sizeof v->mask_end);
    }
    for (int d = n; d < TC_MAX_DIMS; d++) v->shape[d] = v->strides[d] = 0;
    v->is_contiguous =
        v->offset == 0 && !v->has_mask && memcmp(v->strides, rm, n * sizeof *rm) == 0;
}

static void view_contig(tc_view *v, int ndim, const int64_t *shape) {
    memset(v, 0, sizeof *v);
    v->ndim = ndim;
    for (int d = 0; d < ndim; d++) v->shape[d] = shape[d]; /* shape may be NULL at rank 0 */
    rowmajor(ndim, shape, v->strides);
    view_canon(v);
}

/* the view where every index is invalid; needs ndim >= 1 */
static void view_invalid(tc_view *v, int ndim, const int64_t *shape) {
    view_contig(v, ndim, shape);
    v->has_mask = true; /* mask (0,0) everywhere, from view_contig's zeroing */
    view_canon(v);
}

static bool view_is_invalid(const tc_view *v) {
    if (!v->has_mask) return false;
    for (int d = 0; d < v->ndim; d++)
        if (v->mask_begin[d] >= v->mask_end[d]) return true;
    return false;
}

static int64_t view_numel(const tc_view *v) {
    return shape_numel(v->ndim, v->shape);
}

/* Resize: new index i of dim d reads old index i + lo[d]; the new size is
 * hi[d] - lo[d]. The old mask moves along; extra (2*ndim begin/end pairs, or
 * NULL) is intersected with it. pad and shrink are both resizes. */
static void view_resize(const tc_view *v, const int64_t *lo, const int64_t *hi,
                        const int64_t *extra, tc_view *out) {
    *out = *v;
    for (int d = 0; d < v->ndim; d++) {
        int64_t ns = hi[d] - lo[d];
        out->shape[d] = ns;
        out->offset += lo[d] * v->strides[d];
        out->mask_begin[d] = v->has_mask ? clamp(v->mask_begin[d] - lo[d], 0, ns) : 0;
        out->mask_end[d] = v->has_mask ? clamp(v->mask_end[d] - lo[d], 0, ns) : ns;
        if (extra) {
            out->mask_begin[d] = imax(out->mask_begin[d], extra[2 * d]);
            out->mask_end[d] = imin(out->mask_end[d], extra[2 * d + 1]);
        }
    }
    out->has_mask = v->has_mask || extra != NULL;
    view_canon(out);
}

static void view_pad(const tc_view *v, const int64_t *before_after, tc_view *out) {
    int64_t lo[TC_MAX_DIMS], hi[TC_MAX_DIMS], extra[2 * TC_MAX_DIMS];
    for (int d = 0; d < v->ndim; d++) {
        lo[d] = -before_after[2 * d];
        hi[d] = v->shape[d] + before_after[2 * d + 1];
        extra[2 * d] = before_after[2 * d];
        extra[2 * d + 1] = before_after[2 * d] + v->shape[d];
    }
    view_resize(v, lo, hi, extra, out);
}

static void view_shrink(const tc_view *v, const int64_t *begin_end, tc_view *out) {
    int64_t lo[TC_MAX_DIMS], hi[TC_MAX_DIMS];
    for (int d = 0; d < v->ndim; d++) {
        lo[d] = begin_end[2 * d];
        hi[d] = begin_end[2 * d + 1];
    }
    view_resize(v, lo, hi, NULL, out);
}

/* ---- reshape of one view --------------------------------------------------------
 * Size-1 dims are dropped, then neighbouring dims are merged wherever the
 * merged dim is still one stride and one mask interval; then each merged dim
 * is split into the new dims that make it up (the mask interval must split
 * into a box). A new dim that would straddle two merged dims fails. */
typedef struct {
    int64_t size, stride; /* merged extent and the stride of its flat index */
    int64_t lo, hi;       /* valid interval of the flat index */
} flat_dim;

/* merges v's dims into m (returns how many); *off gets offset corrections */
static int merge_dims(const tc_view *v, flat_dim *m, int64_t *off) {
    int nm = 0;
    for (int d = 0; d < v->ndim; d++) {
        if (v->shape[d] == 1) continue;
        flat_dim c = {v->shape[d], v->strides[d], v->has_mask ? v->mask_begin[d] : 0,
                      v->has_mask ? v->mask_end[d] : v->shape[d]};
        flat_dim *p = nm > 0 ? &m[nm - 1] : NULL;
        if (p && p->hi - p->lo == 1) {
            /* the outer dim keeps one index: valid flat f = p->lo*c.size + x */
            *off += p->stride * p->lo - c.stride * p->lo * c.size;
            *p = (flat_dim){p->size * c.size, c.stride, p->lo * c.size + c.lo,
                            p->lo * c.size + c.hi};
        } else if (p && p->stride == c.stride * c.size && c.lo == 0 && c.hi == c.size) {
            *p = (flat_dim){p->size * c.size, c.stride, p->lo * c.size, p->hi * c.size};
        } else {
            m[nm++] = c;
        }
    }
    return nm;
}

/* splits [*lo,*hi) over a dim of size outer*n into an inner interval
 * [*ilo,*ihi) of size n and an outer one (back in *lo,*hi); false when the
 * interval is no box */
static bool split_interval(int64_t n, int64_t *lo, int64_t *hi, int64_t *ilo, int64_t *ihi) {
    if (*lo / n == (*hi - 1) / n) {
        *ilo = *lo % n;
        *ihi = (*hi - 1) % n + 1;
        *lo /= n;
        *hi = *lo + 1;
        return true;
    }
    if (*lo % n != 0 || *hi % n != 0) return false;
    *ilo = 0;
    *ihi = n;
    *lo /= n;
    *hi /= n;
    return true;
}

/* one view with v's mapping over shape (nd, ns), or false when none is found */
static bool view_reshape(const tc_view *v, int nd, const int64_t *ns, tc_view *out) {
    if (v->is_contiguous || shape_numel(nd, ns) == 0) {
        view_contig(out, nd, ns);
        return true;
    }
    if (view_is_invalid(v)) {
        if (nd == 0) return false; /* a 0-dim view has no mask to say so */
        view_invalid(out, nd, ns);
        return true;
    }
    flat_dim m[TC_MAX_DIMS];
    int64_t off = v->offset;
    int nm = merge_dims(v, m, &off);
    memset(out, 0, sizeof *out);
    out->ndim = nd;
    for (int d = 0; d < nd; d++) out->shape[d] = ns[d];
    out->offset = off;
    out->has_mask = v->has_mask;
    int j = nd - 1;
    for (int k = nm - 1; k >= 0; k--) {
        flat_dim c = m[k];
        while (c.size > 1) {
            for (; j >= 0 && ns[j] == 1; j--) out->mask_end[j] = 1;
            if (j < 0 || c.size % ns[j] != 0) return false;
            if (!split_interval(ns[j], &c.lo, &c.hi, &out->mask_begin[j], &out->mask_end[j]))
                return false;
            out->strides[j] = c.stride;
            c.stride *= ns[j];
            c.size /= ns[j];
            j--;
        }
    }
    for (; j >= 0; j--) {
        if (ns[j] != 1) return false;
        out->mask_end[j] = 1;
    }
    view_canon(out);
    return true;
}

/* ---- merging two views (tinygrad's View.__add__) -----------------------------
 * inner maps its shape onto a buffer; outer maps its shape onto inner's
 * row-major flat index. view_merge finds one view doing both, or fails. */
static bool view_merge(const tc_view *in, const tc_view *outer, tc_view *out, int depth);

/* the digits of flat index x in shape (row-major); the first digit takes
 * what is left, so sum(digit*place) == x for any x */
static void unravel(int ndim, const int64_t *shape, int64_t x, int64_t *digits) {
    for (int d = ndim - 1; d > 0; d--) {
        digits[d] = x - floor_div(x, shape[d]) * shape[d];
        x = floor_div(x, shape[d]);
    }
    if (ndim > 0) digits[0] = x;
}

/* the range of c0 + sum(coef[d]*i[d]) over 0 <= i[d] < shape[d] */
static void affine_range(int n, const int64_t *shape, int64_t c0, const int64_t *coef, int64_t *min,
                         int64_t *max) {
    *min = *max = c0;
    for (int d = 0; d < n; d++) {
        int64_t t = coef[d] * (shape[d] - 1);
        *min += imin(t, 0);
        *max += imax(t, 0);
    }
}

/* the exclusive range of i in [0,n) with tlo <= c*i <= thi (c != 0); empty is (0,0) */
static void term_range(int64_t c, int64_t tlo, int64_t thi, int64_t n, int64_t *lo, int64_t *hi) {
    *lo = imax(c > 0 ? ceil_div(tlo, c) : ceil_div(thi, c), 0);
    *hi = imin(c > 0 ? floor_div(thi, c) : floor_div(tlo, c), n - 1) + 1;
    if (*lo >= *hi) *lo = *hi = 0;
}

/* The constraint b <= c0 + sum(coef[d]*i[d]) < e over the box `shape`, as a
 * range of one dim: fixing i[d], the other terms span [rmin,rmax], so each
 * slice is wholly valid, wholly invalid or mixed; with no mixed slice the
 * constraint is exactly a range of i[d], intersected into [lo[d],hi[d]).
 * Returns false when no dim works (or, at rank 0, when it never holds). */
static bool constrain(int n, const int64_t *shape, int64_t c0, const int64_t *coef, int64_t b,
                      int64_t e, int64_t *lo, int64_t *hi) {
    int64_t mn, mx;
    affine_range(n, shape, c0, coef, &mn, &mx);
    if (mn >= b && mx < e) return true;
    if ((mx < b || mn >= e) && n > 0) {
        lo[0] = hi[0] = 0;
        return true;
    }
    for (int d = 0; d < n; d++) {
        int64_t c = coef[d], t = c * (shape[d] - 1), flo, fhi, nlo, nhi;
        if (c == 0) continue;
        int64_t rmin = mn - imin(t, 0), rmax = mx - imax(t, 0);
        term_range(c, b - rmin, e - 1 - rmax, shape[d], &flo, &fhi); /* wholly valid */
        term_range(c, b - rmax, e - 1 - rmin, shape[d], &nlo, &nhi); /* not wholly invalid */
        if (flo != nlo || fhi != nhi) continue;
        lo[d] = imax(lo[d], flo);
        hi[d] = imin(hi[d], fhi);
        return true;
    }
    return false;
}

/* a copy of o masked to [lo,hi), merged with in again */
static bool merge_narrowed(const tc_view *in, const tc_view *o, const int64_t *lo,
                           const int64_t *hi, tc_view *out, int depth) {
    tc_view om = *o;
    om.has_mask = true;
    for (int d = 0; d < o->ndim; d++) {
        om.mask_begin[d] = lo[d];
        om.mask_end[d] = hi[d];
    }
    view_canon(&om);
    return view_merge(in, &om, out, depth + 1);
}

/* true when [lo,hi) is narrower than o's shape */
static bool narrows(const tc_view *o, const int64_t *lo, const int64_t *hi) {
    for (int d = 0; d < o->ndim; d++)
        if (lo[d] != 0 || hi[d] != o->shape[d]) return true;
    return false;
}

/* inner's valid elements lie in a flat range: narrows [lo,hi) to where
 * outer's flat index falls inside it (false when it cannot say) */
static bool flat_range(const tc_view *in, const tc_view *o, int64_t *lo, int64_t *hi) {
    int64_t vlo = 0, vhi = 0;
    for (int d = 0; d < o->ndim; d++) lo[d] = 0, hi[d] = o->shape[d];
    if (!in->has_mask) return false;
    for (int k = 0; k < in->ndim; k++) {
        vlo = vlo * in->shape[k] + in->mask_begin[k];
        vhi = vhi * in->shape[k] + in->mask_end[k] - 1;
    }
    return constrain(o->ndim, o->shape, o->offset, o->strides, vlo, vhi + 1, lo, hi);
}

/* outer unmasked: express outer's flat index in inner's digits as affine
 * functions of outer's index, merging inner dims where digits carry */
static bool merge_affine(const tc_view *in, const tc_view *o, tc_view *out, int depth) {
    int na = in->ndim, nb = o->ndim;
    int64_t origin[TC_MAX_DIMS], tmp[TC_MAX_DIMS], delta[TC_MAX_DIMS][TC_MAX_DIMS];
    int64_t lo[TC_MAX_DIMS], hi[TC_MAX_DIMS];
    if (view_numel(in) == 0) return false;
    if (flat_range(in, o, lo, hi) && narrows(o, lo, hi))
        return merge_narrowed(in, o, lo, hi, out, depth);
    unravel(na, in->shape, o->offset, origin);
    for (int d = 0; d < nb; d++) {
        unravel(na, in->shape, o->offset + o->strides[d], tmp);
        for (int k = 0; k < na; k++) delta[d][k] = o->strides[d] ? tmp[k] - origin[k] : 0;
    }
    /* group inner dims (innermost first) until each group's digit never carries */
    int64_t ext[TC_MAX_DIMS], coef[TC_MAX_DIMS] = {0}, c0 = 0, size = 1, mn, mx;
    int ne = 0;
    for (int k = na - 1; k >= 0; k--) {
        for (int d = 0; d < nb; d++) coef[d] += delta[d][k] * size;
        c0 += origin[k] * size;
        size *= in->shape[k];
        affine_range(nb, o->shape, c0, coef, &mn, &mx);
        if (mn < 0 || mx >= size) continue;
        ext[na - 1 - ne++] = size;
        memset(coef, 0, sizeof coef);
        c0 = 0, size = 1;
    }
    if (size != 1) return false;
    if (ne != na) {
        tc_view r;
        if (depth > 4 || !view_reshape(in, ne, ext + na - ne, &r)) return false;
        return merge_affine(&r, o, out, depth + 1);
    }
    int64_t dcoef[TC_MAX_DIMS];
    bool bad = false;
    for (int d = 0; d < nb; d++) lo[d] = 0, hi[d] = o->shape[d];
    for (int k = 0; in->has_mask && k < na; k++) { /* project inner's mask */
        for (int d = 0; d < nb; d++) dcoef[d] = delta[d][k];
        if (!constrain(nb, o->shape, origin[k], dcoef, in->mask_begin[k], in->mask_end[k], lo, hi))
            bad = true;
    }
    if (narrows(o, lo, hi)) return merge_narrowed(in, o, lo, hi, out, depth);
    if (bad) return false;
    *out = *o;
    out->offset = in->offset;
    for (int k = 0; k < na; k++) out->offset += origin[k] * in->strides[k];
    for (int d = 0; d < nb; d++) {
        out->strides[d] = 0;
        for (int k = 0; k < na; k++) out->strides[d] += delta[d][k] * in->strides[k];
    }
    view_canon(out);
    return true;
}

static bool view_merge(const tc_view *in, const tc_view *o, tc_view *out, int depth) {
    if (depth > 8) return false;
    if (view_numel(o) == 0) {
        view_contig(out, o->ndim, o->shape);
        return true;
    }
    if (view_is_invalid(o) || view_is_invalid(in)) {
        if (o->ndim == 0) return false;
        view_invalid(out, o->ndim, o->shape);
        return true;
    }
    if (in->is_contiguous) {
        *out = *o;
        return true;
    }
    if (o->is_contiguous && view_numel(o) == view_numel(in) &&
        view_reshape(in, o->ndim, o->shape, out))
        return true;
    if (!o->has_mask) return merge_affine(in, o, out, depth);
    /* merge the valid box of o, then pad back around it */
    int64_t be[2 * TC_MAX_DIMS], ba[2 * TC_MAX_DIMS];
    for (int d = 0; d < o->ndim; d++) {
        be[2 * d] = ba[2 * d] = o->mask_begin[d];
        be[2 * d + 1] = o->mask_end[d];
        ba[2 * d + 1] = o->shape[d] - o->mask_end[d];
    }
    tc_view box, merged;
    view_shrink(o, be, &box);
    if (!view_merge(in, &box, &merged, depth + 1)) return false;
    view_pad(&merged, ba, out);
    return true;
}

/* ---- trackers --------------------------------------------------------------- */

/* a tracker with room for n views (one allocation), n_views set to n */
static tc_st *st_alloc(int n) {
    tc_st *st = tc_malloc(sizeof *st + (size_t)n * sizeof(tc_view));
    if (!st) return NULL;
    st->n_views = n;
    st->views = (tc_view *)(st + 1);
    return st;
}

static const tc_view *last_view(const tc_st *st) {
    return &st->views[st->n_views - 1];
}

/* merges the two outermost views while that works */
static void st_simplify(tc_st *st) {
    tc_view m;
    while (st->n_views >= 2 &&
           view_merge(&st->views[st->n_views - 2], &st->views[st->n_views - 1], &m, 0)) {
        st->views[st->n_views - 2] = m;
        st->n_views--;
    }
}

/* final touches on a fresh tracker: a 0-element tracker is one contiguous
 * view (there is nothing to map), otherwise simplify */
static tc_st *st_finish(tc_st *st) {
    if (!st) return NULL;
    const tc_view *v = last_view(st);
    if (view_numel(v) == 0) {
        tc_view c;
        view_contig(&c, v->ndim, v->shape);
        st->views[0] = c;
        st->n_views = 1;
    }
    st_simplify(st);
    return st;
}

/* a copy of st whose outermost view is v, finished */
static tc_st *st_with_last(const tc_st *st, const tc_view *v) {
    tc_st *r = st_alloc(st->n_views);
    if (!r) return NULL;
    memcpy(r->views, st->views, (size_t)(st->n_views - 1) * sizeof(tc_view));
    r->views[st->n_views - 1] = *v;
    return st_finish(r);
}

tc_st *tc_st_from_shape(int ndim, const int64_t *shape) {
    tc_st *st = st_alloc(1);
    if (st) view_contig(&st->views[0], ndim, shape);
    return st;
}

tc_st *tc_st_copy(const tc_st *st) {
    tc_st *r = st_alloc(st->n_views);
    if (r) memcpy(r->views, st->views, (size_t)st->n_views * sizeof(tc_view));
    return r;
}

void tc_st_free(tc_st *st) {
    tc_free(st);
}

int tc_st_ndim(const tc_st *st) {
    return last_view(st)->ndim;
}

const int64_t *tc_st_shape(const tc_st *st) {
    return last_view(st)->shape;
}

int64_t tc_st_numel(const tc_st *st) {
    return view_numel(last_view(st));
}

bool tc_st_is_contiguous(const tc_st *st) {
    return st->n_views == 1 && st->views[0].is_contiguous;
}

static bool view_equal(const tc_view *a, const tc_view *b) {
    size_t n = (size_t)a->ndim * sizeof(int64_t);
    if (a->ndim != b->ndim || a->offset != b->offset || a->has_mask != b->has_mask) return false;
    if (memcmp(a->shape, b->shape, n) || memcmp(a->strides, b->strides, n)) return false;
    return !a->has_mask ||
           (!memcmp(a->mask_begin, b->mask_begin, n) && !memcmp(a->mask_end, b->mask_end, n));
}

bool tc_st_equal(const tc_st *a, const tc_st *b) {
    if (a->n_views != b->n_views) return false;
    for (int i = 0; i < a->n_views; i++)
        if (!view_equal(&a->views[i], &b->views[i])) return false;
    return true;
}

uint64_t tc_st_hash(const tc_st *st) {
    uint64_t h = tc_hash_combine(0x5354, (uint64_t)st->n_views);
    for (int i = 0; i < st->n_views; i++) {
        const tc_view *v = &st->views[i];
        h = tc_hash_combine(h, (uint64_t)v->ndim);
        h = tc_hash_combine(h, (uint64_t)v->offset);
        h = tc_hash_combine(h, v->has_mask);
        for (int d = 0; d < v->ndim; d++) {
            h = tc_hash_combine(h, (uint64_t)v->shape[d]);
            h = tc_hash_combine(h, (uint64_t)v->strides[d]);
            if (!v->has_mask) continue;
            h = tc_hash_combine(h, (uint64_t)v->mask_begin[d]);
            h = tc_hash_combine(h, (uint64_t)v->mask_end[d]);
        }
    }
    return h;
}

tc_st *tc_st_reshape(const tc_st *st, int ndim, const int64_t *shape) {
    tc_view v;
    if (view_reshape(last_view(st), ndim, shape, &v)) return st_with_last(st, &v);
    tc_st *r = st_alloc(st->n_views + 1);
    if (!r) return NULL;
    memcpy(r->views, st->views, (size_t)st->n_views * sizeof(tc_view));
    view_contig(&r->views[st->n_views], ndim, shape);
    return st_finish(r);
}

tc_st *tc_st_permute(const tc_st *st, const int *order) {
    const tc_view *v = last_view(st);
    tc_view r = *v;
    for (int d = 0; d < v->ndim; d++) {
        r.shape[d] = v->shape[order[d]];
        r.strides[d] = v->strides[order[d]];
        r.mask_begin[d] = v->mask_begin[order[d]];
        r.mask_end[d] = v->mask_end[order[d]];
    }
    view_canon(&r);
    return st_with_last(st, &r);
}

tc_st *tc_st_expand(const tc_st *st, const int64_t *shape) {
    const tc_view *v = last_view(st);
    tc_view r = *v;
    for (int d = 0; d < v->ndim; d++) {
        if (shape[d] == v->shape[d]) continue;
        r.shape[d] = shape[d]; /* v->shape[d] is 1, its stride 0 */
        if (v->has_mask) r.mask_end[d] = v->mask_end[d] == 1 ? shape[d] : 0;
    }
    view_canon(&r);
    return st_with_last(st, &r);
}

tc_st *tc_st_pad(const tc_st *st, const int64_t *before_after) {
    tc_view r;
    view_pad(last_view(st), before_after, &r);
    return st_with_last(st, &r);
}

tc_st *tc_st_shrink(const tc_st *st, const int64_t *begin_end) {
    tc_view r;
    view_shrink(last_view(st), begin_end, &r);
    return st_with_last(st, &r);
}

tc_st *tc_st_flip(const tc_st *st, const bool *axes) {
    const tc_view *v = last_view(st);
    tc_view r = *v;
    for (int d = 0; d < v->ndim; d++) {
        if (!axes[d]) continue;
        r.offset += (v->shape[d] - 1) * v->strides[d];
        r.strides[d] = -v->strides[d];
        if (!v->has_mask) continue;
        r.mask_begin[d] = v->shape[d] - v->mask_end[d];
        r.mask_end[d] = v->shape[d] - v->mask_begin[d];
    }
    view_canon(&r);
    return st_with_last(st, &r);
}

tc_st *tc_st_compose(const tc_st *inner, const tc_st *outer) {
    tc_st *r = st_alloc(inner->n_views + outer->n_views);
    if (!r) return NULL;
    memcpy(r->views, inner->views, (size_t)inner->n_views * sizeof(tc_view));
    r->n_views = inner->n_views;
    for (int i = 0; i < outer->n_views; i++) {
        r->views[r->n_views++] = outer->views[i];
        st_simplify(r);
    }
    return st_finish(r);
}

/* evaluates one view at idx: offset, and ANDs its mask into *valid */
static int64_t view_eval(const tc_view *v, const int64_t *idx, bool *valid) {
    int64_t off = v->offset;
    for (int d = 0; d < v->ndim; d++) {
        off += idx[d] * v->strides[d];
        if (v->has_mask && (idx[d] < v->mask_begin[d] || idx[d] >= v->mask_end[d])) *valid = false;
    }
    return off;
}

int64_t tc_st_index(const tc_st *st, const int64_t *idx, bool *valid) {
    bool ok = true;
    int64_t off = view_eval(last_view(st), idx, &ok);
    for (int i = st->n_views - 2; i >= 0 && ok; i--) {
        const tc_view *v = &st->views[i];
        int64_t sub[TC_MAX_DIMS];
        if (off < 0 || off >= view_numel(v)) {
            ok = false;
            break;
        }
        unravel(v->ndim, v->shape, off, sub);
        off = view_eval(v, sub, &ok);
    }
    *valid = ok;
    return ok ? off : 0;
}

static void dump_list(FILE *f, const char *name, int n, const int64_t *a, const int64_t *b) {
    fprintf(f, "%s(", name);
    for (int d = 0; d < n; d++) {
        if (b) fprintf(f, "%s(%lld,%lld)", d ? "," : "", (long long)a[d], (long long)b[d]);
        else fprintf(f, "%s%lld", d ? "," : "", (long long)a[d]);
    }
    fprintf(f, n == 1 && !b ? ",)" : ")");
}

void tc_st_dump(FILE *f, const tc_st *st) {
    fprintf(f, "ST(");
    for (int i = 0; i < st->n_views; i++) {
        const tc_view *v = &st->views[i];
        fprintf(f, "%sView(", i ? ", " : "");
        dump_list(f, "shape=", v->ndim, v->shape, NULL);
        dump_list(f, " strides=", v->ndim, v->strides, NULL);
        fprintf(f, " offset=%lld", (long long)v->offset);
        if (v->has_mask) dump_list(f, " mask=", v->ndim, v->mask_begin, v->mask_end);
        fprintf(f, "%s)", v->is_contiguous ? " contiguous" : "");
    }
    fprintf(f, ")\n");
}

bool tc_st_has_mask(const tc_st *st) {
    for (int i = 0; i < st->n_views; i++)
        if (st->views[i].has_mask) return true;
    return false;
}
