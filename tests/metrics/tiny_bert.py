"""Tiny random-weight models saved into a Hugging Face cache under the names HELM's MedHELM metrics
load, so BERTScore and SummaC run offline with no download:

* a DistilBERT as `distilbert-base-uncased` (BERTScore);
* an ALBERT sequence classifier with 3 labels as `tals/albert-xlarge-vitaminc-mnli` (SummaC's "vitc"
  NLI model; the real one's tokenizer is SentencePiece, here a WordPiece vocabulary stands in, loaded
  through the same `AutoTokenizer`);
* nltk's `punkt_tab/english` with no learned parameters (the Punkt algorithm alone), which SummaC's
  sentence splitter loads.

    python -m tests.metrics.tiny_bert HF_HOME [NLTK_DATA]
"""
from __future__ import annotations

import sys
from pathlib import Path

WORDS = ("the patient has a fever and cough take rest drink water see your doctor pain in chest no yes is not "
         "of to for with headache daily twice").split()


def _snapshot(hf_home: Path, name: str) -> Path:
    repo = hf_home / "hub" / f"models--{name.replace('/', '--')}"
    snapshot = repo / "snapshots" / ("0" * 40)
    snapshot.mkdir(parents=True, exist_ok=True)
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text("0" * 40)
    return snapshot


def _vocab(snapshot: Path) -> list[str]:
    from transformers import DistilBertTokenizer

    letters = "abcdefghijklmnopqrstuvwxyz0123456789"
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS, *letters, *".,:;!?'-()", *(f"##{c}" for c in letters)]
    (snapshot / "vocab.txt").write_text("\n".join(vocab) + "\n")
    DistilBertTokenizer(str(snapshot / "vocab.txt"), do_lower_case=True, model_max_length=512).save_pretrained(snapshot)
    return vocab


def save_tiny_distilbert(hf_home: Path, name: str = "distilbert-base-uncased") -> Path:
    import torch
    from transformers import DistilBertConfig, DistilBertModel

    snapshot = _snapshot(hf_home, name)
    vocab = _vocab(snapshot)
    torch.manual_seed(0)
    config = DistilBertConfig(vocab_size=len(vocab), dim=32, hidden_dim=64, n_layers=6, n_heads=2,
                              max_position_embeddings=512)
    DistilBertModel(config).save_pretrained(snapshot)
    return snapshot


def save_tiny_vitc(hf_home: Path, name: str = "tals/albert-xlarge-vitaminc-mnli") -> Path:
    import torch
    from transformers import AlbertConfig, AlbertForSequenceClassification

    snapshot = _snapshot(hf_home, name)
    vocab = _vocab(snapshot)
    torch.manual_seed(1)
    config = AlbertConfig(vocab_size=len(vocab), embedding_size=16, hidden_size=32, num_hidden_layers=2,
                          num_attention_heads=2, intermediate_size=64, num_labels=3, max_position_embeddings=512,
                          pad_token_id=0, initializer_range=0.5)  # outputs that vary with the text
    AlbertForSequenceClassification(config).save_pretrained(snapshot)
    return snapshot


def save_untrained_punkt(nltk_data: Path) -> Path:
    folder = nltk_data / "tokenizers" / "punkt_tab" / "english"
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("collocations.tab", "sent_starters.txt", "abbrev_types.txt", "ortho_context.tab"):
        (folder / name).write_text("")
    return folder


if __name__ == "__main__":
    save_tiny_distilbert(Path(sys.argv[1]))
    save_tiny_vitc(Path(sys.argv[1]))
    if len(sys.argv) > 2:
        save_untrained_punkt(Path(sys.argv[2]))
