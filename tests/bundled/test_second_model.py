"""Two real models of one pair served together: models/en-de (the default, listed first) and a
second En→De model under another name and domain, a test-only copy of models/en-de-align (other
weights) in tmp_path with a model card saying "software": a second model whose answers are known
exactly (tests/bundled/test_software_model.py checks the shipped software model).

Without "model" the default answers, exactly as the pins of models/en-de say; with
"model": "en-de-software" the copy answers, exactly as models/en-de-align does when served alone.
The two translate alike (en-de-align is models/en-de plus a supervised alignment head), so the
word alignments tell them apart: the copy's come from its head, the default's from attention."""
from __future__ import annotations

import json
import shutil

import pytest

from tests.bundled.expectations import MODEL_DIR, REPO, isolated_settings, load_expected, served, within

SECOND = REPO / "models" / "en-de-align"
CARD = {"domain": "software", "scores": {"software_test": {"bleu": None}}}


@pytest.fixture(scope="module")
def second_dir(tmp_path_factory):
    copy = tmp_path_factory.mktemp("models") / "en-de-software"
    shutil.copytree(SECOND, copy)
    (copy / "model_card.json").write_text(json.dumps(CARD))
    return copy


def settings(*model_dirs):
    return isolated_settings(model_dirs=list(model_dirs), device="cpu", backend="torch", inference_process=False,
                             warmup=False)


def test_the_named_model_answers_and_without_a_name_the_default(second_dir):
    case = load_expected()["cases"][1]  # README's second example: 2-best with token alignments
    body = case["request"]
    with served(settings(second_dir)) as alone:  # what the second model answers by itself
        expected_second = alone.post("/translate", json=body).json()["translations"]
    with served(settings(MODEL_DIR, second_dir)) as client:
        default = client.post("/translate", json=body).json()
        chosen = client.post("/translate", json={**body, "model": "en-de-software"}).json()
        models = client.get("/models").json()["models"]
    assert default["model"] == "en-de"
    assert default["translations"] == within(case["translations"])
    assert chosen["model"] == "en-de-software"
    assert chosen["translations"] == within(expected_second)
    assert [h["text"] for h in chosen["translations"][0]] == [h["text"] for h in default["translations"][0]]
    assert chosen["translations"][0][0]["alignment"]["links"] != default["translations"][0][0]["alignment"]["links"]
    bundled = json.loads((MODEL_DIR / "model_card.json").read_text())
    assert {m["precision"] for m in models} == {"float32"}  # isolated_settings: the pins are float32
    assert [(m["name"], m["domain"], m["scores"], m["default"], m["kind"]) for m in models] == [
        ("en-de", bundled["domain"], bundled["scores"], True, "vanilla"),
        # Its card says "software", so the texts choose between the two (service/domain_routing.py):
        # both may answer; with one tokenizer every text scores alike, and the first listed answers.
        ("en-de-software", "software", CARD["scores"], True, "vanilla+align"),
    ]
