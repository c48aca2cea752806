/* process_*, *_build_info and the duration buckets (cmn/metrics_std.h). */
#include "cmn/metrics_std.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

/* 50 us .. 7680 s: from a null backend's round trip to a long LLM generation (vLLM's request
 * latency buckets reach 7680 s). */
const uint64_t cmn_metrics_latency_ns[CMN_METRICS_LATENCY_N] = {
    50000,         100000,       250000,       500000,       1000000,      2500000,
    5000000,       10000000,     25000000,     50000000,     100000000,    250000000,
    500000000,     1000000000,   2500000000,   5000000000,   10000000000,  20000000000,
    40000000000,   80000000000,  160000000000, 320000000000, 640000000000, 1280000000000,
    2560000000000, 7680000000000};
/* Time to first token: vLLM's list (1 ms .. 2560 s). */
const uint64_t cmn_metrics_ttft_ns[CMN_METRICS_TTFT_N] = {
    1000000,     5000000,      10000000,     20000000,     40000000,    60000000,
    80000000,    100000000,    250000000,    500000000,    750000000,   1000000000,
    2500000000,  5000000000,   7500000000,   10000000000,  20000000000, 40000000000,
    80000000000, 160000000000, 640000000000, 2560000000000};
/* Time per output token: vLLM's list (10 ms .. 80 s) below which a fast engine's 0.1-5 ms. */
const uint64_t cmn_metrics_tpot_ns[CMN_METRICS_TPOT_N] = {
    100000,      250000,      500000,      1000000,    2500000,    5000000,    10000000,
    25000000,    50000000,    75000000,    100000000,  150000000,  200000000,  300000000,
    400000000,   500000000,   750000000,   1000000000, 2500000000, 5000000000, 7500000000,
    10000000000, 20000000000, 40000000000, 80000000000};

enum { P_CPU, P_RSS, P_VSZ, P_FDS, P_MAX_FDS, P_START, P_N };

static const struct {
    const char *name, *help;
    cmn_metric_type_t type;
    unsigned decimals;
} pdesc[P_N] = {
    [P_CPU] = {"process_cpu_seconds_total", "Total user and system CPU time spent in seconds.",
               CMN_METRIC_COUNTER, 6},
    [P_RSS] = {"process_resident_memory_bytes", "Resident memory size in bytes.", CMN_METRIC_GAUGE,
               0},
    [P_VSZ] = {"process_virtual_memory_bytes", "Virtual memory size in bytes.", CMN_METRIC_GAUGE,
               0},
    [P_FDS] = {"process_open_fds", "Number of open file descriptors.", CMN_METRIC_GAUGE, 0},
    [P_MAX_FDS] = {"process_max_fds", "Maximum number of open file descriptors.", CMN_METRIC_GAUGE,
                   0},
    [P_START] = {"process_start_time_seconds",
                 "Start time of the process since unix epoch in seconds.", CMN_METRIC_GAUGE, 2},
};

typedef struct {
    cmn_series_t *s[P_N];
} proc_metrics_t;

/* The series of each registry given to cmn_metrics_process: the registry has no hook to free a
 * callback's argument, so they live in a static table (a program has one or two registries). */
#define MAX_REGS 16
static proc_metrics_t regs[MAX_REGS];
static int nregs;

/* Fields 14-15 (utime, stime, clock ticks) and 22 (starttime, ticks since boot) of
 * /proc/self/stat, after the command name's closing parenthesis. */
static int read_stat(uint64_t *cpu_us, uint64_t *start_ticks)
{
    char buf[1024], *p;
    unsigned long long ut = 0, st = 0, start = 0;
    FILE *f = fopen("/proc/self/stat", "r");
    size_t n;

    if (!f)
        return -errno;
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    p = strrchr(buf, ')');
    if (!p || sscanf(p + 2,
                     "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d %*d "
                     "%*d %llu",
                     &ut, &st, &start) != 3)
        return -EINVAL;
    long hz = sysconf(_SC_CLK_TCK);
    if (hz <= 0)
        hz = 100;
    *cpu_us = (uint64_t)(ut + st) * 1000000u / (uint64_t)hz;
    *start_ticks = (uint64_t)start;
    return 0;
}

/* The boot time (btime of /proc/stat), seconds since the epoch. */
static uint64_t boot_time(void)
{
    char line[256];
    unsigned long long bt = 0;
    FILE *f = fopen("/proc/stat", "r");

    if (!f)
        return 0;
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "btime %llu", &bt) == 1)
            break;
    fclose(f);
    return (uint64_t)bt;
}

static int64_t open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    int64_t n = 0;

    if (!d)
        return 0;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n > 0 ? n - 1 : 0; /* opendir's own descriptor */
}

static void collect(void *arg)
{
    proc_metrics_t *p = arg;
    unsigned long long vsz = 0, rss = 0;
    uint64_t cpu_us = 0, start = 0;
    struct rlimit rl;
    FILE *f;

    if (read_stat(&cpu_us, &start) == 0) {
        long hz = sysconf(_SC_CLK_TCK);
        cmn_series_set(p->s[P_CPU], (int64_t)cpu_us);
        if (hz <= 0)
            hz = 100;
        /* Hundredths of a second: the tick's resolution. */
        cmn_series_set(p->s[P_START], (int64_t)(boot_time() * 100u + start * 100u / (uint64_t)hz));
    }
    f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%llu %llu", &vsz, &rss) == 2) {
            uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
            cmn_series_set(p->s[P_VSZ], (int64_t)(vsz * page));
            cmn_series_set(p->s[P_RSS], (int64_t)(rss * page));
        }
        fclose(f);
    }
    cmn_series_set(p->s[P_FDS], open_fds());
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
        cmn_series_set(p->s[P_MAX_FDS],
                       rl.rlim_cur == RLIM_INFINITY ? INT64_MAX : (int64_t)rl.rlim_cur);
}

int cmn_metrics_process(cmn_metrics_t *m, cmn_errbuf_t *eb)
{
    proc_metrics_t *p;
    int rc;

    if (__atomic_load_n(&nregs, __ATOMIC_ACQUIRE) >= MAX_REGS)
        return cmn_errf(eb, CMN_EOVERLOAD, "process metrics: more than %d registries", MAX_REGS);
    p = &regs[__atomic_fetch_add(&nregs, 1, __ATOMIC_ACQ_REL)];
    for (int i = 0; i < P_N; i++) {
        cmn_metric_desc_t d = {.name = pdesc[i].name,
                               .help = pdesc[i].help,
                               .type = pdesc[i].type,
                               .decimals = pdesc[i].decimals};
        cmn_metric_t *mt;
        rc = cmn_metrics_add(m, &d, &mt, eb);
        if (rc == 0)
            rc = cmn_metric_series(mt, NULL, &p->s[i]);
        if (rc < 0)
            return rc;
    }
    rc = cmn_metrics_on_collect(m, collect, p);
    if (rc < 0)
        return cmn_errf(eb, rc, "process metrics: no room for a collect callback");
    collect(p);
    return 0;
}

int cmn_metrics_build_info(cmn_metrics_t *m, const char *prefix, const char *version,
                           const char *commit, cmn_errbuf_t *eb)
{
    static const char *const labels[] = {"version", "commit", NULL};
    const char *const values[] = {version, commit, NULL};
    char name[128], help[160];
    cmn_metric_t *mt;
    cmn_series_t *s;
    cmn_metric_desc_t d = {.type = CMN_METRIC_GAUGE, .labels = labels};
    int rc;

    snprintf(name, sizeof(name), "%s_build_info", prefix);
    snprintf(help, sizeof(help), "The %s program's version and git commit (value 1).", prefix);
    d.name = name;
    d.help = help;
    rc = cmn_metrics_add(m, &d, &mt, eb);
    if (rc == 0)
        rc = cmn_metric_series(mt, values, &s);
    if (rc < 0)
        return cmn_errf(eb, rc, "metric %s: cannot create its series", name);
    cmn_series_set(s, 1);
    return 0;
}
