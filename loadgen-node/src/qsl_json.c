/* The LLM data sets the MLCommons references ship as JSON (llama3.1-8b's cnn_eval.json: an array
 * of objects, the prompt's token IDs in "tok_input"), read in one streaming pass with yajl (the
 * Debian library the openai backend already parses its streams with). Only the chosen field's
 * token IDs are kept, as int32 in one array with an offset per sample; the texts and every other
 * field pass through the parser in 64 KiB reads and are dropped, so memory is the tokens (4 bytes
 * each) plus 8 bytes per sample, whatever the file's size. */
#include "qsl_json.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef LG_HAVE_YAJL
#    include <yajl/yajl_parse.h>

#    define CHUNK 65536

typedef struct {
    const char *path, *field;
    size_t field_len;
    int depth;         /* containers open: 1 inside the top array, 2 inside a sample */
    size_t sample;     /* index of the sample being read */
    int want_field;    /* the next value at depth 2 is the field's */
    int in_field;      /* inside the field's array (depth 3) */
    int have_field;    /* this sample's field was read */
    int done;          /* the top array closed */
    uint64_t sample_n; /* token IDs of this sample so far */
    lg__llm_tokens_t *out;
    size_t tok_cap, off_cap;
    cmn_errbuf_t *eb;
    int rc; /* set by a callback that stops the parse */
} jctx_t;

static int stop(jctx_t *c, int rc)
{
    c->rc = rc;
    return 0;
}

/* Where the parse is, for every message: the file, and the sample when inside one. */
#    define WHERE_FMT "%s: sample %zu: "

/* |p| (*cap entries of |size| bytes) reallocated to twice as many, |first| at first: the new
 * array, or NULL with the parse stopped (-ENOMEM naming |what|) and |p| untouched. */
static void *grow(jctx_t *c, void *p, size_t *cap, size_t size, size_t first, const char *what)
{
    size_t n = *cap ? *cap * 2 : first;
    void *q = realloc(p, n * size);

    if (!q) {
        stop(c, cmn_errf(c->eb, -ENOMEM, "%s: out of memory for %zu %s", c->path, n, what));
        return NULL;
    }
    *cap = n;
    return q;
}

static int bad_value(jctx_t *c, const char *what)
{
    if (c->depth == 0)
        return stop(c, cmn_errf(c->eb, CMN_EFORMAT,
                                "%s: the top level is %s, not a JSON array of objects (one per "
                                "sample)",
                                c->path, what));
    if (c->depth == 1)
        return stop(c, cmn_errf(c->eb, CMN_EFORMAT, WHERE_FMT "%s, not an object", c->path,
                                c->sample, what));
    if (c->want_field)
        return stop(c, cmn_errf(c->eb, CMN_EFORMAT,
                                WHERE_FMT "field '%s' is %s, not an array of token IDs", c->path,
                                c->sample, c->field, what));
    return stop(c, cmn_errf(c->eb, CMN_EFORMAT, WHERE_FMT "%s[%llu] is %s, not a token ID", c->path,
                            c->sample, c->field, (unsigned long long)c->sample_n, what));
}

/* A scalar: a token ID inside the field's array, ignored elsewhere inside a sample. */
static int scalar(jctx_t *c, const char *what)
{
    if (c->depth <= 1 || c->in_field || c->want_field)
        return bad_value(c, what);
    return 1;
}

static int on_null(void *ctx)
{
    return scalar(ctx, "null");
}

static int on_bool(void *ctx, int b)
{
    (void)b;
    return scalar(ctx, "a boolean");
}

static int on_double(void *ctx, double d)
{
    (void)d;
    return scalar(ctx, "a number with a fraction or an exponent");
}

static int on_string(void *ctx, const unsigned char *s, size_t n)
{
    (void)s, (void)n;
    return scalar(ctx, "a string");
}

static int on_integer(void *ctx, long long v)
{
    jctx_t *c = ctx;
    lg__llm_tokens_t *o = c->out;

    if (!c->in_field)
        return scalar(c, "a number");
    if (v < 0 || v > INT32_MAX)
        return stop(c,
                    cmn_errf(c->eb, CMN_EFORMAT,
                             WHERE_FMT "%s[%llu] is %lld, not a token ID (0 to %d)", c->path,
                             c->sample, c->field, (unsigned long long)c->sample_n, v, INT32_MAX));
    if (c->sample_n >= LG__LLM_MAX_TOKENS)
        return stop(c, cmn_errf(c->eb, CMN_ETOOBIG,
                                WHERE_FMT "'%s' holds more than %u token IDs (a sample is at "
                                          "most 4 GiB on the wire)",
                                c->path, c->sample, c->field, LG__LLM_MAX_TOKENS));
    if (o->n_tokens == c->tok_cap) {
        int32_t *t = grow(c, o->tokens, &c->tok_cap, sizeof(*t), 65536, "token IDs");

        if (!t)
            return 0;
        o->tokens = t;
    }
    o->tokens[o->n_tokens++] = (int32_t)v;
    c->sample_n++;
    return 1;
}

static int on_start_map(void *ctx)
{
    jctx_t *c = ctx;

    if (c->depth == 0 || c->in_field || c->want_field)
        return bad_value(c, "an object");
    if (c->depth == 1) {
        c->have_field = 0;
        c->sample_n = 0;
    }
    c->depth++;
    return 1;
}

static int on_map_key(void *ctx, const unsigned char *key, size_t n)
{
    jctx_t *c = ctx;

    if (c->depth != 2)
        return 1;
    c->want_field = n == c->field_len && memcmp(key, c->field, n) == 0;
    if (c->want_field && c->have_field)
        return stop(c, cmn_errf(c->eb, CMN_EFORMAT, WHERE_FMT "field '%s' appears twice", c->path,
                                c->sample, c->field));
    return 1;
}

static int on_end_map(void *ctx)
{
    jctx_t *c = ctx;
    lg__llm_tokens_t *o = c->out;

    c->depth--;
    if (c->depth != 1)
        return 1;
    if (!c->have_field)
        return stop(c, cmn_errf(c->eb, CMN_EFORMAT, WHERE_FMT "no field '%s'", c->path, c->sample,
                                c->field));
    if (o->n_samples >= LG_QSL_MAX_SAMPLES)
        return stop(c, cmn_errf(c->eb, CMN_ETOOBIG, "%s: more than %u samples", c->path,
                                LG_QSL_MAX_SAMPLES));
    if (o->n_samples + 1 >= c->off_cap) {
        uint64_t *f = grow(c, o->offsets, &c->off_cap, sizeof(*f), 1024, "samples");

        if (!f)
            return 0;
        o->offsets = f;
    }
    o->offsets[++o->n_samples] = o->n_tokens;
    c->sample++;
    return 1;
}

static int on_start_array(void *ctx)
{
    jctx_t *c = ctx;

    if (c->depth == 0) {
        c->depth = 1;
        return 1;
    }
    if (c->depth == 1 || c->in_field)
        return bad_value(c, "an array");
    if (c->want_field) {
        c->want_field = 0;
        c->in_field = 1;
    }
    c->depth++;
    return 1;
}

static int on_end_array(void *ctx)
{
    jctx_t *c = ctx;

    c->depth--;
    if (c->depth == 0) {
        c->done = 1;
        return 1;
    }
    if (!c->in_field)
        return 1;
    c->in_field = 0;
    c->have_field = 1;
    if (c->sample_n == 0)
        return stop(c, cmn_errf(c->eb, CMN_EFORMAT, WHERE_FMT "'%s' is an empty array", c->path,
                                c->sample, c->field));
    return 1;
}

static const yajl_callbacks callbacks = {
    on_null,      on_bool,    on_integer, on_double,      NULL,         on_string,
    on_start_map, on_map_key, on_end_map, on_start_array, on_end_array,
};

/* yajl's own complaint (bad syntax, an integer past 64 bits, bad UTF-8), with the byte offset in
 * the file and the sample it was in. */
static int parse_error(jctx_t *c, yajl_handle h, const unsigned char *buf, size_t n, uint64_t base,
                       int at_end)
{
    unsigned char *e = yajl_get_error(h, 0, buf, n);
    const char *msg = e ? (const char *)e : "invalid JSON";
    size_t len = strlen(msg);
    uint64_t at = base + (at_end ? 0 : yajl_get_bytes_consumed(h));

    while (len && (msg[len - 1] == '\n' || msg[len - 1] == ' '))
        len--;
    if (at_end && c->depth >= 2)
        cmn_errf(c->eb, CMN_EFORMAT,
                 "%s: sample %zu: the file ends inside it (truncated? %llu bytes; %.*s)", c->path,
                 c->sample, (unsigned long long)base, (int)len, msg);
    else if (at_end)
        cmn_errf(c->eb, CMN_EFORMAT,
                 "%s: the file ends inside the top array (truncated? %llu bytes; %.*s)", c->path,
                 (unsigned long long)base, (int)len, msg);
    else
        cmn_errf(c->eb, CMN_EFORMAT, "%s: byte %llu, in sample %zu: not valid JSON (%.*s)", c->path,
                 (unsigned long long)at, c->sample, (int)len, msg);
    if (e)
        yajl_free_error(h, e);
    return CMN_EFORMAT;
}

int lg__llm_json_read(const char *path, const char *field, lg__llm_tokens_t *out, cmn_errbuf_t *eb)
{
    jctx_t c = {0};
    unsigned char *buf;
    yajl_handle h;
    uint64_t base = 0;
    int fd, rc = 0;

    memset(out, 0, sizeof(*out));
    c.path = path;
    c.field = field;
    c.field_len = strlen(field);
    c.out = out;
    c.eb = eb;
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return cmn_errf(eb, -errno, "cannot open %s: %s", path, strerror(errno));
    buf = malloc(CHUNK);
    h = buf ? yajl_alloc(&callbacks, NULL, &c) : NULL;
    if (!h) {
        rc = cmn_errf(eb, -ENOMEM, "out of memory reading %s", path);
        goto out;
    }
    out->offsets = calloc(1024, sizeof(*out->offsets));
    if (!out->offsets) {
        rc = cmn_errf(eb, -ENOMEM, "out of memory reading %s", path);
        goto out;
    }
    c.off_cap = 1024;
    for (;;) {
        ssize_t n = read(fd, buf, CHUNK);
        yajl_status st;

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = cmn_errf(eb, -errno, "cannot read %s: %s", path, strerror(errno));
            goto out;
        }
        st = n ? yajl_parse(h, buf, (size_t)n) : yajl_complete_parse(h);
        if (st == yajl_status_client_canceled) {
            rc = c.rc;
            goto out;
        }
        if (st != yajl_status_ok) {
            rc = parse_error(&c, h, buf, (size_t)n, base, n == 0);
            goto out;
        }
        if (n == 0)
            break;
        base += (uint64_t)n;
    }
    if (!c.done)
        rc = cmn_errf(eb, CMN_EFORMAT, "%s: the file ends inside the top array (truncated?)", path);
out:
    if (h)
        yajl_free(h);
    free(buf);
    close(fd);
    if (rc < 0)
        lg__llm_tokens_free(out);
    return rc;
}

#else

int lg__llm_json_read(const char *path, const char *field, lg__llm_tokens_t *out, cmn_errbuf_t *eb)
{
    (void)field;
    memset(out, 0, sizeof(*out));
    return cmn_errf(eb, CMN_ECONFIG,
                    "%s: this build reads no JSON data sets: yajl (Debian libyajl-dev) was not "
                    "found when it was configured; install it and reconfigure",
                    path);
}

#endif

void lg__llm_tokens_free(lg__llm_tokens_t *t)
{
    free(t->tokens);
    free(t->offsets);
    memset(t, 0, sizeof(*t));
}
