/* Fuzz target: LZ4 decode of hostile data. The first four bytes are the declared raw size (as in a
 * Sample or Result entry); the size checks run first, exactly as a receiver does, then the
 * bounded decoder writes into a buffer of exactly that size. */
#include "cmpr/cmpr.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint32_t raw;
    uint8_t *out;

    if (size < 4)
        return 0;
    raw = (uint32_t)data[0] | (uint32_t)data[1] << 8 | (uint32_t)data[2] << 16 |
          (uint32_t)data[3] << 24;
    data += 4;
    size -= 4;
    if (cmpr_check_sizes(CMPR_LZ4, raw, size, 4u << 20, NULL) < 0)
        return 0;
    out = malloc(raw ? raw : 1);
    if (!out)
        return 0;
    (void)cmpr_decompress(CMPR_LZ4, data, size, out, raw);
    free(out);
    return 0;
}
