/* --metrics-push: the final exposition to a Prometheus Pushgateway (metrics.h). One HTTP PUT to
 * URL/metrics/job/loadgen with libcurl: a PUT replaces every metric of the job's group, so a
 * batch of runs leaves the last run's values, not a mix. */
#include "metrics.h"

#include "cmn/metrics.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The whole push, connection included: a Pushgateway that does not answer must not hold the end
 * of a run for long. */
#define PUSH_TIMEOUT_MS 10000L

typedef struct {
    const char *p;
    size_t left;
} body_t;

static size_t read_body(char *dst, size_t size, size_t nmemb, void *arg)
{
    body_t *b = arg;
    size_t n = size * nmemb < b->left ? size * nmemb : b->left;

    memcpy(dst, b->p, n);
    b->p += n;
    b->left -= n;
    return n;
}

static size_t drop(char *p, size_t size, size_t nmemb, void *arg)
{
    (void)p;
    (void)arg;
    return size * nmemb;
}

int lg__metrics_push(const char *url, const char *body, size_t len, cmn_errbuf_t *eb)
{
    char full[2048], cerr[CURL_ERROR_SIZE] = "";
    size_t ulen = strlen(url);
    struct curl_slist *hdr = NULL;
    body_t b = {body, len};
    long status = 0;
    CURL *c;
    CURLcode cc;

    while (ulen && url[ulen - 1] == '/')
        ulen--;
    if (ulen + sizeof("/metrics/job/loadgen") > sizeof(full))
        return cmn_errf(eb, CMN_ECONFIG, "--metrics-push: the URL is longer than %zu bytes",
                        sizeof(full) - sizeof("/metrics/job/loadgen"));
    snprintf(full, sizeof(full), "%.*s/metrics/job/loadgen", (int)ulen, url);
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0)
        return cmn_errf(eb, -ENOMEM, "--metrics-push %s: libcurl cannot start", full);
    c = curl_easy_init();
    if (!c)
        return cmn_errf(eb, -ENOMEM, "--metrics-push %s: libcurl cannot start", full);
    hdr = curl_slist_append(hdr, "Content-Type: " CMN_METRICS_CONTENT_TYPE);
    curl_easy_setopt(c, CURLOPT_URL, full);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(c, CURLOPT_READFUNCTION, read_body);
    curl_easy_setopt(c, CURLOPT_READDATA, &b);
    curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)len);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, drop);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, PUSH_TIMEOUT_MS);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, cerr);
    cc = curl_easy_perform(c);
    if (cc == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(hdr);
    curl_easy_cleanup(c);
    if (cc != CURLE_OK)
        return cmn_errf(eb, -EIO, "--metrics-push %s: %s", full,
                        cerr[0] ? cerr : curl_easy_strerror(cc));
    if (status < 200 || status > 299)
        return cmn_errf(eb, -EPROTO, "--metrics-push %s: the server answered HTTP %ld", full,
                        status);
    return 0;
}
