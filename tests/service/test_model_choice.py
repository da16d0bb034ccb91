"""Several models per language pair: each named (its directory's name) with its domain, scores and
kind; a request's "model" picks one, the pair's default answers without it; GET /models lists
them; the settings that name models are checked before anything loads.

The models here are FakeRuntimes served under the names and cards of directories in tmp_path: the
"software" one lower-cases what the caption one upper-cases, so the text says which one answered
as well as the response's "model" does."""
from __future__ import annotations

import json
import threading
from pathlib import Path
from collections.abc import Sequence

import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError

from service.__main__ import main
from service.app import create_app
from model.model_card import ModelCard, model_kind, read_card
from service.catalog import ServedModel
from service.runtime.base import DecodingOptions, RuntimeProblem, Translation
from service.settings import Settings
from testing.fake_runtime import FakeRuntime, fake_runtimes
from tests.service.support import serving
from tests.service.test_request_errors import assert_field_error

SOFTWARE_SCORES = {"software_test": {"bleu": 31.5, "chrf": 58.25, "placeholders": None}}


class LowerCasing(FakeRuntime):
    """The fake translation lower-cased: another model of the same pair, with its own output."""

    def translate(self, texts: Sequence[str], options: DecodingOptions) -> list[list[Translation]]:
        return [[Translation(h.text.lower(), h.score, h.alignment, h.phrase_map) for h in nbest]
                for nbest in super().translate(texts, options)]


@pytest.fixture
def model_dirs(tmp_path):
    """en-de-captions (no card), en-de-software (a card: its domain and scores), de-en-captions."""
    (tmp_path / "en-de-software").mkdir()
    (tmp_path / "en-de-software" / "model_card.json").write_text(
        json.dumps({"domain": "software", "scores": SOFTWARE_SCORES}))
    return [tmp_path / "en-de-captions", tmp_path / "en-de-software", tmp_path / "de-en-captions"]


def factory(settings: Settings) -> list[ServedModel]:
    """fake_runtimes, but the software model's runtime lower-cases."""
    return [ServedModel(model.card, LowerCasing("en", "de")) if model.name == "en-de-software" else model
            for model in fake_runtimes(settings)]


def app_for(model_dirs, **overrides):
    settings = Settings(model_dirs=model_dirs, warmup=False, **overrides)
    return create_app(settings, runtime_factory=factory)


def served_models(client) -> dict[str, FakeRuntime]:
    return {model.name: model.runtime for model in client.app.state.lifecycle.translator.models}


def translate(client, **body):
    return client.post("/translate", json={"text": "a small dog", "source": "en", "target": "de", **body})


def test_without_model_the_pairs_first_model_answers_and_with_model_the_one_named(model_dirs):
    with serving(app_for(model_dirs)) as client:
        default = translate(client)
        assert default.status_code == 200, default.text
        assert default.json() == {"source": "en", "target": "de", "model": "en-de-captions",
                                  "translations": [[{"text": "DOG SMALL A", "score": -0.5}]]}
        chosen = translate(client, model="en-de-software")
        assert chosen.status_code == 200, chosen.text
        assert chosen.json() == {"source": "en", "target": "de", "model": "en-de-software",
                                 "translations": [[{"text": "dog small a", "score": -0.5}]]}
        assert translate(client, model=None).json()["model"] == "en-de-captions"
        # Each text went to the model that answered it, and only there.
        runtimes = served_models(client)
        assert [call[0] for call in runtimes["en-de-captions"].calls] == [["a small dog"], ["a small dog"]]
        assert [call[0] for call in runtimes["en-de-software"].calls] == [["a small dog"]]
        assert runtimes["de-en-captions"].calls == []
        # The other direction has its own default.
        back = client.post("/translate", json={"text": "ein Hund", "source": "de", "target": "en"})
        assert back.json()["model"] == "de-en-captions"


def test_the_default_models_setting_chooses_the_default(model_dirs):
    with serving(app_for(model_dirs, default_models={"en-de": "en-de-software"})) as client:
        response = translate(client)
        assert (response.json()["model"], response.json()["translations"][0][0]["text"]) == ("en-de-software", "dog small a")
        assert translate(client, model="en-de-captions").json()["translations"][0][0]["text"] == "DOG SMALL A"


def test_a_source_detected_from_auto_is_answered_by_the_model_named(model_dirs):
    with serving(app_for(model_dirs)) as client:
        response = translate(client, text="Two dogs play in the snow.", source="auto", model="en-de-software")
        assert response.status_code == 200, response.text
        assert (response.json()["source"], response.json()["model"]) == ("en", "en-de-software")
        assert response.json()["translations"][0][0]["text"] == "snow. the in play dogs two"


def test_an_unknown_model_or_one_of_another_pair_is_a_422_naming_the_field_and_the_pairs_models(model_dirs):
    with serving(app_for(model_dirs)) as client:
        message = assert_field_error(translate(client, model="en-de-legal"), "model")
        assert message == ("model: no model named 'en-de-legal' is served; en-de is served by: "
                           "en-de-captions (default), en-de-software")
        message = assert_field_error(translate(client, model="de-en-captions"), "model")
        assert message == ("model: 'de-en-captions' serves de-en, not en-de; en-de is served by: "
                           "en-de-captions (default), en-de-software")
        # A name no model could have is refused by the schema, before any lookup.
        assert_field_error(translate(client, model="en de"), "model")
        assert_field_error(translate(client, model=""), "model")
        # The pair is checked first: an unserved pair is the pair's fault whatever the model.
        assert_field_error(translate(client, target="fr", model="en-de-software"), "target", "en-fr")
        assert all(not runtime.calls for runtime in served_models(client).values())


def test_align_takes_the_model_too(model_dirs):
    with serving(app_for(model_dirs)) as client:
        body = {"text": "a small dog", "translation": "DOG SMALL A", "source": "en", "target": "de"}
        default = client.post("/align", json=body)
        chosen = client.post("/align", json={**body, "model": "en-de-software"})
        assert (default.status_code, chosen.status_code) == (200, 200), chosen.text
        assert (default.json()["model"], chosen.json()["model"]) == ("en-de-captions", "en-de-software")
        # Apart from the model, the same answer (the two fakes align alike).
        assert {**chosen.json(), "model": None} == {**default.json(), "model": None}
        assert_field_error(client.post("/align", json={**body, "model": "de-en-captions"}), "model", "serves de-en")


def test_the_models_route_lists_name_pair_domain_scores_default_and_kind(model_dirs):
    with serving(app_for(model_dirs, model_domains={"en-de-captions": "captions"})) as client:
        response = client.get("/models")
    assert response.status_code == 200
    common = {"kind": None, "backend": "fake", "precision": None}  # no config.json in these directories; fakes name no precision
    assert response.json() == {"models": [
        {"name": "en-de-captions", "pair": "en-de", "source": "en", "target": "de", "domain": "captions",
         "scores": None, "default": True, **common},
        {"name": "en-de-software", "pair": "en-de", "source": "en", "target": "de", "domain": "software",
         "scores": SOFTWARE_SCORES, "default": False, **common},
        {"name": "de-en-captions", "pair": "de-en", "source": "de", "target": "en", "domain": "general",
         "scores": None, "default": True, **common},
    ], "defaults": {"en-de": "en-de-captions", "de-en": "de-en-captions"}}  # fakes have no tokenizer: no "auto"


def test_the_models_route_is_503_until_the_models_load(model_dirs):
    release = threading.Event()
    app = create_app(Settings(model_dirs=model_dirs, warmup=False),
                     runtime_factory=lambda settings: release.wait(10) and factory(settings))
    with TestClient(app) as client:  # the lifespan runs; the load waits for the release
        assert client.get("/models").status_code == 503
        release.set()
        client.portal.call(app.state.lifecycle.wait_loaded)
        assert [model["name"] for model in client.get("/models").json()["models"]] == [
            "en-de-captions", "en-de-software", "de-en-captions"]


def test_the_kind_is_read_from_the_config_and_the_domain_and_scores_from_the_card(tmp_path):
    assert model_kind("models/en-de") == "vanilla"
    assert model_kind("models/en-de-align2") == "vanilla+align"
    card = json.loads(Path("models/de-en-align/model_card.json").read_text())
    assert read_card("models/de-en-align") == ModelCard(name="de-en-align", domain=card["domain"],
                                                        scores=card["scores"], kind="vanilla+align")
    # Without a card: the domain setting, else "general", and no scores (never made up).
    assert read_card(tmp_path / "en-de-x", {"en-de-x": "legal"}) == ModelCard(name="en-de-x", domain="legal")
    assert read_card(tmp_path / "en-de-y").domain == "general"


def test_a_malformed_model_card_is_an_error_naming_the_file_and_the_key(tmp_path):
    (tmp_path / "en-de-x").mkdir()
    card = tmp_path / "en-de-x" / "model_card.json"
    card.write_text(json.dumps({"domain": "software", "scores": {"software_test": {"bleu": "high"}}}))
    with pytest.raises(ValueError, match=r"model_card.json: scores.software_test.bleu: "):
        read_card(tmp_path / "en-de-x")
    card.write_text(json.dumps({"domian": "software"}))
    with pytest.raises(ValueError, match=r"model_card.json: domian: Extra inputs are not permitted$"):
        read_card(tmp_path / "en-de-x")


def test_settings_refuse_two_models_of_one_name_and_a_default_or_domain_not_served():
    with pytest.raises(ValidationError, match="model_dirs: two models are named 'en-de' \\(a/en-de and b/en-de\\)"):
        Settings(model_dirs=["a/en-de", "b/en-de"])
    with pytest.raises(ValidationError, match="default_models: en-de names 'en-de-x', which is not served "
                                              "\\(model_dirs: en-de, de-en\\)"):
        Settings(model_dirs=["m/en-de", "m/de-en"], default_models={"en-de": "en-de-x"})
    with pytest.raises(ValidationError, match="model_domains: 'x' is not served"):
        Settings(model_dirs=["m/en-de"], model_domains={"x": "software"})
    with pytest.raises(ValidationError, match="default_models: 'ende' is not a language pair"):
        Settings(model_dirs=["m/en-de"], default_models={"ende": "en-de"})


def test_main_reports_a_default_not_served_in_one_line_and_exits_2(monkeypatch, capsys):
    monkeypatch.setenv("PHRASAL_MODEL_DIRS", '["models/en-de-align2", "models/de-en-align"]')
    monkeypatch.setenv("PHRASAL_DEFAULT_MODELS", '{"en-de": "en-de-software"}')
    assert main([]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "default_models: en-de names 'en-de-software', which is not served" in err


def test_a_default_of_another_pair_fails_the_load_with_the_reason(model_dirs):
    with serving(app_for(model_dirs, default_models={"en-de": "de-en-captions"})) as client:
        response = client.get("/health/ready")
    assert response.status_code == 503
    assert response.json()["reason"] == ("model load failed: ValueError: default_models: en-de names "
                                         "'de-en-captions', which serves de-en")


class Stalled(FakeRuntime):
    def health(self) -> RuntimeProblem | None:
        return RuntimeProblem("stalled", "en-de-software: a model call outlived its deadline")


def test_ready_only_while_every_model_of_a_pair_serves(model_dirs):
    def with_stalled(settings):
        return [ServedModel(m.card, Stalled("en", "de")) if m.name == "en-de-software" else m
                for m in fake_runtimes(settings)]

    with serving(create_app(Settings(model_dirs=model_dirs, warmup=False), runtime_factory=with_stalled)) as client:
        response = client.get("/health/ready")
        assert response.status_code == 503
        assert response.json()["phase"] == "stalled"
    with serving(app_for(model_dirs)) as client:
        assert client.get("/health/ready").json() == {"status": "ok", "phase": "ready", "pairs": ["de-en", "en-de"]}


def test_model_work_is_counted_per_model(model_dirs):
    with serving(app_for(model_dirs)) as client:
        assert translate(client, model="en-de-software").status_code == 200
        assert translate(client, text=["one", "two"]).status_code == 200
        text = client.get("/metrics").text
    assert 'phrasal_translated_segments_total{model="en-de-software",pair="en-de"} 1.0' in text
    assert 'phrasal_translated_segments_total{model="en-de-captions",pair="en-de"} 2.0' in text


def test_the_libretranslate_api_takes_the_model_as_an_extra_parameter(model_dirs):
    with serving(app_for(model_dirs)) as client:
        def libre(**params):
            return client.post("/libretranslate/translate", json={"q": "a small dog", "source": "en", "target": "de",
                                                                  **params})

        assert libre().json() == {"translatedText": "DOG SMALL A"}
        assert libre(model="en-de-software").json() == {"translatedText": "dog small a"}
        refused = libre(model="de-en-captions")
        assert (refused.status_code, refused.json()) == (400, {"error": (
            "Invalid request: model: 'de-en-captions' serves de-en, not en-de; en-de is served by: "
            "en-de-captions (default), en-de-software")})
