"""A translation ends with a full stop only where its source ends with punctuation
(service/full_stop.py)."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pytest

from model.alignments.word_alignment import Word
from service.app import create_app
from service.full_stop import full_stop_as_source
from service.protected_translation import prepare_texts
from service.runtime.base import DecodingOptions, Translation
from service.served import Served
from service.settings import Settings
from testing.fake_runtime import FakeRuntime
from tests.service.hand_alignment import aligned
from tests.service.support import serving


def served(source: str, target: str, fmt: str = "text") -> tuple[Served, object]:
    (prepared,) = prepare_texts([source], fmt, ())
    return Served(Translation(target, -1.0, aligned(source, target, [(0, 0)])), []), prepared


@pytest.mark.parametrize("source, target, expected", [
    ("Two dogs", "Zwei Hunde.", "Zwei Hunde"),
    ("Save (Ctrl+S)", "Speichern (Strg+S).", "Speichern (Strg+S)"),
    ('Open "file"', "„Datei“ öffnen.", "„Datei“ öffnen"),
    ("Click OK", "Klicken Sie auf OK.", "Klicken Sie auf OK"),
    ("Turn it on", "Schalten Sie es an.", "Schalten Sie es an"),         # a short word, no abbreviation
    ("Two dogs\n", "Zwei Hunde.\n", "Zwei Hunde\n"),                   # space after it stays
    ("两只狗", "两只狗。", "两只狗"),
    # Left as the model wrote it:
    ("Two dogs play.", "Zwei Hunde spielen.", "Zwei Hunde spielen."),    # the source ends with punctuation
    ("Delete it?", "Löschen?", "Löschen?"),
    ("Options:", "Optionen.", "Optionen."),
    ('He said "stop."', "Er sagte „halt.“", "Er sagte „halt.“"),
    ("Wait", "Warten...", "Warten..."),                                 # an ellipsis
    ("Wait", "Warten…", "Warten…"),
    ("and so on", "und so weiter usw.", "und so weiter usw."),          # an abbreviation
    ("for example", "z.B.", "z.B."),
    ("by Hans J", "von Hans J.", "von Hans J."),
    ("on the 3rd", "am 3.", "am 3."),                                   # an ordinal
    ("Two dogs", "Zwei Hunde", "Zwei Hunde"),
    ("Two dogs", "Zwei Hunde .", "Zwei Hunde ."),                       # a word of its own
])
def test_the_full_stop_the_model_added_goes_where_the_source_has_none(source, target, expected):
    answer, prepared = served(source, target)
    out = full_stop_as_source(answer, prepared)
    assert out.translation.text == expected
    assert [w.text for w in out.translation.alignment.target_words] == [w for w in expected.split(" ") if w]
    assert out.translation.score == answer.translation.score


def test_in_markup_the_last_visible_character_counts_whichever_tag_the_full_stop_is_placed_beside():
    for target in ("<h1>Ein Tag im Park.</h1>", "<h1>Ein Tag im Park</h1>."):
        answer, prepared = served("<h1>A day in the park</h1>", target, "html")
        assert full_stop_as_source(answer, prepared).translation.text == "<h1>Ein Tag im Park</h1>"
    answer, prepared = served("<p>Two dogs <b>play</b>.</p>", "<p>Zwei Hunde <b>spielen</b>.</p>", "html")
    assert full_stop_as_source(answer, prepared) == answer


class Stopping(FakeRuntime):
    """The fake's translation with a full stop after it, as the caption models end everything."""

    def translate(self, texts: Sequence[str], options: DecodingOptions) -> list[list[Translation]]:
        out = []
        for nbest in super().translate(texts, options):
            stopped = []
            for h in nbest:
                alignment = h.alignment
                if alignment is not None:
                    last = alignment.target_words[-1]
                    alignment = replace(alignment, target_words=alignment.target_words[:-1] + [
                        Word(last.text + ".", last.start, last.end + 1)])
                stopped.append(Translation(h.text + ".", h.score, alignment, h.phrase_map))
            out.append(stopped)
        return out


def test_the_service_answers_without_the_full_stop_and_its_alignment_and_tags_agree(tmp_path):
    app = create_app(Settings(model_dirs=[tmp_path / "en-de"], warmup=False),
                     runtime_factory=lambda settings: [Stopping("en", "de")])
    with serving(app) as client:
        answer = client.post("/translate", json={"source": "en", "target": "de", "text": "two dogs",
                                                 "alignment": "token"}).json()["translations"][0][0]
        assert answer["text"] == "DOGS TWO"
        assert [w["text"] for w in answer["alignment"]["target_words"]] == ["DOGS", "TWO"]
        answer = client.post("/translate", json={"source": "en", "target": "de", "format": "html",
                                                 "text": "<ul><li>two dogs</li><li>the cat sleeps.</li></ul>"}).json()
        assert answer["translations"][0][0]["text"] == "<ul><li>DOGS TWO</li><li>SLEEPS. CAT THE.</li></ul>"
