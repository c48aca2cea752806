/* The in-process null SUT: answers every sample with a tiny response, inline or from a helper
 * thread, so tests and the scheduler's own overhead can be measured without a network.
 *
 * Responses: |response_size| bytes made of the sample's QSL index (4 bytes little-endian,
 * repeated), or with |digest| the 8-byte cmn_digest64 of the decoded sample bytes, as the
 * sut-node digest backend answers (so --verify-digest can be exercised in process).
 *
 * Thread-safety: issue() and flush() are called by the issue thread; the helper thread calls
 * lg_complete(). */
#ifndef LG_SUT_NULL_H
#define LG_SUT_NULL_H

#include "lg/lg.h"

typedef struct {
    const char *name;     /* "Null SUT" */
    size_t response_size; /* 4 */
    int threaded;         /* 0: complete inside issue(); 1: a helper thread completes */
    uint64_t delay_ns;    /* threaded: complete this long after the issue */
    int digest;           /* respond with the sample's digest */
    int64_t n_tokens;     /* > 0: send a first token, then report this many tokens */
    uint64_t fail_every;  /* test hook: every Nth sample fails with CMN_EBACKEND (0: never) */
    uint64_t drop_every;  /* test hook: every Nth sample is never answered (0: never) */
} lg_null_config_t;

void lg_null_config_init(lg_null_config_t *cfg);

int lg_sut_null_create(const lg_null_config_t *cfg, lg_sut_t **out, cmn_errbuf_t *eb);

/* Stops the helper thread; every sample handed to it has been answered by then. */
void lg_sut_null_destroy(lg_sut_t *sut);

/* Samples answered so far (for tests). */
uint64_t lg_sut_null_answered(lg_sut_t *sut);

#endif
