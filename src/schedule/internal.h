/* internal.h - what the files of src/schedule share and no other stage sees:
 * the per-base bookkeeping of one tc_schedule_create, the context that owns
 * it, and the functions each file offers the others.
 *
 * A *root* is a base that gets a buffer (realize); roots are grouped into
 * kernels (union-find); every unrealized reduce is computed inside the
 * kernel of the roots its consumers reach. The files, in the order they run:
 *   schedule.c  collect the graph, decide the realizes that follow from ops
 *               and views (section 1)
 *   group.c     place every reduce: follow its consumers, group the roots
 *               they reach into its kernel (section 2)
 *   kgraph.c    the kernel graph of one grouping pass: groups, the loads of
 *               each root, levels, and the cycle and assign-hazard checks
 *               that every merge asks
 *   hazard.c    elementwise multi-output merges and the assign rules that
 *               run once the reduces are placed
 *   ast.c       one item per group, and their order (section 3)
 *   rows.c      runs of kernels over the same rows become row kernels
 * Walks mark what they visited with the context's epoch (a counter bumped
 * per walk), so a visit test is O(1) and no set is cleared between walks.
 */
#ifndef TC_SCHEDULE_INTERNAL_H
#define TC_SCHEDULE_INTERNAL_H

#include "schedule.h"

/* rows of a reduce above which its kernel stores no value computed from it
 * row by row but its own (hazard.c's elementwise joins; group.c's readers
 * of a realized reduce, in-place updates aside): a larger reduce's tile plan
 * is worth more than the kernels those stores would save */
enum { TC_REDUCE_ROWS = 4096 };

typedef struct tc_binfo tc_binfo;
struct tc_binfo {
    tc_node *node;       /* the base */
    bool realize;        /* a root: gets a buffer */
    bool expand_pending; /* read through an expand that a reduce group may absorb */
    bool validated;      /* that expand is a row broadcast inside a reduce group */
    bool inlinable;      /* root: every read of it is recomputable in its own kernel */
    bool keep_stored;    /* root: always loaded, never recomputed (an assign's copied value) */
    int ops;             /* elementwise: the ops of its cone as bound_kernels left it (an
                            upper bound later, when more is realized) */
    bool is_deferred;    /* reduce: its merge was deferred in this pass */
    bool is_blocked;     /* reduce: in the reach of a deferred reduce realized in this pass */
    tc_ptrvec consumers; /* pairs (consumer base, view node or NULL), flattened */
    int n_reducers;      /* elementwise: reduces whose kernels would recompute it */
    /* the grouping pass (kgraph.c resets these at the start of each pass) */
    tc_binfo *parent;          /* roots: union-find parent (the group's representative) */
    tc_binfo *next_member;     /* root: the next root of its group (the list starts at the
                               representative) */
    tc_binfo *last_member;     /* representative: the last root of its list */
    int level;                 /* representative: above the level of every group it loads */
    bool has_reduce;           /* representative: the group runs over a reduce's loop space */
    int full_ndim;             /* representative: loop-space rank */
    int64_t full[TC_MAX_DIMS]; /* representative: full shape F */
    uint32_t axes;             /* representative: reduced axes R */
    tc_ptrvec loads;           /* roots: realized nodes its kernel reads (per grouping pass) */
    bool loads_done;           /* loads is filled in */
    tc_ptrvec readers;         /* roots: the roots whose kernels load it (this pass) */
    bool mapped;               /* root of a reduce group: map is decided (this pass) */
    const tc_st *map;          /* its elements -> rows of the loop space (NULL: identity) */
    const tc_st *store_st;     /* loop space -> its elements when map is a permutation */
    int item;                  /* roots: index of the producing item, -1 */
    /* marks: equal to an epoch of the context when visited by that walk */
    unsigned walk_mark;   /* base: visited by the current cone walk */
    unsigned bent_mark;   /* base: visited through a bent view (hazard.c) */
    unsigned group_mark;  /* representative: reached by the current search, going up (loads) */
    unsigned down_mark;   /* representative: reached by the current search, going down (readers) */
    unsigned start_mark;  /* representative: a group the current search starts from */
    unsigned member_mark; /* representative: one of the groups a conflict check merges */
};

typedef struct {
    tc_schedule *s;           /* the schedule being built */
    tc_ptrvec bases;          /* every unrealized base reached, in discovery order */
    tc_ptrvec by_id;          /* the same bases by id: producers first */
    tc_ptrvec items;          /* tc_sched_item pointers (arena) in creation order */
    bool no_merge;            /* no elementwise multi-output merging (the fallback) */
    int kernel_ops;           /* the most elementwise ops of one kernel (0: no bound) */
    bool is_cycle;            /* ordering found a cycle */
    bool failed;              /* an allocation failed: the schedule fails (TC_ERR_MEMORY) */
    unsigned epoch;           /* the newest walk's mark */
    tc_ptrmap assigns;        /* target BUFFER node -> tc_ptrvec * of the ASSIGNs writing it */
    tc_ptrmap target_readers; /* target BUFFER node -> tc_ptrvec * of roots loading it */
    bool in_pass;             /* a grouping pass has started: a new root makes levels stale */
    bool levels_stale;        /* roots were added since the pass started: searches do not prune */
    tc_ptrmap held;           /* the bases that nodes outside the graph under the requested
                                 nodes read (tc_graph_held): a later realize reads them
                                 (rows.c keeps none in scratch) */
} tc_sched_ctx;

static inline tc_binfo *tc_binfo_of(const tc_node *n) {
    return n->scratch;
}
static inline bool tc_sched_is_realized(const tc_node *n) {
    return n->op == TC_OP_BUFFER;
}
/* an indexed store (tc_index_copy): ASSIGN(PUT(idx, src, target), target). Its
 * kernel is of its own kind (ast.c): loops over src's shape writing target's
 * elements at the indexed places, so it never merges with other kernels but
 * other such stores of the same loops */
static inline bool tc_sched_is_put(const tc_node *n) {
    return n->op == TC_OP_ASSIGN && n->srcs[0]->op == TC_OP_PUT;
}
/* a new epoch: every mark set before is now stale */
static inline unsigned tc_sched_new_walk(tc_sched_ctx *c) {
    return ++c->epoch;
}
/* pushes p, or marks the schedule failed */
void tc_sched_push(tc_sched_ctx *c, tc_ptrvec *v, void *p);

/* schedule.c: does the unrealized cone under b (stopping at realized nodes
 * and, if asked, at reduces) hold a node for which pred holds? O(cone) */
bool tc_sched_cone_has(tc_sched_ctx *c, tc_node *b, bool stop_at_reduce,
                       bool (*pred)(const tc_node *));
bool tc_sched_unsafe_pad(const tc_node *n); /* f(0) != 0 (EXP2, LOG2, RECIP, IDIV) */

/* kgraph.c */
TC_MUST_USE tc_status tc_kg_init(tc_sched_ctx *c); /* once per schedule: by_id, the assigns index */
void tc_kg_free(tc_sched_ctx *c);
void tc_kg_reset(tc_sched_ctx *c);                /* a pass starts: every root alone in its group */
void tc_kg_realize(tc_sched_ctx *c, tc_binfo *b); /* b becomes a root */
tc_binfo *tc_group_find(tc_binfo *b);             /* a root's representative */
/* g's group joins rep's (rep stays the representative); keeps the levels valid */
void tc_kg_unite(tc_sched_ctx *c, tc_binfo *rep, tc_binfo *g);
const tc_ptrvec *tc_kg_loads(tc_sched_ctx *c, tc_binfo *root); /* realized nodes it reads */
/* the ASSIGN bases writing buffer node t (NULL: none) */
const tc_ptrvec *tc_kg_assigns_of(const tc_sched_ctx *c, const tc_node *t);
/* does root k need (through loads of any kernels) the output of node a? */
bool tc_kg_needs_node(tc_sched_ctx *c, tc_node *k, tc_node *a);
/* would one kernel computing the groups of reps be wrong or impossible to
 * order? inline_ok: roots (keys) the kernel may recompute where it reads them */
bool tc_kg_conflict(tc_sched_ctx *c, const tc_ptrvec *reps, const tc_ptrmap *inline_ok);

/* group.c: places every unrealized reduce, groups the roots (all passes) */
TC_MUST_USE tc_status tc_group_reduces(tc_sched_ctx *c);
/* hazard.c: elementwise groups that share loops become one kernel */
void tc_hazard_merge_elementwise(tc_sched_ctx *c);
/* hazard.c: the assign rules; false when they realized something */
bool tc_hazard_protect_targets(tc_sched_ctx *c);
bool tc_hazard_split_old_readers(tc_sched_ctx *c);

TC_MUST_USE tc_status tc_build_items(tc_sched_ctx *c); /* ast.c: one item per group, ordered */
/* rows.c: runs of kernels over the same rows become row kernels; nodes are
 * the requested outputs (never kept in row scratch) */
TC_MUST_USE tc_status tc_rows_fuse(tc_sched_ctx *c, tc_node *const *nodes, int n);
TC_MUST_USE tc_status tc_merge_axes(tc_sched_ctx *c); /* axes.c: adjacent axes merged */
TC_MUST_USE tc_status tc_order_program(tc_sched_ctx *c); /* ast.c: the items in the program's order */
void tc_name_kernel(tc_sched_item *it); /* ast.c: "r_4_16" from its kind and loop space */

#endif /* TC_SCHEDULE_INTERNAL_H */
