"""Source-language detection among the served languages (service/language_detection.py)."""
from __future__ import annotations

import numpy as np
import pytest

from service.language_detection import LanguageDetector


@pytest.fixture(scope="module")
def detector():
    return LanguageDetector(["de", "en", "xx"])


def test_only_served_languages_the_detector_knows_are_candidates(detector):
    assert detector.languages == ["de", "en"]
    ranked = detector.rank("Zwei Hunde spielen im Schnee.")
    assert [d.language for d in ranked] == ["de", "en"]
    # py3langid normalises in float32: two probabilities sum to 1 within two of its rounding steps.
    assert sum(d.confidence for d in ranked) == pytest.approx(1.0, abs=2 * float(np.finfo(np.float32).eps))


@pytest.mark.parametrize("text, language", [
    ("A person in a hard hat on the top of a building.", "en"),
    ("Ein Mann mit Schutzhelm steht auf dem Dach.", "de"),
    ("Two dogs", "en"),
    ("Zwei Hunde", "de"),
])
def test_texts_are_detected_as_their_language(detector, text, language):
    assert detector.detect(text).language == language


def test_one_served_language_is_certain_and_none_is_no_answer():
    assert [(d.language, d.confidence) for d in LanguageDetector(["en"]).rank("Zwei Hunde")] == [("en", 1.0)]
    assert LanguageDetector(["xx"]).detect("anything") is None
    assert [d.language for d in LanguageDetector(["pt-br", "en"]).rank("Dois cães brincam na neve.")] == ["pt-br", "en"]
