"""Several replicas, each storing what it received (service/http/replicas.py): a glossary or document one
replica holds is answered through any other, by every API (the service's own, DeepL's with its own
client, LibreTranslate's), the client's key travelling with the request; lists are merged; a name
nobody holds is the route's own 404, or a 503 when a replica could not be asked. Two real servers
on loopback, each with its own SQLite files, as two Kubernetes pods have."""
from __future__ import annotations

import io
import json
import asyncio
import socket
import urllib.error
import urllib.request

import deepl
import pytest

from service.app import create_app
from service.http.replicas import NOT_HELD, Answer, held_answer, merged_list
from service.settings import Settings, address_parts
from testing.fake_runtime import FakeRuntime
from testing.live_server import free_port, live_server

KEY = "k" * 16
PO = 'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n\nmsgid "two dogs play"\nmsgstr ""\n'


def app(tmp_path, name: str, replicas: list[str], own: str | None, **settings):
    folder = tmp_path / name
    folder.mkdir()
    settings = Settings(model_dirs=["models/test-en-de"], inference_process=False, api_keys={"tool": KEY},
                        glossary_db=folder / "glossaries.sqlite3", document_db=folder / "documents.sqlite3",
                        replicas=replicas, replica_address=own, **settings)
    runtime = FakeRuntime("en", "de")
    return create_app(settings, runtime_factory=lambda received: [runtime])


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """(A, B): A asks B (its own address listed and left out); B asks A, itself, a port where
    nothing listens and one that takes the connection and never answers (B's requests have 2 s)."""
    tmp_path = tmp_path_factory.mktemp("replicas")
    a, b, dead = free_port(), free_port(), free_port()
    with socket.socket() as hanging:
        hanging.bind(("127.0.0.1", 0))
        hanging.listen(8)
        silent = hanging.getsockname()[1]
        app_a = app(tmp_path, "a", [f"127.0.0.1:{a}", f"127.0.0.1:{b}"], f"127.0.0.1:{a}")
        app_b = app(tmp_path, "b", [f"127.0.0.1:{b}", f"127.0.0.1:{a}", f"127.0.0.1:{dead}", f"127.0.0.1:{silent}"],
                    None, request_timeout_s=2.0)
        with live_server(app_a, ready_within_s=30, port=a) as url_a, live_server(app_b, ready_within_s=30, port=b) as url_b:
            yield url_a, url_b


def call(url: str, method: str = "GET", body: dict | None = None, key: str | None = KEY, **headers: str):
    request = urllib.request.Request(url, json.dumps(body).encode() if body is not None else None, method=method,
                                     headers={**({"Content-Type": "application/json"} if body is not None else {}),
                                              **({"X-API-Key": key} if key else {}), **headers})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            status, data, answer_headers = response.status, response.read(), response.headers
    except urllib.error.HTTPError as error:
        status, data, answer_headers = error.code, error.read(), error.headers
    return status, json.loads(data) if data else None, answer_headers


def test_a_glossary_stored_by_one_replica_is_read_used_listed_and_deleted_through_the_other(pair):
    url_a, url_b = pair
    status, stored, _ = call(f"{url_a}/glossaries", "POST", {"name": "pets", "source": "en", "target": "de",
                                                              "entries": [{"source": "dogs", "target": "Hunde"}]})
    assert status == 201
    status, read, headers = call(f"{url_b}/glossaries/{stored['id']}")
    assert (status, read) == (200, stored) and NOT_HELD not in headers
    request = {"text": "two dogs play", "source": "en", "target": "de", "glossary": stored["id"]}
    status, through_b, _ = call(f"{url_b}/translate", "POST", request)
    assert status == 200 and through_b == call(f"{url_a}/translate", "POST", request)[1]
    assert [term["source"] for term in through_b["translations"][0][0]["glossary"]] == ["dogs"]
    # the list is every replica's, each once, oldest first (A's list; B's includes a replica that is down)
    status, other, _ = call(f"{url_b}/glossaries", "POST", {"name": "tools", "source": "en", "target": "de",
                                                             "entries": [{"source": "saw", "target": "Säge"}]})
    status, listed, headers = call(f"{url_a}/glossaries")
    ids = [g["id"] for g in listed["glossaries"]]
    assert status == 200 and stored["id"] in ids and other["id"] in ids and len(ids) == len(set(ids))
    assert [g["created"] for g in listed["glossaries"]] == sorted(g["created"] for g in listed["glossaries"])
    status, _, headers = call(f"{url_b}/glossaries")
    assert (status, headers["Retry-After"]) == (503, "1")
    # the key travels with the request, and every replica checks it; none, and it goes nowhere
    assert call(f"{url_b}/glossaries/{stored['id']}", key="w" * 16)[0] == 401
    assert call(f"{url_b}/glossaries/{stored['id']}", key=None)[0] == 401
    assert call(f"{url_b}/glossaries/{stored['id']}", "DELETE")[0] == 204
    assert call(f"{url_a}/glossaries/{stored['id']}")[0] == 404
    # held nowhere: A (every replica answered) says 404 without the mark; B (one down) says retry
    status, body, headers = call(f"{url_a}/glossaries/{stored['id']}")
    assert (status, NOT_HELD in headers) == (404, False)
    status, body, headers = call(f"{url_b}/glossaries/{stored['id']}")
    assert (status, headers["Retry-After"]) == (503, "1") and "did not answer" in body["message"]
    status, body, _ = call(f"{url_a}/translate", "POST", request)
    assert (status, body["detail"][0]["type"]) == (422, "unknown_glossary")
    # a request another replica forwarded is answered as it stands: no loop
    status, _, headers = call(f"{url_a}/glossaries/{other['id']}", **{"X-Phrasal-Forwarded": "1"})
    assert (status, headers[NOT_HELD]) == (404, "glossary")
    assert call(f"{url_a}/glossaries/{other['id']}")[0] == 200
    metrics = urllib.request.urlopen(urllib.request.Request(f"{url_b}/metrics", headers={"X-API-Key": KEY})).read().decode()
    assert 'phrasal_replica_requests_total{outcome="held"} 3.0' in metrics  # read, translate, delete


def test_deepl_s_client_uploads_to_one_replica_and_polls_and_downloads_through_the_other(pair):
    url_a, url_b = pair
    on_a = deepl.Translator(KEY, server_url=f"{url_a}/deepl/", send_platform_info=False)
    on_b = deepl.Translator(KEY, server_url=f"{url_b}/deepl/", send_platform_info=False)
    handle = on_a.translate_document_upload(PO.encode(), target_lang="DE", source_lang="EN",
                                            filename="de.po")
    status = on_b.translate_document_wait_until_done(handle)
    assert status.done
    output = io.BytesIO()
    on_b.translate_document_download(handle, output)
    assert 'msgstr "PLAY DOGS TWO"' in output.getvalue().decode()
    # a wrong key to a document held elsewhere: the holder's 404, not found
    wrong = deepl.DocumentHandle(handle.document_id, "x" * 32)
    with pytest.raises(deepl.DeepLException, match="Document not found"):
        on_b.translate_document_get_status(wrong)
    glossary = on_a.create_glossary("pets", "EN", "DE", {"dogs": "Hunde"})
    result = on_b.translate_text("two dogs play", source_lang="EN", target_lang="DE", glossary=glossary)
    assert result.text == on_a.translate_text("two dogs play", source_lang="EN", target_lang="DE",
                                              glossary=glossary).text
    assert on_b.get_glossary_entries(glossary) == {"dogs": "Hunde"}
    # DeepL's v3 (multilingual) glossaries alike
    from deepl.api_data import MultilingualGlossaryDictionaryEntries

    client_a, client_b = (deepl.DeepLClient(KEY, server_url=f"{url}/deepl/", send_platform_info=False) for url in pair)
    multilingual = client_a.create_multilingual_glossary("pets", [MultilingualGlossaryDictionaryEntries("EN", "DE", {"dogs": "Hunde"})])
    assert client_b.translate_text("two dogs play", source_lang="EN", target_lang="DE", glossary=multilingual).text == result.text
    assert client_b.get_multilingual_glossary_entries(multilingual, "EN", "DE").dictionaries[0].entries == "dogs\tHunde"
    client_b.delete_multilingual_glossary(multilingual)
    assert multilingual.glossary_id not in [g.glossary_id for g in client_a.list_multilingual_glossaries()]


def test_libretranslate_s_file_url_answers_through_every_replica(pair):
    url_a, url_b = pair
    boundary = "phrasal-test-boundary"
    body = (f'--{boundary}\r\nContent-Disposition: form-data; name="source"\r\n\r\nen\r\n'
            f'--{boundary}\r\nContent-Disposition: form-data; name="target"\r\n\r\nde\r\n'
            f'--{boundary}\r\nContent-Disposition: form-data; name="api_key"\r\n\r\n{KEY}\r\n'
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="de.po"\r\n\r\n{PO}\r\n'
            f'--{boundary}--\r\n').encode()
    request = urllib.request.Request(f"{url_a}/libretranslate/translate_file", body,
                                     {"Content-Type": f"multipart/form-data; boundary={boundary}"})
    with urllib.request.urlopen(request, timeout=30) as response:
        translated_url = json.loads(response.read())["translatedFileUrl"]
    assert translated_url.startswith(f"{url_a}/libretranslate/download_file/")
    with urllib.request.urlopen(translated_url.replace(url_a, url_b), timeout=30) as response:
        assert 'msgstr "PLAY DOGS TWO"' in response.read().decode()


def test_the_holder_s_answer_ends_the_asking_and_a_replica_that_never_answers_is_not_waited_for(monkeypatch):
    import httpx

    from service.http import replicas as module

    cancelled = []

    async def request(client, method, url, **kwargs):
        if "silent" in url:
            try:
                await asyncio.Event().wait()  # never answers
            finally:
                cancelled.append(url)
        marks = [(NOT_HELD.encode(), b"glossary")] if "empty" in url else []
        return httpx.Response(200 if not marks else 404, headers=marks, content=b"{}")

    async def resolved(host, port):
        return [host]

    monkeypatch.setattr(httpx.AsyncClient, "request", request)
    monkeypatch.setattr(module, "_resolved", resolved)
    asking = module.Replicas(["silent:1", "empty:1", "holder:1"], None, timeout_s=3600.0)
    scope = {"method": "GET", "path": "/glossaries/x", "headers": [], "query_string": b""}

    async def asked():
        return await asyncio.wait_for(asking.ask(scope, b"", enough=module._holds), 60)

    answers = asyncio.run(asked())
    assert held_answer(answers)[0] == "held" and cancelled == ["http://silent:1/glossaries/x"]


def test_a_request_sent_on_is_charged_to_the_key_s_rate_limit_only_where_it_arrived(tmp_path):
    """Burst 3, no refill to speak of: what B sends on to A must not spend A's tokens (with N replicas a
    read of a glossary held elsewhere had cost the key N tokens, and a replica whose bucket ran dry
    answered 429 for the holder)."""
    a, b = free_port(), free_port()
    limits = {"rate_limit_per_s": 0.001, "rate_limit_burst": 3}
    app_a = app(tmp_path, "a", [f"127.0.0.1:{b}"], None, **limits)
    app_b = app(tmp_path, "b", [f"127.0.0.1:{a}"], None, **limits)
    with live_server(app_a, ready_within_s=30, port=a) as url_a, live_server(app_b, ready_within_s=30, port=b) as url_b:
        status, stored, _ = call(f"{url_a}/glossaries", "POST", {"name": "pets", "source": "en", "target": "de",
                                                                  "entries": [{"source": "dogs", "target": "Hunde"}]})
        assert status == 201  # A: 2 tokens left
        on_b = deepl.Translator(KEY, server_url=f"{url_b}/deepl/", send_platform_info=False)
        assert on_b.get_glossary(stored["id"]).name == "pets"  # DeepL's route, its own key check
        assert [call(f"{url_b}/glossaries/{stored['id']}")[0] for _ in range(3)] == [200, 200, 429]  # B's 3 spent
        # A still has its 2: nothing B sent on was charged there
        assert [call(f"{url_a}/glossaries/{stored['id']}")[0] for _ in range(3)] == [200, 200, 429]


def test_only_a_marked_request_from_a_replica_s_address_counts_as_sent_on(monkeypatch):
    from service.http import replicas as module

    async def resolved(host, port):
        return {"pods": ["10.0.0.7", "10.0.0.8"]}.get(host, [])

    monkeypatch.setattr(module, "_resolved", resolved)
    replicas = module.Replicas(["pods:8000"], "10.0.0.7:8000", timeout_s=5.0)
    marked = [(b"x-phrasal-forwarded", b"1")]

    def sent_on(client, headers):
        return asyncio.run(replicas.sent_on({"client": client, "headers": headers}))

    assert sent_on(("10.0.0.8", 40000), marked) and sent_on(("10.0.0.7", 40000), marked)
    assert not sent_on(("10.0.0.9", 40000), marked)  # the mark alone is anyone's to send
    assert not sent_on(("10.0.0.8", 40000), [])
    assert not sent_on(None, marked)


def answer(status: int, *marks: str) -> Answer:
    return Answer(status, [(mark.encode(), b"glossary") for mark in marks], b"")


@pytest.mark.parametrize("answers,expected", [
    ([answer(404, NOT_HELD), answer(200)], ("held", 1)),
    ([answer(404, NOT_HELD), answer(404, NOT_HELD)], ("nowhere", None)),
    ([answer(404, NOT_HELD), None], ("unanswered", None)),
    ([None, answer(422)], ("held", 1)),  # a holder's own refusal is its answer
    ([answer(503), answer(404, NOT_HELD)], ("unanswered", 0)),  # loading, or held and overloaded: relayed
    ([answer(503), answer(200)], ("held", 1)),
    ([], ("nowhere", None)),
])
def test_which_answer_a_client_gets(answers, expected):
    outcome, chosen = held_answer([(str(k), a) for k, a in enumerate(answers)])
    assert (outcome, None if chosen is None else answers.index(chosen)) == expected


def test_lists_merge_each_item_once_oldest_first_or_not_at_all():
    local = json.dumps({"glossaries": [{"id": "b", "created": "2026-01-02"}]}).encode()
    other = Answer(200, [], json.dumps({"glossaries": [{"id": "a", "created": "2026-01-01"},
                                                      {"id": "b", "created": "2026-01-02"}]}).encode())
    assert json.loads(merged_list(local, [("x", other)], "glossaries")) == {"glossaries": [
        {"id": "a", "created": "2026-01-01"}, {"id": "b", "created": "2026-01-02"}]}
    assert merged_list(local, [("x", other), ("y", None)], "glossaries") is None
    assert merged_list(local, [("x", Answer(401, [], b"{}"))], "glossaries") is None


@pytest.mark.parametrize("address,parts", [
    ("phrasal-replicas:8000", ("phrasal-replicas", 8000)),
    ("10.0.0.7:80", ("10.0.0.7", 80)),
    ("[fd00::7]:8000", ("fd00::7", 8000)),
    ("phrasal-replicas", "is not host:port"),
    (":8000", "is not host:port"),
    ("host:0", "is not host:port"),
    ("host:http", "is not host:port"),
    ("fd00::7:8000", "in brackets"),
])
def test_replica_addresses(address, parts):
    if isinstance(parts, tuple):
        assert address_parts(address) == parts
    else:
        with pytest.raises(ValueError, match=parts):
            address_parts(address)
        with pytest.raises(ValueError, match=f"replicas: .*{parts}"):
            Settings(replicas=[address])
