/* spingaps: the host's share of the issue lateness. One thread does nothing but read the
 * monotonic clock for --seconds; a gap between two reads longer than a clock read is time the
 * thread did not run (the guest's scheduler, or on a VM the host taking the vCPU away, which the
 * guest cannot see or prevent). A Server issue thread that spins for its deadlines is late by
 * whatever is left of such a gap when a query's scheduled time falls inside it; for times spread
 * evenly over the run, P(lateness > x) = sum over gaps g of max(0, g - x) / run time. That gives
 * the issue lateness percentiles of a perfect spinner on this machine in this minute: the host's
 * part of the harness's own "Issue lateness p99" (B1's rows), measured beside it. A reference, not
 * a strict floor: a thread that never sleeps may be preempted more often by the host than the
 * issue thread, which sleeps when its gaps allow.
 *
 * With --all-cpus one such thread spins on each CPU the process may use, and what counts is the
 * time they all lost together (the intersection of their gaps): the lateness of an issuer that
 * could issue from whichever CPU runs, so no placement of threads does better. On a VM whose host
 * stops all its vCPUs at once that is most of the single spinner's figure.
 *
 *   spingaps --seconds 3 [--cpu N | --all-cpus]
 *
 * Output: one JSON object on stdout (time lost in gaps of 10 us or more, their rate, the longest
 * gap, and the perfect spinner's lateness p99 and p99.9 in microseconds; with --all-cpus the same
 * for the gaps common to all CPUs, and each CPU's own p99). */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Gaps are kept as a histogram of 1 us buckets up to 100 ms (count and sum per bucket); longer
 * ones go to one overflow bucket with their count and sum, which keeps the sums exact. */
#define BUCKET_NS 1000u
#define N_BUCKETS 100000u
/* A gap of at least this much counts as time lost in the summary figures (a clock read takes
 * ~20 ns; an interrupt handled on this CPU takes a few us); a multiple of BUCKET_NS. */
#define LOST_NS 10000u
#define MAX_SECONDS 600.0
/* --all-cpus: each thread keeps its gaps of at least this long as intervals (shorter ones are
 * interrupts and clock reads), at most MAX_GAPS of them. */
#define KEEP_NS 2000u
#define MAX_GAPS (64u * 1024u * 1024u)

typedef struct {
    uint64_t n[N_BUCKETS + 1];
    uint64_t sum[N_BUCKETS + 1];
} hist_t;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: spingaps [--seconds S] [--cpu N | --all-cpus]\n"
               "  --seconds S  spin for S seconds (default 3, at most 600)\n"
               "  --cpu N      pin the spinning thread to CPU N (default: unpinned)\n"
               "  --all-cpus   one spinner per CPU; count the gaps they all share\n"
               "Prints one JSON object: the time a spinning thread lost in gaps, and the issue\n"
               "lateness percentiles a perfect spinner would have on this machine now.\n");
}

/* Smallest x (us) with sum over gaps of max(0, g - x) <= share * total; resolution 1 us. */
static double lateness_us(const hist_t *h, uint64_t total_ns, double share)
{
    double limit = share * (double)total_ns;
    uint64_t n_above = h->n[N_BUCKETS], sum_above = h->sum[N_BUCKETS];
    size_t b;

    /* Walking down from the top: at x = b us, the gaps in buckets >= b are (nearly all) above x. */
    for (b = N_BUCKETS; b-- > 0;) {
        double x = (double)b * BUCKET_NS;
        if ((double)sum_above - x * (double)n_above > limit)
            return (double)(b + 1);
        n_above += h->n[b];
        sum_above += h->sum[b];
    }
    return 0.0;
}

/* The gaps of LOST_NS or more: their count and their sum. */
static void lost_gaps(const hist_t *h, uint64_t *n, uint64_t *ns)
{
    size_t b;

    *n = *ns = 0;
    for (b = LOST_NS / BUCKET_NS; b <= N_BUCKETS; b++) {
        *n += h->n[b];
        *ns += h->sum[b];
    }
}

/* The figures both modes print, and the object's closing brace: time lost in gaps of LOST_NS or
 * more over |total_ns|, their rate, the longest gap, the perfect spinner's lateness. */
static void print_figures(const hist_t *h, uint64_t total_ns, uint64_t longest_ns)
{
    uint64_t n_lost, lost_ns;

    lost_gaps(h, &n_lost, &lost_ns);
    printf("\"lost_pct\": %.4f, \"gaps_per_s\": %.1f, \"gap_threshold_us\": %.0f, "
           "\"longest_gap_us\": %.1f, \"lateness_p99_us\": %.0f, \"lateness_p999_us\": %.0f}\n",
           100.0 * (double)lost_ns / (double)total_ns, (double)n_lost * 1e9 / (double)total_ns,
           LOST_NS / 1e3, (double)longest_ns / 1e3, lateness_us(h, total_ns, 0.01),
           lateness_us(h, total_ns, 0.001));
}

static void hist_add(hist_t *h, uint64_t g)
{
    size_t b = g / BUCKET_NS;

    if (b > N_BUCKETS)
        b = N_BUCKETS;
    h->n[b]++;
    h->sum[b] += g;
}

/* --all-cpus: one spinner's gaps, as [start, end) intervals in time order. */
typedef struct {
    int cpu;
    uint64_t start, end;
    uint64_t (*gap)[2];
    size_t n, cap;
    int err; /* a negative errno: could not pin; 1: more than MAX_GAPS gaps */
    pthread_t thread;
} spinner_t;

static void *spin_keep(void *arg)
{
    spinner_t *sp = arg;
    cpu_set_t set;
    uint64_t prev;

    CPU_ZERO(&set);
    CPU_SET(sp->cpu, &set);
    if (sched_setaffinity(0, sizeof(set), &set) != 0) {
        sp->err = -errno;
        return NULL;
    }
    while (now_ns() < sp->start) {
    }
    prev = now_ns();
    while (prev < sp->end) {
        uint64_t t = now_ns();

        if (t - prev >= KEEP_NS && !sp->err) {
            if (sp->n == sp->cap) {
                size_t cap = sp->cap ? sp->cap * 2 : 65536;
                void *g = cap <= MAX_GAPS ? realloc(sp->gap, cap * sizeof(*sp->gap)) : NULL;

                if (!g) {
                    sp->err = 1;
                    continue;
                }
                sp->gap = g;
                sp->cap = cap;
            }
            sp->gap[sp->n][0] = prev;
            sp->gap[sp->n][1] = t;
            sp->n++;
        }
        prev = t;
    }
    return NULL;
}

/* Keeps in |a| (n intervals) only the time also inside |b| (m intervals); returns the count. */
static size_t intersect(uint64_t (*a)[2], size_t n, uint64_t (*b)[2], size_t m)
{
    size_t i = 0, j = 0, k = 0;

    while (i < n && j < m) {
        uint64_t lo = a[i][0] > b[j][0] ? a[i][0] : b[j][0];
        uint64_t hi = a[i][1] < b[j][1] ? a[i][1] : b[j][1];
        int a_ends_first = a[i][1] < b[j][1];

        if (lo < hi) { /* k <= i: the output never overtakes the input */
            a[k][0] = lo;
            a[k][1] = hi;
            k++;
        }
        if (a_ends_first)
            i++;
        else
            j++;
    }
    return k;
}

/* --all-cpus: spins on every CPU at once, then reports the gaps common to all. */
static int all_cpus(double seconds)
{
    cpu_set_t set;
    spinner_t *sp;
    hist_t *h;
    int n = 0, c, i, rc = 0;
    size_t common;
    uint64_t total, longest = 0;

    if (sched_getaffinity(0, sizeof(set), &set) != 0) {
        fprintf(stderr, "spingaps: cannot read this process's CPUs: %s\n", strerror(errno));
        return 1;
    }
    sp = calloc((size_t)CPU_COUNT(&set), sizeof(*sp));
    h = calloc(1, sizeof(*h));
    if (!sp || !h) {
        fprintf(stderr, "spingaps: out of memory\n");
        return 1;
    }
    for (c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set))
            sp[n++].cpu = c;
    /* All start and end together, 50 ms from now: after every thread exists. */
    sp[0].start = now_ns() + 50000000u;
    for (i = 0; i < n; i++) {
        sp[i].start = sp[0].start;
        sp[i].end = sp[0].start + (uint64_t)(seconds * 1e9);
    }
    for (i = 0; i < n; i++)
        if ((errno = pthread_create(&sp[i].thread, NULL, spin_keep, &sp[i])) != 0) {
            fprintf(stderr, "spingaps: cannot start a spinner: %s\n", strerror(errno));
            return 1;
        }
    for (i = 0; i < n; i++)
        pthread_join(sp[i].thread, NULL);
    for (i = 0; i < n; i++) {
        if (sp[i].err < 0) {
            fprintf(stderr, "spingaps: cannot pin a spinner to CPU %d: %s\n", sp[i].cpu,
                    strerror(-sp[i].err));
            rc = 1;
        } else if (sp[i].err) {
            fprintf(stderr, "spingaps: CPU %d: more than %u gaps; the figures are incomplete\n",
                    sp[i].cpu, MAX_GAPS);
            rc = 1;
        }
    }
    total = sp[0].end - sp[0].start;
    printf("{\"tool\": \"spingaps\", \"seconds\": %.3f, \"all_cpus\": %d, "
           "\"per_cpu_lateness_p99_us\": [",
           (double)total / 1e9, n);
    for (i = 0; i < n; i++) {
        size_t k;

        memset(h, 0, sizeof(*h));
        for (k = 0; k < sp[i].n; k++)
            hist_add(h, sp[i].gap[k][1] - sp[i].gap[k][0]);
        printf("%s%.0f", i ? ", " : "", lateness_us(h, total, 0.01));
    }
    common = sp[0].n;
    for (i = 1; i < n; i++)
        common = intersect(sp[0].gap, common, sp[i].gap, sp[i].n);
    memset(h, 0, sizeof(*h));
    for (size_t k = 0; k < common; k++) {
        uint64_t g = sp[0].gap[k][1] - sp[0].gap[k][0];

        hist_add(h, g);
        longest = g > longest ? g : longest;
    }
    printf("], ");
    print_figures(h, total, longest);
    for (i = 0; i < n; i++)
        free(sp[i].gap);
    free(sp);
    free(h);
    return rc;
}

int main(int argc, char **argv)
{
    double seconds = 3.0;
    int cpu = -1, every = 0;
    hist_t *h;
    uint64_t start, prev, end, longest = 0;
    int i;

    for (i = 1; i < argc; i++) {
        char *e;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--seconds") && i + 1 < argc) {
            errno = 0;
            seconds = strtod(argv[++i], &e);
            if (errno || *e || !(seconds > 0.0) || seconds > MAX_SECONDS) {
                fprintf(stderr,
                        "spingaps: --seconds %s: expected a number of seconds in (0, %.0f]\n",
                        argv[i], MAX_SECONDS);
                return 2;
            }
        } else if (!strcmp(argv[i], "--cpu") && i + 1 < argc) {
            long v;
            errno = 0;
            v = strtol(argv[++i], &e, 10);
            if (errno || *e || v < 0 || v >= CPU_SETSIZE) {
                fprintf(stderr, "spingaps: --cpu %s: expected a CPU number below %d\n", argv[i],
                        CPU_SETSIZE);
                return 2;
            }
            cpu = (int)v;
        } else if (!strcmp(argv[i], "--all-cpus")) {
            every = 1;
        } else {
            fprintf(stderr, "spingaps: unknown option or missing value: %s\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (every && cpu >= 0) {
        fprintf(stderr, "spingaps: --cpu and --all-cpus exclude each other\n");
        return 2;
    }
    if (every)
        return all_cpus(seconds);
    if (cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        if (sched_setaffinity(0, sizeof(set), &set) != 0) {
            fprintf(stderr, "spingaps: cannot pin to CPU %d: %s\n", cpu, strerror(errno));
            return 1;
        }
    }
    h = calloc(1, sizeof(*h));
    if (!h) {
        fprintf(stderr, "spingaps: out of memory for the gap histogram (%zu bytes)\n", sizeof(*h));
        return 1;
    }
    start = prev = now_ns();
    end = start + (uint64_t)(seconds * 1e9);
    while (prev < end) {
        uint64_t t = now_ns(), g = t - prev;
        hist_add(h, g);
        if (g > longest)
            longest = g;
        prev = t;
    }
    printf("{\"tool\": \"spingaps\", \"seconds\": %.3f, \"cpu\": %d, ",
           (double)(prev - start) / 1e9, cpu);
    print_figures(h, prev - start, longest);
    free(h);
    return 0;
}
