"""Placeholders and do-not-translate terms: the parts of a text the model must not touch.

A translation model has never seen `%1$s` or `{count, plural, …}` and mangles them ("%lu to
remove and %lu not upgraded." becomes "% um die % zu %."). They are found here, taken out
before translation, and put back at the position the word alignment gives
(service/protection/placement.py), so each appears in the output exactly once, unchanged.

Kinds, in the order they are matched (an earlier kind wins where matches overlap):
- "icu": an ICU MessageFormat argument with a format, `{count, plural, one {# file} other {# files}}`
  (braces balanced; the whole argument is one placeholder).
- "shell": `${VAR}`.
- "brace": `{name}`, `{0}`, `{user.name}` (Python str.format, .NET, i18next-style names).
- "printf": C/POSIX printf conversions: `%s`, `%d`, `%1$s`, `%-5.2f`, `%lu`, `%lld`, `%%`. The
  space flag is not read: "100% sure" and "50 % off" are prose far more often than `% d`.
- "term": a request's do-not-translate terms, matched case-sensitively where they stand as whole
  words (not inside a longer word).
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

PRINTF = re.compile(r"%(?:\d+\$)?[-+0#']*(?:\d+|\*)?(?:\.(?:\d+|\*))?(?:hh|h|ll|l|L|q|j|z|t|I64|I32)?[diouxXeEfFgGaAcspn%@]")
BRACE = re.compile(r"\{[A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)*\}")
SHELL = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*\}")
ICU_START = re.compile(r"\{\s*[A-Za-z0-9_]+\s*,\s*(?:plural|select|selectordinal|number|date|time|choice)\b")


@dataclass(frozen=True)
class Protected:
    """One protected part of a text: ``text == original[start:end]``."""

    kind: str
    text: str
    start: int
    end: int


def _icu_arguments(text: str) -> list[tuple[int, int]]:
    spans = []
    for match in ICU_START.finditer(text):
        depth = 0
        for i in range(match.start(), len(text)):
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
                if depth == 0:
                    spans.append((match.start(), i + 1))
                    break
    return spans


def _term_spans(text: str, term: str) -> list[tuple[int, int]]:
    # Whole words only: "Git" must not protect the start of "GitHub".
    pattern = re.compile(r"(?<!\w)" + re.escape(term) + r"(?!\w)")
    return [(m.start(), m.end()) for m in pattern.finditer(text)]


def find_protected(text: str, terms: Sequence[str] = ()) -> list[Protected]:
    """Every protected part of `text`, in text order, none overlapping another."""
    candidates: list[tuple[str, int, int]] = []
    candidates += [("icu", a, b) for a, b in _icu_arguments(text)]
    candidates += [("shell", m.start(), m.end()) for m in SHELL.finditer(text)]
    candidates += [("brace", m.start(), m.end()) for m in BRACE.finditer(text)]
    candidates += [("printf", m.start(), m.end()) for m in PRINTF.finditer(text)]
    # Longer terms first, so that "New York City" wins over "New York".
    for term in sorted({t for t in terms if t}, key=len, reverse=True):
        candidates += [("term", a, b) for a, b in _term_spans(text, term)]
    taken: list[Protected] = []
    for kind, start, end in candidates:
        if any(start < p.end and p.start < end for p in taken):
            continue
        taken.append(Protected(kind, text[start:end], start, end))
    return sorted(taken, key=lambda p: p.start)
