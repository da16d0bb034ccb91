"""Plain texts through the translator (testing/fake_runtime.py: each segment's words reversed and
upper-cased): 300 random messages laid out as software writes them (a synopsis, option columns,
bullets, hard-wrapped prose, lines that begin anew, blank lines, indentation) with placeholders
of several styles (printf, Qt, braces, Weblate's markers, quoted command lines) come back with every
placeholder and option exactly as often as sent, the line breaks at their start and end as sent, and
each reported part slicing the output and the source where it says."""
from __future__ import annotations

import html
import random
import re
from collections import Counter

from service.protection.markup import read_markup
from service.protection.placeholders import find_protected
from tests.service.support import translated_by_fake

WORDS = ["file", "open", "save", "the", "window", "now", "folder", "network", "is", "to", "Please", "Trusted",
         "%s", "%1", "{name}", "[X12X]", "PASSWORD", "`%s --help'"]


def words(rng: random.Random, low: int, high: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(low, high)))


def line(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.15:
        return f"Usage: %s [OPTION]... <{rng.choice(['file', 'interface'])}>"
    if roll < 0.35:
        return f"  -{rng.choice('vqx')}, --{rng.choice(['verbose', 'quiet', 'size=SIZE'])}" + " " * rng.randint(2, 6) \
            + words(rng, 1, 5)
    if roll < 0.45:
        return rng.choice(["* ", "- ", "1. "]) + words(rng, 1, 4)
    if roll < 0.55:
        return ""
    prose = words(rng, 1, 7)
    return " " * rng.choice([0, 0, 2]) + prose[:1].upper() + prose[1:] + rng.choice(["", ".", ":", ",", "?"])


def text(rng: random.Random) -> str:
    body = "\n".join(line(rng) for _ in range(rng.randint(1, 6)))
    return rng.choice(["", "\n"]) + body + rng.choice(["", "\n"])


def kept(text: str) -> Counter:
    """What must come back exactly: placeholders and options, compared without their quotes (the
    fake runtime does not move quotes, but a quoted command line is one part with them)."""
    return Counter(p.text for p in find_protected(text) if p.kind != "accelerator")


def test_random_messages_keep_their_placeholders_and_edge_line_breaks():
    rng = random.Random(35)
    texts = [text(rng) for _ in range(300)]

    for source, (served,) in zip(texts, translated_by_fake(texts)):
        output = served.translation.text
        assert kept(output) == kept(source), (source, output)
        assert (output.startswith("\n"), output.endswith("\n")) == (source.startswith("\n"), source.endswith("\n")), \
            (source, output)
        for part in served.placed:
            assert source[part.source_start:part.source_end] == part.text, (source, part)
            if part.placement != "model":
                assert output[part.target_start:part.target_end] == part.text, (source, output, part)


MARKUP_WORDS = ["file", "open", "save", "the", "window", "now", "folder", "is", "to", "Please", "Copy", "Paste",
                "%s", "%1", "{name}", "&amp;", "&lt;%1&gt;", "e.g."]


def markup_words(rng: random.Random, low: int, high: int) -> str:
    chosen = []
    for _ in range(rng.randint(low, high)):
        word, roll = rng.choice(MARKUP_WORDS), rng.random()
        if roll < 0.12:
            word = f"<b>{word}</b>"
        elif roll < 0.18:
            word = f'<a href="x">{word} {rng.choice(MARKUP_WORDS)}</a>'
        elif roll < 0.22:
            word = f"<i>{word}</i>"
        chosen.append(word)
    return " ".join(chosen)


def markup_text(rng: random.Random) -> str:
    lines = [rng.choice(["", "", "  "]) + markup_words(rng, 1, 6) + rng.choice(["", ".", ":", ",", "?"])
             for _ in range(rng.randint(1, 5))]
    body = rng.choice(["\n", "\n", "\n\n", " "]).join(lines)
    if rng.random() < 0.3:
        body = f"<p>{body}</p>"
    if rng.random() < 0.2:
        body += "<br/>" + markup_words(rng, 1, 4)
    return rng.choice(["", "\n"]) + body + rng.choice(["", "\n"])


def tags(text: str) -> Counter:
    return Counter((tag.opening, tag.closing) for tag in read_markup(text, "html").tags)


def visible(text: str) -> str:
    """The text a reader sees, a tag read as a space (a <br/> parts what stands around it)."""
    return html.unescape(re.sub(r"<[^>]+>", " ", text))


def visible_words(text: str) -> Counter:
    return Counter(word.lower() for word in re.findall(r"[A-Za-z]+", visible(text)))


def test_random_markup_messages_keep_their_tags_words_and_edge_line_breaks():
    """Html messages as Qt and Pango write them (inline tags, entities, placeholders, lines, blank
    lines, a <br/>): every tag, placeholder and word comes back, and the line breaks at the text's
    start and end as sent (html reads them as nothing; gettext checks them: they had been lost in
    81 of 400)."""
    rng = random.Random(36)
    texts = [markup_text(rng) for _ in range(300)]

    for source, (served,) in zip(texts, translated_by_fake(texts, "html")):
        output = served.translation.text
        assert tags(output) == tags(source), (source, output)
        assert kept(visible(output)) == kept(visible(source)), (source, output)
        assert visible_words(output) == visible_words(source), (source, output)
        assert (output.startswith("\n"), output.endswith("\n")) == (source.startswith("\n"), source.endswith("\n")), \
            (source, output)
