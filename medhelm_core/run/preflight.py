"""Before anything is sent: every run's data files exist, and every model and judge deployment can be
called (defined, keyed, a client medhelm has, an endpoint that is not a placeholder). Each problem is
one line naming the deployment and the file to edit."""
from __future__ import annotations

import ipaddress
import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from medhelm_core.clients import is_in_process, supported_client_classes
from medhelm_core.clients.azure_openai import (AZURE_ENDPOINT_ENV, AZURE_OPENAI_CLIENT, GATEWAY_AZURE_OPENAI_CLIENT,
                                               GATEWAY_SHC_OPENAI_CLIENT, format_gateway_url, resolve_endpoint)
from medhelm_core.clients.base import endpoint_origin
from medhelm_core.clients.openai_compatible import VLLM_CHAT_CLIENT
from medhelm_core.clients.stanford_gateway import ENDPOINT_CLIENT_CLASSES, GATEWAY_OPENAI_CLIENT
from medhelm_core.data_sources import NotDownloadedYet, cached_data_only
from medhelm_core.helm_config.deployments import (BUILTIN_CONFIG_DIR, load_credentials, resolve_api_key, resolve_base_url,
                                           vendor_key_env)
from medhelm_core.jury.presets import missing_judge_keys
from medhelm_core.errors import MedhelmError
from medhelm_core.metrics.base import MetricError
from medhelm_core.metrics.evaluate import check_metrics_computable
from medhelm_core.run.datasets import existing_data_files
from medhelm_core.run.entries import spec_judges, tier_of
from medhelm_core.run.workspace import Workspace, in_data_scope
from medhelm_core.tokenizers import TokenizerError


PLACEHOLDER_KEY_PREFIX = "REPLACE_ME"
VENDOR_KEY_MISSING = "has no API key: set "  # a vendor judge's usual variable follows
OPENAI_DEFAULT_BASE_URL = "https://api.openai.com/v1"  # the OpenAI SDK's, for a deployment that names none
OFFLINE_ENV = "MEDHELM_OFFLINE"
IN_PROCESS = "in-process"  # the endpoint of a model run in this process (HuggingFaceClient)
# Clients that format a `{endpoint}` base_url template with `<org>Endpoint` (HELM's gateway clients).
_GATEWAY_TEMPLATE_CLASSES = frozenset({GATEWAY_AZURE_OPENAI_CLIENT, GATEWAY_OPENAI_CLIENT})
# Clients that, without a base_url, send to `<org>Endpoint` (the Azure ones also to $AZURE_OPENAI_ENDPOINT).
_AZURE_CLASSES = frozenset({AZURE_OPENAI_CLIENT, GATEWAY_AZURE_OPENAI_CLIENT, GATEWAY_SHC_OPENAI_CLIENT})
_ENDPOINT_CLASSES = _AZURE_CLASSES | ENDPOINT_CLIENT_CLASSES


@in_data_scope
def validate_runs(ws: Workspace, entries: list[tuple[Any, dict]]) -> None:
    """Everything that can be checked before any row is written or any call is paid for, the
    deployments before any data is read or downloaded (`run_problems`), then every run's data files.
    The first problem stops the run, as one line naming the deployment or file and what to edit."""
    problems, to_download = _problems_and_downloads(ws, entries)
    if problems:
        raise MedhelmError(problems[0])
    for entry, spec in to_download:  # the public files not downloaded yet: only now that the rest is right
        defn = ws.catalog.find_scenario(spec["scenario_spec"]["class_name"])
        existing_data_files(defn, spec["scenario_spec"]["args"], f"{entry.location or 'run entry'}: {spec['name']}")


def run_problems(ws: Workspace, entries: list[tuple[Any, dict]]) -> list[str]:
    """What would stop these runs, found without downloading any data: a scenario not implemented, a
    data file missing (the user's, or a mirror's), a model or judge deployment not defined, without its key, with a placeholder key, an
    endpoint that is not a URL or a tokenizer that does not load, a metric that cannot be computed, no
    price under --budget. One line per problem, each deployment named once."""
    return _problems_and_downloads(ws, entries)[0]


def _problems_and_downloads(ws: Workspace, entries: list[tuple[Any, dict]]) -> tuple[list[str], list[tuple[Any, dict]]]:
    """`run_problems`, and the first entry of each scenario spec whose public files are still to be
    downloaded (each spec's files are looked at once, however many models run it)."""
    to_download: list[tuple[Any, dict]] = []
    credentials = load_credentials(ws.local_path)
    problems: list[str] = []
    keys_line = missing_judge_keys(ws, entries, credentials)  # every public judge's key variable, in one line
    if keys_line:
        problems.append(keys_line)
    checked: set[tuple[str, str]] = set()
    for entry, spec in entries:
        where = f"{entry.location or 'run entry'}: {spec['name']}"
        cls = spec["scenario_spec"]["class_name"]
        defn = ws.catalog.find_scenario(cls)
        if defn is None:
            problems.append(f"{where}: scenario {cls} is not implemented")
            continue
        data_key = ("data", json.dumps(spec["scenario_spec"], sort_keys=True, default=str))
        if data_key not in checked:
            checked.add(data_key)
            try:  # the files on disk (the user's own, a mirror's, the cache's): a look, no download
                with cached_data_only():
                    existing_data_files(defn, spec["scenario_spec"]["args"], where)
            except NotDownloadedYet:
                to_download.append((entry, spec))  # once everything else is known to be right
            except MedhelmError as e:
                problems.append(str(e))
        model = spec["adapter_spec"]["model_deployment"]
        judges = spec_judges(ws, spec, where)
        if ("model", model) not in checked:
            problem = _model_deployment_problem(ws, model, credentials)
            if problem:
                problems.append(f"{where}: {problem}")
            checked.add(("model", model))
        for name, jury_name in judges:
            if ("judge", name) not in checked:
                problem = _judge_deployment_problem(ws, name, credentials)
                if problem and not (keys_line and problem.startswith(VENDOR_KEY_MISSING)):  # said in keys_line
                    problems.append(f"judge deployment {name} (jury of {jury_name}) {problem}")
                checked.add(("judge", name))
        metric_specs = json.dumps(spec.get("metric_specs", []), sort_keys=True)
        if ("metrics", metric_specs) not in checked:
            try:  # e.g. BERTScore/SummaC of a spec with device 'cuda' need the [summarization] extra and weights
                check_metrics_computable(spec, ws.catalog.metrics)
            except MetricError as e:
                problems.append(f"{where}: {e}")
            checked.add(("metrics", metric_specs))
        for name in [model] + [name for name, _ in judges]:
            if ws.controls.budget is not None and ("price", name) not in checked \
                    and not ws.deployment_settings(name).priced:
                problems.append(f"{where}: --budget needs a price for deployment {name!r}: set input_per_million "
                                f"and output_per_million for it in {ws.settings.describe()} or "
                                f"{ws.local_path}/medhelm_deployments.yaml")
                checked.add(("price", name))
    return problems, to_download


def _credentials_file(ws: Workspace, credentials) -> str:
    source = str(credentials.source)
    return source if source.startswith("$") else str(ws.local_path / "credentials.conf")


def _builtin_hint(ws: Workspace, deployment) -> str:
    """For HELM's built-in `stanfordhealthcare*` deployments (gateways only Stanford reaches)."""
    if (deployment.source is None or Path(deployment.source).parent != BUILTIN_CONFIG_DIR
            or not deployment.host_organization.startswith("stanfordhealthcare")):
        return ""
    org = deployment.host_organization
    return (f" (the built-in deployment calls Stanford Health Care's gateway, which only Stanford can reach: with "
            f"access, set {org}Endpoint and {org}ApiKey in credentials.conf; "
            "examples/prod_env_public_apis/ maps the public tier to public APIs)")


def _endpoint_problem(ws: Workspace, deployment, credentials) -> str | None:
    """A placeholder API key, or no http(s) endpoint: a base_url that is not an http(s) URL (a gateway
    template `{endpoint}/...` is fine once `<org>Endpoint` fills it: the filled URL is checked), or a
    gateway / Azure client without its `<org>Endpoint`. Neither the key nor the endpoint is shown."""
    deployments_file = ws.local_path / "model_deployments.yaml"
    credentials_file = _credentials_file(ws, credentials)
    try:
        key = resolve_api_key(deployment, credentials).get_secret_value()
    except MedhelmError:
        key = None
    odd = next((i for i, ch in enumerate(key or "") if not (ch.isascii() and ch.isprintable())), None)
    if odd is not None:  # HTTP headers carry ASCII: every request would fail (e.g. a pasted "sk-…")
        return (f"has an API key with a character that cannot be sent in an HTTP header (character {odd + 1} of "
                f"{len(key)}, not shown): check the key for a stray character in {credentials_file} or its "
                "environment variable")
    if key is not None and key.strip().startswith(PLACEHOLDER_KEY_PREFIX):
        return (f"still has the example's placeholder API key (a value starting with {PLACEHOLDER_KEY_PREFIX}): "
                f"replace it with your key in {credentials_file}")
    org = deployment.host_organization
    cls = deployment.client_spec.class_name
    explicit = deployment.client_spec.args.get("base_url")
    base_url = resolve_base_url(deployment, credentials)
    shown = f"client_spec.args.base_url {base_url!r} of {deployment.source}" if explicit is not None else \
        f"{org}BaseUrl in {credentials_file}"
    if base_url is not None and "{" in base_url and cls in _GATEWAY_TEMPLATE_CLASSES:
        endpoint = resolve_endpoint(deployment, credentials)
        if not endpoint:
            return (f"has no endpoint it can call: {shown} is a template of Stanford's gateway that needs "
                    f"{org}Endpoint: set {org}Endpoint in {credentials_file}, or map the deployment to an endpoint "
                    f"you can reach in {deployments_file}" + _builtin_hint(ws, deployment))
        try:
            filled = format_gateway_url(base_url, endpoint)
        except MedhelmError as e:
            return f"has no endpoint it can call: {e}: set client_spec.args.base_url in {deployments_file}"
        if not filled.lower().startswith(("http://", "https://")):
            return (f"has no endpoint it can call: {org}Endpoint in {credentials_file} does not make {shown} an "
                    f"http(s) URL: set {org}Endpoint to the gateway's https:// URL")
    elif base_url is not None and ("{" in base_url or not base_url.lower().startswith(("http://", "https://"))):
        return (f"has no endpoint it can call: {shown} is not an http(s) URL: set client_spec.args.base_url "
                f"in {deployments_file}" + _builtin_hint(ws, deployment))
    elif base_url is None and cls in _ENDPOINT_CLASSES:
        azure = cls in _AZURE_CLASSES
        endpoint = resolve_endpoint(deployment, credentials, env=os.environ if azure else None)
        also = f" or ${AZURE_ENDPOINT_ENV}" if azure else ""
        if not endpoint:
            return (f"has no endpoint it can call: set {org}Endpoint in {credentials_file}{also}, or map the "
                    f"deployment to an endpoint you can reach in {deployments_file}" + _builtin_hint(ws, deployment))
        if not endpoint.lower().startswith(("http://", "https://")):
            return (f"has no endpoint it can call: {org}Endpoint in {credentials_file}{also} is not an http(s) URL "
                    f"(the gateway's or Azure resource's https:// URL)")
    return None


def _model_deployment_problem(ws: Workspace, name: str, credentials) -> str | None:
    try:
        ws.client(name)  # known, supported client class, API key found
    except MedhelmError as e:
        dep = ws.registry.deployments.get(name)
        return str(e) + (_builtin_hint(ws, dep) if dep is not None else "")
    dep = ws.deployment(name)
    problem = _endpoint_problem(ws, dep, credentials)
    if problem:
        return f"model deployment {name} {problem}"
    try:  # prompt fitting and the metrics need it: fail now, not after the completions are paid for
        ws.tokenizer(dep.tokenizer_name)
    except TokenizerError as e:
        return f"model deployment {name} (tokenizer_name in {dep.source}): {e}"
    return None


def _judge_deployment_problem(ws: Workspace, name: str, credentials) -> str | None:
    """Why a judge cannot be called (not defined, no key, placeholder key, no endpoint, client class
    not callable), as the rest of `judge deployment <name> (jury of <jury>) ...`."""
    deployments_file = ws.local_path / "model_deployments.yaml"
    dep = ws.registry.deployments.get(name)
    if dep is None:
        searched = ", ".join(ws.registry.deployment_files)
        return f"is not defined: map the judge in {deployments_file} (searched: {searched})"
    cls = dep.client_spec.class_name
    if cls not in supported_client_classes():
        return (f"uses client class {cls}, which medhelm cannot call: "
                f"map the judge in {deployments_file}" + _builtin_hint(ws, dep))
    try:
        ws.client(name)  # every client checks what it needs (a key, an endpoint, AWS or Google credentials)
        failed = None
    except MedhelmError as e:
        failed = e
    if failed is not None and _lacks_api_key(dep, credentials):
        usual = vendor_key_env(dep, credentials)  # a vendor's public API: its usual variable
        if usual:
            return (f"{VENDOR_KEY_MISSING}{' or '.join('$' + n for n in usual)}, or add {dep.host_organization}ApiKey "
                    f"to {_credentials_file(ws, credentials)}")
        return (f"has no API key: add {dep.host_organization}ApiKey to {_credentials_file(ws, credentials)} "
                f"or map the judge in {deployments_file}" + _builtin_hint(ws, dep))
    problem = _endpoint_problem(ws, dep, credentials)
    if problem:
        return problem
    if failed is not None:
        return f"cannot be called: {failed}: map the judge in {deployments_file}"
    return None


def _lacks_api_key(dep, credentials) -> bool:
    """No API key where HELM's client would look (a vLLM server takes none: HELM sends "EMPTY")."""
    if dep.client_spec.class_name == VLLM_CHAT_CLIENT:
        return False
    try:
        resolve_api_key(dep, credentials)
    except MedhelmError:
        return True
    return False


def endpoint_of(ws: Workspace, name: str, credentials=None) -> str:
    """Where a deployment's requests go: scheme://host[:port] of its base URL (never a path, user or key),
    or `in-process` for a model this process runs."""
    dep = ws.deployment(name)
    if is_in_process(dep.client_spec.class_name):
        return IN_PROCESS
    try:  # each client knows where it sends (a gateway's endpoint, Azure's, a vendor SDK's base URL, a region)
        endpoint = getattr(ws.client(name), "endpoint", None)
    except MedhelmError:
        endpoint = None
    if endpoint:
        return endpoint
    url = resolve_base_url(dep, credentials if credentials is not None else load_credentials(ws.local_path))
    return endpoint_origin(url or OPENAI_DEFAULT_BASE_URL)


def on_this_machine(endpoint: str) -> bool:
    if endpoint == IN_PROCESS:
        return True
    host = urlsplit(endpoint).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def run_endpoints(ws: Workspace, entries: list[tuple[Any, dict]]) -> dict[str, dict[str, str]]:
    """run name -> {deployment (model and judges): endpoint}, for the runs of these entries."""
    credentials = load_credentials(ws.local_path)
    out: dict[str, dict[str, str]] = {}
    for entry, spec in entries:
        names = [spec["adapter_spec"]["model_deployment"]]
        names += [n for n, _ in spec_judges(ws, spec, f"{entry.location or 'run entry'}: {spec['name']}")]
        out[spec["name"]] = {n: endpoint_of(ws, n, credentials) for n in names}
    return out


def check_offline(ws: Workspace, entries: list[tuple[Any, dict]]) -> None:
    """`--offline`: no deployment may be reached other than on this machine (loopback)."""
    away = {dep: url for eps in run_endpoints(ws, entries).values() for dep, url in eps.items()
            if not on_this_machine(url)}
    if away:
        shown = ", ".join(f"{d} ({u})" for d, u in sorted(away.items()))
        raise MedhelmError(f"--offline: {len(away)} deployment(s) would send text off this machine: {shown}")


def private_tier_notice(ws: Workspace, entries: list[tuple[Any, dict]]) -> str | None:
    """The line said before the first call of a suite with private-tier runs: where their text goes."""
    private = [(e, s) for e, s in entries if tier_of(s, ws.catalog) == "private"]
    if not private:
        return None
    reached: dict[str, set[str]] = {}
    for eps in run_endpoints(ws, private).values():
        for dep, url in eps.items():
            reached.setdefault(url, set()).add(dep)
    where = "; ".join(f"{url} ({', '.join(sorted(deps))})" + ("" if on_this_machine(url) else " OFF THIS MACHINE")
                      for url, deps in sorted(reached.items()))
    return f"private-tier text of {len(private)} run(s) goes to: {where}"
