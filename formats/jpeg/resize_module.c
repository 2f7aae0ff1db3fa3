/* The Python functions of dataio.formats.jpeg._jpeg_codec that write RGB pixels into a batch slot
 * (resize_module.h): pack_rgbx and the crop-resize's resize_rgbx, with its tiers; the module's method table is
 * in _jpeg_codec.c. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "resize_module.h"
#include "rgbx_resize.h"

#include <stdint.h>
#include <string.h>

/* The Arrow C data interface's array (a stable ABI: arrow.apache.org/docs/format/CDataInterface.html). Pillow
 * (11.2+) exports an RGB/RGBX image through it without a copy: one child whose buffers[1] is the image's
 * pixel memory, 4 bytes a pixel, when the image lies in one block. */
struct ArrowArray {
    int64_t length, null_count, offset, n_buffers, n_children;
    const void **buffers;
    struct ArrowArray **children;
    struct ArrowArray *dictionary;
    void (*release)(struct ArrowArray *);
    void *private_data;
};

/* The pixels of an exported image of width * height 4-byte pixels, or NULL if the export is not one. */
static const unsigned char *arrow_pixels(PyObject *capsule, size_t bytes) {
    struct ArrowArray *array = PyCapsule_GetPointer(capsule, "arrow_array");
    if (array == NULL || array->release == NULL || array->n_children != 1 || array->children == NULL)
        return NULL;
    const struct ArrowArray *child = array->children[0];
    if (child == NULL || child->n_buffers != 2 || child->buffers == NULL || child->offset != 0 ||
        child->length < 0 || (uint64_t)child->length != (uint64_t)bytes)
        return NULL;
    return child->buffers[1];
}

/* RGBX rows to RGB rows, mirrored if flip: each pixel with one 4-byte move whose 4th byte the next pixel
 * overwrites (the very last pixel gets exactly 3 bytes). 15 us for 224x224 on the 2-core VM; a variant
 * building three 32-bit words from four pixels with shifts took 71. */
static void pack_rows(const unsigned char *in, unsigned char *to, int width, int height, int flip) {
    for (int y = 0; y < height; y++) {
        const unsigned char *row = in + (size_t)y * width * 4;
        unsigned char *dest = to + (size_t)y * width * 3;
        int last = y == height - 1;
        int whole = width - last; /* pixels written with a 4-byte move */
        if (flip)
            for (int x = 0; x < whole; x++) memcpy(dest + 3 * (size_t)x, row + 4 * (size_t)(width - 1 - x), 4);
        else
            for (int x = 0; x < whole; x++) memcpy(dest + 3 * (size_t)x, row + 4 * (size_t)x, 4);
        if (last)
            memcpy(dest + 3 * (size_t)(width - 1), row + 4 * (size_t)(flip ? 0 : width - 1), 3);
    }
}

/* pack_rgbx(rgbx, out, width, height, flip): RGBX pixels to packed RGB in the writable out, mirrored
 * left-right if flip: one pass, GIL released, instead of PIL's flip (a new image) and RGB packing (a
 * new bytes object). rgbx is a buffer (PIL's tobytes("raw", "RGBX")) or, without that copy, the
 * "arrow_array" capsule of a resized image's ``im.__arrow_c_array__()``; a capsule that is not one
 * image of width * height 4-byte pixels in one block raises TypeError (a caller's error, not the data's). */
PyObject *pack_rgbx(PyObject *self, PyObject *args) {
    PyObject *source;
    Py_buffer src = {0}, out;
    int width, height, flip;
    (void)self;
    if (!PyArg_ParseTuple(args, "Ow*iip:pack_rgbx", &source, &out, &width, &height, &flip))
        return NULL;
    const unsigned char *in = NULL;
    size_t bytes = width > 0 && height > 0 ? (size_t)width * height * 4 : 0;
    if (PyCapsule_CheckExact(source)) {
        in = PyCapsule_IsValid(source, "arrow_array") ? arrow_pixels(source, bytes) : NULL;
        if (in == NULL) {
            PyBuffer_Release(&out);
            PyErr_SetString(PyExc_TypeError, "pack_rgbx: the capsule is not an image's Arrow array of "
                                              "width*height 4-byte pixels in one block");
            return NULL;
        }
    } else {
        if (PyObject_GetBuffer(source, &src, PyBUF_SIMPLE) < 0) {
            PyBuffer_Release(&out);
            return NULL;
        }
        in = src.buf;
        if ((size_t)src.len != bytes)
            bytes = 0;
    }
    if (bytes == 0 || (size_t)out.len != (size_t)width * height * 3) {
        if (src.obj != NULL)
            PyBuffer_Release(&src);
        PyBuffer_Release(&out);
        PyErr_SetString(PyExc_ValueError, "pack_rgbx: rgbx must hold width*height*4 bytes and out width*height*3");
        return NULL;
    }
    unsigned char *to = out.buf;
    Py_BEGIN_ALLOW_THREADS
    pack_rows(in, to, width, height, flip);
    Py_END_ALLOW_THREADS
    if (src.obj != NULL)
        PyBuffer_Release(&src);
    PyBuffer_Release(&out);
    Py_RETURN_NONE;
}

/* resize_rgbx(rgbx, width, height, (x0, y0, x1, y1), out, out_width, out_height, flip, simd=-1): the box
 * of the width x height RGBX pixels in rgbx (a decode_region result: rows width * 4 bytes apart) resized to
 * out_width x out_height into the writable out as RGB, mirrored if flip: pillow-simd's antialiased bilinear
 * resize(box=...) and pack_rgbx in one pass (rgbx_resize.h), GIL released; simd: the most its kernels may use
 * (below 0: the process's tier, resize_tier). */
PyObject *resize_rgbx(PyObject *self, PyObject *args) {
    Py_buffer src, out;
    int width, height, out_w, out_h, flip, simd = -1, status;
    float x0, y0, x1, y1;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*ii(ffff)w*iip|i:resize_rgbx", &src, &width, &height, &x0, &y0, &x1, &y1, &out,
                          &out_w, &out_h, &flip, &simd))
        return NULL;
    if (width < 1 || height < 1 || out_w < 1 || out_h < 1 || (size_t)src.len < (size_t)width * height * 4 ||
        (size_t)out.len != (size_t)out_w * out_h * 3) {
        PyBuffer_Release(&src);
        PyBuffer_Release(&out);
        PyErr_SetString(PyExc_ValueError, "resize_rgbx: rgbx must hold width*height*4 bytes and out "
                                          "out_width*out_height*3");
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    status = rgbx_resize(src.buf, (size_t)width * 4, width, height, x0, y0, x1, y1, out.buf, out_w, out_h, flip, simd);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&src);
    PyBuffer_Release(&out);
    if (status == RESIZE_BAD_BOX) {
        PyErr_SetString(PyExc_ValueError, "resize_rgbx: the box is outside the image or of negative size");
        return NULL;
    }
    if (status != RESIZE_OK)
        return PyErr_NoMemory();
    Py_RETURN_NONE;
}

PyObject *resize_simd(PyObject *self, PyObject *args) {
    (void)self;
    (void)args;
    return PyLong_FromLong(rgbx_resize_simd());
}

PyObject *resize_tier(PyObject *self, PyObject *args) {
    int tier = -1;
    (void)self;
    if (!PyArg_ParseTuple(args, "|i:resize_tier", &tier))
        return NULL;
    return PyLong_FromLong(tier < 0 ? rgbx_resize_tier() : rgbx_resize_set_tier(tier));
}
