/* pool.h - a small pthread pool for the thread hook of exported code
 * (<name>_parallel_for): the caller and THREADS-1 workers take parts of
 * [0, n) one at a time. Header-only, plain C11 + POSIX threads, nothing of
 * libtinyc. Use: pool_start(threads); <name>_parallel_for = pool_for; ...
 * pool_stop(). One job at a time (exported code runs one kernel at a time). */
#ifndef TC_EXAMPLE_POOL_H
#define TC_EXAMPLE_POOL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

enum { POOL_MAX_THREADS = 64 };

typedef void (*pool_task)(void *ctx, int64_t start, int64_t end);

enum { POOL_SPIN = 4000 }; /* polls (tens of microseconds) before a thread sleeps, as the
                             library's own pool does: kernels follow each other quickly */

static struct {
    pthread_mutex_t mu;               /* guards the sleeps and wake-ups */
    pthread_cond_t go, done;          /* a new job; the workers finished theirs */
    int threads;                      /* the caller and the workers */
    pthread_t tids[POOL_MAX_THREADS]; /* the workers */
    atomic_ulong gen;                 /* jobs published */
    atomic_int pending;               /* workers still on the current job */
    atomic_int stop;                  /* workers exit */
    pool_task task;                   /* the job: task(ctx, start, end) over parts of [0, n) */
    void *ctx;                        /* its argument */
    int64_t n, chunk;                 /* its steps, and steps per part */
    int parts;                        /* parts */
    atomic_int next;                  /* the next part to take */
} pool = {.mu = PTHREAD_MUTEX_INITIALIZER,
          .go = PTHREAD_COND_INITIALIZER,
          .done = PTHREAD_COND_INITIALIZER,
          .threads = 1};

static void pool_take_parts(void) {
    for (int k; (k = atomic_fetch_add(&pool.next, 1)) < pool.parts;) {
        int64_t start = k * pool.chunk, end = start + pool.chunk;
        pool.task(pool.ctx, start, end < pool.n ? end : pool.n);
    }
}

/* the first job after `seen` (spinning, then sleeping); 0: the pool stops */
static unsigned long pool_next_job(unsigned long seen) {
    for (int i = 0; i < POOL_SPIN; i++) {
        if (atomic_load(&pool.stop)) return 0;
        unsigned long g = atomic_load(&pool.gen);
        if (g != seen) return g;
    }
    pthread_mutex_lock(&pool.mu);
    while (!atomic_load(&pool.stop) && atomic_load(&pool.gen) == seen)
        pthread_cond_wait(&pool.go, &pool.mu);
    unsigned long g = atomic_load(&pool.stop) ? 0 : atomic_load(&pool.gen);
    pthread_mutex_unlock(&pool.mu);
    return g;
}

static void *pool_worker(void *arg) {
    (void)arg;
    for (unsigned long seen = 0; (seen = pool_next_job(seen)) != 0;) {
        pool_take_parts();
        if (atomic_fetch_sub(&pool.pending, 1) == 1) { /* the last one: wake the caller */
            pthread_mutex_lock(&pool.mu);
            pthread_cond_signal(&pool.done);
            pthread_mutex_unlock(&pool.mu);
        }
    }
    return NULL;
}

/* the hook: task over [0, n) in pool.threads parts, returning when all ran */
static void pool_for(pool_task task, void *ctx, int64_t n) {
    pool.task = task, pool.ctx = ctx, pool.n = n;
    pool.parts = n < pool.threads ? (int)n : pool.threads;
    pool.chunk = pool.parts ? (n + pool.parts - 1) / pool.parts : 0;
    atomic_store(&pool.next, 0);
    atomic_store(&pool.pending, pool.threads - 1);
    pthread_mutex_lock(&pool.mu); /* a sleeping worker sees the job, or is woken */
    atomic_fetch_add(&pool.gen, 1);
    pthread_cond_broadcast(&pool.go);
    pthread_mutex_unlock(&pool.mu);
    pool_take_parts();
    for (int i = 0; i < POOL_SPIN && atomic_load(&pool.pending) > 0; i++) continue;
    if (atomic_load(&pool.pending) > 0) {
        pthread_mutex_lock(&pool.mu);
        while (atomic_load(&pool.pending) > 0) pthread_cond_wait(&pool.done, &pool.mu);
        pthread_mutex_unlock(&pool.mu);
    }
}

/* starts threads-1 workers (fewer if the system refuses); returns pool.threads */
static int pool_start(int threads) {
    for (int i = 0; pool.threads < threads && i < POOL_MAX_THREADS; i++) {
        if (pthread_create(&pool.tids[i], NULL, pool_worker, NULL) != 0) break;
        pool.threads++;
    }
    return pool.threads;
}

static void pool_stop(void) {
    pthread_mutex_lock(&pool.mu);
    atomic_store(&pool.stop, 1);
    pthread_cond_broadcast(&pool.go);
    pthread_mutex_unlock(&pool.mu);
    for (int i = 0; i < pool.threads - 1; i++) pthread_join(pool.tids[i], NULL);
    pool.threads = 1;
}

#endif /* TC_EXAMPLE_POOL_H */
