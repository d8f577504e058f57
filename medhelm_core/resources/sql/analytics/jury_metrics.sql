-- depends_on: target_runs
-- The metrics the target's runs score with an LLM jury (LLMJuryMetric's `metric_name`): their values
-- are 1-5 Likert means, which the macro-averages rescale to (x - 1) / 4.
CREATE OR REPLACE TABLE jury_metrics AS
SELECT DISTINCT spec ->> '$.args.metric_name' AS metric
FROM (SELECT unnest(CAST(run_spec -> '$.metric_specs' AS JSON[])) AS spec FROM target_runs)
-- (each ->> in parentheses: DuckDB 1.5 binds AND tighter than ->>)
WHERE (spec ->> 'class_name') LIKE '%.LLMJuryMetric' AND (spec ->> '$.args.metric_name') IS NOT NULL;
