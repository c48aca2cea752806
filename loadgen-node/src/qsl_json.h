/* Reading an LLM data set shipped as JSON (an array of objects, one per sample, the prompt's
 * token IDs in one field) into token IDs for the QSL (qsl.c). Internal to loadgen-node. */
#ifndef LG_QSL_JSON_H
#define LG_QSL_JSON_H

#include "cmn/err.h"
#include "lg/qsl.h"

#include <stddef.h>
#include <stdint.h>

/* A sample travels as int32 token IDs in one frame of at most 4 GiB - 1 bytes. */
#define LG__LLM_MAX_TOKENS (UINT32_MAX / 4u)

/* Sample i's token IDs are tokens[offsets[i] .. offsets[i + 1]). Owned by the caller of
 * lg__llm_json_read, freed with lg__llm_tokens_free. */
typedef struct {
    int32_t *tokens;
    uint64_t *offsets; /* n_samples + 1 entries */
    size_t n_tokens, n_samples;
} lg__llm_tokens_t;

/* Reads |path| in one streaming pass: the top level must be an array of objects, each with
 * |field| an array of at least one integer token ID in [0, 2^31 - 1]; every other field is
 * skipped. Errors (CMN_EFORMAT, CMN_ETOOBIG, -ENOMEM, -errno; CMN_ECONFIG in a build without
 * yajl) name the file, the sample index, the field and the reason; |out| is then empty. */
int lg__llm_json_read(const char *path, const char *field, lg__llm_tokens_t *out, cmn_errbuf_t *eb);

void lg__llm_tokens_free(lg__llm_tokens_t *t);

#endif
