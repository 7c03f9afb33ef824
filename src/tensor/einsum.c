/* einsum.c - tc_einsum: Einstein summation lowered to views, one broadcast
 * multiply and one sum, so it fuses like tc_matmul ("ij,jk->ik" is one
 * kernel) and differentiates through the public ops' rules.
 *
 * The formula ("ij,jk->ik", "bij,bjk", "...ij,...jk->...ik", "ii->i") is
 * parsed into one label per operand dim: letters a-z and A-Z, and "..." for
 * the dims no letter names (right-aligned across operands, as numpy
 * broadcasts). Without "->" the output is the "..." dims followed by the
 * letters used exactly once, in ASCII order (numpy, tinygrad). Every label
 * gets one axis of the product: the output's labels first, in output order,
 * then the summed ones. Each operand is made a view of that rank: a label it
 * repeats ("ii") becomes its diagonal (flatten the pair, pad by n, view as
 * (n, n+1), keep column 0), then its dims are permuted into label order and
 * size-1 dims inserted for the labels it lacks. The views are multiplied
 * (broadcasting) and the trailing axes summed. Cost: O(operands + labels)
 * nodes; the product's work is the product of every label's size, as an
 * unoptimised einsum (tinygrad's) does. */
#include "tensor.h"

#include <string.h>

enum {
    MAX_OPERANDS = 16,      /* operands one call takes */
    N_LETTERS = 52,         /* a-z then A-Z */
    N_LABELS = N_LETTERS + TC_MAX_DIMS, /* letters, then the "..." dims */
    MAX_FORMULA = 512,      /* characters of a formula, spaces removed */
};

typedef struct {
    int n_ops;                           /* operands */
    int ndims[MAX_OPERANDS];             /* labels of each operand (its ndim) */
    int labels[MAX_OPERANDS][TC_MAX_DIMS]; /* each operand dim's label */
    int n_out;                           /* labels of the output */
    int out[TC_MAX_DIMS];                /* the output's labels, in order */
    int n_sum;                           /* labels summed over */
    int sum[TC_MAX_DIMS];                /* the summed labels */
    int64_t size[N_LABELS];              /* each label's size (-1: unused) */
    int axis[N_LABELS];                  /* each used label's axis in the product */
} einsum_plan;

static const char *const API = "tc_einsum";

static int letter_label(char c) {
    if (c >= 'a' && c <= 'z') return c - 'a';
    if (c >= 'A' && c <= 'Z') return 26 + (c - 'A');
    return -1;
}

static char label_char(int l) {
    return l < 26 ? (char)('a' + l) : l < N_LETTERS ? (char)('A' + l - 26) : '.';
}

/* one term's subscripts [s, e) -> out[0..TC_MAX_DIMS] letters (-1 marks the
 * "..."); returns the count, or -1 with the error set */
static int parse_term(const char *f, const char *s, const char *e, int *out) {
    int n = 0;
    bool has_ell = false;
    for (const char *p = s; p < e; p++) {
        if (*p == '.') {
            if (has_ell || e - p < 3 || p[1] != '.' || p[2] != '.') {
                tc_error_set(TC_ERR_INVALID, "%s: \"%s\": '.' must come as one \"...\" per term",
                             API, f);
                return -1;
            }
            has_ell = true, p += 2;
            if (n <= TC_MAX_DIMS) out[n] = -1;
            n++;
            continue;
        }
        if (letter_label(*p) < 0) {
            tc_error_set(TC_ERR_INVALID, "%s: \"%s\": bad character '%c' (letters, ',', '->' "
                         "and '...' only)", API, f, *p);
            return -1;
        }
        if (n <= TC_MAX_DIMS) out[n] = letter_label(*p);
        n++;
    }
    if (n > TC_MAX_DIMS + 1) {
        tc_error_set(TC_ERR_SHAPE, "%s: \"%s\": a term names more than %d dims", API, f,
                     TC_MAX_DIMS);
        return -1;
    }
    return n;
}

/* records size s for label l of operand k; equal sizes, or 1, broadcast */
TC_MUST_USE static tc_status note_size(einsum_plan *p, const char *f, int l, int64_t s, int k) {
    int64_t *have = &p->size[l];
    if (*have < 0 || *have == 1) *have = s;
    else if (s != 1 && s != *have)
        return tc_error_set(TC_ERR_SHAPE, "%s: \"%s\": subscript %c%s is %lld in operand %d but "
                            "%lld before", API, f, label_char(l), l < N_LETTERS ? "" : "..",
                            (long long)s, k, (long long)*have);
    return TC_OK;
}

/* operand k's term (letters, -1 for "...") against its shape: labels and sizes */
TC_MUST_USE static tc_status bind_operand(einsum_plan *p, const char *f, int k, const int *term, int n_term,
                              const tc_node *x, int n_ell_max) {
    bool has_ell = false;
    for (int i = 0; i < n_term; i++) has_ell |= term[i] < 0;
    int n_letters = n_term - has_ell, n_ell = x->ndim - n_letters;
    if (n_ell < 0 || (!has_ell && n_ell != 0))
        return tc_error_set(TC_ERR_SHAPE, "%s: \"%s\": operand %d has %d dims but its term names "
                            "%d", API, f, k, x->ndim, n_letters);
    int d = 0;
    for (int i = 0; i < n_term; i++) {
        if (term[i] >= 0) {
            int l = term[i];
            for (int j = 0; j < d; j++) /* a repeated letter (a diagonal): sizes must agree */
                if (p->labels[k][j] == l && x->shape[j] != x->shape[d])
                    return tc_error_set(TC_ERR_SHAPE, "%s: \"%s\": operand %d repeats %c over "
                                        "sizes %lld and %lld", API, f, k, label_char(l),
                                        (long long)x->shape[j], (long long)x->shape[d]);
            p->labels[k][d] = l;
            if (note_size(p, f, l, x->shape[d], k) != TC_OK) return TC_ERR_SHAPE;
            d++;
            continue;
        }
        for (int e = 0; e < n_ell; e++, d++) { /* right-aligned "..." dims */
            int l = N_LETTERS + n_ell_max - n_ell + e;
            p->labels[k][d] = l;
            if (note_size(p, f, l, x->shape[d], k) != TC_OK) return TC_ERR_SHAPE;
        }
    }
    p->ndims[k] = x->ndim;
    return TC_OK;
}

/* appends label l to the output */
TC_MUST_USE static tc_status push_out(einsum_plan *p, const char *f, int l) {
    if (p->n_out == TC_MAX_DIMS)
        return tc_error_set(TC_ERR_SHAPE, "%s: \"%s\": the output has more than %d dims", API, f,
                            TC_MAX_DIMS);
    p->out[p->n_out++] = l;
    return TC_OK;
}

/* the output's labels: from its term (explicit) or the numpy rule */
TC_MUST_USE static tc_status plan_output(einsum_plan *p, const char *f, const int *term, int n_term,
                             bool is_explicit, int n_ell_max) {
    int count[N_LABELS] = {0};
    for (int k = 0; k < p->n_ops; k++)
        for (int d = 0; d < p->ndims[k]; d++) count[p->labels[k][d]]++;
    p->n_out = 0;
    bool used[N_LABELS] = {false};
    for (int i = 0; is_explicit && i < n_term; i++) {
        if (term[i] < 0) { /* "...": the broadcast dims, in order */
            for (int e = 0; e < n_ell_max; e++)
                if (push_out(p, f, N_LETTERS + e) != TC_OK) return TC_ERR_SHAPE;
            continue;
        }
        int l = term[i];
        if (!count[l])
            return tc_error_set(TC_ERR_INVALID, "%s: \"%s\": output subscript %c is in no "
                                "operand", API, f, label_char(l));
        if (used[l])
            return tc_error_set(TC_ERR_INVALID, "%s: \"%s\": output subscript %c appears twice",
                                API, f, label_char(l));
        used[l] = true;
        if (push_out(p, f, l) != TC_OK) return TC_ERR_SHAPE;
    }
    if (!is_explicit) {
        for (int e = 0; e < n_ell_max; e++) p->out[p->n_out++] = N_LETTERS + e;
        for (int i = 0; i < N_LETTERS; i++) { /* ASCII order: A-Z (26..51), then a-z */
            int l = (i + 26) % N_LETTERS;
            if (count[l] == 1 && push_out(p, f, l) != TC_OK) return TC_ERR_SHAPE;
        }
    }
    for (int i = 0; i < p->n_out; i++) used[p->out[i]] = true;
    p->n_sum = 0;
    for (int l = 0; l < N_LABELS; l++)
        if (count[l] && !used[l]) {
            if (p->n_out + p->n_sum == TC_MAX_DIMS)
                return tc_error_set(TC_ERR_SHAPE, "%s: \"%s\" has more than %d subscripts", API,
                                    f, TC_MAX_DIMS);
            p->sum[p->n_sum++] = l;
        }
    for (int i = 0; i < p->n_out; i++) p->axis[p->out[i]] = i;
    for (int i = 0; i < p->n_sum; i++) p->axis[p->sum[i]] = p->n_out + i;
    return TC_OK;
}

/* parses f for the n operands xs into p */
TC_MUST_USE static tc_status plan(einsum_plan *p, const char *raw, int n, tc_tensor *const *xs) {
    char f[MAX_FORMULA + 1];
    size_t len = 0;
    for (const char *c = raw; *c; c++) {
        if (*c == ' ') continue;
        if (len == MAX_FORMULA)
            return tc_error_set(TC_ERR_INVALID, "%s: formula longer than %d characters", API,
                                MAX_FORMULA);
        f[len++] = *c;
    }
    f[len] = '\0';
    const char *arrow = strstr(f, "->"), *end_in = arrow ? arrow : f + len;
    if (arrow && strstr(arrow + 2, "->"))
        return tc_error_set(TC_ERR_INVALID, "%s: \"%s\" has more than one \"->\"", API, f);
    int terms[MAX_OPERANDS][TC_MAX_DIMS + 1], n_terms[MAX_OPERANDS], n_ops = 0;
    for (const char *s = f;; n_ops++) {
        const char *comma = memchr(s, ',', (size_t)(end_in - s)), *e = comma ? comma : end_in;
        if (n_ops < MAX_OPERANDS && n_ops < n &&
            (n_terms[n_ops] = parse_term(f, s, e, terms[n_ops])) < 0)
            return tc_error_code();
        if (!comma) break;
        s = comma + 1;
    }
    n_ops++;
    if (n_ops != n)
        return tc_error_set(TC_ERR_INVALID, "%s: \"%s\" names %d operands, got %d", API, f, n_ops,
                            n);
    int out_term[TC_MAX_DIMS + 1], n_out_term = 0;
    if (arrow && (n_out_term = parse_term(f, arrow + 2, f + len, out_term)) < 0)
        return tc_error_code();
    p->n_ops = n;
    for (int l = 0; l < N_LABELS; l++) p->size[l] = -1;
    int n_ell_max = 0;
    for (int k = 0; k < n; k++) {
        int n_letters = 0;
        for (int i = 0; i < n_terms[k]; i++) n_letters += terms[k][i] >= 0;
        int n_ell = xs[k]->node->ndim - n_letters;
        if (n_letters < n_terms[k] && n_ell > n_ell_max) n_ell_max = n_ell;
    }
    for (int k = 0; k < n; k++)
        if (bind_operand(p, f, k, terms[k], n_terms[k], xs[k]->node, n_ell_max) != TC_OK)
            return TC_ERR_SHAPE;
    return plan_output(p, f, out_term, n_out_term, arrow != NULL, n_ell_max);
}

/* ---- building ---- */

/* t (in s) with the diagonal of its dims a < b (equal sizes) as its last
 * dim, both removed; labels[0..ndim-1] updated the same way */
static tc_tensor *diagonal(tc_scope *s, tc_tensor *t, int a, int b, int *labels) {
    int nd = t->node->ndim, order[TC_MAX_DIMS], m = 0, keep[TC_MAX_DIMS], pair = labels[a];
    int64_t n = t->node->shape[a], shape[TC_MAX_DIMS];
    for (int i = 0; i < nd; i++)
        if (i != a && i != b) keep[m] = labels[i], shape[m] = t->node->shape[i], order[m++] = i;
    order[m] = a, order[m + 1] = b;
    tc_tensor *pm = TC_S(s, tc_permute(t, order)); /* (..., n, n) */
    shape[m] = n * n;
    tc_tensor *flat = TC_S(s, tc_reshape(pm, m + 1, shape));
    int64_t ba[2 * TC_MAX_DIMS] = {0};
    ba[2 * m + 1] = n;
    tc_tensor *pad = TC_S(s, tc_pad(flat, ba)); /* (..., n*(n+1)) */
    shape[m] = n, shape[m + 1] = n + 1;
    tc_tensor *rows = TC_S(s, tc_reshape(pad, m + 2, shape)); /* (..., n, n+1) */
    int64_t be[2 * TC_MAX_DIMS];
    for (int i = 0; i < m + 2; i++) be[2 * i] = 0, be[2 * i + 1] = shape[i];
    be[2 * m + 3] = 1;
    tc_tensor *col = TC_S(s, tc_shrink(rows, be)); /* (..., n, 1): the diagonal */
    memcpy(labels, keep, sizeof(int) * (size_t)m);
    labels[m] = pair;
    return TC_S(s, tc_reshape(col, m + 1, shape));
}

/* operand k of p as a view of the product's rank: diagonals taken, dims in
 * label order, size 1 for the labels it lacks (a new reference) */
static tc_tensor *operand_view(const einsum_plan *p, int k, tc_tensor *x) {
    tc_scope s = {0};
    int labels[TC_MAX_DIMS], nd = p->ndims[k];
    memcpy(labels, p->labels[k], sizeof(int) * (size_t)nd);
    tc_tensor *t = x;
    for (bool again = true; again && !s.failed;) { /* one repeated pair at a time */
        again = false;
        for (int a = 0; a < nd && !again; a++)
            for (int b = a + 1; b < nd && !again; b++)
                if (labels[a] == labels[b]) {
                    t = diagonal(&s, t, a, b, labels);
                    nd--, again = true;
                }
    }
    if (s.failed) return tc_scope_end(&s, NULL);
    int order[TC_MAX_DIMS], total = p->n_out + p->n_sum;
    int64_t shape[TC_MAX_DIMS];
    for (int i = 0; i < nd; i++) order[i] = i;
    for (int i = 1; i < nd; i++) /* insertion sort of the dims by their product axis */
        for (int j = i; j > 0 && p->axis[labels[order[j - 1]]] > p->axis[labels[order[j]]]; j--) {
            int tmp = order[j];
            order[j] = order[j - 1], order[j - 1] = tmp;
        }
    tc_tensor *pm = TC_S(&s, tc_permute(t, order));
    for (int i = 0; i < total; i++) shape[i] = 1;
    for (int i = 0; i < nd; i++) shape[p->axis[labels[i]]] = t->node->shape[i];
    return tc_scope_end(&s, TC_S(&s, tc_reshape(pm, total, shape)));
}

/* the product of the views summed over the trailing (summed) axes */
static tc_tensor *contract(const einsum_plan *p, tc_tensor *const *views) {
    tc_scope s = {0};
    tc_tensor *prod = views[0];
    for (int k = 1; k < p->n_ops; k++) prod = TC_S(&s, tc_mul(prod, views[k]));
    int axes[TC_MAX_DIMS], total = p->n_out + p->n_sum;
    for (int i = 0; i < p->n_sum; i++) axes[i] = p->n_out + i;
    if (s.failed) return tc_scope_end(&s, NULL);
    if (p->n_sum) return tc_scope_end(&s, TC_S(&s, tc_sum(prod, p->n_sum, axes, false)));
    int64_t shape[TC_MAX_DIMS]; /* nothing summed: broadcast to the output's sizes */
    for (int i = 0; i < total; i++) shape[i] = p->size[p->out[i]];
    if (prod->node->ndim == total &&
        memcmp(prod->node->shape, shape, sizeof(int64_t) * (size_t)total) == 0)
        return tc_scope_end(&s, prod);
    return tc_scope_end(&s, TC_S(&s, tc_expand(prod, total, shape)));
}

TC_MUST_USE static tc_status check_args(const char *formula, int n, tc_tensor *const *xs) {
    if (!formula) return tc_error_set(TC_ERR_INVALID, "%s: formula is NULL", API);
    if (n < 1 || n > MAX_OPERANDS)
        return tc_error_set(TC_ERR_INVALID, "%s: %d operands given (1..%d)", API, n,
                            MAX_OPERANDS);
    if (!xs) return tc_error_set(TC_ERR_INVALID, "%s: xs is NULL", API);
    static const char *const names[MAX_OPERANDS] = {"xs[0]",  "xs[1]",  "xs[2]",  "xs[3]",
                                                    "xs[4]",  "xs[5]",  "xs[6]",  "xs[7]",
                                                    "xs[8]",  "xs[9]",  "xs[10]", "xs[11]",
                                                    "xs[12]", "xs[13]", "xs[14]", "xs[15]"};
    for (int k = 0; k < n; k++)
        if (tc_tensor_check(xs[k], API, names[k]) != TC_OK) return TC_ERR_INVALID;
    return tc_tensor_same_device(API, n, xs, names);
}

TC_API tc_tensor *tc_einsum(const char *formula, int n, tc_tensor *const *xs) {
    TC_API_ENTER();
    tc_lock();
    tc_tensor *out = NULL, *views[MAX_OPERANDS] = {NULL};
    einsum_plan p;
    if (check_args(formula, n, xs) != TC_OK || plan(&p, formula, n, xs) != TC_OK) goto done;
    bool ok = true;
    for (int k = 0; k < n && ok; k++) ok = (views[k] = operand_view(&p, k, xs[k])) != NULL;
    if (ok) out = contract(&p, views);
    for (int k = 0; k < n; k++) tc_release(views[k]);
done:
    tc_unlock();
    return out;
}
