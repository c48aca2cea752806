/* Fuzz target: an engine's SSE stream, fed to the openai backend's decoder in chunks of a size
 * the first byte picks, and every event given to a dialect's parser (the second byte picks it, and
 * whether the events are read in place with httpc_sse_next or copied with httpc_sse_feed):
 * the bytes an engine sends are hostile until validated. */
#include "httpc/oai.h"
#include "httpc/sse.h"

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    httpc_oai_gen_t g = {HTTPC_OAI_VLLM, "m", 64, 0, 0.0, 0, 0, 0};
    httpc_oai_out_t o = {0};
    httpc_sse_t p;
    size_t chunk, off = 0;
    int in_place;

    if (size < 2)
        return 0;
    chunk = (size_t)data[0] % 64 + 1;
    g.dialect = (httpc_oai_dialect_t)(data[1] % 4);
    g.incremental = data[1] & 0x10 ? 1 : 0;
    in_place = data[1] & 0x20 ? 1 : 0; /* httpc_sse_next, as the backend reads */
    data += 2;
    size -= 2;
    o.max = 64;
    httpc_sse_init(&p, 4096);
    while (off < size) {
        size_t n = size - off < chunk ? size - off : chunk;
        while (n) {
            int have = 0;
            size_t len = 0;
            const char *ev = NULL;
            ssize_t used = in_place ? httpc_sse_next(&p, (const char *)data + off, n, &ev, &len)
                                    : httpc_sse_feed(&p, (const char *)data + off, n, &have);
            if (used < 0)
                goto out;
            off += (size_t)used;
            n -= (size_t)used;
            if (have)
                ev = httpc_sse_event(&p, &len);
            if (ev) {
                if (httpc_oai_dialect_event(&g, ev, len, &o) < 0)
                    goto out;
            }
        }
    }
out:
    httpc_sse_free(&p);
    httpc_oai_out_free(&o);
    return 0;
}
