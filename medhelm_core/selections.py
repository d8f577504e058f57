"""What a user selects, spelled once: pydantic models that both the command line (argparse) and
Dagster's run config (`dg.Config` subclasses in `medhelm_dagster/`) are built from.

* `RunSelection`: helm-run's selection (`medhelm-run`, the `run_entries` asset);
* `SummarizeSelection`: helm-summarize's (`medhelm-summarize`, the `summarize_target` asset);
* `ImportSelection`: which published results (`medhelm-import`, the `published` resource).

The defaults are Dagster's (what the UI's launchpad starts from: the shipped example); the command
line marks some fields required instead, as helm-run does.
"""
from __future__ import annotations

import argparse
import types
import typing
from typing import Any, Mapping, Optional

from pydantic import BaseModel, Field

from medhelm_core.editions import DEFAULT_EDITION


class RunSelection(BaseModel):
    """helm-run's selection: which confs, which suite, how many instances."""

    conf_paths: list[str] = Field(default=["conf/example.conf"], description="HELM run-entry .conf files "
                                  "(an empty list with run_entries)")
    run_entries: Optional[list[str]] = Field(default=None, description="run entry descriptions (helm-run's "
                                             "--run-entries), with or instead of the confs; priority 1")
    suite: str = Field(default="example", description="name of this set of runs")
    max_eval_instances: int = Field(default=10, description="instances per run (HELM's --max-eval-instances)")
    num_train_trials: int = Field(default=1, description="train trials (HELM's --num-train-trials)")
    priority: Optional[int] = Field(default=None, description="run entries with priority <= this")
    models_to_run: Optional[list[str]] = Field(default=None, description="only these models")
    edition: str = Field(default=DEFAULT_EDITION, description="the upstream edition to reproduce: helm-0.5.16 "
                         "(crfm-helm, the published leaderboards) or medhelm-0.8.0 (`pip install medhelm` today)")
    metric_device: str = Field(default="auto", description="the device SummarizationMetric's run-spec args record "
                               "(auto: as HELM writes it on this machine, cuda when torch sees a GPU, else cpu); "
                               "cuda on a CPU machine also computes BERTScore and SummaC, as a GPU machine's run "
                               "does (needs the [summarization] extra); run names stay HELM's")
    judges: str = Field(default="stanford", description="the LLM jury of the jury benchmarks: stanford (HELM's "
                        "default: Stanford Health Care's gateway), public (the same gpt-4o, llama-3.3-70b and "
                        "claude-3-7-sonnet through OpenAI, Together AI and Anthropic, keys from $OPENAI_API_KEY, "
                        "$TOGETHER_API_KEY, $ANTHROPIC_API_KEY), public:gpt,claude (only those judges), or a "
                        "judges.yaml file; it replaces the default judges only: an entry's own "
                        "jury_config_path wins. Run names stay HELM's")


class SummarizeSelection(BaseModel):
    """helm-summarize's selection: `--suite S`, or `--release R --suites S1 S2 …`, and the schema."""

    suite: Optional[str] = Field(default="example", description="summarize this suite")
    suites: Optional[list[str]] = Field(default=None, description="the suites of --release")
    release: Optional[str] = Field(default=None, description="summarize these suites as one release")
    schema_path: Optional[str] = Field(default=None, description="the presentation schema (schema_*.yaml)")
    auto_generate_schema: bool = Field(default=True, description="generate the schema from the runs' metadata")
    edition: Optional[str] = Field(default=None, description="the edition whose summarize defaults apply "
                                   "(default: the one the suites were run under)")


# Where MedHELM's published results are (Stanford CRFM's public bucket).
DEFAULT_GCS_SOURCE = "gs://crfm-helm-public/medhelm/benchmark_output"


class ImportSelection(BaseModel):
    """Which published results: a release or a suite of a benchmark_output on GCS, on disk or behind
    any fsspec URL, and how to fetch it."""

    source: str = Field(default=DEFAULT_GCS_SOURCE, description="benchmark_output location: gs://bucket/path "
                        "(anonymous unless --token), a local folder, or an fsspec URL")
    release: Optional[str] = Field(default=None, description="release name (reads releases/<R>/summary.json for "
                                   "its suites); 'latest': the newest under releases/ by version order")
    suite: Optional[str] = Field(default=None, description="a suite on its own (runs/<S>/), e.g. one that has no "
                                 "release")
    with_completions: bool = Field(default=False, description="also import scenario_state.json (completions and "
                                   "judge annotations; by far the largest files)")
    suite_prefix: str = Field(default="", description="name published suites <prefix><suite> in the runs/run_stats "
                              "tables (needed when a suite of the same name holds your own runs)")
    token: Optional[str] = Field(default=None, description="GCS credentials: 'google_default', 'cloud', or a "
                                 "service-account JSON file (default: anonymous)")
    endpoint_url: Optional[str] = Field(default=None, description="GCS endpoint (default: $STORAGE_EMULATOR_HOST "
                                        "or Google's)")
    jobs: int = Field(default=16, description="concurrent downloads")


def _kind(annotation: Any) -> tuple[type, bool]:
    """(element type, is a list) of a field's annotation, Optional[...] unwrapped."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        annotation = next(a for a in typing.get_args(annotation) if a is not type(None))
    if typing.get_origin(annotation) is list:
        return typing.get_args(annotation)[0], True
    return annotation, False


def add_arguments(parser: argparse.ArgumentParser | argparse._ActionsContainer, model: type[BaseModel], *,
                  required: tuple[str, ...] = (), defaults: Mapping[str, Any] | None = None,
                  aliases: Mapping[str, list[str]] | None = None, only: tuple[str, ...] | None = None) -> None:
    """One `--flag-name` per field of `model` (lists take `nargs="+"`, booleans are switches);
    `required` fields have no default, `defaults` replace the model's on the command line; `only`
    picks the fields (e.g. to put some in a mutually exclusive group)."""
    defaults = defaults or {}
    aliases = aliases or {}
    for name, info in model.model_fields.items():
        if only is not None and name not in only:
            continue
        flags = [f"--{name.replace('_', '-')}", *aliases.get(name, [])]
        kind, is_list = _kind(info.annotation)
        kwargs: dict[str, Any] = {"dest": name, "help": info.description}
        if kind is bool and not is_list:
            kwargs["action"] = "store_true"
            kwargs["default"] = defaults.get(name, False)
        else:
            if is_list:
                kwargs["nargs"] = "+"
            if kind in (int, float):
                kwargs["type"] = kind
            if name in required:
                kwargs["required"] = True
            else:
                kwargs["default"] = defaults.get(name, info.default)
        parser.add_argument(*flags, **kwargs)


def from_arguments(model: type[BaseModel], args: argparse.Namespace) -> BaseModel:
    return model(**{name: getattr(args, name) for name in model.model_fields})
