"""Translation memories (service/memory.py): reading TMX, and /translate answering the segments a
memory holds from it, through the FakeRuntime (which reverses and upper-cases words, so a memory's
answer is told from the model's at a glance)."""
from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from service.app import create_app
from service.memory import Memories, MemoryLoadFailed, MemoryMatch, TranslationMemory, memory_key
from training.corpus.tmx import write_tmx
from service.settings import Settings
from testing.fake_runtime import FakeRuntime
from tests.service.support import serving

TMX = """<?xml version="1.0" encoding="UTF-8"?>
<tmx version="1.4">
  <header srclang="en" datatype="plaintext" segtype="sentence" o-tmf="x" adminlang="en"
          creationtool="x" creationtoolversion="1"/>
  <body>
    <tu><tuv xml:lang="en-US"><seg>Sunday</seg></tuv><tuv xml:lang="DE"><seg>Sonntag</seg></tuv>
        <tuv xml:lang="fr"><seg>dimanche</seg></tuv></tu>
    <tu><tuv lang="en"><seg>%s files</seg></tuv><tuv lang="de"><seg>%s Dateien</seg></tuv></tu>
    <tu><tuv xml:lang="en"><seg>%d items</seg></tuv><tuv xml:lang="de"><seg>Elemente</seg></tuv></tu>
    <tu><tuv xml:lang="en"><seg>Save  the
        file</seg></tuv><tuv xml:lang="de"><seg>Datei speichern</seg></tuv></tu>
    <tu><tuv xml:lang="en"><seg>Bank</seg></tuv><tuv xml:lang="de"><seg>Bank</seg></tuv></tu>
    <tu><tuv xml:lang="en"><seg>Bench</seg></tuv><tuv xml:lang="de"><seg>Bank</seg></tuv></tu>
    <tu><tuv xml:lang="en"><seg>Open <ph>%1</ph></seg></tuv><tuv xml:lang="de"><seg><ph>%1</ph> öffnen</seg></tuv></tu>
    <tu><tuv xml:lang="en"><seg>Lonely</seg></tuv></tu>
    <tu><tuv xml:lang="en"><seg>Blank</seg></tuv><tuv xml:lang="de"><seg> </seg></tuv></tu>
    <tu><tuv xml:lang="en"><seg>Fish &amp; chips</seg></tuv><tuv xml:lang="de"><seg>Fisch &amp; Pommes</seg></tuv></tu>
    <tu><tuv xml:lang="en"><seg>Salt &amp; pepper</seg></tuv><tuv xml:lang="de"><seg>Salz und Pfeffer</seg></tuv></tu>
    <tu><tuv xml:lang="en"><seg>Open it. Save it.</seg></tuv><tuv xml:lang="de"><seg>Öffnen. Speichern.</seg></tuv></tu>
    <tu><tuv xml:lang="en"><seg>Loading…</seg></tuv><tuv xml:lang="de"><seg>Laden...</seg></tuv></tu>
  </body>
</tmx>
"""


@pytest.fixture
def tmx(tmp_path) -> Path:
    path = tmp_path / "ui.tmx"
    path.write_text(TMX, encoding="utf-8")
    return path


def test_a_tmx_file_answers_every_direction_between_its_languages(tmx):
    memory = TranslationMemory.load(tmx)
    assert memory.name == "ui"
    assert memory.get("en", "de", "Sunday") == "Sonntag"
    assert memory.get("de", "en", "Sonntag") == "Sunday"
    assert memory.get("fr", "de", "dimanche") == "Sonntag"
    assert memory.get("en-us", "fr", "Sunday") == "dimanche"  # the full code answers too
    assert memory.get("en", "de", "Fish & chips") == "Fisch & Pommes"
    # Whitespace runs are one space on both sides of the comparison; case counts.
    assert memory.get("en", "de", " Save the file ") == "Datei speichern"
    assert memory.get("en", "de", "sunday") is None
    # "Bank" is the German of two English sources: en->de answers both, de->en neither.
    assert memory.get("en", "de", "Bench") == "Bank" and memory.get("de", "en", "Bank") is None
    assert memory.ambiguous == {("de", "en"): 1}
    assert memory.skipped == {"variant with inline markup": 2, "empty variant": 1,
                              "unit with fewer than two languages": 3}
    assert memory.sizes() == {"de-en": 8, "de-en-us": 1, "de-fr": 1, "en-de": 10, "en-fr": 1, "en-us-de": 1,
                              "en-us-fr": 1, "fr-de": 1, "fr-en": 1, "fr-en-us": 1}


def test_the_key_is_nfc_with_whitespace_runs_as_one_space():
    assert memory_key("  Cafe\u0301 \t au\n lait ") == "Caf\u00e9 au lait"


def test_what_is_not_a_tmx_file_fails_with_its_path_and_the_problem(tmp_path):
    html = tmp_path / "page.tmx"
    html.write_text("<html><body/></html>", encoding="utf-8")
    with pytest.raises(MemoryLoadFailed, match=r"page\.tmx: not a TMX file \(its root element is <html>, not <tmx>\)"):
        TranslationMemory.load(html)
    broken = tmp_path / "broken.tmx"
    broken.write_text("<tmx><body><tu></body></tmx>", encoding="utf-8")
    with pytest.raises(MemoryLoadFailed, match=r"broken\.tmx: not well-formed XML: mismatched tag: line 1, column 17"):
        TranslationMemory.load(broken)


def test_the_first_memory_listed_answers_and_names_must_differ(tmp_path, tmx):
    other = tmp_path / "other" / "names.tmx"
    write_tmx(other, [("1", {"en": "Sunday", "de": "Sonntags"}), ("2", {"en": "Monday", "de": "Montag"})], "en")
    memories = Memories.load([other, tmx])
    assert memories.lookup("en", "de", "Sunday") == MemoryMatch("Sonntags", "names")
    assert memories.lookup("en", "de", "Bench") == MemoryMatch("Bank", "ui")
    assert memories.lookup("en", "de", "Tuesday") is None
    assert memories.serves("en", "de") and not memories.serves("en", "it")
    (tmp_path / "again").mkdir()
    same = tmp_path / "again" / "ui.tmx"
    same.write_text(TMX, encoding="utf-8")
    with pytest.raises(MemoryLoadFailed, match="two memories are named 'ui'"):
        Memories.load([tmx, same])


def test_settings_name_the_memory_file_that_is_missing_or_listed_twice(tmx, tmp_path):
    assert Settings(model_dirs=["models/x"], memories=[tmx]).memories == [tmx]
    with pytest.raises(ValidationError, match="memories: no file .*nowhere.tmx"):
        Settings(model_dirs=["models/x"], memories=[tmp_path / "nowhere.tmx"])
    with pytest.raises(ValidationError, match="memories lists .*ui.tmx twice"):
        Settings(model_dirs=["models/x"], memories=[tmx, tmx])


class Scoring(FakeRuntime):
    """Scores a given translation -3.0 per word."""

    def score(self, pairs):
        return [-3.0 * len(target.split()) for _, target in pairs]


class Unaligning(FakeRuntime):
    """A backend that can neither score nor align given translations (ONNX, CTranslate2)."""

    def force_align(self, pairs, method):
        from service.runtime.base import UnsupportedOption
        raise UnsupportedOption("alignment_method", "cannot align given translations")


def _client(runtime, tmx, **settings):
    app = create_app(Settings(model_dirs=["models/test-en-de"], memories=[tmx], **settings),
                     runtime_factory=lambda received: [runtime])
    return serving(app)


def _post(client, **body):
    response = client.post("/translate", json={"source": "en", "target": "de", **body})
    assert response.status_code == 200, response.text
    return response.json()["translations"]


def test_a_segment_the_memory_holds_is_answered_from_it_and_says_so(tmx):
    runtime = Scoring("en", "de")
    with _client(runtime, tmx) as client:
        (sunday,), (mixed,), (model,) = _post(client, text=["Sunday", "Open the file. Sunday", "Sunday morning"])
        # "Sonntag" is 2 fake pieces, 3 with EOS: -3.0 / 3 ** 1.0 (length_penalty 1, "power").
        assert sunday == {"text": "Sonntag", "score": -1.0, "memory": [
            {"memory": "ui", "source": {"start": 0, "end": 6}, "target": {"start": 0, "end": 7}}]}
        assert mixed["text"] == "FILE. THE OPEN Sonntag"
        assert mixed["memory"] == [{"memory": "ui", "source": {"start": 15, "end": 21},
                                    "target": {"start": 15, "end": 22}}]
        assert model == {"text": "MORNING SUNDAY", "score": -0.5}
        assert [texts for texts, _ in runtime.calls] == [["Open the file.", "Sunday morning"]]
        # "memory": false: the model translates everything; n_best from the memory is its one answer.
        assert _post(client, text="Sunday", memory=False)[0][0]["text"] == "SUNDAY"
        assert [h["text"] for h in _post(client, text="Sunday", n_best=3)[0]] == ["Sonntag"]
        assert client.get("/memories").json() == {"memories": [{"name": "ui", "directions": {"en-de": 10}}]}
        metrics = client.get("/metrics").text
        assert 'phrasal_memory_segments_total{memory="ui",pair="en-de"} 3.0' in metrics


def test_a_memory_answer_is_aligned_by_the_model_forced_through_it(tmx):
    with _client(Scoring("en", "de"), tmx) as client:
        (hypothesis,) = _post(client, text="Save the file", alignment="phrase")[0]
    assert hypothesis["text"] == "Datei speichern"
    # The fake aligns a given translation as a reversal: Datei <- file, speichern <- the.
    assert hypothesis["alignment"]["pharaoh"] == "1-1 2-0"
    assert hypothesis["phrases"]["origin"] == "extracted"
    assert hypothesis["memory"][0]["source"] == {"start": 0, "end": 13}


def test_a_text_the_memory_holds_whole_is_answered_whole_though_the_layout_would_cut_it(tmx):
    with _client(Scoring("en", "de"), tmx) as client:
        (whole,), (cut,) = _post(client, text=["Open it. Save it.", "Open it. Save it. Now."])
    assert whole["text"] == "Öffnen. Speichern." and whole["memory"][0]["source"] == {"start": 0, "end": 17}
    assert cut["text"] == "IT. OPEN IT. SAVE NOW." and "memory" not in cut  # segment by segment


def test_a_memory_answer_may_write_syntax_characters_its_own_way_but_keeps_placeholders(tmx):
    # A model's output with an "&" fewer than its source is not taken as written; a memory's is.
    with _client(Scoring("en", "de"), tmx) as client:
        (hypothesis,) = _post(client, text="Salt & pepper")[0]
    assert hypothesis["text"] == "Salz und Pfeffer" and hypothesis["memory"][0]["memory"] == "ui"


def test_a_memory_answer_that_loses_a_placeholder_is_left_to_the_model(tmx):
    with _client(Scoring("en", "de"), tmx) as client:
        (kept,), (lost,) = _post(client, text=["%s files", "%d items"])
    assert kept["text"] == "%s Dateien" and kept["memory"][0]["memory"] == "ui"
    assert "memory" not in lost and "Elemente" not in lost["text"]


def test_do_not_translate_terms_and_glossaries_apply_to_memory_answers(tmx):
    with _client(Scoring("en", "de"), tmx) as client:
        (kept,) = _post(client, text="Sunday", do_not_translate=["Sunday"])[0]
        (enforced,) = _post(client, text="Sunday", glossary=[{"source": "Sunday", "target": "Sonntags"}])[0]
    assert kept["text"] == "Sunday" and "memory" not in kept
    assert enforced["text"] == "Sonntags" and enforced["glossary"][0]["satisfied"] is True
    assert enforced["memory"][0]["memory"] == "ui"


def test_a_backend_that_cannot_align_given_translations_answers_from_memory_only_without_alignment(tmx):
    with _client(Unaligning("en", "de"), tmx) as client:
        (plain,) = _post(client, text="Sunday")[0]
        (aligned,) = _post(client, text="Sunday", alignment="token")[0]
    assert plain == {"text": "Sonntag", "score": 0.0, "memory": [
        {"memory": "ui", "source": {"start": 0, "end": 6}, "target": {"start": 0, "end": 7}}]}
    assert aligned["text"] == "SUNDAY" and "memory" not in aligned


def test_a_memory_that_fails_to_load_leaves_the_service_live_and_not_ready_with_the_reason(tmp_path):
    bad = tmp_path / "bad.tmx"
    bad.write_text("<tmx><body>", encoding="utf-8")
    with _client(FakeRuntime("en", "de"), bad) as client:
        ready = client.get("/health/ready")
    assert ready.status_code == 503
    assert "bad.tmx: not well-formed XML: no element found" in ready.json()["reason"]


def test_the_libretranslate_api_answers_from_memory_too(tmx):
    with _client(Scoring("en", "de"), tmx) as client:
        response = client.post("/libretranslate/translate", json={"q": ["Sunday", "Sunday morning"], "source": "en",
                                                                   "target": "de"})
    assert response.status_code == 200 and response.json() == {"translatedText": ["Sonntag", "MORNING SUNDAY"]}


class Restarting(Scoring):
    """Its inference process is being replaced: every model call says so."""

    def score(self, pairs, method=None):
        from service.runtime.base import RuntimeUnavailable
        raise RuntimeUnavailable("the en-de inference process is restarting", retry_after=3)

    force_align = score


class FailingToScore(Scoring):
    def score(self, pairs):
        raise ValueError("a scoring bug")


def test_a_runtime_restarting_is_a_503_and_a_failed_scoring_leaves_the_segment_to_the_model(tmx):
    with _client(Restarting("en", "de"), tmx) as client:
        refused = client.post("/translate", json={"text": "Sunday", "source": "en", "target": "de"})
        aligned = client.post("/align", json={"text": "Sunday", "translation": "Sonntag", "source": "en",
                                              "target": "de"})
    for response in (refused, aligned):
        assert (response.status_code, response.headers["retry-after"]) == (503, "3")
        assert "restarting" in response.json()["message"]
    with _client(FailingToScore("en", "de"), tmx) as client:
        (hypothesis,) = _post(client, text="Sunday")[0]
    assert hypothesis == {"text": "SUNDAY", "score": -0.5}


def test_a_label_with_an_accelerator_is_answered_from_memory_its_marker_placed_in_the_answer(tmx):
    with _client(Scoring("en", "de"), tmx) as client:
        (gtk,), (qt,), (beside,) = _post(client, text=["_Sunday", "Save &the file", "_Sunday %s"])
    # Looked up without the marker, which goes where the model's forced alignment puts its word.
    assert gtk["text"] == "_Sonntag" and gtk["memory"][0]["memory"] == "ui"
    assert gtk["protected"] == [{"kind": "accelerator", "text": "_", "source": {"start": 0, "end": 1},
                                 "target": {"start": 0, "end": 1}, "placement": "aligned"}]
    assert qt["text"] == "Datei &speichern" and qt["memory"][0]["source"] == {"start": 0, "end": 14}
    # An accelerator beside a placeholder: the model's (its text without both is "Sunday", held).
    assert beside["text"] == "_SUNDAY %s" and "memory" not in beside


def test_a_unit_that_names_its_source_language_serves_only_from_it(tmp_path):
    path = tmp_path / "terms.tmx"
    write_tmx(path, [("1", {"en": "Cancel", "de": "Abbrechen"}), ("2", {"en": "Abort", "de": "Abbrechen"}),
                     ("3", {"en": "Close", "de": "Schließen"})], "*all*", unit_sources={"1": "en-US", "2": "DE"})
    path.write_text(path.read_text(encoding="utf-8").replace('tuid="3"', 'tuid="3" srclang=""'), encoding="utf-8")
    memory = TranslationMemory.load(path)
    # "Abbrechen" is no longer ambiguous de->en: only unit 2 serves from German; unit 3's empty
    # srclang names no language, so it serves both.
    assert memory.directions == {("en", "de"): {"Cancel": "Abbrechen", "Close": "Schließen"},
                                 ("de", "en"): {"Abbrechen": "Abort", "Schließen": "Close"}}
    assert memory.ambiguous == {}


def test_a_memory_answer_writes_the_sources_compatibility_characters_as_the_models_do(tmx):
    # The source writes "…", the stored answer its expansion: the answer gets the "…" back, as a
    # model's translation does (model/text/compatibility.py).
    with _client(Scoring("en", "de"), tmx) as client:
        (loading,), = _post(client, text=["Loading…"])
    assert loading["text"] == "Laden…" and loading["memory"][0]["target"] == {"start": 0, "end": 6}
