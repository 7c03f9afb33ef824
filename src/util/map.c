/* map.c - a hash map from pointers to pointers (open addressing, linear
 * probing, power-of-two capacity kept at most half full), and the set built
 * on it. The scheduler's walks use it for "seen" sets and per-node lookups,
 * so that each test is O(1) instead of a scan of a list.
 *
 * Allocation failure is sticky: an insert that cannot grow the table sets
 * m->failed, leaves the map as it was and reports the key as not added, so
 * a walk built on it stops early; its owner checks failed once at the end
 * and reports TC_ERR_MEMORY. Keys are never NULL.
 */
#include "util.h"

#include <string.h>

static size_t slot_of(const tc_ptrmap *m, const void *key) {
    uint64_t h = (uint64_t)(uintptr_t)key;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return (size_t)h & (size_t)(m->cap - 1);
}

/* the slot holding key, or the empty slot where it would go (cap > 0) */
static size_t find(const tc_ptrmap *m, const void *key) {
    size_t i = slot_of(m, key);
    while (m->keys[i] && m->keys[i] != key) i = (i + 1) & (size_t)(m->cap - 1);
    return i;
}

static bool grow(tc_ptrmap *m) {
    int cap = m->cap ? m->cap * 2 : 16;
    tc_ptrmap bigger = {.cap = cap};
    bigger.keys = tc_calloc((size_t)cap, sizeof(void *));
    bigger.vals = tc_calloc((size_t)cap, sizeof(void *));
    if (!bigger.keys || !bigger.vals) {
        tc_free(bigger.keys);
        tc_free(bigger.vals);
        m->failed = true;
        return false;
    }
    for (int i = 0; i < m->cap; i++) {
        if (!m->keys[i]) continue;
        size_t j = find(&bigger, m->keys[i]);
        bigger.keys[j] = m->keys[i];
        bigger.vals[j] = m->vals[i];
    }
    bigger.n = m->n;
    bigger.failed = m->failed;
    tc_free(m->keys);
    tc_free(m->vals);
    *m = bigger;
    return true;
}

bool tc_ptrmap_put(tc_ptrmap *m, const void *key, void *val) {
    if (2 * (m->n + 1) > m->cap && !grow(m)) return false;
    size_t i = find(m, key);
    if (!m->keys[i]) {
        m->keys[i] = (void *)key;
        m->n++;
    }
    m->vals[i] = val;
    return true;
}

bool tc_ptrmap_get(const tc_ptrmap *m, const void *key, void **val) {
    if (!m->cap) return false;
    size_t i = find(m, key);
    if (!m->keys[i]) return false;
    if (val) *val = m->vals[i];
    return true;
}

bool tc_ptrset_add(tc_ptrmap *m, const void *key) {
    if (tc_ptrmap_get(m, key, NULL)) return false;
    return tc_ptrmap_put(m, key, NULL);
}

void tc_ptrmap_clear(tc_ptrmap *m) {
    if (m->n && m->cap) memset(m->keys, 0, sizeof(void *) * (size_t)m->cap);
    m->n = 0;
}

void tc_ptrmap_free(tc_ptrmap *m) {
    tc_free(m->keys);
    tc_free(m->vals);
    m->keys = m->vals = NULL;
    m->n = m->cap = 0;
}
