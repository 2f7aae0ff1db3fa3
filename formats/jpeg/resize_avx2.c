/* The AVX2 tier of the crop-resize (resize_kernels.h): Intel Haswell to Comet Lake and Alder Lake on, AMD Zen 1-3.
 *
 * The horizontal pass forms two outputs per register: each output's taps (the most any output has, rounded
 * up to a pair) from a window that stays inside the row, as 16-bit pairs of pixels (pshufb) multiplied by
 * their pairs of coefficients (pmaddwd). Eight outputs are packed to bytes together (two packssdw, one
 * packuswb and one dword permute, one 32-byte store): packing each pair apart took two extracts and two
 * 4-byte stores a pair. The vertical pass forms eight pixels per register and writes them as RGB. */
#include "resize_kernels.h"

#if HAVE_AVX2
#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

#define AVX2 __attribute__((target("avx2")))

/* Every output over the same even number of taps, from a window start[xx] that stays inside the row (an
 * output near the right edge gets its window moved left and zero coefficients in front), and per pair of
 * outputs (A, B), per pair of taps, the coefficients as 8 int32: the pair (k_t, k_t+1) of A four times, then
 * B's. */
int simd_plan_make(simd_plan *s, const axis_plan *h, int width) {
    s->taps = h->most < 2 ? 2 : h->most + (h->most & 1);
    if (width < s->taps)
        return 0;
    int pairs = s->taps / 2, outputs = (h->n + 1) / 2;
    if (!resize_reserve(&s->window, &s->window_cap, sizeof(int16_t) * (size_t)s->taps) ||
        !resize_reserve(&s->start, &s->start_cap, sizeof(int) * (size_t)h->n) ||
        !resize_reserve(&s->kv, &s->kv_cap, sizeof(int32_t) * 8 * (size_t)outputs * pairs))
        return 0;
    int16_t *window = s->window;
    for (int xx = 0; xx < 2 * outputs; xx++) {
        int source = xx < h->n ? xx : h->n - 1; /* an odd count: the last output twice */
        int start = h->first[source] <= width - s->taps ? h->first[source] : width - s->taps;
        if (xx < h->n)
            s->start[xx] = start;
        memset(window, 0, sizeof(int16_t) * (size_t)s->taps);
        memcpy(window + (h->first[source] - start), h->k + (size_t)source * h->ksize,
               sizeof(int16_t) * (size_t)h->count[source]);
        for (int p = 0; p < pairs; p++) {
            int32_t pair = (int32_t)((uint32_t)(uint16_t)window[2 * p] | (uint32_t)(uint16_t)window[2 * p + 1] << 16);
            int32_t *lane = s->kv + ((size_t)(xx / 2) * pairs + p) * 8 + 4 * (xx & 1);
            lane[0] = lane[1] = lane[2] = lane[3] = pair;
        }
    }
    return 1;
}

void simd_plan_free(simd_plan *s) {
    free(s->start);
    free(s->kv);
    free(s->window);
}

/* The sums of outputs xx (low half) and b (high half), before the shift. */
AVX2 static inline __attribute__((always_inline)) __m256i pair_sum(const unsigned char *in, const simd_plan *s,
                                                                   int xx, int b, int pairs, __m256i half) {
    const __m256i lo = _mm256_set_epi8(-1, 7, -1, 3, -1, 6, -1, 2, -1, 5, -1, 1, -1, 4, -1, 0, -1, 7, -1, 3, -1, 6,
                                       -1, 2, -1, 5, -1, 1, -1, 4, -1, 0);
    const __m256i hi = _mm256_set_epi8(-1, 15, -1, 11, -1, 14, -1, 10, -1, 13, -1, 9, -1, 12, -1, 8, -1, 15, -1, 11,
                                       -1, 14, -1, 10, -1, 13, -1, 9, -1, 12, -1, 8);
    const unsigned char *pa = in + 4 * (size_t)s->start[xx], *pb = in + 4 * (size_t)s->start[b];
    const __m256i *k = (const __m256i *)(s->kv + (size_t)(xx / 2) * pairs * 8);
    __m256i sum = half;
    int p = 0;
    for (; p + 2 <= pairs; p += 2) { /* four taps of A and B: two pixels per 16-bit pair */
        __m256i px = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(pa + 8 * p))),
                                             _mm_loadu_si128((const __m128i *)(pb + 8 * p)), 1);
        sum = _mm256_add_epi32(sum, _mm256_madd_epi16(_mm256_shuffle_epi8(px, lo), _mm256_loadu_si256(k + p)));
        sum = _mm256_add_epi32(sum, _mm256_madd_epi16(_mm256_shuffle_epi8(px, hi), _mm256_loadu_si256(k + p + 1)));
    }
    if (p < pairs) {
        __m256i px = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadl_epi64((const __m128i *)(pa + 8 * p))),
                                             _mm_loadl_epi64((const __m128i *)(pb + 8 * p)), 1);
        sum = _mm256_add_epi32(sum, _mm256_madd_epi16(_mm256_shuffle_epi8(px, lo), _mm256_loadu_si256(k + p)));
    }
    return sum;
}

/* The pairs of taps a constant the compiler unrolls (2 for downscales up to 2x, the training crops'). */
AVX2 static inline __attribute__((always_inline)) void h_row_pairs(const unsigned char *in, unsigned char *out,
                                                                   const simd_plan *s, int n, int precision,
                                                                   int pairs) {
    const __m256i half = _mm256_set1_epi32(1 << (precision - 1));
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    const __m128i shift = _mm_cvtsi32_si128(precision);
    int xx = 0;
    for (; xx + 8 <= n; xx += 8) { /* lane 0 of the packed bytes: outputs xx, +2, +4, +6; lane 1 the odd ones */
        __m256i s0 = _mm256_sra_epi32(pair_sum(in, s, xx, xx + 1, pairs, half), shift);
        __m256i s1 = _mm256_sra_epi32(pair_sum(in, s, xx + 2, xx + 3, pairs, half), shift);
        __m256i s2 = _mm256_sra_epi32(pair_sum(in, s, xx + 4, xx + 5, pairs, half), shift);
        __m256i s3 = _mm256_sra_epi32(pair_sum(in, s, xx + 6, xx + 7, pairs, half), shift);
        __m256i bytes = _mm256_packus_epi16(_mm256_packs_epi32(s0, s1), _mm256_packs_epi32(s2, s3));
        _mm256_storeu_si256((__m256i *)(out + 4 * (size_t)xx), _mm256_permutevar8x32_epi32(bytes, order));
    }
    for (; xx < n; xx += 2) {
        int b = xx + 1 < n ? xx + 1 : xx;
        __m256i sum = _mm256_sra_epi32(pair_sum(in, s, xx, b, pairs, half), shift);
        sum = _mm256_packs_epi32(sum, sum);
        sum = _mm256_packus_epi16(sum, sum);
        uint32_t pixel = (uint32_t)_mm_cvtsi128_si32(_mm256_castsi256_si128(sum));
        memcpy(out + 4 * (size_t)xx, &pixel, 4);
        if (b != xx) {
            pixel = (uint32_t)_mm_cvtsi128_si32(_mm256_extracti128_si256(sum, 1));
            memcpy(out + 4 * (size_t)b, &pixel, 4);
        }
    }
}

AVX2 void h_row_avx2(const unsigned char *in, unsigned char *out, const simd_plan *s, int n, int precision) {
    switch (s->taps / 2) {
    case 1:
        h_row_pairs(in, out, s, n, precision, 1);
        break;
    case 2:
        h_row_pairs(in, out, s, n, precision, 2);
        break;
    case 3:
        h_row_pairs(in, out, s, n, precision, 3);
        break;
    default:
        h_row_pairs(in, out, s, n, precision, s->taps / 2);
    }
}

/* The vertical pass of one output row, eight pixels at a time, packed to RGB at out (mirrored if flip);
 * out_end bounds the 4 bytes each 12-byte store writes past its pixels. */
AVX2 void v_row_avx2(const unsigned char *const *rows, const int16_t *k, int count, int precision, int n,
                     unsigned char *out, int flip, const unsigned char *out_end) {
    const __m256i half = _mm256_set1_epi32(1 << (precision - 1));
    const __m256i zero = _mm256_setzero_si256();
    const __m256i rgb = _mm256_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1, 0, 1, 2, 4, 5, 6, 8,
                                         9, 10, 12, 13, 14, -1, -1, -1, -1);
    const __m256i reverse = _mm256_setr_epi32(7, 6, 5, 4, 3, 2, 1, 0);
    int groups = n / 8;
    for (int g = 0; g < groups; g++) {
        int xx = 8 * (flip ? groups - 1 - g : g); /* stores in rising addresses: each overwrites the last one's spill */
        __m256i s0 = half, s1 = half, s2 = half, s3 = half;
        for (int y = 0; y < count; y += 2) {
            int second = y + 1 < count;
            __m256i mk = _mm256_set1_epi32(
                (int32_t)((uint32_t)(uint16_t)k[y] | (second ? (uint32_t)(uint16_t)k[y + 1] << 16 : 0)));
            __m256i a = _mm256_loadu_si256((const __m256i *)(rows[y] + 4 * (size_t)xx));
            __m256i b = second ? _mm256_loadu_si256((const __m256i *)(rows[y + 1] + 4 * (size_t)xx)) : zero;
            __m256i ab = _mm256_unpacklo_epi8(a, b);
            s0 = _mm256_add_epi32(s0, _mm256_madd_epi16(_mm256_unpacklo_epi8(ab, zero), mk));
            s1 = _mm256_add_epi32(s1, _mm256_madd_epi16(_mm256_unpackhi_epi8(ab, zero), mk));
            ab = _mm256_unpackhi_epi8(a, b);
            s2 = _mm256_add_epi32(s2, _mm256_madd_epi16(_mm256_unpacklo_epi8(ab, zero), mk));
            s3 = _mm256_add_epi32(s3, _mm256_madd_epi16(_mm256_unpackhi_epi8(ab, zero), mk));
        }
        s0 = _mm256_packs_epi32(_mm256_srai_epi32(s0, precision), _mm256_srai_epi32(s1, precision));
        s2 = _mm256_packs_epi32(_mm256_srai_epi32(s2, precision), _mm256_srai_epi32(s3, precision));
        __m256i pixels = _mm256_packus_epi16(s0, s2); /* RGBX of pixels xx..xx+3 | xx+4..xx+7 */
        if (flip)
            pixels = _mm256_permutevar8x32_epi32(pixels, reverse);
        pixels = _mm256_shuffle_epi8(pixels, rgb); /* 12 bytes of RGB in each half, then 4 spare */
        unsigned char *to = out + 3 * (size_t)(flip ? n - 8 - xx : xx);
        if (to + 28 <= out_end) {
            _mm_storeu_si128((__m128i *)to, _mm256_castsi256_si128(pixels));
            _mm_storeu_si128((__m128i *)(to + 12), _mm256_extracti128_si256(pixels, 1));
        } else {
            unsigned char spill[32];
            _mm256_storeu_si256((__m256i *)spill, pixels);
            memcpy(to, spill, 12);
            memcpy(to + 12, spill + 16, 12);
        }
    }
    int done = 8 * groups;
    if (done < n) { /* the last n % 8 pixels */
        const unsigned char *tail[64];
        for (int y = 0; y < count && y < 64; y++)
            tail[y] = rows[y] + 4 * (size_t)done;
        if (count <= 64)
            v_row_scalar(tail, k, count, precision, n - done, flip ? out : out + 3 * (size_t)done, flip);
        else
            v_row_scalar(rows, k, count, precision, n, out, flip);
    }
}
#endif
