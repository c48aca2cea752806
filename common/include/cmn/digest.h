/* A fast 64-bit digest of a byte string, used by the `digest` backend (sut-node) and by
 * loadgen-node's --verify-digest mode, so the LoadGen side can prove every sample byte arrived
 * intact. It detects corruption, truncation and reordering; it is not a cryptographic hash.
 *
 * Definition (so other tools can reproduce it): state h = 0x9E3779B97F4A7C15 ^ len; for each
 * 8-byte little-endian word w: h = (h ^ mix(w)) * 0xFF51AFD7ED558CCD, then h ^= h >> 32, where
 * mix(w) = (w * 0xC2B2AE3D27D4EB4F) rotated left by 31; the tail of (len % 8) bytes is packed
 * little-endian into one zero-padded word and mixed the same way; the result is fmix64(h) of
 * MurmurHash3 (x ^= x>>33; x *= 0xFF51AFD7ED558CCD; x ^= x>>33; x *= 0xC4CEB9FE1A85EC53;
 * x ^= x>>33). Transmitted as 8 bytes little-endian. Reentrant. */
#ifndef CMN_DIGEST_H
#define CMN_DIGEST_H

#include <stddef.h>
#include <stdint.h>

uint64_t cmn_digest64(const void *data, size_t len);

/* Writes |v| as 8 little-endian bytes / reads it back. */
void cmn_digest_put(uint8_t out[8], uint64_t v);
uint64_t cmn_digest_get(const uint8_t in[8]);

#endif
