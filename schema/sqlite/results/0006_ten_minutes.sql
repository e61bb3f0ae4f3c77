-- A ten-minute tier (tier 3) between minutes (0) and hours (1): a range
-- that does not start or end on the hour reads at most a few ten-minute
-- buckets and minutes at either end instead of up to an hour of minutes.
-- Filled from the minute tier for data stored before it existed; from
-- here on every batch's deltas update it with the others.

INSERT INTO rollup_totals (tier, bucket, spans, traces, fragments)
    SELECT 3, bucket / 10, sum(spans), sum(traces), sum(fragments)
    FROM rollup_totals WHERE tier = 0 GROUP BY bucket / 10;
INSERT INTO rollup_api (tier, bucket, api, traces, failed, root_errors, remote_parent, radius_sum, suppressed, hops, counterfactual, misattributed, naive, eligible, fragments, events)
    SELECT 3, bucket / 10, api, sum(traces), sum(failed), sum(root_errors), sum(remote_parent), sum(radius_sum), sum(suppressed), sum(hops), sum(counterfactual), sum(misattributed), sum(naive), sum(eligible), sum(fragments), sum(events)
    FROM rollup_api WHERE tier = 0 GROUP BY bucket / 10, api;
INSERT INTO rollup_radius (tier, bucket, api, radius, n)
    SELECT 3, bucket / 10, api, radius, sum(n)
    FROM rollup_radius WHERE tier = 0 GROUP BY bucket / 10, api, radius;
INSERT INTO rollup_amp (tier, bucket, api, amp, n)
    SELECT 3, bucket / 10, api, amp, sum(n)
    FROM rollup_amp WHERE tier = 0 GROUP BY bucket / 10, api, amp;
INSERT INTO rollup_owner (tier, bucket, api, service, operation, events, spurious, traces, suppressed, radius_sum)
    SELECT 3, bucket / 10, api, service, operation, sum(events), sum(spurious), sum(traces), sum(suppressed), sum(radius_sum)
    FROM rollup_owner WHERE tier = 0 GROUP BY bucket / 10, api, service, operation;
INSERT INTO rollup_service (tier, bucket, service, correct, false_claim, false_unclaim, missing, invalid, mismatches, misattributed, naive, eligible, context_drops, owned, requests, virtual_requests, counterfactual, spurious)
    SELECT 3, bucket / 10, service, sum(correct), sum(false_claim), sum(false_unclaim), sum(missing), sum(invalid), sum(mismatches), sum(misattributed), sum(naive), sum(eligible), sum(context_drops), sum(owned), sum(requests), sum(virtual_requests), sum(counterfactual), sum(spurious)
    FROM rollup_service WHERE tier = 0 GROUP BY bucket / 10, service;
INSERT INTO rollup_node (tier, bucket, service, operation, requests, owned)
    SELECT 3, bucket / 10, service, operation, sum(requests), sum(owned)
    FROM rollup_node WHERE tier = 0 GROUP BY bucket / 10, service, operation;
INSERT INTO rollup_owner_radius (tier, bucket, api, service, operation, radius, n)
    SELECT 3, bucket / 10, api, service, operation, radius, sum(n)
    FROM rollup_owner_radius WHERE tier = 0 GROUP BY bucket / 10, api, service, operation, radius;
INSERT INTO rollup_owner_amp (tier, bucket, api, service, operation, amp, n)
    SELECT 3, bucket / 10, api, service, operation, amp, sum(n)
    FROM rollup_owner_amp WHERE tier = 0 GROUP BY bucket / 10, api, service, operation, amp;
INSERT INTO rollup_version (tier, bucket, api, service, version, traces, failed, root_errors, radius_sum)
    SELECT 3, bucket / 10, api, service, version, sum(traces), sum(failed), sum(root_errors), sum(radius_sum)
    FROM rollup_version WHERE tier = 0 GROUP BY bucket / 10, api, service, version;
INSERT INTO rollup_version_radius (tier, bucket, api, service, version, radius, n)
    SELECT 3, bucket / 10, api, service, version, radius, sum(n)
    FROM rollup_version_radius WHERE tier = 0 GROUP BY bucket / 10, api, service, version, radius;
INSERT INTO rollup_version_amp (tier, bucket, api, service, version, amp, n)
    SELECT 3, bucket / 10, api, service, version, amp, sum(n)
    FROM rollup_version_amp WHERE tier = 0 GROUP BY bucket / 10, api, service, version, amp;
