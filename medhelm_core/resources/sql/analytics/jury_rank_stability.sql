-- depends_on: jury_variant_scores
-- How a jury variant (jury_variant_scores) reorders the models on each jury benchmark (the jury
-- metric's scenario_name). A model's score on a benchmark under a variant: Σ score_sum / Σ n_instances
-- over its runs of the benchmark, rounded to 12 decimals so that equal scores tie whatever order
-- their sums were added in. Over the pairs of models scored under both `all` and the variant:
--   kendall_tau     Kendall's τ-b between the models' `all` scores and their variant scores (SciPy's
--                   default): (C - D) / sqrt(n0 - n1) / sqrt(n0 - n2), C and D the concordant and
--                   discordant pairs, n0 all pairs, n1 and n2 those tied under `all` and under the
--                   variant; NULL when fewer than two models, or either side ties every pair;
--   adjacent_swaps  D, the pairs the variant orders the other way round: the number of adjacent
--                   swaps that turn one ranking into the other when neither has ties;
--   top_k_overlap   [k = 1, 2, 3]: how many models are in the top k under both, the top k being the
--                   models ranked k or better (rank = 1 + the models scored strictly higher; ties
--                   share a rank, so a top k may hold more than k models).
-- `all` itself has a row: τ-b 1 (NULL when every model ties), no swaps, full overlaps. In a re-judged
-- target (`<target>@<jury>`), `all` is the new jury and `jury:<target>` the original one.
CREATE OR REPLACE TABLE jury_rank_stability AS
WITH scores AS (
    SELECT target, benchmark, variant, model_deployment, model,
           round(sum(score_sum) / sum(n_instances), 12) AS score
    FROM jury_variant_scores
    GROUP BY ALL
),
paired AS (   -- each model's `all` score beside its score under the variant, and both ranks
    SELECT v.target, v.benchmark, v.variant, v.model_deployment, v.model, a.score AS x, v.score AS y,
           rank() OVER (PARTITION BY v.target, v.benchmark, v.variant ORDER BY a.score DESC) AS rank_x,
           rank() OVER (PARTITION BY v.target, v.benchmark, v.variant ORDER BY v.score DESC) AS rank_y,
           row_number() OVER (PARTITION BY v.target, v.benchmark, v.variant ORDER BY v.model_deployment, v.model) AS i
    FROM scores v
    JOIN scores a ON a.target = v.target AND a.benchmark = v.benchmark AND a.variant = 'all'
                 AND a.model_deployment IS NOT DISTINCT FROM v.model_deployment AND a.model IS NOT DISTINCT FROM v.model
),
pairs AS (
    SELECT p.target, p.benchmark, p.variant, count(*) AS n0,
           count(*) FILTER (WHERE p.x = q.x) AS n1,
           count(*) FILTER (WHERE p.y = q.y) AS n2,
           count(*) FILTER (WHERE sign(p.x - q.x) * sign(p.y - q.y) > 0) AS concordant,
           count(*) FILTER (WHERE sign(p.x - q.x) * sign(p.y - q.y) < 0) AS discordant
    FROM paired p
    JOIN paired q ON q.target = p.target AND q.benchmark = p.benchmark AND q.variant = p.variant
                 AND q.i > p.i
    GROUP BY ALL
),
tops AS (
    SELECT target, benchmark, variant, count(*) AS n_models,
           [count(*) FILTER (WHERE rank_x <= 1 AND rank_y <= 1), count(*) FILTER (WHERE rank_x <= 2 AND rank_y <= 2),
            count(*) FILTER (WHERE rank_x <= 3 AND rank_y <= 3)] AS top_k_overlap
    FROM paired GROUP BY ALL
)
SELECT o.target, o.benchmark, o.variant, o.n_models,
       CASE WHEN p.n0 > p.n1 AND p.n0 > p.n2
            THEN least(1.0, greatest(-1.0, (p.concordant - p.discordant) / sqrt(p.n0 - p.n1) / sqrt(p.n0 - p.n2)))
       END AS kendall_tau,
       coalesce(p.discordant, 0) AS adjacent_swaps, o.top_k_overlap
FROM tops o
LEFT JOIN pairs p ON p.target = o.target AND p.benchmark = o.benchmark AND p.variant = o.variant
ORDER BY o.target, o.benchmark, o.variant;
