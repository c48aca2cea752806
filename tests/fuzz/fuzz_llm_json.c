/* Fuzz target: an LLM data set in JSON (loadgen-node --qsl-llm-json), read from a memory file:
 * open (the streaming pass), load every sample, read each back, unload, close. A data file is
 * hostile until validated: any input must end in a sample table or an error, never a crash. */
#ifndef _GNU_SOURCE
#    define _GNU_SOURCE
#endif
#include "lg/qsl.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int fd = memfd_create("llm_json", MFD_CLOEXEC);
    char path[64];
    cmn_errbuf_t eb = {{0}};
    lg_qsl_t *q = NULL;
    uint32_t *idx;
    size_t n, i;

    if (fd < 0)
        return 0;
    if (write(fd, data, size) != (ssize_t)size)
        goto out;
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    if (lg_qsl_open_llm_json(path, "tok_input", &q, &eb) < 0)
        goto out;
    n = lg_qsl_total_count(q);
    idx = malloc(n * sizeof(*idx));
    if (idx) {
        for (i = 0; i < n; i++)
            idx[i] = (uint32_t)i;
        if (lg_qsl_load(q, idx, n, &eb) == 0) {
            for (i = 0; i < n; i++) {
                lg_qsl_sample_t s;

                if (lg_qsl_get(q, idx[i], &s) != 0 || s.size == 0 || s.size % 4 != 0)
                    abort(); /* a loaded sample is at least one int32 token ID */
            }
            lg_qsl_unload(q, idx, n);
        }
        free(idx);
    }
    lg_qsl_close(q);
out:
    close(fd);
    return 0;
}
