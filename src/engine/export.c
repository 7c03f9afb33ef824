/* export.c - tc_export_c: a graph as standalone C, with no compiler, no
 * libtinyc and no dlopen where it runs (ahead-of-time export).
 *
 * Input: the nodes to compute (outs: an inference forward, or a training
 * step whose parameter and optimizer-state updates are pending assigns) and
 * realized nodes that become run-time arguments (ins). Output: <dir>/<name>.h
 * and <dir>/<name>.c (export_emit.c writes them). The graph is scheduled but
 * not changed: nothing runs, nothing is realized.
 *
 * The steps reuse the realize path's pieces:
 * 1. schedule: tc_schedule_create over the outputs (a non-contiguous output
 *    through a CONTIGUOUS node, as tc_engine_to_host reads one);
 * 2. buffers: every buffer an item reads or writes gets a role (export_int.h):
 *    an input (one of ins), an intermediate (written by an item), state (the
 *    target of an assign: kept by the generated code, updated by each run,
 *    as the library updates it in place) or a constant (any other realized
 *    buffer: embedded as data). Realized buffers are told apart by storage
 *    (tc_buffer), so every node reading one storage reads one array;
 * 3. memory: the intermediates' lifetimes (writing item to last reading item,
 *    or the end for outputs) go to tc_mem_plan, the planner of JIT capture;
 *    its blocks are laid out one after another in the caller's arena;
 * 4. lowering, twice per kernel: for the CPU device as realize lowers it
 *    (tc_beam_plan, tc_lcache_lower: the very source the library compiles),
 *    and for a target without vectors rendered in plain C99 (opt.c's plan for
 *    that target, tc_codegen_plan, tc_dialect_c_plain);
 * 5. text: export_emit.c; both files are written next to their final names
 *    and renamed, so a failed export leaves no half-written file.
 * Only CPU graphs export (the generated code is C for the host).
 *
 * Cost: O(items * buffers per item) with a hash map from keys to buffers,
 * O(temps * blocks) for the memory plan, plus lowering each kernel (cached
 * for the vector form) and text linear in the kernels and the data embedded.
 */
#include "export_int.h"

#include "render/render.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* name is a C identifier of at most TC_EXPORT_NAME_MAX characters */
TC_MUST_USE static tc_status check_name(const char *name, const char *api) {
    if (!name) return tc_error_set(TC_ERR_INVALID, "%s: name is NULL", api);
    size_t n = strlen(name);
    bool ok =
        n > 0 && n <= TC_EXPORT_NAME_MAX && (isalpha((unsigned char)name[0]) || name[0] == '_');
    for (size_t i = 1; ok && i < n; i++) ok = isalnum((unsigned char)name[i]) || name[i] == '_';
    if (ok) return TC_OK;
    return tc_error_set(TC_ERR_INVALID,
                        "%s: name '%.64s' is not a C identifier of 1 to %d letters, digits and "
                        "underscores (it prefixes every generated name)",
                        api, name, TC_EXPORT_NAME_MAX);
}

/* the node reads its base's buffer whole and in order (what an input must be) */
static bool reads_whole_buffer(const tc_node *n) {
    const tc_node *base = n->op == TC_OP_VIEW ? n->srcs[0] : n;
    if (base->op != TC_OP_BUFFER) return false;
    return n == base || (tc_st_is_contiguous(n->st) && tc_node_numel(n) == tc_node_numel(base));
}

TC_MUST_USE static tc_status check_device(int device, const char *api, const char *what) {
    tc_dev *d = tc_device_get(device);
    if (!d) return tc_error_code();
    if (strcmp(d->name, "CPU") == 0) return TC_OK;
    return tc_error_set(TC_ERR_DEVICE,
                        "%s: %s is on %s; exported code runs on the host: move the graph to CPU "
                        "(tc_to_device) before exporting",
                        api, what, d->name);
}

/* ---- buffers ---------------------------------------------------------------- */

static int find_buf(const xplan *p, const void *key) {
    void *v = NULL;
    return tc_ptrmap_get(&p->at, key, &v) ? (int)(intptr_t)v - 1 : -1;
}

/* a new buffer of kind under key; -1 on out of memory */
static int add_buf(xplan *p, xb_kind kind, const void *key, tc_dtype dt, int64_t numel) {
    if (p->n_bufs == p->cap_bufs) {
        int cap = p->cap_bufs ? 2 * p->cap_bufs : 32;
        xbuf *b = tc_realloc(p->bufs, sizeof *b * (size_t)cap);
        if (!b) return -1;
        p->bufs = b;
        p->cap_bufs = cap;
    }
    int at = p->n_bufs;
    if (!tc_ptrmap_put(&p->at, key, (void *)(intptr_t)(at + 1))) return -1;
    p->bufs[at] = (xbuf){.kind = kind, .key = key, .dtype = dt, .numel = numel, .index = -1};
    p->n_bufs++;
    return at;
}

/* the buffer of a realized node (its storage), made a constant when new */
static int leaf_buf(xplan *p, const tc_node *n) {
    int at = find_buf(p, n->buffer);
    if (at < 0 && (at = add_buf(p, XB_CONST, n->buffer, n->dtype, tc_node_numel(n))) >= 0)
        p->bufs[at].buf = n->buffer;
    if (at >= 0 && tc_node_numel(n) > p->bufs[at].numel) p->bufs[at].numel = tc_node_numel(n);
    return at;
}

TC_MUST_USE static tc_status no_memory(const char *api) {
    return tc_error_set(TC_ERR_MEMORY, "%s: out of memory planning the export", api);
}

/* ins: each a realized CPU buffer seen whole, none twice */
TC_MUST_USE static tc_status add_inputs(xplan *p, tc_node *const *ins, int n_ins, const char *api) {
    p->ins = tc_calloc((size_t)n_ins + 1, sizeof *p->ins);
    if (!p->ins) return no_memory(api);
    p->n_ins = n_ins;
    for (int i = 0; i < n_ins; i++) {
        const tc_node *n = ins[i];
        char sh[256], what[32];
        tc_fmt_shape(sh, sizeof sh, n->ndim, n->shape);
        if (!reads_whole_buffer(n))
            return tc_error_set(
                TC_ERR_INVALID,
                "%s: ins[%d] (%s %s) is %s; an input must be a realized tensor that "
                "reads its whole buffer in order (realize it, or pass the tensor "
                "that owns the buffer)",
                api, i, tc_dtypes[n->dtype].name, sh,
                tc_node_base((tc_node *)n)->op == TC_OP_BUFFER
                    ? "a view of part of a buffer or out of its order"
                    : "not realized");
        snprintf(what, sizeof what, "ins[%d]", i);
        tc_status st = check_device(n->device, api, what);
        if (st != TC_OK) return st;
        const tc_node *base = tc_node_base((tc_node *)n);
        int dup = find_buf(p, base->buffer);
        if (dup >= 0)
            return tc_error_set(TC_ERR_INVALID, "%s: ins[%d] and ins[%d] are one buffer", api,
                                p->bufs[dup].index, i);
        int at = add_buf(p, XB_INPUT, base->buffer, n->dtype, tc_node_numel(n));
        if (at < 0) return no_memory(api);
        p->bufs[at].buf = base->buffer;
        p->bufs[at].index = i;
        p->ins[i] = (xin){.buf = at, .dtype = n->dtype, .ndim = n->ndim};
        memcpy(p->ins[i].shape, n->shape, sizeof(int64_t) * (size_t)n->ndim);
    }
    return TC_OK;
}

/* the buffer output k of item i writes: the target's storage for an
 * assign (state), else a new intermediate */
TC_MUST_USE static tc_status item_output(xplan *p, int i, int k, int *out, const char *api) {
    tc_node *o = p->s->items[i].bufs[k];
    if (o->op != TC_OP_ASSIGN) {
        *out = add_buf(p, XB_TEMP, o, o->dtype, tc_node_numel(o));
        if (*out >= 0) p->bufs[*out].first = p->bufs[*out].last = i;
        return *out >= 0 ? TC_OK : no_memory(api);
    }
    const tc_node *target = tc_node_base(o->srcs[1]);
    if (target->op != TC_OP_BUFFER)
        return TC_INTERNAL("assign of item %d has no realized target", i);
    int at = leaf_buf(p, target);
    if (at < 0) return no_memory(api);
    if (p->bufs[at].kind == XB_INPUT) {
        char sh[256];
        tc_fmt_shape(sh, sizeof sh, target->ndim, target->shape);
        return tc_error_set(TC_ERR_INVALID,
                            "%s: the graph assigns to ins[%d] (%s %s); inputs are read-only "
                            "arguments: leave the assigned tensor out of ins (it becomes state)",
                            api, p->bufs[at].index, tc_dtypes[target->dtype].name, sh);
    }
    p->bufs[at].kind = XB_STATE;
    /* later items that read the assign's node read the state */
    if (!tc_ptrmap_put(&p->at, o, (void *)(intptr_t)(at + 1))) return no_memory(api);
    *out = at;
    return TC_OK;
}

/* every item: its role checks and the buffer of each argument */
TC_MUST_USE static tc_status walk_items(xplan *p, const char *api) {
    const tc_schedule *s = p->s;
    p->kernels = tc_calloc((size_t)s->n_items + 1, sizeof *p->kernels);
    if (!p->kernels) return no_memory(api);
    for (int i = 0; i < s->n_items; i++) {
        const tc_sched_item *it = &s->items[i];
        xkernel *xk = &p->kernels[i];
        xk->it = it;
        if (it->is_copy) {
            tc_dev *d = tc_device_get(it->bufs[1]->device);
            return tc_error_set(TC_ERR_DEVICE,
                                "%s: the graph copies between devices (from %s); "
                                "exported code runs on the host: export a CPU graph",
                                api, d ? d->name : "?");
        }
        tc_status st = check_device(it->bufs[0]->device, api, "the graph");
        if (st != TC_OK) return st;
        if (!(xk->args = tc_calloc((size_t)it->n_bufs + 1, sizeof *xk->args)))
            return no_memory(api);
        for (int k = 0; k < it->n_outs && st == TC_OK; k++)
            st = item_output(p, i, k, &xk->args[k], api);
        for (int k = it->n_outs; k < it->n_bufs && st == TC_OK; k++) {
            const tc_node *n = it->bufs[k];
            int at = n->op == TC_OP_BUFFER ? leaf_buf(p, n) : find_buf(p, n);
            if (at < 0 && n->op != TC_OP_BUFFER)
                return TC_INTERNAL("%s reads a node no earlier item writes", it->name);
            if (at < 0) return no_memory(api);
            if (p->bufs[at].kind == XB_TEMP) p->bufs[at].last = i;
            xk->args[k] = at;
        }
        if (st != TC_OK) return st;
    }
    return TC_OK;
}

/* where each output is read from at the end of the run */
TC_MUST_USE static tc_status place_outputs(xplan *p, tc_node *const *outs, const char *api) {
    for (int i = 0; i < p->n_outs; i++) {
        const tc_node *n = outs[i], *base = tc_node_base((tc_node *)n);
        int64_t off = 0;
        if (!tc_engine_plain_run(n, &off)) return TC_INTERNAL("output %d is not a plain view", i);
        int at = base->op == TC_OP_BUFFER ? leaf_buf(p, base) : find_buf(p, base);
        if (at < 0 && base->op != TC_OP_BUFFER) return TC_INTERNAL("output %d is not computed", i);
        if (at < 0) return no_memory(api);
        if (p->bufs[at].kind == XB_TEMP) p->bufs[at].last = p->s->n_items;
        if (p->bufs[at].kind == XB_INPUT) p->ins[p->bufs[at].index].is_read = true;
        p->outs[i] = (xout){.buf = at,
                            .offset = off,
                            .numel = tc_node_numel(n),
                            .dtype = n->dtype,
                            .ndim = n->ndim};
        memcpy(p->outs[i].shape, n->shape, sizeof(int64_t) * (size_t)n->ndim);
    }
    for (int i = 0; i < p->s->n_items; i++)
        for (int k = 0; k < p->kernels[i].it->n_bufs; k++) {
            const xbuf *b = &p->bufs[p->kernels[i].args[k]];
            if (b->kind == XB_INPUT) p->ins[b->index].is_read = true;
        }
    return TC_OK;
}

/* the intermediates share blocks of the arena by lifetime (tc_mem_plan) */
TC_MUST_USE static tc_status plan_arena(xplan *p, const char *api) {
    tc_mem_life *lives = tc_calloc((size_t)p->n_bufs + 1, sizeof *lives);
    tc_mem_block *blocks = lives ? tc_calloc((size_t)p->n_bufs + 1, sizeof *blocks) : NULL;
    int *of = blocks ? tc_calloc((size_t)p->n_bufs + 1, sizeof *of) : NULL;
    size_t *at = of ? tc_calloc((size_t)p->n_bufs + 1, sizeof *at) : NULL;
    if (!at) {
        tc_free(lives), tc_free(blocks), tc_free(of);
        return no_memory(api);
    }
    int n = 0; /* temps were added in item order: by first write */
    for (int i = 0; i < p->n_bufs; i++) {
        const xbuf *b = &p->bufs[i];
        if (b->kind != XB_TEMP) continue;
        size_t bytes = (size_t)b->numel * tc_dtypes[b->dtype].size;
        lives[n] = (tc_mem_life){0, bytes, b->first, b->last, -1};
        of[n++] = i;
    }
    int n_blocks = tc_mem_plan(lives, n, blocks);
    size_t end = 0;
    for (int k = 0; k < n_blocks; k++) {
        at[k] = end;
        end += (blocks[k].nbytes + TC_EXPORT_ALIGN - 1) / TC_EXPORT_ALIGN * TC_EXPORT_ALIGN;
    }
    for (int j = 0; j < n; j++) p->bufs[of[j]].offset = at[lives[j].block];
    p->arena_bytes = end;
    tc_free(lives), tc_free(blocks), tc_free(of), tc_free(at);
    return TC_OK;
}

/* ---- lowering ---------------------------------------------------------------- */

/* kernel xk in plain C99: opt.c's plan for the device's target without
 * vectors, lowered and rendered in tc_dialect_c_plain */
TC_MUST_USE static tc_status lower_plain(tc_dev *dev, xkernel *xk) {
    tc_target tg = dev->target;
    tg.has_vec = false;
    tc_kopt plan;
    tc_opt_choose(xk->it, &tg, &plan);
    tc_kernel_uops *k = tc_codegen_plan(xk->it, &tg, &plan);
    char *src = k ? tc_render(&tc_dialect_c_plain, k) : NULL;
    if (src) {
        xk->low[1].src = src;
        xk->low[1].cpu_range = k->cpu_range;
        snprintf(xk->low[1].name, sizeof xk->low[1].name, "%s", k->name);
    }
    tc_kernel_uops_free(k);
    return src ? TC_OK : tc_error_or(TC_ERR_MEMORY);
}

/* every kernel in both forms */
TC_MUST_USE static tc_status lower_kernels(xplan *p) {
    for (int i = 0; i < p->s->n_items; i++) {
        xkernel *xk = &p->kernels[i];
        tc_dev *dev = tc_device_get(xk->it->bufs[0]->device);
        if (!dev) return tc_error_code();
        tc_kopt plan;
        tc_lowered low;
        tc_status st = tc_beam_plan(dev, xk->it, &plan);
        if (st == TC_OK) st = tc_lcache_lower(dev, xk->it, &plan, &low);
        if (st != TC_OK) return st;
        xk->low[0].src = low.src;
        xk->low[0].cpu_range = low.dims.cpu_range;
        snprintf(xk->low[0].name, sizeof xk->low[0].name, "%s", low.name);
        if ((st = lower_plain(dev, xk)) != TC_OK) return st;
    }
    return TC_OK;
}

/* the elements of every constant and state buffer, read from the device */
TC_MUST_USE static tc_status read_data(xplan *p, const char *api) {
    for (int i = 0; i < p->n_bufs; i++) {
        xbuf *b = &p->bufs[i];
        size_t bytes = (size_t)b->numel * tc_dtypes[b->dtype].size;
        if ((b->kind != XB_CONST && b->kind != XB_STATE) || bytes == 0) continue;
        if (bytes > b->buf->nbytes) return TC_INTERNAL("buffer %d holds fewer bytes than read", i);
        if (!(b->data = tc_malloc(bytes))) return no_memory(api);
        tc_status st = tc_buffer_copyout(b->buf, 0, b->data, bytes);
        if (st != TC_OK) return st;
    }
    return TC_OK;
}

/* ---- files -------------------------------------------------------------------- */

/* writes text to <dir>/<name><ext>.tmp; *tmp gets that path (tc_malloc'ed) */
TC_MUST_USE static tc_status write_tmp(const char *dir, const char *name, const char *ext, const char *text,
                           char **tmp, const char *api) {
    tc_strbuf path = {0};
    tc_sb_printf(&path, "%s/%s%s.tmp", dir, name, ext);
    if (path.failed) {
        tc_sb_free(&path);
        return no_memory(api);
    }
    *tmp = path.s;
    FILE *f = fopen(path.s, "wb");
    if (!f)
        return tc_error_set(TC_ERR_IO, "%s: cannot create '%s': %s", api, path.s, strerror(errno));
    size_t n = strlen(text);
    bool ok = fwrite(text, 1, n, f) == n;
    int err = errno;
    if (fclose(f) != 0 && ok) ok = false, err = errno;
    if (!ok)
        return tc_error_set(TC_ERR_IO, "%s: cannot write '%s': %s", api, path.s, strerror(err));
    return TC_OK;
}

/* writes both files: to temp names first, then renamed over the final ones */
TC_MUST_USE static tc_status write_files(const char *dir, const char *name, const char *header,
                             const char *source, const char *api) {
    char *tmp[2] = {NULL, NULL};
    const char *ext[2] = {".h", ".c"}, *text[2] = {header, source};
    tc_status st = TC_OK;
    for (int i = 0; i < 2 && st == TC_OK; i++)
        st = write_tmp(dir, name, ext[i], text[i], &tmp[i], api);
    for (int i = 0; i < 2 && st == TC_OK; i++) {
        size_t n = strlen(tmp[i]);
        tmp[i][n - 4] = '\0'; /* the final name: without ".tmp" */
        char *final = tc_strdup(tmp[i]);
        tmp[i][n - 4] = '.';
        if (!final) st = no_memory(api);
        else if (rename(tmp[i], final) != 0)
            st = tc_error_set(TC_ERR_IO, "%s: cannot rename '%s' to '%s': %s", api, tmp[i], final,
                              strerror(errno));
        tc_free(final);
        if (st == TC_OK) tc_free(tmp[i]), tmp[i] = NULL;
    }
    for (int i = 0; i < 2; i++) {
        if (tmp[i]) remove(tmp[i]);
        tc_free(tmp[i]);
    }
    return st;
}

/* ---- the call ----------------------------------------------------------------- */

static void plan_free(xplan *p) {
    for (int i = 0; p->kernels && i < p->s->n_items; i++) {
        tc_free(p->kernels[i].args);
        tc_free(p->kernels[i].low[0].src);
        tc_free(p->kernels[i].low[1].src);
    }
    for (int i = 0; i < p->n_bufs; i++) tc_free(p->bufs[i].data);
    tc_free(p->kernels), tc_free(p->bufs), tc_free(p->outs), tc_free(p->ins);
    tc_ptrmap_free(&p->at);
    tc_schedule_free(p->s);
}

/* the outputs as nodes the plan can read whole: a view that is not a plain
 * run of its base goes through a CONTIGUOUS node (new references) */
TC_MUST_USE static tc_status plain_outputs(tc_node *const *outs, int n_outs, tc_node **plain, const char *api) {
    for (int i = 0; i < n_outs; i++) {
        int64_t off;
        char what[32];
        snprintf(what, sizeof what, "outs[%d]", i);
        tc_status st = check_device(outs[i]->device, api, what);
        if (st != TC_OK) return st;
        tc_node *n = outs[i];
        plain[i] = tc_engine_plain_run(n, &off) ? tc_node_retain(n)
                                                : tc_node_meta(TC_OP_CONTIGUOUS, n->device, 1, &n);
        if (!plain[i]) return tc_error_or(TC_ERR_MEMORY);
    }
    return TC_OK;
}

TC_MUST_USE static tc_status export_plan(xplan *p, const char *dir, tc_node *const *outs, tc_node *const *ins,
                             int n_ins, const char *api) {
    tc_status st = add_inputs(p, ins, n_ins, api);
    if (st == TC_OK && !(p->s = tc_schedule_create(outs, p->n_outs)))
        st = tc_error_or(TC_ERR_MEMORY);
    if (st == TC_OK) st = walk_items(p, api);
    if (st == TC_OK) st = place_outputs(p, outs, api);
    if (st == TC_OK) st = plan_arena(p, api);
    if (st == TC_OK) st = lower_kernels(p);
    if (st == TC_OK) st = read_data(p, api);
    char *header = NULL, *source = NULL;
    if (st == TC_OK) st = tc_export_emit(p, &header, &source);
    if (st == TC_OK) st = write_files(dir, p->name, header, source, api);
    if (st == TC_OK && tc_flag_get(TC_FLAG_DEBUG) >= 1)
        fprintf(stderr, "export: %s/%s.c: %d kernels, %d inputs, %d outputs, arena %zu bytes\n",
                dir, p->name, p->s->n_items, n_ins, p->n_outs, p->arena_bytes);
    tc_free(header);
    tc_free(source);
    return st;
}

TC_MUST_USE tc_status tc_engine_export_c(const char *dir, const char *name, tc_node *const *outs, int n_outs,
                             tc_node *const *ins, int n_ins, const char *api) {
    tc_status st = check_name(name, api);
    if (st == TC_OK && !dir) st = tc_error_set(TC_ERR_INVALID, "%s: dir is NULL", api);
    if (st != TC_OK) return st;
    xplan p = {0};
    snprintf(p.name, sizeof p.name, "%s", name);
    for (int i = 0; name[i]; i++) p.uname[i] = (char)toupper((unsigned char)name[i]);
    tc_node **plain = tc_calloc((size_t)n_outs + 1, sizeof *plain);
    p.outs = plain ? tc_calloc((size_t)n_outs + 1, sizeof *p.outs) : NULL;
    p.n_outs = n_outs;
    st = p.outs ? plain_outputs(outs, n_outs, plain, api) : no_memory(api);
    if (st == TC_OK) st = export_plan(&p, dir, plain, ins, n_ins, api);
    plan_free(&p);
    for (int i = 0; plain && i < n_outs; i++) tc_node_release(plain[i]);
    tc_free(plain);
    return st;
}
