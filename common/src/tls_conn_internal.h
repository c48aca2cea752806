/* The TLS transport (tls_conn.c), picked by conn.c. Internal to common/. */
#ifndef CMN_TLS_CONN_INTERNAL_H
#define CMN_TLS_CONN_INTERNAL_H

#include "cmn/tls.h"
#include "core.h"

/* Runs TLS on |k|'s TCP socket (tcp_internal.h, attached already) from now on: the connection's
 * transport becomes TLS. |peer_name| as cmn_conn_use_tls. Returns 0, or CMN_ETLS / -ENOMEM
 * (logged with the peer's address; the transport stays plain TCP). */
int cmn__tls_attach(cmn__core_t *k, cmn_tls_ctx_t *ctx, const char *peer_name);

#endif
