"""Metric metadata used by --auto-generate-schema (transcribed facts from HELM 0.5.16).

helm-summarize --auto-generate-schema instantiates each distinct MetricSpec of the runs and
calls `get_metadata()`; the result (pruned to metric names present in stats.json) becomes the
schema's `metrics` and, via each entry's `group`, its metric groups.  We do not instantiate
metrics: this module lists, per metric class, the metadata HELM's class returns.  Covered
are the classes MedHELM's configurable benchmarks produce (`BenchmarkConfig.get_metric_specs`):
BasicGenerationMetric, BasicReferenceMetric, InstancesPerSplitMetric, LLMJuryMetric and
SummarizationMetric.  Any other class contributes nothing (HELM likewise skips classes it
cannot instantiate).

Each entry: (name, display_name, short_display_name, description, lower_is_better, group).
"""
from __future__ import annotations

from typing import Any, Optional

MetricMeta = tuple[str, Optional[str], Optional[str], Optional[str], Optional[bool], Optional[str]]

# basic_metrics.get_request_state_metrics_metadata (first two), efficiency_metrics.EfficiencyMetric,
# basic_metrics._get_finish_reason_metrics_metadata, basic_metrics._get_truncation_metrics_metadata
_REQUEST_STATE: list[MetricMeta] = [
    ("num_references", "# ref", None, "Number of references.", None, None),
    ("num_train_trials", "# trials", None,
     "Number of trials, where in each trial we choose an independent, random set of training instances.",
     None, "general_information"),
]
_EFFICIENCY: list[MetricMeta] = [
    ("num_prompt_tokens", "# prompt tokens", None, "Number of tokens in the prompt.", None, "general_information"),
    ("num_completion_tokens", "# completion tokens", None, "Actual number of completion tokens (over all completions).",
     None, None),
    ("num_output_tokens", "# output tokens", None, "Actual number of output tokens.", None, None),
    ("training_co2_cost", "Estimated training emissions (kg CO2)", "Training emissions (kg CO2)",
     "Estimate of the CO2 emissions from training the model.", True, "efficiency_detailed"),
    ("training_energy_cost", "Estimated training energy cost (MWh)", "Training energy (MWh)",
     "Estimate of the amount of energy used to train the model.", True, "efficiency_detailed"),
    ("inference_runtime", "Observed inference runtime (s)", "Observed inference time (s)",
     "Average observed time to process a request to the model (via an API, and thus depends on particular deployment).",
     True, "efficiency_detailed"),
    ("batch_size", "Batch size", None, "For batch jobs, how many requests are in a batch.", None, None),
    ("inference_denoised_runtime", "Denoised inference runtime (s)", "Denoised inference time (s)",
     "Average time to process a request to the model minus performance contention by using profiled runtimes from "
     "multiple trials of SyntheticEfficiencyScenario.", True, "efficiency_detailed"),
    ("inference_idealized_runtime", "Idealized inference runtime (s)", "Idealized inference time (s)",
     "Average time to process a request to the model based solely on the model architecture (using Megatron-LM).",
     True, "efficiency_detailed"),
]
_FINISH_REASON: list[MetricMeta] = [
    ("finish_reason_endoftext", "finish b/c endoftext", None,
     "Fraction of instances where the the output was terminated because the end of text token was generated.",
     None, None),
    ("finish_reason_length", "finish b/c length", None,
     "Fraction of instances where the the output was terminated because of the max tokens limit.", None, None),
    ("finish_reason_stop", "finish b/c stop", None,
     "Fraction of instances where the the output was terminated because of the stop sequences.", None, None),
    ("finish_reason_unknown", "finish b/c unknown", None,
     "Fraction of instances where the the output was terminated for unknown reasons.", None, None),
]
_TRUNCATION: list[MetricMeta] = [
    ("num_train_instances", "# train", None, "Number of training instances (e.g., in-context examples).", None, None),
    ("prompt_truncated", "truncated", None,
     "Fraction of instances where the prompt itself was truncated (implies that there were no in-context examples).",
     None, None),
]
# evaluate_reference_metrics._METRIC_METADATA_MAPPING (entries MedHELM's metric specs name)
_REFERENCE_BY_NAME: dict[str, MetricMeta] = {
    "exact_match": ("exact_match", "Exact match", "EM",
                    "Fraction of instances that the predicted output matches a correct reference exactly.",
                    False, "accuracy"),
    "quasi_exact_match": ("quasi_exact_match", "Quasi-exact match", "EM",
                          "Fraction of instances that the predicted output matches a correct reference up to light "
                          "processing.", False, None),
    "quasi_leave_articles_exact_match": ("quasi_leave_articles_exact_match", "Quasi-exact match", "EM",
                                         "Fraction of instances that the predicted output matches a correct reference "
                                         "up to light processing.", False, None),
    "prefix_exact_match": ("prefix_exact_match", "Prefix exact match", "PEM",
                           "Fraction of instances that the predicted output matches the prefix of a correct reference "
                           "exactly.", False, None),
    "quasi_prefix_exact_match": ("quasi_prefix_exact_match", "Prefix quasi-exact match", "PEM",
                                 "Fraction of instances that the predicted output matches the prefix of a correct "
                                 "reference up to light processing.", False, None),
}
_LANGUAGE_MODELING: list[MetricMeta] = [
    ("logprob", "Log probability", "Logprob",
     "Predicted output's average log probability (input's log prob for language modeling).", False, None),
    ("num_perplexity_tokens", "# tokens", None,
     "Average number of tokens in the predicted output (for language modeling, the input too).", None, None),
    ("num_bytes", "# bytes", None,
     "Average number of bytes in the predicted output (for language modeling, the input too).", None, None),
]
_PERPLEXITY: list[MetricMeta] = [
    ("perplexity", "Perplexity", "PPL",
     "Perplexity of the output completion (effective branching factor per output token).", True, None),
    ("logprob_per_byte", "Log probability / byte", "Logprob/byte",
     "Predicted output's average log probability normalized by the number of bytes.", False, None),
    ("bits_per_byte", "Bits/byte", "BPB", "Average number of bits per byte according to model probabilities.",
     True, None),
]
_CALIBRATION: list[MetricMeta] = [
    ("ece_10_bin", "10-bin expected calibration error", "ECE (10-bin)",
     "The average difference between the model's confidence and accuracy, averaged across 10 bins where each bin "
     "contains an equal number of points (only computed for classification tasks). Warning - not reliable for small "
     "datasets (e.g., with < 300 examples) because each bin will have very few examples.", True, "calibration"),
    ("ece_1_bin", "1-bin expected calibration error", "ECE (1-bin)",
     "The (absolute value) difference between the model's average confidence and accuracy (only computed for "
     "classification tasks).", True, "calibration_detailed"),
    ("selective_acc@10", "Accuracy at 10% coverage", "Acc@10%",
     "The accuracy for the 10% of predictions that the model is most confident on (only computed for classification "
     "tasks).", False, "calibration_detailed"),
    ("selective_cov_acc_area", "Selective coverage-accuracy area", "Selective Acc",
     "The area under the coverage-accuracy curve, a standard selective classification metric (only computed for "
     "classification tasks).", False, "calibration_detailed"),
    ("platt_coef", "Platt Scaling Coefficient", "Platt Coef",
     "Coefficient of the Platt scaling classifier (can compare this across tasks).", False, "calibration_detailed"),
    ("platt_intercept", "Platt Scaling Intercept", "Platt Intercept",
     "Intercept of the Platt scaling classifier (can compare this across tasks).", False, "calibration_detailed"),
    ("platt_ece_10_bin", "10-bin Expected Calibration Error (after Platt scaling)", "Platt-scaled ECE (10-bin)",
     "10-bin ECE computed after applying Platt scaling to recalibrate the model's predicted probabilities.",
     True, "calibration_detailed"),
    ("platt_ece_1_bin", "1-bin expected calibration error (after Platt scaling)", "Platt-scaled ECE (1-bin)",
     "1-bin ECE computed after applying Platt scaling to recalibrate the model's predicted probabilities.",
     True, "calibration_detailed"),
]
_BASIC_REFERENCE: list[MetricMeta] = [
    ("max_prob", "Max prob", None,
     "Model's average confidence in its prediction (only computed for classification tasks)", False,
     "calibration_detailed"),
    ("exact_match", "Exact match", "EM",
     "Fraction of instances that the predicted output matches a correct reference exactly.", False, "accuracy"),
    ("predicted_index", "Predicted index", None,
     "Integer index of the reference (0, 1, ...) that was predicted by the model (for multiple-choice).", None, None),
]
_INSTANCES_PER_SPLIT: list[MetricMeta] = [
    ("num_instances", "# eval", None, "Number of evaluation instances.", None, None),
]
_GRUSKY = "https://aclanthology.org/N18-1065/"
_SUMMARIZATION: list[MetricMeta] = [
    ("QAFactEval", "QAFactEval", None,
     "Faithfulness scores based on the SummaC method of [Laban et al. (2022)](https://aclanthology.org/2022.tacl-1.10/).",
     False, "summarization_metrics"),
    ("summarization_coverage", "Coverage", None,
     f"Extent to which the model-generated summaries are extractive fragments from the source document "
     f"[(Grusky et al., 2018)]({_GRUSKY}).", None, "summarization_metrics"),
    ("summarization_density", "Density", None,
     f"Extent to which the model-generated summaries are extractive summaries based on the source document "
     f"[(Grusky et al., 2018)]({_GRUSKY}).", None, "summarization_metrics"),
    ("summarization_compression", "Compression", None,
     f"Extent to which the model-generated summaries are compressed relative to the source document "
     f"[(Grusky et al., 2018)]({_GRUSKY}).", None, "summarization_metrics"),
    ("rouge_1", "ROUGE-1", "ROUGE-1", "ROUGE-1", False, "summarization_metrics"),
    # HELM names these two with a hyphen while the stats are rouge_2 / rouge_l: pruned in practice.
    ("rouge-2", "ROUGE-2", "ROUGE-2", "ROUGE-2", False, "summarization_metrics"),
    ("rouge-l", "ROUGE-L", "ROUGE-L", "ROUGE-L", False, "summarization_metrics"),
]
_SUMMAC: MetricMeta = (
    "summac", "SummaC", None,
    "Faithfulness scores based on the SummaC method of [Laban et al. (2022)](https://aclanthology.org/2022.tacl-1.10/).",
    False, "summarization_metrics")
_BERTSCORE: list[MetricMeta] = [
    ("BERTScore-P", "BERTScore (P)", None,
     "Average BERTScore precision [(Zhang et al., 2020)](https://openreview.net/pdf?id=SkeHuCVFDr) between model "
     "generation and reference summary.", False, None),
    ("BERTScore-R", "BERTScore (R)", None,
     "Average BERTScore recall [(Zhang et al., 2020)](https://openreview.net/pdf?id=SkeHuCVFDr) between model "
     "generation and reference summary.", False, None),
    ("BERTScore-F", "BERTScore (F1)", None,
     "Average BERTScore F1 [(Zhang et al., 2020)](https://openreview.net/pdf?id=SkeHuCVFDr) between model "
     "generation and reference summary.", False, "summarization_metrics"),
]

_PREFIX = "helm.benchmark.metrics."


def metric_spec_metadata(metric_spec: dict[str, Any]) -> list[MetricMeta]:
    """The metadata list HELM's metric class returns for this MetricSpec dict ([] if not covered)."""
    cls = metric_spec.get("class_name", "")
    args = metric_spec.get("args") or {}
    if cls == _PREFIX + "basic_metrics.BasicGenerationMetric":
        refs = [_REFERENCE_BY_NAME[n] for n in args.get("names", []) if n in _REFERENCE_BY_NAME]
        return (_REQUEST_STATE + _EFFICIENCY + _FINISH_REASON + _TRUNCATION + refs
                + _LANGUAGE_MODELING + _PERPLEXITY + _CALIBRATION)
    if cls == _PREFIX + "basic_metrics.BasicReferenceMetric":
        return list(_BASIC_REFERENCE)
    if cls == _PREFIX + "basic_metrics.InstancesPerSplitMetric":
        return list(_INSTANCES_PER_SPLIT)
    if cls == _PREFIX + "llm_jury_metrics.LLMJuryMetric":
        return [(args["metric_name"], "Jury Score", "Jury Score",
                 "Measures the average score assigned by an LLM-based jury evaluating task performance.", False, None)]
    if cls == _PREFIX + "summarization_metrics.SummarizationMetric":
        out = list(_SUMMARIZATION)
        on_gpu = args.get("device", "cpu") != "cpu"   # HELM: faithfulness and BERTScore only off-CPU
        if on_gpu:
            out.append(_SUMMAC)
            out.extend(_BERTSCORE)
        return out
    return []
