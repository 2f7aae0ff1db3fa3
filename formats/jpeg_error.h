/* libjpeg error handling shared by the region decoder and the restart-marker transcoder:
 * errors jump back to the caller with libjpeg's message; a truncated file is remembered (libjpeg
 * only warns and pads with grey); other warnings are ignored, as PIL does. */
#ifndef DATAIO_JPEG_ERROR_H
#define DATAIO_JPEG_ERROR_H
#include <setjmp.h>
#include <stdio.h>
#include <jpeglib.h>
#include <jerror.h>

typedef struct {
    struct jpeg_error_mgr base;
    jmp_buf escape;
    int truncated;
    char message[JMSG_LENGTH_MAX];
} region_error_mgr;

static void region_error_exit(j_common_ptr cinfo) {
    region_error_mgr *err = (region_error_mgr *)cinfo->err;
    (*cinfo->err->format_message)(cinfo, err->message);
    longjmp(err->escape, 1);
}

static void region_emit_message(j_common_ptr cinfo, int level) {
    region_error_mgr *err = (region_error_mgr *)cinfo->err;
    if (level < 0 && cinfo->err->msg_code == JWRN_JPEG_EOF && !err->truncated) {
        err->truncated = 1;
        (*cinfo->err->format_message)(cinfo, err->message);
    }
}

/* Sets up err and returns it as the error manager to give libjpeg's structs. */
static struct jpeg_error_mgr *region_errors(region_error_mgr *err) {
    struct jpeg_error_mgr *base = jpeg_std_error(&err->base);
    err->base.error_exit = region_error_exit;
    err->base.emit_message = region_emit_message;
    err->truncated = 0;
    err->message[0] = '\0';
    return base;
}

#endif
