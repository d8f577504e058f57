-- depends_on: target_runs, run_stats
-- costs.json (HELM's write_cost_report): per model deployment, the sums of num_prompt_tokens,
-- num_completion_tokens, num_completions and num_requests over stats *without a split* (HELM
-- tests `not stat.name.split`; MedHELM stats all have one, so this is usually empty).
-- Order of deployments and fields = first appearance; sums folded in run order.
CREATE OR REPLACE TABLE cost_report AS
WITH s AS (
    SELECT r.model_deployment, s.name, r.run_id, s.ordinal, s.sum
    FROM target_runs r
    JOIN run_stats s ON s.suite = r.suite AND s.run_name = r.run_name
    WHERE s.name IN ('num_prompt_tokens', 'num_completion_tokens', 'num_completions', 'num_requests')
      AND (s.split IS NULL OR s.split = '')
)
SELECT model_deployment,
       min(min([run_id, ordinal])) OVER (PARTITION BY model_deployment) AS deployment_first,
       name, min([run_id, ordinal]) AS field_first,
       list_reduce(list(sum ORDER BY run_id, ordinal), lambda a, b: a + b) AS total
FROM s GROUP BY model_deployment, name;
