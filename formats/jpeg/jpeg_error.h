/* libjpeg error handling shared by the region decoder, the checker and the restart-marker transcoder:
 * errors jump back to the caller with libjpeg's message. So do the warnings that mean the entropy-coded
 * data is damaged (a truncated file, a bad Huffman code, a marker where data should be, extraneous
 * bytes, a scan out of order): libjpeg only warns about these and fills what it could not decode with
 * grey or garbage, which PIL passes on silently; here they set corrupt and end the decode. Warnings
 * that leave the pixels right (an unknown JFIF revision or Adobe transform, a bad ICC profile, which
 * the packer drops anyway) are ignored. */
#ifndef DATAIO_JPEG_ERROR_H
#define DATAIO_JPEG_ERROR_H
#include <setjmp.h>
#include <stdio.h>
#include <jpeglib.h>
#include <jerror.h>

typedef struct {
    struct jpeg_error_mgr base;
    jmp_buf escape;
    int corrupt; /* the escape was a damaged-data warning, not an error */
    char message[JMSG_LENGTH_MAX];
} region_error_mgr;

static void region_error_exit(j_common_ptr cinfo) {
    region_error_mgr *err = (region_error_mgr *)cinfo->err;
    (*cinfo->err->format_message)(cinfo, err->message);
    longjmp(err->escape, 1);
}

/* The warnings after which the decoded pixels are not the encoded image's. */
static int damages_pixels(int code) {
    switch (code) {
    case JWRN_ARITH_BAD_CODE:
    case JWRN_BOGUS_PROGRESSION:
    case JWRN_EXTRANEOUS_DATA:
    case JWRN_HIT_MARKER:
    case JWRN_HUFF_BAD_CODE:
    case JWRN_JPEG_EOF:
    case JWRN_MUST_RESYNC:
    case JWRN_NOT_SEQUENTIAL:
        return 1;
    default:
        return 0;
    }
}

static void region_emit_message(j_common_ptr cinfo, int level) {
    region_error_mgr *err = (region_error_mgr *)cinfo->err;
    if (level < 0 && damages_pixels(cinfo->err->msg_code)) {
        err->corrupt = 1;
        (*cinfo->err->format_message)(cinfo, err->message);
        longjmp(err->escape, 1);
    }
}

/* Sets up err and returns it as the error manager to give libjpeg's structs. */
static struct jpeg_error_mgr *region_errors(region_error_mgr *err) {
    struct jpeg_error_mgr *base = jpeg_std_error(&err->base);
    err->base.error_exit = region_error_exit;
    err->base.emit_message = region_emit_message;
    err->corrupt = 0;
    err->message[0] = '\0';
    return base;
}

#endif
