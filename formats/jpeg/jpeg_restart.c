/* jpeg_restart.h: jpegtran's lossless path (read coefficients, write coefficients) with a restart
 * interval chosen so that the rewritten file can be spliced by rows and columns of intervals. */
#include "jpeg_restart.h"

#include <stdlib.h>
#include <string.h>

/* A destination that grows with realloc and is freed by its owner on success and error alike
 * (jpeg_mem_dest frees its own buffers as it grows them, so after an error the caller cannot
 * tell what to free). */
typedef struct {
    struct jpeg_destination_mgr base;
    unsigned char *buffer;
    size_t capacity;
} growing_destination;

static void destination_start(j_compress_ptr cinfo) { (void)cinfo; }

static boolean destination_grow(j_compress_ptr cinfo) {
    growing_destination *dest = (growing_destination *)cinfo->dest;
    unsigned char *bigger = realloc(dest->buffer, 2 * dest->capacity);
    if (bigger == NULL)
        ERREXIT1(cinfo, JERR_OUT_OF_MEMORY, 0);
    dest->buffer = bigger;
    dest->base.next_output_byte = bigger + dest->capacity; /* libjpeg asks only when the buffer is full */
    dest->base.free_in_buffer = dest->capacity;
    dest->capacity *= 2;
    return TRUE;
}

static void destination_finish(j_compress_ptr cinfo) { (void)cinfo; }

/* The MCUs in one MCU row of the single scan jpeg_write_coefficients writes for dst. */
static long mcus_per_row(const struct jpeg_compress_struct *dst) {
    int hmax = 1;
    if (dst->num_components == 1)
        return ((long)dst->image_width + 7) / 8;
    for (int k = 0; k < dst->num_components; k++)
        hmax = dst->comp_info[k].h_samp_factor > hmax ? dst->comp_info[k].h_samp_factor : hmax;
    return ((long)dst->image_width + 8 * hmax - 1) / (8 * hmax);
}

int jpeg_add_restart_markers(const unsigned char *data, size_t size, int most_mcus, unsigned char **out,
                             size_t *out_size, region_error_mgr *err) {
    struct jpeg_decompress_struct src;
    struct jpeg_compress_struct dst;
    growing_destination dest = {{0}, NULL, 0};
    memset(&src, 0, sizeof src); /* so that destroying a struct never created is a no-op */
    memset(&dst, 0, sizeof dst);
    src.err = dst.err = region_errors(err);
    if (setjmp(err->escape)) {
        jpeg_destroy_compress(&dst);
        jpeg_destroy_decompress(&src);
        free(dest.buffer);
        return 0;
    }
    jpeg_create_decompress(&src);
    jpeg_create_compress(&dst);
    jpeg_mem_src(&src, data, (unsigned long)size);
    jpeg_read_header(&src, TRUE);
    jvirt_barray_ptr *coefficients = jpeg_read_coefficients(&src);
    jpeg_copy_critical_parameters(&src, &dst);
    dst.optimize_coding = TRUE;
    long per_row = mcus_per_row(&dst), interval = most_mcus < 1 ? 1 : most_mcus;
    while (per_row % interval)
        interval--;
    dst.restart_interval = (unsigned int)interval;
    dest.capacity = size + 4096;
    dest.buffer = malloc(dest.capacity);
    if (dest.buffer == NULL)
        ERREXIT1(&dst, JERR_OUT_OF_MEMORY, 0);
    dest.base.next_output_byte = dest.buffer;
    dest.base.free_in_buffer = dest.capacity;
    dest.base.init_destination = destination_start;
    dest.base.empty_output_buffer = destination_grow;
    dest.base.term_destination = destination_finish;
    dst.dest = &dest.base;
    jpeg_write_coefficients(&dst, coefficients);
    jpeg_finish_compress(&dst);
    jpeg_destroy_compress(&dst);
    jpeg_destroy_decompress(&src);
    *out = dest.buffer;
    *out_size = dest.capacity - dest.base.free_in_buffer;
    return 1;
}
