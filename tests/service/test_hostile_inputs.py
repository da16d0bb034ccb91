"""Hostile bodies get a 4xx that says what is wrong, never a 500, and never reach the model."""

from __future__ import annotations

import asyncio
import gzip
import json

import pytest

from service.app import create_app
from service.settings import Settings
from testing.fake_runtime import FakeRuntime
from tests.service.support import serving

JSON = {"content-type": "application/json"}
LIMIT = 64 * 1024


@pytest.fixture(scope="module")
def hostile():
    # A body deadline no test body misses on a loaded machine (a 0.2 s one gave a 408 for a
    # complete body under the full suite); the trickling body has its own short one below.
    yield from _served(body_timeout_s=5.0)


@pytest.fixture
def impatient():
    yield from _served(body_timeout_s=0.2)


def _served(body_timeout_s: float):
    runtime = FakeRuntime()
    settings = Settings(max_segments=4, max_chars=40, max_body_bytes=LIMIT, body_timeout_s=body_timeout_s)
    app = create_app(settings, runtime_factory=lambda s: [runtime])
    with serving(app) as client:
        yield app, client, runtime


def body(**fields) -> bytes:
    return json.dumps({"source": "en", "target": "de", **fields}).encode()


CASES = [
    # name, raw body, content type, status, message
    ("empty list", body(text=[]), "application/json", 422, "text: must hold at least one text"),
    ("1 MiB string", body(text="a" * (1 << 20)), "application/json", 413,
     f"body: at most {LIMIT} bytes, Content-Length says {(1 << 20) + 44}"),
    ("long string under the body limit", body(text="a" * 50_000), "application/json", 422,
     "text: at most 40 characters per text, got 50000"),
    ("too many texts", body(text=["a"] * 5), "application/json", 422, "text: at most 4 texts per request, got 5"),
    ("text is a number", body(text=5), "application/json", 422, "text: must be a string or a list of strings, got int"),
    ("text is an object", body(text={"a": 1}), "application/json", 422,
     "text: must be a string or a list of strings, got dict"),
    ("text item is null", body(text=["a", None]), "application/json", 422, "text: item 1 must be a string, got NoneType"),
    ("beam_size as string", body(text="a", beam_size="2"), "application/json", 422,
     "beam_size: Input should be a valid integer"),
    ("beam_size as float", body(text="a", beam_size=2.0), "application/json", 422,
     "beam_size: Input should be a valid integer"),
    ("beam_size as bool", body(text="a", beam_size=True), "application/json", 422,
     "beam_size: Input should be a valid integer"),
    ("beam_size 17", body(text="a", beam_size=17), "application/json", 422,
     "beam_size: Input should be less than or equal to 16"),
    ("n_best 0", body(text="a", n_best=0), "application/json", 422, "n_best: Input should be greater than or equal to 1"),
    ("unknown field", body(text="a", temperature=0.7), "application/json", 422,
     "temperature: Extra inputs are not permitted"),
    ("NaN", b'{"text": "a", "source": "en", "target": "de", "beam_size": NaN}', "application/json", 422,
     "beam_size: Input should be a valid integer"),
    ("Infinity", b'{"text": "a", "source": "en", "target": "de", "n_best": Infinity}', "application/json", 422,
     "n_best: Input should be a valid integer"),
    ("-Infinity in a list", b'{"text": ["a", -Infinity], "source": "en", "target": "de"}', "application/json", 422,
     "text: item 1 must be a string, got float"),
    ("lone surrogate", b'{"text": "a\\ud800b", "source": "en", "target": "de"}', "application/json", 422,
     "text: is not valid Unicode: lone surrogate at character 1"),
    ("lone surrogate in a list", b'{"text": ["ok", "\\udfff"], "source": "en", "target": "de"}', "application/json",
     422, "text: item 1 is not valid Unicode: lone surrogate at character 0"),
    ("lone surrogate as language", b'{"text": "a", "source": "\\ud800", "target": "de"}', "application/json", 422,
     "source: Input should be a valid string, unable to parse raw data as a unicode string"),
    ("language code with a slash", body(text="a", source="../en"), "application/json", 422,
     "source: String should match pattern '^[A-Za-z0-9_-]+$'"),
    ("invalid UTF-8", b'{"text": "a\xff\xfe", "source": "en", "target": "de"}', "application/json", 400,
     "body: not parseable as JSON (invalid UTF-8, or nested too deep)"),
    ("deep nesting", b'{"text": ' + b"[" * 30_000 + b"]" * 30_000 + b', "source": "en", "target": "de"}',
     "application/json", 400, "body: not parseable as JSON (invalid UTF-8, or nested too deep)"),
    ("nesting within the parser's reach", b'{"text": ' + b"[" * 200 + b"]" * 200 + b', "source": "en", "target": "de"}',
     "application/json", 422, "text: item 0 must be a string, got list"),
    ("a number of 5000 digits", b'{"text": "a", "source": "en", "target": "de", "beam_size": ' + b"9" * 5000 + b"}",
     "application/json", 400, "body: not parseable as JSON (a number has too many digits)"),
    ("not JSON", b"{oops", "application/json", 400,
     "body: not parseable as JSON (Expecting property name enclosed in double quotes at character 1)"),
    ("a JSON array", b"[1, 2]", "application/json", 422, "body: Input should be a valid dictionary or object to extract fields from"),
    ("empty body", b"", "application/json", 422, "body: Field required"),
    ("text/plain", body(text="a"), "text/plain", 415, "body: content type must be application/json, got text/plain"),
    ("form", b"text=a", "application/x-www-form-urlencoded", 415,
     "body: content type must be application/json, got application/x-www-form-urlencoded"),
    ("no content type", body(text="a"), None, 415, "body: content type must be application/json, got none"),
]


@pytest.mark.parametrize(("name", "raw", "content_type", "status", "message"), CASES, ids=[c[0] for c in CASES])
def test_hostile_body(hostile, name, raw, content_type, status, message):
    _, client, runtime = hostile
    calls = len(runtime.calls)
    headers = {"content-type": content_type} if content_type else {}
    response = client.post("/translate", content=raw, headers=headers)
    assert (response.status_code, response.json()["message"]) == (status, message)
    assert len(runtime.calls) == calls  # the model never saw it


def test_an_unknown_field_named_by_a_lone_surrogate_is_escaped_in_the_answer(hostile):
    _, client, _ = hostile
    response = client.post("/translate", content=b'{"text": "a", "source": "en", "target": "de", "\\ud800": 1}', headers=JSON)
    assert response.status_code == 422  # and not a 500 from an encoder choking on it
    assert response.content.isascii()


def test_a_chunked_body_is_cut_off_at_the_limit(hostile):
    _, client, _ = hostile
    sent = []

    def chunks():  # no Content-Length: the guard must count
        for _ in range(100):
            sent.append(1)
            yield b" " * 4096

    response = client.post("/translate", content=chunks(), headers=JSON)
    assert response.status_code == 413
    assert response.json()["message"] == f"body: at most {LIMIT} bytes"
    assert response.headers["connection"] == "close"


def _scope(headers: list[tuple[bytes, bytes]]) -> dict:
    return {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
        "path": "/translate", "raw_path": b"/translate", "query_string": b"", "root_path": "",
        "headers": headers, "client": ("127.0.0.1", 5000), "server": ("127.0.0.1", 80),
    }


def _call(app, client, scope: dict, messages: list[dict]) -> list[dict]:
    async def run() -> list[dict]:
        sent = []
        pending = list(messages)

        async def receive():
            if pending:
                return pending.pop(0)
            await asyncio.Event().wait()  # a client that sends nothing more and never leaves

        async def send(message):
            sent.append(message)

        await asyncio.wait_for(app(scope, receive, send), 10)
        return sent

    return client.portal.call(run)


def test_a_body_trickling_in_too_slowly_is_408(impatient):
    app, client, _ = impatient
    scope = _scope([(b"content-type", b"application/json"), (b"content-length", b"40")])
    sent = _call(app, client, scope, [{"type": "http.request", "body": b'{"text": "a', "more_body": True}])
    assert sent[0]["status"] == 408
    assert (b"connection", b"close") in sent[0]["headers"]
    assert json.loads(sent[1]["body"])["message"] == "body: not received within 0.2 s"


def test_a_body_longer_than_its_content_length_says_is_cut_off(hostile):
    app, client, _ = hostile
    scope = _scope([(b"content-type", b"application/json"), (b"content-length", b"10")])
    chunk = {"type": "http.request", "body": b" " * 40_000, "more_body": True}
    sent = _call(app, client, scope, [chunk, chunk])
    assert sent[0]["status"] == 413


@pytest.mark.parametrize("length", [b"-1", b"ten", b"1e3"])
def test_a_malformed_content_length_is_400(hostile, length):
    app, client, _ = hostile
    scope = _scope([(b"content-type", b"application/json"), (b"content-length", length)])
    sent = _call(app, client, scope, [{"type": "http.request", "body": b"{}", "more_body": False}])
    assert sent[0]["status"] == 400
    assert json.loads(sent[1]["body"])["message"] == "body: Content-Length must be a non-negative integer"


def test_wrong_method_and_unknown_path_use_the_error_shape(hostile):
    _, client, _ = hostile
    assert client.get("/translate").json() == {"message": "Method Not Allowed", "detail": []}
    assert client.get("/nowhere").json() == {"message": "Not Found", "detail": []}


def test_a_compressed_body_is_415_naming_the_encoding(hostile):
    _, client, runtime = hostile
    calls = len(runtime.calls)
    headers = {**JSON, "content-encoding": "gzip"}
    response = client.post("/translate", content=gzip.compress(body(text="a")), headers=headers)
    assert (response.status_code, response.json()["message"]) == (
        415, "body: Content-Encoding gzip is not supported; send the body uncompressed"
    )
    assert len(runtime.calls) == calls


def test_a_body_of_many_unknown_fields_gets_a_short_answer(hostile):
    # Every unknown field is one problem: the answer lists the first ten and counts the rest,
    # and quotes a made-up field name only in part (a 1 MiB body once came back as 11 MB).
    _, client, _ = hostile
    fields = {f"k{i}": 0 for i in range(1000)} | {"x" * 5000: 0}
    response = client.post("/translate", content=body(text="a", **fields), headers=JSON)
    assert response.status_code == 422
    answer = response.json()
    assert [d["field"] for d in answer["detail"]] == [f"k{i}" for i in range(10)]
    assert answer["message"].endswith("k9: Extra inputs are not permitted; and 991 more problems")
    long_key = {"x" * 5000: 0}
    detail = client.post("/translate", content=body(text="a", **long_key), headers=JSON).json()["detail"]
    assert detail[0]["field"] == "x" * 64 + "..."
    assert detail[0]["loc"] == ["body", "x" * 64 + "..."]


def test_a_client_leaving_half_way_through_its_body_is_counted_as_gone_not_as_a_bad_body(hostile):
    app, client, _ = hostile
    registry = app.state.metrics.registry

    def rejected(reason: str) -> float:
        return registry.get_sample_value("phrasal_rejections_total", {"reason": reason})

    gone, bad = rejected("client_disconnected"), rejected("bad_body")
    scope = _scope([(b"content-type", b"application/json"), (b"content-length", b"40")])
    messages = [{"type": "http.request", "body": b'{"text": "a', "more_body": True}, {"type": "http.disconnect"}]
    sent = _call(app, client, scope, messages)
    assert sent[0]["status"] == 499
    assert (rejected("client_disconnected") - gone, rejected("bad_body") - bad) == (1, 0)
