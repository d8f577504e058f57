-- depends_on: table_cells, table_columns, table_rows, target_runs, instance_stats, schema_run_groups
-- The per-instance values behind each benchmark cell: for every model row and benchmark (a run group
-- whose column shows its main metric, main_name @ main_split), each instance's stat pooled over the
-- cell's runs (sum and count of the matching per-instance stats: same name, same split unless
-- '__all__', the matcher's sub-split if it has one, unperturbed; 'quasi_exact_match' falls back to
-- 'exact_match' in a run without it, as HELM's matcher does).  mean(s)/mean(c) over a cell's instances
-- is the cell's value when each run has one train trial.
CREATE OR REPLACE TABLE cell_instances AS
WITH cells AS (
    SELECT DISTINCT k.column_group AS benchmark, r.model_deployment, r.model, r.display_name AS model_name,
           k.matcher_name, k.matcher_split, k.matcher_sub_split, c.run_spec_names
    FROM table_cells c
    JOIN table_columns k USING (table_id, col_idx)
    JOIN table_rows r USING (table_id, row_pos)
    JOIN schema_run_groups g ON g.name = k.column_group AND g.main_name = k.matcher_name
                            AND g.main_split = k.matcher_split
    WHERE c.value IS NOT NULL AND k.matcher_perturbation IS NULL
),
cell_runs AS (
    SELECT DISTINCT c.*, t.suite, t.run_name
    FROM (SELECT *, unnest(run_spec_names) AS run FROM cells) c
    JOIN target_runs t ON t.run_name = c.run
),
hits AS (
    SELECT c.benchmark, c.model_deployment, c.model, c.model_name, c.suite, c.run_name, c.matcher_name,
           s.name, s.instance_id, s.sum, s.count
    FROM cell_runs c
    JOIN instance_stats s ON s.suite = c.suite AND s.run_name = c.run_name
    WHERE (s.name = c.matcher_name OR (c.matcher_name = 'quasi_exact_match' AND s.name = 'exact_match'))
      AND (c.matcher_split = '__all__' OR s.split = c.matcher_split)
      AND (c.matcher_sub_split IS NULL OR s.sub_split = c.matcher_sub_split)
      AND s.perturbation IS NULL
),
chosen AS (
    SELECT *, bool_or(name = matcher_name) OVER (PARTITION BY benchmark, model_deployment, model, suite, run_name)
              AS has_primary
    FROM hits
)
SELECT benchmark, model_deployment, model, any_value(model_name) AS model_name, instance_id,
       sum(sum) AS s, sum(count) AS c
FROM chosen
WHERE name = matcher_name OR NOT has_primary
GROUP BY benchmark, model_deployment, model, instance_id
ORDER BY benchmark, model_deployment, model, instance_id;
