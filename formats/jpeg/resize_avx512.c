/* The AVX-512 tiers of the crop-resize (resize_kernels.h): four outputs of a row per 512-bit register.
 *
 * Per quad of outputs, one 64-byte load (16 RGBX pixels) holds all their taps (a downscale up to about 2.5x).
 * With VBMI (Ice Lake, Sapphire Rapids and later Xeons, Zen 4 and later) one byte permute per pair of taps (vpermt2b) forms the
 * 16-bit pairs vpdpwssd takes. Without it (Skylake-SP, Cascade Lake), one dword permute (vpermd, AVX-512F)
 * puts each output's four tap pixels in its own 128-bit lane, and one pshufb per pair of taps forms the same
 * pairs for pmaddwd: one more shuffle per pair of taps than VBMI, against the AVX2 kernel's two outputs per
 * register. The vertical pass forms sixteen pixels per register; VBMI packs them to RGB with one byte permute,
 * the plain tier with pshufb inside each lane and one dword permute across them. Integer sums do not depend
 * on their order: every tier gives the same pixels. */
#include "resize_kernels.h"

#if HAVE_AVX2
#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl")))
#define VBMI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi,avx512vnni")))
#define INLINE static inline __attribute__((always_inline))
#define FROM_ZERO 64 /* a byte permute index into vpermt2b's second table: the zero register */

/* Bytes of index per quad: VBMI one 64-byte permute per pair of taps, plain one per two pairs. */
static size_t quad_index_bytes(int pairs, int vbmi) { return 64 * (size_t)(vbmi ? pairs : (pairs + 1) / 2); }

/* VBMI: a lane (channel c of one output) of a pair's permute, as one little-endian word: its first pixel's byte,
 * a zero, its second pixel's byte (the next pixel, 4 bytes on), a zero; t: its first pixel in the load. */
static uint32_t byte_lane(int taps, uint32_t t, uint32_t c) {
    const uint32_t zeros = (uint32_t)FROM_ZERO << 8 | (uint32_t)FROM_ZERO << 24;
    return taps >= 2   ? zeros | (4 * t + c) | (4 * t + 4 + c) << 16
           : taps == 1 ? zeros | (4 * t + c) | (uint32_t)FROM_ZERO << 16
                       : zeros | FROM_ZERO | (uint32_t)FROM_ZERO << 16;
}

int zmm_plan_make(zmm_plan *z, const axis_plan *h, int width, int vbmi) {
    z->pairs = h->most < 2 ? 1 : (h->most + 1) / 2; /* 2 pairs for downscales up to 2x, where ksize is 5 */
    z->quads = (h->n + 3) / 4;
    z->vbmi = vbmi;
    if (width < 16)
        return 0;
    for (int q = 0; q < z->quads; q++) {
        int a = 4 * q, d = 4 * q + 3 < h->n ? 4 * q + 3 : h->n - 1;
        int base = h->first[a] < width - 16 ? h->first[a] : width - 16;
        if (h->first[d] + h->count[d] - base > 16)
            return 0;
    }
    size_t step = quad_index_bytes(z->pairs, vbmi);
    if (!resize_reserve(&z->base, &z->base_cap, sizeof(int) * (size_t)z->quads) ||
        !resize_reserve(&z->index, &z->index_cap, (size_t)z->quads * step) ||
        !resize_reserve(&z->kv, &z->kv_cap, sizeof(int32_t) * 16 * (size_t)z->quads * z->pairs))
        return 0;
    for (int q = 0; q < z->quads; q++) {
        int base = h->first[4 * q] < width - 16 ? h->first[4 * q] : width - 16;
        z->base[q] = base;
        uint32_t *index = (uint32_t *)(void *)(z->index + (size_t)q * step);
        for (int j = 0; j < 4; j++) {
            int xx = 4 * q + j, real = xx < h->n;
            uint32_t t = real ? (uint32_t)(h->first[xx] - base) : 0; /* its first pixel in the load */
            for (int p = 0; p < z->pairs; p++) {
                int taps = real ? h->count[xx] - 2 * p : 0; /* this pair's: 2, 1 or none */
                const int16_t *k = real ? h->k + (size_t)xx * h->ksize + 2 * p : NULL;
                uint32_t pair = taps >= 2   ? (uint32_t)(uint16_t)k[0] | (uint32_t)(uint16_t)k[1] << 16
                                : taps == 1 ? (uint32_t)(uint16_t)k[0]
                                            : 0;
                int32_t *kv = z->kv + ((size_t)q * z->pairs + p) * 16;
                for (uint32_t c = 0; c < 4; c++) {
                    kv[4 * j + c] = (int32_t)pair;
                    if (vbmi)
                        index[16 * p + 4 * j + c] = byte_lane(taps, t + 2 * (uint32_t)p, c);
                }
            }
            for (int g = 0; !vbmi && g < (z->pairs + 1) / 2; g++) /* lane j of group g: pixels t + 4g .. + 3 */
                for (uint32_t i = 0; i < 4; i++) {           /* past the taps: coefficient 0, any pixel */
                    uint32_t pixel = t + 4 * (uint32_t)g + i;
                    index[16 * g + 4 * j + i] = pixel < 16 ? pixel : 15;
                }
        }
    }
    return 1;
}

void zmm_plan_free(zmm_plan *z) {
    free(z->base);
    free(z->index);
    free(z->kv);
}

/* The sums of one quad of outputs (four RGBX pixels) from its 16-pixel load, over `pairs` pairs of taps. VBMI:
 * per pair one byte permute and one vpdpwssd (VNNI: multiply-add and accumulate in one instruction). */
VBMI INLINE __m512i quad_vbmi(const unsigned char *load, const uint8_t *index, const int32_t *kv, int pairs,
                              __m512i half) {
    const __m512i zero = _mm512_setzero_si512();
    __m512i table = _mm512_loadu_si512((const void *)load);
    __m512i sum = half;
    for (int p = 0; p < pairs; p++) {
        __m512i px = _mm512_permutex2var_epi8(table, _mm512_loadu_si512((const void *)(index + 64 * p)), zero);
        sum = _mm512_dpwssd_epi32(sum, px, _mm512_loadu_si512((const void *)(kv + 16 * p)));
    }
    return sum;
}

/* Plain AVX-512: per two pairs of taps one dword permute (an output's four pixels into its lane), then per pair
 * one pshufb into 16-bit pairs of one channel of two pixels, and pmaddwd. */
AVX512 INLINE __m512i quad_plain(const unsigned char *load, const uint8_t *index, const int32_t *kv, int pairs,
                                 __m512i half) {
    const __m512i lo = _mm512_broadcast_i32x4(_mm_setr_epi8(0, -1, 4, -1, 1, -1, 5, -1, 2, -1, 6, -1, 3, -1, 7, -1));
    const __m512i hi = _mm512_broadcast_i32x4(_mm_setr_epi8(8, -1, 12, -1, 9, -1, 13, -1, 10, -1, 14, -1, 11, -1, 15,
                                                            -1));
    __m512i table = _mm512_loadu_si512((const void *)load);
    __m512i sum = half;
    for (int p = 0; p < pairs; p += 2) {
        __m512i px = _mm512_permutexvar_epi32(_mm512_loadu_si512((const void *)(index + 32 * p)), table);
        sum = _mm512_add_epi32(sum, _mm512_madd_epi16(_mm512_shuffle_epi8(px, lo),
                                                      _mm512_loadu_si512((const void *)(kv + 16 * p))));
        if (p + 1 < pairs)
            sum = _mm512_add_epi32(sum, _mm512_madd_epi16(_mm512_shuffle_epi8(px, hi),
                                                          _mm512_loadu_si512((const void *)(kv + 16 * p + 16))));
    }
    return sum;
}

/* The horizontal pass of one row, with the pairs of taps a constant the compiler unrolls (a loop over them
 * measured 13.5 cycles a quad, most of it the loop's own bookkeeping). Four quads are packed to bytes together
 * (two packssdw, one packuswb and a dword transpose: half the instructions of packing each). QUAD: quad_vbmi or
 * quad_plain; the body is the same for both tiers, compiled for each. */
#define H_ROW_PAIRS(QUAD)                                                                                         \
    const __m512i half = _mm512_set1_epi32(1 << (precision - 1));                                                 \
    const __m512i zero = _mm512_setzero_si512();                                                                  \
    const __m512i transpose = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);            \
    const __m128i shift = _mm_cvtsi32_si128(precision);                                                           \
    const size_t step = quad_index_bytes(pairs, z->vbmi);                                                         \
    const uint8_t *index = z->index;                                                                              \
    const int32_t *kv = z->kv;                                                                                    \
    int q = 0, whole = n / 4;                                                                                     \
    for (; q + 4 <= whole; q += 4) {                                                                              \
        __m512i s[4];                                                                                             \
        for (int i = 0; i < 4; i++, index += step, kv += 16 * pairs)                                              \
            s[i] = _mm512_sra_epi32(QUAD(in + 4 * (size_t)z->base[q + i], index, kv, pairs, half), shift);        \
        /* 128-bit lane L of the packed bytes: output L of quads q..q+3; the transpose puts them in order */      \
        __m512i bytes = _mm512_packus_epi16(_mm512_packs_epi32(s[0], s[1]), _mm512_packs_epi32(s[2], s[3]));      \
        _mm512_storeu_si512((void *)(out + 16 * (size_t)q), _mm512_permutexvar_epi32(transpose, bytes));          \
    }                                                                                                             \
    for (; q < z->quads; q++, index += step, kv += 16 * pairs) {                                                  \
        __m512i sum = _mm512_max_epi32(                                                                           \
            _mm512_sra_epi32(QUAD(in + 4 * (size_t)z->base[q], index, kv, pairs, half), shift), zero);            \
        int left = n - 4 * q < 4 ? n - 4 * q : 4;                                                                 \
        _mm_mask_storeu_epi8(out + 16 * (size_t)q, (__mmask16)((1u << (4 * left)) - 1),                          \
                             _mm512_cvtusepi32_epi8(sum));                                                        \
    }

VBMI INLINE void h_row_vbmi(const unsigned char *in, unsigned char *out, const zmm_plan *z, int n, int precision,
                            int pairs) {
    H_ROW_PAIRS(quad_vbmi)
}

AVX512 INLINE void h_row_plain(const unsigned char *in, unsigned char *out, const zmm_plan *z, int n, int precision,
                               int pairs) {
    H_ROW_PAIRS(quad_plain)
}

/* One pass per pairs count the compiler unrolls: one pair upscaling, two downscaling up to 2x, three up to 3x. */
VBMI static void h_rows_vbmi(const unsigned char *in, unsigned char *out, const zmm_plan *z, int n, int precision) {
    switch (z->pairs) {
    case 1:
        h_row_vbmi(in, out, z, n, precision, 1);
        break;
    case 2:
        h_row_vbmi(in, out, z, n, precision, 2);
        break;
    case 3:
        h_row_vbmi(in, out, z, n, precision, 3);
        break;
    default:
        h_row_vbmi(in, out, z, n, precision, z->pairs);
    }
}

AVX512 static void h_rows_plain(const unsigned char *in, unsigned char *out, const zmm_plan *z, int n,
                                int precision) {
    switch (z->pairs) {
    case 1:
        h_row_plain(in, out, z, n, precision, 1);
        break;
    case 2:
        h_row_plain(in, out, z, n, precision, 2);
        break;
    case 3:
        h_row_plain(in, out, z, n, precision, 3);
        break;
    default:
        h_row_plain(in, out, z, n, precision, z->pairs);
    }
}

void h_row_zmm(const unsigned char *in, unsigned char *out, const zmm_plan *z, int n, int precision) {
    if (z->vbmi)
        h_rows_vbmi(in, out, z, n, precision);
    else
        h_rows_plain(in, out, z, n, precision);
}

/* The vertical sums of sixteen pixels (m of them loaded) from count rows, into s0..s3, each RGBX pixel's four
 * channels as int32; then packed to bytes, the pixels in order. ACC: vpdpwssd (VNNI) or pmaddwd and an add. */
#define V_SUMS(ACC)                                                                                               \
    __mmask64 load = m == 16 ? ~(__mmask64)0 : (((__mmask64)1 << (4 * m)) - 1);                                  \
    __m512i s0 = half, s1 = half, s2 = half, s3 = half;                                                           \
    for (int y = 0; y < count; y += 2) {                                                                          \
        int second = y + 1 < count;                                                                               \
        __m512i mk = _mm512_set1_epi32(                                                                           \
            (int32_t)((uint32_t)(uint16_t)k[y] | (second ? (uint32_t)(uint16_t)k[y + 1] << 16 : 0)));             \
        __m512i a = _mm512_maskz_loadu_epi8(load, rows[y] + 4 * (size_t)xx);                                      \
        __m512i b = second ? _mm512_maskz_loadu_epi8(load, rows[y + 1] + 4 * (size_t)xx) : zero;                  \
        __m512i ab = _mm512_unpacklo_epi8(a, b);                                                                  \
        s0 = ACC(s0, _mm512_unpacklo_epi8(ab, zero), mk);                                                         \
        s1 = ACC(s1, _mm512_unpackhi_epi8(ab, zero), mk);                                                         \
        ab = _mm512_unpackhi_epi8(a, b);                                                                          \
        s2 = ACC(s2, _mm512_unpacklo_epi8(ab, zero), mk);                                                         \
        s3 = ACC(s3, _mm512_unpackhi_epi8(ab, zero), mk);                                                         \
    }                                                                                                             \
    s0 = _mm512_packs_epi32(_mm512_srai_epi32(s0, precision), _mm512_srai_epi32(s1, precision));                 \
    s2 = _mm512_packs_epi32(_mm512_srai_epi32(s2, precision), _mm512_srai_epi32(s3, precision));                 \
    __m512i pixels = _mm512_packus_epi16(s0, s2); /* RGBX of pixels xx..xx+m-1, in order */

#define ACC_VNNI(s, x, mk) _mm512_dpwssd_epi32(s, x, mk)
#define ACC_PLAIN(s, x, mk) _mm512_add_epi32(s, _mm512_madd_epi16(x, mk))

/* VBMI: RGB of the pixels (the last one first if flip) by one byte permute, written with a masked store. */
VBMI static void v_row_vbmi(const unsigned char *const *rows, const int16_t *k, int count, int precision, int n,
                            unsigned char *out, int flip) {
    const __m512i half = _mm512_set1_epi32(1 << (precision - 1));
    const __m512i zero = _mm512_setzero_si512();
    uint8_t order[64] = {0};
    int order_for = -1;
    __m512i rgb = zero;
    for (int xx = 0; xx < n; xx += 16) {
        int m = n - xx < 16 ? n - xx : 16;
        V_SUMS(ACC_VNNI)
        if (order_for != m) {
            for (int i = 0; i < 3 * m; i++)
                order[i] = (uint8_t)(4 * (flip ? m - 1 - i / 3 : i / 3) + i % 3);
            rgb = _mm512_loadu_si512((const void *)order);
            order_for = m;
        }
        pixels = _mm512_permutexvar_epi8(rgb, pixels);
        unsigned char *to = out + 3 * (size_t)(flip ? n - xx - m : xx);
        _mm512_mask_storeu_epi8(to, ((__mmask64)1 << (3 * m)) - 1, pixels);
    }
}

/* Plain AVX-512: the pixels reversed by a dword permute if flip, RGB inside each lane by pshufb (12 bytes a
 * lane), the lanes' 12 bytes put together by a dword permute, written with a masked store. */
AVX512 static void v_row_plain(const unsigned char *const *rows, const int16_t *k, int count, int precision, int n,
                               unsigned char *out, int flip) {
    const __m512i half = _mm512_set1_epi32(1 << (precision - 1));
    const __m512i zero = _mm512_setzero_si512();
    const __m512i rgb = _mm512_broadcast_i32x4(_mm_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1));
    const __m512i together = _mm512_setr_epi32(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, 0, 0, 0, 0);
    int reverse_for = -1;
    __m512i reverse = zero;
    for (int xx = 0; xx < n; xx += 16) {
        int m = n - xx < 16 ? n - xx : 16;
        V_SUMS(ACC_PLAIN)
        if (flip) {
            if (reverse_for != m) {
                int32_t order[16] = {0};
                for (int i = 0; i < m; i++)
                    order[i] = m - 1 - i;
                reverse = _mm512_loadu_si512((const void *)order);
                reverse_for = m;
            }
            pixels = _mm512_permutexvar_epi32(reverse, pixels);
        }
        pixels = _mm512_permutexvar_epi32(together, _mm512_shuffle_epi8(pixels, rgb));
        unsigned char *to = out + 3 * (size_t)(flip ? n - xx - m : xx);
        _mm512_mask_storeu_epi8(to, ((__mmask64)1 << (3 * m)) - 1, pixels);
    }
}

void v_row_zmm(const unsigned char *const *rows, const int16_t *k, int count, int precision, int n,
               unsigned char *out, int flip, int vbmi) {
    if (vbmi)
        v_row_vbmi(rows, k, count, precision, n, out, flip);
    else
        v_row_plain(rows, k, count, precision, n, out, flip);
}

int resize_cpu_tier(void) {
    static int found = -1; /* a benign race: every thread finds the same */
    if (found < 0) {
        __builtin_cpu_init();
        int avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                     __builtin_cpu_supports("avx512vl");
        found = avx512 && __builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("avx512vnni") ? TIER_VBMI
                : avx512                                                                              ? TIER_AVX512
                : __builtin_cpu_supports("avx2")                                                      ? TIER_AVX2
                                                                                                      : TIER_SCALAR;
    }
    return found;
}
#endif
