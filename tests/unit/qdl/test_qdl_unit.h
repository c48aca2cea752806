/* The QDL unit suite: a hand-built qdl_t (nodes, connections, no loop thread, no sockets). */
#ifndef TEST_QDL_UNIT_H
#define TEST_QDL_UNIT_H

#include "qdl_internal.h"

#include <check.h>

#define FX_MAX_DONE 4096

/* What the completion callbacks saw. */
typedef struct {
    qdl_response_t done[FX_MAX_DONE];
    const void *data_ptr[FX_MAX_DONE];
    size_t n_done, n_calls;
    qdl_response_t first[FX_MAX_DONE];
    size_t n_first;
} fx_seen_t;

extern fx_seen_t fx_seen;

/* A qdl_t with |n_nodes| nodes of |cpn| connections each, all READY, window |window|. */
qdl_t *fx_new(size_t n_nodes, unsigned cpn, uint64_t window);
void fx_free(qdl_t *q);
/* |n| sample records of one query issued (in a block, as qdl_issue_query makes them), queued. */
qdl_srec_t *fx_issue(qdl_t *q, size_t n, size_t bytes_each);
/* Moves the first |n| pending samples of the head query into |qc|'s in-flight map. */
void fx_send(qdl_t *q, qdl_conn_t *qc, size_t n);

TCase *tcase_policy(void);
TCase *tcase_part_size(void);
TCase *tcase_pending(void);
TCase *tcase_results(void);
TCase *tcase_names(void);
TCase *tcase_alloc(void);

#endif
