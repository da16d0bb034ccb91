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

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from service.protection.markup import Markup, Tag, TextFormat, escape_text, read_markup
from service.protection.placeholders import Protected, find_protected
from service.runtime.base import TokenAlignment, Word

Placement = Literal["aligned", "fallback"]
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

    @property
    def untouched(self) -> bool:
        """Nothing was taken out: the model's text is the original."""
        return self.model_text == self.original


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


def prepare(text: str, fmt: TextFormat = "text", terms: Sequence[str] = ()) -> PreparedText:
    markup = read_markup(text, fmt)
    plain = markup.plain
    protected = find_protected(plain, terms)
    chars: list[str] = []
    to_plain: list[int] = []
    removed = [(p.start, p.end) for p in protected]
    i = 0
    for start, end in removed + [(len(plain), len(plain))]:
        for k in range(i, start):
            chars.append(plain[k])
            to_plain.append(k)
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
    return PreparedText(text, fmt, markup, protected, "".join(chars), to_plain)


def _largest_run(targets: list[int]) -> list[int]:
    """The longest run of target word indices with no gap wider than one word (an article the
    alignment gave elsewhere), the first of equal runs: wrapped words the translation moved apart
    ("of food in" -> "hält in einer Küche eine Schüssel mit Essen") keep the tag on their core
    instead of stretching it over everything in between."""
    runs = [[targets[0]]]
    for t in targets[1:]:
        if t - runs[-1][-1] <= 2:
            runs[-1].append(t)
        else:
            runs.append([t])
    return max(runs, key=len)


def _is_punctuation(text: str) -> bool:
    return bool(text) and not any(c.isalnum() or c.isspace() for c in text)


def _trailing_punctuation(text: str) -> int:
    """How many characters at the end of `text` are punctuation ("Schnee." -> 1)."""
    k = len(text)
    while k > 0 and _is_punctuation(text[k - 1]):
        k -= 1
    return len(text) - k


@dataclass
class _Insert:
    offset: int     # in the translation
    text: str       # as it goes into the output (already escaped where it is text)
    rank: int       # order among inserts at one offset: closings, standalone, openings
    order: tuple    # tie-break within a rank
    item: int       # index into the report
    spaced: bool = False  # the source had whitespace before it: keep it from the insert before


def restore(prepared: PreparedText, translation: str, alignment: TokenAlignment) -> Restored:
    """`translation` of `prepared.model_text`, with `alignment` between them (source words over
    model_text, target words over translation); returns the output with everything put back."""
    if not prepared.protected and not prepared.markup.tags:
        text = escape_text(translation) if prepared.fmt != "text" else translation
        return Restored(text, [], *_escaped_offsets(translation, prepared.fmt))
    locate = _Locator(prepared, translation, alignment)
    inserts: list[_Insert] = []
    reports: list[tuple[str, str, int, int, Placement]] = []
    plain, origin = prepared.markup.plain, prepared.markup.origin

    for p in prepared.protected:
        offset, how = locate.anchor(p.start, p.end)
        text = escape_text(p.text) if prepared.fmt != "text" else p.text
        glue_after = p.end < len(plain) and not plain[p.end].isspace()
        glue_before = p.start > 0 and not plain[p.start - 1].isspace()
        text = _spaced(text, translation, offset, glue_before, glue_after)
        inserts.append(_Insert(offset, text, 1, (p.start,), len(reports), spaced=not glue_before))
        reports.append((p.kind, p.text, origin[p.start], prepared.markup.origin_end[p.end - 1], how))

    spans: dict[int, tuple[int, int]] = {}
    tags = prepared.markup.tags
    for index, tag in enumerate(tags):
        source_start = tag.source_start
        if tag.standalone:
            offset, how = locate.anchor(tag.start, tag.start)
            inserts.append(_Insert(offset, tag.opening, 1, (tag.start, index), len(reports)))
            reports.append(("tag", tag.opening, source_start, tag.source_end, how))
            continue
        start, end, how = locate.wrap(tag.start, tag.end)
        start, end = _nest(start, end, tag, spans, tags)
        spans[index] = (start, end)
        if start == end:
            inserts.append(_Insert(start, tag.opening + (tag.closing or ""), 1, (tag.start, index), len(reports)))
        else:
            inserts.append(_Insert(start, tag.opening, 2, (-end, index), len(reports)))
            inserts.append(_Insert(end, tag.closing or "", 0, (-start, -index), len(reports)))
        reports.append(("tag", tag.opening, source_start, tag.source_end, how))
    return _assemble(prepared.fmt, translation, inserts, reports)


def _spaced(text: str, translation: str, offset: int, glue_before: bool, glue_after: bool) -> str:
    """The placeholder with the spaces it needs where it lands, glued where it was glued."""
    before = translation[offset - 1] if offset > 0 else ""
    after = translation[offset] if offset < len(translation) else ""
    if before and not before.isspace() and not glue_before:
        text = " " + text
    if after and not after.isspace() and not glue_after:
        text = text + " "
    return text


def _nest(start: int, end: int, tag: Tag, spans: dict[int, tuple[int, int]], tags: list[Tag]) -> tuple[int, int]:
    """The target span clamped into the parent's and off the earlier siblings' (no crossing)."""
    if tag.parent is not None and tag.parent in spans:
        low, high = spans[tag.parent]
        start, end = min(max(start, low), high), min(max(end, low), high)
    siblings = [spans[i] for i in (tags[tag.parent].children if tag.parent is not None else
                                   [k for k, t in enumerate(tags) if t.parent is None]) if i in spans]
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
                cut = _trailing_punctuation(target.text) if _is_punctuation(tail) else 0
                return target.end - cut, "aligned"
            return self._proportional(at), "fallback"
        right = next((i for i, w in enumerate(self.source_words) if w.start >= at), None)
        left = next((i for i in range(len(self.source_words) - 1, -1, -1) if self.source_words[i].end <= at), None)
        if right is not None and right in self.aligned:
            return self.target_words[min(self.aligned[right])].start, "aligned"
        if left is not None and left in self.aligned:
            return self.target_words[max(self.aligned[left])].end, "aligned"
        return self._proportional(at), "fallback"

    def wrap(self, plain_start: int, plain_end: int) -> tuple[int, int, Placement]:
        a, b = self.to_model[plain_start], self.to_model[plain_end]
        inside = [i for i, w in enumerate(self.source_words) if w.start < b and a < w.end]
        targets = sorted(t for i in inside for t in self.aligned.get(i, []))
        if not targets:
            targets = sorted(self.attending[i][1] for i in inside if i in self.attending)
        if targets:
            run = _largest_run(targets)
            return self.target_words[run[0]].start, self.target_words[run[-1]].end, "aligned"
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


def _assemble(fmt: TextFormat, translation: str, inserts: list[_Insert],
              reports: list[tuple[str, str, int, int, Placement]]) -> Restored:
    inserts.sort(key=lambda x: (x.offset, x.rank, x.order))
    out: list[str] = []
    length = 0
    starts: list[int] = []
    ends: list[int] = []
    spans: dict[int, list[int]] = {}
    cursor = 0

    def emit_text(upto: int) -> None:
        nonlocal cursor, length
        for ch in translation[cursor:upto]:
            piece = escape_text(ch) if fmt != "text" else ch
            starts.append(length)
            out.append(piece)
            length += len(piece)
            ends.append(length)
        cursor = upto

    previous: _Insert | None = None
    for insert in inserts:
        emit_text(insert.offset)
        if (previous is not None and previous.offset == insert.offset and insert.spaced and out
                and not out[-1].endswith(" ") and not insert.text.startswith(" ")):
            insert.text = " " + insert.text
        previous = insert
        stripped = insert.text.strip(" ")
        lead = len(insert.text) - len(insert.text.lstrip(" "))
        spans.setdefault(insert.item, []).extend([length + lead, length + lead + len(stripped)])
        out.append(insert.text)
        length += len(insert.text)
    emit_text(len(translation))
    placed = [Placed(kind, text, s, e, min(spans[i]), max(spans[i]), how)
              for i, (kind, text, s, e, how) in enumerate(reports)]
    return Restored("".join(out), placed, starts, ends)


def _escaped_offsets(translation: str, fmt: TextFormat) -> tuple[list[int], list[int]]:
    starts, ends, length = [], [], 0
    for ch in translation:
        starts.append(length)
        length += len(escape_text(ch)) if fmt != "text" else 1
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
