/* Shared by the QDL integration suites: a run of samples with known bytes, the completion
 * callback that records how often and how each one completed, and the checks. */
#ifndef QDLRUN_H
#define QDLRUN_H

#include "qdl/qdl.h"

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

typedef struct {
    uv_mutex_t mu;
    uv_cond_t cv;
    size_t n;
    uint8_t **data; /* raw sample bytes */
    size_t *size;
    uint8_t **wire; /* what is sent (compressed or raw) */
    size_t *wire_size;
    int *codec;
    int *completions;
    int *status;
    int *digest_ok;
    uint64_t *before; /* cmn_now_ns() just before the sample's qdl_issue_query() */
    int *order_ok;    /* before <= issued_ns <= sent_ns <= its completion callback */
    size_t done, failed;
    int check_digest;
} run_t;

extern run_t R;

/* The qdl_config_t.on_complete of every test. */
void on_complete(void *user, const qdl_response_t *r, size_t n);

/* |n| samples of random sizes in [1, max]; every third one LZ4-compressed when it shrinks. */
void run_init(size_t n, size_t max, int check_digest);
void run_free(void);
qdl_sample_t sample_of(size_t i);
/* Issues samples [from, to) as queries of |per| samples each. */
void issue_range(qdl_t *q, size_t from, size_t to, size_t per);
/* Issues them one per query, |gap_us| apart (a paced, Server-like stream). */
void issue_paced(qdl_t *q, size_t from, size_t to, unsigned gap_us);
/* Waits until |want| completions arrived or |timeout_ms| passed; returns the count. */
size_t wait_done(size_t want, int timeout_ms);
/* Waits until node |i| of |q|, after losing its connection, has reconnected and is up again
 * (handshake done), or |timeout_ms| passed; returns whether it rejoined. */
int wait_node_rejoined(qdl_t *q, size_t i, int timeout_ms);
/* Waits until the nodes of |q| were sent |want| samples in all, or |timeout_ms| passed; returns
 * the count. */
uint64_t wait_sent(qdl_t *q, uint64_t want, int timeout_ms);
/* Every sample completed exactly once, successfully (and with the right digest), its
 * issued_ns and sent_ns in order between its issue call and its completion. */
void expect_exactly_once(int digest);
/* NSUT_TEST_WRITE_THREAD_MIN (bytes, default 0): what a test's QDL sets as write_thread_min, so
 * a suite runs again with the connections' write threads (1: every batch through them). */
uint64_t test_write_thread_min(void);
/* NSUT_TEST_LEND_WRITE_THREAD (0 or 1, default 0): what a test's QDL sets as lend_write_thread,
 * so the lent suites run again with every batch of the lent loop through the write threads. */
int test_lend_write_thread(void);
/* Every sample completed exactly once: successfully, or failed with a status (counted). */
size_t expect_once_or_failed(void);

#endif
