"""Scenario definitions (registered into registry.SCENARIOS on import)."""
from medhelm_core.scenarios import clear, jury_private, medhelm_configurable, public, shc  # noqa: F401
from medhelm_core.scenarios import gated  # noqa: F401,E402  (gated tier)
