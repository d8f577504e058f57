"""SummaC as HELM's `SummarizationMetric` computes it on a non-CPU device (the `summac` stat).

HELM (0.5.16, `metrics/summac/model_summac.py`, a copy of Laban et al.'s SummaC code) builds
`SummaCZS(granularity="sentence", model_name="vitc", imager_load_cache=False, device=device,
new_line_split=summac_new_line_split)` once per metric and takes `score_one(inp, pred)["score"]`:

* both texts are cut into sentences with nltk's `sent_tokenize` (English punkt), keeping those longer
  than 10 characters; with `new_line_split` each non-empty stripped line is cut on its own and the
  sentences are stripped. At most the first 100 sentences of the input count;
* every (input sentence, output sentence) pair, input-major, goes through the NLI model
  `tals/albert-xlarge-vitaminc-mnli` (entailment = label 0, contradiction = label 1) in batches of
  20: the tokenizer pads the batch, truncates only the premise, at 500 tokens; the model runs in
  half precision and the label probabilities are the softmax of its logits;
* per output sentence: the best entailment over the input sentences minus the best contradiction
  (each its own maximum); the score is their mean. No sentence on either side gives 0.

The computation is torch/transformers from the `[summarization]` extra. Weights load through the
Hugging Face cache; offline with no cached copy, or with no punkt data, the error names what is
missing and where it was looked for. On a machine without a GPU the model runs on the CPU (still in
half precision); the last digits can differ from a GPU's.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any

from medhelm_core.hf_hub import LocalModelUnavailable, from_pretrained, torch_device_name
from medhelm_core.light_imports import NLTK_OPTIONAL, hiding
from medhelm_core.metrics.base import MetricError
from medhelm_core.metrics.bertscore import SUMMARIZATION_EXTRA

# HELM's choice among SummaC's NLI models ("vitc") and that model's label order.
MODEL_CARD = "tals/albert-xlarge-vitaminc-mnli"
ENTAILMENT, CONTRADICTION = 0, 1
MIN_SENTENCE_CHARS = 10  # sentences of at most this many characters are dropped
MAX_DOC_SENTENCES = 100
MAX_INPUT_TOKENS = 500
BATCH_SIZE = 20
PUNKT = "tokenizers/punkt_tab/english/"


class SummaCUnavailable(MetricError):
    """The packages, the model weights or the sentence splitter SummaC needs are not on this machine."""


def _check_punkt() -> None:
    with hiding(*NLTK_OPTIONAL):
        import nltk

    try:
        nltk.data.find(PUNKT)
    except LookupError:
        raise SummaCUnavailable(
            f"SummaC splits sentences with nltk's punkt_tab, which is in none of the nltk_data folders "
            f"({', '.join(nltk.data.path)}): run `python -m nltk.downloader punkt_tab` where there is network "
            f"and copy its nltk_data folder here, or set NLTK_DATA to it") from None


@lru_cache(maxsize=2)
def summac_scorer(new_line_split: bool, model_card: str = MODEL_CARD) -> "SummaCZS":
    try:
        import torch  # noqa: F401
        import transformers
    except ImportError:
        raise SummaCUnavailable(f"SummaC needs torch and transformers ({SUMMARIZATION_EXTRA})") from None
    _check_punkt()
    what = "SummaC model"
    try:
        tokenizer = from_pretrained(transformers.AutoTokenizer.from_pretrained, model_card, what)
        model = from_pretrained(transformers.AutoModelForSequenceClassification.from_pretrained, model_card, what)
    except LocalModelUnavailable as e:
        raise SummaCUnavailable(str(e)) from None
    device = torch_device_name()
    return SummaCZS(tokenizer, model.eval().to(device).half(), device, new_line_split)


class SummaCZS:
    """The zero-shot SummaC score with HELM's settings (sentence granularity, max then mean)."""

    def __init__(self, tokenizer: Any, model: Any, device: str, new_line_split: bool):
        self.tokenizer, self.model, self.device = tokenizer, model, device
        self.new_line_split = new_line_split

    def sentences(self, text: str) -> list[str]:
        with hiding(*NLTK_OPTIONAL):
            from nltk.tokenize import sent_tokenize

        if not self.new_line_split:
            return [s for s in sent_tokenize(text) if len(s) > MIN_SENTENCE_CHARS]
        out = []
        for line in text.split("\n"):
            line = line.strip()
            if line:
                out.extend(s.strip() for s in sent_tokenize(line) if len(s.strip()) > MIN_SENTENCE_CHARS)
        return out

    def probabilities(self, pairs: list[tuple[str, str]]) -> list[tuple[float, float]]:
        """(entailment, contradiction) per (premise, hypothesis) pair, batch by batch as HELM runs them."""
        import torch

        out: list[tuple[float, float]] = []
        for start in range(0, len(pairs), BATCH_SIZE):
            batch = pairs[start:start + BATCH_SIZE]
            tokens = self.tokenizer([p for p, _ in batch], [h for _, h in batch], padding=True,
                                    truncation="only_first", max_length=MAX_INPUT_TOKENS, return_tensors="pt")
            tokens = {k: v.to(self.device) for k, v in tokens.items()}
            with torch.no_grad():
                logits = self.model(**tokens)["logits"]
            probs = torch.nn.functional.softmax(logits, dim=-1)
            out.extend(zip(probs[:, ENTAILMENT].tolist(), probs[:, CONTRADICTION].tolist()))
        return out

    def score(self, original: str, generated: str) -> float:
        premises = self.sentences(original)[:MAX_DOC_SENTENCES]
        hypotheses = self.sentences(generated)
        if not premises or not hypotheses:
            return 0.0
        probs = self.probabilities([(p, h) for p in premises for h in hypotheses])
        n = len(hypotheses)
        per_sentence = []
        for j in range(n):
            column = probs[j::n]  # input-major order: pair (i, j) is at i * n + j
            per_sentence.append(max(e for e, _ in column) - max(c for _, c in column))
        return _mean(per_sentence)


def _mean(values: list[float]) -> float:
    import numpy as np

    return float(np.mean(values))  # numpy's pairwise sum, as HELM's np.mean over the image
