/* The CUDA engine: runs onnx_cuda_plan.h plans with cuDNN, cuBLAS and the kernels of
 * onnx_cuda_kernels.cu. See onnx_cuda.h for the contract; this file is the thin layer that turns
 * each planned step into its library call.
 *
 * cuDNN's legacy ("v7") API is used: cuDNN 9 still ships it (marked deprecated), it maps one
 * step to one call with the descriptors the plan already has, and its convolution search
 * (cudnnFindConvolutionForwardAlgorithmEx) times the real shapes at load. Every object that
 * a run reads is created in create(): descriptors per plan step, algorithms and workspace sizes,
 * per-stream handles and buffers. run() only enqueues work and waits for its stream.
 *
 * Built as its own shared library with no dependency but the CUDA runtime, cuDNN and cuBLAS: it
 * writes its messages itself rather than linking the harness's common library. */
#include "onnx_cuda.h"

#include "onnx_cuda_kernels.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    cudnnTensorDescriptor_t x, y, b;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
    cudnnActivationDescriptor_t act;
    cudnnPoolingDescriptor_t pool;
    cudnnConvolutionFwdAlgo_t algo;
    size_t ws; /* workspace bytes its algorithm needs */
} prepared_step_t;

typedef struct {
    cudaStream_t stream;
    cudnnHandle_t dnn;
    cublasHandle_t blas;
    uint8_t *arena;    /* device: activations and staged inputs */
    void *ws;          /* device: cuDNN workspace */
    uint8_t *host_out; /* pinned: the results of the batch in flight */
    int busy;
} stream_slot_t;

struct onnx_cuda {
    const onnx_cuda_program_t *prog;
    onnx_cuda_opts_t o;
    uint8_t *pool;            /* device: the constants */
    prepared_step_t **dsteps; /* per plan, per step */
    stream_slot_t *slots;
    int n_slots;
    size_t ws_size, out_bytes, mem;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int sync_ready;
    int broken; /* a sticky device error happened: every run fails with broken_msg */
    char broken_msg[640];
};

/* ---- messages -------------------------------------------------------------------------------- */

static int errf(cmn_errbuf_t *eb, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int errf(cmn_errbuf_t *eb, int rc, const char *fmt, ...)
{
    va_list ap;
    if (eb) {
        va_start(ap, fmt);
        vsnprintf(eb->msg, sizeof(eb->msg), fmt, ap);
        va_end(ap);
    }
    return rc;
}

/* The function name of a call's source text: "cudaMalloc(&p, n)" -> "cudaMalloc". */
static int call_name(const char *call)
{
    const char *p = strchr(call, '(');
    return p ? (int)(p - call) : (int)strlen(call);
}

static int cuda_fail(cmn_errbuf_t *eb, int dev, cudaError_t e, const char *call, const char *where)
{
    return errf(eb, e == cudaErrorMemoryAllocation ? -ENOMEM : CMN_EBACKEND,
                "cuda:%d: %s%.*s failed: %s (%s)", dev, where, call_name(call), call,
                cudaGetErrorString(e), cudaGetErrorName(e));
}

static int dnn_fail(cmn_errbuf_t *eb, int dev, cudnnStatus_t st, const char *call,
                    const char *where)
{
    return errf(eb, st == CUDNN_STATUS_ALLOC_FAILED ? -ENOMEM : CMN_EBACKEND,
                "cuda:%d: %s%.*s failed: %s", dev, where, call_name(call), call,
                cudnnGetErrorString(st));
}

static int blas_fail(cmn_errbuf_t *eb, int dev, cublasStatus_t st, const char *call,
                     const char *where)
{
    return errf(eb, st == CUBLAS_STATUS_ALLOC_FAILED ? -ENOMEM : CMN_EBACKEND,
                "cuda:%d: %s%.*s failed: %s (%s)", dev, where, call_name(call), call,
                cublasGetStatusString(st), cublasGetStatusName(st));
}

/* Each evaluates a call and returns an error naming it; |where| and |dev| come from the caller. */
#define CU(call)                                         \
    do {                                                 \
        cudaError_t e_ = (call);                         \
        if (e_ != cudaSuccess)                           \
            return cuda_fail(eb, dev, e_, #call, where); \
    } while (0)
#define DNN(call)                                       \
    do {                                                \
        cudnnStatus_t s_ = (call);                      \
        if (s_ != CUDNN_STATUS_SUCCESS)                 \
            return dnn_fail(eb, dev, s_, #call, where); \
    } while (0)
#define BLAS(call)                                       \
    do {                                                 \
        cublasStatus_t s_ = (call);                      \
        if (s_ != CUBLAS_STATUS_SUCCESS)                 \
            return blas_fail(eb, dev, s_, #call, where); \
    } while (0)

/* Errors after which the CUDA context cannot be used any more. */
static int sticky(cudaError_t e)
{
    switch (e) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorECCUncorrectable:
    case cudaErrorAssert:
    case cudaErrorLaunchTimeout:
    case cudaErrorDevicesUnavailable:
        return 1;
    default:
        return 0;
    }
}

/* ---- probe ----------------------------------------------------------------------------------- */

static int cuda_probe(int dev, char *desc, size_t len, cmn_errbuf_t *eb)
{
    const char *where = "";
    struct cudaDeviceProp p;
    char pci[32] = "";
    int n = 0, drv = 0, rt = 0, bmaj = 0, bmin = 0, bpat = 0;
    size_t dnn = cudnnGetVersion();
    cudaError_t e;

    e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess)
        return errf(eb, CMN_EBACKEND, "cuda:%d: no usable CUDA device: cudaGetDeviceCount: %s (%s)",
                    dev, cudaGetErrorString(e), cudaGetErrorName(e));
    if (n == 0)
        return errf(eb, CMN_EBACKEND, "cuda:%d: no usable CUDA device: the driver reports none",
                    dev);
    if (dev < 0 || dev >= n)
        return errf(eb, CMN_ECONFIG,
                    "cuda:%d: no such CUDA device: this host has %d (cuda:0 to cuda:%d)", dev, n,
                    n - 1);
    CU(cudaGetDeviceProperties(&p, dev));
    CU(cudaDriverGetVersion(&drv));
    CU(cudaRuntimeGetVersion(&rt));
    if (cudaDeviceGetPCIBusId(pci, (int)sizeof(pci), dev) != cudaSuccess)
        snprintf(pci, sizeof(pci), "?");
    cublasGetProperty(MAJOR_VERSION, &bmaj);
    cublasGetProperty(MINOR_VERSION, &bmin);
    cublasGetProperty(PATCH_LEVEL, &bpat);
    snprintf(desc, len,
             "%s (cuda:%d, PCI %s), %.1f GiB, compute capability %d.%d, %d SMs, driver %d.%d, "
             "runtime %d.%d, cuDNN %zu.%zu.%zu, cuBLAS %d.%d.%d",
             p.name, dev, pci, (double)p.totalGlobalMem / (1024.0 * 1024.0 * 1024.0), p.major,
             p.minor, p.multiProcessorCount, drv / 1000, drv % 1000 / 10, rt / 1000, rt % 1000 / 10,
             dnn / 10000, dnn % 10000 / 100, dnn % 100, bmaj, bmin, bpat);
    return 0;
}

/* ---- descriptors ----------------------------------------------------------------------------- */

static void packed_strides(int nd, const int *d, int *s)
{
    int i;
    s[nd - 1] = 1;
    for (i = nd - 2; i >= 0; i--)
        s[i] = s[i + 1] * d[i + 1];
}

static cudnnStatus_t tensor_desc(cudnnTensorDescriptor_t *t, int nd, const int *d)
{
    int s[8];
    cudnnStatus_t st = cudnnCreateTensorDescriptor(t);
    if (st != CUDNN_STATUS_SUCCESS)
        return st;
    packed_strides(nd, d, s);
    return cudnnSetTensorNdDescriptor(*t, CUDNN_DATA_FLOAT, nd, d, s);
}

static void free_dstep(prepared_step_t *d)
{
    if (d->x)
        cudnnDestroyTensorDescriptor(d->x);
    if (d->y)
        cudnnDestroyTensorDescriptor(d->y);
    if (d->b)
        cudnnDestroyTensorDescriptor(d->b);
    if (d->w)
        cudnnDestroyFilterDescriptor(d->w);
    if (d->conv)
        cudnnDestroyConvolutionDescriptor(d->conv);
    if (d->act)
        cudnnDestroyActivationDescriptor(d->act);
    if (d->pool)
        cudnnDestroyPoolingDescriptor(d->pool);
}

static void *tptr(const onnx_cuda_t *x, const stream_slot_t *s, const onnx_cuda_plan_t *pl, int t)
{
    const onnx_cuda_tensor_t *v = &pl->t[t];
    return (v->slot.store == ONNX_STORE_CONST ? x->pool : s->arena) + v->slot.offset;
}

/* Chooses the convolution algorithm: timed on the real buffers (find) or cuDNN's heuristics,
 * within the workspace limit. */
static int conv_algo(onnx_cuda_t *x, const onnx_cuda_plan_t *pl, const onnx_cuda_conv_step_t *c,
                     prepared_step_t *d, void *ws, const char *where, cmn_errbuf_t *eb)
{
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    const stream_slot_t *s = &x->slots[0];
    int dev = x->o.device, got = 0, i;

    if (x->o.find_algo)
        DNN(cudnnFindConvolutionForwardAlgorithmEx(
            s->dnn, d->x, tptr(x, s, pl, c->x), d->w, tptr(x, s, pl, c->w), d->conv, d->y,
            tptr(x, s, pl, c->y), CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, perf, ws,
            x->o.workspace));
    else
        DNN(cudnnGetConvolutionForwardAlgorithm_v7(s->dnn, d->x, d->w, d->conv, d->y,
                                                   CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, perf));
    for (i = 0; i < got; i++)
        if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= x->o.workspace)
            break;
    if (i == got)
        return errf(eb, CMN_EBACKEND,
                    "cuda:%d: %scuDNN has no convolution algorithm for these shapes within a "
                    "workspace of %zu MB (workspace_mb)",
                    dev, where, x->o.workspace >> 20);
    d->algo = perf[i].algo;
    DNN(cudnnSetConvolutionMathType(d->conv, perf[i].mathType));
    DNN(cudnnGetConvolutionForwardWorkspaceSize(s->dnn, d->x, d->w, d->conv, d->y, d->algo,
                                                &d->ws));
    if (d->ws > x->ws_size)
        x->ws_size = d->ws;
    return 0;
}

static int prep_conv(onnx_cuda_t *x, const onnx_cuda_plan_t *pl, const onnx_cuda_conv_step_t *c,
                     prepared_step_t *d, void *ws, const char *where, cmn_errbuf_t *eb)
{
    int dev = x->o.device, nd = c->nsp + 2, bd[5] = {1, 1, 1, 1, 1}, od[5], i;

    DNN(tensor_desc(&d->x, nd, c->xdims));
    DNN(tensor_desc(&d->y, nd, c->ydims));
    DNN(cudnnCreateFilterDescriptor(&d->w));
    DNN(cudnnSetFilterNdDescriptor(d->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, nd, c->wdims));
    DNN(cudnnCreateConvolutionDescriptor(&d->conv));
    DNN(cudnnSetConvolutionNdDescriptor(d->conv, c->nsp, c->pad, c->stride, c->dil,
                                        CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    DNN(cudnnSetConvolutionGroupCount(d->conv, c->groups));
    DNN(cudnnSetConvolutionMathType(d->conv, x->o.tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH));
    DNN(cudnnGetConvolutionNdForwardOutputDim(d->conv, d->x, d->w, nd, od));
    for (i = 0; i < nd; i++)
        if (od[i] != c->ydims[i])
            return errf(eb, CMN_EBACKEND,
                        "cuda:%d: %scuDNN computes output dim %d as %d, the model as %d", dev,
                        where, i, od[i], c->ydims[i]);
    if (c->b >= 0) {
        bd[1] = c->wdims[0];
        DNN(tensor_desc(&d->b, nd, bd));
    }
    if (c->fused) {
        DNN(cudnnCreateActivationDescriptor(&d->act));
        DNN(cudnnSetActivationDescriptor(d->act, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN,
                                         0.0));
    }
    return conv_algo(x, pl, c, d, ws, where, eb);
}

static int prep_pool(onnx_cuda_t *x, const onnx_cuda_plan_t *pl, const onnx_cuda_pool_step_t *p,
                     prepared_step_t *d, const char *where, cmn_errbuf_t *eb)
{
    const onnx_cuda_tensor_t *t = &pl->t[p->x];
    int dev = x->o.device, nsp = p->k.nsp < 2 ? 2 : p->k.nsp, off = nsp - p->k.nsp;
    int xd[5], yd[5], od[5], win[3], pad[3], str[3], s;
    cudnnPoolingMode_t mode = p->k.max           ? CUDNN_POOLING_MAX
                              : p->k.include_pad ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                                                 : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;

    if (!p->cudnn)
        return 0; /* the pooling kernel takes its parameters by value */
    xd[0] = yd[0] = (int)t->dims[0];
    xd[1] = yd[1] = (int)t->dims[1];
    for (s = 0; s < nsp; s++) {
        int m = s - off; /* 1-D: a leading spatial dim of 1 */
        xd[2 + s] = m < 0 ? 1 : (int)p->k.in[m];
        yd[2 + s] = m < 0 ? 1 : (int)p->k.out[m];
        win[s] = m < 0 ? 1 : (int)p->k.k[m];
        pad[s] = m < 0 ? 0 : (int)p->k.pl[m];
        str[s] = m < 0 ? 1 : (int)p->k.s[m];
    }
    DNN(tensor_desc(&d->x, nsp + 2, xd));
    DNN(tensor_desc(&d->y, nsp + 2, yd));
    DNN(cudnnCreatePoolingDescriptor(&d->pool));
    DNN(cudnnSetPoolingNdDescriptor(d->pool, mode, CUDNN_NOT_PROPAGATE_NAN, nsp, win, pad, str));
    DNN(cudnnGetPoolingNdForwardOutputDim(d->pool, d->x, nsp + 2, od));
    for (s = 0; s < nsp + 2; s++)
        if (od[s] != yd[s])
            return errf(eb, CMN_EBACKEND,
                        "cuda:%d: %scuDNN computes pooling output dim %d as %d, the model as %d",
                        dev, where, s, od[s], yd[s]);
    return 0;
}

static int prep_softmax(onnx_cuda_t *x, const onnx_cuda_softmax_step_t *sm, prepared_step_t *d,
                        const char *where, cmn_errbuf_t *eb)
{
    int dev = x->o.device, dims[4];
    dims[0] = sm->outer;
    dims[1] = sm->axis;
    dims[2] = sm->inner;
    dims[3] = 1;
    DNN(tensor_desc(&d->x, 4, dims));
    return 0;
}

/* "step 3 of 57 (conv, node "conv1"): " */
static void step_where(const onnx_cuda_t *x, const onnx_cuda_plan_t *pl, int i, char *buf,
                       size_t len)
{
    const onnx_cuda_step_t *s = &pl->steps[i];
    const onnx_graph_t *g = x->prog->g;
    snprintf(buf, len, "batch %zu, step %d of %d (%s, node \"%s\"): ", pl->batch, i + 1,
             pl->n_steps, onnx_cuda_step_name(s->kind),
             s->node >= 0 ? g->nodes[s->node].name : "?");
}

/* ---- create, destroy ------------------------------------------------------------------------- */

static int make_slot(onnx_cuda_t *x, stream_slot_t *s, cmn_errbuf_t *eb)
{
    const char *where = "";
    int dev = x->o.device;
    CU(cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking));
    DNN(cudnnCreate(&s->dnn));
    DNN(cudnnSetStream(s->dnn, s->stream));
    BLAS(cublasCreate(&s->blas));
    BLAS(cublasSetStream(s->blas, s->stream));
    BLAS(cublasSetMathMode(s->blas, x->o.tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
    if (x->prog->arena_size) {
        CU(cudaMalloc((void **)&s->arena, x->prog->arena_size));
        /* staged inputs are read before a short batch fills them; start from zeros */
        CU(cudaMemset(s->arena, 0, x->prog->arena_size));
        x->mem += x->prog->arena_size;
    }
    CU(cudaHostAlloc((void **)&s->host_out, x->out_bytes ? x->out_bytes : 1,
                     cudaHostAllocPortable));
    return 0;
}

static void free_slot(stream_slot_t *s)
{
    if (s->stream)
        cudaStreamSynchronize(s->stream);
    if (s->blas)
        cublasDestroy(s->blas);
    if (s->dnn)
        cudnnDestroy(s->dnn);
    if (s->stream)
        cudaStreamDestroy(s->stream);
    cudaFree(s->arena);
    cudaFree(s->ws);
    cudaFreeHost(s->host_out);
}

static void cuda_destroy(onnx_cuda_t *x)
{
    size_t i;
    int k;
    if (!x)
        return;
    cudaSetDevice(x->o.device);
    for (k = 0; k < x->n_slots; k++)
        free_slot(&x->slots[k]);
    for (i = 0; x->dsteps && i < x->prog->n_plans; i++) {
        if (!x->dsteps[i])
            continue;
        for (k = 0; k < x->prog->plans[i].n_steps; k++)
            free_dstep(&x->dsteps[i][k]);
        free(x->dsteps[i]);
    }
    cudaFree(x->pool);
    if (x->sync_ready) {
        pthread_cond_destroy(&x->cv);
        pthread_mutex_destroy(&x->mu);
    }
    cudaGetLastError(); /* a failed create must not leave an error for the next API call */
    free(x->dsteps);
    free(x->slots);
    free(x);
}

static int cuda_create(const onnx_cuda_program_t *prog, const onnx_cuda_opts_t *o,
                       onnx_cuda_t **out, cmn_errbuf_t *eb)
{
    const char *where = "";
    char desc[512], swhere[160];
    onnx_cuda_t *x;
    void *search_ws = NULL;
    int dev = o->device, rc, k;
    size_t i;

    if ((rc = cuda_probe(dev, desc, sizeof(desc), eb)) < 0)
        return rc;
    if (o->streams < 1)
        return errf(eb, CMN_ECONFIG, "cuda:%d: %d streams", dev, o->streams);
    x = calloc(1, sizeof(*x));
    if (!x)
        return errf(eb, -ENOMEM, "out of memory");
    x->prog = prog;
    x->o = *o;
    x->out_bytes = o->max_batch * prog->g->output_size;
    x->slots = calloc((size_t)o->streams, sizeof(*x->slots));
    x->dsteps = calloc(prog->n_plans ? prog->n_plans : 1, sizeof(*x->dsteps));
    if (!x->slots || !x->dsteps) {
        rc = errf(eb, -ENOMEM, "out of memory");
        goto fail;
    }
    if (pthread_mutex_init(&x->mu, NULL) != 0 || pthread_cond_init(&x->cv, NULL) != 0) {
        rc = errf(eb, -ENOMEM, "cannot create a mutex");
        goto fail;
    }
    x->sync_ready = 1;
#define TRY(expr)              \
    do {                       \
        if ((rc = (expr)) < 0) \
            goto fail;         \
    } while (0)
#define TRYCU(call)                                    \
    do {                                               \
        cudaError_t e_ = (call);                       \
        if (e_ != cudaSuccess) {                       \
            rc = cuda_fail(eb, dev, e_, #call, where); \
            goto fail;                                 \
        }                                              \
    } while (0)
    TRYCU(cudaSetDevice(dev));
    if (prog->pool_size) {
        TRYCU(cudaMalloc((void **)&x->pool, prog->pool_size));
        TRYCU(cudaMemcpy(x->pool, o->pool, prog->pool_size, cudaMemcpyHostToDevice));
        x->mem += prog->pool_size;
    }
    for (k = 0; k < o->streams; k++) {
        x->n_slots++;
        TRY(make_slot(x, &x->slots[k], eb));
    }
    /* One workspace of the full limit while algorithms are searched; each stream then gets one
     * of the size the chosen algorithms need. */
    if (o->find_algo && o->workspace)
        TRYCU(cudaMalloc(&search_ws, o->workspace));
    for (i = 0; i < prog->n_plans; i++) {
        const onnx_cuda_plan_t *pl = &prog->plans[i];
        x->dsteps[i] = calloc((size_t)pl->n_steps + 1, sizeof(prepared_step_t));
        if (!x->dsteps[i]) {
            rc = errf(eb, -ENOMEM, "out of memory");
            goto fail;
        }
        for (k = 0; k < pl->n_steps; k++) {
            const onnx_cuda_step_t *s = &pl->steps[k];
            prepared_step_t *d = &x->dsteps[i][k];
            step_where(x, pl, k, swhere, sizeof(swhere));
            if (s->kind == ONNX_CUDA_STEP_CONV)
                TRY(prep_conv(x, pl, &s->u.conv, d, search_ws, swhere, eb));
            else if (s->kind == ONNX_CUDA_STEP_POOL)
                TRY(prep_pool(x, pl, &s->u.pool, d, swhere, eb));
            else if (s->kind == ONNX_CUDA_STEP_SOFTMAX)
                TRY(prep_softmax(x, &s->u.softmax, d, swhere, eb));
        }
    }
    cudaFree(search_ws);
    search_ws = NULL;
    for (k = 0; k < x->n_slots && x->ws_size; k++) {
        TRYCU(cudaMalloc(&x->slots[k].ws, x->ws_size));
        x->mem += x->ws_size;
    }
    TRYCU(cudaDeviceSynchronize());
    *out = x;
    return 0;
#undef TRY
#undef TRYCU

fail:
    cudaFree(search_ws);
    cuda_destroy(x);
    return rc;
}

/* ---- run ------------------------------------------------------------------------------------- */

static int kern(cmn_errbuf_t *eb, int dev, int e, const char *name, const char *where)
{
    if (e == 0)
        return 0;
    return cuda_fail(eb, dev, (cudaError_t)e, name, where);
}

static int exec_step(onnx_cuda_t *x, stream_slot_t *sl, const onnx_cuda_plan_t *pl,
                     const prepared_step_t *d, const onnx_cuda_step_t *s, const char *where,
                     cmn_errbuf_t *eb)
{
    static const float one = 1.0f, zero = 0.0f;
    int dev = x->o.device;
#define P(t) tptr(x, sl, pl, (t))
    switch (s->kind) {
    case ONNX_CUDA_STEP_CONV: {
        const onnx_cuda_conv_step_t *c = &s->u.conv;
        const float beta = c->sum ? 1.0f : 0.0f;
        if (c->fused) {
            /* y = relu(conv(x) + alpha2 * z + b); the plan never lets z share y's storage */
            DNN(cudnnConvolutionBiasActivationForward(
                sl->dnn, &one, d->x, P(c->x), d->w, P(c->w), d->conv, d->algo, sl->ws, x->ws_size,
                &beta, d->y, c->z >= 0 ? P(c->z) : P(c->y), d->b, P(c->b), d->act, d->y, P(c->y)));
            return 0;
        }
        DNN(cudnnConvolutionForward(sl->dnn, &one, d->x, P(c->x), d->w, P(c->w), d->conv, d->algo,
                                    sl->ws, x->ws_size, &beta, d->y, P(c->y)));
        if (c->b >= 0)
            DNN(cudnnAddTensor(sl->dnn, &one, d->b, P(c->b), &one, d->y, P(c->y)));
        return 0;
    }
    case ONNX_CUDA_STEP_POOL:
        if (s->u.pool.cudnn) {
            DNN(cudnnPoolingForward(sl->dnn, d->pool, &one, d->x, P(s->u.pool.x), &zero, d->y,
                                    P(s->u.pool.y)));
            return 0;
        }
        return kern(eb, dev,
                    onnx_cuda_launch_pool(sl->stream, &s->u.pool.k, P(s->u.pool.x), P(s->u.pool.y)),
                    "onnx_cuda_launch_pool", where);
    case ONNX_CUDA_STEP_SOFTMAX:
        DNN(cudnnSoftmaxForward(sl->dnn, CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_CHANNEL, &one,
                                d->x, P(s->u.softmax.x), &zero, d->x, P(s->u.softmax.y)));
        return 0;
    case ONNX_CUDA_STEP_GEMM: {
        const onnx_cuda_gemm_step_t *g = &s->u.gemm;
        const float *a = (const float *)P(g->a) + g->a_off, *b = (const float *)P(g->b) + g->b_off;
        float *c = (float *)P(g->c) + g->c_off;
        cublasOperation_t ta = g->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
        cublasOperation_t tb = g->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
        if (g->count == 1)
            BLAS(cublasSgemm(sl->blas, ta, tb, g->m, g->n, g->k, &g->alpha, a, g->lda, b, g->ldb,
                             &g->beta, c, g->ldc));
        else
            BLAS(cublasSgemmStridedBatched(sl->blas, ta, tb, g->m, g->n, g->k, &g->alpha, a, g->lda,
                                           g->stride_a, b, g->ldb, g->stride_b, &g->beta, c, g->ldc,
                                           g->stride_c, g->count));
        return 0;
    }
    case ONNX_CUDA_STEP_COPY:
        if (P(s->u.copy.x) != P(s->u.copy.y))
            CU(cudaMemcpyAsync(P(s->u.copy.y), P(s->u.copy.x), s->u.copy.bytes,
                               cudaMemcpyDeviceToDevice, sl->stream));
        return 0;
    case ONNX_CUDA_STEP_BCAST:
        return kern(
            eb, dev,
            onnx_cuda_launch_bcast(sl->stream, &s->u.bcast.k, P(s->u.bcast.x), P(s->u.bcast.y)),
            "onnx_cuda_launch_bcast", where);
    case ONNX_CUDA_STEP_PAD:
        return kern(eb, dev,
                    onnx_cuda_launch_pad(sl->stream, &s->u.pad.k, P(s->u.pad.x), P(s->u.pad.y)),
                    "onnx_cuda_launch_pad", where);
    case ONNX_CUDA_STEP_BINARY:
        return kern(eb, dev,
                    onnx_cuda_launch_binary(sl->stream, &s->u.binary.k, P(s->u.binary.a),
                                            P(s->u.binary.b), P(s->u.binary.y)),
                    "onnx_cuda_launch_binary", where);
    case ONNX_CUDA_STEP_RELU:
        return kern(
            eb, dev,
            onnx_cuda_launch_relu(sl->stream, s->u.relu.count, P(s->u.relu.x), P(s->u.relu.y)),
            "onnx_cuda_launch_relu", where);
    case ONNX_CUDA_STEP_BATCHNORM:
        return kern(eb, dev,
                    onnx_cuda_launch_batchnorm(sl->stream, &s->u.bn.k, P(s->u.bn.x),
                                               P(s->u.bn.scale), P(s->u.bn.shift), P(s->u.bn.mean),
                                               P(s->u.bn.var), P(s->u.bn.y)),
                    "onnx_cuda_launch_batchnorm", where);
    case ONNX_CUDA_STEP_CAST:
        return kern(eb, dev,
                    onnx_cuda_launch_cast(sl->stream, &s->u.cast.k, P(s->u.cast.x), P(s->u.cast.y)),
                    "onnx_cuda_launch_cast", where);
    }
#undef P
    return errf(eb, CMN_EBACKEND, "cuda:%d: %sunknown step", dev, where);
}

/* Everything for one batch on slot |sl|: inputs in, steps, results out, then the wait. */
static int run_on(onnx_cuda_t *x, stream_slot_t *sl, const onnx_cuda_plan_t *pl,
                  const prepared_step_t *ds, size_t n, const void *input, cmn_errbuf_t *eb)
{
    const onnx_cuda_program_t *p = x->prog;
    const onnx_graph_t *g = p->g;
    const char *where = "";
    char swhere[160];
    int dev = x->o.device, k, rc;

    CU(cudaSetDevice(dev));
    cudaGetLastError(); /* an earlier failed call on this thread must not be blamed on this run */
    for (k = 0; k < g->n_inputs; k++) {
        uint8_t *dst = sl->arena + pl->t[pl->in_t[k]].slot.offset;
        size_t sz = p->in_size[k];
        where = "copying the input to the device: ";
        if (g->n_inputs == 1)
            CU(cudaMemcpyAsync(dst, input, n * sz, cudaMemcpyHostToDevice, sl->stream));
        else
            CU(cudaMemcpy2DAsync(dst, sz, (const uint8_t *)input + p->in_off[k], g->input_size, sz,
                                 n, cudaMemcpyHostToDevice, sl->stream));
        if (n < pl->batch)
            CU(cudaMemsetAsync(dst + n * sz, 0, (pl->batch - n) * sz, sl->stream));
    }
    for (k = 0; k < pl->n_steps; k++) {
        if ((rc = exec_step(x, sl, pl, &ds[k], &pl->steps[k], "", eb)) < 0) {
            /* name the step only now: formatting it for every step would cost every batch */
            char call[sizeof(eb->msg)];
            const char *rest = strstr(eb->msg, ": ");
            snprintf(call, sizeof(call), "%s", rest ? rest + 2 : eb->msg);
            step_where(x, pl, k, swhere, sizeof(swhere));
            return errf(eb, rc, "cuda:%d: %s%s", dev, swhere, call);
        }
        if (x->o.debug_sync) {
            step_where(x, pl, k, swhere, sizeof(swhere));
            where = swhere;
            CU(cudaStreamSynchronize(sl->stream));
        }
    }
    for (k = 0; k < g->n_outputs; k++) {
        const uint8_t *src = tptr(x, sl, pl, pl->out_t[k]);
        size_t sz = p->out_size[k];
        where = "copying the results to the host: ";
        if (g->n_outputs == 1)
            CU(cudaMemcpyAsync(sl->host_out, src, n * sz, cudaMemcpyDeviceToHost, sl->stream));
        else
            CU(cudaMemcpy2DAsync(sl->host_out + p->out_off[k], g->output_size, src, sz, sz, n,
                                 cudaMemcpyDeviceToHost, sl->stream));
    }
    where = x->o.debug_sync ? "after the last step: "
                            : "running the batch (debug_sync=1 names the step): ";
    CU(cudaStreamSynchronize(sl->stream));
    return 0;
}

static int cuda_run(onnx_cuda_t *x, size_t n, const void *input, const void **output, int *slot,
                    cmn_errbuf_t *eb)
{
    const onnx_cuda_program_t *p = x->prog;
    const onnx_cuda_plan_t *pl = NULL;
    size_t i;
    int k, rc;
    cudaError_t e;

    for (i = 0; i < p->n_plans; i++)
        if (p->plans[i].batch >= n) {
            pl = &p->plans[i];
            break;
        }
    if (!pl || n == 0)
        return errf(eb, CMN_EOVERLOAD,
                    "a batch of %zu samples; the CUDA engine was built for at most %zu", n,
                    p->n_plans ? p->plans[p->n_plans - 1].batch : 0);
    pthread_mutex_lock(&x->mu);
    for (;;) {
        for (k = 0; k < x->n_slots && x->slots[k].busy; k++)
            ;
        if (k < x->n_slots || x->broken)
            break;
        pthread_cond_wait(&x->cv, &x->mu);
    }
    if (x->broken) {
        rc = errf(eb, CMN_EBACKEND, "%s", x->broken_msg);
        pthread_mutex_unlock(&x->mu);
        return rc;
    }
    x->slots[k].busy = 1;
    pthread_mutex_unlock(&x->mu);

    rc = run_on(x, &x->slots[k], pl, x->dsteps[i], n, input, eb);
    if (rc < 0) {
        /* Work queued before the failure may still read the caller's input: wait for it. A
         * sticky error shows again here, as it does in every later call. */
        e = cudaStreamSynchronize(x->slots[k].stream);
        if (!sticky(e))
            e = cudaPeekAtLastError();
        cudaGetLastError();
        pthread_mutex_lock(&x->mu);
        if (sticky(e)) {
            x->broken = 1;
            snprintf(x->broken_msg, sizeof(x->broken_msg),
                     "the CUDA context is unusable since an earlier error: %s", eb->msg);
        }
        x->slots[k].busy = 0;
        pthread_cond_broadcast(&x->cv);
        pthread_mutex_unlock(&x->mu);
        return rc;
    }
    *output = x->slots[k].host_out;
    *slot = k;
    return 0;
}

static void cuda_release(onnx_cuda_t *x, int slot)
{
    pthread_mutex_lock(&x->mu);
    if (slot >= 0 && slot < x->n_slots)
        x->slots[slot].busy = 0;
    pthread_cond_signal(&x->cv);
    pthread_mutex_unlock(&x->mu);
}

static void *cuda_host_alloc(onnx_cuda_t *x, size_t size, cmn_errbuf_t *eb)
{
    void *p = NULL;
    cudaError_t e = cudaSetDevice(x->o.device);
    if (e == cudaSuccess)
        e = cudaHostAlloc(&p, size ? size : 1, cudaHostAllocPortable);
    if (e != cudaSuccess) {
        cudaGetLastError();
        errf(eb, e == cudaErrorMemoryAllocation ? -ENOMEM : CMN_EBACKEND,
             "cuda:%d: cudaHostAlloc of %zu bytes of pinned memory failed: %s (%s)", x->o.device,
             size, cudaGetErrorString(e), cudaGetErrorName(e));
        return NULL;
    }
    return p;
}

static void cuda_host_free(onnx_cuda_t *x, void *p)
{
    (void)x;
    if (p)
        cudaFreeHost(p);
}

static size_t cuda_memory(const onnx_cuda_t *x)
{
    return x->mem;
}

static const onnx_cuda_api_t api = {
    .version = ONNX_CUDA_API_VERSION,
    .struct_size = sizeof(onnx_cuda_api_t),
    .probe = cuda_probe,
    .create = cuda_create,
    .destroy = cuda_destroy,
    .run = cuda_run,
    .release = cuda_release,
    .host_alloc = cuda_host_alloc,
    .host_free = cuda_host_free,
    .memory = cuda_memory,
};

__attribute__((visibility("default"))) const onnx_cuda_api_t *onnx_cuda_api(void);

const onnx_cuda_api_t *onnx_cuda_api(void)
{
    return &api;
}
