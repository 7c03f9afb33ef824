/* dump.c - text dumps of kernel ASTs and schedules (TC_DEBUG>=3, failing tests). */
#include "schedule.h"

static void ast_dump_rec(FILE *f, const tc_ast *a, int depth) {
    fprintf(f, "%*s%s %s", depth * 2, "", tc_ops[a->op].name, tc_dtypes[a->dtype].name);
    if (a->op == TC_OP_LOAD || a->op == TC_OP_STORE) fprintf(f, " buf%d", a->buf);
    if (a->op == TC_OP_CONST) fprintf(f, " %g", a->value);
    if (tc_op_is_reduce(a->op)) fprintf(f, " axes=0x%x", a->axes);
    if (a->st) {
        fprintf(f, " ");
        tc_st_dump(f, a->st);
    } else {
        fprintf(f, "\n");
    }
    for (int i = 0; i < a->n_srcs; i++) ast_dump_rec(f, a->srcs[i], depth + 1);
}

void tc_ast_dump(FILE *f, const tc_ast *ast) {
    ast_dump_rec(f, ast, 0);
}

void tc_schedule_dump(FILE *f, const tc_schedule *s) {
    fprintf(f, "schedule: %d items, %d kernels\n", s->n_items, tc_schedule_n_kernels(s));
    for (int i = 0; i < s->n_items; i++) {
        const tc_sched_item *it = &s->items[i];
        char shape[160];
        fprintf(f, "item %d: %s full %s reduce 0x%x, %d outputs, %d buffers\n", i, it->name,
                tc_fmt_shape(shape, sizeof shape, it->ndim, it->full_shape), it->reduce_axes,
                it->n_outs, it->n_bufs);
        if (it->ast) tc_ast_dump(f, it->ast);
    }
}
