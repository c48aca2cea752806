#include "progress.h"

#include "lg/lg.h"

#include "cmn/clock.h"
#include "cmn/thread_stop.h"

#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

void lg__hist_reset(lg__hist_t *h)
{
    size_t i;

    for (i = 0; i < LG__HIST_BUCKETS; i++)
        atomic_store_explicit(&h->b[i], 0, memory_order_relaxed);
}

/* Values below LG__HIST_SUB have a bucket each; above, the bucket is the position of the highest
 * set bit (msb) and the LG__HIST_SUB_BITS bits below it. Bucket numbers run on without a gap:
 * msb = LG__HIST_SUB_BITS starts at bucket LG__HIST_SUB. */
#define HIST_SHIFT (LG__HIST_SUB_BITS * LG__HIST_SUB - LG__HIST_SUB)

static unsigned bucket_of(uint64_t v)
{
    unsigned msb;

    if (v < LG__HIST_SUB)
        return (unsigned)v;
    msb = 63u - (unsigned)__builtin_clzll(v);
    return msb * LG__HIST_SUB + (unsigned)((v >> (msb - LG__HIST_SUB_BITS)) & (LG__HIST_SUB - 1u)) -
           HIST_SHIFT;
}

static uint64_t bucket_top(unsigned b)
{
    unsigned msb, sub;

    if (b < LG__HIST_SUB)
        return b;
    msb = (b + HIST_SHIFT) / LG__HIST_SUB;
    sub = (b + HIST_SHIFT) % LG__HIST_SUB;
    return ((uint64_t)(LG__HIST_SUB + sub + 1u) << (msb - LG__HIST_SUB_BITS)) - 1u;
}

void lg__hist_add(lg__hist_t *h, int64_t ns)
{
    unsigned b = bucket_of(ns > 0 ? (uint64_t)ns : 0u);

    if (b >= LG__HIST_BUCKETS)
        b = LG__HIST_BUCKETS - 1;
    atomic_fetch_add_explicit(&h->b[b], 1, memory_order_relaxed);
}

uint64_t lg__hist_quantile(lg__hist_t *h, double q)
{
    uint64_t total = 0, seen = 0, want;
    unsigned i;

    for (i = 0; i < LG__HIST_BUCKETS; i++)
        total += atomic_load_explicit(&h->b[i], memory_order_relaxed);
    if (total == 0)
        return 0;
    want = (uint64_t)((double)total * q);
    for (i = 0; i < LG__HIST_BUCKETS; i++) {
        seen += atomic_load_explicit(&h->b[i], memory_order_relaxed);
        if (seen > want)
            return bucket_top(i);
    }
    return bucket_top(LG__HIST_BUCKETS - 1);
}

void lg__hist_merge(lg__hist_t *dst, lg__hist_t *src)
{
    unsigned i;

    for (i = 0; i < LG__HIST_BUCKETS; i++)
        atomic_fetch_add_explicit(&dst->b[i],
                                  atomic_load_explicit(&src->b[i], memory_order_relaxed),
                                  memory_order_relaxed);
}

uint64_t lg__hist_count_from(lg__hist_t *h, uint64_t ns)
{
    uint64_t n = 0;
    unsigned i;

    for (i = bucket_of(ns); i < LG__HIST_BUCKETS; i++)
        n += atomic_load_explicit(&h->b[i], memory_order_relaxed);
    return n;
}

lg_progress_t lg_progress_mode(lg_progress_t p)
{
    if (p == LG_PROGRESS_AUTO)
        return isatty(STDERR_FILENO) ? LG_PROGRESS_ON : LG_PROGRESS_LINES;
    return p;
}

/* A live line is redrawn this often; plain lines come every |interval_ns|. */
#define LIVE_REDRAW_NS 250000000ull

struct lg__progress {
    FILE *out;
    lg__progress_fn fn;
    void *arg;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop;
    int plain;            /* lines ending in "\n", no "\r" or terminal codes */
    uint64_t interval_ns; /* between two draws */
    uint64_t drawn;       /* lines drawn so far (plain: a last line only after one) */
    uint64_t last_completed, last_ns;
    double rate;
};

static void human_ns(char *buf, size_t len, uint64_t ns)
{
    if (ns < 10000)
        snprintf(buf, len, "%lluns", (unsigned long long)ns);
    else if (ns < 10000000)
        snprintf(buf, len, "%.1fus", (double)ns / 1e3);
    else if (ns < 10000000000ull)
        snprintf(buf, len, "%.1fms", (double)ns / 1e6);
    else
        snprintf(buf, len, "%.1fs", (double)ns / 1e9);
}

/* " NAME pXX VALUE/TARGET" or " NAME pXX VALUE" without a bound, "-" before any value. */
static size_t fmt_q(char *buf, size_t len, const char *name, double pct, uint64_t v,
                    uint64_t target)
{
    char a[32] = "-", b[32];
    int n;

    if (v)
        human_ns(a, sizeof(a), v);
    if (target) {
        human_ns(b, sizeof(b), target);
        n = snprintf(buf, len, "  %sp%g %s/%s", name, pct * 100, a, b);
    } else
        n = snprintf(buf, len, "  %sp%g %s", name, pct * 100, a);
    return n < 0 ? 0 : (size_t)n < len ? (size_t)n : len ? len - 1 : 0;
}

void lg__progress_format(char *buf, size_t len, const lg__progress_snap_t *s, double rate)
{
    char eta[32];
    double pct = s->pct > 0 ? s->pct : 0.99;
    size_t used;
    int n;

    if (!len)
        return;
    if (s->eta_s < 0)
        snprintf(eta, sizeof(eta), "?");
    else
        snprintf(eta, sizeof(eta), "%.0fs", s->eta_s);
    n = snprintf(buf, len, "[%s] %6.1fs  issued %llu  done %llu  %.0f/s", s->phase ? s->phase : "",
                 (double)s->elapsed_ns / 1e9, (unsigned long long)s->issued,
                 (unsigned long long)s->completed, rate);
    used = n < 0 ? 0 : (size_t)n < len ? (size_t)n : len - 1;
    used += fmt_q(buf + used, len - used, "", pct, s->p99_ns, s->target_ns);
    if (s->ttft_target_ns || s->ttft_ns)
        used += fmt_q(buf + used, len - used, "TTFT ", pct, s->ttft_ns, s->ttft_target_ns);
    if (s->tpot_target_ns || s->tpot_ns)
        used += fmt_q(buf + used, len - used, "TPOT ", pct, s->tpot_ns, s->tpot_target_ns);
    snprintf(buf + used, len - used, "  ETA %s", eta);
}

static void draw(lg__progress_t *p, int final)
{
    lg__progress_snap_t s = {0};
    char line[512];
    uint64_t now = cmn_now_ns();

    s.eta_s = -1;
    p->fn(p->arg, &s);
    if (!p->last_ns && s.elapsed_ns) {
        p->rate = (double)s.completed * 1e9 / (double)s.elapsed_ns;
    } else if (now > p->last_ns && s.completed >= p->last_completed) {
        double r = (double)(s.completed - p->last_completed) * 1e9 / (double)(now - p->last_ns);

        /* Smooth the instantaneous rate so the line does not flicker. */
        p->rate = p->rate == 0 ? r : 0.7 * p->rate + 0.3 * r;
    }
    p->last_ns = now;
    p->last_completed = s.completed;
    lg__progress_format(line, sizeof(line), &s, p->rate);
    if (p->plain) {
        /* A run shorter than one interval prints nothing: its summary says it all. */
        if (final && !p->drawn)
            return;
        fprintf(p->out, "%s\n", line);
    } else
        fprintf(p->out, "\r%s\033[K%s", line, final ? "\n" : "");
    p->drawn++;
    fflush(p->out);
}

static void *progress_main(void *arg)
{
    lg__progress_t *p = arg;
    struct timespec ts;

    pthread_mutex_lock(&p->mu);
    while (!p->stop) {
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += (time_t)(p->interval_ns / 1000000000ull);
        ts.tv_nsec += (long)(p->interval_ns % 1000000000ull);
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&p->cv, &p->mu, &ts);
        if (p->stop)
            break;
        pthread_mutex_unlock(&p->mu);
        draw(p, 0);
        pthread_mutex_lock(&p->mu);
    }
    pthread_mutex_unlock(&p->mu);
    draw(p, 1);
    return NULL;
}

lg__progress_t *lg__progress_start(FILE *out, lg__progress_fn fn, void *arg, int plain,
                                   uint64_t interval_ms)
{
    lg__progress_t *p;
    pthread_condattr_t ca;

    if (!out)
        return NULL;
    p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    p->plain = plain;
    p->interval_ns = plain ? (interval_ms ? interval_ms : 10000) * 1000000ull : LIVE_REDRAW_NS;
    p->out = out;
    p->fn = fn;
    p->arg = arg;
    pthread_mutex_init(&p->mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&p->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (pthread_create(&p->thread, NULL, progress_main, p) != 0) {
        pthread_cond_destroy(&p->cv);
        pthread_mutex_destroy(&p->mu);
        free(p);
        return NULL;
    }
    return p;
}

void lg__progress_stop(lg__progress_t *p)
{
    if (!p)
        return;
    cmn_thread_stop(&p->mu, &p->cv, &p->stop, p->thread);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p);
}
