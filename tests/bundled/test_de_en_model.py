"""The bundled De->En model (models/de-en-align) through the service: pinned answers and the BLEU
of the same test_2016_flickr slice as the En->De pins (tests/bundled/expectations.py), measured
with this code on CPU at beam 5. When the model is replaced on purpose, measure again and update
the pins here (and results/alignment.md, README.md)."""
from __future__ import annotations

import pytest

from tests.bundled.expectations import BLEU_TOLERANCE, FLOAT_ATOL, REPO, served, slice_bleu, torch_settings, translations

MODEL_DIR = REPO / "models" / "de-en-align"
PAIR = {"source": "de", "target": "en"}
# The first 200 sentences of test_2016_flickr De->En (the whole test set: 37.82 cased, results/alignment.md).
BLEU_PIN = {"bleu": 36.58, "bleu_lowercase": 36.82}


@pytest.fixture(scope="module")
def client():
    with served(torch_settings().model_copy(update={"model_dirs": [MODEL_DIR]}), pairs=("de-en",)) as test_client:
        yield test_client


def test_pinned_translations(client):
    answer = translations(client, {"text": ["Zwei Hunde spielen im Schnee.",
                                            "Ein kleines Mädchen klettert in ein Spielhaus."], **PAIR})
    assert [nbest[0]["text"] for nbest in answer] == ["Two dogs play in the snow.",
                                                      "A little girl is climbing a game in a house."]
    assert [nbest[0]["score"] for nbest in answer] == pytest.approx([-0.1984371, -0.6714025], abs=FLOAT_ATOL)


def test_its_supervised_head_links_the_words(client):
    # "im" -> "in the": the head reads the contraction as both words.
    answer = translations(client, {"text": "Zwei Hunde spielen im Schnee.", "alignment": "token", **PAIR})
    assert answer[0][0]["alignment"]["pharaoh"] == "0-0 1-1 2-2 3-3 3-4 4-5"


def test_bleu_of_the_slice(client):
    measured = slice_bleu(client, "de", "en")
    assert measured == pytest.approx(BLEU_PIN, abs=BLEU_TOLERANCE)
