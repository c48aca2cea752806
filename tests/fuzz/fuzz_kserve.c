/* Fuzz target: a KServe v2 server's response as the kserve backend reads it. The first byte picks
 * the batch size (1-16); the bytes up to the first '\n' are the Inference-Header-Content-Length
 * header line (ks_header_length), the rest the response body (ks_response_parse, output
 * "logits"). The body is copied into a buffer of exactly its size and, when the parser accepts
 * it, every result byte is read, so ASan reports a slice that points outside the body. */
#include "ks_v2.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nl;
    size_t n, hlen, blen, off = 0, per = 0, i;
    char err[300], *body;
    volatile unsigned sum = 0;
    long jl;

    if (size < 1)
        return 0;
    n = (size_t)data[0] % 16 + 1;
    data++;
    size--;
    nl = memchr(data, '\n', size);
    hlen = nl ? (size_t)(nl - data) : size;
    jl = ks_header_length((const char *)data, hlen);
    blen = nl ? size - hlen - 1 : 0;
    body = malloc(blen ? blen : 1);
    if (!body)
        return 0;
    if (blen)
        memcpy(body, nl + 1, blen);
    err[0] = '\0';
    if (ks_response_parse(body, blen, jl, "logits", n, &off, &per, err, sizeof(err)) == 0) {
        if (per == 0 || off + n * per > blen)
            abort(); /* the parser's promise broken */
        for (i = 0; i < n * per; i++)
            sum += (unsigned char)body[off + i];
    } else if (!err[0]) {
        abort(); /* a failure without a reason */
    }
    free(body);
    return 0;
}
