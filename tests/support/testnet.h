/* Integration-test helpers: start daemons as real processes on loopback (port 0, read back from a
 * port file), and talk the wire protocol with a blocking client that has deadlines everywhere.
 * Not thread-safe; for tests only. */
#ifndef TESTNET_H
#define TESTNET_H

#include "cmn/frame.h"
#include "cmn/msg.h"

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

typedef struct {
    pid_t pid;
    int port;
    char dir[64];       /* private temp dir: port file, log */
    char log_path[128]; /* the daemon's stderr */
    int held;           /* tn_kill_hold(): hold_fd keeps the dead daemon's port */
    int hold_fd;
} tn_proc_t;

/* "ucx://" when the environment has NSUT_TEST_TRANSPORT=ucx (the suites' ucx runs), else "":
 * the prefix of every node address the tests listen on and connect to. */
const char *tn_scheme(void);
/* 1 when NSUT_TEST_UCX_BUSY_POLL=1: tn_spawn passes --ucx-busy-poll to sut-node and the test
 * sets qdl_config_t.ucx_busy_poll, so the flags (not an environment fallback) are exercised. */
int tn_ucx_busy_poll(void);

/* 127.0.0.1:|port| (0: any port, for a bind). */
struct sockaddr_in tn_loopback(int port);

/* Starts |exe| with |args| (NULL-terminated) plus --listen 127.0.0.1:0 --port-file ...; waits up
 * to 10 s for the port. Returns 0 or -1 (the reason on stderr). */
int tn_spawn(tn_proc_t *p, const char *exe, const char *const *args);

/* The same on a given port (to restart a node where the QDL expects it). */
int tn_spawn_port(tn_proc_t *p, const char *exe, const char *const *args, int port);

/* Sends |sig| and waits up to |timeout_ms| for exit; kills it after that. Returns the exit status
 * (>= 0), 128 + signal when it died by a signal, or -1 on timeout. */
int tn_stop(tn_proc_t *p, int sig, int timeout_ms);

/* kill -9 for a test about a node that stays dead: waits for the exit, then binds (without
 * listening) the node's port until tn_cleanup(), so connecting to it is refused. Without this the
 * kernel may hand the freed port to a node of a test running beside this one, and the QDL's
 * reconnect reaches that node (seen: ucx_shm.kill_all served by another test's node). Returns 0,
 * or -1 when the port could not be held within 2 s (already someone else's; said on stderr). */
int tn_kill_hold(tn_proc_t *p);

/* Waits up to |timeout_ms| for the process to exit by itself (same returns as tn_stop). */
int tn_wait(tn_proc_t *p, int timeout_ms);

/* Whether the daemon's log contains |needle|. */
int tn_log_contains(const tn_proc_t *p, const char *needle);

/* Waits up to |timeout_ms| for the daemon's log to contain |needle| (it writes its log lines
 * asynchronously to the test): returns 1 as soon as it does, 0 at the deadline. */
int tn_wait_log(const tn_proc_t *p, const char *needle, int timeout_ms);

/* Removes the temp dir (call after tn_stop). */
void tn_cleanup(tn_proc_t *p);

/* Runs |exe| with |args| (NULL-terminated) to completion and returns its exit status; its stdout
 * and stderr go to the file |out|. */
int tn_run(const char *exe, const char *const *args, const char *out);

/* Whether the file |path| contains |needle| (in its first 64 KiB). */
int tn_file_contains(const char *path, const char *needle);

/* Over tcp:// a socket; over ucx:// (NSUT_TEST_TRANSPORT=ucx) a UCX endpoint (tnucx.h): one
 * active message per frame, and tn_send_raw() bytes split into a message as a frame would be. */
typedef struct {
    int fd;
    struct tnucx *ucx;
    cmn_frame_decoder_t dec;
    uint8_t buf[256 * 1024];
    size_t have, off;
    unsigned pings;      /* node heartbeats tn_recv() answered */
    unsigned pongs_lost; /* answers that could not leave (the node had closed) */
} tn_client_t;

int tn_connect(tn_client_t *c, int port);
/* Whether the tests run over ucx:// (a test that is inherently about TCP bytes says so). */
int tn_is_ucx(void);
void tn_close(tn_client_t *c);
/* A peer that stops reading: over tcp:// the client reads only in tn_recv() anyway; over ucx://
 * it stops taking messages as they arrive (tnucx_stop_reading()). Its tn_recv() then fails. */
void tn_stop_reading(tn_client_t *c);
/* Lets what the node sends arrive for |ms| without reading it: over tcp:// the kernel buffers it
 * anyway (a plain wait), over ucx:// the endpoint takes it (tnucx_pump()). */
void tn_pump(tn_client_t *c, int ms);

/* Blocking writes of a whole frame / raw bytes. Return 0 or -1. */
int tn_send(tn_client_t *c, unsigned type, const ProtobufCMessage *m, const struct iovec *payload,
            size_t n);
int tn_send_raw(tn_client_t *c, const void *data, size_t len);
/* ucx:// only: one active message with the header and data given (|reply| 0: without the
 * sender's endpoint). Returns 0, or -1 (also over tcp://). */
int tn_send_ucx_msg(tn_client_t *c, const void *hdr, size_t hlen, const void *data, size_t dlen,
                    int reply);

/* One frame, within |timeout_ms|. Pings (node heartbeats) are answered and skipped (an answer that
 * cannot leave ends nothing: the frames already here are read first). *m is unpacked
 * and validated (free with cmn_msg_free(m, NULL)); *payload is a malloc'ed copy (or NULL). Returns
 * 0, CMN_ETIMEOUT, CMN_ECLOSED, or a decode error. */
int tn_recv(tn_client_t *c, int timeout_ms, unsigned *type, ProtobufCMessage **m, uint8_t **payload,
            size_t *plen);

/* Hello with the given codecs (both directions), expecting HelloAck within 5 s (_ms: within
 * |timeout_ms|). Returns the ack (free with cmn_msg_free) or NULL. */
Nsut__HelloAck *tn_handshake(tn_client_t *c, const int *codecs, size_t n_codecs);
Nsut__HelloAck *tn_handshake_ms(tn_client_t *c, const int *codecs, size_t n_codecs, int timeout_ms);

/* Sends one Query of |n| samples (ids from |first_id|) with the given bytes and codecs. */
int tn_send_query(tn_client_t *c, uint64_t query_id, uint64_t first_id, size_t n,
                  const void *const *data, const size_t *wire, const size_t *raw, const int *codec);

/* Waits for an Error frame (skipping others) and the close; returns the error code or -1. */
int tn_expect_error(tn_client_t *c, int timeout_ms);

/* A "Field: N kB" line of /proc/self/status (e.g. "VmRSS:", "VmHWM:"), in kB; fails the test
 * when it is not there. */
long tn_status_kb(const char *field);

/* The peak RSS starts again from the current RSS (clear_refs 5); returns that, in kB. */
long tn_hwm_reset(void);

#endif
