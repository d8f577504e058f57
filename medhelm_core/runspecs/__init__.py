"""Run-spec functions (registered into registry.RUN_SPEC_FUNCTIONS on import)."""
from medhelm_core.runspecs import configurable, private, public  # noqa: F401
from medhelm_core.runspecs import gated  # noqa: F401,E402  (gated tier)
