"""The scan filter of service/protection/placeholders.py: a style's pattern runs only on a text holding
its NEEDED character. Checked against each pattern's parse tree (every match must hold that character,
so skipping a text without it loses nothing), and on texts with and without the filter."""
import re
import re._constants as c
import re._parser as parser

import pytest

from service.protection import placeholders
from service.protection.placeholders import _PATTERNS, NEEDED, find_protected


def needed(items) -> set[str]:
    """The characters every match of a parsed pattern (or part of one) holds."""
    found: set[str] = set()
    for op, av in items:
        if op is c.LITERAL:
            found.add(chr(av))
        elif op is c.SUBPATTERN:
            found |= needed(av[-1])
        elif op is c.BRANCH:
            found |= set.intersection(*(needed(branch) for branch in av[1]))
        elif op in (c.MAX_REPEAT, c.MIN_REPEAT, getattr(c, "POSSESSIVE_REPEAT", None)) and av[0] >= 1:
            found |= needed(av[2])
        # anything else (a class, a look-around, an optional part) holds no one character for sure
    return found


@pytest.mark.parametrize("style", sorted(_PATTERNS))
def test_every_match_of_a_style_holds_its_needed_character(style):
    assert NEEDED[style] in needed(parser.parse(_PATTERNS[style].pattern))


def test_the_reading_of_a_pattern_is_right_on_patterns_by_hand():
    assert needed(parser.parse(r"%\d+|%s")) == {"%"}
    assert needed(parser.parse(r"a?b|(?:cb)+")) == {"b"}
    assert needed(parser.parse(r"(?<=\$)x|[@]y")) == set()  # a look-behind's `$` is not part of the match


TEXTS = [
    "A man in an orange hat starring at something while two women walk past.",
    "Delete %d files from {folder}?", "Run `make test` or see https://example.org/docs.",
    "Use --force with ${HOME}/bin and $COUNT$ items: :attribute is required &amp; more",
    "Mail bugs@example.org; [X1X] %(name)s %{count} {{ user }} { $user } ~/.config/app",
    "No special characters at all", "",
]


@pytest.mark.parametrize("text", TEXTS)
def test_the_filter_finds_what_scanning_every_text_finds(text, monkeypatch):
    filtered = find_protected(text)
    monkeypatch.setattr(placeholders, "NEEDED", {style: "" for style in NEEDED})  # "" is in every text
    assert find_protected(text) == filtered


def test_a_pattern_without_an_entry_cannot_be_added_unnoticed():
    assert set(NEEDED) == set(_PATTERNS)
