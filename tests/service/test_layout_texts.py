"""Plain texts through the translator (testing/fake_runtime.py: each segment's words reversed and
upper-cased): 300 random messages laid out as software writes them (a synopsis, option columns,
bullets, hard-wrapped prose, lines that begin anew, blank lines, indentation) with placeholders
of several styles (printf, Qt, braces, Weblate's markers, quoted command lines) come back with every
placeholder and option exactly as often as sent, the line breaks at their start and end as sent, and
each reported part slicing the output and the source where it says."""
from __future__ import annotations

import random
from collections import Counter

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
