/* Option defaults (opts.h). The option table, parser and --help text are main.c's. */
#include "opts.h"

#include "cmn/frame.h"
#include "cmpr/cmpr.h"

#include <stdlib.h>
#include <string.h>

void sut__opts_defaults(sut_opts_t *o)
{
    memset(o, 0, sizeof(*o));
    o->backend = "null";
    o->device = "cpu";
    o->max_batch_bytes = 64u << 20;
    o->result_codec = CMPR_NONE;
    o->max_frame = CMN_FRAME_DEFAULT_MAX;
    o->max_connections = 256;
    o->max_conn_per_peer = 64;
    o->max_inflight = 0; /* sized from the engines and batch in sut__node_init */
    o->handshake_timeout_ms = 5000;
    o->frame_timeout_ms = 5000;
    o->idle_timeout_ms = 60000;
    o->write_timeout_ms = 10000;
    o->drain_timeout_ms = 30000;
    o->heartbeat_ms = 1000;
    o->response_hold_us = 20;
}

char *sut__opts_own(sut_opts_t *o, char *s)
{
    if (!s || o->n_owned == sizeof(o->owned) / sizeof(o->owned[0])) {
        free(s);
        return NULL;
    }
    o->owned[o->n_owned++] = s;
    return s;
}

void sut__opts_free(sut_opts_t *o)
{
    while (o->n_owned)
        free(o->owned[--o->n_owned]);
}
