/* NumPy .npy header parsing (format versions 1.0, 2.0 and 3.0), defensive: every length is
 * checked before use, the header is bounded, and only the three documented keys are read.
 * Pure: the caller supplies the bytes, so the parser is tested and fuzzed without files. */
#ifndef LG_NPY_H
#define LG_NPY_H

#include "cmn/err.h"

#include <stddef.h>
#include <stdint.h>

#define LG_NPY_MAX_DIMS 32
/* Headers are a few hundred bytes; anything near this is not a NumPy file. */
#define LG_NPY_MAX_HEADER (1u << 20)

typedef struct {
    unsigned major, minor;
    uint64_t data_offset; /* bytes before the array data */
    uint64_t itemsize;    /* bytes per element */
    int fortran_order;
    unsigned ndim;
    uint64_t shape[LG_NPY_MAX_DIMS];
    char descr[64]; /* the dtype as written (truncated for structured dtypes) */
} lg__npy_t;

/* How many bytes lg__npy_parse() needs: 10 for the prefix, then the full header length. Returns
 * the total header size (>= 10) once |n| >= 10 bytes of prefix are available, or CMN_EFORMAT. */
long lg__npy_header_size(const uint8_t *p, size_t n, cmn_errbuf_t *eb);

/* Parses a complete header (|n| >= lg__npy_header_size()). Returns 0 or CMN_EFORMAT with a
 * reason. */
int lg__npy_parse(const uint8_t *p, size_t n, lg__npy_t *out, cmn_errbuf_t *eb);

/* Elements in shape[from..ndim), or UINT64_MAX on overflow. */
uint64_t lg__npy_count(const lg__npy_t *h, unsigned from);

#endif
