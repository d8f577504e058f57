"""Layer 3, the requests: a run's prompts in HELM's order (sampling, adapter, context-window fitting)."""
from __future__ import annotations

import json

from medhelm_core import adapt
from medhelm_core.errors import MedhelmError
from medhelm_core.run.datasets import sampled_instances, scenario_key
from medhelm_core.run.entries import load_run_spec, scenario_partition_key, tier_of
from medhelm_core.run.workspace import RunRef, Workspace, in_data_scope
from medhelm_core.store import insert_rows, stable_hash


def prompt_fitter(ws: Workspace, deployment_name: str, approximate: bool = False):
    """HELM's context-window fitting for the deployment (`truncate_from_right`). `approximate`
    (the cost estimate): a tokenizer this project does not implement is replaced by
    `tokenizers.ApproximateTokenizer` instead of being an error."""
    dep = ws.deployment(deployment_name)
    # The window service fits prompt + max_tokens into max_request_length (default max_sequence_length).
    max_len = dep.max_request_length or dep.max_sequence_length
    if not max_len:
        return None
    tokenizer = ws.tokenizer(dep.tokenizer_name, approximate=approximate)

    def fit(prompt: str, max_tokens: int) -> tuple[str, bool]:
        budget = max_len - max_tokens
        if tokenizer.count(prompt) <= budget:
            return prompt, False
        if not hasattr(tokenizer, "decode"):
            raise MedhelmError(f"prompt of {deployment_name} exceeds max_request_length={max_len} and tokenizer "
                               f"{dep.tokenizer_name} cannot truncate")
        text = tokenizer.decode(tokenizer.encode(prompt)[:budget])
        while tokenizer.count(text) > budget:
            text = text[:-1]
        return text, len(text) < len(prompt)

    return fit


@in_data_scope
def build_requests(ws: Workspace, run: RunRef) -> dict:
    spec = load_run_spec(ws, run)
    adapter_spec = spec["adapter_spec"]
    key, _ = scenario_key(spec["scenario_spec"], ws.catalog)
    with ws.store.connect() as conn:   # one turn of the store for both reads (the inner use is nested)
        built = conn.execute("SELECT 1 FROM datasets WHERE scenario_key = ?", [key]).fetchone()
        if built is None:
            raise MedhelmError(f"{run.run_name}: dataset {scenario_partition_key(spec['scenario_spec'], ws.edition)!r} "
                               f"is not built (materialize its {tier_of(spec, ws.catalog)}_datasets partition first)")
        # HELM's seed-0 draw (adapt.downsample_eval_instances), decoding only the instances it keeps; the
        # train ones only when the prompts take in-context examples (with none, they change nothing).
        sampled = sampled_instances(ws, key, adapter_spec.get("max_eval_instances"), adapter_spec.get("eval_splits"),
                                    with_train=adapter_spec.get("max_train_instances", 1) != 0)
    states = adapt.build_request_states(adapter_spec, sampled,
                                        prompt_fitter(ws, adapter_spec["model_deployment"]))
    out = []
    for i, st in enumerate(states):
        req = st["request"]
        out.append((run.suite, run.run_name, i, st["instance"]["id"], st["instance"]["split"],
                    st["train_trial_index"], ws.request_key(req["model_deployment"], req), req["model_deployment"],
                    req["prompt"], json.dumps(st, ensure_ascii=False)))
    with ws.store.transaction() as conn:
        conn.execute("UPDATE run_entries SET scenario_key = ? WHERE suite = ? AND run_name = ?",
                     [key, run.suite, run.run_name])
        conn.execute("DELETE FROM requests WHERE suite = ? AND run_name = ?", [run.suite, run.run_name])
        insert_rows(conn, "requests", ["suite", "run_name", "position", "instance_id", "split", "train_trial_index",
                                       "request_key", "model_deployment", "prompt", "request_state"], out)
    return {"num_requests": len(out), "digest": stable_hash([r[6] for r in out])[:16]}


def request_rows(ws: Workspace, run: RunRef) -> list[tuple]:
    with ws.store.connect() as conn:
        return conn.execute(
            "SELECT position, request_key, model_deployment, request_state FROM requests"
            " WHERE suite = ? AND run_name = ? ORDER BY position", [run.suite, run.run_name]).fetchall()
