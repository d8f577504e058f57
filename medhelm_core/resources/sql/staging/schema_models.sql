-- depends_on: model_resolution, model_metadata
-- schema.json `models`: registered models used by the target's runs, in registry order
-- (HELM's get_model_field_dicts; unknown models are not listed).
CREATE OR REPLACE TABLE schema_models AS
SELECT m.model_pos, m.name, m.display_name, m.description, m.creator_organization_name, m.access,
       m.release_date, m.num_parameters
FROM model_metadata m
WHERE m.name IN (SELECT model_name FROM model_resolution WHERE registered)
ORDER BY m.model_pos;
