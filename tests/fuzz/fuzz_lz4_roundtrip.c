/* Fuzz target: whatever LZ4 compresses must decode to the same bytes. */
#include "cmpr/cmpr.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static cmpr_ctx_t *ctx;
    size_t cap = cmpr_bound(CMPR_LZ4, size);
    uint8_t *comp, *back;
    long n;

    if (!ctx)
        ctx = cmpr_ctx_new();
    if (!ctx || cap == 0)
        return 0;
    comp = malloc(cap);
    back = malloc(size ? size : 1);
    if (!comp || !back)
        goto out;
    n = cmpr_compress(ctx, CMPR_LZ4, data, size, comp, cap);
    if (n < 0)
        abort();
    if (n > 0) {
        if ((size_t)n >= size || cmpr_check_sizes(CMPR_LZ4, size, (uint64_t)n, size, NULL) != 0 ||
            cmpr_decompress(CMPR_LZ4, comp, (size_t)n, back, size) != 0 ||
            memcmp(back, data, size) != 0)
            abort();
    }
out:
    free(comp);
    free(back);
    return 0;
}
