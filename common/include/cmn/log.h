/* Logging to stderr with a timestamp, the program name, the pid and a level.
 *
 * Each line is formatted into a local buffer and written with one write(2), so lines from several
 * threads never interleave. All functions are thread-safe; cmn_log_init() and cmn_log_set_level()
 * are meant to be called at start-up. */
#ifndef CMN_LOG_H
#define CMN_LOG_H

typedef enum {
    CMN_LOG_ERROR = 0,
    CMN_LOG_WARN = 1,
    CMN_LOG_INFO = 2,
    CMN_LOG_DEBUG = 3,
} cmn_log_level_t;

/* |progname| must stay valid for the life of the process (argv[0] or a literal). */
void cmn_log_init(const char *progname, cmn_log_level_t level);
void cmn_log_set_level(cmn_log_level_t level);
cmn_log_level_t cmn_log_get_level(void);

/* Parses "error", "warn", "info" or "debug". Returns 0 or CMN_ECONFIG. */
int cmn_log_level_parse(const char *s, cmn_log_level_t *out);

void cmn_log(cmn_log_level_t level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define cmn_log_error(...) cmn_log(CMN_LOG_ERROR, __VA_ARGS__)
#define cmn_log_warn(...) cmn_log(CMN_LOG_WARN, __VA_ARGS__)
#define cmn_log_info(...) cmn_log(CMN_LOG_INFO, __VA_ARGS__)
#define cmn_log_debug(...)                        \
    do {                                          \
        if (cmn_log_get_level() >= CMN_LOG_DEBUG) \
            cmn_log(CMN_LOG_DEBUG, __VA_ARGS__);  \
    } while (0)

#endif
