/* Lossless rewrite of a JPEG with restart intervals that tile its MCU rows (jpeg_splice.h). */
#ifndef DATAIO_JPEG_RESTART_H
#define DATAIO_JPEG_RESTART_H
#include <stddef.h>
#include "jpeg_error.h"

/* Rewrites data's DCT coefficients, unchanged, as one baseline scan with optimised Huffman tables
 * and a restart marker every k MCUs: k the largest divisor of the MCUs in a row that is at most
 * most_mcus. Pixels decode exactly as before. On success returns 1 and sets *out (malloc'd; the
 * caller frees it) and *out_size; on a libjpeg error or damaged data (jpeg_error.h) returns 0 with the
 * message in err->message. */
int jpeg_add_restart_markers(const unsigned char *data, size_t size, int most_mcus, unsigned char **out,
                             size_t *out_size, region_error_mgr *err);

#endif
