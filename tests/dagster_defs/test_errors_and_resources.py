"""What a failure's metadata names, and how the resources take their settings (no environment read at
import: plain defaults, or dg.EnvVar bindings resolved when a run starts)."""
import dagster as dg
import pytest

from medhelm_dagster.errors import error_metadata, user_errors
from medhelm_dagster.resources import MedhelmResource
from medhelm_core.errors import MedhelmError


@pytest.mark.parametrize("message,expected", [
    ("conf/example.conf:4: unknown model deployment 'demo/model-a' (searched: prod_env/model_deployments.yaml)",
     {"file": "conf/example.conf:4", "deployment": "demo/model-a"}),
    ("run entry 'pubmed_qa:model=openai/gpt2,model_deployment=huggingface/gpt2': deployment 'huggingface/gpt2': "
     "tokenizer huggingface/gpt2: not cached", {"entry": "pubmed_qa:model=openai/gpt2,model_deployment=huggingface/gpt2",
                                                "deployment": "huggingface/gpt2"}),
    ("examples/private/notes.csv: missing column 'text'", {"file": "examples/private/notes.csv"}),
    ("--budget needs a price", {}),
])
def test_a_failure_names_what_its_line_names(message, expected):
    assert error_metadata(message) == expected


def test_user_errors_fail_with_our_line_and_its_metadata():
    @user_errors
    def asset_body():
        raise MedhelmError("conf/x.conf:2: unknown model deployment 'a/b' (searched: none)")

    with pytest.raises(dg.Failure) as failure:
        asset_body()
    assert failure.value.description == "medhelm: conf/x.conf:2: unknown model deployment 'a/b' (searched: none)"
    assert {k: v.value for k, v in failure.value.metadata.items()} == {"file": "conf/x.conf:2", "deployment": "a/b"}


def test_settings_are_defaults_or_env_bindings_read_at_launch(monkeypatch):
    plain = MedhelmResource.from_env({})
    assert (plain.output_path, plain.local_path, plain.num_threads, plain.benchmark_paths) == \
        ("benchmark_output", "prod_env", 8, [])
    bound = MedhelmResource.from_env({"MEDHELM_LOCAL_PATH": "examples/prod_env", "MEDHELM_NUM_THREADS": "3"})
    assert bound.local_path == dg.EnvVar("MEDHELM_LOCAL_PATH") and bound.num_threads == dg.EnvVar.int("MEDHELM_NUM_THREADS")
    monkeypatch.setenv("MEDHELM_LOCAL_PATH", "somewhere/else")  # a run started now reads the value of now
    monkeypatch.setenv("MEDHELM_NUM_THREADS", "5")
    resolved = bound.process_config_and_initialize()
    assert (resolved.local_path, resolved.num_threads, resolved.output_path) == ("somewhere/else", 5, "benchmark_output")
