/* cpu_info.c - what the CPU device knows of its host, read when the device
 * opens (its first use): the SIMD it compiles for (float lanes and
 * registers, from __builtin_cpu_supports: the features -march=native turns
 * on, the OS's support of their registers included), the data caches
 * (size, ways, line, cores sharing one), the cores online, and the
 * environment's overrides of them. They go into the device's tc_target,
 * which codegen reads (opt.c sizes register tiles and reduce blocks from
 * them): codegen never asks the host itself, so a target filled by hand (a
 * test, an export for another machine) plans the same anywhere.
 *
 * Caches: Linux sysfs first (/sys/devices/system/cpu/cpu0/cache/index*:
 * level, type, size, ways_of_associativity, coherency_line_size,
 * shared_cpu_list: what the kernel read from cpuid), then, for a level sysfs
 * does not give, glibc's sysconf(_SC_LEVEL*_CACHE_*). sysfs goes first
 * because it describes one cache: on a 2-core AMD EPYC guest sysconf said
 * 256 MiB of L3 where sysfs and lscpu say 32 MiB. sysconf's L3 is the
 * package's, so it counts as shared by the package's logical processors
 * (cpuid leaf 1), the share per core that opt.c plans with.
 * Overrides (for tests, and to plan for another machine): TC_CPU_L1D,
 * TC_CPU_L2, TC_CPU_L3 (bytes, or with a K, M or G suffix: 48K, 2M) and
 * TC_CPU_ISA (sse2, avx, avx2, avx512: the lanes and registers plans assume;
 * avx2 holds the kernels' compiler to it too, cpu_cc.c; otherwise kernels
 * are compiled for the host, where a GCC vector wider than its registers
 * becomes several). A malformed one fails the device's
 * opening with TC_ERR_DEVICE naming it.
 * Cost: about twenty small file reads per opening; nothing is kept.
 */
#include "runtime/runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <cpuid.h>
#endif

#define SYSFS_CACHE  "/sys/devices/system/cpu/cpu0/cache"
#define MAX_OVERRIDE ((int64_t)1 << 40) /* the largest cache an override may give */

/* the first line of file dir/name (newline dropped) in buf; false if none */
static bool read_line(const char *dir, const char *name, char *buf, size_t size) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "r");
    if (!f) return false;
    bool ok = fgets(buf, (int)size, f) != NULL;
    fclose(f);
    if (ok) buf[strcspn(buf, "\n")] = '\0';
    return ok && buf[0];
}

/* "32768", "48K", "2M", "1g" -> bytes; -1 if s is not that (or out of range) */
static int64_t parse_size(const char *s) {
    char *end;
    if (!s || *s < '0' || *s > '9') return -1;
    long long v = strtoll(s, &end, 10);
    int64_t unit = 1;
    if (*end == 'K' || *end == 'k') unit = 1 << 10, end++;
    else if (*end == 'M' || *end == 'm') unit = 1 << 20, end++;
    else if (*end == 'G' || *end == 'g') unit = 1 << 30, end++;
    if (*end || v <= 0 || v > MAX_OVERRIDE / unit) return -1;
    return (int64_t)v * unit;
}

/* CPUs in a list like "0-3,8,10-11" (0 if malformed) */
static int count_cpus(const char *s) {
    int n = 0;
    while (*s) {
        char *end;
        long a = strtol(s, &end, 10), b = a;
        if (end == s) return 0;
        if (*end == '-') b = strtol(end + 1, &end, 10);
        if (b < a) return 0;
        n += (int)(b - a + 1);
        if (*end == ',') end++;
        else if (*end) return 0;
        s = end;
    }
    return n;
}

int tc_cpu_sysfs_caches(const char *dir, tc_cache_level cache[3]) {
    int found = 0;
    for (int i = 0; i < 16; i++) {
        char sub[512], buf[256];
        if (snprintf(sub, sizeof sub, "%s/index%d", dir, i) >= (int)sizeof sub) break;
        if (!read_line(sub, "level", buf, sizeof buf)) continue;
        int level = atoi(buf);
        if (level < 1 || level > 3 || !read_line(sub, "type", buf, sizeof buf)) continue;
        if (strcmp(buf, "Data") != 0 && strcmp(buf, "Unified") != 0) continue; /* not L1i */
        int64_t bytes = read_line(sub, "size", buf, sizeof buf) ? parse_size(buf) : -1;
        if (bytes <= 0 || cache[level - 1].bytes) continue;
        tc_cache_level *c = &cache[level - 1];
        c->bytes = bytes;
        c->ways = read_line(sub, "ways_of_associativity", buf, sizeof buf) ? atoi(buf) : 0;
        c->line = read_line(sub, "coherency_line_size", buf, sizeof buf) ? atoi(buf) : 0;
        c->shared = read_line(sub, "shared_cpu_list", buf, sizeof buf) ? count_cpus(buf) : 0;
        found++;
    }
    return found;
}

/* the logical processors of the package, as cpuid leaf 1 counts them (0
 * where it does not say, or off x86): glibc's sysconf reports a package's
 * whole L3 without how many share it (a 2-core Zen 5 guest: 508 MiB of L3
 * for 254 logical processors, 2 MiB each) */
static int package_threads(void) {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
    unsigned a, b, c, d;
    if (__get_cpuid(1, &a, &b, &c, &d) && (d >> 28) & 1) return (int)((b >> 16) & 0xff);
#endif
    return 0;
}

/* the levels sysfs did not give, from glibc's sysconf, the L3 shared by
 * the package's logical processors; how many it gave */
static int sysconf_caches(tc_cache_level cache[3]) {
    int found = 0;
#ifdef _SC_LEVEL1_DCACHE_SIZE
    static const int names[3][3] = {
        {_SC_LEVEL1_DCACHE_SIZE, _SC_LEVEL1_DCACHE_ASSOC, _SC_LEVEL1_DCACHE_LINESIZE},
        {_SC_LEVEL2_CACHE_SIZE, _SC_LEVEL2_CACHE_ASSOC, _SC_LEVEL2_CACHE_LINESIZE},
        {_SC_LEVEL3_CACHE_SIZE, _SC_LEVEL3_CACHE_ASSOC, _SC_LEVEL3_CACHE_LINESIZE},
    };
    for (int l = 0; l < 3; l++) {
        long bytes = sysconf(names[l][0]);
        if (cache[l].bytes || bytes <= 0) continue;
        long ways = sysconf(names[l][1]), line = sysconf(names[l][2]);
        cache[l] = (tc_cache_level){
            .bytes = bytes, .ways = ways > 0 ? (int)ways : 0, .line = line > 0 ? (int)line : 0};
        if (l == 2) cache[l].shared = package_threads();
        found++;
    }
#else
    (void)cache;
#endif
    return found;
}

/* the SIMD kernels compiled with -march=native get on this CPU: its name */
static const char *host_simd(tc_target *t) {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
    if (__builtin_cpu_supports("avx512f")) return t->simd_floats = 16, t->simd_regs = 32, "avx512";
    if (__builtin_cpu_supports("avx2")) return t->simd_floats = 8, t->simd_regs = 16, "avx2";
    if (__builtin_cpu_supports("avx")) return t->simd_floats = 8, t->simd_regs = 16, "avx";
    return t->simd_floats = 4, t->simd_regs = 16, "sse2";
#else
    return t->simd_floats = 4, t->simd_regs = 32, "neon-class"; /* NEON, SVE at 128 bits */
#endif
}

/* TC_CPU_ISA: the lanes and registers of a named ISA; NULL if unknown */
static const char *isa_override(tc_target *t, const char *v) {
    static const struct {
        const char *name; /* as TC_CPU_ISA spells it */
        int lanes;        /* float32 lanes of a register */
        int regs;         /* vector registers */
    } isas[] = {{"sse2", 4, 16}, {"avx", 8, 16}, {"avx2", 8, 16}, {"avx512", 16, 32}};
    for (size_t i = 0; i < sizeof isas / sizeof isas[0]; i++)
        if (!strcasecmp(v, isas[i].name)) {
            t->simd_floats = isas[i].lanes, t->simd_regs = isas[i].regs;
            return isas[i].name;
        }
    return NULL;
}

/* the TC_CPU_* overrides on t; *which lists the ones set */
TC_MUST_USE static tc_status apply_overrides(tc_target *t, const char **isa, char *which, size_t size) {
    static const char *const names[3] = {"TC_CPU_L1D", "TC_CPU_L2", "TC_CPU_L3"};
    size_t len = 0;
    which[0] = '\0';
    for (int l = 0; l < 3; l++) {
        const char *v = getenv(names[l]);
        if (!v || !*v) continue;
        int64_t bytes = parse_size(v);
        if (bytes <= 0)
            return tc_error_set(TC_ERR_DEVICE,
                                "CPU: %s='%.32s' is not a cache size (bytes, or a number with a K, "
                                "M or G suffix, at most 1 TiB)",
                                names[l], v);
        t->cache[l] = (tc_cache_level){.bytes = bytes,
                                       .ways = t->cache[l].ways,
                                       .line = t->cache[l].line,
                                       .shared = t->cache[l].shared};
        len += (size_t)snprintf(which + len, len < size ? size - len : 0, " %s", names[l]);
    }
    const char *v = getenv("TC_CPU_ISA");
    if (v && *v) {
        if (!(*isa = isa_override(t, v)))
            return tc_error_set(TC_ERR_DEVICE,
                                "CPU: TC_CPU_ISA='%.32s' is not one of sse2, avx, avx2, avx512", v);
        snprintf(which + len, len < size ? size - len : 0, " TC_CPU_ISA");
    }
    return TC_OK;
}

/* the model name /proc/cpuinfo gives ("" where it gives none) */
static void cpu_model(char *buf, size_t size) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    buf[0] = '\0';
    while (f && fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) != 0 || !colon) continue;
        colon += 1 + (colon[1] == ' ');
        colon[strcspn(colon, "\n")] = '\0';
        snprintf(buf, size, "%s", colon);
        break;
    }
    if (f) fclose(f);
}

/* "32 KiB 8-way" for one cache level */
static void level_text(char *buf, size_t size, const tc_cache_level *c) {
    int64_t b = c->bytes;
    int n = b % (1 << 20) == 0 ? snprintf(buf, size, "%lld MiB", (long long)(b >> 20))
            : b % 1024 == 0    ? snprintf(buf, size, "%lld KiB", (long long)(b >> 10))
                               : snprintf(buf, size, "%lld B", (long long)b);
    if (!b) n = snprintf(buf, size, "unknown");
    if (c->ways > 0 && n > 0 && (size_t)n < size)
        n += snprintf(buf + n, size - (size_t)n, " %d-way", c->ways);
    if (c->shared > 1 && n > 0 && (size_t)n < size)
        snprintf(buf + n, size - (size_t)n, " shared by %d", c->shared);
}

TC_MUST_USE tc_status tc_cpu_target(tc_target *t, char *info, size_t info_size) {
    *t = tc_dialect_c.target;
    const char *isa = host_simd(t);
    int from_sysfs = tc_cpu_sysfs_caches(SYSFS_CACHE, t->cache),
        from_sysconf = sysconf_caches(t->cache);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    t->cores = cores > 0 ? (int)cores : 0;
    char which[96];
    if (apply_overrides(t, &isa, which, sizeof which) != TC_OK) return tc_error_code();
    if (!info || !info_size) return TC_OK;
    char model[128], l[3][64];
    cpu_model(model, sizeof model);
    for (int i = 0; i < 3; i++) level_text(l[i], sizeof l[i], &t->cache[i]);
    snprintf(
        info, info_size,
        "%s%s%s (%d float lanes, %d registers), L1d %s, L2 %s, L3 %s, %d cores; caches from %s%s%s",
        model, model[0] ? ", " : "", isa, t->simd_floats, t->simd_regs, l[0], l[1], l[2], t->cores,
        from_sysfs && from_sysconf ? "sysfs and sysconf"
        : from_sysfs               ? "sysfs"
        : from_sysconf             ? "sysconf"
                                   : "nowhere",
        which[0] ? "; set by" : "", which);
    return TC_OK;
}
