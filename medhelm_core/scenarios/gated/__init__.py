"""Gated-tier scenarios: datasets the user downloads with their own credentials (PhysioNet, Stanford
data use agreements, the n2c2 portal) and names with the run entry's `data_path`.

Each module registers one HELM scenario class (tier "gated"); literal text lives in
medhelm_core/benchmarks/gated/<name>.yaml.
"""
from medhelm_core.scenarios.gated import (  # noqa: F401  (imports register)
    dischargeme,
    ehrshot,
    medalign,
    mimic_bhc,
    mimic_rrs,
    mimiciv_billing_code,
    n2c2_ct_matching,
)
