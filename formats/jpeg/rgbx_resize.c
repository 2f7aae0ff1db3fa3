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
 * where no output has more than 3). The kernels, one file per CPU tier (resize_kernels.h): AVX-512
 * (with or without VBMI) resizes four outputs of a row at once and writes sixteen pixels of the vertical
 * pass as RGB with a masked store; AVX2 two outputs (PIL's SSE4 build: one) and eight pixels; plain C
 * one. 75 us against PIL's 180 for that crop (VBMI). A training crop to 224 px of a 500x375 image
 * (one thread, 2026-12-07): 94 us VBMI, 91 AVX-512 without it, 103 AVX2, 662 plain C.
 */
#include "rgbx_resize.h"
#include "resize_kernels.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define PRECISION_BITS (32 - 8 - 2)  /* PIL's */
#define MAX_COEFS_PRECISION (16 - 1) /* pillow-simd's: int16 coefficients */

/* *buffer with room for bytes (what it held is not kept): grown, never shrunk, so that a thread's plan is
 * rebuilt in place for each new geometry (its dozen mallocs and frees cost 3 us a resize). 0: no memory. */
int resize_reserve(void *buffer, size_t *capacity, size_t bytes) {
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
    if (!resize_reserve(&a->kk, &a->kk_cap, sizeof(double) * (size_t)out_size * (size_t)ksize) ||
        !resize_reserve(&a->first, &a->first_cap, sizeof(int) * (size_t)out_size) ||
        !resize_reserve(&a->count, &a->count_cap, sizeof(int) * (size_t)out_size) ||
        !resize_reserve(&a->k, &a->k_cap, sizeof(int16_t) * (size_t)out_size * (size_t)ksize))
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
    /* The largest weight, over four running maxima: one chain of maxsd was 4 cycles a weight, half of the
     * plan of a training crop (the largest of the same values, whatever the order). */
    double most[4] = {kk[0], kk[0], kk[0], kk[0]};
    size_t x4 = total / 4 * 4;
    for (size_t x = 0; x < x4; x += 4)
        for (int j = 0; j < 4; j++)
            most[j] = most[j] < kk[x + j] ? kk[x + j] : most[j];
    for (size_t x = x4; x < total; x++)
        most[0] = most[0] < kk[x] ? kk[x] : most[0];
    double maxkk = most[0];
    for (int j = 1; j < 4; j++)
        maxkk = maxkk < most[j] ? most[j] : maxkk;
    int precision;
    for (precision = 0; precision < PRECISION_BITS; precision += 1) {
        int next_value = (int)(0.5 + maxkk * (1 << (precision + 1)));
        if (next_value >= (1 << MAX_COEFS_PRECISION))
            break;
    }
    const double unit = (double)(1 << precision);
    for (size_t x = 0; x < total; x++) /* branch-free for the compiler to vectorise: the same sums as PIL's */
        a->k[x] = (int16_t)(int)(kk[x] * unit + (kk[x] < 0 ? -0.5 : 0.5));
    a->precision = precision;
    return precision > 0;
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

int rgbx_resize_simd(void) {
#if HAVE_AVX2
    return resize_cpu_tier();
#else
    return TIER_SCALAR;
#endif
}

/* The process's tier: the most a resize given simd < 0 uses (a benign race: one int, set before loading). */
static int process_tier = TIER_VBMI;

int rgbx_resize_set_tier(int tier) {
    process_tier = tier < TIER_SCALAR ? TIER_SCALAR : tier > TIER_VBMI ? TIER_VBMI : tier;
    return rgbx_resize_tier();
}

int rgbx_resize_tier(void) {
    int cpu = rgbx_resize_simd();
    return process_tier < cpu ? process_tier : cpu;
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
    plan->level = resize_cpu_tier() < simd ? resize_cpu_tier() : simd;
    plan->h_level =
        !plan->need_h ? TIER_SCALAR
        : plan->level >= TIER_AVX512 && zmm_plan_make(&plan->z, &plan->h, width, plan->level == TIER_VBMI)
            ? plan->level
        : plan->level >= TIER_AVX2 && simd_plan_make(&plan->s, &plan->h, width) ? TIER_AVX2
                                                                                : TIER_SCALAR;
#endif
    plan->ring = plan->need_v ? plan->v.ksize : 1; /* rows of the horizontal pass kept: the most taps of an output */
    if (!resize_reserve(&plan->rows, &plan->rows_cap, (size_t)plan->ring * out_w * 4) ||
        !resize_reserve(&plan->held, &plan->held_cap, sizeof(int) * (size_t)plan->ring) ||
        !resize_reserve(&plan->taps, &plan->taps_cap, sizeof(unsigned char *) * (size_t)plan->v.ksize))
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
    if (simd < 0)
        simd = rgbx_resize_tier();
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
                if (plan->h_level >= TIER_AVX512)
                    h_row_zmm(in, slot, &plan->z, out_w, h->precision);
                else if (plan->h_level == TIER_AVX2)
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
        if (plan->level >= TIER_AVX512) {
            v_row_zmm(plan->taps, k, count, v->precision, out_w, to, flip, plan->level == TIER_VBMI);
            continue;
        }
        if (plan->level == TIER_AVX2) {
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
