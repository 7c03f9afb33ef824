/* random.c - tc_rand, tc_randn, tc_uniform, tc_normal, tc_randint,
 * tc_multinomial and tc_manual_seed: a counter-based generator
 * (Philox4x32-10, Salmon et al., "Parallel random numbers: as easy as 1, 2,
 * 3", SC 2011) run on the host, so results do not depend on the device.
 *
 * Key = the 64-bit seed (low word first); counter = (block index low, high,
 * 0, 0), where the block index continues from a global counter that every
 * successful call advances by the blocks it used. One block gives 4 words.
 * rand: U[0,1) from the top 24 bits of each word (11 for float16, 8 for bfloat16, so the
 * value is exact and never rounds up to 1); uniform scales it to [low, high)
 * (a value that rounds up to high becomes the dtype's next value below).
 * randn: Box-Muller on pairs of words; normal is mean + std * randn's value
 * (the same stream). randint: low + floor(u*(high-low)) with u from 53 bits
 * of two words (2 values per block). The values are uploaded with
 * tc_engine_from_host, so no device arithmetic touches them.
 * multinomial: with replacement, the count of CDF values each uniform
 * reaches (tinygrad's); without, the Gumbel-top-k trick (the k largest
 * log(p) - log(-log u), one argmax at a time, each winner masked out), which
 * samples without replacement in proportion to the weights. */
#include "tensor.h"

#include <math.h>

static uint64_t rng_seed;    /* the key: tc_manual_seed's value, 0 by default */
static uint64_t rng_counter; /* blocks handed out since the seed was set */

void tc_random_reset(void) {
    rng_seed = 0;
    rng_counter = 0;
}

TC_API void tc_manual_seed(uint64_t seed) {
    TC_API_ENTER();
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

/* uniform in [0,1) with the precision dt can hold exactly (float64: the
 * 24 bits of float32's, as tinygrad draws float32 and casts) */
static double uniform(uint32_t w, tc_dtype dt) {
    if (dt == TC_BFLOAT16) return (double)(w >> 24) * 0x1p-8;
    return dt == TC_FLOAT16 ? (double)(w >> 21) * 0x1p-11 : (double)(w >> 8) * 0x1p-24;
}

/* v rounded to float dtype dt */
static double to_dtype(double v, tc_dtype dt) {
    return tc_dtype_round(dt, v);
}

/* the largest value of float dtype dt below v: keeps low + (high-low)*u
 * below high after rounding to dt */
static double below(double v, tc_dtype dt) {
    if (dt == TC_FLOAT16) {
        uint16_t h = tc_float_to_half((float)v);
        if ((double)tc_half_to_float(h) < v) return tc_half_to_float(h);
        h = (h & 0x7FFFu) == 0 ? 0x8001u : (h & 0x8000u) ? (uint16_t)(h + 1) : (uint16_t)(h - 1);
        return tc_half_to_float(h);
    }
    if (dt == TC_FLOAT64) return nextafter(v, -INFINITY);
    if (dt == TC_BFLOAT16) { /* one bfloat16 step down, as for float16 below */
        uint16_t b = tc_float_to_bf16((float)v);
        if ((double)tc_bf16_to_float(b) < v) return tc_bf16_to_float(b);
        b = (b & 0x7FFFu) == 0 ? 0x8001u : (b & 0x8000u) ? (uint16_t)(b + 1) : (uint16_t)(b - 1);
        return tc_bf16_to_float(b);
    }
    float f = (float)v;
    return (double)f < v ? f : nextafterf(f, -INFINITY);
}

typedef enum {
    DRAW_UNIFORM, /* a + (b-a)*u, u in [0,1): tc_rand (a 0, b 1), tc_uniform */
    DRAW_NORMAL,  /* a + b*z, z ~ N(0,1) by Box-Muller: tc_randn, tc_normal */
    DRAW_INT,     /* integers a + floor(u*(b-a)), u in [0,1) from 53 bits: tc_randint */
} draw_kind;

typedef struct {
    draw_kind kind; /* the distribution */
    double a, b;    /* UNIFORM: low, high; NORMAL: mean, std */
    int64_t lo;     /* INT: low */
    uint64_t span;  /* INT: high - low (> 0) */
} draw;

/* the 4 values of one block of words */
static void block_values(const draw *d, const uint32_t w[4], tc_dtype dt, double v[4],
                         int64_t iv[4]) {
    for (int j = 0; j < 4 && d->kind == DRAW_UNIFORM; j++) {
        double x = to_dtype(d->a + (d->b - d->a) * uniform(w[j], dt), dt);
        v[j] = d->a < d->b && x >= d->b ? fmax(below(d->b, dt), to_dtype(d->a, dt)) : x;
    }
    for (int j = 0; j < 4 && d->kind == DRAW_NORMAL; j += 2) {
        double u1 = (double)((w[j] >> 8) + 1) * 0x1p-24; /* (0,1]: log is finite */
        double u2 = (double)(w[j + 1] >> 8) * 0x1p-24;
        double r = sqrt(-2.0 * log(u1)), theta = 6.283185307179586477 * u2;
        v[j] = d->a + d->b * r * cos(theta);
        v[j + 1] = d->a + d->b * r * sin(theta);
    }
    for (int j = 0; j < 4 && d->kind == DRAW_INT; j += 2) { /* two words per value */
        double u = ((double)(w[j] >> 5) * 67108864.0 + (double)(w[j + 1] >> 6)) * 0x1p-53;
        double f = floor(u * (double)d->span);
        uint64_t off = f >= (double)d->span ? d->span - 1 : (uint64_t)f;
        iv[j / 2] = (int64_t)((uint64_t)d->lo + off);
    }
}

/* fills n values of dt into data; returns the blocks used */
static uint64_t fill(void *data, int64_t n, tc_dtype dt, const draw *d) {
    int per = d->kind == DRAW_INT ? 2 : 4; /* values per block */
    uint64_t blocks = (uint64_t)(n + per - 1) / (uint64_t)per;
    for (uint64_t b = 0; b < blocks; b++) {
        uint32_t w[4];
        double v[4];
        int64_t iv[4];
        block_words(b, w);
        block_values(d, w, dt, v, iv);
        for (int j = 0; j < per && (int64_t)b * per + j < n; j++) {
            int64_t at = (int64_t)b * per + j;
            if (d->kind == DRAW_INT) tc_scalar_store_int(data, dt, at, iv[j]);
            else tc_scalar_store(data, dt, at, v[j]);
        }
    }
    return blocks;
}

static tc_tensor *random_tensor(const char *api, int ndim, const int64_t *shape, tc_dtype dt,
                                const char *device, const draw *d) {
    tc_lock();
    tc_tensor *out = NULL;
    int dev = -1;
    if (tc_tensor_check_shape(api, ndim, shape) != TC_OK || tc_tensor_check_dtype(api, dt) != TC_OK)
        goto done;
    bool is_int = d->kind == DRAW_INT;
    if (is_int ? (tc_dtypes[dt].is_float || dt == TC_BOOL) : !tc_dtypes[dt].is_float) {
        tc_error_set(TC_ERR_DTYPE, "%s: needs %s dtype, got %s", api,
                     is_int ? "an integer" : "a float", tc_dtypes[dt].name);
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
    uint64_t blocks = fill(data, n, dt, d);
    static const int64_t no_dims[1] = {0}; /* shape may be NULL for ndim 0 */
    out = tc_tensor_wrap(tc_engine_from_host(data, dt, ndim, shape ? shape : no_dims, dev));
    tc_free(data);
    if (out) rng_counter += blocks; /* a failed call changes nothing */
done:
    tc_unlock();
    return out;
}

TC_API tc_tensor *tc_rand(int ndim, const int64_t *shape, tc_dtype dt, const char *device) {
    TC_API_ENTER();
    draw d = {.kind = DRAW_UNIFORM, .a = 0, .b = 1};
    return random_tensor("tc_rand", ndim, shape, dt, device, &d);
}

TC_API tc_tensor *tc_randn(int ndim, const int64_t *shape, tc_dtype dt, const char *device) {
    TC_API_ENTER();
    draw d = {.kind = DRAW_NORMAL, .a = 0, .b = 1};
    return random_tensor("tc_randn", ndim, shape, dt, device, &d);
}

TC_API tc_tensor *tc_uniform(int ndim, const int64_t *shape, double low, double high, tc_dtype dt,
                             const char *device) {
    TC_API_ENTER();
    if (!isfinite(low) || !isfinite(high) || low > high)
        return tc_error_set(TC_ERR_INVALID, "tc_uniform: [low, high) = [%g, %g) needs finite "
                            "low <= high", low, high), NULL;
    draw d = {.kind = DRAW_UNIFORM, .a = low, .b = high};
    return random_tensor("tc_uniform", ndim, shape, dt, device, &d);
}

TC_API tc_tensor *tc_normal(int ndim, const int64_t *shape, double mean, double std, tc_dtype dt,
                            const char *device) {
    TC_API_ENTER();
    if (!isfinite(mean) || !isfinite(std) || std < 0)
        return tc_error_set(TC_ERR_INVALID, "tc_normal: mean %g and std %g must be finite, std "
                            ">= 0", mean, std), NULL;
    draw d = {.kind = DRAW_NORMAL, .a = mean, .b = std};
    return random_tensor("tc_normal", ndim, shape, dt, device, &d);
}

TC_API tc_tensor *tc_randint(int ndim, const int64_t *shape, int64_t low, int64_t high,
                             tc_dtype dt, const char *device) {
    TC_API_ENTER();
    if (low >= high)
        return tc_error_set(TC_ERR_INVALID, "tc_randint: low %lld must be below high %lld",
                            (long long)low, (long long)high), NULL;
    int64_t lo = 0, hi = 0; /* the range of an integer dt (bool is not range-checked) */
    if (tc_dtype_valid((int)dt) && dt != TC_BOOL && tc_dtype_int_range(dt, &lo, &hi) &&
        (low < lo || high - 1 > hi))
        return tc_error_set(TC_ERR_INVALID, "tc_randint: [%lld, %lld) does not fit in %s",
                            (long long)low, (long long)high, tc_dtypes[dt].name), NULL;
    draw d = {.kind = DRAW_INT, .lo = low, .span = (uint64_t)high - (uint64_t)low};
    return random_tensor("tc_randint", ndim, shape, dt, device, &d);
}
