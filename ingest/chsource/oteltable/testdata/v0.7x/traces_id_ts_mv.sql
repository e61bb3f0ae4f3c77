
CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.{table}_trace_id_ts_mv
TO {db}.{table}_trace_id_ts
AS SELECT
TraceId,
min(Timestamp) as Start,
max(Timestamp) as End
FROM
{db}.{table}
WHERE TraceId!=''
GROUP BY TraceId;
