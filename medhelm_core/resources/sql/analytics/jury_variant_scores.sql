-- depends_on: target_runs, runs, judge_scores, instance_annotation_entries, rejudged_runs
-- Judge ablation without new calls: each jury-scored run's score as if its LLM jury held only some
-- of its judges. A run's jury is its LLMJuryMetric spec (metric_name, scenario_name, annotator_models,
-- default_score: 0.0 when absent, as in HELM). Its variants:
--   all            every judge of annotator_models (the run's own jury stat);
--   without:<j>    every judge but j, and only:<j>  j alone (juries of two judges or more).
-- HELM's per-instance score (LLMJuryMetric; medhelm_core/jury/metric.py) under a variant: the mean of
-- every criterion score of every judge of the variant whose verdict is an object (HELM's None gives
-- none; criteria of all judges weigh alike), each score read with int() (truncated) or, under
-- the medhelm-0.8.0 edition (its jury_score_type), float(); default_score when none of them scored.
-- The run's evaluated instances: those with the jury's annotation (an empty answer's annotation has no
-- verdict and scores default_score). value = the mean of the per-instance scores (HELM's run stat
-- when the run's instances are all of one split, as MedHELM's jury scenarios are).
-- A re-judged run (rejudged_runs: the same completions judged again by another jury, in the target
-- `<original target>@<jury>`) also has the variant `jury:<original target>`: the original jury's
-- judges (its annotator_models), scored the same way from the original run's verdicts (its suite's
-- annotation entries), so that the stability table and the leaderboard compare the two juries.
CREATE OR REPLACE TABLE jury_variant_scores AS
WITH specs AS (
    SELECT DISTINCT target, suite, run_name, model_deployment, model,
           unnest(CAST(coalesce(run_spec -> '$.metric_specs', '[]') AS JSON[])) AS spec
    FROM target_runs
),
juries AS (   -- (each ->> in parentheses: DuckDB binds AND tighter than ->>)
    SELECT s.target, s.suite, s.run_name, s.model_deployment, s.model,
           (s.spec ->> '$.args.scenario_name') AS benchmark, (s.spec ->> '$.args.metric_name') AS metric,
           json_keys(s.spec -> '$.args.annotator_models') AS judges,
           coalesce(TRY_CAST((s.spec ->> '$.args.default_score') AS DOUBLE), 0.0) AS default_score,
           -- the editions' jury_score_type (medhelm_core/resources/settings/editions/): float only in medhelm-0.8.0
           coalesce(any_value(r.edition), 'helm-0.5.16') = 'medhelm-0.8.0' AS float_scores
    FROM specs s
    LEFT JOIN runs r ON r.suite = s.suite AND r.run_name = s.run_name
    WHERE (s.spec ->> 'class_name') LIKE '%.LLMJuryMetric'
      AND json_type(s.spec -> '$.args.annotator_models') = 'OBJECT'
    GROUP BY ALL
),
originals AS (   -- a re-judged run's original: its suite and jury
    SELECT j.*, o.original_target, o.original_suite, json_keys(o.original_judges) AS original_judges
    FROM juries j JOIN rejudged_runs o ON o.suite = j.suite AND o.run_name = j.run_name
    WHERE json_type(o.original_judges) = 'OBJECT'
),
variants AS (    -- scored_suite: whose verdicts score it; original: read from the original's entries
    SELECT *, 'all' AS variant, judges AS kept, suite AS scored_suite, false AS original FROM juries
    UNION ALL
    SELECT * EXCLUDE (judge), 'without:' || judge, list_filter(judges, lambda j: j <> judge), suite, false
    FROM (SELECT *, unnest(judges) AS judge FROM juries WHERE len(judges) > 1)
    UNION ALL
    SELECT * EXCLUDE (judge), 'only:' || judge, [judge], suite, false
    FROM (SELECT *, unnest(judges) AS judge FROM juries WHERE len(judges) > 1)
    UNION ALL
    SELECT * EXCLUDE (original_target, original_suite, original_judges), 'jury:' || original_target,
           original_judges, original_suite, true
    FROM originals
),
instances AS (   -- the instances the jury annotated, with or without a verdict
    SELECT DISTINCT suite, run_name, annotator AS benchmark, instance_id FROM instance_annotation_entries
),
original_verdicts AS (   -- the original jury's verdicts (the target's own: judge_scores)
    SELECT e.suite, e.run_name, e.annotator AS benchmark, e.instance_id, e.entry AS judge,
           unnest(map_entries(TRY_CAST(e.value AS MAP(VARCHAR, JSON)))) AS c
    FROM instance_annotation_entries e
    JOIN (SELECT DISTINCT original_suite, run_name, original_judges FROM originals) o
      ON o.original_suite = e.suite AND o.run_name = e.run_name AND list_contains(o.original_judges, e.entry)
    WHERE json_type(e.value) = 'OBJECT'
),
scores AS (      -- one row per criterion score of a judge's verdict
    SELECT suite, run_name, benchmark, instance_id, judge, score, false AS original
    FROM judge_scores WHERE NOT failed AND score IS NOT NULL
    UNION ALL
    SELECT suite, run_name, benchmark, instance_id, judge, TRY_CAST(c.value ->> 'score' AS DOUBLE), true
    FROM original_verdicts WHERE TRY_CAST(c.value ->> 'score' AS DOUBLE) IS NOT NULL
),
per_instance AS (
    SELECT v.target, v.suite, v.run_name, v.model_deployment, v.model, v.benchmark, v.metric, v.variant,
           v.kept AS judges, v.default_score, i.instance_id,
           sum(CASE WHEN v.float_scores THEN s.score ELSE trunc(s.score) END) AS total, count(s.score) AS n
    FROM variants v
    JOIN instances i ON i.suite = v.scored_suite AND i.run_name = v.run_name AND i.benchmark = v.benchmark
    LEFT JOIN scores s ON s.suite = i.suite AND s.run_name = i.run_name AND s.benchmark = i.benchmark
                      AND s.instance_id = i.instance_id AND s.original = v.original AND list_contains(v.kept, s.judge)
    GROUP BY ALL
),
scored AS (
    SELECT *, CASE WHEN n > 0 THEN total / CAST(n AS DOUBLE) ELSE default_score END AS score FROM per_instance
)
SELECT target, suite, run_name, model_deployment, model, benchmark, metric, variant, judges,
       count(*) AS n_instances, count(*) FILTER (WHERE n = 0) AS n_defaulted,
       fsum(score) AS score_sum, fsum(score) / count(*) AS value
FROM scored
GROUP BY ALL
ORDER BY suite, run_name, benchmark, metric, variant;
