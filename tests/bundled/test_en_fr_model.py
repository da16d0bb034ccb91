"""The bundled En->Fr model (models/en-fr: recipes/transformer-tiny-en-fr-cpu.json, 3,000 updates on
the CPU, plus an alignment head like the De->En model's, recipes/align-diagonal-head-tiny-en-fr.json) through the service: pinned answers and the BLEU of the same test_2016_flickr slice as the
En->De pins (tests/bundled/expectations.py), measured with this code on CPU at beam 5 in float32.
When the model is replaced on purpose, measure again and update the pins here (and
results/model_cards.md, README.md)."""
from __future__ import annotations

import pytest

from tests.bundled.expectations import BLEU_TOLERANCE, FLOAT_ATOL, REPO, served, slice_bleu, torch_settings, translations

MODEL_DIR = REPO / "models" / "en-fr"
PAIR = {"source": "en", "target": "fr"}
# The first 200 sentences of test_2016_flickr En->Fr (the whole test set: 58.27 cased, model_card.json).
BLEU_PIN = {"bleu": 57.88, "bleu_lowercase": 57.94}


@pytest.fixture(scope="module")
def client():
    with served(torch_settings().model_copy(update={"model_dirs": [MODEL_DIR]}), pairs=("en-fr",)) as test_client:
        yield test_client


def test_pinned_translations(client):
    answer = translations(client, {"text": ["Two dogs are playing in the snow.",
                                            "A little girl climbs into a wooden playhouse."], **PAIR})
    assert [nbest[0]["text"] for nbest in answer] == ["Deux chiens jouent dans la neige.",
                                                      "Une petite fille grimpe dans une maison en bois."]
    assert [nbest[0]["score"] for nbest in answer] == pytest.approx([-0.0559798, -0.2062523], abs=FLOAT_ATOL)


def test_its_card_is_listed_with_the_pair(client):
    (model,) = client.get("/models").json()["models"]
    assert (model["name"], model["pair"], model["domain"], model["kind"]) == ("en-fr", "en-fr", "captions", "vanilla+align")
    assert model["scores"]["test_2016_flickr"]["bleu"] == 58.27


def test_its_alignment_head_links_the_words_and_places_the_tags(client):
    # Its last layer's attention linked "la" to "snow." and "the" to nothing: 0-0 1-1 2-2 3-3 5-4 5-5.
    answer = translations(client, {"text": "Two dogs play in the snow.", "alignment": "token", **PAIR})
    assert answer[0][0]["alignment"]["pharaoh"] == "0-0 1-1 2-2 3-3 4-4 5-5"
    answer = translations(client, {"text": "A <b>little girl</b> climbs into a wooden playhouse.", "format": "html", **PAIR})
    assert answer[0][0]["text"] == "Une <b>petite fille</b> grimpe dans une maison en bois."


def test_bleu_of_the_slice(client):
    measured = slice_bleu(client, "en", "fr")
    assert measured == pytest.approx(BLEU_PIN, abs=BLEU_TOLERANCE)
