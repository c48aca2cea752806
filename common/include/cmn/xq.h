/* Cross-thread hand-off into a libuv loop: a mutex-protected list plus one coalesced wake-up
 * (cmn_wake_t, not libuv's uv_async_t: cmn/wake.h says why).
 *
 * Producers on any thread push nodes; the wake-up is signalled only when the list goes from
 * empty to non-empty, so a burst of N pushes costs one wake-up. On the loop thread the callback
 * receives the whole list, detached under the lock, in push order.
 *
 * A producer that runs on the loop thread itself (a backend run inline) pushes with
 * cmn_xq_push_list_local and no wake-up: the loop drains the queue with cmn_xq_drain before it
 * can next block, so the nodes are handed over in the same turn, without the eventfd write, the
 * extra turn and the eventfd read a wake-up costs.
 *
 * Thread-safety: cmn_xq_push/cmn_xq_push_list are thread-safe; init, close, the local push and
 * the drain run on the loop thread. Every producer must have stopped before cmn_xq_close (a push
 * after it is a bug). */
#ifndef CMN_XQ_H
#define CMN_XQ_H

#include "cmn/wake.h"

#include <uv.h>

typedef struct cmn_xq_node {
    struct cmn_xq_node *next;
} cmn_xq_node_t;

typedef struct cmn_xq cmn_xq_t;
typedef void (*cmn_xq_cb)(cmn_xq_t *q, cmn_xq_node_t *list);

struct cmn_xq {
    cmn_wake_t wake;
    uv_mutex_t mu;
    cmn_xq_node_t *head, *tail;
    cmn_xq_cb cb;
    void *data;
    void (*close_cb)(cmn_xq_t *q);
};

int cmn_xq_init(uv_loop_t *loop, cmn_xq_t *q, cmn_xq_cb cb);

/* Appends one node (node->next is overwritten). */
void cmn_xq_push(cmn_xq_t *q, cmn_xq_node_t *node);

/* Appends a chain first..last (already linked, last->next ignored). */
void cmn_xq_push_list(cmn_xq_t *q, cmn_xq_node_t *first, cmn_xq_node_t *last);

/* On the loop thread only: appends a chain like cmn_xq_push_list, without signalling the loop.
 * The caller must make sure cmn_xq_drain runs before the loop next waits for events (pushes from
 * other threads in between are then handed over by that drain too). */
void cmn_xq_push_list_local(cmn_xq_t *q, cmn_xq_node_t *first, cmn_xq_node_t *last);

/* On the loop thread: hands everything queued to the callback now, in push order; returns 1 if
 * there was anything, 0 if the queue was empty. */
int cmn_xq_drain(cmn_xq_t *q);

/* Closes the wake-up; nodes still queued are handed to the callback one last time first. */
void cmn_xq_close(cmn_xq_t *q, void (*close_cb)(cmn_xq_t *q));

#endif
