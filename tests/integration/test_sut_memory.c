/* sut-node under peers that try to exhaust it, one case per attack class: results never read,
 * LZ4 bombs within the per-sample ratio, frames trickled a byte at a time, oversized metadata, and
 * floods of connections that never say Hello or go idle after it. Each case asserts that the
 * node's RSS (from /proc) stays within its memory budget above idle, that a good client is served
 * while the attack runs, and that RSS is back within 10 % of idle once the attacker has left. */
#include "../unit/check_main.h"
#include "testnet.h"

#include "cmn/clock.h"
#include "cmpr/cmpr.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

static long rss_kb(pid_t pid)
{
    char path[64], line[256];
    long kb = -1;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    f = fopen(path, "r");
    if (!f)
        return -1;
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
            break;
    fclose(f);
    return kb;
}

/* One 64-byte sample on a handshaken connection: 1 answered OK within 10 s, 0 answered
 * otherwise, -1 no answer. */
static int query_ok_ms(tn_client_t *c, uint64_t id, int timeout_ms)
{
    static const uint8_t bytes[64] = {1, 2, 3};
    const void *ptr = bytes;
    size_t size = sizeof(bytes);
    int none = CMPR_NONE, ok = 0;
    unsigned type;
    ProtobufCMessage *m;
    uint8_t *payload;
    size_t plen;

    if (tn_send_query(c, id, id, 1, &ptr, &size, &size, &none) < 0 ||
        tn_recv(c, timeout_ms, &type, &m, &payload, &plen) < 0)
        return -1;
    if (type == CMN_MSG_RESPONSE)
        ok = ((Nsut__Response *)m)->results[0]->status == NSUT__STATUS__STATUS_OK;
    cmn_msg_free(m, NULL);
    free(payload);
    return ok;
}

/* query_ok_ms() within 10 s. */
static int query_ok(tn_client_t *c, uint64_t id)
{
    return query_ok_ms(c, id, 10000);
}

/* The ms left until |deadline| (cmn_now_ns), at least 1. */
static int ms_left(uint64_t deadline)
{
    uint64_t now = cmn_now_ns();
    return now + 1000000u >= deadline ? 1 : (int)((deadline - now) / 1000000u);
}

/* One good client: a 64-byte sample answered OK (a REJECTED answer is retried, as the QDL
 * would send it elsewhere and back), within 10 s. */
static int good_served(int port)
{
    int none = CMPR_NONE, ok = 0;
    uint64_t end = cmn_now_ns() + 10000000000ull, id = 1;
    tn_client_t *c = malloc(sizeof(*c));
    Nsut__HelloAck *ack;

    if (!c || tn_connect(c, port) < 0) {
        free(c);
        return 0;
    }
    ack = tn_handshake(c, &none, 1);
    if (ack)
        cmn_msg_free(&ack->base, NULL);
    while (ack && ok == 0 && cmn_now_ns() < end)
        ok = query_ok(c, id++);
    tn_close(c);
    free(c);
    return ok == 1;
}

/* RSS once it has settled (two readings 250 ms apart within 1 %), or after 10 s. */
static long settled_rss(pid_t pid)
{
    uint64_t end = cmn_now_ns() + 10000000000ull;
    long a = rss_kb(pid), b;

    for (;;) {
        usleep(250000);
        b = rss_kb(pid);
        if (labs(b - a) * 100 <= a || cmn_now_ns() > end)
            return b;
        a = b;
    }
}

/* Waits up to 15 s for RSS within 10 % of |idle|; returns the last reading. */
static long rss_back(pid_t pid, long idle)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    uint64_t end = cmn_now_ns(); /* not waited for: see finish() */
#else
    uint64_t end = cmn_now_ns() + 15000000000ull;
#endif
    long r = rss_kb(pid);

    while (r > idle + idle / 10 && cmn_now_ns() < end) {
        usleep(100000);
        r = rss_kb(pid);
    }
    return r;
}

#if defined(__SANITIZE_ADDRESS__)
/* ASan keeps freed chunks in a quarantine (256 MiB by default) before reusing them, so a node
 * that frees and reallocates its batch buffers grows by the quarantine, not by what it holds.
 * The node under test gets a small one, and the bound in finish() allows for it. */
#    define ASAN_QUARANTINE_MB 16
static void asan_small_quarantine(void)
{
    const char *old = getenv("ASAN_OPTIONS");
    char opts[1024];

    snprintf(opts, sizeof(opts), "%s%squarantine_size_mb=%d", old ? old : "",
             old && *old ? ":" : "", ASAN_QUARANTINE_MB);
    setenv("ASAN_OPTIONS", opts, 1);
}
#endif

static long start_node(tn_proc_t *p, const char *const *args)
{
    long idle;

#if defined(__SANITIZE_ADDRESS__)
    asan_small_quarantine();
#endif
    ck_assert_int_eq(tn_spawn(p, SUT_NODE_EXE, args), 0);
    ck_assert(good_served(p->port)); /* warm: one of everything a client uses */
    idle = settled_rss(p->pid);
    ck_assert_int_gt(idle, 0);
    return idle;
}

/* What UCX may keep after an attack: its request, buffer and rendezvous-fragment pools grow to
 * the most sends ever outstanding (bounded by the node's budget and its peers' limits) and give
 * nothing back while the worker lives. sut.ucx_*.no_read, whose peer leaves 64 KiB rendezvous
 * results unfetched: 0.7 MiB over UCX's TCP transport, 11 MiB over shared memory. */
static inline long ucx_pools_kb(void)
{
    return tn_is_ucx() ? 16 * 1024 : 0;
}

static void finish(tn_proc_t *p, const char *attack, long idle, long peak, long budget_kb)
{
    long back;

    ck_assert(good_served(p->port));
    back = rss_back(p->pid, idle);
    printf("%s: idle %ld KiB, peak %ld KiB (budget %ld KiB), after %ld KiB\n", attack, idle, peak,
           budget_kb, back);
#if defined(__SANITIZE_THREAD__)
    /* ThreadSanitizer shadows every byte the node touches with four more of its own. */
    ck_assert_msg(peak - idle <= 5 * budget_kb,
                  "%s: RSS grew %ld KiB, over 5 x the budget of %ld KiB", attack, peak - idle,
                  budget_kb);
#elif defined(__SANITIZE_ADDRESS__)
    /* A sanitizer's runtime is not the node's: bound the growth by the budget plus ASan's shadow
     * of it (one byte per eight) and the quarantine the node was given. */
    ck_assert_msg(peak - idle <= budget_kb + budget_kb / 8 + ASAN_QUARANTINE_MB * 1024,
                  "%s: RSS grew %ld KiB, over the budget of %ld KiB plus ASan's shadow and "
                  "%d MiB quarantine",
                  attack, peak - idle, budget_kb, ASAN_QUARANTINE_MB);
#else
    ck_assert_msg(peak <= budget_kb, "%s: RSS %ld KiB, over the budget of %ld KiB", attack, peak,
                  budget_kb);
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    /* Its allocator quarantines freed memory instead of returning it: glibc's behaviour, which
     * the node relies on (malloc_trim), is checked by the plain build. */
    printf("%s: RSS after the attack not checked under a sanitizer\n", attack);
#else
    ck_assert_msg(back <= idle + idle / 10 + ucx_pools_kb(),
                  "%s: RSS %ld KiB after the attack, idle %ld KiB", attack, back, idle);
#endif
    ck_assert_int_eq(tn_stop(p, SIGTERM, 10000), 0);
    tn_cleanup(p);
}

static void send_timeout(int fd, int ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

static int handshake(tn_client_t *c, int port)
{
    int codecs[2] = {CMPR_NONE, CMPR_LZ4};
    Nsut__HelloAck *ack;

    if (tn_connect(c, port) < 0)
        return -1;
    ack = tn_handshake(c, codecs, 2);
    if (!ack)
        return -1;
    cmn_msg_free(&ack->base, NULL);
    return 0;
}

/* The number after the last |key| in the node's log, or 0. */
static unsigned long long logged_number(const tn_proc_t *p, const char *key)
{
    char line[1024];
    unsigned long long n = 0;
    FILE *f = fopen(p->log_path, "r");

    if (!f)
        return 0;
    while (fgets(line, sizeof(line), f)) {
        const char *at = strstr(line, key);
        if (at)
            n = strtoull(at + strlen(key), NULL, 10);
    }
    fclose(f);
    return n;
}

/* The bytes of queued results the node's "took none of its N bytes" line names, or 0. */
static size_t queued_at_drop(const tn_proc_t *p)
{
    return (size_t)logged_number(p, "took none of its ");
}

/* How many lines of the node's log contain |key|. */
static int logged_lines(const tn_proc_t *p, const char *key)
{
    char line[1024];
    int n = 0;
    FILE *f = fopen(p->log_path, "r");

    if (!f)
        return 0;
    while (fgets(line, sizeof(line), f))
        n += strstr(line, key) != NULL;
    fclose(f);
    return n;
}

/* Asks the node for its stats line (SIGHUP) and returns the number after |key| in it, or 0 when
 * the line did not come within 5 s. */
static unsigned long long stats_number(const tn_proc_t *p, const char *key)
{
    int before = logged_lines(p, "(peak ");
    uint64_t end = cmn_now_ns() + 5000000000ull;

    if (kill(p->pid, SIGHUP) < 0)
        return 0;
    while (logged_lines(p, "(peak ") == before) {
        if (cmn_now_ns() > end)
            return 0;
        usleep(20000);
    }
    return logged_number(p, key);
}

/* The node's own high-water mark of its memory budget: it logs its stats, "(peak N)" among them,
 * on SIGHUP. Unlike a sampled RSS it cannot miss a peak that came and went between two samples. */
static unsigned long long budget_peak(const tn_proc_t *p)
{
    return stats_number(p, "(peak ");
}

/* The bytes its peers make the node hold now ("memory N of L bytes" in the same line). */
static unsigned long long budget_used(const tn_proc_t *p)
{
    return stats_number(p, "memory ");
}

/* The memory the node reports holding for its peers (the budget's high-water mark, in KiB) must
 * account for the RSS the attack made it grow by: at most 1.5 x, plus 16 MiB for what is the
 * node's own (idle pooled buffers, allocator arenas, thread stacks), and UCX's pools over
 * ucx:// (ucx_pools_kb()). Not under a sanitizer, whose runtime is not the node's. */
static unsigned long long assert_charged(const tn_proc_t *p, const char *attack, long idle,
                                         long peak)
{
    unsigned long long held = budget_peak(p);
    long grown = peak - idle, held_kb = (long)(held >> 10);

    printf("%s: RSS grew %ld KiB, the budget's peak %ld KiB\n", attack, grown, held_kb);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
    ck_assert_msg(grown <= held_kb + held_kb / 2 + 16 * 1024 + ucx_pools_kb(),
                  "%s: RSS grew %ld KiB, the budget reported at most %ld KiB in use", attack, grown,
                  held_kb);
#endif
    return held;
}

/* The end of an attack by |n| connections: the budget's use against RSS, the attackers gone, and
 * finish(). */
static void finish_attack(tn_proc_t *p, const char *attack, tn_client_t *evil, int n, long idle,
                          long peak, long budget_kb)
{
    int c;

    assert_charged(p, attack, idle, peak);
    for (c = 0; c < n; c++)
        tn_close(&evil[c]);
    free(evil);
    finish(p, attack, idle, peak, budget_kb);
}

/* ---- results that are never read ------------------------------------------------------------- */

START_TEST(no_read)
{
    const char *args[] = {"--backend",
                          "null",
                          "--backend-opt",
                          "output_size=65536",
                          "--memory-budget",
                          "128M",
                          "--write-timeout-ms",
                          "5000",
                          NULL};
    static const uint8_t bytes[64];
    const void *ptr = bytes;
    size_t size = sizeof(bytes);
    int none = CMPR_NONE, i;
    tn_proc_t p;
    tn_client_t *evil = malloc(sizeof(*evil));
    long idle, peak = 0;
    unsigned long long held;
    size_t queued;
    uint64_t end;

    /* Over ucx:// the 64 KiB results must go by rendezvous, as large messages do on an RDMA
     * fabric, for a peer that does not fetch them to hold the node's sends (UCX's TCP transport
     * would send them eagerly, and the node's sends would complete whatever the peer does). Node
     * and client read it from the environment. */
    if (tn_is_ucx())
        setenv("UCX_RNDV_THRESH", "8192", 1);
    idle = start_node(&p, args);
    ck_assert_int_eq(handshake(evil, p.port), 0);
    send_timeout(evil->fd, 1000);
    tn_stop_reading(evil);
    /* 3000 results of 64 KiB (190 MiB) asked for, none read. */
    for (i = 0; i < 3000; i++) {
        if (tn_send_query(evil, (uint64_t)i, (uint64_t)i, 1, &ptr, &size, &size, &none) < 0)
            break;
        if (i % 10 == 0) {
            long r = rss_kb(p.pid);
            peak = r > peak ? r : peak;
        }
    }
    ck_assert(good_served(p.port));
    end = cmn_now_ns() + 15000000000ull;
    while (!tn_log_contains(&p, "took none of its") && cmn_now_ns() < end) {
        long r = rss_kb(p.pid);
        peak = r > peak ? r : peak;
        usleep(50000);
    }
    ck_assert_msg(tn_log_contains(&p, "took none of its"), "the non-reading peer was not dropped");
    held = assert_charged(&p, "no_read", idle, peak);
    tn_close(evil);
    free(evil);
    /* The attack was real: the node says how much it held for the peer when it dropped it. Those
     * are bytes in the node's own write queue, which fills only once the kernel's socket buffers
     * are full; how many depends on how many samples were in flight when the peer's reading was
     * paused (70 MB on an idle host, 5.6 MB on a loaded one), so the check asks for the node's
     * smallest pause threshold (256 KiB) several times over. Over ucx:// no kernel buffer comes
     * first (every unfetched rendezvous result is in the node's queue) and the node pauses the
     * peer at that threshold, so the queue at the drop may be just over it (256 KiB and 576 KiB
     * seen on a loaded host, 100 MB on an idle one): the check asks for the threshold itself.
     * The RSS peak sampled above may miss that moment on a busy host. On a busy host the queue
     * at the drop may also be small while the node held more before (the peer paused with few
     * samples in flight, 256 KiB seen): the budget's own high-water mark, which counts every
     * result record the node held, then says whether they queued up. */
    queued = queued_at_drop(&p);
    printf("no_read: %zu bytes of results queued when the peer was dropped, %llu at most\n", queued,
           held);
    ck_assert_msg(queued >= (tn_is_ucx() ? 256u << 10 : 1u << 20) || held >= 1u << 20,
                  "the results did not queue up (%zu bytes at the drop, budget peak %llu)", queued,
                  held);
    finish(&p, "no_read", idle, peak, 128 * 1024);
}
END_TEST

/* ---- many slow readers of small results ------------------------------------------------------ */

START_TEST(slow_readers)
{
    const char *args[] = {"--backend", "null", "--memory-budget", "256M", NULL};
    enum { CONNS = 16, PER = 256, SECS = 12 };
    static const uint8_t bytes[64];
    const void *ptrs[PER];
    size_t sizes[PER];
    int codecs[PER], c, k;
    tn_client_t *evil = calloc(CONNS, sizeof(*evil));
    uint64_t id = 1, end;
    long idle, peak = 0;
    tn_proc_t p;

    for (k = 0; k < PER; k++) {
        ptrs[k] = bytes;
        sizes[k] = sizeof(bytes);
        codecs[k] = CMPR_NONE;
    }
    idle = start_node(&p, args);
    for (c = 0; c < CONNS; c++) {
        ck_assert_int_eq(handshake(&evil[c], p.port), 0);
        send_timeout(evil[c].fd, 100);
    }
    /* Each peer asks for 4-byte results as fast as it can and takes 1 KiB of them per turn. */
    end = cmn_now_ns() + SECS * 1000000000ull;
    while (cmn_now_ns() < end) {
        for (c = 0; c < CONNS; c++) {
            char sink[1024];
            (void)tn_send_query(&evil[c], id, id, PER, ptrs, sizes, sizes, codecs);
            id += PER;
            (void)recv(evil[c].fd, sink, sizeof(sink), MSG_DONTWAIT);
        }
        long r = rss_kb(p.pid);
        peak = r > peak ? r : peak;
    }
    finish_attack(&p, "slow_readers", evil, CONNS, idle, peak, 256 * 1024);
}
END_TEST

/* ---- LZ4 bombs ------------------------------------------------------------------------------- */

START_TEST(lz4_bomb)
{
    const char *args[] = {"--backend", "digest", "--memory-budget", "128M", "--max-frame",
                          "4M",        NULL};
    enum { CONNS = 4, FRAMES = 10, PER = 8, RAW = 1 << 20 };
    uint8_t *raw = calloc(1, RAW), *wire = malloc(RAW);
    cmpr_ctx_t *ctx = cmpr_ctx_new();
    const void *ptrs[PER];
    size_t wsz[PER], rsz[PER];
    int codecs[PER], c, f, k;
    long cw, idle, peak = 0;
    unsigned long long held;
    tn_client_t *evil = calloc(CONNS, sizeof(*evil));
    tn_proc_t p;

    ck_assert_ptr_nonnull(raw);
    ck_assert_ptr_nonnull(wire);
    ck_assert_ptr_nonnull(ctx);
    srand(7);
    for (k = 0; k < RAW; k += 64) /* compresses about 30:1, well within LZ4's ratio limit */
        raw[k] = (uint8_t)rand();
    cw = cmpr_compress(ctx, CMPR_LZ4, raw, RAW, wire, RAW);
    ck_assert_int_gt(cw, 0);
    for (k = 0; k < PER; k++) {
        ptrs[k] = wire;
        wsz[k] = (size_t)cw;
        rsz[k] = RAW;
        codecs[k] = CMPR_LZ4;
    }
    idle = start_node(&p, args);
    /* 4 connections x 10 frames x 8 MiB decoded (within the per-frame limit of a quarter of
     * the budget), from 40 x 8 x ~35 KiB on the wire. */
    for (c = 0; c < CONNS; c++) {
        ck_assert_int_eq(handshake(&evil[c], p.port), 0);
        send_timeout(evil[c].fd, 1000);
    }
    for (f = 0; f < FRAMES; f++) {
        for (c = 0; c < CONNS; c++) {
            uint64_t id = (uint64_t)f * PER + 1;
            (void)tn_send_query(&evil[c], id, id, PER, ptrs, wsz, rsz, codecs);
        }
        long r = rss_kb(p.pid);
        peak = r > peak ? r : peak;
    }
    ck_assert(good_served(p.port));
    for (k = 0; k < 20; k++) {
        long r = rss_kb(p.pid);
        peak = r > peak ? r : peak;
        usleep(50000);
    }
    /* The bombs took hold: the node decoded at least one whole frame (8 x 1 MiB) into memory
     * under its budget. Its own high-water mark says so; an RSS sampled from outside may miss a
     * frame decoded and freed between two samples (over shared memory, on a loaded host). */
    held = budget_peak(&p);
    printf("lz4_bomb: at most %llu bytes of the budget held at once\n", held);
    ck_assert_msg(held >= (unsigned long long)PER * RAW,
                  "the bombs did not take hold (budget peak %llu bytes)", held);
    assert_charged(&p, "lz4_bomb", idle, peak);
    for (c = 0; c < CONNS; c++)
        tn_close(&evil[c]);
    free(evil);
    cmpr_ctx_free(ctx);
    free(raw);
    free(wire);
    finish(&p, "lz4_bomb", idle, peak, 128 * 1024);
}
END_TEST

/* ---- LZ4 bombs sent back to back: the I/O loop's time --------------------------------------- */

enum { DB_CONNS = 3, DB_PER = 16, DB_RAW = 16 << 20, DB_QUERIES = 8 };

typedef struct {
    int port;
    const void *const *ptrs;
    const size_t *wsz, *rsz;
    const int *codecs;
} decode_bomber_t;

static volatile sig_atomic_t bomber_stop;

static void on_bomber_term(int sig)
{
    (void)sig;
    bomber_stop = 1;
}

/* A child process (threads that exit crash ThreadSanitizer's runtime beside UCX's memory hooks):
 * connects, and sends bombs as fast as the node takes them, draining whatever comes back; a
 * dropped connection is made again. On SIGTERM it writes how many bomb Queries it sent whole to
 * |out| and exits. */
static void decode_bomber(const decode_bomber_t *b, int out)
{
    tn_client_t *c = calloc(1, sizeof(*c));
    unsigned long frames = 0;
    uint64_t id = 1;
    static char sink[65536];

    signal(SIGTERM, on_bomber_term);
    while (c && !bomber_stop) {
        if (handshake(c, b->port) < 0) {
            tn_close(c);
            usleep(50000);
            continue;
        }
        send_timeout(c->fd, 1000);
        while (!bomber_stop) {
            if (tn_send_query(c, id, id, DB_PER, b->ptrs, b->wsz, b->rsz, b->codecs) < 0)
                break;
            id += DB_PER;
            frames++;
            while (recv(c->fd, sink, sizeof(sink), MSG_DONTWAIT) > 0)
                ;
        }
        tn_close(c);
    }
    if (write(out, &frames, sizeof(frames)) != (ssize_t)sizeof(frames))
        _exit(1);
    _exit(0);
}

/* A good client: connect, Hello, then DB_QUERIES small samples one after the other, each answered
 * OK (one answered REJECTED, the budget spent on the bombs for a moment, is sent again, as the
 * QDL would), all until |deadline|: the HelloAck and each answer may take any of the time left
 * (the caller bounds how long it took; a host slowed by other work, sanitizers, is not a starved
 * client). Returns 1 when all were, else 0 saying what was missing. */
static int decode_good_client(int port, uint64_t deadline)
{
    int none = CMPR_NONE, ok = 1, q, r;
    tn_client_t *c = calloc(1, sizeof(*c));
    Nsut__HelloAck *ack = NULL;
    uint64_t id = 1;

    if (c && tn_connect(c, port) == 0)
        ack = tn_handshake_ms(c, &none, 1, ms_left(deadline));
    if (!ack) {
        printf("decode_good_client: no connection or no HelloAck by the deadline\n");
        ok = 0;
    } else {
        cmn_msg_free(&ack->base, NULL);
    }
    for (q = 0; ok && q < DB_QUERIES; q++) {
        while ((r = query_ok_ms(c, id++, ms_left(deadline))) == 0 && cmn_now_ns() < deadline)
            ;
        ok = r == 1;
        if (!ok)
            printf("decode_good_client: sample %d of %d %s by the deadline\n", q + 1,
                   (int)DB_QUERIES, r < 0 ? "not answered" : "only rejected");
    }
    if (c)
        tn_close(c);
    free(c);
    return ok;
}

START_TEST(decode_share)
{
    const char *args[] = {"--backend", "null", "--memory-budget", "2G", NULL};
    const char *mul = getenv("CK_TIMEOUT_MULTIPLIER");
    uint8_t *raw = calloc(1, DB_RAW), *wire = malloc(DB_RAW);
    cmpr_ctx_t *ctx = cmpr_ctx_new();
    const void *ptrs[DB_PER];
    size_t wsz[DB_PER], rsz[DB_PER];
    int codecs[DB_PER], c, k;
    long cw, idle;
    uint64_t t0, worst = 0,
                 bound = 5000000000ull * (uint64_t)(mul && atoi(mul) > 0 ? atoi(mul) : 1);
    unsigned long frames = 0;
    decode_bomber_t bomb;
    pid_t kid[DB_CONNS];
    int fds[2];
    tn_proc_t p;

    ck_assert_ptr_nonnull(raw);
    ck_assert_ptr_nonnull(wire);
    ck_assert_ptr_nonnull(ctx);
    cw = cmpr_compress(ctx, CMPR_LZ4, raw, DB_RAW, wire, DB_RAW); /* zeros: ~64 KiB */
    ck_assert_int_gt(cw, 0);
    for (k = 0; k < DB_PER; k++) {
        ptrs[k] = wire;
        wsz[k] = (size_t)cw;
        rsz[k] = DB_RAW;
        codecs[k] = CMPR_LZ4;
    }
    idle = start_node(&p, args);
    /* 3 connections, each sending Queries of 16 x 16 MiB of zeros (~1 MiB on the wire) back to
     * back: decoding them alone could keep the I/O loop busy all the time. */
    bomb = (decode_bomber_t){p.port, ptrs, wsz, rsz, codecs};
    ck_assert_int_eq(pipe(fds), 0);
    for (c = 0; c < DB_CONNS; c++) {
        kid[c] = fork();
        ck_assert_int_ge(kid[c], 0);
        if (kid[c] == 0) {
            close(fds[0]);
            decode_bomber(&bomb, fds[1]);
        }
    }
    close(fds[1]);
    sleep(2);
    /* Good clients meanwhile, one after the other: connect, Hello, small samples answered. */
    for (k = 0; k < 3; k++) {
        int ok;
        t0 = cmn_now_ns();
        ok = decode_good_client(p.port, t0 + 2 * bound);
        t0 = cmn_now_ns() - t0;
        printf("decode_share: good client %d %s in %.2f s\n", k, ok ? "served" : "NOT served",
               t0 / 1e9);
        fflush(stdout); /* a failed check ends this process without flushing it */
        ck_assert_msg(ok, "good client %d was not served while the bombs ran", k);
        worst = t0 > worst ? t0 : worst;
        usleep(300000);
    }
    for (c = 0; c < DB_CONNS; c++) {
        unsigned long n = 0;
        int st;
        kill(kid[c], SIGTERM);
        if (read(fds[0], &n, sizeof(n)) == (ssize_t)sizeof(n))
            frames += n;
        waitpid(kid[c], &st, 0);
    }
    close(fds[0]);
    printf("decode_share: %lu bomb Queries (%lu MiB decoded each) sent by %d connections; the "
           "slowest good client took %.2f s (bound %.0f s)\n",
           frames, (unsigned long)DB_PER * (DB_RAW >> 20), DB_CONNS, worst / 1e9, bound / 1e9);
    ck_assert_msg(frames >= 2 * DB_CONNS, "the bombs were not sent (%lu Queries)", frames);
    ck_assert_msg(worst <= bound, "a good client took %.2f s, over %.0f s, while bombs decoded",
                  worst / 1e9, bound / 1e9);
    cmpr_ctx_free(ctx);
    free(raw);
    free(wire);
    finish(&p, "decode_share", idle, idle, 2048 * 1024);
}
END_TEST

/* ---- a frame trickled a byte at a time --------------------------------------------------------
 */

/* Header and metadata of a Query of one uncompressed sample of |size| bytes. */
static size_t query_head(uint8_t *out, size_t cap, uint32_t size)
{
    Nsut__Query q = NSUT__QUERY__INIT;
    Nsut__Sample s = NSUT__SAMPLE__INIT;
    Nsut__Sample *sp = &s;
    cmn_frame_header_t h;
    size_t meta;

    s.id = 1;
    s.wire_size = s.raw_size = size;
    q.query_id = 1;
    q.n_samples = 1;
    q.samples = &sp;
    q.parts = 1;
    meta = protobuf_c_message_get_packed_size(&q.base);
    ck_assert_uint_le(CMN_FRAME_HEADER_SIZE + meta, cap);
    memset(&h, 0, sizeof(h));
    h.version = CMN_PROTOCOL_VERSION;
    h.type = CMN_MSG_QUERY;
    h.meta_len = (uint32_t)meta;
    h.payload_len = size;
    cmn_frame_header_write(out, &h);
    protobuf_c_message_pack(&q.base, out + CMN_FRAME_HEADER_SIZE);
    return CMN_FRAME_HEADER_SIZE + meta;
}

START_TEST(slow_frame)
{
    /* The default grace (--frame-timeout-ms 5000) and rate rule (256 KiB/s after it). */
    const char *args[] = {"--backend", "digest", "--memory-budget", "256M", NULL};
    enum { CONNS = 4 };
    tn_client_t *evil = calloc(CONNS, sizeof(*evil));
    uint8_t head[256];
    size_t hl = query_head(head, sizeof(head), 32u << 20);
    int c, timed_out = 0;
    long idle, peak = 0;
    uint64_t t0, end, elapsed_ms = 0;
    tn_proc_t p;

    idle = start_node(&p, args);
    for (c = 0; c < CONNS; c++) {
        ck_assert_int_eq(handshake(&evil[c], p.port), 0);
        ck_assert_int_eq(tn_send_raw(&evil[c], head, hl), 0);
    }
    /* A byte every 100 ms on each of four 32 MiB frames: progress, but far under the minimum
     * rate. The whole-frame deadline this replaces allowed 10 s + 32 s; the rate rule drops them
     * after the grace and one or two 1 s windows. */
    t0 = cmn_now_ns();
    end = t0 + 30000000000ull;
    while (!timed_out && cmn_now_ns() < end) {
        for (c = 0; c < CONNS; c++)
            (void)tn_send_raw(&evil[c], "x", 1);
        usleep(100000);
        timed_out = tn_log_contains(&p, "a frame half received, arriving too slowly");
        long r = rss_kb(p.pid);
        peak = r > peak ? r : peak;
    }
    elapsed_ms = (cmn_now_ns() - t0) / 1000000u;
    printf("slow_frame: dropped after %llu ms\n", (unsigned long long)elapsed_ms);
    ck_assert_msg(timed_out, "a trickled frame outlived the minimum arrival rate");
    ck_assert(tn_wait_log(&p, "(ERROR_TIMEOUT); closing the connection", 10000));
    ck_assert_msg(elapsed_ms < 15000, "a trickled frame was held %llu ms (5 s grace + 1-2 s)",
                  (unsigned long long)elapsed_ms);
    finish_attack(&p, "slow_frame", evil, CONNS, idle, peak, 256 * 1024);
}
END_TEST

/* ---- metadata over the limit, refused by its header ------------------------------------------ */

START_TEST(big_meta)
{
    const char *args[] = {"--backend", "digest", "--memory-budget", "256M", NULL};
    tn_client_t *evil = malloc(sizeof(*evil));
    cmn_frame_header_t h;
    uint8_t hb[CMN_FRAME_HEADER_SIZE];
    long idle, peak;
    tn_proc_t p;

    idle = start_node(&p, args);
    ck_assert_int_eq(handshake(evil, p.port), 0);
    /* 16 MiB of metadata (a Query of about a million samples) announced. */
    memset(&h, 0, sizeof(h));
    h.version = CMN_PROTOCOL_VERSION;
    h.type = CMN_MSG_QUERY;
    h.meta_len = 16u << 20;
    cmn_frame_header_write(hb, &h);
    ck_assert_int_eq(tn_send_raw(evil, hb, sizeof(hb)), 0);
    ck_assert_int_eq(tn_expect_error(evil, 5000), NSUT__ERROR_CODE__ERROR_TOO_LARGE);
    peak = rss_kb(p.pid);
    assert_charged(&p, "big_meta", idle, peak);
    tn_close(evil);
    free(evil);
    finish(&p, "big_meta", idle, peak, 256 * 1024);
}
END_TEST

/* ---- connections that never say Hello, or go quiet after it ---------------------------------- */

START_TEST(preauth_flood)
{
    const char *args[] = {"--backend",
                          "digest",
                          "--max-preauth",
                          "20",
                          "--handshake-timeout-ms",
                          "1500",
                          "--idle-timeout-ms",
                          "1000",
                          "--heartbeat-ms",
                          "0",
                          NULL};
    enum { FLOOD = 60 };
    tn_client_t *fl = calloc(FLOOD, sizeof(*fl)), *quiet = malloc(sizeof(*quiet));
    int i, refused = 0, served = 0;
    long idle, peak;
    uint64_t end;
    tn_proc_t p;

    idle = start_node(&p, args);
    for (i = 0; i < FLOOD; i++)
        ck_assert_int_eq(tn_connect(&fl[i], p.port), 0);
    /* Past the budget: an Error frame saying which limit, before any work on the connection. */
    for (i = 0; i < FLOOD; i++)
        refused += tn_expect_error(&fl[i], i < 20 ? 100 : 3000) == NSUT__ERROR_CODE__ERROR_OVERLOAD;
    peak = rss_kb(p.pid);
    printf("preauth_flood: %d of %d connections refused with ERROR_OVERLOAD\n", refused, FLOOD);
    ck_assert_int_ge(refused, FLOOD - 20 - 1);
    /* Once the Hello deadline has cleared the rest, a good client is served. */
    end = cmn_now_ns() + 10000000000ull;
    while (!served && cmn_now_ns() < end)
        served = good_served(p.port);
    ck_assert(served);
    /* A client that goes quiet after its Hello is closed at the idle deadline. */
    ck_assert_int_eq(handshake(quiet, p.port), 0);
    ck_assert_int_eq(tn_expect_error(quiet, 5000), NSUT__ERROR_CODE__ERROR_TIMEOUT);
    ck_assert(tn_wait_log(&p, "no frame other than Pings and no work for 1000 ms", 10000));
    assert_charged(&p, "preauth_flood", idle, peak);
    tn_close(quiet);
    for (i = 0; i < FLOOD; i++)
        tn_close(&fl[i]);
    free(fl);
    free(quiet);
    finish(&p, "preauth_flood", idle, peak, 256 * 1024);
}
END_TEST

/* ---- a greedy peer and a good client's large frame ---------------------------------------------
 */

START_TEST(greedy_share)
{
    const char *args[] = {"--backend",
                          "null",
                          "--backend-opt",
                          "output_size=1048576",
                          "--memory-budget",
                          "128M",
                          "--write-timeout-ms",
                          "60000",
                          NULL};
    enum { BIG = 8 << 20, PER = 64 };
    static const uint8_t small[64];
    const void *ptrs[PER];
    size_t sizes[PER];
    int codecs[PER];
    uint8_t *big = calloc(1, BIG);
    const void *bptr = big;
    size_t bsize = BIG;
    int none = CMPR_NONE, i, ok = 0;
    tn_proc_t p;
    tn_client_t *evil = malloc(sizeof(*evil)), *good = malloc(sizeof(*good));
    long idle, peak = 0;
    unsigned long long held;
    uint64_t t0, end, served_ms;

    ck_assert_ptr_nonnull(big);
    idle = start_node(&p, args);
    /* The greedy peer: Queries of 64 samples for 1 MiB results each, never read: the first
     * Query alone asks for more than the budget, so its part fills before the node pauses its
     * reading, even on a busy host. */
    ck_assert_int_eq(handshake(evil, p.port), 0);
    send_timeout(evil->fd, 1000);
    tn_stop_reading(evil);
    for (i = 0; i < PER; i++) {
        ptrs[i] = small;
        sizes[i] = sizeof(small);
        codecs[i] = CMPR_NONE;
    }
    for (i = 0; i < 8; i++) {
        uint64_t id = (uint64_t)i * PER + 1;
        if (tn_send_query(evil, id, id, PER, ptrs, sizes, sizes, codecs) < 0)
            break;
        long r = rss_kb(p.pid);
        peak = r > peak ? r : peak;
    }
    end = cmn_now_ns() + 10000000000ull;
    while ((held = budget_used(&p)) < 32ull << 20 && cmn_now_ns() < end)
        usleep(200000);
    printf("greedy_share: the greedy peer made the node hold %llu bytes\n", held);
    /* It took all it may (half of the 96 MiB limit; plus a little: the records of samples that
     * must be answered whatever the budget says, and the batch input it shared), alone: that was
     * idle budget. */
    ck_assert_msg(held >= 32ull << 20, "the greedy peer held only %llu bytes", held);
    ck_assert_uint_le(held, 50ull << 20);
    /* A good client's 8 MiB sample (16 MiB held while its frame is handled: frame and decoded
     * input, within its share of 32 MiB) is taken, run and answered within 5 s meanwhile. */
    ck_assert_int_eq(handshake(good, p.port), 0);
    t0 = cmn_now_ns();
    end = t0 + 5000000000ull;
    ck_assert_int_eq(tn_send_query(good, 1, 1, 1, &bptr, &bsize, &bsize, &none), 0);
    while (!ok && cmn_now_ns() < end) {
        unsigned type;
        ProtobufCMessage *m;
        uint8_t *payload;
        size_t plen;

        if (tn_recv(good, 5000, &type, &m, &payload, &plen) < 0)
            break;
        if (type == CMN_MSG_RESPONSE) {
            ck_assert_int_eq(((Nsut__Response *)m)->results[0]->status, NSUT__STATUS__STATUS_OK);
            ok = 1;
        }
        ck_assert_msg(type != CMN_MSG_ERROR, "the good client's frame was refused");
        cmn_msg_free(m, NULL);
        free(payload);
    }
    served_ms = (cmn_now_ns() - t0) / 1000000u;
    {
        long r = rss_kb(p.pid);
        peak = r > peak ? r : peak;
    }
    printf("greedy_share: the good client's 8 MiB sample answered after %llu ms\n",
           (unsigned long long)served_ms);
    ck_assert_msg(ok, "the good client's 8 MiB sample was not answered within 5 s");
    assert_charged(&p, "greedy_share", idle, peak);
    tn_close(good);
    tn_close(evil);
    free(good);
    free(evil);
    free(big);
    finish(&p, "greedy_share", idle, peak, 128 * 1024);
}
END_TEST

/* ---- big frames trickled just above the arrival-rate floor ----------------------------------- */

/* Five connections each announce a 64 MiB Query (each within its share, together 320 of the
 * 384 MiB limit) and send it at about 400 KiB/s, above the 256 KiB/s floor: legal, so not dropped.
 * Reserved whole at their headers they left too little for a good client's 72 MiB sample (refused
 * on every try); charged as they fill, it is served within 5 s. The rate is kept by the clock, not
 * by the loop's turns: each turn sends what the 400 KiB/s owes by then (a turn slowed by a loaded
 * host, or the node slowed by a sanitizer, is made up at once), and the good client's 72 MiB goes
 * from a child process, so the trickle never waits for it. */

/* Sends |len| bytes on trickling connection |c| of |evil|, or fails naming why, with the node's log
 * (why it closed the connection) on stdout. */
static void trickle_send(const tn_proc_t *p, tn_client_t *evil, int c, const void *b, size_t len)
{
    char tail[2048];
    FILE *f;
    size_t n = 0;
    int e;

    if (tn_send_raw(&evil[c], b, len) == 0)
        return;
    e = errno;
    f = fopen(p->log_path, "r");
    if (f) {
        if (fseek(f, -(long)(sizeof(tail) - 1), SEEK_END) != 0)
            rewind(f);
        n = fread(tail, 1, sizeof(tail) - 1, f);
        fclose(f);
    }
    tail[n] = '\0';
    printf("trickle_big: the node's log ends:\n%s\n", tail);
    ck_abort_msg("trickle_big: sending on trickling connection %d failed (%s): the node closed it "
                 "(its log above)",
                 c, strerror(e));
}

START_TEST(trickle_big)
{
    const char *args[] = {"--backend", "digest", "--memory-budget", "512M", NULL};
    enum { CONNS = 5, STEP = 40 << 10, BIG = 72 << 20 };
    static const char bytes[STEP];
    tn_client_t *evil = calloc(CONNS, sizeof(*evil)), *good = malloc(sizeof(*good));
    uint8_t head[256], *big = calloc(1, BIG);
    const void *bptr = big;
    size_t bsize = BIG, hl = query_head(head, sizeof(head), 64u << 20);
    int c, none = CMPR_NONE, ok = 0, st;
    long idle, peak = 0;
    uint64_t t0, end, now, sent_ns = 0, sent_done_ns = 0, served_ms = 0, trickled = 0, owed;
    pid_t kid = -1;
    tn_proc_t p;

    ck_assert_ptr_nonnull(big);
    idle = start_node(&p, args);
    for (c = 0; c < CONNS; c++) {
        ck_assert_int_eq(handshake(&evil[c], p.port), 0);
        trickle_send(&p, evil, c, head, hl);
    }
    ck_assert_int_eq(handshake(good, p.port), 0);
    /* 40 KiB per 100 ms on each, past the 5 s grace; the good sample goes at 6 s. */
    t0 = cmn_now_ns();
    end = t0 + 12000000000ull;
    while ((now = cmn_now_ns()) < end) {
        owed = (uint64_t)STEP * ((now - t0) / 100000000u + 1);
        for (; trickled < owed; trickled += STEP)
            for (c = 0; c < CONNS; c++)
                trickle_send(&p, evil, c, bytes, sizeof(bytes));
        if (kid < 0 && now - t0 > 6000000000ull) {
            sent_ns = cmn_now_ns();
            kid = fork();
            ck_assert_int_ge(kid, 0);
            if (kid == 0)
                _exit(tn_send_query(good, 1, 1, 1, &bptr, &bsize, &bsize, &none) == 0 ? 0 : 1);
        }
        if (kid > 0 && !sent_done_ns && waitpid(kid, &st, WNOHANG) == kid) {
            ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
                          "the good client's 72 MiB frame could not be sent");
            sent_done_ns = cmn_now_ns();
        }
        if (kid > 0 && !ok) {
            unsigned type;
            ProtobufCMessage *m;
            uint8_t *payload;
            size_t plen;

            if (tn_recv(good, 100, &type, &m, &payload, &plen) == 0) {
                ck_assert_msg(type != CMN_MSG_ERROR, "the good client's frame was refused: %s",
                              ((Nsut__Error *)m)->message ? ((Nsut__Error *)m)->message : "");
                if (type == CMN_MSG_RESPONSE) {
                    ck_assert_int_eq(((Nsut__Response *)m)->results[0]->status,
                                     NSUT__STATUS__STATUS_OK);
                    ok = 1;
                    if (!sent_done_ns) { /* answered: the child has sent it all */
                        ck_assert_int_eq(waitpid(kid, &st, 0), kid);
                        ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
                        sent_done_ns = cmn_now_ns();
                    }
                    served_ms = (cmn_now_ns() - sent_done_ns) / 1000000u;
                }
                cmn_msg_free(m, NULL);
                free(payload);
            }
        } else {
            usleep(100000);
        }
        long r = rss_kb(p.pid);
        peak = r > peak ? r : peak;
    }
    if (kid > 0 && !sent_done_ns)
        (void)waitpid(kid, &st, 0);
    printf("trickle_big: the good client's 72 MiB sample answered %llu ms after it was all sent "
           "(%llu ms after its first byte); %llu KiB trickled on each connection in %.1f s\n",
           (unsigned long long)served_ms,
           (unsigned long long)(ok ? served_ms + (sent_done_ns - sent_ns) / 1000000u : 0),
           (unsigned long long)(trickled >> 10), (cmn_now_ns() - t0) / 1e9);
    ck_assert_msg(ok, "the good client's 72 MiB sample was not answered");
    ck_assert_msg(served_ms < 5000, "the good client's sample took %llu ms",
                  (unsigned long long)served_ms);
    ck_assert_msg(!tn_log_contains(&p, "arriving too slowly"),
                  "a frame above the minimum rate was dropped");
    tn_close(good);
    free(good);
    free(big);
    finish_attack(&p, "trickle_big", evil, CONNS, idle, peak, 512 * 1024);
}
END_TEST

/* Three connections each send 30 MiB of a 40 MiB frame at once (together over the 96 MiB limit),
 * then trickle above the rate floor: the budget cannot charge all of them, so reading pauses on
 * those whose next chunk passes their share, which are dropped after --frame-timeout-ms; the node
 * is not locked: a good client is served, and RSS stays within the budget. */
START_TEST(budget_wait)
{
    const char *args[] = {"--backend", "digest", "--memory-budget", "128M", NULL};
    enum { CONNS = 3, BURST = 30 << 20, STEP = 32 << 10 };
    tn_client_t *evil = calloc(CONNS, sizeof(*evil));
    uint8_t head[256], *burst = calloc(1, BURST);
    size_t hl = query_head(head, sizeof(head), 40u << 20);
    int c, dropped;
    long idle, peak = 0;
    uint64_t end;
    tn_proc_t p;

    ck_assert_ptr_nonnull(burst);
    idle = start_node(&p, args);
    for (c = 0; c < CONNS; c++) {
        ck_assert_int_eq(handshake(&evil[c], p.port), 0);
        send_timeout(evil[c].fd, 200);
        ck_assert_int_eq(tn_send_raw(&evil[c], head, hl), 0);
        (void)tn_send_raw(&evil[c], burst, BURST); /* may stop short: the node paused reading */
    }
    end = cmn_now_ns() + 30000000000ull;
    do {
        for (c = 0; c < CONNS; c++)
            (void)tn_send_raw(&evil[c], burst, STEP);
        usleep(100000);
        long r = rss_kb(p.pid);
        peak = r > peak ? r : peak;
        dropped = tn_log_contains(&p, "for memory while this peer holds");
    } while (!dropped && cmn_now_ns() < end);
    ck_assert_msg(dropped, "no half-frame waiting for memory was dropped");
    ck_assert(tn_wait_log(&p, "(ERROR_OVERLOAD); closing the connection", 10000));
    ck_assert_msg(!tn_log_contains(&p, "arriving too slowly"),
                  "a frame paused by the node was judged by its arrival rate");
    free(burst);
    finish_attack(&p, "budget_wait", evil, CONNS, idle, peak, 128 * 1024);
}
END_TEST

/* ---- connections that only ping ------------------------------------------------------------- */

static void send_ping(tn_client_t *c, uint64_t seq)
{
    Nsut__Ping ping = NSUT__PING__INIT;

    ping.seq = seq;
    (void)tn_send(c, CMN_MSG_PING, &ping.base, NULL, 0);
}

/* |n| connections, each handshaken: they hold |n| of the node's slots. */
static tn_client_t *hold_slots(int port, int n)
{
    tn_client_t *pg = calloc(n, sizeof(*pg));
    int i;

    ck_assert_ptr_nonnull(pg);
    for (i = 0; i < n; i++) {
        ck_assert_int_eq(handshake(&pg[i], port), 0);
        send_timeout(pg[i].fd, 1000);
    }
    return pg;
}

static void release_slots(tn_client_t *pg, int n)
{
    int i;

    for (i = 0; i < n; i++)
        tn_close(&pg[i]);
    free(pg);
}

/* Eight peers hold every slot of a node with --max-connections 8; pg[|workers|..] say Hello and
 * then only ping, every 200 ms; pg[0..|workers|-1] send a Query each round, which must be
 * answered. A good client tries twice a second and must get in within |limit_ms|.
 * |idle_ms|: --idle-timeout-ms, or NULL for the default (60 s). */
static void slots_attack(const char *name, const char *idle_ms, int workers, uint64_t limit_ms,
                         const char *log_needle)
{
    const char *args[] = {"--backend",
                          "digest",
                          "--max-connections",
                          "8",
                          "--max-conn-per-peer",
                          "16",
                          "--heartbeat-ms",
                          "0",
                          "--idle-timeout-ms",
                          idle_ms,
                          NULL};
    enum { HOLDERS = 8 };
    tn_client_t *pg;
    int i, served = 0, worked = 1, n = 0;
    long idle, peak;
    uint64_t t0, seq = 1, waited_ms;
    tn_proc_t p;

    if (!idle_ms)
        args[8] = NULL;
    idle = start_node(&p, args);
    pg = hold_slots(p.port, HOLDERS);
    t0 = cmn_now_ns();
    while (!served && worked && cmn_now_ns() < t0 + limit_ms * 1000000u) {
        for (i = workers; i < HOLDERS; i++)
            send_ping(&pg[i], seq++);
        for (i = 0; i < workers && worked; i++)
            worked = query_ok(&pg[i], seq++) == 1;
        if (++n % 2 == 0)
            served = good_served(p.port);
        usleep(200000);
    }
    waited_ms = (cmn_now_ns() - t0) / 1000000u;
    peak = rss_kb(p.pid);
    printf("%s: a good client got in after %llu ms\n", name, (unsigned long long)waited_ms);
    ck_assert_msg(worked, "%s: the peer sending Queries was not served (evicted?)", name);
    ck_assert_msg(served, "%s: pinging connections kept a good client out for %llu ms", name,
                  (unsigned long long)limit_ms);
    for (i = 0; i < workers; i++)
        ck_assert_int_eq(query_ok(&pg[i], seq++), 1);
    ck_assert_msg(tn_log_contains(&p, log_needle), "%s: no log line '%s'", name, log_needle);
    assert_charged(&p, name, idle, peak);
    release_slots(pg, HOLDERS);
    finish(&p, name, idle, peak, 256 * 1024);
}

/* A short --idle-timeout-ms (1.5 s, under EVICT_GRACE_MS): the idle deadline frees the slots. */
START_TEST(ping_idle)
{
    slots_attack("ping_idle", "1500", 0, 20000,
                 "no frame other than Pings and no work for 1500 ms");
}
END_TEST

/* The DEFAULT --idle-timeout-ms (60 s): a good client gets in within 5 s by taking a pinger's
 * slot (EVICT_GRACE_MS); the peer sending Queries is never the one evicted. */
START_TEST(ping_slots)
{
    slots_attack("ping_slots", NULL, 1, 5000, "evicted: no Query for");
}
END_TEST

CHECK_ONE_TEST_TCASE_TIMEOUT(no_read, 90)
CHECK_ONE_TEST_TCASE_TIMEOUT(lz4_bomb, 90)
CHECK_ONE_TEST_TCASE_TIMEOUT(decode_share, 90)
CHECK_ONE_TEST_TCASE_TIMEOUT(slow_frame, 90)
CHECK_ONE_TEST_TCASE_TIMEOUT(big_meta, 90)
CHECK_ONE_TEST_TCASE_TIMEOUT(preauth_flood, 90)
CHECK_ONE_TEST_TCASE_TIMEOUT(slow_readers, 90)
CHECK_ONE_TEST_TCASE_TIMEOUT(greedy_share, 90)
#if defined(__SANITIZE_THREAD__)
static TCase *tc_trickle_big(void)
{
    /* The case is about rates: the test trickles at 400 KiB/s against a node that, slowed ten
     * times by ThreadSanitizer, pauses reading (legitimately, for memory) for as long as the
     * good client's 72 MiB digest takes, longer than the kernel's buffers hold the trickle. The
     * charging it tests runs on the loop thread only; ASan and the plain build run it. */
    (void)trickle_big;
    printf("trickle_big: skipped under ThreadSanitizer (rate-bound; loop-thread code only)\n");
    return NULL;
}
#else
CHECK_ONE_TEST_TCASE_TIMEOUT(trickle_big, 90)
#endif
CHECK_ONE_TEST_TCASE_TIMEOUT(budget_wait, 90)
CHECK_ONE_TEST_TCASE_TIMEOUT(ping_idle, 90)
CHECK_ONE_TEST_TCASE_TIMEOUT(ping_slots, 90)

CHECK_MAIN("sut_memory", tc_no_read, tc_lz4_bomb, tc_slow_frame, tc_big_meta, tc_preauth_flood,
           tc_ping_idle, tc_ping_slots, tc_slow_readers, tc_greedy_share, tc_trickle_big,
           tc_budget_wait, tc_decode_share)
