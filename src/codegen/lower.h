/* lower.h - what lower.c (kernel AST -> UOps, and the CPU paths),
 * lower_store.c (the stores of a kernel, a tile's epilogue) and lower_gpu.c
 * (work-groups, grouped reduces, GPU vector lanes) share: the lowering
 * context, and the steps each calls in the others. Private to src/codegen. */
#ifndef TC_LOWER_H
#define TC_LOWER_H

#include "codegen.h"

#define GROUP_MIN_N 16    /* fewest reduced elements per row worth a grouped reduce */
#define GROUP_MAX_LANES 256 /* most lanes of a grouped reduce */
#define LANES_MAX 128     /* most lanes of an ungrouped kernel's work-group */
#define GV_MAX_NODES 512  /* most AST nodes of a GPU vector kernel */

/* a reduce of a grouped kernel */
typedef struct {
    tc_ast *ast;       /* the REDUCE_* node */
    bool is_bcast;     /* read by every lane (by a later stage), not only by lane 0 */
    bool is_done;      /* partials stored (and broadcast when is_bcast) */
    tc_uop *temp;      /* local buffer of G partials */
    tc_uop *value;     /* the combined value: temp_k[0] (broadcast) or lane 0's */
    int value_gate;    /* not broadcast: the lane-0 block value belongs to */
} group_red;

/* a value that several stages of a CPU kernel compute, stored by the first
 * in a scratch array over the reduced axes and loaded by the later ones */
typedef struct {
    const tc_ast *a; /* the AST node (an exp2, log2 or sin) */
    tc_uop *buf;     /* its scratch array (made at its first store) */
    int epoch;       /* 0: not stored yet; > 0: the stage that stored it; -1: every stage computes it */
} saved_value;

typedef struct {
    tc_ub ub;                  /* the UOp builder */
    const tc_sched_item *it;   /* the kernel */
    tc_uop *idx[TC_MAX_DIMS];  /* current loop index per axis; NULL outside its loop */
    tc_uop **globals;          /* DEFINE_GLOBAL per slot */
    tc_dtype idt;              /* index dtype */
    int base_epoch;            /* first stage number of this lowering */
    int epoch;                 /* current stage number */
    int outer_depth;           /* loop depth of the kept-axes loops */
    const tc_target *tg;       /* what the target offers */
    const tc_kopt *plan;       /* the optimizer's plan to follow; NULL: opt.c chooses */
    bool is_grouped;           /* reduces split across the lanes of a work-group */
    int64_t lanes;             /* grouped: lanes per work-group (G) */
    int64_t red_n;             /* grouped: reduced elements per row (N) */
    tc_uop *lane;              /* grouped: this lane's id */
    group_red reds[TC_UB_MAX_LOCALS]; /* grouped: one per reduce */
    int n_reds;                /* entries of reds */
    bool has_many_reds;        /* more reduces than reds can hold: not grouped */
    int mark_all, mark_one;    /* grouped analysis: marks for "read by all lanes / lane 0" */
    int gate;                  /* grouped: serial of the open lane-0 block, 0 = none */
    int n_gates;               /* grouped: lane-0 blocks opened so far */
    int n_up;                  /* upcast (CPU, opt.c's plan): axes computed UP at a time */
    int up_axis[3];            /* upcast: those axes (a reduced one last: the split) */
    int64_t up_amt[3];         /* upcast: how many at a time */
    bool up_clamp[3];          /* upcast: the amount does not divide the axis */
    tc_uop *up_base[3];        /* upcast: loop index * amount (a split: inside its stage) */
    int n_reps;                /* upcast: copies of the loop body (product of amounts) */
    int64_t split;             /* upcast: partial accumulators per reduce (1: no split) */
    int64_t split_tail;        /* upcast: the split axis' last indices past its whole steps,
                                  reduced in a scalar loop after them (0: none) */
    int vl;                    /* upcast: lanes of each partial accumulator (vectors, has_vec
                                  targets; 1: scalars); a split steps by split * vl */
    int vj;                    /* upcast: lanes of the tile column (a kept axis, last in the
                                  plan) in reduce stages; 1: scalars */
    bool in_vj;                /* lowering a reduce stage's vector copies of the column */
    int kaxis;                 /* blocked reduce (plan's kblock): the blocked axis; -1: none */
    int64_t kblock;            /* blocked reduce: indices of kaxis per block */
    bool epi_loop;             /* upcast: the stores run in loops over the kept copies (the
                                  plan's epi_loop, lower_store.c) */
    tc_uop *kb;                /* blocked reduce: the current block (a loop outside the rows) */
    int64_t mblock;            /* row blocks (plan's mblock): rows of the tile's row axis per
                                  block; 0: none */
    tc_uop *mb;                /* row blocks: the current block (the outermost loop) */
    int outer0;                /* loops opened before the kept axes' (1 with row blocks): the
                                  threads share the loop at this depth */
    const tc_ast *pack_load;   /* packed tile (plan's pack): the load read from the panel */
    int pack_from;             /* packed tile: the kept axis its panel is filled before
                                  (tc_opt_pack_from) */
    int64_t pack_k;            /* packed tile: reduce indices per panel, the reduced axes'
                                  flat (the blocked axis' kblock of them, else all) */
    tc_uop *pack_buf;          /* packed tile: the panel, pack_k x the tile's columns */
    tc_uop *pack_kloc;         /* packed tile: the flat reduce index within the panel (its
                                  stage) */
    const tc_ast *row_load;    /* row panel (plan's row_pack): the rows' load read from it */
    int64_t row_rows;          /* row panel: the rows it holds (a row block's, whole tiles) */
    tc_uop *row_buf;           /* row panel: row_rows x pack_k, tile by tile, each tile's
                                  reduce indices outer and its rows inner */
    tc_uop *row_off;           /* row panel: minus its first row (the row block's) */
    int64_t up_off[3];         /* upcast: the current copy's digit of each plan axis */
    int rep;                   /* upcast: the copy being lowered */
    struct rmemo *rbuckets[4096]; /* upcast: (AST node, copy) -> UOp */
    int n_saved;               /* saved values (lower.c): entries of saved */
    saved_value saved[4];      /* saved values: transcendentals several stages compute */
    tc_st saved_st;            /* saved values: where in a scratch array (the reduced axes, flat) */
    int64_t saved_n;           /* saved values: elements of each scratch array */
    int gvl;                   /* GPU vectors: elements of axis gv_axis per lane (1: scalar) */
    int gv_axis;               /* GPU vectors: the innermost kept axis */
    const tc_ast *gv_node[GV_MAX_NODES]; /* GPU vectors: the AST nodes walked ... */
    bool gv_is_vec[GV_MAX_NODES];        /* ... and whether each is a vector */
    int n_gv;                  /* GPU vectors: entries of gv_node */
} lower_ctx;

static inline int64_t ceil_div(int64_t a, int64_t b) {
    return (a + b - 1) / b;
}

/* index math of the GPU parts: constants and ops in the index dtype (CMPLT: bool) */
static inline tc_uop *ic(lower_ctx *c, int64_t v) {
    return tc_ub_iconst(&c->ub, c->idt, v);
}

static inline tc_uop *ix(lower_ctx *c, tc_op op, tc_uop *a, tc_uop *b) {
    return tc_ub_alu(&c->ub, op, op == TC_OP_CMPLT ? TC_BOOL : c->idt, 2, a, b, NULL);
}

/* lower.c */
int tc_lw_next_epoch(void); /* a new stage number */
int tc_lw_vec_lanes_now(const lower_ctx *c); /* lanes of the CPU vectors being lowered (0: none) */
/* lower_index.c: a GATHER's load; the whole kernel of a SCATTER item */
tc_uop *tc_lw_gather(lower_ctx *c, tc_ast *a);
TC_MUST_USE tc_status tc_lw_scatter_kernel(lower_ctx *c, tc_kernel_uops *k);
tc_uop *tc_lw_reduce_init(lower_ctx *c, tc_op op, tc_dtype dt);
tc_uop *tc_lw_lower(lower_ctx *c, tc_ast *a);
void tc_lw_prelower_reduces(lower_ctx *c, tc_ast *a);
int tc_lw_open_stage(lower_ctx *c, bool is_reduce);
void tc_lw_close_stage(lower_ctx *c, int opened);
tc_op tc_lw_acc_op(const tc_ast *a);
bool tc_lw_store_is_full(const lower_ctx *c, const tc_ast *st);
/* (index, valid) of tracker st at the current loop indices */
TC_MUST_USE tc_status tc_lw_st_index(lower_ctx *c, const tc_st *st, tc_uop **idx_out, tc_uop **valid_out);
/* upcast: u is AST node a's value in copy rep (computed in stage epoch) */
void tc_lw_memo_put(lower_ctx *c, const tc_ast *a, int rep, tc_uop *u, int epoch);
void tc_lw_set_copy(lower_ctx *c, int r);      /* makes copy r current (its indices) */
tc_uop *tc_lw_copy_gate(lower_ctx *c, int r);  /* copy r's stores are real; NULL: always */

void tc_lw_take_plan(lower_ctx *c, tc_kopt p);     /* upcast state from opt.c's plan p */
bool tc_lw_is_upcast(const lower_ctx *c, int a);   /* axis a is in the plan */
/* a loop over kept axis a (n steps); the outermost of a CPU kernel with
 * enough work is shared by threads (its bounds a kernel argument) */
tc_uop *tc_lw_outer_range(lower_ctx *c, tc_kernel_uops *k, int a, int64_t n);
/* the loop over kept axis a (an upcast axis: over its steps, setting its
 * copies' base); may_share: the first one opened may be the threads' */
void tc_lw_open_kept(lower_ctx *c, tc_kernel_uops *k, int a, bool may_share);

/* lower_split.c: opens the kept loops order[0..n) (reduced axes skipped)
 * and lowers root's stores inside them; in a kernel or part without a
 * reduce, on the CPU, the loops over masked axes split at the masks'
 * bounds */
void tc_lw_kept_loops(lower_ctx *c, tc_kernel_uops *k, const int *order, int n, tc_ast *root, bool may_share);

/* lower_rows.c: the whole kernel of a row kernel (has_parts) */
TC_MUST_USE tc_status tc_lw_rows_kernel(lower_ctx *c, tc_kernel_uops *k);

/* lower_store.c */
void tc_lw_lower_stores(lower_ctx *c, tc_ast *sink, bool full); /* the stores of one space */

/* lower_gpu.c */
int tc_lw_open_group_stage(lower_ctx *c);
bool tc_lw_gv_is_vec(const lower_ctx *c, const tc_ast *a);
void tc_lw_gv_operands(lower_ctx *c, tc_op op, tc_uop **s, int n);
tc_uop *tc_lw_gv_acc(lower_ctx *c, const tc_ast *a, tc_uop *init);
void tc_lw_group_partials(lower_ctx *c, tc_ast *a);
tc_uop *tc_lw_group_value(lower_ctx *c, tc_ast *a);
TC_MUST_USE tc_status tc_lw_lower_grid(lower_ctx *c, tc_kernel_uops *k);

#endif /* TC_LOWER_H */
