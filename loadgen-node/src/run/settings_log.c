/* The requested_* and effective_* keys of the detail log, in the official order, and the messages
 * reading the conf files produced. */
#include "run.h"

void lg__log_requested(lg__dlog_t *d, const lg_test_settings_t *s)
{
    LG_DSTR(d, "requested_scenario", lg_scenario_name(s->scenario));
    LG_DSTR(d, "requested_test_mode", lg_mode_name(s->mode));
    switch (s->scenario) {
    case LG_SINGLE_STREAM:
        LG_DF64(d, "requested_single_stream_expected_latency_ns",
                s->single_stream_expected_latency_ns);
        LG_DF64(d, "requested_single_stream_target_latency_percentile",
                s->single_stream_target_latency_percentile);
        break;
    case LG_MULTI_STREAM:
        LG_DF64(d, "requested_multi_stream_expected_latency_ns",
                s->multi_stream_expected_latency_ns);
        LG_DF64(d, "requested_multi_stream_target_latency_percentile",
                s->multi_stream_target_latency_percentile);
        LG_DU64(d, "requested_multi_stream_samples_per_query", s->multi_stream_samples_per_query);
        break;
    case LG_SERVER:
        LG_DF64(d, "requested_server_target_qps", s->server_target_qps);
        LG_DU64(d, "requested_server_target_latency_ns", s->server_target_latency_ns);
        LG_DF64(d, "requested_server_target_latency_percentile",
                s->server_target_latency_percentile);
        LG_DBOOL(d, "requested_server_coalesce_queries", s->server_coalesce_queries);
        LG_DI64(d, "requested_server_find_peak_qps_decimals_of_precision",
                s->server_find_peak_qps_decimals_of_precision);
        LG_DF64(d, "requested_server_find_peak_qps_boundary_step_size",
                s->server_find_peak_qps_boundary_step_size);
        LG_DU64(d, "requested_server_max_async_queries", s->server_max_async_queries);
        LG_DU64(d, "requested_server_num_issue_query_threads", s->server_num_issue_query_threads);
        break;
    case LG_OFFLINE:
        LG_DF64(d, "requested_offline_expected_qps", s->offline_expected_qps);
        break;
    }
    LG_DU64(d, "requested_min_duration_ms", s->min_duration_ms);
    LG_DU64(d, "requested_max_duration_ms", s->max_duration_ms);
    LG_DU64(d, "requested_min_query_count", s->min_query_count);
    LG_DU64(d, "requested_max_query_count", s->max_query_count);
    LG_DU64(d, "requested_qsl_rng_seed", s->qsl_rng_seed);
    LG_DU64(d, "requested_sample_index_rng_seed", s->sample_index_rng_seed);
    LG_DU64(d, "requested_schedule_rng_seed", s->schedule_rng_seed);
    LG_DU64(d, "requested_accuracy_log_rng_seed", s->accuracy_log_rng_seed);
    LG_DF64(d, "requested_accuracy_log_probability", s->accuracy_log_probability);
    LG_DU64(d, "requested_accuracy_log_sampling_target", s->accuracy_log_sampling_target);
    LG_DBOOL(d, "requested_print_timestamps", s->print_timestamps);
    LG_DBOOL(d, "requested_performance_issue_unique", s->performance_issue_unique);
    LG_DBOOL(d, "requested_performance_issue_same", s->performance_issue_same);
    LG_DU64(d, "requested_performance_issue_same_index", s->performance_issue_same_index);
    LG_DU64(d, "requested_performance_sample_count_override", s->performance_sample_count_override);
    LG_DU64(d, "requested_accuracy_sample_count_override", s->accuracy_sample_count_override);
    LG_DBOOL(d, "requested_sample_concatenate_permutation", s->sample_concatenate_permutation);
    if (s->use_token_latencies) {
        LG_DBOOL(d, "requested_use_token_latencies", s->use_token_latencies);
        if (s->scenario != LG_OFFLINE) {
            LG_DU64(d, "requested_server_ttft_latency", s->server_ttft_latency);
            LG_DU64(d, "requested_server_tpot_latency", s->server_tpot_latency);
        }
    }
}

void lg__log_effective(lg__dlog_t *d, const lg_effective_settings_t *s)
{
    LG_DSTR(d, "effective_scenario", lg_scenario_name(s->scenario));
    LG_DSTR(d, "effective_test_mode", lg_mode_name(s->mode));
    LG_DU64(d, "effective_samples_per_query", s->samples_per_query);
    LG_DF64(d, "effective_target_qps", s->target_qps);
    LG_DI64(d, "effective_target_latency_ns", s->target_latency_ns);
    LG_DF64(d, "effective_target_latency_percentile", s->target_latency_percentile);
    LG_DU64(d, "effective_max_async_queries", s->max_async_queries);
    LG_DU64(d, "effective_target_duration_ms", s->target_duration_ms);
    LG_DU64(d, "effective_min_duration_ms", s->min_duration_ms);
    LG_DU64(d, "effective_max_duration_ms", s->max_duration_ms);
    LG_DU64(d, "effective_min_query_count", s->min_query_count);
    LG_DU64(d, "effective_max_query_count", s->max_query_count);
    LG_DU64(d, "effective_min_sample_count", s->min_sample_count);
    LG_DU64(d, "effective_qsl_rng_seed", s->qsl_rng_seed);
    LG_DU64(d, "effective_sample_index_rng_seed", s->sample_index_rng_seed);
    LG_DU64(d, "effective_schedule_rng_seed", s->schedule_rng_seed);
    LG_DU64(d, "effective_accuracy_log_rng_seed", s->accuracy_log_rng_seed);
    LG_DF64(d, "effective_accuracy_log_probability", s->accuracy_log_probability);
    LG_DU64(d, "effective_accuracy_log_sampling_target", s->accuracy_log_sampling_target);
    LG_DBOOL(d, "effective_print_timestamps", s->print_timestamps);
    LG_DBOOL(d, "effective_performance_issue_unique", s->performance_issue_unique);
    LG_DBOOL(d, "effective_performance_issue_same", s->performance_issue_same);
    LG_DU64(d, "effective_performance_issue_same_index", s->performance_issue_same_index);
    LG_DU64(d, "effective_performance_sample_count", s->performance_sample_count);
    LG_DU64(d, "effective_accuracy_sample_count", s->accuracy_sample_count);
    LG_DBOOL(d, "effective_sample_concatenate_permutation", s->sample_concatenate_permutation);
}

void lg__log_msgs(lg__dlog_t *d, const lg_msgs_t *m)
{
    size_t i;

    if (!m)
        return;
    for (i = 0; i < m->n; i++)
        lg__dlog_str(d, m->m[i].is_error ? LG__ERR : LG__WARN, m->m[i].key, m->m[i].text, LG__FILE,
                     __LINE__);
    if (m->dropped)
        lg__dlog_strf(d, LG__ERR, "error_invalid_config", LG__FILE, __LINE__,
                      "%zu more configuration messages were dropped", m->dropped);
}
