#include "cmn/log.h"
#include "cmn/err.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *log_progname = "mlperf";
static atomic_int log_level = CMN_LOG_INFO;

static const char *const level_names[] = {"ERROR", "WARN", "INFO", "DEBUG"};

void cmn_log_init(const char *progname, cmn_log_level_t level)
{
    const char *slash;

    if (progname) {
        slash = strrchr(progname, '/');
        log_progname = slash ? slash + 1 : progname;
    }
    atomic_store(&log_level, (int)level);
}

void cmn_log_set_level(cmn_log_level_t level)
{
    atomic_store(&log_level, (int)level);
}

cmn_log_level_t cmn_log_get_level(void)
{
    return (cmn_log_level_t)atomic_load_explicit(&log_level, memory_order_relaxed);
}

int cmn_log_level_parse(const char *s, cmn_log_level_t *out)
{
    static const char *const names[] = {"error", "warn", "info", "debug"};
    size_t i;

    for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (strcmp(s, names[i]) == 0) {
            *out = (cmn_log_level_t)i;
            return 0;
        }
    }
    return CMN_ECONFIG;
}

void cmn_log(cmn_log_level_t level, const char *fmt, ...)
{
    char line[2048];
    struct timespec ts;
    struct tm tm;
    size_t n;
    int w;
    va_list ap;

    if ((int)level > atomic_load_explicit(&log_level, memory_order_relaxed))
        return;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    n = strftime(line, sizeof(line), "%Y-%m-%dT%H:%M:%S", &tm);
    w = snprintf(line + n, sizeof(line) - n, ".%06ldZ %s[%d] %s: ", ts.tv_nsec / 1000, log_progname,
                 (int)getpid(), level_names[level]);
    if (w > 0)
        n += (size_t)w;
    va_start(ap, fmt);
    w = vsnprintf(line + n, sizeof(line) - n, fmt, ap);
    va_end(ap);
    if (w > 0)
        n += (size_t)w;
    if (n >= sizeof(line) - 1)
        n = sizeof(line) - 2; /* truncated: keep the newline */
    line[n++] = '\n';
    /* One write per line keeps concurrent lines whole; a failed log write has nowhere to go. */
    if (write(STDERR_FILENO, line, n) < 0)
        return;
}
