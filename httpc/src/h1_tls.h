/* The lean client's TLS (h1_tls.c), behind h1_conn.c's transport seam: OpenSSL with a BIO of
 * our own, so the ciphertext libuv read is taken where it lies (no copy into a memory BIO) and
 * what OpenSSL sends is appended to one output buffer written to the socket as it is. The
 * plaintext is decrypted into the engine's buffer and parsed there in place. Internal to httpc. */
#ifndef HTTPC_H1_TLS_H
#define HTTPC_H1_TLS_H

#include <stddef.h>
#include <uv.h>

/* h1_tls_read: the server sent close_notify */
#define H1_TLS_EOF (-4095)

typedef struct h1_tls_ctx h1_tls_ctx_t;
typedef struct h1_tls h1_tls_t;

/* A client context: TLS 1.2 or newer, ALPN "http/1.1", the server's certificate verified
 * against |ca_file| (PEM) or, NULL, the system's store. 0, or a negative code with |err|
 * saying why (the file and OpenSSL's reason). */
int h1_tls_ctx_new(const char *ca_file, h1_tls_ctx_t **out, char *err, size_t errlen);
void h1_tls_ctx_free(h1_tls_ctx_t *x);

/* One connection's engine: |host| (a name, sent as SNI, or an address) is what the server's
 * certificate must name. 0, or -ENOMEM. */
int h1_tls_new(h1_tls_ctx_t *x, const char *host, h1_tls_t **out);
/* After the socket closed (its queued writes have had their callbacks). */
void h1_tls_free(h1_tls_t *t);

/* Ciphertext read from the socket, taken where it lies by the next calls (all of it is taken
 * before h1_tls_read returns 0). */
void h1_tls_feed(h1_tls_t *t, const char *p, size_t n);
/* Drives the handshake: 1 done, 0 it waits for the server, or a negative code with |err|
 * ("TLS handshake failed: REASON (the certificate's defect)"). Send what it made with
 * h1_tls_flush. */
int h1_tls_handshake(h1_tls_t *t, char *err, size_t errlen);
/* The next plaintext: its size (> 0) at *p, in the engine's buffer until the next call; 0: none
 * until more ciphertext; H1_TLS_EOF; or another negative code with |err|. */
int h1_tls_read(h1_tls_t *t, const char **p, char *err, size_t errlen);
/* Plaintext bytes still in the engine or ciphertext not yet taken (the answer is not alone). */
int h1_tls_pending(const h1_tls_t *t);
/* Encrypts |b| (small pieces gathered into one record) into the output: 0, or a negative code. */
int h1_tls_write(h1_tls_t *t, const uv_buf_t *b, unsigned nb, char *err, size_t errlen);
/* Sends the output on |s|: what the kernel takes at once, the rest queued from a copy. 0, or
 * libuv's negative code. */
int h1_tls_flush(h1_tls_t *t, uv_stream_t *s);
/* Queued writes not yet done. */
int h1_tls_writing(const h1_tls_t *t);

#endif
