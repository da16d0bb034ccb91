"""Markup pages through the translator (testing/fake_runtime.py: each segment's words reversed): 300
random well-formed pages of blocks, inline tags, line breaks, sentences and placeholders come back
with every tag once, nested as in the source (siblings may change order), and every placeholder once,
and each reported tag slices the output and the source; sent as plain text, a page that is one line of
markup comes back as it does sent as html."""
from __future__ import annotations

import random
from collections import Counter

import pytest

from service.protection.markup import read_markup, reads_as_markup
from service.protection.placement import prepare
from tests.service.support import translated_by_fake

WORDS = ["file", "open", "save", "the", "window", "now", "%1", "%2", "folder", "{name}"]


def sentence(rng: random.Random) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(1, 4))]
    return words[0].capitalize() + "".join(" " + w for w in words[1:]) + rng.choice([".", "?", ""])


def inline(rng: random.Random, depth: int = 0) -> str:
    parts = []
    for _ in range(rng.randint(1, 3)):
        roll = rng.random()
        if roll < 0.3 and depth < 2:
            name = rng.choice(["b", "i", "a"])
            opening = f'<a href="/x?a=1&amp;b=2">' if name == "a" else f"<{name}>"
            parts.append(f"{opening}{inline(rng, depth + 1)}</{name}>")
        elif roll < 0.4:
            parts.append("<br/>")
        else:
            parts.append(sentence(rng))
    return " ".join(parts)


def page(rng: random.Random) -> str:
    blocks = []
    for _ in range(rng.randint(1, 4)):
        kind = rng.choice(["p", "li", "h1", "div", "text"])
        if kind == "li":
            blocks.append("<ul>" + "".join(f"<li>{inline(rng)}</li>" for _ in range(rng.randint(1, 3))) + "</ul>")
        elif kind == "text":
            blocks.append(inline(rng))
        else:
            blocks.append(f"<{kind}>{inline(rng)}</{kind}>")
    return rng.choice(["", "\n", " "]).join(blocks)


def tree(text: str) -> Counter:
    tags = read_markup(text, "html").tags

    def enclosing(tag) -> tuple[str, ...]:
        return () if tag.parent is None else (*enclosing(tags[tag.parent]), tags[tag.parent].opening)
    return Counter((tag.opening, tag.closing, enclosing(tag)) for tag in tags)


def test_random_pages_keep_their_tags_nested_and_their_placeholders():
    rng = random.Random(34)
    pages = [page(rng) for _ in range(300)]

    for text, (served,) in zip(pages, translated_by_fake(pages, "html")):
        output = served.translation.text
        assert tree(output) == tree(text), (text, output)
        wanted = Counter(p.text for p in prepare(text, "html").protected)
        got = Counter(p.text for p in prepare(output, "html").protected)
        assert got == wanted, (text, output)
        for placed in served.placed:
            if placed.kind == "tag":
                assert output[placed.target_start:].startswith(placed.text), (text, output, placed)
                assert text[placed.source_start:].startswith(placed.text), (text, output, placed)


def test_a_plain_text_that_is_a_line_of_well_formed_markup_is_translated_as_html():
    rng = random.Random(35)
    lines = [text for text in (page(rng) for _ in range(300)) if reads_as_markup(text)]
    assert len(lines) > 50
    as_text, as_html = translated_by_fake(lines), translated_by_fake(lines, "html")
    assert [[s.translation.text for s in nbest] for nbest in as_text] == [[s.translation.text for s in nbest]
                                                                          for nbest in as_html]
    assert [[s.placed for s in nbest] for nbest in as_text] == [[s.placed for s in nbest] for nbest in as_html]


@pytest.mark.parametrize("text, markup", [
    ("<b>Remote host:</b> %1", True),
    ("The file <filename>%1</filename> exists.", True),
    ("Press <kbd>Ctrl</kbd>+<kbd>S</kbd>", True),
    ("<html><head/><body><p>Filter unit types.</p></body></html>", True),
    ("one<br/>two", True),
    ("Usage: %s [options] <interface>", False),   # a synopsis' argument: no closing tag
    ("<unable to print date>", False),
    ("Tom & Jerry <b>play</b>", False),           # html would read the & otherwise
    ("<b>one</b>\n<b>two</b>", False),            # plain text keeps its lines
    ("a < b <b>c</b>", False),                    # a < that is no tag's
    ("Copy <%s> here", False),
    ("No tags at all", False),
])
def test_which_plain_texts_read_as_markup(text, markup):
    assert reads_as_markup(text) is markup


def test_a_line_of_markup_in_a_longer_plain_text_is_translated_as_html():
    text = "<b>Warning:</b> the disk is full.\nPlease delete <i>some</i> files."
    ((served,),) = translated_by_fake([text])
    # Each line comes back with its tags around the translation of what they wrapped (the fake
    # runtime reverses and upper-cases words), reported as tags; the line break stays.
    assert served.translation.text == "FULL. IS DISK THE <b>WARNING:</b>\nFILES. <i>SOME</i> DELETE PLEASE"
    assert [(p.kind, p.text) for p in served.placed] == [("tag", "<b>"), ("tag", "<i>")]


@pytest.mark.parametrize("fmt, head", [
    ("html", "<!DOCTYPE html>\n"),
    ("xml", '<?xml version="1.0" encoding="utf-8"?>\n<!DOCTYPE note SYSTEM "note.dtd">\n'),
])
def test_a_whole_page_s_declarations_are_kept_as_written(fmt, head):
    # "<!DOCTYPE html>" had reached the model as words and come back escaped, "&lt;!DOCTYPE html&gt;"
    (nbest,) = translated_by_fake([head + "<p>save the file</p>"], fmt)
    assert nbest[0].translation.text == head + "<p>FILE THE SAVE</p>"
