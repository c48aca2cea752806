#include "lg/sut_null.h"

#include "cmn/clock.h"
#include "cmn/digest.h"
#include "cmn/thread_stop.h"
#include "cmpr/cmpr.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    uint64_t id, index, due_ns;
    const void *data;
    size_t size, raw_size;
    int codec;
} job_t;

typedef struct {
    lg_sut_t sut;
    lg_null_config_t cfg;
    char name[128];
    atomic_uint_fast64_t answered;
    uint64_t counter; /* samples seen, for the fail/drop hooks */

    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    job_t *q;
    size_t head, len, cap;
    int stop, started;
    int flushed;

    uint8_t *scratch; /* decoded sample (digest mode) */
    size_t scratch_cap;
} null_sut_t;

void lg_null_config_init(lg_null_config_t *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->name = "Null SUT";
    cfg->response_size = 4;
}

static int null_name(lg_sut_t *sut, char *buf, size_t len, uint64_t *dur_ns, char *err,
                     size_t errlen)
{
    null_sut_t *n = sut->data;

    (void)err;
    (void)errlen;
    snprintf(buf, len, "%s", n->name);
    if (dur_ns)
        *dur_ns = 0;
    return 0;
}

/* The response bytes of one sample, into |out| (at least 8 or response_size bytes). */
static size_t make_response(null_sut_t *n, const job_t *j, uint8_t *out, size_t cap)
{
    size_t i, size;

    if (n->cfg.digest) {
        const void *raw = j->data;

        if (j->codec != CMPR_NONE) {
            if (n->scratch_cap < j->raw_size) {
                uint8_t *p = realloc(n->scratch, j->raw_size);

                if (!p)
                    return 0;
                n->scratch = p;
                n->scratch_cap = j->raw_size;
            }
            if (cmpr_decompress(j->codec, j->data, j->size, n->scratch, j->raw_size) != 0)
                return 0;
            raw = n->scratch;
        }
        cmn_digest_put(out, cmn_digest64(raw, j->raw_size));
        return 8;
    }
    size = n->cfg.response_size < cap ? n->cfg.response_size : cap;
    for (i = 0; i < size; i++)
        out[i] = (uint8_t)(j->index >> (8 * (i % 4)));
    return size;
}

/* Answers |m| jobs: first tokens (token mode), then the completions, in one batch each. */
static void answer(null_sut_t *n, const job_t *jobs, size_t m)
{
    enum { BATCH = 256, RESP = 64 };
    lg_response_t r[BATCH];
    uint8_t buf[BATCH][RESP];
    size_t done = 0, i, k;

    while (done < m) {
        size_t part = m - done < BATCH ? m - done : BATCH;

        for (i = 0, k = 0; i < part; i++) {
            const job_t *j = &jobs[done + i];
            uint64_t c = ++n->counter;

            if (n->cfg.drop_every && c % n->cfg.drop_every == 0)
                continue;
            r[k].response_id = j->id;
            r[k].status = n->cfg.fail_every && c % n->cfg.fail_every == 0 ? CMN_EBACKEND : 0;
            r[k].size = r[k].status ? 0 : make_response(n, j, buf[k], RESP);
            r[k].data = r[k].status ? NULL : buf[k];
            r[k].n_tokens = n->cfg.n_tokens;
            r[k].issued_ns = r[k].sent_ns = 0; /* in-process: nothing goes on a wire */
            r[k].node_queue_ns = r[k].node_backend_ns = 0;
            k++;
        }
        if (k && n->cfg.n_tokens > 0)
            lg_first_token(__atomic_load_n(&n->sut.run, __ATOMIC_ACQUIRE), r, k);
        if (k)
            lg_complete(__atomic_load_n(&n->sut.run, __ATOMIC_ACQUIRE), r, k);
        atomic_fetch_add(&n->answered, k);
        done += part;
    }
}

static void *helper_main(void *arg)
{
    null_sut_t *n = arg;
    job_t batch[256];

    /* Delayed answers are timed with cmn_sleep_until_ns, which needs a small timer slack. */
    cmn_timer_slack_min();
    pthread_mutex_lock(&n->mu);
    for (;;) {
        size_t m = 0;
        uint64_t due;

        while (n->len == 0 && !n->stop)
            pthread_cond_wait(&n->cv, &n->mu);
        if (n->len == 0 && n->stop)
            break;
        due = n->q[n->head].due_ns;
        if (due > cmn_now_ns()) {
            pthread_mutex_unlock(&n->mu);
            cmn_sleep_until_ns(due, 20000);
            pthread_mutex_lock(&n->mu);
        }
        /* Everything already due goes back in one batch, as a real SUT's batch would. */
        while (m < 256 && n->len > 0 && n->q[n->head].due_ns <= cmn_now_ns()) {
            batch[m++] = n->q[n->head];
            n->head = (n->head + 1) % n->cap;
            n->len--;
        }
        pthread_mutex_unlock(&n->mu);
        answer(n, batch, m);
        pthread_mutex_lock(&n->mu);
    }
    pthread_mutex_unlock(&n->mu);
    return NULL;
}

static int push_jobs(null_sut_t *n, const lg_sample_t *s, size_t m)
{
    uint64_t due = cmn_now_ns() + n->cfg.delay_ns;
    size_t i;

    pthread_mutex_lock(&n->mu);
    if (n->len + m > n->cap) {
        size_t cap = n->cap ? n->cap : 1024, j;
        job_t *nq;

        while (cap < n->len + m)
            cap *= 2;
        nq = malloc(cap * sizeof(*nq));
        if (!nq) {
            pthread_mutex_unlock(&n->mu);
            return -ENOMEM;
        }
        for (j = 0; j < n->len; j++)
            nq[j] = n->q[(n->head + j) % n->cap];
        free(n->q);
        n->q = nq;
        n->cap = cap;
        n->head = 0;
    }
    for (i = 0; i < m; i++) {
        job_t *j = &n->q[(n->head + n->len++) % n->cap];

        j->id = s[i].response_id;
        j->index = s[i].index;
        j->data = s[i].data;
        j->size = s[i].size;
        j->raw_size = s[i].raw_size;
        j->codec = s[i].codec;
        j->due_ns = due;
    }
    pthread_cond_signal(&n->cv);
    pthread_mutex_unlock(&n->mu);
    return 0;
}

static int null_issue(lg_sut_t *sut, const lg_sample_t *s, size_t m)
{
    null_sut_t *n = sut->data;
    job_t jobs[64];
    size_t done = 0, i;

    if (n->cfg.threaded)
        return push_jobs(n, s, m);
    while (done < m) {
        size_t part = m - done < 64 ? m - done : 64;

        for (i = 0; i < part; i++) {
            jobs[i].id = s[done + i].response_id;
            jobs[i].index = s[done + i].index;
            jobs[i].data = s[done + i].data;
            jobs[i].size = s[done + i].size;
            jobs[i].raw_size = s[done + i].raw_size;
            jobs[i].codec = s[done + i].codec;
        }
        answer(n, jobs, part);
        done += part;
    }
    return 0;
}

static int null_flush(lg_sut_t *sut)
{
    null_sut_t *n = sut->data;

    n->flushed++;
    return 0;
}

int lg_sut_null_create(const lg_null_config_t *cfg, lg_sut_t **out, cmn_errbuf_t *eb)
{
    null_sut_t *n = calloc(1, sizeof(*n));
    lg_null_config_t defaults;

    if (!n)
        return cmn_errf(eb, -ENOMEM, "out of memory");
    if (!cfg) {
        lg_null_config_init(&defaults);
        cfg = &defaults;
    }
    n->cfg = *cfg;
    snprintf(n->name, sizeof(n->name), "%s", cfg->name ? cfg->name : "Null SUT");
    n->cfg.name = n->name;
    n->sut.name = null_name;
    n->sut.issue = null_issue;
    n->sut.flush = null_flush;
    n->sut.data = n;
    atomic_init(&n->answered, 0);
    pthread_mutex_init(&n->mu, NULL);
    pthread_cond_init(&n->cv, NULL);
    if (cfg->threaded) {
        if (pthread_create(&n->thread, NULL, helper_main, n) != 0) {
            pthread_cond_destroy(&n->cv);
            pthread_mutex_destroy(&n->mu);
            free(n);
            return cmn_errf(eb, -EAGAIN, "cannot start the null SUT's helper thread");
        }
        n->started = 1;
    }
    *out = &n->sut;
    return 0;
}

void lg_sut_null_destroy(lg_sut_t *sut)
{
    null_sut_t *n;

    if (!sut)
        return;
    n = sut->data;
    if (n->started)
        cmn_thread_stop(&n->mu, &n->cv, &n->stop, n->thread);
    pthread_cond_destroy(&n->cv);
    pthread_mutex_destroy(&n->mu);
    free(n->q);
    free(n->scratch);
    free(n);
}

uint64_t lg_sut_null_answered(lg_sut_t *sut)
{
    null_sut_t *n = sut->data;

    return atomic_load(&n->answered);
}
