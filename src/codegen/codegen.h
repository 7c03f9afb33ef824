/* codegen.h - the interface of src/codegen: a kernel AST (schedule.h)
 * becomes a flat list of UOps.
 *
 * UOps are built hash-consed (identical ops over identical sources are one
 * UOp) and simplified as they are built: constant folding, algebraic
 * identities, and range analysis on integer index math (every int UOp knows
 * its [vmin, vmax]), which folds mod/div with known ranges and drops
 * always-true masks. Each UOp is placed in the innermost loop its sources
 * need, so loop-invariant work is hoisted. The result is linearized into a
 * flat list with RANGE ... ENDRANGE pairs.
 */
#ifndef TC_CODEGEN_H
#define TC_CODEGEN_H

#include "schedule/schedule.h"

typedef enum {
    TC_UOP_DEFINE_GLOBAL, /* buffer argument: arg = slot; dtype = element dtype */
    TC_UOP_DEFINE_ACC,    /* accumulator register: srcs[0] = initial CONST */
    TC_UOP_CONST,         /* scalar constant (value / ivalue) */
    TC_UOP_SPECIAL,       /* thread id on devices with work-groups: arg = dim */
    TC_UOP_RANGE,         /* loop over [srcs[0], srcs[1]): arg = loop-space axis */
    TC_UOP_ENDRANGE,      /* end of the loop srcs[0] */
    TC_UOP_LOAD,          /* srcs: buffer, index[, valid]; 0 where valid is false */
    TC_UOP_STORE,         /* srcs: buffer, index, value */
    TC_UOP_ALU,           /* alu = the op, srcs = operands */
    TC_UOP_CAST,          /* value converted to dtype */
    TC_UOP_BITCAST,       /* bits reinterpreted as dtype */
    TC_UOP_ASSIGN,        /* accumulator update: srcs[0] = DEFINE_ACC, srcs[1] = new value */
    TC_UOP_COUNT
} tc_uop_op;

typedef struct tc_uop tc_uop;
struct tc_uop {
    tc_uop_op op;      /* kind */
    tc_dtype dtype;    /* result dtype (buffers: element dtype) */
    tc_op alu;         /* ALU: the operation */
    int n_srcs;        /* 0..4 */
    tc_uop *srcs[4];   /* operands */
    int64_t arg;       /* DEFINE_GLOBAL: slot; RANGE/SPECIAL: axis */
    double value;      /* CONST: float value */
    int64_t ivalue;    /* CONST: integer value */
    int64_t vmin;      /* integer UOps: smallest value it can take */
    int64_t vmax;      /* integer UOps: largest value it can take */
    int depth;         /* loop depth where it is placed */
    bool is_index;     /* part of address math (not counted as ops) */
    int id;            /* position in the linear list (render names) */
    int uses;          /* number of UOps reading it */
    uint64_t hash;     /* hash-consing key */
    tc_uop *hash_next; /* hash-consing chain */
    struct tc_ulist *body; /* RANGE: the UOps inside the loop */
};

/* a growable UOp list in the kernel's arena */
typedef struct tc_ulist {
    tc_uop **items; /* n used, cap allocated */
    int n;
    int cap;
} tc_ulist;

/* what the target offers; each renderer fills one in, codegen only reads it */
typedef struct {
    bool has_local;      /* work-groups and local memory (GPUs) */
    int64_t global_max[3]; /* grid limits (has_local) */
    int64_t local_max[3];  /* work-group limits (has_local) */
} tc_target;

typedef struct {
    tc_arena arena;        /* every UOp and array below */
    tc_uop **uops;         /* the linear program */
    int n_uops;            /* length of uops */
    int n_bufs;            /* kernel arguments */
    tc_dtype *buf_dtypes;  /* element dtype per argument */
    bool *buf_written;     /* argument is stored to */
    tc_dtype index_dtype;  /* TC_INT32 unless sizes need TC_INT64 */
    char name[96];         /* function name */
    int64_t est_ops;       /* arithmetic ops the kernel executes */
    int64_t est_mem;       /* bytes of all its buffers */
} tc_kernel_uops;

/* lowers a schedule item's AST; NULL with an error set on failure */
tc_kernel_uops *tc_codegen(const tc_sched_item *item, const tc_target *target);
void tc_kernel_uops_free(tc_kernel_uops *k);
void tc_uops_dump(FILE *f, const tc_kernel_uops *k); /* one UOp a line (TC_DEBUG>=5) */
extern const char *const tc_uop_names[TC_UOP_COUNT];

/* ---- the UOp builder (uop.c), internal to codegen ----------------------- */
#define TC_UB_BUCKETS 4096
#define TC_UB_MAX_DEPTH (TC_MAX_DIMS + 2)
typedef struct {
    tc_kernel_uops *k;                /* the kernel being built (owns the arena) */
    tc_uop *table[TC_UB_BUCKETS];     /* hash-consing buckets */
    tc_ulist top;                     /* UOps outside every loop */
    tc_ulist *open[TC_UB_MAX_DEPTH + 1]; /* open[d]: list receiving depth-d UOps */
    int depth;                        /* loops open now */
    bool failed;                      /* an allocation failed; results are NULL */
    bool index_mode;                  /* new UOps are address math (is_index) */
} tc_ub;
void tc_ub_init(tc_ub *ub, tc_kernel_uops *k);
tc_uop *tc_ub_const(tc_ub *ub, tc_dtype dt, double value, int64_t ivalue);
tc_uop *tc_ub_iconst(tc_ub *ub, tc_dtype dt, int64_t v); /* integer constant */
/* an ALU op, simplified; NULL operands give NULL (failure propagates) */
tc_uop *tc_ub_alu(tc_ub *ub, tc_op op, tc_dtype dt, int n, tc_uop *a, tc_uop *b, tc_uop *c);
tc_uop *tc_ub_cast(tc_ub *ub, tc_uop *x, tc_dtype dt, bool bitcast);
tc_uop *tc_ub_global(tc_ub *ub, int slot, tc_dtype dt);
tc_uop *tc_ub_load(tc_ub *ub, tc_uop *buf, tc_uop *idx, tc_uop *valid);
tc_uop *tc_ub_store(tc_ub *ub, tc_uop *buf, tc_uop *idx, tc_uop *value);
tc_uop *tc_ub_acc(tc_ub *ub, tc_uop *init);            /* at the current depth */
tc_uop *tc_ub_acc_update(tc_ub *ub, tc_op op, tc_uop *acc, tc_uop *x); /* acc = acc op x */
tc_uop *tc_ub_range(tc_ub *ub, int axis, tc_dtype dt, int64_t n); /* opens a loop */
void tc_ub_end_range(tc_ub *ub);                       /* closes the innermost loop */
tc_status tc_ub_linearize(tc_ub *ub);                  /* fills k->uops */

#endif /* TC_CODEGEN_H */
