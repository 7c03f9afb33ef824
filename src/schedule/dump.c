/* dump.c - text dumps of kernel ASTs and schedules (TC_DEBUG>=3, failing tests). */
#include "schedule.h"

/* one line per distinct AST node, sources before users, each named by its
 * position ("a3"): a DAG stays the size of the DAG (the tree dump repeats
 * shared subtrees, which grows exponentially on deep kernels) */
static void ast_dump_dag(FILE *f, const tc_ast *root, tc_ptrmap *names) {
    tc_ptrvec stack = {0};
    intptr_t next = 0;
    tc_ptrmap_clear(names);
    bool oom = tc_ptrvec_push(&stack, (void *)root) != TC_OK;
    while (stack.n && !oom) {
        const tc_ast *a = stack.items[stack.n - 1];
        bool ready = true; /* every source named */
        for (int i = 0; i < a->n_srcs && !oom; i++)
            if (!tc_ptrmap_get(names, a->srcs[i], NULL)) {
                ready = false;
                oom = tc_ptrvec_push(&stack, a->srcs[i]) != TC_OK;
            }
        if (!ready || oom) continue;
        stack.n--;
        if (tc_ptrmap_get(names, a, NULL)) continue;
        if (!tc_ptrmap_put(names, a, (void *)++next)) oom = true;
        fprintf(f, "  a%ld %s %s", (long)next, tc_ops[a->op].name, tc_dtypes[a->dtype].name);
        for (int i = 0; i < a->n_srcs; i++) {
            void *v = NULL;
            tc_ptrmap_get(names, a->srcs[i], &v);
            fprintf(f, " a%ld", (long)(intptr_t)v);
        }
        bool is_mem = a->op == TC_OP_LOAD || a->op == TC_OP_STORE;
        if (is_mem && a->buf >= 0) fprintf(f, " buf%d", a->buf);
        if (is_mem && a->buf < 0) /* a row kernel's scratch array */
            fprintf(f, " row%d[%lld]", -1 - a->buf, (long long)a->index_size);
        if (a->op == TC_OP_SINK && a->st) fprintf(f, " part reduce 0x%x", a->axes);
        if (a->op == TC_OP_CONST) fprintf(f, " %.17g", a->value);
        if (tc_op_is_reduce(a->op)) fprintf(f, " axes=0x%x", a->axes);
        if (a->op == TC_OP_GATHER || a->op == TC_OP_SCATTER || a->op == TC_OP_PUT)
            fprintf(f, " index stride %lld size %lld", (long long)a->index_stride, (long long)a->index_size);
        if (a->st) {
            fprintf(f, " ");
            tc_st_dump(f, a->st);
        } else {
            fprintf(f, "\n");
        }
    }
    if (oom) fprintf(f, "  (the rest is not shown: out of memory)\n");
    tc_ptrvec_free(&stack);
}

void tc_ast_dump(FILE *f, const tc_ast *ast) {
    tc_ptrmap names = {0};
    ast_dump_dag(f, ast, &names);
    tc_ptrmap_free(&names);
}

void tc_schedule_dump(FILE *f, const tc_schedule *s) {
    tc_schedule_dump_dag(f, s);
}

void tc_schedule_dump_dag(FILE *f, const tc_schedule *s) {
    tc_ptrmap names = {0};
    fprintf(f, "schedule: %d items, %d kernels\n", s->n_items, tc_schedule_n_kernels(s));
    for (int i = 0; i < s->n_items; i++) {
        const tc_sched_item *it = &s->items[i];
        char shape[160];
        fprintf(f, "item %d: %s full %s reduce 0x%x, %d outputs, %d buffers\n", i, it->name,
                tc_fmt_shape(shape, sizeof shape, it->ndim, it->full_shape), it->reduce_axes,
                it->n_outs, it->n_bufs);
        if (it->ast) ast_dump_dag(f, it->ast, &names);
    }
    tc_ptrmap_free(&names);
}

/* counts the distinct AST nodes per op (a DAG: each node once); out of
 * memory counts what was reached. O(nodes) */
static void count_ops(const tc_ast *root, int *counts) {
    tc_ptrvec stack = {0};
    tc_ptrmap seen = {0};
    bool oom = tc_ptrvec_push(&stack, (void *)root) != TC_OK;
    while (stack.n && !oom) {
        const tc_ast *a = stack.items[--stack.n];
        if (!tc_ptrset_add(&seen, a)) {
            oom = seen.failed;
            continue;
        }
        counts[a->op]++;
        for (int i = 0; i < a->n_srcs && !oom; i++)
            oom = tc_ptrvec_push(&stack, a->srcs[i]) != TC_OK;
    }
    tc_ptrvec_free(&stack);
    tc_ptrmap_free(&seen);
}

static void dot_item_label(FILE *f, const tc_sched_item *it) {
    char shape[160];
    fprintf(f, "%s\\nfull %s", it->name, tc_fmt_shape(shape, sizeof shape, it->ndim, it->full_shape));
    if (!it->ast) return;
    int counts[TC_OP_COUNT] = {0};
    count_ops(it->ast, counts);
    fprintf(f, "\\n");
    int shown = 0;
    for (int op = 0; op < TC_OP_COUNT; op++) {
        if (!counts[op] || op == TC_OP_SINK || op == TC_OP_STORE || op == TC_OP_LOAD) continue;
        fprintf(f, "%s%s", shown++ ? " " : "", tc_ops[op].name);
        if (counts[op] > 1) fprintf(f, "x%d", counts[op]);
    }
}

static int producer_of(const tc_schedule *s, const tc_node *n, int before) {
    for (int i = 0; i < before; i++)
        for (int k = 0; k < s->items[i].n_outs; k++)
            if (s->items[i].bufs[k] == n) return i;
    return -1;
}

/* Graphviz: kernels and copies are boxes, buffers read from outside the
 * schedule are ellipses, edges are buffers labelled with shape and dtype */
void tc_schedule_write_dot(FILE *f, const tc_schedule *s) {
    fprintf(f, "digraph schedule {\n  rankdir=TB;\n  node [fontname=\"monospace\" fontsize=10];\n");
    for (int i = 0; i < s->n_items; i++) {
        const tc_sched_item *it = &s->items[i];
        fprintf(f, "  k%d [shape=box style=filled fillcolor=\"%s\" label=\"", i,
                it->is_copy ? "#dddddd" : it->reduce_axes ? "#ffd9a0" : "#bfe3ff");
        dot_item_label(f, it);
        fprintf(f, "\"];\n");
        for (int k = it->n_outs; k < it->n_bufs; k++) {
            const tc_node *in = it->bufs[k];
            char shape[160];
            tc_fmt_shape(shape, sizeof shape, in->ndim, in->shape);
            int p = producer_of(s, in, i);
            if (p < 0) {
                fprintf(f, "  b%llu [shape=ellipse label=\"buf %s\\n%s\"];\n",
                        (unsigned long long)in->id, shape, tc_dtypes[in->dtype].name);
                fprintf(f, "  b%llu -> k%d;\n", (unsigned long long)in->id, i);
            } else {
                fprintf(f, "  k%d -> k%d [label=\"%s %s\"];\n", p, i, shape, tc_dtypes[in->dtype].name);
            }
        }
    }
    fprintf(f, "}\n");
}
