/* files.h - what infer.c and train.c both need besides the exported code:
 * a monotonic clock and reading a whole file. Header-only, plain C11 +
 * POSIX, nothing of libtinyc. */
#ifndef TC_EXAMPLE_FILES_H
#define TC_EXAMPLE_FILES_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static inline double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* DIR/name's bytes (malloc'ed), *n its size; NULL when unreadable, said on
 * stderr after prog */
static inline unsigned char *slurp(const char *prog, const char *dir, const char *name,
                                   size_t *n) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    unsigned char *p = NULL;
    if (f && fseek(f, 0, SEEK_END) == 0) {
        long len = ftell(f);
        p = len >= 0 ? malloc((size_t)len + 1) : NULL;
        if (p && (fseek(f, 0, SEEK_SET) != 0 || fread(p, 1, (size_t)len, f) != (size_t)len)) {
            free(p);
            p = NULL;
        }
        *n = (size_t)len;
    }
    if (f) fclose(f);
    if (!p) fprintf(stderr, "%s: cannot read %s\n", prog, path);
    return p;
}

#endif
