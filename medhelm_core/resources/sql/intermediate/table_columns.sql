-- depends_on: group_tables, column_sets
-- Value columns of each table (after the Model column and any aggregate columns), in order.
CREATE OR REPLACE TABLE table_columns AS
SELECT t.table_id, c.col_idx, c.column_group, c.matcher_name, c.matcher_split,
       coalesce(t.set_sub_split, c.matcher_sub_split) AS matcher_sub_split, c.matcher_perturbation,
       c.header_value, c.header_description, c.lower_is_better,
       c.metadata_metric, c.metadata_run_group, c.metadata_perturbation
FROM group_tables t
JOIN column_sets c
  ON c.set_kind = t.set_kind AND c.set_owner = t.set_owner
 AND c.set_metric_group IS NOT DISTINCT FROM t.set_metric_group
 AND c.set_sub_split IS NOT DISTINCT FROM t.set_sub_split;
