-- depends_on: target_runs
-- One row per (run, entry of run_spec.groups): HELM's group_runs() appends a run to
-- group_adapter_to_runs[group][adapter_spec] and group_scenario_adapter_to_runs[group][scenario][adapter]
-- once per entry.  The *_first columns are the first run_id of the key inside the group, i.e. the
-- insertion order of those dicts, which fixes the order runs are merged in (float summation order).
CREATE OR REPLACE TABLE target_run_groups AS
WITH m AS (
    SELECT run_id, run_name, model, model_deployment, method, adapter_key, scenario_key, scenario_args_str,
           unnest(groups) AS group_name,
           unnest(generate_series(1, len(groups))) AS member_pos
    FROM target_runs
    WHERE len(groups) > 0
)
SELECT *,
    min(run_id) OVER (PARTITION BY group_name, adapter_key) AS adapter_first,
    min(run_id) OVER (PARTITION BY group_name, scenario_key) AS scenario_first,
    min(run_id) OVER (PARTITION BY group_name, scenario_key, adapter_key) AS scenario_adapter_first
FROM m;
