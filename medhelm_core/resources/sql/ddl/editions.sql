-- Comparing editions (medhelm_core.editions): two suites of the same run entries made under different
-- editions, side by side. Executed by medhelm_core.store after summarize_inputs.sql (views only).

-- Each pair of suites that share run names and were run under different editions.
CREATE OR REPLACE VIEW edition_pairs AS
WITH suite_runs AS (
    SELECT DISTINCT suite, coalesce(edition, 'helm-0.5.16') AS edition, run_name FROM runs)
SELECT a.suite AS suite_a, a.edition AS edition_a, b.suite AS suite_b, b.edition AS edition_b,
       count(*) AS shared_runs
FROM suite_runs a JOIN suite_runs b ON a.run_name = b.run_name AND a.edition < b.edition
GROUP BY ALL;

-- Per shared run and stat (stats.json's rows): the value under each edition, and whether it moved.
-- status: equal, different, only_a, only_b; volatile: wall-clock stats nobody reproduces.
CREATE OR REPLACE VIEW edition_diff AS
WITH stats AS (
    SELECT s.suite, s.run_name, s.name AS stat, s.split, s.sub_split, s.perturbation_name,
           s.computed_on, s.count, s.mean
    FROM run_stats s),
keys AS (
    SELECT DISTINCT p.suite_a, p.suite_b, s.run_name, s.stat, s.split, s.sub_split, s.perturbation_name,
           s.computed_on
    FROM edition_pairs p
    JOIN stats s ON s.suite IN (p.suite_a, p.suite_b)
    WHERE s.run_name IN (SELECT run_name FROM runs WHERE suite = p.suite_a)
      AND s.run_name IN (SELECT run_name FROM runs WHERE suite = p.suite_b))
SELECT p.suite_a, p.edition_a, p.suite_b, p.edition_b, k.run_name, k.stat, k.split, k.sub_split,
       k.perturbation_name, k.computed_on, a.mean AS value_a, b.mean AS value_b, b.mean - a.mean AS diff,
       a.count AS count_a, b.count AS count_b,
       CASE WHEN a.stat IS NULL THEN 'only_b' WHEN b.stat IS NULL THEN 'only_a'
            WHEN a.mean IS NOT DISTINCT FROM b.mean AND a.count = b.count THEN 'equal'
            ELSE 'different' END AS status,
       k.stat = 'inference_runtime' AS volatile
FROM keys k
JOIN edition_pairs p ON p.suite_a = k.suite_a AND p.suite_b = k.suite_b
LEFT JOIN stats a ON a.suite = k.suite_a AND a.run_name = k.run_name AND a.stat = k.stat
     AND a.split IS NOT DISTINCT FROM k.split AND a.sub_split IS NOT DISTINCT FROM k.sub_split
     AND a.perturbation_name IS NOT DISTINCT FROM k.perturbation_name
     AND a.computed_on IS NOT DISTINCT FROM k.computed_on
LEFT JOIN stats b ON b.suite = k.suite_b AND b.run_name = k.run_name AND b.stat = k.stat
     AND b.split IS NOT DISTINCT FROM k.split AND b.sub_split IS NOT DISTINCT FROM k.sub_split
     AND b.perturbation_name IS NOT DISTINCT FROM k.perturbation_name
     AND b.computed_on IS NOT DISTINCT FROM k.computed_on;
