/* ks_v2.h: the KServe v2 (Open Inference Protocol) REST messages with the binary tensor
 * extension, no I/O. A request is a JSON header that names the input tensor (name, datatype,
 * shape, "binary_data_size") and asks for the output as binary, followed by the raw input bytes;
 * its length goes in the Inference-Header-Content-Length header. The response is a JSON header
 * of the same length header's size, then the outputs' raw bytes in the order the header lists
 * them.
 *
 * Thread-safe (no state). Every byte of a response is the server's and hostile until checked.
 * Errors: -EPROTO (-EINVAL for options) with a reason in err. */
#ifndef KS_V2_H
#define KS_V2_H

#include <stddef.h>
#include <stdint.h>

#define KS_MAX_DIMS 8

typedef struct {
    const char *input, *output; /* tensor names */
    const char *datatype;       /* "UINT8", "FP32", ... */
    int64_t shape[KS_MAX_DIMS]; /* one sample's shape (without the batch axis) */
    size_t ndims;
} ks_tensor_t;

/* The bytes of one element of |datatype| (0: unknown). */
size_t ks_dtype_size(const char *datatype);

/* The JSON header of a request for a batch of |n| samples of |bytes| bytes in all, in a malloc'ed
 * buffer. 0 or -ENOMEM. */
int ks_request_header(const ks_tensor_t *t, size_t n, size_t bytes, char **out, size_t *len);

/* The largest JSON header a response may have (its Inference-Header-Content-Length): cJSON's tree
 * of it, which is allocated before any output is counted, stays within about 40 times this. */
#define KS_MAX_JSON_HEADER (1u << 20)
/* The largest sample: the wire protocol's largest frame (CMN_FRAME_ABS_MAX). */
#define KS_MAX_SAMPLE_BYTES ((uint64_t)UINT32_MAX)

/* Parses option shape=D1,D2,... (one sample's shape, up to KS_MAX_DIMS integers 1..2^31) into
 * t->shape and t->ndims, and the bytes of one sample of |elem|-byte elements into *bytes, which
 * may not pass KS_MAX_SAMPLE_BYTES (checked before each multiplication). 0, or -EINVAL with err
 * naming the option and the limit. */
int ks_parse_shape(const char *shape, size_t elem, ks_tensor_t *t, size_t *bytes, char *err,
                   size_t errlen);

/* The value of an Inference-Header-Content-Length header line ("Name: value", its line end
 * stripped): -1 when the line is another header, -2 when the value is not a plain decimal up to
 * KS_MAX_JSON_HEADER (digits, then only spaces or tabs). */
long ks_header_length(const char *line, size_t n);

/* Finds output |name| in a response's JSON header of |len| bytes followed by a binary part of
 * |bin_len| bytes: where its bytes start within the binary part and how many there are. Every
 * output's binary_data_size must be a whole number of bytes that, added to those before it, stays
 * within bin_len (checked at each output, so a sum cannot wrap); the named output's datatype and
 * shape, when given, must account for exactly its size. 0, or -EPROTO with err set (also for an
 * error object, whose message it copies with control bytes replaced). */
int ks_response_output(const char *json, size_t len, size_t bin_len, const char *name,
                       size_t *offset, size_t *size, char *err, size_t errlen);

/* A whole response of |resp_len| bytes whose first |json_len| (Inference-Header-Content-Length;
 * negative: missing or unreadable) are its JSON header: output |name|'s bytes must lie in the
 * binary part and split into |n| equal, non-empty results. Sets *data (their offset from resp)
 * and *per (bytes per sample). 0, or -EPROTO with err set. */
int ks_response_parse(const char *resp, size_t resp_len, long json_len, const char *name, size_t n,
                      size_t *data, size_t *per, char *err, size_t errlen);

#endif
