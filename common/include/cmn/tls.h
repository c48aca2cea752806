/* TLS 1.3 for cmn_conn, with OpenSSL over memory BIOs (the socket stays a plain libuv stream).
 *
 * A context holds the certificates and the verification policy and is shared read-only by every
 * connection of a process (create it before any loop runs). Servers may require client
 * certificates signed by a CA (mutual TLS) and, on top, pin the allowed client identities by name.
 * Clients always verify the server's certificate against a CA and its name (host or IP).
 *
 * Use: cmn_conn_init(), then cmn_conn_use_tls() before cmn_conn_start(). Frames queued before the
 * handshake completes leave once it has. A failed handshake or a rejected identity closes the
 * connection with CMN_ETLS or CMN_EAUTH and logs the reason with the peer's address. */
#ifndef CMN_TLS_H
#define CMN_TLS_H

#include "cmn/err.h"

typedef struct cmn_tls_ctx cmn_tls_ctx_t;

/* A server context. |cert|/|key|: PEM files (the certificate may be a chain). |client_ca|: when
 * not NULL, clients must present a certificate signed by it. |allow|: when not NULL, a
 * comma-separated list of names (DNS SAN or CN) a client certificate must match. Returns 0 or
 * CMN_ETLS / CMN_ECONFIG with the reason (file, OpenSSL error) in |eb|. */
int cmn_tls_server_ctx(const char *cert, const char *key, const char *client_ca, const char *allow,
                       cmn_tls_ctx_t **out, cmn_errbuf_t *eb);

/* A client context. |ca|: PEM file of the CA that signs the servers (NULL: the system's store).
 * |cert|/|key|: the client certificate for mutual TLS (both NULL: none). */
int cmn_tls_client_ctx(const char *ca, const char *cert, const char *key, cmn_tls_ctx_t **out,
                       cmn_errbuf_t *eb);

void cmn_tls_ctx_free(cmn_tls_ctx_t *ctx);

#endif
