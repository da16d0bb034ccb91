"""Markup pages through the translator (testing/fake_runtime.py: each segment's words reversed): 300
random well-formed pages of blocks, inline tags, line breaks, sentences and placeholders come back
with every tag once, nested as in the source (siblings may change order), and every placeholder once,
and each reported tag slices the output and the source."""
from __future__ import annotations

import random
from collections import Counter

from service.protection.markup import read_markup
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
