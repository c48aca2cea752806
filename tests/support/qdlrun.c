#include "qdlrun.h"

#include "cmn/clock.h"
#include "cmn/digest.h"
#include "cmn/err.h"
#include "cmpr/cmpr.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

run_t R;

void on_complete(void *user, const qdl_response_t *r, size_t n)
{
    uint64_t now = cmn_now_ns();
    size_t i;

    (void)user;
    uv_mutex_lock(&R.mu);
    for (i = 0; i < n; i++) {
        uint64_t k = r[i].response_id;
        ck_assert_uint_lt(k, R.n);
        R.completions[k]++;
        R.status[k] = r[i].status;
        if (r[i].status == 0 && R.check_digest)
            R.digest_ok[k] =
                r[i].size == 8 && cmn_digest_get(r[i].data) == cmn_digest64(R.data[k], R.size[k]);
        if (r[i].status == 0)
            R.order_ok[k] = r[i].issued_ns >= R.before[k] && r[i].issued_ns <= r[i].sent_ns &&
                            r[i].sent_ns <= now;
        if (r[i].status != 0)
            R.failed++;
        R.done++;
    }
    uv_cond_broadcast(&R.cv);
    uv_mutex_unlock(&R.mu);
}

void run_init(size_t n, size_t max, int check_digest)
{
    cmpr_ctx_t *ctx = cmpr_ctx_new();
    uint64_t x = 0x9E3779B97F4A7C15ull;
    size_t i, j;

    memset(&R, 0, sizeof(R));
    uv_mutex_init(&R.mu);
    uv_cond_init(&R.cv);
    R.n = n;
    R.check_digest = check_digest;
    R.data = calloc(n, sizeof(*R.data));
    R.size = calloc(n, sizeof(*R.size));
    R.wire = calloc(n, sizeof(*R.wire));
    R.wire_size = calloc(n, sizeof(*R.wire_size));
    R.codec = calloc(n, sizeof(*R.codec));
    R.completions = calloc(n, sizeof(int));
    R.status = calloc(n, sizeof(int));
    R.digest_ok = calloc(n, sizeof(int));
    R.before = calloc(n, sizeof(*R.before));
    R.order_ok = calloc(n, sizeof(int));
    for (i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        R.size[i] = 1 + (size_t)(x % max);
        R.data[i] = malloc(R.size[i]);
        for (j = 0; j < R.size[i]; j++)
            R.data[i][j] = (i % 3 == 0) ? (uint8_t)(j / 64) : (uint8_t)(x >> (j % 56));
        R.wire[i] = R.data[i];
        R.wire_size[i] = R.size[i];
        if (i % 3 == 0) {
            size_t cap = cmpr_bound(CMPR_LZ4, R.size[i]);
            uint8_t *c = malloc(cap);
            long k = cmpr_compress(ctx, CMPR_LZ4, R.data[i], R.size[i], c, cap);
            if (k > 0) {
                R.wire[i] = c;
                R.wire_size[i] = (size_t)k;
                R.codec[i] = CMPR_LZ4;
            } else {
                free(c);
            }
        }
    }
    cmpr_ctx_free(ctx);
}

void run_free(void)
{
    size_t i;
    for (i = 0; i < R.n; i++) {
        if (R.wire[i] != R.data[i])
            free(R.wire[i]);
        free(R.data[i]);
    }
    free(R.data);
    free(R.size);
    free(R.wire);
    free(R.wire_size);
    free(R.codec);
    free(R.completions);
    free(R.status);
    free(R.digest_ok);
    free(R.before);
    free(R.order_ok);
    uv_cond_destroy(&R.cv);
    uv_mutex_destroy(&R.mu);
}

qdl_sample_t sample_of(size_t i)
{
    qdl_sample_t s;
    s.response_id = i;
    s.data = R.wire[i];
    s.size = R.wire_size[i];
    s.codec = R.codec[i];
    s.raw_size = R.size[i];
    return s;
}

void issue_range(qdl_t *q, size_t from, size_t to, size_t per)
{
    qdl_sample_t *s = calloc(per, sizeof(*s));
    size_t i, k;

    for (i = from; i < to; i += per) {
        size_t n = to - i < per ? to - i : per;
        uint64_t now = cmn_now_ns();

        for (k = 0; k < n; k++) {
            s[k] = sample_of(i + k);
            R.before[i + k] = now;
        }
        ck_assert_int_eq(qdl_issue_query(q, s, n), 0);
    }
    free(s);
}

size_t wait_done(size_t want, int timeout_ms)
{
    uint64_t deadline = cmn_now_ns() + (uint64_t)timeout_ms * 1000000u;
    size_t done;

    uv_mutex_lock(&R.mu);
    while (R.done < want && cmn_now_ns() < deadline)
        uv_cond_timedwait(&R.cv, &R.mu, 50000000u);
    done = R.done;
    uv_mutex_unlock(&R.mu);
    return done;
}

#define QR_MAX_NODES 16

int wait_node_rejoined(qdl_t *q, size_t i, int timeout_ms)
{
    uint64_t deadline = cmn_now_ns() + (uint64_t)timeout_ms * 1000000u;
    qdl_node_stats_t st[QR_MAX_NODES];

    for (;;) {
        int n = qdl_stats(q, st, QR_MAX_NODES);
        if (n > (int)i && st[i].up && st[i].reconnects >= 1)
            return 1;
        if (cmn_now_ns() >= deadline)
            return 0;
        usleep(10000);
    }
}

uint64_t wait_sent(qdl_t *q, uint64_t want, int timeout_ms)
{
    uint64_t deadline = cmn_now_ns() + (uint64_t)timeout_ms * 1000000u, sent;
    qdl_node_stats_t st[QR_MAX_NODES];

    for (;;) {
        int n = qdl_stats(q, st, QR_MAX_NODES), i;
        for (sent = 0, i = 0; i < n && i < QR_MAX_NODES; i++)
            sent += st[i].samples_sent;
        if (sent >= want || cmn_now_ns() >= deadline)
            return sent;
        usleep(10000);
    }
}

void expect_exactly_once(int digest)
{
    size_t i;
    for (i = 0; i < R.n; i++) {
        ck_assert_msg(R.completions[i] == 1, "sample %zu completed %d times", i, R.completions[i]);
        ck_assert_msg(R.status[i] == 0, "sample %zu failed: %s", i, cmn_strerror(R.status[i]));
        if (digest)
            ck_assert_msg(R.digest_ok[i], "sample %zu (%zu bytes, %s) has a wrong digest", i,
                          R.size[i], cmpr_codec_name(R.codec[i]));
        ck_assert_msg(R.order_ok[i],
                      "sample %zu: issue call <= issued_ns <= sent_ns <= completion does not hold",
                      i);
    }
}

void issue_paced(qdl_t *q, size_t from, size_t to, unsigned gap_us)
{
    size_t i;
    for (i = from; i < to; i++) {
        qdl_sample_t s = sample_of(i);

        R.before[i] = cmn_now_ns();
        ck_assert_int_eq(qdl_issue_query(q, &s, 1), 0);
        if (gap_us)
            usleep(gap_us);
    }
}

size_t expect_once_or_failed(void)
{
    size_t i, failed = 0;
    for (i = 0; i < R.n; i++) {
        ck_assert_msg(R.completions[i] == 1, "sample %zu completed %d times", i, R.completions[i]);
        failed += R.status[i] != 0;
    }
    return failed;
}

int test_lend_write_thread(void)
{
    const char *v = getenv("NSUT_TEST_LEND_WRITE_THREAD");
    return v && *v == '1';
}

uint64_t test_write_thread_min(void)
{
    const char *v = getenv("NSUT_TEST_WRITE_THREAD_MIN");
    return v && *v ? strtoull(v, NULL, 10) : 0;
}
