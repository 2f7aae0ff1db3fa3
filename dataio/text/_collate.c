/* Padded text batches in one pass over the rows (dataio/text/token_shards.py has the same in numpy).
 *
 * padded_rows(values, chunk_of, starts, lengths, rows, pad_id, ignore, ids, mask, labels) -> largest id
 *
 * values: a list of 1-D C-contiguous unsigned token arrays (uint8, uint16 or uint32: the memory-mapped Arrow
 * chunks); chunk_of int32, starts int64, lengths int64: per sample, its chunk, first token and length;
 * rows int64 (B,): the samples of the batch; ids, mask, labels: int64 (B, W) C-contiguous, written whole.
 * Row r gets sample rows[r]'s ids then pad_id; mask 1 on its tokens, else 0; labels the ids shifted by one,
 * `ignore` on the row's last token and on padding (causal LM, as dataio.text.collate.padded_batch).
 * Returns the largest id written (-1 for an empty batch), so the vocabulary check needs no second pass.
 *
 * Why: numpy builds the same batch with a slice copy per row, then the mask (a broadcast compare and an
 * int64 cast) and the labels (a full, a shifted where): four passes over the (B, W) matrix, ten calls and
 * their temporaries. Here every element is written once, from the cache line just read, with the GIL
 * released: measured on 8k-token budget batches (28 rows, uint16 ids) 17 us against 62 us for the numpy
 * recipe, CPU time of the thread (2-core Xeon VM, other processes running).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const void *src;
    Py_ssize_t length;
    int itemsize;
    const void *doc; /* packed_rows: the piece's whole document, for its largest id */
    Py_ssize_t doc_length;
} Row;

static int simple_buffer(PyObject *obj, Py_buffer *view, Py_ssize_t itemsize, int writable, const char *what) {
    if (PyObject_GetBuffer(obj, view, (writable ? PyBUF_WRITABLE : 0) | PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        return -1;
    if (view->itemsize != itemsize) {
        PyErr_Format(PyExc_TypeError, "%s: items of %zd bytes, expected %zd", what, view->itemsize, itemsize);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

#define LARGEST(T, R)                                                                             \
    do {                                                                                         \
        const T *doc = (const T *)(R)->doc;                                                       \
        for (Py_ssize_t t = 0; t < (R)->doc_length; t++)                                          \
            if ((int64_t)doc[t] > largest) largest = (int64_t)doc[t];                            \
    } while (0)

/* Sample s's token ids: the start of its tokens in chunk chunks[s] of `values` and their item size, with s,
 * its chunk, the chunk's format and the tokens' bounds checked (an error set and -1 otherwise). `what` and `at`
 * name the caller's unit (a row, a piece) in the error. The chunk's buffer is released at once: the list holds
 * the array, and the array its memory map. */
static int sample_tokens(PyObject *values, const int32_t *chunks, const int64_t *first, const int64_t *count,
                         Py_ssize_t samples, int64_t s, const char *what, Py_ssize_t at, const char **base_out,
                         Py_ssize_t *itemsize_out) {
    if (s < 0 || s >= samples) {
        PyErr_Format(PyExc_IndexError, "%s %zd: sample %lld is not below %zd", what, at, (long long)s, samples);
        return -1;
    }
    int32_t c = chunks[s];
    if (c < 0 || c >= PyList_GET_SIZE(values)) {
        PyErr_Format(PyExc_IndexError, "sample %lld: chunk %d out of range", (long long)s, c);
        return -1;
    }
    Py_buffer chunk;
    if (PyObject_GetBuffer(PyList_GET_ITEM(values, c), &chunk, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return -1;
    const char *format = chunk.format ? chunk.format : "B";
    if (*format == '<' || *format == '=' || *format == '@') format++;
    int unsigned_ids = (*format == 'B' || *format == 'H' || *format == 'I' || *format == 'L');
    Py_ssize_t itemsize = chunk.itemsize, items = itemsize ? chunk.len / itemsize : 0;
    const char *base = (const char *)chunk.buf;
    PyBuffer_Release(&chunk);
    if (!unsigned_ids || (itemsize != 1 && itemsize != 2 && itemsize != 4)) {
        PyErr_Format(PyExc_TypeError, "chunk %d: token ids of format '%s', expected uint8/16/32", c, format);
        return -1;
    }
    if (first[s] < 0 || count[s] < 0 || first[s] + count[s] > items) {
        PyErr_Format(PyExc_IndexError, "sample %lld: tokens %lld..%lld outside its chunk of %zd", (long long)s,
                     (long long)first[s], (long long)(first[s] + count[s]), items);
        return -1;
    }
    *base_out = base + first[s] * itemsize;
    *itemsize_out = itemsize;
    return 0;
}

#define FILL_ROW(T, R)                                                                            \
    do {                                                                                         \
        const T *src = (const T *)(R)->src;                                                       \
        for (Py_ssize_t t = 0; t < n; t++) {                                                     \
            int64_t id = (int64_t)src[t];                                                        \
            out_ids[t] = id;                                                                     \
            if (id > largest) largest = id;                                                      \
        }                                                                                        \
        for (Py_ssize_t t = 0; t + 1 < n; t++) out_labels[t] = (int64_t)src[t + 1];             \
    } while (0)

static PyObject *padded_rows(PyObject *self, PyObject *args) {
    PyObject *values;
    Py_buffer chunk_of, starts, lengths, rows, ids, mask, labels;
    long long pad_id, ignore;
    if (!PyArg_ParseTuple(args, "O!OOOOLLOOO:padded_rows", &PyList_Type, &values, &chunk_of.obj, &starts.obj,
                          &lengths.obj, &rows.obj, &pad_id, &ignore, &ids.obj, &mask.obj, &labels.obj))
        return NULL;
    PyObject *objects[7] = {chunk_of.obj, starts.obj, lengths.obj, rows.obj, ids.obj, mask.obj, labels.obj};
    Py_buffer *views[7] = {&chunk_of, &starts, &lengths, &rows, &ids, &mask, &labels};
    const Py_ssize_t sizes[7] = {4, 8, 8, 8, 8, 8, 8};
    const char *names[7] = {"chunk_of", "starts", "lengths", "rows", "ids", "mask", "labels"};
    int held = 0;
    Row *table = NULL;
    PyObject *result = NULL;
    for (; held < 7; held++)
        if (simple_buffer(objects[held], views[held], sizes[held], held >= 4, names[held]) < 0) goto done;
    const Py_ssize_t batch = rows.len / 8, samples = lengths.len / 8;
    if (chunk_of.len / 4 != samples || starts.len / 8 != samples) {
        PyErr_SetString(PyExc_ValueError, "chunk_of, starts and lengths differ in length");
        goto done;
    }
    const Py_ssize_t width = batch ? ids.len / 8 / batch : 0;
    if (ids.len != batch * width * 8 || mask.len != ids.len || labels.len != ids.len) {
        PyErr_SetString(PyExc_ValueError, "ids, mask and labels must be (len(rows), width) int64 matrices");
        goto done;
    }
    table = (Row *)calloc(batch ? batch : 1, sizeof(Row));
    if (!table) { PyErr_NoMemory(); goto done; }
    const int64_t *sample_of = (const int64_t *)rows.buf;
    const int32_t *chunks = (const int32_t *)chunk_of.buf;
    const int64_t *first = (const int64_t *)starts.buf, *count = (const int64_t *)lengths.buf;
    for (Py_ssize_t r = 0; r < batch; r++) { /* with the GIL: find each row's tokens, bounds checked */
        const int64_t s = sample_of[r];
        const char *tokens;
        Py_ssize_t itemsize;
        if (sample_tokens(values, chunks, first, count, samples, s, "row", r, &tokens, &itemsize) < 0) goto done;
        if (count[s] > width) {
            PyErr_Format(PyExc_IndexError, "sample %lld: %lld tokens, wider than %zd", (long long)s,
                         (long long)count[s], width);
            goto done;
        }
        table[r].src = tokens;
        table[r].length = (Py_ssize_t)count[s];
        table[r].itemsize = (int)itemsize;
    }
    int64_t largest = -1;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t r = 0; r < batch; r++) {
        const Row *row = &table[r];
        const Py_ssize_t n = row->length;
        int64_t *out_ids = (int64_t *)ids.buf + r * width;
        int64_t *out_mask = (int64_t *)mask.buf + r * width;
        int64_t *out_labels = (int64_t *)labels.buf + r * width;
        if (row->itemsize == 1) FILL_ROW(uint8_t, row);
        else if (row->itemsize == 2) FILL_ROW(uint16_t, row);
        else FILL_ROW(uint32_t, row);
        for (Py_ssize_t t = n; t < width; t++) out_ids[t] = pad_id;
        for (Py_ssize_t t = 0; t < n; t++) out_mask[t] = 1;
        for (Py_ssize_t t = n; t < width; t++) out_mask[t] = 0;
        for (Py_ssize_t t = n > 0 ? n - 1 : 0; t < width; t++) out_labels[t] = ignore;
    }
    Py_END_ALLOW_THREADS
    result = PyLong_FromLongLong(largest);
done:
    free(table);
    for (int i = 0; i < held; i++) PyBuffer_Release(views[i]);
    return result;
}

/* packed_rows(values, chunk_of, starts, lengths, sample, lo, hi, row, column, pad_id, ignore,
 *             ids, mask, labels, positions, largest) -> None
 *
 * Packed rows: piece p is tokens lo[p]..hi[p]-1 of sample sample[p], written at row[p], column[p] of the
 * (B, W) int64 matrices (every element written: pad_id / 0 / ignore / 0 outside the pieces). Within a piece:
 * mask 1, labels the next id of the piece (ignore on its last token: never across a document boundary),
 * positions 0, 1, ...; largest[p] (int64) the largest id of the piece's whole document (-1 if empty), for the
 * vocabulary check: the error policy drops a bad document whole, so a clean piece of a document whose bad id
 * lies in another row is found too (the piece's own ids would pass it to the model). A document cut by row
 * ends is read once more per call (its consecutive pieces share the result); one spanning k calls, k times.
 *
 * Why: numpy cuts each document piece out with four slice assignments and an arange, ~8 us a piece from
 * Python (~600 us for a batch of 16 rows of 1,024 tokens); here the whole batch is one call.
 */
static PyObject *packed_rows(PyObject *self, PyObject *args) {
    PyObject *values;
    Py_buffer b[15];
    long long pad_id, ignore;
    PyObject *o[15];
    if (!PyArg_ParseTuple(args, "O!OOOOOOOOLLOOOOO:packed_rows", &PyList_Type, &values, &o[0], &o[1], &o[2],
                          &o[3], &o[4], &o[5], &o[6], &o[7], &pad_id, &ignore, &o[8], &o[9], &o[10], &o[11], &o[12]))
        return NULL;
    const char *names[13] = {"chunk_of", "starts", "lengths", "sample", "lo", "hi", "row", "column", "ids", "mask",
                             "labels", "positions", "largest"};
    int held = 0;
    Row *table = NULL;
    PyObject *result = NULL;
    for (; held < 13; held++)
        if (simple_buffer(o[held], &b[held], held == 0 ? 4 : 8, held >= 8, names[held]) < 0) goto done;
    const Py_ssize_t samples = b[2].len / 8, pieces = b[3].len / 8;
    const int32_t *chunks = (const int32_t *)b[0].buf;
    const int64_t *first = (const int64_t *)b[1].buf, *count = (const int64_t *)b[2].buf;
    const int64_t *sample = (const int64_t *)b[3].buf, *lo = (const int64_t *)b[4].buf, *hi = (const int64_t *)b[5].buf;
    const int64_t *row = (const int64_t *)b[6].buf, *column = (const int64_t *)b[7].buf;
    if (b[0].len / 4 != samples || b[1].len / 8 != samples) {
        PyErr_SetString(PyExc_ValueError, "chunk_of, starts and lengths differ in length");
        goto done;
    }
    if (b[4].len / 8 != pieces || b[5].len / 8 != pieces || b[6].len / 8 != pieces || b[7].len / 8 != pieces ||
        b[12].len / 8 != pieces) {
        PyErr_SetString(PyExc_ValueError, "sample, lo, hi, row, column and largest differ in length");
        goto done;
    }
    if (b[9].len != b[8].len || b[10].len != b[8].len || b[11].len != b[8].len) {
        PyErr_SetString(PyExc_ValueError, "ids, mask, labels and positions differ in size");
        goto done;
    }
    PyObject *shape = PyObject_GetAttrString(o[8], "shape");
    Py_ssize_t width = 0;
    if (shape && PyTuple_Check(shape) && PyTuple_GET_SIZE(shape) == 2) width = PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, 1));
    Py_XDECREF(shape);
    if (width <= 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "ids must be a (rows, width) matrix");
        goto done;
    }
    const Py_ssize_t cells = b[8].len / 8, batch = cells / width;
    table = (Row *)calloc(pieces ? pieces : 1, sizeof(Row));
    if (!table) { PyErr_NoMemory(); goto done; }
    for (Py_ssize_t p = 0; p < pieces; p++) { /* with the GIL: each piece's tokens, bounds checked */
        const int64_t s = sample[p];
        const char *tokens;
        Py_ssize_t itemsize;
        if (sample_tokens(values, chunks, first, count, samples, s, "piece", p, &tokens, &itemsize) < 0) goto done;
        if (lo[p] < 0 || lo[p] > hi[p] || hi[p] > count[s] || row[p] < 0 || row[p] >= batch || column[p] < 0 ||
            column[p] + (hi[p] - lo[p]) > width) {
            PyErr_Format(PyExc_IndexError, "piece %zd (sample %lld, tokens %lld..%lld, row %lld, column %lld) "
                         "lies outside its sample, its chunk or the (%zd, %zd) batch", p, (long long)s,
                         (long long)lo[p], (long long)hi[p], (long long)row[p], (long long)column[p], batch, width);
            goto done;
        }
        table[p].src = tokens + lo[p] * itemsize;
        table[p].length = (Py_ssize_t)(hi[p] - lo[p]);
        table[p].itemsize = (int)itemsize;
        table[p].doc = tokens;
        table[p].doc_length = (Py_ssize_t)count[s];
    }
    Py_BEGIN_ALLOW_THREADS
    int64_t *ids = (int64_t *)b[8].buf, *mask = (int64_t *)b[9].buf, *labels = (int64_t *)b[10].buf;
    int64_t *positions = (int64_t *)b[11].buf, *largest_out = (int64_t *)b[12].buf;
    for (Py_ssize_t i = 0; i < cells; i++) { ids[i] = pad_id; labels[i] = ignore; }
    memset(mask, 0, (size_t)cells * 8);
    memset(positions, 0, (size_t)cells * 8);
    for (Py_ssize_t p = 0; p < pieces; p++) {
        const Row *piece = &table[p];
        const Py_ssize_t n = piece->length, at = row[p] * width + column[p];
        int64_t *out_ids = ids + at, *out_labels = labels + at;
        int64_t largest = -1;
        if (piece->itemsize == 1) FILL_ROW(uint8_t, piece);
        else if (piece->itemsize == 2) FILL_ROW(uint16_t, piece);
        else FILL_ROW(uint32_t, piece);
        for (Py_ssize_t t = 0; t < n; t++) { mask[at + t] = 1; positions[at + t] = t; }
        if (n != piece->doc_length) { /* a piece of a longer document: the document's largest id */
            if (p > 0 && table[p - 1].doc == piece->doc && table[p - 1].doc_length == piece->doc_length)
                largest = largest_out[p - 1];
            else if (piece->itemsize == 1) LARGEST(uint8_t, piece);
            else if (piece->itemsize == 2) LARGEST(uint16_t, piece);
            else LARGEST(uint32_t, piece);
        }
        largest_out[p] = largest;
    }
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    free(table);
    for (int i = 0; i < held; i++) PyBuffer_Release(&b[i]);
    return result;
}

static PyMethodDef methods[] = {
    {"padded_rows", padded_rows, METH_VARARGS, "Fill a padded batch's ids, mask and labels; the largest id."},
    {"packed_rows", packed_rows, METH_VARARGS, "Fill packed rows' ids, mask, labels, positions from pieces."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_collate", "Padded text batches in C.", -1, methods};

PyMODINIT_FUNC PyInit__collate(void) { return PyModule_Create(&module); }
