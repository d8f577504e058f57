-- depends_on: instance_annotation_entries, target_runs
-- Every judge's verdict in the target's jury annotations (HELM's annotation: {judge: {criterion:
-- {score, explanation}}, prompt_text}; the judges: the run spec's annotator_models), one row per
-- criterion; a judge whose entry is not an object (HELM stores None when the reply could not be
-- parsed or the call failed) is one row with `failed` and no criterion.
CREATE OR REPLACE TABLE judge_scores AS
WITH juries AS (   -- the judges of each run's LLM-jury annotators (annotator_models' keys)
    SELECT DISTINCT suite, run_name, unnest(json_keys(spec -> '$.args.annotator_models')) AS judge
    FROM (SELECT suite, run_name, unnest(CAST(coalesce(run_spec -> '$.annotators', '[]') AS JSON[])) AS spec
          FROM target_runs)
    WHERE json_type(spec -> '$.args.annotator_models') = 'OBJECT'
),
judges AS (   -- the entries of the run's judges: their verdicts
    SELECT x.suite, x.run_name, x.instance_id, x.annotator AS benchmark, j.judge, x.value AS verdict
    FROM instance_annotation_entries x JOIN juries j ON j.suite = x.suite AND j.run_name = x.run_name AND j.judge = x.entry
),
criteria AS (   -- a verdict that is not an object is one row with no criterion (one pass: no UNION of two reads)
    SELECT *, unnest(CASE WHEN json_type(verdict) = 'OBJECT' THEN map_entries(TRY_CAST(verdict AS MAP(VARCHAR, JSON)))
                          ELSE [NULL] END) AS c
    FROM judges
)
SELECT suite, run_name, instance_id, benchmark, judge, c.key AS criterion,
       TRY_CAST(c.value ->> 'score' AS DOUBLE) AS score, c IS NULL AS failed
FROM criteria;
