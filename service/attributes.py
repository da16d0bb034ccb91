"""The text of html attributes a reader sees, translated with the text around them.

HTML names the attributes whose values are text for people, which a translation translates
(the HTML standard, "The translate attribute": alt, title, placeholder, label, abbr, the value of a
button, and lang, which must name the translation's language). Kept as sent, "<img alt="Save
icon">" came back in a German page with an English description, and a search box's
placeholder="Search files" stayed English. With them `aria-label`, the name a screen reader speaks
(WAI-ARIA), which is as much text for people. An element passed through untouched (`code`,
`translate="no"`, service/protection/markup.py) keeps its attributes too: `translate="no"` covers
them.

Each value is translated as a plain text of its own, in the same batch as the text it stands in,
placeholders kept ("Delete %s"); its translation is written into the tag where the translation
put it, escaped for its quotes, and every offset of the answer after it moves along. The tag's
protected report keeps its opening tag as sent; its target span covers the tag as written in the
translation. A glossary's terms in an attribute are enforced as in the text, and reported with the
text's occurrences at their places in the text sent and the output. An attribute's words are not in
the text's word alignment (they are not in its sentences).
"""
from __future__ import annotations

import html
import re
from dataclasses import dataclass, replace

from service.glossary import TermReport, merged
from service.protection.markup import TAG, Markup
from service.runtime.base import has_visible_text
from service.served import Served, edited, mover

# Attribute -> the elements it is text for people on (None: every element).
TRANSLATABLE: dict[str, frozenset[str] | None] = {
    "title": None,
    "aria-label": None,
    "alt": frozenset({"area", "img", "input"}),
    "abbr": frozenset({"th"}),
    "label": frozenset({"optgroup", "option", "track"}),
    "placeholder": frozenset({"input", "textarea"}),
    # A button's caption; a submit button's value is also what the form sends, so it stays.
    "value": frozenset({"input"}),
}
_BUTTONS = {"button", "reset"}
ATTRIBUTE = re.compile(r"""\s+([^<>\s=/]+)(?:\s*=\s*("[^"]*"|'[^']*'|[^\s"'<>=`]+))?""")


@dataclass(frozen=True)
class Attribute:
    """One attribute value to translate. `start`/`end`: the value's span in `opening` (its quotes
    outside it); `quote`: the quote it was written in ("" unquoted); `text`: the value as a reader
    sees it (entities decoded); `given`: its translation where no model writes it (lang)."""

    tag_start: int  # where the opening tag stands in the text sent
    opening: str
    start: int
    end: int
    quote: str
    text: str
    given: str | None = None


def translatable(markup: Markup, source: str, target: str) -> list[Attribute]:
    """The attribute values of `markup` (an html text read by `read_markup`) a translation
    translates, in the order they stand. An element that names its language (`lang`, `xml:lang`)
    and wraps the whole text says the text's language: that name becomes the translation's. One
    that wraps only a part marks words of another language, kept as they are, its attributes with
    them: "<abbr lang="en" title="HyperText Markup Language">HTML</abbr>" in a French list server's
    messages, whose German translators keep the English expansion."""
    found = []
    foreign: set[int] = set()  # tags inside a part marked with its own language
    for index, tag in enumerate(markup.tags):
        if tag.verbatim is not None or tag.name == "!--" or not tag.name[0].isalpha():
            continue
        match = TAG.match(tag.opening)
        if match is None:
            continue
        element = tag.name.lower()
        attributes = {m.group(1).lower(): m for m in ATTRIBUTE.finditer(tag.opening, match.start(3), match.end(3))}
        whole = (not tag.standalone and not markup.plain[:tag.start].strip() and not markup.plain[tag.end:].strip())
        if tag.parent in foreign or (not whole and ("lang" in attributes or "xml:lang" in attributes)):
            foreign.add(index)
            continue
        for name, attribute in attributes.items():
            raw = attribute.group(2)
            if raw is None:
                continue
            quoted = raw[0] in "\"'"
            start, end = attribute.start(2) + quoted, attribute.end(2) - quoted
            value = html.unescape(tag.opening[start:end])
            quote = raw[0] if quoted else ""
            if name in ("lang", "xml:lang"):
                if value.split("-")[0].lower() == source.lower():
                    found.append(Attribute(tag.source_start, tag.opening, start, end, quote, value, target))
                continue
            if name not in TRANSLATABLE or not has_visible_text(value):
                continue
            elements = TRANSLATABLE[name]
            if elements is not None and element not in elements:
                continue
            if name == "value" and _value_of("type", attributes).lower() not in _BUTTONS:
                continue
            found.append(Attribute(tag.source_start, tag.opening, start, end, quote, value))
    return found


def _value_of(name: str, attributes: dict[str, re.Match]) -> str:
    match = attributes.get(name)
    raw = match.group(2) if match is not None else None
    return "" if raw is None else raw.strip("\"'")


def written(served: Served, source: str, attributes: list[Attribute], translations: list[Served]) -> Served:
    """`served` (a translation of `source`) with each attribute's translation written into its tag,
    every target offset after it moved along, and the glossary's terms found in the attribute
    reported with the text's, at their places in the text sent and the output. A tag the
    translation does not hold as sent is left."""
    edits: list[tuple[int, int, str]] = []
    placed: list[tuple[Attribute, int, Served, list[int]]] = []  # per value written: where, and its offsets
    for attribute, translation in zip(attributes, translations):
        at = _where(served, source, attribute)
        if at is None or not translation.translation.text.strip():
            continue
        value, offsets = _escaped(translation.translation.text, attribute.quote or '"')
        if not attribute.quote:
            value, offsets = f'"{value}"', [k + 1 for k in offsets]
        edits.append((at + attribute.start, at + attribute.end, value))
        placed.append((attribute, at + attribute.start, translation, offsets))
    result = edited(served, edits)
    reports = list(result.glossary)
    moved = mover(sorted(edits))
    for attribute, at, translation, offsets in placed:
        if not translation.glossary:
            continue
        at = moved(at)  # where the value stands in the output
        sent = _unescaped_offsets(attribute.opening[attribute.start:attribute.end])
        base = attribute.tag_start + attribute.start
        reports += [replace(report, source_spans=[(base + sent[a], base + sent[b]) for a, b in report.source_spans],
                            target_spans=[(at + offsets[a], at + offsets[b]) for a, b in report.target_spans])
                    for report in translation.glossary]
    if len(reports) == len(result.glossary):
        return result
    terms: dict[tuple[str, str], list[TermReport]] = {}
    for report in reports:
        terms.setdefault((report.source, report.target), []).append(report)
    return replace(result, glossary=[merged(group) for group in terms.values()])


def _where(served: Served, source: str, attribute: Attribute) -> int | None:
    """Where the attribute's opening tag stands in the translation: where its report says, or
    where the text sent and the translation each hold it once (a text of only an image)."""
    output = served.translation.text
    for placed in served.placed:
        if placed.kind == "tag" and placed.source_start == attribute.tag_start \
                and output.startswith(attribute.opening, placed.target_start):
            return placed.target_start
    if source.count(attribute.opening) == 1 and output.count(attribute.opening) == 1:
        return output.index(attribute.opening)
    return None


_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}


def _escaped(value: str, quote: str) -> tuple[str, list[int]]:
    """A value as attribute text in `quote` (what would end it or start markup, as entities), and
    for each offset of the value (and its end) where it stands in that text."""
    entities = {**_ENTITIES, quote: "&quot;" if quote == '"' else "&#39;"}
    parts, offsets, length = [], [], 0
    for char in value:
        offsets.append(length)
        parts.append(entities.get(char, char))
        length += len(parts[-1])
    return "".join(parts), offsets + [length]


_REFERENCE = re.compile(r"&(?:#[0-9]+|#[xX][0-9a-fA-F]+|[A-Za-z][A-Za-z0-9]*);?")


def _unescaped_offsets(raw: str) -> list[int]:
    """For each offset of an attribute's value as a reader sees it (`html.unescape(raw)`, and its
    end), where it stands in `raw`: a character reference is one character."""
    offsets, cursor = [], 0
    for match in _REFERENCE.finditer(raw):
        decoded = html.unescape(match.group())
        offsets += range(cursor, match.start())
        # a reference html does not know stays as written, every character its own
        offsets += [match.start()] * len(decoded) if decoded != match.group() else range(match.start(), match.end())
        cursor = match.end()
    offsets += range(cursor, len(raw) + 1)
    return offsets
