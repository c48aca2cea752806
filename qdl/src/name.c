/* Name(): a NameRequest to every node on every call, the replies gathered into
 * "Network SUT (<n> nodes: a, b, c)". Duplicate names are an error naming both nodes; a node that
 * is down is listed as down; with no node answering Name() fails. Calls wait their turn. */
#include "qdl_internal.h"

#include "cmn/clock.h"

#include <stdio.h>
#include <string.h>

int qdl__name_start(qdl_t *q, qdl_req_t *r)
{
    Nsut__NameRequest nr = NSUT__NAME_REQUEST__INIT;
    size_t i, k, asked = 0, local = 0, cpn = q->cfg.connections_per_node;

    r->start_ns = cmn_now_ns();
    r->request_id = ++q->name_seq;
    nr.request_id = r->request_id;
    q->name_req = r;
    for (i = 0; i < q->n_nodes; i++) {
        qdl_node_t *nd = &q->nodes[i];
        nd->name_pending = 0;
        nd->name_reply[0] = '\0';
        for (k = 0; k < cpn; k++) {
            qdl_conn_t *qc = &nd->conns[k];
            if (qc->state != QC_READY)
                continue;
            if (nd->endpoint) {
                /* Named by its address and dialect: nothing to ask it (an OpenAI-compatible
                 * engine has no name of its own); listed while it is up. */
                snprintf(nd->name_reply, sizeof(nd->name_reply), "%s", nd->name);
                local++;
                break;
            }
            if (cmn_conn_send(&qc->c, CMN_MSG_NAME_REQUEST, &nr.base, NULL, 0, NULL, NULL) == 0) {
                nd->name_pending = 1;
                asked++;
                break;
            }
        }
    }
    if (asked == 0 && local > 0) {
        qdl__name_finish(q, 0, NULL);
        return 0;
    }
    if (asked == 0) {
        q->name_req = NULL;
        cmn_errf(r->eb, CMN_ENONODE, "Name(): no sut-node is reachable");
        qdl__req_done(r, CMN_ENONODE);
        return CMN_ENONODE;
    }
    return 0;
}

/* "nodes X and Y both report the name 'n'" into |eb|, or 0 when the names are unique. */
static int check_unique(const qdl_t *q, cmn_errbuf_t *eb)
{
    size_t i, j;

    for (i = 0; i < q->n_nodes; i++) {
        const char *a = q->nodes[i].name_reply;
        if (!a[0])
            continue;
        for (j = i + 1; j < q->n_nodes; j++)
            if (strcmp(a, q->nodes[j].name_reply) == 0)
                return cmn_errf(eb, CMN_EDUPNAME,
                                "Name(): nodes %s and %s both report the name '%s'; node names "
                                "must be unique",
                                q->nodes[i].address, q->nodes[j].address, a);
    }
    return 0;
}

/* Writes the answer into r->buf; returns how many nodes answered. */
static size_t format_name(const qdl_t *q, qdl_req_t *r)
{
    char down[512] = "";
    size_t i, j = 0, off, doff = 0, answered = 0;
    int endpoints = 0;

    for (i = 0; i < q->n_nodes; i++) {
        answered += q->nodes[i].name_reply[0] != '\0';
        endpoints |= q->nodes[i].endpoint;
    }
    /* "Network SUT" only when every node is a sut-node across the network (qdl/README.md). */
    off =
        (size_t)snprintf(r->buf, r->len, "%s SUT (%zu node%s: ", endpoints ? "Endpoint" : "Network",
                         answered, answered == 1 ? "" : "s");
    for (i = 0; i < q->n_nodes && off < r->len; i++) {
        if (!q->nodes[i].name_reply[0]) {
            if (doff < sizeof(down))
                doff += (size_t)snprintf(down + doff, sizeof(down) - doff, "%s%s", doff ? ", " : "",
                                         q->nodes[i].address);
            continue;
        }
        off += (size_t)snprintf(r->buf + off, r->len - off, "%s%s", j++ ? ", " : "",
                                q->nodes[i].name_reply);
    }
    if (off < r->len)
        snprintf(r->buf + off, r->len - off, "%s%s)", down[0] ? "; down: " : "", down);
    return answered;
}

void qdl__name_finish(qdl_t *q, int rc, const char *why)
{
    qdl_req_t *r = q->name_req;

    if (!r)
        return;
    q->name_req = NULL;
    r->duration_ns = cmn_now_ns() - r->start_ns;
    if (rc == 0)
        rc = check_unique(q, r->eb);
    if (rc == 0 && format_name(q, r) == 0)
        rc = cmn_errf(r->eb, CMN_ENONODE, "Name(): no node answered");
    else if (rc < 0 && why)
        cmn_errf(r->eb, rc, "%s", why);
    qdl__req_done(r, rc);
    /* The next queued Name() (one that cannot start is answered by name_start). */
    while (q->name_queue) {
        qdl_req_t *next = q->name_queue;
        q->name_queue = (qdl_req_t *)next->link.next;
        if (qdl__name_start(q, next) == 0)
            break;
    }
}

static void check_done(qdl_t *q)
{
    size_t i;

    if (!q->name_req)
        return;
    for (i = 0; i < q->n_nodes; i++)
        if (q->nodes[i].name_pending)
            return;
    qdl__name_finish(q, 0, NULL);
}

void qdl__name_reply(qdl_t *q, qdl_node_t *nd, const Nsut__NameReply *r)
{
    if (!q->name_req || r->request_id != q->name_req->request_id || !nd->name_pending)
        return;
    cmn_sanitize(r->node_name, strlen(r->node_name), nd->name_reply, sizeof(nd->name_reply));
    nd->name_pending = 0;
    check_done(q);
}

void qdl__name_node_lost(qdl_t *q, qdl_node_t *nd)
{
    size_t k;

    if (!nd->name_pending)
        return;
    for (k = 0; k < q->cfg.connections_per_node; k++)
        if (nd->conns[k].state == QC_READY)
            return;
    nd->name_pending = 0;
    check_done(q);
}

void qdl__name_tick(qdl_t *q, uint64_t now)
{
    char missing[512] = "", why[700];
    size_t i, off = 0;

    if (!q->name_req || now - q->name_req->start_ns <= q->cfg.name_timeout_ms * 1000000u)
        return;
    for (i = 0; i < q->n_nodes; i++)
        if (q->nodes[i].name_pending && off < sizeof(missing))
            off += (size_t)snprintf(missing + off, sizeof(missing) - off, "%s%s", off ? ", " : "",
                                    q->nodes[i].address);
    snprintf(why, sizeof(why), "Name(): no NameReply within %llu ms from %s",
             (unsigned long long)q->cfg.name_timeout_ms, missing);
    qdl__name_finish(q, CMN_ETIMEOUT, why);
}

void qdl__name_fail_all(qdl_t *q)
{
    qdl__name_finish(q, CMN_ECLOSED, "QDL destroyed during Name()");
    while (q->name_queue) {
        qdl_req_t *r = q->name_queue;
        q->name_queue = (qdl_req_t *)r->link.next;
        qdl__req_done(r, CMN_ECLOSED);
    }
}
