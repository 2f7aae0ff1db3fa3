/* Cut a baseline JPEG down to the restart intervals that cover a box, without decoding it. */
#ifndef DATAIO_JPEG_SPLICE_H
#define DATAIO_JPEG_SPLICE_H
#include <stddef.h>

/* If data is one baseline scan of all its components whose restart intervals tile every MCU row
 * (dataio's packer writes such files: formats/image_prepare.py), write to *out (malloc'd; the
 * caller frees it) a smaller valid JPEG holding just the intervals that cover the pixel box
 * [x0, x1) x [y0, y1) of the full-size image, and set *left and *top to where that JPEG's
 * pixel (0, 0) lies in the image. Returns 1 then; returns 0 and writes nothing for any other
 * layout, for a box that would keep every interval, and for a stream whose markers do not match
 * its header (a damaged file: the caller decodes it as it is and reports the damage). A cut no wider
 * than an MCU takes one more interval column (libjpeg would upsample its chroma without fancy
 * upsampling, unlike the whole image's). */
int jpeg_splice(const unsigned char *data, size_t size, long x0, long y0, long x1, long y1,
                unsigned char **out, size_t *out_size, long *left, long *top);

/* 1 if data's restart intervals tile its MCU rows (what jpeg_splice cuts), from its headers alone. */
int jpeg_spliceable(const unsigned char *data, size_t size);

#endif
