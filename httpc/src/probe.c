/* The forwarding backends' readiness probe (httpc/probe.h), on libcurl or the lean client. */
#include "httpc/probe.h"
#include "httpc/httpc.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The start of an error body, for the reason (the engine's own words). */
#define BODY_MAX 200u

typedef struct {
    char buf[BODY_MAX + 1];
    size_t n;
} body_t;

static size_t on_body(char *p, size_t size, size_t nmemb, void *ud)
{
    body_t *b = ud;
    size_t n = size * nmemb, k = BODY_MAX - b->n;

    if (k > n)
        k = n;
    memcpy(b->buf + b->n, p, k);
    b->n += k;
    b->buf[b->n] = '\0';
    return n; /* the rest is read and dropped */
}

void httpc_text_clean(char *s, char with)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e)
            *s = with;
}

int httpc_json_message(const char *body, char *out, size_t outlen)
{
    cJSON *j = cJSON_Parse(body), *e, *m;
    int found = 0;

    if (!j)
        return 0;
    e = cJSON_GetObjectItemCaseSensitive(j, "error");
    m = cJSON_GetObjectItemCaseSensitive(j, "message");
    if (!cJSON_IsString(m) && cJSON_IsObject(e))
        m = cJSON_GetObjectItemCaseSensitive(e, "message");
    if (!cJSON_IsString(m) && cJSON_IsString(e))
        m = e;
    if (cJSON_IsString(m) && m->valuestring[0] && outlen) {
        snprintf(out, outlen, "%s", m->valuestring);
        found = 1;
    }
    cJSON_Delete(j);
    return found;
}

/* The verdict on an answer's |code| and the start of its body (made printable here). */
static int verdict(const char *url, long code, char *body, char *why, size_t whylen)
{
    char msg[BODY_MAX + 1];

    if ((code >= 200 && code <= 299) || code == 404 || code == 405 || code == 501)
        return 1;
    httpc_text_clean(body, ' ');
    if (body[0] && httpc_json_message(body, msg, sizeof(msg)))
        snprintf(why, whylen, "GET %s: HTTP %ld: %s", url, code, msg);
    else
        snprintf(why, whylen, "GET %s: HTTP %ld: %s", url, code, body[0] ? body : "(no body)");
    return 0;
}

int httpc_probe_get(const char *url, const char *const *headers, long timeout_ms, char *why,
                    size_t whylen)
{
    return httpc_probe_get_ca(url, headers, NULL, timeout_ms, why, whylen);
}

int httpc_probe_get_ca(const char *url, const char *const *headers, const char *ca_file,
                       long timeout_ms, char *why, size_t whylen)
{
    CURL *e = curl_easy_init();
    struct curl_slist *hl = NULL;
    char errbuf[CURL_ERROR_SIZE] = "";
    body_t body = {.n = 0};
    long code = 0;
    CURLcode res;

    if (!e)
        return -ENOMEM;
    for (; headers && *headers; headers++) {
        struct curl_slist *t = curl_slist_append(hl, *headers);
        if (!t) {
            curl_slist_free_all(hl);
            curl_easy_cleanup(e);
            return -ENOMEM;
        }
        hl = t;
    }
    body.buf[0] = '\0';
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &body);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    if (ca_file)
        curl_easy_setopt(e, CURLOPT_CAINFO, ca_file);
    res = curl_easy_perform(e);
    if (res == CURLE_OK)
        curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &code);
    curl_slist_free_all(hl);
    curl_easy_cleanup(e);
    if (res != CURLE_OK) {
        snprintf(why, whylen, "GET %s: %s", url, errbuf[0] ? errbuf : curl_easy_strerror(res));
        return 0;
    }
    return verdict(url, code, body.buf, why, whylen);
}

/* ---- the lean client's probe ----------------------------------------------------------------- */

typedef struct {
    httpc_h1_req_t r; /* first */
    uv_loop_t *loop;
    int done, status;
    char msg[600];
} lprobe_t;

static int lp_data(httpc_h1_req_t *r, const char *p, size_t n)
{
    (void)r;
    (void)p;
    (void)n;
    return 0; /* a 2xx answer's body: only its end matters */
}

static void lp_done(httpc_h1_req_t *r, int status, const char *msg)
{
    lprobe_t *l = (lprobe_t *)r;

    l->done = 1;
    l->status = status;
    snprintf(l->msg, sizeof(l->msg), "%s", msg ? msg : "");
    uv_stop(l->loop);
}

int httpc_probe_h1(const httpc_h1_cfg_t *cfg, const char *url, char *why, size_t whylen)
{
    uv_loop_t loop;
    httpc_h1_pool_t *p;
    lprobe_t l;
    char err[400];
    int rc;

    if ((rc = uv_loop_init(&loop)) < 0)
        return rc;
    rc = httpc_h1_pool_create(&loop, cfg, &p, err, sizeof(err));
    if (rc < 0) {
        uv_loop_close(&loop);
        snprintf(why, whylen, "GET %s: %s", url, err);
        return rc == -ENOMEM ? rc : 0;
    }
    memset(&l, 0, sizeof(l));
    l.loop = &loop;
    l.r.body = "";
    l.r.on_data = lp_data;
    l.r.on_done = lp_done;
    (void)httpc_h1_send(p, &l.r);
    while (!l.done && uv_run(&loop, UV_RUN_ONCE) != 0)
        ;
    httpc_h1_pool_close(p); /* the connection, if kept; the pool frees itself in the run below */
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    if (l.done && l.status == 0)
        return 1;
    if (l.done && l.status == HTTPC_ESTATUS) {
        /* "ADDRESS: HTTP CODE: the start of the body" */
        const char *b = strstr(l.msg, ": HTTP ");
        char body[BODY_MAX + 1] = "";
        if (b && (b = strchr(b + 7, ':')) != NULL && strcmp(b + 2, "(no body)") != 0)
            snprintf(body, sizeof(body), "%s", b + 2);
        return verdict(url, (long)l.r.http_status, body, why, whylen);
    }
    snprintf(why, whylen, "%s", l.done ? l.msg : "the probe's loop stopped");
    return 0;
}
