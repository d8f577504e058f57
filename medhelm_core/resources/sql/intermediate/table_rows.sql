-- depends_on: table_row_runs, model_resolution
-- One row per coarse adapter spec (model_deployment, model) of each table, in HELM's order:
-- sorted by (position of model_deployment in the model registry, else -1; model_deployment),
-- stable on first appearance.  `run_spec_names` (model cell of scenario tables) lists the
-- row's visible runs in order, duplicates kept.
CREATE OR REPLACE TABLE table_rows AS
WITH r AS (
    SELECT table_id, model_deployment, model,
           min(entry_pos) AS first_entry,
           count(*) FILTER (WHERE visible) AS n_runs,
           coalesce(list(run_name ORDER BY entry_pos) FILTER (WHERE visible), []) AS run_spec_names
    FROM table_row_runs
    GROUP BY table_id, model_deployment, model
)
SELECT r.table_id,
       CAST(row_number() OVER (PARTITION BY r.table_id
                               ORDER BY m.sort_index, r.model_deployment, r.first_entry) - 1 AS INTEGER) AS row_pos,
       r.model_deployment, r.model,
       m.model_name,
       coalesce(nullif(m.display_name, ''), '???') AS display_name,
       m.sort_index, r.first_entry, r.n_runs, r.run_spec_names
FROM r
JOIN model_resolution m
  ON m.model IS NOT DISTINCT FROM r.model AND m.model_deployment IS NOT DISTINCT FROM r.model_deployment;
