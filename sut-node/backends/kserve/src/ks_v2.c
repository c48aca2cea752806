/* KServe v2 binary-extension messages (see ks_v2.h). */
#include "ks_v2.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

int ks_response_output(const char *json, size_t len, const char *name, size_t *offset, size_t *size,
                       char *err, size_t errlen)
{
    cJSON *root = cJSON_ParseWithLength(json, len), *outs, *o, *e;
    size_t off = 0;
    int rc = -EPROTO;

    if (!root || !cJSON_IsObject(root)) {
        snprintf(err, errlen, "the response header is not a JSON object");
        goto out;
    }
    e = cJSON_GetObjectItemCaseSensitive(root, "error");
    if (cJSON_IsString(e)) {
        snprintf(err, errlen, "server error: %.200s", e->valuestring);
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
        size_t sz;
        if (!cJSON_IsNumber(bs)) {
            if (cJSON_IsString(nm) && strcmp(nm->valuestring, name) == 0) {
                snprintf(err, errlen,
                         "output '%s' came back as JSON, not binary (no binary_data_size)", name);
                goto out;
            }
            continue; /* a JSON output occupies no binary bytes */
        }
        if (bs->valuedouble < 0 || bs->valuedouble > 1e15) {
            snprintf(err, errlen, "binary_data_size %g is out of range", bs->valuedouble);
            goto out;
        }
        sz = (size_t)bs->valuedouble;
        if (cJSON_IsString(nm) && strcmp(nm->valuestring, name) == 0) {
            *offset = off;
            *size = sz;
            rc = 0;
            goto out;
        }
        off += sz;
    }
    snprintf(err, errlen, "the response has no output named '%s'", name);
out:
    cJSON_Delete(root);
    return rc;
}
