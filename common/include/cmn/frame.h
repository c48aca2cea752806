/* Frame codec: no I/O, no libuv. proto/README.md is the specification.
 *
 * A frame is a 16-byte header, then `meta_len` bytes of protobuf-c metadata (one message of the
 * type named in the header), then `payload_len` raw bytes:
 *
 *   offset size field
 *        0    4 magic "NSUT" (0x4E 0x53 0x55 0x54)
 *        4    1 frame version (1)
 *        5    1 message type (cmn_msg_type_t)
 *        6    2 flags, big-endian, reserved: must be 0
 *        8    4 meta_len, big-endian
 *       12    4 payload_len, big-endian
 *
 * The decoder is fed arbitrary chunks of a byte stream and returns one frame at a time. Limits are
 * checked on the header, before anything is allocated. A frame that lies whole inside the input is
 * returned as a view into the input (no copy); a frame split across chunks is gathered into a
 * buffer owned by the decoder, into which the caller may also read directly (see
 * cmn_frame_decoder_direct) so a large payload is never copied in user space.
 *
 * The encoder packs header + metadata into one buffer and references the payload segments, which
 * stay in the caller's memory, so the frame goes out with one scatter-gather write.
 *
 * Thread-safety: a decoder belongs to one thread at a time; the functions keep no global state. */
#ifndef CMN_FRAME_H
#define CMN_FRAME_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#define CMN_FRAME_MAGIC 0x4E535554u /* "NSUT" */
#define CMN_FRAME_VERSION 1u
#define CMN_FRAME_HEADER_SIZE 16u

/* Limits (bytes of metadata + payload). Before the Hello handshake completes a peer may send only
 * small frames; the limit after it is configurable, up to CMN_FRAME_ABS_MAX. The default lets a
 * 3D-UNet float32 sample (about 132 MB) travel in one frame. */
#define CMN_FRAME_PREAUTH_MAX (16u * 1024u)
#define CMN_FRAME_DEFAULT_MAX (256u * 1024u * 1024u)
#define CMN_FRAME_ABS_MAX ((uint64_t)UINT32_MAX)
#define CMN_FRAME_META_MAX (16u * 1024u * 1024u)

/* Message types (header byte 5). The numbering is part of the wire protocol. */
typedef enum {
    CMN_MSG_HELLO = 1,
    CMN_MSG_HELLO_ACK = 2,
    CMN_MSG_NAME_REQUEST = 3,
    CMN_MSG_NAME_REPLY = 4,
    CMN_MSG_QUERY = 5,
    CMN_MSG_RESPONSE = 6,
    CMN_MSG_FIRST_TOKEN = 7,
    CMN_MSG_FLUSH = 8,
    CMN_MSG_PING = 9,
    CMN_MSG_PONG = 10,
    CMN_MSG_ERROR = 11,
    CMN_MSG_STATS_REQUEST = 12,
    CMN_MSG_STATS = 13,
    CMN_MSG_GOODBYE = 14,
    CMN_MSG__MAX = 14
} cmn_msg_type_t;

typedef struct {
    uint8_t version;
    uint8_t type;
    uint16_t flags;
    uint32_t meta_len;
    uint32_t payload_len;
} cmn_frame_header_t;

typedef struct {
    uint32_t max_meta;  /* largest metadata section */
    uint64_t max_frame; /* largest meta_len + payload_len */
} cmn_frame_limits_t;

/* A decoded frame. The pointers are valid until the next call on the decoder that produced it. */
typedef struct {
    cmn_frame_header_t hdr;
    const uint8_t *meta;
    const uint8_t *payload;
} cmn_frame_t;

/* Whether frames of |type| may carry a payload (Query, Response, FirstToken). */
int cmn_msg_type_has_payload(unsigned type);

/* Name of a message type ("Query"), or "unknown". */
const char *cmn_msg_type_name(unsigned type);

/* Limits for the state before the handshake, and the defaults after it. */
cmn_frame_limits_t cmn_frame_limits_preauth(void);
cmn_frame_limits_t cmn_frame_limits_default(void);

void cmn_frame_header_write(uint8_t out[CMN_FRAME_HEADER_SIZE], const cmn_frame_header_t *h);

/* Parses and checks a header against |lim|. Returns 0, CMN_EMAGIC, CMN_EVERSION, CMN_ETYPE,
 * CMN_EFLAGS, CMN_ETOOBIG or CMN_EPAYLOAD. */
int cmn_frame_header_parse(const uint8_t in[CMN_FRAME_HEADER_SIZE], const cmn_frame_limits_t *lim,
                           cmn_frame_header_t *h);

/* ---- Decoder ---------------------------------------------------------------------------- */

enum { CMN_FRAME_NEED_MORE = 0, CMN_FRAME_READY = 1 };

/* A payload sink: called once the metadata of a split frame whose payload is at least the sink's
 * minimum has arrived, before any payload byte is stored. It may return a buffer of
 * hdr->payload_len bytes where the payload is to go (valid until the frame is delivered or the
 * decoder is freed), or NULL to let the decoder keep it. The metadata is not validated yet. */
typedef uint8_t *(*cmn_frame_sink_fn)(void *arg, const cmn_frame_header_t *hdr,
                                      const uint8_t *meta);

typedef struct {
    cmn_frame_limits_t limits;
    uint8_t hdr_bytes[CMN_FRAME_HEADER_SIZE];
    size_t hdr_have;
    cmn_frame_header_t hdr; /* valid once hdr_have == CMN_FRAME_HEADER_SIZE */
    uint8_t *body;          /* gathered metadata (+ payload, without a sink) of a split frame */
    size_t body_cap;
    size_t body_len;  /* meta_len + payload_len of the frame being gathered */
    size_t body_have; /* bytes of it received so far */
    uint8_t *payload; /* where the payload goes: inside |body|, or a sink's buffer */
    int sink_asked;
    cmn_frame_sink_fn sink;
    void *sink_arg;
    size_t sink_min;
    int err; /* sticky: after an error the stream cannot be resynchronised */
} cmn_frame_decoder_t;

void cmn_frame_decoder_init(cmn_frame_decoder_t *d, const cmn_frame_limits_t *limits);

/* Changes the limits (e.g. after the handshake). Takes effect from the next header. */
void cmn_frame_decoder_set_limits(cmn_frame_decoder_t *d, const cmn_frame_limits_t *limits);

void cmn_frame_decoder_free(cmn_frame_decoder_t *d);

/* Consumes bytes from in[0..len) and stops after at most one frame.
 * Returns CMN_FRAME_READY with *frame filled and *consumed the bytes used; CMN_FRAME_NEED_MORE
 * with *consumed == len; or a negative code (the header checks of cmn_frame_header_parse, or
 * -ENOMEM) with *consumed undefined. Errors are sticky: every later call returns the same code.
 */
int cmn_frame_decode(cmn_frame_decoder_t *d, const uint8_t *in, size_t len, size_t *consumed,
                     cmn_frame_t *frame);

/* When the decoder is gathering the body of a frame, returns 1 and the free region of the current
 * part of that body (*ptr, *len): the rest of the metadata, or the rest of the payload (in the
 * sink's buffer when there is one). The caller may read the next bytes directly into it and pass
 * the same pointer to cmn_frame_decode, which records them without copying. Returns 0 otherwise
 * (a header is expected). */
int cmn_frame_decoder_direct(cmn_frame_decoder_t *d, uint8_t **ptr, size_t *len);

/* Installs a payload sink for split frames whose payload is at least |min_payload| bytes; with
 * direct reads (below) such a payload goes from the socket straight into the sink's buffer. */
void cmn_frame_decoder_set_sink(cmn_frame_decoder_t *d, cmn_frame_sink_fn sink, void *arg,
                                size_t min_payload);

/* Bytes of the current frame not received yet (0 when between frames). */
size_t cmn_frame_decoder_missing(const cmn_frame_decoder_t *d);

/* Whether the decoder is in the middle of a frame (header or body partly received). */
int cmn_frame_decoder_partial(const cmn_frame_decoder_t *d);

/* ---- Encoder ---------------------------------------------------------------------------- */

struct ProtobufCMessage;

/* Bytes of header + packed metadata for |meta| (which may be NULL for an empty metadata section).
 */
size_t cmn_frame_head_size(const struct ProtobufCMessage *meta);

/* Writes header + packed metadata into dst[0..cap). |payload_len| is the total payload that the
 * caller will send after it. Returns the bytes written, or CMN_ETOOBIG if |cap| is too small or
 * the lengths overflow the header fields, or CMN_ETYPE/CMN_EPAYLOAD for a bad type/payload pair. */
long cmn_frame_encode_head(unsigned type, const struct ProtobufCMessage *meta, uint64_t payload_len,
                           uint8_t *dst, size_t cap);

/* Encodes a whole frame for one scatter-gather write: iov[0] is a new malloc'ed buffer with header
 * and metadata (the caller frees iov[0].iov_base), iov[1..n_payload] point at the caller's payload
 * segments unchanged. |iov| has room for n_payload + 1 entries. Returns the number of iov entries
 * or a negative code. */
long cmn_frame_encode(unsigned type, const struct ProtobufCMessage *meta,
                      const struct iovec *payload, size_t n_payload, struct iovec *iov);

#endif
