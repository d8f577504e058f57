"""`synt_written_consent`'s scenario (medhelm 0.8.0 `synt_written_consent_scenario.py`): the SHC CSV loader
`medhelm_core.scenarios.shc`, which reads the CSV exactly as medhelm's class does (same open(), dedup by
rendered prompt, label check), with this folder's prompt template and answer choices."""
from medhelm_core.scenarios.shc import files, load

__all__ = ["files", "load"]
