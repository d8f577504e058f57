"""Our errors inside an asset reach the terminal and the UI as our one-line message.

A `MedhelmError` (bad conf, missing file, unknown deployment, missing key, ...) is the user's to
fix, so the asset fails with `dagster.Failure` whose description is that line (the UI shows it as
the failure's headline, with the file, run entry and deployment it names as metadata; `medhelm-run`
unwraps it back to the MedhelmError through `__cause__`).
Any other exception is a bug and keeps Dagster's full traceback.
"""
from __future__ import annotations

import functools
import inspect
import re

import dagster as dg

from medhelm_core.errors import MedhelmError

# What the one line names, shown as the failure's metadata: a leading `file[:line]:`, the run entry,
# the model or judge deployment.
_FILE = re.compile(r"^(?P<file>[^\s:'\"]+\.(?:conf|ya?ml|csv|tsv|jsonl?|xlsx|txt|sql|py))(?::(?P<line>\d+))?:")
_NAMED = {"entry": re.compile(r"run entry '([^']+)'"),
          "deployment": re.compile(r"deployment '([^']+)'|deployment (\S+/\S+?)[\s:,]")}


def error_metadata(message: str) -> dict[str, str]:
    """The file (and line), run entry and deployment a one-line error names."""
    out: dict[str, str] = {}
    m = _FILE.match(message)
    if m:
        out["file"] = m["file"] + (f":{m['line']}" if m["line"] else "")
    for key, pattern in _NAMED.items():
        found = pattern.search(message)
        if found:
            out[key] = next(g for g in found.groups() if g)
    return out


def _failure(e: MedhelmError) -> dg.Failure:
    return dg.Failure(description=f"medhelm: {e}", metadata=error_metadata(str(e)), allow_retries=False)


def user_errors(fn):
    """Wrap an asset's body (a function or a generator) so that a MedhelmError fails it cleanly."""
    if inspect.isgeneratorfunction(fn):
        @functools.wraps(fn)
        def gen_wrapper(*args, **kwargs):
            try:
                yield from fn(*args, **kwargs)
            except MedhelmError as e:
                raise _failure(e) from e

        return gen_wrapper

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except MedhelmError as e:
            raise _failure(e) from e

    return wrapper
