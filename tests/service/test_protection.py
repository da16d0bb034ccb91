"""Placeholders, terms and inline markup taken out before translation and put back by the word
alignment (service/protection/), and the omission / insertion hints (service/alignment_flags.py).
Alignments are built by hand so that every expected position is known."""
from __future__ import annotations

import pytest

from model.alignments.word_alignment import TokenAlignment
from service.alignment_flags import possible_insertions, possible_omissions
from service.protection.markup import MarkupError, read_markup, reads_as_markup
from service.protection.placeholders import find_protected
from service.protection.placement import original_word, output_word, prepare, restore
from tests.service.hand_alignment import aligned, words


@pytest.mark.parametrize("text, found", [
    ("%lu to remove and %lu not upgraded.\n", [("printf", "%lu"), ("printf", "%lu")]),
    # Placeholders written one against the next are one part (`_glued_joined`).
    ("%1$s of %2$d (%-5.2f%%)", [("printf", "%1$s"), ("printf", "%2$d"), ("printf", "%-5.2f%%")]),
    ("Hello {name}, you have {0} new {count, plural, one {# message} other {# messages}}",
     [("brace", "{name}"), ("brace", "{0}"), ("icu", "{count, plural, one {# message} other {# messages}}")]),
    ("Set ${HOME} and {user.name}", [("shell", "${HOME}"), ("brace", "{user.name}")]),
    # The space flag ("% d") is left out: "100% sure" and "50 % off" are prose, not conversions.
    ("100% sure, 50 % off", []),
])
def test_placeholders_of_every_kind_are_found_whole(text, found):
    assert [(p.kind, p.text) for p in find_protected(text)] == found
    for p in find_protected(text):
        assert text[p.start:p.end] == p.text


def test_terms_are_whole_words_and_the_longest_wins():
    text = "GitHub is not Git; New York City is in New York"
    assert [(p.text, p.start) for p in find_protected(text, ["Git", "New York", "New York City"])] == [
        ("Git", 14), ("New York City", 19), ("New York", 39)]


def test_the_model_reads_the_text_without_placeholders_and_they_go_back_by_the_alignment():
    prepared = prepare("%lu to remove and %lu not upgraded.")
    assert prepared.model_text == "to remove and not upgraded."
    # to-zu remove-entfernen and-und not-nicht upgraded.-aktualisiert.
    translation = "zu entfernen und nicht aktualisiert."
    restored = restore(prepared, translation, aligned(prepared.model_text, translation,
                                                      [(0, 0), (1, 1), (2, 2), (3, 3), (4, 4)]))
    assert restored.text == "%lu zu entfernen und %lu nicht aktualisiert."
    assert [(p.text, p.source_start, p.target_start, p.placement) for p in restored.placed] == [
        ("%lu", 0, 0, "aligned"), ("%lu", 18, 21, "aligned")]
    for p in restored.placed:
        assert restored.text[p.target_start:p.target_end] == p.text


def test_a_placeholder_follows_its_left_word_when_the_right_one_is_unaligned_and_falls_back_without_either():
    prepared = prepare("Deleted %d files")
    translation = "Gelöscht Dateien"
    # "files" has no target word: the placeholder goes after "Gelöscht", the target of "Deleted".
    restored = restore(prepared, translation, aligned(prepared.model_text, translation, [(0, 0)]))
    assert (restored.text, restored.placed[0].placement) == ("Gelöscht %d Dateien", "aligned")
    restored = restore(prepared, translation, aligned(prepared.model_text, translation, []))
    assert restored.text.count("%d") == 1 and restored.placed[0].placement == "fallback"


def test_a_text_of_placeholders_only_gives_them_back_unchanged():
    prepared = prepare("{0} %s")
    assert prepared.model_text == ""
    restored = restore(prepared, "", TokenAlignment.empty())
    assert restored.text == "{0} %s"


def test_tags_wrap_the_target_words_aligned_to_what_they_wrapped_with_entities_and_attributes_kept():
    prepared = prepare('<b>Hello</b> &amp; <a href="/x?a=1&amp;b=2">dear friend</a><br/>', "html")
    assert prepared.model_text == "Hello & dear friend"
    translation = "Hallo & lieber Freund"
    restored = restore(prepared, translation, aligned(prepared.model_text, translation,
                                                      [(0, 0), (1, 1), (2, 2), (3, 3)]))
    assert restored.text == '<b>Hallo</b> &amp; <a href="/x?a=1&amp;b=2">lieber Freund</a><br/>'
    b, a, br = restored.placed
    assert (b.text, restored.text[b.target_start:b.target_end]) == ("<b>", "<b>Hallo</b>")
    assert prepared.original[a.source_start:a.source_end] == '<a href="/x?a=1&amp;b=2">dear friend</a>'
    assert restored.text[a.target_start:a.target_end] == '<a href="/x?a=1&amp;b=2">lieber Freund</a>'
    assert (br.text, br.placement) == ("<br/>", "kept")  # at the text's end, kept there
    # The alignment's words, re-addressed, slice the output and the original text.
    assert [output_word(w, restored).text for w in words(translation)] == ["Hallo", "&amp;", "lieber", "Freund"]
    assert [original_word(w, prepared).text for w in words(prepared.model_text)] == ["Hello", "&amp;", "dear", "friend"]


@pytest.mark.parametrize("text, fmt, translation, links, expected", [
    # The alignment puts the word before each tag in the middle ("files?" -> "Dateien"); the empty
    # elements stay at their edges, after or before the closing punctuation as in the source.
    ("Delete the files?<br/>", "html", "Dateien löschen?", [(2, 0), (0, 1)], ("Dateien löschen?<br/>", "kept")),
    ('Delete the files<x id="1"/>?', "xml", "Dateien löschen?", [(2, 0), (0, 1)], ('Dateien löschen<x id="1"/>?', "kept")),
    ('<x id="1"/>Delete the files', "xml", "Dateien löschen", [(2, 0), (0, 1)], ('<x id="1"/>Dateien löschen', "kept")),
    # Inside the text it goes by the alignment, and so does an element with content at an edge,
    # an argument.
    ("Delete the<br/> files", "html", "Die Dateien löschen", [(1, 0), (2, 1), (0, 2)],
     ("Die <br/> Dateien löschen", "aligned")),
    ("<code>ls</code> lists the files", "html", "Dateien auflisten", [(2, 0), (0, 1)],
     ("Dateien <code>ls</code> auflisten", "aligned")),
])
def test_an_empty_element_at_an_edge_of_the_text_stays_there(text, fmt, translation, links, expected):
    prepared = prepare(text, fmt)
    restored = restore(prepared, translation, aligned(prepared.model_text, translation, links))
    (placed,) = restored.placed
    assert (restored.text, placed.placement) == expected


def test_reordered_words_keep_tags_nested():
    # "<i>the <b>red</b> car</i> drives" -> "das Auto fährt rot": "red" now follows the car and the verb.
    prepared = prepare("<i>the <b>red</b> car</i> drives", "xml")
    translation = "das Auto fährt rot"
    restored = restore(prepared, translation, aligned(prepared.model_text, translation,
                                                      [(0, 0), (2, 1), (3, 2), (1, 3)]))
    # <i> covers das..rot (all its words' targets); <b> (rot) stays inside it.
    assert restored.text == "<i>das Auto fährt <b>rot</b></i>"
    assert read_markup(restored.text, "xml").plain == translation


def test_crossing_siblings_are_moved_apart():
    prepared = prepare("<b>one two</b> <i>three</i>", "html")
    translation = "eins drei zwei"
    restored = restore(prepared, translation, aligned(prepared.model_text, translation, [(0, 0), (1, 2), (2, 1)]))
    read_markup(restored.text, "xml")  # well nested, or this raises
    assert restored.text.count("<b>") == restored.text.count("</b>") == 1
    assert restored.text.count("<i>") == restored.text.count("</i>") == 1


@pytest.mark.parametrize("links, expected", [
    # "two" aligned to "X Y", "one" to "X": the later sibling keeps the words after the earlier one.
    ([(0, 0), (2, 0), (2, 1), (1, 2), (3, 3)], "<b>X</b> <b>Y</b> und jetzt"),
    # Both aligned to "X Y": the later one stands empty after the earlier (it would have wrapped it).
    ([(0, 0), (0, 1), (2, 0), (2, 1), (1, 2), (3, 3)], "<b>X Y</b><b></b> und jetzt"),
    # "two" aligned to "Y und", "one" to "Y": its part before the earlier sibling.
    ([(0, 1), (2, 0), (2, 1), (1, 2), (3, 3)], "<b>X</b> <b>Y</b> und jetzt"),
])
def test_a_sibling_never_wraps_an_earlier_one(links, expected):
    prepared = prepare("<b>one</b> and <b>two</b> now", "html")
    translation = "X Y und jetzt"
    restored = restore(prepared, translation, aligned(prepared.model_text, translation, links))
    assert restored.text == expected
    read_markup(restored.text, "xml")


@pytest.mark.parametrize("text, translation, expected", [
    ("Press <kbd>Ctrl</kbd>+<kbd>S</kbd> to save.", "Drücke Strg+S zum Speichern.",
     "Drücke <kbd>Strg</kbd>+<kbd>S</kbd> zum Speichern."),
    ("Press <b>Tab</b>/<b>Shift+Tab</b> to jump.", "Drücke Tab/Umschalt+Tab zum Springen.",
     "Drücke <b>Tab</b>/<b>Umschalt+Tab</b> zum Springen."),
    # The sign twice in the target word: which one parts them is not known; the later tag stands empty.
    ("Press <kbd>A</kbd>+<kbd>B</kbd> now.", "Drücke A+B+C jetzt.", "Drücke <kbd>A+B+C</kbd><kbd></kbd> jetzt."),
])
def test_siblings_inside_one_word_part_at_the_sign_between_them(text, translation, expected):
    prepared = prepare(text, "html")
    links = [(k, k) for k in range(len(prepared.model_text.split()))]
    assert restore(prepared, translation, aligned(prepared.model_text, translation, links)).text == expected


@pytest.mark.parametrize("text, translation, links, expected", [
    # A placeholder at the edge of the paragraph that held it stays inside it.
    ("<p>%1 files deleted</p>", "Dateien gelöscht", [(0, 0), (1, 1)], "<p>%1 Dateien gelöscht</p>"),
    ("<p>Files: %1</p>", "Dateien:", [(0, 0)], "<p>Dateien: %1</p>"),
    ("<p>Text<br/></p>", "Wort", [(0, 0)], "<p>Wort<br/></p>"),
    # Qt's rich text: <head/> stays between <html> and <body>, out of the paragraph ("filter" is aligned
    # to the last word: the placeholder rule alone would put it there).
    ("<html><head/><body><p>Filter unit types.</p></body></html>", "Einheitentypen filtern.",
     [(0, 1), (1, 0), (2, 0)], "<html><head/><body><p>Einheitentypen filtern.</p></body></html>"),
    # Out of a tag that did not hold it, on the side the source had it.
    ("<b>Unit file state:</b><br>", "Status der Unit-Datei:", [(0, 1), (1, 1), (2, 0)],
     "<b>Status der Unit-Datei:</b><br>"),
    ("<br><b>Unit file state:</b>", "Status der Unit-Datei:", [(0, 1), (1, 1), (2, 0)],
     "<br><b>Status der Unit-Datei:</b>"),
    # A tag around a placeholder and a colon the translation left out stands empty: what it held goes in it.
    ("<b>%1:</b> file deleted", "Datei gelöscht", [(1, 0), (2, 1)], "<b>%1</b> Datei gelöscht"),
    ("<i><b>%1 %2:</b></i> ok", "gut", [(1, 0)], "<i><b>%1 %2</b></i> gut"),
])
def test_what_stands_between_words_stays_in_the_tags_that_held_it(text, translation, links, expected):
    prepared = prepare(text, "html")
    restored = restore(prepared, translation, aligned(prepared.model_text, translation, links))
    assert restored.text == expected
    for p in restored.placed:
        assert restored.text[p.target_start:p.target_start + len(p.text)] == p.text


@pytest.mark.parametrize("text, model_text, translation, expected", [
    ("Line one.<br/>Line two.", "Line one. Line two.", "Zeile eins. Zeile zwei.", "Zeile eins.<br/>Zeile zwei."),
    ("<p>A</p><p>B</p>", "A B", "X Y", "<p>X</p><p>Y</p>"),
    # KDE's line break; a space written beside the element stays.
    ("Corrupt.<nl/>Files missing.", "Corrupt. Files missing.", "Kaputt. Dateien fehlen.", "Kaputt.<nl/>Dateien fehlen."),
    ("One. <br/>Two.", "One. Two.", "Eins. Zwei.", "Eins. <br/>Zwei."),
    # An inline element does not break words.
    ("Click <b>here</b>now.", "Click herenow.", "Klicke hierjetzt.", "Klicke <b>hierjetzt</b>."),
])
def test_an_element_that_breaks_words_is_a_space_to_the_model_and_takes_that_space_back(
        text, model_text, translation, expected):
    prepared = prepare(text, "html")
    assert prepared.model_text == model_text
    links = [(k, k) for k in range(len(model_text.split()))]
    assert restore(prepared, translation, aligned(prepared.model_text, translation, links)).text == expected


def test_no_placeholder_is_read_across_a_tag():
    # The plain text reads "%2Any", where "%2A" is a printf conversion.
    prepared = prepare("Failed: <message>%2</message><nl/>Any further archive is skipped.", "html")
    assert [(p.kind, p.text) for p in prepared.protected] == [("qt", "%2")]
    assert prepared.model_text == "Failed: Any further archive is skipped."
    # "%1%2More": printf's "%1%" hid the "%2".
    prepared = prepare("Extracting <filename>%1</filename><nl/><message>%2</message><nl/>More", "html")
    assert [(p.kind, p.text) for p in prepared.protected] == [("qt", "%1"), ("qt", "%2")]


@pytest.mark.parametrize("text, fmt, message", [
    ("<b>bold <i>both</b></i>", "html", "closing tag </b> at character 15 does not match <i> opened at character 8"),
    ("<b>bold", "html", "tag <b> opened at character 0 is never closed"),
    ("bold</b>", "html", "closing tag </b> at character 4 has no opening tag"),
    ("a <br> b", "xml", "tag <br> opened at character 2 is never closed"),
    ("fish & chips", "xml", "'&' at character 5 starts no entity (write &amp; for a literal '&')"),
    ("1 < 2", "xml", "'<' at character 2 starts no tag (write &lt; for a literal '<')"),
])
def test_malformed_markup_is_named_with_its_place(text, fmt, message):
    with pytest.raises(MarkupError) as error:
        read_markup(text, fmt)
    assert str(error.value) == message


def test_html_is_lenient_where_browsers_are():
    markup = read_markup("1 < 2 & fish &eacute; a <br> b", "html")
    assert markup.plain == "1 < 2 & fish é a  b"
    assert [(t.name, t.standalone) for t in markup.tags] == [("br", True)]


def test_an_html_void_name_closed_later_wraps_text():
    # KDE's "<link url='%1'>More...</link>", not html's void <link>, which had made the text a 422;
    # a <link> never closed and a <br> stay void.
    markup = read_markup("See <link url='%1'>More...</link> <link rel=x>and<br>more", "html")
    assert [(t.name, t.standalone, markup.plain[t.start:t.end]) for t in markup.tags] == [
        ("link", False, "More..."), ("link", True, ""), ("br", True, "")]


def test_react_i18next_numbered_tags_are_tags_where_they_pair():
    markup = read_markup("Click <1>here</1> or <2/>, press <3> for yes </4>", "html")
    assert [(t.name, t.standalone, markup.plain[t.start:t.end]) for t in markup.tags] == [
        ("1", False, "here"), ("2", True, "")]
    assert markup.plain == "Click here or , press <3> for yes </4>"
    assert reads_as_markup("Welcome <0>{{name}}</0>, click <1>here</1>.")
    with pytest.raises(MarkupError):
        read_markup("Click <1>here</1>", "xml")  # no XML name


@pytest.mark.parametrize("text", ["Grüße {name} 🙂 aus Köln", "Cafe\u0301 {name} 👩‍👩‍👧 ok"])
def test_offsets_slice_back_to_the_exact_words_with_umlauts_emoji_and_combining_marks(text):
    prepared = prepare(text)
    source = words(prepared.model_text)
    assert [original_word(w, prepared).text for w in source] == [w.text for w in source]
    translation = prepared.model_text
    restored = restore(prepared, translation, aligned(prepared.model_text, translation,
                                                      [(i, i) for i in range(len(source))]))
    assert restored.text == text
    assert [output_word(w, restored).text for w in words(translation)] == [w.text for w in source]


def test_omissions_and_insertions_are_flagged_with_the_confidence_the_links_give():
    alignment = TokenAlignment(
        words("the big red car"), words("das rote Ding Auto"),
        links=[[(0, 0.9), (1, 0.1)], [(2, 0.8), (1, 0.15)], [(3, 0.4), (1, 0.35), (2, 0.25)], [(3, 1.0)]],
        hard=[(0, 0), (2, 1), (3, 2), (3, 3)], pharaoh="")
    # "big": 0.35 from "Ding", not below OMISSION_MAX_WEIGHT (0.2); "red" and "car" are heavier still.
    assert possible_omissions(alignment) == []
    assert [(f.word, f.confidence) for f in possible_insertions(alignment)] == [(2, 0.6)]


def test_insertions_are_read_from_the_support_where_the_alignment_has_one():
    source, target = words("the red car"), words("das rote schnelle Auto")
    links = [[(0, 1.0)], [(1, 0.9), (2, 0.1)], [(1, 0.7), (2, 0.3)], [(2, 1.0)]]
    hard = [(0, 0), (1, 1), (1, 2), (2, 3)]
    # "schnelle" attends to "red" firmly (0.7): the row reading does not flag it; no source word wants it.
    by_rows = TokenAlignment(source, target, links, hard, "")
    assert possible_insertions(by_rows) == []
    by_reverse = TokenAlignment(source, target, links, hard, "", [1.0, 0.85, 0.1, 0.9], "reverse")
    assert [(f.word, f.confidence) for f in possible_insertions(by_reverse)] == [(2, 0.9)]
    # Columns spread a source word over every target word attending to it: their threshold is 0.4.
    by_columns = TokenAlignment(source, target, links, hard, "", [1.0, 0.56, 0.39, 0.71], "columns")
    assert [(f.word, f.confidence) for f in possible_insertions(by_columns)] == [(2, 0.61)]
    # A word without links is flagged whatever the support says.
    unlinked = TokenAlignment(source, target, [*links[:3], []], hard[:3], "", [1.0, 0.85, 0.5, 0.9], "reverse")
    assert [(f.word, f.confidence) for f in possible_insertions(unlinked)] == [(3, 1.0)]


def test_a_source_word_with_a_hard_link_but_hardly_any_weight_is_a_possible_omission():
    # The software model's "Click Apply to save" -> "Klicken Sie auf, um zu speichern", had the label
    # got less: a column-read hard link (Apply -> Klicken) does not make "Apply" translated.
    alignment = TokenAlignment(
        words("Click Apply to save"), words("Klicken Sie auf speichern"),
        links=[[(0, 0.85), (1, 0.15)], [(0, 1.0)], [(0, 0.9), (1, 0.1)], [(3, 0.8), (2, 0.2)]],
        hard=[(0, 0), (1, 0), (0, 1), (0, 2), (3, 3)], pharaoh="")
    # "Apply": 0.15 at most; "to" gets exactly 0.2 from "speichern", not below the threshold.
    assert [(f.word, f.confidence) for f in possible_omissions(alignment)] == [(1, 0.85)]
    alignment = TokenAlignment(words("the car"), words("Auto"), links=[[(1, 0.9), (0, 0.1)]], hard=[(1, 0)],
                               pharaoh="")
    assert [(f.word, f.confidence) for f in possible_omissions(alignment)] == [(0, 0.9)]


def test_a_tag_stays_on_the_largest_cluster_of_its_words_when_the_translation_moves_one_away():
    # "of food in a kitchen" -> "in einer Küche mit Essen": "in" went to the front; the tag keeps "mit Essen".
    prepared = prepare("a bowl <b>of food in</b> a kitchen", "html")
    translation = "in einer Küche eine Schüssel mit Essen"
    hard = [(0, 3), (1, 4), (2, 5), (3, 6), (4, 0), (5, 1), (6, 2)]
    restored = restore(prepared, translation, aligned(prepared.model_text, translation, hard))
    assert restored.text == "in einer Küche eine Schüssel <b>mit Essen</b>"


def test_xliff_codes_hold_native_code_and_a_paired_code_wraps_its_text_where_it_nests():
    text = 'Press <bpt id="1">&lt;b&gt;</bpt>Enter<ept id="1">&lt;/b&gt;</ept> to <ph id="2">&lt;br/&gt;</ph>go.'
    markup = read_markup(text, "xml")
    assert markup.plain == "Press Enter to go."
    pair, ph = markup.tags
    assert (pair.opening, pair.closing, markup.plain[pair.start:pair.end]) == (
        '<bpt id="1">&lt;b&gt;</bpt>', '<ept id="1">&lt;/b&gt;</ept>', "Enter")
    assert (ph.standalone, ph.verbatim) == (True, '<ph id="2">&lt;br/&gt;</ph>')
    prepared = prepare(text, "xml")
    translation = "Zum Gehen Eingabe drücken."
    restored = restore(prepared, translation, aligned(prepared.model_text, translation, [(3, 1), (1, 2), (0, 3)]))
    assert restored.text == ('Zum <ph id="2">&lt;br/&gt;</ph>Gehen <bpt id="1">&lt;b&gt;</bpt>Eingabe<ept id="1">'
                             '&lt;/b&gt;</ept> drücken.')
    # Halves that cross another element's edge (TMX's `i`) are each a code of their own.
    markup = read_markup('A <bpt i="1">&lt;i&gt;</bpt>b <g id="2">c<ept i="1">&lt;/i&gt;</ept> d</g>', "xml")
    assert [(tag.name, tag.standalone) for tag in markup.tags] == [("bpt", True), ("g", False), ("ept", True)]


@pytest.mark.parametrize("text, plain, wrapped", [
    # HTML lets a text leave out these end tags: the element ends where its parent does, the text
    # ends, or a start that HTML says ends it follows.
    ("<html>Enter the date format:<br>", "Enter the date format:", [("html", "Enter the date format:")]),
    ("<ul><li>One<li>Two</ul>", "OneTwo", [("ul", "OneTwo"), ("li", "One"), ("li", "Two")]),
    ("<p>One<div>x</div>", "Onex", [("p", "One"), ("div", "x")]),
    ("<table><tr><td>a<td>b<tr><td>c</table>", "abc",
     [("table", "abc"), ("tr", "ab"), ("td", "a"), ("td", "b"), ("tr", "c"), ("td", "c")]),
])
def test_html_end_tags_the_standard_lets_a_text_leave_out_are_implied(text, plain, wrapped):
    markup = read_markup(text, "html")
    assert markup.plain == plain
    assert [(tag.name, markup.plain[tag.start:tag.end]) for tag in markup.tags if not tag.standalone] == wrapped
    assert all(tag.closing == "" for tag in markup.tags if tag.name in ("html", "li", "td", "tr", "p"))


@pytest.mark.parametrize("text, fmt", [
    ("<b>bold", "html"),         # not an element HTML lets go unclosed
    ("<p><b>bold</p>", "html"),  # one inside it left open
    ("<p>One", "xml"),           # xml closes every element
])
def test_other_unclosed_elements_are_still_malformed(text, fmt):
    with pytest.raises(MarkupError):
        read_markup(text, fmt)


def test_a_translation_leaves_out_the_end_tags_its_source_left_out():
    prepared = prepare("<p>Crashed.<br>Report it.<br>", "html")
    translation = "Abgestürzt. Melden."
    restored = restore(prepared, translation, aligned(prepared.model_text, translation, [(0, 0), (2, 1)]))
    assert restored.text == "<p>Abgestürzt.<br>Melden.<br>"
    # A plain text naming such an element is no markup.
    assert not reads_as_markup("Insert in <li>") and reads_as_markup("<qt>Saved.<p>Close it?</qt>")
