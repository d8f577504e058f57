"""DSPy deployments: HELM's `helm.clients.dspy_client.DSPyClient`, run with the `dspy` package itself.

A deployment whose `client_spec.class_name` is `helm.clients.dspy_client.DSPyClient` answers a
request by running a DSPy program instead of sending the prompt as is (the `-dspy-` deployments of
run_entries_medhelm_dspy.conf, medhelm_core/resources/helm_registry/model_deployments.yaml). As HELM's client does:

* `client_spec.args`: `dspy_module` ("Predict" or "ChainOfThought"), `dspy_api_model` (a LiteLLM
  model name, e.g. "openai/gpt-4o-2024-05-13"), `dspy_api_base` (the endpoint; any OpenAI-compatible
  server with an "openai/..." model), `dspy_agent_url` (an optimized program, or null);
* the language model is `dspy.LM(model=dspy_api_model, api_base=dspy_api_base, api_key=<key>,
  temperature=0.0)`, or `temperature=1.0, max_tokens=100000` when the HELM model name contains
  "o3-mini" or "deepseek-r1". The request's own temperature / max_tokens / stop sequences are not
  used (HELM ignores them too);
* the program is `dspy.Predict("inputs -> output")` or `dspy.ChainOfThought("inputs -> output")`;
  with a `dspy_agent_url`, `{scenario}` in it is replaced by the current run's scenario (the run
  name before the first ":", e.g. "medcalc_bench") and the JSON found there is loaded into the
  program with `program.load(...)` - the demos and instructions that BootstrapFewShotWithRandomSearch
  ("fs-bfrs") or MIPROv2 ("fs-miprov2") found, from github.com/StanfordMIMI/dspy-helm for HELM's
  deployments. The file is downloaded once (urllib, so file:// URLs work too) into HELM's cache,
  `<tempdir>/dspy_agent_cache/agent_<md5(url)>.json`, and reused from there;
* the program runs on `inputs=request["prompt"]` (or the non-system message contents joined by " ",
  for a chat request); the answer is `prediction.output` (`str(prediction)` without one), returned as
  `{"success": true, "embedding": [], "completions": [{"text": answer, "logprob": 0.0, "tokens": []}],
  "cached": false}` - no finish_reason and no request_time, as in HELM.

Differences, on purpose: DSPy's own on-disk response cache is off (`cache=False`: the `completions`
table is medhelm's cache, and a rerun must not call the model for what it already has), and LiteLLM
does not retry (`num_retries=0`): rate limits, 5xx, timeouts and connection errors come back as the
engine's transient attempts, which it retries with back-off. A program whose answer DSPy cannot
parse (e.g. a server that ignores DSPy's "[[ ## output ## ]]" format) is a failed request, as in
HELM (where the executor then aborts the run); the rerun asks again.

`dspy` is optional: `pip install "medhelm-build[dspy]"` (HELM pins dspy~=3.0.3).
"""
from __future__ import annotations

import copy
import hashlib
import contextvars
import os
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any, Optional

from medhelm_core.clients.base import Attempt, RequestFailed, model_api, redact
from medhelm_core.helm_config.deployments import resolve_api_key
from medhelm_core.ratelimit import (
    TRANSIENT,
    CONNECTION,
    FATAL,
    FATAL_ENDPOINT,
    OK,
    RATE_LIMITED,
    SERVER_ERROR,
    TIMEOUT,
)
from medhelm_core.errors import MedhelmError

DSPY_CLIENT_CLASS = "helm.clients.dspy_client.DSPyClient"
DSPY_EXTRA = 'pip install "medhelm-build[dspy]"'
AGENT_CACHE_DIR = Path(tempfile.gettempdir()) / "dspy_agent_cache"
SIGNATURE = "inputs -> output"
MODULES = ("Predict", "ChainOfThought")

# HELM's runner keeps the name of the run being executed in a module global
# (`runner._CURRENT_RUN_SPEC_NAME`); the DSPy client derives the scenario from it. Runs execute
# concurrently here, so it is a context variable: each run's thread (and the engine workers it
# starts, in a copy of its context) sees its own run.
_CURRENT_RUN_SPEC_NAME: contextvars.ContextVar[Optional[str]] = contextvars.ContextVar("current_run_spec_name",
                                                                                      default=None)


def set_current_run_spec_name(name: Optional[str]) -> None:
    _CURRENT_RUN_SPEC_NAME.set(name)


def current_scenario_name() -> str:
    name = _CURRENT_RUN_SPEC_NAME.get()
    return name.split(":")[0] if name else "unknown"


def import_dspy():
    """`import dspy`, with LiteLLM told not to fetch its model-cost map over the network."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        import dspy
    except ImportError:
        raise MedhelmError(f"DSPy deployments need the package 'dspy' ({DSPY_EXTRA})") from None
    return dspy


def agent_cache_file(url: str) -> Path:
    """HELM's `_get_cache_file`: `<tempdir>/dspy_agent_cache/agent_<md5(url)>.json`."""
    return AGENT_CACHE_DIR / f"agent_{hashlib.md5(url.encode()).hexdigest()}.json"


def ensure_agent_file(url: str) -> Path:
    """Download `url` once into the agent cache (HELM's `ensure_file_downloaded`)."""
    target = agent_cache_file(url)
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f"{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        urllib.request.urlretrieve(url, tmp)
        os.replace(tmp, target)
    finally:
        urllib.request.urlcleanup()
        if tmp.exists():
            tmp.unlink()
    return target


def _classify(exc: BaseException) -> str:
    """The engine's attempt kind for an exception raised while the program ran."""
    try:
        import litellm.exceptions as le
    except ImportError:  # pragma: no cover - litellm comes with dspy
        return FATAL
    if isinstance(exc, le.RateLimitError):
        return RATE_LIMITED
    if isinstance(exc, le.Timeout):
        return TIMEOUT
    if isinstance(exc, (le.AuthenticationError, le.PermissionDeniedError, le.NotFoundError)):
        return FATAL_ENDPOINT
    if isinstance(exc, (le.InternalServerError, le.ServiceUnavailableError, le.BadGatewayError)):
        return SERVER_ERROR
    if isinstance(exc, le.APIConnectionError):
        return CONNECTION
    return FATAL


class DSPyClient:
    """One DSPy deployment. The API key is held only in memory and never logged."""

    def __init__(self, deployment_name: str, model_name: Optional[str], dspy_module: Optional[str],
                 dspy_api_model: Optional[str], dspy_api_base: Optional[str] = None,
                 dspy_agent_url: Optional[str] = None, api_key: Optional[str] = None):
        if not model_name:
            raise MedhelmError(f"deployment {deployment_name!r}: Please specify the model name in model_deployments.yaml")
        if not dspy_api_model:
            raise MedhelmError(f"deployment {deployment_name!r}: Please specify dspy_api_model in model_deployments.yaml")
        if dspy_module not in MODULES:
            raise MedhelmError(f"deployment {deployment_name!r}: Unknown dspy_module: {dspy_module} "
                               f"(expected one of {', '.join(MODULES)})")
        self.deployment_name = deployment_name
        self.model_name = model_name
        self.dspy_module = dspy_module
        self.dspy_api_model = dspy_api_model
        self.dspy_api_base = dspy_api_base
        self.dspy_agent_url_template = dspy_agent_url
        self._secret = api_key or ""
        self._dspy = import_dspy()
        lm_args: dict[str, Any] = dict(model=dspy_api_model, api_base=dspy_api_base, api_key=api_key,
                                       cache=False, num_retries=0)
        if "o3-mini" in model_name or "deepseek-r1" in model_name:
            lm_args.update(temperature=1.0, max_tokens=100000)
        else:
            lm_args.update(temperature=0.0)
        self.lm = self._dspy.LM(**lm_args)
        self._programs: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._local = threading.local()

    def __repr__(self) -> str:
        return (f"DSPyClient(deployment={self.deployment_name!r}, module={self.dspy_module!r}, "
                f"api_model={self.dspy_api_model!r}, api_base={self.dspy_api_base!r})")

    def redact(self, text: str) -> str:
        return redact(text, self._secret)

    # ---- the program -------------------------------------------------------------------------
    def agent_url(self, scenario: str) -> Optional[str]:
        template = self.dspy_agent_url_template
        return template.format(scenario=scenario) if template else None

    def _build_program(self, scenario: str):
        dspy = self._dspy
        program = dspy.ChainOfThought(SIGNATURE) if self.dspy_module == "ChainOfThought" else dspy.Predict(SIGNATURE)
        url = self.agent_url(scenario)
        if url:
            try:
                program.load(str(ensure_agent_file(url)))
            except Exception as e:  # noqa: BLE001 - download or JSON/state errors
                raise MedhelmError(f"deployment {self.deployment_name!r}: Failed to load DSPy agent from URL {url}: "
                                   f"{str(e).splitlines()[0] if str(e) else type(e).__name__}") from None
        return program

    def program(self, scenario: str):
        """This thread's copy of the program for `scenario` (built and loaded once per scenario)."""
        with self._lock:
            if scenario not in self._programs:
                self._programs[scenario] = self._build_program(scenario)
            base = self._programs[scenario]
        copies = getattr(self._local, "programs", None)
        if copies is None:
            copies = self._local.programs = {}
        if scenario not in copies:
            copies[scenario] = copy.deepcopy(base)
        return copies[scenario]

    # ---- requests ---------------------------------------------------------------------------
    @staticmethod
    def prompt_text(request: dict) -> str:
        messages = request.get("messages")
        if messages:
            return " ".join(m["content"] for m in messages if m.get("role") != "system")
        return request["prompt"]

    def attempt(self, request: dict):
        """Run the program once; an `Attempt` the engine understands (never raises for model errors)."""
        try:
            program = self.program(current_scenario_name())
        except MedhelmError as e:  # the optimized program cannot be loaded: no request can succeed
            return Attempt(FATAL_ENDPOINT, message=str(e))
        try:
            with self._dspy.context(lm=self.lm):
                prediction = program(inputs=self.prompt_text(request))
            output = prediction.output if hasattr(prediction, "output") else str(prediction)
        except Exception as e:  # noqa: BLE001 - HELM turns every exception into a failed result
            message = self.redact(str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__)
            return Attempt(_classify(e), message=f"DSPy program failed: {message}")
        result = {"success": True, "embedding": [],
                  "completions": [{"text": output, "logprob": 0.0, "tokens": []}], "cached": False}
        return Attempt(OK, result=result, status=200)

    def complete(self, request: dict, on_retry=None) -> dict:
        """One request, retried on transient failures (for direct callers; the engine uses `attempt`)."""
        for attempt_number in range(1, 4):
            att = self.attempt(request)
            if att.kind == OK:
                return {**att.result, "_attempts": attempt_number}
            if att.kind not in TRANSIENT or attempt_number == 3:
                raise RequestFailed(att.message, attempts=attempt_number)
            if on_retry:
                on_retry(att.message)
            time.sleep(0.5 * attempt_number)
        raise AssertionError("unreachable")  # pragma: no cover


@model_api(DSPY_CLIENT_CLASS)
def dspy_client_for_deployment(deployment, credentials, max_concurrency: int | None = None,
                               timeout_s: float = 600.0) -> DSPyClient:
    """The DSPy client a `helm.clients.dspy_client.DSPyClient` deployment describes.

    The API key is found as for any HELM client (`client_spec.args.api_key`, credentials.conf
    `<org>ApiKey` with org = the deployment name's prefix, `$MEDHELM_API_KEY_<ORG>`); without one the
    client gets none and LiteLLM falls back to its provider's environment variable (HELM passes None).
    """
    args = deployment.client_spec.args
    try:
        api_key: Optional[str] = resolve_api_key(deployment, credentials).get_secret_value()
    except MedhelmError:
        api_key = None
    api_base = args.get("dspy_api_base")
    return DSPyClient(
        deployment_name=deployment.name,
        model_name=deployment.model_name,
        dspy_module=args.get("dspy_module"),
        dspy_api_model=args.get("dspy_api_model"),
        dspy_api_base=str(api_base) if api_base is not None else None,
        dspy_agent_url=args.get("dspy_agent_url"),
        api_key=api_key,
    )
