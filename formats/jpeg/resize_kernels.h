/* The crop-resize's kernels, one file per CPU tier (rgbx_resize.c drives them):
 * resize_scalar.c plain C, resize_avx2.c AVX2, resize_avx512.c AVX-512 F/BW with and without VBMI.
 * Every kernel forms the same integer sums as pillow-simd, so every tier gives the same pixels. */
#ifndef DATAIO_RESIZE_KERNELS_H
#define DATAIO_RESIZE_KERNELS_H
#include <stddef.h>
#include <stdint.h>

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_AVX2 1
#else
#define HAVE_AVX2 0
#endif

/* The tiers, each the most a resize may use: the CPU's own is the highest it has (resize_cpu_tier). */
enum { TIER_SCALAR = 0, TIER_AVX2 = 1, TIER_AVX512 = 2, TIER_VBMI = 3 };

/* One axis of a resize: PIL's coefficients of each output. */
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

/* *buffer with room for bytes (what it held is not kept): grown, never shrunk. 0: no memory. */
int resize_reserve(void *buffer, size_t *capacity, size_t bytes);

/* Plain C: the horizontal pass of one row (in: the source row, out: h->n RGBX pixels), and the vertical pass
 * of one output row from its count input rows, packed to RGB at out (mirrored if flip). */
void h_row_scalar(const unsigned char *in, unsigned char *out, const axis_plan *h);
void v_row_scalar(const unsigned char *const *rows, const int16_t *k, int count, int precision, int n,
                  unsigned char *out, int flip);

#if HAVE_AVX2
/* AVX2 (resize_avx2.c): two outputs of a row per register; the plan holds each output's window and its
 * pairs of coefficients. */
typedef struct {
    int taps;
    int *start;
    int32_t *kv;
    int16_t *window;
    size_t start_cap, kv_cap, window_cap;
} simd_plan;

int simd_plan_make(simd_plan *s, const axis_plan *h, int width);
void simd_plan_free(simd_plan *s);
void h_row_avx2(const unsigned char *in, unsigned char *out, const simd_plan *s, int n, int precision);
/* out_end bounds the bytes a store may write past its pixels */
void v_row_avx2(const unsigned char *const *rows, const int16_t *k, int count, int precision, int n,
                unsigned char *out, int flip, const unsigned char *out_end);

/* AVX-512 (resize_avx512.c): four outputs of a row per register, from one 16-pixel load per quad of outputs.
 * The VBMI plan holds byte permutes (vpermt2b), the plain one dword permutes (vpermd, AVX-512F). */
typedef struct {
    int quads, pairs, vbmi;
    int *base;
    uint8_t *index; /* VBMI: quads * pairs * 64 bytes; plain: quads * ceil(pairs / 2) * 16 dwords */
    int32_t *kv;    /* quads * pairs * 16 */
    size_t base_cap, index_cap, kv_cap;
} zmm_plan;

/* 0 where some quad's taps span more than 16 pixels (a downscale past about 2.5x) or the row is under 16
 * pixels: the AVX2 kernel does those. */
int zmm_plan_make(zmm_plan *z, const axis_plan *h, int width, int vbmi);
void zmm_plan_free(zmm_plan *z);
void h_row_zmm(const unsigned char *in, unsigned char *out, const zmm_plan *z, int n, int precision);
void v_row_zmm(const unsigned char *const *rows, const int16_t *k, int count, int precision, int n,
               unsigned char *out, int flip, int vbmi);

/* The highest tier this CPU runs. */
int resize_cpu_tier(void);
#endif

#endif
