/* Fuzz target: an HTTP/1.1 answer through the lean client's response parser (httpc/h1.h) in
 * chunks of a size the first byte picks (1-64), then the close: every span of body it returns
 * lies inside the bytes fed, the body is never longer than the input, and the parser stops at
 * its end or an error with a message. */
#include "httpc/h1.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    httpc_h1_parser_t *p;
    size_t chunk, off = 0, body = 0;
    int ev = HTTPC_H1_MORE;

    if (size < 1)
        return 0;
    chunk = (size_t)data[0] % 64 + 1;
    data++;
    size--;
    p = malloc(sizeof(*p));
    if (!p)
        return 0;
    httpc_h1_parser_init(p);
    while (off <= size && ev >= 0 && ev != HTTPC_H1_END) {
        size_t n = size - off < chunk ? size - off : chunk, done = 0;
        do {
            const char *d;
            size_t used, len;
            ev = httpc_h1_parse(p, (const char *)data + off + done, n - done, &used, &d, &len);
            if (used > n - done)
                abort();
            if (ev == HTTPC_H1_DATA) {
                if (d < (const char *)data + off + done || d + len > (const char *)data + off + n)
                    abort();
                body += len;
            }
            done += used;
        } while (ev == HTTPC_H1_HEAD || ev == HTTPC_H1_DATA);
        off += done;
        if (n == 0)
            break;
    }
    if (ev >= 0 && ev != HTTPC_H1_END)
        ev = httpc_h1_parse_eof(p);
    if (body > size || (ev < 0 && p->err[0] == '\0'))
        abort();
    free(p);
    return 0;
}
