/* Cross-thread hand-off into a libuv loop: a mutex-protected list plus one coalesced uv_async_t.
 *
 * Producers on any thread push nodes; the async handle is signalled only when the list goes from
 * empty to non-empty, so a burst of N pushes costs one wake-up. On the loop thread the callback
 * receives the whole list, detached under the lock, in push order.
 *
 * Thread-safety: cmn_xq_push/cmn_xq_push_list are thread-safe; init and close run on the loop
 * thread. Every producer must have stopped before cmn_xq_close (a push after it is a bug). */
#ifndef CMN_XQ_H
#define CMN_XQ_H

#include <uv.h>

typedef struct cmn_xq_node {
    struct cmn_xq_node *next;
} cmn_xq_node_t;

typedef struct cmn_xq cmn_xq_t;
typedef void (*cmn_xq_cb)(cmn_xq_t *q, cmn_xq_node_t *list);

struct cmn_xq {
    uv_async_t async;
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

/* Closes the async handle; nodes still queued are handed to the callback one last time first. */
void cmn_xq_close(cmn_xq_t *q, void (*close_cb)(cmn_xq_t *q));

#endif
