/* Runtime errors of a run: every one counts in num_errors; the first LG__ERR_LOG_LIMIT of each
 * kind are logged with their details and the rest only counted, so a node that fails a million
 * samples does not write a million lines. Thread-safe: completions report from any thread. */
#include "run.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>

/* The summary line of each kind when more than LG__ERR_LOG_LIMIT were counted. */
static const char *const err_names[LG__E_COUNT] = {
    "completion for an unknown sample id",
    "Attempted to complete a sample twice.",
    "sample failed in the SUT",
    "response does not match the sample's digest",
    "IssueQuery failed",
    "Attempted to record a sample latency before it's first token latency",
    "n_tokens argument missing or attempted to record 0 as number of tokens",
    "Attempted to record a negative number of tokens",
    "Number of tokens need to be greater than 1",
    "Attempted to record token latency after sample was completed",
    "Attempted to complete a sample twice. (first token)",
    "completion after the end of its series",
};

void lg__run_error(lg_run_t *run, int kind, const char *fmt, ...)
{
    uint64_t n = atomic_fetch_add(&run->err_count[kind], 1);
    char text[1024];
    va_list ap;

    if (n >= LG__ERR_LOG_LIMIT) {
        atomic_fetch_add(&run->suppressed, 1);
        return;
    }
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    lg__dlog_str(&run->dlog, LG__ERR, "error_runtime", text, LG__FILE, __LINE__);
}

uint64_t lg__run_error_total(lg_run_t *run)
{
    return atomic_load(&run->dlog.errors) + atomic_load(&run->suppressed);
}

void lg__run_errors_reset(lg_run_t *run)
{
    size_t i;

    for (i = 0; i < LG__E_COUNT; i++)
        atomic_store(&run->err_count[i], 0);
}

void lg__run_errors_flush(lg_run_t *run)
{
    size_t i;

    for (i = 0; i < LG__E_COUNT; i++) {
        uint64_t n = atomic_load(&run->err_count[i]);

        if (n > LG__ERR_LOG_LIMIT)
            LG_DMSG(&run->dlog,
                    "%" PRIu64 " more errors like \"%s\" were counted in num_errors but not logged "
                    "one by one",
                    n - LG__ERR_LOG_LIMIT, err_names[i]);
    }
}
