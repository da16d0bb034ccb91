"""Markdown emphasis in plain texts (service/protection/markdown.py): which delimiters pair, and the
words inside translated with the sentence, the delimiters put back around their translation
(testing/fake_runtime.py translates: words reversed, upper-cased)."""
from __future__ import annotations

import random
from collections import Counter

import pytest

from service.protection.markdown import read_markdown, reads_as_markdown
from service.runtime.base import DecodingOptions
from tests.service.support import translated_by_fake


def emphasis(text: str) -> tuple[str, list[tuple[str, str, int | None]]]:
    markup = read_markdown(text)
    return markup.plain, [(tag.opening, markup.plain[tag.start:tag.end], tag.parent) for tag in markup.tags]


@pytest.mark.parametrize("text, plain, tags", [
    ("Use *only* the **latest** version.", "Use only the latest version.", [("*", "only", None), ("**", "latest", None)]),
    ("This is _very_ important, __this__ is not.", "This is very important, __this__ is not.", [("_", "very", None)]),
    ("__Read me__ first", "Read me first", [("__", "Read me", None)]),
    ("***Both*** at once", "Both at once", [("***", "Both", None)]),
    ("**Bold *and* more**", "Bold and more", [("**", "Bold and more", None), ("*", "and", 0)]),
    ("It is ~~gone~~ now", "It is gone now", [("~~", "gone", None)]),
    ("*BAD* signature from:", "BAD signature from:", [("*", "BAD", None)]),
    ("*%s (AI)* Peace in our time.", "%s (AI) Peace in our time.", [("*", "%s (AI)", None)]),
    ("device **%1**.", "device %1.", [("**", "%1", None)]),
    ('"*clicking noises*"', '"clicking noises"', [("*", "clicking noises", None)]),
])
def test_emphasis_pairs_into_tags(text, plain, tags):
    assert emphasis(text) == (plain, tags)


def links(text: str) -> tuple[str, list[tuple[str, str | None, str, int | None]]]:
    markup = read_markdown(text)
    return markup.plain, [(tag.opening, tag.closing, markup.plain[tag.start:tag.end], tag.parent) for tag in markup.tags]


@pytest.mark.parametrize("text, plain, tags", [
    ("See the [guide](docs/guide.md) now", "See the guide now", [("[", "](docs/guide.md)", "guide", None)]),
    ("![A screenshot](images/main.png)", "A screenshot", [("![", "](images/main.png)", "A screenshot", None)]),
    ("Read the [**notes**](https://x.org/n).", "Read the notes.",
     [("[", "](https://x.org/n)", "notes", None), ("**", "**", "notes", 0)]),
    ("**[Docs](d) first**", "Docs first", [("**", "**", "Docs first", None), ("[", "](d)", "Docs", 0)]),
    # Emphasis across a link's edge pairs no more; its stars stay text.
    ("*a [b* c](x)", "*a b* c", [("[", "](x)", "b* c", None)]),
    ("`[not](a link)` and [](empty)", "`[not](a link)` and ", [("[", "](empty)", "", None)]),
    ("[the docs](http://x.org/_build_/*a*)", "the docs", [("[", "](http://x.org/_build_/*a*)", "the docs", None)]),
    # by reference: the label names the destination defined elsewhere ("[new]: https://…")
    ("Choose [New project][new] now", "Choose New project now", [("[", "][new]", "New project", None)]),
    ("[the *docs*][_ref_]", "the docs", [("[", "][_ref_]", "the docs", None), ("*", "*", "docs", 0)]),
    # a README's badge: a link whose text is an image (its brackets and destination had gone to the model)
    ("[![Build status](b.svg)](https://ci.org/x) here", "Build status here",
     [("[", "](https://ci.org/x)", "Build status", None), ("![", "](b.svg)", "Build status", 0)]),
])
def test_links_are_tags_around_their_text_their_destination_kept(text, plain, tags):
    assert links(text) == (plain, tags)


@pytest.mark.parametrize("text", ["Usage: %s [OPTION]... [FILE]...", "[options] (file)", "a [b](c d) e"])
def test_brackets_that_are_no_link_stay_text(text):
    assert not reads_as_markdown(text)


@pytest.mark.parametrize("text", [
    "2*3*4 and 5 * 3 * 2",
    "**/*.js",
    "Images (*.svg)|*.svg|All files (*)|*",
    "a regedit *.reg file, not *.txt",
    "Missing __init__.py or __name__ in %s",
    "Reset *PACKAGE-NAME* to ~s",
    "snake_case_name and CONSTANT_NAME_HERE",
    "Run `make *all*` first",
    "See http://example.org/_build_/ and https://example.org/*a*/",
    r"An \*escaped\* star",
    "* item one\n* item two",
    "****",
    "Ctrl+* zooms, Ctrl+_ shrinks",
    "_Open a file_Save",
])
def test_what_is_not_emphasis_stays_text(text):
    assert not reads_as_markdown(text)
    assert read_markdown(text).plain == text


def test_the_plain_text_knows_where_each_character_stood():
    markup = read_markdown("A **b** c")
    assert markup.plain == "A b c"
    assert [markup.origin[k] for k in range(len(markup.plain))] == [0, 1, 4, 7, 8]
    assert (markup.tags[0].source_start, markup.tags[0].source_end) == (2, 7)


def only(text: str):
    (served,) = translated_by_fake([text], options=DecodingOptions(beam_size=1, alignment="token"))[0]
    return served


@pytest.mark.parametrize("text, expected", [
    # The fake writes words in reverse: the delimiters go with the words they wrapped.
    ("Use *only* the **latest** version", "VERSION **LATEST** THE *ONLY* USE"),
    ("You can *drag and drop* files", "FILES *DROP AND DRAG* CAN YOU"),
    ("Keep *(all)* files and (*.log)", "(*.LOG) AND FILES *(ALL)* KEEP"),
    # A link's destination stays as written, its text translated.
    ("Read [the guide](docs/guide.md) now", "NOW [GUIDE THE](docs/guide.md) READ"),
    ("![A screenshot](images/main.png)", "![SCREENSHOT A](images/main.png)"),
    ("Read [the guide][guide] now", "NOW [GUIDE THE][guide] READ"),  # a label translated would link nowhere
])
def test_emphasised_words_are_translated_inside_their_delimiters(text, expected):
    served = only(text)
    assert served.translation.text == expected
    output = served.translation.text
    for word in served.translation.alignment.target_words:
        assert output[word.start:word.end] == word.text
    for placed in served.placed:
        assert output[placed.target_start:].startswith(placed.text) and text[placed.source_start:].startswith(placed.text)


def test_a_text_without_emphasis_is_translated_as_before():
    assert only("Images (*.svg)|*.svg").translation.text == "(*.SVG)|*.SVG IMAGES"


def test_lines_are_read_one_by_one():
    assert only("- Open the *file*\n- Save *all* changes").translation.text == "- *FILE* THE OPEN\n- CHANGES *ALL* SAVE"


def test_random_texts_keep_their_emphasis_and_every_offset():
    rng = random.Random(11)
    words = ["open", "the", "file", "now", "%1", "save", "(all)", "window", "*.txt", "a_b"]

    def span() -> str:
        inner = " ".join(rng.choice(words[:8]) for _ in range(rng.randint(1, 3)))
        return rng.choice(["*", "**", "_", "~~", "***"]).join(["", inner, ""])

    texts = []
    for _ in range(300):
        parts = [span() if rng.random() < 0.3 else rng.choice(words) for _ in range(rng.randint(1, 8))]
        texts.append(" ".join(parts) + rng.choice(["", ".", "!\nAnd " + span() + " more."]))
    answers = translated_by_fake(texts, options=DecodingOptions(beam_size=1, alignment="token"))
    for text, (served,) in zip(texts, answers):
        output = served.translation.text
        assert Counter(t.opening for t in read_markdown(output).tags) == \
            Counter(t.opening for t in read_markdown(text).tags) or not reads_as_markdown(text), (text, output)
        for word in served.translation.alignment.target_words:
            assert output[word.start:word.end] == word.text, (text, output)
        for placed in served.placed:
            assert output[placed.target_start:].startswith(placed.text), (text, output, placed)
            assert text[placed.source_start:].startswith(placed.text), (text, output, placed)


@pytest.mark.parametrize("text, plain, tags", [
    ("Press <kbd>Ctrl</kbd>+<kbd>S</kbd> to **save**.", "Press Ctrl+S to save.",
     [("<kbd>", "Ctrl", None), ("<kbd>", "S", None), ("**", "save", None)]),
    ("<b>**x** y</b> and *z*", "x y and z", [("<b>", "x y", None), ("**", "x", 0), ("*", "z", None)]),
    ("**<b>x</b> y**", "x y", [("**", "x y", None), ("<b>", "x", 0)]),
    # A Markdown pair across an element's edge: the html reading alone.
    ("<b>**x</b>**", "**x**", [("<b>", "**x", None)]),
])
def test_a_line_of_html_reads_the_markdown_of_its_text_too(text, plain, tags):
    from service.protection.markup import read_markup

    markup = read_markup(text, "html-markdown")
    assert (markup.plain, [(t.opening, markup.plain[t.start:t.end], t.parent) for t in markup.tags]) == (plain, tags)
    assert "".join(text[k] for k in markup.origin[:-1]) == markup.plain


def test_a_plain_text_of_html_and_markdown_gets_both_put_back():
    served = only("Press <kbd>Ctrl</kbd> to **save it** now")
    assert served.translation.text == "NOW **IT SAVE** TO <kbd>CTRL</kbd> PRESS"
    # Sent as html, asterisks are text: the markup is html's alone.
    (html,), = translated_by_fake(["Press <kbd>Ctrl</kbd> to **save it** now"], "html")
    assert html.translation.text == "NOW IT** **SAVE TO <kbd>CTRL</kbd> PRESS"
