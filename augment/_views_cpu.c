/* DINO's per-view photometric ops (ColorJitter in a per-sample order, grayscale, Gaussian blur, solarize) on
 * uint8 RGB images, one image at a time, in float32: dataio.augment.view_ops's arithmetic.
 *
 * apply(src, dst, n, height, width, plan, values, kernel, threshold, mean, std, layout, first, last)
 *
 * src: n interleaved (n, H, W, 3) uint8 images, only read. dst by layout: 0 uint8 (n, H, W, 3); 1 float32
 * (n, H, W, 3) (channels_last); 2 float32 (n, 3, H, W) (planes). Samples [first, last) are written.
 * plan: uint8 (n, 5): flag bits (1 jitter, 2 grayscale, 4 blur, 8 solarize), then the jitter ops in their
 * order (0 brightness, 1 contrast, 2 saturation, 3 hue). values: float32 (n, 5): brightness, contrast, saturation
 * factors, hue shift, blur sigma. kernel: blur taps (odd, 1..31); threshold: solarize at >= threshold / 255.
 * mean, std: three float32 each for layouts 1 and 2 ((x - mean) / std), empty for layout 0 (round half up).
 * Everything is checked first: a bad argument raises ValueError and nothing is written.
 *
 * An image goes through in rows. A row is deinterleaved into three float rows (L1-sized), and every pointwise op
 * runs over it in turn, each a flat loop the compiler vectorises (views_rows.h). The image is a whole float image
 * only where contrast comes after another op: contrast needs the mean gray of the image at its place in the order,
 * so the rows before it are kept and summed on the way (contrast first sums the source's bytes). The blur's
 * horizontal pass writes each row into a ring of 2 r + 1 rows, and its vertical pass emits row y - r as soon as
 * row y is there. Hue takes one division a pixel (torchvision's HSV round trip takes five): the same function,
 * within ~1e-6 (module docstring of dataio.augment.views_kernel). The GIL is released; scratch is per thread, kept
 * between calls (a pthread key frees it when the thread ends), so threads may call this at once on different
 * images.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "views_rows.h"

enum { BRIGHTNESS, CONTRAST, SATURATION, HUE, GRAY };
enum { JITTER = 1, GRAYSCALE = 2, BLUR = 4, SOLARIZE = 8 };
enum { OUT_U8, OUT_FLOAT_HWC, OUT_FLOAT_PLANES };
#define MAX_SIDE 16384
#define MAX_FACTOR 1e6f

typedef struct {
    int h, w, ops[5], nops, contrast_at, blur, radius, reach, solarize, layout; /* reach: radius of the kept taps */
    float factor[4], taps[MAX_RADIUS + 1], threshold, mean[3], std[3]; /* taps: centre, then each distance */
} view;

/* ---- per-thread scratch ---- */

typedef struct {
    size_t floats;
    float *data;
} buffer;

static pthread_key_t scratch_key;

static void drop_scratch(void *p) {
    buffer *b = p;
    free(b->data);
    free(b);
}

static float *scratch(size_t floats) {
    buffer *b = pthread_getspecific(scratch_key);
    if (!b) {
        if (!(b = calloc(1, sizeof *b))) return NULL;
        if (pthread_setspecific(scratch_key, b)) {
            free(b);
            return NULL;
        }
    }
    if (b->floats < floats) {
        free(b->data);
        b->data = malloc(floats * sizeof(float));
        b->floats = b->data ? floats : 0;
    }
    return b->data;
}

static void pointwise(float *r, float *g, float *b, const view *v, int from, int to, float mean) {
    for (int k = from; k < to; k++) {
        int op = v->ops[k];
        if (op == BRIGHTNESS) blend_constant_row(r, g, b, v->w, v->factor[op], 0.0f);
        else if (op == CONTRAST) blend_constant_row(r, g, b, v->w, v->factor[op], mean);
        else if (op == SATURATION) saturation_row(r, g, b, v->w, v->factor[op]);
        else if (op == HUE) hue_row(r, g, b, v->w, v->factor[op]);
        else gray_row(r, g, b, v->w);
    }
}

/* p: a row with `radius` values of reflection on each side; out: w values */
static void blur_row(const float *p, float *out, size_t w, const view *v) {
    const float *lo[MAX_RADIUS + 1], *hi[MAX_RADIUS + 1];
    for (int k = 0; k <= v->reach; k++) {
        lo[k] = p - k;
        hi[k] = p + k;
    }
    blur_pairs(p, lo, hi, out, w, v->taps, v->reach);
}

static void reflect_pad(float *p, int w, int radius) {
    for (int k = 1; k <= radius; k++) {
        p[-k] = p[k];
        p[w - 1 + k] = p[w - 1 - k];
    }
}

static inline int reflect(int i, int n) { return i < 0 ? -i : i >= n ? 2 * (n - 1) - i : i; }

/* Vertical pass for output row y of one channel, into out: `ring` holds the last 2 reach + 1 rows blurred along x
 * (row r in slot r % (2 reach + 1), its channels side by side), which are all the rows y reads, reflections included. */
static void blur_column_row(const float *ring, int c, float *out, int y, const view *v) {
    const size_t w = (size_t)v->w;
    const int slots = 2 * v->reach + 1;
    const float *lo[MAX_RADIUS + 1], *hi[MAX_RADIUS + 1];
    for (int k = 0; k <= v->reach; k++) {
        lo[k] = ring + (3 * (size_t)(reflect(y - k, v->h) % slots) + c) * w;
        hi[k] = ring + (3 * (size_t)(reflect(y + k, v->h) % slots) + c) * w;
    }
    blur_pairs(lo[0], lo, hi, out, w, v->taps, v->reach);
}

/* channels: 3, or 1 where the row is gray (r = g = b: rgb[0] stands for all three) */
static void finish_row(float *rgb[3], void *dst, int y, const view *v, uint8_t *bytes, int channels) {
    const int w = v->w;
    if (v->solarize)
        for (int c = 0; c < channels; c++) solarize_row(rgb[c], w, v->threshold);
    float *r = rgb[0], *g = rgb[channels == 3 ? 1 : 0], *b = rgb[channels == 3 ? 2 : 0];
    size_t at = (size_t)y * w;
    if (v->layout == OUT_U8) {
        for (int c = 0; c < channels; c++) quantise_row(rgb[c], bytes + (size_t)c * w, w);
        const uint8_t *q = bytes + (channels == 3 ? (size_t)w : 0);
        interleave_row(bytes, q, q + (channels == 3 ? (size_t)w : 0), (uint8_t *)dst + 3 * at, w);
    } else if (v->layout == OUT_FLOAT_HWC) store_hwc(r, g, b, (float *)dst + 3 * at, w, v->mean, v->std);
    else {
        store_plane(r, (float *)dst + at, w, v->mean[0], v->std[0]);
        store_plane(g, (float *)dst + (size_t)v->h * w + at, w, v->mean[1], v->std[1]);
        store_plane(b, (float *)dst + 2 * (size_t)v->h * w + at, w, v->mean[2], v->std[2]);
    }
}

/* ---- one image ---- */

/* work: the float image (contrast after another op), the ring of rows blurred along x (blur), then 3 padded rows
 * of w + 2 MAX_RADIUS, 3 rows of w, and 3 w bytes (see work_floats). Rows of the image and the ring hold their
 * three channels side by side: the 2 reach + 1 rows the vertical blur reads are one contiguous block (24 KB at
 * 224 px, in L1; a whole image of blurred rows in three planes cost 1.2x the blur). */
static void view_one(const uint8_t *src, void *dst, const view *v, float *work) {
    const int h = v->h, w = v->w, stride = w + 2 * MAX_RADIUS;
    const size_t pixels = (size_t)h * w;
    const int from = v->contrast_at > 0 ? v->contrast_at : 0; /* the ops before contrast, kept in the image */
    const int channels = v->nops && v->ops[v->nops - 1] == GRAY ? 1 : 3; /* gray rows: one channel blurred */
    float *image = work, *ring = image + (from ? 3 * pixels : 0), *row[3], *out[3];
    float *rows = ring + (v->blur ? 3 * (size_t)(2 * v->reach + 1) * w : 0);
    for (int c = 0; c < 3; c++) {
        row[c] = rows + (size_t)c * stride + MAX_RADIUS;
        out[c] = rows + 3 * (size_t)stride + (size_t)c * w;
    }
    uint8_t *bytes = (uint8_t *)(out[2] + w);
    float mean = 0.0f;
    if (v->contrast_at == 0) { /* contrast first: the source's mean gray, from integer sums (no float pass) */
        uint64_t sums[3] = {0, 0, 0};
        for (int y = 0; y < h; y++) channel_sums(src + 3 * (size_t)y * w, 3 * (size_t)w, sums);
        mean = (float)(((double)LUMA_R * sums[0] + (double)LUMA_G * sums[1] + (double)LUMA_B * sums[2]) /
                       (255.0 * (double)pixels));
    } else if (from) { /* the ops before contrast, and the mean gray after them */
        double sum = 0.0;
        for (int y = 0; y < h; y++) {
            load_row(src + 3 * (size_t)y * w, row[0], row[1], row[2], w);
            pointwise(row[0], row[1], row[2], v, 0, from, 0.0f);
            sum += gray_sum_row(row[0], row[1], row[2], w);
            for (int c = 0; c < 3; c++) memcpy(image + (3 * (size_t)y + c) * w, row[c], sizeof(float) * w);
        }
        mean = (float)(sum / (double)pixels);
    }
    const int slots = 2 * v->reach + 1;
    for (int y = 0; y < h; y++) {
        if (from) /* this row after the ops before contrast */
            for (int c = 0; c < 3; c++) memcpy(row[c], image + (3 * (size_t)y + c) * w, sizeof(float) * w);
        else
            load_row(src + 3 * (size_t)y * w, row[0], row[1], row[2], w);
        pointwise(row[0], row[1], row[2], v, from, v->nops, mean);
        if (!v->blur) {
            finish_row(row, dst, y, v, bytes, channels);
            continue;
        }
        for (int c = 0; c < channels; c++) {
            reflect_pad(row[c], w, v->reach);
            blur_row(row[c], ring + (3 * (size_t)(y % slots) + c) * w, (size_t)w, v);
        }
        if (y >= v->reach) { /* rows up to y are blurred along x: row y - reach can be finished */
            for (int c = 0; c < channels; c++) blur_column_row(ring, c, out[c], y - v->reach, v);
            finish_row(out, dst, y - v->reach, v, bytes, channels);
        }
    }
    for (int y = v->blur ? h - v->reach : h; y < h; y++) {
        for (int c = 0; c < channels; c++) blur_column_row(ring, c, out[c], y, v);
        finish_row(out, dst, y, v, bytes, channels);
    }
}

/* The scratch one image of h x w needs, in floats, at most (view_one's layout). */
static size_t work_floats(int h, int w) {
    return 3 * ((size_t)h * w + (size_t)MAX_KERNEL * w + (size_t)(w + 2 * MAX_RADIUS) + (size_t)w) + (size_t)w;
}

/* The view of sample i, or an error message (checked for all samples before anything is written). */
static const char *make_view(view *v, const uint8_t *plan, const float *values, int h, int w, int kernel,
                             int threshold, int layout, const float *mean, const float *std) {
    memset(v, 0, sizeof *v);
    v->h = h;
    v->w = w;
    v->layout = layout;
    v->contrast_at = -1;
    if (plan[0] > 15) return "plan flags must be in 0..15";
    int seen = 0;
    for (int k = 0; k < 4; k++)
        seen |= plan[1 + k] < 4 ? 1 << plan[1 + k] : 16;
    if (seen != 15) return "each plan row's order must be a permutation of 0..3";
    for (int k = 0; k < 5; k++)
        if (!(fabsf(values[k]) <= MAX_FACTOR)) return "values must be finite, at most 1e6 in magnitude";
    if (values[0] < 0 || values[1] < 0 || values[2] < 0 || fabsf(values[3]) > 0.5f)
        return "brightness, contrast, saturation factors must be >= 0 and the hue shift in [-0.5, 0.5]";
    if (plan[0] & JITTER)
        for (int k = 0; k < 4; k++) {
            int op = plan[1 + k];
            if (values[op] == (op == HUE ? 0.0f : 1.0f)) continue; /* the identity: skipped, as view_ops */
            if (op == CONTRAST) v->contrast_at = v->nops;
            v->ops[v->nops++] = op;
        }
    if (plan[0] & GRAYSCALE) v->ops[v->nops++] = GRAY;
    memcpy(v->factor, values, sizeof v->factor);
    if (plan[0] & BLUR) {
        float sigma = values[4], sum = 0.0f;
        if (!(sigma > 0.0f)) return "blur sigma must be > 0";
        v->blur = 1;
        v->radius = kernel / 2;
        if (h <= v->radius || w <= v->radius) return "images too small for the blur kernel (each side > kernel // 2)";
        float pdf[MAX_KERNEL];
        for (int k = 0; k < kernel; k++) { /* torchvision's _get_gaussian_kernel1d */
            float x = (float)(k - v->radius) / sigma;
            pdf[k] = expf(-0.5f * (x * x));
            sum += pdf[k];
        }
        /* taps under 1e-10 are left out (at most 2e-9 of a value, far under the tolerance): no denormal products
         * (slow on x86) and fewer taps for small sigmas */
        for (int k = 0; k <= v->radius; k++) {
            v->taps[k] = pdf[v->radius + k] / sum;
            if (v->taps[k] >= 1e-10f) v->reach = k;
        }
    }
    v->solarize = (plan[0] & SOLARIZE) != 0;
    v->threshold = (float)threshold * INV255;
    if (layout != OUT_U8)
        for (int c = 0; c < 3; c++) {
            v->mean[c] = mean[c];
            v->std[c] = std[c];
        }
    return NULL;
}

static PyObject *apply(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer src, dst, plan, values, mean, std;
    Py_ssize_t n, first, last;
    int h, w, kernel, threshold, layout;
    if (!PyArg_ParseTuple(args, "y*w*niiy*y*iiy*y*inn:apply", &src, &dst, &n, &h, &w, &plan, &values, &kernel,
                          &threshold, &mean, &std, &layout, &first, &last))
        return NULL;
    const char *error = NULL;
    size_t image = (size_t)h * w * 3, out_item = layout == OUT_U8 ? 1 : sizeof(float);
    if (h < 1 || w < 1 || h > MAX_SIDE || w > MAX_SIDE || n < 0) error = "sides must be in 1..16384, n >= 0";
    else if (layout < OUT_U8 || layout > OUT_FLOAT_PLANES) error = "layout must be 0 (uint8), 1 or 2 (float32)";
    else if ((size_t)src.len != image * n) error = "src must hold n * height * width * 3 bytes";
    else if ((size_t)dst.len != image * n * out_item) error = "dst must hold n * height * width * 3 values of its layout";
    else if ((size_t)plan.len != 5 * (size_t)n) error = "plan must be uint8 (n, 5)";
    else if ((size_t)values.len != 5 * sizeof(float) * n) error = "values must be float32 (n, 5)";
    else if (kernel < 1 || kernel > MAX_KERNEL || kernel % 2 == 0) error = "kernel must be odd, in 1..31";
    else if (threshold < 0 || threshold > 255) error = "threshold must be in 0..255";
    else if (first < 0 || last > n || first > last) error = "bad sample range";
    else if (layout == OUT_U8 ? mean.len != 0 || std.len != 0
                              : mean.len != 3 * (Py_ssize_t)sizeof(float) || std.len != 3 * (Py_ssize_t)sizeof(float))
        error = "mean and std: three float32 each for float output, empty for uint8";
    float m[3] = {0}, s[3] = {1, 1, 1};
    if (!error && layout != OUT_U8) {
        memcpy(m, mean.buf, sizeof m);
        memcpy(s, std.buf, sizeof s);
        for (int c = 0; c < 3; c++)
            if (!isfinite(m[c]) || !isfinite(s[c]) || s[c] == 0.0f) error = "mean and std must be finite, std nonzero";
    }
    view *views = NULL;
    if (!error && last > first && !(views = malloc(sizeof(view) * (size_t)(last - first)))) error = "out of memory";
    for (Py_ssize_t i = first; !error && i < last; i++)
        error = make_view(&views[i - first], (const uint8_t *)plan.buf + 5 * i, (const float *)values.buf + 5 * i, h,
                          w, kernel, threshold, layout, m, s);
    if (!error && last > first) {
        size_t floats = work_floats(h, w);
        Py_BEGIN_ALLOW_THREADS
        float *work = scratch(floats);
        if (!work) error = "out of memory";
        for (Py_ssize_t i = first; work && i < last; i++)
            view_one((const uint8_t *)src.buf + image * i, (char *)dst.buf + image * out_item * i, &views[i - first],
                     work);
        Py_END_ALLOW_THREADS
    }
    free(views);
    PyBuffer_Release(&src);
    PyBuffer_Release(&dst);
    PyBuffer_Release(&plan);
    PyBuffer_Release(&values);
    PyBuffer_Release(&mean);
    PyBuffer_Release(&std);
    if (error) {
        PyErr_SetString(PyExc_ValueError, error);
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"apply", apply, METH_VARARGS, "DINO's per-view photometric ops on samples [first, last) of src into dst."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_views_cpu", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__views_cpu(void) {
    if (pthread_key_create(&scratch_key, drop_scratch)) return PyErr_NoMemory();
    return PyModule_Create(&module);
}
