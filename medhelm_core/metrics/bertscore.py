"""BERTScore as HELM's `SummarizationMetric` computes it on a non-CPU device.

HELM builds `bert_score.BERTScorer(model_type=bertscore_model, lang=language,
rescale_with_baseline=rescale_with_baseline, device=device)` once per metric and, per instance,
takes `scorer.score([pred], [refs])` (the best of the references) as `BERTScore-P`, `-R`, `-F`
(`tensor[0].item()`: Python floats). The computation is the `bert-score` library's own, from the
`[summarization]` extra, so the layer (bert_score's table for the model: 5 for
distilbert-base-uncased), batching, idf (off) and truncation are what HELM got.

The device: a run spec made on a GPU machine says 'cuda'; here the scorer runs on CUDA when torch
sees one, else on the CPU (float32 either way; the last digits can differ between the two).
Weights load through bert_score's normal path, the Hugging Face cache; offline with no cached copy,
the error names the model and the cache folder.
"""
from __future__ import annotations

from functools import lru_cache

from medhelm_core.hf_hub import first_line, hub_cache_dir, torch_device_name
from medhelm_core.metrics.base import MetricError

SUMMARIZATION_EXTRA = 'pip install "medhelm-build[summarization]"'
BERTSCORE_STATS = ("BERTScore-P", "BERTScore-R", "BERTScore-F")


class BERTScoreUnavailable(MetricError):
    """The package or the model weights BERTScore needs are not on this machine."""


@lru_cache(maxsize=4)
def bert_scorer(model: str, lang: str, rescale_with_baseline: bool):
    try:
        from bert_score import BERTScorer
    except ImportError:
        raise BERTScoreUnavailable(f"BERTScore needs the package bert-score ({SUMMARIZATION_EXTRA})") from None
    try:
        return BERTScorer(model_type=model, lang=lang, rescale_with_baseline=rescale_with_baseline,
                          device=torch_device_name())
    except OSError as e:
        raise BERTScoreUnavailable(f"BERTScore model {model!r} could not be loaded from the Hugging Face cache "
                                   f"({hub_cache_dir()}) or downloaded: {first_line(e)}") from None
    except KeyError:
        raise BERTScoreUnavailable(f"BERTScore: bert_score has no layer count for model {model!r}") from None


def bert_scores(scorer, refs: list[str], pred: str) -> dict[str, float]:
    p, r, f = scorer.score([pred], [refs])
    return {"BERTScore-P": p[0].item(), "BERTScore-R": r[0].item(), "BERTScore-F": f[0].item()}
