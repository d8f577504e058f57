"""Measure each benchmark's size for `--estimate-cost` (medhelm_core/run/recorded_sizes.py) and write it
to the benchmark folder's size.yaml.

    MEDHELM_DATA_MIRROR=../shared/data/public .venv/bin/python scripts/record_benchmark_sizes.py \
        [--conf conf/medhelm_public.yaml] [--edition helm-0.5.16]

One record per distinct scenario spec of the conf's run entries (the first model's run spec); a
benchmark whose data cannot be read here is skipped with one line.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from medhelm_core.catalog import default_catalog
from medhelm_core.helm_config.expand import expand_confs  # noqa: E402
from medhelm_core.errors import MedhelmError  # noqa: E402
from medhelm_core.run.recorded_sizes import REFERENCE_DEPLOYMENT, SIZE_FILE, measure_size  # noqa: E402
from medhelm_core.run.workspace import Workspace  # noqa: E402
from medhelm_core.yamlio import safe_load  # noqa: E402

HEADER = ("# Recorded size of this benchmark for `medhelm-run --estimate-cost` when its data is not on the\n"
          "# machine (medhelm_core/run/recorded_sizes.py). Measured on the upstream data by\n"
          "# scripts/record_benchmark_sizes.py; tests/run/test_recorded_sizes.py measures again.\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conf", default=str(ROOT / "conf" / "medhelm_public.yaml"))
    parser.add_argument("--edition", default="helm-0.5.16")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as out:
        ws = Workspace(Path(out), Path(out) / "prod_env", edition=args.edition)
        runs = expand_confs([args.conf], max_eval_instances=None, local_path=None,
                            run_spec_functions=default_catalog().run_spec_functions)
        by_folder: dict[Path, list[dict]] = {}
        seen: set[str] = set()
        for run in runs:
            spec = run.run_spec
            sspec = spec["scenario_spec"]
            key = repr((sspec["class_name"], sorted(sspec["args"].items())))
            if key in seen:
                continue
            seen.add(key)
            bench = ws.catalog.benchmark_of_scenario(sspec["class_name"])
            try:
                with ws.data_scope():
                    record = measure_size(ws, spec)
            except MedhelmError as e:
                print(f"skipped {spec['name']}: {e}", file=sys.stderr)
                continue
            by_folder.setdefault(bench.folder, []).append(record)
            print(f"{bench.name}: {record}", file=sys.stderr)
    for folder, records in by_folder.items():
        path = folder / SIZE_FILE
        doc = {"reference_deployment": REFERENCE_DEPLOYMENT, "tokenizer": "openai/o200k_base",
               "sizes": sorted(records, key=lambda r: repr(r["args"]))}
        path.write_text(HEADER + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True), encoding="utf-8")
        assert safe_load(path.read_text(encoding="utf-8"))["sizes"]
    return 0


if __name__ == "__main__":
    sys.exit(main())
