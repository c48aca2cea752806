/* The per-connection TLS engine (tls.c), used by conn.c. Internal to common/. */
#ifndef CMN_TLS_INTERNAL_H
#define CMN_TLS_INTERNAL_H

#include "cmn/tls.h"

#include <stddef.h>
#include <stdint.h>

typedef struct cmn__tls cmn__tls_t;

/* |peer_name|: for clients, the name or address to verify in the server's certificate. */
int cmn__tls_new(cmn_tls_ctx_t *ctx, const char *peer_name, cmn__tls_t **out, char *err,
                 size_t errlen);
void cmn__tls_free(cmn__tls_t *t);
int cmn__tls_established(const cmn__tls_t *t);
/* The peer certificate's common name, once established ("" when none). */
const char *cmn__tls_peer(const cmn__tls_t *t);
/* Drives the handshake (a client calls it once to produce its first flight). */
int cmn__tls_start(cmn__tls_t *t, char *err, size_t errlen);
/* Ciphertext in (read where it lies, all of it); plaintext out through |deliver|, decrypted
 * into the room |place| gives before each read. Returns 0, CMN_ECLOSED on a close_notify,
 * CMN_ETLS / CMN_EAUTH with a reason, or |deliver|'s negative code. */
int cmn__tls_on_cipher(cmn__tls_t *t, const uint8_t *in, size_t n,
                       void (*place)(void *arg, uint8_t **p, size_t *cap),
                       int (*deliver)(void *arg, const uint8_t *p, size_t len), void *arg,
                       char *err, size_t errlen);
/* Encrypts plaintext into the output. Only after the handshake. */
int cmn__tls_write(cmn__tls_t *t, const void *p, size_t n, char *err, size_t errlen);
void cmn__tls_close_notify(cmn__tls_t *t);
/* The ciphertext waiting to be sent, in the engine's output buffer; its size (0: none). */
size_t cmn__tls_output(const cmn__tls_t *t, const uint8_t **p);
/* All of it was written: the buffer is empty again (and reused). */
void cmn__tls_output_sent(cmn__tls_t *t);
/* Hands the output buffer over (malloc'ed, |cap| bytes, the ciphertext at its start); returns
 * the ciphertext's size (0: none, nothing handed over). The engine starts another buffer. */
size_t cmn__tls_take_output(cmn__tls_t *t, uint8_t **out, size_t *cap);
/* A buffer from cmn__tls_take_output comes back to be reused (or freed). */
void cmn__tls_give_back(cmn__tls_t *t, uint8_t *buf, size_t cap);

#endif
