"""Importing NLTK and spaCy without the packages they load only because they happen to be installed.

`import nltk` imports its scikit-learn and SciPy wrappers (`nltk.classify.scikitlearn`,
`nltk.metrics.association`) when those are installed, and spaCy's thinc imports torch: about 300 MB
and 2 s in each process that scores, for nothing our metrics call (the Porter stemmer, the punkt
sentence splitter, spaCy's rule-based English tokenizer). Inside `hiding(...)`, an import of one of
the named packages made by this thread fails as if it were not installed, which those libraries
handle by leaving the wrapper out. A package already imported is not hidden (nothing to save), and
other threads' imports are untouched.
"""
from __future__ import annotations

import importlib.abc
import sys
import threading
from contextlib import contextmanager
from typing import Iterator

NLTK_OPTIONAL = ("sklearn", "scipy")   # nltk's wrappers; the stemmer and sentence splitter use neither
SPACY_OPTIONAL = ("torch",)            # thinc's torch shims; the rule-based tokenizer never runs them


class _Hidden(importlib.abc.MetaPathFinder):
    """Installed once and never removed: another thread may be walking `sys.meta_path`, and taking
    an entry out of the list under it could make it skip the next finder."""

    def find_spec(self, fullname, path=None, target=None):
        names = getattr(_hidden, "names", None)
        if names and fullname.partition(".")[0] in names:
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)
        return None


_hidden = threading.local()   # the packages hidden from this thread now
_installed: list[_Hidden] = []
_install_lock = threading.Lock()


@contextmanager
def hiding(*packages: str) -> Iterator[None]:
    """Imports of `packages` (and their submodules) by this thread fail inside the block."""
    names = frozenset(p for p in packages if p not in sys.modules)
    if not names:
        yield
        return
    with _install_lock:
        if not _installed:
            _installed.append(_Hidden())
            sys.meta_path.insert(0, _installed[0])
    before = getattr(_hidden, "names", frozenset())
    _hidden.names = before | names
    try:
        yield
    finally:
        _hidden.names = before
