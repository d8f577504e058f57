"""DischargeMe (HELM `dischargeme_scenario.py`): PhysioNet "Discharge Me!" 1.3, phase-I test set.

`data_path` is the downloaded `physionet.org` folder; six gzip CSVs under
`files/discharge-me/1.3/test_phase_1/` are read with `keep_default_na=False` (empty cells stay "").
As in HELM (`file_preprocessing`):

1. diagnosis ⋈ triage on subject_id (suffixes `_df_diagnosis`/`_df_triage`), ⋈ discharge on
   subject_id, ⋈ radiology on hadm_id (radiology's clashing columns get `_df_radiology`, so its note
   is `text_df_radiology`), ⋈ edstays on hadm_id - all inner joins, in pandas' merge order;
2. the first row per hadm_id is kept (`drop_duplicates(subset="hadm_id")`), reduced to
   `text`, `text_df_radiology`, `hadm_id`, and inner-joined with discharge_target on hadm_id;
3. for each task the target text is removed from the discharge note (`str.replace(target, "")`).

Per joined row, two instances in this order: the brief hospital course, then the discharge
instructions; input = the task prompt, the (only) reference = the target; split "test".
HELM runs step 1-2 once per task on the same files, which yields the same rows in the same order;
we join once. Literal text: benchmark.yaml (`bench.text`).
"""
from __future__ import annotations

from typing import Any

from medhelm_core.catalog import Benchmark
from medhelm_core.helm_types import TEST_SPLIT, instance, reference
from medhelm_core.errors import MedhelmError
from medhelm_core.scenarios.common import py_value
from medhelm_core.scenarios.gated.files import bad_data, data_path_arg, require_exists


def _paths(bench: Benchmark, data_path: str) -> dict[str, tuple[str, str]]:
    """key -> (path, label) in HELM's check order; HELM joins with "/" (not os.path.join)."""
    files = bench.text["scenario"]["files"]
    return {key: (f"{data_path}/{f['path']}", f["label"]) for key, f in files.items()}


def _read(bench: Benchmark, path: str):
    import pandas as pd

    try:
        return pd.read_csv(path, compression="gzip", keep_default_na=False)
    except (ValueError, OSError, EOFError, UnicodeDecodeError) as e:  # bad gzip, empty file, parse error
        raise bad_data(bench.name, path, e) from None


def _joined(bench: Benchmark, data_path: str):
    import pandas as pd

    paths = _paths(bench, data_path)
    for key, (path, label) in paths.items():
        require_exists(bench, path, f"{label} file")
    df = {key: _read(bench, path) for key, (path, _) in paths.items()}
    try:
        dt = pd.merge(df["diagnosis"], df["triage"], on="subject_id", how="inner",
                      suffixes=("_df_diagnosis", "_df_triage"))
        dtd = pd.merge(dt, df["discharge"], on="subject_id", how="inner", suffixes=("", "_df_discharge"))
        dtdr = pd.merge(dtd, df["radiology"], on="hadm_id", how="inner", suffixes=("", "_df_radiology"))
        features = pd.merge(dtdr, df["edstays"], on="hadm_id", how="inner", suffixes=("", "_df_ed"))
        reduced = features.drop_duplicates(subset="hadm_id")
        inputs = reduced[["text", "text_df_radiology", "hadm_id"]]
        return pd.merge(inputs, df["discharge_target"], on="hadm_id", how="inner")
    except KeyError as e:
        raise MedhelmError(f"{bench.name}: column {first_key(e)} missing in the Discharge Me! files under {data_path}") from None


def first_key(e: KeyError) -> str:
    return repr(e.args[0]) if e.args else "?"


def load(bench: Benchmark, args: dict[str, Any]) -> list[dict]:
    data_path = data_path_arg(args, bench.name)
    spec = bench.text["scenario"]
    final = _joined(bench, data_path)
    tasks = spec["tasks"]
    for task in tasks:
        if task["column"] not in final.columns:
            raise MedhelmError(f"{bench.name}: column {task['column']!r} missing in discharge_target.csv.gz under {data_path}")
    template: str = spec["prompt_template"]
    instances = []
    for i in range(final.shape[0]):
        row = final.iloc[i]
        for task in tasks:
            target = py_value(row[task["column"]])
            text = py_value(row["text"])
            try:
                text = text.replace(target, "")
            except (AttributeError, TypeError):
                raise MedhelmError(f"{bench.name}: row {i} of the joined Discharge Me! files has a non-text note or "
                                   f"{task['column']} ({type(text).__name__}/{type(target).__name__})") from None
            prompt = template.format(task_objective=task["text"], text=text,
                                     text_df_radiology=py_value(row["text_df_radiology"]))
            instances.append(instance(prompt, [reference(target, True)], TEST_SPLIT))
    return instances


def files(bench: Benchmark, args: dict[str, Any]) -> list[str]:
    return [path for path, _ in _paths(bench, data_path_arg(args, bench.name)).values()]
