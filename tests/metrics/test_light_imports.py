"""Scoring imports NLTK and spaCy without scikit-learn, SciPy and torch (about 300 MB a process), and
their tokens, stems and sentences are the ones the plain imports give."""
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from medhelm_core.light_imports import hiding

ROOT = Path(__file__).resolve().parents[2]
TEXT = ("Dr. Smith's patient (age 54) can't walk 3.5km. She was given 5 mg/kg—e.g. at the U.S.A. clinic; "
        "running, runs and ran were relieved.\nFollow-up in 2 weeks.")

SCORE = f'''
import json, sys
from medhelm_core.metrics.rouge import rouge_tokens
from medhelm_core.metrics.summarization import spacy_tokens
text = {TEXT!r}
out = {{"rouge": list(rouge_tokens(text)), "spacy": list(spacy_tokens(text))}}
from medhelm_core.light_imports import NLTK_OPTIONAL, hiding
with hiding(*NLTK_OPTIONAL):
    from nltk.tokenize import sent_tokenize
try:
    out["sentences"] = sent_tokenize(text)
except LookupError:   # punkt not downloaded here
    out["sentences"] = None
out["imported"] = sorted(m for m in ("sklearn", "scipy", "torch") if m in sys.modules)
print(json.dumps(out))
'''

PLAIN = SCORE.replace("from medhelm_core.metrics.rouge import rouge_tokens", "import torch, sklearn, scipy\n"
                      "from medhelm_core.metrics.rouge import rouge_tokens")


def _run(code: str) -> dict:
    import json
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_metrics_import_light_and_tokenize_as_the_plain_imports_do():
    for package in ("spacy", "nltk", "rouge_score", "torch", "sklearn", "scipy"):
        pytest.importorskip(package)
    light, plain = _run(SCORE), _run(PLAIN)
    assert light["imported"] == []
    assert plain["imported"] == ["scipy", "sklearn", "torch"]
    assert {k: v for k, v in light.items() if k != "imported"} == {k: v for k, v in plain.items() if k != "imported"}
    assert light["rouge"][:4] == ["dr", "smith", "s", "patient"] and light["rouge"].count("run") == 2  # stemmed


def test_hiding_fails_this_threads_imports_only_and_ends_with_the_block(tmp_path, monkeypatch):
    name = "medhelm_hidden_probe_pkg"
    (tmp_path / f"{name}.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    seen = {}
    with hiding(name), hiding("json", name):
        import json  # noqa: F401 - imported before the block: nothing to hide
        with pytest.raises(ModuleNotFoundError, match=name):
            __import__(name)

        def other():
            seen["module"] = __import__(name).VALUE

        t = threading.Thread(target=other)
        t.start()
        t.join()
        sys.modules.pop(name, None)
        with pytest.raises(ModuleNotFoundError, match=name):
            __import__(f"{name}")
    assert seen["module"] == 1
    assert __import__(name).VALUE == 1
    assert sum(type(f).__name__ == "_Hidden" for f in sys.meta_path) == 1   # installed once, never removed
    sys.modules.pop(name, None)
