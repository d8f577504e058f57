-- depends_on: headline_cells, row_aggregates, target_runs, run_stats, deployment_prices
-- Per model of the headline table: its mean win rate beside what its runs in the target cost, for
-- the cost-vs-score plot.  Tokens: the sums of the runs' num_prompt_tokens and num_completion_tokens
-- stats (every split, unperturbed), i.e. the model's own calls (not the jury's); dollars at the
-- deployment's price (deployment_prices), NULL where no price is known (then plot tokens).
CREATE OR REPLACE TABLE cost_vs_score AS
WITH models AS (
    SELECT DISTINCT h.table_id, h.row_pos, h.model_name AS model, h.model_deployment, h.model AS model_key
    FROM headline_cells h
),
tokens AS (
    SELECT m.row_pos, count(DISTINCT (t.suite, t.run_name)) AS n_runs,
           sum(s.sum) FILTER (WHERE s.name = 'num_prompt_tokens') AS prompt_tokens,
           sum(s.sum) FILTER (WHERE s.name = 'num_completion_tokens') AS completion_tokens
    FROM models m
    JOIN target_runs t ON t.model_deployment IS NOT DISTINCT FROM m.model_deployment
                      AND t.model IS NOT DISTINCT FROM m.model_key
    JOIN run_stats s ON s.suite = t.suite AND s.run_name = t.run_name
    WHERE s.name IN ('num_prompt_tokens', 'num_completion_tokens') AND s.perturbation IS NULL
    GROUP BY ALL
)
SELECT m.row_pos, m.model, m.model_deployment, a.mean_win_rate AS win_rate, coalesce(k.n_runs, 0) AS n_runs,
       k.prompt_tokens, k.completion_tokens, p.input_per_million, p.output_per_million,
       (k.prompt_tokens * p.input_per_million + k.completion_tokens * p.output_per_million) / 1e6 AS cost_usd
FROM models m
LEFT JOIN row_aggregates a ON a.table_id = m.table_id AND a.row_pos = m.row_pos
LEFT JOIN tokens k ON k.row_pos = m.row_pos
LEFT JOIN deployment_prices p ON p.model_deployment = m.model_deployment
ORDER BY m.row_pos;
