/* dtype.c - dtype facts, promotion, half conversion and scalar access. */
#include "util.h"

#include <math.h>
#include <string.h>

const tc_dtype_info tc_dtypes[TC_DTYPE_COUNT] = {
    [TC_FLOAT32] = {"float32", "float", 4, true, true, 6},
    [TC_FLOAT16] = {"float16", "_Float16", 2, true, true, 5},
    [TC_INT32] = {"int32", "int", 4, false, true, 3},
    [TC_INT64] = {"int64", "long long", 8, false, true, 4},
    [TC_UINT8] = {"uint8", "unsigned char", 1, false, false, 1},
    [TC_BOOL] = {"bool", "_Bool", 1, false, false, 0},
    [TC_INT8] = {"int8", "signed char", 1, false, true, 1},
    [TC_INT16] = {"int16", "short", 2, false, true, 2},
    [TC_UINT16] = {"uint16", "unsigned short", 2, false, false, 2},
    [TC_UINT32] = {"uint32", "unsigned int", 4, false, false, 3},
    [TC_FLOAT64] = {"float64", "double", 8, true, true, 7},
    [TC_UINT64] = {"uint64", "unsigned long long", 8, false, false, 4},
    [TC_BFLOAT16] = {"bfloat16", "unsigned short", 2, true, true, 5}, /* cname: its bits */
};

bool tc_dtype_valid(int dt) {
    return dt >= 0 && dt < TC_DTYPE_COUNT;
}

/* the signed integer of n bytes */
static tc_dtype signed_of(size_t n) {
    return n <= 1 ? TC_INT8 : n == 2 ? TC_INT16 : n == 4 ? TC_INT32 : TC_INT64;
}

/* numpy's and tinygrad's promotion: a float over any integer (the wider
 * float of two); bool under everything; two integers of one signedness: the
 * wider; a signed and an unsigned one: the signed one when it is wider, else
 * the signed integer twice as wide as the unsigned one (uint8 and int8:
 * int16; uint32 and int32: int64) */
tc_dtype tc_dtype_promote(tc_dtype a, tc_dtype b) {
    const tc_dtype_info *x = &tc_dtypes[a], *y = &tc_dtypes[b];
    if (a == b || b == TC_BOOL) return a;
    if (a == TC_BOOL) return b;
    if (x->is_float || y->is_float) {
        if ((a == TC_FLOAT16 && b == TC_BFLOAT16) || (a == TC_BFLOAT16 && b == TC_FLOAT16))
            return TC_FLOAT32; /* neither holds the other: torch's and tinygrad's float32 */
        if (x->is_float && y->is_float) return x->priority >= y->priority ? a : b;
        return x->is_float ? a : b;
    }
    if (x->is_signed == y->is_signed) return x->size >= y->size ? a : b;
    const tc_dtype_info *u = x->is_signed ? y : x, *si = x->is_signed ? x : y;
    if (si->size > u->size) return x->is_signed ? a : b;
    if (u->size == 8) return TC_FLOAT64; /* uint64 and a signed integer: numpy's float64 */
    return signed_of(2 * u->size);
}

bool tc_dtype_int_range(tc_dtype dt, int64_t *lo, int64_t *hi) {
    const tc_dtype_info *d = &tc_dtypes[dt];
    if (d->is_float) return false;
    int bits = dt == TC_BOOL ? 1 : 8 * (int)d->size;
    if (bits == 64) *lo = d->is_signed ? INT64_MIN : 0, *hi = INT64_MAX;
    else if (d->is_signed) *lo = -((int64_t)1 << (bits - 1)), *hi = ((int64_t)1 << (bits - 1)) - 1;
    else *lo = 0, *hi = ((int64_t)1 << bits) - 1;
    return true;
}

int64_t tc_dtype_wrap(tc_dtype dt, int64_t v) {
    const tc_dtype_info *d = &tc_dtypes[dt];
    if (d->is_float || d->size == 8) return v;
    if (dt == TC_BOOL) return v != 0;
    int bits = 8 * (int)d->size;
    uint64_t low = (uint64_t)v & ((UINT64_C(1) << bits) - 1);
    if (d->is_signed && (low >> (bits - 1)) & 1) return (int64_t)(low | ~((UINT64_C(1) << bits) - 1));
    return (int64_t)low;
}

double tc_dtype_int_to_double(tc_dtype dt, int64_t v) {
    return dt == TC_UINT64 ? (double)(uint64_t)v : (double)v;
}

int64_t tc_dtype_double_to_int(tc_dtype dt, double v) {
    if (dt == TC_UINT64 && v >= 9223372036854775808.0) return (int64_t)(uint64_t)v;
    return (int64_t)v;
}

double tc_dtype_round(tc_dtype dt, double v) {
    switch (dt) {
    case TC_FLOAT16: return tc_half_to_float(tc_float_to_half((float)v));
    case TC_BFLOAT16: return tc_bf16_to_float(tc_float_to_bf16((float)v));
    case TC_FLOAT32: return (float)v;
    case TC_FLOAT64:
    case TC_UINT64:
    case TC_INT32:
    case TC_INT64:
    case TC_UINT8:
    case TC_BOOL:
    case TC_INT8:
    case TC_INT16:
    case TC_UINT16:
    case TC_UINT32:
    case TC_DTYPE_COUNT: break;
    }
    return v;
}

tc_dtype tc_dtype_float_acc(tc_dtype dt) {
    return dt == TC_FLOAT64 ? TC_FLOAT64 : TC_FLOAT32;
}

float tc_bf16_to_float(uint16_t b) {
    uint32_t bits = (uint32_t)b << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t tc_float_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffff) > 0x7f800000) return (uint16_t)((x >> 16) | 0x40); /* NaN, quieted */
    x += 0x7fff + ((x >> 16) & 1); /* ties to even; the largest values carry into inf */
    return (uint16_t)(x >> 16);
}

float tc_half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 31, m = h & 1023, bits;
    if (e == 31) bits = sign | 0x7f800000 | (m << 13);
    else if (e) bits = sign | ((e + 112) << 23) | (m << 13);
    else if (!m) bits = sign;
    else { /* subnormal: normalise */
        int shift = 0;
        while (!(m & 1024)) { m <<= 1; shift++; }
        bits = sign | ((uint32_t)(113 - shift) << 23) | ((m & 1023) << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t tc_float_to_half(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    uint32_t ax = x & 0x7fffffff;
    if (ax >= 0x7f800000) return sign | 0x7c00 | (ax > 0x7f800000 ? 0x200 : 0);
    if (ax >= 0x477ff000) return sign | 0x7c00; /* rounds to >= 65520: inf */
    if (ax < 0x38800000) {                      /* subnormal or zero in half */
        float a;
        memcpy(&a, &ax, 4);
        return sign | (uint16_t)lrintf(a * 16777216.0f); /* 2^24, ties to even */
    }
    uint32_t e = (ax >> 23) - 112, m = ax & 0x7fffff;
    uint32_t h = (e << 10) | (m >> 13), rest = m & 0x1fff;
    if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) h++;
    return sign | (uint16_t)h;
}

double tc_scalar_load(const void *p, tc_dtype dt, int64_t i) {
    if (dt == TC_FLOAT64) return ((const double *)p)[i];
    if (dt == TC_FLOAT32) return ((const float *)p)[i];
    if (dt == TC_FLOAT16) return tc_half_to_float(((const uint16_t *)p)[i]);
    if (dt == TC_BFLOAT16) return tc_bf16_to_float(((const uint16_t *)p)[i]);
    return tc_dtype_int_to_double(dt, tc_scalar_load_int(p, dt, i));
}

void tc_scalar_store(void *p, tc_dtype dt, int64_t i, double v) {
    switch (dt) {
    case TC_FLOAT32: ((float *)p)[i] = (float)v; return;
    case TC_FLOAT16: ((uint16_t *)p)[i] = tc_float_to_half((float)v); return;
    case TC_INT32: ((int32_t *)p)[i] = (int32_t)v; return;
    case TC_INT64: ((int64_t *)p)[i] = (int64_t)v; return;
    case TC_UINT8: ((uint8_t *)p)[i] = (uint8_t)v; return;
    case TC_BOOL: ((uint8_t *)p)[i] = v != 0; return;
    case TC_INT8: ((int8_t *)p)[i] = (int8_t)v; return;
    case TC_INT16: ((int16_t *)p)[i] = (int16_t)v; return;
    case TC_UINT16: ((uint16_t *)p)[i] = (uint16_t)v; return;
    case TC_UINT32: ((uint32_t *)p)[i] = (uint32_t)v; return;
    case TC_FLOAT64: ((double *)p)[i] = v; return;
    case TC_UINT64: ((uint64_t *)p)[i] = (uint64_t)tc_dtype_double_to_int(dt, v); return;
    case TC_BFLOAT16: ((uint16_t *)p)[i] = tc_float_to_bf16((float)v); return;
    case TC_DTYPE_COUNT: break;
    }
}

int64_t tc_scalar_load_int(const void *p, tc_dtype dt, int64_t i) {
    switch (dt) {
    case TC_INT64: return ((const int64_t *)p)[i];
    case TC_INT32: return ((const int32_t *)p)[i];
    case TC_UINT8: return ((const uint8_t *)p)[i];
    case TC_BOOL: return ((const uint8_t *)p)[i] != 0;
    case TC_INT8: return ((const int8_t *)p)[i];
    case TC_INT16: return ((const int16_t *)p)[i];
    case TC_UINT16: return ((const uint16_t *)p)[i];
    case TC_UINT32: return ((const uint32_t *)p)[i];
    case TC_UINT64: return (int64_t)((const uint64_t *)p)[i];
    case TC_FLOAT32:
    case TC_FLOAT16:
    case TC_FLOAT64:
    case TC_BFLOAT16:
    case TC_DTYPE_COUNT: break;
    }
    return (int64_t)tc_scalar_load(p, dt, i);
}

void tc_scalar_store_int(void *p, tc_dtype dt, int64_t i, int64_t v) {
    switch (dt) {
    case TC_INT64: ((int64_t *)p)[i] = v; return;
    case TC_INT32: ((int32_t *)p)[i] = (int32_t)tc_dtype_wrap(dt, v); return;
    case TC_UINT8: ((uint8_t *)p)[i] = (uint8_t)tc_dtype_wrap(dt, v); return;
    case TC_BOOL: ((uint8_t *)p)[i] = v != 0; return;
    case TC_INT8: ((int8_t *)p)[i] = (int8_t)tc_dtype_wrap(dt, v); return;
    case TC_INT16: ((int16_t *)p)[i] = (int16_t)tc_dtype_wrap(dt, v); return;
    case TC_UINT16: ((uint16_t *)p)[i] = (uint16_t)tc_dtype_wrap(dt, v); return;
    case TC_UINT32: ((uint32_t *)p)[i] = (uint32_t)tc_dtype_wrap(dt, v); return;
    case TC_UINT64: ((uint64_t *)p)[i] = (uint64_t)v; return;
    case TC_FLOAT32:
    case TC_FLOAT16:
    case TC_FLOAT64:
    case TC_BFLOAT16:
    case TC_DTYPE_COUNT: break;
    }
    tc_scalar_store(p, dt, i, (double)v);
}
