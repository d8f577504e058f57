-- depends_on: judge_scores
-- Per jury benchmark and judge: how many of its verdicts could not be used (no parsable verdict, or
-- a criterion without a numeric score) out of all it was asked for.
CREATE OR REPLACE TABLE judge_failures AS
WITH verdicts AS (
    SELECT benchmark, judge, suite, run_name, instance_id,
           bool_or(failed OR score IS NULL) AS failed
    FROM judge_scores GROUP BY ALL
)
SELECT benchmark, judge, count(*) AS n_verdicts, count(*) FILTER (WHERE failed) AS n_failed,
       count(*) FILTER (WHERE failed) / count(*) AS failure_rate
FROM verdicts GROUP BY ALL ORDER BY benchmark, judge;
