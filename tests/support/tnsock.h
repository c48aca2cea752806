/* A plain TCP listener on 127.0.0.1 for the tests' scripted servers (the HTTP client suites),
 * with no dependency beyond libc and Check. */
#ifndef TN_SOCK_H
#define TN_SOCK_H

/* Listens on 127.0.0.1 at a port the kernel picks (backlog 64) and stores the port in |port|.
 * Returns the listening descriptor; a failure fails the calling Check test. */
int tn_listen_any(int *port);

#endif
