"""HELM presentation schema: reading, auto-generation (fix_up_schema) and DuckDB tables.

A schema is kept as a plain dict shaped like HELM's `Schema` dataclass (presentation/schema.py):
every field present in declaration order, unset optionals as None.  `schema_document` gives
what HELM writes to schema.json (asdict_without_nones, before the `models` list is added).
"""
from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Optional

import duckdb
import yaml

from medhelm_core.errors import MedhelmError, shorten
from medhelm_core.options import check_input_file

from ..resources import DEFAULT_SCHEMA_PATH, ddl  # noqa: F401  (DEFAULT_SCHEMA_PATH: re-exported)
from .metric_metadata import metric_spec_metadata

# AdapterSpec field docstrings as HELM's `get_adapter_fields()` renders them into schema.json
# (read_schema always replaces `adapter` with these).
ADAPTER_FIELDS: list[tuple[str, str]] = [
    ('method', 'The high-level strategy for converting instances into a prompt for the language model.'),
    ('global_prefix', 'The string that is prepended to the entire prompt.'),
    ('global_suffix', 'The string that is appended to the entire prompt.'),
    ('instructions', 'The description of the task that is included at the very beginning of the prompt.'),
    ('input_prefix', "The string that is included before each input (e.g., 'Question:')."),
    ('input_suffix', "The string that is included after each input (e.g., '\\n')."),
    ('reference_prefix', 'The string that is included before each reference (for multiple-choice questions).'),
    ('reference_prefix_characters', 'The characters that are used to identify choices for multiple-choice questions e.g. ["A", "B", "C", "D"]. If unset, defaults to the sequence of ascending characters starting from the first character of reference_prefix.'),
    ('reference_suffix', 'The string that is included after each reference (for multiple-choice questions).'),
    ('chain_of_thought_prefix', "The string that is included before each chain of thought. (e.g., 'Let's think step by step')"),
    ('chain_of_thought_suffix', "The string that is included after each chain of thought. (e.g., 'The correct answer is')"),
    ('output_prefix', "The string that is included before the correct answer/predicted output (e.g., 'Answer:')."),
    ('output_suffix', "The string that is included after the correct answer/predicted output (e.g., '\\n')."),
    ('instance_prefix', "The string that is included before each instance (e.g., '\\n\\n')."),
    ('substitutions', "A list of regular expression substitutions (e.g., replacing '\\n' with ';\\n') to perform at the very end on the prompt."),
    ('max_train_instances', 'Maximum number of training instances to include in the prompt (currently by randomly sampling).'),
    ('max_eval_instances', 'Maximum number of instances to evaluate on (over all splits - test, valid, etc.).'),
    ('num_outputs', 'Maximum number of possible outputs to generate by sampling multiple outputs.'),
    ('num_train_trials', 'Number of trials, where in each trial we choose an independent, random set of training instances. Used to compute variance.'),
    ('num_trials', 'Number of trials, where we query the model with the same requests, but different random seeds.'),
    ('sample_train', 'If true, randomly sample N training examples; if false, select N consecutive training examples'),
    ('model_deployment', 'Name of the language model deployment (<host_organization>/<model name>) to send requests to.'),
    ('model', 'Name of the language model (<creator_organization>/<model name>) to send requests to.'),
    ('temperature', 'Temperature parameter used in generation.'),
    ('max_tokens', 'Maximum number of tokens to generate.'),
    ('stop_sequences', 'List of stop sequences. Output generation will be stopped if any stop sequence is encountered.'),
    ('random', 'Random seed (string), which guarantees reproducibility.'),
    ('multi_label', 'If true, for instances with multiple correct reference, the gold answer should be considered to be all of the correct references rather than any of the correct references.'),
    ('image_generation_parameters', 'Parameters for image generation.'),
    ('reeval_parameters', 'Parameters for reeval evaluation.'),
    ('eval_splits', 'The splits from which evaluation instances will be drawn.'),
    ('output_mapping_pattern', 'Pattern to apply to the output before applying the output mapping for the joint multiple choice adapter. If the pattern has no group, the output mapping will be applied to the first match. If the pattern has a group, the output mapping will be applied to the group of the first match.'),
]

FIELD_KEYS = ["name", "display_name", "short_display_name", "description", "lower_is_better"]
MATCHER_KEYS = ["name", "split", "sub_split", "perturbation_name"]
TAXONOMY_KEYS = ["task", "what", "when", "who", "language"]
RUN_GROUP_DEFAULTS: dict[str, Any] = {
    "metric_groups": [],
    "subgroups": [],
    "sub_splits": None,
    "subgroup_display_mode": "by_metric",
    "subgroup_metric_groups_hidden": [],
    "environment": {},
    "category": "Scenarios",
    "visibility": "all_groups",
    "taxonomy": None,
    "todo": False,
    "adapter_keys_shown": ["model_deployment", "model"],
    "short_description": None,
}


def _field(raw: dict) -> dict:
    if "name" not in raw:
        raise ValueError(f"schema entry without a name: {raw}")
    return {k: raw.get(k) for k in FIELD_KEYS}


def _matcher(raw: dict) -> dict:
    for k in ("name", "split"):
        if k not in raw:
            raise ValueError(f"metric matcher without {k}: {raw}")
    return {k: raw.get(k) for k in MATCHER_KEYS}


def _taxonomy(raw: Optional[dict]) -> Optional[dict]:
    return None if raw is None else {k: raw.get(k) for k in TAXONOMY_KEYS}


def _metric_group(raw: dict) -> dict:
    out = _field(raw)
    out["metrics"] = [_matcher(m) for m in (raw.get("metrics") or [])]
    out["hide_win_rates"] = raw.get("hide_win_rates")
    out["aggregation_strategies"] = raw.get("aggregation_strategies")
    return out


def _run_group(raw: dict) -> dict:
    out = _field(raw)
    for k, default in RUN_GROUP_DEFAULTS.items():
        v = raw.get(k, copy.deepcopy(default))
        if v is None and default is not None:   # an explicit null in YAML keeps HELM's None only for Optionals
            v = copy.deepcopy(default)
        out[k] = v
    out["taxonomy"] = _taxonomy(out["taxonomy"])
    out["environment"] = {str(k): v for k, v in (out["environment"] or {}).items()}
    return out


def empty_schema() -> dict:
    """HELM's `Schema()` (what --auto-generate-schema starts from; `adapter` stays None)."""
    return {"metrics": [], "perturbations": [], "metric_groups": [], "run_groups": [], "adapter": None}


def normalize_schema(raw: dict, adapter_fields: bool = True) -> dict:
    """Turn a raw schema mapping (YAML or schema.json) into the dataclass-shaped dict."""
    return {
        "metrics": [_field(m) for m in (raw.get("metrics") or [])],
        "perturbations": [_field(p) for p in (raw.get("perturbations") or [])],
        "metric_groups": [_metric_group(g) for g in (raw.get("metric_groups") or [])],
        "run_groups": [_run_group(g) for g in (raw.get("run_groups") or [])],
        "adapter": [{"name": n, "display_name": None, "short_display_name": None, "description": d,
                     "lower_is_better": None} for n, d in ADAPTER_FIELDS] if adapter_fields else None,
    }


def load_schema(path: str | Path, flag: str = "schema") -> dict:
    """Read a HELM schema (YAML, or a release's schema.json) like HELM's `read_schema`; a file that
    cannot be read or is not a schema is a one-line error naming it (and `flag`, the option)."""
    path = str(path)
    where = f"{flag} {shorten(path)}"
    try:
        with open(path, encoding="utf-8") as f:
            raw = json.load(f) if path.endswith(".json") else yaml.safe_load(f)
    except OSError as e:
        raise MedhelmError(f"{where}: cannot read it: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise MedhelmError(f"{where}: not UTF-8 text (byte {e.start}): give a schema YAML file") from None
    except (yaml.YAMLError, ValueError) as e:
        mark = getattr(e, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise MedhelmError(f"{where}: not valid {'JSON' if path.endswith('.json') else 'YAML'}{at}: {problem}") from None
    if raw is not None and not isinstance(raw, dict):
        raise MedhelmError(f"{where}: a schema is a mapping (metrics:, metric_groups:, run_groups:, ...), "
                           f"not a {type(raw).__name__}")
    try:
        return normalize_schema(raw or {})
    except (AttributeError, KeyError, TypeError, ValueError) as e:
        raise MedhelmError(f"{where}: not a HELM schema: an entry of metrics, perturbations, metric_groups "
                           f"or run_groups is malformed ({type(e).__name__}: {shorten(e)})") from None


def check_schema_file(flag: str, path: str | Path) -> None:
    """A schema option names a readable regular file that is a HELM schema."""
    check_input_file(flag, path)
    load_schema(path, flag)


def _drop_nones(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _drop_nones(v) for k, v in obj.items() if v is not None}
    if isinstance(obj, list):
        return [_drop_nones(v) for v in obj]
    return obj


def schema_document(schema: dict) -> dict:
    """asdict_without_nones(Schema): None dataclass fields dropped; `environment` kept verbatim."""
    out: dict[str, Any] = {}
    for key in ("metrics", "perturbations", "metric_groups", "run_groups", "adapter"):
        v = schema.get(key)
        if v is None:
            continue
        items = []
        for item in v:
            d = _drop_nones({k: x for k, x in item.items() if k != "environment"})
            if "environment" in item:
                # a plain dict field: asdict keeps its None values; re-insert at its declared position
                d = {k: (item["environment"] if k == "environment" else d[k])
                     for k in item if k in d or k == "environment"}
            items.append(d)
        out[key] = items
    return out


def expand_subgroups(schema: dict, group_name: str) -> list[str]:
    """HELM's expand_subgroups: depth-first pre-order from the group, skipping visited names."""
    by_name = {g["name"]: g for g in schema["run_groups"]}
    visited: set[str] = set()
    out: list[str] = []

    def walk(name: str) -> None:
        if name in visited or name not in by_name:   # HELM raises KeyError on an undefined subgroup
            return
        visited.add(name)
        out.append(name)
        for sub in by_name[name]["subgroups"]:
            walk(sub)

    walk(group_name)
    return out


# --------------------------------------------------------------------------- auto-generation

def _target_runs(conn: duckdb.DuckDBPyConnection) -> list[tuple[dict, Optional[dict], list[str]]]:
    """(run_spec, scenario_metadata, stat names) of the summarize target, in HELM read order."""
    rows = conn.execute("""
        SELECT r.run_spec, r.scenario_metadata, r.suite, r.run_name
        FROM runs r JOIN summarize_target t ON r.suite = t.suite
        ORDER BY t.suite_pos, coalesce(regexp_extract(r.run_path, '[^/]+$'), r.run_name), r.run_name
    """).fetchall()
    names = conn.execute("""
        SELECT DISTINCT s.suite, s.run_name, s.name FROM run_stats s
        WHERE s.suite IN (SELECT suite FROM summarize_target)
    """).fetchall()
    by_run: dict[tuple[str, str], list[str]] = {}
    for suite, run_name, name in names:
        by_run.setdefault((suite, run_name), []).append(name)
    return [(json.loads(spec), json.loads(md) if md else None, by_run.get((suite, rn), []))
            for spec, md, suite, rn in rows]


def _spec_key(spec: dict) -> str:
    """ObjectSpec identity: class name + args (key order irrelevant, like HELM's __eq__)."""
    return json.dumps([spec.get("class_name"), spec.get("args") or {}], sort_keys=True)


def auto_metric_metadata(runs: list[tuple[dict, Optional[dict], list[str]]]) -> list[tuple]:
    """HELM's Summarizer.get_metric_metadata over our transcribed per-class metadata.

    HELM iterates `list(set(metric_specs))`, whose order depends on Python's string hash
    seed; we use the first-appearance order over runs (deterministic).
    """
    specs: dict[str, dict] = {}
    for run_spec, _, _ in runs:
        for ms in run_spec.get("metric_specs", []):
            specs.setdefault(_spec_key(ms), ms)
    by_name: dict[str, tuple] = {}
    for ms in specs.values():
        for md in metric_spec_metadata(ms):
            by_name[md[0]] = md
    stat_names = {n for _, _, names in runs for n in names}
    return [md for name, md in by_name.items() if name in stat_names]


def auto_scenario_metadata(runs: list[tuple[dict, Optional[dict], list[str]]]) -> list[dict]:
    """HELM's get_scenario_metadata: one entry per metadata name, pruned to names used as run groups.

    HELM iterates `list(set(scenario_specs))` (hash-seed order); we use first appearance.
    """
    seen: set[str] = set()
    by_name: dict[str, dict] = {}
    for run_spec, md, _ in runs:
        key = _spec_key(run_spec.get("scenario_spec") or {})
        if key in seen:
            continue
        seen.add(key)
        if md:
            by_name[md["name"]] = md
    groups = {g for run_spec, _, _ in runs for g in run_spec.get("groups", [])}
    return [md for name, md in by_name.items() if name in groups]


def fix_up_schema(schema: dict, conn: duckdb.DuckDBPyConnection) -> dict:
    """HELM's Summarizer.fix_up_schema, reading the target runs from `runs`/`run_stats`."""
    schema = copy.deepcopy(schema)
    runs = None
    if not schema["metrics"]:
        runs = _target_runs(conn)
        metadata = auto_metric_metadata(runs)
        schema["metrics"] = [dict(zip(FIELD_KEYS, md[:5])) for md in metadata]
        if not schema["metric_groups"]:
            groups = [{"name": "main_metric", "display_name": "Main Metric", "short_display_name": None,
                       "description": "Main Metric", "lower_is_better": None,
                       "metrics": [{"name": "${main_name}", "split": "${main_split}", "sub_split": None,
                                    "perturbation_name": None}],
                       "hide_win_rates": None, "aggregation_strategies": None}]
            group_to_metrics: dict[str, list[str]] = {}
            for md in metadata:
                if md[5]:
                    group_to_metrics.setdefault(md[5], []).append(md[0])
            for g, names in group_to_metrics.items():
                display = g.replace("_", " ").capitalize()
                groups.append({"name": g, "display_name": display, "short_display_name": None,
                               "description": display, "lower_is_better": None,
                               "metrics": [{"name": n, "split": "${main_split}", "sub_split": None,
                                            "perturbation_name": None} for n in names],
                               "hide_win_rates": None, "aggregation_strategies": []})
            schema["metric_groups"] = groups
    if not any(len(g["subgroups"]) == 0 for g in schema["run_groups"]):
        runs = runs if runs is not None else _target_runs(conn)
        mg_names = [g["name"] for g in schema["metric_groups"]]
        for md in auto_scenario_metadata(runs):
            g = _run_group({
                "name": md["name"], "display_name": md.get("display_name"),
                "short_display_name": md.get("short_display_name"), "description": md.get("description"),
                "metric_groups": list(mg_names),
                "environment": {"main_name": md["main_metric"], "main_split": md["main_split"]},
                "taxonomy": md.get("taxonomy"),
            })
            schema["run_groups"].append(g)
    if not any(len(g["subgroups"]) > 0 for g in schema["run_groups"]):
        all_group = _run_group({
            "name": "all_scenarios", "display_name": "All Scenarios", "description": "All scenarios",
            "category": "Scenario Groups",
            "subgroups": [g["name"] for g in schema["run_groups"] if len(g["subgroups"]) == 0],
        })
        schema["run_groups"] = [all_group] + schema["run_groups"]
    return schema


# --------------------------------------------------------------------------- DuckDB tables

SCHEMA_TABLES = ["schema_metrics", "schema_perturbations", "schema_metric_groups", "schema_metric_group_metrics",
                 "schema_run_groups", "schema_run_group_expansion", "schema_document"]


def schema_to_tables(conn: duckdb.DuckDBPyConnection, schema: dict, release_or_suite: str) -> None:
    """Write the (fixed-up) schema into the schema_* tables, keyed by target = release or suite name."""
    conn.execute(ddl("summarize_schema"))
    t = release_or_suite
    for table in SCHEMA_TABLES:
        conn.execute(f"DELETE FROM {table} WHERE target = ?", [t])

    def fields(rows):
        return [(r["name"], r["display_name"], r["short_display_name"], r["description"], r["lower_is_better"])
                for r in rows]

    conn.executemany("INSERT INTO schema_metrics VALUES (?, ?, ?, ?, ?, ?, ?)",
                     [(t, i, *f) for i, f in enumerate(fields(schema["metrics"]))] or [])
    if schema["perturbations"]:
        conn.executemany("INSERT INTO schema_perturbations VALUES (?, ?, ?, ?, ?, ?, ?)",
                         [(t, i, *f) for i, f in enumerate(fields(schema["perturbations"]))])
    mg_rows, mgm_rows = [], []
    for i, g in enumerate(schema["metric_groups"]):
        mg_rows.append((t, i, g["name"], g["display_name"], g["short_display_name"], g["description"],
                        g["lower_is_better"], g["hide_win_rates"], g["aggregation_strategies"]))
        for j, m in enumerate(g["metrics"]):
            mgm_rows.append((t, g["name"], j, m["name"], m["split"], m["sub_split"], m["perturbation_name"]))
    if mg_rows:
        conn.executemany("INSERT INTO schema_metric_groups VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", mg_rows)
    if mgm_rows:
        conn.executemany("INSERT INTO schema_metric_group_metrics VALUES (?, ?, ?, ?, ?, ?, ?)", mgm_rows)
    rg_rows, exp_rows = [], []
    for i, g in enumerate(schema["run_groups"]):
        expansion = expand_subgroups(schema, g["name"])
        env = g["environment"]
        rg_rows.append((
            t, i, g["name"], g["display_name"], g["short_display_name"], g["description"], g["short_description"],
            g["category"], g["visibility"], g["subgroup_display_mode"], g["metric_groups"], g["subgroups"],
            g["subgroup_metric_groups_hidden"], g["sub_splits"], json.dumps(env),
            _str_or_none(env.get("main_name")), _str_or_none(env.get("main_split")),
            json.dumps(_drop_nones(g["taxonomy"])) if g["taxonomy"] is not None else None,
            g["todo"], g["adapter_keys_shown"], len(expansion),
        ))
        exp_rows.extend((t, g["name"], j, s) for j, s in enumerate(expansion))
        if g["adapter_keys_shown"] and set(g["adapter_keys_shown"]) - {"model_deployment", "model"}:
            raise NotImplementedError(
                f"run group {g['name']}: adapter_keys_shown other than model_deployment/model is not supported")
    if rg_rows:
        conn.executemany("INSERT INTO schema_run_groups VALUES (" + ", ".join(["?"] * 21) + ")", rg_rows)
    if exp_rows:
        conn.executemany("INSERT INTO schema_run_group_expansion VALUES (?, ?, ?, ?)", exp_rows)
    conn.execute("INSERT INTO schema_document VALUES (?, ?)", [t, json.dumps(schema_document(schema))])


def _str_or_none(v: Any) -> Optional[str]:
    return None if v is None else str(v)


