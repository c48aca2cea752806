/* The host's floor under the Server issue lateness, measured at the start of each Server series
 * (lg__pace_init), so the summary's harness block can put the issue lateness beside what the host
 * left any issuer in the same minute (bench/README.md, row R6v, measures the same for 3 s with
 * bench/spingaps.c --all-cpus).
 *
 * One thread per CPU the process may use (at most LG__FLOOR_MAX_CPUS), each pinned to its CPU,
 * only reads the monotonic clock for LG__FLOOR_PROBE_NS; a gap of KEEP_NS or more between two reads
 * is time that CPU did not run the thread (on a VM mostly the host taking the vCPU). The gaps all
 * CPUs share are the time an issuer that could issue from whichever CPU runs would have lost: for
 * scheduled times spread evenly over the probe, P(lateness > x) = sum over shared gaps g of
 * max(0, g - x) / probe time, and the floor is the p99 of that. A reference, not a strict floor
 * (a thread that never sleeps may be stopped more often than one that sleeps), and from a quarter
 * of a second it moves more from run to run than R6v's three. */
#include "run.h"

#include "cmn/clock.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

/* Gaps shorter than this are a clock read or an interrupt on the CPU: not kept. */
#define KEEP_NS 2000u
/* Gaps kept per CPU; ~1300 host stops a second on the VM measured, plus the guest's ticks. */
#define MAX_GAPS 4096u

typedef struct {
    int cpu;
    uint64_t t_a, t_b;  /* the common interval every spinner watches */
    uint64_t (*gap)[2]; /* [start, end] of each gap of KEEP_NS or more, in order */
    size_t n;
    int full; /* more gaps than MAX_GAPS: the rest were not kept */
} spinner_t;

static void *spin(void *arg)
{
    spinner_t *s = arg;
    uint64_t prev, now;
    cpu_set_t one;

    CPU_ZERO(&one);
    CPU_SET(s->cpu, &one);
    (void)pthread_setaffinity_np(pthread_self(), sizeof(one), &one);
    while ((now = cmn_now_ns()) < s->t_a) {
    }
    /* A thread that first runs after t_a did not run from t_a: that is a gap too. */
    prev = s->t_a;
    for (;;) {
        if (now - prev >= KEEP_NS) {
            if (s->n < MAX_GAPS) {
                s->gap[s->n][0] = prev;
                s->gap[s->n][1] = now < s->t_b ? now : s->t_b;
                s->n++;
            } else
                s->full = 1;
        }
        if (now >= s->t_b)
            break;
        prev = now;
        now = cmn_now_ns();
    }
    return NULL;
}

/* The intersection of two ordered lists of intervals, into |out| (at most n + m of them). */
static size_t intersect(uint64_t (*a)[2], size_t n, uint64_t (*b)[2], size_t m, uint64_t (*out)[2])
{
    size_t i = 0, j = 0, k = 0;

    while (i < n && j < m) {
        uint64_t lo = a[i][0] > b[j][0] ? a[i][0] : b[j][0];
        uint64_t hi = a[i][1] < b[j][1] ? a[i][1] : b[j][1];

        if (lo < hi) {
            out[k][0] = lo;
            out[k][1] = hi;
            k++;
        }
        if (a[i][1] < b[j][1])
            i++;
        else
            j++;
    }
    return k;
}

static int cmp_desc(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;

    return (a < b) - (a > b);
}

uint64_t lg__floor_quantile(uint64_t *len, size_t n, uint64_t total_ns, double q)
{
    double limit = (1.0 - q) * (double)total_ns, sum = 0;
    size_t k;

    /* sum over g of max(0, g - x) <= limit; with g sorted down, for x between g[k] and g[k-1]
     * that sum is (g[0] + ... + g[k-1]) - k x. */
    qsort(len, n, sizeof(*len), cmp_desc);
    for (k = 1; k <= n; k++) {
        double x;

        sum += (double)len[k - 1];
        x = (sum - limit) / (double)k;
        if (k == n || x >= (double)len[k])
            return x > 0 ? (uint64_t)(x + 0.5) : 0;
    }
    return 0;
}

int lg__floor_probe(lg__floor_t *f, uint64_t probe_ns)
{
    spinner_t s[LG__FLOOR_MAX_CPUS];
    pthread_t th[LG__FLOOR_MAX_CPUS];
    uint64_t(*acc)[2] = NULL, (*res)[2] = NULL, (*tmp)[2] = NULL, t_a;
    cpu_set_t set;
    unsigned n = 0, started = 0, i, total = 0;
    size_t na = 0;
    int cpu, rc = 0;

    memset(f, 0, sizeof(*f));
    memset(s, 0, sizeof(s));
    if (sched_getaffinity(0, sizeof(set), &set) != 0)
        return -errno;
    for (cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (!CPU_ISSET(cpu, &set))
            continue;
        total++;
        if (n < LG__FLOOR_MAX_CPUS)
            s[n++].cpu = cpu;
    }
    if (n == 0)
        return -EINVAL;
    acc = malloc(MAX_GAPS * (size_t)n * sizeof(*acc));
    res = malloc(MAX_GAPS * (size_t)n * sizeof(*res));
    tmp = malloc(MAX_GAPS * (size_t)n * sizeof(*tmp));
    if (!acc || !res || !tmp) {
        rc = -ENOMEM;
        goto out;
    }
    /* Each spinner's own gaps go in its slice of |tmp|; the start leaves time to create them. */
    t_a = cmn_now_ns() + 2000000u;
    for (i = 0; i < n; i++) {
        s[i].t_a = t_a;
        s[i].t_b = t_a + probe_ns;
        s[i].gap = tmp + (size_t)i * MAX_GAPS;
        if (pthread_create(&th[i], NULL, spin, &s[i]) != 0) {
            rc = -EAGAIN;
            break;
        }
        started++;
    }
    for (i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    if (rc < 0)
        goto out;
    memcpy(acc, s[0].gap, s[0].n * sizeof(*acc));
    na = s[0].n;
    for (i = 1; i < n; i++) {
        /* At most as many intervals as the lists together: within n * MAX_GAPS. */
        na = intersect(acc, na, s[i].gap, s[i].n, res);
        memcpy(acc, res, na * sizeof(*acc));
    }
    {
        uint64_t *len = (uint64_t *)tmp; /* the spinners' gaps are no longer needed */

        for (i = 0; i < na; i++) {
            len[i] = acc[i][1] - acc[i][0];
            f->lost_ns += len[i];
        }
        f->p99_ns = lg__floor_quantile(len, na, probe_ns, 0.99);
    }
    f->gaps = na;
    f->cpus = n;
    f->cpus_allowed = total;
    f->probe_ns = probe_ns;
    for (i = 0; i < n; i++)
        f->truncated |= s[i].full;
    f->ok = 1;
out:
    free(acc);
    free(res);
    free(tmp);
    return rc;
}
