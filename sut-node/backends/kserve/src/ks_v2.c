/* KServe v2 binary-extension messages (see ks_v2.h). */
#include "ks_v2.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const struct {
    const char *name;
    size_t size;
} dtypes[] = {{"BOOL", 1},   {"UINT8", 1}, {"INT8", 1},   {"UINT16", 2}, {"INT16", 2},
              {"FP16", 2},   {"BF16", 2},  {"UINT32", 4}, {"INT32", 4},  {"FP32", 4},
              {"UINT64", 8}, {"INT64", 8}, {"FP64", 8}};

size_t ks_dtype_size(const char *datatype)
{
    size_t i;
    for (i = 0; i < sizeof(dtypes) / sizeof(dtypes[0]); i++)
        if (strcmp(dtypes[i].name, datatype) == 0)
            return dtypes[i].size;
    return 0;
}

int ks_request_header(const ks_tensor_t *t, size_t n, size_t bytes, char **out, size_t *len)
{
    /* Names and datatype are checked at create time (printable, no quotes or backslashes). */
    size_t cap = 256 + strlen(t->input) + strlen(t->output) + 24 * (t->ndims + 1), i;
    char *p = malloc(cap);
    int k;

    if (!p)
        return -ENOMEM;
    k = snprintf(p, cap, "{\"inputs\":[{\"name\":\"%s\",\"shape\":[%zu", t->input, n);
    for (i = 0; i < t->ndims; i++)
        k += snprintf(p + k, cap - (size_t)k, ",%lld", (long long)t->shape[i]);
    k += snprintf(p + k, cap - (size_t)k,
                  "],\"datatype\":\"%s\",\"parameters\":{\"binary_data_size\":%zu}}],"
                  "\"outputs\":[{\"name\":\"%s\",\"parameters\":{\"binary_data\":true}}]}",
                  t->datatype, bytes, t->output);
    *out = p;
    *len = (size_t)k;
    return 0;
}

int ks_parse_shape(const char *shape, size_t elem, ks_tensor_t *t, size_t *bytes, char *err,
                   size_t errlen)
{
    const char *p = shape;
    uint64_t total = elem;

    t->ndims = 0;
    if (elem == 0) {
        snprintf(err, errlen, "option shape=%s: the datatype has no element size", shape);
        return -EINVAL;
    }
    while (*p) {
        char *end;
        long long d;
        errno = 0;
        d = strtoll(p, &end, 10);
        if (errno || end == p || d < 1 || d > (1ll << 31) || t->ndims == KS_MAX_DIMS ||
            (*end && (*end != ',' || !end[1]))) {
            snprintf(err, errlen,
                     "option shape=%s: expected up to %d integers from 1 to %lld separated by "
                     "commas",
                     shape, KS_MAX_DIMS, 1ll << 31);
            return -EINVAL;
        }
        /* Checked before multiplying: three dims of 2^31 would wrap 64 bits to 0. */
        if ((uint64_t)d > KS_MAX_SAMPLE_BYTES / total) {
            snprintf(err, errlen,
                     "option shape=%s: one sample of %zu-byte elements would be over %llu bytes "
                     "(the largest frame)",
                     shape, elem, (unsigned long long)KS_MAX_SAMPLE_BYTES);
            return -EINVAL;
        }
        total *= (uint64_t)d;
        t->shape[t->ndims++] = d;
        p = *end ? end + 1 : end;
    }
    if (t->ndims == 0) {
        snprintf(err, errlen, "option shape is empty");
        return -EINVAL;
    }
    *bytes = (size_t)total;
    return 0;
}

long ks_header_length(const char *line, size_t n)
{
    static const char hdr[] = "Inference-Header-Content-Length:";
    size_t i = sizeof(hdr) - 1, digits = 0;
    unsigned long v = 0;

    if (n < i || strncasecmp(line, hdr, i) != 0)
        return -1;
    while (i < n && (line[i] == ' ' || line[i] == '\t'))
        i++;
    for (; i < n && line[i] >= '0' && line[i] <= '9'; i++, digits++) {
        v = v * 10 + (unsigned long)(line[i] - '0');
        if (v > KS_MAX_JSON_HEADER)
            return -2;
    }
    while (i < n && (line[i] == ' ' || line[i] == '\t'))
        i++;
    return digits && i == n ? (long)v : -2;
}

/* A server's string for a log line: printable ASCII kept, anything else '?', cut to fit. */
static const char *clean(char *dst, size_t cap, const cJSON *s)
{
    size_t i = 0;
    const char *p = cJSON_IsString(s) ? s->valuestring : "";
    for (; *p && i + 1 < cap; p++)
        dst[i++] = *p >= 0x20 && *p <= 0x7e ? *p : '?';
    dst[i] = '\0';
    return dst;
}

/* Output |i|'s binary_data_size |bs| as a whole number of bytes that fits in the |bin_len|-byte
 * binary part after the |off| bytes of the outputs before it. */
static int byte_count(const cJSON *bs, size_t i, const cJSON *nm, size_t off, size_t bin_len,
                      size_t *sz, char *err, size_t errlen)
{
    char nb[72];
    double v;

    if (!cJSON_IsNumber(bs)) {
        snprintf(err, errlen, "output %zu ('%s'): binary_data_size is not a number", i,
                 clean(nb, sizeof(nb), nm));
        return -EPROTO;
    }
    v = bs->valuedouble;
    if (!(v >= 0)) {
        snprintf(err, errlen, "output %zu ('%s'): binary_data_size %.17g is negative", i,
                 clean(nb, sizeof(nb), nm), v);
        return -EPROTO;
    }
    /* off <= bin_len here: each output's bytes were checked to fit before adding them. The
     * comparison in integers too: the double of a room past 2^53 may have been rounded up. */
    if (v >= 18446744073709551616.0 || v > (double)(bin_len - off) ||
        (uint64_t)v > (uint64_t)(bin_len - off)) {
        snprintf(err, errlen,
                 "output %zu ('%s'): binary_data_size %.17g at offset %zu runs past the "
                 "%zu-byte binary part",
                 i, clean(nb, sizeof(nb), nm), v, off, bin_len);
        return -EPROTO;
    }
    *sz = (size_t)v;
    if ((double)*sz != v) {
        snprintf(err, errlen, "output %zu ('%s'): binary_data_size %.17g is not a whole number", i,
                 clean(nb, sizeof(nb), nm), v);
        return -EPROTO;
    }
    return 0;
}

/* The named output's datatype and shape, when it gives them, must make exactly |sz| bytes. */
static int check_tensor(const cJSON *o, const char *name, size_t sz, char *err, size_t errlen)
{
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(o, "datatype");
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(o, "shape"), *d;
    uint64_t count = 1;
    int zero = 0, over = 0;
    size_t elem;
    char nb[40];

    if (!dt && !sh)
        return 0;
    if (!cJSON_IsString(dt) || !cJSON_IsArray(sh)) {
        snprintf(err, errlen, "output '%s': datatype must be a string and shape an array", name);
        return -EPROTO;
    }
    elem = ks_dtype_size(dt->valuestring);
    if (!elem) {
        if (strcmp(dt->valuestring, "BYTES") == 0) /* length-prefixed strings: no fixed size */
            return 0;
        snprintf(err, errlen, "output '%s': datatype '%s' is not a KServe v2 datatype", name,
                 clean(nb, sizeof(nb), dt));
        return -EPROTO;
    }
    cJSON_ArrayForEach(d, sh)
    {
        double v = cJSON_IsNumber(d) ? d->valuedouble : -1;
        uint64_t u;
        if (!(v >= 0) || v > 9007199254740992.0 || (double)(uint64_t)v != v) {
            snprintf(err, errlen,
                     "output '%s': a shape dimension is not a whole number from 0 to 2^53", name);
            return -EPROTO;
        }
        u = (uint64_t)v;
        if (u == 0)
            zero = 1;
        else if (count > UINT64_MAX / u)
            over = 1;
        else
            count *= u;
    }
    if (zero) { /* a 0 anywhere makes 0, whatever the other dimensions */
        count = 0;
        over = 0;
    } else if (over || count > UINT64_MAX / elem) {
        over = 1;
    }
    if (over || count * elem != sz) {
        char c[24];
        snprintf(c, sizeof(c), "%llu", (unsigned long long)(count * elem));
        snprintf(err, errlen,
                 "output '%s': datatype %s and its shape make %s bytes, binary_data_size says %zu",
                 name, dt->valuestring, over ? "more than 2^64" : c, sz);
        return -EPROTO;
    }
    return 0;
}

int ks_response_output(const char *json, size_t len, size_t bin_len, const char *name,
                       size_t *offset, size_t *size, char *err, size_t errlen)
{
    cJSON *root = cJSON_ParseWithLength(json, len), *outs, *o, *e;
    size_t off = 0, i = 0;
    int rc = -EPROTO;
    char eb[208];

    if (!root || !cJSON_IsObject(root)) {
        snprintf(err, errlen, "the response header is not a JSON object");
        goto out;
    }
    e = cJSON_GetObjectItemCaseSensitive(root, "error");
    if (cJSON_IsString(e)) {
        snprintf(err, errlen, "server error: %s", clean(eb, sizeof(eb), e));
        goto out;
    }
    outs = cJSON_GetObjectItemCaseSensitive(root, "outputs");
    if (!cJSON_IsArray(outs)) {
        snprintf(err, errlen, "the response has no outputs array");
        goto out;
    }
    cJSON_ArrayForEach(o, outs)
    {
        cJSON *nm = cJSON_GetObjectItemCaseSensitive(o, "name");
        cJSON *par = cJSON_GetObjectItemCaseSensitive(o, "parameters");
        cJSON *bs = par ? cJSON_GetObjectItemCaseSensitive(par, "binary_data_size") : NULL;
        int match = cJSON_IsString(nm) && strcmp(nm->valuestring, name) == 0;
        size_t sz;
        if (!bs) {
            if (match) {
                snprintf(err, errlen,
                         "output '%s' came back as JSON, not binary (no binary_data_size)", name);
                goto out;
            }
            i++;
            continue; /* a JSON output occupies no binary bytes */
        }
        if (byte_count(bs, i, nm, off, bin_len, &sz, err, errlen) < 0)
            goto out;
        if (match) {
            if (check_tensor(o, name, sz, err, errlen) < 0)
                goto out;
            *offset = off;
            *size = sz;
            rc = 0;
            goto out;
        }
        off += sz; /* <= bin_len: byte_count checked it */
        i++;
    }
    snprintf(err, errlen, "the response has no output named '%s'", name);
out:
    cJSON_Delete(root);
    return rc;
}

int ks_response_parse(const char *resp, size_t resp_len, long json_len, const char *name, size_t n,
                      size_t *data, size_t *per, char *err, size_t errlen)
{
    size_t jl, off = 0, size = 0;
    int rc;

    if (json_len == -1) {
        snprintf(err, errlen,
                 "no Inference-Header-Content-Length (body %zu bytes): the server did not "
                 "answer with the binary tensor extension",
                 resp_len);
        return -EPROTO;
    }
    if (json_len < 0 || (unsigned long)json_len > KS_MAX_JSON_HEADER) {
        snprintf(err, errlen,
                 "Inference-Header-Content-Length is not a decimal from 0 to %u (or came twice "
                 "with different values)",
                 KS_MAX_JSON_HEADER);
        return -EPROTO;
    }
    jl = (size_t)json_len;
    if (jl > resp_len) {
        snprintf(err, errlen, "Inference-Header-Content-Length %zu is past the %zu-byte body", jl,
                 resp_len);
        return -EPROTO;
    }
    if (n == 0) {
        snprintf(err, errlen, "a response for a batch of 0 samples");
        return -EPROTO;
    }
    if ((rc = ks_response_output(resp, jl, resp_len - jl, name, &off, &size, err, errlen)) < 0)
        return rc;
    if (size == 0 || size % n != 0) {
        snprintf(err, errlen, "output '%s' of %zu bytes does not split into %zu non-empty samples",
                 name, size, n);
        return -EPROTO;
    }
    *data = jl + off;
    *per = size / n;
    return 0;
}
