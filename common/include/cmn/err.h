/* Error convention for the whole project.
 *
 * Every function that can fail returns 0 (or a non-negative count) on success and a negative code
 * on failure. A negative code is either a negated errno value (the same numbers libuv uses for
 * UV_E* on Unix, so uv_* results pass through unchanged) or one of the project codes below, which
 * all lie under CMN_E__BASE. cmn_strerror() names any of them.
 *
 * Functions whose errors reach a person also fill a caller-supplied cmn_errbuf_t with a sentence
 * naming what failed and why (peer address, field, limit). */
#ifndef CMN_ERR_H
#define CMN_ERR_H

#include <stddef.h>

enum {
    CMN_E__BASE = -20000,
    CMN_EMAGIC = -20001,      /* frame does not start with the protocol magic */
    CMN_EVERSION = -20002,    /* frame or protocol version not supported */
    CMN_ETYPE = -20003,       /* unknown message type */
    CMN_EFLAGS = -20004,      /* reserved header flags set */
    CMN_ETOOBIG = -20005,     /* a length is over the configured limit */
    CMN_EBADMSG = -20006,     /* metadata does not unpack as the declared message */
    CMN_EFIELD = -20007,      /* a message field is out of range or inconsistent */
    CMN_EPAYLOAD = -20008,    /* payload on a message type that carries none */
    CMN_ECODEC = -20009,      /* codec unknown or not negotiated */
    CMN_EDECOMPRESS = -20010, /* compressed data corrupt or not of the declared size */
    CMN_EPOLICY = -20011,     /* forbidden by the MLPerf rules (e.g. compression for an LLM) */
    CMN_ECONFIG = -20012,     /* bad configuration value */
    CMN_ESTATE = -20013,      /* message not allowed in this state or direction */
    CMN_ETIMEOUT = -20014,    /* a deadline passed */
    CMN_EPEER = -20015,       /* the peer reported an error */
    CMN_ECLOSED = -20016,     /* the connection is closed */
    CMN_EDUPNAME = -20017,    /* two nodes report the same name */
    CMN_ENONODE = -20018,     /* no node is available */
    CMN_EBACKEND = -20019,    /* the inference backend failed */
    CMN_ETLS = -20020,        /* TLS failure */
    CMN_EAUTH = -20021,       /* authentication failed */
    CMN_EOVERLOAD = -20022,   /* a capacity limit was reached */
    CMN_EUNKNOWNID = -20023,  /* an id that is not outstanding */
    CMN_EFORMAT = -20024,     /* a file is not in the expected format */
    CMN_ENOTREADY = -20025,   /* a node's engine cannot serve yet (or the node is not up) */
    CMN_E__LAST = -20026
};

/* A buffer for a human-readable reason. Large enough for an address, a field name and limits. */
typedef struct {
    char msg[512];
} cmn_errbuf_t;

/* Name of an error code (a static string, never NULL). Thread-safe. */
const char *cmn_strerror(int err);

/* Short symbolic name, e.g. "CMN_ETOOBIG" or "ECONNREFUSED". Thread-safe. */
const char *cmn_err_name(int err);

/* Formats a reason into |eb| (if non-NULL) and returns |err|, so a failure path can write
 * `return cmn_errf(eb, CMN_ETOOBIG, "frame of %u bytes over the limit of %u", n, lim);`. */
int cmn_errf(cmn_errbuf_t *eb, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
