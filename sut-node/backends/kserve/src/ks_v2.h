/* ks_v2.h: the KServe v2 (Open Inference Protocol) REST messages with the binary tensor
 * extension, no I/O. A request is a JSON header that names the input tensor (name, datatype,
 * shape, "binary_data_size") and asks for the output as binary, followed by the raw input bytes;
 * its length goes in the Inference-Header-Content-Length header. The response is a JSON header
 * of the same length header's size, then the outputs' raw bytes in the order the header lists
 * them.
 *
 * Thread-safe (no state). Errors: -EPROTO with a reason in err. */
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

/* Finds output |name| in a response's JSON header: where its bytes start within the binary part
 * and how many there are. 0, or -EPROTO with err set (also for an error object, whose message it
 * copies). */
int ks_response_output(const char *json, size_t len, const char *name, size_t *offset, size_t *size,
                       char *err, size_t errlen);

#endif
