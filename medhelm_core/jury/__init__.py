"""The LLM jury in one package (HELM's `LLMAsJuryAnnotator` and `LLMJuryMetric`):

* `judges.py`: HELM's judges.yaml form (`jury_config_path`), AnnotatorSpec `annotator_models`, and the
  fixed jury a benchmark's `jury:` block describes;
* `annotation.py`: the judge prompt (or each judge's several calls), the judge request, parsing a
  judge's answer, the verdict status of each judge call and HELM's annotation (re-exported here:
  `jury.jury_prompt(...)`);
* `metric.py`: HELM's LLMJuryMetric and the corrected jury score stored beside it.
"""
from medhelm_core.jury.annotation import (  # noqa: F401
    JUDGE_MAX_TOKENS,
    OK,
    PARSE_FAILED,
    REQUEST_FAILED,
    SKIPPED_EMPTY_OUTPUT,
    SUMMARY,
    Verdict,
    assemble_annotation,
    completion_text,
    judge_calls,
    judge_request,
    jury_annotation,
    jury_prompt,
    parse_judge_output,
    verdict_annotator,
)
