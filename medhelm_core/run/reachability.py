"""Before the first write: is anything listening at each endpoint the runs call? A deployment whose
endpoint refuses connections (a model server that is not started, a wrong port) would otherwise
fail each request after every retry, inside the pipeline. Only endpoints named by an IP address or
`localhost` are probed (no DNS lookup, which could hang without network), once each, with a short
timeout; only a refused connection stops the command (a slow or filtered one is left to the
engine's retries), and only for a deployment with no answer in the store yet (a rerun whose requests
were all answered needs no endpoint)."""
from __future__ import annotations

import errno
import ipaddress
import socket
from typing import Any
from urllib.parse import urlsplit

from medhelm_core.errors import MedhelmError, shorten
from medhelm_core.run.workspace import Workspace

PROBE_TIMEOUT_S = 3.0


def _probed_address(endpoint: str) -> tuple[str, int] | None:
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    host = parts.hostname
    if host != "localhost":
        try:
            ipaddress.ip_address(host)
        except ValueError:
            return None   # a name: not looked up here
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None
    return host, port


def refuses_connections(endpoint: str, timeout_s: float = PROBE_TIMEOUT_S) -> bool:
    """Whether a TCP connection to the endpoint is refused (nothing listens there)."""
    address = _probed_address(endpoint)
    if address is None:
        return False
    try:
        with socket.create_connection(address, timeout=timeout_s):
            return False
    except ConnectionRefusedError:
        return True
    except OSError as e:
        return e.errno == errno.ECONNREFUSED


def _answered_before(ws: Workspace, deployments: list[str]) -> bool:
    """Whether the store holds answers of these deployments: a rerun that may need no call at all
    (its requests answered before) goes on, and the engine says which requests could not be sent."""
    if not ws.store.exists():
        return False
    marks = ", ".join("?" * len(deployments))
    try:
        with ws.store.connect(read_only=True) as conn:
            return conn.execute(f"SELECT count(*) FROM completions WHERE model_deployment IN ({marks})",
                                list(deployments)).fetchone()[0] > 0
    except MedhelmError:
        raise
    except Exception:  # noqa: BLE001 - no completions table yet: nothing answered
        return False


def check_endpoints_listen(ws: Workspace, entries: list[tuple[Any, dict]]) -> None:
    """One line naming the deployment and its endpoint when nothing listens there, unless the store
    already holds answers of it (a rerun whose requests may all be answered needs no endpoint)."""
    from medhelm_core.run.preflight import run_endpoints

    asked: dict[str, list[str]] = {}
    for eps in run_endpoints(ws, entries).values():
        for deployment, endpoint in eps.items():
            asked.setdefault(endpoint, [])
            if deployment not in asked[endpoint]:
                asked[endpoint].append(deployment)
    for endpoint, deployments in sorted(asked.items()):
        if refuses_connections(endpoint) and not _answered_before(ws, deployments):
            names = ", ".join(shorten(d) for d in sorted(deployments))
            raise MedhelmError(f"deployment{'s' if len(deployments) > 1 else ''} {names}: nothing listens at {shorten(endpoint)} (connection refused): "
                               f"start the model server, or fix client_spec.args.base_url in "
                               f"{ws.local_path / 'model_deployments.yaml'}")
