/* graph.h - the interface of src/graph: the op vocabulary, views and shape
 * trackers (movement without copies), and the lazy graph of hash-consed,
 * reference-counted nodes.
 *
 * A node is either a *base* (an op over sources, or a realized BUFFER, or a
 * CONST) or a *view* (op VIEW: srcs[0] is a base, st says how this node's
 * elements map onto the base's contiguous elements). Movement ops never make
 * new bases. Nodes are interned: building the same op over the same sources
 * twice returns the same node. The intern table holds no reference.
 */
#ifndef TC_GRAPH_H
#define TC_GRAPH_H

#include "util/util.h"

/* ---- ops (ops.c) --------------------------------------------------------- */
typedef enum {
    /* unary */
    TC_OP_EXP2,    /* 2^x */
    TC_OP_LOG2,    /* log2(x) */
    TC_OP_SIN,     /* sin(x) */
    TC_OP_SQRT,    /* sqrt(x) */
    TC_OP_RECIP,   /* 1/x */
    TC_OP_NEG,     /* -x (logical not for bool) */
    TC_OP_CAST,    /* convert to the node's dtype */
    TC_OP_BITCAST, /* reinterpret the bits as the node's dtype (same size) */
    /* binary */
    TC_OP_ADD,   /* a+b */
    TC_OP_MUL,   /* a*b */
    TC_OP_IDIV,  /* integer a/b, truncating toward zero */
    TC_OP_MOD,   /* integer a%b, C semantics */
    TC_OP_MAX,   /* max(a,b) */
    TC_OP_CMPLT, /* a<b, bool result */
    TC_OP_CMPNE, /* a!=b, bool result */
    TC_OP_AND,   /* bitwise/logical and */
    TC_OP_OR,    /* bitwise/logical or */
    TC_OP_XOR,   /* bitwise/logical xor */
    TC_OP_SHL,   /* a<<b */
    TC_OP_SHR,   /* a>>b */
    /* ternary */
    TC_OP_WHERE,  /* a ? b : c */
    TC_OP_MULACC, /* a*b+c */
    /* reduce: arg.axes is a bitmask of reduced axes, which keep size 1 */
    TC_OP_REDUCE_SUM,  /* sum over axes */
    TC_OP_REDUCE_MAX,  /* max over axes */
    TC_OP_REDUCE_PROD, /* product over axes (cumprod's windows) */
    /* buffer and meta ops */
    TC_OP_CONST,      /* scalar arg.value, shape () (viewed to any shape) */
    TC_OP_BUFFER,     /* a realized buffer: node->buffer holds the data */
    TC_OP_VIEW,       /* srcs[0] is a base seen through node->st */
    TC_OP_COPY,       /* srcs[0] copied to this node's device */
    TC_OP_CONTIGUOUS, /* srcs[0] materialised in a buffer of its own */
    TC_OP_ASSIGN,     /* srcs[0] (value) written into srcs[1] (a realized target) */
    /* indexed: axes holds the one indexed axis (1 << a) */
    TC_OP_GATHER,  /* out[o] = srcs[0][o with o[a] := srcs[1][o]], 0 where that index is
                      outside [0, srcs[0]'s size along a); out has srcs[1]'s shape, srcs[0]
                      the same but along a */
    TC_OP_SCATTER, /* the gradient of GATHER: zeros of the node's shape, plus srcs[1][o] at
                      [o with o[a] := srcs[0][o]] for every o of srcs[0]'s shape (indices
                      outside the node's size along a add nothing) */
    TC_OP_PUT,     /* an indexed store (tc_index_copy): srcs[2] (a realized target) with the
                      element [o with o[a] := srcs[0][o]] set to srcs[1][o] for every o of
                      srcs[1]'s shape; places outside [0, size along a) are not written.
                      Only ever the value of an ASSIGN to that same target: its kernel
                      writes those elements in place and leaves the rest */
    /* kernel AST only (schedule -> codegen) */
    TC_OP_LOAD,  /* read a kernel buffer through a view */
    TC_OP_STORE, /* write a kernel buffer through a view */
    TC_OP_SINK,  /* root of a kernel AST: its srcs are the stores */
    TC_OP_COUNT
} tc_op;

typedef enum {
    TC_OPK_UNARY,   /* one source, elementwise */
    TC_OPK_BINARY,  /* two sources, elementwise */
    TC_OPK_TERNARY, /* three sources, elementwise */
    TC_OPK_REDUCE,  /* one source, reduces axes */
    TC_OPK_META,    /* CONST BUFFER VIEW COPY CONTIGUOUS ASSIGN */
    TC_OPK_INDEX,   /* GATHER SCATTER PUT: reads or writes at an index another tensor holds */
    TC_OPK_AST,     /* LOAD STORE SINK */
} tc_op_kind;

typedef struct {
    const char *name;   /* as tinygrad spells it: "EXP2", "CMPLT", ... */
    tc_op_kind kind;    /* family */
    bool is_unsafe_pad; /* f(0) != 0: a padded view must not be pushed through it */
    bool is_float_only; /* computed in float: no integer operands (EXP2 LOG2 SIN SQRT RECIP) */
    bool is_int_only;   /* bitwise: integer or bool operands only (AND OR XOR SHL SHR) */
    bool is_comparison; /* bool result from operands of any dtype (CMPLT CMPNE) */
    bool is_commutative; /* op(a,b) == op(b,a) */
} tc_op_info;
extern const tc_op_info tc_ops[TC_OP_COUNT];
static inline bool tc_op_is_elementwise(tc_op op) {
    return tc_ops[op].kind <= TC_OPK_TERNARY;
}
static inline bool tc_op_is_reduce(tc_op op) {
    return tc_ops[op].kind == TC_OPK_REDUCE;
}

/* ---- views (view.c) ------------------------------------------------------
 * A view maps an index in `shape` to an element offset of an underlying
 * array: offset + sum(idx[i]*strides[i]), valid only where every masked dim
 * has mask_begin[i] <= idx[i] < mask_end[i] (invalid elements read as 0). */
typedef struct {
    int ndim;                         /* number of dims, 0..TC_MAX_DIMS */
    int64_t shape[TC_MAX_DIMS];       /* size per dim */
    int64_t strides[TC_MAX_DIMS];     /* element stride per dim; 0 for size-1 and expanded dims */
    int64_t offset;                   /* element offset of index (0,...,0) */
    bool has_mask;                    /* false: every index is valid */
    int64_t mask_begin[TC_MAX_DIMS];  /* first valid index per dim (if has_mask) */
    int64_t mask_end[TC_MAX_DIMS];    /* one past the last valid index (if has_mask) */
    bool is_contiguous;               /* offset 0, no mask, row-major strides */
} tc_view;

/* A shape tracker: a stack of views. views[n_views-1] is the outermost (its
 * shape is the tracker's shape); each earlier view is applied to the flat
 * offset the later one produced, re-split by the earlier view's shape.
 * Trackers are immutable values: every function returns a new one (owned by
 * the caller, freed with tc_st_free) or NULL with TC_ERR_MEMORY set. */
typedef struct {
    int n_views;    /* >= 1 */
    tc_view *views; /* n_views views, owned */
} tc_st;

tc_st *tc_st_from_shape(int ndim, const int64_t *shape); /* one contiguous view */
tc_st *tc_st_copy(const tc_st *st);
void tc_st_free(tc_st *st); /* NULL is fine */
int tc_st_ndim(const tc_st *st);
const int64_t *tc_st_shape(const tc_st *st);
int64_t tc_st_numel(const tc_st *st);
bool tc_st_is_contiguous(const tc_st *st); /* one view, and it is contiguous */
bool tc_st_has_mask(const tc_st *st);      /* some view has a mask (reads padding) */
bool tc_st_equal(const tc_st *a, const tc_st *b);
uint64_t tc_st_hash(const tc_st *st);
/* Movement. Callers check the arguments (the front end does, with messages);
 * these assume them valid. reshape: same numel; tries to rewrite the last view
 * and stacks a new contiguous view when it cannot. */
tc_st *tc_st_reshape(const tc_st *st, int ndim, const int64_t *shape);
tc_st *tc_st_permute(const tc_st *st, const int *order);  /* new dim i = old dim order[i] */
tc_st *tc_st_expand(const tc_st *st, const int64_t *shape); /* size-1 dims grow */
tc_st *tc_st_pad(const tc_st *st, const int64_t *before_after); /* 2*ndim, >= 0 */
tc_st *tc_st_shrink(const tc_st *st, const int64_t *begin_end); /* 2*ndim, 0<=b<=e<=size */
tc_st *tc_st_flip(const tc_st *st, const bool *axes);           /* ndim flags */
/* inner maps shape A onto a buffer; outer maps shape B onto the elements of a
 * contiguous array of shape A. Returns the tracker mapping B onto the buffer
 * (inner's views then outer's), merged where possible. */
tc_st *tc_st_compose(const tc_st *inner, const tc_st *outer);
/* Host evaluation of one index (idx has ndim values): the buffer offset, and
 * *valid=false when the index lands in a masked (padded) region. */
int64_t tc_st_index(const tc_st *st, const int64_t *idx, bool *valid);
void tc_st_dump(FILE *f, const tc_st *st); /* one line: views with shape, strides, offset, mask */

/* ---- storage handles (graph.c) --------------------------------------------
 * The graph holds realized storage as an opaque refcounted buffer; the
 * runtime that allocates it fills in release, so the graph never calls into
 * later stages. */
typedef struct tc_buffer tc_buffer;
struct tc_buffer {
    int64_t refcount;                 /* owners: BUFFER nodes, schedules, the engine */
    int device;                       /* device id (runtime's table) */
    size_t nbytes;                    /* size of the allocation */
    void *ptr;                        /* device pointer (host pointer on CPU) */
    void (*release)(tc_buffer *self); /* frees ptr and self; set by the allocator */
    void (*drop)(tc_buffer *self);    /* frees ptr (NULL after), keeps self; set by the allocator */
    int64_t captured;                 /* references the recording JIT capture holds */
    bool droppable;                   /* that capture writes it before it reads it: when
                                         nothing else holds it, its memory goes (drop) until
                                         the capture's plan gives it a block (capture.c) */
};
tc_buffer *tc_buffer_retain(tc_buffer *b);
/* NULL is fine; frees at refcount 0, drops the memory of a droppable
 * buffer when the capture's references are all that are left */
void tc_buffer_release(tc_buffer *b);

/* ---- nodes (graph.c) ----------------------------------------------------- */
typedef struct tc_node tc_node;
struct tc_node {
    tc_op op;                   /* what this node computes */
    tc_dtype dtype;             /* element type of the result */
    int device;                 /* device id (runtime's table) */
    int n_srcs;                 /* 0..3 */
    tc_node *srcs[3];           /* owned references */
    int ndim;                   /* rank of the result */
    int64_t shape[TC_MAX_DIMS]; /* result shape; reduces keep reduced dims as 1 */
    uint32_t axes;              /* REDUCE_*: bitmask of reduced axes */
    double value;               /* CONST: the scalar (ints are exact up to 2^53) */
    int64_t ivalue;             /* CONST of an integer dtype: the exact scalar */
    tc_st *st;                  /* VIEW: how this node reads srcs[0] (owned) */
    tc_buffer *buffer;          /* BUFFER: the data (owned reference) */
    int64_t refcount;           /* owners: tensors, consumer nodes, schedules */
    int64_t n_readers;          /* base: source slots of live nodes other than views that
                                   read it, directly or through a view (graph.c keeps it):
                                   the computations pending on it; a tensor handle or an
                                   autograd context is no reader */
    uint64_t id;                /* creation order: stable, deterministic ordering */
    uint64_t hash;              /* of (op, dtype, device, srcs, arg): the intern key */
    tc_node *hash_next;         /* intern table chain */
    bool is_interned;           /* in the intern table */
    void *scratch;              /* free for a pass that owns the graph while it runs */
};

tc_node *tc_node_retain(tc_node *n);
void tc_node_release(tc_node *n); /* NULL is fine; frees dead subgraphs with a worklist */
/* the base a node reads: srcs[0] for VIEW, the node itself otherwise */
static inline tc_node *tc_node_base(tc_node *n) {
    return n->op == TC_OP_VIEW ? n->srcs[0] : n;
}
int64_t tc_node_numel(const tc_node *n);
/* All constructors return a new reference, or NULL with an error set. Callers
 * (the front end) have already checked shapes and dtypes. */
tc_node *tc_node_const(double value, tc_dtype dt, int device, int ndim,
                       const int64_t *shape); /* a CONST base viewed to shape */
tc_node *tc_node_const_int(int64_t value, tc_dtype dt, int device, int ndim,
                           const int64_t *shape); /* exact for int64 */
/* takes a new reference to b */
tc_node *tc_node_buffer(tc_buffer *b, tc_dtype dt, int ndim, const int64_t *shape);
/* elementwise op over equal-shaped sources; dt is the result dtype */
tc_node *tc_node_alu(tc_op op, tc_dtype dt, int n_srcs, tc_node *const *srcs);
tc_node *tc_node_reduce(tc_op op, tc_node *src, uint32_t axes);
/* COPY (to device), CONTIGUOUS, ASSIGN (srcs[0] value, srcs[1] target) */
tc_node *tc_node_meta(tc_op op, int device, int n_srcs, tc_node *const *srcs);
/* GATHER of x (shape X) at idx (an integer node of shape O, O[d] == X[d] but
 * along axis); SCATTER of src (shape O) at idx (shape O) into shape X
 * (x_shape, equal to O but along axis) */
tc_node *tc_node_gather(tc_node *x, tc_node *idx, int axis);
tc_node *tc_node_scatter(tc_node *idx, tc_node *src, int axis, const int64_t *x_shape);
/* PUT of src (shape O) at idx (shape O) into target (a BUFFER node seen
 * contiguously in shape X (x_shape), equal to O but along axis; src has
 * target's dtype); the node has shape X */
tc_node *tc_node_put(tc_node *idx, tc_node *src, tc_node *target, int axis, const int64_t *x_shape);
tc_node *tc_node_reshape(tc_node *n, int ndim, const int64_t *shape);
tc_node *tc_node_permute(tc_node *n, const int *order);
tc_node *tc_node_expand(tc_node *n, int ndim, const int64_t *shape);
tc_node *tc_node_pad(tc_node *n, const int64_t *before_after);
tc_node *tc_node_shrink(tc_node *n, const int64_t *begin_end);
tc_node *tc_node_flip(tc_node *n, const bool *axes);
/* the tracker from n's shape to its base's contiguous elements (new, owned) */
tc_st *tc_node_st(const tc_node *n);
/* turns an unrealized base into a BUFFER holding b: takes it out of the
 * intern table, releases its sources, keeps a new reference to b */
void tc_node_set_realized(tc_node *n, tc_buffer *b);
int64_t tc_graph_live_nodes(void); /* nodes alive now, for leak tests */
/* distinct nodes reachable from nodes[0..n-1] through srcs (views,
 * constants and the realized BUFFERs the walk stops at included): what a
 * schedule of them walks. -1 with TC_ERR_MEMORY set when out of memory. */
int64_t tc_graph_count(tc_node *const *nodes, int n);
/* Of the unrealized bases bases[0..n-1] (a walk's list, each once), those
 * that some node outside the list reads go into the set *held: a reader
 * (n_readers) that no listed base's source slots account for, directly or
 * through a view (a gradient not yet realized that reads an intermediate
 * of this realize). Such a base is read by a later realize, so a schedule
 * must not keep it only in a row's scratch. Tensor handles and autograd
 * contexts hold nodes without reading them: a handle to an intermediate
 * realized later computes it again, as anything not requested is.
 * O(n + their sources); TC_ERR_MEMORY when a map runs out of memory
 * (*held is then partial). */
TC_MUST_USE tc_status tc_graph_held(tc_node *const *bases, int n, tc_ptrmap *held);
void tc_graph_shutdown(void);      /* frees the intern table (nodes must be gone) */
void tc_node_dump(FILE *f, tc_node *n); /* the graph under n, one node a line */

#endif /* TC_GRAPH_H */
