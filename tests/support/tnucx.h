/* The tests' blocking UCX client (under tn_client_t when NSUT_TEST_TRANSPORT=ucx): one UCX
 * context, worker and endpoint per connection, one active message per frame as common/src/ucx.c
 * sends them, and the frames received turned back into the byte stream the TCP client reads, so
 * the tests' decoder is the same on both transports. A hostile peer too: tnucx_send() puts any
 * bytes on the wire, split into an active message's header and data as a frame would be. Every
 * wait has a deadline. For tests only. */
#ifndef TNUCX_H
#define TNUCX_H

#include <stddef.h>
#include <stdint.h>

typedef struct tnucx tnucx_t;

/* Connects to 127.0.0.1:|port| (UCX's listener/endpoint API) within 5 s. Returns NULL (the reason
 * on stderr) when it cannot. */
tnucx_t *tnucx_connect(int port);

/* One active message: the first 16 bytes and the metadata the frame header announces as its
 * header (only the first 16 when that is larger than UCX's header limit, or than |len|; all of
 * |len| when under 16), the rest as its data. Waits up to 5 s for UCX to take it. Returns 0 or -1
 * (the endpoint failed). */
int tnucx_send(tnucx_t *t, const void *bytes, size_t len);

/* One active message with the header and data given (the hostile peer's own split); |reply| 0
 * leaves out UCP_AM_SEND_FLAG_REPLY, so the node cannot tell which connection sent it. */
int tnucx_send_msg(tnucx_t *t, const void *hdr, size_t hlen, const void *data, size_t dlen,
                   int reply);

/* Up to |cap| bytes of the received stream into |buf| within |timeout_ms|: the count (> 0), 0 at
 * the deadline, -1 once the peer is gone and every byte it sent has been read. */
long tnucx_recv(tnucx_t *t, uint8_t *buf, size_t cap, int timeout_ms);

/* Takes what arrives for |ms| (queued for tnucx_recv(), nothing consumed), as a TCP socket's
 * kernel buffer does while its owner reads nothing. */
void tnucx_pump(tnucx_t *t, int ms);

/* From now on takes nothing the node sends, as a TCP peer that stops reading: rendezvous
 * messages are left unfetched (the node's sends of them never complete and its queue grows),
 * eager ones dropped; tnucx_recv() returns -1. Sends go on as before. Only messages above UCX's
 * rendezvous threshold (UCX_RNDV_THRESH) stay with the node. */
void tnucx_stop_reading(tnucx_t *t);

/* Closes the endpoint (forced: the node sees it fail at once) and frees everything. */
void tnucx_close(tnucx_t *t);

#endif
