/* random.c - tc_rand, tc_randn and tc_manual_seed: a counter-based generator
 * (Philox4x32-10, Salmon et al., "Parallel random numbers: as easy as 1, 2,
 * 3", SC 2011) run on the host, so results do not depend on the device.
 *
 * Key = the 64-bit seed (low word first); counter = (block index low, high,
 * 0, 0), where the block index continues from a global counter that every
 * successful call advances by the blocks it used. One block gives 4 words.
 * rand: U[0,1) from the top 24 bits of each word (11 bits for float16, so the
 * value is exact and never rounds up to 1). randn: Box-Muller on pairs of
 * words. The values are uploaded with tc_engine_from_host. */
#include "tensor.h"

#include <math.h>

static uint64_t rng_seed;    /* the key: tc_manual_seed's value, 0 by default */
static uint64_t rng_counter; /* blocks handed out since the seed was set */

void tc_random_reset(void) {
    rng_seed = 0;
    rng_counter = 0;
}

TC_API void tc_manual_seed(uint64_t seed) {
    tc_lock();
    rng_seed = seed;
    rng_counter = 0;
    tc_unlock();
}

/* Philox4x32 with 10 rounds: ctr is replaced by its random block */
static void philox4x32_10(uint32_t ctr[4], uint32_t k0, uint32_t k1) {
    for (int round = 0; round < 10; round++) {
        uint64_t p0 = (uint64_t)0xD2511F53u * ctr[0], p1 = (uint64_t)0xCD9E8D57u * ctr[2];
        uint32_t x0 = (uint32_t)(p1 >> 32) ^ ctr[1] ^ k0, x2 = (uint32_t)(p0 >> 32) ^ ctr[3] ^ k1;
        ctr[0] = x0;
        ctr[1] = (uint32_t)p1;
        ctr[2] = x2;
        ctr[3] = (uint32_t)p0;
        k0 += 0x9E3779B9u; /* the Weyl key schedule */
        k1 += 0xBB67AE85u;
    }
}

/* the 4 words of block `block` (counted from the global counter) */
static void block_words(uint64_t block, uint32_t out[4]) {
    uint64_t c = rng_counter + block;
    out[0] = (uint32_t)c;
    out[1] = (uint32_t)(c >> 32);
    out[2] = out[3] = 0;
    philox4x32_10(out, (uint32_t)rng_seed, (uint32_t)(rng_seed >> 32));
}

/* uniform in [0,1) with the precision dt can hold exactly */
static double uniform(uint32_t w, tc_dtype dt) {
    return dt == TC_FLOAT16 ? (double)(w >> 21) * 0x1p-11 : (double)(w >> 8) * 0x1p-24;
}

/* fills n values of dt into data; returns the blocks used */
static uint64_t fill(void *data, int64_t n, tc_dtype dt, bool is_normal) {
    uint64_t blocks = (uint64_t)(n + 3) / 4;
    for (uint64_t b = 0; b < blocks; b++) {
        uint32_t w[4];
        double v[4];
        block_words(b, w);
        for (int j = 0; j < 4 && !is_normal; j++) v[j] = uniform(w[j], dt);
        for (int j = 0; j < 4 && is_normal; j += 2) {
            double u1 = (double)((w[j] >> 8) + 1) * 0x1p-24; /* (0,1]: log is finite */
            double u2 = (double)(w[j + 1] >> 8) * 0x1p-24;
            double r = sqrt(-2.0 * log(u1)), theta = 6.283185307179586477 * u2;
            v[j] = r * cos(theta);
            v[j + 1] = r * sin(theta);
        }
        for (int j = 0; j < 4 && (int64_t)(b * 4) + j < n; j++)
            tc_scalar_store(data, dt, (int64_t)(b * 4) + j, v[j]);
    }
    return blocks;
}

static tc_tensor *random_tensor(const char *api, int ndim, const int64_t *shape, tc_dtype dt,
                                const char *device, bool is_normal) {
    tc_lock();
    tc_tensor *out = NULL;
    int dev = -1;
    if (tc_tensor_check_shape(api, ndim, shape) != TC_OK || tc_tensor_check_dtype(api, dt) != TC_OK)
        goto done;
    if (!tc_dtypes[dt].is_float) {
        tc_error_set(TC_ERR_DTYPE, "%s: needs a float dtype, got %s", api, tc_dtypes[dt].name);
        goto done;
    }
    if ((dev = tc_device_open(device, api)) < 0) goto done;
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    if ((uint64_t)n > SIZE_MAX / tc_dtypes[dt].size) {
        tc_error_set(TC_ERR_MEMORY, "%s: %lld elements do not fit in memory", api, (long long)n);
        goto done;
    }
    void *data = tc_malloc((size_t)n * tc_dtypes[dt].size);
    if (!data) goto done;
    uint64_t blocks = fill(data, n, dt, is_normal);
    static const int64_t no_dims[1] = {0}; /* shape may be NULL for ndim 0 */
    out = tc_tensor_wrap(tc_engine_from_host(data, dt, ndim, shape ? shape : no_dims, dev));
    tc_free(data);
    if (out) rng_counter += blocks; /* a failed call changes nothing */
done:
    tc_unlock();
    return out;
}

TC_API tc_tensor *tc_rand(int ndim, const int64_t *shape, tc_dtype dt, const char *device) {
    return random_tensor("tc_rand", ndim, shape, dt, device, false);
}

TC_API tc_tensor *tc_randn(int ndim, const int64_t *shape, tc_dtype dt, const char *device) {
    return random_tensor("tc_randn", ndim, shape, dt, device, true);
}
