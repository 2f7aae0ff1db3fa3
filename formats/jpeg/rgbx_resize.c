/* PIL's antialiased bilinear crop-resize of RGBX pixels, straight into a batch slot as RGB
 * (rgbx_resize.h).
 *
 * The same integers as pillow-simd's Image.resize(size, BILINEAR, box): its coefficients
 * (precompute_coeffs: double weights of the triangle filter stretched by the downscale factor,
 * then normalize_coeffs_8bpc: int16 at the largest precision that keeps them under 2^15), a
 * horizontal pass into 8-bit RGBX rows, then a vertical pass, each output the rounded, clamped
 * sum of its taps. Integer sums do not depend on their order, so any kernel that forms them
 * gives pillow-simd's pixels; the tests compare with PIL over many boxes and sizes.
 *
 * What is left out against PIL's call (all measured on the 2-core VM, a 328x328 centre crop to
 * 224x224): the Python call and the two images PIL allocates (the horizontal pass's
 * 224 x 330 rows and the result); the separate pass packing RGBX to RGB and mirroring it into
 * the batch (15 us); and the horizontal pass of all rows before the vertical one (the rows are
 * resized as the vertical pass needs them, into a ring of as many rows as it has taps, which
 * stays in the L1 cache); and the taps PIL pads each output's to (ksize, 5 for a 1.46x downscale,
 * where no output has more than 3). The AVX-512 kernels (VBMI and VNNI) resize four outputs of a
 * row at once by one byte permute and one multiply-add per pair of taps, and write sixteen pixels
 * of the vertical pass as RGB with one permute and a masked store; the AVX2 ones two outputs (PIL's
 * SSE4 build: one) and eight pixels. 75 us against PIL's 180 for that crop (AVX-512; AVX2: 149).
 */
#include "rgbx_resize.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define HAVE_AVX2 1
#define AVX2 __attribute__((target("avx2")))
#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi,avx512vnni")))
#else
#define HAVE_AVX2 0
#endif

#define PRECISION_BITS (32 - 8 - 2)  /* PIL's */
#define MAX_COEFS_PRECISION (16 - 1) /* pillow-simd's: int16 coefficients */

/* *buffer with room for bytes (what it held is not kept): grown, never shrunk, so that a thread's plan is
 * rebuilt in place for each new geometry (its dozen mallocs and frees cost 3 us a resize). 0: no memory. */
static int reserve(void *buffer, size_t *capacity, size_t bytes) {
    void **pointer = buffer;
    if (bytes <= *capacity && *pointer != NULL)
        return 1;
    void *bigger = malloc(bytes > 0 ? bytes : 1);
    if (bigger == NULL)
        return 0;
    free(*pointer);
    *pointer = bigger;
    *capacity = bytes;
    return 1;
}

typedef struct {
    int n;         /* outputs */
    int ksize;     /* PIL's taps per output (the coefficients past an output's count are 0) */
    int most;      /* the most taps an output has: 3 for a 1.46x downscale, whose ksize is 5 */
    int *first;    /* per output, its first input (PIL's xmin) */
    int *count;    /* per output, its taps (PIL's xmax) */
    int16_t *k;    /* n * ksize */
    int precision; /* the coefficients' scale: 2^precision */
    double *kk;    /* the weights before their rounding to k */
    size_t first_cap, count_cap, k_cap, kk_cap;
} axis_plan;

static double bilinear(double x) {
    if (x < 0.0)
        x = -x;
    return x < 1.0 ? 1.0 - x : 0.0;
}

static void axis_free(axis_plan *a) {
    free(a->first);
    free(a->count);
    free(a->k);
    free(a->kk);
}

/* PIL's precompute_coeffs and pillow-simd's normalize_coeffs_8bpc, in the same double arithmetic. */
static int axis_coefficients(axis_plan *a, int in_size, float in0, float in1, int out_size) {
    double filterscale, scale, support;
    filterscale = scale = (double)(in1 - in0) / out_size;
    if (filterscale < 1.0)
        filterscale = 1.0;
    support = 1.0 * filterscale; /* the bilinear filter's support is 1 */
    int ksize = (int)ceil(support) * 2 + 1;
    a->n = out_size;
    a->ksize = ksize;
    if (!reserve(&a->kk, &a->kk_cap, sizeof(double) * (size_t)out_size * (size_t)ksize) ||
        !reserve(&a->first, &a->first_cap, sizeof(int) * (size_t)out_size) ||
        !reserve(&a->count, &a->count_cap, sizeof(int) * (size_t)out_size) ||
        !reserve(&a->k, &a->k_cap, sizeof(int16_t) * (size_t)out_size * (size_t)ksize))
        return 0;
    double *kk = a->kk;
    for (int xx = 0; xx < out_size; xx++) {
        double center = in0 + (xx + 0.5) * scale;
        double ww = 0.0, ss = 1.0 / filterscale;
        int xmin = (int)(center - support + 0.5);
        if (xmin < 0)
            xmin = 0;
        int xmax = (int)(center + support + 0.5);
        if (xmax > in_size)
            xmax = in_size;
        xmax -= xmin;
        double *k = &kk[(size_t)xx * ksize];
        int x;
        for (x = 0; x < xmax; x++) {
            double w = bilinear((x + xmin - center + 0.5) * ss);
            k[x] = w;
            ww += w;
        }
        if (ww != 0.0) { /* the test out of the loop, as the compiler vectorises the divisions (same quotients) */
            for (x = 0; x < xmax; x++)
                k[x] /= ww;
        }
        for (x = xmax < 0 ? 0 : xmax; x < ksize; x++)
            k[x] = 0;
        a->first[xx] = xmin;
        a->count[xx] = xmax < 0 ? 0 : xmax;
        a->most = xx == 0 || a->count[xx] > a->most ? a->count[xx] : a->most;
    }
    size_t total = (size_t)out_size * ksize;
    double maxkk = kk[0];
    for (size_t x = 0; x < total; x++) {
        if (maxkk < kk[x])
            maxkk = kk[x];
    }
    int precision;
    for (precision = 0; precision < PRECISION_BITS; precision += 1) {
        int next_value = (int)(0.5 + maxkk * (1 << (precision + 1)));
        if (next_value >= (1 << MAX_COEFS_PRECISION))
            break;
    }
    for (size_t x = 0; x < total; x++)
        a->k[x] = (int16_t)(kk[x] < 0 ? (int)(-0.5 + kk[x] * (1 << precision)) : (int)(0.5 + kk[x] * (1 << precision)));
    a->precision = precision;
    return precision > 0;
}

static unsigned char clamp8(int32_t sum, int precision) {
    int32_t v = sum >> precision;
    return (unsigned char)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* One RGBX row (n pixels) to RGB at out, mirrored if flip. */
static void pack_row(const unsigned char *in, unsigned char *out, int n, int flip) {
    for (int x = 0; x < n; x++) {
        const unsigned char *p = in + 4 * (size_t)(flip ? n - 1 - x : x);
        out[3 * (size_t)x] = p[0];
        out[3 * (size_t)x + 1] = p[1];
        out[3 * (size_t)x + 2] = p[2];
    }
}

/* The horizontal pass of one row: in (the source row) to out (h->n RGBX pixels). */
static void h_row_scalar(const unsigned char *in, unsigned char *out, const axis_plan *h) {
    int32_t half = 1 << (h->precision - 1);
    for (int xx = 0; xx < h->n; xx++) {
        const int16_t *k = h->k + (size_t)xx * h->ksize;
        const unsigned char *p = in + 4 * (size_t)h->first[xx];
        for (int c = 0; c < 4; c++) {
            int32_t sum = half;
            for (int x = 0; x < h->count[xx]; x++)
                sum += p[4 * x + c] * k[x];
            out[4 * (size_t)xx + c] = clamp8(sum, h->precision);
        }
    }
}

/* The vertical pass of one output row from its count input rows, packed to RGB at out. */
static void v_row_scalar(const unsigned char *const *rows, const int16_t *k, int count, int precision, int n,
                         unsigned char *out, int flip) {
    int32_t half = 1 << (precision - 1);
    for (int xx = 0; xx < n; xx++) {
        unsigned char *to = out + 3 * (size_t)(flip ? n - 1 - xx : xx);
        for (int c = 0; c < 3; c++) {
            int32_t sum = half;
            for (int y = 0; y < count; y++)
                sum += rows[y][4 * (size_t)xx + c] * k[y];
            to[c] = clamp8(sum, precision);
        }
    }
}

#if HAVE_AVX2
/* The horizontal plan of the AVX2 kernel: every output over the same even number of taps (the most any
 * output has, rounded up),
 * from a window start[xx] that stays inside the row (an output near the right edge gets its
 * window moved left and zero coefficients in front), and per pair of outputs (A, B), per pair of
 * taps, the coefficients as 8 int32: the pair (k_t, k_t+1) of A four times, then B's. */
typedef struct {
    int taps;
    int *start;
    int32_t *kv;
    int16_t *window;
    size_t start_cap, kv_cap, window_cap;
} simd_plan;

static int simd_plan_make(simd_plan *s, const axis_plan *h, int width) {
    s->taps = h->most < 2 ? 2 : h->most + (h->most & 1);
    if (width < s->taps)
        return 0;
    int pairs = s->taps / 2, outputs = (h->n + 1) / 2;
    if (!reserve(&s->window, &s->window_cap, sizeof(int16_t) * (size_t)s->taps) ||
        !reserve(&s->start, &s->start_cap, sizeof(int) * (size_t)h->n) ||
        !reserve(&s->kv, &s->kv_cap, sizeof(int32_t) * 8 * (size_t)outputs * pairs))
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

static void simd_plan_free(simd_plan *s) {
    free(s->start);
    free(s->kv);
    free(s->window);
}

AVX2 static void h_row_avx2(const unsigned char *in, unsigned char *out, const simd_plan *s, int n, int precision) {
    const __m256i lo = _mm256_set_epi8(-1, 7, -1, 3, -1, 6, -1, 2, -1, 5, -1, 1, -1, 4, -1, 0, -1, 7, -1, 3, -1, 6,
                                       -1, 2, -1, 5, -1, 1, -1, 4, -1, 0);
    const __m256i hi = _mm256_set_epi8(-1, 15, -1, 11, -1, 14, -1, 10, -1, 13, -1, 9, -1, 12, -1, 8, -1, 15, -1, 11,
                                       -1, 14, -1, 10, -1, 13, -1, 9, -1, 12, -1, 8);
    const __m256i half = _mm256_set1_epi32(1 << (precision - 1));
    const int pairs = s->taps / 2;
    for (int xx = 0; xx < n; xx += 2) {
        int b = xx + 1 < n ? xx + 1 : xx;
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
        sum = _mm256_srai_epi32(sum, precision);
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

/* The vertical pass of one output row, eight pixels at a time, packed to RGB at out (mirrored if
 * flip); out_end bounds the 4 bytes each 12-byte store writes past its pixels. */
AVX2 static void v_row_avx2(const unsigned char *const *rows, const int16_t *k, int count, int precision, int n,
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

/* The horizontal plan of the AVX-512 kernel: four outputs per 512-bit register. Per quad of outputs, the
 * first pixel base of one 64-byte load (16 pixels) holding all their taps, and per pair of taps a byte
 * permutation of that load (vpermt2b) into the 16-bit pairs vpdpwssd takes, with the pairs' coefficients:
 * two permutes and two multiply-adds for the 3-4 taps of four outputs of a downscale up to 2x, where the
 * AVX2 kernel needs four shuffles, four multiply-adds and two inserts for two. Returns 0 where some quad's
 * taps span more than 16 pixels (a downscale past about 2.5x) or the row is under 16 pixels: the AVX2
 * kernel does those. */
typedef struct {
    int quads, pairs;
    int *base;
    uint8_t *index; /* quads * pairs * 64 */
    int32_t *kv;    /* quads * pairs * 16 */
    size_t base_cap, index_cap, kv_cap;
} zmm_plan;

#define FROM_ZERO 64 /* a permute index into the second table: the zero register */

static int zmm_plan_make(zmm_plan *z, const axis_plan *h, int width) {
    z->pairs = h->most < 2 ? 1 : (h->most + 1) / 2; /* 2 pairs for downscales up to 2x, where ksize is 5 */
    z->quads = (h->n + 3) / 4;
    if (width < 16)
        return 0;
    for (int q = 0; q < z->quads; q++) {
        int a = 4 * q, d = 4 * q + 3 < h->n ? 4 * q + 3 : h->n - 1;
        int base = h->first[a] < width - 16 ? h->first[a] : width - 16;
        if (h->first[d] + h->count[d] - base > 16)
            return 0;
    }
    if (!reserve(&z->base, &z->base_cap, sizeof(int) * (size_t)z->quads) ||
        !reserve(&z->index, &z->index_cap, (size_t)z->quads * z->pairs * 64) ||
        !reserve(&z->kv, &z->kv_cap, sizeof(int32_t) * 16 * (size_t)z->quads * z->pairs))
        return 0;
    /* A lane (one channel c of one output) of a pair's permute, as one little-endian word: its first pixel's
     * byte, a zero, its second pixel's byte (the next pixel, 4 bytes on), a zero; then the same with the
     * first pixel t pixels into the load: + 4t in bytes 0 and 2. */
    const uint32_t zeros = (uint32_t)FROM_ZERO << 8 | (uint32_t)FROM_ZERO << 24;
    for (int q = 0; q < z->quads; q++) {
        int base = h->first[4 * q] < width - 16 ? h->first[4 * q] : width - 16;
        z->base[q] = base;
        for (int p = 0; p < z->pairs; p++) {
            uint32_t *index = (uint32_t *)(void *)(z->index + ((size_t)q * z->pairs + p) * 64);
            int32_t *kv = z->kv + ((size_t)q * z->pairs + p) * 16;
            for (int j = 0; j < 4; j++) {
                int xx = 4 * q + j, taps = xx < h->n ? h->count[xx] - 2 * p : 0; /* this pair's: 2, 1 or none */
                uint32_t t = xx < h->n ? (uint32_t)(h->first[xx] - base + 2 * p) : 0; /* its first pixel */
                const int16_t *k = xx < h->n ? h->k + (size_t)xx * h->ksize + 2 * p : NULL;
                uint32_t pair = taps >= 2 ? (uint32_t)(uint16_t)k[0] | (uint32_t)(uint16_t)k[1] << 16
                                : taps == 1 ? (uint32_t)(uint16_t)k[0]
                                            : 0;
                for (uint32_t c = 0; c < 4; c++) {
                    uint32_t lane = taps >= 2   ? zeros | (4 * t + c) | (4 * t + 4 + c) << 16
                                    : taps == 1 ? zeros | (4 * t + c) | (uint32_t)FROM_ZERO << 16
                                                : zeros | FROM_ZERO | (uint32_t)FROM_ZERO << 16;
                    index[4 * j + c] = lane;
                    kv[4 * j + c] = (int32_t)pair;
                }
            }
        }
    }
    return 1;
}

static void zmm_plan_free(zmm_plan *z) {
    free(z->base);
    free(z->index);
    free(z->kv);
}

/* The sums of one quad of outputs (four RGBX pixels) from its 16-pixel load, over `pairs` pairs of taps:
 * per pair one byte permute and one vpdpwssd (VNNI: multiply-add and accumulate in one instruction). */
AVX512 static inline __attribute__((always_inline)) __m512i h_quad(const unsigned char *load, const uint8_t *index,
                                                                   const int32_t *kv, int pairs, __m512i half) {
    const __m512i zero = _mm512_setzero_si512();
    __m512i table = _mm512_loadu_si512((const void *)load);
    __m512i sum = half;
    for (int p = 0; p < pairs; p++) {
        __m512i px = _mm512_permutex2var_epi8(table, _mm512_loadu_si512((const void *)(index + 64 * p)), zero);
        sum = _mm512_dpwssd_epi32(sum, px, _mm512_loadu_si512((const void *)(kv + 16 * p)));
    }
    return sum;
}

/* The horizontal pass of one row, with the pairs of taps a constant the compiler unrolls (a loop over them
 * measured 13.5 cycles a quad, most of it the loop's own bookkeeping). Four quads are packed to bytes
 * together (two packssdw, one packuswb and a dword transpose: half the instructions of packing each). */
AVX512 static inline __attribute__((always_inline)) void h_row_zmm_pairs(const unsigned char *in, unsigned char *out,
                                                                         const zmm_plan *z, int n, int precision,
                                                                         int pairs) {
    const __m512i half = _mm512_set1_epi32(1 << (precision - 1));
    const __m512i zero = _mm512_setzero_si512();
    const __m512i transpose = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    const __m128i shift = _mm_cvtsi32_si128(precision);
    const uint8_t *index = z->index;
    const int32_t *kv = z->kv;
    int q = 0, whole = n / 4;
    for (; q + 4 <= whole; q += 4) {
        __m512i s[4];
        for (int i = 0; i < 4; i++, index += 64 * pairs, kv += 16 * pairs)
            s[i] = _mm512_sra_epi32(h_quad(in + 4 * (size_t)z->base[q + i], index, kv, pairs, half), shift);
        /* 128-bit lane L of the packed bytes: output L of quads q..q+3; the transpose puts them in order */
        __m512i bytes = _mm512_packus_epi16(_mm512_packs_epi32(s[0], s[1]), _mm512_packs_epi32(s[2], s[3]));
        _mm512_storeu_si512((void *)(out + 16 * (size_t)q), _mm512_permutexvar_epi32(transpose, bytes));
    }
    for (; q < z->quads; q++, index += 64 * pairs, kv += 16 * pairs) {
        __m512i sum = _mm512_max_epi32(_mm512_sra_epi32(h_quad(in + 4 * (size_t)z->base[q], index, kv, pairs, half),
                                                        shift), zero);
        int left = n - 4 * q < 4 ? n - 4 * q : 4;
        _mm_mask_storeu_epi8(out + 16 * (size_t)q, (__mmask16)((1u << (4 * left)) - 1), _mm512_cvtusepi32_epi8(sum));
    }
}

AVX512 static void h_row_zmm(const unsigned char *in, unsigned char *out, const zmm_plan *z, int n, int precision) {
    switch (z->pairs) { /* one pair: upscaling; two: downscaling up to 2x; three: up to 3x */
    case 1:
        h_row_zmm_pairs(in, out, z, n, precision, 1);
        break;
    case 2:
        h_row_zmm_pairs(in, out, z, n, precision, 2);
        break;
    case 3:
        h_row_zmm_pairs(in, out, z, n, precision, 3);
        break;
    case 4:
        h_row_zmm_pairs(in, out, z, n, precision, 4);
        break;
    default:
        h_row_zmm_pairs(in, out, z, n, precision, z->pairs);
    }
}

/* The vertical pass of one output row, sixteen pixels at a time, packed to RGB (mirrored if flip) by one
 * byte permute and written with a masked store. */
AVX512 static void v_row_zmm(const unsigned char *const *rows, const int16_t *k, int count, int precision, int n,
                             unsigned char *out, int flip) {
    const __m512i half = _mm512_set1_epi32(1 << (precision - 1));
    const __m512i zero = _mm512_setzero_si512();
    uint8_t order[64] = {0};
    int order_for = -1;
    __m512i rgb = zero;
    for (int xx = 0; xx < n; xx += 16) {
        int m = n - xx < 16 ? n - xx : 16;
        __mmask64 load = m == 16 ? ~(__mmask64)0 : (((__mmask64)1 << (4 * m)) - 1);
        __m512i s0 = half, s1 = half, s2 = half, s3 = half;
        for (int y = 0; y < count; y += 2) {
            int second = y + 1 < count;
            __m512i mk = _mm512_set1_epi32(
                (int32_t)((uint32_t)(uint16_t)k[y] | (second ? (uint32_t)(uint16_t)k[y + 1] << 16 : 0)));
            __m512i a = _mm512_maskz_loadu_epi8(load, rows[y] + 4 * (size_t)xx);
            __m512i b = second ? _mm512_maskz_loadu_epi8(load, rows[y + 1] + 4 * (size_t)xx) : zero;
            __m512i ab = _mm512_unpacklo_epi8(a, b);
            s0 = _mm512_dpwssd_epi32(s0, _mm512_unpacklo_epi8(ab, zero), mk);
            s1 = _mm512_dpwssd_epi32(s1, _mm512_unpackhi_epi8(ab, zero), mk);
            ab = _mm512_unpackhi_epi8(a, b);
            s2 = _mm512_dpwssd_epi32(s2, _mm512_unpacklo_epi8(ab, zero), mk);
            s3 = _mm512_dpwssd_epi32(s3, _mm512_unpackhi_epi8(ab, zero), mk);
        }
        s0 = _mm512_packs_epi32(_mm512_srai_epi32(s0, precision), _mm512_srai_epi32(s1, precision));
        s2 = _mm512_packs_epi32(_mm512_srai_epi32(s2, precision), _mm512_srai_epi32(s3, precision));
        __m512i pixels = _mm512_packus_epi16(s0, s2); /* RGBX of pixels xx..xx+m-1, in order */
        if (order_for != m) { /* RGB of each pixel, the last one first if flip */
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

/* The kernels this CPU runs: 2 AVX-512 (F, BW, VL, VBMI, VNNI), 1 AVX2, 0 none. */
static int cpu_level(void) {
    static int found = -1; /* a benign race: every thread finds the same */
    if (found < 0) {
        __builtin_cpu_init();
        found = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vbmi") &&
                        __builtin_cpu_supports("avx512vnni")
                    ? 2
                : __builtin_cpu_supports("avx2") ? 1
                                                 : 0;
    }
    return found;
}
#endif

int rgbx_resize_simd(void) {
#if HAVE_AVX2
    return cpu_level();
#else
    return 0;
#endif
}

/* Everything a resize computes from its geometry alone: the coefficients, the kernels' plans and the ring of
 * rows. Each thread keeps one (plan_for), refilled in place for a new geometry and kept as it is for the same:
 * an eval epoch resizes the same centre crop of every image of one size, and the plans took 17 of the 105 us
 * of a 328 px crop (the 20 us of a new one measured 10 with the buffers reused). */
typedef struct {
    int width, height, out_w, out_h, simd; /* the key, with the box; width 0: no geometry */
    float box[4];
    int need_h, need_v, level, h_level, ring;
    axis_plan h, v;
#if HAVE_AVX2
    simd_plan s;
    zmm_plan z;
#endif
    unsigned char *rows; /* ring rows of out_w RGBX pixels (the horizontal pass's) */
    int *held;           /* the source row in each slot */
    const unsigned char **taps;
    size_t rows_cap, held_cap, taps_cap;
} resize_plan;

static void plan_free(void *p) {
    resize_plan *plan = p;
    if (plan == NULL)
        return;
    axis_free(&plan->h);
    axis_free(&plan->v);
#if HAVE_AVX2
    simd_plan_free(&plan->s);
    zmm_plan_free(&plan->z);
#endif
    free(plan->rows);
    free(plan->held);
    free(plan->taps);
    free(plan);
}

/* Fill plan for the geometry; 0 when out of memory (the plan then holds no geometry). */
static int plan_fill(resize_plan *plan, int width, int height, const float box[4], int out_w, int out_h, int simd) {
    plan->width = 0;
    plan->need_h = out_w != width || box[0] != 0 || box[2] != out_w; /* PIL's tests, in PIL's float */
    plan->need_v = out_h != height || box[1] != 0 || box[3] != out_h;
    if (!axis_coefficients(&plan->h, width, box[0], box[2], out_w) ||
        !axis_coefficients(&plan->v, height, box[1], box[3], out_h))
        return 0;
    plan->level = plan->h_level = 0;
#if HAVE_AVX2
    plan->level = cpu_level() < simd ? cpu_level() : simd;
    plan->h_level = !plan->need_h                                                   ? 0
                    : plan->level == 2 && zmm_plan_make(&plan->z, &plan->h, width)  ? 2
                    : plan->level >= 1 && simd_plan_make(&plan->s, &plan->h, width) ? 1
                                                                                    : 0;
#endif
    plan->ring = plan->need_v ? plan->v.ksize : 1; /* rows of the horizontal pass kept: the most taps of an output */
    if (!reserve(&plan->rows, &plan->rows_cap, (size_t)plan->ring * out_w * 4) ||
        !reserve(&plan->held, &plan->held_cap, sizeof(int) * (size_t)plan->ring) ||
        !reserve(&plan->taps, &plan->taps_cap, sizeof(unsigned char *) * (size_t)plan->v.ksize))
        return 0;
    plan->width = width;
    plan->height = height;
    plan->out_w = out_w;
    plan->out_h = out_h;
    plan->simd = simd;
    memcpy(plan->box, box, sizeof plan->box);
    return 1;
}

static pthread_key_t plan_key;
static int plan_key_made; /* 1 made, -1 failed */
static pthread_once_t plan_once = PTHREAD_ONCE_INIT;

static void plan_key_make(void) { plan_key_made = pthread_key_create(&plan_key, plan_free) == 0 ? 1 : -1; }

/* This thread's plan, filled for the geometry (freed with the thread); without thread-specific storage, a new
 * one for the caller to free (*owned). NULL when out of memory. */
static resize_plan *plan_for(int width, int height, const float box[4], int out_w, int out_h, int simd, int *owned) {
    pthread_once(&plan_once, plan_key_make);
    resize_plan *plan = plan_key_made == 1 ? pthread_getspecific(plan_key) : NULL;
    *owned = 0;
    if (plan == NULL) {
        plan = calloc(1, sizeof(resize_plan));
        if (plan == NULL)
            return NULL;
        if (plan_key_made != 1 || pthread_setspecific(plan_key, plan) != 0)
            *owned = 1;
    }
    if (plan->width == width && plan->height == height && plan->out_w == out_w && plan->out_h == out_h &&
        plan->simd == simd && memcmp(plan->box, box, sizeof plan->box) == 0)
        return plan;
    if (plan_fill(plan, width, height, box, out_w, out_h, simd))
        return plan;
    if (*owned)
        plan_free(plan);
    return NULL;
}

int rgbx_resize(const unsigned char *src, size_t stride, int width, int height, float x0, float y0, float x1,
                float y1, unsigned char *out, int out_w, int out_h, int flip, int simd) {
    if (!(x0 >= 0 && y0 >= 0) || !(x1 <= width && y1 <= height) || !(x1 - x0 >= 0 && y1 - y0 >= 0) || width < 1 ||
        height < 1 || out_w < 1 || out_h < 1)
        return RESIZE_BAD_BOX;
    size_t out_row = 3 * (size_t)out_w;
    /* PIL's own shortcut: a box of whole pixels the size of the output is a crop */
    if (x0 - (int)x0 == 0 && x1 - x0 == out_w && y0 - (int)y0 == 0 && y1 - y0 == out_h) {
        for (int y = 0; y < out_h; y++)
            pack_row(src + (size_t)(y + (int)y0) * stride + 4 * (size_t)(int)x0, out + y * out_row, out_w, flip);
        return RESIZE_OK;
    }
    const float box[4] = {x0, y0, x1, y1};
    int owned;
    resize_plan *plan = plan_for(width, height, box, out_w, out_h, simd, &owned);
    if (plan == NULL)
        return RESIZE_NO_MEMORY;
    const axis_plan *h = &plan->h, *v = &plan->v;
    for (int i = 0; i < plan->ring; i++)
        plan->held[i] = -1;
    for (int yy = 0; yy < out_h; yy++) {
        int first = plan->need_v ? v->first[yy] : yy, count = plan->need_v ? v->count[yy] : 1;
        for (int y = 0; y < count; y++) {
            int row = first + y;
            const unsigned char *in = src + (size_t)row * stride;
            if (!plan->need_h) {
                plan->taps[y] = in;
                continue;
            }
            unsigned char *slot = plan->rows + (size_t)(row % plan->ring) * out_w * 4;
            if (plan->held[row % plan->ring] != row) { /* rows come in rising order: each is resized once */
#if HAVE_AVX2
                if (plan->h_level == 2)
                    h_row_zmm(in, slot, &plan->z, out_w, h->precision);
                else if (plan->h_level == 1)
                    h_row_avx2(in, slot, &plan->s, out_w, h->precision);
                else
#endif
                    h_row_scalar(in, slot, h);
                plan->held[row % plan->ring] = row;
            }
            plan->taps[y] = slot;
        }
        unsigned char *to = out + yy * out_row;
        if (!plan->need_v) {
            pack_row(plan->taps[0], to, out_w, flip);
            continue;
        }
        const int16_t *k = v->k + (size_t)yy * v->ksize;
#if HAVE_AVX2
        if (plan->level == 2) {
            v_row_zmm(plan->taps, k, count, v->precision, out_w, to, flip);
            continue;
        }
        if (plan->level == 1) {
            v_row_avx2(plan->taps, k, count, v->precision, out_w, to, flip, out + (size_t)out_h * out_row);
            continue;
        }
#endif
        v_row_scalar(plan->taps, k, count, v->precision, out_w, to, flip);
    }
    if (owned)
        plan_free(plan);
    return RESIZE_OK;
}
