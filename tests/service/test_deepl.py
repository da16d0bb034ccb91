"""The DeepL-compatible API (service/http/deepl.py), driven as its users drive it: DeepL's own
Python client (`deepl.Translator(key, server_url=...)`) against a real server process
(`python -m testing.fake_server`: the test fake runtime, which translates "two dogs play" as
"PLAY DOGS TWO"), with and without the server's API keys."""
from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request

import deepl
import pytest

from tests.service.test_server_process import Server

PAIRS = json.dumps(["en-de", "de-en"])
KEY = "k" * 16


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    server = Server(model_dirs=PAIRS, glossary_db=str(tmp_path_factory.mktemp("db") / "glossaries.sqlite3"),
                    api_keys=json.dumps({"tool": KEY}))
    server.wait_ready()
    yield server
    server.stop()


def client(server, key: str = KEY) -> deepl.Translator:
    return deepl.Translator(key, server_url=f"http://127.0.0.1:{server.port}/deepl/", send_platform_info=False)


def post(server, path: str, fields: list[tuple[str, str]], key: str | None = KEY) -> tuple[int, object]:
    """A form POST as DeepL's documentation writes them (curl -d text=... -d text=...)."""
    headers = {"Content-Type": "application/x-www-form-urlencoded",
               **({"Authorization": f"DeepL-Auth-Key {key}"} if key else {})}
    request = urllib.request.Request(f"http://127.0.0.1:{server.port}{path}", urllib.parse.urlencode(fields).encode(),
                                     headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_deepl_s_client_translates_with_the_source_given_or_detected(server):
    translator = client(server)
    result = translator.translate_text("two dogs play", source_lang="EN", target_lang="DE")
    assert (result.text, result.detected_source_lang, result.billed_characters) == ("PLAY DOGS TWO", "EN", 13)
    results = translator.translate_text(["Zwei Hunde spielen im Schnee.", "two dogs play"], target_lang="EN-US")
    assert [(r.text, r.detected_source_lang) for r in results] == [
        ("SCHNEE. IM SPIELEN HUNDE ZWEI", "DE"), ("two dogs play", "EN")]  # already English: as it is
    # Markup as DeepL's tag_handling says, the empty element a tool puts for a placeholder kept.
    result = translator.translate_text('two <x id="1"/> dogs <b>play</b>', source_lang="EN", target_lang="DE",
                                       tag_handling="xml", ignore_tags="x")
    assert result.text.count('<x id="1"/>') == 1 and "<b>PLAY</b>" in result.text
    # An element ignore_tags names is passed through, its words untranslated.
    result = translator.translate_text("two <keep>dogs play</keep> now", source_lang="EN", target_lang="DE",
                                       tag_handling="xml", ignore_tags=["keep"])
    assert "<keep>dogs play</keep>" in result.text and "TWO" in result.text and "NOW" in result.text
    sent = ["two dogs play", "Zwei Hunde spielen im Schnee.", "two dogs play", 'two <x id="1"/> dogs <b>play</b>',
            "two <keep>dogs play</keep> now"]
    assert translator.get_usage().character.count == sum(map(len, sent))


def test_languages_are_listed_as_deepl_lists_them(server):
    translator = client(server)
    assert [(l.code, l.name) for l in translator.get_source_languages()] == [("DE", "German"), ("EN", "English")]
    assert [(l.code, l.name) for l in translator.get_target_languages()] == [
        ("DE", "German"), ("EN-GB", "English (GB)"), ("EN-US", "English (US)")]
    assert [(p.source_lang, p.target_lang) for p in translator.get_glossary_languages()] == [("de", "en"), ("en", "de")]


def test_glossaries_are_the_service_s_stored_ones(server):
    translator = client(server)
    info = translator.create_glossary("ui", source_lang="EN", target_lang="DE", entries={"two": "Zwei"})
    assert (info.name, info.source_lang, info.target_lang, info.entry_count, info.ready) == ("ui", "EN", "DE", 1, True)
    assert translator.get_glossary_entries(info) == {"two": "Zwei"}
    assert info.glossary_id in [g.glossary_id for g in translator.list_glossaries()]
    result = translator.translate_text("two dogs play", source_lang="EN", target_lang="DE", glossary=info)
    assert result.text == "PLAY DOGS Zwei"
    translator.delete_glossary(info)
    with pytest.raises(deepl.GlossaryNotFoundException):
        translator.get_glossary(info.glossary_id)


def test_multilingual_glossaries_through_deepl_s_own_client(server):
    # DeepLClient's v3 glossaries: one glossary, a dictionary per language pair, the request's used
    deepl_client = deepl.DeepLClient(KEY, server_url=f"http://127.0.0.1:{server.port}/deepl/", send_platform_info=False)
    from deepl.api_data import MultilingualGlossaryDictionaryEntries as pets
    info = deepl_client.create_multilingual_glossary("ui", [pets("EN", "DE", {"two": "Zwei"}), pets("DE", "EN", {"Hunde": "hounds"})])
    assert (info.name, sorted((d.source_lang, d.target_lang, d.entry_count) for d in info.dictionaries)) == (
        "ui", [("DE", "EN", 1), ("EN", "DE", 1)])
    assert deepl_client.translate_text("two dogs play", source_lang="EN", target_lang="DE", glossary=info).text == \
        "PLAY DOGS Zwei"
    assert info.glossary_id in [g.glossary_id for g in deepl_client.list_multilingual_glossaries()]
    assert info.glossary_id not in [g.glossary_id for g in deepl_client.list_glossaries()]  # v2 lists its own
    # merged: a term given anew takes its new target, a new one is added; replaced: only the given
    deepl_client.update_multilingual_glossary_dictionary(info, pets("EN", "DE", {"two": "zwo", "play": "spielen"}))
    entries = deepl_client.get_multilingual_glossary_entries(info, "EN", "DE").dictionaries[0].entries
    assert entries == "two\tzwo\nplay\tspielen"
    deepl_client.replace_multilingual_glossary_dictionary(info, pets("EN", "DE", {"dogs": "Hunde"}))
    assert deepl_client.get_multilingual_glossary_entries(info, "EN", "DE").dictionaries[0].entries == "dogs\tHunde"
    assert deepl_client.update_multilingual_glossary_name(info, "pets").name == "pets"
    deepl_client.delete_multilingual_glossary_dictionary(info, source_lang="DE", target_lang="EN")
    assert [(d.source_lang, d.target_lang) for d in deepl_client.get_multilingual_glossary(info.glossary_id).dictionaries] == [("EN", "DE")]
    # a pair the glossary has no dictionary for is refused, as DeepL refuses it
    with pytest.raises(deepl.DeepLException, match="has no de-en dictionary"):
        deepl_client.translate_text("Hunde", source_lang="DE", target_lang="EN-US", glossary=info)
    deepl_client.delete_multilingual_glossary(info)
    with pytest.raises(deepl.GlossaryNotFoundException):
        deepl_client.get_multilingual_glossary(info.glossary_id)


def test_a_form_with_text_repeated_is_a_list_and_errors_are_deepl_s(server):
    assert post(server, "/deepl/v2/translate", [("text", "two dogs"), ("text", "play"), ("target_lang", "DE"),
                                                 ("source_lang", "EN")]) == (200, {"translations": [
        {"detected_source_language": "EN", "text": "DOGS TWO", "billed_characters": 8},
        {"detected_source_language": "EN", "text": "PLAY", "billed_characters": 4}]})
    assert post(server, "/deepl/v2/translate", [("target_lang", "DE")]) == (
        400, {"message": "Parameter 'text' not specified."})
    assert post(server, "/deepl/v2/translate", [("text", "x")]) == (
        400, {"message": "Parameter 'target_lang' not specified."})
    assert post(server, "/deepl/v2/translate", [("text", "x"), ("source_lang", "EN"), ("target_lang", "JA")]) == (
        400, {"message": "Value for 'target_lang' not supported."})
    assert post(server, "/deepl/v2/translate", [("text", "x"), ("target_lang", "DE"), ("tag_handling", "json")]) == (
        400, {"message": "Value for 'tag_handling' not supported."})
    status, body = post(server, "/deepl/v2/translate", [("text", "x"), ("target_lang", "DE")], key="wrong")
    assert status == 403 and body["message"].startswith("Authorization failure")
    assert post(server, "/deepl/v2/translate", [("text", "x"), ("target_lang", "DE")], key=None)[0] == 403
    with pytest.raises(deepl.AuthorizationException):
        client(server, "wrong").translate_text("two dogs", target_lang="DE")



@pytest.mark.parametrize("body, message", [
    ({"text": "x", "target_lang": "DE", "tag_handling": ["xml"]}, "Value for 'tag_handling' not supported."),
    ({"text": ["a", 1], "target_lang": "DE"}, "Parameter 'text' must be a string or a list of strings."),
    ({"text": "x", "target_lang": ["DE"]}, "Value for 'target_lang' not supported."),
    ({"text": "x", "source_lang": "EN", "target_lang": "DE", "glossary_id": ["g"]}, "Bad request: no glossary \"['g']\""),
])
def test_parameters_of_the_wrong_type_are_a_400_naming_them(server, body, message):
    request = urllib.request.Request(f"http://127.0.0.1:{server.port}/deepl/v2/translate", json.dumps(body).encode(),
                                     {"Content-Type": "application/json", "Authorization": f"DeepL-Auth-Key {KEY}"})
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=30)
    assert (caught.value.code, json.loads(caught.value.read())) == (400, {"message": message})
