/* Waking a libuv loop from another thread, without the spin in libuv's uv_async_t.
 *
 * Debian 12's libuv (1.44) sends a uv_async_t in three steps: mark it busy, write its eventfd,
 * mark it pending. The loop, woken by the write, reads the flag in a loop of 997 pauses and then
 * sched_yield()s until the sender's write has returned. On a host with fewer CPUs than busy
 * threads the sender is often not running then, and the loop spins or yields for the rest of its
 * slice: with the openai backend at eight tokens an event that spin and its yields were ~11 % of
 * sut-node's CPU (perf, bench/README.md "wake-ups"). libuv 1.45 dropped the spin; this is the
 * same design for the libuv Debian 12 ships:
 *
 *   send (any thread): if |pending| goes 0 -> 1, write the eventfd. Nothing to wait for.
 *   loop: read the eventfd, set |pending| to 0, then call the callback.
 *
 * A send after the loop cleared |pending| writes again, so a wake-up is never lost; at worst the
 * callback runs once more and finds nothing to do. Like uv_async_t, sends coalesce: the callback
 * runs at least once after every send, not once per send.
 *
 * Thread-safety: cmn_wake_send from any thread, while the wake is open; everything else on the
 * loop thread. */
#ifndef CMN_WAKE_H
#define CMN_WAKE_H

#include <stdatomic.h>
#include <uv.h>

typedef struct cmn_wake cmn_wake_t;
typedef void (*cmn_wake_cb)(cmn_wake_t *w);

struct cmn_wake {
    uv_poll_t poll; /* on |fd|, readable */
    int fd;         /* an eventfd */
    atomic_int pending;
    cmn_wake_cb cb;
    void (*close_cb)(cmn_wake_t *w);
    void *data; /* the caller's */
};

/* Opens the eventfd and starts watching it on LOOP. 0, or a negative libuv error (then nothing
 * was left open: W's memory is the caller's at once). */
int cmn_wake_init(uv_loop_t *loop, cmn_wake_t *w, cmn_wake_cb cb);

/* Any thread: makes the loop call the callback soon (coalesced with sends not yet seen). */
void cmn_wake_send(cmn_wake_t *w);

/* Loop thread: stops watching and closes the eventfd; CLOSE_CB (may be NULL) runs from the loop
 * once the handle is closed, after which W's memory is the caller's again. No send may follow. */
void cmn_wake_close(cmn_wake_t *w, void (*close_cb)(cmn_wake_t *w));

/* 1 if H is W's handle (for loops that close every handle with uv_walk). */
static inline int cmn_wake_owns(const cmn_wake_t *w, const uv_handle_t *h)
{
    return h == (const uv_handle_t *)&w->poll;
}

#endif
