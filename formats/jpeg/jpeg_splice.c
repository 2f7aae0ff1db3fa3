/* Restart-interval splicing (jpeg_splice.h).
 *
 * A restart marker resets every DC predictor and byte-aligns the entropy-coded data, so the
 * bytes between two markers decode on their own. When an interval is a whole number of MCUs that
 * divides an MCU row, each MCU row is a row of intervals, and any rectangle of them, with the
 * SOF's size changed and the markers renumbered, is itself a valid JPEG of that part of the
 * image: same coefficients, so the same pixels, and no Huffman decoding spent outside the box.
 * libjpeg's jpeg_skip_scanlines must still entropy-decode every skipped row, and
 * jpeg_crop_scanline every skipped column.
 */
#include "jpeg_splice.h"

#include "rgbx_resize.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    size_t size_field; /* offset of the SOF's height (2 bytes) and width (2 bytes) */
    size_t scan_start; /* first byte of the entropy-coded data */
    long width, height, mcu_width, mcu_height, mcus_per_row, mcu_rows, interval;
} jpeg_layout;

static long be16(const unsigned char *p) { return (long)p[0] << 8 | p[1]; }

/* Reads the segments up to SOS; 1 if the layout can be spliced. */
static int read_layout(const unsigned char *d, size_t size, jpeg_layout *layout) {
    size_t i = 2;
    int components = 0, hmax = 1, vmax = 1;
    layout->interval = 0;
    if (size < 4 || d[0] != 0xFF || d[1] != 0xD8)
        return 0;
    for (;;) {
        if (i + 4 > size || d[i] != 0xFF)
            return 0;
        int marker = d[i + 1];
        if (marker == 0xFF) { /* fill byte */
            i++;
            continue;
        }
        size_t length = (size_t)be16(d + i + 2);
        if (length < 2 || i + 2 + length > size)
            return 0;
        const unsigned char *seg = d + i + 4;
        size_t n = length - 2;
        if (marker == 0xC0 || marker == 0xC1) { /* baseline or extended sequential, Huffman */
            if (components || n < 6 || seg[0] != 8)
                return 0;
            layout->size_field = i + 5;
            layout->height = be16(seg + 1);
            layout->width = be16(seg + 3);
            components = seg[5];
            if (components < 1 || components > 4 || n < 6 + 3 * (size_t)components || layout->width < 1 ||
                layout->height < 1)
                return 0;
            for (int k = 0; k < components; k++) {
                int h = seg[7 + 3 * k] >> 4, v = seg[7 + 3 * k] & 15;
                if (h < 1 || h > 4 || v < 1 || v > 4)
                    return 0;
                hmax = h > hmax ? h : hmax;
                vmax = v > vmax ? v : vmax;
            }
        } else if (marker >= 0xC2 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8) {
            return 0; /* progressive, lossless, arithmetic coding */
        } else if (marker == 0xDD) {
            if (n < 2)
                return 0;
            layout->interval = be16(seg);
        } else if (marker == 0xDA) {
            if (!components || n < 1 || seg[0] != components)
                return 0; /* a scan without every component: there are more scans */
            layout->scan_start = i + 2 + length;
            break;
        } else if ((marker >= 0xD0 && marker <= 0xD9) || marker == 0x01) {
            return 0; /* no standalone marker belongs in the headers */
        }
        i += 2 + length;
    }
    /* One component: its own 8x8 blocks are the MCUs, whatever its sampling factors say. */
    layout->mcu_width = components == 1 ? 8 : 8 * hmax;
    layout->mcu_height = components == 1 ? 8 : 8 * vmax;
    layout->mcus_per_row = (layout->width + layout->mcu_width - 1) / layout->mcu_width;
    layout->mcu_rows = (layout->height + layout->mcu_height - 1) / layout->mcu_height;
    return layout->interval > 0 && layout->mcus_per_row % layout->interval == 0;
}

/* The scan's state: intervals found so far, and where the next 0xFF may be. */
typedef struct {
    size_t found, p;
} interval_scan;

/* Takes the 0xFF at q (d[q + 1] is in the data): -1 go on, else the scan's answer (1 exactly count intervals in
 * marker order, ended by EOI; 0 not). */
static int take_ff(const unsigned char *d, size_t q, size_t count, size_t *starts, size_t *stops, interval_scan *s) {
    int next = d[q + 1];
    if (next == 0x00 || next == 0xFF) { /* a stuffed 0xFF, or fill before a marker */
        s->p = q + 1 + (next == 0x00);
        return -1;
    }
    if (next == 0xD9) {
        stops[s->found++] = q;
        return s->found == count;
    }
    if (next < 0xD0 || next > 0xD7 || s->found + 1 >= count || next - 0xD0 != (int)(s->found % 8))
        return 0; /* another scan, DNL, too many intervals or a marker out of sequence */
    stops[s->found++] = q;
    starts[s->found] = s->p = q + 2;
    return -1;
}

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define HAVE_SCAN_SIMD 1
/* The 0xFF bytes not followed by 0x00 (markers, fill) of width-byte blocks, found by compares rather than a
 * memchr call from each 0xFF to the next: a ~50 KB photo with an interval every 2 MCUs has ~400 markers and ~200
 * stuffed bytes, and the calls cost more than the bytes. Stops before the last block; take_ff decides each. */
#define SCAN_BLOCKS(NAME, TARGET, VEC, LOAD, MASK_T, FF_MASK)                                                    \
    __attribute__((target(TARGET))) static int NAME(const unsigned char *d, size_t size, size_t count,           \
                                                    size_t *starts, size_t *stops, interval_scan *s) {            \
        const size_t width = sizeof(VEC);                                                                         \
        for (size_t block = s->p; block + width < size; block += width) {                                         \
            VEC here = LOAD(d + block), next = LOAD(d + block + 1);                                               \
            MASK_T marks = FF_MASK(here, next);                                                                   \
            while (marks) {                                                                                       \
                size_t q = block + (size_t)__builtin_ctzll((unsigned long long)marks);                            \
                marks &= marks - 1;                                                                               \
                if (q < s->p)                                                                                     \
                    continue; /* the 0xFF after a fill byte was taken with it */                                  \
                int answer = take_ff(d, q, count, starts, stops, s);                                              \
                if (answer >= 0)                                                                                  \
                    return answer;                                                                                \
            }                                                                                                     \
            if (s->p < block + width)                                                                             \
                s->p = block + width;                                                                             \
        }                                                                                                         \
        return -1;                                                                                                \
    }

#define LOAD512(p) _mm512_loadu_si512((const void *)(p))
#define FF512(here, next)                                                                                        \
    (_mm512_cmpeq_epi8_mask(here, _mm512_set1_epi8((char)0xFF)) &                                                \
     _mm512_cmpneq_epi8_mask(next, _mm512_setzero_si512()))
SCAN_BLOCKS(scan_avx512, "avx512f,avx512bw", __m512i, LOAD512, __mmask64, FF512)

#define LOAD256(p) _mm256_loadu_si256((const __m256i *)(p))
#define FF256(here, next)                                                                                        \
    ((uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(here, _mm256_set1_epi8((char)0xFF))) &                     \
     ~(uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(next, _mm256_setzero_si256())))
SCAN_BLOCKS(scan_avx2, "avx2", __m256i, LOAD256, uint32_t, FF256)
#else
#define HAVE_SCAN_SIMD 0
#endif

/* Finds each interval's [start, stop) in the entropy-coded data; 1 if there are exactly count,
 * in marker order, ended by EOI. simd: the crop-resize's tier in use (rgbx_resize.h), which the scan follows. */
static int find_intervals(const unsigned char *d, size_t size, size_t scan_start, size_t count,
                          size_t *starts, size_t *stops, int simd) {
    interval_scan s = {0, scan_start};
    starts[0] = scan_start;
#if HAVE_SCAN_SIMD
    int answer = simd >= 2 ? scan_avx512(d, size, count, starts, stops, &s)
                 : simd >= 1 ? scan_avx2(d, size, count, starts, stops, &s)
                             : -1;
    if (answer >= 0)
        return answer;
#else
    (void)simd;
#endif
    for (;;) { /* the rest: memchr from each 0xFF to the next */
        const unsigned char *ff = s.p < size ? memchr(d + s.p, 0xFF, size - s.p) : NULL;
        if (ff == NULL)
            return 0; /* no EOI: truncated */
        size_t q = (size_t)(ff - d);
        if (q + 1 >= size)
            return 0;
        int answer = take_ff(d, q, count, starts, stops, &s);
        if (answer >= 0)
            return answer;
    }
}

int jpeg_splice(const unsigned char *data, size_t size, long x0, long y0, long x1, long y1,
                unsigned char **out, size_t *out_size, long *left, long *top) {
    jpeg_layout layout;
    if (!read_layout(data, size, &layout))
        return 0;
    long per_row = layout.mcus_per_row / layout.interval; /* intervals in an MCU row */
    long interval_width = layout.interval * layout.mcu_width;
    x0 = x0 < 0 ? 0 : x0;
    y0 = y0 < 0 ? 0 : y0;
    x1 = x1 > layout.width ? layout.width : x1;
    y1 = y1 > layout.height ? layout.height : y1;
    if (x1 <= x0 || y1 <= y0)
        return 0;
    long c0 = x0 / interval_width, c1 = (x1 + interval_width - 1) / interval_width;
    /* A cut no wider than an MCU (one interval of one MCU, or the last, partial one) has a subsampled component
     * of 2 samples or fewer at 1/4 scale: libjpeg then upsamples it without fancy upsampling, and every column
     * differs from the whole image's. One more interval makes it wider than an MCU, enough at every scale with
     * fancy upsampling (1/8 has none). */
    long full = c1 * interval_width < layout.width ? c1 * interval_width : layout.width;
    if (full - c0 * interval_width <= layout.mcu_width) {
        if (c0 > 0)
            c0 -= 1;
        else if (c1 < per_row)
            c1 += 1;
    }
    long r0 = y0 / layout.mcu_height, r1 = (y1 + layout.mcu_height - 1) / layout.mcu_height;
    if (c0 == 0 && c1 == per_row && r0 == 0 && r1 == layout.mcu_rows)
        return 0;
    size_t count = (size_t)per_row * (size_t)layout.mcu_rows;
    if (count > (size - layout.scan_start) / 3 + 1)
        return 0; /* each interval takes at least a byte and a marker: a header that lies about the size */
    size_t *starts = malloc(2 * count * sizeof(size_t));
    if (starts == NULL)
        return 0;
    size_t *stops = starts + count;
    if (!find_intervals(data, size, layout.scan_start, count, starts, stops, rgbx_resize_tier())) {
        free(starts);
        return 0;
    }
    size_t total = layout.scan_start + 2;
    for (long r = r0; r < r1; r++)
        for (long c = c0; c < c1; c++)
            total += stops[r * per_row + c] - starts[r * per_row + c] + 2;
    unsigned char *spliced = malloc(total);
    if (spliced == NULL) {
        free(starts);
        return 0;
    }
    memcpy(spliced, data, layout.scan_start);
    long width = (c1 * interval_width < layout.width ? c1 * interval_width : layout.width) - c0 * interval_width;
    long height = (r1 * layout.mcu_height < layout.height ? r1 * layout.mcu_height : layout.height) -
                  r0 * layout.mcu_height;
    unsigned char *size_field = spliced + layout.size_field;
    size_field[0] = (unsigned char)(height >> 8);
    size_field[1] = (unsigned char)height;
    size_field[2] = (unsigned char)(width >> 8);
    size_field[3] = (unsigned char)width;
    size_t at = layout.scan_start, kept = 0;
    for (long r = r0; r < r1; r++) {
        for (long c = c0; c < c1; c++, kept++) {
            if (kept) {
                spliced[at++] = 0xFF;
                spliced[at++] = (unsigned char)(0xD0 + (kept - 1) % 8);
            }
            size_t i = (size_t)(r * per_row + c);
            memcpy(spliced + at, data + starts[i], stops[i] - starts[i]);
            at += stops[i] - starts[i];
        }
    }
    spliced[at++] = 0xFF;
    spliced[at++] = 0xD9;
    free(starts);
    *out = spliced;
    *out_size = at;
    *left = c0 * interval_width;
    *top = r0 * layout.mcu_height;
    return 1;
}

int jpeg_spliceable(const unsigned char *data, size_t size) {
    jpeg_layout layout;
    return read_layout(data, size, &layout);
}
