"""ICU MessageFormat's plural and select arguments are translated as a whole sentence per branch,
the text around the argument put into each, the argument's syntax kept (service/icu.py)."""
from __future__ import annotations

import asyncio

import pytest

from service.glossary import GlossaryEntry
from service.icu import branches, icu_split
from service.layout import Kept
from service.protection.placeholders import PLACEHOLDER_STYLES, find_protected
from service.runtime.base import DecodingOptions
from service.settings import Settings
from service.translator import Translator
from testing.fake_runtime import FakeRuntime
from tests.service.support import translated_by_fake
from tests.service.test_as_written import translated


def split(text: str):
    return icu_split(text, find_protected(text), (), PLACEHOLDER_STYLES)


def test_each_branch_is_a_sentence_with_the_text_around_the_argument_and_a_plurals_number_protected():
    text = "You have {count, plural, offset:1 =0 {no messages} one { one message } other {# messages}}."
    layout, found, _ = split(text)
    assert [s.text for s in layout.segments] == [
        "You have no messages.", "You have one message.", "You have # messages."]
    assert [p.text for p in layout.parts if isinstance(p, Kept)] == [
        "{count, plural, offset:1 =0 {", "} one { ", " } other {", "}}"]
    assert [[(p.kind, p.text, p.start) for p in parts] for parts in found] == [[], [], [("icu", "#", 9)]]
    # Every character of a sentence stands for its own in the text sent.
    for segment in layout.segments:
        assert "".join(text[k] for k in segment.origin[:-1]) == segment.text


def test_a_selects_hash_is_text_and_its_branches_are_read_as_sent():
    layout, found, styles = split("{gender, select, male {He} female {She} other {They}} liked #5.")
    assert [s.text for s in layout.segments] == ["He liked #5.", "She liked #5.", "They liked #5."]
    assert found == [[], [], []] and styles == [PLACEHOLDER_STYLES] * 3
    assert branches("{n, plural, one {a} other}", 0, 26) is None


def test_arguments_inside_and_beside_another_nest_a_sentence_per_combination_of_branches():
    text = ("{g, select, female {She has {n, plural, one {# file} other {# files}}} other {They have {n, plural, "
            "other {# files}}}} in {d} {k, select, a {A} other {B}}.")
    layout, found, styles = split(text)
    assert [s.text for s in layout.segments] == [
        "She has # file in {d} A.", "She has # file in {d} B.", "She has # files in {d} A.",
        "She has # files in {d} B.", "They have # files in {d} A.", "They have # files in {d} B."]
    assert [p.text for p in layout.parts if isinstance(p, Kept)] == [
        "{g, select, female {", "{n, plural, one {", "{k, select, a {", "} other {", "}}", "} other {",
        "{k, select, a {", "} other {", "}}", "}}", "} other {", "{n, plural, other {", "{k, select, a {", "} other {",
        "}}", "}}", "}}"]
    assert [[p.text for p in parts] for parts in found] == [["#", "{d}"]] * 6
    for segment in layout.segments:
        assert "".join(text[k] for k in segment.origin[:-1]) == segment.text
    # Put together, the kept syntax and the sentences are the message a program reads.
    assert "".join(p.text if isinstance(p, Kept) else layout.segments[p.segments[0]].text for p in layout.parts) == (
        "{g, select, female {{n, plural, one {{k, select, a {She has # file in {d} A.} other {She has # file in {d} "
        "B.}}} other {{k, select, a {She has # files in {d} A.} other {She has # files in {d} B.}}}}} other {{n, "
        "plural, other {{k, select, a {They have # files in {d} A.} other {They have # files in {d} B.}}}}}}")


@pytest.mark.parametrize("text", [
    # Nested, n's `#` would stand in m's branches, where it reads m's number, and with an offset it
    # is no "{n}"; a literal # would become n's.
    "Deleted {n, plural, offset:1 one {# file} other {# files}} from {m, plural, one {# folder} other {# folders}}.",
    "Issue #5: {n, plural, one {# file} other {# files}}",
    "{a, plural, one {x} other {y}} {b, plural, one {x} other {y}} {c, plural, one {x} other {y}} "
    "{d, plural, one {x} other {y}} {e, plural, one {x} other {y}} {f, plural, one {x} other {y}}",  # 64 sentences
    "{n, plural, one {'{'#'}'} other {#}}",                                # ICU's quoting
    "{n, plural, one {# line}\nother {# lines}}",                          # over lines
    "{n, number} items",                                                   # no branches
    "Issue #{n, plural, one {# file} other {# files}}",                    # against a word or placeholder
    "{n, plural, one {} other {}}",                                        # nothing to translate
    "Open %s",
])
def test_other_texts_are_not_cut_by_their_arguments(text):
    assert split(text) is None


def test_the_translation_is_the_argument_with_each_branchs_sentence_translated():
    # The fake runtime reverses and upper-cases a sentence's words; `#`, taken out, goes back before the
    # word it stood before.
    text = "You have {count, plural, =0 {no messages} other {# new messages}}."
    (served,) = translated_by_fake([text])[0]
    assert served.translation.text == "{count, plural, =0 {MESSAGES. NO HAVE YOU} other {MESSAGES. # NEW HAVE YOU}}"
    (number,) = served.placed
    assert (number.kind, text[number.source_start:number.source_end]) == ("icu", "#")
    assert served.translation.text[number.target_start:number.target_end] == "#"


def test_a_model_that_keeps_placeholders_gets_each_sentence_as_written_and_its_number_taken_as_it_wrote_it():
    runtime = FakeRuntime("en", "de")
    text = "{n, plural, one {# file} other {# files}}"
    (served,) = translated(runtime, {"software_test": {"bleu": 1.0, "placeholders": 97.5}}, [text])[0]
    assert [texts for texts, _ in runtime.calls] == [["# file", "# files"]]  # no second pass: "#" kept
    assert served.translation.text == "{n, plural, one {FILE #} other {FILES #}}"
    assert [(p.kind, p.source_start, p.target_start, p.placement) for p in served.placed] == [
        ("icu", 17, 22, "model"), ("icu", 32, 38, "model")]
    assert {text[17], text[32], served.translation.text[22], served.translation.text[38]} == {"#"}


def test_a_glossary_term_the_sentences_share_is_reported_once_where_it_stands_and_satisfied_in_each():
    async def main():
        translator = Translator([FakeRuntime("en", "de")], Settings(max_wait_ms=1.0))
        translator.start()
        try:
            return await translator.translate(["The server has {n, plural, one {# file} other {# files}}."], "en",
                                              "de", DecodingOptions(beam_size=1),
                                              glossary=[GlossaryEntry("server", "Dienstrechner")])
        finally:
            await translator.stop()

    ((served,),) = asyncio.run(main())
    assert served.translation.text.count("Dienstrechner") == 2
    (report,) = served.glossary
    assert (report.source_spans, report.violations) == ([(4, 10)], [])
    assert [served.translation.text[a:b] for a, b in report.target_spans] == ["Dienstrechner"] * 2


def test_branches_with_inline_markup_are_read_as_html_and_the_syntax_never_reaches_the_model():
    # format.js's rich text: read as html whole, the argument's syntax went to the model as words
    # ("{count, Plural, ein {<b>#</b> neue Nachricht} andere {...}}").
    texts = ["You have {n, plural, one {<b>#</b> file} other {<b>#</b> files}}.",
             "<b>{n, select, a {Alpha} other {Beta}}</b> chosen"]
    (first,), (second,) = translated_by_fake(texts)
    assert first.translation.text.startswith("{n, plural, one {") and first.translation.text.endswith("}}")
    one, other = first.translation.text[len("{n, plural, one {"):-2].split("} other {")
    assert "<b>#</b>" in one and "<b>#</b>" in other and "FILE" in one and "FILES" in other
    assert second.translation.text == "{n, select, a {CHOSEN <b>ALPHA</b>} other {CHOSEN <b>BETA</b>}}"


def test_an_html_text_with_a_plural_argument_is_cut_by_it_too():
    (served,) = translated_by_fake(["Delete {n, plural, one {<b>#</b> file} other {<b>#</b> files}}?"], "html")[0]
    assert served.translation.text.startswith("{n, plural, one {") and " other {" in served.translation.text
    assert served.translation.text.count("<b>#</b>") == 2 and "PLURAL" not in served.translation.text


def test_sibling_plurals_nest_and_the_outer_number_is_written_by_its_name():
    # Nested in the translation, n's `#` would stand in m's branches and read m's number: "{n}" says n's.
    text = "Deleted {n, plural, one {# file} other {# files}} from {m, plural, one {# folder} other {# folders}}."
    (served,) = translated_by_fake([text])[0]
    output = served.translation.text
    assert output == ("{n, plural, one {{m, plural, one {# FOLDER. FROM {n} FILE DELETED} other {# FOLDERS. FROM {n} FILE "
                      "DELETED}}} other {{m, plural, one {# FOLDER. FROM {n} FILES DELETED} other {# FOLDERS. FROM {n} "
                      "FILES DELETED}}}}")
    # Each `#` is reported as sent, where it stands in the text sent and where the translation writes it.
    ns, ms = {text.index("# file"), text.index("# files")}, {text.index("# folder"), text.index("# folders")}
    written = {(p.text, p.source_start, output[p.target_start:p.target_end]) for p in served.placed}
    assert written == {("#", k, "{n}") for k in ns} | {("#", k, "#") for k in ms} and len(served.placed) == 8


@pytest.mark.parametrize("fmt", ["text", "html"])
def test_an_argument_with_markup_that_stays_whole_keeps_the_text_plain_and_the_argument_as_sent(fmt):
    # Sibling plurals with `#` and an offset are not cut (test_other_texts_...); read as markup, the
    # first's syntax had gone to the model as words.
    first, second = "{n, plural, offset:1 one {<b>#</b> file} other {<b>#</b> files}}", "{m, plural, other {# folders}}"
    (served,) = translated_by_fake([f"Deleted {first} from {second}."], fmt)[0]
    assert first in served.translation.text and second in served.translation.text
    assert "DELETED" in served.translation.text
    # Nor is a sentence cut from such a text read as markup ("# " is a heading's mark, cut off).
    (served,) = translated_by_fake([f"# Deleted {first} now"], fmt)[0]
    assert served.translation.text.startswith("# ") and first in served.translation.text


def test_a_doubled_apostrophe_reaches_the_model_as_one_and_comes_back_doubled():
    text = "{n, plural, one {Don''t delete # file} other {Don''t delete # files}}"
    layout, _, _ = split(text)
    assert [segment.text for segment in layout.segments] == ["Don't delete # file", "Don't delete # files"]
    (served,) = translated_by_fake([text])[0]
    # The fake reverses and upper-cases the words; `#` goes back by the alignment.
    assert served.translation.text == "{n, plural, one {# FILE DELETE DON''T} other {# FILES DELETE DON''T}}"


@pytest.mark.parametrize("fmt", ["xml", "html"])
def test_an_argument_in_a_tags_attribute_is_the_tags_and_a_quoted_angle_bracket_ends_no_tag(fmt):
    # Angular's XLIFF 2: an ICU argument in a placeholder's disp attribute had cut the text into branches
    # (the attribute written "..."), and a ">" inside dispStart="&lt;a>" had been read as the tag's end by
    # the edge-space step, which then wrote the tag's rest a second time.
    icu = '<ph id="0" equiv="ICU" disp="{count, plural, =0 {...} other {...}}"/>'
    link = '<pc id="0" dispStart="&lt;a>" dispEnd="&lt;/a>">two dogs</pc>'
    (first,), (second,) = translated_by_fake([f"first: {icu}, second", f"{link} play"], fmt)
    assert first.translation.text == f"SECOND {icu}, FIRST:"
    assert second.translation.text == link.replace("two dogs", "DOGS TWO").replace("<pc", "PLAY <pc")
