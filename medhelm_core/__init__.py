"""Dagster-free domain logic of the medhelm project.

Faithful re-implementation of the parts of HELM (Stanford CRFM, Apache-2.0) that MedHELM uses:
run-entry confs, run specs, scenarios, prompt rendering, model clients, the LLM jury, metrics
and helm-summarize's leaderboard. Objects that HELM serialises (RunSpec, Instance, RequestState,
Stat) are kept as plain dicts in HELM's own JSON shape, so what we store and what we write are
the same thing HELM would write.
"""
