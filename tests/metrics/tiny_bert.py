"""A tiny random-weight DistilBERT saved into a Hugging Face cache as `distilbert-base-uncased` (what
HELM's MedHELM run specs name for BERTScore), so BERTScore runs offline with no download.

    python -m tests.metrics.tiny_bert HF_HOME
"""
from __future__ import annotations

import sys
from pathlib import Path

WORDS = ("the patient has a fever and cough take rest drink water see your doctor pain in chest no yes is not "
         "of to for with headache daily twice").split()


def save_tiny_distilbert(hf_home: Path, name: str = "distilbert-base-uncased") -> Path:
    import torch
    from transformers import DistilBertConfig, DistilBertModel, DistilBertTokenizer

    repo = hf_home / "hub" / f"models--{name.replace('/', '--')}"
    snapshot = repo / "snapshots" / ("0" * 40)
    snapshot.mkdir(parents=True, exist_ok=True)
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text("0" * 40)
    letters = "abcdefghijklmnopqrstuvwxyz0123456789"
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS, *letters, *".,:;!?'-()", *(f"##{c}" for c in letters)]
    (snapshot / "vocab.txt").write_text("\n".join(vocab) + "\n")
    DistilBertTokenizer(str(snapshot / "vocab.txt"), do_lower_case=True, model_max_length=512).save_pretrained(snapshot)
    torch.manual_seed(0)
    config = DistilBertConfig(vocab_size=len(vocab), dim=32, hidden_dim=64, n_layers=6, n_heads=2,
                              max_position_embeddings=512)
    DistilBertModel(config).save_pretrained(snapshot)
    return snapshot


if __name__ == "__main__":
    save_tiny_distilbert(Path(sys.argv[1]))
