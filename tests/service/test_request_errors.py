"""Client errors are 422 naming the field; server errors are generic and never leak a trace."""

from __future__ import annotations

import logging

import pytest
from fastapi.testclient import TestClient

from service.app import create_app
from service.settings import Settings
from testing.fake_runtime import FakeRuntime
from tests.service.support import serving


def assert_field_error(response, field: str, *words: str) -> str:
    assert response.status_code == 422, response.text
    body = response.json()
    assert field in [d["field"] for d in body["detail"]]
    assert body["message"].startswith(f"{field}: ")
    for word in words:
        assert word in body["message"]
    return body["message"]


def test_unknown_pair_lists_the_pairs_served(settings):
    runtimes = [FakeRuntime("en", "de"), FakeRuntime("en", "fr"), FakeRuntime("de", "en")]
    with serving(create_app(settings, runtime_factory=lambda s: runtimes)) as client:
        response = client.post("/translate", json={"text": "a", "source": "en", "target": "cs"})
        message = assert_field_error(response, "target", "en-cs", "de-en, en-de, en-fr")
        assert message == "target: language pair en-cs is not served; served pairs: de-en, en-de, en-fr"
        # An unknown source language is the source field's fault.
        response = client.post("/translate", json={"text": "a", "source": "xx", "target": "de"})
        assert_field_error(response, "source", "xx-de", "de-en, en-de, en-fr")


def test_beam_size_zero(translate):
    assert_field_error(translate(text="a", beam_size=0), "beam_size", "greater than or equal to 1")


def test_beam_size_above_sixteen(translate):
    assert_field_error(translate(text="a", beam_size=17), "beam_size", "less than or equal to 16")


def test_n_best_above_beam_size(translate):
    message = assert_field_error(translate(text="a", beam_size=2, n_best=3), "n_best")
    assert message == "n_best: must not exceed beam_size (2), got 3"


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"text": 5}, "text", ("string or a list of strings", "int")),
        ({"text": ["a", 3]}, "text", ("item 1", "string")),
        ({"text": []}, "text", ("at least one",)),
        ({"text": "a", "beam_size": "wide"}, "beam_size", ("integer",)),
        ({"text": "a", "alignment": "phrases"}, "alignment", ("'none', 'token' or 'phrase'",)),
    ],
)
def test_wrong_types(translate, body, field, words):
    assert_field_error(translate(**body), field, *words)


def test_extra_field(translate):
    assert_field_error(translate(text="a", temperature=0.7), "temperature", "not permitted")


def test_missing_text(translate):
    assert_field_error(translate(), "text", "required")


def test_missing_source(client):
    response = client.post("/translate", json={"text": "a", "target": "de"})
    assert_field_error(response, "source", "required")


def test_body_that_is_not_json(client):
    # Not JSON at all: the body is bad (400, as the OpenAPI document says), not a field.
    response = client.post("/translate", content=b"{oops", headers={"content-type": "application/json"})
    assert (response.status_code, response.json()) == (
        400,
        {"message": "body: not parseable as JSON (Expecting property name enclosed in double quotes at character 1)", "detail": []},
    )


def test_too_many_texts(translate, runtime):
    # The test settings allow 4 texts of 40 characters.
    assert_field_error(translate(text=["a"] * 5), "text", "at most 4 texts", "got 5")
    assert runtime.calls == []


def test_too_long_text_names_its_index(translate):
    assert_field_error(translate(text=["ok", "x" * 41]), "text.1", "at most 40 characters", "got 41")
    assert_field_error(translate(text="x" * 41), "text", "at most 40 characters")


class BrokenRuntime(FakeRuntime):
    def translate(self, texts, options):
        raise RuntimeError("CUDA error: secret internal detail")


def test_runtime_failure_is_a_generic_500_and_logged(settings, caplog):
    app = create_app(settings, runtime_factory=lambda s: [BrokenRuntime()])
    with serving(app) as client, caplog.at_level(logging.ERROR, logger="service"):
        response = client.post("/translate", json={"text": "a b", "source": "en", "target": "de"})
    assert response.status_code == 500
    assert response.json() == {"message": "internal error: the translation failed (logged on the server)", "detail": []}
    assert "secret" not in response.text and "Traceback" not in response.text
    assert "secret internal detail" in caplog.text  # the cause is in the server log


class ContractBreakingRuntime(FakeRuntime):
    def translate(self, texts, options):
        return super().translate(texts, options)[:-1]  # one result short


def test_runtime_returning_too_few_results_is_a_500(settings):
    app = create_app(settings, runtime_factory=lambda s: [ContractBreakingRuntime()])
    with serving(app) as client:
        response = client.post("/translate", json={"text": ["a", "b"], "source": "en", "target": "de"})
    assert response.status_code == 500
    assert "internal error" in response.json()["message"]


def test_translate_before_models_are_loaded_is_503(settings, runtime):
    client = TestClient(create_app(settings, runtime_factory=lambda s: [runtime]))  # no lifespan
    response = client.post("/translate", json={"text": "a", "source": "en", "target": "de"})
    assert response.status_code == 503
    assert response.json()["message"] == "not ready: loading models"
    assert response.headers["retry-after"] == "5"


def test_text_the_runtime_rejects_is_a_422_naming_it(settings):
    # "a b c d" is 4 pieces for the fake; this one reads at most 3.
    runtime = FakeRuntime(max_source_pieces=3)
    with serving(create_app(settings, runtime_factory=lambda s: [runtime])) as client:
        response = client.post(
            "/translate", json={"text": ["", "a b", "a b c d"], "source": "en", "target": "de"}
        )
        message = assert_field_error(response, "text.2")
        assert message == "text.2: has 4 source tokens; this model reads at most 3"
        response = client.post("/translate", json={"text": "a b c d", "source": "en", "target": "de"})
        assert_field_error(response, "text", "at most 3")


def test_max_source_tokens_is_a_422_naming_the_limit_before_the_queue():
    runtime = FakeRuntime()
    settings = Settings(max_source_tokens=3)
    with serving(create_app(settings, runtime_factory=lambda s: [runtime])) as client:
        response = client.post("/translate", json={"text": ["a b c", "a b c d"], "source": "en", "target": "de"})
        assert assert_field_error(response, "text.1") == (
            "text.1: has 4 source tokens; at most 3 per text (max_source_tokens)"
        )
        assert response.json()["detail"][0]["type"] == "too_many_tokens"
        assert client.post("/translate", json={"text": "a b c", "source": "en", "target": "de"}).status_code == 200
    assert [texts for texts, _ in runtime.calls] == [["a b c"]]  # the refused request never queued
