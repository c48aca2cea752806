/* The backend's readiness (ABI 1.2 ready()): probed once at start, then from a thread of its own,
 * every second while the engine cannot serve and every 10 s once it can; the handshake reads the
 * last answer (session.c), so a QDL learns whether the node serves and, if not, why.
 *
 * Lifecycle: sut__probe_start (loop thread, at set-up; a backend without ready() is ready at once
 * and gets no thread), sut__probe_stop (joins the thread; before the backend is unloaded).
 * sut__probe_get is thread-safe. */
#ifndef SUT_PROBE_H
#define SUT_PROBE_H

#include "cmn/err.h"
#include "types.h"

#include <uv.h>

typedef struct {
    sut_be_t *be;
    uv_thread_t thread;
    uv_mutex_t mu;
    uv_cond_t cv;
    int threaded; /* the thread, mutex and condition exist */
    int stop;     /* under mu */
    int ready;    /* under mu */
    char why[SUT_BACKEND_ERROR_MAX + 1];
} sut_probe_t;

/* Probes once (bounded by the backend's own deadline), logs the answer and starts the thread.
 * 0, or a negative code with a reason in |eb|. */
int sut__probe_start(sut_probe_t *p, sut_be_t *be, cmn_errbuf_t *eb);
/* 1 ready; 0 not ready, with the reason in why[0..len). */
int sut__probe_get(sut_probe_t *p, char *why, size_t len);
void sut__probe_stop(sut_probe_t *p);

#endif
