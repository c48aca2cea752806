/* Results to frames (session.h): the records a completion pass queues on each session
 * (sut__sessions_take), a rejected sample's record, and the Response and FirstToken frames they
 * leave in (sut__sessions_flush), split only where the client's frame limit says; the records'
 * memory goes back to the pool and the budget once their frame is sent. Calls session.c only. */
#include "session.h"

#include "alloc.h"
#include "cmn/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const sut_sessions_env_t *env;
    sut_session_t *s; /* referenced until the frame is sent: its records are on its account */
    size_t cnt;
    sut_rec_t *recs[];
} sent_frame_t;

/* Records go back to the pool and their bytes to the budget and their peer's account. */
static void free_records(const sut_sessions_env_t *env, sut_rec_t **recs, size_t cnt)
{
    size_t i;
    for (i = 0; i < cnt; i++) {
        if (recs[i]->charge) {
            sut__budget_give(env->budget, recs[i]->charge);
            sut__budget_unattribute(&recs[i]->s->peer, recs[i]->charge);
        }
        cmn_pool_put(env->pool, recs[i]->data);
        cmn_pool_put(env->pool, recs[i]->error);
        cmn_pool_put(env->pool, recs[i]);
    }
}

/* ucx:// copies a frame of several results into one buffer (conn.h): the copy is charged to the
 * budget and the records are freed as soon as it is made (on_frame_sent runs then), so the bytes
 * are held once and counted once. Charged whatever the budget's state: it replaces records the
 * budget holds already. */
static void *copy_alloc(void *ctx, size_t size)
{
    void *p = sut__malloc(size);

    if (p)
        sut__budget_charge(ctx, size);
    return p;
}

static void copy_free(void *ctx, void *p, size_t size)
{
    sut__budget_give(ctx, size);
    free(p);
}

void sut__session_copy_hooks(cmn_conn_options_t *o, sut_budget_t *b)
{
    o->copy_alloc = copy_alloc;
    o->copy_free = copy_free;
    o->copy_ctx = b;
}

static void on_frame_sent(void *arg, int status)
{
    sent_frame_t *f = arg;

    (void)status;
    free_records(f->env, f->recs, f->cnt);
    sut__session_release(f->s);
    free(f);
}

/* The most result bytes in one frame of several results over a transport that copies such a
 * frame (ucx://: cmn_conn_copies_segments): a larger result goes alone, sent from where it is,
 * and the copies stay small. */
#define COPIED_FRAME_MAX (64u * 1024u)

/* The failures' messages in one frame, at most: a client sizes its metadata limit for ~80 bytes
 * a result plus 4 KiB (the QDL does), so the messages must fit in that 4 KiB. */
#define FRAME_ERROR_TEXT_MAX 2048u

/* How many records from |start| fit one frame under the client's limit (at least one). The
 * metadata costs at most ~40 bytes per result; 64 keeps a margin. */
static size_t frame_span(const sut_session_t *s, sut_rec_t **recs, size_t start, size_t cnt,
                         uint64_t *bytes)
{
    uint64_t max = s->result_max_frame;
    size_t end = start, text = 0;

    if (cmn_conn_copies_segments(&s->conn) && max > COPIED_FRAME_MAX)
        max = COPIED_FRAME_MAX;
    *bytes = 0;
    while (end < cnt) {
        size_t t = recs[end]->error ? strlen(recs[end]->error) + 4 : 0;
        if (end > start && (*bytes + recs[end]->wire_size + 64 * (end - start + 1) > max ||
                            text + t > FRAME_ERROR_TEXT_MAX))
            break;
        text += t;
        *bytes += recs[end++]->wire_size;
    }
    return end - start;
}

/* One Response or FirstToken frame of |k| records; takes ownership of them. */
static int send_frame(sut_session_t *s, unsigned type, sut_rec_t **recs, size_t k)
{
    const sut_sessions_env_t *env = &s->ss->env;
    sent_frame_t *f = sut__malloc(sizeof(*f) + k * sizeof(f->recs[0]));
    Nsut__Result *res = sut__calloc(k, sizeof(*res));
    Nsut__Result **rp = sut__calloc(k, sizeof(*rp));
    struct iovec *iov = sut__calloc(k, sizeof(*iov));
    Nsut__Response resp = NSUT__RESPONSE__INIT;
    Nsut__FirstToken tok = NSUT__FIRST_TOKEN__INIT;
    size_t i;
    int rc = -ENOMEM;

    if (!f || !res || !rp || !iov)
        goto fail;
    f->env = env;
    f->s = s;
    f->cnt = k;
    for (i = 0; i < k; i++) {
        sut_rec_t *r = recs[i];
        nsut__result__init(&res[i]);
        res[i].id = r->wire_id;
        res[i].status = (Nsut__Status)r->status;
        res[i].codec = (Nsut__Codec)r->codec;
        res[i].raw_size = r->raw_size;
        res[i].wire_size = r->wire_size;
        res[i].n_tokens = r->n_tokens;
        res[i].node_queue_ns = r->queue_ns;
        res[i].node_backend_ns = r->backend_ns;
        if (r->error)
            res[i].error = r->error;
        rp[i] = &res[i];
        iov[i].iov_base = r->data;
        iov[i].iov_len = (size_t)r->wire_size;
        f->recs[i] = r;
    }
    resp.n_results = tok.n_results = k;
    resp.results = tok.results = rp;
    s->refs++; /* the frame's, given back by on_frame_sent */
    rc = cmn_conn_send(&s->conn, type,
                       type == CMN_MSG_RESPONSE ? &resp.base : (const ProtobufCMessage *)&tok.base,
                       iov, k, on_frame_sent, f);
    if (rc < 0) {
        s->refs--;
        goto fail;
    }
    free(res);
    free(rp);
    free(iov);
    return 0;

fail:
    free(f);
    free(res);
    free(rp);
    free(iov);
    free_records(env, recs, k);
    return rc;
}

/* Sends the records as one frame, split only where a frame would exceed the client's limit. */
static void send_records(sut_session_t *s, unsigned type, sut_rec_t **recs, size_t cnt)
{
    size_t start = 0;

    while (start < cnt) {
        uint64_t bytes;
        size_t k = frame_span(s, recs, start, cnt, &bytes);
        int rc = send_frame(s, type, recs + start, k);

        start += k;
        if (rc == -ENOMEM) {
            free_records(&s->ss->env, recs + start, cnt - start);
            sut__session_fail(s, rc, NSUT__ERROR_CODE__ERROR_INTERNAL,
                              "out of memory for a result frame");
            return;
        }
        if (rc < 0 && rc != CMN_ECLOSED)
            cmn_log_error("%s: cannot send %s: %s", cmn_conn_peer(&s->conn),
                          cmn_msg_type_name(type), cmn_strerror(rc));
        if (rc == 0)
            s->ss->st.bytes_out += bytes;
    }
}

/* Sends what the session has queued: first tokens, then results. */
void sut__session_flush_results(sut_session_t *s)
{
    /* First tokens before results: a sample's FirstToken must precede its Result. */
    if (s->n_tok) {
        send_records(s, CMN_MSG_FIRST_TOKEN, s->pend_tok, s->n_tok);
        s->n_tok = 0;
    }
    if (s->n_res) {
        send_records(s, CMN_MSG_RESPONSE, s->pend_res, s->n_res);
        s->n_res = 0;
    }
}

static int pend_push(sut_rec_t ***arr, size_t *cnt, size_t *cap, sut_rec_t *r)
{
    if (*cnt == *cap) {
        size_t ncap = *cap ? *cap * 2 : 64;
        sut_rec_t **na = sut__realloc(*arr, ncap * sizeof(*na));
        if (!na)
            return -ENOMEM;
        *arr = na;
        *cap = ncap;
    }
    (*arr)[(*cnt)++] = r;
    return 0;
}

void sut__sessions_take(sut_sessions_t *ss, sut_rec_t *rec)
{
    sut_session_t *s = rec->s;
    int is_result = rec->h.kind == SUT_REC_RESULT;
    int rc;

    if (is_result) {
        /* The sample is done for the node whether or not its connection is still there. */
        if (rec->in_charge)
            sut__budget_unattribute(&s->peer, rec->in_charge);
        cmn_idmap_del(&s->ids, rec->wire_id);
        s->inflight--;
        if (rec->status == NSUT__STATUS__STATUS_BACKEND_ERROR)
            ss->st.samples_failed++;
        else if (rec->status == NSUT__STATUS__STATUS_REJECTED)
            ss->st.samples_rejected++; /* its result over the budget (workers.c) */
    }
    if (s->dead) {
        free_records(&ss->env, &rec, 1);
    } else {
        rc = is_result ? pend_push(&s->pend_res, &s->n_res, &s->cap_res, rec)
                       : pend_push(&s->pend_tok, &s->n_tok, &s->cap_tok, rec);
        if (rc < 0) {
            free_records(&ss->env, &rec, 1);
            sut__session_fail(s, rc, NSUT__ERROR_CODE__ERROR_INTERNAL,
                              "out of memory for queued results");
        }
        if (!s->touched) {
            s->touched = 1;
            s->refs++; /* keeps the session while it is on the touched list */
            s->touched_next = ss->touched;
            ss->touched = s;
        }
    }
    if (is_result)
        sut__session_release(s); /* the sample's reference */
}

void sut__sessions_flush(sut_sessions_t *ss)
{
    sut_session_t *s;

    while ((s = ss->touched) != NULL) {
        ss->touched = s->touched_next;
        s->touched = 0;
        if (!s->dead) {
            sut__session_flush_results(s);
            sut__session_update_reading(s);
        }
        sut__session_release(s);
    }
}

/* A result for a sample the node will not run (draining): the QDL sends it elsewhere. */
void sut__session_reject(sut_session_t *s, uint64_t wire_id)
{
    sut_rec_t *rec = cmn_pool_get(s->ss->env.pool, sizeof(*rec));

    s->ss->st.samples_rejected++;
    if (!rec || pend_push(&s->pend_res, &s->n_res, &s->cap_res, rec) < 0) {
        cmn_pool_put(s->ss->env.pool, rec);
        sut__session_fail(s, -ENOMEM, NSUT__ERROR_CODE__ERROR_INTERNAL,
                          "out of memory for a rejected sample's result");
        return;
    }
    memset(rec, 0, sizeof(*rec));
    rec->h.kind = SUT_REC_RESULT;
    rec->s = s;
    rec->wire_id = wire_id;
    rec->status = NSUT__STATUS__STATUS_REJECTED;
}
