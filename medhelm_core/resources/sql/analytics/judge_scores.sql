-- depends_on: instance_annotations, target_runs
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
judges AS (   -- only each judge's verdict is taken out of the annotation (it also holds the judge prompt)
    SELECT x.suite, x.run_name, x.instance_id, x.annotator AS benchmark, j.judge,
           x.annotation -> ('$."' || j.judge || '"') AS verdict
    FROM instance_annotations x
    JOIN juries j ON j.suite = x.suite AND j.run_name = x.run_name
    WHERE json_type(x.annotation) = 'OBJECT' AND json_exists(x.annotation, '$."' || j.judge || '"')
),
criteria AS (
    SELECT suite, run_name, instance_id, benchmark, judge, criterion,
           TRY_CAST(verdict -> ('$."' || criterion || '"') ->> 'score' AS DOUBLE) AS score
    FROM (SELECT *, unnest(json_keys(verdict)) AS criterion FROM judges WHERE json_type(verdict) = 'OBJECT')
)
SELECT suite, run_name, instance_id, benchmark, judge, criterion, score, false AS failed FROM criteria
UNION ALL
SELECT suite, run_name, instance_id, benchmark, judge, NULL, NULL, true
FROM judges WHERE json_type(verdict) IS DISTINCT FROM 'OBJECT';
