/* One SSE event's JSON, read with yajl's event (SAX) parser (Debian libyajl-dev): no document
 * tree is built; only the few fields a dialect reads are looked at, by their path, and the token
 * IDs go straight into the output. yajl checks the whole text is one JSON value and keeps its
 * nesting on the heap, so depth costs memory (bounded by the event size, max_event), not stack.
 *
 * What is read (see httpc/oai.h): "error" (any value: a string, or an object's "message"),
 * "object":"error" with "message"; vllm/trtllm: choices[0].token_ids, else
 * choices[0].logprobs.tokens ("token_id:N"), choices[0].finish_reason; sglang: output_ids,
 * meta_info.finish_reason; llamacpp: tokens, stop; and whether the text (choices[0].text, text,
 * content) was non-empty (httpc_oai_dialect_end). The engine's own count of output tokens:
 * usage.completion_tokens (vllm, trtllm), meta_info.completion_tokens (sglang),
 * tokens_predicted (llamacpp). An engine error wins over everything else.
 *
 * Each event goes first through the fast scanner (json_scan.c: the same callbacks, in place, no
 * allocation, under half of yajl's instructions on a vLLM event); whatever it does not take (deep
 * nesting, escapes where the value is read, anything malformed) is parsed again from the start
 * with yajl, which has the last word. */
#include "httpc/oai.h"
#include "json_scan.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_parse.h>

/* What a value is, from its parent and key or index. */
typedef enum {
    S_OTHER = 0,
    S_ROOT,
    S_ERROR,    /* root.error */
    S_ERRMSG,   /* root.error.message */
    S_OBJECT,   /* root.object */
    S_MESSAGE,  /* root.message */
    S_CHOICES,  /* root.choices */
    S_CHOICE0,  /* root.choices[0] */
    S_LOGPROBS, /* choices[0].logprobs */
    S_LPTOK,    /* choices[0].logprobs.tokens */
    S_LPSTR,    /* an element of it */
    S_IDS,      /* choices[0].token_ids, output_ids, tokens */
    S_ID,       /* an element of it */
    S_META,     /* root.meta_info */
    S_FINISH,   /* choices[0].finish_reason, meta_info.finish_reason */
    S_STOP,     /* root.stop */
    S_TEXT,     /* choices[0].text, root.text (sglang), root.content (llamacpp) */
    S_USAGE,    /* root.usage (vllm, trtllm) */
    S_COUNT,    /* usage.completion_tokens, meta_info.completion_tokens, tokens_predicted */
} slot_t;

/* Containers whose slots are tracked; deeper ones are S_OTHER (their content is skipped). */
#define MAX_TRACK 8

typedef struct {
    /* What a resume point saves (CORE_BYTES, memo below): from here ... */
    unsigned depth;                /* open containers */
    unsigned char kind[MAX_TRACK]; /* slot_t of each tracked container */
    uint32_t index[MAX_TRACK];     /* arrays: the next element's index (max_event < 4 GiB) */
    slot_t key;                    /* the slot of the value after the last map key */
    int root_map, done, choices_array, had_text, counted;
    uint64_t count; /* the engine's count of output tokens, when counted */
    /* ... to here; the rest is as at the event's start there. */
    const httpc_oai_gen_t *g;
    httpc_oai_out_t *o;
    size_t n0; /* o->n before the event */
    int rc;    /* the first token error (reported unless an engine error) */
    int has_error, object_error, have_ids;
    int32_t *lp; /* logprobs token strings, used only without token_ids */
    size_t lp_n, lp_cap;
    int lp_rc;
    /* the memo (below): learning (the resume point is the last clean point within the first
     * mark_limit bytes, then up to MEMO_MARKS - 1 clean points after it), or stepping over the
     * runs it learnt (cursor: the next point to try) */
    size_t mark_limit;
    void *snap;
    unsigned n_marks, cursor;
    int marked;
    const char *data;
    size_t len;
    /* the texts last: zeroed by their first byte only (scan_init) */
    char tok_err[160];
    char msg[208]; /* the engine's message */
    char lp_err[160];
} scan_t;

/* Everything zero but the texts, which are empty. */
static void scan_init(scan_t *s)
{
    memset(s, 0, offsetof(scan_t, tok_err));
    s->tok_err[0] = s->msg[0] = s->lp_err[0] = '\0';
}

#define CORE_BYTES offsetof(scan_t, g)

static int fail(scan_t *s, int *rc, char *buf, size_t len, const char *msg)
{
    if (*rc == 0) {
        *rc = -EPROTO;
        snprintf(buf, len, "%s", msg);
    }
    (void)s;
    return 1; /* keep parsing: an engine error later in the event still wins */
}

static slot_t parent(const scan_t *s)
{
    return s->depth == 0           ? S_OTHER
           : s->depth <= MAX_TRACK ? (slot_t)s->kind[s->depth - 1]
                                   : S_OTHER;
}

/* The slot of the value that begins now (and the element index it consumes). */
static slot_t value_slot(scan_t *s)
{
    slot_t p;
    size_t i;

    if (s->depth == 0)
        return S_ROOT;
    p = parent(s);
    if (p == S_CHOICES || p == S_IDS || p == S_LPTOK) {
        i = s->index[s->depth - 1]++;
        return p == S_CHOICES ? (i == 0 ? S_CHOICE0 : S_OTHER) : p == S_IDS ? S_ID : S_LPSTR;
    }
    return s->depth <= MAX_TRACK ? s->key : S_OTHER;
}

static int slot_ids_seen(scan_t *s, slot_t v)
{
    if (v != S_IDS)
        return 0;
    if (s->have_ids)
        return fail(s, &s->rc, s->tok_err, sizeof(s->tok_err), "the token array appears twice");
    s->have_ids = 1;
    s->n0 = s->o->n;
    return 0;
}

static int push_id(scan_t *s, double v)
{
    httpc_oai_out_t *o = s->o;
    size_t idx = s->index[s->depth - 1] - 1;

    if (s->rc)
        return 1;
    /* sglang's cumulative output_ids repeat the tokens already taken. */
    if (s->g->dialect == HTTPC_OAI_SGLANG && !s->g->incremental && idx < s->n0)
        return 1;
    if (v < 0 || v > 2147483647.0 || v != (double)(int32_t)v) {
        s->rc = -EPROTO;
        snprintf(s->tok_err, sizeof(s->tok_err), "token id %g is not a non-negative int32", v);
        return 1;
    }
    if (o->n >= o->max) {
        s->rc = -EPROTO;
        snprintf(s->tok_err, sizeof(s->tok_err), "the engine sent more than max_tokens=%zu tokens",
                 o->max);
        return 1;
    }
    if (o->n == o->cap) {
        size_t ncap = o->cap ? o->cap * 2 : 64;
        int32_t *nt;

        if (ncap > o->max)
            ncap = o->max;
        nt = realloc(o->toks, ncap * sizeof(*nt));
        if (!nt) {
            s->rc = -ENOMEM;
            snprintf(s->tok_err, sizeof(s->tok_err), "out of memory for %zu tokens", ncap);
            return 1;
        }
        o->toks = nt;
        o->cap = ncap;
    }
    o->toks[o->n++] = (int32_t)v;
    return 1;
}

/* A scalar that is not a number where a token ID, or a string where a "token_id:N", belongs. */
static void scalar(scan_t *s, slot_t v, int is_null, int is_true)
{
    if (v == S_ID)
        fail(s, &s->rc, s->tok_err, sizeof(s->tok_err), "a token id that is not a number");
    else if (v == S_LPSTR)
        fail(s, &s->lp_rc, s->lp_err, sizeof(s->lp_err),
             "logprobs token is not \"token_id:N\" (start the engine with "
             "return_tokens_as_token_ids, or use one that returns token_ids)");
    else if (v == S_ERROR)
        s->has_error = 1;
    else if (v == S_FINISH && !is_null)
        s->done = 1;
    else if (v == S_STOP && is_true && s->g->dialect == HTTPC_OAI_LLAMACPP)
        s->done = 1;
    else if (v == S_COUNT && !is_null)
        fail(s, &s->rc, s->tok_err, sizeof(s->tok_err),
             "the engine's count of output tokens is not a number");
}

/* The engine's count of output tokens: a non-negative integer. */
static int take_count(scan_t *s, const char *num, size_t len)
{
    uint64_t c = 0;
    size_t i;

    for (i = 0; i < len && num[i] >= '0' && num[i] <= '9' && i < 16; i++)
        c = c * 10 + (uint64_t)(num[i] - '0');
    if (len == 0 || i != len)
        return fail(s, &s->rc, s->tok_err, sizeof(s->tok_err),
                    "the engine's count of output tokens is not an integer of 1..16 digits");
    s->count = c;
    s->counted = 1;
    return 1;
}

static int cb_null(void *ctx)
{
    scan_t *s = ctx;

    scalar(s, value_slot(s), 1, 0);
    return 1;
}

static int cb_boolean(void *ctx, int b)
{
    scan_t *s = ctx;

    scalar(s, value_slot(s), 0, b);
    return 1;
}

/* Token IDs are integers: digits are read here; anything else (sign, fraction, exponent) goes
 * through strtod on a bounded copy and must be integral. */
static int cb_number(void *ctx, const char *num, size_t len)
{
    scan_t *s = ctx;
    slot_t v = value_slot(s);
    double d = 0;
    size_t i;

    if (v == S_COUNT)
        return take_count(s, num, len);
    if (v != S_ID) {
        scalar(s, v, 0, 0);
        return 1;
    }
    for (i = 0; i < len && num[i] >= '0' && num[i] <= '9' && i < 16; i++)
        d = d * 10 + (num[i] - '0');
    if (i != len) {
        char buf[64];

        if (len >= sizeof(buf)) {
            fail(s, &s->rc, s->tok_err, sizeof(s->tok_err),
                 "a token id of more than 63 characters");
            return 1;
        }
        memcpy(buf, num, len);
        buf[len] = '\0';
        d = strtod(buf, NULL);
    }
    return push_id(s, d);
}

static int cb_string(void *ctx, const unsigned char *str, size_t len)
{
    scan_t *s = ctx;
    slot_t v = value_slot(s);

    switch (v) {
    case S_ERROR:
    case S_ERRMSG:
    case S_MESSAGE:
        if (v == S_ERROR)
            s->has_error = 1;
        if (v != S_MESSAGE || !s->has_error || !s->msg[0])
            snprintf(s->msg, sizeof(s->msg), "%.*s", (int)(len < 200 ? len : 200),
                     (const char *)str);
        break;
    case S_OBJECT:
        if (len == 5 && memcmp(str, "error", 5) == 0)
            s->object_error = 1;
        break;
    case S_TEXT:
        s->had_text |= len > 0;
        break;
    case S_LPSTR: {
        char buf[32], *end;
        long t;

        if (s->lp_rc)
            break;
        if (len < 10 || len >= sizeof(buf) || memcmp(str, "token_id:", 9) != 0) {
            if (len >= 9 && memcmp(str, "token_id:", 9) == 0)
                snprintf(s->lp_err, sizeof(s->lp_err), "bad token string '%.*s'",
                         (int)(len < 40 ? len : 40), (const char *)str);
            else
                fail(s, &s->lp_rc, s->lp_err, sizeof(s->lp_err),
                     "logprobs token is not \"token_id:N\" (start the engine with "
                     "return_tokens_as_token_ids, or use one that returns token_ids)");
            s->lp_rc = -EPROTO;
            break;
        }
        memcpy(buf, str, len);
        buf[len] = '\0';
        errno = 0;
        t = strtol(buf + 9, &end, 10);
        if (errno || *end || t < 0 || t > 2147483647L || buf[9] == '-' || buf[9] == '+' ||
            buf[9] == ' ') {
            s->lp_rc = -EPROTO;
            snprintf(s->lp_err, sizeof(s->lp_err), "bad token string '%.40s'", buf);
            break;
        }
        if (s->lp_n >= s->o->max) {
            s->lp_rc = -EPROTO;
            snprintf(s->lp_err, sizeof(s->lp_err),
                     "the engine sent more than max_tokens=%zu tokens", s->o->max);
            break;
        }
        if (s->lp_n == s->lp_cap) {
            size_t ncap = s->lp_cap ? 2 * s->lp_cap : 16;
            int32_t *np;

            if (ncap > s->o->max)
                ncap = s->o->max;
            np = realloc(s->lp, ncap * sizeof(*np));
            if (!np) {
                s->lp_rc = -ENOMEM;
                snprintf(s->lp_err, sizeof(s->lp_err), "out of memory for %zu tokens", ncap);
                break;
            }
            s->lp = np;
            s->lp_cap = ncap;
        }
        s->lp[s->lp_n++] = (int32_t)t;
        break;
    }
    default:
        scalar(s, v, 0, 0);
    }
    return 1;
}

static int cb_map_key(void *ctx, const unsigned char *k, size_t len)
{
    scan_t *s = ctx;
    slot_t p = parent(s);
    httpc_oai_dialect_t d = s->g->dialect;
    int oai = d == HTTPC_OAI_VLLM || d == HTTPC_OAI_TRTLLM;

#define IS(lit) (len == sizeof(lit) - 1 && memcmp(k, lit, len) == 0)
    s->key = S_OTHER;
    if (p == S_ROOT) {
        if (IS("error"))
            s->key = S_ERROR;
        else if (IS("object"))
            s->key = S_OBJECT;
        else if (IS("message"))
            s->key = S_MESSAGE;
        else if (oai && IS("choices"))
            s->key = S_CHOICES;
        else if (oai && IS("usage"))
            s->key = S_USAGE;
        else if (d == HTTPC_OAI_LLAMACPP && IS("tokens_predicted"))
            s->key = S_COUNT;
        else if (d == HTTPC_OAI_SGLANG && IS("output_ids"))
            s->key = S_IDS;
        else if (d == HTTPC_OAI_SGLANG && IS("meta_info"))
            s->key = S_META;
        else if (d == HTTPC_OAI_SGLANG && IS("text"))
            s->key = S_TEXT;
        else if (d == HTTPC_OAI_LLAMACPP && IS("content"))
            s->key = S_TEXT;
        else if (d == HTTPC_OAI_LLAMACPP && IS("tokens"))
            s->key = S_IDS;
        else if (d == HTTPC_OAI_LLAMACPP && IS("stop"))
            s->key = S_STOP;
    } else if (p == S_ERROR) {
        if (IS("message"))
            s->key = S_ERRMSG;
    } else if (p == S_CHOICE0) {
        if (IS("token_ids"))
            s->key = S_IDS;
        else if (IS("logprobs"))
            s->key = S_LOGPROBS;
        else if (IS("finish_reason"))
            s->key = S_FINISH;
        else if (IS("text"))
            s->key = S_TEXT;
    } else if (p == S_LOGPROBS) {
        if (IS("tokens"))
            s->key = S_LPTOK;
    } else if (p == S_META) {
        if (IS("finish_reason"))
            s->key = S_FINISH;
        else if (IS("completion_tokens"))
            s->key = S_COUNT;
    } else if (p == S_USAGE) {
        if (IS("completion_tokens"))
            s->key = S_COUNT;
    }
#undef IS
    return 1;
}

static int open_container(scan_t *s, int is_map)
{
    slot_t v = value_slot(s), k = S_OTHER;

    if (v == S_ROOT && !is_map)
        return 0; /* the event must be an object */
    if (v == S_ROOT)
        s->root_map = 1;
    if (v == S_ID || v == S_LPSTR || v == S_COUNT)
        scalar(s, v, 0, 0); /* a container where a token or a count belongs */
    else if (v == S_ERROR)
        s->has_error = 1;
    else if (v == S_FINISH)
        s->done = 1; /* not null */
    if (is_map && (v == S_ROOT || v == S_ERROR || v == S_CHOICE0 || v == S_LOGPROBS ||
                   v == S_META || v == S_USAGE))
        k = v;
    if (!is_map && (v == S_CHOICES || v == S_IDS || v == S_LPTOK))
        k = v;
    if (!is_map && v == S_CHOICES)
        s->choices_array = 1;
    if (!is_map && slot_ids_seen(s, k))
        k = S_OTHER;
    if (s->depth < MAX_TRACK) {
        s->kind[s->depth] = (unsigned char)k;
        s->index[s->depth] = 0;
    }
    s->depth++;
    s->key = S_OTHER;
    return 1;
}

static int cb_start_map(void *ctx)
{
    return open_container(ctx, 1);
}

static int cb_start_array(void *ctx)
{
    return open_container(ctx, 0);
}

static int cb_end(void *ctx)
{
    scan_t *s = ctx;

    s->depth--;
    s->key = S_OTHER;
    /* sglang's cumulative output_ids must not shrink. */
    if (s->depth < MAX_TRACK && s->kind[s->depth] == S_IDS && s->g->dialect == HTTPC_OAI_SGLANG &&
        !s->g->incremental && s->index[s->depth] < s->n0 && !s->rc) {
        s->rc = -EPROTO;
        snprintf(s->tok_err, sizeof(s->tok_err),
                 "cumulative output_ids shrank from %zu to %zu (is the engine streaming "
                 "incrementally? set incremental=1)",
                 s->n0, (size_t)s->index[s->depth]);
    }
    return 1;
}

/* The fast scanner's string with escapes, not decoded: taken only where nothing but its being
 * non-empty matters (text, skipped fields); anywhere else yajl parses the event and decodes it. */
static int cb_string_escaped(void *ctx, const unsigned char *str, size_t len)
{
    scan_t *s = ctx;
    slot_t v = value_slot(s);

    (void)str;
    (void)len;
    if (v == S_TEXT)
        s->had_text = 1; /* an escape decodes to at least one byte (the escape of NUL is refused) */
    return v == S_TEXT || v == S_OTHER ? 1 : -1;
}

static const yajl_callbacks callbacks = {
    .yajl_null = cb_null,
    .yajl_boolean = cb_boolean,
    .yajl_number = cb_number,
    .yajl_string = cb_string,
    .yajl_start_map = cb_start_map,
    .yajl_map_key = cb_map_key,
    .yajl_end_map = cb_end,
    .yajl_start_array = cb_start_array,
    .yajl_end_array = cb_end,
};

/* yajl's memory for one event: a bump arena on the caller's stack, so that the parser's handle,
 * lexer and state stack (4 small blocks) cost no malloc/free per event; a block that does not
 * fit (deep nesting, a long escaped string) comes from malloc. Freed all at once by returning. */
#define ARENA_BYTES 2048

typedef struct {
    max_align_t buf[ARENA_BYTES / sizeof(max_align_t)];
    size_t used;
} arena_t;

typedef struct {
    size_t size;
    max_align_t pad[]; /* keeps the block after the header aligned */
} blockhdr_t;

static int in_arena(const arena_t *a, const void *p)
{
    const char *c = p, *b = (const char *)a->buf;
    return c >= b && c < b + sizeof(a->buf);
}

static void *arena_malloc(void *ctx, size_t sz)
{
    arena_t *a = ctx;
    size_t need = sizeof(blockhdr_t) +
                  (sz + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
    blockhdr_t *h;

    if (need > sizeof(a->buf) - a->used)
        return malloc(sz);
    h = (blockhdr_t *)((char *)a->buf + a->used);
    h->size = sz;
    a->used += need;
    return h + 1;
}

static void arena_free(void *ctx, void *p)
{
    if (p && !in_arena(ctx, p))
        free(p);
}

static void *arena_realloc(void *ctx, void *p, size_t sz)
{
    void *n;
    size_t old;

    if (!p)
        return arena_malloc(ctx, sz);
    if (!in_arena(ctx, p))
        return realloc(p, sz);
    old = ((blockhdr_t *)p - 1)->size;
    n = arena_malloc(ctx, sz);
    if (n)
        memcpy(n, p, old < sz ? old : sz);
    return n;
}

/* ---- the start an engine's events repeat (httpc_oai_out_t's memo) ------------------------------
 *
 * The events of one stream begin alike (vLLM: {"id":"cmpl-...","object":"text_completion",
 * "created":N,"model":"...","choices":[{"index":0,"text": and only then the token's text and
 * IDs). The first event's bytes are kept; on the second, the scan notes the clean points after a
 * map key's ':' (json_scan.h's marks) and saves the reader's state at each: the last within the
 * bytes both events share (the resume point), and up to MEMO_MARKS - 1 after it; the second
 * event's bytes are kept. From then on an event whose first bytes equal the kept ones up to the
 * resume point is scanned from there with that state, and at its next point, when the reader's
 * state and containers there equal those saved at the next point learnt, the bytes that follow
 * are compared with the kept ones and the scan steps over the equal run to the furthest point
 * learnt within it, with the state saved there (vLLM: from logprobs over finish_reason and
 * stop_reason to token_ids). Equal bytes scanned from equal state make equal calls, so this
 * reads exactly what the whole scan would, as long as the state saved depends on nothing but
 * those bytes and the state before them: a point is clean, and saved, only while no token ID,
 * logprobs token, error or engine message has been read (they touch the output or the message,
 * and stay once set), so the state is the containers, the key and the flags, and a step is taken
 * only from a point as clean. An event that starts otherwise is scanned whole; after MEMO_MISSES
 * of those the memo stops learning. */

#define MEMO_MISSES 4
#define MEMO_MARKS 6

typedef struct {
    httpc_jscan_mark_t at;
    unsigned char core[CORE_BYTES];
} snap_t;

_Static_assert(MEMO_MARKS * sizeof(snap_t) <= sizeof(((httpc_oai_out_t *)0)->memo.state),
               "httpc_oai_out_t's memo.state holds the points learnt");

static int clean(const scan_t *s)
{
    return !(s->rc || s->lp_rc || s->lp_n || s->have_ids || s->has_error || s->object_error ||
             s->msg[0]);
}

static size_t common_prefix(const char *a, size_t an, const char *b, size_t bn)
{
    size_t n = an < bn ? an : bn, i = 0;

    while (i + 8 <= n) {
        uint64_t x, y;
        memcpy(&x, a + i, 8);
        memcpy(&y, b + i, 8);
        if (x != y)
            break;
        i += 8;
    }
    while (i < n && a[i] == b[i])
        i++;
    return i;
}

/* Learning: each clean point within the bytes kept. */
static int on_mark(void *ctx, const httpc_jscan_mark_t *at, httpc_jscan_mark_t *ahead)
{
    scan_t *s = ctx;
    snap_t *sn = s->snap;
    unsigned k;

    (void)ahead;
    if (!clean(s) || at->off > sizeof(s->o->memo.prefix))
        return 0;
    if (at->off <= s->mark_limit) {
        k = 0; /* the resume point, until a later one within the shared bytes */
        s->marked = 1;
        s->n_marks = 1;
    } else if (s->marked && s->n_marks < MEMO_MARKS) {
        k = s->n_marks++;
    } else {
        return 0;
    }
    sn[k].at = *at;
    memcpy(sn[k].core, s, CORE_BYTES);
    return 0;
}

/* Resumed: at the next point learnt, step over the run that repeats (one try per point). */
static int on_step(void *ctx, const httpc_jscan_mark_t *at, httpc_jscan_mark_t *ahead)
{
    scan_t *s = ctx;
    const httpc_oai_out_t *o = s->o;
    const snap_t *sn = (const snap_t *)(const void *)o->memo.state;
    unsigned i = s->cursor, j;
    size_t run;

    if (i >= s->n_marks)
        return 0;
    s->cursor = s->n_marks; /* unless a step is taken below */
    if (!clean(s) || sn[i].at.depth != at->depth ||
        memcmp(sn[i].at.stack, at->stack, at->depth) != 0 || memcmp(sn[i].core, s, CORE_BYTES) != 0)
        return 0;
    run = common_prefix(s->data + at->off, s->len - at->off, o->memo.prefix + sn[i].at.off,
                        o->memo.len - sn[i].at.off);
    for (j = i; j + 1 < s->n_marks && sn[j + 1].at.off - sn[i].at.off <= run; j++)
        ;
    if (j == i)
        return 0;
    memcpy(s, sn[j].core, CORE_BYTES);
    ahead->off = sn[j].at.off - sn[i].at.off;
    ahead->depth = sn[j].at.depth;
    memcpy(ahead->stack, sn[j].at.stack, sizeof(ahead->stack));
    s->cursor = j + 1;
    return 1;
}

static void memo_keep(httpc_oai_out_t *o, const char *data, size_t len)
{
    size_t k = len < sizeof(o->memo.prefix) ? len : sizeof(o->memo.prefix);

    memcpy(o->memo.prefix, data, k);
    o->memo.len = (uint16_t)k;
    o->memo.at = 0;
    o->memo.n_marks = 0;
}

/* After an event was read whole and well: what the next one may start from. */
static void memo_learn(httpc_oai_out_t *o, const scan_t *s, const char *data, size_t len)
{
    if (o->memo.misses >= MEMO_MISSES)
        return;
    if (s->marked) {             /* prefix[0..at) is what this event and the one kept share */
        memo_keep(o, data, len); /* the points after it are in this one's bytes */
        o->memo.at = (uint16_t)((const snap_t *)(const void *)o->memo.state)->at.off;
        o->memo.n_marks = (uint16_t)s->n_marks;
        return;
    }
    if (o->memo.len)
        o->memo.misses++;
    memo_keep(o, data, len);
}

int httpc_oai_dialect_event(const httpc_oai_gen_t *g, const char *data, size_t len,
                            httpc_oai_out_t *o)
{
    scan_t s;
    arena_t arena;
    yajl_alloc_funcs af = {arena_malloc, arena_realloc, arena_free, &arena};
    yajl_handle h;
    yajl_status st;
    int rc = 0, fast, resumed = 0;
    size_t before = o->n;
    const snap_t *sn = (const snap_t *)(const void *)o->memo.state;

    if (len == 6 && memcmp(data, "[DONE]", 6) == 0) {
        o->done = 1;
        return 0;
    }
    scan_init(&s);
    s.g = g;
    s.o = o;
    s.n0 = o->n;
    if (o->memo.at && len > o->memo.at && memcmp(data, o->memo.prefix, o->memo.at) == 0) {
        memcpy(&s, sn->core, CORE_BYTES);
        resumed = 1;
        s.data = data;
        s.len = len;
        s.n_marks = o->memo.n_marks;
        s.cursor = 1;
        fast = httpc_json_scan_at(data, len, &callbacks, cb_string_escaped, &s, &sn->at, on_step);
    } else if (o->memo.len && !o->memo.at && o->memo.misses < MEMO_MISSES) {
        s.mark_limit = common_prefix(data, len, o->memo.prefix, o->memo.len);
        s.snap = o->memo.state;
        fast = httpc_json_scan_at(data, len, &callbacks, cb_string_escaped, &s, NULL, on_mark);
    } else {
        fast = httpc_json_scan(data, len, &callbacks, cb_string_escaped, &s);
    }
    if (fast == HTTPC_JSCAN_UNUSUAL) {
        /* yajl from the start: nothing the fast pass did stays. */
        free(s.lp);
        o->n = before;
        resumed = 1; /* (nothing learnt from this one) */
        scan_init(&s);
        s.g = g;
        s.o = o;
        s.n0 = o->n;
        arena.used = 0;
        h = yajl_alloc(&callbacks, &af, &s);
        if (!h) {
            snprintf(o->err, sizeof(o->err), "out of memory for the JSON parser");
            return -ENOMEM;
        }
        /* Engines send UTF-8; the fields read here are ASCII, so checking the rest is wasted
         * work. */
        yajl_config(h, yajl_dont_validate_strings, 1);
        st = yajl_parse(h, (const unsigned char *)data, len);
        if (st == yajl_status_ok)
            st = yajl_complete_parse(h);
        yajl_free(h);
    } else {
        st = fast == HTTPC_JSCAN_OK ? yajl_status_ok : yajl_status_client_canceled;
    }
    if (st != yajl_status_ok || s.depth != 0 || !s.root_map) {
        snprintf(o->err, sizeof(o->err), "event is not a JSON object: '%.*s'",
                 (int)(len < 60 ? len : 60), data);
        rc = -EPROTO;
    } else if (s.has_error || s.object_error) {
        snprintf(o->err, sizeof(o->err), "engine error: %.200s", s.msg[0] ? s.msg : "(no message)");
        rc = -EPROTO;
    } else if (s.rc) {
        snprintf(o->err, sizeof(o->err), "%s", s.tok_err);
        rc = s.rc;
    } else if ((g->dialect == HTTPC_OAI_VLLM || g->dialect == HTTPC_OAI_TRTLLM) &&
               !s.choices_array) {
        snprintf(o->err, sizeof(o->err), "event without a choices array");
        rc = -EPROTO;
    } else if (!s.have_ids && s.lp_rc) {
        snprintf(o->err, sizeof(o->err), "%s", s.lp_err);
        rc = s.lp_rc;
    } else if (!s.have_ids) {
        size_t i;

        for (i = 0; i < s.lp_n && rc == 0; i++) {
            s.depth = 1;
            s.index[0] = 1;
            push_id(&s, (double)s.lp[i]);
            if (s.rc) {
                snprintf(o->err, sizeof(o->err), "%s", s.tok_err);
                rc = s.rc;
            }
        }
    }
    free(s.lp);
    if (rc < 0) {
        o->n = before;
        return rc;
    }
    if (s.done)
        o->done = 1;
    if (s.had_text)
        o->had_text = 1;
    if (s.counted) {
        o->counted = 1;
        o->engine_n = s.count;
    }
    if (!resumed)
        memo_learn(o, &s, data, len);
    return 0;
}
