/* Shared helpers of the onnx backend suite: driving the backend through the plugin ABI as the
 * node would, and building small ONNX models in memory with the generated protobuf-c code. */
#ifndef TEST_ONNX_H
#define TEST_ONNX_H

#include <check.h>
#include <stddef.h>
#include <stdint.h>

#include "onnx/onnx.pb-c.h"
#include "onnx_model_builder.h"
#include "sut/sut_backend.h"

/* ---- the backend, through its ops table ---- */

typedef struct {
    const sut_backend_ops_t *ops;
    sut_backend_t *b;
    sut_backend_info_t info;
    char err[1024];
    int rc; /* create()'s result */
} tb_t;

/* create() with model=|model| plus the NULL-terminated key, value pairs |kv| (may be NULL).
 * Returns create()'s result; t->err holds its message. */
int tb_open(tb_t *t, const sut_backend_ops_t *ops, const char *model, const char *const *kv,
            uint32_t max_batch, uint32_t threads);
void tb_close(tb_t *t);

/* Runs |n| samples (input: n * input_size bytes) as one batch and copies each sample's result
 * into out + i * out_stride. Asserts that every sample is completed exactly once with status 0
 * and |out_stride| bytes. Returns infer()'s result. */
int tb_run(tb_t *t, const void *input, size_t n, void *out, size_t out_stride);

/* Messages that the backend logged (through cfg->log) since tb_open, joined by newlines. */
const char *tb_log(void);

/* ---- files ---- */

/* A new empty file in $TMPDIR (or /tmp); the returned path is malloc'd. */
char *tmp_path(const char *suffix);
/* Reads a whole file; NULL when it cannot. */
uint8_t *read_all(const char *path, size_t *len);
int write_all(const char *path, const void *data, size_t len);

/* ---- building models ---- */

/* onnx_model_builder.h, plus: the model in a new temporary file (path malloc'd); frees the
 * builder. */
char *mb_write(mb_t *m);

/* Deterministic pseudo-random floats in [lo, hi). */
void fill_rand(float *p, size_t n, float lo, float hi, uint32_t seed);

/* |got| and |want| agree within atol + rtol * |want| everywhere; names the first mismatch. */
void assert_close(const float *got, const float *want, size_t n, float atol, float rtol,
                  const char *what);

TCase *tcase_node_conv(void);
TCase *tcase_node_relu(void);
TCase *tcase_node_maxpool(void);
TCase *tcase_node_averagepool(void);
TCase *tcase_node_globalaveragepool(void);
TCase *tcase_node_batchnorm(void);
TCase *tcase_node_elementwise(void);
TCase *tcase_node_gemm(void);
TCase *tcase_node_matmul(void);
TCase *tcase_node_flatten(void);
TCase *tcase_node_reshape(void);
TCase *tcase_node_softmax(void);
TCase *tcase_node_identity(void);
TCase *tcase_node_constant(void);
TCase *tcase_node_cast(void);
TCase *tcase_node_convtranspose(void);
TCase *tcase_node_instancenorm(void);
TCase *tcase_node_leakyrelu(void);
TCase *tcase_node_concat(void);
TCase *tcase_node_3d(void);
TCase *tcase_load_errors(void);
TCase *tcase_options(void);
TCase *tcase_plugin(void);
TCase *tcase_fusion(void);
TCase *tcase_batching(void);
TCase *tcase_cast(void);
TCase *tcase_fmnist_accuracy(void);
TCase *tcase_cuda_plan(void);
TCase *tcase_cuda_plan_nodes(void);
TCase *tcase_cuda_plan_resnet50(void);
TCase *tcase_cuda_nodes(void);
TCase *tcase_cuda_options(void);
TCase *tcase_cuda_engine(void);

#endif
