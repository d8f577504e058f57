"""Partitions follow what the confs select (dynamic, added when a suite's run entries are registered):

* runs: `<suite>/<HELM run name>` — requests, completions, annotations, scores;
* `<tier>_scenarios`: one dataset per scenario spec (`<ScenarioClass>:<arg>=<value>,...`).
"""
import dagster as dg

runs_partitions = dg.DynamicPartitionsDefinition(name="runs")
scenario_partitions = {tier: dg.DynamicPartitionsDefinition(name=f"{tier}_scenarios")
                       for tier in ("public", "gated", "private")}
