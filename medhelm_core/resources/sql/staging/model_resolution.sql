-- depends_on: target_runs, model_metadata, model_deployments
-- HELM's get_model_metadata_for_adapter_spec per (model, model_deployment) pair: metadata of
-- `model`, else of the deployment's model_name, else of the deployment named like `model`,
-- else an "unknown model" whose display name is the raw model name.  sort_index is HELM's row
-- order key: the position of model_deployment in get_all_models() (model names!), else -1.
CREATE OR REPLACE TABLE model_resolution AS
WITH pairs AS (SELECT DISTINCT model, model_deployment FROM target_runs)
SELECT p.model, p.model_deployment,
    coalesce(m1.name, m2.name, m3.name, p.model) AS model_name,
    (m1.name IS NOT NULL OR m2.name IS NOT NULL OR m3.name IS NOT NULL) AS registered,
    CASE WHEN m1.name IS NOT NULL THEN m1.display_name
         WHEN m2.name IS NOT NULL THEN m2.display_name
         WHEN m3.name IS NOT NULL THEN m3.display_name
         ELSE p.model END AS display_name,
    coalesce(m1.model_pos, m2.model_pos, m3.model_pos) AS model_pos,
    coalesce(sd.model_pos, -1) AS sort_index
FROM pairs p
LEFT JOIN model_metadata m1 ON m1.name = p.model
LEFT JOIN model_deployments d2 ON d2.name = p.model_deployment
LEFT JOIN model_metadata m2 ON m2.name = d2.model_name
LEFT JOIN model_deployments d3 ON d3.name = p.model
LEFT JOIN model_metadata m3 ON m3.name = d3.model_name
LEFT JOIN model_metadata sd ON sd.name = p.model_deployment;
