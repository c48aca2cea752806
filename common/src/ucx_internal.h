/* The UCX transport (ucx.c), picked by conn.c. Internal to common/. Calls flow from conn.c to
 * ucx.c; ucx.c enters the core (core.h) through its cmn__core_* entry points only. */
#ifndef CMN_UCX_INTERNAL_H
#define CMN_UCX_INTERNAL_H

#include "cmn/ucx.h"
#include "core.h"

/* The endpoint's ops: a message transport (one active message per frame, sent at once). */
extern const cmn__ops_t cmn__ucx_ops;

/* Creates the endpoint as |k|'s transport; cmn__core_connected follows with 0 once the peer is
 * reached, or a negative code. */
int cmn__ucx_connect(cmn_ucx_t *u, cmn__core_t *k, const struct sockaddr *addr);

/* Accepts |in| as |k|'s transport. */
int cmn__ucx_accept(cmn_ucx_incoming_t *in, cmn__core_t *k);

#endif
