-- Model metadata as helm-summarize reads it (medhelm_core/model_metadata.py fills it).

CREATE TABLE IF NOT EXISTS model_metadata (
        model_pos INTEGER, name VARCHAR, display_name VARCHAR, description VARCHAR,
        creator_organization_name VARCHAR, access VARCHAR, release_date VARCHAR, num_parameters BIGINT);

CREATE TABLE IF NOT EXISTS model_deployments (name VARCHAR, model_name VARCHAR);
