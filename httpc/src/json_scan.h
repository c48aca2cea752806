/* A strict JSON scanner for the usual shape of an engine's stream event: one pass over the bytes
 * in place, no allocation, the same SAX callbacks as yajl's parser (src/oai_event.c uses both).
 *
 * It accepts only what RFC 8259 and yajl (with yajl_dont_validate_strings) both accept, and then
 * makes exactly the calls yajl would make, in the same order. Anything beyond its limits is
 * HTTPC_JSCAN_UNUSUAL and the caller parses the event again with yajl, which decides: nesting
 * deeper than HTTPC_JSCAN_DEPTH, a key with an escape, a string with an escape whose slot the
 * caller cannot take undecoded, "\u0000" (yajl decodes it to nothing), any syntax error, an
 * empty text, trailing bytes. So a hostile event never gets further here than with yajl alone.
 *
 * Every callback of |cb| except yajl_integer and yajl_double must be set; yajl_number gets the
 * number's text. A string value with escapes (validated, not decoded) goes to |escaped| instead
 * of yajl_string, which returns 1 when it took it, 0 to stop (as a callback's 0), or -1 to make
 * the whole scan HTTPC_JSCAN_UNUSUAL. */
#ifndef HTTPC_JSON_SCAN_H
#define HTTPC_JSON_SCAN_H

#include <stddef.h>
#include <yajl/yajl_parse.h>

#define HTTPC_JSCAN_DEPTH 32

enum {
    HTTPC_JSCAN_OK = 0,      /* one JSON value, every callback made */
    HTTPC_JSCAN_CANCEL = -1, /* a callback returned 0 (yajl: yajl_status_client_canceled) */
    HTTPC_JSCAN_UNUSUAL = 1, /* beyond the scanner: parse it again with yajl */
};

typedef int (*httpc_jscan_escaped_fn)(void *ctx, const unsigned char *raw, size_t len);

int httpc_json_scan(const char *data, size_t len, const yajl_callbacks *cb,
                    httpc_jscan_escaped_fn escaped, void *ctx);

/* Where a scan stands just after a map key's ':' (its value comes next): the bytes taken, the
 * open containers. Only points within HTTPC_JSCAN_MARK_DEPTH containers are reported. */
#define HTTPC_JSCAN_MARK_DEPTH 8

typedef struct {
    size_t off;
    unsigned depth;
    unsigned char stack[HTTPC_JSCAN_MARK_DEPTH]; /* '{' or '[' of each open container */
} httpc_jscan_mark_t;

/* httpc_json_scan with two additions (either may be NULL): |mark| is called at each such point;
 * it returns 0 to go on, or 1 having set *ahead to jump: the scan skips ahead->off bytes and
 * goes on with ahead's containers, at a point where a value comes next, as if it had scanned the
 * bytes skipped; |from| resumes a scan at a point an earlier scan reported, as if its first
 * from->off bytes had been scanned again. Both hold only when the bytes are the same as those an
 * earlier scan read from that point and the caller's state is restored to what it was after
 * them: the caller's to ensure (oai_event.c compares the bytes and its state). */
int httpc_json_scan_at(const char *data, size_t len, const yajl_callbacks *cb,
                       httpc_jscan_escaped_fn escaped, void *ctx, const httpc_jscan_mark_t *from,
                       int (*mark)(void *ctx, const httpc_jscan_mark_t *at,
                                   httpc_jscan_mark_t *ahead));

#endif
