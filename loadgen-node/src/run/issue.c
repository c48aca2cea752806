/* The issue loops of a series: Server issues each query at its scheduled time (pace.c: sleeping
 * only when a sleep is sure to wake in time, spinning otherwise), SingleStream and MultiStream each
 * query when the previous one has completed, Offline its one query at once. Each issued sample gets
 * its slot before the SUT sees it; a failed issue() completes its samples as failed, so the run
 * goes on. */
#include "run.h"

#include "cmn/clock.h"
#include "cmn/metrics.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

static uint32_t clamp32(int64_t v)
{
    return v < 0 ? 0 : v > (int64_t)UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

/* Records one sample in its slot and fills its lg_sample_t. |late_ns|: how late after its
 * scheduled time it is being issued (Server; counted under the cause the last wait gave), or -1
 * where the schedule is the issue itself. */
static int record_sample(lg_run_t *run, uint64_t seq, uint32_t idx, int64_t sched_rel,
                         int64_t late_ns, lg_sample_t *s)
{
    uint64_t o = seq - run->first_seq;
    lg__chunk_t *c = lg__slot_chunk(run, (size_t)(o >> LG__CHUNK_BITS));
    size_t k = (size_t)(o & LG__CHUNK_MASK);
    lg_qsl_sample_t qs = {0};

    if (!c)
        return -ENOMEM;
    c->idx[k] = idx;
    if (c->sched)
        c->sched[k] = sched_rel;
    if (c->late)
        c->late[k] = clamp32(late_ns);
    if (c->cause && late_ns >= 0)
        c->cause[k] = (uint8_t)(run->pace.cause + 1);
    if (late_ns >= 0 && !run->accuracy) {
        lg__hist_add(&run->late_cause_hist[run->pace.cause], late_ns);
        if (run->obs && run->obs->late)
            cmn_series_observe(run->obs->late, (uint64_t)late_ns);
    }
    atomic_store_explicit(&c->lat[k], -(sched_rel + 1), memory_order_relaxed);
    if (c->ttft) {
        atomic_store_explicit(&c->ttft[k], 0, memory_order_relaxed);
        c->ntok[k] = 0;
    }
    s->response_id = seq;
    s->index = idx & LG__IDX_MASK;
    lg_qsl_get(run->qsl, idx & LG__IDX_MASK, &qs);
    s->data = qs.data;
    s->size = qs.size;
    s->codec = qs.codec;
    s->raw_size = qs.raw_size;
    return 0;
}

/* Charges each sample of a batch the time from |woke| (when the thread began handing it out)
 * to issue() returning: the harness's and the SUT adapter's cost before the bytes are the QDL's. */
static void record_call(lg_run_t *run, const lg_sample_t *s, size_t n, uint64_t woke)
{
    int64_t call = (int64_t)(cmn_now_ns() - woke);
    size_t i;

    if (run->accuracy)
        return;
    for (i = 0; i < n; i++) {
        uint64_t o = s[i].response_id - run->first_seq;
        lg__chunk_t *c = atomic_load_explicit(&run->dir[o >> LG__CHUNK_BITS], memory_order_relaxed);

        lg__hist_add(&run->call_hist, call);
        if (c->call)
            c->call[o & LG__CHUNK_MASK] = clamp32(call);
    }
}

/* Hands samples [first, first + n) of the series to the SUT. A failed issue() completes them as
 * failed samples, so the run goes on and ends INVALID instead of hanging. */
static void issue_batch(lg_run_t *run, const lg_sample_t *s, size_t n, uint64_t woke)
{
    int rc;
    size_t i;

    atomic_store_explicit(&run->issued_hi, s[n - 1].response_id + 1, memory_order_release);
    rc = run->sut->issue(run->sut, s, n);
    record_call(run, s, n, woke);
    if (rc >= 0)
        return;
    lg__run_error(run, LG__E_ISSUE, "IssueQuery of %zu samples failed: %s (%s)", n,
                  cmn_strerror(rc), cmn_err_name(rc));
    for (i = 0; i < n; i++) {
        /* Every field: the optional ones (times, error, node) unknown, not what malloc left. */
        memset(&run->rbuf[i], 0, sizeof(run->rbuf[i]));
        run->rbuf[i].response_id = s[i].response_id;
        run->rbuf[i].status = rc;
    }
    lg_complete(run, run->rbuf, n);
}

/* Takes the next |n| samples of the current query, all scheduled at |sched_rel|, and issues them
 * in parts of at most LG_ISSUE_CHUNK. */
static int issue_query(lg_run_t *run, lg__gen_t *g, uint64_t n, int64_t sched_rel)
{
    while (n > 0) {
        size_t want = n > LG_ISSUE_CHUNK ? LG_ISSUE_CHUNK : (size_t)n, got, i;
        uint64_t seq0 = run->seq, woke = cmn_now_ns();

        got = lg__gen_fill(g, run->idxbuf, want);
        if (got == 0)
            return CMN_ESTATE;
        for (i = 0; i < got; i++)
            if (record_sample(run, seq0 + i, run->idxbuf[i], sched_rel, -1, &run->sbuf[i]) < 0)
                return -ENOMEM;
        issue_batch(run, run->sbuf, got, woke);
        n -= got;
    }
    return 0;
}

/* The max_query_count and max_duration ends every scenario shares, checked after each issue in
 * the official order. Returns 1 when the series must stop (an error, as officially). */
static int limit_reached(lg_run_t *run, const lg_effective_settings_t *s, uint64_t queries_issued,
                         int64_t now_rel)
{
    if (s->max_query_count != 0 && queries_issued >= s->max_query_count) {
        LG_DERR(&run->dlog, "error_runtime",
                "IssueQueryThread 0 Ending early: Max query count reached. query_count %" PRIu64,
                queries_issued);
        return 1;
    }
    if (s->max_duration_ms != 0 && (uint64_t)now_rel > s->max_duration_ms * 1000000u) {
        LG_DERR(&run->dlog, "error_runtime",
                "IssueQueryThread 0 Ending early: Max test duration reached. duration_ns %" PRId64,
                now_rel);
        return 1;
    }
    return 0;
}

/* SingleStream and MultiStream issue each query when the previous one has completed, scheduled
 * at that moment; Offline issues its one query, scheduled at the start. */
void lg__issue_sequential(lg_run_t *run, const lg_effective_settings_t *s, lg__gen_t *g,
                          lg__issue_state_t *st)
{
    int offline = s->scenario == LG_OFFLINE;
    int64_t delta;
    uint64_t n;

    st->ran_out = 1;
    while (lg__gen_next(g, &delta, &n)) {
        int64_t now_rel;

        if (st->queries_issued > 0 && !offline)
            lg__wait_query(run, st->last_q_first, run->seq - st->last_q_first);
        if ((st->interrupted = lg__interrupted()) != 0) {
            st->ran_out = 0;
            break;
        }
        now_rel = (int64_t)(cmn_now_ns() - run->t0);
        atomic_store(&run->q_remaining, (int64_t)n);
        st->last_q_first = run->seq;
        st->last_sched_rel = offline ? 0 : now_rel;
        st->last_issue_rel = now_rel;
        if (issue_query(run, g, n, st->last_sched_rel) < 0)
            break;
        st->queries_issued++;
        if (run->accuracy)
            continue;
        if (st->queries_issued >= s->min_query_count &&
            (uint64_t)now_rel >= s->target_duration_ms * 1000000u) {
            LG_DMSG(&run->dlog, "Ending naturally: Minimum query count and test duration met.");
            st->ran_out = 0;
            break;
        }
        if (limit_reached(run, s, st->queries_issued, now_rel)) {
            st->ran_out = 0;
            break;
        }
    }
}

/* Server: each query at its scheduled time (lg__pace_wait), with lateness and hand-off cost
 * recorded per sample. */
void lg__issue_server(lg_run_t *run, const lg_effective_settings_t *s, lg__gen_t *g,
                      lg__issue_state_t *st)
{
    int64_t delta, next_delta = 0;
    uint64_t n;
    uint32_t next_idx = 0;
    uint64_t next_seq = 0;
    int have_next = 0, more = 1;

    while (more) {
        size_t batch = 0;
        int64_t now_rel;
        uint64_t woke;

        if (!have_next) {
            if (!lg__gen_next(g, &next_delta, &n))
                break;
            next_seq = run->seq;
            if (lg__gen_fill(g, &next_idx, 1) != 1)
                break;
        }
        delta = next_delta;
        have_next = 0;
        if ((st->interrupted = lg__pace_wait(&run->pace, run->t0 + (uint64_t)delta)) != 0)
            break;
        woke = cmn_now_ns();
        now_rel = (int64_t)(woke - run->t0);
        if (record_sample(run, next_seq, next_idx, delta, now_rel - delta, &run->sbuf[batch++]) < 0)
            break;
        st->last_sched_rel = delta;
        /* Coalescing: every later query already due joins this IssueQuery with its own
         * scheduled time. */
        while (s->requested.server_coalesce_queries && batch < LG_ISSUE_CHUNK) {
            if (!lg__gen_next(g, &next_delta, &n)) {
                more = 0;
                break;
            }
            next_seq = run->seq;
            if (lg__gen_fill(g, &next_idx, 1) != 1) {
                more = 0;
                break;
            }
            if (now_rel < next_delta) {
                have_next = 1;
                break;
            }
            if (record_sample(run, next_seq, next_idx, next_delta, now_rel - next_delta,
                              &run->sbuf[batch++]) < 0) {
                more = 0;
                break;
            }
            st->last_sched_rel = next_delta;
        }
        st->last_q_first = run->sbuf[batch - 1].response_id;
        st->last_issue_rel = now_rel;
        issue_batch(run, run->sbuf, batch, woke);
        st->queries_issued += batch;
        if (run->accuracy)
            continue;
        if (s->max_async_queries != 0) {
            uint64_t outstanding = st->queries_issued - atomic_load(&run->completed);

            if (outstanding > s->max_async_queries) {
                LG_DERR(
                    &run->dlog, "error_runtime",
                    "IssueQueryThread 0 Ending early: Too many outstanding queries. issued %" PRIu64
                    " outstanding %" PRIu64,
                    st->queries_issued, outstanding);
                break;
            }
        }
        if (limit_reached(run, s, st->queries_issued, now_rel))
            break;
    }
    /* A query generated for coalescing but not issued keeps its place in the official trace;
     * lg__gen_finish() accounts for it. */
}
