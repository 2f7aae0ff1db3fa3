/* The _jpeg_codec module's functions that write RGB into a batch slot (resize_module.c): pack_rgbx,
 * resize_rgbx, resize_simd and resize_tier, as _jpeg_codec.c's method table lists them. */
#ifndef DATAIO_RESIZE_MODULE_H
#define DATAIO_RESIZE_MODULE_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>

PyObject *pack_rgbx(PyObject *self, PyObject *args);
PyObject *resize_rgbx(PyObject *self, PyObject *args);
PyObject *resize_simd(PyObject *self, PyObject *args);
PyObject *resize_tier(PyObject *self, PyObject *args);

#endif
