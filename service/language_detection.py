"""Which served language a text is in, for requests with `source: "auto"`.

py3langid (BSD-3-Clause, a 4.5 MB naive Bayes model over byte n-grams of 97 languages, numpy only)
restricted to the languages the server serves: a text can only be detected as a language it could
be translated from, and the restriction is what makes short texts reliable (measured on the
Multi30k test sets of every served language by `python benchmarks/language_detection.py`,
results/language_detection.md). A served language py3langid does not know cannot be detected and
is left out of the candidates.
"""
from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Detection:
    language: str      # as the server names it ("en", "pt-br")
    confidence: float  # 0..1, the detector's probability among the candidates


def _base(code: str) -> str:
    return code.replace("_", "-").split("-")[0]


class LanguageDetector:
    def __init__(self, languages: Sequence[str]) -> None:
        from py3langid.langid import MODEL_FILE, LanguageIdentifier

        self._identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
        known = set(self._identifier.nb_classes)
        # Served codes by the detector's (ISO 639-1) code; "pt" and "pt-br" both answer to "pt".
        self._served: dict[str, list[str]] = {}
        for code in sorted(set(languages)):
            if _base(code) in known:
                self._served.setdefault(_base(code), []).append(code)
        self.languages = sorted(code for codes in self._served.values() for code in codes)
        if len(self._served) > 1:
            self._identifier.set_languages(sorted(self._served))
        self._lock = threading.Lock()  # set_languages state is shared; classification reads it

    def rank(self, text: str) -> list[Detection]:
        """The candidates, most likely first."""
        if not self._served:
            return []
        if len(self._served) == 1:
            return [Detection(code, 1.0) for code in next(iter(self._served.values()))]
        with self._lock:
            ranked = self._identifier.rank(text)
        return [Detection(code, float(score)) for base, score in ranked for code in self._served.get(base, [])]

    def detect(self, text: str) -> Detection | None:
        """The most likely served language of `text`, or None when no served language is detectable."""
        ranked = self.rank(text)
        return ranked[0] if ranked else None
