"""`shc_ent_med`'s scenario (HELM `shc_ent_scenario.py`): the SHC CSV loader `medhelm_core.scenarios.shc`,
with this folder's prompt template, question column and answer choices."""
from medhelm_core.scenarios.shc import files, load

__all__ = ["files", "load"]
