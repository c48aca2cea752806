/* sut_backend.h: the versioned C ABI between sut-node and an inference backend.
 *
 * A backend is a table of functions (sut_backend_ops_t). Built-in backends (null, digest, sim,
 * onnx) are linked into sut-node; others are shared libraries loaded with dlopen from a path given
 * in the node's own configuration or command line (never named by a network peer), which export
 *
 *     const sut_backend_ops_t *sut_backend_entry(void);
 *
 * (SUT_BACKEND_ENTRY below defines it.)
 *
 * Flow: the node calls create() once with its configuration, describe() to learn the backend's
 * batch sizes and output size, then infer() for each batch its dynamic batcher forms, from one of
 * its worker threads (or from the I/O thread when the backend sets SUT_BACKEND_F_INLINE). infer()
 * is asynchronous: the backend completes every sample of the batch exactly once through
 * batch->complete(), before infer() returns or later from any thread it owns. A streaming backend
 * (LLMs) first calls batch->first_token() for a sample, then batch->complete() with its token
 * count. After the last sample of a batch is completed the batch belongs to the node again: the
 * backend must not touch it afterwards. destroy() is called after every batch has completed.
 *
 * Memory: the batch's input bytes are the decoded samples back to back (a [n, size] tensor when
 * batch->uniform is set), valid until the batch is fully completed. Result bytes passed to
 * complete()/first_token() are copied by the node before the call returns. A backend that wants
 * its inputs in special memory (pinned host memory for a GPU) provides alloc_input/free_input;
 * the node then decodes samples straight into that memory.
 *
 * The node keeps no query data or results after they are sent (rules 6.2.3): the batch and the
 * result copies are recycled buffers, overwritten by the next batch.
 *
 * Cancel (ABI 1.1, optional): when the client that owns a sample is gone (its connection closed:
 * disconnect, error or Goodbye), or when the node's drain deadline is near on SIGTERM, the node
 * calls cancel() for those samples. See sut_backend_ops_t.cancel for the rules.
 *
 * Versioning: abi_version must equal SUT_BACKEND_ABI_VERSION; struct_size lets later versions
 * append fields to sut_backend_ops_t. A minor version only appends optional (NULL-able) fields:
 * the node calls one only when struct_size covers it, so a plugin built against an older header
 * keeps loading, and a plugin built against this one loads into an older node (which never calls
 * the fields it does not know). Minor versions: 1.0 the table up to free_input; 1.1 cancel;
 * 1.2 ready, and a failed sample's message (sut_result_t below); 1.3 attach and detach.
 *
 * The node's loop (ABI 1.3, optional): an INLINE backend whose own work is I/O on a libuv loop
 * (a forwarding backend's HTTP client) may do it on the node's I/O loop instead of a thread of
 * its own, so that a request, its first token and its completion cost no hand-off between
 * threads (sut_backend_ops_t.attach).
 *
 * Readiness (ABI 1.2, optional): a forwarding backend's engine may still be loading its model,
 * or be down; ready() tells the node, which says so in every handshake, so that the LoadGen host
 * refuses (or waits for) a node whose engine cannot serve instead of failing every sample. */
#ifndef SUT_BACKEND_H
#define SUT_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SUT_BACKEND_ABI_VERSION 1u
#define SUT_BACKEND_ABI_MINOR 3u /* the fields appended since 1.0 (see Versioning above) */
#define SUT_BACKEND_ENTRY_SYMBOL "sut_backend_entry"

/* Flags in sut_backend_info_t.flags. INLINE: infer() is cheap and never blocks, so it may run on
 * the I/O thread. STREAMING: calls first_token() before complete() (LLM token streaming). */
#define SUT_BACKEND_F_INLINE 0x1u
#define SUT_BACKEND_F_STREAMING 0x2u

/* Log levels for sut_backend_config_t.log (same order as the node's logger). */
enum { SUT_LOG_ERROR = 0, SUT_LOG_WARN = 1, SUT_LOG_INFO = 2, SUT_LOG_DEBUG = 3 };

typedef struct sut_backend sut_backend_t; /* the backend's own instance, opaque to the node */

typedef struct {
    const char *device; /* "cpu", "cuda:0", ... as given by --device (never NULL) */
    uint32_t max_batch; /* the node's largest batch */
    uint32_t threads;   /* CPU threads the backend may use (0: its own choice) */
    uint64_t seed;      /* for backends with randomness (sim) */
    size_t n_options;   /* backend-specific --backend-opt KEY=VALUE pairs */
    const char *const *keys;
    const char *const *values;
    /* Log through the node's logger (thread-safe). */
    void (*log)(int level, const char *msg);
} sut_backend_config_t;

typedef struct {
    const char *name;         /* backend name, e.g. "onnx" */
    const char *device;       /* accelerator description: name, memory, driver */
    uint32_t preferred_batch; /* batch size the backend runs best at (>= 1) */
    uint32_t max_batch;       /* largest batch it accepts (>= preferred_batch) */
    uint64_t output_size;     /* bytes per sample a plugin may hold while a batch runs (charged) */
    uint64_t input_size;      /* expected sample bytes (0: any size) */
    uint32_t engines;         /* batches it can run at the same time (>= 1) */
    double weight;            /* relative throughput, for weighted dispatch (> 0) */
    uint32_t flags;           /* SUT_BACKEND_F_* */
} sut_backend_info_t;

typedef struct {
    const void *data; /* decoded sample bytes, inside the batch input */
    size_t size;
} sut_sample_t;

/* A failed sample's message (ABI 1.2): with status < 0, data/size may hold the reason as text
 * (the engine's own error, e.g. "HTTP 400: token id 9999 is outside the vocabulary"), not
 * NUL-terminated. The node copies at most SUT_BACKEND_ERROR_MAX bytes, replaces what is not
 * printable, and sends it to the client with the failure. Nodes older than 1.2 ignore data on a
 * failure; a node reads it only from a plugin whose table covers ready (a 1.2 plugin). */
#define SUT_BACKEND_ERROR_MAX 240u

typedef struct {
    size_t index;     /* which sample of the batch */
    int status;       /* 0, or a negative code: the sample failed */
    const void *data; /* result bytes (copied by the node before the call returns); with
                       * status < 0, the failure's message or NULL (ABI 1.2, above) */
    size_t size;
    int64_t n_tokens; /* output tokens for LLMs (first_token: 1), else 0 */
} sut_result_t;

typedef struct sut_batch sut_batch_t;

struct sut_batch {
    size_t n;                    /* samples in the batch, 1..max_batch */
    const sut_sample_t *samples; /* n entries */
    void *input;                 /* all samples back to back */
    size_t input_size;
    int uniform;        /* 1 when every sample has the same size */
    void *backend_data; /* free for the backend's use */

    /* Thread-safe, callable from any thread; each sample is completed exactly once. */
    void (*complete)(sut_batch_t *b, const sut_result_t *results, size_t n);
    /* Streaming only: the first token of some samples (before their completion). */
    void (*first_token)(sut_batch_t *b, const sut_result_t *results, size_t n);

    void *node_priv; /* the node's bookkeeping; not for the backend */
};

typedef struct {
    uint32_t abi_version; /* SUT_BACKEND_ABI_VERSION */
    uint32_t struct_size; /* sizeof(sut_backend_ops_t) */
    const char *name;

    /* Returns 0 and *out, or a negative code with a reason in err[0..errlen). */
    int (*create)(const sut_backend_config_t *cfg, sut_backend_t **out, char *err, size_t errlen);
    void (*destroy)(sut_backend_t *b);
    int (*describe)(sut_backend_t *b, sut_backend_info_t *info);
    /* Starts a batch. Returns 0 (the samples will be completed) or a negative code (none was
     * completed; the node fails the whole batch). */
    int (*infer)(sut_backend_t *b, sut_batch_t *batch);

    /* Optional (NULL: the node uses malloc). Called from any node thread. */
    void *(*alloc_input)(sut_backend_t *b, size_t size);
    void (*free_input)(sut_backend_t *b, void *p, size_t size);

    /* ABI 1.1, optional (NULL: the node never cancels; the samples run to their end).
     *
     * The samples batch->samples[indices[0..n)] are no longer wanted: their client is gone, or
     * the node is shutting down. The backend should stop spending the engine on them: drop the
     * ones not yet sent, abort the ones running (close the stream or request).
     *
     * Rule: cancel() never completes a sample by itself and never removes the backend's duty to
     * complete it. Every sample of a batch is still completed exactly once through
     * batch->complete(), as soon as the backend can, with status SUT_BACKEND_ECANCELED (or with
     * its result or another error, when it finished first). The node drops those results.
     *
     * Threads: called from a node thread (the I/O thread, or a worker just after infer()
     * returned), concurrently with the backend's own threads completing samples. It must not
     * block on the engine and must not call complete()/first_token() itself (lock order).
     * It may name samples the backend has already completed, even a batch whose last sample was
     * completed (then it must not dereference |batch|: the pointer is an identity only): such
     * names are ignored. |batch| is not reused before cancel() returns, but may be right after,
     * so the backend must resolve which of its requests it means before returning (e.g. mark
     * them under its lock), not later on another thread. A sample may be named more than once. */
    void (*cancel)(sut_backend_t *b, sut_batch_t *batch, const size_t *indices, size_t n);

    /* ABI 1.2, optional (NULL: ready as soon as create() returned, as the built-ins are).
     *
     * Returns 1 when the engine serves, 0 when it does not yet (or no longer), with the reason
     * in why[0..whylen) as the engine gave it ("HTTP 503 from http://...: Loading model",
     * "connection refused"), or a negative code. It may block, but for a bounded time of its own
     * (a probe deadline of a few seconds). The node calls it at start and again every second
     * while the answer is 0 (less often once it is 1), from a thread of its own: never
     * concurrently with itself, concurrently with infer() and the backend's own threads. */
    int (*ready)(sut_backend_t *b, char *why, size_t whylen);

    /* ABI 1.3, optional (NULL, or a negative return: the backend keeps its own threads).
     *
     * attach() is called once, on the node's I/O thread, after describe() and before the first
     * infer(), for a backend that sets SUT_BACKEND_F_INLINE, with the node's uv_loop_t (a void *:
     * this header does not include uv.h; a plugin using it links the libuv the node links, and a
     * process has one). Returning 0 takes the loop: from then on every callback of the backend's
     * I/O, every complete() and first_token() runs on that thread and never blocks. Results
     * handed over there leave at the end of the loop's turn, without a wake-up, so they must not
     * come from a handle's close callback (libuv runs those after that point); cancel() still
     * must not complete anything itself (mark, and complete on a later turn). detach() is
     * then called once, on the I/O thread, when the node stops (after its last sample completed):
     * the backend closes every handle it opened on the loop, whose run ends only when they are
     * closed; destroy() comes after the loop has ended. */
    int (*attach)(sut_backend_t *b, void *uv_loop);
    void (*detach)(sut_backend_t *b);
} sut_backend_ops_t;

/* The status a backend completes a cancelled sample with: -ECANCELED on Linux. */
#define SUT_BACKEND_ECANCELED (-125)

typedef const sut_backend_ops_t *(*sut_backend_entry_fn)(void);

/* The function a plugin exports under SUT_BACKEND_ENTRY_SYMBOL (the node finds it with dlsym);
 * the plugin defines it with SUT_BACKEND_ENTRY. */
#define SUT_BACKEND_EXPORT __attribute__((visibility("default")))
SUT_BACKEND_EXPORT const sut_backend_ops_t *sut_backend_entry(void);

/* Defines sut_backend_entry() returning &|ops|, exported from a plugin built with hidden
 * symbols: `SUT_BACKEND_ENTRY(my_ops);` once, at file scope, in the plugin's library (the
 * declaration it ends with takes the semicolon). */
#define SUT_BACKEND_ENTRY(ops)                                          \
    SUT_BACKEND_EXPORT const sut_backend_ops_t *sut_backend_entry(void) \
    {                                                                   \
        return &(ops);                                                  \
    }                                                                   \
    SUT_BACKEND_EXPORT const sut_backend_ops_t *sut_backend_entry(void)

/* The value of option |key| in |cfg|, or |dflt| when absent. */
static inline const char *sut_backend_opt(const sut_backend_config_t *cfg, const char *key,
                                          const char *dflt)
{
    size_t i;
    for (i = 0; i < cfg->n_options; i++) {
        const char *k = cfg->keys[i], *q = key;
        while (*k && *k == *q) {
            k++;
            q++;
        }
        if (*k == '\0' && *q == '\0')
            return cfg->values[i];
    }
    return dflt;
}

#ifdef __cplusplus
}
#endif

#endif
