-- depends_on: table_columns, target_runs, run_stats
-- For every run and every metric matcher used by a column: the run's stat as HELM's
-- get_unique_stat_by_matcher returns it.
--   match: same name; same split unless the matcher split is '__all__'; same sub_split only if the
--          matcher sets one; same perturbation name (both absent for plain metrics), and a
--          perturbed stat only if computed_on = 'worst';
--   fallback: a 'quasi_exact_match' matcher with no match in the run uses 'exact_match';
--   pooling: without a matcher sub_split all matches (sub-splits) are merged in stats.json order
--          (sum folded left to right, counts added), with one the stat is taken as is.
CREATE OR REPLACE TABLE run_matcher_stats AS
WITH matchers AS (
    SELECT DISTINCT matcher_name, matcher_split, matcher_sub_split, matcher_perturbation FROM table_columns
),
lookups AS (   -- the matcher's own name, plus exact_match as the quasi_exact_match fallback
    SELECT *, matcher_name AS lookup_name FROM matchers
    UNION ALL
    SELECT *, 'exact_match' FROM matchers WHERE matcher_name = 'quasi_exact_match'
),
hits AS (
    SELECT r.run_id, m.matcher_name, m.matcher_split, m.matcher_sub_split, m.matcher_perturbation,
           s.name AS stat_name, s.ordinal, s.count, s.sum, s.min, s.max, s.mean
    FROM target_runs r
    JOIN run_stats s ON s.suite = r.suite AND s.run_name = r.run_name
    JOIN lookups m ON s.name = m.lookup_name
    WHERE (m.matcher_split = '__all__' OR s.split = m.matcher_split)
      AND (m.matcher_sub_split IS NULL OR s.sub_split = m.matcher_sub_split)
      AND s.perturbation_name IS NOT DISTINCT FROM m.matcher_perturbation
      AND (s.perturbation IS NULL OR s.computed_on = 'worst')
),
chosen AS (
    SELECT *, bool_or(stat_name = matcher_name)
                  OVER (PARTITION BY run_id, matcher_name, matcher_split, matcher_sub_split, matcher_perturbation)
              AS has_primary
    FROM hits
)
SELECT run_id, matcher_name, matcher_split, matcher_sub_split, matcher_perturbation,
       matcher_sub_split IS NULL AS pooled,
       count(*) AS n_stats,
       sum(count) AS stat_count,
       list_reduce(list(sum ORDER BY ordinal), lambda a, b: a + b) AS stat_sum,
       min(min) AS stat_min,
       max(max) AS stat_max,
       arg_min_null(mean, ordinal) AS first_mean
FROM chosen
WHERE stat_name = matcher_name OR NOT has_primary
GROUP BY ALL;
