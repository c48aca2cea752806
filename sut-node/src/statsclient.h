/* `sut-node --stats HOST:PORT`: asks a running node for its counters (StatsRequest over a plaintext
 * connection) and prints them, one `name value` line each. */
#ifndef SUT_STATSCLIENT_H
#define SUT_STATSCLIENT_H

/* Returns the process exit status: 0, 1 (the node could not be asked), 2 (a bad address). */
int sut__stats_query(const char *addr, unsigned timeout_ms);

#endif
