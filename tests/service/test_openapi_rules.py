"""The OpenAPI schema states the rules the server enforces on a request body (n_best <=
beam_size, the served pairs and each pair's models, the number and length of texts), so that a body is schema-valid
exactly when the server takes it: each body below is checked against the served schema and sent.
"""
from __future__ import annotations

import pytest

jsonschema_rs = pytest.importorskip("jsonschema_rs")  # schemathesis' validator

from service.app import create_app  # noqa: E402
from model.model_card import ModelCard  # noqa: E402
from service.catalog import ServedModel  # noqa: E402
from service.settings import Settings  # noqa: E402
from testing.fake_runtime import FakeRuntime  # noqa: E402
from tests.service.support import serving  # noqa: E402

BASE = {"text": "a b", "source": "en", "target": "de"}
# (body, whether the server takes it), by hand from the rules: max_segments=3, max_chars=10,
# pairs en-de (models en-de-captions, the default, and en-de-software) and de-en (one model, named
# after its pair), beam_size in 1..16, n_best <= beam_size (an omitted beam widens to it).
BODIES = [
    ({}, True),
    ({"beam_size": 3, "n_best": 3}, True),
    ({"beam_size": 2, "n_best": 3}, False),
    ({"beam_size": 1, "n_best": 2}, False),
    ({"n_best": 16}, True),
    ({"beam_size": None, "n_best": 7}, True),
    ({"beam_size": 16, "n_best": 16}, True),
    ({"source": "de", "target": "en"}, True),
    ({"source": "fr"}, False),
    ({"target": "en"}, False),
    ({"text": ["a", "b", "c"]}, True),
    ({"text": ["a", "b", "c", "d"]}, False),
    ({"text": "x" * 10}, True),
    ({"text": "x" * 11}, False),
    ({"text": ["ok", "x" * 11]}, False),
    ({"model": "en-de-software"}, True),
    ({"model": "en-de-captions"}, True),
    ({"model": None}, True),
    ({"model": "auto"}, True),
    ({"source": "de", "target": "en", "model": "auto"}, True),
    ({"model": "en-de-legal"}, False),
    ({"model": "de-en"}, False),
    ({"model": "en de"}, False),
    ({"source": "de", "target": "en", "model": "de-en"}, True),
    ({"source": "de", "target": "en", "model": "en-de-software"}, False),
]


@pytest.fixture(scope="module")
def client():
    settings = Settings(max_segments=3, max_chars=10, warmup=False)
    models = [ServedModel(ModelCard("en-de-captions"), FakeRuntime("en", "de")),
              ServedModel(ModelCard("en-de-software", domain="software"), FakeRuntime("en", "de")),
              FakeRuntime("de", "en")]
    app = create_app(settings, runtime_factory=lambda s: models)
    with serving(app) as test_client:
        yield test_client


def body_schema(client, name: str) -> dict:
    schema = client.get("/openapi.json").json()
    return {**schema["components"]["schemas"][name], "components": schema["components"]}


@pytest.mark.parametrize(("fields", "taken"), BODIES, ids=[str(fields) for fields, _ in BODIES])
def test_a_body_is_schema_valid_exactly_when_the_server_takes_it(client, fields, taken):
    body = {**BASE, **fields}
    assert jsonschema_rs.validator_for(body_schema(client, "TranslateRequest")).is_valid(body) is taken
    response = client.post("/translate", json=body)
    assert (response.status_code == 200) is taken, response.text


def test_align_bodies_name_the_served_pairs_and_text_limits(client):
    validator = jsonschema_rs.validator_for(body_schema(client, "AlignRequest"))
    assert validator.is_valid({"text": "a", "translation": "b", "source": "de", "target": "en"})
    assert not validator.is_valid({"text": "a", "translation": "b", "source": "en", "target": "fr"})
    assert not validator.is_valid({"text": "a", "translation": "x" * 11, "source": "en", "target": "de"})
    assert validator.is_valid({"text": "a", "translation": "b", "source": "en", "target": "de", "model": "en-de-software"})
    assert not validator.is_valid({"text": "a", "translation": "b", "source": "de", "target": "en",
                                   "model": "en-de-software"})


def test_before_the_models_load_no_pair_is_stated():
    app = create_app(Settings(max_chars=2000, warmup=False), runtime_factory=lambda s: [FakeRuntime()])
    body = app.openapi()["components"]["schemas"]["TranslateRequest"]  # the lifespan never ran: nothing loaded
    assert "allOf" not in body
    assert body["properties"]["text"]["anyOf"][0] == {"type": "string", "maxLength": 2000}
