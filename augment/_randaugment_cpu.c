/* RandAugment's 14 ops on uint8 RGB images, one image at a time, with PIL's arithmetic.
 *
 * apply(src, dst, n, height, width, codes, params, num_ops, fill, first, last)
 *
 * src, dst: n interleaved (n, H, W, 3) uint8 images (channels_last); samples [first, last)
 * of src are augmented into dst (src is only read).
 * codes: int32 (n, num_ops) op codes (enum below; IDENTITY does nothing). Codes and parameters
 * are checked first: a bad one raises ValueError and nothing is written.
 * params: float64 (n, num_ops, 6): the op's parameter in [0] (enhance factor, solarize
 * threshold or posterize bits), or PIL's six AFFINE coefficients (output -> input map).
 *
 * This is the CPU path of augment.RandAugment for uint8 batches: one call covers many
 * samples, each with its own ops, with the GIL released so threads can take slices of
 * the batch. Each op follows the PIL function timm's RandAugment calls (ImageOps,
 * ImageEnhance's blend, Image.transform BILINEAR) including its rounding: enhance ops
 * truncate in float32, the smooth filter rounds, affine sampling truncates in double.
 * An image and its scratch copy (150 KB at 224) stay in L2 across the ops: that, and row
 * loops the compiler vectorises, is what makes this faster than whole-batch tensor passes on
 * a CPU.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vector_clones.h"

enum { IDENTITY, AUTOCONTRAST, EQUALIZE, SOLARIZE, COLOR, POSTERIZE, CONTRAST, BRIGHTNESS, SHARPNESS, AFFINE };

typedef struct {
    int w, h;       /* pixels */
    size_t row;     /* bytes per row: 3 w */
    int fill;       /* value of pixels mapped from outside the image */
    int *k;         /* scratch: w ints, 3 w doubles, 3 w bytes, two rows */
    double *t;
    uint8_t *spread;
    uint8_t *rows;
    int32_t *taps;  /* 5 rows of 3 w: luma_taps */
    double *wide;   /* the whole image as doubles (affine) */
} geometry;

static inline uint8_t clip_trunc(float v) { return v <= 0.0f ? 0 : v >= 255.0f ? 255 : (uint8_t)v; }

/* PIL's Image.blend(degenerate, image, f) for one value: float32, clipped, truncated. */
static inline uint8_t blend(int degenerate, int value, float f) {
    return clip_trunc((float)degenerate + f * (float)(value - degenerate));
}

/* PIL's RGB -> L (Convert.c L24). */
static inline int luma(const uint8_t *p) { return (p[0] * 19595 + p[1] * 38470 + p[2] * 7471 + 0x8000) >> 16; }

static inline uint8_t lerp(int a, int b, double t) { return (uint8_t)((double)a + (double)(b - a) * t); }

/* ---- the L image ---- */

/* L of the pixel holding each byte of a row, as a flat loop: byte j of pixel p = j - j % 3 gets
 * sum over o of taps[o + 2][j] * in[j + o], where the taps are the L24 weights placed so that
 * only p's three bytes count. The first and last pixel are done directly (their taps would read
 * outside the row). */
static void luma_taps(int32_t *taps, size_t row) {
    static const int32_t weights[3] = {19595, 38470, 7471};
    for (size_t j = 0; j < row; j++)
        for (int o = -2; o <= 2; o++) {
            int channel = (int)(j % 3) + o;
            taps[(o + 2) * row + j] = channel >= 0 && channel <= 2 ? weights[channel] : 0;
        }
}

VECTOR_CLONES
static void luma_per_byte(const uint8_t *in, uint8_t *out, const int32_t *taps, size_t row) {
    const int32_t *t0 = taps, *t1 = taps + row, *t2 = taps + 2 * row, *t3 = taps + 3 * row, *t4 = taps + 4 * row;
    out[0] = out[1] = out[2] = (uint8_t)luma(in);
    out[row - 3] = out[row - 2] = out[row - 1] = (uint8_t)luma(in + row - 3);
    for (size_t j = 3; j < row - 3; j++)
        out[j] = (uint8_t)((t0[j] * in[j - 2] + t1[j] * in[j - 1] + t2[j] * in[j] + t3[j] * in[j + 1] +
                            t4[j] * in[j + 2] + 0x8000) >> 16);
}

/* The mean of the L image (every pixel's L is in its three bytes of the spread row). */
static double mean_luma(const uint8_t *s, const geometry *g) {
    const size_t row = g->row;
    uint64_t sum = 0;
    for (int y = 0; y < g->h; y++) {
        luma_per_byte(s + y * row, g->spread, g->taps, row);
        uint32_t row_sum = 0;
        for (size_t j = 0; j < row; j++) row_sum += g->spread[j];
        sum += row_sum;
    }
    return (double)sum / 3.0 / ((double)g->w * g->h);
}

/* ---- pointwise ops: one 256-entry table per channel ---- */

static void apply_lut(const uint8_t *s, uint8_t *d, size_t pixels, uint8_t lut[3][256]) {
    for (size_t i = 0; i < pixels; i++) {
        d[3 * i] = lut[0][s[3 * i]];
        d[3 * i + 1] = lut[1][s[3 * i + 1]];
        d[3 * i + 2] = lut[2][s[3 * i + 2]];
    }
}

/* Per-channel histograms; two pixels a step into separate copies, so runs of equal values
 * (flat image regions) do not serialise on one counter. */
static void histograms(const uint8_t *s, size_t pixels, uint32_t hist[3][256]) {
    uint32_t copies[2][3][256];
    memset(copies, 0, sizeof(copies));
    size_t i = 0;
    for (; i + 1 < pixels; i += 2)
        for (int c = 0; c < 3; c++) {
            copies[0][c][s[3 * i + c]]++;
            copies[1][c][s[3 * i + 3 + c]]++;
        }
    for (; i < pixels; i++)
        for (int c = 0; c < 3; c++) copies[0][c][s[3 * i + c]]++;
    for (int c = 0; c < 3; c++)
        for (int v = 0; v < 256; v++) hist[c][v] = copies[0][c][v] + copies[1][c][v];
}

/* Each channel's min and max: 48 running values (a 48-byte block holds 16 pixels, so lane i is
 * always channel i % 3), a flat loop the compiler vectorises, then the remainder. */
VECTOR_CLONES
static void block_min_max(const uint8_t *s, size_t bytes, uint8_t lo[3], uint8_t hi[3]) {
    uint8_t lane_lo[48], lane_hi[48];
    memset(lane_lo, 255, 48);
    memset(lane_hi, 0, 48);
    size_t blocks = bytes / 48;
    for (size_t b = 0; b < blocks; b++)
        for (int i = 0; i < 48; i++) {
            uint8_t v = s[48 * b + i];
            lane_lo[i] = v < lane_lo[i] ? v : lane_lo[i];
            lane_hi[i] = v > lane_hi[i] ? v : lane_hi[i];
        }
    for (size_t j = 48 * blocks; j < bytes; j++) {
        lane_lo[j % 3] = s[j] < lane_lo[j % 3] ? s[j] : lane_lo[j % 3];
        lane_hi[j % 3] = s[j] > lane_hi[j % 3] ? s[j] : lane_hi[j % 3];
    }
    for (int i = 0; i < 48; i++) {
        lo[i % 3] = lane_lo[i] < lo[i % 3] ? lane_lo[i] : lo[i % 3];
        hi[i % 3] = lane_hi[i] > hi[i % 3] ? lane_hi[i] : hi[i % 3];
    }
}

/* ImageOps.autocontrast(image), cutoff 0: each channel's [lo, hi] stretched to [0, 255]. */
static void autocontrast_lut(const uint8_t *s, size_t pixels, uint8_t lut[3][256]) {
    uint8_t lo[3] = {255, 255, 255}, hi[3] = {0, 0, 0};
    block_min_max(s, pixels * 3, lo, hi);
    for (int c = 0; c < 3; c++) {
        double scale = hi[c] > lo[c] ? 255.0 / (hi[c] - lo[c]) : 1.0, offset = hi[c] > lo[c] ? -lo[c] * scale : 0.0;
        for (int i = 0; i < 256; i++) {
            int v = (int)(i * scale + offset);
            lut[c][i] = v < 0 ? 0 : v > 255 ? 255 : (uint8_t)v;
        }
    }
}

/* ImageOps.equalize(image). */
static void equalize_lut(const uint8_t *s, size_t pixels, uint8_t lut[3][256]) {
    uint32_t hist[3][256];
    histograms(s, pixels, hist);
    for (int c = 0; c < 3; c++) {
        long total = 0, last = 0;
        int used = 0;
        for (int i = 0; i < 256; i++)
            if (hist[c][i]) {
                total += hist[c][i];
                last = hist[c][i];
                used++;
            }
        long step = used > 1 ? (total - last) / 255 : 0, n = step / 2;
        for (int i = 0; i < 256; i++) {
            long v = step ? n / step : i;
            lut[c][i] = v > 255 ? 255 : (uint8_t)v;
            n += hist[c][i];
        }
    }
}

static inline int is_pointwise(int code) {
    return code == AUTOCONTRAST || code == EQUALIZE || code == SOLARIZE || code == POSTERIZE || code == CONTRAST ||
           code == BRIGHTNESS;
}

/* The table of a pointwise op (is_pointwise(code)). */
static void pointwise_lut(int code, double param, const uint8_t *s, const geometry *g, uint8_t lut[3][256]) {
    size_t pixels = (size_t)g->w * g->h;
    if (code == AUTOCONTRAST) {
        autocontrast_lut(s, pixels, lut);
        return;
    }
    if (code == EQUALIZE) {
        equalize_lut(s, pixels, lut);
        return;
    }
    int mean = 0;
    if (code == CONTRAST) { /* ImageEnhance.Contrast: int(mean of the L image + 0.5) */
        mean = (int)(mean_luma(s, g) + 0.5);
    }
    float f = (float)param;
    int mask = code == POSTERIZE ? ~((1 << (8 - (int)param)) - 1) : 0;
    for (int i = 0; i < 256; i++) {
        uint8_t v;
        switch (code) {
        case SOLARIZE: v = i < param ? i : 255 - i; break;
        case POSTERIZE: v = (uint8_t)(i & mask); break;
        case CONTRAST: v = blend(mean, i, f); break;
        default: v = blend(0, i, f); break; /* BRIGHTNESS */
        }
        lut[0][i] = lut[1][i] = lut[2][i] = v;
    }
}

/* ---- enhance ops that look at more than one value ---- */

/* ImageEnhance.Color: blend with the L image. */
VECTOR_CLONES
static void color(const uint8_t *restrict s, uint8_t *restrict d, const geometry *g, float f) {
    const size_t row = g->row; /* locals: the loop bounds must not be re-read through g */
    const uint8_t *spread = g->spread;
    for (int y = 0; y < g->h; y++) {
        const uint8_t *in = s + y * row;
        uint8_t *out = d + y * row;
        luma_per_byte(in, g->spread, g->taps, row);
        for (size_t j = 0; j < row; j++) out[j] = blend(spread[j], in[j], f);
    }
}

/* ImageEnhance.Sharpness: blend with ImageFilter.SMOOTH ([1 1 1; 1 5 1; 1 1 1] / 13, rounded);
 * the one-pixel border is the image itself. */
VECTOR_CLONES
static void sharpness(const uint8_t *restrict s, uint8_t *restrict d, const geometry *g, float f) {
    size_t row = g->row;
    memcpy(d, s, row);
    memcpy(d + (g->h - 1) * row, s + (g->h - 1) * row, row);
    for (int y = 1; y < g->h - 1; y++) {
        const uint8_t *up = s + (y - 1) * row, *mid = s + y * row, *down = s + (y + 1) * row;
        uint8_t *out = d + y * row;
        memcpy(out, mid, 3);
        memcpy(out + row - 3, mid + row - 3, 3);
        for (size_t j = 3; j < row - 3; j++) {
            int sum = up[j - 3] + up[j] + up[j + 3] + mid[j - 3] + 5 * mid[j] + mid[j + 3] + down[j - 3] + down[j] +
                      down[j + 3];
            out[j] = blend((sum + 6) / 13, mid[j], f);
        }
    }
}

/* ---- geometric ops: Image.transform(AFFINE, a, BILINEAR, fillcolor=fill) ----
 * Output pixel (x, y) samples the input at (a0 (x+.5) + a1 (y+.5) + a2, a3 (x+.5) + a4 (y+.5) + a5),
 * filled if that is outside the image, else bilinear between the clamped neighbours of
 * (xin - .5, yin - .5), truncated (Geometry.c bilinear_filter32RGB). */

static inline int clampi(int v, int hi) { return v < 0 ? 0 : v > hi ? hi : v; }

static inline void sample(const uint8_t *s, const geometry *g, double xin, double yin, uint8_t *out) {
    if (xin < 0.0 || xin >= g->w || yin < 0.0 || yin >= g->h) {
        out[0] = out[1] = out[2] = (uint8_t)g->fill;
        return;
    }
    xin -= 0.5;
    yin -= 0.5;
    int x0 = (int)floor(xin), y0 = (int)floor(yin);
    double dx = xin - x0, dy = yin - y0;
    int xa = clampi(x0, g->w - 1), xb = clampi(x0 + 1, g->w - 1), ya = clampi(y0, g->h - 1);
    int yb = y0 + 1 < g->h ? y0 + 1 : ya;
    const uint8_t *a = s + ya * g->row, *b = s + yb * g->row;
    for (int c = 0; c < 3; c++) {
        double top = a[3 * xa + c] + (double)(a[3 * xb + c] - a[3 * xa + c]) * dx;
        double bottom = b[3 * xa + c] + (double)(b[3 * xb + c] - b[3 * xa + c]) * dx;
        out[c] = (uint8_t)(top + (bottom - top) * dy);
    }
}

/* Narrow [lo, hi) (within [0, n)) to the x where b + m x stays inside [0, limit): a conservative
 * span, one pixel short at each end, so that rounding cannot take a sample outside. Bounds are
 * clamped to [0, n] before any conversion to int. */
static void inside_span(double b, double m, double limit, int n, int *lo, int *hi) {
    double first = 0, last = n;
    if (fabs(m) * n < 1e-7) { /* flat: inside everywhere or nowhere */
        if (b < 1e-6 || b >= limit - 1e-6) last = 0;
    } else {
        double p = (0 - b) / m, q = (limit - b) / m;
        first = ceil(fmin(p, q)) + 1;
        last = floor(fmax(p, q)) - 1;
    }
    first = fmin(fmax(first, 0), n);
    last = fmin(fmax(last, 0), n);
    if ((int)first > *lo) *lo = (int)first;
    if ((int)last < *hi) *hi = (int)last;
}

VECTOR_CLONES
static void affine(const uint8_t *restrict s, uint8_t *restrict d, const geometry *g, const double *a) {
    double *restrict wide = g->wide; /* the image as doubles, converted in one vector pass, not 12 times a pixel */
    const size_t values = g->row * g->h;
    for (size_t j = 0; j < values; j++) wide[j] = s[j];
    for (int y = 0; y < g->h; y++) {
        uint8_t *out = d + y * g->row;
        /* pixel x samples (bx + a0 x, by + a3 x) in "minus half a pixel" coordinates */
        double bx = a[0] * 0.5 + a[1] * (y + 0.5) + a[2] - 0.5, by = a[3] * 0.5 + a[4] * (y + 0.5) + a[5] - 0.5;
        int lo = 0, hi = g->w; /* where all four neighbours are inside: no clamping, no fill */
        inside_span(bx, a[0], g->w - 1, g->w, &lo, &hi);
        inside_span(by, a[3], g->h - 1, g->w, &lo, &hi);
        hi = hi < lo ? lo : hi;
        for (int x = 0; x < lo; x++) sample(s, g, bx + a[0] * x + 0.5, by + a[3] * x + 0.5, out + 3 * x);
        for (int x = lo; x < hi; x++) {
            double xs = bx + a[0] * x, ys = by + a[3] * x;
            int x0 = (int)xs, y0 = (int)ys;
            double dx = xs - x0, dy = ys - y0;
            const double *p = wide + y0 * g->row + 3 * x0, *q = p + g->row;
            for (int c = 0; c < 3; c++) {
                double top = p[c] + (p[c + 3] - p[c]) * dx;
                double bottom = q[c] + (q[c + 3] - q[c]) * dx;
                out[3 * x + c] = (uint8_t)(top + (bottom - top) * dy);
            }
        }
        for (int x = hi; x < g->w; x++) sample(s, g, bx + a[0] * x + 0.5, by + a[3] * x + 0.5, out + 3 * x);
    }
}

/* The map when it only shifts rows (ShearX, TranslateX: a = [1, a1, a2, 0, 1, 0]): each row is a
 * 1-D interpolation with one fraction; its interior is a plain vectorisable loop. */
VECTOR_CLONES
static void shift_rows(const uint8_t *restrict s, uint8_t *restrict d, const geometry *g, const double *a) {
    for (int y = 0; y < g->h; y++) {
        /* beyond +-(w + 2) every pixel is fill anyway; the clamp keeps the int conversion defined */
        double shift = fmin(fmax(a[1] * (y + 0.5) + a[2], -(g->w + 2.0)), g->w + 2.0), whole = floor(shift);
        int k = (int)whole;
        double t = shift - whole;
        int lo = clampi(-k, g->w), hi = clampi(g->w - 1 - k, g->w); /* x + k and x + k + 1 inside */
        hi = hi < lo ? lo : hi;
        const uint8_t *in = s + y * g->row;
        uint8_t *out = d + y * g->row;
        for (int x = 0; x < lo; x++) sample(s, g, x + 0.5 + shift, y + 0.5, out + 3 * x);
        for (size_t j = 3 * (size_t)lo; j < 3 * (size_t)hi; j++) out[j] = lerp(in[j + 3 * k], in[j + 3 * k + 3], t);
        for (int x = hi; x < g->w; x++) sample(s, g, x + 0.5 + shift, y + 0.5, out + 3 * x);
    }
}

/* ... and when it only shifts columns (ShearY, TranslateY: a = [1, 0, 0, a3, 1, a5]). Column x
 * reads source rows y + k[x] and y + k[x] + 1 with weight t[x]. So the image whose row r holds
 * pixel x of source row clamp(r + k[x]) (gathered a row at a time) turns every output row into
 * a flat interpolation between two gathered rows; the clamping is PIL's edge rule. Pixels whose
 * source is outside the image (a span at each end of the row: the shift is linear) get the fill. */
static void gather_row(const uint8_t *restrict s, uint8_t *restrict out, const geometry *g, int r, int k_lo,
                       int k_hi) {
    const int *k = g->k;
    const int w = g->w, last = g->h - 1;
    const size_t row = g->row;
    if (r + k_lo >= 0 && r + k_hi <= last) { /* no column needs clamping */
        const uint8_t *base = s + (ptrdiff_t)r * (ptrdiff_t)row;
        for (int x = 0; x < w; x++) {
            const uint8_t *from = base + (ptrdiff_t)k[x] * (ptrdiff_t)row + 3 * x;
            out[3 * x] = from[0];
            out[3 * x + 1] = from[1];
            out[3 * x + 2] = from[2];
        }
        return;
    }
    for (int x = 0; x < w; x++) memcpy(out + 3 * x, s + clampi(r + k[x], last) * row + 3 * x, 3);
}

VECTOR_CLONES
static void blend_rows(const uint8_t *top, const uint8_t *bottom, const double *t, uint8_t *out, size_t row) {
    for (size_t j = 0; j < row; j++) out[j] = lerp(top[j], bottom[j], t[j]);
}

static void shift_columns(const uint8_t *restrict s, uint8_t *restrict d, const geometry *g, const double *a) {
    const size_t row = g->row;
    for (int x = 0; x < g->w; x++) {
        double shift = fmin(fmax(a[3] * (x + 0.5) + a[5], -(g->h + 2.0)), g->h + 2.0), whole = floor(shift);
        g->k[x] = (int)whole; /* clamped as in shift_rows */
        g->t[3 * x] = g->t[3 * x + 1] = g->t[3 * x + 2] = shift - whole;
    }
    int k_lo = g->k[0], k_hi = g->k[0]; /* the shift is linear in x: its extremes are at the ends */
    k_lo = g->k[g->w - 1] < k_lo ? g->k[g->w - 1] : k_lo;
    k_hi = g->k[g->w - 1] > k_hi ? g->k[g->w - 1] : k_hi;
    const int translate = a[3] == 0.0; /* one shift for all columns: the source rows need no gathering */
    uint8_t *top = g->rows, *bottom = g->rows + row;
    if (!translate) gather_row(s, top, g, 0, k_lo, k_hi);
    for (int y = 0; y < g->h; y++) {
        uint8_t *out = d + y * row;
        if (translate)
            blend_rows(s + clampi(y + g->k[0], g->h - 1) * row, s + clampi(y + g->k[0] + 1, g->h - 1) * row, g->t, out,
                       row);
        else {
            gather_row(s, bottom, g, y + 1, k_lo, k_hi);
            blend_rows(top, bottom, g->t, out, row);
        }
        int lo = 0, hi = g->w;
        double yin;
        while (lo < hi && ((yin = y + 0.5 + a[3] * (lo + 0.5) + a[5]) < 0.0 || yin >= g->h)) lo++;
        while (hi > lo && ((yin = y + 0.5 + a[3] * (hi - 0.5) + a[5]) < 0.0 || yin >= g->h)) hi--;
        memset(out, g->fill, 3 * (size_t)lo);
        memset(out + 3 * (size_t)hi, g->fill, 3 * (size_t)(g->w - hi));
        uint8_t *swap = top;
        top = bottom;
        bottom = swap;
    }
}

static void warp(const uint8_t *s, uint8_t *d, const geometry *g, const double *a) {
    if (a[0] == 1.0 && a[3] == 0.0 && a[4] == 1.0 && a[5] == 0.0)
        shift_rows(s, d, g, a);
    else if (a[0] == 1.0 && a[1] == 0.0 && a[2] == 0.0 && a[4] == 1.0)
        shift_columns(s, d, g, a);
    else
        affine(s, d, g, a);
}

/* ---- one image, many ops ---- */

/* Run one image's ops from src into dst, through scratch; src is never written. Pointwise ops run
 * in place; every other op (and the first, since src is read-only) moves the image to the other
 * buffer. The first move goes to scratch when the number of moves is even, so the last lands in dst. */
static void augment_one(const uint8_t *src, uint8_t *dst, uint8_t *scratch, const geometry *g, const int32_t *codes,
                        const double *params, int num_ops) {
    size_t pixels = (size_t)g->w * g->h;
    int moves = 0;
    for (int i = 0; i < num_ops; i++)
        if (codes[i] != IDENTITY) moves += moves == 0 || !is_pointwise(codes[i]);
    const uint8_t *current = src;
    uint8_t *other = moves % 2 ? dst : scratch, lut[3][256];
    for (int i = 0; i < num_ops; i++) {
        int code = codes[i];
        const double *p = params + 6 * i;
        if (code == IDENTITY) continue;
        int pointwise = is_pointwise(code);
        uint8_t *target = pointwise && current != src ? (uint8_t *)current : other;
        if (pointwise) {
            pointwise_lut(code, p[0], current, g, lut);
            apply_lut(current, target, pixels, lut);
        }
        else if (code == COLOR) color(current, target, g, (float)p[0]);
        else if (code == SHARPNESS) sharpness(current, target, g, (float)p[0]);
        else warp(current, target, g, p);
        if (target != current) other = current == src ? (target == dst ? scratch : dst) : (uint8_t *)current;
        current = target;
    }
    if (current != dst) memcpy(dst, current, pixels * 3);
}

/* NULL if every op code and parameter is usable; the checks keep all later arithmetic defined
 * (no NaN or huge coordinates reaching an int conversion, posterize shifts in range). */
static const char *check_plan(const int32_t *codes, const double *params, size_t count) {
    for (size_t i = 0; i < count; i++) {
        if (codes[i] < IDENTITY || codes[i] > AFFINE) return "op codes must be in 0..9";
        for (int j = 0; j < 6; j++)
            if (!(fabs(params[6 * i + j]) <= 1e6)) return "params must be finite, at most 1e6 in magnitude";
        if (codes[i] == POSTERIZE && !(params[6 * i] >= 0 && params[6 * i] <= 8))
            return "posterize bits must be in 0..8";
    }
    return NULL;
}

static PyObject *apply(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer src, dst, codes, params;
    Py_ssize_t n, first, last;
    int h, w, num_ops, fill;
    if (!PyArg_ParseTuple(args, "y*w*niiy*y*iinn:apply", &src, &dst, &n, &h, &w, &codes, &params, &num_ops, &fill,
                          &first, &last))
        return NULL;
    size_t image_bytes = (size_t)h * w * 3;
    const char *error = NULL;
    if (h < 3 || w < 3 || num_ops < 0 || n < 0) error = "images must be at least 3x3, counts non-negative";
    else if ((size_t)src.len != image_bytes * n || (size_t)dst.len != image_bytes * n)
        error = "src and dst must each hold n * height * width * 3 bytes";
    else if ((size_t)codes.len != sizeof(int32_t) * n * num_ops) error = "codes must be int32 (n, num_ops)";
    else if ((size_t)params.len != sizeof(double) * 6 * n * num_ops) error = "params must be float64 (n, num_ops, 6)";
    else if (first < 0 || last > n || first > last) error = "bad sample range";
    else if (fill < 0 || fill > 255) error = "fill must be in [0, 255]";
    else error = check_plan((const int32_t *)codes.buf, (const double *)params.buf, (size_t)n * num_ops);
    geometry g = {w, h, (size_t)w * 3, fill, NULL, NULL, NULL, NULL, NULL, NULL};
    uint8_t *scratch = NULL;
    if (!error) {
        scratch = malloc(image_bytes);
        g.k = malloc(sizeof(int) * w);
        g.t = malloc(sizeof(double) * 3 * w);
        g.rows = malloc((size_t)w * 3 * 2);
        g.wide = malloc(sizeof(double) * image_bytes);
        g.spread = malloc((size_t)w * 3);
        g.taps = malloc(sizeof(int32_t) * 5 * 3 * w);
        if (!scratch || !g.k || !g.t || !g.spread || !g.taps || !g.rows || !g.wide) error = "out of memory";
        else luma_taps(g.taps, g.row);
    }
    if (!error) {
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = first; i < last; i++)
            augment_one((const uint8_t *)src.buf + image_bytes * i, (uint8_t *)dst.buf + image_bytes * i, scratch, &g,
                        (const int32_t *)codes.buf + num_ops * i, (const double *)params.buf + 6 * num_ops * i,
                        num_ops);
        Py_END_ALLOW_THREADS
    }
    free(scratch);
    free(g.k);
    free(g.t);
    free(g.spread);
    free(g.taps);
    free(g.rows);
    free(g.wide);
    PyBuffer_Release(&src);
    PyBuffer_Release(&dst);
    PyBuffer_Release(&codes);
    PyBuffer_Release(&params);
    if (error) {
        PyErr_SetString(PyExc_ValueError, error);
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"apply", apply, METH_VARARGS, "Augment samples [first, last) of src into dst, each with its own ops."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_randaugment_cpu", NULL, -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__randaugment_cpu(void) { return PyModule_Create(&module); }
