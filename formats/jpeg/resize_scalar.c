/* The plain C tier of the crop-resize (resize_kernels.h): any CPU, and the reference the tests hold every
 * other tier to (the same pixels as PIL's). */
#include "resize_kernels.h"

static unsigned char clamp8(int32_t sum, int precision) {
    int32_t v = sum >> precision;
    return (unsigned char)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* The horizontal pass of one row: in (the source row) to out (h->n RGBX pixels). */
void h_row_scalar(const unsigned char *in, unsigned char *out, const axis_plan *h) {
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
void v_row_scalar(const unsigned char *const *rows, const int16_t *k, int count, int precision, int n,
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
