/* `sut-node --stats HOST:PORT`: asks a running node for its counters with the protocol's
 * StatsRequest (after the Hello handshake, as any client) and prints them, one `key value` line
 * per field of the Stats message (proto/nsut.proto), so people and scripts read the same output.
 *
 * Plaintext only: a node serving TLS closes the connection, which is reported. Blocking, bounded
 * by |timeout_ms| as a whole (connect, handshake, answer). Not used by the daemon itself. */
#ifndef SUT_STATSQ_H
#define SUT_STATSQ_H

#include "cmn/err.h"

#include <stdint.h>
#include <stdio.h>

/* Returns 0 (the counters printed on |out|) or a negative code with a reason in |eb| naming the
 * address: CMN_ECONFIG, CMN_ETIMEOUT, CMN_ECLOSED, CMN_EPEER (the node sent an Error), a negated
 * errno of connect. */
int sut__stats_query(const char *addr, uint64_t timeout_ms, FILE *out, cmn_errbuf_t *eb);

#endif
