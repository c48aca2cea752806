/* npy_infer: runs the onnx backend over a QSL .npy file and writes LoadGen's accuracy log, so
 * that the data set tool, the backend and the accuracy script can be tested end to end without
 * the network (test_tools.py).
 *
 *   npy_infer --model M.onnx --npy samples.npy --out mlperf_log_accuracy.json
 *             [--output raw|argmax] [--batch 64]
 *
 * The log is what LoadGen writes: a JSON array of {"seq_id", "qsl_idx", "data"}, data being the
 * response bytes in upper-case hex. Only what the QSL needs of .npy is read: a C-ordered array
 * whose first dimension is the sample axis. */
#include "onnx_backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static FILE *out;
static size_t next_seq, base;

static void on_complete(sut_batch_t *b, const sut_result_t *r, size_t n)
{
    size_t i, k;
    (void)b;
    for (i = 0; i < n; i++) {
        const uint8_t *d = r[i].data;
        if (r[i].status != 0) {
            fprintf(stderr, "npy_infer: sample %zu failed: %d\n", base + r[i].index, r[i].status);
            exit(1);
        }
        fprintf(out, "%s\n  {\"seq_id\": %zu, \"qsl_idx\": %zu, \"data\": \"", next_seq ? "," : "",
                next_seq, base + r[i].index);
        for (k = 0; k < r[i].size; k++)
            fprintf(out, "%02X", d[k]);
        fprintf(out, "\"}");
        next_seq++;
    }
}

/* Returns the data offset of a v1/v2/v3 .npy file in |buf| and its first dimension. */
static long npy_parse(const uint8_t *buf, size_t len, size_t *count)
{
    size_t hlen, off;
    const char *h, *shape;
    if (len < 12 || memcmp(buf, "\x93NUMPY", 6) != 0)
        return -1;
    if (buf[6] == 1) {
        hlen = buf[8] | (size_t)buf[9] << 8;
        off = 10;
    } else {
        hlen = buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 | (size_t)buf[11] << 24;
        off = 12;
    }
    if (off + hlen > len)
        return -1;
    h = (const char *)buf + off;
    if (memmem(h, hlen, "'fortran_order': True", 21))
        return -1;
    shape = memmem(h, hlen, "'shape': (", 10);
    if (!shape)
        return -1;
    *count = strtoul(shape + 10, NULL, 10);
    return (long)(off + hlen);
}

int main(int argc, char **argv)
{
    const char *model = NULL, *npy = NULL, *path = NULL, *output = "raw", *batch_s = "64";
    const char *keys[] = {"model", "output"};
    const char *values[2];
    sut_backend_config_t cfg;
    sut_backend_info_t info;
    const sut_backend_ops_t *ops = sut_backend_onnx_ops();
    sut_backend_t *b;
    sut_sample_t *samples;
    uint8_t *buf;
    size_t len, count, i, batch;
    long data;
    char err[1024];
    FILE *f;
    int a;

    for (a = 1; a + 1 < argc; a += 2) {
        if (strcmp(argv[a], "--model") == 0)
            model = argv[a + 1];
        else if (strcmp(argv[a], "--npy") == 0)
            npy = argv[a + 1];
        else if (strcmp(argv[a], "--out") == 0)
            path = argv[a + 1];
        else if (strcmp(argv[a], "--output") == 0)
            output = argv[a + 1];
        else if (strcmp(argv[a], "--batch") == 0)
            batch_s = argv[a + 1];
    }
    batch = strtoul(batch_s, NULL, 10);
    if (!model || !npy || !path || a != argc || batch == 0) {
        fprintf(stderr, "usage: npy_infer --model M.onnx --npy samples.npy --out log.json "
                        "[--output raw|argmax] [--batch 64]\n");
        return 2;
    }
    f = fopen(npy, "rb");
    if (!f || fseek(f, 0, SEEK_END) != 0 || (len = (size_t)ftell(f)) == 0 ||
        fseek(f, 0, SEEK_SET) != 0 || !(buf = malloc(len)) || fread(buf, 1, len, f) != len) {
        fprintf(stderr, "npy_infer: cannot read %s\n", npy);
        return 1;
    }
    fclose(f);
    if ((data = npy_parse(buf, len, &count)) < 0) {
        fprintf(stderr, "npy_infer: %s is not a C-ordered .npy file\n", npy);
        return 1;
    }

    values[0] = model;
    values[1] = output;
    memset(&cfg, 0, sizeof(cfg));
    cfg.device = "cpu";
    cfg.max_batch = (uint32_t)batch;
    cfg.n_options = 2;
    cfg.keys = keys;
    cfg.values = values;
    if (ops->create(&cfg, &b, err, sizeof(err)) != 0) {
        fprintf(stderr, "npy_infer: %s\n", err);
        return 1;
    }
    ops->describe(b, &info);
    if (count == 0 || (len - (size_t)data) != count * info.input_size) {
        fprintf(stderr,
                "npy_infer: %s holds %zu bytes for %zu samples; the model takes %llu "
                "bytes per sample\n",
                npy, len - (size_t)data, count, (unsigned long long)info.input_size);
        return 1;
    }
    out = fopen(path, "w");
    samples = calloc(batch, sizeof(*samples));
    if (!out || !samples)
        return 1;
    fprintf(out, "[");
    for (base = 0; base < count; base += batch) {
        size_t n = count - base < batch ? count - base : batch;
        uint8_t *in = buf + data + base * info.input_size;
        sut_batch_t bt;
        memset(&bt, 0, sizeof(bt));
        for (i = 0; i < n; i++) {
            samples[i].data = in + i * info.input_size;
            samples[i].size = info.input_size;
        }
        bt.n = n;
        bt.samples = samples;
        bt.input = in;
        bt.input_size = n * info.input_size;
        bt.uniform = 1;
        bt.complete = on_complete;
        if (ops->infer(b, &bt) != 0) {
            fprintf(stderr, "npy_infer: infer failed\n");
            return 1;
        }
    }
    fprintf(out, "\n]\n");
    ops->destroy(b);
    free(samples);
    free(buf);
    return fclose(out) == 0 ? 0 : 1;
}
