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
 *   spingaps --seconds 3 [--cpu N]
 *
 * Output: one JSON object on stdout (time lost in gaps of 10 us or more, their rate, the longest
 * gap, and the perfect spinner's lateness p99 and p99.9 in microseconds). */
#include <errno.h>
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
    fprintf(f, "usage: spingaps [--seconds S] [--cpu N]\n"
               "  --seconds S  spin for S seconds (default 3, at most 600)\n"
               "  --cpu N      pin the spinning thread to CPU N (default: unpinned)\n"
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

int main(int argc, char **argv)
{
    double seconds = 3.0;
    int cpu = -1;
    hist_t *h;
    uint64_t start, prev, end, lost_ns, n_lost, longest = 0;
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
        } else {
            fprintf(stderr, "spingaps: unknown option or missing value: %s\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
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
        size_t b = g / BUCKET_NS;
        if (b > N_BUCKETS)
            b = N_BUCKETS;
        h->n[b]++;
        h->sum[b] += g;
        if (g > longest)
            longest = g;
        prev = t;
    }
    {
        uint64_t total = prev - start;
        lost_gaps(h, &n_lost, &lost_ns);
        printf("{\"tool\": \"spingaps\", \"seconds\": %.3f, \"cpu\": %d, \"lost_pct\": %.4f, "
               "\"gaps_per_s\": %.1f, \"gap_threshold_us\": %.0f, \"longest_gap_us\": %.1f, "
               "\"lateness_p99_us\": %.0f, \"lateness_p999_us\": %.0f}\n",
               (double)total / 1e9, cpu, 100.0 * (double)lost_ns / (double)total,
               (double)n_lost * 1e9 / (double)total, LOST_NS / 1e3, (double)longest / 1e3,
               lateness_us(h, total, 0.01), lateness_us(h, total, 0.001));
    }
    free(h);
    return 0;
}
