#include "lg/qsl.h"

#include "cmn/digest.h"
#include "cmn/vol.h"
#include "cmpr/cmpr.h"
#include "npy.h"
#include "qsl_json.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef enum { SRC_NPY, SRC_NPY_DIR, SRC_RAW, SRC_SYNTH, SRC_LLM_JSON } src_t;

/* A loaded sample. |wire| holds the bytes as sent: compressed when codec != 0, else raw.
 * |borrowed|: |wire| points into the QSL's token array (SRC_LLM_JSON, uncompressed), not freed. */
typedef struct {
    void *wire;
    uint32_t size, raw_size;
    uint32_t refs;
    uint8_t codec, borrowed;
} slot_t;

struct lg_qsl {
    src_t src;
    char name[96];
    char *path;
    size_t total, perf_count;
    int fd;
    uint64_t data_offset; /* SRC_NPY, SRC_RAW */
    size_t sample_size;   /* fixed-size sources */
    char **files;         /* SRC_NPY_DIR, sorted */
    int volume;           /* SRC_NPY_DIR of KiTS19 cases: each sample gets a cmn/vol.h header */
    lg__llm_tokens_t llm; /* SRC_LLM_JSON */
    lg_synth_kind_t synth;
    uint64_t seed;
    int codec;
    cmpr_ctx_t *cctx;
    int keep_digests;
    slot_t *slots;
    uint64_t *digests;
    uint64_t loaded_raw, loaded_wire;
};

static lg_qsl_t *qsl_new(src_t src, const char *path)
{
    lg_qsl_t *q = calloc(1, sizeof(*q));

    if (!q)
        return NULL;
    q->src = src;
    q->fd = -1;
    if (path && !(q->path = strdup(path))) {
        free(q);
        return NULL;
    }
    return q;
}

/* The per-sample table, once the count is known. */
static int qsl_finish(lg_qsl_t *q, cmn_errbuf_t *eb)
{
    if (q->total == 0)
        return cmn_errf(eb, CMN_EFORMAT, "%s holds no samples", q->path ? q->path : "the QSL");
    if (q->total > LG_QSL_MAX_SAMPLES)
        return cmn_errf(eb, CMN_ETOOBIG, "%s holds %zu samples; at most %u are supported",
                        q->path ? q->path : "the QSL", q->total, LG_QSL_MAX_SAMPLES);
    q->slots = calloc(q->total, sizeof(*q->slots));
    if (!q->slots)
        return cmn_errf(eb, -ENOMEM, "out of memory for a table of %zu samples", q->total);
    q->perf_count = q->total;
    return 0;
}

static int read_at(int fd, void *buf, size_t n, uint64_t off)
{
    uint8_t *p = buf;

    while (n > 0) {
        ssize_t r = pread(fd, p, n, (off_t)off);

        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -errno;
        if (r == 0)
            return CMN_EFORMAT;
        p += r;
        n -= (size_t)r;
        off += (uint64_t)r;
    }
    return 0;
}

/* Reads and parses a .npy header from |fd|; errors name the file. */
static int npy_read_header(int fd, const char *path, lg__npy_t *h, cmn_errbuf_t *eb)
{
    uint8_t pre[12], *buf;
    cmn_errbuf_t why = {{0}};
    size_t have;
    long size;
    int rc;
    struct stat st;

    if (fstat(fd, &st) != 0)
        return cmn_errf(eb, -errno, "cannot stat %s: %s", path, strerror(errno));
    have = st.st_size >= 12 ? 12 : 10;
    if (st.st_size < 10 || read_at(fd, pre, have, 0) != 0)
        return cmn_errf(eb, CMN_EFORMAT, "%s: too short for a .npy file", path);
    size = lg__npy_header_size(pre, have, &why);
    if (size < 0)
        return cmn_errf(eb, (int)size, "%s: %s", path, why.msg);
    if ((uint64_t)size > (uint64_t)st.st_size)
        return cmn_errf(eb, CMN_EFORMAT, "%s: a header of %ld bytes in a %lld-byte file", path,
                        size, (long long)st.st_size);
    buf = malloc((size_t)size);
    if (!buf)
        return cmn_errf(eb, -ENOMEM, "out of memory reading %s", path);
    rc = read_at(fd, buf, (size_t)size, 0);
    if (rc == 0) {
        rc = lg__npy_parse(buf, (size_t)size, h, &why);
        if (rc < 0)
            cmn_errf(eb, rc, "%s: %s", path, why.msg);
    } else {
        rc = cmn_errf(eb, rc < 0 ? rc : CMN_EFORMAT, "cannot read the header of %s", path);
    }
    free(buf);
    return rc;
}

static int npy_data_size(const lg__npy_t *h, unsigned from, const char *path, uint64_t *out,
                         cmn_errbuf_t *eb)
{
    uint64_t count = lg__npy_count(h, from);

    if (count == UINT64_MAX || (count && h->itemsize > UINT64_MAX / count))
        return cmn_errf(eb, CMN_EFORMAT, "%s: the array size overflows 64 bits", path);
    if (h->fortran_order && h->ndim > 1)
        return cmn_errf(eb, CMN_EFORMAT,
                        "%s: a Fortran-ordered array does not keep a sample's bytes together; "
                        "save it with numpy.ascontiguousarray",
                        path);
    *out = count * h->itemsize;
    return 0;
}

static int open_npy_file(lg_qsl_t *q, cmn_errbuf_t *eb)
{
    lg__npy_t h;
    struct stat st;
    uint64_t sample = 0; /* set by npy_data_size; -O3 cannot prove it */
    int rc;

    q->fd = open(q->path, O_RDONLY | O_CLOEXEC);
    if (q->fd < 0)
        return cmn_errf(eb, -errno, "cannot open %s: %s", q->path, strerror(errno));
    rc = npy_read_header(q->fd, q->path, &h, eb);
    if (rc < 0)
        return rc;
    if (h.ndim == 0)
        return cmn_errf(eb, CMN_EFORMAT,
                        "%s: a 0-d array has no sample axis (the first axis must be the samples)",
                        q->path);
    rc = npy_data_size(&h, 1, q->path, &sample, eb);
    if (rc < 0)
        return rc;
    if (sample == 0 || sample > UINT32_MAX)
        return cmn_errf(eb, CMN_EFORMAT, "%s: samples of %llu bytes are not supported", q->path,
                        (unsigned long long)sample);
    if (fstat(q->fd, &st) != 0)
        return cmn_errf(eb, -errno, "cannot stat %s", q->path);
    if (h.shape[0] > ((uint64_t)st.st_size - h.data_offset) / sample)
        return cmn_errf(
            eb, CMN_EFORMAT,
            "%s: the header promises %llu samples of %llu bytes but the file holds %llu "
            "data bytes",
            q->path, (unsigned long long)h.shape[0], (unsigned long long)sample,
            (unsigned long long)((uint64_t)st.st_size - h.data_offset));
    q->total = (size_t)h.shape[0];
    q->sample_size = (size_t)sample;
    q->data_offset = h.data_offset;
    snprintf(q->name, sizeof(q->name), "npy %s", h.descr);
    return qsl_finish(q, eb);
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int open_npy_dir(lg_qsl_t *q, cmn_errbuf_t *eb)
{
    DIR *dir = opendir(q->path);
    struct dirent *de;
    size_t cap = 0, n = 0;
    int rc = 0;

    if (!dir)
        return cmn_errf(eb, -errno, "cannot open the directory %s: %s", q->path, strerror(errno));
    while ((de = readdir(dir))) {
        size_t len = strlen(de->d_name);
        char **nf;

        if (len < 5 || strcmp(de->d_name + len - 4, ".npy") != 0)
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 256;
            nf = realloc(q->files, cap * sizeof(*nf));
            if (!nf) {
                rc = cmn_errf(eb, -ENOMEM, "out of memory listing %s", q->path);
                goto out;
            }
            q->files = nf;
        }
        if (asprintf(&q->files[n], "%s/%s", q->path, de->d_name) < 0) {
            rc = cmn_errf(eb, -ENOMEM, "out of memory listing %s", q->path);
            goto out;
        }
        n++;
    }
    qsort(q->files, n, sizeof(*q->files), cmp_names);
    q->total = n;
    if (n == 0) {
        rc = cmn_errf(eb, CMN_EFORMAT, "the directory %s holds no .npy files", q->path);
        goto out;
    }
    snprintf(q->name, sizeof(q->name), "npy directory");
    rc = qsl_finish(q, eb);
out:
    closedir(dir);
    return rc;
}

int lg_qsl_open_npy(const char *path, lg_qsl_t **out, cmn_errbuf_t *eb)
{
    struct stat st;
    lg_qsl_t *q;
    int rc;

    if (stat(path, &st) != 0)
        return cmn_errf(eb, -errno, "cannot open %s: %s", path, strerror(errno));
    q = qsl_new(S_ISDIR(st.st_mode) ? SRC_NPY_DIR : SRC_NPY, path);
    if (!q)
        return cmn_errf(eb, -ENOMEM, "out of memory");
    rc = q->src == SRC_NPY_DIR ? open_npy_dir(q, eb) : open_npy_file(q, eb);
    if (rc < 0) {
        lg_qsl_close(q);
        return rc;
    }
    *out = q;
    return 0;
}

int lg_qsl_open_kits(const char *path, lg_qsl_t **out, cmn_errbuf_t *eb)
{
    struct stat st;
    int rc;

    if (stat(path, &st) != 0)
        return cmn_errf(eb, -errno, "cannot open %s: %s", path, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return cmn_errf(eb, CMN_EFORMAT,
                        "%s is not a directory (--qsl-kits takes the folder that "
                        "kits_pickle_to_qsl.py writes)",
                        path);
    rc = lg_qsl_open_npy(path, out, eb);
    if (rc < 0)
        return rc;
    (*out)->volume = 1;
    snprintf((*out)->name, sizeof((*out)->name), "KiTS19 volumes");
    return 0;
}

/* A set of samples of one given size (raw records, synthetic): 1 byte to 4 GiB - 1, as a frame
 * carries. */
static int qsl_new_sized(src_t src, const char *path, size_t sample_size, lg_qsl_t **out,
                         cmn_errbuf_t *eb)
{
    if (sample_size == 0 || sample_size > UINT32_MAX)
        return cmn_errf(eb, CMN_ECONFIG, "the sample size must be between 1 and %u bytes",
                        UINT32_MAX);
    *out = qsl_new(src, path);
    if (!*out)
        return cmn_errf(eb, -ENOMEM, "out of memory");
    (*out)->sample_size = sample_size;
    return 0;
}

int lg_qsl_open_raw(const char *path, size_t sample_size, lg_qsl_t **out, cmn_errbuf_t *eb)
{
    struct stat st;
    lg_qsl_t *q;
    int rc;

    if ((rc = qsl_new_sized(SRC_RAW, path, sample_size, &q, eb)) < 0)
        return rc;
    q->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (q->fd < 0) {
        rc = cmn_errf(eb, -errno, "cannot open %s: %s", path, strerror(errno));
        goto fail;
    }
    if (fstat(q->fd, &st) != 0) {
        rc = cmn_errf(eb, -errno, "cannot stat %s: %s", path, strerror(errno));
        goto fail;
    }
    if ((uint64_t)st.st_size % sample_size != 0) {
        rc = cmn_errf(eb, CMN_EFORMAT,
                      "%s: %lld bytes is not a whole number of %zu-byte records (%lld bytes left "
                      "over)",
                      path, (long long)st.st_size, sample_size,
                      (long long)((uint64_t)st.st_size % sample_size));
        goto fail;
    }
    q->total = (size_t)((uint64_t)st.st_size / sample_size);
    snprintf(q->name, sizeof(q->name), "raw records of %zu bytes", sample_size);
    rc = qsl_finish(q, eb);
    if (rc < 0)
        goto fail;
    *out = q;
    return 0;
fail:
    lg_qsl_close(q);
    return rc;
}

int lg_qsl_open_synthetic(size_t count, size_t sample_size, lg_synth_kind_t kind, uint64_t seed,
                          lg_qsl_t **out, cmn_errbuf_t *eb)
{
    lg_qsl_t *q;
    int rc;

    if ((rc = qsl_new_sized(SRC_SYNTH, NULL, sample_size, &q, eb)) < 0)
        return rc;
    q->total = count;
    q->synth = kind;
    q->seed = seed;
    snprintf(q->name, sizeof(q->name), "synthetic %s",
             kind == LG_SYNTH_IMAGE    ? "image"
             : kind == LG_SYNTH_TOKENS ? "tokens"
                                       : "random");
    rc = qsl_finish(q, eb);
    if (rc < 0) {
        lg_qsl_close(q);
        return rc;
    }
    *out = q;
    return 0;
}

int lg_qsl_open_llm_json(const char *path, const char *field, lg_qsl_t **out, cmn_errbuf_t *eb)
{
    lg_qsl_t *q = qsl_new(SRC_LLM_JSON, path);
    int rc;

    if (!q)
        return cmn_errf(eb, -ENOMEM, "out of memory");
    rc = lg__llm_json_read(path, field, &q->llm, eb);
    if (rc == 0) {
        q->total = q->llm.n_samples;
        snprintf(q->name, sizeof(q->name), "LLM JSON, int32 '%.40s'", field);
        rc = qsl_finish(q, eb);
    }
    if (rc < 0) {
        lg_qsl_close(q);
        return rc;
    }
    *out = q;
    return 0;
}

void lg_qsl_close(lg_qsl_t *q)
{
    size_t i;

    if (!q)
        return;
    if (q->slots)
        for (i = 0; i < q->total; i++)
            if (!q->slots[i].borrowed)
                free(q->slots[i].wire);
    if (q->files)
        for (i = 0; i < q->total; i++)
            free(q->files[i]);
    free(q->files);
    free(q->slots);
    free(q->digests);
    lg__llm_tokens_free(&q->llm);
    if (q->fd >= 0)
        close(q->fd);
    cmpr_ctx_free(q->cctx);
    free(q->path);
    free(q);
}

void lg_qsl_set_performance_count(lg_qsl_t *q, size_t n)
{
    q->perf_count = n ? n : q->total;
}

int lg_qsl_set_codec(lg_qsl_t *q, int codec, const char *model, cmn_errbuf_t *eb)
{
    int rc = cmpr_policy_check(model, codec, eb);

    if (rc < 0)
        return rc;
    if (codec != CMPR_NONE && !q->cctx) {
        q->cctx = cmpr_ctx_new();
        if (!q->cctx)
            return cmn_errf(eb, -ENOMEM, "out of memory for the compressor");
    }
    q->codec = codec;
    return 0;
}

void lg_qsl_keep_digests(lg_qsl_t *q, int on)
{
    q->keep_digests = on;
}

const char *lg_qsl_name(const lg_qsl_t *q)
{
    return q->name;
}

size_t lg_qsl_total_count(const lg_qsl_t *q)
{
    return q->total;
}

size_t lg_qsl_performance_count(const lg_qsl_t *q)
{
    return q->perf_count;
}

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);

    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Synthetic bytes: random, or an image-like field (a bright object with smooth gradients on a
 * dark background, with a little noise) that compresses about as real photos do with LZ4. */
static void synth_fill(const lg_qsl_t *q, uint32_t idx, uint8_t *p, size_t n)
{
    uint64_t s = q->seed ^ ((uint64_t)idx * 0xD1B54A32D192ED03ull), r = 0;
    size_t i, side = 224;
    size_t cx = 60 + idx % 100, cy = 50 + (idx / 7) % 120;

    if (q->synth == LG_SYNTH_TOKENS) {
        /* Three int32 tensors of 384 per sequence (ids, mask, segments), repeated to fill the
         * sample; a sequence uses 60-380 tokens and is zero-padded after them, as in SQuAD. */
        const size_t seq = 384, words = n / 4;
        size_t len = 60 + (size_t)(splitmix64(&s) % 321), w;
        memset(p, 0, n);
        for (w = 0; w < words; w++) {
            size_t t = w % (3 * seq), pos = t % seq;
            uint32_t v = 0;
            if (pos < len)
                v = t < seq       ? (uint32_t)(1000 + splitmix64(&s) % 29000)
                    : t < 2 * seq ? 1u
                                  : (uint32_t)(pos > len / 2);
            memcpy(p + 4 * w, &v, 4);
        }
        return;
    }
    for (i = 0; i < n; i++) {
        if (i % 8 == 0)
            r = splitmix64(&s);
        if (q->synth == LG_SYNTH_RANDOM) {
            p[i] = (uint8_t)(r >> (8 * (i % 8)));
        } else {
            size_t x = (i / 3) % side, y = (i / 3 / side) % side;
            size_t dx = x > cx ? x - cx : cx - x, dy = y > cy ? y - cy : cy - y;
            unsigned noise = (unsigned)(r >> (8 * (i % 8))) & 3u;

            p[i] = dx * dx + dy * dy < 60 * 60
                       ? (uint8_t)(90 + (x * 2 + y + i % 3 * 40) % 120 + noise)
                       : (uint8_t)(noise & 1u);
        }
    }
}

/* The volume header of a KiTS19 case: float32 of shape (1, D, H, W) or (D, H, W), as the
 * reference's pre-processing writes it (kits_pickle_to_qsl.py keeps it unchanged). */
static int volume_header(const lg__npy_t *h, const char *path, uint8_t out[CMN_VOL_HEADER_SIZE],
                         cmn_errbuf_t *eb)
{
    cmn_vol_t v = {CMN_VOL_F32, 1, {0, 0, 0}};
    unsigned first = h->ndim == 4 ? 1 : 0, i;

    if (strcmp(h->descr, "<f4") != 0)
        return cmn_errf(eb, CMN_EFORMAT, "%s: dtype %s; a KiTS19 case is float32 ('<f4')", path,
                        h->descr);
    if (!(h->ndim == 3 || (h->ndim == 4 && h->shape[0] == 1)))
        return cmn_errf(eb, CMN_EFORMAT,
                        "%s: %u axes; a KiTS19 case has shape (1, D, H, W) or (D, H, W)", path,
                        h->ndim);
    for (i = 0; i < 3; i++) {
        if (h->shape[first + i] == 0 || h->shape[first + i] > UINT32_MAX)
            return cmn_errf(eb, CMN_EFORMAT, "%s: axis %u has %llu voxels", path, first + i,
                            (unsigned long long)h->shape[first + i]);
        v.dims[i] = (uint32_t)h->shape[first + i];
    }
    return cmn_vol_encode(&v, out);
}

/* A sample's raw bytes: read or made into a buffer of its own, or (*borrowed set) a pointer
 * into the QSL's token array, which loading need not copy. */
static int read_sample(lg_qsl_t *q, uint32_t idx, uint8_t **out, size_t *size, int *borrowed,
                       cmn_errbuf_t *eb)
{
    uint8_t *buf;
    int rc = 0;

    *borrowed = 0;
    if (q->src == SRC_LLM_JSON) {
        *out = (uint8_t *)(q->llm.tokens + q->llm.offsets[idx]);
        *size = (size_t)(q->llm.offsets[idx + 1] - q->llm.offsets[idx]) * sizeof(int32_t);
        *borrowed = 1;
        return 0;
    }

    if (q->src == SRC_NPY_DIR) {
        const char *path = q->files[idx];
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        lg__npy_t h;
        uint64_t bytes = 0; /* set by npy_data_size; -O3 cannot prove it */
        uint8_t vh[CMN_VOL_HEADER_SIZE];
        size_t head = q->volume ? CMN_VOL_HEADER_SIZE : 0;
        struct stat st;

        if (fd < 0)
            return cmn_errf(eb, -errno, "cannot open %s: %s", path, strerror(errno));
        rc = npy_read_header(fd, path, &h, eb);
        if (rc == 0)
            rc = npy_data_size(&h, 0, path, &bytes, eb);
        if (rc == 0 && q->volume)
            rc = volume_header(&h, path, vh, eb);
        if (rc == 0 && fstat(fd, &st) != 0)
            rc = cmn_errf(eb, -errno, "cannot stat %s", path);
        if (rc == 0 &&
            (bytes == 0 || bytes > UINT32_MAX || bytes > (uint64_t)st.st_size - h.data_offset))
            rc = cmn_errf(eb, CMN_EFORMAT,
                          "%s: the header promises %llu data bytes, the file holds %llu", path,
                          (unsigned long long)bytes,
                          (unsigned long long)((uint64_t)st.st_size - h.data_offset));
        if (rc == 0 && bytes + head > UINT32_MAX)
            rc = cmn_errf(eb, CMN_EFORMAT, "%s: %llu data bytes are over the 4 GiB sample limit",
                          path, (unsigned long long)bytes);
        if (rc == 0) {
            buf = malloc((size_t)(bytes + head));
            if (!buf)
                rc = cmn_errf(eb, -ENOMEM, "out of memory for %s", path);
            else if ((rc = read_at(fd, buf + head, (size_t)bytes, h.data_offset)) != 0) {
                free(buf);
                rc = cmn_errf(eb, rc < 0 ? rc : CMN_EFORMAT, "cannot read %s", path);
            } else {
                memcpy(buf, vh, head);
                *out = buf;
                *size = (size_t)(bytes + head);
            }
        }
        close(fd);
        return rc;
    }
    buf = malloc(q->sample_size);
    if (!buf)
        return cmn_errf(eb, -ENOMEM, "out of memory for a sample of %zu bytes", q->sample_size);
    if (q->src == SRC_SYNTH) {
        synth_fill(q, idx, buf, q->sample_size);
    } else {
        rc = read_at(q->fd, buf, q->sample_size, q->data_offset + (uint64_t)idx * q->sample_size);
        if (rc != 0) {
            free(buf);
            return cmn_errf(eb, rc < 0 ? rc : CMN_EFORMAT, "cannot read sample %u of %s", idx,
                            q->path);
        }
    }
    *out = buf;
    *size = q->sample_size;
    return 0;
}

/* Replaces the raw bytes by their compressed form when that is smaller. */
static int compress_slot(lg_qsl_t *q, slot_t *sl, uint8_t *raw, size_t n, cmn_errbuf_t *eb)
{
    size_t cap = cmpr_bound(q->codec, n);
    uint8_t *tmp, *packed;
    long c;

    if (cap == 0)
        return 0; /* too large for the codec: it travels raw */
    tmp = malloc(cap);
    if (!tmp)
        return cmn_errf(eb, -ENOMEM, "out of memory compressing a sample of %zu bytes", n);
    c = cmpr_compress(q->cctx, q->codec, raw, n, tmp, cap);
    if (c < 0) {
        free(tmp);
        return cmn_errf(eb, (int)c, "compressing a sample of %zu bytes failed: %s", n,
                        cmn_strerror((int)c));
    }
    if (c > 0) {
        packed = realloc(tmp, (size_t)c);
        sl->wire = packed ? packed : tmp;
        sl->size = (uint32_t)c;
        sl->codec = (uint8_t)q->codec;
        if (!sl->borrowed)
            free(raw);
        sl->borrowed = 0;
        return 0;
    }
    free(tmp);
    return 0;
}

int lg_qsl_load(lg_qsl_t *q, const uint32_t *idx, size_t n, cmn_errbuf_t *eb)
{
    size_t i;
    int rc;

    if (q->keep_digests && !q->digests) {
        q->digests = calloc(q->total, sizeof(*q->digests));
        if (!q->digests)
            return cmn_errf(eb, -ENOMEM, "out of memory for %zu digests", q->total);
    }
    for (i = 0; i < n; i++) {
        slot_t *sl;
        uint8_t *raw;
        size_t size;
        int borrowed;

        if (idx[i] >= q->total) {
            rc = cmn_errf(eb, CMN_ECONFIG, "sample index %u is beyond the QSL's %zu samples",
                          idx[i], q->total);
            goto fail;
        }
        sl = &q->slots[idx[i]];
        if (sl->refs++ > 0)
            continue;
        rc = read_sample(q, idx[i], &raw, &size, &borrowed, eb);
        if (rc < 0) {
            sl->refs--;
            goto fail;
        }
        if (q->digests)
            q->digests[idx[i]] = cmn_digest64(raw, size);
        sl->wire = raw;
        sl->size = (uint32_t)size;
        sl->raw_size = (uint32_t)size;
        sl->codec = CMPR_NONE;
        sl->borrowed = (uint8_t)borrowed;
        if (q->codec != CMPR_NONE) {
            rc = compress_slot(q, sl, raw, size, eb);
            if (rc < 0) {
                if (!sl->borrowed)
                    free(sl->wire);
                sl->wire = NULL;
                sl->refs--;
                goto fail;
            }
        }
        q->loaded_raw += sl->raw_size;
        q->loaded_wire += sl->size;
    }
    return 0;
fail:
    lg_qsl_unload(q, idx, i);
    return rc;
}

void lg_qsl_unload(lg_qsl_t *q, const uint32_t *idx, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++) {
        slot_t *sl;

        if (idx[i] >= q->total)
            continue;
        sl = &q->slots[idx[i]];
        if (sl->refs == 0 || --sl->refs > 0)
            continue;
        q->loaded_raw -= sl->raw_size;
        q->loaded_wire -= sl->size;
        if (!sl->borrowed)
            free(sl->wire);
        memset(sl, 0, sizeof(*sl));
    }
}

int lg_qsl_get(const lg_qsl_t *q, uint32_t idx, lg_qsl_sample_t *out)
{
    const slot_t *sl;

    if (idx >= q->total || q->slots[idx].refs == 0)
        return CMN_ESTATE;
    sl = &q->slots[idx];
    out->data = sl->wire;
    out->size = sl->size;
    out->codec = sl->codec;
    out->raw_size = sl->raw_size;
    return 0;
}

uint64_t lg_qsl_digest(const lg_qsl_t *q, uint32_t idx)
{
    if (!q->digests || idx >= q->total || q->slots[idx].refs == 0)
        return 0;
    return q->digests[idx];
}

void lg_qsl_loaded_bytes(const lg_qsl_t *q, uint64_t *raw, uint64_t *wire)
{
    if (raw)
        *raw = q->loaded_raw;
    if (wire)
        *wire = q->loaded_wire;
}
