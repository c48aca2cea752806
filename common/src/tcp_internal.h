/* The TCP socket under tcp:// and TLS (tcp.c), and the plain tcp:// transport. Internal to
 * common/. A connection's transport state (core.h, k->tp) is a cmn__tcp_t for both; TLS keeps its
 * own state in |upper| and uses the socket through the functions below (tls_conn.c). */
#ifndef CMN_TCP_INTERNAL_H
#define CMN_TCP_INTERNAL_H

#include "core.h"

typedef struct cmn__tcp cmn__tcp_t;

/* The plain tcp:// transport. */
extern const cmn__ops_t cmn__tcp_ops;

/* Creates the socket (uv_tcp_init) as |k|'s transport, with the plain ops. */
int cmn__tcp_attach(cmn__core_t *k);

/* Connects the socket to |addr| (cmn__core_connected follows), or accepts a pending connection
 * from |server| (the peer's address known at once). */
int cmn__tcp_connect(cmn__core_t *k, const struct sockaddr *addr);
int cmn__tcp_accept(cmn__core_t *k, uv_stream_t *server);

/* A layer above the socket (TLS): its state, freed by |free_fn| once the socket is closed. */
void cmn__tcp_set_upper(cmn__core_t *k, void *upper, void (*free_fn)(void *upper));
void *cmn__tcp_upper(const cmn__core_t *k);

/* The socket's stream while it is open, else NULL. */
uv_stream_t *cmn__tcp_stream(const cmn__core_t *k);

/* An ops->fileno for both: the socket's descriptor, or a negative code once it is closed. */
int cmn__tcp_fileno(const cmn__core_t *k);

/* Bytes handed to the write thread and not yet reported back (0 without one, or once closed). */
size_t cmn__tcp_writer_bytes(const cmn__core_t *k);

/* The start common to every use of the socket: the peer's name, TCP_NODELAY, keepalive. */
int cmn__tcp_prepare(cmn__core_t *k);

/* A read callback's start: 1 when |nread| bytes arrived to be handled (counted already); 0 when
 * none did, or the read failed (the connection ends then, with the reason when not an orderly
 * EOF), or the connection is closing. */
int cmn__tcp_read_arrived(cmn__core_t *k, ssize_t nread);

/* An ops->read_stop for both. */
void cmn__tcp_read_stop(cmn__core_t *k);

/* The last step of a graceful close: FIN once everything queued on the socket is written, then
 * the close. */
void cmn__tcp_fin(cmn__core_t *k);

/* Closes the socket (an ops->close's last step): writes under way complete with UV_ECANCELED,
 * then the upper layer's state and the socket's are freed and the core is told. */
void cmn__tcp_close(cmn__core_t *k);

#endif
