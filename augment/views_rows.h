/* The row loops of dataio.augment._views_cpu: each op of a view over one image row held as three float rows (r, g, b
 * of w values, L1-sized), a flat loop the compiler vectorises (VECTOR_CLONES: an AVX2 clone beside the baseline).
 * Indices are size_t: Python's -fwrapv makes int index arithmetic wrap, which keeps strided loops scalar. The
 * float32 operations are view_ops' (torchvision's) in the same order, except where a comment says otherwise. */
#ifndef DATAIO_VIEWS_ROWS_H
#define DATAIO_VIEWS_ROWS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "vector_clones.h"

#define MAX_KERNEL 31
#define MAX_RADIUS (MAX_KERNEL / 2)
#define LANES 8
typedef float lanes __attribute__((vector_size(LANES * sizeof(float)))); /* GCC/clang vector extension */

static const float INV255 = (float)(1.0 / 255.0); /* u8 -> [0, 1], as view_ops: u8 * float32(1/255) */
static const float LUMA_R = 0.2989f, LUMA_G = 0.587f, LUMA_B = 0.114f;

/* ---- pointwise ops on one row: three float rows r, g, b of w values ---- */

/* max then min, as two selects the compiler makes vector max/min of (a nested ?: became branches); NaN -> lo */
static inline float clampf(float v, float lo, float hi) {
    v = v > lo ? v : lo;
    return v < hi ? v : hi;
}

static inline float clamp01(float v) { return clampf(v, 0.0f, 1.0f); }

VECTOR_CLONES
static void load_row(const uint8_t *restrict s, float *restrict r, float *restrict g, float *restrict b, size_t w) {
    for (size_t x = 0; x < w; x++) {
        r[x] = (float)s[3 * x] * INV255;
        g[x] = (float)s[3 * x + 1] * INV255;
        b[x] = (float)s[3 * x + 2] * INV255;
    }
}

/* brightness (d = 0, f x: (1 - f) 0 adds nothing) and contrast (d the mean gray): f x + d (1 - f), view_ops' order;
 * the three channels in one loop */
VECTOR_CLONES
static void blend_constant_row(float *restrict r, float *restrict g, float *restrict b, size_t w, float f, float d) {
    const float k = d * (1.0f - f);
    if (d == 0.0f)
        for (size_t x = 0; x < w; x++) {
            r[x] = clamp01(r[x] * f);
            g[x] = clamp01(g[x] * f);
            b[x] = clamp01(b[x] * f);
        }
    else
        for (size_t x = 0; x < w; x++) {
            r[x] = clamp01(r[x] * f + k);
            g[x] = clamp01(g[x] * f + k);
            b[x] = clamp01(b[x] * f + k);
        }
}

VECTOR_CLONES
static void saturation_row(float *restrict r, float *restrict g, float *restrict b, size_t w, float f) {
    const float rest = 1.0f - f;
    for (size_t x = 0; x < w; x++) {
        float gray = r[x] * LUMA_R + g[x] * LUMA_G + b[x] * LUMA_B;
        float d = gray * rest;
        r[x] = clamp01(r[x] * f + d);
        g[x] = clamp01(g[x] * f + d);
        b[x] = clamp01(b[x] * f + d);
    }
}

VECTOR_CLONES
static void gray_row(float *restrict r, float *restrict g, float *restrict b, size_t w) {
    for (size_t x = 0; x < w; x++) r[x] = g[x] = b[x] = r[x] * LUMA_R + g[x] * LUMA_G + b[x] * LUMA_B;
}

/* Each channel's sum over an interleaved uint8 row: 48 lanes (16 pixels, lane i always channel i % 3), a flat loop
 * the compiler vectorises; a row of up to 16384 px keeps each lane under 2^32. */
VECTOR_CLONES
static void channel_sums(const uint8_t *restrict s, size_t bytes, uint64_t sums[3]) {
    uint32_t lane[48] = {0};
    size_t j = 0;
    for (; j + 48 <= bytes; j += 48)
        for (int i = 0; i < 48; i++) lane[i] += s[j + i];
    for (; j < bytes; j++) sums[j % 3] += s[j];
    for (int i = 0; i < 48; i++) sums[i % 3] += lane[i];
}

/* The sum of the row's gray: LANES running sums in a vector (the compiler would not reorder a float sum to
 * vectorise it), then added up in double. */
VECTOR_CLONES
static double gray_sum_row(const float *restrict r, const float *restrict g, const float *restrict b, size_t w) {
    lanes sum = {0};
    size_t x = 0;
    for (; x + LANES <= w; x += LANES) {
        lanes vr, vg, vb;
        memcpy(&vr, r + x, sizeof vr);
        memcpy(&vg, g + x, sizeof vg);
        memcpy(&vb, b + x, sizeof vb);
        sum += vr * LUMA_R + vg * LUMA_G + vb * LUMA_B;
    }
    double total = 0.0;
    for (; x < w; x++) total += r[x] * LUMA_R + g[x] * LUMA_G + b[x] * LUMA_B;
    for (int j = 0; j < LANES; j++) total += sum[j];
    return total;
}

static inline float min2(float a, float b) { return a < b ? a : b; } /* minps, maxps */
static inline float max2(float a, float b) { return a > b ? a : b; }

/* One channel of hsv2rgb (the "alternative" form, the same function as torchvision's six cases): with k = h6 + n
 * (n = 5, 3, 1 for r, g, b) wrapped into [0, 6), the channel is v - (v s) clamp(min(k, 4 - k), 0, 1); here
 * v s = max - min = cr, and the clamp is applied to the result (between min and max), which the compiler keeps as
 * two vector min/max (clamping t made it push the product into three blends). */
static inline float hue_channel(float h6, float n, float mx, float cr) {
    float k = h6 + n, wrapped = k - 6.0f;
    k = k >= 6.0f ? wrapped : k;
    return max2(min2(mx - cr * min2(k, 4.0f - k), mx), mx - cr);
}

/* torchvision's adjust_hue in sextants: h6 = 6 h of its rgb2hsv (one division: (g - b) / cr and the like, its
 * five divisions folded), the shift added, wrapped into [0, 6), then hue_channel. Every candidate is computed,
 * then selected: a loop of vector blends (with -fno-trapping-math). cr is at least FLT_MIN in the division: a gray
 * pixel (cr = 0) has num = 0, so h6 = 0, as torchvision's. */
VECTOR_CLONES
static void hue_row(float *restrict r, float *restrict g, float *restrict b, size_t w, float shift) {
    const float shift6 = shift * 6.0f;
    for (size_t x = 0; x < w; x++) {
        float R = r[x], G = g[x], B = b[x];
        float mx = max2(max2(R, G), B), mn = min2(min2(R, G), B);
        float cr = mx - mn, gb = G - B, br = B - R, rg = R - G;
        int red = mx == R, green = mx == G;
        float num = red ? gb : green ? br : rg;
        float base = red ? 0.0f : green ? 2.0f : 4.0f;
        float h6 = base + num / max2(cr, 1.17549435e-38f) + shift6; /* in [-4, 8) */
        float above = h6 + 6.0f;
        h6 = h6 < 0.0f ? above : h6;
        float below = h6 - 6.0f;
        h6 = h6 >= 6.0f ? below : h6;
        r[x] = hue_channel(h6, 5.0f, mx, cr);
        g[x] = hue_channel(h6, 3.0f, mx, cr);
        b[x] = hue_channel(h6, 1.0f, mx, cr);
    }
}

/* ---- blur: taps[r] x + sum_k taps[r + k] (x[-k] + x[+k]) (the taps are symmetric) ---- */

/* out[x] = mid[x] t[0] + sum_{k=1..radius} (lo[k][x] + hi[k][x]) t[k]: with a constant radius the k loop unrolls
 * into registers (one load pair, add, multiply, add per tap), 1.4x faster than a pass over out per tap. */
static inline __attribute__((always_inline)) void pair_sum(const float *mid, const float *const *lo,
                                                           const float *const *hi, float *restrict out, size_t w,
                                                           const float *t, const int radius) {
    const float *a[MAX_RADIUS + 1], *b[MAX_RADIUS + 1];
    float tk[MAX_RADIUS + 1];
    for (int k = 0; k <= radius; k++) {
        a[k] = lo[k];
        b[k] = hi[k];
        tk[k] = t[k];
    }
    for (size_t x = 0; x < w; x++) {
        float acc = mid[x] * tk[0];
        for (int k = 1; k <= radius; k++) acc += (a[k][x] + b[k][x]) * tk[k];
        out[x] = acc;
    }
}

VECTOR_CLONES
static void blur_pairs(const float *mid, const float *const *lo, const float *const *hi, float *restrict out, size_t w,
                       const float *t, int radius) {
    switch (radius) { /* DINO's 9 taps: radius 4, less where a small sigma's outer taps are dropped */
    case 1: pair_sum(mid, lo, hi, out, w, t, 1); break;
    case 2: pair_sum(mid, lo, hi, out, w, t, 2); break;
    case 3: pair_sum(mid, lo, hi, out, w, t, 3); break;
    case 4: pair_sum(mid, lo, hi, out, w, t, 4); break;
    case 5: pair_sum(mid, lo, hi, out, w, t, 5); break;
    case 6: pair_sum(mid, lo, hi, out, w, t, 6); break;
    default: pair_sum(mid, lo, hi, out, w, t, radius);
    }
}

/* ---- the end of a row: solarize, then the output's layout ---- */

VECTOR_CLONES
static void solarize_row(float *restrict v, size_t w, float threshold) {
    for (size_t x = 0; x < w; x++) v[x] = v[x] >= threshold ? 1.0f - v[x] : v[x];
}

/* round half up (truncation of 255 x + 0.5 >= 0), into a byte row: converted to int first, then clamped (clamping
 * the floats first made the compiler's conversion twice as slow); the values are in [0, 1] (+ rounding), so the
 * conversion is always in range */
VECTOR_CLONES
static void quantise_row(const float *restrict v, uint8_t *restrict d, size_t w) {
    for (size_t x = 0; x < w; x++) {
        int q = (int)(v[x] * 255.0f + 0.5f);
        q = q > 0 ? q : 0;
        d[x] = (uint8_t)(q < 255 ? q : 255);
    }
}

VECTOR_CLONES
static void interleave_row(const uint8_t *restrict r, const uint8_t *restrict g, const uint8_t *restrict b,
                           uint8_t *restrict d, size_t w) {
    for (size_t x = 0; x < w; x++) {
        d[3 * x] = r[x];
        d[3 * x + 1] = g[x];
        d[3 * x + 2] = b[x];
    }
}

VECTOR_CLONES
static void store_hwc(const float *restrict r, const float *restrict g, const float *restrict b, float *restrict d,
                      size_t w, const float *mean, const float *std) {
    const float mr = mean[0], mg = mean[1], mb = mean[2], sr = std[0], sg = std[1], sb = std[2];
    for (size_t x = 0; x < w; x++) {
        d[3 * x] = (r[x] - mr) / sr;
        d[3 * x + 1] = (g[x] - mg) / sg;
        d[3 * x + 2] = (b[x] - mb) / sb;
    }
}

VECTOR_CLONES
static void store_plane(const float *restrict v, float *restrict d, size_t w, float mean, float std) {
    for (size_t x = 0; x < w; x++) d[x] = (v[x] - mean) / std;
}

#endif
