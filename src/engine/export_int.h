/* export_int.h - what export.c (planning) hands export_emit.c (writing):
 * private to the two files of tc_export_c, not part of engine.h.
 *
 * An export plan: the schedule of the outputs, every buffer its kernels
 * touch with its role in the generated code, each kernel lowered twice
 * (vector C as the CPU runtime compiles it, and plain C99), the arena
 * layout of the intermediates, and where each output is read from.
 */
#ifndef TC_EXPORT_INT_H
#define TC_EXPORT_INT_H

#include "engine.h"

#define TC_EXPORT_ALIGN    64 /* arena blocks start at multiples of this many bytes */
#define TC_EXPORT_NAME_MAX 48 /* longest export name */

/* the role of a buffer in the generated code */
typedef enum {
    XB_INPUT, /* a run-time argument: inputs[index] */
    XB_CONST, /* a realized buffer the graph only reads: embedded constant data */
    XB_STATE, /* a realized buffer the graph assigns to: static memory the code keeps,
                 updated by every run, reset to the exported values */
    XB_TEMP   /* an intermediate: a block of the caller's arena */
} xb_kind;

typedef struct {
    xb_kind kind;    /* its role */
    const void *key; /* a leaf's tc_buffer, or the tc_node an item writes (TEMP) */
    tc_buffer *buf;  /* leaves: the storage (the schedule's nodes hold it) */
    tc_dtype dtype;  /* element type */
    int64_t numel;   /* elements the graph uses */
    int index;       /* INPUT: the argument's position */
    int first;       /* TEMP: the item that writes it */
    int last;        /* TEMP: the last item reading it (n_items: an output reads it) */
    size_t offset;   /* TEMP: byte offset of its block in the arena */
    void *data;      /* CONST, STATE: its elements at export (tc_malloc'ed; NULL if empty) */
} xbuf;

/* one kernel in one dialect */
typedef struct {
    char *src;         /* the source as rendered (owned) */
    char name[96];     /* its function name in src */
    int64_t cpu_range; /* > 0: the outer loop's steps, split by a {start, end} argument */
} xlowered;

typedef struct {
    const tc_sched_item *it; /* the schedule's item */
    int *args;               /* it->n_bufs buffer numbers, in argument order */
    xlowered low[2];         /* [0] vector C (the library's kernel), [1] plain C99 */
} xkernel;

/* where an output's elements are when the run ends */
typedef struct {
    int buf;                    /* buffer number */
    int64_t offset;             /* first element (a view at an offset of its base) */
    int64_t numel;              /* elements */
    tc_dtype dtype;             /* element type */
    int ndim;                   /* the tensor's rank */
    int64_t shape[TC_MAX_DIMS]; /* and shape */
} xout;

/* an input's signature, for the header */
typedef struct {
    int buf;                    /* buffer number */
    tc_dtype dtype;             /* element type */
    int ndim;                   /* rank */
    int64_t shape[TC_MAX_DIMS]; /* shape */
    bool is_read;               /* some kernel or output reads it */
} xin;

typedef struct {
    char name[TC_EXPORT_NAME_MAX + 1];  /* prefix of every generated name */
    char uname[TC_EXPORT_NAME_MAX + 1]; /* the same in upper case (macros) */
    tc_schedule *s;                     /* the schedule (owned) */
    xkernel *kernels;                   /* s->n_items, in run order */
    xbuf *bufs;                         /* n_bufs buffers (owned) */
    int n_bufs;                         /* used */
    int cap_bufs;                       /* allocated */
    tc_ptrmap at;                       /* key -> buffer number + 1 */
    xout *outs;                         /* n_outs */
    int n_outs;                         /* outputs */
    xin *ins;                           /* n_ins */
    int n_ins;                          /* inputs */
    size_t arena_bytes;                 /* the arena, a multiple of TC_EXPORT_ALIGN */
} xplan;

/* the header and the source of p (tc_malloc'ed strings); TC_ERR_MEMORY */
TC_MUST_USE tc_status tc_export_emit(const xplan *p, char **header, char **source);

#endif /* TC_EXPORT_INT_H */
