/* A fast 64-bit digest of a byte string, used by the `digest` backend (sut-node) and by
 * loadgen-node's --verify-digest mode, so the LoadGen side can prove every sample byte arrived
 * intact. It detects corruption, truncation and reordering; it is not a cryptographic hash.
 *
 * Definition (so other tools can reproduce it): XXH3-64 of xxHash 0.8 (XXH3_64bits, seed 0,
 * no secret), from Debian's libxxhash; e.g. `xxhsum -H3` prints it, and Python's
 * xxhash.xxh3_64_intdigest(). Transmitted as 8 bytes little-endian.
 *
 * Its values changed with the move to XXH3 (before, a hand-written MurmurHash3-style digest):
 * a node and a LoadGen side built before and after that change disagree on every digest, so
 * --verify-digest reports every response as wrong between them. Reentrant. */
#ifndef CMN_DIGEST_H
#define CMN_DIGEST_H

#include <stddef.h>
#include <stdint.h>

uint64_t cmn_digest64(const void *data, size_t len);

/* Writes |v| as 8 little-endian bytes / reads it back. */
void cmn_digest_put(uint8_t out[8], uint64_t v);
uint64_t cmn_digest_get(const uint8_t in[8]);

#endif
