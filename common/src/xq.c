#include "cmn/xq.h"

int cmn_xq_drain(cmn_xq_t *q)
{
    cmn_xq_node_t *list;

    uv_mutex_lock(&q->mu);
    list = q->head;
    q->head = q->tail = NULL;
    uv_mutex_unlock(&q->mu);
    if (!list)
        return 0;
    q->cb(q, list);
    return 1;
}

static void on_wake(cmn_wake_t *w)
{
    cmn_xq_drain(w->data);
}

int cmn_xq_init(uv_loop_t *loop, cmn_xq_t *q, cmn_xq_cb cb)
{
    int rc;

    q->head = q->tail = NULL;
    q->cb = cb;
    q->close_cb = NULL;
    rc = uv_mutex_init(&q->mu);
    if (rc < 0)
        return rc;
    rc = cmn_wake_init(loop, &q->wake, on_wake);
    if (rc < 0) {
        uv_mutex_destroy(&q->mu);
        return rc;
    }
    q->wake.data = q;
    return 0;
}

/* Appends first..last under the lock; returns 1 if the queue was empty. */
static int append(cmn_xq_t *q, cmn_xq_node_t *first, cmn_xq_node_t *last)
{
    int was_empty;

    last->next = NULL;
    uv_mutex_lock(&q->mu);
    was_empty = q->head == NULL;
    if (was_empty)
        q->head = first;
    else
        q->tail->next = first;
    q->tail = last;
    uv_mutex_unlock(&q->mu);
    return was_empty;
}

void cmn_xq_push_list(cmn_xq_t *q, cmn_xq_node_t *first, cmn_xq_node_t *last)
{
    /* The loop detaches the whole list, so one signal per empty-to-non-empty transition is
     * enough: later pushes ride on the pending wake-up. */
    if (append(q, first, last))
        cmn_wake_send(&q->wake);
}

void cmn_xq_push_list_local(cmn_xq_t *q, cmn_xq_node_t *first, cmn_xq_node_t *last)
{
    (void)append(q, first, last);
}

void cmn_xq_push(cmn_xq_t *q, cmn_xq_node_t *node)
{
    cmn_xq_push_list(q, node, node);
}

static void on_xq_closed(cmn_wake_t *w)
{
    cmn_xq_t *q = w->data;
    uv_mutex_destroy(&q->mu);
    if (q->close_cb)
        q->close_cb(q);
}

void cmn_xq_close(cmn_xq_t *q, void (*close_cb)(cmn_xq_t *q))
{
    cmn_xq_drain(q);
    q->close_cb = close_cb;
    cmn_wake_close(&q->wake, on_xq_closed);
}
