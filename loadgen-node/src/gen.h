/* The query trace, generated incrementally, identical to the official LoadGen's.
 *
 * The official GenerateQueries builds every query of a series before timing starts (about 360 B
 * and 1.3 us per query: a 600 s Server run at 100k QPS would need ~21 GB and ~80 s first). The
 * rules allow incremental generation, so this generator keeps only the state the official loop
 * carries between queries: the two mt19937 (samples, schedule), the loop counters, and the shuffled
 * lists LoadGen builds up front, replayed in the same order. It consumes every generator exactly as
 * GenerateQueries does, including the shuffles whose results go unused (the "unique" list and the
 * equal-issue permutations are always built and advance the sample generator), so the samples and
 * the schedule match the official ones bit for bit.
 *
 * Per sample it also advances the test-wide sequence counter and the never-seeded accuracy-log
 * generator (SequenceGen::NextAccLogRng) and decides whether the sample's response is logged.
 * lg__gen_finish() runs the rest of the official loop without producing samples, so the counters
 * end where the official ones would and generated_query_count / generated_query_duration are
 * known (they are logged at the end of the series for that reason).
 *
 * Not thread-safe: a generator belongs to the issue thread. */
#ifndef LG_GEN_H
#define LG_GEN_H

#include "lg/settings.h"
#include "rng.h"

#include <stddef.h>
#include <stdint.h>

/* Set in an index returned by lg__gen_fill() when the sample's response goes to the accuracy log.
 */
#define LG__ACC_FLAG 0x80000000u
#define LG__IDX_MASK 0x7fffffffu

typedef struct {
    /* Configuration. */
    lg_scenario_t scenario;
    int accuracy;
    const uint32_t *loaded;
    size_t L, end; /* loaded set size (padded in MultiStream) and sample_distribution_end */
    uint64_t spq, min_queries;
    int64_t gen_duration_ns, period_ns;
    double qps;
    int unique, same, ei, offline_shuffle;
    size_t same_index;
    double acc_offset, acc_prob;
    lg__mt_t *acc_rng;
    uint64_t *seq;

    lg__mt_t sample_rng, schedule_rng;
    uint32_t *list_a, *list_u;
    size_t a_n, a_pos, u_n, u_pos;
    lg__mt_t ei_rng0, ei_rng;
    uint32_t *ei_perm;
    uint64_t ei_list_size, ei_i;
    uint32_t *off_perm;
    uint64_t off_rep;

    /* Loop state. */
    int64_t ts, prev_ts;
    uint64_t count;
    int ended;
    int err; /* a list ran out (cannot happen with valid settings) */
    uint64_t q_n, q_pos;
    size_t q_ms_base;
} lg__gen_t;

/* Sets up one series (one official GenerateQueries call) over the loaded set |loaded|[0..L) whose
 * first |end| entries are the sample distribution. |accuracy| selects the AccuracyOnly trace.
 * |acc_rng| and |seq| are the test-wide accuracy-log generator and sample counter; |acc_offset|
 * and |acc_prob| decide the logged samples in performance mode. Returns 0, -ENOMEM, or
 * CMN_ECONFIG with a reason when the settings make the official generator crash (empty set,
 * zero-length equal-issue list, performance_issue_same_index beyond the set). */
int lg__gen_init(lg__gen_t *g, const lg_effective_settings_t *s, int accuracy,
                 const uint32_t *loaded, size_t L, size_t end, lg__mt_t *acc_rng, uint64_t *seq,
                 double acc_offset, double acc_prob, cmn_errbuf_t *eb);

/* Starts the next query: its scheduled offset from the series start and its sample count.
 * Returns 1, or 0 when the official loop would have ended. Any samples of the previous query not
 * yet taken are consumed first. */
int lg__gen_next(lg__gen_t *g, int64_t *sched_ns, uint64_t *n);

/* Writes up to |max| of the current query's samples (QSL indices, with LG__ACC_FLAG) into |idx|;
 * their sequence ids are consecutive from *g->seq as it was before the call. Returns the count. */
size_t lg__gen_fill(lg__gen_t *g, uint32_t *idx, size_t max);

/* Runs the official loop to its end without producing samples (see above), polling |stop| (may be
 * NULL) now and then: 1 when it returned non-zero and the loop was left unfinished, else 0. */
int lg__gen_finish(lg__gen_t *g, int (*stop)(void));

void lg__gen_free(lg__gen_t *g);

/* std::shuffle of [0, n) with a fresh mt19937(seed): the official loadable-set order. */
int lg__loadable_order(uint64_t seed, size_t n, uint32_t **out);

#endif
