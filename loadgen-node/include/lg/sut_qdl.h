/* The QDL as a loadgen-node SUT: every issue() becomes one qdl_issue_query() (one query, never
 * split or merged here), and the QDL's completion callbacks, which run on its loop thread, feed
 * lg_complete() and lg_first_token() in the batches they arrive in.
 *
 * Built only when the qdl library is (LG_HAVE_QDL). The adapter copies each query's sample
 * descriptors (not their bytes) into the QDL's shape; the bytes go to the socket straight from
 * QSL memory. */
#ifndef LG_SUT_QDL_H
#define LG_SUT_QDL_H

#include "lg/lg.h"
#include "qdl/qdl.h"

/* |cfg| as for qdl_create(); its on_complete, on_first_token and user are replaced. */
int lg_sut_qdl_create(const qdl_config_t *cfg, lg_sut_t **out, cmn_errbuf_t *eb);

/* Destroys the QDL (outstanding samples complete with an error first). */
void lg_sut_qdl_destroy(lg_sut_t *sut);

/* The QDL behind the adapter, e.g. for qdl_stats_print(). */
qdl_t *lg_sut_qdl_handle(lg_sut_t *sut);

/* Writes the QDL's per-node counters to |path| as a JSON array (one object per node: name,
 * address, up, samples sent/completed/failed, redispatched, errors, reconnects, bytes, ping
 * round trips). 0 or a negative code with the path and reason in |eb|. */
int lg_sut_qdl_write_nodes(lg_sut_t *sut, const char *path, cmn_errbuf_t *eb);

#endif
