"""Every request limit at the limit (served) and one past it (refused with its exact status and
message): characters per text, texts per request, source tokens (the server's setting and the
model's own), beam_size, n_best, and the body size, with and without a Content-Length."""

from __future__ import annotations

import json

import pytest

from service.app import create_app
from service.runtime.base import DecodingOptions, TextRejected
from service.runtime.text_codec import translate_texts
from service.settings import MAX_BEAM_SIZE, Settings
from testing.fake_runtime import FakeRuntime
from tests.service.support import serving

MAX_CHARS = 40
MAX_SEGMENTS = 4
MAX_TOKENS = 5
MODEL_PIECES = 6
BODY_LIMIT = 2048
JSON = {"content-type": "application/json"}


@pytest.fixture(scope="module")
def served():
    runtime = FakeRuntime(max_source_pieces=MODEL_PIECES)
    settings = Settings(
        max_segments=MAX_SEGMENTS, max_chars=MAX_CHARS, max_source_tokens=MAX_TOKENS, max_body_bytes=BODY_LIMIT
    )
    with serving(create_app(settings, runtime_factory=lambda s: [runtime])) as client:
        yield client, runtime


def post(served, **fields):
    client, _ = served
    return client.post("/translate", json={"source": "en", "target": "de", **fields})


def refused(response) -> tuple[int, str]:
    return response.status_code, response.json()["message"]


def test_a_text_of_exactly_max_chars_is_translated_and_one_more_is_refused(served):
    at = "x" * MAX_CHARS
    assert post(served, text=at).json()["translations"] == [[{"text": at.upper(), "score": -0.5}]]
    assert post(served, text=["ok", at]).status_code == 200
    assert refused(post(served, text=at + "x")) == (422, "text: at most 40 characters per text, got 41")
    assert refused(post(served, text=["ok", at + "x"])) == (422, "text.1: at most 40 characters per text, got 41")


def test_exactly_max_segments_texts_are_translated_and_one_more_is_refused(served):
    answer = post(served, text=["a"] * MAX_SEGMENTS)
    assert answer.status_code == 200 and len(answer.json()["translations"]) == MAX_SEGMENTS
    assert refused(post(served, text=["a"] * (MAX_SEGMENTS + 1))) == (422, "text: at most 4 texts per request, got 5")


def test_exactly_max_source_tokens_is_translated_and_one_more_is_refused(served):
    at = " ".join("a" * MAX_TOKENS)  # one fake piece per word
    assert post(served, text=at).status_code == 200
    response = post(served, text=[at, at + " a"])
    assert refused(response) == (422, "text.1: has 6 source tokens; at most 5 per text (max_source_tokens)")
    assert response.json()["detail"][0]["type"] == "too_many_tokens"


def test_the_models_own_token_limit_at_and_one_past_it():
    runtime = FakeRuntime(max_source_pieces=MODEL_PIECES)
    with serving(create_app(Settings(), runtime_factory=lambda s: [runtime])) as client:
        at = " ".join("a" * MODEL_PIECES)
        body = {"source": "en", "target": "de"}
        assert client.post("/translate", json={**body, "text": at}).status_code == 200
        response = client.post("/translate", json={**body, "text": at + " a"})
    assert refused(response) == (422, "text: has 7 source tokens; this model reads at most 6")
    assert response.json()["detail"][0]["type"] == "text_rejected"


def test_the_real_codec_refuses_one_token_past_the_model_limit(tiny_spm):
    # The limit real backends apply (service/runtime/text_codec.py), on a real tokenizer.
    from model.decoding.beam_search import Hypothesis
    from model.text.tokenizer import Tokenizer

    tokenizer = Tokenizer(tiny_spm)
    text = "Two dogs play in the snow."
    n = len(tokenizer.encode_batch([text])[0])
    seen = []

    def generate(source_ids, search):
        seen.append(source_ids)
        return [[Hypothesis(tokens=[], score=-1.0, log_prob=-1.0, attention=None)] for _ in source_ids]

    assert translate_texts(tokenizer, [text], DecodingOptions(), n, generate)[0][0].score == -1.0
    with pytest.raises(TextRejected) as info:
        translate_texts(tokenizer, ["", text], DecodingOptions(), n - 1, generate)
    assert (info.value.index, info.value.reason) == (1, f"has {n} source tokens; this model reads at most {n - 1}")
    assert len(seen) == 1  # the refused batch never reached the model


def test_beam_size_from_one_to_sixteen_is_served_and_zero_and_seventeen_are_refused(served):
    _, runtime = served
    for beam in (1, MAX_BEAM_SIZE):
        assert post(served, text="a b", beam_size=beam).status_code == 200
        assert runtime.calls[-1][1].beam_size == beam
    assert refused(post(served, text="a", beam_size=0)) == (422, "beam_size: Input should be greater than or equal to 1")
    assert refused(post(served, text="a", beam_size=MAX_BEAM_SIZE + 1)) == (
        422, "beam_size: Input should be less than or equal to 16"
    )


def test_n_best_up_to_beam_size_is_served_and_one_more_is_refused(served):
    _, runtime = served
    words = "a b c d e"  # the fake has one hypothesis per word order: 5 of the 16 asked for
    response = post(served, text=words, beam_size=MAX_BEAM_SIZE, n_best=MAX_BEAM_SIZE)
    assert response.status_code == 200 and len(response.json()["translations"][0]) == 5
    assert (runtime.calls[-1][1].beam_size, runtime.calls[-1][1].n_best) == (16, 16)
    assert post(served, text="a b", beam_size=2, n_best=2).status_code == 200
    assert refused(post(served, text="a", beam_size=2, n_best=3)) == (422, "n_best: must not exceed beam_size (2), got 3")
    assert refused(post(served, text="a", n_best=MAX_BEAM_SIZE + 1)) == (
        422, "n_best: Input should be less than or equal to 16"
    )
    assert refused(post(served, text="a", n_best=0)) == (422, "n_best: Input should be greater than or equal to 1")
    # beam omitted: the default (5) widened to n_best, up to the bound.
    assert post(served, text=words, n_best=MAX_BEAM_SIZE).status_code == 200
    assert runtime.calls[-1][1].beam_size == MAX_BEAM_SIZE


def body_of_size(size: int) -> bytes:
    """A valid request body of exactly ``size`` bytes (JSON whitespace pads it)."""
    raw = json.dumps({"text": "a", "source": "en", "target": "de"}).encode()
    assert len(raw) <= size
    return raw[:-1] + b" " * (size - len(raw)) + b"}"


def test_a_body_of_exactly_max_body_bytes_is_served_and_one_more_byte_is_413(served):
    client, _ = served
    assert client.post("/translate", content=body_of_size(BODY_LIMIT), headers=JSON).status_code == 200
    response = client.post("/translate", content=body_of_size(BODY_LIMIT + 1), headers=JSON)
    assert refused(response) == (413, "body: at most 2048 bytes, Content-Length says 2049")
    assert response.headers["connection"] == "close"


def test_a_chunked_body_of_exactly_max_body_bytes_is_served_and_one_more_byte_is_413(served):
    client, _ = served

    def chunked(raw: bytes):  # no Content-Length: the guard counts the bytes as they arrive
        yield from (raw[i : i + 500] for i in range(0, len(raw), 500))

    assert client.post("/translate", content=chunked(body_of_size(BODY_LIMIT)), headers=JSON).status_code == 200
    response = client.post("/translate", content=chunked(body_of_size(BODY_LIMIT + 1)), headers=JSON)
    assert refused(response) == (413, "body: at most 2048 bytes")
