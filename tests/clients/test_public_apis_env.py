"""examples/prod_env_public_apis: the public tier and the default LLM jury on public APIs with your own
keys (the default judge deployments are `stanfordhealthcare/*`, which only Stanford can reach).

* the example parses (deployments, credentials, medhelm settings) and maps every deployment HELM's
  public conf needs, models and judges, to a public OpenAI-compatible endpoint with its vendor's key;
* `medhelm-run --estimate-cost` on the public conf prints its cost table offline (tokenizers from
  LiteLLM's bundled BPE files; data from the local mirror);
* a run whose judges cannot be reached (no key, placeholder key) stops before any model call with
  one line naming the judge deployment and the file to edit: the loopback mock sees zero requests.

Offline: every non-loopback connection attempt is refused by the `offline` fixture.
"""
from __future__ import annotations

import shutil
import socket
import time
from pathlib import Path

import pytest

from medhelm_cli import run_main
from medhelm_core.helm_config.deployments import load_credentials, load_model_registry, resolve_api_key, resolve_base_url
from medhelm_core.helm_config.expand import expand_confs
from tests.oracle import SHARED

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "prod_env_public_apis"
PUBLIC_CONF = SHARED / "helm" / "run_entries_medhelm_public.conf"
PUBLIC_DATA = SHARED / "data" / "public"
# med_dialog and medhelm_med_mcqa are not in data/public: oracle/extra has them in the upstream formats.
EXTRA_DATA = SHARED / "oracle" / "extra" / "mirror"

ENDPOINTS = {  # base_url -> the placeholder its key has in credentials.conf
    "https://api.openai.com/v1": "REPLACE_ME_OPENAI_API_KEY",
    "https://api.anthropic.com/v1/": "REPLACE_ME_ANTHROPIC_API_KEY",
    "https://generativelanguage.googleapis.com/v1beta/openai/": "REPLACE_ME_GEMINI_API_KEY",
    "https://api.together.xyz/v1": "REPLACE_ME_TOGETHER_API_KEY",
}
VENDOR_MODEL_IDS = {
    "stanfordhealthcare/gpt-4o-2024-05-13": "gpt-4o-2024-05-13",
    "stanfordhealthcare/gpt-4o-mini-2024-07-18": "gpt-4o-mini-2024-07-18",
    "stanfordhealthcare/o3-mini-2025-01-31": "o3-mini-2025-01-31",
    "stanfordhealthcare/o4-mini-2025-04-16": "o4-mini-2025-04-16",
    "stanfordhealthcare/gpt-5-2025-08-07": "gpt-5-2025-08-07",
    "stanfordhealthcare/gpt-5-mini-2025-08-07": "gpt-5-mini-2025-08-07",
    "stanfordhealthcare/claude-3-7-sonnet-20250219": "claude-3-7-sonnet-20250219",
    "stanfordhealthcare/claude-3-5-sonnet-20241022": "claude-3-5-sonnet-20241022",
    "stanfordhealthcare/gemini-1.5-pro-001": "gemini-1.5-pro-001",
    "stanfordhealthcare/gemini-2.0-flash-001": "gemini-2.0-flash-001",
    "stanfordhealthcare/gemini-2.5-pro-preview-05-06": "gemini-2.5-pro-preview-05-06",
    "stanfordhealthcare/llama-3.3-70b-instruct": "meta-llama/Llama-3.3-70B-Instruct-Turbo",
    "stanfordhealthcare/deepseek-r1": "deepseek-ai/DeepSeek-R1",
}
DEFAULT_JUDGES = {"stanfordhealthcare/gpt-4o-2024-05-13", "stanfordhealthcare/llama-3.3-70b-instruct",
                  "stanfordhealthcare/claude-3-7-sonnet-20250219"}
KEY_ENV = ("OPENAI_API_KEY", "HELM_CREDENTIALS", "MEDHELM_API_KEY_STANFORDHEALTHCARE", "MEDHELM_API_KEY_MOCKAI")


LOOPBACK = ("127.0.0.1", "::1", "localhost")


@pytest.fixture
def offline(monkeypatch):
    """Refuse every name look-up and connection that is not loopback (the mock server), any tiktoken
    download, and the `datasets` library's download-count ping (a HEAD to S3 on every
    `load_dataset("parquet", ...)` of the mirror's Hugging Face files)."""
    real_connect, real_getaddrinfo = socket.socket.connect, socket.getaddrinfo

    def connect(sock, address):
        host = address[0] if isinstance(address, tuple) else address
        if sock.family in (socket.AF_INET, socket.AF_INET6) and host not in LOOPBACK:
            raise OSError(f"test is offline: connection to {address!r} refused")
        return real_connect(sock, address)

    def getaddrinfo(host, *args, **kwargs):
        if host not in LOOPBACK and host is not None:
            raise socket.gaierror(f"test is offline: no look-up of {host!r}")
        return real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    try:
        import datasets.config

        monkeypatch.setattr(datasets.config, "HF_UPDATE_DOWNLOAD_COUNTS", False)
    except ImportError:
        pass
    try:
        import tiktoken.load

        def no_download(blobpath):
            raise ConnectionError(f"test is offline: {blobpath}")

        monkeypatch.setattr(tiktoken.load, "read_file", no_download)
    except ImportError:
        pass
    for var in KEY_ENV:
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def mirror(tmp_path_factory, monkeypatch):
    """The public data mirror (shared/data/public) plus the two scenarios only oracle/extra has."""
    from medhelm_core import data_sources

    root = tmp_path_factory.mktemp("mirror")
    for src in list(PUBLIC_DATA.iterdir()) + list(EXTRA_DATA.iterdir()):
        (root / src.name).symlink_to(src, target_is_directory=src.is_dir())
    monkeypatch.setenv(data_sources.MIRROR_ENV, str(root))
    return root


def _needed(local_path: Path, **kw) -> tuple[list, dict[str, set[str]]]:
    """The public conf's run specs, and per deployment the roles it plays (model / judge)."""
    from medhelm_core.catalog import default_catalog

    annotators = default_catalog().annotators
    entries = expand_confs([str(PUBLIC_CONF)], max_eval_instances=10, local_path=local_path, **kw,
                           run_spec_functions=default_catalog().run_spec_functions)
    roles: dict[str, set[str]] = {}
    for _, spec in entries:
        roles.setdefault(spec["adapter_spec"]["model_deployment"], set()).add("model")
        for aspec in spec.get("annotators") or []:
            for judge in getattr(annotators[aspec["class_name"]](aspec["args"]), "judges", {}).values():
                roles.setdefault(judge["model_deployment"], set()).add("judge")
    return entries, roles


# ------------------------------------------------------------------------------------------------
# The example itself
# ------------------------------------------------------------------------------------------------
def test_example_prod_env_parses():
    from medhelm_core.ratelimit import SettingsRegistry

    local = load_model_registry(EXAMPLE, include_builtin=False)
    assert set(local.deployments) == set(VENDOR_MODEL_IDS)
    credentials = load_credentials(EXAMPLE, env={})
    assert credentials.source == str(EXAMPLE / "credentials.conf")
    assert "stanfordhealthcareApiKey" not in credentials  # it would win over the per-deployment table
    settings = SettingsRegistry.load(EXAMPLE)  # an unknown key would raise
    assert str(EXAMPLE / "medhelm_deployments.yaml") in settings.describe()
    for name in VENDOR_MODEL_IDS:
        s = settings.for_deployment(name)
        assert s.max_concurrency and s.requests_per_minute and s.tokens_per_minute, name
        assert s.priced, name  # vendors' list prices: shipped ones, Together's in the example


def test_every_public_deployment_resolves_to_a_public_endpoint_with_its_vendors_key(offline):
    """Models and the default jury's judges: the example's entry (not the built-in Stanford one),
    an OpenAI-compatible client on one of the four public endpoints, the key of that vendor from
    credentials.conf, and a tokenizer that loads offline."""
    from medhelm_core.clients import client_for_deployment
    from medhelm_core.clients.openai_compatible import OpenAICompatibleClient
    from medhelm_core.tokenizers import get_tokenizer

    entries, roles = _needed(EXAMPLE)
    assert len(entries) == 221
    assert set(roles) == set(VENDOR_MODEL_IDS)
    assert {name for name, r in roles.items() if "judge" in r} == DEFAULT_JUDGES
    registry = load_model_registry(EXAMPLE)
    credentials = load_credentials(EXAMPLE, env={})
    for name in roles:
        dep = registry.get_deployment(name)
        assert dep.source == str(EXAMPLE / "model_deployments.yaml"), name
        assert dep.client_spec.class_name == "helm.clients.openai_client.OpenAIClient"
        assert dep.client_spec.args["openai_model_name"] == VENDOR_MODEL_IDS[name]
        base_url = resolve_base_url(dep, credentials)
        assert base_url in ENDPOINTS, (name, base_url)
        assert resolve_api_key(dep, credentials, env={}).get_secret_value() == ENDPOINTS[base_url], name
        assert isinstance(client_for_deployment(dep, credentials), OpenAICompatibleClient)
        assert get_tokenizer(dep.tokenizer_name).count("hello world") == 2, (name, dep.tokenizer_name)
    # The Llama judge runs on Together, DeepSeek-R1 keeps HELM's <think> stripping.
    assert resolve_base_url(registry.get_deployment("stanfordhealthcare/llama-3.3-70b-instruct"),
                            credentials) == "https://api.together.xyz/v1"
    assert registry.get_deployment("stanfordhealthcare/deepseek-r1").client_spec.args["output_processor"].endswith(
        "remove_deepseek_r1_thinking")


# ------------------------------------------------------------------------------------------------
# The cost estimate, offline
# ------------------------------------------------------------------------------------------------
def test_estimate_cost_of_the_public_conf_offline(offline, mirror, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "empty_tiktoken_cache"))  # bundled BPE files only
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dh"))
    start = time.time()
    code = run_main(["--estimate-cost", "--conf-paths", str(PUBLIC_CONF), "--suite", "x",
                     "--max-eval-instances", "10", "--local-path", str(EXAMPLE),
                     "--output-path", str(tmp_path / "out")])
    seconds = time.time() - start
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out.startswith("Estimated cost before sending anything")
    by_deployment = out.split("By deployment:")[1]
    for name in VENDOR_MODEL_IDS:
        assert f"{name} " in by_deployment and f"{name}  " in by_deployment.split("Total:")[0], name
    judge_rows = [line for line in by_deployment.splitlines() if " judge " in line
                  and not line.startswith(("Judges' share", "Before a run can start"))]
    assert sorted(line.split()[0] for line in judge_rows) == sorted(DEFAULT_JUDGES)
    total = next(line for line in out.splitlines() if line.startswith("Total:"))
    assert "4,940 new calls" in total and "$" in total and "priced deployments only" not in total
    assert "No price for" not in out and "~ approximate" not in out  # every deployment priced, exact tokenizers
    # the example's placeholder keys would stop a run: said now, one line per deployment
    stops = [line for line in out.splitlines() if line.startswith("Before a run can start:")]
    assert stops and all("placeholder API key" in line for line in stops)
    assert not (tmp_path / "out" / "medhelm.duckdb").exists() and not (tmp_path / "dh").exists()
    print(f"estimate of 221 runs: {seconds:.1f}s")


def test_estimate_names_a_missing_bpe_file_in_one_line(offline, mirror, tmp_path, monkeypatch, capsys):
    """No LiteLLM bundle, an empty tiktoken cache and no network: one line naming the file, its URL
    and TIKTOKEN_CACHE_DIR, exit 2 (not a traceback, not a silent guess)."""
    tiktoken = pytest.importorskip("tiktoken")
    import tiktoken.registry

    from medhelm_core import tokenizers

    monkeypatch.setattr(tokenizers, "bundled_bpe_dir", lambda: None)
    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", {})
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "empty"))
    tokenizers.clear_cache()
    try:
        code = run_main(["--estimate-cost", "--conf-paths", str(PUBLIC_CONF), "--suite", "x",
                         "--max-eval-instances", "10", "--models-to-run", "openai/gpt-4o-2024-05-13",
                         "--local-path", str(EXAMPLE), "--output-path", str(tmp_path / "out")])
    finally:
        tokenizers.clear_cache()
    out, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and not out, err
    for needle in ("medhelm-run: error: tokenizer 'openai/o200k_base'", "o200k_base.tiktoken",
                   "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
                   f"TIKTOKEN_CACHE_DIR (now {tmp_path / 'empty'})"):
        assert needle in lines[0], needle


def test_estimate_marks_tokenizers_it_cannot_load_as_approximate(offline, mirror, tmp_path):
    """A prod_env that keeps HELM's Hugging Face tokenizer (anthropic/claude): the estimate counts 4
    characters a token and says so, instead of stopping."""
    from medhelm_core.run.estimate import estimate_runs, format_estimate
    from medhelm_core.run.workspace import Workspace

    local = tmp_path / "prod_env"
    shutil.copytree(EXAMPLE, local)
    deployments = local / "model_deployments.yaml"
    text = deployments.read_text()
    claude = text.index("name: stanfordhealthcare/claude-3-7-sonnet-20250219")
    head, tail = text[:claude], text[claude:]
    deployments.write_text(head + tail.replace("tokenizer_name: openai/o200k_base", "tokenizer_name: anthropic/claude", 1))
    entries, _ = _needed(local, models_to_run=["anthropic/claude-3-7-sonnet-20250219"])
    entries = [e for e in entries if e[1]["name"].split(":")[0] in ("medcalc_bench", "medication_qa")]
    assert len(entries) == 2
    est = estimate_runs(Workspace(tmp_path / "out", local), entries)
    assert est.approximated == {"stanfordhealthcare/claude-3-7-sonnet-20250219": "anthropic/claude"}
    approx_rows = [r for r in est.rows if r.approximate]
    assert approx_rows and all(r.deployment == "stanfordhealthcare/claude-3-7-sonnet-20250219" for r in approx_rows)
    text = format_estimate(est)
    notice = next(line for line in text.splitlines() if line.startswith("~ approximate:"))
    assert "4 characters a token" in notice and "anthropic/claude (Xenova/claude-tokenizer, tokenizer_name of " \
        "stanfordhealthcare/claude-3-7-sonnet-20250219)" in notice and "cannot be reached" in notice, notice
    claude_rows = [line for line in text.splitlines() if line.startswith("stanfordhealthcare/claude-3-7")]
    assert claude_rows and all("~" in line for line in claude_rows)
    gpt_rows = [line for line in text.splitlines() if line.startswith("stanfordhealthcare/gpt-4o-2024")]
    assert gpt_rows and not any("~" in line for line in gpt_rows)


# ------------------------------------------------------------------------------------------------
# Judges that cannot be reached: stop before any model call
# ------------------------------------------------------------------------------------------------
MODEL = "openai/gpt-4o-mini-2024-07-18"
MODEL_DEPLOYMENT = "stanfordhealthcare/gpt-4o-mini-2024-07-18"


def _deployment_yaml(names_models: list[tuple[str, str]], base_url: str) -> str:
    lines = ["model_deployments:"]
    for name, model in names_models:
        lines += [f"  - name: {name}", f"    model_name: {model}", "    tokenizer_name: simple/tokenizer1",
                  "    max_sequence_length: 128000", "    client_spec:",
                  '      class_name: "helm.clients.openai_client.OpenAIClient"',
                  f'      args: {{base_url: "{base_url}"}}']
    return "\n".join(lines) + "\n"


def _credentials(names: list[str]) -> str:
    return "deployments {\n" + "".join(f'  "{n}": "sk-test-not-secret"\n' for n in names) + "}\n"


def _nothing_written(out: Path, dagster_home: Path) -> None:
    assert not (out / "medhelm.duckdb").exists()
    assert not (out / "runs").exists()
    assert not dagster_home.exists()


def test_unreachable_judges_stop_before_any_model_call(offline, mirror, mock_server, tmp_path, monkeypatch, capsys):
    """The model is mapped to the loopback mock; the three judges are not (only HELM's built-in
    Stanford deployments, no stanfordhealthcareApiKey): exit 2, one line, zero requests."""
    local = tmp_path / "prod_env"
    local.mkdir()
    (local / "model_deployments.yaml").write_text(_deployment_yaml([(MODEL_DEPLOYMENT, MODEL)], mock_server.base_url))
    (local / "credentials.conf").write_text(_credentials([MODEL_DEPLOYMENT]))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dh"))
    mock_server.reset()
    code = run_main(["--conf-paths", str(PUBLIC_CONF), "--suite", "s", "--max-eval-instances", "10",
                     "--models-to-run", MODEL, "--local-path", str(local), "--output-path", str(tmp_path / "out")])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1, err
    line = lines[0]
    assert line.startswith("medhelm-run: error: judge deployment stanfordhealthcare/gpt-4o-2024-05-13 (jury of "), line
    assert (f"has no API key: add stanfordhealthcareApiKey to {local}/credentials.conf or map the judge in "
            f"{local}/model_deployments.yaml") in line
    assert "examples/prod_env_public_apis" in line and "sk-test" not in line
    assert mock_server.stats()["total_requests"] == 0
    _nothing_written(tmp_path / "out", tmp_path / "dh")

    # A key alone does not help: the built-in judge's client calls Stanford's gateway, at stanfordhealthcareEndpoint.
    (local / "credentials.conf").write_text('stanfordhealthcareApiKey: "sk-test-not-secret"\n')
    monkeypatch.delenv("AZURE_OPENAI_ENDPOINT", raising=False)
    code = run_main(["--conf-paths", str(PUBLIC_CONF), "--suite", "s", "--max-eval-instances", "10",
                     "--models-to-run", MODEL, "--local-path", str(local), "--output-path", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err, err
    assert "judge deployment stanfordhealthcare/gpt-4o-2024-05-13 (jury of " in err
    assert f"has no endpoint it can call: set stanfordhealthcareEndpoint in {local}/credentials.conf" in err
    assert f"in {local}/model_deployments.yaml" in err and "sk-test" not in err
    assert mock_server.stats()["total_requests"] == 0
    _nothing_written(tmp_path / "out", tmp_path / "dh")


def test_placeholder_keys_stop_before_any_call(offline, mirror, tmp_path, monkeypatch, capsys):
    """The example as shipped (REPLACE_ME_... keys): one line naming the deployment and credentials.conf."""
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dh"))
    code = run_main(["--conf-paths", str(PUBLIC_CONF), "--suite", "s", "--max-eval-instances", "10",
                     "--local-path", str(EXAMPLE), "--output-path", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err, err
    assert "model deployment stanfordhealthcare/gemini-1.5-pro-001 still has the example's placeholder API key" in err
    assert f"replace it with your key in {EXAMPLE}/credentials.conf" in err
    assert "REPLACE_ME_GEMINI" not in err  # the value itself is never printed
    _nothing_written(tmp_path / "out", tmp_path / "dh")

    # Models with real keys, judges still with placeholders: the judge is named.
    local = tmp_path / "prod_env"
    shutil.copytree(EXAMPLE, local)
    text = (local / "credentials.conf").read_text()
    (local / "credentials.conf").write_text(text.replace(
        '"stanfordhealthcare/gpt-4o-mini-2024-07-18": "REPLACE_ME_OPENAI_API_KEY"',
        '"stanfordhealthcare/gpt-4o-mini-2024-07-18": "sk-test-not-secret"'))
    code = run_main(["--conf-paths", str(PUBLIC_CONF), "--suite", "s", "--max-eval-instances", "10",
                     "--models-to-run", MODEL, "--local-path", str(local), "--output-path", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err, err
    assert ("judge deployment stanfordhealthcare/gpt-4o-2024-05-13 (jury of mtsamples_replicate) still has the "
            f"example's placeholder API key (a value starting with REPLACE_ME): replace it with your key in "
            f"{local}/credentials.conf") in err
    _nothing_written(tmp_path / "out", tmp_path / "dh")


def test_judges_mapped_like_the_example_are_called(offline, mirror, mock_server, tmp_path, monkeypatch, capsys):
    """Control for the zero-request checks above: the same model plus the three judge deployments,
    mapped by name to the loopback mock as the example maps them to public APIs, run end to end."""
    local = tmp_path / "prod_env"
    local.mkdir()
    judges = [("stanfordhealthcare/gpt-4o-2024-05-13", "openai/gpt-4o-2024-05-13"),
              ("stanfordhealthcare/llama-3.3-70b-instruct", "meta/llama-3.3-70b-instruct"),
              ("stanfordhealthcare/claude-3-7-sonnet-20250219", "anthropic/claude-3-7-sonnet-20250219")]
    (local / "model_deployments.yaml").write_text(
        _deployment_yaml([(MODEL_DEPLOYMENT, MODEL)] + judges, mock_server.base_url))
    (local / "credentials.conf").write_text(_credentials([MODEL_DEPLOYMENT] + [n for n, _ in judges]))
    conf = tmp_path / "one.conf"
    line = next(line for line in PUBLIC_CONF.read_text().splitlines()
                if f'"medication_qa:model={MODEL},' in line)
    conf.write_text("entries: [\n" + line.rstrip(",") + "\n]\n")
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dh"))
    mock_server.reset()
    code = run_main(["--conf-paths", str(conf), "--suite", "s", "--max-eval-instances", "2",
                     "--local-path", str(local), "--output-path", str(tmp_path / "out"), "--no-progress"])
    assert code == 0, capsys.readouterr().err
    assert mock_server.stats()["total_requests"] == 2 + 2 * 3  # 2 answers, 3 judges on each
