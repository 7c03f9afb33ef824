/* schedule.h - the interface of src/schedule: cuts the lazy graph under a
 * set of nodes into an ordered list of schedule items, each one kernel (with
 * its AST) or one copy.
 *
 * The kernel model. A kernel runs over a *loop space*: a full shape F and a
 * set R of reduced axes. Its outer loops run over the kept axes (not in R).
 * Inside them sits a sequence of stages over the R axes: a reduce stage
 * accumulates into a register; a store stage writes full-shape outputs.
 * Every AST node lives either in the full space (shape F) or in the reduced
 * space (F with the R axes at 1); a reduced-space value is a per-row scalar,
 * usable by any later stage of the same row. So softmax can later be one
 * kernel: max stage, sum stage, store stage.
 *
 * The AST is a DAG of tc_ast nodes in an arena: SINK(STORE...), with
 * LOAD/CONST leaves (each with a tracker from the loop space to its buffer),
 * elementwise ops and REDUCE_SUM/REDUCE_MAX/REDUCE_PROD over R.
 *
 * Row kernels, the model one level deeper (rows.c). Kernels that follow one
 * another and share leading kept axes, each reading what the earlier ones
 * wrote only within its own row (scores, softmax, weights @ v: rows (b, h,
 * t)), become one kernel: its loops run over the rows, and inside a row
 * each former kernel is a *part*, a loop nest of its own over its other
 * axes with its stages, in order. What a part writes that only later parts
 * of the same row read stays in a per-row scratch array (a score row, not
 * a T x T buffer). Such an item has has_parts: its SINK holds one SINK per
 * part (st: the part's loop space, from_shape of its full shape; axes: its
 * reduced axes; the first ndim axes are the rows), and a LOAD/STORE with
 * buf < 0 reads/writes row scratch array -1 - buf of index_size elements,
 * its tracker giving the place inside the row.
 */
#ifndef TC_SCHEDULE_H
#define TC_SCHEDULE_H

#include "graph/graph.h"

typedef struct tc_ast tc_ast;
struct tc_ast {
    tc_op op;        /* elementwise op, REDUCE_*, CONST, LOAD, STORE or SINK */
    tc_dtype dtype;  /* result dtype (STORE/SINK: the stored dtype / unused) */
    int n_srcs;      /* number of srcs */
    tc_ast **srcs;   /* operands; STORE: srcs[0] is the value; SINK: the stores */
    int buf;         /* LOAD/STORE: kernel buffer slot (outputs first); < 0: row scratch
                        array -1 - buf (row kernels) */
    tc_st *st;       /* LOAD/STORE/CONST: loop space -> buffer element (and mask) */
    double value;    /* CONST: the scalar */
    int64_t ivalue;  /* CONST of an integer dtype: exact scalar */
    uint32_t axes;   /* REDUCE_*: reduced axes of the loop space; a part's SINK: its R */
    int64_t index_stride; /* GATHER (a load), SCATTER (an added store), PUT (a store):
                             buffer elements from
                             one index of the indexed axis to the next; st gives index 0 */
    int64_t index_size;   /* GATHER, SCATTER, PUT: the indexed axis's size; an index outside
                             [0, size) reads 0 / adds nothing / writes nothing. srcs:
                             GATHER the index; SCATTER and PUT the value, then the index
                             (buf: the output written). A row scratch LOAD/STORE:
                             the array's elements */
    uint64_t hash;   /* structural hash (for dedup and program caching) */
    void *lowered;   /* codegen's scratch: the UOp computed for this node */
    int lowered_epoch; /* codegen's scratch: the stage that computed it */
    int mark;          /* codegen's scratch: traversal mark */
};

typedef struct {
    bool is_copy;     /* a copy between buffers, no kernel */
    bool is_scatter;  /* one SCATTER store: the kernel zeroes its output, then adds to it at
                         indexed places, in order (CPU only: one thread) */
    bool is_put;      /* indexed stores (PUT, tc_index_copy), one per output: loops over
                         the values' space write each at its index into the output, an
                         ASSIGN's target, leaving the rest (one thread, in order) */
    bool has_parts;   /* a row kernel: the loop space is the rows, the AST's SINK holds one
                         SINK per part (see above) */
    tc_ast *ast;      /* SINK (kernels only) */
    int ndim;         /* loop space rank */
    int64_t full_shape[TC_MAX_DIMS]; /* loop space shape F */
    uint32_t reduce_axes; /* R: axes reduced somewhere in the kernel */
    int n_outs;       /* outputs: bufs[0..n_outs-1] */
    int n_bufs;       /* outputs then inputs */
    tc_node **bufs;   /* base nodes, owned references. Outputs are unrealized
                         bases (an ASSIGN writes its target's buffer); inputs are
                         BUFFER nodes or outputs of earlier items */
    char name[96];    /* kernel name: "E_4_4", "r_4_16" */
} tc_sched_item;

typedef struct {
    tc_arena arena;        /* ASTs, items, names */
    tc_ptrvec sts;         /* trackers owned by the ASTs */
    int n_items;           /* ordered: producers first */
    tc_sched_item *items;  /* n_items items */
} tc_schedule;

/* the schedule that realizes the bases of nodes[0..n-1] (already realized
 * bases give no item). NULL with an error set on failure (e.g. a cycle). */
tc_schedule *tc_schedule_create(tc_node *const *nodes, int n);
void tc_schedule_free(tc_schedule *s); /* NULL is fine; drops the node references */
int tc_schedule_n_kernels(const tc_schedule *s);
/* one line per distinct AST node, sources first, each named "aN" (a tree
 * dump would repeat shared subtrees: exponential in a deep kernel); for
 * TC_DEBUG>=3, failing tests and TC_SCHEDULE_LOG */
void tc_ast_dump(FILE *f, const tc_ast *ast);
void tc_schedule_dump(FILE *f, const tc_schedule *s);
void tc_schedule_dump_dag(FILE *f, const tc_schedule *s); /* the same as tc_schedule_dump */
void tc_schedule_write_dot(FILE *f, const tc_schedule *s); /* Graphviz (TC_SAVE_SCHEDULE) */

#endif /* TC_SCHEDULE_H */
