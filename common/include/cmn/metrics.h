/* Prometheus metrics: a registry of counters, gauges and histograms, rendered in the text
 * exposition format 0.0.4 and served over HTTP by cmn/metrics_http.h.
 *
 * Debian has no Prometheus client library for C (prometheus-cpp is C++), and the format is small,
 * so the registry is written here; the HTTP side is libmicrohttpd.
 *
 * Values are integers. A metric's |decimals| says in which unit they are kept: 0 shows them as
 * they are, 9 keeps nanoseconds and shows seconds, 6 keeps microseconds. Rendering divides exactly
 * (no floating point), so an exposition is byte-for-byte predictable and a hot path adds integers.
 *
 * Lifecycle: cmn_metrics_new, then cmn_metrics_add for each metric (a family of series with the
 * same name, help and label names), cmn_metric_series for each label-value set; updates on any
 * thread; cmn_metrics_render from any thread (the HTTP server's); cmn_metrics_free last, once no
 * thread updates and no server serves it. A metric and a series live as long as the registry.
 *
 * Thread-safety: updates (cmn_series_*) are lock-free atomics, safe from any thread at any rate.
 * cmn_metrics_add, cmn_metric_series and cmn_metrics_on_collect take the registry's lock and are
 * thread-safe; call them at start-up or when a new label value appears, not per sample.
 * cmn_metrics_render serializes with itself and runs the collect callbacks first.
 *
 * Errors: CMN_ECONFIG (a bad name, label or bucket list), CMN_EOVERLOAD (a limit below reached),
 * -ENOMEM. */
#ifndef CMN_METRICS_H
#define CMN_METRICS_H

#include "cmn/err.h"

#include <stddef.h>
#include <stdint.h>

typedef struct cmn_metrics cmn_metrics_t;
typedef struct cmn_metric cmn_metric_t;
typedef struct cmn_series cmn_series_t;

typedef enum {
    CMN_METRIC_COUNTER = 0,
    CMN_METRIC_GAUGE = 1,
    CMN_METRIC_HISTOGRAM = 2,
} cmn_metric_type_t;

enum {
    CMN_METRICS_MAX_LABELS = 8,     /* label names per metric */
    CMN_METRICS_MAX_SERIES = 4096,  /* label-value sets per metric */
    CMN_METRICS_MAX_BUCKETS = 64,   /* histogram bounds, +Inf not counted */
    CMN_METRICS_MAX_COLLECT = 8,    /* collect callbacks per registry */
    CMN_METRICS_MAX_DECIMALS = 18,  /* 10^18 still fits in 64 bits */
    CMN_METRICS_MAX_LABEL_LEN = 256 /* bytes of one label value, before escaping */
};

typedef struct {
    const char *name;          /* [a-zA-Z_:][a-zA-Z0-9_:]*; counters end in _total */
    const char *help;          /* one line or several: newlines and '\' are escaped */
    cmn_metric_type_t type;    /* counter, gauge or histogram */
    unsigned decimals;         /* values are kept in units of 10^-decimals */
    const char *const *labels; /* label names, NULL-terminated; NULL for none */
    const uint64_t *bounds;    /* histogram: strictly ascending upper bounds, kept units */
    size_t nbounds;            /* histogram: number of bounds (the +Inf bucket is implied) */
} cmn_metric_desc_t;

/* A registry. Returns 0 or -ENOMEM. */
int cmn_metrics_new(cmn_metrics_t **out);

/* Frees the registry, its metrics and series. NULL is a no-op. */
void cmn_metrics_free(cmn_metrics_t *m);

/* Registers a metric. The strings and the bounds are copied. A second metric of the same name is
 * CMN_ECONFIG. Families render in the order they were added. */
int cmn_metrics_add(cmn_metrics_t *m, const cmn_metric_desc_t *d, cmn_metric_t **out,
                    cmn_errbuf_t *eb);

/* cmn_metrics_add for a metric without labels (d->labels NULL), and its one series in *out. */
int cmn_metrics_add_series(cmn_metrics_t *m, const cmn_metric_desc_t *d, cmn_series_t **out,
                           cmn_errbuf_t *eb);

/* A table of metrics without labels whose series live in a struct of the caller's: |series| is
 * offsetof(that struct, the entry's cmn_series_t * member). */
typedef struct {
    cmn_metric_desc_t d;
    size_t series;
} cmn_metric_slot_t;

/* cmn_metrics_add_series for each of the |n| entries of |t|, its series stored at
 * (char *)base + t[i].series; stops at the first error. */
int cmn_metrics_add_slots(cmn_metrics_t *m, const cmn_metric_slot_t *t, size_t n, void *base,
                          cmn_errbuf_t *eb);

/* The series of |mt| with these label values (as many as the metric has label names; NULL for a
 * metric without labels), created on first use. Values are any UTF-8 text up to
 * CMN_METRICS_MAX_LABEL_LEN bytes; '\', '"' and newline are escaped on output. Returns 0,
 * CMN_ECONFIG (too long), CMN_EOVERLOAD (CMN_METRICS_MAX_SERIES reached) or -ENOMEM. */
int cmn_metric_series(cmn_metric_t *mt, const char *const *values, cmn_series_t **out);

/* Counter: adds |n|. Gauge: adds |n| too (use cmn_series_sub to go down). */
void cmn_series_add(cmn_series_t *s, uint64_t n);
void cmn_series_inc(cmn_series_t *s);
/* Gauge only: subtracts |n|. */
void cmn_series_sub(cmn_series_t *s, uint64_t n);
/* Gauge: sets the value. Counter: sets a total counted elsewhere (it must never decrease). */
void cmn_series_set(cmn_series_t *s, int64_t v);
/* Histogram: counts |v| (kept units) in the first bucket whose bound is >= v. */
void cmn_series_observe(cmn_series_t *s, uint64_t v);

/* The current value of a counter or gauge (for tests and for --stats style printing). */
int64_t cmn_series_value(const cmn_series_t *s);

/* Registers |cb|, called by every cmn_metrics_render before it formats, so values that are cheaper
 * to read than to track (resident memory, another library's snapshot) are set just in time. The
 * callback may create series and update them; it must not render or add collect callbacks. */
int cmn_metrics_on_collect(cmn_metrics_t *m, void (*cb)(void *arg), void *arg);

/* Writes the whole exposition into a malloc'd, NUL-terminated buffer (*out, length *len) that the
 * caller frees. Returns 0 or -ENOMEM. */
int cmn_metrics_render(cmn_metrics_t *m, char **out, size_t *len);

/* The Content-Type of what cmn_metrics_render writes. */
#define CMN_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

#endif
