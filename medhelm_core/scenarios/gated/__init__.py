"""The gated-tier scenario library: datasets the user downloads with their own credentials
(PhysioNet, Stanford data use agreements, the n2c2 portal) and names with the run entry's `data_path`."""
