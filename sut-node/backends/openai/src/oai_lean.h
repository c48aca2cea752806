/* The openai backend's lean transport (client=lean): the lean HTTP/1.1 client (httpc/h1.h, with
 * its TLS for https:// engines) on a libuv loop in a thread of its own, or on the node's I/O loop
 * (borrowed, ABI 1.3's attach: no thread, submission without a hand-off), with what the backend
 * needs around it: submission from any thread (a locked list and one cmn_wake_send), cancel marks
 * from any thread, and the request deadline (timeout_ms, from submission: a request still waiting
 * for a connection then fails as "not sent") and the token idle deadline (idle_ms, from when a
 * connection took the request, then from the reader's last oai_lean_progress) on one tick.
 * Callbacks run on the loop thread. */
#ifndef OAI_LEAN_H
#define OAI_LEAN_H

#include "httpc/h1.h"

#include <stddef.h>
#include <stdint.h>

typedef struct oai_lean oai_lean_t;
typedef struct oai_lreq oai_lreq_t;

struct oai_lreq {
    httpc_h1_req_t h1; /* first. The caller sets body, body_len, on_data and ctx */
    /* Exactly once: 0, or HTTPC_E* (httpc/h1.h's, HTTPC_ECANCEL after oai_lean_cancel,
     * HTTPC_EIDLE or HTTPC_ETRANSFER for the deadlines, HTTPC_ESTOP at close). */
    void (*on_done)(oai_lreq_t *r, int status, const char *msg);
    /* the transport's */
    oai_lean_t *l;
    uint64_t start_ms, progress_ms;
    int cancel; /* under the transport's lock */
    oai_lreq_t *next, *prev;
};

typedef struct {
    const char *url;            /* http[s]://HOST[:PORT]/PATH (the completion URL) */
    const char *ca_file;        /* https: the engine's CA (NULL: the system's) */
    const char *const *headers; /* NULL-terminated "Name: value" lines */
    uint32_t max_conns;
    long connect_ms;
    long timeout_ms;      /* > 0 */
    long idle_ms;         /* 0: off */
    uint32_t coalesce_us; /* read coalescing after oai_lean_coalesce (0: off; httpc/h1.h) */
} oai_lean_cfg_t;

/* On a loop thread of its own (LOOP NULL), or on LOOP, the caller's (borrowed: then submit,
 * progress and coalesce are called on LOOP's thread, and oai_lean_detach ends it). 0, or a
 * negative code with err naming the URL and why (*out untouched). */
int oai_lean_open(const oai_lean_cfg_t *cfg, uv_loop_t *loop, oai_lean_t **out, char *err,
                  size_t errlen);
/* A borrowed loop's end, on its thread: every request still running fails with HTTPC_ESTOP and
 * the handles close (the loop's run then ends without them). No-op on an own loop. */
void oai_lean_detach(oai_lean_t *l);
/* Every request still queued or running fails with HTTPC_ESTOP; the thread is joined. On a
 * borrowed loop: after oai_lean_detach and the loop's closing turns (only frees then). NULL: no-op.
 */
void oai_lean_close(oai_lean_t *l);
/* 0, or HTTPC_ESTOP once closing (|r| not taken, no on_done). Any thread on an own loop; on a
 * borrowed one, its thread, and the request leaves at once. */
int oai_lean_submit(oai_lean_t *l, oai_lreq_t *r);
/* Any thread; the caller guarantees r's on_done has not returned (httpc/live.h). */
void oai_lean_cancel(oai_lreq_t *r);
/* From r's on_data: a token came (restarts the idle deadline). */
void oai_lean_progress(oai_lreq_t *r);
/* From r's on_data: the first token is out; the rest of the stream is read on the coalescing
 * tick (httpc_h1_coalesce). */
void oai_lean_coalesce(oai_lreq_t *r);

#endif
