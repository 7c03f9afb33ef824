/* tensor.h - the interface of src/tensor: the public tc_tensor handle over a
 * graph node, with broadcasting, type promotion and argument checks.
 *
 * Files: tensor.c (handles, properties, library calls, shared argument
 * checks), creation.c, random.c (host-generated random tensors), sample.c
 * (multinomial), elementwise.c (node combinators and the unary ops), math.c
 * (rounding, hyperbolic functions, activations), binary.c (binary ops,
 * where, cast), reduce.c, scan.c (cumsum, cumprod), movement.c, run.c (realize,
 * transfers, counters), autograd.c (contexts, release, tc_backward),
 * grad_rules.c (one backward rule per differentiable op), assign.c
 * (tc_assign), composite.c (matmul, softmax, logsumexp, layernorm, argmax,
 * linear, dropout), einsum.c, nnops.c (conv2d, pools, batchnorm), loss.c
 * (cross-entropy), gelu.c (erf, gelu), attention.c (tril, triu,
 * masked_fill, scaled dot product attention) and clip.c (clip_grad_norm). */
#ifndef TC_TENSOR_H
#define TC_TENSOR_H

#include "engine/engine.h"

typedef struct tc_ag_ctx tc_ag_ctx;

struct tc_tensor {
    int64_t refcount;    /* handle references held by the user and the library */
    tc_node *node;       /* owned reference; its shape and dtype are the tensor's */
    bool requires_grad;  /* a leaf the user marked, or the result of an op on one */
    tc_tensor *grad;     /* leaves: the accumulated gradient (owned), NULL if none */
    tc_ag_ctx *ctx;      /* results of differentiable ops: how this was made (owned) */
    uint64_t ag_mark;    /* tc_backward's visit epoch (topological sort) */
    tc_node *ag_pending; /* tc_backward: gradient summed so far (owned while it runs) */
    tc_tensor *ag_next;  /* intrusive link: release worklist, backward order */
    bool graph_freed;    /* a backward without retain_graph freed its context: a later
                            backward that reaches it with a gradient fails */
};

/* a new handle owning the reference `n` (consumed even on failure); NULL if n is NULL */
tc_tensor *tc_tensor_wrap(tc_node *n);
static inline tc_node *tc_tensor_node(const tc_tensor *t) {
    return t->node;
}

/* ---- argument checks (tensor.c): each sets an error naming `api` ---------- */
/* TC_ERR_INVALID when t is NULL (`arg` names the parameter: "a", "cond") */
TC_MUST_USE tc_status tc_tensor_check(const tc_tensor *t, const char *api, const char *arg);
/* 0..TC_MAX_DIMS dims, shape non-NULL when ndim > 0, sizes >= 0, numel fits int64 */
TC_MUST_USE tc_status tc_tensor_check_shape(const char *api, int ndim, const int64_t *shape);
TC_MUST_USE tc_status tc_tensor_check_dtype(const char *api, int dt); /* a valid tc_dtype */
/* one axis in -ndim..ndim-1 -> 0..ndim-1 in *out */
TC_MUST_USE tc_status tc_tensor_axis(const char *api, int ndim, int axis, int *out);
/* axes -> bitmask of dims; naxes 0 = all dims; duplicates are errors; a 0-d
 * tensor accepts one axis 0 or -1 (torch's and tinygrad's rule), mask 0 */
TC_MUST_USE tc_status tc_tensor_axes_mask(const char *api, int ndim, int naxes, const int *axes,
                              uint32_t *mask);

/* ---- node combinators (elementwise.c) -------------------------------------
 * Each consumes the node references it is given (also on failure) and returns
 * a new reference, or NULL with the error set. A NULL argument gives NULL (its
 * error is already set), so combinators nest without checks in between.
 * Sources of one op must have equal shapes and (except WHERE's condition)
 * equal dtypes. */
tc_node *tc_ew_keep(tc_node *n);                         /* NULL-safe retain */
tc_node *tc_ew_unary(tc_op op, tc_node *x);              /* result in x's dtype */
tc_node *tc_ew_binary(tc_op op, tc_node *a, tc_node *b); /* CMPLT/CMPNE give bool */
tc_node *tc_ew_where(tc_node *cond, tc_node *a, tc_node *b);
tc_node *tc_ew_cast(tc_node *x, tc_dtype dt); /* x itself when already dt */
tc_node *tc_ew_float(tc_node *x);             /* ints and bool -> float32 */
/* a CONST of like's dtype, device and shape; borrows like (NULL -> NULL) */
tc_node *tc_ew_const(const tc_node *like, double value);
tc_node *tc_ew_not(tc_node *x);             /* bool: x != true */
tc_node *tc_ew_order_flip(tc_node *x);      /* order-reversing involution: -x, ~x, x^255, !x */
tc_node *tc_ew_exp(tc_node *x);             /* float: exp2(x*log2(e)) */
tc_node *tc_ew_abs(tc_node *x);             /* max(x, -x); x itself for uint8 and bool */
tc_node *tc_ew_sub(tc_node *a, tc_node *b); /* a + -b */
tc_node *tc_ew_log(tc_node *x);             /* float: log2(x)*ln(2) */
tc_node *tc_ew_sigmoid(tc_node *x);         /* float: 1/(1+exp(-x)) */
tc_node *tc_ew_tanh(tc_node *x);            /* float: 2*sigmoid(2x) - 1 */
/* math.c: float x */
tc_node *tc_ew_sign(tc_node *x);     /* -1, 0 or 1 in x's dtype (NaN: 0) */
tc_node *tc_ew_softplus(tc_node *x); /* log(1+exp(x)) as max(x,0) + log(1+exp(-|x|)) */
/* reshape (prepend 1s) then expand n to shape; numpy rules already checked */
tc_node *tc_ew_broadcast(tc_node *n, int ndim, const int64_t *shape);
tc_node *tc_ew_reshape(tc_node *n, int ndim, const int64_t *shape);

tc_node *tc_ew_pow(tc_node *a, tc_node *b); /* binary.c: C's pow, elementwise */
/* reduce.c: x reduced with REDUCE_SUM/REDUCE_MAX/REDUCE_PROD over the dims in mask, which
 * stay as size 1 (sizes-1 dims are skipped; no elements gives the identity) */
tc_node *tc_ew_reduce(tc_node *x, tc_op op, uint32_t mask);
/* reduce.c: the dtype tc_sum accumulates dt in (bool, uint8, int32 -> int32;
 * int64 -> int64; floats -> float32) */
tc_dtype tc_sum_dtype(tc_dtype dt);
/* run.c: x (borrowed) on device: a COPY of what a copy can read (a base; a
 * view of all of one in order is that base copied, then reshaped; other
 * views and consts are made contiguous on x's device first) */
tc_node *tc_tensor_copy_node(tc_node *x, int device);
/* assign.c: makes dst read a realized buffer of its own, seen whole and in
 * order (a lazy dst is realized first), else an error naming api */
TC_MUST_USE tc_status tc_assign_prepare(tc_tensor *dst, const char *api);
/* assign.c: dst loses its recorded history (in-place updates are not
 * differentiable); a leaf keeps its flag and gradient */
void tc_assign_forget_history(tc_tensor *dst);
/* movement.c: n reads a realized buffer in its own row-major order (a BUFFER,
 * or a contiguous view of all of one) */
bool tc_tensor_is_contiguous_buffer(const tc_node *n);

/* ---- autograd (autograd.c, grad_rules.c) -----------------------------------
 * Every public op that makes a tensor from tensors calls tc_ag_record on its
 * result. When grad mode is on and some input requires grad, the result gets
 * a context: the op, the inputs that require grad (retained handles), every
 * input's node and the output's node as they were at the call, and the op's
 * arguments. tc_backward walks the contexts in topological order and applies
 * tc_ag_rule to each. */
typedef enum {
    TC_AG_NONE,       /* not differentiable: no context is recorded */
    TC_AG_ADD,        /* a + b */
    TC_AG_SUB,        /* a - b */
    TC_AG_MUL,        /* a * b */
    TC_AG_DIV,        /* a / b */
    TC_AG_MAXIMUM,    /* max(a, b): ties split the gradient evenly */
    TC_AG_MINIMUM,    /* min(a, b): ties split the gradient evenly */
    TC_AG_POW,        /* a ^ b */
    TC_AG_NEG,        /* -x */
    TC_AG_EXP,        /* e^x */
    TC_AG_LOG,        /* ln x */
    TC_AG_EXP2,       /* 2^x */
    TC_AG_LOG2,       /* log2 x */
    TC_AG_SQRT,       /* sqrt x */
    TC_AG_SIN,        /* sin x */
    TC_AG_COS,        /* cos x */
    TC_AG_RELU,       /* max(x, 0): gradient 0 at 0 */
    TC_AG_SIGMOID,    /* 1/(1+e^-x) */
    TC_AG_TANH,       /* tanh x */
    TC_AG_RECIP,      /* 1/x */
    TC_AG_ABS,        /* |x|: gradient 0 at 0 */
    TC_AG_SQUARE,     /* x*x */
    TC_AG_STEP,       /* piecewise constant (floor ceil round trunc sign): gradient 0 */
    TC_AG_SINH,       /* sinh x */
    TC_AG_COSH,       /* cosh x */
    TC_AG_ASINH,      /* asinh x */
    TC_AG_ACOSH,      /* acosh x */
    TC_AG_ATANH,      /* atanh x */
    TC_AG_SOFTSIGN,   /* x/(1+|x|) */
    TC_AG_HARDSWISH,  /* x*relu6(x+3)/6 */
    TC_AG_MISH,       /* x*tanh(softplus x) */
    TC_AG_QUICK_GELU, /* x*sigmoid(1.702x) */
    TC_AG_WHERE,      /* cond ? a : b (inputs cond, a, b; cond gets none) */
    TC_AG_CAST,       /* float -> float cast */
    TC_AG_SUM,        /* sum over args.axes */
    TC_AG_MAX,        /* max over args.axes: ties split the gradient evenly */
    TC_AG_MIN,        /* min over args.axes: ties split the gradient evenly */
    TC_AG_MEAN,       /* mean over args.axes */
    TC_AG_VAR,        /* variance over args.axes with args.correction */
    TC_AG_STD,        /* standard deviation over args.axes with args.correction */
    TC_AG_RESHAPE,    /* any reshape */
    TC_AG_PERMUTE,    /* args.order (transpose too) */
    TC_AG_EXPAND,     /* broadcast to the output shape */
    TC_AG_PAD,        /* args.pads: before/after per dim */
    TC_AG_SHRINK,     /* args.pads: begin/end per dim */
    TC_AG_FLIP,       /* args.axes: flipped dims */
    TC_AG_CONTIGUOUS, /* a copy in a buffer of its own */
    TC_AG_COPY,       /* to another device */
    TC_AG_CONTIG_BW,  /* contiguous_backward: the same values; g made contiguous */
    TC_AG_CUMSUM,     /* running sums along args.order[0]: scan.c's tc_cumsum_grad */
    TC_AG_CUMPROD,    /* running products along args.order[0]: scan.c's tc_cumprod_grad */
    TC_AG_CONV2D,     /* conv (any nd: w's rank - 2), no dilation, one group (inputs x,
                         w[, bias]; args.pads[0..nd-1] = padding per spatial axis, both
                         sides, args.pads[TC_MAX_DIMS + j] its stride): nnops.c's
                         tc_conv2d_grad */
    TC_AG_GATHER,     /* x read at integer places along args.axes' axis (inputs x, index;
                         index gets none): a SCATTER of the gradient */
    TC_AG_COUNT
} tc_ag_op;

typedef struct {
    uint32_t axes;                 /* SUM..STD: reduced dims (before squeezing); FLIP: flipped;
                                      GATHER: the indexed axis */
    int correction;                /* VAR, STD: n - correction divides */
    int order[TC_MAX_DIMS];        /* PERMUTE: output dim i is input dim order[i]; CUMSUM:
                                      [0] is the axis */
    int64_t pads[2 * TC_MAX_DIMS]; /* PAD: before/after; SHRINK: begin/end, per dim */
} tc_ag_args;

struct tc_ag_ctx {
    tc_ag_op op;           /* the op that made the tensor owning this context */
    int n_inputs;          /* 1..3 */
    tc_tensor *parents[3]; /* inputs that require grad (owned handles), NULL for the others */
    tc_node *inputs[3];    /* every input's node at the call (owned) */
    tc_node *out;          /* the output's node at the call (owned) */
    tc_ag_args args;       /* op arguments (zeroed when unused) */
};

/* Records a context for op on out (the result of a public call over the
 * n_inputs handles ins; args may be NULL) when grad mode is on and some input
 * requires grad. Returns out, or NULL (out released, error set) when the
 * context cannot be allocated. NULL out passes through. */
tc_tensor *tc_ag_record(tc_tensor *out, tc_ag_op op, int n_inputs, tc_tensor *const *ins,
                        const tc_ag_args *args);
/* the gradients of ctx's inputs from g, the gradient of its output (consumed):
 * grads[i] (new reference, the input's shape and dtype) for each non-NULL
 * parents[i], NULL for the others. On failure every grads[i] is NULL. */
TC_MUST_USE tc_status tc_ag_rule(const tc_ag_ctx *ctx, tc_node *g, tc_node **grads);
/* the derivative of math.c's op (TC_AG_SINH .. TC_AG_QUICK_GELU) at x (the
 * input in the output's dtype) with output y, both borrowed; a new node */
tc_node *tc_math_grad(tc_ag_op op, tc_node *x, tc_node *y);
/* TC_AG_CUMSUM's rule (scan.c): the running sums of g from the other end */
void tc_cumsum_grad(const tc_ag_ctx *ctx, tc_node *g, tc_node **grads);
/* TC_AG_CUMPROD's rule (scan.c): exact where the input has zeros (torch's) */
void tc_cumprod_grad(const tc_ag_ctx *ctx, tc_node *g, tc_node **grads);
/* TC_AG_CONV2D's rule (nnops.c): grads as tc_ag_rule's, g consumed */
void tc_conv2d_grad(const tc_ag_ctx *ctx, tc_node *g, tc_node **grads);
/* frees t (refcount already 0) and every handle that dies with it, with a
 * worklist: no recursion however long the chain of contexts */
void tc_tensor_destroy(tc_tensor *t);

/* ---- public unary ops (elementwise.c) ---- */
typedef enum {
    U_ANY,    /* every dtype, result in the input dtype */
    U_FLOAT,  /* float math: ints and bool are cast to float32 first */
    U_NOBOOL, /* every dtype but bool */
    U_INT,    /* integer dtypes only (int32, int64, uint8) */
} tc_unary_kind;

/* the public unary op `api` on a: checks a and its dtype against kind, builds
 * the result with build (a's node, cast to float32 first for U_FLOAT) and
 * records ag for autograd */
tc_tensor *tc_unary_api(const char *api, tc_tensor *a, tc_unary_kind kind,
                        tc_node *(*build)(tc_node *), tc_ag_op ag);

/* ---- composites (composite.c, nnops.c) ------------------------------------
 * Composites are built from the public ops (so they fuse, and differentiate
 * through the ops' own rules). A scope holds the handles made along the way:
 * TC_S(s, call) skips the call once a step has failed (so the first error's
 * message survives) and keeps the result; tc_scope_end returns a new
 * reference to the final tensor (NULL if any step failed) and releases the
 * rest. Arguments are checked before, with messages naming the composite. */
#define TC_SCOPE_MAX 64
typedef struct {
    tc_tensor *ts[TC_SCOPE_MAX]; /* handles made so far (owned) */
    int n;                       /* number of handles in ts */
    bool failed;                 /* a step returned NULL: later steps are skipped */
} tc_scope;
tc_tensor *tc_scope_keep(tc_scope *s, tc_tensor *t); /* records t; NULL marks the failure */
tc_tensor *tc_scope_end(tc_scope *s, tc_tensor *result);
#define TC_S(s, call) ((s)->failed ? NULL : tc_scope_keep((s), (call)))
/* a 0-d tensor of value with like's dtype (float32 for non-floats) and device */
tc_tensor *tc_scope_scalar(tc_scope *s, const tc_tensor *like, double value);
/* checks that ts[0..n-1] (NULL entries skipped) are on one device */
TC_MUST_USE tc_status tc_tensor_same_device(const char *api, int n, tc_tensor *const *ts,
                                const char *const *names);

/* ---- random (random.c) ---------------------------------------------------- */
void tc_random_reset(void); /* seed 0, counter 0: the state at start (tc_shutdown) */

#endif /* TC_TENSOR_H */
