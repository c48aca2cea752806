/* Per-sample codecs and the MLPerf rules on where they may be used.
 *
 * Codecs: none and LZ4 (block format, one independent block per sample). The codec numbers are the
 * wire values of nsut.Codec. Decoding takes the exact declared raw size and uses only LZ4's
 * bounds-checked decoder, so corrupt or hostile input can neither overrun the output nor make it
 * larger than declared; cmpr_check_sizes() rejects implausible declarations before any allocation.
 *
 * Policy: the table of rules section 6.2.4 as data. Compression happens in the QSL, untimed, per
 * sample, and only for benchmarks whose row allows lossless compression.
 *
 * Thread-safety: a cmpr_ctx_t belongs to one thread at a time; every other function is reentrant.
 */
#ifndef CMPR_CMPR_H
#define CMPR_CMPR_H

#include "cmn/err.h"

#include <stddef.h>
#include <stdint.h>

enum {
    CMPR_NONE = 0,
    CMPR_LZ4 = 1,
};

/* Samples shorter than this travel raw: an LZ4 block of them cannot shrink enough to pay for the
 * decode call. */
#define CMPR_MIN_SIZE 32u

/* "none" / "lz4" (or "unknown"). */
const char *cmpr_codec_name(int codec);

/* Parses "none" or "lz4". Returns 0 or CMN_ECODEC. */
int cmpr_codec_parse(const char *s, int *codec);

typedef struct cmpr_ctx cmpr_ctx_t;

/* A compression context (LZ4 stream state, reused so each sample avoids a 16 KiB reset). */
cmpr_ctx_t *cmpr_ctx_new(void);
void cmpr_ctx_free(cmpr_ctx_t *ctx);

/* Worst-case compressed size of |n| bytes, or 0 when |n| is too large for the codec. */
size_t cmpr_bound(int codec, size_t n);

/* Compresses src[0..n) into dst[0..cap). Returns the compressed size when it is smaller than |n|;
 * 0 when the sample should travel raw (codec none, under CMPR_MIN_SIZE, or it did not shrink); or
 * CMN_ECODEC / CMN_ETOOBIG. */
long cmpr_compress(cmpr_ctx_t *ctx, int codec, const void *src, size_t n, void *dst, size_t cap);

/* Decodes src[0..n) into exactly |raw_len| bytes at dst. Returns 0, CMN_EDECOMPRESS when the data
 * is corrupt or decodes to another size, or CMN_ECODEC. Codec none copies (n must equal raw_len).
 */
int cmpr_decompress(int codec, const void *src, size_t n, void *dst, size_t raw_len);

/* Checks a declared (raw, wire) pair before anything is allocated: the codec is known, raw is at
 * most |max_raw|, and the ratio is possible for the codec (LZ4 cannot expand a block more than
 * 255 times, so a larger claim is a decompression bomb). Returns 0, CMN_ECODEC, CMN_ETOOBIG or
 * CMN_EDECOMPRESS with a reason in |eb|. */
int cmpr_check_sizes(int codec, uint64_t raw, uint64_t wire, uint64_t max_raw, cmn_errbuf_t *eb);

/* ---- Rules table (section 6.2.4) -------------------------------------------------------- */

typedef struct {
    const char *model;    /* model name as in mlperf.conf (e.g. "resnet50", "llama2-70b") */
    const char *row;      /* the row of the rules table it falls under */
    int lossless;         /* 1: lossless compression allowed; 0: no compression allowed */
    int per_query_server; /* 1: per-query compression also allowed in Server (DLRM) */
} cmpr_policy_t;

/* The entry for |model| (exact name, or a known variant such as "bert-99.9"), or NULL. */
const cmpr_policy_t *cmpr_policy_find(const char *model);

/* The whole table, for listings. */
const cmpr_policy_t *cmpr_policy_table(size_t *count);

/* 0 when |codec| may be used for |model|; CMN_EPOLICY with the reason (and the rule) otherwise.
 * Codec none is always allowed. A model missing from the table allows no compression. */
int cmpr_policy_check(const char *model, int codec, cmn_errbuf_t *eb);

#endif
