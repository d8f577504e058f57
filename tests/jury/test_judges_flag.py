"""`medhelm-run --judges`: stanford (HELM's default), public (the same judge models through the vendors'
public APIs, keys from their usual environment variables), `<preset>:<judge>,...` (fewer judges) or
a judges.yaml file. Unit tests of the presets, their resolution into run specs (equal to HELM's run
with the equivalent judges.yaml as jury_config_path, same names), the vendor key table, and the real
command (`--dry-run`, `--estimate-cost`, a run without keys) with no network."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import SecretStr

from medhelm_core.helm_config.deployments import (Deployment, VENDOR_KEY_ENV, load_model_registry, parse_credentials,
                                           resolve_api_key, vendor_key_env)
from medhelm_core.errors import MedhelmError
from medhelm_core.jury.judges import annotator_models_from_config
from medhelm_core.jury.presets import judges_of, parse_judges
from medhelm_core.resources import DEFAULT_JUDGES_CONFIG, PUBLIC_JUDGES_CONFIG

ROOT = Path(__file__).resolve().parents[2]
MEDHELM_RUN = ROOT / ".venv" / "bin" / "medhelm-run"
MIRROR = Path("/work/shared/data/public")
MODEL = "openai/gpt-4o-mini-2024-07-18"
JURY_ENTRIES = [f"medication_qa:model={MODEL}", f"med_dialog:subset=healthcaremagic,model={MODEL}",
                f"aci_bench:model={MODEL}", f"mtsamples_replicate:model={MODEL}", f"medi_qa:model={MODEL}"]
PUBLIC = {"gpt": ("openai/gpt-4o-2024-05-13", "openai/gpt-4o-2024-05-13"),
          "llama": ("meta/llama-3.3-70b-instruct-turbo", "together/llama-3.3-70b-instruct-turbo"),
          "claude": ("anthropic/claude-3-7-sonnet-20250219", "anthropic/claude-3-7-sonnet-20250219")}
KEY_VARS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "TOGETHER_API_KEY", "GOOGLE_API_KEY", "GEMINI_API_KEY",
            "HELM_CREDENTIALS", "MEDHELM_API_KEY_OPENAI", "MEDHELM_API_KEY_ANTHROPIC", "MEDHELM_API_KEY_TOGETHER")


# ------------------------------------------------------------------------------------------------
# The presets
# ------------------------------------------------------------------------------------------------
def test_stanford_is_helms_default_and_today():
    assert parse_judges("stanford") is None and parse_judges(None) is None
    assert parse_judges("stanford:gpt,llama,claude") is None  # all of them: the default itself
    assert judges_of(None) == annotator_models_from_config(None)
    assert {k: v["model_deployment"] for k, v in judges_of(None).items()} == {
        "gpt": "stanfordhealthcare/gpt-4o-2024-05-13", "llama": "stanfordhealthcare/llama-3.3-70b-instruct",
        "claude": "stanfordhealthcare/claude-3-7-sonnet-20250219"}


def test_public_is_the_same_three_judge_models_on_builtin_public_deployments():
    choice = parse_judges("public")
    assert choice.path == str(PUBLIC_JUDGES_CONFIG) and choice.names is None
    judges = judges_of(choice)
    assert {k: (v["model_name"], v["model_deployment"]) for k, v in judges.items()} == PUBLIC
    assert list(judges) == list(judges_of(None))  # same names, same order as HELM's judges.yaml
    registry = load_model_registry(None)  # HELM's built-in deployments only, no prod_env
    classes = {}
    for name, (model, deployment) in PUBLIC.items():
        dep = registry.get_deployment(deployment)
        assert dep.model_name == model, name  # judges.yaml's rule: model = the deployment's model_name
        classes[name] = dep.client_spec.class_name.rsplit(".", 1)[-1]
    assert classes == {"gpt": "OpenAIClient", "llama": "TogetherChatClient", "claude": "AnthropicMessagesClient"}
    # the stanford judges' models are these (Together serves Llama 3.3 70B Instruct as its -Turbo)
    stanford = {k: v["model_name"] for k, v in judges_of(None).items()}
    assert stanford["gpt"] == PUBLIC["gpt"][0] and stanford["claude"] == PUBLIC["claude"][0]
    assert PUBLIC["llama"][0].startswith(stanford["llama"])


def test_fewer_judges_keep_the_files_order():
    assert list(judges_of(parse_judges("public:claude,gpt"))) == ["gpt", "claude"]
    assert list(judges_of(parse_judges("public:gpt"))) == ["gpt"]
    assert list(judges_of(parse_judges(" Public:llama "))) == ["llama"]
    assert {v["model_deployment"] for v in judges_of(parse_judges("stanford:claude")).values()} == {
        "stanfordhealthcare/claude-3-7-sonnet-20250219"}


def test_a_judges_file(tmp_path):
    path = tmp_path / "my_judges.yaml"
    path.write_text('judges:\n  - {name: solo, model: demo/judge, model_deployment: demo/judge}\n')
    assert judges_of(parse_judges(str(path))) == {"solo": {"model_name": "demo/judge",
                                                           "model_deployment": "demo/judge"}}
    # the bundled files are judges files too
    assert judges_of(parse_judges(str(PUBLIC_JUDGES_CONFIG))) == judges_of(parse_judges("public"))
    assert judges_of(parse_judges(str(DEFAULT_JUDGES_CONFIG))) == judges_of(None)


@pytest.mark.parametrize("value, needles", [
    ("nope", ["--judges nope: no such judges file", "stanford, public"]),
    ("public:bogus", ["public has no judge 'bogus'", "its judges: gpt, llama, claude"]),
    ("public:", ["name the judges after the colon"]),
    ("public:gpt,,claude", ["name the judges after the colon"]),
    ("", ["--judges '': give stanford"]),
])
def test_bad_values_are_one_line(value, needles):
    with pytest.raises(MedhelmError) as e:
        parse_judges(value)
    message = str(e.value)
    assert "\n" not in message
    for needle in needles:
        assert needle in message, message


def test_bad_files_are_one_line(tmp_path):
    with pytest.raises(MedhelmError, match="is a folder"):
        parse_judges(str(tmp_path))
    empty = tmp_path / "empty.yaml"
    empty.write_text("judges: []\n")
    with pytest.raises(MedhelmError, match=r"^--judges file malformed: .*'judges' is empty$"):
        parse_judges(str(empty))
    partial = tmp_path / "partial.yaml"
    partial.write_text("judges:\n  - {name: x, model: a/b}\n")
    with pytest.raises(MedhelmError, match="lacks 'model_deployment'"):
        parse_judges(str(partial))


# ------------------------------------------------------------------------------------------------
# Resolution into run specs: HELM's run with the equivalent judges.yaml, same names
# ------------------------------------------------------------------------------------------------
def _specs(tmp_path, entries, judges="stanford"):
    from medhelm_core.run.entries import expand_selection
    from medhelm_core.run.workspace import Workspace
    from medhelm_core.selections import RunSelection

    ws = Workspace(tmp_path / "out", tmp_path / "prod_env")
    selection = RunSelection(conf_paths=[], run_entries=entries, suite="s", max_eval_instances=3, judges=judges)
    return [spec for _, spec in expand_selection(ws, selection)]


def _with_path(entry: str, path) -> str:
    name, args = entry.split(":", 1)
    return f"{name}:jury_config_path={path},{args}"


def test_public_equals_helms_run_with_the_public_judges_file(tmp_path):
    by_flag = _specs(tmp_path, JURY_ENTRIES, "public")
    by_file = _specs(tmp_path, [_with_path(e, PUBLIC_JUDGES_CONFIG) for e in JURY_ENTRIES])
    assert by_flag == by_file
    default = _specs(tmp_path, JURY_ENTRIES)
    assert [s["name"] for s in by_flag] == [s["name"] for s in default]  # run names stay HELM's
    assert by_flag != default
    for spec in by_flag:
        models = spec["annotators"][0]["args"]["annotator_models"]
        assert {k: (v["model_name"], v["model_deployment"]) for k, v in models.items()} == PUBLIC
        jury_metrics = [m for m in spec["metric_specs"] if "annotator_models" in m["args"]]
        assert jury_metrics and all(m["args"]["annotator_models"] == models for m in jury_metrics)


def test_stanford_flag_is_todays_run_spec(tmp_path):
    from medhelm_core.run.entries import expand_selection
    from medhelm_core.run.workspace import Workspace
    from medhelm_core.selections import RunSelection

    ws = Workspace(tmp_path / "out", tmp_path / "prod_env")
    old = RunSelection(conf_paths=[], run_entries=JURY_ENTRIES, suite="s", max_eval_instances=3)
    assert old.judges == "stanford"
    assert _specs(tmp_path, JURY_ENTRIES, "stanford") == [s for _, s in expand_selection(ws, old)]
    assert _specs(tmp_path, JURY_ENTRIES, "stanford") == _specs(
        tmp_path, [_with_path(e, DEFAULT_JUDGES_CONFIG) for e in JURY_ENTRIES])


def test_fewer_judges_and_a_file_equal_helms_run_with_that_file(tmp_path):
    two = tmp_path / "two.yaml"
    two.write_text("judges:\n" + "".join(
        f"  - {{name: {n}, model: {PUBLIC[n][0]}, model_deployment: {PUBLIC[n][1]}}}\n" for n in ("gpt", "claude")))
    by_flag = _specs(tmp_path, JURY_ENTRIES[:2], "public:claude,gpt")
    assert by_flag == _specs(tmp_path, [_with_path(e, two) for e in JURY_ENTRIES[:2]])
    assert by_flag == _specs(tmp_path, JURY_ENTRIES[:2], str(two))
    assert list(by_flag[0]["annotators"][0]["args"]["annotator_models"]) == ["gpt", "claude"]


def test_an_entrys_own_jury_config_path_wins(tmp_path):
    own = _with_path(JURY_ENTRIES[0], DEFAULT_JUDGES_CONFIG)
    specs = _specs(tmp_path, [own, JURY_ENTRIES[1]], "public")
    deployments = [{v["model_deployment"] for v in s["annotators"][0]["args"]["annotator_models"].values()}
                   for s in specs]
    assert deployments[0] == {v["model_deployment"] for v in judges_of(None).values()}  # the entry's own file
    assert deployments[1] == {d for _, d in PUBLIC.values()}  # the flag's


def test_the_choice_ends_with_the_expansion(tmp_path):
    _specs(tmp_path, JURY_ENTRIES[:1], "public:gpt")
    assert judges_of(None) == annotator_models_from_config(None)
    assert set(annotator_models_from_config(None)) == {"gpt", "llama", "claude"}


def test_dagster_config_carries_the_choice():
    from medhelm_dagster.pipeline import RunEntriesConfig

    assert RunEntriesConfig().judges == "stanford"
    assert RunEntriesConfig(judges="public:gpt").judges == "public:gpt"


# ------------------------------------------------------------------------------------------------
# Keys: the vendors' usual variables, each only for that vendor's own endpoint
# ------------------------------------------------------------------------------------------------
@pytest.fixture
def no_keys(monkeypatch):
    for var in KEY_VARS + ("GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_GENAI_USE_ENTERPRISE"):
        monkeypatch.delenv(var, raising=False)
    return monkeypatch


def _dep(name, cls, **args):
    return Deployment.model_validate({"name": name, "client_spec": {"class_name": cls, "args": args}})


TOGETHER_CHAT = "helm.clients.together_client.TogetherChatClient"
ANTHROPIC = "helm.clients.anthropic_client.AnthropicMessagesClient"
OPENAI = "helm.clients.openai_client.OpenAIClient"
GOOGLE = "helm.clients.google_genai_client.GoogleGenAIClient"
NO_CREDS = parse_credentials("", "prod_env/credentials.conf")


def test_vendor_key_table():
    assert VENDOR_KEY_ENV["together"].env == ("TOGETHER_API_KEY",)
    assert VENDOR_KEY_ENV["anthropic"].env == ("ANTHROPIC_API_KEY",)
    assert VENDOR_KEY_ENV["google"].env == VENDOR_KEY_ENV["gemini"].env == ("GOOGLE_API_KEY", "GEMINI_API_KEY")


def test_each_vendors_key_goes_to_its_own_endpoint(no_keys):
    env = {"OPENAI_API_KEY": "sk-openai", "TOGETHER_API_KEY": "tg", "ANTHROPIC_API_KEY": "ant",
           "GEMINI_API_KEY": "gem"}
    key = lambda dep, creds=NO_CREDS: resolve_api_key(dep, creds, env).get_secret_value()  # noqa: E731
    assert key(_dep("together/llama", TOGETHER_CHAT)) == "tg"
    assert key(_dep("anthropic/claude", ANTHROPIC)) == "ant"
    assert key(_dep("google/gemini", GOOGLE)) == "gem"
    assert key(_dep("openai/gpt", OPENAI)) == "sk-openai"
    assert key(_dep("together/llama", TOGETHER_CHAT, base_url="https://api.together.xyz/v1")) == "tg"
    assert key(_dep("together/llama", TOGETHER_CHAT, base_url="http://127.0.0.1:9/v1")) == "tg"  # loopback
    # never to another vendor's (or anyone else's) endpoint
    for dep in (_dep("together/llama", TOGETHER_CHAT, base_url="https://api.openai.com/v1"),
                _dep("anthropic/claude", ANTHROPIC, base_url="https://gateway.example.org/claude"),
                _dep("together/llama", "helm.clients.vllm_client.VLLMChatClient"),
                _dep("stanfordhealthcare/claude", ANTHROPIC)):
        assert vendor_key_env(dep, NO_CREDS, env) == (), dep.name
        with pytest.raises(MedhelmError):
            key(dep)
    # an OpenAI client of the together org talks to OpenAI: OpenAI's key, not Together's
    assert vendor_key_env(_dep("together/llama", OPENAI), NO_CREDS, env) == ("OPENAI_API_KEY",)
    # a Google deployment sent to Vertex AI takes no Gemini API key
    assert vendor_key_env(_dep("google/gemini", GOOGLE), NO_CREDS, {"GOOGLE_GENAI_USE_VERTEXAI": "true"}) == ()
    assert vendor_key_env(_dep("google/gemini", GOOGLE, genai_use_vertexai=True), NO_CREDS, env) == ()
    # credentials.conf still comes first
    creds = parse_credentials('togetherApiKey: "from-conf"', "prod_env/credentials.conf")
    assert key(_dep("together/llama", TOGETHER_CHAT), creds) == "from-conf"


def test_a_missing_key_names_the_variable(no_keys):
    with pytest.raises(MedhelmError) as e:
        resolve_api_key(_dep("together/llama", TOGETHER_CHAT), NO_CREDS, {})
    assert "$TOGETHER_API_KEY" in str(e.value) and "togetherApiKey" in str(e.value)
    assert isinstance(resolve_api_key(_dep("together/llama", TOGETHER_CHAT), NO_CREDS, {"TOGETHER_API_KEY": "k"}),
                      SecretStr)


def test_together_chat_judge_goes_to_together(no_keys):
    from medhelm_core.clients import client_for_deployment

    no_keys.setenv("TOGETHER_API_KEY", "tg-secret")
    dep = load_model_registry(None).get_deployment(PUBLIC["llama"][1])
    client = client_for_deployment(dep, NO_CREDS)
    assert client.endpoint == "https://api.together.xyz"
    assert client.together_model == "meta-llama/Llama-3.3-70B-Instruct-Turbo"
    assert "tg-secret" not in repr(client)


def test_the_public_llama_judge_sends_togethers_key_and_model(no_keys):
    """The judge request of the `llama` public judge, on a loopback stand-in for Together's API
    (`togetherBaseUrl`): $TOGETHER_API_KEY as the bearer token, Together's model id."""
    from medhelm_core import jury
    from medhelm_core.clients import client_for_deployment
    from medhelm_core.clients.together import remember_stop_tokens
    from tests.mock_server import ScriptedServer

    server = ScriptedServer(lambda prompt, n, state: (200, None, {}, 0))
    try:
        no_keys.setenv("TOGETHER_API_KEY", "tg-secret")
        no_keys.setenv("OPENAI_API_KEY", "sk-never-to-together")
        creds = parse_credentials(f'togetherBaseUrl: "{server.base_url}"', "prod_env/credentials.conf")
        # the stand-in serves no `GET /v1/models`: give HELM's default stop tokens of the model
        remember_stop_tokens(server.base_url, {"meta-llama/Llama-3.3-70B-Instruct-Turbo": ["<|eot_id|>"]})
        dep = load_model_registry(None).get_deployment(PUBLIC["llama"][1])
        info = judges_of(parse_judges("public"))["llama"]
        attempt = client_for_deployment(dep, creds).attempt(jury.judge_request(info, "Rate this answer."))
        assert attempt.kind == "ok", attempt
        assert server.auth == {"Bearer tg-secret"}
        assert server.models == ["meta-llama/Llama-3.3-70B-Instruct-Turbo"]
    finally:
        server.close()


def test_preflight_names_the_variables_of_every_judge_without_a_key(tmp_path, no_keys):
    from medhelm_core.run.preflight import _judge_deployment_problem, validate_runs
    from medhelm_core.run.workspace import Workspace

    ws = Workspace(tmp_path / "out", tmp_path / "prod_env")
    entries = [(type("E", (), {"location": None})(), s) for s in _specs(tmp_path, JURY_ENTRIES[:1], "public")]
    no_keys.setenv("OPENAI_API_KEY", "sk-test")
    with pytest.raises(MedhelmError) as e:
        validate_runs(ws, entries)
    message = str(e.value)
    assert "\n" not in message and message.startswith("the judges have no API key: set ")
    assert "$TOGETHER_API_KEY (llama: together/llama-3.3-70b-instruct-turbo)" in message
    assert "$ANTHROPIC_API_KEY (claude: anthropic/claude-3-7-sonnet-20250219)" in message
    assert "$OPENAI_API_KEY" not in message and "togetherApiKey, anthropicApiKey" in message
    assert message.endswith("or judge with fewer: --judges public:gpt")
    problem = _judge_deployment_problem(ws, PUBLIC["llama"][1], NO_CREDS)
    assert problem.startswith("has no API key: set $TOGETHER_API_KEY, or add togetherApiKey to ")


# ------------------------------------------------------------------------------------------------
# The real command, no network
# ------------------------------------------------------------------------------------------------
def _run(tmp_path, *args, keys: dict[str, str] | None = None):
    env = {k: v for k, v in os.environ.items() if k not in KEY_VARS}
    env.update(keys or {})
    env.update({"HF_HUB_OFFLINE": "1", "MEDHELM_OFFLINE": "1", "MEDHELM_DATA_MIRROR": str(MIRROR),
                "DAGSTER_HOME": str(tmp_path / "dagster_home"), "TIKTOKEN_CACHE_DIR": str(tmp_path / "tiktoken")})
    cmd = [str(MEDHELM_RUN), "--suite", "t", "--max-eval-instances", "2", "-o", str(tmp_path / "out"),
           "--local-path", str(tmp_path / "prod_env"), *args]
    return subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


def test_cli_dry_run_public_resolves_the_three_public_deployments(tmp_path):
    public = _run(tmp_path, "-r", JURY_ENTRIES[0], "--judges", "public", "--dry-run")
    default = _run(tmp_path, "-r", JURY_ENTRIES[0], "--dry-run")
    assert public.returncode == 0 == default.returncode, public.stderr + default.stderr
    assert public.stdout == default.stdout == "medication_qa:model=openai_gpt-4o-mini-2024-07-18\n"
    assert public.stderr.strip() == ("medhelm-run: judges: gpt (openai/gpt-4o-2024-05-13), llama "
                                     "(together/llama-3.3-70b-instruct-turbo), claude "
                                     "(anthropic/claude-3-7-sonnet-20250219)")
    assert "stanfordhealthcare/gpt-4o-2024-05-13" in default.stderr


def test_cli_fewer_judges_and_a_file(tmp_path):
    one = _run(tmp_path, "-r", JURY_ENTRIES[0], "--judges", "public:gpt", "--dry-run")
    assert one.returncode == 0 and one.stderr.strip() == "medhelm-run: judges: gpt (openai/gpt-4o-2024-05-13)"
    mine = tmp_path / "mine.yaml"
    mine.write_text("judges:\n  - {name: solo, model: openai/gpt-4o-2024-08-06, "
                    "model_deployment: openai/gpt-4o-2024-08-06}\n")
    file_run = _run(tmp_path, "-r", JURY_ENTRIES[0], "--judges", "mine.yaml", "--dry-run")  # relative: the cwd
    assert file_run.returncode == 0, file_run.stderr
    assert file_run.stderr.strip() == "medhelm-run: judges: solo (openai/gpt-4o-2024-08-06)"


@pytest.mark.parametrize("value", ["everyone", "public:gemini", "public:"])
def test_cli_bad_value_is_one_line(tmp_path, value):
    result = _run(tmp_path, "-r", JURY_ENTRIES[0], "--judges", value, "--dry-run")
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and not result.stdout and len(lines) == 1, result.stderr
    assert lines[0].startswith(f"medhelm-run: error: --judges {value}")


def test_cli_public_without_keys_names_the_variables_in_one_line(tmp_path):
    result = _run(tmp_path, "-r", JURY_ENTRIES[0], "--judges", "public", keys={"OPENAI_API_KEY": "sk-test"})
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    assert lines[0].startswith("medhelm-run: error: the judges have no API key: set $TOGETHER_API_KEY")
    assert "$ANTHROPIC_API_KEY" in lines[0] and "--judges public:gpt" in lines[0]
    assert not (tmp_path / "out" / "medhelm.duckdb").exists()  # stopped before anything was written


@pytest.mark.skipif(not MIRROR.is_dir(), reason="needs the public data mirror (/work/shared/data/public)")
def test_cli_estimate_shows_the_judges_share(tmp_path):
    result = _run(tmp_path, "-r", JURY_ENTRIES[0], "--judges", "public", "--estimate-cost")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    judge_rows = [line.split()[3] for line in out.split("By deployment:")[0].splitlines()
                  if line.startswith("+ jury")]
    assert judge_rows == [d for _, d in PUBLIC.values()]
    share = next(line for line in out.splitlines() if line.startswith("Judges' share: "))
    assert "% " in share or "%)" in share
    assert "4 of 6 new calls" not in share and "6 of 8 new calls, 3 judge deployments" in share
    assert "--judges public:gpt" in share
    one = _run(tmp_path, "-r", JURY_ENTRIES[0], "--judges", "public:gpt", "--estimate-cost")
    assert one.returncode == 0, one.stderr
    assert [line.split()[3] for line in one.stdout.splitlines() if line.startswith("+ jury")] == [PUBLIC["gpt"][1]]
    assert "2 of 4 new calls, 1 judge deployment" in one.stdout and "judge with fewer" not in one.stdout


def test_readme_says_the_judges_share_and_the_flag():
    readme = (ROOT / "README.md").read_text()
    assert "--judges public" in readme and "judges' share" in readme.lower()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
