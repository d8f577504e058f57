"""YAML files read with libyaml's C parser when PyYAML was built with it (the same documents as
`yaml.safe_load`, about ten times faster: the benchmark folders and deployment files are read at
every start)."""
from __future__ import annotations

from typing import IO, Any

import yaml

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def safe_load(stream: str | bytes | IO) -> Any:
    return yaml.load(stream, Loader=_LOADER)  # noqa: S506 - a safe loader
