/* One decoded uint8 RGB image normalised into its float32 slot of a batch: (x - mean) / std per channel.
 *
 * normalize(src, dst, mean, std, planar)
 *
 * src: H*W*3 interleaved uint8 (the decode's HWC slot); dst: H*W*3 float32, interleaved like src
 * (channels_last) or planar=1 as three H*W planes (NCHW). mean, std: three float32 each (in 0..255 units).
 *
 * The CPU device's normalisation, run on the decode thread right after the image is written, while it
 * is still in cache (image_batches). The same two float32 operations as Normalize's torch path, in the same
 * order (compiled with -ffp-contract=off, no reciprocal): the values are bit-identical. The interleaved loop
 * takes 48 values (16 pixels) at a time against 48-long mean/std patterns, which the compiler vectorises.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "vector_clones.h"

#define PATTERN 48 /* values per step: 16 pixels, a multiple of 3 and of the vector width */

VECTOR_CLONES
static void interleaved(const uint8_t *src, float *dst, size_t values, const float *mean, const float *std) {
    float m[PATTERN], s[PATTERN];
    for (int k = 0; k < PATTERN; k++) {
        m[k] = mean[k % 3];
        s[k] = std[k % 3];
    }
    size_t i = 0;
    for (; i + PATTERN <= values; i += PATTERN)
        for (int k = 0; k < PATTERN; k++)
            dst[i + k] = ((float)src[i + k] - m[k]) / s[k];
    for (; i < values; i++)
        dst[i] = ((float)src[i] - mean[i % 3]) / std[i % 3];
}

VECTOR_CLONES
static void planar(const uint8_t *src, float *dst, size_t pixels, const float *mean, const float *std) {
    for (int c = 0; c < 3; c++) {
        const float mc = mean[c], sc = std[c];
        const uint8_t *from = src + c;
        float *to = dst + (size_t)c * pixels;
        for (size_t p = 0; p < pixels; p++)
            to[p] = ((float)from[3 * p] - mc) / sc;
    }
}

static PyObject *normalize(PyObject *self, PyObject *args) {
    Py_buffer src, dst, mean, std;
    int to_planes;
    if (!PyArg_ParseTuple(args, "y*w*y*y*p:normalize", &src, &dst, &mean, &std, &to_planes))
        return NULL;
    PyObject *result = NULL;
    if (src.len % 3 != 0 || dst.len != src.len * (Py_ssize_t)sizeof(float)) {
        PyErr_Format(PyExc_ValueError, "normalize: src holds %zd bytes (a multiple of 3) and dst must hold 4 "
                     "bytes for each, got %zd", src.len, dst.len);
    } else if (mean.len != 3 * (Py_ssize_t)sizeof(float) || std.len != 3 * (Py_ssize_t)sizeof(float)) {
        PyErr_SetString(PyExc_ValueError, "normalize: mean and std are three float32 each");
    } else {
        float m[3], s[3];
        memcpy(m, mean.buf, sizeof m);
        memcpy(s, std.buf, sizeof s);
        Py_BEGIN_ALLOW_THREADS
        if (to_planes)
            planar((const uint8_t *)src.buf, (float *)dst.buf, (size_t)src.len / 3, m, s);
        else
            interleaved((const uint8_t *)src.buf, (float *)dst.buf, (size_t)src.len, m, s);
        Py_END_ALLOW_THREADS
        result = Py_None;
        Py_INCREF(result);
    }
    PyBuffer_Release(&src);
    PyBuffer_Release(&dst);
    PyBuffer_Release(&mean);
    PyBuffer_Release(&std);
    return result;
}

static PyMethodDef methods[] = {
    {"normalize", normalize, METH_VARARGS, "(src - mean) / std of one uint8 HWC image into float32 dst."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_normalize_cpu", NULL, -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__normalize_cpu(void) { return PyModule_Create(&module); }
