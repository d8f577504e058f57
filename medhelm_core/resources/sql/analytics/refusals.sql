-- depends_on: target_runs, instance_completions, refusal_patterns, instance_stats, schema_run_groups
-- Per run of the target: how many of its instances' completions refuse (any completion matching a
-- pattern of refusal_patterns, case-insensitively: conf/refusal_patterns.yaml, starting with the
-- MedHELM authors' "sorry"), and its main metric (its group's main_name @ main_split, pooled over the
-- per-instance stats) with and without the refusing instances.
CREATE OR REPLACE TABLE refusals AS
WITH runs AS (
    SELECT DISTINCT ON (t.suite, t.run_name) t.suite, t.run_name, t.model_deployment, t.model,
           g.name AS benchmark, g.main_name, g.main_split
    FROM target_runs t
    JOIN schema_run_groups g ON list_contains(t.groups, g.name) AND g.main_name IS NOT NULL
    ORDER BY t.suite, t.run_name, list_position(t.groups, g.name)
),
flags AS (
    SELECT c.suite, c.run_name, c.instance_id,
           bool_or(EXISTS (SELECT 1 FROM refusal_patterns p
                           WHERE regexp_matches(coalesce(c.completion, ''), p.pattern, 'i'))) AS refused
    FROM instance_completions c
    JOIN runs r ON r.suite = c.suite AND r.run_name = c.run_name
    GROUP BY ALL
),
values AS (
    SELECT r.suite, r.run_name, s.instance_id, sum(s.sum) AS s, sum(s.count) AS c
    FROM runs r
    JOIN instance_stats s ON s.suite = r.suite AND s.run_name = r.run_name AND s.name = r.main_name
                         AND (r.main_split = '__all__' OR s.split = r.main_split) AND s.perturbation IS NULL
    GROUP BY ALL
),
per_run AS (
    SELECT r.suite, r.run_name,
           count(f.instance_id) AS n_instances,
           count(f.instance_id) FILTER (WHERE f.refused) AS n_refused,
           sum(v.s) / nullif(sum(v.c), 0) AS main_value,
           sum(v.s) FILTER (WHERE NOT coalesce(f.refused, false))
               / nullif(sum(v.c) FILTER (WHERE NOT coalesce(f.refused, false)), 0) AS main_value_without_refusals
    FROM runs r
    LEFT JOIN flags f ON f.suite = r.suite AND f.run_name = r.run_name
    LEFT JOIN values v ON v.suite = r.suite AND v.run_name = r.run_name AND v.instance_id = f.instance_id
    GROUP BY ALL
)
SELECT r.suite, r.run_name, r.benchmark, r.model_deployment, r.model, r.main_name AS metric, p.n_instances,
       p.n_refused, CAST(p.n_refused AS DOUBLE) / nullif(p.n_instances, 0) AS refusal_rate,
       p.main_value, p.main_value_without_refusals,
       p.main_value_without_refusals - p.main_value AS difference
FROM runs r JOIN per_run p USING (suite, run_name)
ORDER BY r.benchmark, r.suite, r.run_name;
