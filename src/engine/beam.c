/* beam.c - TC_BEAM=n: the CPU optimizer's plan for a kernel, found by timing.
 *
 * A beam search over opt.c's plans: the first beam is the heuristic plan
 * and the plain loops; each round times every neighbour (tc_opt_neighbors)
 * of the beam and keeps the n fastest plans seen; it stops when a round
 * finds nothing faster than the best so far, or when the kernel's time
 * budget (BUDGET_S) is spent, so a first run stays short. Candidates run on
 * zeroed scratch buffers, never on the item's buffers, so a search changes
 * nothing the program sees. The winner is stored in the on-disk cache under
 * the hash of the heuristic plan's source and the device's description,
 * and later processes load it without searching. Kernels with little work
 * are not searched (the heuristic plan is used).
 *
 * What a search compiles stays bounded: tc_opt_neighbors offers only plans
 * that keep opt.c's cost rule, and a candidate whose C source passes
 * MAX_SRC_LINES lines is not compiled (a plain matmul's 20x24 scalar tile
 * is 2,531 lines; 1,346 lines took gcc 0.5 s, as long as the heuristic's
 * largest kernels together). The heuristic's own kernels stay far below it
 * (the MNIST and GPT-2 steps' largest are about 420 lines).
 */
#include "engine.h"

#include "schedule/schedule.h"

#include <stdio.h>
#include <string.h>

#define BUDGET_S 10.0         /* search time per kernel */
#define MIN_WORK 1000000      /* loop iterations worth a search */
#define MAX_BEAM 8            /* widest beam */
#define MAX_NEIGHBORS 256     /* plans per round */
#define MAX_SRC_LINES 1024    /* lines of C of a candidate worth compiling */

typedef struct {
    tc_kopt plan;
    double t; /* seconds, best of the runs */
} cand;

typedef struct {
    tc_dev *dev;
    const tc_sched_item *it;
    void **ptrs;   /* scratch buffers, one per slot */
    double t_end;  /* the budget ends */
    int timed;     /* candidates timed */
    int skipped;   /* candidates not compiled: their source passed MAX_SRC_LINES */
} search;

/* whether src has more than max lines */
static bool too_long(const char *src, int max) {
    for (int n = 0; (src = strchr(src, '\n')); src++)
        if (++n > max) return true;
    return false;
}

/* best of three runs of it with plan on the scratch buffers; < 0: failed
 * or not compiled (too long) */
static double time_plan(search *s, const tc_kopt *plan) {
    tc_lowered l;
    bool lowered = tc_lcache_lower(s->dev, s->it, plan, &l) == TC_OK;
    if (lowered && too_long(l.src, MAX_SRC_LINES)) {
        tc_free(l.src);
        s->skipped++;
        return -1;
    }
    tc_program *prog = lowered ? s->dev->compile(s->dev, l.src, l.name) : NULL;
    tc_free(l.src);
    if (!prog) return -1;
    double best = -1;
    for (int r = 0; r < 3; r++) {
        double t0 = tc_time_now();
        if (s->dev->launch(s->dev, prog, s->ptrs, s->it->n_bufs, &l.dims) != TC_OK ||
            s->dev->synchronize(s->dev) != TC_OK)
            return -1;
        double t = tc_time_now() - t0;
        if (best < 0 || t < best) best = t;
    }
    s->timed++;
    return best;
}

static bool seen(const cand *c, int n, const tc_kopt *p) {
    for (int i = 0; i < n; i++)
        if (!memcmp(&c[i].plan, p, sizeof *p)) return true;
    return false;
}

/* adds (p, t) to the width best in beam (sorted, fastest first) */
static void keep(cand *beam, int *n, int width, const tc_kopt *p, double t) {
    int at = *n < width ? (*n)++ : width;
    if (at == width && t >= beam[width - 1].t) return;
    if (at == width) at = width - 1;
    while (at > 0 && beam[at - 1].t > t) {
        beam[at] = beam[at - 1];
        at--;
    }
    beam[at] = (cand){*p, t};
}

TC_MUST_USE static tc_status run_search(search *s, int width, tc_kopt *out) {
    cand beam[MAX_BEAM], *all = tc_malloc(sizeof(cand) * 4096);
    tc_kopt *next = tc_malloc(sizeof(tc_kopt) * MAX_NEIGHBORS);
    if (!all || !next) {
        tc_free(all);
        tc_free(next);
        return TC_ERR_MEMORY;
    }
    tc_error_state es;
    tc_error_save(&es);
    int n_beam = 0, n_all = 0;
    tc_kopt start[2] = {{0}};
    tc_opt_choose(s->it, &s->dev->target, &start[0]);
    for (int i = 0; i < 2; i++) {
        double t = time_plan(s, &start[i]);
        if (t >= 0) keep(beam, &n_beam, width, &start[i], t);
        all[n_all++] = (cand){start[i], t};
    }
    bool better = n_beam > 0;
    while (better && tc_time_now() < s->t_end) {
        better = false;
        double best = beam[0].t;
        cand round[MAX_BEAM];
        int n_round = n_beam;
        memcpy(round, beam, sizeof(cand) * (size_t)n_beam);
        for (int b = 0; b < n_round && tc_time_now() < s->t_end; b++) {
            int n = tc_opt_neighbors(s->it, &round[b].plan, next, MAX_NEIGHBORS);
            for (int i = 0; i < n && tc_time_now() < s->t_end && n_all < 4096; i++) {
                if (seen(all, n_all, &next[i])) continue;
                double t = time_plan(s, &next[i]);
                all[n_all++] = (cand){next[i], t};
                if (t < 0) continue;
                keep(beam, &n_beam, width, &next[i], t);
                better |= t < best;
            }
        }
    }
    if (n_beam) *out = beam[0].plan;
    tc_free(all);
    tc_free(next);
    tc_error_restore(&es); /* a candidate that failed to build is not the caller's error */
    return TC_OK;
}

TC_MUST_USE tc_status tc_beam_plan(tc_dev *dev, const tc_sched_item *it, tc_kopt *plan) {
    tc_opt_choose(it, &dev->target, plan);
    int64_t width = tc_flag_get(TC_FLAG_BEAM), work = 1;
    for (int a = 0; a < it->ndim; a++) work *= it->full_shape[a];
    if (width <= 0 || dev->target.has_local || dev->is_null || !it->reduce_axes || work < MIN_WORK)
        return TC_OK; /* the NULL device runs nothing, so it has nothing to time */
    if (width > MAX_BEAM) width = MAX_BEAM;
    /* the cache key: the heuristic kernel, the device, the beam width */
    tc_lowered heur;
    if (tc_lcache_lower(dev, it, plan, &heur) != TC_OK) return tc_error_code();
    tc_strbuf b = {0};
    tc_sb_printf(&b, "beam %lld simd %d/%d %s\n%s", (long long)width, dev->target.simd_floats,
                     dev->target.simd_regs, dev->name, heur.src);
    tc_free(heur.src);
    if (b.failed) {
        tc_sb_free(&b);
        return TC_ERR_MEMORY;
    }
    char key[33];
    tc_hash_hex(b.s, b.len, key);
    tc_sb_free(&b);
    char *cached = NULL;
    size_t n = 0;
    if (tc_cache_load(key, ".beam", &cached, &n) == TC_OK && cached) {
        tc_kopt p;
        bool ok = tc_opt_parse(it, cached, &p);
        tc_free(cached);
        if (ok) {
            *plan = p;
            return TC_OK;
        }
    }
    search s = {.dev = dev, .it = it, .t_end = tc_time_now() + BUDGET_S};
    s.ptrs = tc_calloc((size_t)it->n_bufs, sizeof(void *));
    tc_status st = s.ptrs ? TC_OK : TC_ERR_MEMORY;
    for (int i = 0; i < it->n_bufs && st == TC_OK; i++) {
        size_t bytes = (size_t)tc_node_numel(it->bufs[i]) * tc_dtypes[it->bufs[i]->dtype].size;
        void *zero = tc_calloc(bytes ? bytes : 1, 1);
        s.ptrs[i] = zero ? dev->alloc(dev, bytes ? bytes : 1) : NULL;
        st = !zero ? TC_ERR_MEMORY : !s.ptrs[i] ? tc_error_code() : dev->copyin(dev, s.ptrs[i], 0, zero, bytes);
        tc_free(zero);
    }
    tc_kopt best = *plan;
    if (st == TC_OK) st = run_search(&s, (int)width, &best);
    for (int i = 0; s.ptrs && i < it->n_bufs; i++)
        if (s.ptrs[i]) dev->free(dev, s.ptrs[i]);
    tc_free(s.ptrs);
    if (st != TC_OK) return st;
    *plan = best;
    char text[128];
    if (tc_opt_format(&best, text, sizeof text) >= 0) {
        if (tc_flag_get(TC_FLAG_DEBUG) >= 2)
            fprintf(stderr, "  beam %-28s plan [%s] (%d tried, %d too long)\n", it->name, text, s.timed,
                    s.skipped);
        tc_cache_put(key, ".beam", text, strlen(text));
    }
    return TC_OK;
}
