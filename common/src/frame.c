#include "cmn/frame.h"
#include "cmn/err.h"

#include <errno.h>
#include <protobuf-c/protobuf-c.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

/* A gathered body larger than this is released once a small frame follows, so a burst of large
 * samples does not pin its buffer for the life of the connection. */
#define BODY_KEEP_MAX (4u * 1024u * 1024u)

static const char *const type_names[CMN_MSG__MAX + 1] = {
    "unknown", "Hello",    "HelloAck",     "NameRequest", "NameReply",
    "Query",   "Response", "FirstToken",   "Flush",       "Ping",
    "Pong",    "Error",    "StatsRequest", "Stats",       "Goodbye",
};

int cmn_msg_type_has_payload(unsigned type)
{
    return type == CMN_MSG_QUERY || type == CMN_MSG_RESPONSE || type == CMN_MSG_FIRST_TOKEN;
}

const char *cmn_msg_type_name(unsigned type)
{
    if (type >= 1 && type <= CMN_MSG__MAX)
        return type_names[type];
    return type_names[0];
}

cmn_frame_limits_t cmn_frame_limits_preauth(void)
{
    cmn_frame_limits_t l = {CMN_FRAME_PREAUTH_MAX, CMN_FRAME_PREAUTH_MAX};
    return l;
}

cmn_frame_limits_t cmn_frame_limits_default(void)
{
    cmn_frame_limits_t l = {CMN_FRAME_META_MAX, CMN_FRAME_DEFAULT_MAX};
    return l;
}

static void put_be16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

static void put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static uint16_t get_be16(const uint8_t *p)
{
    return (uint16_t)((unsigned)p[0] << 8 | p[1]);
}

static uint32_t get_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

void cmn_frame_header_write(uint8_t out[CMN_FRAME_HEADER_SIZE], const cmn_frame_header_t *h)
{
    put_be32(out, CMN_FRAME_MAGIC);
    out[4] = h->version;
    out[5] = h->type;
    put_be16(out + 6, h->flags);
    put_be32(out + 8, h->meta_len);
    put_be32(out + 12, h->payload_len);
}

int cmn_frame_header_parse(const uint8_t in[CMN_FRAME_HEADER_SIZE], const cmn_frame_limits_t *lim,
                           cmn_frame_header_t *h)
{
    if (get_be32(in) != CMN_FRAME_MAGIC)
        return CMN_EMAGIC;
    h->version = in[4];
    h->type = in[5];
    h->flags = get_be16(in + 6);
    h->meta_len = get_be32(in + 8);
    h->payload_len = get_be32(in + 12);
    if (h->version != CMN_FRAME_VERSION)
        return CMN_EVERSION;
    if (h->type < 1 || h->type > CMN_MSG__MAX)
        return CMN_ETYPE;
    if (h->flags != 0)
        return CMN_EFLAGS;
    if (h->payload_len != 0 && !cmn_msg_type_has_payload(h->type))
        return CMN_EPAYLOAD;
    if (h->meta_len > lim->max_meta || (uint64_t)h->meta_len + h->payload_len > lim->max_frame)
        return CMN_ETOOBIG;
    return 0;
}

void cmn_frame_decoder_init(cmn_frame_decoder_t *d, const cmn_frame_limits_t *limits)
{
    memset(d, 0, sizeof(*d));
    d->limits = *limits;
}

void cmn_frame_decoder_set_limits(cmn_frame_decoder_t *d, const cmn_frame_limits_t *limits)
{
    d->limits = *limits;
}

void cmn_frame_decoder_free(cmn_frame_decoder_t *d)
{
    free(d->body);
    d->body = NULL;
    d->body_cap = 0;
}

int cmn_frame_decoder_partial(const cmn_frame_decoder_t *d)
{
    return d->hdr_have != 0;
}

/* Makes room for |need| bytes of body; keeps the first |keep| bytes already gathered. */
static int body_reserve(cmn_frame_decoder_t *d, size_t need, size_t keep)
{
    uint8_t *nb;

    if (keep == 0 && d->body_cap > BODY_KEEP_MAX && need <= BODY_KEEP_MAX) {
        free(d->body);
        d->body = NULL;
        d->body_cap = 0;
    }
    if (need <= d->body_cap)
        return 0;
    if (keep) {
        nb = realloc(d->body, need); /* only the small metadata is copied */
    } else {
        /* No realloc: the old contents are not needed, and realloc would copy them. */
        nb = malloc(need);
        if (nb)
            free(d->body);
    }
    if (!nb)
        return -ENOMEM;
    d->body = nb;
    d->body_cap = need;
    return 0;
}

void cmn_frame_decoder_set_sink(cmn_frame_decoder_t *d, cmn_frame_sink_fn sink, void *arg,
                                size_t min_payload)
{
    d->sink = sink;
    d->sink_arg = arg;
    d->sink_min = min_payload;
}

size_t cmn_frame_decoder_missing(const cmn_frame_decoder_t *d)
{
    if (d->hdr_have == 0)
        return 0;
    if (d->hdr_have < CMN_FRAME_HEADER_SIZE)
        return CMN_FRAME_HEADER_SIZE - d->hdr_have;
    return d->body_len - d->body_have;
}

static int sink_wanted(const cmn_frame_decoder_t *d)
{
    return d->sink && d->hdr.payload_len > 0 && d->hdr.payload_len >= d->sink_min;
}

/* Where body byte |off| goes, and how many contiguous bytes fit there. */
static uint8_t *body_dst(cmn_frame_decoder_t *d, size_t off, size_t *room)
{
    size_t meta = d->hdr.meta_len;

    if (off < meta) {
        *room = meta - off;
        return d->body + off;
    }
    *room = d->body_len - off;
    return d->payload + (off - meta);
}

/* At the end of the metadata: ask the sink where the payload goes, else keep it in |body|. */
static int place_payload(cmn_frame_decoder_t *d)
{
    uint8_t *dst = d->sink(d->sink_arg, &d->hdr, d->body);
    int rc;

    d->sink_asked = 1;
    if (dst) {
        d->payload = dst;
        return 0;
    }
    rc = body_reserve(d, d->body_len, d->hdr.meta_len);
    if (rc < 0)
        return rc;
    d->payload = d->body + d->hdr.meta_len;
    return 0;
}

int cmn_frame_decode(cmn_frame_decoder_t *d, const uint8_t *in, size_t len, size_t *consumed,
                     cmn_frame_t *frame)
{
    size_t used = 0, take, room;
    uint8_t *dst;
    int rc;

    if (d->err)
        return d->err;

    if (d->hdr_have < CMN_FRAME_HEADER_SIZE) {
        /* Fast path: a whole frame inside the input, decoder idle: return a view, copy nothing. */
        if (d->hdr_have == 0 && len >= CMN_FRAME_HEADER_SIZE) {
            rc = cmn_frame_header_parse(in, &d->limits, &d->hdr);
            if (rc < 0)
                return d->err = rc;
            size_t flen = CMN_FRAME_HEADER_SIZE + (size_t)d->hdr.meta_len + d->hdr.payload_len;
            if (len >= flen) {
                frame->hdr = d->hdr;
                frame->meta = in + CMN_FRAME_HEADER_SIZE;
                frame->payload = frame->meta + d->hdr.meta_len;
                *consumed = flen;
                return CMN_FRAME_READY;
            }
            memcpy(d->hdr_bytes, in, CMN_FRAME_HEADER_SIZE);
            d->hdr_have = CMN_FRAME_HEADER_SIZE;
            used = CMN_FRAME_HEADER_SIZE;
            goto start_body;
        }
        take = CMN_FRAME_HEADER_SIZE - d->hdr_have;
        if (take > len)
            take = len;
        memcpy(d->hdr_bytes + d->hdr_have, in, take);
        d->hdr_have += take;
        used = take;
        if (d->hdr_have < CMN_FRAME_HEADER_SIZE) {
            /* Reject a wrong magic as soon as its bytes are here, not after 16 bytes. */
            static const uint8_t magic[4] = {0x4E, 0x53, 0x55, 0x54};
            size_t m = d->hdr_have < 4 ? d->hdr_have : 4;
            if (memcmp(d->hdr_bytes, magic, m) != 0)
                return d->err = CMN_EMAGIC;
            *consumed = used;
            return CMN_FRAME_NEED_MORE;
        }
        rc = cmn_frame_header_parse(d->hdr_bytes, &d->limits, &d->hdr);
        if (rc < 0)
            return d->err = rc;
start_body:
        d->body_len = (size_t)d->hdr.meta_len + d->hdr.payload_len;
        d->body_have = 0;
        /* With a sink in play only the metadata is gathered here; where the payload goes is
         * decided once the metadata is complete. */
        d->sink_asked = !sink_wanted(d);
        rc = body_reserve(d,
                          d->sink_asked ? (d->body_len ? d->body_len : 1)
                                        : (d->hdr.meta_len ? d->hdr.meta_len : 1),
                          0);
        if (rc < 0)
            return d->err = rc;
        d->payload = d->sink_asked ? d->body + d->hdr.meta_len : NULL;
    }

    for (;;) {
        if (d->body_have == d->hdr.meta_len && !d->sink_asked) {
            rc = place_payload(d);
            if (rc < 0)
                return d->err = rc;
        }
        if (d->body_have == d->body_len || used == len)
            break;
        dst = body_dst(d, d->body_have, &room);
        take = len - used < room ? len - used : room;
        /* Bytes read straight into place (cmn_frame_decoder_direct) are not copied again. */
        if (in + used != dst)
            memcpy(dst, in + used, take);
        d->body_have += take;
        used += take;
    }
    *consumed = used;
    if (d->body_have < d->body_len)
        return CMN_FRAME_NEED_MORE;
    frame->hdr = d->hdr;
    frame->meta = d->body;
    frame->payload = d->payload;
    d->hdr_have = 0;
    return CMN_FRAME_READY;
}

int cmn_frame_decoder_direct(cmn_frame_decoder_t *d, uint8_t **ptr, size_t *len)
{
    size_t room;

    if (d->err || d->hdr_have < CMN_FRAME_HEADER_SIZE || d->body_have >= d->body_len)
        return 0;
    if (d->body_have >= d->hdr.meta_len && !d->sink_asked)
        return 0; /* not placed yet: the next decode call decides */
    *ptr = body_dst(d, d->body_have, &room);
    *len = room;
    return 1;
}

size_t cmn_frame_head_size(const struct ProtobufCMessage *meta)
{
    return CMN_FRAME_HEADER_SIZE + (meta ? protobuf_c_message_get_packed_size(meta) : 0);
}

long cmn_frame_encode_head(unsigned type, const struct ProtobufCMessage *meta, uint64_t payload_len,
                           uint8_t *dst, size_t cap)
{
    cmn_frame_header_t h;
    size_t mlen = meta ? protobuf_c_message_get_packed_size(meta) : 0;

    if (type < 1 || type > CMN_MSG__MAX)
        return CMN_ETYPE;
    if (payload_len != 0 && !cmn_msg_type_has_payload(type))
        return CMN_EPAYLOAD;
    if (mlen > UINT32_MAX || payload_len > UINT32_MAX || cap < CMN_FRAME_HEADER_SIZE + mlen)
        return CMN_ETOOBIG;
    h.version = CMN_FRAME_VERSION;
    h.type = (uint8_t)type;
    h.flags = 0;
    h.meta_len = (uint32_t)mlen;
    h.payload_len = (uint32_t)payload_len;
    cmn_frame_header_write(dst, &h);
    if (meta)
        protobuf_c_message_pack(meta, dst + CMN_FRAME_HEADER_SIZE);
    return (long)(CMN_FRAME_HEADER_SIZE + mlen);
}

long cmn_frame_encode(unsigned type, const struct ProtobufCMessage *meta,
                      const struct iovec *payload, size_t n_payload, struct iovec *iov)
{
    uint64_t plen = 0;
    size_t hsize = cmn_frame_head_size(meta), i;
    uint8_t *head;
    long rc;

    for (i = 0; i < n_payload; i++)
        plen += payload[i].iov_len;
    head = malloc(hsize);
    if (!head)
        return -ENOMEM;
    rc = cmn_frame_encode_head(type, meta, plen, head, hsize);
    if (rc < 0) {
        free(head);
        return rc;
    }
    iov[0].iov_base = head;
    iov[0].iov_len = (size_t)rc;
    for (i = 0; i < n_payload; i++)
        iov[i + 1] = payload[i];
    return (long)(n_payload + 1);
}
