"""Take placeholders, terms and tags out of a text before translation; put them back by the alignment.

`prepare` reads the markup (service/protection/markup.py), finds the protected parts of the plain
text (service/protection/placeholders.py) and removes them: the model translates
`PreparedText.model_text`. `restore` puts everything back into the translation:

- a placeholder or a standalone tag stood between two source words; it goes before the first
  target word aligned to the word after it, or, when that word is not aligned (or there is
  none), after the last target word aligned to the word before it ("aligned"). With neither
  aligned it goes where its relative position in the source puts it ("fallback").
- a tag pair wraps the source words it wrapped; it goes around the target words aligned to
  them, from the first to the last of their largest cluster (or, for words no target word takes as its heaviest link,
  around the target word that attends to them most) ("aligned"), kept inside its parent's target span and off
  its earlier siblings' spans so that the output nests; a pair whose words have no aligned
  target word is placed like two placeholders at its ends ("fallback").

Each protected part appears in the output exactly once, unchanged: nothing is left to the model.
The report (`Placed`) gives its offsets in the source and in the output text.
"""
from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from typing import Literal

from service.glossary import (FUNCTION_WORDS, LINKING, Edit, GlossaryEntry, GlossaryMethod, TermMatch, TermReport,
                              determiner_forms, find_terms, grammatical, occurrences)
from service.glossary import report as glossary_report
from service.protection.markup import WORD_BREAKING, Markup, Tag, TextFormat, escaped, read_markup
from service.protection.placeholders import (LITERALS, PLACEHOLDER_STYLES, Protected, blanked, find_placeholders,
                                             find_protected, paired)
from service.runtime.base import TokenAlignment, Word

Placement = Literal["aligned", "fallback", "kept", "model"]  # "kept": service/layout.py; "model": protected_translation.serve_as_written
# The least share of a target word's attention that makes it the home of a tag around a source
# word no target word takes as its heaviest link.
SOFT_LINK_MIN_WEIGHT = 0.1


@dataclass(frozen=True)
class PreparedText:
    original: str
    fmt: TextFormat
    markup: Markup
    protected: list[Protected]  # offsets into markup.plain
    model_text: str             # what the model translates
    to_plain: list[int]         # model_text offset -> markup.plain offset (one more entry: the end)
    styles: tuple[str, ...] = PLACEHOLDER_STYLES  # the placeholder styles looked for
    glossary: tuple[GlossaryEntry, ...] = ()
    term_matches: tuple[TermMatch, ...] = ()     # the glossary's source terms, offsets into model_text
    # Glossary terms taken out like placeholders ("protect"): protected index -> glossary entry.
    protected_terms: tuple[tuple[int, int], ...] = ()
    # The protected parts taken out with the quotes or brackets right around them (`"%s"`), by index.
    quoted: tuple[int, ...] = ()

    @property
    def untouched(self) -> bool:
        """Nothing was taken out and no glossary term applies: the model's text is the original and
        its translation the answer."""
        return self.model_text == self.original and not self.term_matches

    def original_span(self, start: int, end: int) -> tuple[int, int]:
        """model_text[start:end] as offsets into the original text."""
        markup = self.markup
        return markup.origin[self.to_plain[start]], markup.origin_end[self.to_plain[end - 1]]


@dataclass(frozen=True)
class Placed:
    """Where one protected part went. `kind`: placeholders.py's kinds, or "tag"."""

    kind: str
    text: str
    source_start: int
    source_end: int
    target_start: int
    target_end: int
    placement: Placement


@dataclass(frozen=True)
class Restored:
    text: str
    placed: list[Placed]
    # Where each character of the translation starts / ends in the output (an escaped '&' is
    # five characters there), for the alignment's words.
    char_start: list[int]
    char_end: list[int]
    removed: list[Removed] = field(default_factory=list)
    glossary: list[TermReport] = field(default_factory=list)


def prepare(text: str, fmt: TextFormat = "text", terms: Sequence[str] = (),
            styles: Sequence[str] = PLACEHOLDER_STYLES, glossary: Sequence[GlossaryEntry] = (),
            glossary_method: GlossaryMethod = "replace", found: Sequence[Protected] | None = None) -> PreparedText:
    """`text` read as `fmt`, with its protected parts taken out; `found`: those parts when the caller
    has read them already (plain text only: find_protected(text, terms, styles))."""
    markup = read_markup(text, fmt)
    plain = markup.plain
    if found is not None and fmt != "text":
        raise ValueError("found protected parts are offsets into plain text")
    if found is not None:
        protected = list(found)
    elif markup.tags:
        protected = _read_between_tags(plain, markup.tags, terms, styles)
    else:
        protected = find_protected(plain, terms, styles)
    if glossary_method == "protect":
        found = [m for m in find_terms(plain, glossary)
                 if not any(m.start < p.end and p.start < m.end for p in protected)]
        protected = sorted(protected + [Protected("glossary", plain[m.start:m.end], m.start, m.end) for m in found],
                           key=lambda p: p.start)
        entry_at = {m.start: m.entry for m in found}
        protected_terms = tuple((i, entry_at[p.start]) for i, p in enumerate(protected) if p.kind == "glossary")
    quoted = _quoted(plain, protected, markup.tags)
    chars: list[str] = []
    to_plain: list[int] = []
    removed = [(p.start - 1, p.end + 1) if i in quoted else (p.start, p.end) for i, p in enumerate(protected)]
    # The model reads a space where an element breaks words and none is written: "one.<br/>Two"
    # reached it as "one.Two".
    breaks = _breaks(markup.tags)
    i = 0
    for start, end in removed + [(len(plain), len(plain))]:
        if breaks:
            for k in range(i, start):
                if k in breaks and chars and not chars[-1].isspace() and not plain[k].isspace():
                    chars.append(" ")
                    to_plain.append(k)
                chars.append(plain[k])
                to_plain.append(k)
        else:  # nothing to insert: the stretch whole (a character at a time was a quarter of a plain text's reading)
            chars.extend(plain[i:start])
            to_plain.extend(range(i, start))
        i = end
        # Removing "%lu" from "and %lu not" leaves two spaces; one of them goes. Removing "%s" from
        # "with %s." leaves "with ." : the punctuation joins the word before it again.
        if start < end and i < len(plain) and plain[i].isspace() and (not chars or chars[-1].isspace()):
            i += 1
        elif start < end and i < len(plain) and _is_punctuation(plain[i]) and chars and chars[-1] == " ":
            chars.pop()
            to_plain.pop()
    while chars and chars[-1].isspace():
        chars.pop()
        to_plain.pop()
    to_plain.append(len(plain))
    model_text = "".join(chars)
    if glossary_method == "protect":
        return PreparedText(text, fmt, markup, protected, model_text, to_plain, tuple(styles), tuple(glossary), (),
                            protected_terms, quoted)
    return PreparedText(text, fmt, markup, protected, model_text, to_plain, tuple(styles), tuple(glossary),
                        tuple(find_terms(model_text, glossary)), (), quoted)


def _breaks(tags: list[Tag]) -> set[int]:
    """The plain-text offsets where an element that breaks words starts or ends."""
    return {offset for tag in tags if tag.name.lower() in WORD_BREAKING
            for offset in ((tag.start,) if tag.standalone else (tag.start, tag.end))}


def _read_between_tags(plain: str, tags: list[Tag], terms: Sequence[str], styles: Sequence[str]) -> list[Protected]:
    """The protected parts of a markup text's plain text, read in each piece between tags' edges:
    the plain text has no tags, so "<message>%2</message><nl/>Any" reads "%2Any", where "%2A" is a
    printf conversion (it was taken out whole and the output read "<message>%2</message> %2A"), and
    "%1</filename><nl/>%2" reads "%1%2", where printf's "%1%" hid the "%2"."""
    edges = sorted({0, len(plain)} | {tag.start for tag in tags} | {tag.end for tag in tags})
    return [Protected(p.kind, p.text, p.start + start, p.end + start)
            for start, end in zip(edges, edges[1:]) for p in find_protected(plain[start:end], terms, styles)]


def written(prepared: PreparedText) -> PreparedText:
    """`prepared` (plain text, its glossary enforced by "replace") as the model reads it when the
    text is sent as written: nothing taken out, and the glossary's source terms found in the text
    itself, outside its placeholders and kept terms (a term "name" is not the one in "%(name)s").
    Restoring a translation of it applies the glossary and nothing else: no style is looked for,
    so the placeholders the model wrote stay as they are."""
    if prepared.fmt != "text" or prepared.protected_terms:
        raise ValueError("only a plain text whose glossary is enforced by replacing goes as written with it")
    text = prepared.original
    return PreparedText(text, "text", prepared.markup, [], text, list(range(len(text) + 1)), (), prepared.glossary,
                        tuple(find_terms(blanked(text, prepared.protected), prepared.glossary)))


def _quoted(plain: str, protected: list[Protected], tags: list[Tag]) -> tuple[int, ...]:
    """The protected parts with a quote or bracket pair right around them and nothing else
    (`'%s'`, `<%s>`): they go out and back with it. Left in, the pair reached the model empty, and
    it moved or dropped it ('Warnung: %s""'). Not a literal (url, path, ...: taken with its quotes
    already), nor where a tag stands between the part and the pair."""
    touched = {tag.start for tag in tags} | {tag.end for tag in tags}
    quoted = []
    for i, p in enumerate(protected):
        if p.kind in LITERALS or not paired(plain, p.start, p.end):
            continue
        if p.start in touched or p.end in touched:
            continue
        if (i > 0 and protected[i - 1].end > p.start - 1) or (i + 1 < len(protected) and protected[i + 1].start < p.end + 1):
            continue
        quoted.append(i)
    return tuple(quoted)


def _largest_run(targets: list[int], barriers: frozenset[int] = frozenset()) -> list[int]:
    """The longest run of target word indices with no gap wider than one word (an article the
    alignment gave elsewhere) nor any of `barriers`, the first of equal runs: wrapped words the
    translation moved apart ("of food in" -> "hält in einer Küche eine Schüssel mit Essen") keep
    the tag on their core instead of stretching it over everything in between."""
    runs = [[targets[0]]]
    for t in targets[1:]:
        if t - runs[-1][-1] <= 2 and not barriers.intersection(range(runs[-1][-1] + 1, t)):
            runs[-1].append(t)
        else:
            runs.append([t])
    return max(runs, key=len)


def _is_punctuation(text: str) -> bool:
    return bool(text) and not any(c.isalnum() or c.isspace() for c in text)


def _leading_punctuation(text: str) -> int:
    """How many characters at the start of `text` are punctuation ("(Hund" -> 1)."""
    k = 0
    while k < len(text) and _is_punctuation(text[k]):
        k += 1
    return k


def _trailing_punctuation(text: str) -> int:
    """How many characters at the end of `text` are punctuation ("Schnee." -> 1)."""
    k = len(text)
    while k > 0 and _is_punctuation(text[k - 1]):
        k -= 1
    return len(text) - k


def _outer_part(target: str, source: str, leading: bool) -> int:
    """How much of a target word's edge punctuation `target` is outside what a tag wrapped, given
    the wrapped source text's at that edge, `source`: all of it where the source has none, the
    rest where the source's is its inner part, none where they differ otherwise."""
    if not source:
        return len(target)
    inner = target.endswith(source) if leading else target.startswith(source)
    return len(target) - len(source) if inner else 0


@dataclass
class _Insert:
    offset: int     # in the translation
    core: str       # as it goes into the output (already escaped where it is text)
    rank: int       # order among inserts at one offset: closings, standalone, openings, replacements
    order: tuple    # tie-break within a rank
    # (report item, start, end) within `core`: what the insert carries, for the report's offsets
    marks: list[tuple[int, int, int]]
    lead: str = ""  # spaces it needs where it lands
    trail: str = ""
    spaced: bool = False  # the source had whitespace before it: keep it from the insert before
    tag: int | None = None  # an opening or closing tag: the tag's index
    # Something placed between words (a placeholder, a standalone tag): the paired tags around it in
    # the source, innermost first (None: not such an insert), where it stood there, and the
    # characters beside it there.
    within: tuple[int, ...] | None = None
    at: int = 0
    beside: tuple[str, str] = ("", "")
    inner_at: int | None = None  # an empty tag pair: where its inside starts in `core`


@dataclass(frozen=True)
class Removed:
    """Placeholder-like text the model wrote that the source did not have: taken out of the output.
    `at`: where it was, as an offset into the output."""

    kind: str
    text: str
    at: int


def restore(prepared: PreparedText, translation: str, alignment: TokenAlignment,
            rescore: Callable[[list[str]], list[float] | None] | None = None, articles: bool = True,
            known_word: Callable[[str], bool] | None = None) -> Restored:
    """`translation` of `prepared.model_text`, with `alignment` between them (source words over
    model_text, target words over translation); returns the output with everything put back and
    any placeholder-like text the model made up taken out. `rescore`: candidate
    translations -> their log-probabilities under the model given `terms_translated(prepared)`
    (None: it cannot say), which choose where a term the model left out goes (`_glossary_edits`)
    and, with `articles` (German targets), the article before a noun a glossary term replaced
    (`_agreeing_articles`) and a term satisfied inside a closed compound (`_compound_parts`);
    `known_word` (whether the model's vocabulary holds a word whole), with `rescore` and `articles`,
    where a term may take one part of a closed compound (`_compound_choices`)."""
    stray = find_placeholders(translation, prepared.styles)
    if not prepared.protected and not prepared.markup.tags and not stray and not prepared.term_matches:
        text = escaped(translation, prepared.fmt)
        return _edge_space(prepared, Restored(text, [], *_escaped_offsets(translation, prepared.fmt)))
    locate = _Locator(prepared, translation, alignment)
    plain, origin, origin_end = prepared.markup.plain, prepared.markup.origin, prepared.markup.origin_end
    tags = prepared.markup.tags
    protected = prepared.protected
    inserts: list[_Insert] = []
    reports: list[tuple[str, str, int, int]] = [(p.kind, p.text, origin[p.start], origin_end[p.end - 1]) for p in protected]
    reports += [("tag", tag.opening, tag.source_start, tag.source_end) for tag in tags]
    how: dict[int, Placement] = {}
    breaks = _breaks(tags)

    def atom(core: str, plain_start: int, plain_end: int, order: tuple, marks: list[tuple[int, int, int]],
             within: tuple[int, ...], own: int | None = None, edge: int | None = None) -> None:
        """Something with no words of its own to translate, placed between the words around it;
        `within`: the paired tags around it in the source, innermost first; `own`: the tag it is
        (None: a placeholder or term); `edge`: where it goes instead, kept at an edge of the text."""
        offset, placement = (edge, "kept") if edge is not None else locate.anchor(plain_start, plain_end)
        for item, _, _ in marks:
            how[item] = placement
        # Beside a placeholder, an element that breaks words stands for a space ("%2</p><p>File" is not glued).
        before = " " if own is None and plain_start in breaks else plain[plain_start - 1] if plain_start > 0 else ""
        after = " " if own is None and plain_end in breaks else plain[plain_end] if plain_end < len(plain) else ""
        lead, trail = _spacing(translation, offset, before, after)
        inserts.append(_Insert(offset, core, 1, order, marks, lead, trail, spaced=not before or before.isspace(),
                               within=within, at=plain_start, beside=(before, after)))

    # A paired tag around no words (`<i>%s</i>`, `<b></b>`) goes back whole, with what it holds,
    # placed like a placeholder: around no target words it would come back empty.
    held_by: dict[int, int] = {}    # tag index -> the outermost such tag holding it (itself included)
    held_items: set[int] = set()    # protected parts inside such a tag
    for index, tag in enumerate(tags):
        if tag.standalone or index in held_by or locate.to_model[tag.start] != locate.to_model[tag.end]:
            continue
        inner = [k for k in range(index + 1, len(tags)) if _inside(tags, k, index)]
        held_by.update({k: index for k in [index] + inner})
        base = tag.source_start
        held = [i for i, p in enumerate(protected) if tag.start <= p.start and p.end <= tag.end]
        held_items.update(held)
        marks = [(i, reports[i][2] - base, reports[i][3] - base) for i in held]
        marks += [(len(protected) + k, tags[k].source_start - base, tags[k].source_end - base) for k in [index] + inner]
        atom(prepared.original[base:tag.source_end], tag.start, tag.end, (tag.start, 0, index), marks,
             _ancestors(tags, index), index)

    substitutes = {i: prepared.glossary[entry].target for i, entry in prepared.protected_terms}
    for i, p in enumerate(protected):
        if i not in held_items:
            core = substitutes.get(i, p.text)
            core = escaped(core, prepared.fmt)
            if p.kind == "accelerator":
                # On the label's word, before its first letter; after a tag opened there.
                offset, how[i] = locate.mnemonic(p.start)
                inserts.append(_Insert(offset, core, 2, (1, i), [(i, 0, len(core))]))
            elif i in prepared.quoted:
                # The pair as written in the source (an entity stays an entity); the report's span is the part's.
                opening = prepared.original[origin[p.start - 1]:origin_end[p.start - 1]]
                closing = prepared.original[origin[p.end]:origin_end[p.end]]
                atom(opening + core + closing, p.start - 1, p.end + 1, (p.start, 1, i),
                     [(i, len(opening), len(opening) + len(core))], _enclosing(tags, p.start - 1, p.end + 1))
            else:
                atom(core, p.start, p.end, (p.start, 1, i), [(i, 0, len(core))], _enclosing(tags, p.start, p.end))

    # Where each glossary entry's required translation already stands: read once a translation,
    # for the terms' edits and the article choice alike, and only for the entries they ask about.
    # An occurrence another source word owns does not satisfy the term (`_own_occurrences`).
    compound_parts = cache(lambda entry: _compound_parts(prepared, translation, locate, entry) if articles else [])
    written_anywhere = cache(lambda entry: occurrences(translation, prepared.glossary[entry].target))
    own = cache(lambda entry: _own_occurrences(prepared, locate, entry, written_anywhere(entry)))
    occurring = cache(lambda entry: sorted({*own(entry), *compound_parts(entry)}))
    edits = _glossary_edits(prepared, translation, locate, occurring, rescore, known_word if articles else None,
                            german=articles)
    agreed = []
    if articles and rescore is not None and any(edit.how == "replaced" for edit in edits):
        # Every word that is a term's translation stays as written, whichever source word it translates.
        terms = [span for entry in range(len(prepared.glossary))
                 for span in written_anywhere(entry) + compound_parts(entry)]
        agreed = _agreeing_articles(translation, edits, terms, rescore)
    recased = _recased(translation, edits + agreed, rescore) if articles and rescore is not None else []
    changes = edits + agreed + recased
    # A tag around exactly a term the model left out goes around the term where it is inserted
    # ("Click <b>Apply</b> to save" -> "Klicken Sie auf <b>Übernehmen</b>, um"), not around the
    # word the alignment gave the term ("<b>Klicken</b> Sie auf Übernehmen").
    around = _tags_around_insertions(prepared, locate, changes, held_by)
    tag_spans: dict[int, tuple[int, int]] = {}
    breaking: list[_Insert] = []  # the inserts of elements that break words glued in the source
    for index, tag in enumerate(tags):
        item = len(protected) + index
        if index in held_by or index in around:
            continue
        if tag.standalone:
            core = tag.verbatim or tag.opening
            # An empty element at an edge of the text (a line break, an XLIFF code `<x/>`) stays
            # there: by the alignment, "Delete the files?<br/>" had come back "Dateien <br/> löschen?".
            # One with content (code, a placeholder's native code) moves with the words, as an argument.
            edge = locate.edge(tag.start) if tag.verbatim is None and tag.name != "!--" else None
            atom(core, tag.start, tag.start, (tag.start, 1, index), [(item, 0, len(core))], _ancestors(tags, index),
                 index, edge)
            if _breaks_glued_words(plain, tag, tag.start):
                breaking.append(inserts[-1])
            continue
        start, end, how[item] = locate.wrap(tag.start, tag.end)
        start, end = _parted(start, end, index, tags, plain, tag_spans, inserts, translation)
        start, end = _nest(start, end, tag, tag_spans, tags, translation)
        tag_spans[index] = (start, end)
        closing = tag.closing or ""
        if start == end:
            inserts.append(_Insert(start, tag.opening + closing, 1, (tag.start, 0, index),
                                   [(item, 0, len(tag.opening) + len(closing))], tag=index,
                                   within=_ancestors(tags, index), at=tag.start, inner_at=len(tag.opening)))
        else:
            inserts.append(_Insert(start, tag.opening, 2, (-end, index), [(item, 0, len(tag.opening))], tag=index))
            if _breaks_glued_words(plain, tag, tag.start):
                breaking.append(inserts[-1])
            inserts.append(_Insert(end, closing, 0, (-start, -index), [(item, 0, len(closing))], tag=index))
            if _breaks_glued_words(plain, tag, tag.end):
                breaking.append(inserts[-1])
    for insert in inserts:
        _contain(insert, tags, tag_spans, translation)
    if articles:
        changes += _decapitalised(translation, plain, inserts, changes, protected, tags)
    dropped = _dropped(translation, stray)
    # The space the model read for such an element (`prepare`) is the element's: "eins.<br/>Zeile";
    # not where something else placed there would then touch a word ("%1WINDOW").
    placed_between = {x.offset for x in inserts
                      if x.within is not None and x.tag is None and not any(x is y for y in breaking)}
    for insert in breaking:
        at = insert.offset
        if at > 0 and translation[at - 1] == " " and not {at - 1, at} & placed_between:
            dropped.add(at - 1)
        elif at < len(translation) and translation[at] == " " and not {at, at + 1} & placed_between:
            dropped.add(at)
    wrapping = {number: index for index, number in around.items()}
    for number, edit in enumerate(changes):
        dropped.update(range(edit.start, edit.end))
        core = escaped(edit.text, prepared.fmt)
        marks = [(len(reports) + number, 0, len(core))]
        if number in wrapping:
            index = wrapping[number]
            opening, closing = tags[index].opening, tags[index].closing or ""
            marks = [(len(reports) + number, len(opening), len(opening) + len(core)),
                     (len(protected) + index, 0, len(opening) + len(core) + len(closing))]
            how[len(protected) + index] = "aligned"
            core = opening + core + closing
        # A replacement stands where the words it replaces stood: inside a tag opened there.
        rank = 1 if edit.how == "inserted" else 3
        inserts.append(_Insert(edit.start, core, rank, (-1, edit.entry), marks, edit.lead, edit.trail))
    spans, text, starts, ends = _assemble(prepared.fmt, translation, inserts, len(reports) + len(changes), dropped)
    placed = spans[:len(reports)]
    for edit, (start, end) in zip(changes, spans[len(reports):]):
        # The characters a word was replaced by are where that word is now: its alignment links
        # address the term ("Ordner" -> "Verzeichnis"), not an empty string after it.
        for k in range(edit.start, edit.end):
            starts[k], ends[k] = start, end
    removed = [Removed(p.kind, p.text, starts[p.start]) for p in stray]
    found = [(m.entry, prepared.original_span(m.start, m.end)) for m in prepared.term_matches]
    found += [(entry, reports[i][2:4]) for i, entry in prepared.protected_terms]
    enforced = {edit.entry: edit.how for edit in edits} | {entry: "inserted" for _, entry in prepared.protected_terms}
    # Compound parts the edits left as they were, where they stand in the output.
    matched = {m.entry for m in prepared.term_matches}
    in_output = {entry: [(starts[a], ends[b - 1]) for a, b in compound_parts(entry) if dropped.isdisjoint(range(a, b))]
                 for entry in matched}
    # Occurrences left as they were that translate another source word, where they stand in the output.
    owned_elsewhere = {entry: [(starts[a], ends[b - 1]) for a, b in written_anywhere(entry)
                               if (a, b) not in own(entry) and dropped.isdisjoint(range(a, b))] for entry in matched}
    terms = glossary_report(prepared.glossary, sorted(found, key=lambda f: f[1]), text, enforced, in_output,
                            owned_elsewhere)
    glossary_items = {i for i, _ in prepared.protected_terms}  # reported as glossary terms, not as placed parts
    restored = Restored(text, [Placed(*report, target_start, target_end, how[i])
                               for i, (report, (target_start, target_end)) in enumerate(zip(reports, placed))
                               if i not in glossary_items], starts, ends, removed, terms)
    if prepared.fmt in ("markdown", "html-markdown"):
        restored = _flanking(restored)
    return restored if prepared.fmt == "markdown" else _edge_space(prepared, restored)


def _flanking(restored: Restored) -> Restored:
    """A Markdown output with the whitespace just inside each pair of emphasis delimiters moved out
    ("*** %1 Datei***" -> " ***%1 Datei***"): Markdown does not read a delimiter next to whitespace on
    its inside as emphasis. The words keep their offsets; only delimiters move."""
    text = restored.text
    placed = []
    for p in restored.placed:
        delimiter = p.text
        if p.kind != "tag" or not text.startswith(delimiter, p.target_start) \
                or not text.endswith(delimiter, p.target_start, p.target_end):
            placed.append(p)
            continue
        inside = text[p.target_start + len(delimiter):p.target_end - len(delimiter)]
        core = inside.strip()
        if not core:
            placed.append(p)
            continue
        lead, trail = inside[:len(inside) - len(inside.lstrip())], inside[len(inside.rstrip()):]
        text = text[:p.target_start] + lead + delimiter + core + delimiter + trail + text[p.target_end:]
        placed.append(replace(p, target_start=p.target_start + len(lead), target_end=p.target_end - len(trail)))
    return replace(restored, text=text, placed=placed)


# A tag as written, its quoted attribute values whole (Angular's XLIFF writes `dispStart="&lt;a>"`: a ">"
# inside a value ends no tag), and a markup text's edge: whitespace and tags before its first or after
# its last visible character.
_TAG_TEXT = r"""<(?:[^<>"']|"[^"]*"|'[^']*')*>"""
_EDGE_TOKEN = re.compile(_TAG_TEXT + r"|[^<]+")
_HEAD = re.compile(rf"(?:\s|{_TAG_TEXT})*")
_TAIL = re.compile(rf"(?:\s|{_TAG_TEXT})*\Z")


def _edge_space(prepared: PreparedText, restored: Restored) -> Restored:
    """`restored` with the whitespace at its markup source's edges put back where the source had it
    among the tags there ("<b>Unit file: </b>" came back "<b>Unit-Datei:</b>": a label the program
    joins to a value, now "<b>Unit-Datei: </b>"). The model never sees that whitespace. Only where
    the output's edge holds the same tags in the same order and no whitespace of its own, and the
    source's edge one run of it; plain text keeps its edges in its layout (service/layout.py)."""
    plain = prepared.markup.plain
    if prepared.fmt in ("text", "markdown") or not plain.strip():
        return restored
    first, last = len(plain) - len(plain.lstrip()), len(plain.rstrip()) - 1
    source, text = prepared.original, restored.text
    head_end = _HEAD.match(text).end()
    tail_start = _TAIL.search(text).start()
    if tail_start < head_end:
        return restored
    inserts = []  # (offset in the output, whitespace as the source wrote it)
    for source_edge, at in ((source[:prepared.markup.origin[first]], 0),
                            (source[prepared.markup.origin_end[last]:], tail_start)):
        tokens = _EDGE_TOKEN.findall(source_edge)
        spaces = [k for k, token in enumerate(tokens) if not token.startswith("<")]
        output_tags = _EDGE_TOKEN.findall(text[at:head_end] if at == 0 else text[at:])
        if (len(spaces) != 1 or any(not tag.startswith("<") for tag in output_tags)
                or [t for t in tokens if t.startswith("<")] != output_tags):
            continue
        k = spaces[0]
        inserts.append((at + sum(len(tag) for tag in output_tags[:k]), tokens[k]))
    if not inserts:
        return restored
    for at, space in reversed(inserts):
        text = text[:at] + space + text[at:]

    def start(x: int) -> int:
        return x + sum(len(space) for at, space in inserts if x >= at)

    def end(x: int) -> int:
        return x + sum(len(space) for at, space in inserts if x > at)
    placed = [replace(p, target_start=start(p.target_start), target_end=end(p.target_end)) for p in restored.placed]
    removed = [replace(r, at=start(r.at)) for r in restored.removed]
    terms = [replace(t, target_spans=[(start(a), end(b)) for a, b in t.target_spans]) for t in restored.glossary]
    return Restored(text, placed, [start(x) for x in restored.char_start], [end(x) for x in restored.char_end],
                    removed, terms)


def _glossary_edits(prepared: PreparedText, translation: str, locate: _Locator,
                    occurring: Callable[[int], list[tuple[int, int]]],
                    rescore: Callable[[list[str]], list[float] | None] | None = None,
                    known_word: Callable[[str], bool] | None = None, german: bool = False) -> list[Edit]:
    """What the translation needs for each glossary term it does not satisfy (service/glossary.py):
    the target words aligned to the source term replaced by the required term, or, where none is
    aligned and the translation holds the term nowhere, the term inserted where the alignment puts
    the source term's position. The required term takes a capital where the words it replaces
    began with one or where it starts a sentence ("zum Speichern" -> "zum Sichern", not "zum sichern").
    Where the model left the term out, the words the alignment gives it translate another source
    word ("Click Apply to save" -> "Klicken Sie auf, um zu speichern": "Klicken" is Click's, 0.76
    against 0.24), and replacing them would lose that word ("Übernehmen Sie auf, um"). So, with
    `rescore` (the model's log-probabilities of candidate translations, `restore`), a term each of
    whose words links to it under `_FOREIGN` of that word's heaviest link, and a term no word is
    aligned to, go where the model scores the sentence best: replacing those words, or inserted
    beside the translations of the source words around it (`_best_place`: "Klicken Sie auf
    Übernehmen, um"); so does, for `german` targets, a term whose words are only determiners and
    pronouns (`grammatical`: "Klicken Sie zum Laden der Datei." for "Click Open to load the file.",
    "Sie" linked 0.38 to Open: replaced, "Klicken Öffnen zum Laden" lost the "Sie"). A replacement
    never covers another term's required translation; in a
    hyphenated compound it may replace a part (`_replaceable`), the model's score choosing; with
    `known_word` (German targets) and `rescore`, a closed compound that also translates a source word
    outside the term may have only the term's part replaced, where the model scores that above the
    whole word (`_compound_choices`: "Den Extraktionsdialog öffnen." with extraction -> Entpacken:
    "Den Entpacken-Dialog öffnen.", not "Den Entpacken öffnen.").
    `occurring`: glossary entry -> where its required translation stands in `translation`."""
    edits: list[Edit] = []
    words = [locate.words_in(m.start, m.end) for m in prepared.term_matches]

    def kept_for(entry: int) -> list[tuple[int, int]]:
        """Where the other entries' required translations stand: no edit for `entry` covers them."""
        return [span for k in range(len(prepared.glossary)) if k != entry for span in occurring(k)]

    claimed = _claimed_targets(words, locate)
    unaligned = []
    for index, (match, targets) in enumerate(zip(prepared.term_matches, claimed)):
        entry = prepared.glossary[match.entry]
        found = occurring(match.entry)
        # No more target words than the term has: a sentence's last word, its punctuation linked to
        # the term's ("folder?" -> "Ordner löschen?", "löschen?" 0.52 to "folder?"), stays.
        size = len(prepared.model_text[match.start:match.end].split())
        window = max((targets[i:i + size] for i in range(max(1, len(targets) - size + 1))),
                     key=lambda window: sum(locate.weight(words[index], t) for t in window))
        others = frozenset(t for k, other in enumerate(claimed) if k != index for t in other)
        run = locate.run_of(window, others)
        if run is None:
            unaligned.append(match)
            continue
        start, end = run
        if any(a < end and start < b for a, b in found):
            continue
        wanted = sum(m.entry == match.entry for m in prepared.term_matches)
        if len(found) + sum(e.entry == match.entry for e in edits) < wanted:
            kept = kept_for(match.entry)
            choices = [Edit(match.entry, a, b, _cased(entry.target, translation[a:b][:1].isupper()), "replaced",
                            term=(match.start, match.end)) for a, b in _replaceable(translation, start, end, kept)]
            if known_word is not None and rescore is not None:
                choices += [Edit(match.entry, start, end, text, "replaced", term=(match.start, match.end))
                            for text in _compound_choices(translation, locate, words[index], start, end, entry.target,
                                                          kept, known_word)]
            if not choices:  # every part of those words is another term's translation: they stay
                unaligned.append(match)
                continue
            if rescore is not None and (all(locate.weight(words[index], t) < _FOREIGN * locate.heaviest_weight(t)
                                            for t in window)
                                        or german and all(grammatical(locate.target_words[t].text) for t in window)):
                edit = _best_place(prepared, translation, locate, match, words[index], choices, rescore)
            else:
                edit = _likeliest(translation, choices, rescore)
            edits.append(edit)
    for match in unaligned:
        # No word is aligned to the term. The model may have translated it all the same, merged
        # with another occurrence ("Press Save to save" -> "Zum Speichern ... drücken"), so the
        # term is inserted only where the translation would otherwise lack it.
        if occurring(match.entry) or any(e.entry == match.entry for e in edits):
            continue
        plain_start = prepared.to_plain[match.start]
        offset, _ = locate.anchor(plain_start, plain_start)
        edit = _insertion(prepared, translation, match, offset)
        if rescore is not None:
            words = locate.words_in(match.start, match.end)
            # The term's word given to another term may be a compound of both ("Netzwerkeinstellungen"
            # for "network settings", network -> Netzwerk kept in it): the term may take its other part.
            parts = []
            if known_word is not None:
                kept = kept_for(match.entry)
                for t in sorted({t for w in words for t in locate.aligned.get(w, [])}):
                    span = locate.run_of([t])
                    if span is not None and not any(e.start < span[1] and span[0] < e.end for e in edits):
                        parts += [Edit(match.entry, *span, text, "replaced", term=(match.start, match.end))
                                  for text in _compound_choices(translation, locate, words, *span,
                                                                prepared.glossary[match.entry].target, kept,
                                                                known_word)]
            edit = _best_place(prepared, translation, locate, match, words, [edit] + parts, rescore)
        edits.append(edit)
    return edits


def _tags_around_insertions(prepared: PreparedText, locate: _Locator, changes: list[Edit],
                            held_by: dict[int, int]) -> dict[int, int]:
    """Tag index -> the change (an inserted term) it goes around: a paired tag with no tag inside
    it whose words are exactly the source term."""
    model = prepared.model_text
    around: dict[int, int] = {}
    for index, tag in enumerate(prepared.markup.tags):
        if tag.standalone or index in held_by or any(_inside(prepared.markup.tags, k, index)
                                                     for k in range(index + 1, len(prepared.markup.tags))):
            continue
        a, b = locate.to_model[tag.start], locate.to_model[tag.end]
        a += len(model[a:b]) - len(model[a:b].lstrip())
        b -= len(model[a:b]) - len(model[a:b].rstrip())
        number = next((n for n, edit in enumerate(changes) if edit.how == "inserted" and edit.term == (a, b)
                       and n not in around.values()), None)
        if number is not None:
            around[index] = number
    return around


# A target word whose link to a term is under this share of its heaviest link translates another
# source word: the term's words are not it.
_FOREIGN = 0.5
# Under this share, an occurrence of the term's translation is not the term's at all (`_own_occurrences`).
# Stricter than `_FOREIGN`: counting a word out inserts or replaces, and the links of a word that
# translates the term with a neighbour split ("existiert" 0.76 to "does", 0.24 to "exist." in
# "Device directory does not exist."; "reflektierenden" 0.81 / 0.19 to "large" / "reflective");
# a word of another source word links to the term with almost nothing ("entfernen" under 0.05 to "Delete").
_UNRELATED = 0.1


def _best_place(prepared: PreparedText, translation: str, locate: _Locator, match: TermMatch, words: list[int],
                first: list[Edit], rescore: Callable[[list[str]], list[float] | None]) -> Edit:
    """Of `first` (the alignment's choices, its best first) and the term inserted right after the
    translation of the source word before it or right before that of the word after it (`words`:
    the term's source words), the edit under which the model finds the sentence likeliest. Each
    sentence is scored once (two places may give the same one)."""
    candidates = list(first) + [_insertion(prepared, translation, match, b) for b in locate.beside(words)]
    sentences = [_edited(translation, [edit]) for edit in candidates]
    return _likeliest(translation, [edit for i, edit in enumerate(candidates) if sentences.index(sentences[i]) == i],
                      rescore)


def _likeliest(translation: str, candidates: list[Edit], rescore: Callable[[list[str]], list[float] | None] | None
               ) -> Edit:
    """The candidate edit under which the model finds the translation likeliest; the first on a tie,
    without `rescore` or where it gives None."""
    if len(candidates) == 1 or rescore is None:
        return candidates[0]
    scores = rescore([_edited(translation, [edit]) for edit in candidates])
    if scores is None:
        return candidates[0]
    return candidates[max(range(len(candidates)), key=lambda i: (scores[i], -i))]


def _compound_parts(prepared: PreparedText, translation: str, locate: _Locator, entry: int) -> list[tuple[int, int]]:
    """Where a German closed compound the model wrote for a term of glossary `entry` holds the term's
    required translation as its head or first part (service/glossary.py, `occurrences`), in a word
    aligned to the term and to a source word outside it: "Netzwerkeinstellungen" for "network
    settings" satisfies settings -> Einstellungen (replacing it by the term lost "network"). A
    compound that translates the term alone is the model's mistake ("Chinatown" for "china",
    "Handwerker" for "hand"): the term replaces it."""
    target = prepared.glossary[entry].target
    spans: list[tuple[int, int]] = []
    for match in prepared.term_matches:
        if match.entry != entry:
            continue
        words = locate.words_in(match.start, match.end)
        for t in locate.targets(words):
            if not locate.aligned_outside(t, words):
                continue
            word = locate.target_words[t]
            spans += [(word.start + a, word.start + b)
                      for a, b in occurrences(translation[word.start:word.end], target, compounds=True)]
    return spans


def _own_occurrences(prepared: PreparedText, locate: _Locator, entry: int,
                     written: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Of `written` (where the translation holds glossary `entry`'s required translation as a word),
    those that may be the term's. An occurrence is another source word's where the term's source
    words are hard-aligned to target words of their own elsewhere and none of the occurrence's words
    is hard-aligned to them or links to them with `_UNRELATED` of its heaviest link: with Delete ->
    Entfernen, "Drücken Sie das Löschen, um die Datei zu entfernen." holds "entfernen" for "remove",
    and "Löschen", Delete's own word, is what the term replaces. A term with no word of its own may
    have been merged into another word ("Press Save to save" -> "Zum Speichern ... drücken"), and an
    occurrence in a part of a target word ("Sensor" in "Sensor-Erinnerung") may be the term's: both
    count."""
    words = sorted({w for m in prepared.term_matches if m.entry == entry for w in locate.words_in(m.start, m.end)})
    linked = {t for w in words for t in locate.aligned.get(w, [])}
    own = []
    for a, b in written:
        inside = [t for t, word in enumerate(locate.target_words) if word.start < b and a < word.end]
        whole = all(span is None or a <= span[0] and span[1] <= b for span in map(locate.run_of, ([t] for t in inside)))
        if (inside and whole and linked - set(inside) and linked.isdisjoint(inside)
                and all(0.0 < (heaviest := locate.heaviest_weight(t)) and locate.weight(words, t) < _UNRELATED * heaviest
                        for t in inside)):
            continue
        own.append((a, b))
    return own


def _compound_choices(translation: str, locate: _Locator, words: list[int], start: int, end: int, target: str,
                      kept: list[tuple[int, int]], known_word: Callable[[str], bool]) -> list[str]:
    """Where translation[start:end], a word hard-aligned to a term (source `words`), is a German
    closed compound noun hard-aligned to a source word outside the term too ("Extraktionsdialog"
    for "extraction dialog"): the texts that replace the word with the term in place of its first
    part or its head, joined by a hyphen ("Entpacken-Dialog", "Extraktions-Entpacken"). The caller
    lets the model's score choose among them and the whole word replaced (`_likeliest`), which
    loses the other word's translation but is often what the model prefers. A split has a part
    the model's vocabulary holds whole on one side (`known_word`: "Dialog"; "Passwort"; a first
    part with its linking element aside) or ends where another term's
    translation (`kept`) stands, and replaces none of it; three letters or more on each side. Empty
    for any other word and where no split does."""
    word = translation[start:end]
    if not (len(word) >= 7 and word.isalpha() and word[:1].isupper()):
        return []
    target_index = next((t for t, w in enumerate(locate.target_words) if w.start <= start and end <= w.end), None)
    # Hard-aligned to the term and to another source word: a word that only attends to the term
    # ("Klicken" 0.24 to Apply) translates the other word alone.
    if (target_index is None or not any(target_index in locate.aligned.get(w, []) for w in words)
            or not locate.aligned_outside(target_index, words)):
        return []
    term = target[:1].upper() + target[1:]
    bounds = {at for span in kept for at in span}
    choices = []
    for cut in range(3, len(word) - 2):
        first, head = word[:cut], word[cut].upper() + word[cut + 1:]
        stems = [first] + [first[:-len(e)] for e in LINKING if first.endswith(e) and len(first) - len(e) >= 3]
        # The term as the first part (the head kept), then as the head (the first part kept).
        if not (start + cut in bounds or known_word(head) or any(map(known_word, stems))):
            continue
        for replaced, text in (((start, start + cut), f"{term}-{head}"), ((start + cut, end), f"{first}-{term}")):
            if not any(a < replaced[1] and replaced[0] < b for a, b in kept):
                choices.append(text)
    return choices


def _replaceable(translation: str, start: int, end: int, kept: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """What a term may replace of translation[start:end], the words aligned to it: the whole span,
    unless it holds another term's required translation (`kept`: their spans), and, in a hyphenated
    compound, each part that does not ("Sensor-Erinnerung" for "Sensor Alarm" with both terms:
    "Sensor-Alarm", not "Alarm"); the whole span first."""
    spans = [] if any(a < end and start < b for a, b in kept) else [(start, end)]
    if "-" in translation[start:end] and " " not in translation[start:end]:
        at = start
        for part in translation[start:end].split("-"):
            if part and not any(a < at + len(part) and at < b for a, b in kept):
                spans.append((at, at + len(part)))
            at += len(part) + 1
    return spans


def _insertion(prepared: PreparedText, translation: str, match: TermMatch, offset: int) -> Edit:
    """The term of `match` inserted at `offset`: capitalised at the start of a sentence, with a
    space where it would touch a word, none before the punctuation that closes a clause."""
    entry = prepared.glossary[match.entry]
    before = translation[:offset].rstrip()
    model = prepared.model_text
    lead, trail = _spacing(translation, offset, model[match.start - 1] if match.start else "",
                           model[match.end] if match.end < len(model) else "")
    if translation[offset:offset + 1] in _CLOSING:
        trail = ""
    return Edit(match.entry, offset, offset, _cased(entry.target, not before or before[-1] in ".!?"), "inserted", lead, trail,
                (match.start, match.end))


_CLOSING = frozenset(".,;:!?)]}…")


def _recased(translation: str, edits: list[Edit], rescore: Callable[[list[str]], list[float] | None]) -> list[Edit]:
    """The first letter of the word after a term inserted at the start of a sentence, lower-cased
    where the model scores the sentence better so: the capital was the sentence's ("Springen
    zurück 1 Minute", not "Springen Zurück 1 Minute" for seek -> Springen); a noun keeps its own.
    A word written in capitals ("DVD") and one an edit replaced stay as they are."""
    recased = []
    for edit in edits:
        if edit.how != "inserted" or translation[:edit.start].rstrip()[-1:] not in ("", ".", "!", "?"):
            continue
        word = re.match(r"\s*(\w+)", translation[edit.start:])
        if word is None or not word.group(1)[:1].isupper() or word.group(1)[1:2].isupper():
            continue
        at = edit.start + word.start(1)
        if any(e.start < at + 1 and at < e.end for e in edits):
            continue
        lowered = Edit(edit.entry, at, at + 1, translation[at].lower(), "recased")
        scores = rescore([_edited(translation, edits), _edited(translation, edits + [lowered])])
        if scores is not None and scores[1] > scores[0]:
            recased.append(lowered)
    return recased


_FIRST_WORD = re.compile(r"\s*([^\W\d_]+)")


def _decapitalised(translation: str, plain: str, inserts: list[_Insert], changes: list[Edit],
                   protected: list[Protected], tags: list[Tag]) -> list[Edit]:
    """The translation's first word lower-cased where code was put before it (an element passed
    through, `<code>`, or a Markdown code span) and it is a German word that is never a noun: its
    capital was the sentence's start, which it no longer is ("Use <code>--force</code> to
    overwrite." came back "<code>--force</code> Zum Überschreiben verwenden."). Not where the source
    itself starts with the code and a capital, nor a word an edit changed. Not after a placeholder:
    on 300 Multi30k sentences with one put in at random it cost BLEU around them (40.53 → 40.12,
    `python benchmarks/protection.py`): a placeholder put first there is often misplaced, and the
    capital is the reference's."""
    first = _FIRST_WORD.match(translation)
    if first is None or not first.group(1)[:1].isupper() or first.group(1).lower() not in FUNCTION_WORDS:
        return []
    at = first.start(1)
    if any(edit.start < at + 1 and at < edit.end for edit in changes):
        return []
    for insert in inserts:
        if insert.rank != 1 or insert.within is None or insert.offset > at or translation[:insert.offset].strip():
            continue
        item = insert.marks[0][0]
        code = (protected[item].kind == "code" if item < len(protected)
                else tags[item - len(protected)].verbatim is not None)
        if not code:
            continue
        source_next = _FIRST_WORD.match(plain, insert.at)
        starts_so = not plain[:insert.at].strip() and source_next is not None and source_next.group(1)[:1].isupper()
        if not starts_so:
            return [Edit(-1, at, at + 1, translation[at].lower(), "recased")]
    return []


_WORD_BEFORE = re.compile(r"(\w+)\s+$")
# German adjective endings, longest first (strong, weak and mixed declension use these five).
_ADJECTIVE_ENDINGS = ("en", "em", "er", "es", "e")
_MAX_ADJECTIVES = 2


def _agreeing_articles(translation: str, edits: list[Edit], terms: list[tuple[int, int]],
                       rescore: Callable[[list[str]], list[float] | None]) -> list[Edit]:
    """For each replaced German noun, the forms of the determiner and adjectives before it under
    which the model finds the sentence likeliest: "Der Ordner konnte nicht erstellt werden" with
    "folder" -> "Verzeichnis" gives "Das Verzeichnis ...", "Den ausgewählten Ordner" gives "Das
    ausgewählte Verzeichnis". Candidates: every form of the determiner's family (`determiner_forms`)
    with every adjective ending, the same ending on each of up to two adjectives. The scores are
    taken given the source with its terms already in the target language (`terms_translated`):
    given "The folder", the model expects "Ordner" and so "Der" (software model, whole sentences:
    "Der Verzeichnis" -4.78, "Das Verzeichnis" -5.10). Only those words change, and only where the
    model prefers another form, never a word that is a glossary term itself (`terms`: their spans);
    none where `rescore` gives None."""
    agreed: list[Edit] = []
    fixed = [(e.start, e.end) for e in edits] + terms
    for edit in edits:
        if edit.how != "replaced":
            continue
        determiner, adjectives = _noun_phrase_before(translation, edit.start)
        words = ([determiner] if determiner else []) + adjectives
        if not words or any(a < end and start < b for a, b in fixed for start, end in words):
            continue
        choices = [_forms(translation, determiner, edit.entry)] if determiner else []
        if adjectives:
            stems = [_adjective_stem(translation[start:end]) for start, end in adjectives]
            ending = translation[adjectives[0][0]:adjectives[0][1]][len(stems[0]):]
            endings = (ending, *(e for e in _ADJECTIVE_ENDINGS if e != ending))
            choices.append([[Edit(edit.entry, start, end, stem + e, "agreed") for (start, end), stem in zip(adjectives, stems)]
                            for e in endings])
        candidates = [[]]
        for options in choices:
            candidates = [chosen + option for chosen in candidates for option in options]
        scores = rescore([_edited(translation, edits + agreed + chosen) for chosen in candidates])
        if scores is None:
            return []
        best = max(range(len(candidates)), key=lambda i: scores[i])
        if best > 0 and scores[best] > scores[0]:
            agreed += [e for e in candidates[best] if e.text != translation[e.start:e.end]]
    return agreed


def _noun_phrase_before(translation: str, noun_start: int) -> tuple[tuple[int, int] | None, list[tuple[int, int]]]:
    """The German determiner (its span, or None) and up to two adjectives (lower-case words with an
    adjective ending, or capitalised at the start of the text) right before `noun_start`; a "zu"
    before a participle ("einen zu importierenden Ordner") is part of the phrase and stays."""
    adjectives: list[tuple[int, int]] = []
    at = noun_start
    while True:
        before = _WORD_BEFORE.search(translation, 0, at)
        if before is None:
            return None, adjectives
        word, span = before.group(1), before.span(1)
        if word == "zu" and adjectives and adjectives[0][0] == translation.find(" ", span[1]) + 1:
            at = span[0]
            continue
        if determiner_forms(word):
            return span, adjectives
        if (len(adjectives) == _MAX_ADJECTIVES or len(word) < 4 or not word.endswith(_ADJECTIVE_ENDINGS)
                or not (word[0].islower() or span[0] == 0)):
            return None, adjectives
        adjectives.insert(0, span)
        at = span[0]


def _adjective_stem(word: str) -> str:
    return next(word[: -len(e)] for e in _ADJECTIVE_ENDINGS if word.endswith(e))


def _forms(translation: str, span: tuple[int, int], entry: int) -> list[list[Edit]]:
    """The determiner at `span` as it is, then in each of its other forms, as one-edit options."""
    word = translation[span[0]:span[1]]
    return [[Edit(entry, span[0], span[1], form, "agreed")] for form in (word, *determiner_forms(word))]


def terms_translated(prepared: PreparedText) -> str:
    """`prepared.model_text` with each glossary source term replaced by its required target term:
    the source `_agreeing_articles` scores its candidates against."""
    text = prepared.model_text
    for match in sorted(prepared.term_matches, key=lambda m: m.start, reverse=True):
        text = text[:match.start] + prepared.glossary[match.entry].target + text[match.end:]
    return text


def _edited(translation: str, edits: list[Edit]) -> str:
    """`translation` with `edits` made (an inserted term with the spaces it needs): what the model scores."""
    out = translation
    for edit in sorted(edits, key=lambda e: (e.start, e.end), reverse=True):
        text = edit.lead + edit.text + edit.trail if edit.how == "inserted" else edit.text
        out = out[:edit.start] + text + out[edit.end:]
    return out


def _cased(term: str, capital: bool) -> str:
    """`term` with a capital first letter where `capital`; as written otherwise (a term written with
    a capital, a German noun, keeps it)."""
    return term[:1].upper() + term[1:] if capital else term


def _claimed_targets(words: list[list[int]], locate: _Locator) -> list[list[int]]:
    """Per glossary match (`words`: its source words), the target words that translate it
    (`_Locator.targets`), each target word given to one match only: a word aligned to two terms
    ("Delete the folder?" -> "Ordner löschen?", "löschen" linked to both) goes to the term with
    fewer other words, then to the one it links to most, so that each term's replacement keeps its
    own place."""
    wanted = [locate.targets(w) for w in words]
    owners: dict[int, list[int]] = {}
    for index, targets in enumerate(wanted):
        for t in targets:
            owners.setdefault(t, []).append(index)
    claimed: list[list[int]] = [[] for _ in words]
    for t, indices in sorted(owners.items()):
        best = min(indices, key=lambda i: (len(wanted[i]), -locate.weight(words[i], t), i))
        claimed[best].append(t)
    return claimed


def _breaks_glued_words(plain: str, tag: Tag, at: int) -> bool:
    """Whether `tag`, standing at plain[at], is an element that breaks words and none but it stands
    between the characters there (`prepare` gave the model a space for it)."""
    return (tag.name.lower() in WORD_BREAKING and 0 < at < len(plain) and not plain[at - 1].isspace()
            and not plain[at].isspace())


def _ancestors(tags: list[Tag], index: int) -> tuple[int, ...]:
    """The tags around tag `index`, innermost first."""
    chain, parent = [], tags[index].parent
    while parent is not None:
        chain.append(parent)
        parent = tags[parent].parent
    return tuple(chain)


def _enclosing(tags: list[Tag], start: int, end: int) -> tuple[int, ...]:
    """The paired tags around plain[start:end] (not empty), innermost first."""
    around = [k for k, tag in enumerate(tags) if not tag.standalone and tag.start <= start and end <= tag.end]
    return tuple(sorted(around, key=lambda k: (tags[k].end - tags[k].start, -k)))


def _contain(insert: _Insert, tags: list[Tag], spans: dict[int, tuple[int, int]], translation: str) -> None:
    """Moves something placed between words into the target span of the innermost paired tag around
    it in the source, and out of every other tag's ("<p>Files: %1</p>" came back "<p>Dateien:</p> %1",
    "<b>Unit file state:</b><br>" "<b>Status <br> der Unit-Datei:</b>"): out of a tag, to the side
    the source had it on. Where it lands at a tag's edge, `_assemble` orders it inside or outside."""
    if insert.within is None:
        return
    offset = insert.offset
    placed = [k for k in insert.within if k in spans]
    if placed:
        low, high = spans[placed[0]]
        offset = min(max(offset, low), high)
    for _ in range(len(spans)):
        around = next(((k, s, e) for k, (s, e) in spans.items() if s < offset < e and k not in insert.within), None)
        if around is None:
            break
        k, s, e = around
        offset = s if insert.at <= tags[k].start else e
    if offset != insert.offset:
        insert.offset = offset
        insert.lead, insert.trail = _spacing(translation, offset, *insert.beside)


def _in_tag_order(inserts: list[_Insert]) -> list[_Insert]:
    """Inserts sorted by offset, closings before standalone ones before openings; something placed
    between words (`_Insert.within`) that lands where a tag around it in the source opens or closes
    goes inside that tag ("<p>%1 Dateien</p>", not "%1<p> Dateien</p>"); <head/> between <html> and
    <body> at the start of a Qt rich text stays there."""
    inserts = sorted(inserts, key=lambda x: (x.offset, x.rank, x.order))
    ordered: list[_Insert] = []
    for _, same_offset in itertools.groupby(inserts, key=lambda x: x.offset):
        group = list(same_offset)
        base = [x for x in group if not x.within]
        slots: list[list[_Insert]] = [[] for _ in range(len(base) + 1)]
        for position, x in enumerate(group):
            if not x.within:
                continue
            closing = [k for k, y in enumerate(base) if y.rank == 0 and y.tag in x.within]
            opening = [k for k, y in enumerate(base) if y.rank == 2 and y.tag in x.within]
            slot = closing[0] if closing else opening[-1] + 1 if opening else sum(
                1 for y in group[:position] if not y.within)
            slots[slot].append(x)
        same = [y for k, x in enumerate(base) for y in slots[k] + [x]] + slots[-1]
        ordered += _filled(same)
    return ordered


def _filled(same_offset: list[_Insert]) -> list[_Insert]:
    """An empty tag pair with what the source held inside it at its offset put inside it ("<b>%1:</b>
    file deleted", the colon left out, came back "<b></b> %1 Datei gelöscht"); the deepest pair first."""
    pairs = sorted((x for x in same_offset if x.inner_at is not None), key=lambda x: -len(x.within or ()))
    for pair in pairs:
        inside = [x for x in same_offset if x is not pair and x.within and pair.tag in x.within]
        if not inside:
            continue
        inner, marks = "", []
        for x in inside:
            space = " " if inner and x.spaced else ""
            at = pair.inner_at + len(inner) + len(space)
            marks += [(item, at + start, at + end) for item, start, end in x.marks]
            inner += space + x.core
        pair.core = pair.core[:pair.inner_at] + inner + pair.core[pair.inner_at:]
        pair.marks = [(item, 0, len(pair.core)) for item, _, _ in pair.marks] + marks
        # It stands where they would have: spaced as they were.
        pair.lead, pair.trail = pair.lead or inside[0].lead, pair.trail or inside[-1].trail
        same_offset = [x for x in same_offset if not any(x is y for y in inside)]
    return same_offset


def _inside(tags: list[Tag], k: int, ancestor: int) -> bool:
    return ancestor in _ancestors(tags, k)


def _siblings(tags: list[Tag], tag: Tag) -> list[int]:
    """The indices of `tag`'s parent's children (the top-level tags where it has no parent), itself included."""
    return tags[tag.parent].children if tag.parent is not None else [k for k, t in enumerate(tags) if t.parent is None]


def _dropped(translation: str, stray: list[Protected]) -> set[int]:
    """The characters of the translation that stray placeholders take, and a space beside each."""
    dropped: set[int] = set()
    for p in stray:
        dropped.update(range(p.start, p.end))
        space_before = p.start > 0 and translation[p.start - 1] == " "
        if p.end < len(translation) and translation[p.end] == " " and (p.start == 0 or space_before):
            dropped.add(p.end)
        elif space_before and (p.end == len(translation) or not translation[p.end].isalnum()):
            dropped.add(p.start - 1)
    return dropped


def _glued(source: str, output: str) -> bool:
    """A placeholder glued to `source` in the text stays glued to `output` beside it in the
    translation only where the two are alike: both part of a word ("%sfile" -> "%sDatei") or both
    punctuation ("(%s)"). Glued to punctuation the translation lost, it must not stick to a word
    ("Hello world. It" -> "Hello world Es", not "Hello worldEs")."""
    return bool(source) and not source.isspace() and source.isalnum() == output.isalnum()


def _spacing(translation: str, offset: int, source_before: str, source_after: str) -> tuple[str, str]:
    """The spaces an insert needs where it lands: one wherever it would touch a character it was
    not glued to in the source."""
    before = translation[offset - 1] if offset > 0 else ""
    after = translation[offset] if offset < len(translation) else ""
    lead = " " if before and not before.isspace() and not _glued(source_before, before) else ""
    trail = " " if after and not after.isspace() and not _glued(source_after, after) else ""
    return lead, trail


def _parted(start: int, end: int, index: int, tags: list[Tag], plain: str, spans: dict[int, tuple[int, int]],
            inserts: list[_Insert], translation: str) -> tuple[int, int]:
    """Two sibling tags inside one word, parted by a sign ("<kbd>Ctrl</kbd>+<kbd>S</kbd>",
    "<b>Tab</b>/<b>Shift+Tab</b>"), both aligned to the one target word: where that word holds the
    sign once, the earlier tag ends before it and this one starts after it ("<kbd>Strg</kbd>+<kbd>S</kbd>",
    not "<kbd>Strg+S</kbd><kbd></kbd>"). The span unchanged otherwise."""
    tag = tags[index]
    earlier = [k for k in _siblings(tags, tag) if k < index and k in spans]
    if not earlier:
        return start, end
    previous = earlier[-1]
    sign = plain[tags[previous].end:tag.start]
    low, high = spans[previous]
    if not sign or len(sign) > 2 or any(c.isalnum() or c.isspace() for c in sign) or not (low <= start < end <= high):
        return start, end
    word = translation[low:high]
    if word.count(sign) != 1 or any(c.isspace() for c in word):
        return start, end
    cut = low + word.index(sign)
    if cut == low or cut + len(sign) == high:
        return start, end
    spans[previous] = (low, cut)
    for insert in inserts:
        if insert.tag == previous and insert.inner_at is None:
            if insert.rank == 0:
                insert.offset = cut
            else:
                insert.order = (-cut, previous)
    return cut + len(sign), high


def _nest(start: int, end: int, tag: Tag, spans: dict[int, tuple[int, int]], tags: list[Tag],
          translation: str) -> tuple[int, int]:
    """The target span clamped into the parent's and off the earlier siblings' (no crossing, and no
    sibling inside another: "<b>Leertaste</b>/<b>Umschalt+Leertaste</b>", both aligned to the same
    words, came back "<b><b>space/Shift+space</b></b>"). Around an earlier sibling, the span keeps
    its part after it (the source's order), else its part before it, else stands empty after it."""
    if tag.parent is not None and tag.parent in spans:
        low, high = spans[tag.parent]
        start, end = min(max(start, low), high), min(max(end, low), high)
    siblings = [spans[i] for i in _siblings(tags, tag) if i in spans]
    changed = True
    while changed:
        changed = False
        for s, e in siblings:
            if s < start < e:
                start, changed = e, True
            if s < end < e:
                end, changed = s, True
            if end < start:
                end, changed = start, True
            if s < e and start <= s and e <= end and start < end:
                after = len(translation[e:end]) - len(translation[e:end].lstrip())
                before = len(translation[start:s]) - len(translation[start:s].rstrip())
                start, end = (e + after, end) if e + after < end else (start, s - before) if start < s - before else (e, e)
                changed = True
    return start, end


class _Locator:
    """Target offsets for source positions, through the hard links of the word alignment."""

    def __init__(self, prepared: PreparedText, translation: str, alignment: TokenAlignment):
        self.translation = translation
        self.source_words: list[Word] = alignment.source_words
        self.target_words: list[Word] = alignment.target_words
        self.aligned: dict[int, list[int]] = {}
        for s, t in alignment.hard:
            self.aligned.setdefault(s, []).append(t)
        # A source word that is no target word's heaviest link ("a" in "a house" -> "eines Hauses")
        # still has the target word that attends to it most: a tag around it goes there.
        self.attending: dict[int, tuple[float, int]] = {}
        self.links = alignment.links
        for t, links in enumerate(alignment.links):
            for s, weight in links:
                if weight >= SOFT_LINK_MIN_WEIGHT and weight > self.attending.get(s, (0.0, -1))[0]:
                    self.attending[s] = (weight, t)
        # plain offset -> model_text offset (removed characters map to where they were)
        self.to_model: list[int] = [0] * (len(prepared.markup.plain) + 1)
        k = 0
        for plain_offset in range(len(prepared.markup.plain) + 1):
            while k < len(prepared.to_plain) - 1 and prepared.to_plain[k] < plain_offset:
                k += 1
            self.to_model[plain_offset] = k
        self.model_text = prepared.model_text
        self.model_length = len(prepared.model_text)

    def anchor(self, plain_start: int, plain_end: int) -> tuple[int, Placement]:
        at = self.to_model[plain_start]
        inside = next((i for i, w in enumerate(self.source_words) if w.start < at < w.end), None)
        if inside is not None:
            # Glued to punctuation ("with %s."): after the target of the word, before its punctuation.
            word = self.source_words[inside]
            if inside in self.aligned:
                target = self.target_words[max(self.aligned[inside])]
                tail = word.text[at - word.start:]
                # Before as much of the target's punctuation as followed the part in the source:
                # "deleted: %1]" is "gelöscht: %1]", not "gelöscht %1:]".
                cut = 0 if not _is_punctuation(tail) else len(tail) if target.text.endswith(tail) \
                    else _trailing_punctuation(target.text)
                return target.end - cut, "aligned"
            return self._proportional(at), "fallback"
        right = next((i for i, w in enumerate(self.source_words) if w.start >= at), None)
        left = next((i for i in range(len(self.source_words) - 1, -1, -1) if self.source_words[i].end <= at), None)
        if right is not None and right in self.aligned:
            return self.target_words[min(self.aligned[right])].start, "aligned"
        if left is not None and left in self.aligned:
            return self.target_words[max(self.aligned[left])].end, "aligned"
        return self._proportional(at), "fallback"

    def edge(self, plain_start: int) -> int | None:
        """Where something at an edge of the text goes: the translation's start where no words stand
        before it, its end (before the closing punctuation that followed it) where none stand after;
        None elsewhere."""
        at = self.to_model[plain_start]
        before, after = self.model_text[:at].strip(), self.model_text[at:].strip()
        if before and after and not _is_punctuation(after):
            return None
        return 0 if not before and after else self._proportional(at)

    def mnemonic(self, plain_start: int) -> tuple[int, Placement]:
        """Where an accelerator taken out at `plain_start` goes: before the first letter of the
        first target word aligned to the source word it marked, else of the translation's first word."""
        at = self.to_model[plain_start]
        word = next((i for i, w in enumerate(self.source_words) if w.start <= at < w.end), None)
        if word in self.aligned:
            target = self.target_words[min(self.aligned[word])]
            return target.start + _leading_punctuation(target.text), "aligned"
        if not self.target_words:
            return 0, "fallback"
        first = self.target_words[0]
        return first.start + _leading_punctuation(first.text), "fallback"

    def words_in(self, model_start: int, model_end: int) -> list[int]:
        """The source words that model_text[model_start:model_end] touches."""
        return [i for i, w in enumerate(self.source_words) if w.start < model_end and model_start < w.end]

    def targets(self, words: list[int]) -> list[int]:
        """The target words that translate source `words`: those hard-aligned to them, else those
        that attend to them most ("Save your work." -> "Ihre Arbeit speichern.": "speichern" links
        0.515 to "work." and 0.485 to "Save")."""
        targets = sorted({t for i in words for t in self.aligned.get(i, [])})
        return targets or sorted({self.attending[i][1] for i in words if i in self.attending})

    def aligned_outside(self, target: int, words: list[int]) -> bool:
        """Whether target word `target` is hard-aligned to a source word not among `words`."""
        return any(target in targets for s, targets in self.aligned.items() if s not in words)

    def heaviest_weight(self, target: int) -> float:
        """The weight of target word `target`'s heaviest link (0.0: no link)."""
        return max((weight for _, weight in self.links[target]), default=0.0)

    def beside(self, words: list[int]) -> list[int]:
        """Offsets in the translation right after the last target word aligned to the source word
        before `words` (before its closing punctuation), and right before the first aligned to the
        word after them: where a phrase the model left out would stand. None without `words` (an
        alignment without words: a backend that gives none)."""
        if not words:
            return []
        places = []
        before, after = min(words) - 1, max(words) + 1
        if before in self.aligned:
            word = self.target_words[max(self.aligned[before])]
            places.append(word.end - _trailing_punctuation(word.text))
        if after in self.aligned:
            word = self.target_words[min(self.aligned[after])]
            places.append(word.start + _leading_punctuation(word.text))
        return sorted(set(places))

    def weight(self, words: list[int], target: int) -> float:
        """The largest link weight from target word `target` to source `words`."""
        return max((weight for s, weight in self.links[target] if s in words), default=0.0)

    def run_of(self, targets: list[int], others: frozenset[int] = frozenset()) -> tuple[int, int] | None:
        """The translation's span from the first to the last word of the largest cluster of
        `targets` (not bridging words of `others`), less their outer punctuation; None for no targets."""
        if not targets:
            return None
        run = _largest_run(sorted(targets), others)
        first, last = self.target_words[run[0]], self.target_words[run[-1]]
        start = first.start + _leading_punctuation(first.text)
        end = last.end - _trailing_punctuation(last.text)
        return (start, end) if start < end else None

    def wrap(self, plain_start: int, plain_end: int) -> tuple[int, int, Placement]:
        a, b = self.to_model[plain_start], self.to_model[plain_end]
        inside = self.words_in(a, b)
        # A tag around every word (<p>, <li>, a whole label) is around the whole translation,
        # whatever the alignment of its words says.
        whole = bool(inside) and len(inside) == len(self.source_words)
        # Each target word once: two wrapped words aligned to one target word do not make its run
        # outweigh a longer run of distinct words.
        targets = list(range(len(self.target_words))) if whole else self.targets(inside)
        if targets:
            run = targets if whole else _largest_run(targets)
            first, last = self.target_words[run[0]], self.target_words[run[-1]]
            start, end = first.start, last.end
            # "<b>Delete</b> all files?" -> "Alle Dateien löschen?": the question mark is the
            # sentence's, not the wrapped word's. Punctuation at an edge of the translation stays
            # inside the tag only where the wrapped source text has punctuation at that edge too,
            # and no more of it than that where the source's is its inner part ("<b>{{name}}</b>,"
            # -> "{{name}}," keeps the braces inside, the comma out).
            wrapped = self.model_text[a:b].strip()
            start += _outer_part(first.text[:_leading_punctuation(first.text)],
                                 wrapped[:_leading_punctuation(wrapped)], leading=True)
            end -= _outer_part(last.text[len(last.text) - _trailing_punctuation(last.text):],
                               wrapped[len(wrapped) - _trailing_punctuation(wrapped):], leading=False)
            if start >= end or whole and not (self.model_text[:a] + self.model_text[b:]).strip():
                # the run is punctuation only, or the tag holds the whole source (`<h1>A day in the
                # park</h1>`): what the translation has at its edges stays inside, none outside it
                start, end = first.start, last.end
            return start, end, "aligned"
        start, _ = self.anchor(plain_start, plain_start)
        end, _ = self.anchor(plain_end, plain_end)
        return start, max(start, end), "fallback"

    def _proportional(self, at: int) -> int:
        if not self.translation or self.model_length == 0:
            return 0 if at == 0 or not self.translation else len(self.translation)
        if at >= self.model_length or _is_punctuation(self.model_text[at:].strip()):
            # At the end, or before the closing punctuation only: the same in the translation.
            cut = _trailing_punctuation(self.translation) if at < self.model_length else 0
            return len(self.translation) - cut
        if at == 0:
            return 0
        # The word boundary of the translation nearest to the same relative position.
        wanted = at / self.model_length * len(self.translation)
        bounds = [0, len(self.translation)] + [w.start for w in self.target_words] + [w.end for w in self.target_words]
        return min(bounds, key=lambda b: (abs(b - wanted), b))


def _assemble(fmt: TextFormat, translation: str, inserts: list[_Insert], items: int, dropped: set[int]
              ) -> tuple[list[tuple[int, int]], str, list[int], list[int]]:
    """The output: the translation (escaped where it is markup text, less the dropped characters)
    with the inserts; per report item its span in the output, and per translation character where
    it starts and ends there."""
    inserts = _in_tag_order(inserts)
    out: list[str] = []
    length = 0
    starts: list[int] = []
    ends: list[int] = []
    spans: dict[int, list[int]] = {}
    cursor = 0

    def emit_text(upto: int) -> None:
        nonlocal cursor, length
        for k in range(cursor, upto):
            piece = "" if k in dropped else escaped(translation[k], fmt)
            starts.append(length)
            out.append(piece)
            length += len(piece)
            ends.append(length)
        cursor = upto

    previous: _Insert | None = None
    for insert in inserts:
        emit_text(insert.offset)
        written = "".join(out[-1:])
        # Right after an opening tag, it stands at the start of that tag's text: no space.
        if (previous is not None and previous.offset == insert.offset and insert.spaced and written
                and not written.endswith(" ") and not (previous.tag is not None and previous.rank == 2)):
            insert.lead = " "
        elif written.endswith(" "):
            insert.lead = ""
        previous = insert
        at = length + len(insert.lead)
        for item, start, end in insert.marks:
            spans.setdefault(item, []).extend([at + start, at + end])
        text = insert.lead + insert.core + insert.trail
        out.append(text)
        length += len(text)
    emit_text(len(translation))
    return [(min(spans[i]), max(spans[i])) for i in range(items)], "".join(out), starts, ends


def _escaped_offsets(translation: str, fmt: TextFormat) -> tuple[list[int], list[int]]:
    starts, ends, length = [], [], 0
    for ch in translation:
        starts.append(length)
        length += len(escaped(ch, fmt))
        ends.append(length)
    return starts, ends


def output_word(word: Word, restored: Restored) -> Word:
    """A word of the translation, re-addressed into the output text."""
    if word.end <= word.start:
        return word
    start, end = restored.char_start[word.start], restored.char_end[word.end - 1]
    return Word(restored.text[start:end], start, end)


def original_word(word: Word, prepared: PreparedText) -> Word:
    """A word of the model's source text, re-addressed into the original text."""
    markup = prepared.markup
    start = markup.origin[prepared.to_plain[word.start]]
    end = markup.origin_end[prepared.to_plain[word.end - 1]] if word.end > word.start else start
    return Word(prepared.original[start:end], start, end)
