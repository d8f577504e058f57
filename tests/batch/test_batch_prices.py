"""Batch prices and settings in the deployments settings (conf/deployments.yaml, medhelm_deployments.yaml)."""
from __future__ import annotations

import pytest

from medhelm_core.batch import AZURE, OPENAI, flavour_of
from medhelm_core.errors import MedhelmError
from medhelm_core.ratelimit import SettingsRegistry


def test_openai_deployments_are_half_price_in_batch():
    settings = SettingsRegistry.load()("openai/gpt-4o-mini-2024-07-18")
    assert settings.batch_discount == 0.5 and settings.batch is False
    assert settings.cost(1_000_000, 1_000_000) == pytest.approx(0.75)
    assert settings.batch_cost(1_000_000, 1_000_000) == pytest.approx(0.375)
    assert settings.batch_poll_seconds == 60.0 and settings.batch_max_requests is None


def test_a_deployment_without_its_own_discount_gets_the_vendors():
    # Azure deployments have names of their own: the shipped file cannot name them.
    settings = SettingsRegistry.load()("stanfordhealthcare/gpt-4o-2024-05-13")
    assert settings.batch_discount is None
    assert OPENAI.discount == AZURE.discount == 0.5
    assert settings.batch_cost(2_000_000, 0, AZURE.discount) == pytest.approx(5.0)
    assert settings.batch_cost(2_000_000, 0) == pytest.approx(10.0)  # no vendor cut known: the online price
    assert SettingsRegistry.load()("mockai/unpriced").batch_cost(10, 10, 0.5) is None


def test_local_settings_override_the_batch_keys(tmp_path):
    (tmp_path / "medhelm_deployments.yaml").write_text(
        "deployments:\n"
        "  openai/gpt-4o-mini-2024-07-18:\n    batch: true\n    batch_discount: 0.25\n    batch_max_requests: 1000\n"
        "    batch_poll_seconds: 5\n"
        "  my-azure/gpt-4o:\n    input_per_million: 2.5\n    output_per_million: 10\n    batch: true\n",
        encoding="utf-8")
    registry = SettingsRegistry.load(tmp_path)
    mini = registry("openai/gpt-4o-mini-2024-07-18")
    assert (mini.batch, mini.batch_discount, mini.batch_max_requests, mini.batch_poll_seconds) == (True, 0.25, 1000, 5)
    assert mini.batch_cost(1_000_000, 0) == pytest.approx(0.15 * 0.75)
    azure = registry("my-azure/gpt-4o")
    assert azure.batch and azure.batch_cost(1_000_000, 0, AZURE.discount) == pytest.approx(1.25)


@pytest.mark.parametrize("bad", ["batch_discount: 1.5", "batch_discount: -0.1", "batch_max_requests: 0",
                                 "batch_poll_seconds: 0", "batch_discont: 0.5"])
def test_bad_batch_settings_are_errors(tmp_path, bad):
    (tmp_path / "medhelm_deployments.yaml").write_text(f"defaults:\n  {bad}\n", encoding="utf-8")
    with pytest.raises(MedhelmError):
        SettingsRegistry.load(tmp_path)


def test_which_deployments_have_a_batch_api():
    from medhelm_core.helm_config.deployments import load_model_registry

    registry = load_model_registry(None)
    assert flavour_of(registry.get_deployment("openai/gpt-4o-mini-2024-07-18")) is OPENAI
    assert flavour_of(registry.get_deployment("stanfordhealthcare/gpt-4o-mini-2024-07-18")) is None  # the gateway
