"""A Hugging Face tokenizer whose files are not cached, on a machine that cannot reach the hub, fails
in seconds with one line (not after huggingface_hub's five retries with back-off, ~40-50 s a file),
and the cost estimate counts 4 characters a token instead, saying so once, in one line.

The hub is an unreachable endpoint: `HF_ENDPOINT=http://127.0.0.1:<closed port>` (loopback only)."""
from __future__ import annotations

import logging
import socket
import time

import pytest

from medhelm_core import hf_hub, tokenizers
from medhelm_core.helm_config.deployments import load_model_registry
from medhelm_core.run.estimate import Estimate, EstimateRow, approximation_notice, format_estimate

FEW_SECONDS = 5.0


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when the socket is: connections are refused


@pytest.fixture
def unreachable_hub(tmp_path, monkeypatch):
    """An empty Hugging Face cache and a hub endpoint nobody listens on; downloads not turned off."""
    from huggingface_hub import constants

    endpoint = f"http://127.0.0.1:{_closed_port()}"
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "MEDHELM_OFFLINE", "HTTP_PROXY", "HTTPS_PROXY",
                "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(constants, "ENDPOINT", endpoint)  # what transformers would use, had it got that far
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    tokenizers.clear_cache()
    yield endpoint
    tokenizers.clear_cache()


def _claude_config():
    return load_model_registry(None).tokenizer_configs["anthropic/claude"]


def test_hub_lookup_fails_fast_with_one_line(unreachable_hub, caplog, capfd):
    caplog.set_level(logging.DEBUG)
    start = time.monotonic()
    with pytest.raises(tokenizers.TokenizerNotHere) as e:
        tokenizers.get_tokenizer("anthropic/claude", _claude_config())
    assert time.monotonic() - start < FEW_SECONDS
    line = str(e.value)
    assert "\n" not in line
    assert line.startswith("tokenizer anthropic/claude: 'Xenova/claude-tokenizer' is neither a folder nor in the "
                           "Hugging Face cache (")
    assert f"the Hugging Face hub {unreachable_hub} cannot be reached" in line and "Connection refused" in line
    # No retry chatter from huggingface_hub: nothing was asked of the hub.
    assert not [r for r in caplog.records if "Retry" in r.getMessage()]
    assert "Retrying" not in capfd.readouterr().err


def test_estimate_tokenizer_is_approximate_at_once_and_says_what_is_missing(unreachable_hub):
    start = time.monotonic()
    tok = tokenizers.tokenizer_or_approximation("anthropic/claude", _claude_config())
    assert time.monotonic() - start < FEW_SECONDS
    assert tokenizers.is_approximate(tok) and tok.count("abcdefgh") == 2
    assert tok.missing == "Xenova/claude-tokenizer" and unreachable_hub in tok.cause
    # Every later lookup (each run of a suite asks) is answered from memory: no second probe.
    calls = []
    real = socket.create_connection
    try:
        socket.create_connection = lambda *a, **k: calls.append(a) or real(*a, **k)
        for _ in range(50):
            assert tokenizers.is_approximate(tokenizers.tokenizer_or_approximation("anthropic/claude",
                                                                                    _claude_config()))
    finally:
        socket.create_connection = real
    assert calls == []


def test_the_estimate_says_it_once_in_one_line(unreachable_hub):
    registry = load_model_registry(None)
    est = Estimate()
    for dep in ("stanfordhealthcare/claude-3-7-sonnet-20250219", "stanfordhealthcare/llama-3.3-70b-instruct",
                "stanfordhealthcare/claude-3-5-sonnet-20241022"):
        name = registry.get_deployment(dep).tokenizer_name
        tok = tokenizers.tokenizer_or_approximation(name, registry.tokenizer_configs[name])
        est.approximated[dep] = tok.name
        est.approximation_reasons.setdefault(tok.name, tok)
        est.rows.append(EstimateRow("r", "model", dep, calls=1, prompt_tokens=3, output_tokens=1, approximate=True))
    notice = approximation_notice(est)
    assert "\n" not in notice
    assert notice.startswith("~ approximate: prompts counted as 4 characters a token")
    assert ("anthropic/claude (Xenova/claude-tokenizer, tokenizer_name of "
            "stanfordhealthcare/claude-3-5-sonnet-20241022, stanfordhealthcare/claude-3-7-sonnet-20250219)") in notice
    assert "meta/llama-3.3-70b-instruct (meta-llama/Llama-3.3-70B-Instruct, tokenizer_name of " in notice
    assert notice.count("cannot be reached") == 1  # the shared cause, said once
    text = format_estimate(est)
    assert [line for line in text.splitlines() if line.startswith("~ approximate")] == [notice]


def test_downloads_turned_off_fail_without_any_connection(unreachable_hub, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")

    def no_connection(*a, **k):
        raise AssertionError("no connection may be tried with HF_HUB_OFFLINE=1")

    monkeypatch.setattr(socket, "create_connection", no_connection)
    tok = tokenizers.tokenizer_or_approximation("anthropic/claude", _claude_config())
    assert tokenizers.is_approximate(tok) and "downloads are off (HF_HUB_OFFLINE" in tok.cause


def test_from_pretrained_never_goes_to_an_unreachable_hub(unreachable_hub):
    """Model loads (HuggingFaceClient, SummaC) go through `from_pretrained`: local files first, then the
    hub only when it can be reached."""
    asked = []

    def load(name, local_files_only, **kwargs):
        asked.append(local_files_only)
        raise OSError("not cached")

    start = time.monotonic()
    with pytest.raises(hf_hub.LocalModelUnavailable) as e:
        hf_hub.from_pretrained(load, "org/some-model", "model org/some-model")
    assert time.monotonic() - start < FEW_SECONDS
    assert asked == [True]  # local files only; the download was never attempted
    assert "cannot be reached" in str(e.value) and e.value.missing == "org/some-model"


def test_a_proxy_is_what_is_probed(unreachable_hub, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", "https://huggingface.example")
    monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{_closed_port()}")
    hf_hub.forget_hub_probes()
    start = time.monotonic()
    why = hf_hub.hub_unreachable()
    assert time.monotonic() - start < FEW_SECONDS
    assert why and "through proxy http://127.0.0.1" in why and "huggingface.example" in why


def test_a_listening_hub_is_reachable(unreachable_hub, monkeypatch):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.getsockname()[1]}")
        hf_hub.forget_hub_probes()
        assert hf_hub.hub_unreachable() is None
