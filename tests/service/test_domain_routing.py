"""A request that names no model, on a pair served by models of several domains, goes to the model
its texts are likeliest under, by each model's SentencePiece unigram model (service/domain_routing.py).

The tokenizers here are written by hand (their pieces and log-probabilities), so every score below
is a sum one can check: "a dog" is "▁a" + "▁dog". The runtimes are FakeRuntimes; the software one
lower-cases and the caption one upper-cases, so the text says which model answered."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import sentencepiece as spm
from pydantic import ValidationError
from sentencepiece import sentencepiece_model_pb2 as pb

from service.app import create_app
from service.catalog import ServedModel
from service.domain_routing import likeliest
from model.text.domain_scorer import LENGTH_BINS
from service.runtime.domains import DomainScorer
from service.settings import Settings
from testing.fake_runtime import fake_runtimes
from tests.service.support import serving
from tests.service.test_model_choice import LowerCasing
from tests.service.test_request_errors import assert_field_error
from training.source_lengths import main as source_lengths_main

Piece = pb.ModelProto.SentencePiece
LETTERS = [("▁", -3.0), ("a", -3.5), ("d", -4.0), ("o", -4.5), ("g", -5.0), ("t", -5.0), ("h", -5.0), ("e", -5.0),
           ("f", -5.0), ("i", -5.0), ("l", -5.0)]
CAPTIONS = [("▁a", -1.0), ("▁dog", -2.0), ("▁the", -1.5), ("▁file", -9.0)]
SOFTWARE = [("▁a", -2.0), ("▁dog", -9.0), ("▁the", -1.5), ("▁file", -1.5)]


def hand_model(path: Path, words: list[tuple[str, float]], kind: int = pb.TrainerSpec.UNIGRAM) -> Path:
    """A SentencePiece model of exactly these pieces and scores (no training, no normalisation)."""
    model = pb.ModelProto()
    model.trainer_spec.model_type = kind
    model.trainer_spec.unk_id, model.trainer_spec.bos_id, model.trainer_spec.eos_id = 0, 1, 2
    model.trainer_spec.pad_id = -1
    model.normalizer_spec.name = "identity"
    model.normalizer_spec.add_dummy_prefix = True
    model.normalizer_spec.escape_whitespaces = True
    for text, score, kind_ in [("<unk>", 0.0, Piece.UNKNOWN), ("<s>", 0.0, Piece.CONTROL), ("</s>", 0.0, Piece.CONTROL)]:
        piece = model.pieces.add()
        piece.piece, piece.score, piece.type = text, score, kind_
    for text, score in words + LETTERS:
        piece = model.pieces.add()
        piece.piece, piece.score = text, score
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(model.SerializeToString())
    return path


def test_texts_score_the_sum_of_their_pieces_and_an_unknown_piece_the_smallest_score_minus_ten(tmp_path):
    scorer = DomainScorer(hand_model(tmp_path / "spm.model", CAPTIONS))
    assert scorer.log_likelihood(["a dog"]) == -1.0 - 2.0
    assert scorer.log_likelihood(["god"]) == -3.0 - 5.0 - 4.5 - 4.0  # ▁ g o d: no whole-word piece
    assert scorer.log_likelihood(["a ☃"]) == -1.0 - 3.0 + (-9.0 - 10.0)  # ▁a ▁ <unk>; the smallest score is ▁file's
    assert scorer.log_likelihood(["a dog", "god"]) == -3.0 - 16.5  # a request's texts together
    assert scorer.log_likelihood([""]) == 0.0


def test_with_its_training_lengths_a_text_also_scores_its_length_in_words(tmp_path):
    # Add-one smoothed over 65 bins: 35 texts counted, so n words score log((count[n] + 1) / 100).
    lengths = [0] * LENGTH_BINS
    lengths[1], lengths[2], lengths[64] = 9, 24, 2
    scorer = DomainScorer(hand_model(tmp_path / "spm.model", CAPTIONS), lengths)
    assert scorer.log_likelihood(["a dog"]) == pytest.approx(-3.0 + math.log(25 / 100), abs=1e-12)
    assert scorer.log_likelihood(["dog"]) == pytest.approx(-2.0 + math.log(10 / 100), abs=1e-12)
    assert scorer.log_likelihood(["a dog", "dog"]) == pytest.approx(-5.0 + math.log(25 / 100) + math.log(10 / 100), abs=1e-12)
    assert scorer.log_likelihood([" ".join(["a"] * 70)]) == pytest.approx(-70.0 + math.log(3 / 100), abs=1e-9)  # the last bin
    assert scorer.log_likelihood(["a a a"]) == pytest.approx(-3.0 + math.log(1 / 100), abs=1e-12)   # never seen: add-one
    with pytest.raises(ValueError, match="65 counts"):
        DomainScorer(tmp_path / "spm.model", [1, 2])


def test_a_one_word_label_goes_to_the_domain_whose_texts_are_that_short(tmp_path):
    # "dog" alone is likelier as caption words (-2 against -9), but captions are never one word long:
    # 1,000 captions of 2 words against 1,000 software texts of 1 word.
    captions = DomainScorer(hand_model(tmp_path / "c.model", CAPTIONS), [0, 0, 1000] + [0] * (LENGTH_BINS - 3))
    software = DomainScorer(hand_model(tmp_path / "s.model", SOFTWARE), [0, 1000] + [0] * (LENGTH_BINS - 2))
    # -2 + log(1/1065) = -8.97 against -9 + log(1001/1065) = -9.06: still the captions, by a hair ...
    assert likeliest([captions, software], ["dog"]) == 0
    # ... and "the" (-1.5 each) is a one-word text: the software model's.
    assert likeliest([captions, software], ["the"]) == 1
    assert likeliest([captions, software], ["a dog"]) == 0
    # Lengths count only where every candidate has them: without, "the" ties and the first answers.
    pieces_only = DomainScorer(hand_model(tmp_path / "p.model", SOFTWARE))
    assert likeliest([captions, pieces_only], ["the"]) == 0
    assert captions.log_likelihood(["the"], lengths=False) == -1.5


def test_the_card_gives_the_scorer_its_lengths_and_source_lengths_writes_them(tmp_path, capsys):
    directory = hand_model(tmp_path / "m" / "spm.model", CAPTIONS).parent
    assert DomainScorer.of_model_dir(directory).log_likelihood(["the"]) == -1.5  # no card: pieces alone
    (directory / "manifest.json").write_text(json.dumps({"training": {"recipe": {
        "data_dir": str(tmp_path / "data"), "train_split": "train", "source_lang": "en", "target_lang": "de",
        "train_mix": [{"data_dir": str(tmp_path / "mix"), "split": "train", "copies": 2}]}}}))
    for folder, lines in (("data", ["the", "a dog", "", "the file is here"]), ("mix", ["a"])):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "train.en").write_text("".join(line + "\n" for line in lines))
        (tmp_path / folder / "train.de").write_text("".join("x\n" for _ in lines))
    (directory / "model_card.json").write_text(json.dumps({"domain": "captions"}))
    assert source_lengths_main([str(directory)]) == 0
    card = json.loads((directory / "model_card.json").read_text())
    # "" 0 words; "the" and "a" (twice, as train_mix copies it) 1; "a dog" 2; "the file is here" 4.
    assert card["domain"] == "captions" and card["source_lengths"][:6] == [1, 3, 1, 0, 1, 0]
    assert sum(card["source_lengths"]) == 6
    assert DomainScorer.of_model_dir(directory).log_likelihood(["the"]) == pytest.approx(
        -1.5 + math.log(4 / (6 + LENGTH_BINS)), abs=1e-12)
    assert source_lengths_main([str(tmp_path / "none")]) == 2
    assert capsys.readouterr().err.strip().endswith(f"model_dir: no manifest.json in {tmp_path / 'none'}")
    assert source_lengths_main([str(directory), "--recipe", str(tmp_path / "r.json")]) == 2
    (directory / "model_card.json").write_text(json.dumps({"source_lengths": [1, 2]}))
    assert DomainScorer.of_model_dir(directory).log_likelihood(["the"]) == -1.5  # a malformed card: pieces alone


def test_a_model_without_a_unigram_tokenizer_has_no_scorer(tmp_path):
    assert DomainScorer.of_model_dir(tmp_path) is None  # no spm.model
    hand_model(tmp_path / "bpe" / "spm.model", CAPTIONS, kind=pb.TrainerSpec.BPE)
    assert DomainScorer.of_model_dir(tmp_path / "bpe") is None  # BPE scores are merge ranks
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "spm.model").write_bytes(b"not a model")
    assert DomainScorer.of_model_dir(tmp_path / "junk") is None
    assert isinstance(DomainScorer.of_model_dir(hand_model(tmp_path / "ok" / "spm.model", CAPTIONS).parent), DomainScorer)


def test_the_likeliest_scorer_wins_and_a_tie_goes_to_the_first(tmp_path):
    captions = DomainScorer(hand_model(tmp_path / "c.model", CAPTIONS))
    software = DomainScorer(hand_model(tmp_path / "s.model", SOFTWARE))
    assert likeliest([captions, software], ["a dog"]) == 0         # -3 against -11
    assert likeliest([captions, software], ["the file"]) == 1      # -10.5 against -3
    assert likeliest([captions, software], ["a dog", "the file"]) == 0  # -13.5 against -14
    assert likeliest([captions, software], ["the"]) == 0           # -1.5 each: the first listed
    assert likeliest([software, captions], ["the"]) == 0


@pytest.fixture
def model_dirs(tmp_path):
    """en-de-captions (no card: domain "general"), en-de-software (card: "software"), a second
    general En->De model listed after them, de-en-captions; each with a hand-written tokenizer."""
    hand_model(tmp_path / "en-de-captions" / "spm.model", CAPTIONS)
    hand_model(tmp_path / "en-de-software" / "spm.model", SOFTWARE)
    (tmp_path / "en-de-software" / "model_card.json").write_text(json.dumps({"domain": "software"}))
    hand_model(tmp_path / "en-de-general2" / "spm.model", [(word, score + 5.0) for word, score in CAPTIONS])
    hand_model(tmp_path / "de-en-captions" / "spm.model", CAPTIONS)
    return [tmp_path / name for name in ("en-de-captions", "en-de-software", "en-de-general2", "de-en-captions")]


def factory(settings: Settings) -> list[ServedModel]:
    """fake_runtimes with each directory's scorer, as service.app loads them; the software one lower-cases."""
    return [ServedModel(model.card, LowerCasing("en", "de") if model.name == "en-de-software" else model.runtime,
                        DomainScorer.of_model_dir(path))
            for model, path in zip(fake_runtimes(settings), settings.model_dirs)]


def app_for(model_dirs, **overrides):
    return create_app(Settings(model_dirs=model_dirs, warmup=False, **overrides), runtime_factory=factory)


def translate(client, text, **body):
    return client.post("/translate", json={"text": text, "source": "en", "target": "de", **body})


def answered(response) -> tuple[str, list[str]]:
    assert response.status_code == 200, response.text
    body = response.json()
    return body["model"], [nbest[0]["text"] for nbest in body["translations"]]


def test_without_a_model_the_texts_choose_among_the_pairs_domains(model_dirs):
    with serving(app_for(model_dirs)) as client:
        assert answered(translate(client, "a dog")) == ("en-de-captions", ["DOG A"])
        assert answered(translate(client, "the file")) == ("en-de-software", ["file the"])
        # One model answers a request: the one its texts together are likeliest under.
        assert answered(translate(client, ["a dog", "the file"])) == ("en-de-captions", ["DOG A", "FILE THE"])
        assert answered(translate(client, "the")) == ("en-de-captions", ["THE"])  # a tie: the first listed
        # en-de-general2 scores every text higher, but its domain is the first model's: never chosen by its texts.
        assert all(not call for call in [m.runtime.calls for m in client.app.state.lifecycle.translator.models
                                          if m.name == "en-de-general2"])
        # A name still chooses; the other pair has one domain and so its first model.
        assert answered(translate(client, "a dog", model="en-de-software")) == ("en-de-software", ["dog a"])
        assert answered(translate(client, "a dog", model="en-de-general2"))[0] == "en-de-general2"
        back = client.post("/translate", json={"text": "the file", "source": "de", "target": "en"})
        assert back.json()["model"] == "de-en-captions"
        assert answered(client.post("/translate", json={"text": "the file", "source": "de", "target": "en",
                                                        "model": "auto"}))[0] == "de-en-captions"
        models = client.get("/models").json()
        metrics = client.get("/metrics").text
    # Three requests chose the caption model, one the software model; no choice on de-en (one domain).
    assert 'phrasal_model_choices_total{model="en-de-captions",pair="en-de"} 3.0' in metrics
    assert 'phrasal_model_choices_total{model="en-de-software",pair="en-de"} 1.0' in metrics
    assert [line.split("{")[1] for line in metrics.splitlines() if line.startswith("phrasal_model_choices_total")] == [
        'model="en-de-captions",pair="en-de"} 3.0', 'model="en-de-software",pair="en-de"} 1.0']
    assert models["defaults"] == {"en-de": "auto", "de-en": "de-en-captions"}
    assert [(m["name"], m["default"]) for m in models["models"]] == [
        ("en-de-captions", True), ("en-de-software", True), ("en-de-general2", False), ("de-en-captions", True)]


def test_a_default_named_in_the_settings_answers_unless_a_request_asks_for_auto(model_dirs):
    with serving(app_for(model_dirs, default_models={"en-de": "en-de-software"})) as client:
        assert answered(translate(client, "a dog")) == ("en-de-software", ["dog a"])
        assert answered(translate(client, "a dog", model="auto")) == ("en-de-captions", ["DOG A"])
        assert answered(translate(client, "the file", model="auto")) == ("en-de-software", ["file the"])
        models = client.get("/models").json()
    assert models["defaults"] == {"en-de": "en-de-software", "de-en": "de-en-captions"}
    assert [m["name"] for m in models["models"] if m["default"]] == ["en-de-software", "de-en-captions"]
    with serving(app_for(model_dirs, default_models={"en-de": "auto"})) as client:
        assert answered(translate(client, "the file")) == ("en-de-software", ["file the"])
        assert client.get("/models").json()["defaults"]["en-de"] == "auto"


def test_align_and_the_libretranslate_api_are_routed_like_translate(model_dirs):
    with serving(app_for(model_dirs)) as client:
        body = {"text": "the file", "translation": "die Datei", "source": "en", "target": "de"}
        assert client.post("/align", json=body).json()["model"] == "en-de-software"
        assert client.post("/align", json={**body, "model": "auto"}).json()["model"] == "en-de-software"
        assert client.post("/align", json={**body, "text": "a dog"}).json()["model"] == "en-de-captions"
        assert client.post("/align", json={**body, "model": "en-de-captions"}).json()["model"] == "en-de-captions"
    with serving(app_for(model_dirs, default_models={"en-de": "en-de-captions"})) as client:
        assert client.post("/align", json=body).json()["model"] == "en-de-captions"  # a named default
        assert client.post("/align", json={**body, "model": "auto"}).json()["model"] == "en-de-software"
    with serving(app_for(model_dirs)) as client:
        libre = client.post("/libretranslate/translate", json={"q": ["a dog", "the file"], "source": "en", "target": "de"})
        assert libre.json() == {"translatedText": ["DOG A", "FILE THE"]}
        libre = client.post("/libretranslate/translate", json={"q": "the file", "source": "en", "target": "de"})
        assert libre.json() == {"translatedText": "file the"}


def test_auto_is_no_model_name_and_names_only_served_pairs(model_dirs, tmp_path):
    with pytest.raises(ValidationError, match="model_dirs: a model may not be named 'auto'"):
        Settings(model_dirs=["m/en-de", "m/auto"])
    # "auto" names no model, so it is not checked against the served names; its pair is checked at load.
    Settings(model_dirs=model_dirs, default_models={"en-de": "auto"})
    with serving(app_for(model_dirs, default_models={"en-fr": "auto"})) as client:
        response = client.get("/health/ready")
    assert response.status_code == 503
    assert response.json()["reason"] == "model load failed: ValueError: default_models: en-fr is not served (served: de-en, en-de)"
    with serving(app_for(model_dirs)) as client:
        assert_field_error(translate(client, "a dog", model="de-en-auto"), "model", "no model named 'de-en-auto'")
        message = assert_field_error(translate(client, "a dog", model="en-de-x"), "model")
    assert message.endswith("en-de is served by: en-de-captions (default), en-de-software (default), en-de-general2")
