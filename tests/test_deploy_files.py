"""deploy/: the Kubernetes files say what the code reads. The Dockerfile installs extras that exist
and starts the code location our definitions module makes; the Helm values name a storage URL our
parser takes, the environment variables the Dagster resource reads, and no secret."""
from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

from medhelm_dagster.resources import MEDHELM_ENV
from medhelm_core.storage import parse_storage

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"


def test_the_dockerfile_installs_existing_extras_and_serves_the_definitions():
    text = (DEPLOY / "Dockerfile").read_text()
    extras = set(tomllib.loads((DEPLOY.parent / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    [wanted] = re.findall(r'pip install "\.\[([a-z0-9,]+)\]"', text)
    assert {"ducklake", "postgres", "k8s"} <= set(wanted.split(",")) <= extras
    assert '"-m", "medhelm_dagster.definitions"' in text and "USER 1000" in text
    for var in re.findall(r"(MEDHELM_[A-Z_]+)=", text):
        assert var in MEDHELM_ENV.values(), var


def test_the_helm_values_name_a_shared_store_and_no_secret():
    values = yaml.safe_load((DEPLOY / "helm" / "values.yaml").read_text())
    assert values["runLauncher"]["type"] == "K8sRunLauncher"
    [deployment] = values["dagster-user-deployments"]["deployments"]
    assert deployment["dagsterApiGrpcArgs"] == ["-m", "medhelm_dagster.definitions"]
    env = {e["name"]: e["value"] for e in deployment["env"]}
    storage = parse_storage(env.pop("MEDHELM_STORAGE"))
    assert storage.kind == "ducklake" and storage.data_path.startswith("gs://") and storage.password is None
    assert set(env) <= set(MEDHELM_ENV.values())
    assert deployment["envSecrets"] == [{"name": "medhelm-secrets"}]
    text = (DEPLOY / "helm" / "values.yaml").read_text()
    assert not re.search(r"(API_KEY|PASSWORD)\s*[:=]\s*\S*[A-Za-z0-9]{12}", text)   # keys only in the Secret
