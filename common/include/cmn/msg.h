/* Typed messages on top of the frame codec: which protobuf message each frame type carries, and
 * the checks every received message passes before anyone acts on it. No I/O.
 *
 * Thread-safety: all functions are reentrant. */
#ifndef CMN_MSG_H
#define CMN_MSG_H

#include "cmn/err.h"
#include "cmn/frame.h"
#include "nsut.pb-c.h"

#define CMN_PROTOCOL_VERSION 1u

typedef struct {
    uint32_t max_samples;     /* samples (results) in one Query (Response) frame */
    uint64_t max_sample_size; /* raw size of one sample or result */
    uint32_t max_string;      /* node names, error texts, reasons */
    uint32_t max_codecs;      /* entries in a codec list */
} cmn_msg_limits_t;

/* 1 Mi samples per frame, 4 GiB - 1 per sample, 256-byte names, 16 codecs. */
cmn_msg_limits_t cmn_msg_limits_default(void);

/* Descriptor of the metadata message carried by frames of |type|, or NULL for an unknown type. */
const ProtobufCMessageDescriptor *cmn_msg_descriptor(unsigned type);

/* Unpacks the metadata of |f| as the message its header names and validates it against |lim|
 * and the frame's payload length (proto/README.md, "Validation"). |alloc| may be NULL (malloc)
 * or an arena (cmn/arena.h). On success *out holds the message; free it with cmn_msg_free().
 * Returns 0, CMN_EBADMSG (does not unpack), CMN_EFIELD (a field out of range or inconsistent),
 * CMN_ECODEC (unknown codec) or CMN_ETOOBIG (a count or size over a limit), with a reason in |eb|.
 */
int cmn_msg_unpack(const cmn_frame_t *f, const cmn_msg_limits_t *lim, ProtobufCAllocator *alloc,
                   ProtobufCMessage **out, cmn_errbuf_t *eb);

void cmn_msg_free(ProtobufCMessage *m, ProtobufCAllocator *alloc);

/* Field checks alone (cmn_msg_unpack runs them); exposed for tests and for senders. */
int cmn_msg_validate(unsigned type, const ProtobufCMessage *m, uint64_t payload_len,
                     const cmn_msg_limits_t *lim, cmn_errbuf_t *eb);

/* Whether |codec| is a codec value this build knows. */
int cmn_codec_known(int codec);

/* Copies |in| (of length |n|, peer data) into |out| (size |cap|) with every byte outside printable
 * ASCII replaced by '?', so peer strings are safe in logs and JSON. Returns |out|. */
char *cmn_sanitize(const char *in, size_t n, char *out, size_t cap);

#endif
