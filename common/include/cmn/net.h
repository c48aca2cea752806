/* Socket addresses in the forms people type: "host:port", "1.2.3.4:port", "[::1]:port". */
#ifndef CMN_NET_H
#define CMN_NET_H

#include "cmn/err.h"

#include <stddef.h>
#include <sys/socket.h>

/* Parses |s| into |out|. A host name is resolved with getaddrinfo (blocking: call at start-up,
 * not on a loop thread). "*:port" and ":port" mean every IPv4 address. Returns 0, or CMN_ECONFIG
 * with a reason in |eb|. Thread-safe. */
int cmn_addr_parse(const char *s, struct sockaddr_storage *out, cmn_errbuf_t *eb);

/* Transports an address may name: "tcp://HOST:PORT" (also plain "HOST:PORT") and
 * "ucx://HOST:PORT" (cmn/ucx.h). */
typedef enum { CMN_TRANSPORT_TCP = 0, CMN_TRANSPORT_UCX = 1 } cmn_transport_t;

/* cmn_addr_parse after an optional "tcp://" or "ucx://" prefix, which sets |*t|. Returns 0, or
 * CMN_ECONFIG with a reason in |eb| (another scheme, or a bad HOST:PORT). Thread-safe. */
int cmn_endpoint_parse(const char *s, cmn_transport_t *t, struct sockaddr_storage *out,
                       cmn_errbuf_t *eb);

/* "tcp" or "ucx". */
const char *cmn_transport_name(cmn_transport_t t);

/* Writes "1.2.3.4:5678" or "[::1]:5678" into |buf|; returns |buf|. Thread-safe. */
char *cmn_addr_format(const struct sockaddr *sa, char *buf, size_t len);

/* The port of an AF_INET or AF_INET6 address (host order), or -1. */
int cmn_addr_port(const struct sockaddr *sa);

#endif
