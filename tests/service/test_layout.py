"""service/layout.py: how a plain text is cut (lines, columns, runs-on, sentences), how a block is
wrapped again, and how the segments' answers are put back together, every offset re-addressed.
The expected cuts, breaks and offsets are worked out by hand."""
from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from model.alignments.word_alignment import TokenAlignment, Word
from service.glossary import TermReport
from service.layout import Block, Kept, assemble, markup_split, split, whole, wrap
from service.protection.placeholders import find_protected
from service.protection.placement import Placed, Removed
from service.runtime.base import DecodingOptions, PhraseMap, PhrasePair, Translation
from service.served import Served
from service.settings import Settings
from service.translator import Translator
from testing.fake_runtime import FakeRuntime
from tests.service.hand_alignment import aligned

HELP = ("Usage: frob [OPTION]... FILE...\n"
        "Convert each FILE.  Write it out.\n"
        "\n"
        "  -v, --verbose      print what is done\n"
        "  -s, --size=SIZE    scale sizes by SIZE when\n"
        "                     printing them\n")


def cut(text: str, language: str | None = None) -> list:
    """The layout as plain values: kept strings, and per block its segments' texts and gaps."""
    layout = split(text, find_protected(text), language)
    out = []
    for part in layout.parts:
        if isinstance(part, Kept):
            out.append(part.text)
        else:
            out.append(([layout.segments[i].text for i in part.segments], list(part.gaps), part.column,
                        part.width, part.indent))
    return out


def test_a_help_text_is_cut_into_lines_columns_runs_on_and_sentences():
    assert cut(HELP) == [
        (["Usage: frob [OPTION]... FILE..."], [], 0, None, ""),  # no sentence ends at an ellipsis
        "\n",
        (["Convert each FILE.", "Write it out."], ["  "], 0, None, ""),
        "\n\n  -v, --verbose      ",  # an option column has nothing to translate: kept
        (["print what is done"], [], 21, None, ""),
        "\n  -s, --size=SIZE    ",
        (["scale sizes by SIZE when printing them"], [], 21, 45, " " * 21),  # runs on at its own column
        "\n",
    ]


@pytest.mark.parametrize("text, expected", [
    ("Save the file?", [(["Save the file?"], [], 0, None, "")]),
    ("  Save it.  ", ["  ", (["Save it."], [], 2, None, ""), "  "]),
    ("\n\nDone.\n", ["\n\n", (["Done."], [], 0, None, ""), "\n"]),
    # Hard-wrapped prose runs on where a line does not end a sentence, and keeps its break where it does.
    ("Files are kept\nuntil removed. Then\nthey go.\nNext line.",
     [(["Files are kept until removed.", "Then they go."], [" "], 0, 19, ""), "\n",
      (["Next line."], [], 0, None, "")]),
    # A line the next one's first word would have fitted on, with ENDED_SHORT (10) columns to spare,
    # was ended by choice: "Usage: frob [OPTIONS]" + " Starts" + 10 = 38 <= 44. A ragged wrap runs on:
    # "Unable to parse the text-" + " probably" + 10 = 44 > 37.
    ("Usage: frob [OPTIONS]\nStarts the frob daemon and keeps it running\n",
     [(["Usage: frob [OPTIONS]"], [], 0, None, ""), "\n", (["Starts the frob daemon and keeps it running"], [], 0, None, ""),
      "\n"]),
    ("Unable to parse the text-\nprobably problem with input encoding!",
     [(["Unable to parse the text- probably problem with input encoding!"], [], 0, 37, "")]),
    # A list item starts a line of its own, its bullet or number kept, the lines under its text
    # joined to it; a deeper line does not continue a shallower one.
    ("Choose\n- one\n- two", [(["Choose"], [], 0, None, ""), "\n- ", (["one"], [], 2, None, ""), "\n- ",
                              (["two"], [], 2, None, "")]),
    ("  * first\n  * second that\n    runs on\n1. Open it", ["  * ", (["first"], [], 4, None, ""), "\n  * ",
                                                         (["second that runs on"], [], 4, 15, "    "), "\n1. ",
                                                         (["Open it"], [], 3, None, "")]),
    ("Choose one of\n   these", [(["Choose one of"], [], 0, None, ""), "\n   ", (["these"], [], 3, None, "")]),
    # A single item keeps its bullet out of its sentence too.
    ("- Open the file", ["- ", (["Open the file"], [], 2, None, "")]),
    # Markdown's heading and quote marks are kept, not words: a heading is a line of its own, a
    # quote's lines run on at the column after their mark.
    ("# Getting started", ["# ", (["Getting started"], [], 2, None, "")]),
    ("## Installation\nRun the installer and\nfollow the steps.",
     ["## ", (["Installation"], [], 3, None, ""), "\n", (["Run the installer and follow the steps."], [], 0, 21, "")]),
    ("Before:\n> Back up your\n> files first.", [(["Before:"], [], 0, None, ""), "\n> ",
                                                  (["Back up your files first."], [], 2, 14, "> ")]),
    ("#%d of %d", [(["#%d of %d"], [], 0, None, "")]),
    # A fenced code block is kept as written, and no line runs on into it or out of it.
    ("Run this\n```sh\nmake all\nmake install\n```\nand wait.",
     [(["Run this"], [], 0, None, ""), "\n```sh\nmake all\nmake install\n```\n", (["and wait."], [], 0, None, "")]),
    ("~~~~\ncode\n~~~\nstill code\n~~~~~", ["~~~~\ncode\n~~~\nstill code\n~~~~~"]),
    # A Markdown table's cells are columns, its pipes and delimiter row kept; a pipe escaped or in
    # code is no cell's edge.
    ("| Option | Meaning |\n|---|:---:|\n| `a|b` | Pick a \\| b |",
     ["| ", (["Option"], [], 2, None, ""), " | ", (["Meaning"], [], 11, None, ""), " |\n|---|:---:|\n| `a|b` | ",
      (["Pick a \\| b"], [], 10, None, ""), " |"]),
    # A line break written as an escape (a resource file's `\n`) breaks the line like one.
    (r"First line.\n\n  Second line. Third one.", [(["First line."], [], 0, None, ""), r"\n\n  ",
                                                    (["Second line.", "Third one."], [" "], 0, None, "")]),
    (r"Press \"OK\" now \nTo go", [(['Press "OK" now'], [], 0, None, ""), r" \n", (["To go"], [], 0, None, "")]),
    (r"%s\n%s", [r"%s\n%s"]),
    # So does Java's `%n` (String.format's line break, and aptitude's).
    ("Usage: %s [options]%n%nOptions:", [(["Usage: %s [options]"], [], 0, None, ""), "%n%n", (["Options:"], [], 0, None, "")]),
    # Not a percent sign's "%%n", nor a `%n` that is a program's own code (apart from the words
    # around it, or defined by what follows).
    ("Save 100%%n", [(["Save 100%%n"], [], 0, None, "")]),
    ("%l Lyricist %n Session name", [(["%l Lyricist %n Session name"], [], 0, None, "")]),
    ("%n: track number", [(["%n: track number"], [], 0, None, "")]),
    ("Selected (%n)", [(["Selected (%n)"], [], 0, None, "")]),  # Qt's plural count
    ("%n file(s) deleted", [(["%n file(s) deleted"], [], 0, None, "")]),
    # Not where it is named in quotes, nor inside a sentence it wraps.
    (r"Start with '-- \n' here.", [([r"Start with '-- \n' here."], [], 0, None, "")]),
    (r"Remove the package name\nspecified on the command line.",
     [([r"Remove the package name\nspecified on the command line."], [], 0, None, "")]),
    # Not where a backslash means something else, or is itself escaped.
    (r"Saved to C:\new\data now", [([r"Saved to C:\new\data now"], [], 0, None, "")]),
    (r"Name:\nValue", [(["Name:"], [], 0, None, ""), r"\n", (["Value"], [], 0, None, "")]),  # no drive "e:\"
    (r"Write \\n for a break", [([r"Write \\n for a break"], [], 0, None, "")]),
    # A quote written escaped (a resource file's `\'`, a MessageFormat message's `''`) reaches the
    # model as the quote.
    (r"Don\'t save \"%s\"", [(["Don't save \"%s\""], [], 0, None, "")]),
    ("Can''t open file ''{0}''.", [(["Can't open file '{0}'."], [], 0, None, "")]),
    ("It''s {name}''s file.", [(["It's {name}'s file."], [], 0, None, "")]),  # ICU's named argument
    # So does a character a text in ASCII writes as Java's properties and JSON do.
    (r"Click \u201cSave\u201d \ud83d\ude00", [(["Click \u201cSave\u201d \U0001F600"], [], 0, None, "")]),
    # Not where some of them are written plain, one is named (after a quote mark), a backslash means something
    # else, or a text's doubled apostrophes are not MessageFormat's (no argument).
    (r"Don\'t save 'x'", [([r"Don\'t save 'x'"], [], 0, None, "")]),
    (r"Trailing '\' found", [([r"Trailing '\' found"], [], 0, None, "")]),
    (r"Regexp ends with `\' here", [([r"Regexp ends with `\' here"], [], 0, None, "")]),
    ("Sets whether \"\\'\" is allowed", [(["Sets whether \"\\'\" is allowed"], [], 0, None, "")]),
    (r"Don\'t write to C:\temp", [([r"Don\'t write to C:\temp"], [], 0, None, "")]),
    ("It''s ''quoted''", [(["It''s ''quoted''"], [], 0, None, "")]),
    ("Can''t open '{0}'", [(["Can''t open '{0}'"], [], 0, None, "")]),  # MessageFormat's quoted text
    # Nor a text that is not ASCII, half a character, or a control (no line break to cut at).
    (r"Caf\u00e9 in Köln", [([r"Caf\u00e9 in Köln"], [], 0, None, "")]),
    (r"Half \ud83d here", [([r"Half \ud83d here"], [], 0, None, "")]),
    (r"Line\u000Anext", [([r"Line\u000Anext"], [], 0, None, "")]),
    # A heading's underline or a rule is a line of its own.
    ("Installation\n============\n\nRun the installer.", [(["Installation"], [], 0, None, ""), "\n============\n\n",
                                                          (["Run the installer."], [], 0, None, "")]),
    ("First part\n* * *\nsecond part", [(["First part"], [], 0, None, ""), "\n* * *\n", (["second part"], [], 0, None, "")]),
    # Plural forms as vue-i18n writes them are each a message of its own; a command's alternatives,
    # Laravel's counted ranges and a shell's "||" are not forms.
    ("no apples | one apple | {count} apples", [(["no apples"], [], 0, None, ""), " | ", (["one apple"], [], 12, None, ""),
                                                " | ", (["{count} apples"], [], 24, None, "")]),
    ("car | cars", [(["car"], [], 0, None, ""), " | ", (["cars"], [], 6, None, "")]),
    ("Fade|Linear", [(["Fade|Linear"], [], 0, None, "")]),  # glib's context prefix, Q_()
    ("Usage: ipmaddr [ add | del ] ADDR", [(["Usage: ipmaddr [ add | del ] ADDR"], [], 0, None, "")]),
    ("{0} None|[1,19] Some|[20,*] Many", [(["{0} None|[1,19] Some|[20,*] Many"], [], 0, None, "")]),
    ("make || exit", [(["make || exit"], [], 0, None, "")]),
    # A link reference definition is kept as written, as code is (a fenced one stays the fence's).
    ('See the [guide][g].\n\n[g]: https://example.org/guide "The Guide"',
     [(["See the [guide][g]."], [], 0, None, ""), '\n\n[g]: https://example.org/guide "The Guide"']),
    ("```\n[a]: b.c\nmore code\n```\nDone.", ["```\n[a]: b.c\nmore code\n```\n", (["Done."], [], 0, None, "")]),
    ("[%s]: No such color", [(["[%s]: No such color"], [], 0, None, "")]),  # a message, not a definition
    # A fence never closed is no fence.
    ("```\nNot closed", ["```\n", (["Not closed"], [], 0, None, "")]),
    # Abbreviations, single letters and lower case after a full stop are no sentence end.
    ("See e.g. Fig. 2 and J. Smith. then go. Done.", [(["See e.g. Fig. 2 and J. Smith. then go.", "Done."], [" "],
                                                      0, None, "")]),
    # A sentence without a letter ("42.") stays with the next one.
    ("Done. 42. Next.", [(["Done.", "42. Next."], [" "], 0, None, "")]),
    ("a\tb", [(["a"], [], 0, None, ""), "\t", (["b"], [], 2, None, "")]),
    # Two spaces are a column only after an option; in prose they are a slip.
    ("-x  do it", ["-x  ", (["do it"], [], 4, None, "")]),
    ("Hello  big world", [(["Hello  big world"], [], 0, None, "")]),
    ("%s: %s", ["%s: %s"]),
    # A line of placeholders and options alone is no piece of a wrapped sentence: nothing runs on
    # from it, and it runs on only from a line that ends in a word (a preposition's object).
    ("%1\nTrusted by %2", ["%1\n", (["Trusted by %2"], [], 0, None, "")]),
    ("Usage: %s LOGIN\n       %s -D\n       %s -D [options]\n",
     [(["Usage: %s LOGIN"], [], 0, None, ""), "\n       %s -D\n       ", (["%s -D [options]"], [], 7, None, ""), "\n"]),
    ("%s%s\nEncoding: %s\n%s", ["%s%s\n", (["Encoding: %s"], [], 0, None, ""), "\n%s"]),
    ("the file will remain at\n'{}'", [(["the file will remain at '{}'"], [], 0, 23, "")]),
    # Icons set apart at a label's edges are kept as sent (sent with them, "✔ Done" came back "✔ Done
    # fertig"): a dingbat, an emoji with its variation selector or skin tone, an arrow, an icon font's glyph.
    ("✔ Done", ["✔ ", (["Done"], [], 2, None, "")]),
    ("⭐\ufe0f Star us", ["⭐\ufe0f ", (["Star us"], [], 3, None, "")]),
    ("Thanks 👍🏽", [(["Thanks"], [], 0, None, ""), " 👍🏽"]),
    ("🎉🎉 Party 🎉 ✓", ["🎉🎉 ", (["Party"], [], 3, None, ""), " 🎉 ✓"]),
    ("Save file \uf00c", [(["Save file"], [], 0, None, ""), " \uf00c"]),
    ("- ➜ Next page", ["- ➜ ", (["Next page"], [], 4, None, "")]),
    ("Done.\n✔ Saved", [(["Done."], [], 0, None, ""), "\n✔ ", (["Saved"], [], 2, None, "")]),
    # not set apart, or inside the text: the text's own
    ("✔Done", [(["✔Done"], [], 0, None, "")]),
    ("A → B", [(["A → B"], [], 0, None, "")]),
])
def test_cuts(text, expected):
    assert cut(text) == expected


@pytest.mark.parametrize("text, language, expected", [
    # A capital letter after a value begins a line of its own, in any language.
    ("Trusted by %1\nSHA1 %2", None, [(["Trusted by %1"], [], 0, None, ""), "\n", (["SHA1 %2"], [], 0, None, "")]),
    # A capitalised word after a synopsis' argument (a line too long to have been ended short:
    # 31 + 1 + 8 + 10 = 50 > 33 columns) begins the description, German's too.
    ("Usage: %s [options] <interface>\nSolicits IPv6 routers on the link\n", None,
     [(["Usage: %s [options] <interface>"], [], 0, None, ""), "\n", (["Solicits IPv6 routers on the link"], [], 0, None, ""),
      "\n"]),
    ("Aufruf: %s [Optionen] <Schnittstelle>\nBietet IPv6-Router der Leitung an\n", "de",
     [(["Aufruf: %s [Optionen] <Schnittstelle>"], [], 0, None, ""), "\n", (["Bietet IPv6-Router der Leitung an"], [], 0, None, ""),
      "\n"]),
    # In English a capitalised word after a line of several words begins something new; German
    # writes its nouns so, and a line that breaks before one runs on.
    ("Project is opened\nPlease, close it first", "en",
     [(["Project is opened"], [], 0, None, ""), "\n", (["Please, close it first"], [], 0, None, "")]),
    ("Project is opened\nPlease, close it first", "de", [(["Project is opened Please, close it first"], [], 0, 22, "")]),
    ("Ändert das Basisverzeichnis für das\nHome-Verzeichnis des Benutzers", "de",
     [(["Ändert das Basisverzeichnis für das Home-Verzeichnis des Benutzers"], [], 0, 35, "")]),
    # A German word that is never a noun keeps its capital only at a sentence's start.
    ("Ein Projekt ist geöffnet\nBitte, schließen Sie es erst", "de",
     [(["Ein Projekt ist geöffnet"], [], 0, None, ""), "\n", (["Bitte, schließen Sie es erst"], [], 0, None, "")]),
    # A language not known: only what holds in every language cuts.
    ("Project is opened\nPlease, close it first", None, [(["Project is opened Please, close it first"], [], 0, 22, "")]),
    # A label wrapped one word a line, a metavariable, an acronym run on in English too.
    ("Click\nTo\nAdd\nImage", "en", [(["Click To Add Image"], [], 0, 5, "")]),
    ("Change the password to this (encrypted)\nPASSWORD", "en",
     [(["Change the password to this (encrypted) PASSWORD"], [], 0, 39, "")]),
    ("without even the implied warranty of\nMERCHANTABILITY or FITNESS", "en",
     [(["without even the implied warranty of MERCHANTABILITY or FITNESS"], [], 0, 36, "")]),
])
def test_a_line_that_begins_anew_is_not_run_on(text, language, expected):
    assert cut(text, language) == expected


def test_nothing_is_cut_inside_a_placeholder_and_one_across_lines_keeps_the_text_whole():
    # Three spaces and a full stop before a capital, all inside the ICU argument.
    text = "Got {n, select, a {Yes. No}   other {x}}.  Next one."
    assert cut(text) == [(["Got {n, select, a {Yes. No}   other {x}}.", "Next one."], ["  "], 0, None, "")]
    icu = "{n, plural,\n one {# file} other {# files}} left"
    assert split(icu, find_protected(icu)).whole
    assert split("Just one.", []).whole and whole("a\nb").whole


def test_wrap_breaks_greedily_at_whitespace_never_inside_a_kept_span():
    block = Block((0,), (), column=4, width=12, indent="  ")
    # "aaa bbb" fits in columns 4..11; " ccc" would end at 15: break. "ccc dd" ends at 8.
    wrapped = wrap("aaa bbb ccc dd eeeeeeeeeeeeee f", block, [])
    assert wrapped.text == "aaa bbb\n  ccc dd\n  eeeeeeeeeeeeee\n  f"
    assert wrapped.breaks == ((7, 1, 3), (14, 1, 3), (29, 1, 3))
    assert [wrapped.offset(x) for x in (0, 7, 8, 15, 30)] == [0, 7, 10, 19, 36]
    narrow = Block((0,), (), column=0, width=8)
    assert wrap("aaa bbb ccc", narrow, []).text == "aaa bbb\nccc"
    assert wrap("aaa bbb ccc", narrow, [(4, 11)]).text == "aaa bbb ccc"
    assert wrap("aaa bbb ccc", Block((0,), ()), []).text == "aaa bbb ccc"


def test_a_longer_translation_keeps_the_sources_number_of_lines_up_to_the_line_limit():
    # At width 8 "aaaa bbbb" (9 columns) breaks: three lines for a source of two. Width 9 keeps two.
    two = Block((0,), (), column=0, width=8, lines=2)
    assert wrap("aaaa bbbb cccc", two, []).text == "aaaa bbbb\ncccc"
    assert wrap("aaaa bbbb cccc", replace(two, lines=1), []).text == "aaaa bbbb cccc"
    assert wrap("aaaa bbbb cccc", replace(two, lines=3), []).text == "aaaa\nbbbb\ncccc"
    # Two lines would need 81 columns (40 + 1 + 40), over LINE_LIMIT: wrapped at the source's width.
    long = " ".join(["x" * 40] * 3)
    assert wrap(long, replace(two, width=50), []).text == "\n".join(["x" * 40] * 3)
    # The first line starts at the block's column: "aa bbbb" ends at column 79 there, "aa bbbb cc" at
    # 82, so one line cannot be had, and the source's width (76) gives a line a word.
    late = Block((0,), (), column=72, width=76, indent=" " * 72, lines=2)
    assert wrap("aa bbbb cc", late, []).text == "aa bbbb\n" + " " * 72 + "cc"
    assert wrap("aa bbbb cc", replace(late, lines=1), []).text == ("\n" + " " * 72).join(["aa", "bbbb", "cc"])
    assert [part.lines for part in split("Files are kept\nuntil removed. Then\nthey go.\nNext line.", []).parts
            if isinstance(part, Block)] == [3, None]


def test_a_wrapped_block_that_grows_to_keep_its_lines_is_addressed_through_its_breaks():
    text = "aa bb\ncc."
    layout = split(text, [])
    served = hypothesis("aa bb cc.", "xxxx yyyy zzzz.", [(0, 0), (1, 1), (2, 2)], -1.0)
    (answer,) = assemble(layout, [[served]], "token")
    assert answer.translation.text == "xxxx yyyy\nzzzz."  # at the source's 5 columns: three lines
    assert [(w.text, w.start, w.end) for w in answer.translation.alignment.target_words] == [
        ("xxxx", 0, 4), ("yyyy", 5, 9), ("zzzz.", 10, 15)]


def hypothesis(source: str, target: str, hard, score: float, placed=(), removed=(), glossary=(),
               source_words=None) -> Served:
    alignment = aligned(source, target, hard)
    if source_words is not None:
        alignment = TokenAlignment(source_words, alignment.target_words, alignment.links, alignment.hard, "")
    return Served(Translation(target, score, alignment), list(placed), None, list(removed), list(glossary))


def test_the_answers_are_put_back_into_the_layout_every_offset_re_addressed():
    text = "  -v  print %s now.  Stop it.\n"
    layout = split(text, find_protected(text))
    assert [s.text for s in layout.segments] == ["print %s now.", "Stop it."]
    # The segment's answer as serve() gives it: source words in the segment's text, "%s" put back.
    first = hypothesis("print now.", "jetzt %s drucken.", [(1, 0), (0, 2)], -1.0,
                       placed=[Placed("printf", "%s", 6, 8, 6, 8, "aligned")], removed=[Removed("printf", "%d", 0)],
                       glossary=[TermReport("now", "jetzt", [(9, 12)], [(0, 5)], "replaced")],
                       source_words=[Word("print", 0, 5), Word("now.", 9, 13)])
    second = hypothesis("Stop it.", "Halt.", [(0, 0)], -3.0)
    (answer,) = assemble(layout, [[first], [second]], "token")
    assert answer.translation.text == "  -v  jetzt %s drucken.  Halt.\n"
    # Scores weighted by the translations' lengths plus one: (18 * -1 + 6 * -3) / 24.
    assert answer.translation.score == pytest.approx(-1.5)
    alignment = answer.translation.alignment
    assert [(w.text, w.start) for w in alignment.source_words] == [("print", 6), ("now.", 15), ("Stop", 21),
                                                                   ("it.", 26)]
    for word in alignment.source_words:
        assert text[word.start:word.end] == word.text
    for word in alignment.target_words:
        assert answer.translation.text[word.start:word.end] == word.text
    assert [w.start for w in alignment.target_words] == [6, 12, 15, 25]
    assert alignment.hard == [(1, 0), (0, 2), (2, 3)] and alignment.pharaoh == "0-2 1-0 2-3"
    assert alignment.links[3] == [(2, 1.0)]
    assert answer.placed == [Placed("option", "-v", 2, 4, 2, 4, "kept"), Placed("printf", "%s", 12, 14, 12, 14, "aligned")]
    assert answer.removed == [Removed("printf", "%d", 6)]
    assert answer.glossary == [TermReport("now", "jetzt", [(15, 18)], [(6, 11)], "replaced")]
    assert answer.flags is not None


def test_a_term_a_segment_found_inside_a_compound_stays_found_in_the_joined_answer():
    # A German compound part ("einstellungen") is found only by the segment that knew its target
    # language and its alignment: its span is carried over.
    text = "Stop it. Open the settings."
    layout = split(text, [])
    first = hypothesis("Stop it.", "Halt.", [(0, 0)], -1.0)
    second = hypothesis("Open the settings.", "Netzwerkeinstellungen öffnen.", [(2, 0), (0, 1)], -1.0,
                        glossary=[TermReport("settings", "Einstellungen", [(9, 17)], [(8, 21)], "kept")])
    (answer,) = assemble(layout, [[first], [second]], "none")
    assert answer.translation.text == "Halt. Netzwerkeinstellungen öffnen."
    assert answer.glossary == [TermReport("settings", "Einstellungen", [(18, 26)], [(14, 27)], "kept")]
    assert answer.glossary[0].satisfied


def test_a_run_on_block_is_wrapped_and_its_words_addressed_through_the_breaks():
    text = "aa bb\ncc."
    layout = split(text, [])
    assert [s.text for s in layout.segments] == ["aa bb cc."] and layout.segments[0].origin[5] == 5
    served = hypothesis("aa bb cc.", "xx yy zz.", [(0, 0), (1, 1), (2, 2)], -1.0)
    (answer,) = assemble(layout, [[served]], "token")
    assert answer.translation.text == "xx yy\nzz."
    alignment = answer.translation.alignment
    assert [(w.text, w.start, w.end) for w in alignment.source_words] == [("aa", 0, 2), ("bb", 3, 5), ("cc.", 6, 9)]
    assert [(w.text, w.start, w.end) for w in alignment.target_words] == [("xx", 0, 2), ("yy", 3, 5), ("zz.", 6, 9)]


def test_nbest_joins_each_segments_kth_and_phrase_pairs_shift_by_the_words_before():
    layout = split("One. Two.", [])
    one = [hypothesis("One.", "Eins.", [(0, 0)], -1.0), hypothesis("One.", "Ein.", [(0, 0)], -2.0)]
    two = [hypothesis("Two.", "Zwei.", [(0, 0)], -1.0)]
    for hypotheses in (one, two):
        for k, h in enumerate(hypotheses):
            pairs = PhraseMap("extracted", [PhrasePair((0, 1), (0, 1), 1.0)])
            hypotheses[k] = Served(Translation(h.translation.text, h.translation.score, h.translation.alignment, pairs),
                                   [])
    answers = assemble(layout, [one, two], "phrase")
    assert [a.translation.text for a in answers] == ["Eins. Zwei.", "Ein. Zwei."]
    assert answers[0].translation.phrase_map == PhraseMap("extracted", [PhrasePair((0, 1), (0, 1), 1.0),
                                                                        PhrasePair((1, 2), (1, 2), 1.0)])
    assert assemble(layout, [one, two], "none")[0].translation.alignment is None


def test_the_translator_sends_segments_and_answers_in_the_texts_layout():
    runtime = FakeRuntime("en", "de")
    settings = Settings(max_segments=4, max_chars=200, max_wait_ms=1.0, max_source_tokens=3)

    async def main():
        translator = Translator([runtime], settings)
        translator.start()
        try:
            answers = await translator.translate(["Go home.  Stay here.\n  -q  be quiet\n", "%s: %s",
                                                  "Job done\nPlease wait"], "en", "de",
                                                 DecodingOptions(beam_size=1))
            with pytest.raises(Exception) as info:
                await translator.translate(["Fine.", "Fine. one two three four"], "en", "de")
            return answers, info.value
        finally:
            await translator.stop()

    answers, error = asyncio.run(main())
    # FakeRuntime reverses and upper-cases the words of each segment it is sent.
    assert [[h.translation.text for h in n] for n in answers] == [["HOME. GO  HERE. STAY\n  -q  QUIET BE\n"],
                                                                  ["%s: %s"], ["DONE JOB\nWAIT PLEASE"]]
    # The request's source language decides that a capitalised line begins anew (English).
    assert sorted(runtime.calls[0][0]) == sorted(["Go home.", "Stay here.", "be quiet", "Job done", "Please wait"])
    # A segment over the token limit is refused naming the text it is part of.
    assert (error.field, error.index, error.kind) == ("text", 1, "too_many_tokens")


def test_joined_segments_keep_their_words_support_when_all_read_it_alike():
    text = "Stop it.  Go on."
    layout = split(text, find_protected(text))
    assert [s.text for s in layout.segments] == ["Stop it.", "Go on."]

    def read(source, target, hard, support, kind):
        served = hypothesis(source, target, hard, -1.0)
        alignment = replace(served.translation.alignment, support=support, support_from=kind)
        return replace(served, translation=replace(served.translation, alignment=alignment))

    first = read("Stop it.", "Halt.", [(0, 0)], [0.9], "reverse")
    second = read("Go on.", "Geh weiter.", [(0, 0), (1, 1)], [0.8, 0.1], "reverse")
    (answer,) = assemble(layout, [[first], [second]], "token")
    assert (answer.translation.alignment.support, answer.translation.alignment.support_from) == (
        [0.9, 0.8, 0.1], "reverse")
    assert [f.word for f in answer.flags.insertions] == [2]  # "weiter.": 0.1 < 0.2
    # One segment read by columns (its reverse model split the words otherwise): no joint reading.
    (mixed,) = assemble(layout, [[first], [read("Go on.", "Geh weiter.", [(0, 0), (1, 1)], [0.8, 0.1], "columns")]],
                        "token")
    assert (mixed.translation.alignment.support, mixed.translation.alignment.support_from) == (None, None)


def test_the_joined_answer_counts_only_what_each_segment_found_for_its_terms():
    # "Entfernen" translates "Remove" in the first sentence; the second segment found its term Delete
    # missing. Searching the joined output again had counted the first sentence's word for it.
    text = "Remove it. Press Delete."
    layout = split(text, [])
    first = hypothesis("Remove it.", "Entfernen Sie es.", [(0, 0), (1, 2)], -1.0)
    second = hypothesis("Press Delete.", "Drücken Sie Löschen.", [(0, 0), (1, 2)], -1.0,
                        glossary=[TermReport("Delete", "Entfernen", [(6, 12)], [], "kept", ["missing"])])
    (answer,) = assemble(layout, [[first], [second]], "none")
    assert answer.translation.text == "Entfernen Sie es. Drücken Sie Löschen."
    assert answer.glossary == [TermReport("Delete", "Entfernen", [(17, 23)], [], "kept", ["missing"])]


def test_an_accelerator_is_read_in_a_label_line_and_never_in_a_sentence_cut_from_a_longer_line():
    runtime = FakeRuntime("de", "en")
    settings = Settings(max_segments=4, max_chars=200, max_wait_ms=1.0)

    async def main():
        translator = Translator([runtime], settings)
        translator.start()
        try:
            return await translator.translate(
                ["Doppelte key_id gefunden. Key_ids dürfen nur einmal vorkommen.", "_Datei\n\nAn_sicht"], "de", "en",
                DecodingOptions(beam_size=1))
        finally:
            await translator.stop()

    (sentences,), (menu,) = asyncio.run(main())
    # "Key_ids dürfen ..." alone would read as a label with a mnemonic; cut from a line of two `_`, it is not.
    assert [p.kind for p in sentences.placed] == []
    assert sentences.translation.text == "GEFUNDEN. KEY_ID DOPPELTE VORKOMMEN. EINMAL NUR DÜRFEN KEY_IDS"
    # Each paragraph of lines is a label of its own: both mnemonics are read and put back.
    assert [(p.kind, p.text, p.source_start) for p in menu.placed] == [("accelerator", "_", 0), ("accelerator", "_", 10)]
    assert runtime.calls[0][0] == ["Doppelte key_id gefunden.", "Key_ids dürfen nur einmal vorkommen.", "Datei", "Ansicht"]


def test_a_map_joined_from_segments_read_different_ways_is_extracted_throughout():
    # A phrasal model's own phrases in one segment, a memory's extracted pairs in the other: the
    # joined map had carried the first segment's origin for both.
    text = "Stop it.  Go on."
    layout = split(text, find_protected(text))
    first = hypothesis("Stop it.", "Hör auf damit.", [(0, 0), (0, 1), (1, 2)], -1.0)
    second = hypothesis("Go on.", "Geh weiter.", [(0, 0), (1, 1)], -1.0)

    def mapped(served, origin, pairs):
        return replace(served, translation=replace(served.translation, phrase_map=PhraseMap(origin, pairs)))

    # Attended pairs may overlap; extraction gives the consistent blocks of the hard links.
    attended = mapped(first, "attention", [PhrasePair((0, 2), (0, 2), 0.7), PhrasePair((1, 2), (2, 3), 0.9)])
    remembered = mapped(second, "extracted", [PhrasePair((0, 1), (0, 1), 1.0), PhrasePair((1, 2), (1, 2), 1.0)])
    (alike,) = assemble(layout, [[attended], [mapped(second, "attention", [PhrasePair((0, 2), (0, 2), 0.5)])]],
                        "phrase")
    assert alike.translation.phrase_map.origin == "attention"
    assert [(p.source, p.target) for p in alike.translation.phrase_map.pairs] == [((0, 2), (0, 2)), ((1, 2), (2, 3)),
                                                                                   ((2, 4), (3, 5))]
    (mixed,) = assemble(layout, [[attended], [remembered]], "phrase")
    assert mixed.translation.phrase_map.origin == "extracted"
    assert [(p.source, p.target) for p in mixed.translation.phrase_map.pairs] == [((0, 1), (0, 2)), ((1, 2), (2, 3)),
                                                                                   ((2, 3), (3, 4)), ((3, 4), (4, 5))]


@pytest.mark.parametrize("text, segments, kept", [
    ("<ul><li>Open file</li><li>Save file</li></ul>", ["Open file", "Save file"], ["<ul><li>", "</li><li>", "</li></ul>"]),
    ("<p>A</p>\n<p>B <b>c</b></p>", ["A", "B <b>c</b>"], ["<p>", "</p>\n<p>", "</p>"]),
    ("Line one.<br/>Line two.", ["Line one.", "Line two."], ["<br/>"]),
    ("<html><head/><body><p>A</p><p>B</p></body></html>", ["A", "B"],
     ["<html><head/><body><p>", "</p><p>", "</p></body></html>"]),
    # KDE's structure markup (KUIT) and DocBook's paragraphs: "One.Two." to the model before.
    ("<para>One file.</para><para>Two <b>files</b>.</para>", ["One file.", "Two <b>files</b>."],
     ["<para>", "</para><para>", "</para>"]),
    ("<qt>Intro:<list><item>Open</item><item>Save</item></list></qt>", ["Intro:", "Open", "Save"],
     ["<qt>", "<list><item>", "</item><item>", "</item></list></qt>"]),
    # HTML5's other blocks: an EPUB's table of contents had gone to the model as one sentence, its
    # items' links reordered and emptied by the alignment
    ('<nav epub:type="toc"><ol><li><a href="#1">One dog</a></li><li><a href="#2">Two dogs</a></li></ol></nav>',
     ['<a href="#1">One dog</a>', '<a href="#2">Two dogs</a>'], ['<nav epub:type="toc"><ol><li>', "</li><li>", "</li></ol></nav>"]),
    ("<details><summary>More</summary>Hidden text.</details>", ["More", "Hidden text."],
     ["<details><summary>", "</summary>", "</details>"]),
    # A block of nothing but an element passed through stays where it is, though one sentence is left.
    ("<p>Ignored by default.<br/> <code>%1</code></p>", ["Ignored by default."], ["<p>", "<br/> <code>%1</code></p>"]),
    # Sentences too, as in plain text; not where an inline element holds both sides.
    ("<p>Files shown. Open <b>one. Now</b>.</p><p>Go.</p>", ["Files shown.", "Open <b>one. Now</b>.", "Go."],
     ["<p>", "</p><p>", "</p>"]),
    ('<a title="Hello. World">Hi</a> there. Go on.', ['<a title="Hello. World">Hi</a> there.', "Go on."], []),
    # A page: its style and a comment between blocks kept whole, code inside its sentence.
    ("<html><head><title>My page</title><style>p { color: red; }</style></head><body><p>Hello. Run <code>ls. -l"
     "</code> now.</p><!-- note --><p>Bye.</p></body></html>",
     ["My page", "Hello.", "Run <code>ls. -l</code> now.", "Bye."],
     ["<html><head><title>", "</title><style>p { color: red; }</style></head><body><p>", "</p><!-- note --><p>",
      "</p></body></html>"]),
])
def test_html_is_cut_into_its_blocks_and_their_tags_kept(text, segments, kept):
    layout = markup_split(text, "html")
    assert [s.text for s in layout.segments] == segments
    assert [p.text for p in layout.parts if isinstance(p, Kept)] == kept
    for segment in layout.segments:
        assert "".join(text[k] for k in segment.origin[:-1]) == segment.text


@pytest.mark.parametrize("text, language, segments, gaps", [
    # A capitalised word after a line of words begins anew (English), tags at the lines' edges skipped.
    ("<b>Copy</b> the file\nPaste it here", "en", ["<b>Copy</b> the file", "Paste it here"], ["\n"]),
    ("<p>Copy the file\n  <i>Paste</i> it here</p>", "en", ["Copy the file", "<i>Paste</i> it here"], ["\n  "]),
    # A blank line, a sentence's end and a label's colon end a line; a next line of a list item or an option.
    ("<big>Failed.</big>\n\nThe error was:\n<tt>{}</tt>\nretry later", "en",
     ["<big>Failed.</big>", "The error was:", "<tt>{}</tt>\nretry later"], ["\n\n", "\n"]),
    ("Options\n- verbose\n--force now", "en", ["Options", "- verbose", "--force now"], ["\n", "\n"]),
    # Run on (one segment: the text whole): lower case, a German noun, an inline element holding both lines.
    ("<p>This is a long\nparagraph that runs on.</p>", "en", ["<p>This is a long\nparagraph that runs on.</p>"], []),
    ("<b>Datei</b> kopieren\nDatei einfügen", "de", ["<b>Datei</b> kopieren\nDatei einfügen"], []),
    ("<p>x <b>one\nTwo</b> y</p>", "en", ["<p>x <b>one\nTwo</b> y</p>"], []),
])
def test_html_lines_are_cut_where_plain_texts_are(text, language, segments, gaps):
    layout = markup_split(text, "html", language)
    assert [s.text for s in layout.segments] == segments
    assert [gap for p in layout.parts if isinstance(p, Block) for gap in p.gaps] == gaps


@pytest.mark.parametrize("text", [
    "<p>One block, <b>bold</b>.</p>",              # one block: as before
    "<div>Intro <b>bold<br/>more</b></div>",       # an inline element across a block's edge
    "<p>A</b>",                                    # malformed: refused where it is read
    "<b>One. Two.</b>",                            # one sentence gap, inside an inline element
])
def test_html_is_translated_whole_where_its_blocks_cannot_go_apart(text):
    assert markup_split(text, "html").whole


def test_escaped_line_breaks_come_back_escaped_with_every_offset_in_the_text_sent():
    from tests.service.support import translated_by_fake

    text = r"Open the file %s now.\nSave it first."
    (served,), = translated_by_fake([text], options=DecodingOptions(beam_size=1, alignment="token"))
    output = served.translation.text
    assert output == r"%s NOW. FILE THE OPEN\nFIRST. IT SAVE"
    alignment = served.translation.alignment
    assert [w.text for w in alignment.source_words] == ["Open", "the", "file", "now.", "Save", "it", "first."]
    for word in alignment.source_words:
        assert text[word.start:word.end] == word.text
    for word in alignment.target_words:
        assert output[word.start:word.end] == word.text
    (placed,) = served.placed
    assert text[placed.source_start:placed.source_end] == output[placed.target_start:placed.target_end] == "%s"


def test_a_java_line_break_is_kept_between_the_lines_and_reported_where_it_stands():
    from tests.service.support import translated_by_fake

    text = "Done.%nStart %s now."
    (served,), = translated_by_fake([text])
    output = served.translation.text
    assert output == "DONE.%n%s NOW. START"
    assert [(p.text, p.placement) for p in served.placed] == [("%n", "kept"), ("%s", "aligned")]
    for p in served.placed:
        assert text[p.source_start:p.source_end] == output[p.target_start:p.target_end] == p.text


def test_escaped_quotes_reach_the_model_plain_and_come_back_escaped_with_every_offset_in_the_text_sent():
    from tests.service.support import translated_by_fake

    plain, text = "Don't open \"%s\". It's read-only.", r"Don\'t open \"%s\". It\'s read-only."
    options = DecodingOptions(beam_size=1, alignment="token")
    (expected,), (served,) = translated_by_fake([plain, text], options=options)

    def escaped(value: str) -> str:
        return value.replace("'", "\\'").replace('"', '\\"')

    output = served.translation.text
    assert output == escaped(expected.translation.text) == r"OPEN \"%s\". DON\'T READ-ONLY. IT\'S"
    alignment = served.translation.alignment
    for words, within, plain_words in ((alignment.source_words, text, expected.translation.alignment.source_words),
                                       (alignment.target_words, output, expected.translation.alignment.target_words)):
        assert [w.text for w in words] == [escaped(w.text) for w in plain_words]
        assert all(within[w.start:w.end] == w.text for w in words)
    assert alignment.links == expected.translation.alignment.links
    (placed,) = served.placed
    assert text[placed.source_start:placed.source_end] == output[placed.target_start:placed.target_end] == "%s"

    plain, text = "Open café \U0001F600 now.", r"Open caf\u00e9 \ud83d\ude00 now."
    (expected,), (served,) = translated_by_fake([plain, text], options=options)
    output = served.translation.text
    assert expected.translation.text == "NOW. \U0001F600 CAFÉ OPEN"
    assert output == r"NOW. \ud83d\ude00 CAF\u00c9 OPEN"
    alignment = served.translation.alignment
    assert [w.text for w in alignment.source_words] == ["Open", r"caf\u00e9", r"\ud83d\ude00", "now."]
    assert all(text[w.start:w.end] == w.text for w in alignment.source_words)
    assert [w.text for w in alignment.target_words] == ["NOW.", r"\ud83d\ude00", r"CAF\u00c9", "OPEN"]
    assert all(output[w.start:w.end] == w.text for w in alignment.target_words)

    message = "Can''t open ''{0}''."
    (served,), = translated_by_fake([message])
    assert served.translation.text == "OPEN ''{0}''. CAN''T"


def test_a_target_word_a_joined_line_break_falls_in_holds_the_break_as_the_output_does():
    from tests.service.support import translated_by_fake

    text = "C:\\new\n%s'```"  # two lines run on; the fake's one word spans the placeholder put back
    (served,), = translated_by_fake([text], options=DecodingOptions(beam_size=1, alignment="token"))
    output = served.translation.text
    assert output == "C:\\NEW\n%s'```"
    assert [(w.text, w.start, w.end) for w in served.translation.alignment.target_words] == [(output, 0, len(output))]
