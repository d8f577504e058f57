"""Runs are partitions: `<suite>/<HELM run name>`, added when a suite's run entries are registered,
so the partitions follow whatever the confs and filters select."""
import dagster as dg

runs_partitions = dg.DynamicPartitionsDefinition(name="runs")
