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
 *
 * Targets with work-groups (tc_target.has_local: OpenCL, CUDA) get the kept
 * axes as SPECIAL group ids instead of loops, and long reduces split across
 * the lanes of a work-group through local memory (DEFINE_LOCAL): each lane
 * accumulates a strided part of the row, stores it, and after a BARRIER one
 * lane (inside an IF block) combines the parts. The builder inserts a BARRIER
 * by itself whenever a local buffer is read after a store (or stored after a
 * read by every lane) since the last one. IF blocks gate work that must run
 * on one lane or inside bounds.
 */
#ifndef TC_CODEGEN_H
#define TC_CODEGEN_H

#include "schedule/schedule.h"

typedef enum {
    TC_UOP_DEFINE_GLOBAL, /* buffer argument: arg = slot; dtype = element dtype */
    TC_UOP_DEFINE_ACC,    /* accumulator register: srcs[0] = initial CONST */
    TC_UOP_CONST,         /* constant (value / ivalue); vcount > 1: that value in every lane */
    TC_UOP_SPECIAL,       /* thread id on devices with work-groups: arg = dim */
    TC_UOP_RANGE,         /* loop over [srcs[0], srcs[1]): arg = loop-space axis */
    TC_UOP_ENDRANGE,      /* end of the loop srcs[0] */
    TC_UOP_LOAD,          /* srcs: buffer, index[, valid]; 0 where valid is false */
    TC_UOP_STORE,         /* srcs: buffer, index, value */
    TC_UOP_ALU,           /* alu = the op, srcs = operands */
    TC_UOP_CAST,          /* value converted to dtype */
    TC_UOP_BITCAST,       /* bits reinterpreted as dtype */
    TC_UOP_ASSIGN,        /* accumulator update: srcs[0] = DEFINE_ACC, srcs[1] = new value */
    TC_UOP_DEFINE_LOCAL,  /* work-group local array: arg = number (temp<arg>), ivalue = elements
                             (vcount > 1: of vectors); is_scratch: a CPU kernel's own array */
    TC_UOP_BARRIER,       /* work-group barrier: local stores before it are seen by loads after */
    TC_UOP_IF,            /* srcs[0] = condition; opens a block (body) closed by ENDIF */
    TC_UOP_ENDIF,         /* end of the block srcs[0] */
    TC_UOP_GEP,           /* lane arg of the vector srcs[0] */
    TC_UOP_PREFETCH,      /* srcs: buffer, index: the element is read soon (a hint: no value;
                             rendered where the dialect has one, else nothing) */
    TC_UOP_COUNT
} tc_uop_op;

typedef struct tc_uop tc_uop;
struct tc_uop {
    tc_uop_op op;      /* kind */
    tc_dtype dtype;    /* result dtype (buffers: element dtype; vectors: of a lane) */
    int vcount;        /* lanes of a vector value (vector targets); 1 for a scalar */
    tc_op alu;         /* ALU: the operation */
    int n_srcs;        /* 0..4 */
    tc_uop *srcs[4];   /* operands */
    int64_t arg;       /* DEFINE_GLOBAL: slot; RANGE: axis; SPECIAL: dim; DEFINE_LOCAL: number */
    double value;      /* CONST: float value */
    int64_t ivalue;    /* CONST: integer value; SPECIAL: size; DEFINE_LOCAL: elements; RANGE:
                          steps per run where fewer than its index's range (a row block's), else 0 */
    bool is_lane;      /* SPECIAL: lane id in the work-group (lidx), else work-group id (gidx) */
    bool is_scratch;   /* DEFINE_LOCAL: an array private to one run of a CPU kernel (tile<arg>:
                          one thread, no barriers), not a work-group's */
    int64_t vmin;      /* integer UOps: smallest value it can take */
    int64_t vmax;      /* integer UOps: largest value it can take */
    int depth;         /* loop depth where it is placed */
    bool is_index;     /* part of address math (not counted as ops) */
    int id;            /* position in the linear list (render names) */
    int uses;          /* number of UOps reading it */
    uint64_t hash;     /* hash-consing key */
    tc_uop *hash_next; /* hash-consing chain */
    struct tc_ulist *body; /* RANGE/IF: the UOps inside the loop or block */
};

/* a growable UOp list in the kernel's arena */
typedef struct tc_ulist {
    tc_uop **items; /* n used, cap allocated */
    int n;
    int cap;
} tc_ulist;

/* one level of a CPU's data caches as the host reported it; zeros: unknown */
typedef struct {
    int64_t bytes; /* capacity of one such cache */
    int ways;      /* associativity */
    int line;      /* line size in bytes */
    int shared;    /* cores sharing one such cache (1: private to a core) */
} tc_cache_level;

/* what the target offers; each renderer fills one in (a device may lower
 * the limits to its own: the CPU device adds what the host reports, read
 * in src/runtime/cpu_info.c when the device opens), codegen only reads it */
typedef struct {
    bool has_local;        /* work-groups and local memory (GPUs) */
    int64_t global_max[3]; /* work-groups per grid dimension (has_local) */
    int64_t local_max[3];  /* lanes per work-group dimension (has_local) */
    int64_t lanes_max;     /* lanes per work-group in all (has_local) */
    int64_t shared_max;    /* bytes of local memory per work-group (has_local) */
    int simd_floats;       /* CPU: float32 lanes of a SIMD register (0: unknown, taken as 4) */
    int simd_regs;         /* CPU: SIMD registers (0: unknown, taken as 16) */
    tc_cache_level cache[3]; /* CPU: the data caches a core sees, L1d, L2, L3 (cache[level-1]):
                                opt.c's reduce blocks, lower.c's loop order (zeros: unknown) */
    int cores;             /* CPU: cores online (0: unknown) */
    bool has_vec;          /* the renderer prints vector values (loads, ALUs, accumulators) */
    int vec_width;         /* has_local: elements of the innermost kept axis per lane when
                              loads and stores read it contiguously (vector loads, stores
                              and float ALUs, see lower.c); 0 or 1: scalar lanes */
} tc_target;

/* the CPU kernel optimizer's plan (opt.c): axis[i] is computed amt[i]
 * indices at a time (a reduced axis: in amt[i] partial accumulators, held
 * in vectors of `lanes` when lanes > 1 and the kernel allows it). kblock > 0:
 * the kernel's reduce runs in blocks of kblock indices of its outermost
 * reduced axis (tc_opt_kblock_axis), the loop over blocks outside the tile's
 * rows, each block adding its partial sums to the output */
typedef struct {
    int n;           /* entries; 0 = plain loops */
    int axis[3];     /* loop-space axes */
    int64_t amt[3];  /* indices at a time */
    int lanes;       /* a split reduced axis (the last entry): vector lanes, 0 = scalars */
    int64_t kblock;  /* indices of the blocked reduced axis per block; 0 = not blocked */
    bool epi_loop;   /* the stores run once per output in loops over the tile's kept copies,
                        reading the reduces' values from a scratch array, not once per copy */
    bool pack;       /* a register tile (rows, vector columns) whose column operand
                        (tc_opt_pack_load) is copied into a panel, contiguous along the
                        columns, kblock (else all) reduce indices of the tile's columns,
                        before the rows of tiles that read it */
    bool row_pack;   /* a packed tile whose rows' operand (tc_opt_row_load) is copied too,
                        into a row panel of a row block's rows (mblock, else all) x the
                        panel's reduce indices, before the columns' loop (BLIS's packed A) */
    int64_t mblock;  /* a tile of two kept axes whose column loop runs outside its rows':
                        the rows (axis[0]) in blocks of mblock, the loop over the blocks
                        outside the columns' (BLIS's mc); 0 = one pass over all rows */
} tc_kopt;
void tc_opt_choose(const tc_sched_item *it, const tc_target *target, tc_kopt *plan);
/* stride of tracker st along loop axis a: 0 for a size-1 axis, -1 when not
 * one stride (several views, or a mask cutting the axis) */
int64_t tc_st_stride(const tc_st *st, int a);
/* the reduces of it can hold vectors along axis a (their partials along a
 * reduced a, a tile's column copies along a kept one): every load under them
 * reads a contiguously or not at all (a gather: its row contiguously, at an
 * index that does not move along a), and every op has a vector form (float
 * add, mul, neg, max, reciprocal, exp2, casts to float); along a kept axis
 * no reduce reads an earlier one (whose value would differ per lane) */
bool tc_opt_vec_ok(const tc_sched_item *it, int a, bool kept, const tc_ast *packed);
/* the load a packed tile (tc_kopt.pack) along kept axis j reads from its
 * panel: the only load under the kernel's one reduce that moves along j
 * (and along the reduce); NULL where a kernel has none. packed (above): a
 * load read from a panel, contiguous along a whatever its view */
const tc_ast *tc_opt_pack_load(const tc_sched_item *it, int j);
/* the innermost cache level (1: L2, 2: L3) whose share that one core may
 * count on holds, in half of it (the rest for what streams through), what
 * the loops inside a loop over kept axis a re-read at each of its steps
 * (the buffers the reduces read that do not move along a); 3: none, or
 * unknown. A core's share is the cache over the cores that share it. */
int tc_opt_reread_level(const tc_sched_item *it, const tc_target *tg, int a);
/* the L1d's line in bytes as the target reports it (64 where unknown) */
int64_t tc_opt_line_bytes(const tc_target *tg);
/* a register tile of rows i and columns j runs its rows' loop outside the
 * columns': per step it re-reads less, from a nearer cache */
bool tc_opt_rows_outer(const tc_sched_item *it, const tc_target *tg, int i, int j);
/* a tile of amt_i rows of axis i and amt_j columns of axis j (j after i in
 * axis order, no panel) runs its columns' loop outside the rows' (the loop
 * the threads share): not tc_opt_rows_outer, and enough column steps to
 * share between the target's cores, or a more even share than the rows' */
bool tc_opt_cols_first(const tc_sched_item *it, const tc_target *tg, int i, int64_t amt_i, int j, int64_t amt_j);
/* the load a row panel (tc_kopt.row_pack) of a tile of rows axis i and
 * columns axis j holds: the only load under the kernel's reduce that moves
 * along i, not along j, float32, moving along the reduce; NULL: none */
const tc_ast *tc_opt_row_load(const tc_sched_item *it, int i, int j);
/* the rows a row panel of plan p holds: a row block's (mblock), else all
 * of the rows' axis in whole tiles */
int64_t tc_opt_row_rows(const tc_sched_item *it, const tc_kopt *p);
/* the kept axis before whose loop a packed tile of rows axis i and column
 * axis j fills its panel of load pl (opt.c; the column loop outside it) */
int tc_opt_pack_from(const tc_sched_item *it, const tc_ast *pl, int i, int j);
/* the reduce indices a packed tile's panel holds, flat: the blocked axis'
 * kblock of them times the other reduced axes, else the whole reduce */
int64_t tc_opt_panel_k(const tc_sched_item *it, int64_t kblock);
/* the reduced axis a plan may block (kblock): the outermost reduced axis
 * of more than one index, when the kernel's only output (float32, no
 * assign, stored in the reduced space) is its only reduce (a float sum) or
 * an epilogue of it that does not read the output (every block stores its
 * partial sums, the last the epilogue of their total: lower_store.c);
 * -1 otherwise */
int tc_opt_kblock_axis(const tc_sched_item *it);
/* search (TC_BEAM): the valid plans one change away from base (another
 * amount for an entry, an entry dropped, an axis added), at most max */
int tc_opt_neighbors(const tc_sched_item *it, const tc_kopt *base, tc_kopt *out, int max);
/* "axis:amt,..." and back (parse checks the plan against the item) */
int tc_opt_format(const tc_kopt *plan, char *buf, size_t size);
bool tc_opt_parse(const tc_sched_item *it, const char *s, tc_kopt *plan);

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
    int64_t global_size[3]; /* work-groups per dimension (1,1,1 without has_local) */
    int64_t local_size[3];  /* lanes per work-group (1,1,1 without has_local) */
    int64_t cpu_range;      /* CPU: > 0: the last argument holds {start, end} of the
                               outermost kept loop (inside a plan's row blocks), whose
                               cpu_range steps threads share */
    int n_parts;            /* a row kernel: the kernels fused into it (its parts); else 0 */
    bool untiled;           /* CPU: a reduce kernel whose plan upcasts no kept axis (no tile
                               of copies for the C compiler's SLP to pack: render/cstyle.c) */
    bool copy_tile;         /* CPU: a kernel without reduces tiled by two axes (opt.c's
                               plan_transpose: its body a square of copies, render/cstyle.c) */
} tc_kernel_uops;

/* lowers a schedule item's AST; NULL with an error set on failure */
tc_kernel_uops *tc_codegen(const tc_sched_item *item, const tc_target *target);
/* the same with a given plan of the CPU optimizer (NULL: opt.c chooses) */
tc_kernel_uops *tc_codegen_plan(const tc_sched_item *item, const tc_target *target, const tc_kopt *plan);
void tc_kernel_uops_free(tc_kernel_uops *k);
void tc_uops_dump(FILE *f, const tc_kernel_uops *k); /* one UOp a line (TC_DEBUG>=5) */
extern const char *const tc_uop_names[TC_UOP_COUNT];

/* ---- the UOp builder (uop.c), internal to codegen ----------------------- */
#define TC_UB_BUCKETS 4096
#define TC_UB_MAX_DEPTH (TC_MAX_DIMS + 8)
#define TC_UB_MAX_LOCALS 16 /* local buffers per kernel */
/* what happened to a local buffer since the last BARRIER */
typedef struct {
    tc_uop *buf;    /* the DEFINE_LOCAL */
    bool is_stored; /* some lane stored to it */
    bool is_read;   /* every lane read it (a read outside IF blocks) */
    int store_if;   /* serial of the outermost IF open at the last store, 0 = none */
} tc_ub_local;
typedef struct {
    tc_kernel_uops *k;                /* the kernel being built (owns the arena) */
    tc_uop *table[TC_UB_BUCKETS];     /* hash-consing buckets */
    tc_ulist top;                     /* UOps outside every loop */
    tc_ulist *open[TC_UB_MAX_DEPTH + 1]; /* open[d]: list receiving depth-d UOps */
    tc_uop *scope[TC_UB_MAX_DEPTH + 1];  /* scope[d]: the RANGE or IF whose body is open[d] */
    int floor[TC_UB_MAX_DEPTH + 1];   /* floor[d]: least depth of a UOp with sources while
                                         depth is d (inside an IF, its body) */
    int depth;                        /* loops and blocks open now */
    int if_depth;                     /* depth of the list holding the outermost open IF, -1 */
    int if_serial;                    /* serial of the outermost open IF, 0 = none */
    int n_ifs;                        /* IFs opened so far (serials) */
    tc_ub_local locals[TC_UB_MAX_LOCALS]; /* local buffers, for barrier insertion */
    int n_locals;                     /* used entries of locals */
    int n_scratch;                    /* scratch arrays made so far (their numbers) */
    tc_uop *barrier;                  /* the last BARRIER, NULL before the first */
    bool failed;                      /* an allocation failed; results are NULL */
    bool index_mode;                  /* new UOps are address math (is_index) */
    int scratch_floor;                /* loads of scratch arrays sit at this depth or deeper
                                         (a row kernel's rows: lower_rows.c) */
    bool drop_dead;                   /* linearize drops UOps nothing uses (unused
                                         variables draw warnings from NVRTC and -Wall) */
} tc_ub;
void tc_ub_init(tc_ub *ub, tc_kernel_uops *k);
tc_uop *tc_ub_const(tc_ub *ub, tc_dtype dt, double value, int64_t ivalue);
tc_uop *tc_ub_iconst(tc_ub *ub, tc_dtype dt, int64_t v); /* integer constant */
/* an ALU op, simplified; NULL operands give NULL (failure propagates) */
tc_uop *tc_ub_alu(tc_ub *ub, tc_op op, tc_dtype dt, int n, tc_uop *a, tc_uop *b, tc_uop *c);
tc_uop *tc_ub_cast(tc_ub *ub, tc_uop *x, tc_dtype dt, bool bitcast);
tc_uop *tc_ub_global(tc_ub *ub, int slot, tc_dtype dt);
tc_uop *tc_ub_load(tc_ub *ub, tc_uop *buf, tc_uop *idx, tc_uop *valid);
/* a load kept where it is built (the current body), not hoisted out of the
 * loops its index does not use, nor shared with an equal load: for what
 * the kernel itself wrote in an enclosing loop (a blocked reduce's
 * partial sums) */
tc_uop *tc_ub_load_here(tc_ub *ub, tc_uop *buf, tc_uop *idx);
tc_uop *tc_ub_store(tc_ub *ub, tc_uop *buf, tc_uop *idx, tc_uop *value);
/* a PREFETCH of buf[idx] where the address is valid everywhere (valid NULL
 * or constant true); none (NULL) where it is gated */
tc_uop *tc_ub_prefetch(tc_ub *ub, tc_uop *buf, tc_uop *idx, tc_uop *valid);
/* later loads of buffers the kernel writes (outputs, scratch arrays) are new
 * UOps, not earlier ones of the same place (which may read older values) */
void tc_ub_forget_written_loads(tc_ub *ub);
tc_uop *tc_ub_acc(tc_ub *ub, tc_uop *init);            /* at the current depth */
/* vectors (has_vec targets): a load of `lanes` consecutive elements from
 * idx, an accumulator of `lanes` copies of init, lane `lane` of vector v.
 * ALUs and casts over a vector are vectors; scalar operands are broadcast */
tc_uop *tc_ub_load_vec(tc_ub *ub, tc_uop *buf, tc_uop *idx, tc_uop *valid, int lanes);
tc_uop *tc_ub_acc_vec(tc_ub *ub, tc_uop *init, int lanes);
tc_uop *tc_ub_gep(tc_ub *ub, tc_uop *v, int lane);
/* x in each of `lanes` lanes (gpu.c): a constant becomes a vector CONST (one
 * per value and width, hoisted), anything else a CAST to the vector of its
 * own dtype; vectors are returned as they are */
tc_uop *tc_ub_broadcast(tc_ub *ub, tc_uop *x, int lanes);
tc_uop *tc_ub_acc_update(tc_ub *ub, tc_op op, tc_uop *acc, tc_uop *x); /* acc = acc op x */
tc_uop *tc_ub_range(tc_ub *ub, int axis, tc_dtype dt, int64_t n); /* opens a loop */
/* opens a loop over [start, end), a part of [0, n) known only at run time */
tc_uop *tc_ub_range_in(tc_ub *ub, int axis, tc_dtype dt, tc_uop *start, tc_uop *end, int64_t n);
/* opens a loop over [lo, hi), known when lowering: its index's bounds are
 * lo and hi - 1, so comparisons of it with constants fold */
tc_uop *tc_ub_range_span(tc_ub *ub, int axis, tc_dtype dt, int64_t lo, int64_t hi);
void tc_ub_end_range(tc_ub *ub);                       /* closes the innermost loop or block */
/* GPU UOps (has_local targets; gpu.c). Loads and stores of a DEFINE_LOCAL
 * go through tc_ub_load/tc_ub_store like global ones (no valid mask). */
tc_uop *tc_ub_special(tc_ub *ub, int dim, bool is_lane, tc_dtype dt, int64_t size);
tc_uop *tc_ub_define_local(tc_ub *ub, tc_dtype dt, int64_t n); /* a new local array */
tc_uop *tc_ub_local_load(tc_ub *ub, tc_uop *buf, tc_uop *idx); /* BARRIER first if needed */
/* a scratch array of n elements private to one run of a CPU kernel (its
 * tc_ub_load/tc_ub_store need no barrier): DEFINE_LOCAL with is_scratch */
tc_uop *tc_ub_define_scratch(tc_ub *ub, tc_dtype dt, int64_t n);
bool tc_ub_local_store_sync(tc_ub *ub, tc_uop *buf); /* BARRIER first if needed, then noted */
/* the builder's own steps, for gpu.c (uop.c): a UOp not yet placed, placing
 * it at a depth, hash-consing it, putting it first in the kernel */
tc_uop *tc_ub_new(tc_ub *ub, tc_uop_op op, tc_dtype dt, int n, tc_uop *const *srcs);
tc_uop *tc_ub_put(tc_ub *ub, tc_uop *u, int depth);
tc_uop *tc_ub_intern(tc_ub *ub, tc_uop *u);
bool tc_ub_insert_first(tc_ub *ub, tc_uop *u);
/* opens an IF block on cond (UOps made until tc_ub_end_if go inside it);
 * returns false, opening nothing, when cond is the constant true */
bool tc_ub_if(tc_ub *ub, tc_uop *cond);
void tc_ub_end_if(tc_ub *ub); /* closes the innermost block (an IF) */
TC_MUST_USE tc_status tc_ub_linearize(tc_ub *ub);                  /* fills k->uops */

#endif /* TC_CODEGEN_H */
