"""model/text/compatibility.py: the compatibility characters NFKC expanded before the model saw
them are written back into its translation, with piece spans moved to the new text."""
from __future__ import annotations

import pytest

from model.text.compatibility import restore


def test_an_ellipsis_comes_back_and_the_spans_inside_it_cover_it():
    # "Lade..." as pieces "▁Lade" "." "." ".": the three dots become one character.
    text, spans = restore("Loading…", "Lade...", [(0, 4), (4, 5), (5, 6), (6, 7)])
    assert (text, spans) == ("Lade…", [(0, 4), (4, 5), (4, 5), (4, 5)])


def test_spans_after_an_expansion_move_by_what_it_lost():
    text, spans = restore("Open… now…", "Öffnen ... jetzt...", [(0, 6), (7, 10), (11, 16), (16, 19)])
    assert text == "Öffnen … jetzt…"
    assert spans == [(0, 6), (7, 8), (9, 14), (14, 15)]
    assert [text[b:e] for b, e in spans] == ["Öffnen", "…", "jetzt", "…"]


def test_at_most_as_many_as_the_source_has_first_first():
    assert restore("Open…", "Öffnen ... und ...")[0] == "Öffnen … und ..."


def test_a_trade_mark_comes_back_where_it_touched_a_word_and_nowhere_else():
    assert restore("Microsoft™ Windows uses HTML", "MicrosoftTM Windows verwendet HTML")[0] == \
        "Microsoft™ Windows verwendet HTML"
    # "TM" inside a word is that word, not the sign: the sign stood apart in the source.
    assert restore("Acme ™ tools", "Acme-HTML-Werkzeuge")[0] == "Acme-HTML-Werkzeuge"
    assert restore("Acme ™ tools", "Acme TM Werkzeuge")[0] == "Acme ™ Werkzeuge"


@pytest.mark.parametrize("source, translation", [
    ("Wait... then…", "Warten... dann..."),  # the source wrote the expansion too: either may be meant
    ("ﬁle", "fiel"),  # a ligature is spelling
    ("x²", "x2"),  # one character for one: "2" may be meant
    ("10\u00a0MB", "10 MB"),  # a no-break space read as a space, likewise
    ("Loading", "Lade..."),  # nothing expanded in the source
])
def test_left_alone(source, translation):
    assert restore(source, translation, [(0, 1)]) == (translation, [(0, 1)])


def test_an_empty_span_stays_empty():
    assert restore("Go…", "Los...", [(3, 3), (4, 4), (6, 6)])[1] == [(3, 3), (3, 3), (4, 4)]
