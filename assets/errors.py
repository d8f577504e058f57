"""Our errors inside an asset reach the terminal and the UI as our one-line message.

A `MedhelmError` (bad conf, missing file, unknown deployment, missing key, ...) is the user's to
fix, so the asset fails with `dagster.Failure` whose description is that line (the UI shows it as
the failure's headline; `medhelm-run` unwraps it back to the MedhelmError through `__cause__`).
Any other exception is a bug and keeps Dagster's full traceback.
"""
from __future__ import annotations

import functools
import inspect

import dagster as dg

from medhelm_core.errors import MedhelmError


def user_errors(fn):
    """Wrap an asset's body (a function or a generator) so that a MedhelmError fails it cleanly."""
    if inspect.isgeneratorfunction(fn):
        @functools.wraps(fn)
        def gen_wrapper(*args, **kwargs):
            try:
                yield from fn(*args, **kwargs)
            except MedhelmError as e:
                raise dg.Failure(description=f"medhelm: {e}", allow_retries=False) from e

        return gen_wrapper

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except MedhelmError as e:
            raise dg.Failure(description=f"medhelm: {e}", allow_retries=False) from e

    return wrapper
