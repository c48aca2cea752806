/* Unit tests of the kserve backend's KServe v2 response parser against a hostile server: the
 * binary_data_size wrap-around (~18k outputs whose sizes sum past 2^64 to point before the body),
 * sizes that are negative, fractional, not numbers or past the body, the
 * Inference-Header-Content-Length value, an output's datatype and shape against its size, and
 * option shape= whose product would overflow. Each error is asserted word for word; each response
 * lies in a malloc'ed buffer of exactly its length, so ASan reports any read outside it. */
#include "../check_main.h"

#include "ks_v2.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ks_response_parse over |json| followed by |bin| binary bytes, in a buffer of exactly that size;
 * on success every result byte is read (ASan checks they are inside the buffer). */
static int parse(const char *json, size_t jlen, size_t bin, size_t n, size_t *data, size_t *per,
                 char *err, size_t errlen)
{
    char *resp = malloc(jlen + bin + 1); /* +1: malloc(0) */
    size_t i;
    int rc;

    ck_assert_ptr_nonnull(resp);
    memcpy(resp, json, jlen);
    for (i = 0; i < bin; i++)
        resp[jlen + i] = (char)i;
    err[0] = '\0';
    rc = ks_response_parse(resp, jlen + bin, (long)jlen, "logits", n, data, per, err, errlen);
    if (rc == 0) {
        unsigned sum = 0;
        ck_assert_uint_le(*data + n * *per, jlen + bin);
        for (i = 0; i < n * *per; i++)
            sum += (unsigned char)resp[*data + i];
        ck_assert_uint_ge(sum, 0);
    } else {
        ck_assert_int_eq(rc, -EPROTO);
        ck_assert_uint_gt(strlen(err), 0);
    }
    free(resp);
    return rc;
}

static int parse_s(const char *json, size_t bin, size_t n, size_t *data, size_t *per, char *err)
{
    return parse(json, strlen(json), bin, n, data, per, err, 300);
}

#define WRAP_BIG 18446 /* outputs of 1e15 bytes: 1.8446e19, just under 2^64 */

/* The attack: 18446 outputs of 10^15 bytes and one of 2^64 - 18446e15 - (|back| + the
 * JSON header's length) bytes put "logits" at 2^64 - back - len, so an unchecked offset wraps to
 * |back| bytes before the body; its size of back + 80 wraps the old end check (json_len + offset +
 * size <= body) back to 80. The JSON header's length does not change with |back|'s digits here. */
static char *wrap_json(uint64_t back, size_t *len)
{
    const char one[] = "{\"parameters\":{\"binary_data_size\":1e15}},"; /* no name */
    size_t cap = WRAP_BIG * (sizeof(one) - 1) + 256, k = 0, i, pass;
    char *j = malloc(cap);

    ck_assert_ptr_nonnull(j);
    *len = 0;
    for (pass = 0; pass < 2; pass++) { /* the second with the first's length */
        k = (size_t)snprintf(j, cap, "{\"outputs\":[");
        for (i = 0; i < WRAP_BIG; i++) {
            memcpy(j + k, one, sizeof(one) - 1);
            k += sizeof(one) - 1;
        }
        k += (size_t)snprintf(
            j + k, cap - k,
            "{\"name\":\"p\",\"parameters\":{\"binary_data_size\":%llu}},"
            "{\"name\":\"logits\",\"parameters\":{\"binary_data_size\":%llu}}]}",
            (unsigned long long)(0 - (uint64_t)WRAP_BIG * 1000000000000000ull - back - *len),
            (unsigned long long)(back + 80));
        ck_assert(pass == 0 || k == *len);
        *len = k;
    }
    return j;
}

START_TEST(kserve_wrap_attack)
{
    char err[300];
    size_t len, data = 7, per = 7, off = 7, size = 7;
    char *j = wrap_json(4096, &len);
    uint64_t sum = (uint64_t)WRAP_BIG * 1000000000000000ull;

    /* The sizes really wrap: the sum before "logits" is 2^64 - 4096 - len (mod 2^64), and the
     * old end check's sum is 80. */
    sum += 0 - (uint64_t)WRAP_BIG * 1000000000000000ull - 4096 - len;
    ck_assert_uint_eq(sum, 0 - 4096 - (uint64_t)len);
    ck_assert_uint_eq(len + sum + 4096 + 80, 80);
    ck_assert_uint_lt(len, KS_MAX_JSON_HEADER);
    ck_assert_int_eq(parse(j, len, 80, 1, &data, &per, err, sizeof(err)), -EPROTO);
    ck_assert_str_eq(err, "output 0 (''): binary_data_size 1000000000000000 at offset 0 runs "
                          "past the 80-byte binary part");
    ck_assert_uint_eq(data, 7); /* untouched on failure */
    ck_assert_uint_eq(per, 7);
    /* With a binary part big enough for one 10^15 output (nothing is read from it), the second
     * one is refused at its offset: the sum is checked at every step. */
    ck_assert_int_eq(
        ks_response_output(j, len, 1000000000000080ull, "logits", &off, &size, err, sizeof(err)),
        -EPROTO);
    ck_assert_str_eq(err, "output 1 (''): binary_data_size 1000000000000000 at offset "
                          "1000000000000000 runs past the 1000000000000080-byte binary part");
    ck_assert_uint_eq(off, 7);
    free(j);
    /* The variant the issue saw return 64 MiB of the node's heap as a result. */
    j = wrap_json((uint64_t)64 << 20, &len);
    ck_assert_int_eq(parse(j, len, 80, 1, &data, &per, err, sizeof(err)), -EPROTO);
    ck_assert_str_eq(err, "output 0 (''): binary_data_size 1000000000000000 at offset 0 runs "
                          "past the 80-byte binary part");
    free(j);

    /* Small sizes each inside the body whose sum is not. */
    ck_assert_int_eq(
        parse_s("{\"outputs\":[{\"name\":\"a\",\"parameters\":{\"binary_data_size\":"
                "50}},{\"name\":\"logits\",\"parameters\":{\"binary_data_size\":40}}]}",
                88, 1, &data, &per, err),
        -EPROTO);
    ck_assert_str_eq(err, "output 1 ('logits'): binary_data_size 40 at offset 50 runs past the "
                          "88-byte binary part");
    /* ... and exactly inside: the result is the last 38 bytes. */
    ck_assert_int_eq(
        parse_s("{\"outputs\":[{\"name\":\"a\",\"parameters\":{\"binary_data_size\":"
                "50}},{\"name\":\"logits\",\"parameters\":{\"binary_data_size\":38}}]}",
                88, 2, &data, &per, err),
        0);
    ck_assert_uint_eq(per, 19);
    ck_assert_uint_eq(data, strlen("{\"outputs\":[{\"name\":\"a\",\"parameters\":{\"binary_data_"
                                   "size\":50}},{\"name\":\"logits\",\"parameters\":{\"binary_"
                                   "data_size\":38}}]}") +
                                50);
}
END_TEST

static const char *one_output(char *buf, size_t cap, const char *size)
{
    snprintf(buf, cap,
             "{\"outputs\":[{\"name\":\"x\\n\\u0001\",\"parameters\":{\"binary_data_size\":%s}},"
             "{\"name\":\"logits\",\"parameters\":{\"binary_data_size\":8}}]}",
             size);
    return buf;
}

START_TEST(kserve_sizes)
{
    char err[300], j[300];
    size_t data, per;

    /* Sizes of another output: the name in the message has its control bytes replaced. */
    ck_assert_int_eq(parse_s(one_output(j, sizeof(j), "-1"), 64, 1, &data, &per, err), -EPROTO);
    ck_assert_str_eq(err, "output 0 ('x?\?'): binary_data_size -1 is negative");
    ck_assert_int_eq(parse_s(one_output(j, sizeof(j), "2.5"), 64, 1, &data, &per, err), -EPROTO);
    ck_assert_str_eq(err, "output 0 ('x?\?'): binary_data_size 2.5 is not a whole number");
    ck_assert_int_eq(parse_s(one_output(j, sizeof(j), "\"8\""), 64, 1, &data, &per, err), -EPROTO);
    ck_assert_str_eq(err, "output 0 ('x?\?'): binary_data_size is not a number");
    ck_assert_int_eq(parse_s(one_output(j, sizeof(j), "null"), 64, 1, &data, &per, err), -EPROTO);
    ck_assert_str_eq(err, "output 0 ('x?\?'): binary_data_size is not a number");
    ck_assert_int_eq(parse_s(one_output(j, sizeof(j), "1e400"), 64, 1, &data, &per, err), -EPROTO);
    ck_assert_str_eq(err, "output 0 ('x?\?'): binary_data_size inf at offset 0 runs past the "
                          "64-byte binary part");
    ck_assert_int_eq(
        parse_s(one_output(j, sizeof(j), "18446744073709551616"), 64, 1, &data, &per, err),
        -EPROTO);
    ck_assert_str_eq(err, "output 0 ('x?\?'): binary_data_size 1.8446744073709552e+19 at offset "
                          "0 runs past the 64-byte binary part");
    ck_assert_int_eq(parse_s(one_output(j, sizeof(j), "56"), 64, 1, &data, &per, err), 0);
    ck_assert_uint_eq(per, 8);
    ck_assert_int_eq(parse_s(one_output(j, sizeof(j), "56"), 63, 1, &data, &per, err), -EPROTO);
    ck_assert_str_eq(err, "output 1 ('logits'): binary_data_size 8 at offset 56 runs past the "
                          "63-byte binary part");
    /* The output itself: empty, or not splitting into the batch. */
    ck_assert_int_eq(parse_s("{\"outputs\":[{\"name\":\"logits\",\"parameters\":{\"binary_data_"
                             "size\":0}}]}",
                             8, 1, &data, &per, err),
                     -EPROTO);
    ck_assert_str_eq(err, "output 'logits' of 0 bytes does not split into 1 non-empty samples");
    ck_assert_int_eq(parse_s("{\"outputs\":[{\"name\":\"logits\",\"parameters\":{\"binary_data_"
                             "size\":8}}]}",
                             8, 3, &data, &per, err),
                     -EPROTO);
    ck_assert_str_eq(err, "output 'logits' of 8 bytes does not split into 3 non-empty samples");
    ck_assert_int_eq(
        parse_s("{\"outputs\":[{\"name\":\"logits\",\"data\":[1,2]}]}", 8, 1, &data, &per, err),
        -EPROTO);
    ck_assert_str_eq(err, "output 'logits' came back as JSON, not binary (no binary_data_size)");
    /* An error object: its message copied with control bytes replaced. */
    ck_assert_int_eq(parse_s("{\"error\":\"bad\\nline\\u0007\"}", 0, 1, &data, &per, err), -EPROTO);
    ck_assert_str_eq(err, "server error: bad?line?");
    /* A JSON header cut short (its length says fewer bytes than the JSON has). */
    ck_assert_int_eq(
        parse("{\"outputs\":[{\"name\":\"logits\"", 20, 8, 1, &data, &per, err, sizeof(err)),
        -EPROTO);
    ck_assert_str_eq(err, "the response header is not a JSON object");
    ck_assert_int_eq(parse_s("{\"outputs\":{}}", 8, 1, &data, &per, err), -EPROTO);
    ck_assert_str_eq(err, "the response has no outputs array");
    ck_assert_int_eq(parse_s("{\"outputs\":[1,\"a\",[]]}", 8, 1, &data, &per, err), -EPROTO);
    ck_assert_str_eq(err, "the response has no output named 'logits'");
}
END_TEST

START_TEST(kserve_header_length)
{
#define HL(s) ks_header_length(s, strlen(s))
    char err[300], body[] = "{}";
    size_t data, per;

    ck_assert_int_eq(HL("Inference-Header-Content-Length: 123"), 123);
    ck_assert_int_eq(HL("inference-header-content-length:\t7 "), 7);
    ck_assert_int_eq(HL("Inference-Header-Content-Length: 0"), 0);
    ck_assert_int_eq(HL("Inference-Header-Content-Length: 1048576"), 1048576);
    ck_assert_int_eq(HL("Content-Length: 5"), -1);
    ck_assert_int_eq(HL("Inference-Header-Content"), -1);
    ck_assert_int_eq(HL("Inference-Header-Content-Length: 1048577"), -2);
    ck_assert_int_eq(HL("Inference-Header-Content-Length: 99999999999999999999999999"), -2);
    ck_assert_int_eq(HL("Inference-Header-Content-Length: 12x"), -2);
    ck_assert_int_eq(HL("Inference-Header-Content-Length: -5"), -2);
    ck_assert_int_eq(HL("Inference-Header-Content-Length: 1 2"), -2);
    ck_assert_int_eq(HL("Inference-Header-Content-Length:"), -2);
    ck_assert_int_eq(HL("Inference-Header-Content-Length:   "), -2);
#undef HL
    ck_assert_int_eq(ks_response_parse(body, 2, -1, "logits", 1, &data, &per, err, sizeof(err)),
                     -EPROTO);
    ck_assert_str_eq(err, "no Inference-Header-Content-Length (body 2 bytes): the server did not "
                          "answer with the binary tensor extension");
    ck_assert_int_eq(ks_response_parse(body, 2, -2, "logits", 1, &data, &per, err, sizeof(err)),
                     -EPROTO);
    ck_assert_str_eq(err, "Inference-Header-Content-Length is not a decimal from 0 to 1048576 (or "
                          "came twice with different values)");
    ck_assert_int_eq(
        ks_response_parse(body, 2, 1048577, "logits", 1, &data, &per, err, sizeof(err)), -EPROTO);
    ck_assert_str_eq(err, "Inference-Header-Content-Length is not a decimal from 0 to 1048576 (or "
                          "came twice with different values)");
    ck_assert_int_eq(ks_response_parse(body, 2, 3, "logits", 1, &data, &per, err, sizeof(err)),
                     -EPROTO);
    ck_assert_str_eq(err, "Inference-Header-Content-Length 3 is past the 2-byte body");
    ck_assert_int_eq(ks_response_parse(NULL, 0, 0, "logits", 1, &data, &per, err, sizeof(err)),
                     -EPROTO);
    ck_assert_str_eq(err, "the response header is not a JSON object");
    ck_assert_int_eq(ks_response_parse(body, 2, 2, "logits", 0, &data, &per, err, sizeof(err)),
                     -EPROTO);
    ck_assert_str_eq(err, "a response for a batch of 0 samples");
}
END_TEST

static int tensor(const char *dt_shape, size_t size, size_t bin, char *err)
{
    char j[400];
    size_t data, per;
    snprintf(j, sizeof(j),
             "{\"outputs\":[{\"name\":\"logits\",%s,\"parameters\":{\"binary_data_size\":%zu}}]}",
             dt_shape, size);
    return parse_s(j, bin, 2, &data, &per, err);
}

START_TEST(kserve_tensor)
{
    char err[300];

    ck_assert_int_eq(tensor("\"datatype\":\"FP32\",\"shape\":[2,10]", 80, 80, err), 0);
    ck_assert_int_eq(tensor("\"datatype\":\"BYTES\",\"shape\":[2]", 10, 10, err), 0);
    ck_assert_int_eq(tensor("\"datatype\":\"FP32\",\"shape\":[2,11]", 80, 80, err), -EPROTO);
    ck_assert_str_eq(err, "output 'logits': datatype FP32 and its shape make 88 bytes, "
                          "binary_data_size says 80");
    /* Dimensions whose product wraps 64 bits (2^31 cubed times 4 bytes is 2^95; modulo 2^64,
     * 2^33 * 2^31 * 2^31 * 4 would be 0). */
    ck_assert_int_eq(
        tensor("\"datatype\":\"FP32\",\"shape\":[2147483648,2147483648,2147483648]", 80, 80, err),
        -EPROTO);
    ck_assert_str_eq(err, "output 'logits': datatype FP32 and its shape make more than 2^64 bytes, "
                          "binary_data_size says 80");
    ck_assert_int_eq(
        tensor("\"datatype\":\"UINT8\",\"shape\":[4294967296,4294967296]", 80, 80, err), -EPROTO);
    ck_assert_str_eq(err,
                     "output 'logits': datatype UINT8 and its shape make more than 2^64 bytes, "
                     "binary_data_size says 80");
    ck_assert_int_eq(tensor("\"datatype\":\"FP64\",\"shape\":[4503599627370496,512]", 80, 80, err),
                     -EPROTO);
    ck_assert_str_eq(err, "output 'logits': datatype FP64 and its shape make more than 2^64 bytes, "
                          "binary_data_size says 80");
    ck_assert_int_eq(tensor("\"datatype\":\"FP32\",\"shape\":[0,4294967296]", 80, 80, err),
                     -EPROTO);
    ck_assert_str_eq(err, "output 'logits': datatype FP32 and its shape make 0 bytes, "
                          "binary_data_size says 80");
    ck_assert_int_eq(
        tensor("\"datatype\":\"FP32\",\"shape\":[4294967296,4294967296,0]", 80, 80, err), -EPROTO);
    ck_assert_str_eq(err, "output 'logits': datatype FP32 and its shape make 0 bytes, "
                          "binary_data_size says 80");
    ck_assert_int_eq(tensor("\"datatype\":\"FP32\",\"shape\":[2,-10]", 80, 80, err), -EPROTO);
    ck_assert_str_eq(err,
                     "output 'logits': a shape dimension is not a whole number from 0 to 2^53");
    ck_assert_int_eq(tensor("\"datatype\":\"FP32\",\"shape\":[2,1.5]", 80, 80, err), -EPROTO);
    ck_assert_str_eq(err,
                     "output 'logits': a shape dimension is not a whole number from 0 to 2^53");
    ck_assert_int_eq(tensor("\"datatype\":\"FP32\",\"shape\":[2,1e300]", 80, 80, err), -EPROTO);
    ck_assert_str_eq(err,
                     "output 'logits': a shape dimension is not a whole number from 0 to 2^53");
    ck_assert_int_eq(tensor("\"datatype\":\"FP32\",\"shape\":[2,\"10\"]", 80, 80, err), -EPROTO);
    ck_assert_str_eq(err,
                     "output 'logits': a shape dimension is not a whole number from 0 to 2^53");
    ck_assert_int_eq(tensor("\"datatype\":\"FP9\\u0001\",\"shape\":[2,10]", 80, 80, err), -EPROTO);
    ck_assert_str_eq(err, "output 'logits': datatype 'FP9?' is not a KServe v2 datatype");
    ck_assert_int_eq(tensor("\"shape\":[2,20]", 80, 80, err), -EPROTO);
    ck_assert_str_eq(err, "output 'logits': datatype must be a string and shape an array");
    ck_assert_int_eq(tensor("\"datatype\":\"FP32\",\"shape\":20", 80, 80, err), -EPROTO);
    ck_assert_str_eq(err, "output 'logits': datatype must be a string and shape an array");
}
END_TEST

START_TEST(kserve_shape_option)
{
    ks_tensor_t t;
    char err[300];
    size_t bytes = 7;

    ck_assert_int_eq(ks_parse_shape("1,28,28", 1, &t, &bytes, err, sizeof(err)), 0);
    ck_assert_uint_eq(bytes, 784);
    ck_assert_uint_eq(t.ndims, 3);
    ck_assert_int_eq(t.shape[2], 28);
    /* The shapes: 784 B and 0 B per sample before, as the product wrapped. */
    ck_assert_int_eq(ks_parse_shape("1268218531,3498256,41579", 1, &t, &bytes, err, sizeof(err)),
                     -EINVAL);
    ck_assert_str_eq(err, "option shape=1268218531,3498256,41579: one sample of 1-byte elements "
                          "would be over 4294967295 bytes (the largest frame)");
    ck_assert_int_eq(
        ks_parse_shape("2147483648,2147483648,2147483648", 4, &t, &bytes, err, sizeof(err)),
        -EINVAL);
    ck_assert_str_eq(err, "option shape=2147483648,2147483648,2147483648: one sample of 4-byte "
                          "elements would be over 4294967295 bytes (the largest frame)");
    /* The limit itself. */
    ck_assert_int_eq(ks_parse_shape("65535,65537", 1, &t, &bytes, err, sizeof(err)), 0);
    ck_assert_uint_eq(bytes, 4294967295u);
    ck_assert_int_eq(ks_parse_shape("65536,65536", 1, &t, &bytes, err, sizeof(err)), -EINVAL);
    ck_assert_int_eq(ks_parse_shape("1073741823", 4, &t, &bytes, err, sizeof(err)), 0);
    ck_assert_uint_eq(bytes, 4294967292u);
    ck_assert_int_eq(ks_parse_shape("1073741824", 4, &t, &bytes, err, sizeof(err)), -EINVAL);
    ck_assert_int_eq(ks_parse_shape("1,1,1,1,1,1,1,1", 8, &t, &bytes, err, sizeof(err)), 0);
    ck_assert_uint_eq(bytes, 8);
    /* Zero, negative, too many, not a number, empty. */
    ck_assert_int_eq(ks_parse_shape("0,3", 1, &t, &bytes, err, sizeof(err)), -EINVAL);
    ck_assert_str_eq(err, "option shape=0,3: expected up to 8 integers from 1 to 2147483648 "
                          "separated by commas");
    ck_assert_int_eq(ks_parse_shape("-1", 1, &t, &bytes, err, sizeof(err)), -EINVAL);
    ck_assert_int_eq(ks_parse_shape("2147483649", 1, &t, &bytes, err, sizeof(err)), -EINVAL);
    ck_assert_int_eq(ks_parse_shape("1,1,1,1,1,1,1,1,1", 1, &t, &bytes, err, sizeof(err)), -EINVAL);
    ck_assert_int_eq(ks_parse_shape("1,2,", 1, &t, &bytes, err, sizeof(err)), -EINVAL);
    ck_assert_int_eq(ks_parse_shape("1,,2", 1, &t, &bytes, err, sizeof(err)), -EINVAL);
    ck_assert_int_eq(ks_parse_shape("28x28", 1, &t, &bytes, err, sizeof(err)), -EINVAL);
    ck_assert_int_eq(ks_parse_shape("99999999999999999999", 1, &t, &bytes, err, sizeof(err)),
                     -EINVAL);
    ck_assert_int_eq(ks_parse_shape("", 1, &t, &bytes, err, sizeof(err)), -EINVAL);
    ck_assert_str_eq(err, "option shape is empty");
    ck_assert_uint_eq(bytes, 8); /* untouched by the failures */
}
END_TEST

/* The request header and a well-formed response's output lookup. */
START_TEST(kserve_v2)
{
    ks_tensor_t t = {"input", "logits", "UINT8", {1, 28, 28}, 3};
    const char resp[] = "{\"outputs\":[{\"name\":\"aux\",\"parameters\":{\"binary_data_size\":8}},"
                        "{\"name\":\"j\",\"data\":[1]},"
                        "{\"name\":\"logits\",\"parameters\":{\"binary_data_size\":80}}]}";
    char *h, err[200];
    size_t len, off, size;

    ck_assert_uint_eq(ks_dtype_size("FP32"), 4);
    ck_assert_uint_eq(ks_dtype_size("FP8"), 0);
    ck_assert_int_eq(ks_request_header(&t, 2, 1568, &h, &len), 0);
    ck_assert_str_eq(h, "{\"inputs\":[{\"name\":\"input\",\"shape\":[2,1,28,28],\"datatype\":"
                        "\"UINT8\",\"parameters\":{\"binary_data_size\":1568}}],\"outputs\":[{"
                        "\"name\":\"logits\",\"parameters\":{\"binary_data\":true}}]}");
    ck_assert_uint_eq(len, strlen(h));
    free(h);
    ck_assert_int_eq(ks_response_output(resp, strlen(resp), 88, "logits", &off, &size, err, 200),
                     0);
    ck_assert_uint_eq(off, 8);
    ck_assert_uint_eq(size, 80);
    ck_assert_int_lt(ks_response_output(resp, strlen(resp), 88, "j", &off, &size, err, 200), 0);
    ck_assert_int_lt(ks_response_output(resp, strlen(resp), 88, "x", &off, &size, err, 200), 0);
    ck_assert_int_lt(
        ks_response_output("{\"error\":\"bad shape\"}", 21, 0, "x", &off, &size, err, 200), 0);
    ck_assert_ptr_nonnull(strstr(err, "bad shape"));
    ck_assert_int_lt(ks_response_output(resp, 20, 88, "logits", &off, &size, err, 200), 0);
}
END_TEST

CHECK_ONE_TEST_TCASE_TIMEOUT(kserve_wrap_attack, 30)
CHECK_ONE_TEST_TCASE_TIMEOUT(kserve_sizes, 30)
CHECK_ONE_TEST_TCASE_TIMEOUT(kserve_header_length, 30)
CHECK_ONE_TEST_TCASE_TIMEOUT(kserve_tensor, 30)
CHECK_ONE_TEST_TCASE_TIMEOUT(kserve_shape_option, 30)
CHECK_ONE_TEST_TCASE_TIMEOUT(kserve_v2, 30)

CHECK_MAIN("kserve", tc_kserve_wrap_attack, tc_kserve_sizes, tc_kserve_header_length,
           tc_kserve_tensor, tc_kserve_shape_option, tc_kserve_v2)
