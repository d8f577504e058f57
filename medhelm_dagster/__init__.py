"""Dagster definitions of the medhelm data build (thin: the work is in `medhelm_core`)."""
