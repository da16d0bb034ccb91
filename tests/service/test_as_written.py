"""A text with placeholders is sent as written first, and its translation taken only where the
model kept every placeholder and term exactly (service/protected_translation.py
``serve_as_written``); otherwise it is translated again with them taken out."""
from __future__ import annotations

import asyncio

from service.protected_translation import serve_as_written, serve_tags_out, tags_out, tried_as_written, tried_tags_out
from service.protection.placement import Placed, prepare, written
from service.runtime.base import DecodingOptions, Translation
from service.settings import Settings
from service.translator import Translator
from testing.fake_runtime import FakeRuntime
from service.catalog import ServedModel
from service.glossary import GlossaryEntry
from service.runtime.cards import ModelCard
from tests.service.hand_alignment import aligned


def test_only_hypotheses_keeping_every_part_exactly_are_served_and_none_when_the_best_does_not():
    prepared = prepare("Copy %s to %s as Brompton", terms=["Brompton"])
    assert tried_as_written(prepared)
    keeps = Translation("Kopiere %s nach %s als Brompton", -1.0)
    drops = Translation("Kopiere %s nach als Brompton", -2.0)    # one %s lost
    adds = Translation("Kopiere %s nach %s als Brompton %d", -2.5)  # one made up
    stray = Translation("Kopiere % %s nach %s als Brompton", -2.7)  # "% %" is a conversion with printf's space flag
    swapped = Translation("Als Brompton %s nach %s kopieren", -3.0)
    served = serve_as_written(prepared, [keeps, drops, adds, stray, swapped], "none")
    assert [s.translation.text for s in served] == [keeps.text, swapped.text]
    # Each part goes to its own occurrence in the output, in order.
    assert served[0].placed == [Placed("printf", "%s", 5, 7, 8, 10, "model"), Placed("printf", "%s", 11, 13, 16, 18, "model"),
                                Placed("term", "Brompton", 17, 25, 23, 31, "model")]
    assert served[1].placed[2] == Placed("term", "Brompton", 17, 25, 4, 12, "model")
    assert serve_as_written(prepared, [drops, keeps], "none") is None


def test_a_quoted_command_line_may_come_back_in_the_targets_quotes_and_no_other_syntax_changes():
    prepared = prepare("Try `%s --help' for more")
    assert [(p.kind, p.text) for p in prepared.protected] == [("option", "`%s --help'")]
    german = Translation("Versuchen Sie »%s --help« für mehr", -1.0)
    gnu = Translation("Versuchen Sie `%s --help' für mehr", -1.5)
    split = Translation("Versuchen Sie »%s« --help für mehr", -2.0)      # the pair no longer holds the command
    stray = Translation("Versuchen Sie `%s --help' für mehr`", -2.5)     # one backtick more than the source
    served = serve_as_written(prepared, [german, gnu, split, stray], "none")
    assert [s.translation.text for s in served] == [german.text, gnu.text]
    assert served[0].placed == [Placed("option", "`%s --help'", 4, 15, 14, 25, "model")]


def test_a_markdown_code_span_keeps_its_backticks():
    # Its backticks are its syntax, not quotes: the software model's »--force« had been taken
    prepared = prepare("Use the `--force` flag to overwrite")
    assert [(p.kind, p.text) for p in prepared.protected] == [("code", "`--force`")]
    quoted = Translation("Den Schalter »--force« zum Überschreiben verwenden", -1.0)
    kept = Translation("Den Schalter `--force` zum Überschreiben verwenden", -1.5)
    assert [s.translation.text for s in serve_as_written(prepared, [kept, quoted], "none")] == [kept.text]
    assert serve_as_written(prepared, [quoted, kept], "none") is None  # the best one lost it: taken out instead


def test_nothing_to_protect_a_glossary_in_markup_or_markup_beyond_tags_around_placeholders_goes_the_protected_way():
    assert not tried_as_written(prepare("Open the file"))
    assert not tried_as_written(prepare("Open the file", glossary=[GlossaryEntry("open", "öffnen")]))
    assert not tried_as_written(prepare("Open %s", "html", glossary=[GlossaryEntry("open", "öffnen")]))
    # Terms taken out like placeholders ("protect") are put back by the alignment.
    assert not tried_as_written(prepare("Open %s", glossary=[GlossaryEntry("open", "öffnen")], glossary_method="protect"))
    assert not tried_as_written(prepare("<b>Open</b> the file", "html"))  # tags alone: taken out
    assert not tried_as_written(prepare("<b>Remote host:</b> %1", "html"))  # a tag around words
    assert not tried_as_written(prepare("Open %s &amp; close", "html"))  # entities: the protected path escapes
    assert not tried_as_written(prepare("Run <pre>make</pre> on %s", "html"))  # a block passed through
    assert not tried_as_written(prepare("Run <code>make</code> on %s &amp; go", "html"))
    assert not tried_as_written(prepare("Open <!-- why --> %s", "html"))
    assert not tried_as_written(prepare("Open <b>%s</b>", "xml", terms=["Brompton"],
                                        glossary=[GlossaryEntry("open", "öffnen")]))


def test_a_plain_text_with_placeholders_goes_as_written_with_its_glossary_enforced_on_the_output():
    prepared = prepare("Copy %s to the folder %s", glossary=[GlossaryEntry("folder", "Verzeichnis")])
    assert tried_as_written(prepared)
    text = "Kopiere %s in den Ordner %s"
    # Kopiere-Copy, %s-%s, in-to, den-the, Ordner-folder, %s-%s
    translation = Translation(text, -1.0, aligned(prepared.original, text, [(0, 0), (1, 1), (2, 2), (3, 3), (4, 4), (5, 5)]))
    (served,) = serve_as_written(prepared, [translation], "token")
    assert served.translation.text == "Kopiere %s in den Verzeichnis %s"
    # The placeholders are placed in the enforced output; the alignment's words address it.
    assert served.placed == [Placed("printf", "%s", 5, 7, 8, 10, "model"), Placed("printf", "%s", 22, 24, 30, 32, "model")]
    assert [w.text for w in served.translation.alignment.target_words] == "Kopiere %s in den Verzeichnis %s".split()
    (report,) = served.glossary
    assert (report.source, report.enforced, report.source_spans, report.target_spans) == (
        "folder", "replaced", [(15, 21)], [(18, 29)])
    # With the model's scores, the article agrees with the term as in the protected path.
    scored = []

    def rescore(source: str, candidates: list[str]) -> list[float]:
        scored.append(source)
        return [1.0 if candidate.startswith("Kopiere %s in das ") else 0.0 for candidate in candidates]

    (served,) = serve_as_written(prepared, [translation], "none", rescore)
    assert served.translation.text == "Kopiere %s in das Verzeichnis %s"
    assert scored == ["Copy %s to the Verzeichnis %s"]


def test_a_glossary_term_inside_a_placeholder_is_no_term_and_an_edit_that_breaks_a_placeholder_is_not_taken():
    prepared = prepare("Rename %(name)s to name", glossary=[GlossaryEntry("name", "Bezeichnung")])
    assert [prepared.original[m.start:m.end] for m in written(prepared).term_matches] == ["name"]
    assert written(prepared).term_matches[0].start == 19
    text = "%(name)s in name umbenennen"
    # The model aligned the term to the placeholder's word: replacing it would lose "%(name)s".
    broken = Translation(text, -1.0, aligned(prepared.original, text, [(1, 0), (2, 1), (3, 0), (0, 3)]))
    assert serve_as_written(prepared, [broken], "none") is None
    kept = Translation(text, -1.0, aligned(prepared.original, text, [(1, 0), (2, 1), (3, 2), (0, 3)]))
    (served,) = serve_as_written(prepared, [kept], "none")
    assert served.translation.text == "%(name)s in Bezeichnung umbenennen"


def test_tags_around_nothing_but_placeholders_go_as_written_with_them():
    assert tried_as_written(prepare("Open %s", "html"))
    assert tried_as_written(prepare("Delete <b>%s</b>?<br/>", "html"))
    assert tried_as_written(prepare("Copy <filename> %1 </filename> to <i>Brompton</i>", "xml", terms=["Brompton"]))


def test_a_markup_translation_keeps_every_tag_as_written_around_what_it_wrapped_or_is_not_taken():
    prepared = prepare("Delete <b>%s</b> from <i>%d</i>?<br/>", "html")
    keeps = Translation("<i>%d</i>: <b>%s</b> löschen?<br/>", -1.0)  # two elements the other way round
    served = serve_as_written(prepared, [keeps], "none")
    # Offsets into the strings as written, tags included; placeholders first, then tags, as placement reports them.
    assert served[0].placed == [Placed("printf", "%s", 10, 12, 14, 16, "model"), Placed("printf", "%d", 25, 27, 3, 5, "model"),
                                Placed("tag", "<b>", 7, 16, 11, 20, "model"), Placed("tag", "<i>", 22, 31, 0, 9, "model"),
                                Placed("tag", "<br/>", 32, 37, 29, 34, "model")]
    for broken in ["<b>%s</b> löschen aus %d?<br/>",        # a tag lost
                   "<b>%s</b> aus <i>%d</i> löschen?",       # the standalone one lost
                   "<b></b>%s aus <i>%d</i> löschen?<br/>",  # a tag that wrapped a placeholder wraps nothing
                   "<B>%s</B> aus <i>%d</i> löschen?<br/>",  # not as written
                   "<b>%s <i>%d</i></b> löschen?<br/>",      # inside another tag now
                   "<b>%s</b> aus <i>%d</i> <u>löschen</u>?<br/>",  # one added
                   "<b>%s</b> aus <i>%d</i> löschen?<br/></b>"]:  # not markup
        assert serve_as_written(prepared, [Translation(broken, -1.0)], "none") is None, broken


def test_an_inline_element_passed_through_goes_as_written_and_is_taken_only_written_to_the_letter():
    # Taken out, it left a hole: "Use <code>--force</code> to overwrite." came back "<code>--force</code>
    # Zum Überschreiben verwenden."; Android's <xliff:g> is such an element ("My App" came back "meinem App").
    assert tried_as_written(prepare("Use <code>--force</code> to overwrite.", "html"))
    assert tried_as_written(prepare('Open <span translate="no">Files</span> now', "html"))
    prepared = prepare('Welcome to <xliff:g id="app">My App</xliff:g>, %s!', "xml")
    assert tried_as_written(prepared) and prepared.markup.tags[0].verbatim == '<xliff:g id="app">My App</xliff:g>'
    keeps = Translation('Willkommen bei <xliff:g id="app">My App</xliff:g>, %s!', -1.0)
    served = serve_as_written(prepared, [keeps], "none")
    assert served[0].placed == [Placed("printf", "%s", 47, 49, 51, 53, "model"),
                                Placed("tag", '<xliff:g id="app">', 11, 45, 15, 49, "model")]
    for broken in ['Willkommen bei <xliff:g id="app">meinem App</xliff:g>, %s!',  # translated inside
                   'Willkommen bei <xliff:g id="app">My App</xliff:g>, %s! <xliff:g id="app">My App</xliff:g>',
                   'Willkommen bei My App, %s!']:
        assert serve_as_written(prepared, [Translation(broken, -1.0)], "none") is None, broken


def translated(runtime: FakeRuntime, scores: dict | None, texts: list[str]):
    model = ServedModel(ModelCard("fake", scores=scores), runtime)

    async def main():
        translator = Translator([model], Settings(max_wait_ms=1.0))
        translator.start()
        try:
            return await translator.translate(texts, "en", "de", DecodingOptions(beam_size=1))
        finally:
            await translator.stop()

    return asyncio.run(main())


def test_the_translator_sends_as_written_and_again_without_the_parts_only_where_they_were_lost():
    runtime = FakeRuntime("en", "de")  # reverses and upper-cases words: "{0}" survives, "%s" becomes "%S"
    kept, lost = translated(runtime, {"software_test": {"bleu": 1.0, "placeholders": 97.5}},
                            ["open {0} now", "open %s now"])
    assert [texts for texts, _ in runtime.calls] == [["open {0} now", "open %s now"], ["open now"]]
    assert kept[0].translation.text == "NOW {0} OPEN"
    assert kept[0].placed == [Placed("brace", "{0}", 5, 8, 4, 7, "model")]
    assert lost[0].translation.text.count("%s") == 1 and "%S" not in lost[0].translation.text
    assert lost[0].placed[0].placement in ("aligned", "fallback")


def test_a_model_that_breaks_placeholders_or_was_never_measured_gets_them_taken_out_at_once():
    for scores in ({"software_test": {"placeholders": 8.6}, "flickr": {"placeholders": None}}, None):
        runtime = FakeRuntime("en", "de")
        (kept,) = translated(runtime, scores, ["open {0} now"])
        assert [texts for texts, _ in runtime.calls] == [["open now"]]
        assert kept[0].placed[0].placement in ("aligned", "fallback")


def test_a_literal_taken_with_its_quotes_may_come_back_in_other_quotes():
    prepared = prepare("Use '--size=M' or <bugs@example.org>")
    assert [p.text for p in prepared.protected] == ["'--size=M'", "<bugs@example.org>"]
    (served,) = serve_as_written(prepared, [Translation("Verwenden Sie »--size=M« oder <bugs@example.org>", -1.0)],
                                 "none")
    assert served.placed == [Placed("option", "'--size=M'", 4, 14, 14, 24, "model"),
                             Placed("email", "<bugs@example.org>", 18, 36, 30, 48, "model")]
    # The address without its brackets has one "<" and ">" fewer than the source: not taken.
    assert serve_as_written(prepared, [Translation("Verwenden Sie »--size=M« oder bugs@example.org", -1.0)],
                            "none") is None


def test_quotes_right_around_a_placeholder_may_be_written_the_translations_way():
    # GNU's `%s' as »%s«: the backtick is no placeholder syntax there; elsewhere it still counts.
    prepared = prepare("Setting hostname to `%s'")
    (served,) = serve_as_written(prepared, [Translation("Rechnername wird auf »%s« gesetzt", -1.0)], "none")
    assert served.placed == [Placed("printf", "%s", 21, 23, 22, 24, "model")]
    assert serve_as_written(prepared, [Translation("Rechnername wird auf %s gesetzt `", -1.0)], "none") is None
    assert serve_as_written(prepare("Run `%s now"), [Translation("Führe %s jetzt aus", -1.0)], "none") is None


def test_a_placeholder_a_pair_wraps_alone_must_stay_wrapped_in_a_translation_sent_as_written():
    # The model's "%s %s()" for "tool %s (%s)" keeps both placeholders and loses what the second stood in.
    prepared = prepare("traceroute tool %s (%s)")
    assert serve_as_written(prepared, [Translation("traceroute-Werkzeug %s %s()", -1.0)], "none") is None
    (served,) = serve_as_written(prepared, [Translation("traceroute-Werkzeug %s (%s)", -1.0)], "none")
    assert served.translation.text == "traceroute-Werkzeug %s (%s)"
    # Other quotes may stand in for the source's: the placeholder is still wrapped.
    (served,) = serve_as_written(prepare("Result: '%s'"), [Translation("Ergebnis: »%s«", -1.0)], "none")
    assert served.translation.text == "Ergebnis: »%s«"
    assert serve_as_written(prepare("Result: '%s'"), [Translation("Ergebnis: %s", -1.0)], "none") is None


def test_markup_with_a_tag_around_words_goes_first_with_only_its_tags_out():
    prepared = prepare("<p>%1 is calling you</p>", "html")
    assert not tried_as_written(prepared) and tried_tags_out(prepared)
    without_tags = tags_out(prepared)
    assert without_tags.model_text == "%1 is calling you"
    text = "%1 ruft dich an"
    keeps = Translation(text, -1.0, aligned(without_tags.model_text, text, [(0, 0), (1, 1), (2, 1), (3, 2)]))
    drops = Translation("ruft dich an", -2.0, aligned(without_tags.model_text, "ruft dich an", [(1, 0), (2, 0), (3, 1)]))
    (served,) = serve_tags_out(prepared, without_tags, [keeps, drops], "none")
    assert served.translation.text == "<p>%1 ruft dich an</p>"
    assert served.placed == [Placed("qt", "%1", 3, 5, 3, 5, "model"), Placed("tag", "<p>", 0, 24, 0, 22, "aligned")]
    # With an alignment asked for, its words address the output and it carries its flags.
    (aligned_one,) = serve_tags_out(prepared, without_tags, [keeps], "token")
    words = aligned_one.translation.alignment.target_words
    assert [aligned_one.translation.text[w.start:w.end] for w in words] == ["%1", "ruft", "dich", "an"]
    assert aligned_one.flags is not None
    # The best hypothesis lost the placeholder: the text goes the protected way.
    assert serve_tags_out(prepared, without_tags, [drops, keeps], "none") is None
    # Not where the tags wrap only placeholders (as written), in plain text, or with terms or a glossary.
    assert not tried_tags_out(prepare("<b>%1</b> is calling", "html"))
    assert not tried_tags_out(prepare("%1 is calling you"))
    assert not tried_tags_out(prepare("<p>%1 is calling Brompton</p>", "html", terms=["Brompton"]))
    assert not tried_tags_out(prepare("<p>%1 is calling</p>", "html", glossary=[GlossaryEntry("calling", "ruft")]))
