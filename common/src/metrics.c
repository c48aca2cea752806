/* The metrics registry and the text exposition format 0.0.4.
 *
 * A series holds its value in one 64-bit atomic (a histogram: its sum, plus one atomic per bucket,
 * counted per bucket and made cumulative when rendered), so an update is one relaxed atomic add
 * and never takes a lock. The registry's lock guards only the lists of metrics and series. */
#include "cmn/metrics.h"
#include "cmn/list.h"
#include "cmn/sbuf.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cmn_series {
    cmn_series_t *next;
    cmn_metric_t *mt;
    char *labels;         /* escaped `a="x",b="y"`, or "" */
    _Atomic uint64_t v;   /* counter or gauge (two's complement), histogram sum */
    _Atomic uint64_t b[]; /* histogram: nbounds + 1 per-bucket counts, the last is +Inf */
};

struct cmn_metric {
    cmn_metric_t *next;
    cmn_metrics_t *reg;
    char *name;
    char *help;
    cmn_metric_type_t type;
    unsigned decimals;
    size_t nlabels;
    char *labels[CMN_METRICS_MAX_LABELS];
    uint64_t *bounds;
    size_t nbounds;
    cmn_series_t *series, *series_last;
    size_t nseries;
};

struct cmn_metrics {
    pthread_mutex_t mu;        /* the lists of metrics and series */
    pthread_mutex_t render_mu; /* one render (and its collect callbacks) at a time */
    cmn_metric_t *head, *last;
    struct {
        void (*cb)(void *arg);
        void *arg;
    } collect[CMN_METRICS_MAX_COLLECT];
    size_t ncollect;
};

/* |v| in units of 10^-decimals, written exactly: trailing zeros of the fraction dropped. */
static void sb_fixed(cmn_sbuf_t *b, uint64_t v, unsigned decimals, int neg)
{
    char s[48];
    uint64_t scale = 1, ip, fp;
    int n;

    for (unsigned i = 0; i < decimals; i++)
        scale *= 10;
    ip = v / scale;
    fp = v % scale;
    n = snprintf(s, sizeof(s), "%s%" PRIu64, neg ? "-" : "", ip);
    if (fp) {
        int end = n + 1 + (int)decimals;
        snprintf(s + n, sizeof(s) - (size_t)n, ".%0*" PRIu64, (int)decimals, fp);
        while (s[end - 1] == '0')
            end--;
        n = end;
    }
    cmn_sbuf_add(b, s, (size_t)n);
}

static void sb_u64(cmn_sbuf_t *b, uint64_t v)
{
    sb_fixed(b, v, 0, 0);
}

/* HELP text: '\' and newline escaped. Label values: '"' too. */
static void sb_escaped(cmn_sbuf_t *b, const char *s, int quote)
{
    for (; *s; s++) {
        if (*s == '\\')
            cmn_sbuf_add(b, "\\\\", 2);
        else if (*s == '\n')
            cmn_sbuf_add(b, "\\n", 2);
        else if (quote && *s == '"')
            cmn_sbuf_add(b, "\\\"", 2);
        else
            cmn_sbuf_add(b, s, 1);
    }
}

/* ---- names ---- */

static int is_alpha_(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static int valid_name(const char *s, int colon_ok)
{
    if (!s || !(is_alpha_(*s) || (colon_ok && *s == ':')))
        return 0;
    for (s++; *s; s++)
        if (!(is_alpha_(*s) || is_digit(*s) || (colon_ok && *s == ':')))
            return 0;
    return 1;
}

static int check_desc(const cmn_metric_desc_t *d, size_t *nlabels, cmn_errbuf_t *eb)
{
    size_t n = 0;

    if (!valid_name(d->name, 1))
        return cmn_errf(eb, CMN_ECONFIG, "metric name '%s' is not [a-zA-Z_:][a-zA-Z0-9_:]*",
                        d->name ? d->name : "(null)");
    if (d->type != CMN_METRIC_COUNTER && d->type != CMN_METRIC_GAUGE &&
        d->type != CMN_METRIC_HISTOGRAM)
        return cmn_errf(eb, CMN_ECONFIG, "metric %s: unknown type %d", d->name, (int)d->type);
    if (d->decimals > CMN_METRICS_MAX_DECIMALS)
        return cmn_errf(eb, CMN_ECONFIG, "metric %s: %u decimals, over the limit of %d", d->name,
                        d->decimals, CMN_METRICS_MAX_DECIMALS);
    for (; d->labels && d->labels[n]; n++) {
        const char *l = d->labels[n];
        if (n == CMN_METRICS_MAX_LABELS)
            return cmn_errf(eb, CMN_ECONFIG, "metric %s: more than %d labels", d->name,
                            CMN_METRICS_MAX_LABELS);
        if (!valid_name(l, 0) || strncmp(l, "__", 2) == 0)
            return cmn_errf(eb, CMN_ECONFIG, "metric %s: label name '%s' is not valid", d->name, l);
        if (d->type == CMN_METRIC_HISTOGRAM && strcmp(l, "le") == 0)
            return cmn_errf(eb, CMN_ECONFIG, "metric %s: 'le' is the histogram's own label",
                            d->name);
        for (size_t j = 0; j < n; j++)
            if (strcmp(d->labels[j], l) == 0)
                return cmn_errf(eb, CMN_ECONFIG, "metric %s: label '%s' twice", d->name, l);
    }
    if (d->type != CMN_METRIC_HISTOGRAM && d->nbounds)
        return cmn_errf(eb, CMN_ECONFIG, "metric %s: bucket bounds on a metric not a histogram",
                        d->name);
    if (d->nbounds > CMN_METRICS_MAX_BUCKETS)
        return cmn_errf(eb, CMN_ECONFIG, "metric %s: %zu buckets, over the limit of %d", d->name,
                        d->nbounds, CMN_METRICS_MAX_BUCKETS);
    if (d->nbounds && !d->bounds)
        return cmn_errf(eb, CMN_ECONFIG, "metric %s: %zu bounds but no array", d->name, d->nbounds);
    for (size_t i = 1; i < d->nbounds; i++)
        if (d->bounds[i] <= d->bounds[i - 1])
            return cmn_errf(eb, CMN_ECONFIG, "metric %s: bucket bounds not strictly ascending",
                            d->name);
    *nlabels = n;
    return 0;
}

/* ---- registry ---- */

int cmn_metrics_new(cmn_metrics_t **out)
{
    cmn_metrics_t *m = calloc(1, sizeof(*m));

    if (!m)
        return -ENOMEM;
    pthread_mutex_init(&m->mu, NULL);
    pthread_mutex_init(&m->render_mu, NULL);
    *out = m;
    return 0;
}

static void metric_free(cmn_metric_t *mt)
{
    cmn_series_t *s, *next;

    for (s = mt->series; s; s = next) {
        next = s->next;
        free(s->labels);
        free(s);
    }
    for (size_t i = 0; i < mt->nlabels; i++)
        free(mt->labels[i]);
    free(mt->bounds);
    free(mt->help);
    free(mt->name);
    free(mt);
}

void cmn_metrics_free(cmn_metrics_t *m)
{
    cmn_metric_t *mt, *next;

    if (!m)
        return;
    for (mt = m->head; mt; mt = next) {
        next = mt->next;
        metric_free(mt);
    }
    pthread_mutex_destroy(&m->render_mu);
    pthread_mutex_destroy(&m->mu);
    free(m);
}

static cmn_series_t *series_new(cmn_metric_t *mt, char *labels)
{
    size_t nb = mt->type == CMN_METRIC_HISTOGRAM ? mt->nbounds + 1 : 0;
    cmn_series_t *s = calloc(1, sizeof(*s) + nb * sizeof(s->b[0]));

    if (!s)
        return NULL;
    s->mt = mt;
    s->labels = labels;
    atomic_init(&s->v, 0);
    for (size_t i = 0; i < nb; i++)
        atomic_init(&s->b[i], 0);
    return s;
}

/* Called with the registry's lock held. */
static void series_link(cmn_metric_t *mt, cmn_series_t *s)
{
    CMN_QUEUE_APPEND(mt->series, mt->series_last, s, next);
    mt->nseries++;
}

static char *dup_or_empty(const char *s)
{
    return strdup(s ? s : "");
}

int cmn_metrics_add(cmn_metrics_t *m, const cmn_metric_desc_t *d, cmn_metric_t **out,
                    cmn_errbuf_t *eb)
{
    cmn_metric_t *mt, *it;
    size_t nlabels = 0;
    int rc;

    rc = check_desc(d, &nlabels, eb);
    if (rc < 0)
        return rc;
    mt = calloc(1, sizeof(*mt));
    if (!mt)
        return cmn_errf(eb, -ENOMEM, "metric %s: out of memory", d->name);
    mt->reg = m;
    mt->type = d->type;
    mt->decimals = d->decimals;
    mt->name = strdup(d->name);
    mt->help = dup_or_empty(d->help);
    if (!mt->name || !mt->help)
        goto fail_oom;
    for (; mt->nlabels < nlabels; mt->nlabels++) {
        mt->labels[mt->nlabels] = strdup(d->labels[mt->nlabels]);
        if (!mt->labels[mt->nlabels])
            goto fail_oom;
    }
    if (d->nbounds) {
        mt->bounds = malloc(d->nbounds * sizeof(*mt->bounds));
        if (!mt->bounds)
            goto fail_oom;
        memcpy(mt->bounds, d->bounds, d->nbounds * sizeof(*mt->bounds));
        mt->nbounds = d->nbounds;
    }
    /* A metric without labels has exactly one series: made now, so it renders 0 from the start. */
    if (nlabels == 0) {
        char *empty = strdup("");
        cmn_series_t *s = empty ? series_new(mt, empty) : NULL;
        if (!s) {
            free(empty);
            goto fail_oom;
        }
        series_link(mt, s);
    }

    pthread_mutex_lock(&m->mu);
    for (it = m->head; it; it = it->next) {
        if (strcmp(it->name, mt->name) == 0) {
            pthread_mutex_unlock(&m->mu);
            metric_free(mt);
            return cmn_errf(eb, CMN_ECONFIG, "metric %s registered twice", d->name);
        }
    }
    CMN_QUEUE_APPEND(m->head, m->last, mt, next);
    pthread_mutex_unlock(&m->mu);
    if (out)
        *out = mt;
    return 0;

fail_oom:
    metric_free(mt);
    return cmn_errf(eb, -ENOMEM, "metric %s: out of memory", d->name);
}

int cmn_metrics_add_series(cmn_metrics_t *m, const cmn_metric_desc_t *d, cmn_series_t **out,
                           cmn_errbuf_t *eb)
{
    cmn_metric_t *mt;
    int rc;

    if (d->labels && d->labels[0])
        return cmn_errf(eb, CMN_ECONFIG, "metric %s: labels, so no single series", d->name);
    rc = cmn_metrics_add(m, d, &mt, eb);
    if (rc == 0)
        *out = mt->series; /* made by cmn_metrics_add */
    return rc;
}

int cmn_metrics_add_slots(cmn_metrics_t *m, const cmn_metric_slot_t *t, size_t n, void *base,
                          cmn_errbuf_t *eb)
{
    int rc = 0;

    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = cmn_metrics_add_series(m, &t[i].d, (cmn_series_t **)((char *)base + t[i].series), eb);
    return rc;
}

static char *labels_render(const cmn_metric_t *mt, const char *const *values, int *err)
{
    cmn_sbuf_t b = {0};

    for (size_t i = 0; i < mt->nlabels; i++) {
        if (!values[i] || strlen(values[i]) > CMN_METRICS_MAX_LABEL_LEN) {
            free(b.p);
            *err = CMN_ECONFIG;
            return NULL;
        }
        if (i)
            cmn_sbuf_add(&b, ",", 1);
        cmn_sbuf_puts(&b, mt->labels[i]);
        cmn_sbuf_add(&b, "=\"", 2);
        sb_escaped(&b, values[i], 1);
        cmn_sbuf_add(&b, "\"", 1);
    }
    if (!b.oom && !b.p)
        b.p = strdup("");
    if (b.oom || !b.p) {
        free(b.p);
        *err = -ENOMEM;
        return NULL;
    }
    return b.p;
}

int cmn_metric_series(cmn_metric_t *mt, const char *const *values, cmn_series_t **out)
{
    cmn_metrics_t *m = mt->reg;
    cmn_series_t *s;
    char *labels;
    int err = 0;

    if (mt->nlabels && !values)
        return CMN_ECONFIG;
    labels = labels_render(mt, values, &err);
    if (!labels)
        return err;
    pthread_mutex_lock(&m->mu);
    for (s = mt->series; s; s = s->next)
        if (strcmp(s->labels, labels) == 0)
            break;
    if (!s) {
        if (mt->nseries >= CMN_METRICS_MAX_SERIES) {
            pthread_mutex_unlock(&m->mu);
            free(labels);
            return CMN_EOVERLOAD;
        }
        s = series_new(mt, labels);
        if (!s) {
            pthread_mutex_unlock(&m->mu);
            free(labels);
            return -ENOMEM;
        }
        series_link(mt, s);
        labels = NULL;
    }
    pthread_mutex_unlock(&m->mu);
    free(labels);
    *out = s;
    return 0;
}

/* ---- updates: relaxed atomics, no lock ---- */

void cmn_series_add(cmn_series_t *s, uint64_t n)
{
    atomic_fetch_add_explicit(&s->v, n, memory_order_relaxed);
}

void cmn_series_inc(cmn_series_t *s)
{
    atomic_fetch_add_explicit(&s->v, 1, memory_order_relaxed);
}

void cmn_series_sub(cmn_series_t *s, uint64_t n)
{
    atomic_fetch_sub_explicit(&s->v, n, memory_order_relaxed);
}

void cmn_series_set(cmn_series_t *s, int64_t v)
{
    atomic_store_explicit(&s->v, (uint64_t)v, memory_order_relaxed);
}

void cmn_series_observe(cmn_series_t *s, uint64_t v)
{
    const cmn_metric_t *mt = s->mt;
    size_t lo = 0, hi = mt->nbounds;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (mt->bounds[mid] >= v)
            hi = mid;
        else
            lo = mid + 1;
    }
    atomic_fetch_add_explicit(&s->b[lo], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->v, v, memory_order_relaxed);
}

int64_t cmn_series_value(const cmn_series_t *s)
{
    return (int64_t)atomic_load_explicit(&s->v, memory_order_relaxed);
}

int cmn_metrics_on_collect(cmn_metrics_t *m, void (*cb)(void *arg), void *arg)
{
    int rc = 0;

    pthread_mutex_lock(&m->render_mu);
    if (m->ncollect == CMN_METRICS_MAX_COLLECT) {
        rc = CMN_EOVERLOAD;
    } else {
        m->collect[m->ncollect].cb = cb;
        m->collect[m->ncollect].arg = arg;
        m->ncollect++;
    }
    pthread_mutex_unlock(&m->render_mu);
    return rc;
}

/* ---- rendering ---- */

/* `name{labels}` or `name{labels,extra}`; |suffix| goes after the name (_bucket, _sum, _count). */
static void sb_sample_name(cmn_sbuf_t *b, const cmn_metric_t *mt, const char *suffix,
                           const char *labels, const char *extra)
{
    cmn_sbuf_puts(b, mt->name);
    cmn_sbuf_puts(b, suffix);
    if (*labels || extra) {
        cmn_sbuf_add(b, "{", 1);
        cmn_sbuf_puts(b, labels);
        if (*labels && extra)
            cmn_sbuf_add(b, ",", 1);
        if (extra)
            cmn_sbuf_puts(b, extra);
        cmn_sbuf_add(b, "}", 1);
    }
    cmn_sbuf_add(b, " ", 1);
}

static void render_histogram(cmn_sbuf_t *b, const cmn_metric_t *mt, const cmn_series_t *s)
{
    uint64_t cum = 0;

    for (size_t i = 0; i <= mt->nbounds; i++) {
        cmn_sbuf_t le = {0};
        cum += atomic_load_explicit(&s->b[i], memory_order_relaxed);
        cmn_sbuf_puts(&le, "le=\"");
        if (i < mt->nbounds)
            sb_fixed(&le, mt->bounds[i], mt->decimals, 0);
        else
            cmn_sbuf_puts(&le, "+Inf");
        cmn_sbuf_puts(&le, "\"");
        if (le.oom) {
            b->oom = 1;
            free(le.p);
            return;
        }
        sb_sample_name(b, mt, "_bucket", s->labels, le.p);
        free(le.p);
        sb_u64(b, cum);
        cmn_sbuf_add(b, "\n", 1);
    }
    sb_sample_name(b, mt, "_sum", s->labels, NULL);
    sb_fixed(b, atomic_load_explicit(&s->v, memory_order_relaxed), mt->decimals, 0);
    cmn_sbuf_add(b, "\n", 1);
    sb_sample_name(b, mt, "_count", s->labels, NULL);
    sb_u64(b, cum);
    cmn_sbuf_add(b, "\n", 1);
}

static const char *type_name(cmn_metric_type_t t)
{
    switch (t) {
    case CMN_METRIC_COUNTER:
        return "counter";
    case CMN_METRIC_GAUGE:
        return "gauge";
    case CMN_METRIC_HISTOGRAM:
        return "histogram";
    }
    return "untyped";
}

static void render_metric(cmn_sbuf_t *b, const cmn_metric_t *mt)
{
    cmn_sbuf_puts(b, "# HELP ");
    cmn_sbuf_puts(b, mt->name);
    cmn_sbuf_add(b, " ", 1);
    sb_escaped(b, mt->help, 0);
    cmn_sbuf_puts(b, "\n# TYPE ");
    cmn_sbuf_puts(b, mt->name);
    cmn_sbuf_add(b, " ", 1);
    cmn_sbuf_puts(b, type_name(mt->type));
    cmn_sbuf_add(b, "\n", 1);
    for (const cmn_series_t *s = mt->series; s; s = s->next) {
        uint64_t v = atomic_load_explicit(&s->v, memory_order_relaxed);
        if (mt->type == CMN_METRIC_HISTOGRAM) {
            render_histogram(b, mt, s);
            continue;
        }
        sb_sample_name(b, mt, "", s->labels, NULL);
        if (mt->type == CMN_METRIC_GAUGE && (int64_t)v < 0)
            sb_fixed(b, (uint64_t)0 - v, mt->decimals, 1);
        else
            sb_fixed(b, v, mt->decimals, 0);
        cmn_sbuf_add(b, "\n", 1);
    }
}

int cmn_metrics_render(cmn_metrics_t *m, char **out, size_t *len)
{
    cmn_sbuf_t b = {0};

    pthread_mutex_lock(&m->render_mu);
    for (size_t i = 0; i < m->ncollect; i++)
        m->collect[i].cb(m->collect[i].arg);
    pthread_mutex_lock(&m->mu);
    for (const cmn_metric_t *mt = m->head; mt; mt = mt->next)
        render_metric(&b, mt);
    pthread_mutex_unlock(&m->mu);
    pthread_mutex_unlock(&m->render_mu);
    if (!b.oom && !b.p)
        b.p = strdup("");
    if (b.oom || !b.p) {
        free(b.p);
        return -ENOMEM;
    }
    *out = b.p;
    *len = b.len;
    return 0;
}
