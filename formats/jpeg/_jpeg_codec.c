/* Decode only a region of a JPEG with libjpeg-turbo, into a 4-byte-per-pixel buffer PIL can map.
 *
 * header(data) -> (width, height): the image size, from the header alone.
 * decode_region(data, x0, y0, x1, y1, scale_denom, out, splice=True) -> (width, height, left)
 * pack_rgbx(rgbx, out, width, height, flip): RGBX -> RGB into out, optionally mirrored, and the crop-resize's
 *     resize_rgbx, resize_simd and resize_tier: resize_module.c.
 * add_restart_markers(data, most_mcus) -> bytes: the pack-time lossless rewrite (jpeg_restart.h).
 * splice(data, x0, y0, x1, y1) -> (bytes, left, top) or None: jpeg_splice.h (the DALI backend's cut,
 *     with the same chroma context as decode_region).
 *
 * (x0, y0, x1, y1) is the wanted box in pixels of the image decoded at 1/scale_denom
 * (scale_denom in 1, 2, 4, 8: DCT scaling). Rows above y0 are skipped (entropy-decoded
 * only), rows below y1 are never read, and columns outside [x0, x1) are not inverse-DCT'd
 * or colour-converted (jpeg_crop_scanline widens the span to iMCU boundaries). In a file whose
 * restart intervals tile its MCU rows (what dataio's packer writes), splice (the default) first
 * cuts the file down to the intervals around the box, so that rows and columns outside it are
 * not even entropy-decoded; the pixels are the same either way. The spliced file is decoded at its
 * full width, at most an interval (32 pixels) wider than the box on each side (two on one side where a
 * cut no wider than an MCU takes one more: jpeg_splice.h), and so is a spliceable file whose cut would
 * keep every interval (a cropped decode's edges are not the whole image's): jpeg_crop_scanline
 * there measured 3-6% more CPU per image than decoding the columns it leaves out (a ~50 KB photo's
 * training crop 372 -> 360 us, its eval crop 493 -> 461; libjpeg-turbo 2.1.5), while on a file
 * without restart markers it saves more than it costs once it drops over 5% of the width. The rows are
 * written to the writable buffer out as width * height RGBX pixels (PIL's own layout for RGB
 * images, so PIL can map it without a copy); the wanted box starts at column left. out must
 * hold ceil(image width / scale_denom) * (y1 - y0) * 4 bytes. The GIL is released while decoding.
 *
 * check(data): entropy-decode every scan (no inverse DCT, no colour conversion: about a third of a
 *     decode) and raise if the data is damaged; the pack-time check of files PIL decodes.
 *
 * Errors raise ValueError with libjpeg's message. Damaged entropy-coded data (a truncated file, a
 * bad Huffman code, a premature marker, extraneous bytes: libjpeg only warns about these and pads
 * with grey, and PIL passes them on silently) raises CorruptJPEGError, a ValueError; warnings that
 * leave the pixels right are ignored (jpeg_error.h). Colour spaces other than YCbCr/RGB/grayscale (CMYK, YCCK) raise NotImplementedError
 * so the caller can fall back to PIL.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "jpeg_error.h"
#include "jpeg_restart.h"
#include "jpeg_splice.h"
#include "resize_module.h"

/* libjpeg-turbo's AVX2 colour conversion writes an output row that starts on a 32-byte boundary with
 * non-temporal stores (jdcolext-avx2.asm): past the cache, to memory, from where the resize then reads it.
 * Such rows are decoded into a row 16 bytes off the boundary and copied: a ~50 KB photo's training crop
 * decoded into 32-byte-aligned rows took 510 us against 403 sixteen bytes off (the callers' scratch buffer
 * starts there: turbo_decode._buffer); rows of a width that is not a multiple of 8 pixels alternate. */
#define STREAMED_ROWS 32

enum { OK = 0, LIBJPEG_ERROR, UNSUPPORTED, BAD_BOX, SMALL_BUFFER };

static int supported(const struct jpeg_decompress_struct *cinfo) {
    return cinfo->jpeg_color_space == JCS_YCbCr || cinfo->jpeg_color_space == JCS_RGB ||
           cinfo->jpeg_color_space == JCS_GRAYSCALE;
}

typedef struct {
    long x0, y0, x1, y1; /* the box, in pixels of the image scaled by 1/denom */
    int denom;
    int splice; /* decode from the restart intervals that cover the box only, where the file allows */
    int crop;   /* leave out the columns outside the box's iMCU columns (jpeg_crop_scanline) */
    unsigned char *pixels;
    size_t capacity;
} region_request;

/* Decode the region of request into request->pixels, setting width, height and left; with no
 * request, read the header only and set width and height to the image's size. */
static int decode(const unsigned char *data, size_t size, const region_request *request, long *width,
                  long *height, long *left, region_error_mgr *err) {
    struct jpeg_decompress_struct cinfo;
    JSAMPROW row;
    cinfo.err = region_errors(err);
    if (setjmp(err->escape)) {
        jpeg_destroy_decompress(&cinfo);
        return LIBJPEG_ERROR;
    }
    jpeg_create_decompress(&cinfo);
    jpeg_mem_src(&cinfo, data, (unsigned long)size);
    jpeg_read_header(&cinfo, TRUE);
    int status = supported(&cinfo) ? OK : UNSUPPORTED;
    if (status != OK || request == NULL) {
        *width = (long)cinfo.image_width;
        *height = (long)cinfo.image_height;
        jpeg_destroy_decompress(&cinfo);
        return status;
    }
    long x0 = request->x0, y0 = request->y0, x1 = request->x1, y1 = request->y1;
    cinfo.out_color_space = JCS_EXT_RGBX;
    cinfo.scale_num = 1;
    cinfo.scale_denom = (unsigned int)request->denom;
    jpeg_start_decompress(&cinfo);
    if (x0 < 0 || y0 < 0 || x1 <= x0 || y1 <= y0 || x1 > (long)cinfo.output_width ||
        y1 > (long)cinfo.output_height) {
        jpeg_destroy_decompress(&cinfo);
        return BAD_BOX;
    }
    JDIMENSION xoffset = (JDIMENSION)x0, span = (JDIMENSION)(x1 - x0);
    if (request->crop && span < cinfo.output_width)
        jpeg_crop_scanline(&cinfo, &xoffset, &span);
    else
        xoffset = 0, span = cinfo.output_width;
    *left = x0 - (long)xoffset;
    *width = (long)span;
    *height = y1 - y0;
    if ((size_t)span * (size_t)(y1 - y0) * 4 > request->capacity) {
        jpeg_destroy_decompress(&cinfo);
        return SMALL_BUFFER;
    }
    if (y0 > 0)
        jpeg_skip_scanlines(&cinfo, (JDIMENSION)y0);
    JSAMPROW bounce = NULL; /* an off-boundary row, for the rows that start on a 32-byte boundary */
    while (cinfo.output_scanline < (JDIMENSION)y1) {
        row = request->pixels + (size_t)(cinfo.output_scanline - y0) * span * 4;
        if (((uintptr_t)row & (STREAMED_ROWS - 1)) != 0) {
            jpeg_read_scanlines(&cinfo, &row, 1);
            continue;
        }
        if (bounce == NULL) { /* in libjpeg's image pool: freed with cinfo, on an error too */
            bounce = (*cinfo.mem->alloc_large)((j_common_ptr)&cinfo, JPOOL_IMAGE, (size_t)span * 4 + STREAMED_ROWS);
            bounce += (STREAMED_ROWS / 2 - (uintptr_t)bounce) & (STREAMED_ROWS - 1);
        }
        jpeg_read_scanlines(&cinfo, &bounce, 1);
        memcpy(row, bounce, (size_t)span * 4);
    }
    if (cinfo.output_scanline == cinfo.output_height)
        jpeg_finish_decompress(&cinfo); /* reads on to EOI: damage that shows only at the end is caught */
    else
        jpeg_abort_decompress(&cinfo);
    jpeg_destroy_decompress(&cinfo);
    return OK;
}

/* Entropy-decode every scan of data (jpeg_read_coefficients), to find damaged data without decoding
 * pixels. */
static int check_scans(const unsigned char *data, size_t size, region_error_mgr *err) {
    struct jpeg_decompress_struct cinfo;
    cinfo.err = region_errors(err);
    if (setjmp(err->escape)) {
        jpeg_destroy_decompress(&cinfo);
        return LIBJPEG_ERROR;
    }
    jpeg_create_decompress(&cinfo);
    jpeg_mem_src(&cinfo, data, (unsigned long)size);
    jpeg_read_header(&cinfo, TRUE);
    jpeg_read_coefficients(&cinfo);
    jpeg_finish_decompress(&cinfo);
    jpeg_destroy_decompress(&cinfo);
    return OK;
}

/* Scaled pixels of context kept around the box when splicing, so that chroma upsampling at the
 * box's edges sees the same neighbours as in the whole image (h2v2 fancy upsampling reads one
 * chroma row or column, two pixels, beyond). */
#define SPLICE_CONTEXT 2

/* decode(), from only the restart intervals around the box when the file has them (jpeg_splice.h):
 * the same pixels, without entropy-decoding rows and columns outside the box. */
static int decode_spliced(const unsigned char *data, size_t size, const region_request *request, long *width,
                          long *height, long *left, region_error_mgr *err) {
    unsigned char *spliced;
    size_t spliced_size;
    long image_left, image_top;
    long denom = request->denom;
    if (!request->splice || request->x0 < 0 || request->y0 < 0 || request->x0 >= request->x1 ||
        request->y0 >= request->y1 || request->x1 > 65535 || request->y1 > 65535 ||
        !jpeg_splice(data, size, (request->x0 - SPLICE_CONTEXT) * denom, (request->y0 - SPLICE_CONTEXT) * denom,
                     (request->x1 + SPLICE_CONTEXT) * denom, (request->y1 + SPLICE_CONTEXT) * denom, &spliced,
                     &spliced_size, &image_left, &image_top)) {
        /* A box whose cut would keep every interval (or a box outside): the file as it is, at full width where
         * it is spliceable, as a cut would be (a cropped decode's edges are not the whole image's pixels). */
        region_request whole = *request;
        whole.crop = !(request->splice && jpeg_spliceable(data, size));
        return decode(data, size, &whole, width, height, left, err);
    }
    region_request shifted = *request; /* the spliced image starts at (image_left, image_top) */
    shifted.crop = 0; /* it is at most an interval wider than the box on each side (module docstring) */
    shifted.x0 -= image_left / denom;
    shifted.x1 -= image_left / denom;
    shifted.y0 -= image_top / denom;
    shifted.y1 -= image_top / denom;
    int status = decode(spliced, spliced_size, &shifted, width, height, left, err);
    free(spliced);
    return status;
}

static PyObject *CorruptJPEGError; /* ValueError subclass: the entropy-coded data is damaged */

/* Sets the Python exception for a failed status; returns NULL. */
static PyObject *raise_for(int status, const region_error_mgr *err) {
    switch (status) {
    case LIBJPEG_ERROR:
        if (err->corrupt)
            PyErr_Format(CorruptJPEGError, "JPEG decode failed: damaged data: %s", err->message);
        else
            PyErr_Format(PyExc_ValueError, "JPEG decode failed: %s", err->message);
        break;
    case UNSUPPORTED:
        PyErr_SetString(PyExc_NotImplementedError, "JPEG colour space is not YCbCr, RGB or grayscale");
        break;
    case BAD_BOX:
        PyErr_SetString(PyExc_ValueError, "region outside the (scaled) image");
        break;
    default:
        PyErr_SetString(PyExc_ValueError, "output buffer too small for the region");
    }
    return NULL;
}

static PyObject *header(PyObject *self, PyObject *args) {
    Py_buffer data;
    long width = 0, height = 0;
    int status;
    region_error_mgr err;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*:header", &data))
        return NULL;
    status = decode(data.buf, (size_t)data.len, NULL, &width, &height, NULL, &err);
    PyBuffer_Release(&data);
    if (status != OK)
        return raise_for(status, &err);
    return Py_BuildValue("(ll)", width, height);
}

static PyObject *check(PyObject *self, PyObject *args) {
    Py_buffer data;
    int status;
    region_error_mgr err;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*:check", &data))
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    status = check_scans(data.buf, (size_t)data.len, &err);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&data);
    if (status != OK)
        return raise_for(status, &err);
    Py_RETURN_NONE;
}

static PyObject *decode_region(PyObject *self, PyObject *args) {
    Py_buffer data, out;
    long x0, y0, x1, y1, width = 0, height = 0, left = 0;
    int denom, status, splice = 1;
    region_error_mgr err;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*lllliw*|p:decode_region", &data, &x0, &y0, &x1, &y1, &denom, &out, &splice))
        return NULL;
    if (denom != 1 && denom != 2 && denom != 4 && denom != 8) {
        PyBuffer_Release(&data);
        PyBuffer_Release(&out);
        PyErr_SetString(PyExc_ValueError, "scale_denom must be 1, 2, 4 or 8");
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    region_request request = {x0, y0, x1, y1, denom, splice, 1, out.buf, (size_t)out.len};
    status = decode_spliced(data.buf, (size_t)data.len, &request, &width, &height, &left, &err);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&data);
    PyBuffer_Release(&out);
    if (status != OK)
        return raise_for(status, &err);
    return Py_BuildValue("(lll)", width, height, left);
}

/* add_restart_markers(data, most_mcus) -> bytes (jpeg_restart.h). */
static PyObject *add_restart_markers(PyObject *self, PyObject *args) {
    Py_buffer data;
    int most_mcus, ok;
    unsigned char *rewritten = NULL;
    size_t size = 0;
    region_error_mgr err;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*i:add_restart_markers", &data, &most_mcus))
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    ok = jpeg_add_restart_markers(data.buf, (size_t)data.len, most_mcus, &rewritten, &size, &err);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&data);
    if (!ok)
        return raise_for(LIBJPEG_ERROR, &err);
    PyObject *result = PyBytes_FromStringAndSize((const char *)rewritten, (Py_ssize_t)size);
    free(rewritten);
    return result;
}

/* v moved into [-65536, 131072]: a box coordinate that cuts the same (JPEG sides are at most 65535
 * pixels) and leaves room to add the context without overflow. */
static long pixel_bound(long v) { return v < -65536 ? -65536 : v > 131072 ? 131072 : v; }

/* splice(data, x0, y0, x1, y1) -> (bytes, left, top) or None (jpeg_splice.h): the DALI backend's cut,
 * of the intervals around the full-size box plus SPLICE_CONTEXT pixels, as decode_region cuts. */
static PyObject *splice(PyObject *self, PyObject *args) {
    Py_buffer data;
    long x0, y0, x1, y1, left = 0, top = 0;
    unsigned char *spliced = NULL;
    size_t size = 0;
    int ok;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*llll:splice", &data, &x0, &y0, &x1, &y1))
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    ok = jpeg_splice(data.buf, (size_t)data.len, pixel_bound(x0) - SPLICE_CONTEXT, pixel_bound(y0) - SPLICE_CONTEXT,
                     pixel_bound(x1) + SPLICE_CONTEXT, pixel_bound(y1) + SPLICE_CONTEXT, &spliced, &size, &left,
                     &top);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&data);
    if (!ok)
        Py_RETURN_NONE;
    PyObject *result = Py_BuildValue("(y#ll)", (const char *)spliced, (Py_ssize_t)size, left, top);
    free(spliced);
    return result;
}

static PyMethodDef methods[] = {
    {"resize_rgbx", resize_rgbx, METH_VARARGS,
     "resize_rgbx(rgbx, width, height, box, out, out_width, out_height, flip, simd=-1) -> None"},
    {"resize_simd", resize_simd, METH_NOARGS, "resize_simd() -> the highest tier of kernels this CPU runs: "
     "3 AVX-512 VBMI, 2 AVX-512, 1 AVX2, 0 plain C"},
    {"resize_tier", resize_tier, METH_VARARGS, "resize_tier(tier=-1) -> the process's tier in use (resize_rgbx's "
     "simd=-1), after capping it at tier if given"},
    {"add_restart_markers", add_restart_markers, METH_VARARGS, "add_restart_markers(data, most_mcus) -> bytes"},
    {"splice", splice, METH_VARARGS, "splice(data, x0, y0, x1, y1) -> (bytes, left, top) or None"},
    {"header", header, METH_VARARGS, "header(data) -> (width, height)"},
    {"check", check, METH_VARARGS, "check(data) -> None; raises CorruptJPEGError on damaged data"},
    {"pack_rgbx", pack_rgbx, METH_VARARGS, "pack_rgbx(rgbx, out, width, height, flip) -> None"},
    {"decode_region", decode_region, METH_VARARGS,
     "decode_region(data, x0, y0, x1, y1, scale_denom, out, splice=True) -> (width, height, left)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_jpeg_codec", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__jpeg_codec(void) {
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    CorruptJPEGError = PyErr_NewExceptionWithDoc("dataio.formats._jpeg_codec.CorruptJPEGError",
                                                 "The JPEG's entropy-coded data is damaged.", PyExc_ValueError, NULL);
    if (CorruptJPEGError == NULL || PyModule_AddObjectRef(m, "CorruptJPEGError", CorruptJPEGError) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
