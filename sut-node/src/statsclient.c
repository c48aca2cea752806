/* The --stats client (statsclient.h): Hello, StatsRequest, print, Goodbye. */
#include "statsclient.h"

#include "cmn/conn.h"
#include "cmn/log.h"
#include "cmn/msg.h"
#include "cmn/net.h"
#include "cmpr/cmpr.h"

#include <stdio.h>
#include <string.h>

typedef struct {
    cmn_conn_t conn;
    uv_timer_t timer;
    const char *addr;
    int status;
} stats_client_t;

static void print_stats(const Nsut__Stats *s)
{
    char name[300];

    printf("node_name %s\n",
           cmn_sanitize(s->node_name ? s->node_name : "", s->node_name ? strlen(s->node_name) : 0,
                        name, sizeof(name)));
    printf("uptime_s %.3f\n", (double)s->uptime_ns / 1e9);
    printf("connections_total %llu\nconnections_open %u\n",
           (unsigned long long)s->connections_total, s->connections_open);
    printf("queries %llu\nsamples %llu\nbatches %llu\n", (unsigned long long)s->queries,
           (unsigned long long)s->samples, (unsigned long long)s->batches);
    printf("bytes_in %llu\nbytes_out %llu\n", (unsigned long long)s->bytes_in,
           (unsigned long long)s->bytes_out);
    printf("decode_s %.6f\ninfer_s %.6f\nencode_s %.6f\n", (double)s->decode_ns / 1e9,
           (double)s->infer_ns / 1e9, (double)s->encode_ns / 1e9);
    printf("errors %llu\nsamples_failed %llu\ninflight_samples %u\n", (unsigned long long)s->errors,
           (unsigned long long)s->samples_failed, s->inflight_samples);
}

static void on_frame(cmn_conn_t *c, const cmn_frame_t *f)
{
    stats_client_t *sc = c->data;
    cmn_msg_limits_t lim = cmn_msg_limits_default();
    ProtobufCMessage *m = NULL;
    cmn_errbuf_t eb;
    char txt[300];

    if (cmn_msg_unpack(f, &lim, NULL, &m, &eb) < 0) {
        fprintf(stderr, "sut-node --stats %s: bad %s frame: %s\n", sc->addr,
                cmn_msg_type_name(f->hdr.type), eb.msg);
        cmn_conn_close(c, CMN_EBADMSG);
        return;
    }
    if (f->hdr.type == CMN_MSG_HELLO_ACK) {
        Nsut__StatsRequest r = NSUT__STATS_REQUEST__INIT;
        (void)cmn_conn_send(c, CMN_MSG_STATS_REQUEST, &r.base, NULL, 0, NULL, NULL);
    } else if (f->hdr.type == CMN_MSG_STATS) {
        Nsut__Goodbye g = NSUT__GOODBYE__INIT;
        print_stats((const Nsut__Stats *)m);
        sc->status = 0;
        g.reason = (char *)"stats read";
        (void)cmn_conn_send(c, CMN_MSG_GOODBYE, &g.base, NULL, 0, NULL, NULL);
        cmn_conn_shutdown(c, CMN_ECLOSED);
    } else if (f->hdr.type == CMN_MSG_ERROR) {
        const Nsut__Error *e = (const Nsut__Error *)m;
        fprintf(stderr, "sut-node --stats %s: the node refused: %s\n", sc->addr,
                cmn_sanitize(e->message ? e->message : "", e->message ? strlen(e->message) : 0, txt,
                             sizeof(txt)));
        cmn_conn_close(c, CMN_EPEER);
    }
    cmn_msg_free(m, NULL);
}

static void on_close(cmn_conn_t *c, int reason)
{
    stats_client_t *sc = c->data;

    if (sc->status != 0 && reason != CMN_EPEER && reason != CMN_EBADMSG)
        fprintf(stderr, "sut-node --stats %s: %s\n", sc->addr,
                cmn_conn_last_error(c)[0] ? cmn_conn_last_error(c) : cmn_strerror(reason));
    uv_close((uv_handle_t *)&sc->timer, NULL);
}

static void on_connect(cmn_conn_t *c, int status)
{
    Nsut__Hello h = NSUT__HELLO__INIT;
    Nsut__Codec none = NSUT__CODEC__CODEC_NONE;

    if (status < 0 || cmn_conn_start(c) < 0) {
        cmn_conn_close(c, status < 0 ? status : CMN_ECLOSED);
        return;
    }
    h.version_min = h.version_max = CMN_PROTOCOL_VERSION;
    h.n_sample_codecs = h.n_result_codecs = 1;
    h.sample_codecs = h.result_codecs = &none;
    h.client_name = (char *)"sut-node --stats";
    (void)cmn_conn_send(c, CMN_MSG_HELLO, &h.base, NULL, 0, NULL, NULL);
}

static void on_timeout(uv_timer_t *t)
{
    stats_client_t *sc = t->data;
    cmn_conn_close(&sc->conn, CMN_ETIMEOUT);
}

int sut__stats_query(const char *addr, unsigned timeout_ms)
{
    static const cmn_conn_callbacks_t cb = {on_frame, NULL, on_close, NULL};
    cmn_frame_limits_t lim = cmn_frame_limits_default();
    struct sockaddr_storage ss;
    stats_client_t sc;
    cmn_errbuf_t eb;
    uv_loop_t loop;
    int rc;

    if (cmn_addr_parse(addr, &ss, &eb) < 0) {
        fprintf(stderr, "sut-node --stats: %s\n", eb.msg);
        return 2;
    }
    memset(&sc, 0, sizeof(sc));
    sc.addr = addr;
    sc.status = 1;
    if (uv_loop_init(&loop) != 0)
        return 1;
    rc = cmn_conn_init(&loop, &sc.conn, &cb, NULL, &lim);
    if (rc < 0) {
        uv_loop_close(&loop);
        return 1;
    }
    sc.conn.data = &sc;
    uv_timer_init(&loop, &sc.timer);
    sc.timer.data = &sc;
    uv_timer_start(&sc.timer, on_timeout, timeout_ms, 0);
    rc = cmn_conn_connect(&sc.conn, (struct sockaddr *)&ss, on_connect);
    if (rc < 0)
        cmn_conn_close(&sc.conn, rc);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    return sc.status;
}
