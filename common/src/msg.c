#include "cmn/msg.h"

#include <string.h>

cmn_msg_limits_t cmn_msg_limits_default(void)
{
    cmn_msg_limits_t l;
    l.max_samples = 1u << 20;
    l.max_sample_size = UINT32_MAX;
    l.max_string = 256;
    l.max_codecs = 16;
    return l;
}

const ProtobufCMessageDescriptor *cmn_msg_descriptor(unsigned type)
{
    switch (type) {
    case CMN_MSG_HELLO:
        return &nsut__hello__descriptor;
    case CMN_MSG_HELLO_ACK:
        return &nsut__hello_ack__descriptor;
    case CMN_MSG_NAME_REQUEST:
        return &nsut__name_request__descriptor;
    case CMN_MSG_NAME_REPLY:
        return &nsut__name_reply__descriptor;
    case CMN_MSG_QUERY:
        return &nsut__query__descriptor;
    case CMN_MSG_RESPONSE:
        return &nsut__response__descriptor;
    case CMN_MSG_FIRST_TOKEN:
        return &nsut__first_token__descriptor;
    case CMN_MSG_FLUSH:
        return &nsut__flush__descriptor;
    case CMN_MSG_PING:
        return &nsut__ping__descriptor;
    case CMN_MSG_PONG:
        return &nsut__pong__descriptor;
    case CMN_MSG_ERROR:
        return &nsut__error__descriptor;
    case CMN_MSG_STATS_REQUEST:
        return &nsut__stats_request__descriptor;
    case CMN_MSG_STATS:
        return &nsut__stats__descriptor;
    case CMN_MSG_GOODBYE:
        return &nsut__goodbye__descriptor;
    default:
        return NULL;
    }
}

int cmn_codec_known(int codec)
{
    return codec == NSUT__CODEC__CODEC_NONE || codec == NSUT__CODEC__CODEC_LZ4;
}

static int check_string(const char *s, const char *what, const cmn_msg_limits_t *lim, int required,
                        cmn_errbuf_t *eb)
{
    size_t n = s ? strlen(s) : 0;

    if (n > lim->max_string)
        return cmn_errf(eb, CMN_ETOOBIG, "%s of %zu bytes over the limit of %u", what, n,
                        lim->max_string);
    if (required && n == 0)
        return cmn_errf(eb, CMN_EFIELD, "%s is empty", what);
    return 0;
}

static int check_codec_list(const Nsut__Codec *c, size_t n, const char *what,
                            const cmn_msg_limits_t *lim, int must_know, cmn_errbuf_t *eb)
{
    size_t i;

    if (n > lim->max_codecs)
        return cmn_errf(eb, CMN_ETOOBIG, "%s lists %zu codecs, over the limit of %u", what, n,
                        lim->max_codecs);
    for (i = 0; i < n && must_know; i++) {
        if (!cmn_codec_known((int)c[i]))
            return cmn_errf(eb, CMN_ECODEC, "%s[%zu] is unknown codec %d", what, i, (int)c[i]);
    }
    return 0;
}

/* The sizes of one sample or result: shared by Query, Response and FirstToken. */
static int check_sizes(const char *what, size_t i, int codec, uint64_t raw, uint64_t wire,
                       const cmn_msg_limits_t *lim, cmn_errbuf_t *eb)
{
    if (!cmn_codec_known(codec))
        return cmn_errf(eb, CMN_ECODEC, "%s[%zu] has unknown codec %d", what, i, codec);
    if (raw > lim->max_sample_size)
        return cmn_errf(eb, CMN_ETOOBIG, "%s[%zu] raw_size %llu over the limit of %llu", what, i,
                        (unsigned long long)raw, (unsigned long long)lim->max_sample_size);
    if (codec == NSUT__CODEC__CODEC_NONE && wire != raw)
        return cmn_errf(eb, CMN_EFIELD,
                        "%s[%zu] is uncompressed but wire_size %llu != raw_size %llu", what, i,
                        (unsigned long long)wire, (unsigned long long)raw);
    /* A compressed entry must shrink: one that does not travels raw (proto/README.md). */
    if (codec != NSUT__CODEC__CODEC_NONE && wire >= raw)
        return cmn_errf(eb, CMN_EFIELD, "%s[%zu] is compressed but wire_size %llu >= raw_size %llu",
                        what, i, (unsigned long long)wire, (unsigned long long)raw);
    return 0;
}

static int check_payload_sum(const char *what, uint64_t sum, uint64_t payload_len, cmn_errbuf_t *eb)
{
    if (sum != payload_len)
        return cmn_errf(eb, CMN_EFIELD,
                        "%s wire sizes add up to %llu but the payload is %llu bytes", what,
                        (unsigned long long)sum, (unsigned long long)payload_len);
    return 0;
}

static int validate_query(const Nsut__Query *q, uint64_t payload_len, const cmn_msg_limits_t *lim,
                          cmn_errbuf_t *eb)
{
    uint64_t sum = 0;
    size_t i;
    int rc;

    if (q->n_samples == 0)
        return cmn_errf(eb, CMN_EFIELD, "Query %llu has no samples",
                        (unsigned long long)q->query_id);
    if (q->n_samples > lim->max_samples)
        return cmn_errf(eb, CMN_ETOOBIG, "Query has %zu samples, over the limit of %u",
                        q->n_samples, lim->max_samples);
    /* parts 0: the sender splits on the fly and does not know the count in advance. */
    if (q->parts && q->part >= q->parts)
        return cmn_errf(eb, CMN_EFIELD, "Query part %u of %u", q->part, q->parts);
    for (i = 0; i < q->n_samples; i++) {
        const Nsut__Sample *s = q->samples[i];
        rc = check_sizes("sample", i, (int)s->codec, s->raw_size, s->wire_size, lim, eb);
        if (rc < 0)
            return rc;
        /* Each term is at most 4 GiB, and there are at most 2^32 terms: no overflow. */
        sum += s->wire_size;
    }
    return check_payload_sum("Query", sum, payload_len, eb);
}

static int validate_results(const char *what, Nsut__Result *const *r, size_t n,
                            uint64_t payload_len, const cmn_msg_limits_t *lim, cmn_errbuf_t *eb)
{
    uint64_t sum = 0;
    size_t i;
    int rc;

    if (n == 0)
        return cmn_errf(eb, CMN_EFIELD, "%s has no results", what);
    if (n > lim->max_samples)
        return cmn_errf(eb, CMN_ETOOBIG, "%s has %zu results, over the limit of %u", what, n,
                        lim->max_samples);
    for (i = 0; i < n; i++) {
        const Nsut__Result *x = r[i];
        if (x->status != NSUT__STATUS__STATUS_OK &&
            x->status != NSUT__STATUS__STATUS_BACKEND_ERROR &&
            x->status != NSUT__STATUS__STATUS_REJECTED)
            return cmn_errf(eb, CMN_EFIELD, "result[%zu] has unknown status %d", i, (int)x->status);
        if (x->status != NSUT__STATUS__STATUS_OK && x->wire_size != 0)
            return cmn_errf(eb, CMN_EFIELD, "result[%zu] failed but carries %llu bytes", i,
                            (unsigned long long)x->wire_size);
        if (x->n_tokens < 0)
            return cmn_errf(eb, CMN_EFIELD, "result[%zu] has n_tokens %lld", i,
                            (long long)x->n_tokens);
        if (x->status == NSUT__STATUS__STATUS_OK) {
            rc = check_sizes("result", i, (int)x->codec, x->raw_size, x->wire_size, lim, eb);
            if (rc < 0)
                return rc;
        }
        sum += x->wire_size;
    }
    return check_payload_sum(what, sum, payload_len, eb);
}

int cmn_msg_validate(unsigned type, const ProtobufCMessage *m, uint64_t payload_len,
                     const cmn_msg_limits_t *lim, cmn_errbuf_t *eb)
{
    int rc;

    switch (type) {
    case CMN_MSG_HELLO: {
        const Nsut__Hello *h = (const Nsut__Hello *)m;
        if (h->version_min == 0 || h->version_min > h->version_max)
            return cmn_errf(eb, CMN_EFIELD, "Hello versions %u..%u", h->version_min,
                            h->version_max);
        /* Unknown codecs in an offer are fine: the node simply does not pick them. */
        rc = check_codec_list(h->sample_codecs, h->n_sample_codecs, "Hello.sample_codecs", lim, 0,
                              eb);
        if (rc == 0)
            rc = check_codec_list(h->result_codecs, h->n_result_codecs, "Hello.result_codecs", lim,
                                  0, eb);
        if (rc == 0)
            rc = check_string(h->client_name, "Hello.client_name", lim, 0, eb);
        return rc;
    }
    case CMN_MSG_HELLO_ACK: {
        const Nsut__HelloAck *a = (const Nsut__HelloAck *)m;
        if (a->version == 0)
            return cmn_errf(eb, CMN_EFIELD, "HelloAck version 0");
        rc = check_codec_list(a->sample_codecs, a->n_sample_codecs, "HelloAck.sample_codecs", lim,
                              1, eb);
        if (rc == 0 && !cmn_codec_known((int)a->result_codec))
            rc = cmn_errf(eb, CMN_ECODEC, "HelloAck.result_codec %d unknown", (int)a->result_codec);
        if (rc == 0)
            rc = check_string(a->node_name, "HelloAck.node_name", lim, 1, eb);
        if (rc == 0 && a->caps) {
            rc = check_string(a->caps->backend, "Capabilities.backend", lim, 0, eb);
            if (rc == 0)
                rc = check_string(a->caps->device, "Capabilities.device", lim, 0, eb);
            if (rc == 0 && !(a->caps->weight >= 0.0))
                rc = cmn_errf(eb, CMN_EFIELD, "Capabilities.weight %g", a->caps->weight);
        }
        return rc;
    }
    case CMN_MSG_NAME_REPLY:
        return check_string(((const Nsut__NameReply *)m)->node_name, "NameReply.node_name", lim, 1,
                            eb);
    case CMN_MSG_QUERY:
        return validate_query((const Nsut__Query *)m, payload_len, lim, eb);
    case CMN_MSG_RESPONSE: {
        const Nsut__Response *r = (const Nsut__Response *)m;
        return validate_results("Response", r->results, r->n_results, payload_len, lim, eb);
    }
    case CMN_MSG_FIRST_TOKEN: {
        const Nsut__FirstToken *r = (const Nsut__FirstToken *)m;
        return validate_results("FirstToken", r->results, r->n_results, payload_len, lim, eb);
    }
    case CMN_MSG_ERROR:
        return check_string(((const Nsut__Error *)m)->message, "Error.message", lim, 0, eb);
    case CMN_MSG_STATS:
        return check_string(((const Nsut__Stats *)m)->node_name, "Stats.node_name", lim, 0, eb);
    case CMN_MSG_GOODBYE:
        return check_string(((const Nsut__Goodbye *)m)->reason, "Goodbye.reason", lim, 0, eb);
    case CMN_MSG_NAME_REQUEST:
    case CMN_MSG_FLUSH:
    case CMN_MSG_PING:
    case CMN_MSG_PONG:
    case CMN_MSG_STATS_REQUEST:
        return 0;
    default:
        return cmn_errf(eb, CMN_ETYPE, "message type %u", type);
    }
}

/* Skips one varint at *p (below |end|); 0, or -1 when it runs past |end| or over 10 bytes. */
static int wire_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    unsigned shift = 0;

    *v = 0;
    while (*p < end && shift < 70) {
        uint8_t b = *(*p)++;
        *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return 0;
        shift += 7;
    }
    return -1;
}

/* How many top-level occurrences of field |field| the protobuf bytes [p, p + n) hold, read off the
 * wire without allocating; -1 when the bytes are not well-formed protobuf. */
static int64_t wire_count_field(const uint8_t *p, size_t n, uint64_t field)
{
    const uint8_t *end = p + n;
    int64_t count = 0;
    uint64_t tag, len;

    while (p < end) {
        if (wire_varint(&p, end, &tag) < 0)
            return -1;
        if ((tag >> 3) == field)
            count++;
        switch (tag & 7) {
        case 0:
            if (wire_varint(&p, end, &len) < 0)
                return -1;
            break;
        case 1:
        case 5:
            len = (tag & 7) == 1 ? 8 : 4;
            if ((uint64_t)(end - p) < len)
                return -1;
            p += len;
            break;
        case 2:
            if (wire_varint(&p, end, &len) < 0 || (uint64_t)(end - p) < len)
                return -1;
            p += len;
            break;
        default: /* groups (not in this protocol) and reserved wire types */
            return -1;
        }
    }
    return count;
}

/* The repeated field of a Query (samples) or Response/FirstToken (results), counted on the wire
 * against its limit before protobuf-c unpacks it: an entry can be two bytes of metadata (0a 00)
 * and unpacks to a few hundred, so 16 MiB of them would cost a gigabyte before the count is
 * checked on the message. */
static int precount(const cmn_frame_t *f, const cmn_msg_limits_t *lim, cmn_errbuf_t *eb)
{
    const char *what = cmn_msg_type_name(f->hdr.type);
    int64_t n;

    if (f->hdr.type != CMN_MSG_QUERY && f->hdr.type != CMN_MSG_RESPONSE &&
        f->hdr.type != CMN_MSG_FIRST_TOKEN)
        return 0;
    n = wire_count_field(f->meta, f->hdr.meta_len, f->hdr.type == CMN_MSG_QUERY ? 2 : 1);
    if (n < 0)
        return cmn_errf(eb, CMN_EBADMSG, "%u bytes of metadata do not unpack as %s",
                        f->hdr.meta_len, what);
    if (n > (int64_t)lim->max_samples)
        return cmn_errf(eb, CMN_ETOOBIG, "%s has %lld %s, over the limit of %u", what, (long long)n,
                        f->hdr.type == CMN_MSG_QUERY ? "samples" : "results", lim->max_samples);
    return 0;
}

int cmn_msg_unpack(const cmn_frame_t *f, const cmn_msg_limits_t *lim, ProtobufCAllocator *alloc,
                   ProtobufCMessage **out, cmn_errbuf_t *eb)
{
    const ProtobufCMessageDescriptor *desc = cmn_msg_descriptor(f->hdr.type);
    ProtobufCMessage *m;
    int rc;

    if (!desc)
        return cmn_errf(eb, CMN_ETYPE, "message type %u", f->hdr.type);
    rc = precount(f, lim, eb);
    if (rc < 0)
        return rc;
    m = protobuf_c_message_unpack(desc, alloc, f->hdr.meta_len, f->meta);
    if (!m)
        return cmn_errf(eb, CMN_EBADMSG, "%u bytes of metadata do not unpack as %s",
                        f->hdr.meta_len, cmn_msg_type_name(f->hdr.type));
    rc = cmn_msg_validate(f->hdr.type, m, f->hdr.payload_len, lim, eb);
    if (rc < 0) {
        protobuf_c_message_free_unpacked(m, alloc);
        return rc;
    }
    *out = m;
    return 0;
}

void cmn_msg_free(ProtobufCMessage *m, ProtobufCAllocator *alloc)
{
    if (m)
        protobuf_c_message_free_unpacked(m, alloc);
}

char *cmn_sanitize(const char *in, size_t n, char *out, size_t cap)
{
    size_t i;

    if (cap == 0)
        return out;
    for (i = 0; i < n && i + 1 < cap; i++) {
        unsigned char c = (unsigned char)in[i];
        out[i] = (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') ? (char)c : '?';
    }
    out[i] = '\0';
    return out;
}
