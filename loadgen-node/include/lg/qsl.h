/* The query sample library: where sample bytes come from, and their per-sample compression.
 *
 * Sources: NumPy .npy files (one array whose first axis is the sample axis, any fixed-size dtype,
 * format versions 1 to 3; or a directory of one .npy per sample, taken in name order), raw
 * fixed-size records, an LLM data set in JSON (int32 token IDs per sample), or synthetic bytes
 * for demos and benchmarks. Nothing is read until
 * lg_qsl_load(); the official LoadSamplesToRam/UnloadSamplesFromRam pair maps onto
 * lg_qsl_load()/lg_qsl_unload() with the same index lists (duplicates allowed, as in MultiStream).
 *
 * Compression (rules 6.2.4) happens here, at load time, untimed and per sample, and only with a
 * codec the benchmark's row of the rules table allows (cmpr_policy_check). A sample that does not
 * shrink travels raw.
 *
 * Thread-safety: open/load/unload/close belong to one thread (the test's). lg_qsl_get() and
 * lg_qsl_digest() are read-only and may be called from any thread for loaded samples while no
 * load or unload runs. Errors: 0 or a negative code with a sentence in |eb|. */
#ifndef LG_QSL_H
#define LG_QSL_H

#include "cmn/err.h"

#include <stddef.h>
#include <stdint.h>

typedef struct lg_qsl lg_qsl_t;

/* Sample indices travel in 31 bits (the scheduler keeps a flag in the 32nd). */
#define LG_QSL_MAX_SAMPLES 0x7fffffffu

typedef enum {
    LG_SYNTH_RANDOM = 0, /* seeded random bytes (incompressible) */
    LG_SYNTH_IMAGE = 1,  /* image-like: smooth gradients on a dark field with a little noise */
    LG_SYNTH_TOKENS = 2, /* BERT-like: int32 token ids, input mask and segment ids of 384-token
                          * sequences, each padded with zeros after its real length */
} lg_synth_kind_t;

/* A .npy file (the first axis is the sample axis) or a directory of .npy files (one sample per
 * file, sorted by name with strcmp). CMN_EFORMAT names the file and the defect. */
int lg_qsl_open_npy(const char *path, lg_qsl_t **out, cmn_errbuf_t *eb);

/* A directory of pre-processed KiTS19 cases (3D-UNet), as kits_pickle_to_qsl.py writes it: one
 * float32 .npy of shape (1, D, H, W) per case, in name order. Each sample is sent as the 32-byte
 * volume header of cmn/vol.h (its shape) followed by the voxels, so cases of different shapes
 * travel with their shape. */
int lg_qsl_open_kits(const char *path, lg_qsl_t **out, cmn_errbuf_t *eb);

/* An LLM data set as the MLCommons references ship it in JSON (llama3.1-8b's cnn_eval.json): an
 * array of objects, one per sample in QSL order, the prompt's token IDs in |field| (tok_input in
 * the references). Read once, streaming, at open; only the token IDs are kept (4 bytes each) and
 * a sample's bytes are its IDs as little-endian int32, what sut-node's openai backend sends.
 * Loading copies nothing unless a codec is set. CMN_EFORMAT names the file, the sample index, the
 * field and the defect (not an array of objects, a missing field, a value that is not an integer
 * token ID in [0, 2^31 - 1], an empty array, a truncated file); CMN_ECONFIG in a build without
 * yajl. */
int lg_qsl_open_llm_json(const char *path, const char *field, lg_qsl_t **out, cmn_errbuf_t *eb);

/* A file of back-to-back records of |sample_size| bytes; a partial last record is an error. */
int lg_qsl_open_raw(const char *path, size_t sample_size, lg_qsl_t **out, cmn_errbuf_t *eb);

/* |count| samples of |sample_size| bytes made from |seed| and the sample index. */
int lg_qsl_open_synthetic(size_t count, size_t sample_size, lg_synth_kind_t kind, uint64_t seed,
                          lg_qsl_t **out, cmn_errbuf_t *eb);

void lg_qsl_close(lg_qsl_t *q);

/* PerformanceSampleCount(); defaults to the total count. 0 restores the default. */
void lg_qsl_set_performance_count(lg_qsl_t *q, size_t n);

/* Compress samples with |codec| from the next load on. Fails with CMN_EPOLICY (reason in |eb|)
 * when the rules forbid |codec| for |model|, e.g. lz4 for llama2-70b. */
int lg_qsl_set_codec(lg_qsl_t *q, int codec, const char *model, cmn_errbuf_t *eb);

/* Keep a cmn_digest64 of each loaded sample's raw bytes (for --verify-digest). */
void lg_qsl_keep_digests(lg_qsl_t *q, int on);

const char *lg_qsl_name(const lg_qsl_t *q);
size_t lg_qsl_total_count(const lg_qsl_t *q);
size_t lg_qsl_performance_count(const lg_qsl_t *q);

/* LoadSamplesToRam / UnloadSamplesFromRam. An index may appear several times; each load needs one
 * unload. Loading reads (or makes) the bytes and compresses them; it is not timed. */
int lg_qsl_load(lg_qsl_t *q, const uint32_t *idx, size_t n, cmn_errbuf_t *eb);
void lg_qsl_unload(lg_qsl_t *q, const uint32_t *idx, size_t n);

/* A loaded sample as it goes on the wire. */
typedef struct {
    const void *data; /* wire bytes (compressed when codec != 0) */
    size_t size;
    int codec;
    size_t raw_size; /* decoded size */
} lg_qsl_sample_t;

/* Returns 0, or CMN_ESTATE when |idx| is not loaded (or out of range). */
int lg_qsl_get(const lg_qsl_t *q, uint32_t idx, lg_qsl_sample_t *out);

/* The digest of a loaded sample's raw bytes; 0 when digests are off or |idx| is not loaded. */
uint64_t lg_qsl_digest(const lg_qsl_t *q, uint32_t idx);

/* Bytes held for loaded samples: raw (decoded) and as sent. */
void lg_qsl_loaded_bytes(const lg_qsl_t *q, uint64_t *raw, uint64_t *wire);

#endif
