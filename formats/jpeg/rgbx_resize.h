/* The crop-resize of a decoded region into a batch slot: PIL's antialiased bilinear resize, with
 * pillow-simd's integer arithmetic, straight into packed RGB rows (rgbx_resize.c). */
#ifndef DATAIO_RGBX_RESIZE_H
#define DATAIO_RGBX_RESIZE_H
#include <stddef.h>

enum { RESIZE_OK = 0, RESIZE_BAD_BOX, RESIZE_NO_MEMORY };

/* Resize the box [x0, x1) x [y0, y1) of the width x height RGBX image src (4 bytes a pixel, rows
 * stride bytes apart) to out_w x out_h pixels, as pillow-simd's Image.resize((out_w, out_h),
 * BILINEAR, box) gives them, and write them to out as RGB (3 bytes a pixel, rows out_w * 3 bytes
 * apart), mirrored left-right if flip. The box is taken as float, as PIL takes it. simd: the most
 * the kernels may use, where the CPU has it: 3 AVX-512 with VBMI and VNNI, 2 AVX-512 F/BW/VL, 1 AVX2,
 * 0 plain C (the same pixels at every tier; the tests compare them); below 0, the process's tier
 * (rgbx_resize_set_tier). Returns
 * RESIZE_OK, RESIZE_BAD_BOX for a box PIL refuses (outside the image, negative size), or
 * RESIZE_NO_MEMORY. */
int rgbx_resize(const unsigned char *src, size_t stride, int width, int height, float x0, float y0, float x1,
                float y1, unsigned char *out, int out_w, int out_h, int flip, int simd);

/* The highest tier this CPU runs: 3 AVX-512 VBMI, 2 AVX-512, 1 AVX2, 0 plain C. */
int rgbx_resize_simd(void);

/* Cap the process's tier (what rgbx_resize uses for simd < 0) at tier; returns the tier then in use: the
 * lower of tier and the CPU's. */
int rgbx_resize_set_tier(int tier);

/* The process's tier in use. */
int rgbx_resize_tier(void);

#endif
