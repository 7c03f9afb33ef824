/* flags.c - integer environment flags (read once, overridable), the cache
 * directory, the API lock and the monotonic clock. */
#include "util.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *const flag_names[TC_FLAG_COUNT] = {
    [TC_FLAG_DEBUG] = "TC_DEBUG",
    [TC_FLAG_NOOPT] = "TC_NOOPT",
    [TC_FLAG_NOFUSE] = "TC_NOFUSE",
    [TC_FLAG_BEAM] = "TC_BEAM",
    [TC_FLAG_NOROWS] = "TC_NOROWS",
    [TC_FLAG_KERNEL_OPS] = "TC_KERNEL_OPS",
};
static int64_t flag_values[TC_FLAG_COUNT]; /* current values */
static bool flag_loaded[TC_FLAG_COUNT];    /* read from the environment or set */
static char *cachedir;                     /* resolved cache directory, owned */

int64_t tc_flag_get(tc_flag f) {
    if (!flag_loaded[f]) {
        const char *v = getenv(flag_names[f]);
        flag_values[f] = v ? strtoll(v, NULL, 10) : 0;
        flag_loaded[f] = true;
    }
    return flag_values[f];
}

void tc_flag_put(tc_flag f, int64_t value) {
    flag_values[f] = value;
    flag_loaded[f] = true;
}

int tc_flag_lookup(const char *name) {
    for (int i = 0; i < TC_FLAG_COUNT; i++)
        if (strcmp(name, flag_names[i]) == 0) return i;
    return -1;
}

const char *tc_cachedir(void) {
    if (cachedir) return cachedir;
    const char *env = getenv("TC_CACHEDIR"), *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    char buf[4096];
    if (env && *env) snprintf(buf, sizeof buf, "%s", env);
    else if (xdg && *xdg) snprintf(buf, sizeof buf, "%s/tinyc", xdg);
    else snprintf(buf, sizeof buf, "%s/.cache/tinyc", home && *home ? home : "/tmp");
    cachedir = tc_strdup(buf);
    return cachedir ? cachedir : "/tmp";
}

void tc_flags_shutdown(void) {
    tc_free(cachedir);
    cachedir = NULL;
    memset(flag_loaded, 0, sizeof flag_loaded);
}

static pthread_mutex_t api_lock;
static pthread_once_t api_lock_once = PTHREAD_ONCE_INIT;

static void api_lock_init(void) {
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&api_lock, &a);
    pthread_mutexattr_destroy(&a);
}

void tc_lock(void) {
    pthread_once(&api_lock_once, api_lock_init);
    pthread_mutex_lock(&api_lock);
}

void tc_unlock(void) {
    pthread_mutex_unlock(&api_lock);
}

double tc_time_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
