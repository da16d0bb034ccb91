"""XLIFF files (1.2 and 2.x, what CAT tools exchange), for service/documents/bilingual.py: which segments
have no translation, and the file with theirs written in, every other byte as it was.

A segment is XLIFF 1.2's `<trans-unit>` or 2.x's `<segment>` (its elements with the namespace prefix the
file gives them, `<xlf:trans-unit>`, and targets written with it); its `<source>` goes to the service as
xml as written, inline codes and all (`<g>`, `<x/>`, `<bpt>`/`<ept>`, `<ph>`, `<pc>`, `<mrk>`:
service/protection/markup.py keeps them), and its translation is written as its `<target>`: after the
source, indented as the source is, or into an empty target, or over a 1.2 target in the state `new`
or `needs-translation` (a copy of the source a tool put there). A 1.2 target written so says
`state="needs-review-translation"` (a translation for a translator to review), or `translated` where
asked not to mark it; a 2.x segment's state is `translated` (its tool's substate dropped: it named the
state before), the state before `reviewed` and `final`. Skipped: a segment with a target that holds text, one marked `translate="no"` (or inside
a 2.x `<unit>` so marked). A 1.2 unit segmented again (`<seg-source>`: SDL Trados Studio's .sdlxliff,
Okapi's) is translated segment by segment: each `<mrk mtype="seg">` of its seg-source whose `<mrk>` in the
target holds no text (Trados copies a segment's tags there) gets its translation there; the target's state
as above, or in SDL's files the segment's `<sdl:seg>` confirmed `Draft` (Trados' status of a translation to
review; `Translated` where asked not to mark it) with origin `mt`; a segment SDL locked is left, and one with
no `<mrk>` in its target is counted as skipped. A unit segmented again with no target (Okapi writes them so) gets
one: its seg-source with each segment's `<mrk>` emptied, then filled as above. The languages are the file's
(`source-language`/`target-language`, `srcLang`/`trgLang`); a file that names no target language
names the one it was translated into once it holds targets. The file written must parse as XML, or
nothing is written.
"""
from __future__ import annotations

import functools
import re
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass

from service.served import spliced

_DECLARED = re.compile(rb"""^\s*<\?xml[^>]*\bencoding\s*=\s*["']([A-Za-z0-9._-]+)["']""")
# The root element, and the namespace prefix a file may give XLIFF's elements (`<xlf:xliff>`)
_ROOT = re.compile(r"<([A-Za-z_][\w.-]*:)?xliff(?=[\s>/])")


class _Elements:
    """The patterns of XLIFF's elements in a file whose elements carry `prefix` ("" or "xlf:")."""

    def __init__(self, prefix: str) -> None:
        p = re.escape(prefix)
        self.prefix = prefix
        self.version_1 = re.compile(rf"<{p}xliff\b[^>]*\bversion\s*=\s*[\"']1\.")
        self.file = re.compile(rf"<{p}file(?=[\s>/])[^>]*>")
        self.xliff = re.compile(rf"<{p}xliff(?=[\s>/])[^>]*>")
        self.unit_2 = re.compile(rf"<{p}unit\b([^>]*)>(.*?)</{p}unit\s*>", re.DOTALL)
        self.segment = {"1": re.compile(rf"<{p}trans-unit\b([^>]*)>(.*?)</{p}trans-unit\s*>", re.DOTALL),
                        "2": re.compile(rf"<{p}segment\b([^>]*)>(.*?)</{p}segment\s*>", re.DOTALL)}
        self.source = re.compile(rf"([ \t]*)<{p}source\b[^>]*>(.*?)</{p}source\s*>", re.DOTALL)
        self.target = re.compile(rf"<{p}target\b([^>]*?)(?:/>|>(.*?)</{p}target\s*>)", re.DOTALL)
        self.seg_source = re.compile(rf"<{p}seg-source\b[^>]*>(.*?)</{p}seg-source\s*>", re.DOTALL)
        self.mrk = re.compile(rf"<{p}mrk\b([^>]*?)(/?)>|</{p}mrk\s*>")


@functools.lru_cache(maxsize=8)
def _elements(prefix: str) -> _Elements:
    return _Elements(prefix)

_NO = re.compile(r"""\btranslate\s*=\s*["']no["']""")
_STATE = re.compile(r"""\s*(?<![\w:-])state\s*=\s*["'][^"']*["']""")
_SUBSTATE = re.compile(r"""\s*\bsubState\s*=\s*["'][^"']*["']""")
# XLIFF 1.2's states of a target nobody translated yet (tools put the source there as a placeholder).
_UNTRANSLATED_STATE = re.compile(r"""\bstate\s*=\s*["'](?:new|needs-translation)["']""")


class FileInvalid(ValueError):
    """A file this cannot read (not well-formed, not of its kind), or whose translation would not be
    XML: one line. Qt Linguist's files (service/documents/linguist.py) say so the same way."""


@dataclass(frozen=True)
class Segment:
    source: str          # the source's content, as written (xml)
    insert_at: int       # where its target goes in the file's text
    replace_to: int      # up to where the text there is replaced (an empty target's end; insert_at: none)
    indent: str          # the whitespace before its source, which a target written after it takes too
    target_attributes: str | None  # an empty target's attributes (None: no target)
    opening: tuple[int, int] | None = None  # XLIFF 2: where its <segment> tag, which holds its state, is
    # a segment of a 1.2 unit segmented again (<seg-source>): what is written around its translation in
    # place of a <target> (its target <mrk>'s tags, where that was empty: "<mrk ... />"), where the target's
    # start tag is (its state, but in SDL's files) and where SDL's <sdl:seg> for it is (its confirmation)
    inside: tuple[str, str] | None = None
    target_tag: tuple[int, int] | None = None
    confirmation: tuple[int, int] | None = None


@dataclass(frozen=True)
class Xliff:
    text: str
    encoding: str
    version: str                # "1" or "2"
    source_language: str
    target_language: str
    segments: tuple[Segment, ...]
    skipped: int                # segmented again (1.2's seg-source) with no place in the target: left as they are
    prefix: str = ""            # the namespace prefix of its XLIFF elements ("xlf:"), as written


def _attribute(tag: str, *names: str) -> str:
    for name in names:
        match = re.search(r"\b" + re.escape(name) + r"""\s*=\s*["']([^"']*)["']""", tag)
        if match:
            return match.group(1)
    return ""


def decoded(data: bytes) -> tuple[str, str]:
    """An XML file's text and the encoding it declares (UTF-8 where it declares none); FileInvalid
    where it is not well-formed."""
    declared = _DECLARED.match(data)
    encoding = declared.group(1).decode("ascii") if declared else "utf-8"
    try:
        text = data.decode(encoding)
        ElementTree.fromstring(data)
    except (UnicodeDecodeError, LookupError, ElementTree.ParseError) as error:
        raise FileInvalid(f"not well-formed XML: {error}") from None
    return text, encoding


def checked(text: str, encoding: str) -> str:
    """`text`, a file's translation, once it parses as XML; FileInvalid where it does not."""
    try:
        ElementTree.fromstring(text.encode(encoding))
    except ElementTree.ParseError as error:
        raise FileInvalid(f"the translated file would not be well-formed XML ({error}); nothing written") from None
    return text


def read(data: bytes) -> Xliff:
    """The file's untranslated segments."""
    text, encoding = decoded(data)
    root = _ROOT.search(text)
    if root is None:
        raise FileInvalid("no <xliff> element: not an XLIFF file")
    e = _elements(root.group(1) or "")
    version = "1" if e.version_1.search(text) else "2"
    if version == "1":
        text = _with_targets(text, e)
        head = e.file.search(text)
        languages = (_attribute(head.group(0), "source-language"), _attribute(head.group(0), "target-language")) if head else ("", "")
    else:
        head = e.xliff.search(text)
        languages = (_attribute(head.group(0), "srcLang"), _attribute(head.group(0), "trgLang")) if head else ("", "")
    untranslatable: list[tuple[int, int]] = []
    if version == "2":
        untranslatable = [m.span() for m in e.unit_2.finditer(text) if _NO.search(m.group(1))]
    segments, skipped = [], 0
    for match in e.segment[version].finditer(text):
        attributes, body, start = match.group(1), match.group(2), match.start(2)
        if _NO.search(attributes) or any(a <= match.start() < b for a, b in untranslatable):
            continue
        if e.seg_source.search(body):
            found, unplaced = _segmented(text, start, match.end(2), e)
            segments += found
            skipped += unplaced
            continue
        source = e.source.search(body)
        if source is None or not source.group(2).strip():
            continue
        target = e.target.search(body, source.end())
        opening = (match.start(), start) if version == "2" else None
        if target is None:
            at = start + source.end()
            segments.append(Segment(source.group(2), at, at, source.group(1), None, opening))
        elif not (target.group(2) or "").strip() or _UNTRANSLATED_STATE.search(target.group(1)):
            segments.append(Segment(source.group(2), start + target.start(), start + target.end(), source.group(1),
                                    target.group(1), opening))
    return Xliff(text, encoding, version, languages[0], languages[1], tuple(segments), skipped, e.prefix)


_SEG_TYPE = re.compile(r"""\bmtype\s*=\s*["']seg["']""")
_SDL_SEG = re.compile(r"<sdl:seg(?=[\s/>])([^>]*?)/?>")
_LOCKED = re.compile(r"""\blocked\s*=\s*["']true["']""")
_TAG = re.compile(r"<[^>]*>")


def _marked_segments(text: str, start: int, end: int, e: _Elements) -> dict[str, tuple[int, int, int, int]]:
    """Each segment <mrk mtype="seg"> between `start` and `end` by its mid: where its start tag starts,
    its content starts and ends, and its end tag ends (a self-closing one: its content is nothing, at its end)."""
    found: dict[str, tuple[int, int, int, int]] = {}
    opened: list[tuple[str, int, int] | None] = []  # a <mrk> of another type (a comment's) nests inside
    for tag in e.mrk.finditer(text, start, end):
        if tag.group().startswith("</"):
            if opened and (segment := opened.pop()) is not None:
                found[segment[0]] = (segment[1], segment[2], tag.start(), tag.end())
            continue
        mid = _attribute(tag.group(1), "mid") if _SEG_TYPE.search(tag.group(1)) else None
        if tag.group(2):
            if mid is not None:
                found[mid] = (tag.start(), tag.end(), tag.end(), tag.end())
        else:
            opened.append((mid, tag.start(), tag.end()) if mid is not None else None)
    return found


def _with_targets(text: str, e: _Elements) -> str:
    """`text` with a target for each 1.2 unit segmented again that has none (Okapi writes them so):
    its seg-source's content, each segment's <mrk> emptied (what lies between them, inline codes and
    spaces, kept), after the seg-source on a line of its own as that is."""
    edits = []
    for match in e.segment["1"].finditer(text):
        seg_source = e.seg_source.search(match.group(2))
        if _NO.search(match.group(1)) or seg_source is None or e.target.search(match.group(2), seg_source.end()):
            continue
        inner_start, inner_end = match.start(2) + seg_source.start(1), match.start(2) + seg_source.end(1)
        parts, at = [], inner_start
        for _, content_start, content_end, _ in sorted(_marked_segments(text, inner_start, inner_end, e).values()):
            parts += [text[at:content_start]]
            at = content_end
        parts.append(text[at:inner_end])
        at = match.start(2) + seg_source.end()
        line_start = text.rfind("\n", 0, match.start(2) + seg_source.start()) + 1
        indent = text[line_start:match.start(2) + seg_source.start()]
        before = "\n" + indent if not indent.strip() and indent else ""
        edits.append((at, at, f"{before}<{e.prefix}target>{''.join(parts)}</{e.prefix}target>"))
    return spliced(text, edits) if edits else text


def _segmented(text: str, start: int, end: int, e: _Elements) -> tuple[list[Segment], int]:
    """A 1.2 unit segmented again (its body from `start` to `end`): each segment of its <seg-source>
    whose <mrk> in the target holds no text (tags aside: SDL copies a segment's tags there; any, in a
    target in the state new) and that SDL has not locked, and how many have no place to go (no target,
    or no <mrk> of theirs in it)."""
    body = text[start:end]
    seg_source = e.seg_source.search(body)
    target = e.target.search(body, seg_source.end()) if seg_source else None
    if seg_source is None:
        return [], 0
    sources = _marked_segments(text, start + seg_source.start(1), start + seg_source.end(1), e)
    places = _marked_segments(text, start + target.start(2), start + target.end(2), e) \
        if target is not None and target.group(2) is not None else {}
    confirmations = {_attribute(tag.group(1), "id"): tag for tag in _SDL_SEG.finditer(text, start, end)}
    segments, unplaced = [], 0
    for mid, (_, content_start, content_end, _) in sources.items():
        source = text[content_start:content_end]
        if not _TAG.sub("", source).strip():
            continue
        if mid not in places:
            unplaced += 1
            continue
        tag_start, place_start, place_end, tag_end = places[mid]
        confirmation = confirmations.get(mid)
        if confirmation and _LOCKED.search(confirmation.group(1)):
            continue
        if _TAG.sub("", text[place_start:place_end]).strip() and not _UNTRANSLATED_STATE.search(target.group(1)):
            continue  # translated (a target in the state new holds a tool's copy of the source)
        if place_start == tag_end:  # <mrk mtype="seg" mid="1"/>: opened and closed around the translation
            tag = text[tag_start:tag_end]
            inside, place_start = (tag[:-2].rstrip() + ">", f"</{e.prefix}mrk>"), tag_start
        else:
            inside = ("", "")
        segments.append(Segment(source, place_start, place_end, "", None, None, inside,
                                None if confirmations else (start + target.start(), start + target.start(2)),
                                confirmation.span() if confirmation else None))
    return segments, unplaced


def language_named(text: str, tags: re.Pattern[str], name: str, target: str) -> list[tuple[int, int, str]]:
    """The attribute `name` naming the target language added to each start tag `tags` finds that has
    none: a file given targets says their language (XLIFF 2 requires trgLang once it holds any)."""
    edits = []
    for tag in tags.finditer(text):
        if not re.search(r"\s" + re.escape(name) + r"\s*=", tag.group(0)):
            at = tag.end() - (2 if tag.group(0).endswith("/>") else 1)
            edits.append((at, at, f' {name}="{target}"'))
    return edits


def _attributes_set(tag: str, removed: re.Pattern[str], added: str) -> str:
    """A start tag less the attributes `removed` finds, with `added` after the rest (its spacing kept)."""
    closing = len(tag) - 2 if tag.endswith("/>") else len(tag) - 1
    head = tag[:closing]
    space = head[len(head.rstrip()):]
    return f"{removed.sub('', head.rstrip())} {added}{space}{tag[closing:]}"


_SDL_FIELDS = re.compile(r"""\s*\b(?:conf|origin|origin-system)\s*=\s*["'][^"']*["']""")


def _confirmed(tag: str, mark: bool) -> str:
    """SDL's <sdl:seg> of a segment given a machine translation: a draft (Trados Studio's status of one
    to review; asked not to mark it, translated), its origin machine translation."""
    return _attributes_set(tag, _SDL_FIELDS, f'conf="{"Draft" if mark else "Translated"}" origin="mt" '
                                             'origin-system="phrasal"')




def written(xliff: Xliff, translations: dict[str, str], mark: bool, target: str) -> tuple[str, int]:
    """The file's text with each segment that has a translation given its target, and how many. In
    1.2 the target's state says it needs review (`mark`) or is translated; in 2.x the segment's
    state is `translated` (2.x's state before `reviewed` and `final`). A file given targets that
    names no target language names `target` (1.2: each `<file>`'s target-language; 2.x: trgLang)."""
    edits, count = [], 0
    tags: dict[tuple[int, int], str] = {}  # start tags several segments edit alike: each once
    for segment in xliff.segments:
        translation = translations.get(segment.source)
        if translation is None:
            continue
        if segment.inside is not None:  # a segment of a unit segmented again: into its <mrk>
            edits.append((segment.insert_at, segment.replace_to, segment.inside[0] + translation + segment.inside[1]))
            if segment.target_tag is not None:
                state = "needs-review-translation" if mark else "translated"
                tags[segment.target_tag] = _attributes_set(xliff.text[slice(*segment.target_tag)], _STATE,
                                                           f'state="{state}"')
            if segment.confirmation is not None:
                tags[segment.confirmation] = _confirmed(xliff.text[slice(*segment.confirmation)], mark)
            count += 1
            continue
        attributes = segment.target_attributes or ""
        if xliff.version == "1":
            state = "needs-review-translation" if mark else "translated"
            attributes = _STATE.sub("", attributes) + f' state="{state}"'
        element = f"<{xliff.prefix}target{attributes}>{translation}</{xliff.prefix}target>"
        if segment.target_attributes is None:  # after the source, on a line of its own as it is
            element = ("\n" + segment.indent if segment.indent else "") + element
        if segment.opening is not None:
            start, end = segment.opening
            tag = xliff.text[start:end]
            closing = len(tag) - 2 if tag.endswith("/>") else len(tag) - 1
            kept = _SUBSTATE.sub("", _STATE.sub("", tag[:closing]))  # a tool's own substate named the old state
            edits.append((start, end, f'{kept} state="translated"{tag[closing:]}'))
        edits.append((segment.insert_at, segment.replace_to, element))
        count += 1
    edits += [(start, end, tag) for (start, end), tag in tags.items()]
    if count:
        e = _elements(xliff.prefix)
        edits += language_named(xliff.text, *((e.file, "target-language") if xliff.version == "1" else
                                              (e.xliff, "trgLang")), target)
    return checked(spliced(xliff.text, sorted(edits)), xliff.encoding), count
