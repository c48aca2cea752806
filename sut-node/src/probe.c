/* The backend's readiness, probed from a thread of its own (probe.h). */
#include "probe.h"

#include "cmn/log.h"
#include "cmn/msg.h"
#include "cmn/thread_stop.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define UNREADY_EVERY_NS 1000000000ull
#define READY_EVERY_NS 10000000000ull

/* One probe; logs a change of state. Probe thread, or the loop thread before it starts. */
static void probe_once(sut_probe_t *p, int first)
{
    char raw[SUT_BACKEND_ERROR_MAX + 1] = "", why[SUT_BACKEND_ERROR_MAX + 1];
    int rc = p->be->ready(p->be->be, raw, sizeof(raw)), was;

    raw[sizeof(raw) - 1] = '\0';
    if (rc < 0)
        snprintf(raw, sizeof(raw), "the readiness probe failed: %s", cmn_strerror(rc));
    else if (rc == 0 && !raw[0])
        snprintf(raw, sizeof(raw), "the backend says its engine is not ready (no reason given)");
    cmn_sanitize(raw, strlen(raw), why, sizeof(why));
    if (p->threaded)
        uv_mutex_lock(&p->mu);
    was = p->ready;
    p->ready = rc == 1;
    snprintf(p->why, sizeof(p->why), "%s", p->ready ? "" : why);
    if (p->threaded)
        uv_mutex_unlock(&p->mu);
    if (p->ready && (first || !was))
        cmn_log_info("backend %s: engine ready", p->be->info.name);
    else if (!p->ready && (first || was))
        cmn_log_warn("backend %s: engine not ready: %s (probing every second; clients are told "
                     "in the handshake)",
                     p->be->info.name, why);
}

static void probe_main(void *arg)
{
    sut_probe_t *p = arg;

    uv_mutex_lock(&p->mu);
    while (!p->stop) {
        uint64_t wait = p->ready ? READY_EVERY_NS : UNREADY_EVERY_NS;
        (void)uv_cond_timedwait(&p->cv, &p->mu, wait);
        if (p->stop)
            break;
        uv_mutex_unlock(&p->mu);
        probe_once(p, 0);
        uv_mutex_lock(&p->mu);
    }
    uv_mutex_unlock(&p->mu);
}

int sut__probe_start(sut_probe_t *p, sut_be_t *be, cmn_errbuf_t *eb)
{
    int rc;

    memset(p, 0, sizeof(*p));
    p->be = be;
    p->ready = 1;
    if (!be->ready)
        return 0;
    probe_once(p, 1);
    if (uv_mutex_init(&p->mu) < 0)
        return cmn_errf(eb, -ENOMEM, "readiness probe: cannot create its mutex");
    if (uv_cond_init(&p->cv) < 0) {
        uv_mutex_destroy(&p->mu);
        return cmn_errf(eb, -ENOMEM, "readiness probe: cannot create its condition variable");
    }
    p->threaded = 1; /* before the thread exists: it reads the flag */
    rc = uv_thread_create(&p->thread, probe_main, p);
    if (rc < 0) {
        p->threaded = 0;
        uv_cond_destroy(&p->cv);
        uv_mutex_destroy(&p->mu);
        return cmn_errf(eb, rc, "readiness probe: cannot start its thread: %s", cmn_strerror(rc));
    }
    return 0;
}

int sut__probe_get(sut_probe_t *p, char *why, size_t len)
{
    int ready;

    if (p->threaded)
        uv_mutex_lock(&p->mu);
    ready = p->ready;
    if (why && len)
        snprintf(why, len, "%s", p->why);
    if (p->threaded)
        uv_mutex_unlock(&p->mu);
    return ready;
}

void sut__probe_stop(sut_probe_t *p)
{
    if (!p->threaded)
        return;
    cmn_uv_thread_stop(&p->mu, &p->cv, &p->stop, &p->thread);
    uv_cond_destroy(&p->cv);
    uv_mutex_destroy(&p->mu);
    p->threaded = 0;
}
