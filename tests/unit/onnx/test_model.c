/* Small models built here and checked against plain C references: the graph rewrites (BN folded
 * into Conv, ReLU and residual Add fused, Cast+Div folded), grouped and dilated convolution,
 * batching with padding and several inputs, and the casts the backend supports. */
#include "test_onnx.h"
#include "onnx_backend.h"
#include "onnx_graph.h"

#include "cmn/err.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    int c, h, w;
} chw_t;

/* Direct convolution of one sample, NCHW, weights [m, c/group, kh, kw]. */
static void ref_conv(const float *x, chw_t in, const float *wt, int m, int kh, int kw,
                     const float *bias, int group, int stride, int dil, int pad_t, int pad_l,
                     chw_t out, float *y)
{
    int cpg = in.c / group, mpg = m / group, o, oy, ox, ci, ky, kx;
    for (o = 0; o < m; o++)
        for (oy = 0; oy < out.h; oy++)
            for (ox = 0; ox < out.w; ox++) {
                int g = o / mpg;
                double acc = bias ? bias[o] : 0.0;
                for (ci = 0; ci < cpg; ci++)
                    for (ky = 0; ky < kh; ky++)
                        for (kx = 0; kx < kw; kx++) {
                            int iy = oy * stride - pad_t + ky * dil;
                            int ix = ox * stride - pad_l + kx * dil;
                            if (iy < 0 || iy >= in.h || ix < 0 || ix >= in.w)
                                continue;
                            acc += (double)x[((g * cpg + ci) * in.h + iy) * in.w + ix] *
                                   wt[((o * cpg + ci) * kh + ky) * kw + kx];
                        }
                y[(o * out.h + oy) * out.w + ox] = (float)acc;
            }
}

static void ref_bn(float *x, int c, int hw, const float *bn /* scale, shift, mean, var */)
{
    int i, j;
    for (i = 0; i < c; i++)
        for (j = 0; j < hw; j++)
            x[i * hw + j] =
                (x[i * hw + j] - bn[2 * c + i]) / sqrtf(bn[3 * c + i] + 1e-5f) * bn[i] + bn[c + i];
}

static void ref_relu(float *x, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++)
        x[i] = x[i] > 0 ? x[i] : 0;
}

static const onnx_node_t *live_node(const onnx_graph_t *g, int k)
{
    int i;
    for (i = 0; i < g->n_nodes; i++)
        if (!g->nodes[i].dead && k-- == 0)
            return &g->nodes[i];
    return NULL;
}

static int live_nodes(const onnx_graph_t *g)
{
    int i, n = 0;
    for (i = 0; i < g->n_nodes; i++)
        n += !g->nodes[i].dead;
    return n;
}

/* x -> Relu -> r0 -> Conv(W1,B1) -> BN -> Relu -> Conv(W2) -> BN -> Add(., r0) -> Relu: a
 * ResNet basic block. After loading only the ReLU and the two convolutions remain, the second
 * accumulating into r0's buffer in place (nothing reads r0 afterwards). */
START_TEST(test_residual_block)
{
    enum { C = 8, H = 6, W = 6, N = 5 };
    static const int64_t dx[] = {-1, C, H, W}, dw[] = {C, C, 3, 3}, dc[] = {C};
    float w1[C * C * 9], b1[C], bn1[4 * C], w2[C * C * 9], bn2[4 * C];
    float x[N * C * H * W], y[N * C * H * W], want[C * H * W], tmp[C * H * W], xi[C * H * W];
    const chw_t s = {C, H, W};
    const onnx_node_t *n0, *n1;
    onnx_graph_t *g;
    cmn_errbuf_t eb;
    Onnx__NodeProto *nd;
    mb_t *m = mb_new(13);
    char *p;
    tb_t t;
    int i, k;
    static const int64_t pads[] = {1, 1, 1, 1};

    fill_rand(w1, C * C * 9, -0.3f, 0.3f, 1);
    fill_rand(b1, C, -0.5f, 0.5f, 2);
    fill_rand(w2, C * C * 9, -0.3f, 0.3f, 3);
    fill_rand(bn1, 4 * C, 0.5f, 1.5f, 4);
    fill_rand(bn2, 4 * C, 0.5f, 1.5f, 5);
    fill_rand(bn1 + 2 * C, C, -0.2f, 0.2f, 6); /* means around zero */
    fill_rand(x, N * C * H * W, -1.0f, 1.0f, 7);
    mb_input(m, "x", 1, 4, dx);
    mb_output(m, "y", 1, 4, dx);
    mb_init(m, "w1", 1, 4, dw, w1);
    mb_init(m, "b1", 1, 1, dc, b1);
    mb_init(m, "w2", 1, 4, dw, w2);
    for (k = 0; k < 4; k++) {
        static const char *const names[2][4] = {{"s1", "h1", "m1", "v1"}, {"s2", "h2", "m2", "v2"}};
        mb_init(m, names[0][k], 1, 1, dc, bn1 + k * C);
        mb_init(m, names[1][k], 1, 1, dc, bn2 + k * C);
    }
    mb_node(m, "Relu", "relu0", "x", "r0");
    nd = mb_node(m, "Conv", "conv1", "r0,w1,b1", "c1");
    mb_attr_ints(m, nd, "pads", 4, pads);
    mb_node(m, "BatchNormalization", "bn1", "c1,s1,h1,m1,v1", "n1");
    mb_node(m, "Relu", "relu1", "n1", "r1");
    nd = mb_node(m, "Conv", "conv2", "r1,w2", "c2");
    mb_attr_ints(m, nd, "pads", 4, pads);
    mb_node(m, "BatchNormalization", "bn2", "c2,s2,h2,m2,v2", "n2");
    mb_node(m, "Add", "add", "n2,r0", "a");
    mb_node(m, "Relu", "relu2", "a", "y");
    p = mb_write(m);

    ck_assert_msg(onnx_graph_load(p, &g, &eb) == 0, "%s", eb.msg);
    ck_assert_int_eq(live_nodes(g), 3);
    ck_assert_int_eq(live_node(g, 0)->op, ONNX_OP_RELU);
    n0 = live_node(g, 1);
    n1 = live_node(g, 2);
    ck_assert_int_eq(n0->op, ONNX_OP_CONV);
    ck_assert_int_eq(n0->n_post, 1);
    ck_assert_int_eq(n0->post[0].kind, ONNX_POST_RELU);
    ck_assert_int_eq(n1->op, ONNX_OP_CONV);
    ck_assert_int_eq(n1->n_in, 3); /* the bias that folding BN gave it */
    ck_assert_int_eq(n1->n_post, 2);
    ck_assert_int_eq(n1->post[0].kind, ONNX_POST_SUM);
    ck_assert_str_eq(g->values[n1->post[0].value].name, "r0");
    ck_assert_int_eq(n1->post[1].kind, ONNX_POST_RELU);
    ck_assert_str_eq(g->values[n1->out].name, "y");
    onnx_graph_free(g);

    ck_assert_int_eq(tb_open(&t, sut_backend_onnx_ops(), p, NULL, 8, 2), 0);
    ck_assert_int_eq(tb_run(&t, x, N, y, sizeof(want)), 0);
    for (i = 0; i < N; i++) {
        char what[32];
        memcpy(xi, x + i * C * H * W, sizeof(xi));
        ref_relu(xi, C * H * W);
        ref_conv(xi, s, w1, C, 3, 3, b1, 1, 1, 1, 1, 1, s, tmp);
        ref_bn(tmp, C, H * W, bn1);
        ref_relu(tmp, C * H * W);
        ref_conv(tmp, s, w2, C, 3, 3, NULL, 1, 1, 1, 1, 1, s, want);
        ref_bn(want, C, H * W, bn2);
        for (k = 0; k < C * H * W; k++)
            want[k] += xi[k];
        ref_relu(want, C * H * W);
        snprintf(what, sizeof(what), "sample %d", i);
        assert_close(y + i * C * H * W, want, C * H * W, 1e-4f, 1e-4f, what);
    }
    tb_close(&t);
    unlink(p);
    free(p);
}
END_TEST

/* The residual operand is read again after the fused Add: the Conv must accumulate into a copy.
 * Two outputs, so the results are also gathered per sample. */
START_TEST(test_residual_copy)
{
    enum { C = 4, H = 5, W = 5, N = 3 };
    static const int64_t dx[] = {-1, C, H, W}, dw[] = {C, C, 1, 1};
    float w[C * C], x[N * C * H * W], out[N * 2 * C * H * W], r[C * H * W], want[C * H * W];
    const chw_t s = {C, H, W};
    mb_t *m = mb_new(13);
    char *p;
    tb_t t;
    int i, k;

    fill_rand(w, C * C, -1, 1, 11);
    fill_rand(x, N * C * H * W, -1, 1, 12);
    mb_input(m, "x", 1, 4, dx);
    mb_output(m, "y", 1, 4, dx);
    mb_output(m, "z", 1, 4, dx);
    mb_init(m, "w", 1, 4, dw, w);
    mb_node(m, "Relu", "r", "x", "a");
    mb_node(m, "Conv", "conv", "a,w", "c");
    mb_node(m, "Add", "add", "a,c", "y");
    mb_node(m, "Mul", "square", "a,a", "z"); /* reads a after the Add */
    p = mb_write(m);
    ck_assert_int_eq(tb_open(&t, sut_backend_onnx_ops(), p, NULL, 4, 1), 0);
    ck_assert_uint_eq(t.info.output_size, 2 * sizeof(want));
    ck_assert_int_eq(tb_run(&t, x, N, out, 2 * sizeof(want)), 0);
    for (i = 0; i < N; i++) {
        memcpy(r, x + i * C * H * W, sizeof(r));
        ref_relu(r, C * H * W);
        ref_conv(r, s, w, C, 1, 1, NULL, 1, 1, 1, 0, 0, s, want);
        for (k = 0; k < C * H * W; k++)
            want[k] += r[k];
        assert_close(out + i * 2 * C * H * W, want, C * H * W, 1e-5f, 1e-5f, "y");
        for (k = 0; k < C * H * W; k++)
            want[k] = r[k] * r[k];
        assert_close(out + (i * 2 + 1) * C * H * W, want, C * H * W, 1e-6f, 1e-6f, "z");
    }
    tb_close(&t);
    unlink(p);
    free(p);
}
END_TEST

/* Groups, dilation, stride and asymmetric padding together (no ONNX vector covers them). */
START_TEST(test_grouped_dilated_conv)
{
    enum { C = 6, M = 4, G = 2, H = 9, W = 8, N = 2 };
    static const int64_t dx[] = {-1, C, H, W}, dw[] = {M, C / G, 3, 3}, db[] = {M};
    static const int64_t pads[] = {2, 1, 0, 2}, dil[] = {2, 2}, str[] = {2, 2};
    /* out = floor((in + pads - ((k-1)*d+1)) / s) + 1 */
    const chw_t in = {C, H, W}, o = {M, (H + 2 - 5) / 2 + 1, (W + 3 - 5) / 2 + 1};
    const int64_t dy[] = {-1, M, (H + 2 - 5) / 2 + 1, (W + 3 - 5) / 2 + 1};
    float w[M * (C / G) * 9], b[M], x[N * C * H * W], y[N * M * 4 * 4], want[M * 4 * 4];
    Onnx__NodeProto *nd;
    mb_t *m = mb_new(11);
    char *p;
    tb_t t;
    int i;

    ck_assert_int_eq(o.h, 4);
    ck_assert_int_eq(o.w, 4);
    fill_rand(w, sizeof(w) / sizeof(w[0]), -1, 1, 21);
    fill_rand(b, M, -1, 1, 22);
    fill_rand(x, N * C * H * W, -1, 1, 23);
    mb_input(m, "x", 1, 4, dx);
    mb_output(m, "y", 1, 4, dy);
    mb_init(m, "w", 1, 4, dw, w);
    mb_init(m, "b", 1, 1, db, b);
    nd = mb_node(m, "Conv", "conv", "x,w,b", "y");
    mb_attr_int(m, nd, "group", G);
    mb_attr_ints(m, nd, "pads", 4, pads);
    mb_attr_ints(m, nd, "dilations", 2, dil);
    mb_attr_ints(m, nd, "strides", 2, str);
    p = mb_write(m);
    ck_assert_msg(tb_open(&t, sut_backend_onnx_ops(), p, NULL, 2, 1) == 0, "%s", t.err);
    ck_assert_int_eq(tb_run(&t, x, N, y, sizeof(want)), 0);
    for (i = 0; i < N; i++) {
        ref_conv(x + i * C * H * W, in, w, M, 3, 3, b, G, 2, 2, 2, 1, o, want);
        assert_close(y + i * M * 4 * 4, want, M * 4 * 4, 1e-5f, 1e-5f, "grouped conv");
    }
    tb_close(&t);
    unlink(p);
    free(p);
}
END_TEST

/* uint8 in, Cast, Div by 255, Gemm + Relu: the Div becomes the Cast's scale and the Relu a
 * post-op of the Gemm. */
START_TEST(test_cast_scale_gemm)
{
    enum { K = 6, O = 5, N = 7 };
    static const int64_t dx[] = {-1, K}, dw[] = {O, K}, db[] = {O}, dy[] = {-1, O}, d1[] = {1};
    const float c255 = 255.0f;
    float w[O * K], b[O], y[N * O], want[O];
    uint8_t x[N * K];
    onnx_graph_t *g;
    cmn_errbuf_t eb;
    Onnx__NodeProto *nd;
    mb_t *m = mb_new(13);
    char *p;
    tb_t t;
    int i, o, k;

    fill_rand(w, O * K, -1, 1, 31);
    fill_rand(b, O, -1, 1, 32);
    for (i = 0; i < N * K; i++)
        x[i] = (uint8_t)(i * 41 + 7);
    mb_input(m, "x", 2, 2, dx);
    mb_output(m, "y", 1, 2, dy);
    mb_init(m, "w", 1, 2, dw, w);
    mb_init(m, "b", 1, 1, db, b);
    mb_init(m, "k", 1, 1, d1, &c255);
    nd = mb_node(m, "Cast", "cast", "x", "xf");
    mb_attr_int(m, nd, "to", 1);
    mb_node(m, "Div", "scale", "xf,k", "xs");
    nd = mb_node(m, "Gemm", "fc", "xs,w,b", "g");
    mb_attr_int(m, nd, "transB", 1);
    mb_node(m, "Relu", "relu", "g", "y");
    p = mb_write(m);

    ck_assert_msg(onnx_graph_load(p, &g, &eb) == 0, "%s", eb.msg);
    ck_assert_int_eq(live_nodes(g), 2);
    ck_assert_int_eq(live_node(g, 0)->op, ONNX_OP_CAST);
    ck_assert(fabsf(live_node(g, 0)->scale - 1.0f / 255.0f) < 1e-9f);
    ck_assert_int_eq(live_node(g, 1)->n_post, 1);
    onnx_graph_free(g);

    ck_assert_int_eq(tb_open(&t, sut_backend_onnx_ops(), p, NULL, 8, 1), 0);
    ck_assert_uint_eq(t.info.input_size, K);
    ck_assert_int_eq(tb_run(&t, x, N, y, sizeof(want)), 0);
    for (i = 0; i < N; i++) {
        for (o = 0; o < O; o++) {
            double acc = b[o];
            for (k = 0; k < K; k++)
                acc += (double)x[i * K + k] / 255.0 * w[o * K + k];
            want[o] = acc > 0 ? (float)acc : 0;
        }
        assert_close(y + i * O, want, O, 1e-5f, 1e-5f, "cast scale gemm");
    }
    tb_close(&t);
    unlink(p);
    free(p);
}
END_TEST

TCase *tcase_fusion(void)
{
    TCase *tc = tcase_create("fusion");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_residual_block);
    tcase_add_test(tc, test_residual_copy);
    tcase_add_test(tc, test_grouped_dilated_conv);
    tcase_add_test(tc, test_cast_scale_gemm);
    return tc;
}

/* Any batch size gives each sample the result it gets alone: full plans (the input is read in
 * place), padded ones (5 samples on the plan of 8), and the batch of one. */
START_TEST(test_batch_sizes)
{
    enum { N = 16, OUT = 10 };
    uint8_t x[N * 784];
    float alone[N * OUT], batch[N * OUT];
    static const size_t sizes[] = {16, 5, 8, 3};
    size_t i, k, off;
    tb_t t;

    for (i = 0; i < sizeof(x); i++)
        x[i] = (uint8_t)((i * 2654435761u) >> 24);
    ck_assert_int_eq(
        tb_open(&t, sut_backend_onnx_ops(), MODEL_DIR "/fashion_mnist_cnn.onnx", NULL, 16, 2), 0);
    for (i = 0; i < N; i++)
        ck_assert_int_eq(tb_run(&t, x + i * 784, 1, alone + i * OUT, OUT * sizeof(float)), 0);
    for (k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        for (off = 0; off + sizes[k] <= N; off += sizes[k]) {
            ck_assert_int_eq(tb_run(&t, x + off * 784, sizes[k], batch, OUT * sizeof(float)), 0);
            /* other batch sizes may pick other kernels: equal up to float reassociation */
            assert_close(batch, alone + off * OUT, sizes[k] * OUT, 1e-4f, 1e-4f, "batch");
        }
    }
    tb_close(&t);
}
END_TEST

/* Two inputs per sample (x then y, back to back): gathered from the node's buffer. */
START_TEST(test_two_inputs)
{
    enum { N = 3 };
    static const int64_t d[] = {-1, 2, 3};
    float in[N * 12], out[N * 6];
    mb_t *m = mb_new(13);
    char *p;
    tb_t t;
    int i, k;

    fill_rand(in, N * 12, -2, 2, 41);
    mb_input(m, "x", 1, 3, d);
    mb_input(m, "y", 1, 3, d);
    mb_output(m, "z", 1, 3, d);
    mb_node(m, "Sub", "sub", "x,y", "z");
    p = mb_write(m);
    ck_assert_int_eq(tb_open(&t, sut_backend_onnx_ops(), p, NULL, 4, 1), 0);
    ck_assert_uint_eq(t.info.input_size, 2 * 6 * sizeof(float));
    ck_assert_uint_eq(t.info.max_batch, 4);
    ck_assert_int_eq(tb_run(&t, in, N, out, 6 * sizeof(float)), 0);
    for (i = 0; i < N; i++)
        for (k = 0; k < 6; k++)
            ck_assert_float_eq(out[i * 6 + k], in[i * 12 + k] - in[i * 12 + 6 + k]);
    tb_close(&t);
    unlink(p);
    free(p);
}
END_TEST

/* infer() from several node worker threads at once (as with sut-node --workers 3): batches are
 * serialised inside the backend and each gets its own results. */
typedef struct {
    tb_t *t;
    const uint8_t *x;
    const float *want;
    int ok;
} worker_t;

static void *infer_worker(void *arg)
{
    worker_t *w = arg;
    float out[4 * 10];
    int i, k;
    w->ok = 1;
    for (i = 0; i < 25; i++) {
        if (tb_run(w->t, w->x, 4, out, 10 * sizeof(float)) != 0)
            w->ok = 0;
        for (k = 0; k < 40; k++)
            if (fabsf(out[k] - w->want[k]) > 1e-4f + 1e-4f * fabsf(w->want[k]))
                w->ok = 0;
    }
    return NULL;
}

START_TEST(test_concurrent_infer)
{
    enum { W = 3 };
    uint8_t x[W][4 * 784];
    float want[W][40];
    pthread_t th[W];
    worker_t w[W];
    size_t i;
    int k;
    tb_t t;

    for (k = 0; k < W; k++)
        for (i = 0; i < sizeof(x[k]); i++)
            x[k][i] = (uint8_t)((i * 2654435761u + (uint32_t)k * 977u) >> 20);
    ck_assert_int_eq(
        tb_open(&t, sut_backend_onnx_ops(), MODEL_DIR "/fashion_mnist_cnn.onnx", NULL, 4, 2), 0);
    for (k = 0; k < W; k++)
        ck_assert_int_eq(tb_run(&t, x[k], 4, want[k], 10 * sizeof(float)), 0);
    for (k = 0; k < W; k++) {
        w[k].t = &t;
        w[k].x = x[k];
        w[k].want = want[k];
        ck_assert_int_eq(pthread_create(&th[k], NULL, infer_worker, &w[k]), 0);
    }
    for (k = 0; k < W; k++) {
        pthread_join(th[k], NULL);
        ck_assert_msg(w[k].ok, "worker %d got wrong results", k);
    }
    tb_close(&t);
}
END_TEST

TCase *tcase_batching(void)
{
    TCase *tc = tcase_create("batching");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_batch_sizes);
    tcase_add_test(tc, test_two_inputs);
    tcase_add_test(tc, test_concurrent_infer);
    return tc;
}

/* The casts the backend supports are exact: uint8 and int8 to float, and widening to int32. */
START_TEST(test_casts)
{
    static const struct {
        int from, to;
    } casts[] = {{2, 1}, {3, 1}, {2, 6}, {3, 6}, {6, 1}, {1, 1}};
    static const int64_t d[] = {-1, 256};
    size_t c;

    for (c = 0; c < sizeof(casts) / sizeof(casts[0]); c++) {
        int32_t in32[256];
        uint8_t in8[256], out[256 * 4];
        float in_f[256];
        Onnx__NodeProto *nd;
        mb_t *m = mb_new(13);
        const void *in;
        char *p;
        tb_t t;
        int i;

        for (i = 0; i < 256; i++) {
            in8[i] = (uint8_t)i;
            in32[i] = i * 1000 - 128000;
            in_f[i] = (float)i - 127.5f;
        }
        in = casts[c].from == 6   ? (const void *)in32
             : casts[c].from == 1 ? (const void *)in_f
                                  : in8;
        mb_input(m, "x", casts[c].from, 2, d);
        mb_output(m, "y", casts[c].to, 2, d);
        nd = mb_node(m, "Cast", "cast", "x", "y");
        mb_attr_int(m, nd, "to", casts[c].to);
        p = mb_write(m);
        ck_assert_msg(tb_open(&t, sut_backend_onnx_ops(), p, NULL, 2, 1) == 0, "%s", t.err);
        ck_assert_int_eq(tb_run(&t, in, 1, out, 256 * 4), 0);
        for (i = 0; i < 256; i++) {
            double want = casts[c].from == 2   ? (double)in8[i]
                          : casts[c].from == 3 ? (double)(int8_t)in8[i]
                          : casts[c].from == 6 ? (double)in32[i]
                                               : (double)in_f[i];
            double got = casts[c].to == 1 ? (double)((const float *)(const void *)out)[i]
                                          : (double)((const int32_t *)(const void *)out)[i];
            ck_assert_msg(got == want, "cast %d->%d: element %d is %g, expected %g", casts[c].from,
                          casts[c].to, i, got, want);
        }
        tb_close(&t);
        unlink(p);
        free(p);
    }
}
END_TEST

TCase *tcase_cast(void)
{
    TCase *tc = tcase_create("cast");
    tcase_add_test(tc, test_casts);
    return tc;
}
