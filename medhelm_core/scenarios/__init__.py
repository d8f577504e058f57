"""The scenario library: what several benchmark folders share (literal-text helpers, file readers,
the loaders of a family of benchmarks). A benchmark's own `scenario.py` lives in its folder
(`medhelm_core/benchmarks/<tier>/<name>/`); nothing here registers anything."""
