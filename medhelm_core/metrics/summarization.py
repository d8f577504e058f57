"""HELM's `SummarizationMetric` (`metrics/summarization_metrics.py`) on CPU.

Per instance (pred = `completions[0].text.strip()`, refs = all reference texts, inp = the instance
input text, each with one leading `{` and one trailing `}` removed):

* `rouge_1`, `rouge_2`, `rouge_l`: `rouge_score` F-measure with `use_stemmer=True` (rougeL, not
  rougeLsum), max over refs;
* `summarization_coverage`, `summarization_density`, `summarization_compression`: what
  `summ_eval.data_stats_metric.DataStatsMetric().evaluate_example(pred, inp)` computes (the Newsroom
  extractive-fragment statistics): both texts are split into spaCy English tokenizer tokens
  (whitespace tokens included), lower-cased, and greedily matched (see `extractive_fragments`).
  HELM loads spaCy's `en_core_web_sm`; only its tokenizer is used, which is the rule-based English
  tokenizer that `spacy.blank("en")` also has (the golden run used exactly that).

`BERTScore-*` and `summac` exist only when the run spec's `device` is not "cpu" (HELM decides this
from `torch.cuda.is_available()` when it builds the run spec). Both are computed with the
`[summarization]` extra (`bertscore.py`, `summac.py`), in HELM's order: ROUGE, the extractive-fragment
stats, `summac`, `BERTScore-P/R/F`. What cannot be computed is the metric's `not_computed`: a run refuses the spec, a re-score computes the other
stats and lists these with their cause. HELM's `HumanEval-*` / `QAFactEval` lookups never match a MedHELM task and
emit nothing.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any, Sequence

from medhelm_core.light_imports import SPACY_OPTIONAL, hiding
from medhelm_core.metrics.base import EvalContext, Metric, MetricError, helm_metric
from medhelm_core.metrics.bertscore import BERTSCORE_STATS, BERTScoreUnavailable, bert_scorer, bert_scores
from medhelm_core.metrics.rouge import rouge_fmeasures
from medhelm_core.metrics.summac import SummaCUnavailable, summac_scorer
from medhelm_core.metrics.stat import Stat, metric_name

_ROUGE_NAMES = {"rouge1": "rouge_1", "rouge2": "rouge_2", "rougeL": "rouge_l"}


@lru_cache(maxsize=1)
def _english_tokenizer():
    """spaCy's rule-based English tokenizer (what `en_core_web_sm` / `spacy.blank("en")` use)."""
    with hiding(*SPACY_OPTIONAL):
        try:
            import spacy
        except ImportError as e:  # pragma: no cover - depends on the environment
            raise MetricError(
                "SummarizationMetric needs the package 'spacy' (its English tokenizer) for "
                "summarization_coverage/density/compression"
            ) from e
        return spacy.blank("en")


@lru_cache(maxsize=128)
def spacy_tokens(text: str) -> tuple[str, ...]:
    """spaCy English tokens of `text` (a small cache: the same texts recur within a run)."""
    nlp = _english_tokenizer()
    if len(text) > nlp.max_length:
        raise MetricError(f"text of {len(text)} characters exceeds spaCy's max_length {nlp.max_length}")
    return tuple(tok.text for tok in nlp.tokenizer(text))


def extractive_fragments(summary: Sequence[str], text: Sequence[str]) -> list[int]:
    """Lengths of the greedy extractive fragments of `summary` in `text` (Newsroom `Fragments`).

    Scanning the summary left to right, at each position the longest run of equal tokens starting
    there and anywhere in the text is taken (the first one wins ties; after a candidate run the text
    scan resumes at its end, so candidates inside it are skipped); the summary then advances past
    it, or by one token if none matched.
    """
    positions: dict[str, list[int]] = {}
    for i, tok in enumerate(text):
        positions.setdefault(tok, []).append(i)
    n_a, n_b = len(summary), len(text)
    lengths: list[int] = []
    a = 0
    while a < n_a:
        best = 0
        next_allowed = 0
        for b in positions.get(summary[a], ()):
            if b < next_allowed:
                continue
            a_end, b_end = a, b
            while a_end < n_a and b_end < n_b and text[b_end] == summary[a_end]:
                a_end += 1
                b_end += 1
            length = a_end - a
            if length > best:
                best = length
            next_allowed = b_end
        if best > 0:
            lengths.append(best)
            a += best
        else:
            a += 1
    return lengths


def data_stats(summary: str, input_text: str) -> dict[str, float]:
    """coverage, density, compression as `DataStatsMetric(case=False, tokenize=True)` computes them."""
    summary_tokens = spacy_tokens(summary)
    text_tokens = spacy_tokens(input_text)
    lengths = extractive_fragments([t.lower() for t in summary_tokens], [t.lower() for t in text_tokens])
    n_summary, n_text = len(summary_tokens), len(text_tokens)
    if n_summary == 0:
        coverage: float = 0
        density: float = 0
        compression: float = 0
    else:
        coverage = sum(lengths) / n_summary
        density = sum(length**2 for length in lengths) / n_summary
        compression = n_text / n_summary
    return {"coverage": coverage, "density": density, "compression": compression}


def _remove_braces(text: str) -> str:
    if text.startswith("{"):
        text = text[1:]
    if text.endswith("}"):
        text = text[:-1]
    return text


def rouge_scores(refs: list[str], pred: str) -> dict[str, float]:
    """rouge_1/2/l F-measures, each the max over refs."""
    best: dict[str, float] = {}
    for ref in refs:
        scores = rouge_fmeasures(ref, pred)
        for rouge_type, name in _ROUGE_NAMES.items():
            value = scores[rouge_type]
            if name not in best or value > best[name]:
                best[name] = value
    return {name: best[name] for name in ("rouge_1", "rouge_2", "rouge_l")}


@helm_metric("helm.benchmark.metrics.summarization_metrics.SummarizationMetric")
class SummarizationMetric(Metric):
    def __init__(
        self,
        task: str,
        language: str = "en",
        device: str = "cpu",
        bertscore_model: str = "microsoft/deberta-large-mnli",
        rescale_with_baseline: bool = True,
        summac_new_line_split: bool = False,
    ):
        self.bert_scorer = None
        self.summac = None
        self.device = device
        self._bertscore_args = (bertscore_model, language, rescale_with_baseline)
        self._summac_new_line_split = summac_new_line_split
        self.task = task
        self.language = language

    def _head(self, task: str) -> str:
        return f"SummarizationMetric(task={task!r}) has device={self.device!r}: HELM then adds"

    def prepare(self) -> None:
        if self.device == "cpu" or self.bert_scorer is not None or self.summac is not None:
            return
        missing: dict[str, str] = {}
        try:
            self.summac = summac_scorer(bool(self._summac_new_line_split))
        except SummaCUnavailable as e:
            missing["summac"] = f"{self._head(self.task)} SummaC: {e}"
        try:
            self.bert_scorer = bert_scorer(*self._bertscore_args)
        except BERTScoreUnavailable as e:
            missing.update({name: f"{self._head(self.task)} BERTScore: {e}" for name in BERTSCORE_STATS})
        self.not_computed = missing

    def evaluate_generation(
        self, adapter_spec: dict[str, Any], request_state: dict[str, Any], ctx: EvalContext
    ) -> list[Stat]:
        instance = request_state["instance"]
        refs = [_remove_braces(r["output"]["text"]) for r in instance.get("references", [])]
        inp = _remove_braces(instance["input"]["text"])
        pred = _remove_braces(request_state["result"]["completions"][0]["text"].strip())
        if not refs:
            raise MetricError(f"SummarizationMetric: instance {instance.get('id')!r} has no references")

        stats = [Stat(metric_name(name)).add(float(value)) for name, value in rouge_scores(refs, pred).items()]
        ds = data_stats(pred, inp)
        stats.append(Stat(metric_name("summarization_coverage")).add(float(ds["coverage"])))
        stats.append(Stat(metric_name("summarization_density")).add(float(ds["density"])))
        stats.append(Stat(metric_name("summarization_compression")).add(float(ds["compression"])))
        if self.summac is not None:
            stats.append(Stat(metric_name("summac")).add(float(self.summac.score(inp, pred))))
        if self.bert_scorer is not None:
            stats.extend(Stat(metric_name(n)).add(float(v)) for n, v in bert_scores(self.bert_scorer, refs, pred).items())
        return stats
