-- How each service.version's hops answered claims and honoured those they
-- received (the rollout gate's claim checks, docs/ANALYSIS.md "Rollout
-- gate"), per root API, service and version (in operation): its failed
-- hops and those that answered a valid claim; the unclaimed answers its
-- retry-enabled calls received and those retried; its calls that
-- declined a retry of an unclaimed answer. No row in the buckets stored
-- before: the gate judges no claim check on them. Adding values to the
-- Enum rewrites nothing.
ALTER TABLE rollups MODIFY COLUMN stat Enum8('spans' = 0, 'traces' = 1, 'fragments' = 2,
    'traces_excess' = 3, 'spans_excess' = 4, 'traces_var' = 5, 'sampling_conflicts' = 6,
    'sampling_unusable' = 7, 'traces_split' = 8,
    'api_traces' = 10, 'api_failed' = 11, 'api_root_errors' = 12, 'api_remote_parent' = 13,
    'api_radius_sum' = 14, 'api_suppressed' = 15, 'api_hops' = 16, 'api_counterfactual' = 17,
    'api_misattributed' = 18, 'api_naive' = 19, 'api_eligible' = 20, 'api_fragments' = 21,
    'api_events' = 22, 'api_excess' = 23, 'api_var' = 24, 'api_var_failed' = 25,
    'api_var_root' = 26, 'api_var_radius' = 27, 'api_var_radius2' = 28,
    'radius' = 30, 'amp' = 31, 'api_var_mis2' = 32, 'api_var_mis_elig' = 33, 'api_var_elig2' = 34,
    'owner_events' = 40, 'owner_spurious' = 41, 'owner_traces' = 42, 'owner_suppressed' = 43,
    'owner_radius_sum' = 44, 'owner_radius' = 45, 'owner_amp' = 46,
    'svc_correct' = 50, 'svc_false_claim' = 51, 'svc_false_unclaim' = 52, 'svc_missing' = 53,
    'svc_invalid' = 54, 'svc_mismatches' = 55, 'svc_misattributed' = 56, 'svc_naive' = 57,
    'svc_eligible' = 58, 'svc_context_drops' = 59, 'svc_owned' = 60, 'svc_requests' = 61,
    'svc_virtual_requests' = 62, 'svc_counterfactual' = 63, 'svc_spurious' = 64,
    'node_requests' = 70, 'node_owned' = 71,
    'ver_traces' = 80, 'ver_failed' = 81, 'ver_root_errors' = 82, 'ver_radius_sum' = 83,
    'ver_radius' = 84, 'ver_amp' = 85, 'ver_excess' = 86, 'ver_var' = 87,
    'api_tail_clean_16' = 90, 'api_tail_clean_2' = 91, 'api_tail_clean' = 92,
    'api_tail_failed_2' = 93, 'api_tail_failed' = 94,
    'ver_failed_hops' = 100, 'ver_claimed_hops' = 101, 'ver_unclaimed_answers' = 102,
    'ver_retried_unclaimed' = 103, 'ver_suppressed' = 104);
