"""Which requests the page answers: a check of `Host` and `Origin` against DNS rebinding and
cross-origin reads (pure functions; app.py applies them to every request before anything else).

A web page the user visits can make its own host name resolve to 127.0.0.1 (DNS rebinding) and then
read the local page as if it were its own: the browser sends `Host: attacker.example:PORT`. So the
`Host` of every request must name this server:

- a loopback name: `localhost` or a loopback address (127.0.0.0/8, ::1). Names under `.localhost`
  are not allowed by default (not every resolver keeps them on loopback): add one with
  `--allowed-host`;
- the address given to `--host` (unless it is a wildcard such as 0.0.0.0 or ::);
- the address the request reached (an IP literal equal to the connection's local address: a page
  whose origin is this server's own address is the server's own page; this is how a server bound to
  0.0.0.0 is reached by address);
- a name added with `--allowed-host NAME` (repeatable; exact names, no wildcards).

A request that carries `Origin` must come from this page itself: same scheme-less host and port as
its `Host` (so `Origin: null` and every other page are refused), and a request other than GET or
HEAD must carry such an `Origin`. A browser's cross-site subresource request (`Sec-Fetch-Site:
cross-site` or `same-site`, other than a navigation) is refused too. No response ever carries an
`Access-Control-Allow-*` header, so a cross-origin fetch fails in the browser even where these checks
would let it through.
"""
from __future__ import annotations

import ipaddress
import re
from typing import Iterable, Mapping, Optional

LOOPBACK_NAMES = frozenset({"localhost"})
WILDCARDS = frozenset({"", "0.0.0.0", "::", "*"})
SAFE_METHODS = frozenset({"GET", "HEAD"})
# an RFC 1123 host name: labels of letters, digits and hyphens, not starting or ending with a hyphen
_LABEL = re.compile(r"^(?!-)[a-z0-9-]{1,63}(?<!-)$")
_PORT = re.compile(r"^[0-9]{1,5}$")


class GuardError(ValueError):
    """A name given to --allowed-host (or --host) that is no host name."""


def _ip(name: str) -> Optional[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    try:
        addr = ipaddress.ip_address(name)
    except ValueError:
        return None
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        return addr.ipv4_mapped
    return addr


def normalize_name(name: str) -> str:
    """A host name or IP literal as compared: lower case, no trailing dot, no brackets, an IP in its
    canonical form. Raises GuardError if it is neither a host name nor an IP address."""
    n = name.strip().lower()
    if n.startswith("[") and n.endswith("]"):
        n = n[1:-1]
    addr = _ip(n)
    if addr is not None:
        return str(addr)
    n = n[:-1] if n.endswith(".") else n
    if not n or len(n) > 253 or not all(_LABEL.match(label) for label in n.split(".")):
        raise GuardError(f"{name[:80]!r} is not a host name or an IP address (give it without scheme or port)")
    return n


def split_host(value: str) -> tuple[str, Optional[int]]:
    """`Host` header value -> (normalized name, port or None). Raises GuardError when malformed."""
    v = value.strip()
    port: Optional[str] = None
    if v.startswith("["):
        end = v.find("]")
        if end < 0:
            raise GuardError("malformed IPv6 literal")
        name, rest = v[: end + 1], v[end + 1:]
        if rest:
            if not rest.startswith(":"):
                raise GuardError("malformed Host")
            port = rest[1:]
    elif v.count(":") == 1:
        name, port = v.split(":")
    else:
        name = v   # an unbracketed IPv6 literal is refused below unless it parses (it cannot carry a port)
    if port is not None and not (_PORT.match(port) and int(port) <= 65535):
        raise GuardError("malformed port")
    if ":" in name and not name.startswith("["):
        raise GuardError("an IPv6 address in Host must be in brackets")
    return normalize_name(name), (int(port) if port is not None else None)


class HostGuard:
    """The allowed names of one server: `check(...)` returns None (answer) or the reason to refuse."""

    def __init__(self, bound_host: str = "127.0.0.1", allowed: Iterable[str] = ()) -> None:
        self.names = set(LOOPBACK_NAMES)
        bound = bound_host.strip().lower().strip("[]")
        if bound not in WILDCARDS:
            try:
                self.names.add(normalize_name(bound_host))
            except GuardError:
                pass   # not a name a browser can send (binding to it fails anyway)
        for name in allowed:
            self.names.add(normalize_name(name))

    def host_allowed(self, name: str, local_address: Optional[str] = None) -> bool:
        if name in self.names:
            return True
        addr = _ip(name)
        if addr is None:
            return False
        if addr.is_loopback:
            return True
        local = _ip((local_address or "").split("%")[0])
        return local is not None and addr == local

    def check(self, method: str, headers: Mapping[str, str], host_values: list[str],
              local_address: Optional[str] = None) -> Optional[str]:
        """The reason to refuse a request, or None. `headers` answers `.get(name)`; `host_values` are
        all its Host headers (more than one is refused)."""
        if len(host_values) != 1:
            return "missing Host header" if not host_values else "more than one Host header"
        raw_host = host_values[0]
        try:
            name, port = split_host(raw_host)
        except GuardError as e:
            return f"malformed Host {_shown(raw_host)}: {e}"
        if not self.host_allowed(name, local_address):
            return (f"Host {_shown(raw_host)} is not allowed: open the page as http://localhost:PORT/ "
                    f"or start medhelm-server with --allowed-host {name}")
        origin = headers.get("Origin")
        if origin is not None:
            reason = _same_origin(origin, name, port)
            if reason:
                return reason
        elif method.upper() not in SAFE_METHODS:
            return f"a {_shown(method)} request needs the Origin header of this page"
        site = (headers.get("Sec-Fetch-Site") or "").strip().lower()
        if site in ("cross-site", "same-site") and (headers.get("Sec-Fetch-Mode") or "").strip().lower() != "navigate":
            return f"a {site} request is refused (the page answers only itself)"
        return None


def _same_origin(origin: str, host_name: str, host_port: Optional[int]) -> Optional[str]:
    o = origin.strip()
    m = re.match(r"^(https?)://([^/?#]+)$", o, re.I)
    if not m:
        return f"Origin {_shown(origin)} is not this page"
    scheme = m.group(1).lower()
    default = 443 if scheme == "https" else 80
    try:
        name, port = split_host(m.group(2))
    except GuardError:
        return f"Origin {_shown(origin)} is not this page"
    if name != host_name or (port or default) != (host_port or default):
        return f"Origin {_shown(origin)} is not this page"
    return None


def _shown(value: str, limit: int = 80) -> str:
    """A header value as quoted in a reason: printable ASCII, shortened."""
    text = value.encode("ascii", "backslashreplace").decode("ascii")
    text = "".join(ch if " " <= ch <= "~" else "?" for ch in text)
    return repr(text[:limit] + ("…" if len(text) > limit else ""))
