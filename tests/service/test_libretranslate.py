"""The LibreTranslate-compatible API (service/http/libretranslate.py) and stored glossaries, driven
as their users drive them: the real client packages (`libretranslatepy`, `deep-translator`'s
LibreTranslator) against a real server process (`python -m testing.fake_server`: the
service with the test fake runtime, which translates "two dogs play" as "PLAY DOGS TWO", each
target word aligned to its source word), and a glossary database that outlives a restart."""
from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest
from deep_translator import LibreTranslator
from deep_translator.exceptions import AuthorizationException
from libretranslatepy import LibreTranslateAPI

from tests.service.test_server_process import Server

PAIRS = json.dumps(["en-de", "de-en"])


def call(port: int, method: str, path: str, body=None, headers=None) -> tuple[int, object]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method,
                                     headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            text = response.read().decode()
            return response.status, json.loads(text) if text else None
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read().decode())


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    server = Server(model_dirs=PAIRS, glossary_db=str(tmp_path_factory.mktemp("db") / "glossaries.sqlite3"))
    server.wait_ready()
    yield server
    server.stop()


def base(server) -> str:
    return f"http://127.0.0.1:{server.port}/libretranslate/"


def test_libretranslatepy_translates_detects_and_lists_languages(server):
    client = LibreTranslateAPI(base(server))
    assert client.translate("two dogs play", "en", "de") == "PLAY DOGS TWO"
    assert client.languages() == [{"code": "de", "name": "German", "targets": ["en"]},
                                  {"code": "en", "name": "English", "targets": ["de"]}]
    detected = client.detect("Zwei Hunde spielen im Schnee.")
    assert [d["language"] for d in detected] == ["de", "en"]
    assert 50 < detected[0]["confidence"] <= 100


def test_deep_translator_sends_its_parameters_in_the_query_string(server):
    # deep-translator insists on an api_key; a server without keys ignores it, as LibreTranslate does.
    translator = LibreTranslator(source="en", target="de", api_key="any", custom_url=base(server))
    assert translator.translate("two dogs play") == "PLAY DOGS TWO"


def test_json_lists_alternatives_and_auto_detection_per_text(server):
    status, body = call(server.port, "POST", "/libretranslate/translate", {
        "q": ["two dogs play", "Zwei Hunde spielen im Schnee."], "source": "auto", "target": "de", "alternatives": 1})
    assert status == 200
    assert body["translatedText"] == ["PLAY DOGS TWO", "Zwei Hunde spielen im Schnee."]
    assert body["alternatives"] == [["DOGS TWO PLAY"], []]
    assert [d["language"] for d in body["detectedLanguage"]] == ["en", "de"]


def test_html_comes_back_with_its_tags_and_its_image_descriptions_translated(server):
    status, body = call(server.port, "POST", "/libretranslate/translate", {
        "q": '<p>two dogs <img src="d.png" alt="two dogs"> play</p>', "source": "en", "target": "de",
        "format": "html"})
    assert status == 200
    assert body["translatedText"].startswith("<p>") and body["translatedText"].endswith("</p>")
    assert '<img src="d.png" alt="DOGS TWO">' in body["translatedText"]


@pytest.mark.parametrize("body, error", [
    ({"source": "en", "target": "de"}, "Invalid request: missing q parameter"),
    ({"q": [], "source": "en", "target": "de"}, "Invalid request: missing q parameter"),
    ({"q": "x", "target": "de"}, "Invalid request: missing source parameter"),
    ({"q": "x", "source": "en", "target": "zz"}, "zz is not supported"),
    ({"q": "x", "source": "zz", "target": "de"}, "zz is not supported"),
    ({"q": "x", "source": "en", "target": "de", "format": "xml"}, "xml format is not supported"),
    ({"q": "x", "source": "en", "target": "de", "alternatives": "abc"},
     "Invalid request: alternatives parameter is not a number"),
    ({"q": "x", "source": "en", "target": "de", "glossary": "nope"}, "Invalid request: no glossary 'nope'"),
    (["not", "an", "object"], "Invalid JSON format"),
])
def test_errors_are_answered_as_libretranslate_answers_them(server, body, error):
    assert call(server.port, "POST", "/libretranslate/translate", body) == (400, {"error": error})


def test_stored_glossaries_survive_a_restart_and_report_their_terms(tmp_path):
    db = str(tmp_path / "glossaries.sqlite3")
    first = Server(model_dirs=PAIRS, glossary_db=db)
    first.wait_ready()
    try:
        status, created = call(first.port, "POST", "/glossaries", {
            "name": "pets", "source": "en", "target": "de", "entries": [{"source": "dogs", "target": "Hunde"}]})
        assert status == 201 and created["entries"] == [{"source": "dogs", "target": "Hunde"}]
        assert call(first.port, "POST", "/glossaries", {"name": "x", "source": "en", "target": "de", "entries": [
            {"source": "Dog", "target": "a"}, {"source": "dog", "target": "b"}]}) == (422, {
                "message": "entries.1.source: 'dog' is already entry 0",
                "detail": [{"field": "entries.1.source", "loc": ["body", "entries.1.source"],
                            "msg": "'dog' is already entry 0", "type": "invalid_glossary"}]})
    finally:
        first.stop()
    second = Server(model_dirs=PAIRS, glossary_db=db)
    second.wait_ready()
    try:
        assert call(second.port, "GET", "/glossaries")[1]["glossaries"] == [created]
        assert call(second.port, "GET", f"/glossaries/{created['id']}") == (200, created)
        status, body = call(second.port, "POST", "/translate", {
            "text": "two dogs play", "source": "en", "target": "de", "glossary": created["id"]})
        (hypothesis,) = body["translations"][0]
        assert hypothesis["text"] == "PLAY Hunde TWO"
        assert hypothesis["glossary"] == [{
            "source": "dogs", "target": "Hunde", "satisfied": True, "source_spans": [{"start": 4, "end": 8}],
            "target_spans": [{"start": 5, "end": 10}], "enforced": "replaced", "violations": []}]
        status, body = call(second.port, "POST", "/libretranslate/translate", {
            "q": "two dogs play", "source": "en", "target": "de", "glossary": {"two": "zwei"}})
        assert body["translatedText"] == "PLAY DOGS Zwei"  # the replaced "TWO" began with a capital
        assert call(second.port, "DELETE", f"/glossaries/{created['id']}")[0] == 204
        assert call(second.port, "GET", f"/glossaries/{created['id']}")[0] == 404
    finally:
        second.stop()


def test_keys_are_read_from_the_api_key_parameter_and_refused_with_403(tmp_path):
    keyed = Server(model_dirs=PAIRS, glossary_db=str(tmp_path / "g.sqlite3"), api_keys=json.dumps({"weblate": "k" * 16}))
    keyed.wait_ready()
    try:
        assert LibreTranslator(source="en", target="de", api_key="k" * 16,
                               custom_url=base(keyed)).translate("two dogs play") == "PLAY DOGS TWO"
        with pytest.raises(AuthorizationException):
            LibreTranslator(source="en", target="de", api_key="wrong", custom_url=base(keyed)).translate("two dogs")
        assert call(keyed.port, "POST", "/libretranslate/translate", {"q": "x", "source": "en", "target": "de"}) == (
            403, {"error": "Invalid API key"})
        # The rest of the API still wants the key in a header.
        assert call(keyed.port, "GET", "/glossaries")[0] == 401
    finally:
        keyed.stop()


def test_auto_detection_on_the_service_own_api(server):
    status, body = call(server.port, "POST", "/translate", {
        "text": "Zwei Hunde spielen im Schnee.", "source": "auto", "target": "en"})
    assert status == 200 and body["source"] == "de" and body["detected"]["language"] == "de"
    assert body["translations"][0][0]["text"] == "SCHNEE. IM SPIELEN HUNDE ZWEI"
    assert call(server.port, "POST", "/translate", {"text": "Two dogs play in the snow.", "source": "auto",
                                                    "target": "en"}) == (422, {
        "message": "source: auto: the texts are in en, the target language; choose another target",
        "detail": [{"field": "source", "loc": ["body", "source"],
                    "msg": "auto: the texts are in en, the target language; choose another target",
                    "type": "source_is_target"}]})
