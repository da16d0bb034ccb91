"""POST /align: word alignments of translations the client already has. Each method's alignment is
the runtime's forced alignment of the pair (bidirectional: combined with the reverse model's), the
server default applies when none is named, blank sides give words without links, and every bad
input is a 422 naming the field."""
from __future__ import annotations

import pytest
import torch

from model.alignments.bidirectional import bidirectional_alignment
from model.model_dir import load_model_dir, save_model_dir
from service.alignment_flags import alignment_flags
from service.app import create_app
from service.runtime.torch_runtime import TorchRuntime
from service.schemas import AlignmentOut
from service.settings import Settings
from tests.helpers import tiny_model
from tests.service.support import serving
from tests.service.test_alignment_methods import HEAD, _randomised

pytestmark = pytest.mark.usefixtures("one_thread")

TEXTS = ["Two dogs play in the snow.", "A man rides a bike."]
TRANSLATIONS = ["Zwei Hunde spielen im Schnee.", "Ein Mann fährt Fahrrad."]


@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory, tiny_spm):
    root = tmp_path_factory.mktemp("align")
    forward = save_model_dir(root / "en-de", _randomised(tiny_model(supervised_alignment=HEAD)), tiny_spm,
                             source_lang="en", target_lang="de")
    reverse = save_model_dir(root / "de-en", _randomised(tiny_model(seed=5, supervised_alignment=HEAD)), tiny_spm,
                             source_lang="de", target_lang="en")
    plain = save_model_dir(root / "plain", tiny_model(seed=2), tiny_spm, source_lang="en", target_lang="de")
    return {"en-de": forward, "de-en": reverse, "plain": plain}


@pytest.fixture(scope="module")
def client(model_dirs):
    settings = Settings(model_dirs=[model_dirs["en-de"], model_dirs["de-en"]], device="cpu", inference_process=False)
    with serving(create_app(settings)) as client:
        yield client


def _align(client, **extra):
    body = {"text": TEXTS, "translation": TRANSLATIONS, "source": "en", "target": "de", **extra}
    return client.post("/align", json=body)


def _forced(path, pairs, method):
    return TorchRuntime(load_model_dir(path), torch.device("cpu")).force_align(pairs, method)


def _out(alignments):
    return [AlignmentOut.from_alignment(a, alignment_flags(a)).model_dump() for a in alignments]


def test_each_method_is_the_runtimes_forced_alignment(client, model_dirs):
    pairs = list(zip(TEXTS, TRANSLATIONS))
    seen = set()
    for method in ("attention", "shift", "supervised"):
        response = _align(client, alignment_method=method)
        assert response.status_code == 200, response.text
        body = response.json()
        assert (body["source"], body["target"], body["alignment_method"]) == ("en", "de", method)
        assert body["alignments"] == _out(_forced(model_dirs["en-de"], pairs, method))
        seen.add(tuple(a["pharaoh"] for a in body["alignments"]))
    assert len(seen) == 3  # the methods disagree on these random models, so the test tells them apart


def test_bidirectional_and_auto_combine_the_forward_head_with_the_reverse_models(client, model_dirs):
    pairs = list(zip(TEXTS, TRANSLATIONS))
    forward = _forced(model_dirs["en-de"], pairs, "supervised")
    backward = _forced(model_dirs["de-en"], [(t, s) for s, t in pairs], "supervised")
    expected = _out([bidirectional_alignment(f, b) for f, b in zip(forward, backward)])
    assert _align(client, alignment_method="bidirectional").json()["alignments"] == expected
    answer = _align(client).json()  # both directions served with a head: "auto" is bidirectional
    assert answer["alignment_method"] == "bidirectional" and answer["alignments"] == expected
    assert expected != _out(forward)


def test_one_text_gives_one_alignment(client, model_dirs):
    response = client.post("/align", json={"text": TEXTS[0], "translation": TRANSLATIONS[0], "source": "en",
                                           "target": "de", "alignment_method": "attention"})
    assert response.json()["alignments"] == _out(_forced(model_dirs["en-de"], [(TEXTS[0], TRANSLATIONS[0])],
                                                         "attention"))


def test_a_blank_side_gives_the_other_sides_words_and_no_links(client):
    body = {"text": ["", "Two dogs."], "translation": ["Zwei Hunde.", ""], "source": "en", "target": "de"}
    first, second = client.post("/align", json=body).json()["alignments"]
    assert (first["source_words"], [w["text"] for w in first["target_words"]]) == ([], ["Zwei", "Hunde."])
    assert (first["links"], first["pharaoh"]) == ([[], []], "")
    assert [f["word"] for f in first["possible_insertions"]] == [0, 1]
    assert ([w["text"] for w in second["source_words"]], second["target_words"], second["pharaoh"]) == (
        ["Two", "dogs."], [], "")
    assert [f["word"] for f in second["possible_omissions"]] == [0, 1]


@pytest.mark.parametrize("body, field, message", [
    ({"text": TEXTS, "translation": TRANSLATIONS[:1]}, "translation",
     "must hold one translation per text: 2 texts, 1 translations"),
    ({"text": TEXTS[0], "translation": TRANSLATIONS}, "translation", "must be a string like text"),
    ({"text": TEXTS, "translation": TRANSLATIONS[0]}, "translation", "must be a list like text"),
    ({"text": TEXTS, "translation": [TRANSLATIONS[0], 7]}, "translation", "item 1 must be a string, got int"),
    ({"text": TEXTS, "translation": TRANSLATIONS, "target": "fr"}, "target",
     "language pair en-fr is not served; served pairs: de-en, en-de"),
    ({"text": TEXTS, "translation": [TRANSLATIONS[0], "Hund " * 200]}, "translation.1",
     "has 200 tokens; at most 126 per text (max_source_tokens)"),
    ({"text": ["dog " * 200, TEXTS[1]], "translation": TRANSLATIONS}, "text.0",
     "has 200 tokens; at most 126 per text (max_source_tokens)"),
    ({"text": TEXTS, "translation": TRANSLATIONS, "alignment_method": "diagonal"}, "alignment_method", None),
])
def test_bad_input_is_a_422_naming_the_field(client, body, field, message):
    response = client.post("/align", json={"source": "en", "target": "de", **body})
    assert response.status_code == 422
    detail = response.json()["detail"][0]
    assert detail["field"] == field
    if message is not None:
        assert detail["msg"] == message


def test_a_method_the_model_cannot_give_is_a_422_listing_those_it_can(model_dirs):
    settings = Settings(model_dirs=[model_dirs["plain"]], device="cpu", inference_process=False)
    with serving(create_app(settings)) as client:
        for method, message in (
            ("supervised", "'supervised' is not offered by the torch model serving en-de; it offers: attention, shift"),
            ("bidirectional", "'bidirectional' needs the reverse pair de-en served (served: en-de); en-de offers: "
                              "attention, shift"),
        ):
            response = _align(client, alignment_method=method)
            assert response.status_code == 422
            assert response.json()["detail"][0]["field"] == "alignment_method"
            assert response.json()["detail"][0]["msg"] == message
        assert _align(client).json()["alignment_method"] == "attention"  # the model's own default
