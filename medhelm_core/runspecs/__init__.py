"""The RunSpec builders benchmark folders share (HELM `medhelm_run_specs.py`); a benchmark's own
`run_spec.py` (in its folder) calls them with HELM's signature. Nothing here registers anything."""
