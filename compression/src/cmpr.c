#include "cmpr/cmpr.h"

#include <lz4.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

/* LZ4 encodes a match length in extension bytes of up to 255 each, so one input byte can expand
 * to at most 255 output bytes; the slack covers the last literals of a tiny block. */
#define LZ4_MAX_RATIO 255u
#define LZ4_RATIO_SLACK 64u

struct cmpr_ctx {
    LZ4_stream_t *lz4;
};

const char *cmpr_codec_name(int codec)
{
    switch (codec) {
    case CMPR_NONE:
        return "none";
    case CMPR_LZ4:
        return "lz4";
    default:
        return "unknown";
    }
}

int cmpr_codec_parse(const char *s, int *codec)
{
    if (strcmp(s, "none") == 0) {
        *codec = CMPR_NONE;
        return 0;
    }
    if (strcmp(s, "lz4") == 0) {
        *codec = CMPR_LZ4;
        return 0;
    }
    return CMN_ECODEC;
}

cmpr_ctx_t *cmpr_ctx_new(void)
{
    cmpr_ctx_t *ctx = malloc(sizeof(*ctx));

    if (!ctx)
        return NULL;
    ctx->lz4 = LZ4_createStream();
    if (!ctx->lz4) {
        free(ctx);
        return NULL;
    }
    return ctx;
}

void cmpr_ctx_free(cmpr_ctx_t *ctx)
{
    if (!ctx)
        return;
    LZ4_freeStream(ctx->lz4);
    free(ctx);
}

size_t cmpr_bound(int codec, size_t n)
{
    switch (codec) {
    case CMPR_NONE:
        return n;
    case CMPR_LZ4:
        if (n > LZ4_MAX_INPUT_SIZE)
            return 0;
        return (size_t)LZ4_compressBound((int)n);
    default:
        return 0;
    }
}

long cmpr_compress(cmpr_ctx_t *ctx, int codec, const void *src, size_t n, void *dst, size_t cap)
{
    int out;

    if (codec == CMPR_NONE)
        return 0;
    if (codec != CMPR_LZ4)
        return CMN_ECODEC;
    if (n < CMPR_MIN_SIZE)
        return 0;
    if (n > LZ4_MAX_INPUT_SIZE)
        return CMN_ETOOBIG;
    /* Only n-1 bytes of room: a block that does not shrink fails, and then travels raw. */
    if (cap > n - 1)
        cap = n - 1;
    if (cap > INT32_MAX)
        cap = INT32_MAX;
    /* A fast reset plus _continue on a cleared stream produces an independent block without the
     * 16 KiB memset that LZ4_compress_default pays on every call. */
    LZ4_resetStream_fast(ctx->lz4);
    out = LZ4_compress_fast_continue(ctx->lz4, src, dst, (int)n, (int)cap, 1);
    if (out <= 0)
        return 0;
    return out;
}

int cmpr_decompress(int codec, const void *src, size_t n, void *dst, size_t raw_len)
{
    int out;

    switch (codec) {
    case CMPR_NONE:
        if (n != raw_len)
            return CMN_EDECOMPRESS;
        if (n)
            memcpy(dst, src, n);
        return 0;
    case CMPR_LZ4:
        if (n == 0 || n > INT32_MAX || raw_len > LZ4_MAX_INPUT_SIZE)
            return CMN_EDECOMPRESS;
        out = LZ4_decompress_safe(src, dst, (int)n, (int)raw_len);
        if (out < 0 || (size_t)out != raw_len)
            return CMN_EDECOMPRESS;
        return 0;
    default:
        return CMN_ECODEC;
    }
}

int cmpr_check_sizes(int codec, uint64_t raw, uint64_t wire, uint64_t max_raw, cmn_errbuf_t *eb)
{
    if (raw > max_raw)
        return cmn_errf(eb, CMN_ETOOBIG, "raw size %llu over the limit of %llu",
                        (unsigned long long)raw, (unsigned long long)max_raw);
    switch (codec) {
    case CMPR_NONE:
        if (wire != raw)
            return cmn_errf(eb, CMN_EDECOMPRESS,
                            "uncompressed sample with wire size %llu != raw size %llu",
                            (unsigned long long)wire, (unsigned long long)raw);
        return 0;
    case CMPR_LZ4:
        if (raw > LZ4_MAX_INPUT_SIZE)
            return cmn_errf(eb, CMN_ETOOBIG, "LZ4 raw size %llu over the LZ4 block limit of %d",
                            (unsigned long long)raw, LZ4_MAX_INPUT_SIZE);
        if (wire == 0 || wire > (uint64_t)LZ4_compressBound((int)raw))
            return cmn_errf(eb, CMN_EDECOMPRESS, "LZ4 wire size %llu impossible for raw size %llu",
                            (unsigned long long)wire, (unsigned long long)raw);
        if (raw > wire * LZ4_MAX_RATIO + LZ4_RATIO_SLACK)
            return cmn_errf(eb, CMN_EDECOMPRESS,
                            "LZ4 claims %llu bytes from %llu (over %ux): decompression bomb",
                            (unsigned long long)raw, (unsigned long long)wire, LZ4_MAX_RATIO);
        return 0;
    default:
        return cmn_errf(eb, CMN_ECODEC, "unknown codec %d", codec);
    }
}

/* Rules section 6.2.4 ("Benchmarks and QSL Preprocessing") for the Network division, which takes
 * the Datacenter suite only (section 6.2): one entry per model name used in mlperf.conf. Of that
 * suite, lossless compression is approved for 3D-UNet (in the QSL and for the results the QDL
 * decompresses) and DLRMv3 (the DLRM row; per-query compression in Server); those are the only
 * rows with lossless = 1. The table's other lossless rows (ResNet50, RetinaNet, BERT-large,
 * DLRMv2) name benchmarks the Datacenter suite no longer has, so the division takes no result of
 * theirs and they have no entry here. No compression: the LLMs, the generative models and RGAT,
 * named so the refusal quotes their row. A model with no entry (whisper, gpt-oss-120b, the
 * retired ones, a demo) is refused any compression by cmpr_policy_check. */
static const cmpr_policy_t policy_table[] = {
    {"3d-unet", "Vision / Medical image segmentation / 3D-UNet", 1, 0},
    {"3d-unet-99", "Vision / Medical image segmentation / 3D-UNet", 1, 0},
    {"3d-unet-99.9", "Vision / Medical image segmentation / 3D-UNet", 1, 0},
    {"dlrm-v3", "Commerce / Recommendation / DLRMv3", 1, 1},
    {"gptj", "Language / Summarization / GPT-J", 0, 0},
    {"gptj-99", "Language / Summarization / GPT-J", 0, 0},
    {"gptj-99.9", "Language / Summarization / GPT-J", 0, 0},
    {"llama2-70b", "Language / Question Answering / Llama2-70b", 0, 0},
    {"llama2-70b-interactive", "Language / Question Answering / Llama2-70b", 0, 0},
    {"llama3_1-405b", "Language / Question Answering / Llama3.1-405B", 0, 0},
    {"llama3_1-405b-interactive", "Language / Question Answering / Llama3.1-405B", 0, 0},
    {"llama3_1-8b", "Language / Summarization / Llama3.1-8B", 0, 0},
    {"llama3_1-8b-edge", "Language / Summarization / Llama3.1-8B", 0, 0},
    {"llama3_1-8b-interactive", "Language / Summarization / Llama3.1-8B", 0, 0},
    {"mixtral-8x7b", "Language / Text Generation / Mixtral-8x7B", 0, 0},
    {"deepseek-r1", "Language / Reasoning / DeepSeek-r1", 0, 0},
    {"deepseek-r1-interactive", "Language / Reasoning / DeepSeek-r1", 0, 0},
    {"qwen3-vl-235b-a22b", "Language / Vision-language / Qwen3-VL", 0, 0},
    {"stable-diffusion-xl", "Generative / Text to image / SDXL", 0, 0},
    {"wan-2.2-t2v-a14b", "Generative / Text to video / WAN-2.2", 0, 0},
    {"rgat", "Graph / Node Classification / RGAT", 0, 0},
};

const cmpr_policy_t *cmpr_policy_table(size_t *count)
{
    *count = sizeof(policy_table) / sizeof(policy_table[0]);
    return policy_table;
}

const cmpr_policy_t *cmpr_policy_find(const char *model)
{
    size_t i;

    if (!model)
        return NULL;
    for (i = 0; i < sizeof(policy_table) / sizeof(policy_table[0]); i++) {
        if (strcmp(policy_table[i].model, model) == 0)
            return &policy_table[i];
    }
    return NULL;
}

int cmpr_policy_check(const char *model, int codec, cmn_errbuf_t *eb)
{
    const cmpr_policy_t *p;

    if (codec == CMPR_NONE)
        return 0;
    if (codec != CMPR_LZ4)
        return cmn_errf(eb, CMN_ECODEC, "unknown codec %d", codec);
    p = cmpr_policy_find(model);
    if (!p)
        return cmn_errf(eb, CMN_EPOLICY,
                        "compression '%s' refused for model '%s': in the Network division "
                        "(Datacenter suite, rules 6.2) the compression table of section 6.2.4 "
                        "approves lossless compression only for 3d-unet-99, 3d-unet-99.9 and "
                        "dlrm-v3, so only 'none' is allowed",
                        cmpr_codec_name(codec), model ? model : "(none)");
    if (!p->lossless)
        return cmn_errf(eb, CMN_EPOLICY,
                        "compression '%s' refused for model '%s': rules section 6.2.4 (%s) allows "
                        "no compression",
                        cmpr_codec_name(codec), model, p->row);
    return 0;
}
