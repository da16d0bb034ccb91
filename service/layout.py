"""A plain text's layout, kept through translation, and its sentences translated one by one.

Software messages are laid out: a command's help has line breaks, indentation and columns of
options and their descriptions, and gettext checks that a translation begins and ends with the
line breaks its message does. The models learned messages with every whitespace run made one space
(data/debian_catalogs/README.md), so a help text sent whole came back as one run-on line, its
options mangled. And a small model translates a message of several sentences worse than each
sentence alone: on the 106 messages of the software validation split that are cut here, 22.67 BLEU
sent whole against 27.95 through the service (results/layout.md).

So a plain text is cut into the parts the model translates well, and the translations are put back
into the text's own layout:
- Lines, and columns in a line (a tab, three spaces or more, or two spaces after an option such as
  `-v, --verbose`), are cut apart; the whitespace between them is kept as sent. A line whose last column does
  not end a sentence and whose next line continues at the same column (a hard-wrapped paragraph,
  an option's description wrapped under itself) is joined to it by a space (a line of placeholders
  and options alone, a value or a synopsis' command, starts no such run and ends one unless the
  line before it ends in a word; a line that begins anew, `_starts_anew`, is not joined either:
  a capital after a value or a synopsis' argument, and where the text's language writes nouns in
  lower case a capitalised word after a line of several words), and the joined part's
  translation is wrapped again to the width and indentation the source had (where the translation,
  longer than its source, would then take more lines, its lines may grow up to LINE_LIMIT columns,
  no wider than keeps the source's number of lines, as localisers write them). A list item's bullet
  or number is kept as sent, its text translated (with the lines wrapped under it), and so are
  Markdown's heading and quote marks; a Markdown table's cells are columns, and a fenced code
  block is kept whole. A line break written as an escape (`\\n`, a resource file's) breaks a line
  like one (`_escaped_breaks`), and a character written escaped (`\\'`, `\\"`, `\\u00e9`; a
  MessageFormat message's `''`) reaches the model as the character and comes back written the same
  way (`_escapes`).
- Each part is cut into sentences (after `.`, `!` or `?` and a space, before a capital letter
  or a digit; not after a known abbreviation or a single letter); the whitespace between them is kept.
- A part with no letter outside its placeholders (`-v, --verbose`, `%s: %s`) has nothing to
  translate: it is kept as sent.
Nothing is cut inside a placeholder; a text with a placeholder that spans a line break is
translated whole. A text in html or xml is cut into its blocks and their sentences (`markup_split`):
its markup decides its whitespace.
"""
from __future__ import annotations

import bisect
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from service.alignment_flags import alignment_flags
from service.glossary import FUNCTION_WORDS, TermReport, merged
from service.protection.markup import WORD_BREAKING, MarkupError, Tag, TextFormat, read_markup
from service.protection.placeholders import Protected
from service.protection.placement import Placed, Removed
from service.runtime.base import (AlignmentMode, PhraseMap, PhrasePair, TokenAlignment, Translation, Word,
                                  extracted_phrase_pairs, has_visible_text, pharaoh)
from service.served import MemoryUse, Served, edited

# Passed-through elements that stand as blocks of their own on a page.
PASSED_BLOCKS = {"pre", "script", "style"}

# Whitespace between two columns of a line: a tab, three spaces or more, or two spaces that do not
# follow a sentence's end (coreutils puts two spaces between sentences) after an option.
_COLUMN_GAP = re.compile(r"[ \t]*\t[ \t]*| {3,}|(?<![.!?:;,]) {2}(?! )")
# A list item's bullet or number: kept as sent, the item's text after it translated. An item, or a
# line that starts with an option, starts a line of its own even where the line before it runs on.
_BULLET = re.compile(r"(?:[*•+‣◦]|-(?=[ \t])|\d{1,3}[.)](?=[ \t]))[ \t]+")
_HEADING = re.compile(r"#{1,6}[ \t]+")  # Markdown's ATX heading
# What joins or modifies an emoji: zero-width joiner, variation selectors, skin tones, keycap, tags.
_EMOJI_PARTS = re.compile("[\u200d\ufe0e\ufe0f\u20e3\U0001f3fb-\U0001f3ff\U000e0020-\U000e007f]")
_ARROWS = ((0x2190, 0x21FF), (0x27F0, 0x27FF), (0x2900, 0x297F))
_TABLE_ROW = re.compile(r"\|.*\|")
_TABLE_CELL = re.compile(r"(?:\\.|`[^`]*`|[^|\\`])*")  # up to the next pipe not escaped or in a code span
# A line break written as an escape, or as Java's format strings write one (`%n`), with the spaces
# around it; and a backslash that escapes anything but a line break, a tab, a quote, a backslash or
# a `\u` character: then the text's backslashes mean something else (a Windows path), and no `\n`
# is a line break nor any escape one.
_ESCAPED_BREAK = re.compile(r"[ \t]*(?<![\\%])(?:\\\\)*(?:(?:\\n|%n)[ \t]*)+")
_QUOTES = set("'\"`«»‘’‚“”„‹›")
_OTHER_BACKSLASH = re.compile(r"\\(?=[^ntr\"'\\])(?!u[0-9a-fA-F]{4})|(?<![A-Za-z])[A-Za-z]:\\")
# A character written as Java's properties and JSON write one in ASCII: a UTF-16 surrogate pair, or one unit.
_UNICODE_ESCAPE = re.compile(r"\\u([dD][89abAB][0-9a-fA-F]{2})\\u([dD][c-fC-F][0-9a-fA-F]{2})|\\u([0-9a-fA-F]{4})")
_MESSAGE_FORMAT_ARGUMENT = re.compile(r"\{\s*[A-Za-z0-9_]+\s*[,}]")  # `{0}`, ICU's `{name}`
_RULE = re.compile(r"[ \t]*(?:={3,}|-{3,}|(?:\*[ \t]*){3,}|(?:_[ \t]*){3,})[ \t]*")  # Markdown's rule, setext underline
# Markdown's link reference definition, "[guide]: https://example.org/guide": kept as written, as code is
# (its label is a name the text's links use); its destination a URL or a path, not words ("[%s]: No
# such color" is a message).
_REFERENCE = re.compile(r"^ {0,3}\[[^\[\]\n]+\]:[ \t]*(?:<[^<>\s]+>|[^\s<>\[\]]*[/.#:][^\s<>\[\]]*)"
                        r"(?:[ \t]+(?:\"[^\"\n]*\"|'[^'\n]*'|\([^()\n]*\)))?[ \t]*$", re.MULTILINE)
_FENCE = re.compile(r"^( {0,3})(`{3,}|~{3,})([^\n]*)$", re.MULTILINE)  # a code block's fence line
_QUOTE = re.compile(r"(?:>[ \t]*)*>[ \t]+")  # Markdown's (and e-mail's) quote, nested ones too
_WORD = re.compile(r"\S*")
_SENTENCE_END = re.compile(r"[.!?…][\"'’”»)\]]*$")
_SENTENCE_GAP = re.compile(r"(?<=[^.][.!?])[\"'’”»)\]]*( +)(?=[\"'‘“«(\[]?[A-Z0-9À-ÖØ-Þ])")
# A line break in markup, with the spaces and tabs before it and the whitespace after.
_LINE_BREAK = re.compile(r"[ \t]*\n\s*")
_ABBREVIATION = re.compile(r"(?:e\.g|i\.e|etc|vs|cf|approx|incl|Mr|Mrs|Ms|Dr|No|Fig|St|[A-Za-z])\.")
_LETTER = re.compile(r"[^\W\d_]")
# Languages that write every noun with a capital letter: there a capital starts no sentence.
NOUNS_CAPITALISED = {"de", "lb"}
# The width terminal text is wrapped to (GNU's help texts stay within 79 columns): a block's lines
# may grow to it, no further, to keep the source's number of lines.
LINE_LIMIT = 79
# A line of a run-on paragraph that its next line's first word would have fitted on with this many
# columns to spare was ended by choice: hand-wrapped prose is ragged by a few columns.
ENDED_SHORT = 10


@dataclass(frozen=True)
class Segment:
    """What the model translates: `text`, and for each of its characters (and its end) the offset
    in the text sent it stands for (a joined line break stands for the break's first character)."""

    text: str
    origin: tuple[int, ...]


@dataclass(frozen=True)
class Block:
    """One run of the output: consecutive segments (indices into Layout.segments) separated by
    `gaps` as sent; wrapped at `width` columns when the source part spanned `lines` lines (None: it
    did not), starting at `column`, every further line beginning with `indent`."""

    segments: tuple[int, ...]
    gaps: tuple[str, ...]
    column: int = 0
    width: int | None = None
    indent: str = ""
    lines: int | None = None


@dataclass(frozen=True)
class Kept:
    """Text kept as sent (whitespace, or a part with nothing to translate), and the protected parts
    inside it (offsets into the text sent)."""

    text: str
    start: int
    protected: tuple[Protected, ...] = ()


@dataclass(frozen=True)
class Layout:
    text: str
    parts: tuple[Kept | Block, ...]
    segments: tuple[Segment, ...] = field(default=())
    # (offset of a `#` in the text, what the translation writes for it): an ICU plural's number that
    # the translation's nesting puts inside another plural, written by name (service/icu.py).
    renamed: tuple[tuple[int, str], ...] = ()
    # (how the text writes a character, the character): the segments hold the character, the
    # translation writes a quote the text's way (`_escapes`)
    escapes: tuple[tuple[str, str], ...] = ()
    # How a text written in ASCII writes every other character ("\\u%04x"), the translation's too; "": as it is.
    unicode_escape: str = ""

    @property
    def whole(self) -> bool:
        """One segment that is the text itself: its translation is the answer as it stands."""
        return (len(self.parts) == 1 and isinstance(self.parts[0], Block) and len(self.segments) == 1
                and self.segments[0].text == self.text)


def whole(text: str) -> Layout:
    """The text as one segment (markup formats, and texts that cannot be cut)."""
    return Layout(text, (Block((0,), ()),), (Segment(text, tuple(range(len(text) + 1))),))


def as_sent(text: str) -> Layout:
    """A text with nothing to translate (whitespace, invisible characters) as sent: gettext wants
    "\n" for a message "\n", as a part of a text with nothing to translate is kept."""
    return Layout(text, (Kept(text, 0),), ())


def split(text: str, protected: list[Protected], language: str | None = None) -> Layout:
    """`text`'s layout; `protected`: its placeholders and terms (nothing is cut inside one);
    `language`: the text's (None: unknown), which says whether a capital letter starts a sentence."""
    layout = _split(text, protected, language)
    escapes = _escapes(text, protected)
    return unescaped(layout, escapes) if escapes and layout.segments else layout


def _split(text: str, protected: list[Protected], language: str | None) -> Layout:
    if text and not has_visible_text(text):
        return as_sent(text)
    breaks = _escaped_breaks(text, protected)
    if breaks:
        return _split_at(text, protected, language, breaks)
    if any("\n" in p.text for p in protected):
        return whole(text)
    if (not protected and "\n" not in text and "\t" not in text and "  " not in text and "|" not in text and text == text.strip()
            and not _SENTENCE_GAP.search(text) and _LETTER.search(text)
            and not any(mark.match(text) for mark in (_BULLET, _HEADING, _QUOTE))
            and not (_icon(text[0]) or _icon(text[-1]) or _EMOJI_PARTS.match(text[-1]))):
        return whole(text)  # one line, one column, one sentence: what most texts are, at no cost
    inside = _inside(len(text), protected)
    verbatim = _verbatim(text)
    for start, end in verbatim:
        inside[start:end] = [True] * (end - start)
    starts = [p.start for p in protected]  # protected is in text order
    chains = [part for chain in _chains(text, inside, language, verbatim) for part in _cut_where_ended_short(text, chain)]
    parts: list[Kept | Block] = []
    segments: list[Segment] = []
    cursor = 0
    for chain in chains:
        start, end = chain[0][0], chain[-1][1]
        if start > cursor:
            parts.append(Kept(text[cursor:start], cursor))
        cursor = end
        joined, origin = _joined(text, chain)
        if not any(_worded(text, cell, inside) for cell in chain):
            first_inside = bisect.bisect_left(starts, start)
            parts.append(Kept(text[start:end], start, tuple(p for p in protected[first_inside:bisect.bisect_left(starts, end)]
                                                            if p.end <= end)))
            continue
        first = len(segments)
        gaps = []
        piece_start = 0
        for gap in _sentence_gaps(joined, origin, inside):
            segments.append(Segment(joined[piece_start:gap[0]], origin[piece_start:gap[0] + 1]))
            gaps.append(joined[gap[0]:gap[1]])
            piece_start = gap[1]
        segments.append(Segment(joined[piece_start:], origin[piece_start:]))
        column = start - (text.rfind("\n", 0, start) + 1)
        if len(chain) > 1:
            indent = text[_line_of(text, chain[1][0]):chain[1][0]]
            parts.append(Block(tuple(range(first, len(segments))), tuple(gaps), column, _width(text, chain), indent,
                               len(chain)))
        else:
            parts.append(Block(tuple(range(first, len(segments))), tuple(gaps), column))
    if cursor < len(text) or not chains:
        parts.append(Kept(text[cursor:], cursor))
    return Layout(text, tuple(_merged_kept(parts)), tuple(segments))


def _escaped_breaks(text: str, protected: list[Protected]) -> list[tuple[int, int]]:
    """The line breaks a text writes escaped, as a resource file holds them (Android's strings,
    Java's properties, iOS's .strings, a JSON string sent as written): each run of `\\n` with the
    whitespace around it; so is Java's `%n` (String.format's line break). Read as words, "First
    line.\\nSecond line." came back "Erste Zeile.\\nSekond-Zeile.", and "Done.%nStarting the next
    step." "Beendet.%n Starte den nächsten Schritt.". None where a backslash stands for anything else
    (a Windows path, "C:\\new\\data") or inside a placeholder."""
    if ("\\n" not in text and "%n" not in text) or _OTHER_BACKSLASH.search(text):
        return []
    inside = _inside(len(text), [p for p in protected if not re.fullmatch(r"(?:%n)+", p.text)])
    return [match.span() for match in _ESCAPED_BREAK.finditer(text) if not any(inside[match.start():match.end()])
            # one in quotes is named, not made: "start with '-- \\n'", "the separator ("\\n")"
            and not text[match.start() - 1:match.start()] in _QUOTES and not text[match.end():match.end() + 1] in _QUOTES
            # one inside a sentence wraps it: cut there, its halves would be translated apart
            and not (re.match(r"[\w,]", text[match.start() - 1:match.start()]) and text[match.end():match.end() + 1].islower())
            # a `%n` apart from the words around it, in brackets or followed by what defines it is a
            # value: a program's own code ("%l Lyricist %n Session name", "%n: track number") or
            # Qt's plural count ("%n file(s)", "Selected (%n)")
            and not ("%n" in match.group() and (match.group() != match.group().strip()
                                                or text[match.end():match.end() + 1] in tuple(")]}.,;:=")
                                                or text[match.start() - 1:match.start()] in tuple("([{")))]


def _escapes(text: str, protected: list[Protected]) -> tuple[tuple[str, str], ...]:
    """How the text writes the characters it writes escaped, as a resource file or a string literal
    holds them: Android's and iOS's strings and C's literals write `\\'` and `\\"`, Java's
    MessageFormat and ICU's (a message with a `{0}` or `{name}`) write an apostrophe `''`, and Java's
    properties and JSON in ASCII write any other character `\\u00e9`. Read as written, "Don\\'t save
    the file" came back "Konnte die Datei nicht speichern" (could not save), "Can''t open file
    ''{0}''." lost an apostrophe of a pair, and "Click \\u201cSave\\u201d" kept "Save" in English. A
    quote counts as escaped where every one the text holds is written so, a `\\u` escape where the
    text is ASCII; a backslash that escapes anything else (a path), an escaped backslash, an escape
    inside a placeholder or a quote named (after a quote mark) leaves the text as written ("trailing
    '\\' escape character" names a backslash)."""
    if "\\" not in text and "''" not in text:
        return ()  # what nearly every text is: nothing escaped, and no position map built for it
    if "\\" in text and ("\\\\" in text or _OTHER_BACKSLASH.search(text)):
        return ()
    found: list[tuple[str, str]] = [("\\" + quote, quote) for quote in "'\"" if ("\\" + quote) in text
                                    and text.count(quote) == text.count("\\" + quote)]
    if ("''" in text and _MESSAGE_FORMAT_ARGUMENT.search(text) and not any(quote == "'" for _, quote in found)
            and all(len(run) % 2 == 0 for run in re.findall("'+", text))):
        found.append(("''", "'"))
    inside = _inside(len(text), protected)
    for written, quote in list(found):
        for m in re.finditer(re.escape(written), text):
            # one after a quote mark is named, not written: 'Sets whether "\\'" is allowed', GNU's
            # "ends with `\\' at end of file"
            named = text[m.start() - 1:m.start()] in _QUOTES
            if named or any(inside[m.start():m.end()]):
                found.remove((written, quote))
                break
    if "\\u" in text and text.isascii():
        for m in _UNICODE_ESCAPE.finditer(text):
            high, low, unit = m.groups()
            point = int(unit, 16) if unit else 0x10000 + (int(high, 16) - 0xD800) * 0x400 + int(low, 16) - 0xDC00
            if 0xD800 <= point < 0xE000:
                return tuple(found)  # half a character: the text is not what it seems
            # an ASCII character or a control written so is meant as written ("\\u000A" is no line break to cut at)
            if point >= 0xA0 and not any(inside[m.start():m.end()]) and (m.group(0), chr(point)) not in found:
                found.append((m.group(0), chr(point)))
    return tuple(found)


def _unicode_escape(escapes: tuple[tuple[str, str], ...]) -> str:
    """How the translation writes a character that is not ASCII: as the text's `\\u` escapes are
    written (their hex digits in the case the text writes them), or "" where it has none."""
    units = [written[2:] for written, char in escapes if written.startswith("\\u")]
    if not units:
        return ""
    return "\\u%04X" if any(c.isupper() for unit in units for c in unit) else "\\u%04x"


def unescaped(layout: Layout, escapes: tuple[tuple[str, str], ...]) -> Layout:
    """`layout` with each escaped character of its segments written as the character, standing for
    the escape's last character (a word "Don\\'t" is the model's "Don't")."""
    segments = []
    for segment in layout.segments:
        text, origin = segment.text, segment.origin
        chars: list[str] = []
        kept: list[int] = []
        k = 0
        while k < len(text):
            for written, quote in escapes:
                last = k + len(written) - 1
                if text.startswith(written, k) and origin[last] == origin[k] + len(written) - 1:
                    chars.append(quote)
                    kept.append(origin[last])
                    k = last + 1
                    break
            else:
                chars.append(text[k])
                kept.append(origin[k])
                k += 1
        segments.append(Segment("".join(chars), tuple(kept) + (origin[-1],)))
    return replace(layout, segments=tuple(segments), escapes=escapes, unicode_escape=_unicode_escape(escapes))


def _escaped(served: Served, layout: Layout) -> Served:
    """A segment's translation written as the text writes its characters: the model read every
    escaped quote of the segment unescaped, placeholders and tags too, so every one is escaped again,
    and in a text written in ASCII every other character is written as an escape."""
    quotes = {char: written for written, char in layout.escapes if char in "'\""}
    edits = []
    for k, char in enumerate(served.translation.text):
        if char in quotes:
            edits.append((k, k + 1, quotes[char]))
        elif layout.unicode_escape and not char.isascii():
            units = char.encode("utf-16-be")
            edits.append((k, k + 1, "".join(layout.unicode_escape % int.from_bytes(units[i:i + 2], "big")
                                            for i in range(0, len(units), 2))))
    return edited(served, edits)


def _split_at(text: str, protected: list[Protected], language: str | None, breaks: list[tuple[int, int]]) -> Layout:
    """`text`'s layout with `breaks` kept as sent and the text between each two laid out on its own."""
    parts: list[Kept | Block] = []
    segments: list[Segment] = []
    cursor = 0
    for start, end in breaks + [(len(text), len(text))]:
        piece = text[cursor:start]
        if piece:
            inner = [replace(p, start=p.start - cursor, end=p.end - cursor) for p in protected
                     if cursor <= p.start and p.end <= start]
            layout = _split(piece, inner, language)
            first = len(segments)
            segments += [Segment(segment.text, tuple(k + cursor for k in segment.origin)) for segment in layout.segments]
            for part in layout.parts:
                if isinstance(part, Kept):
                    parts.append(Kept(part.text, part.start + cursor,
                                      tuple(replace(p, start=p.start + cursor, end=p.end + cursor) for p in part.protected)))
                else:
                    parts.append(replace(part, segments=tuple(k + first for k in part.segments)))
        if end > start:
            parts.append(Kept(text[start:end], start, tuple(p for p in protected if start <= p.start and p.end <= end)))
        cursor = end
    if not segments:
        return as_sent(text)
    return Layout(text, tuple(_merged_kept(parts)), tuple(segments))


def markup_split(text: str, fmt: TextFormat, language: str | None = None) -> Layout:
    """An html or xml text's layout: the text of each block (a paragraph, list item, heading, table
    cell, the lines a `<br/>` parts; `WORD_BREAKING`) translated on its own, sentence by sentence as
    plain text is, the block elements' tags and the whitespace around them kept as sent. A block's
    lines are cut apart, their line breaks kept as sent, where plain text's would be (`_line_gaps`;
    `language`: the text's, as for `split`). Sent whole,
    "<ul><li>Open file</li><li>Save file</li><li>Close window</li></ul>" reached the model as one
    run-on sentence ("Open file Save file Close window") and came back "<ul><li>Dateispeicher</li>
    <li></li><li>schließendes Fenster</li> öffnen</ul>"; a page of six paragraphs lost its tags in
    the fourth. A kept tag is reported at its opening tag (`"placement": "kept"`). The text is
    translated whole where it has one segment, and where an inline element spans a block's edge
    (`<b>one<br/>two</b>`). A page's script, style and pre elements are kept whole between blocks."""
    if text and not has_visible_text(text):
        return as_sent(text)
    try:
        tags = read_markup(text, fmt).tags
    except MarkupError:
        return whole(text)  # refused where it is read for translation, naming the problem
    # The text's own leading and trailing whitespace is kept as sent: html reads it as nothing, but
    # gettext checks that a translation begins and ends with the line breaks its message does.
    lead, trail = len(text) - len(text.lstrip()), len(text) - len(text.rstrip())
    edges: list[tuple[int, int]] = [(0, 0)] * bool(lead) + [(len(text), len(text))] * bool(trail)
    for tag in tags:
        if tag.verbatim is not None:
            # A page's script, style or preformatted block stands between blocks, kept whole; code or
            # a translate="no" element inside a sentence goes with it, untouched (placement.py).
            if tag.name.lower() in PASSED_BLOCKS:
                edges.append((tag.source_start, tag.source_end))
        elif tag.name.lower() in WORD_BREAKING:
            edges.append((tag.source_start, tag.source_start + len(tag.opening)))
            if tag.closing:
                edges.append((tag.source_end - len(tag.closing), tag.source_end))
    kept: list[list[int]] = []  # the kept runs: block tags and the whitespace around them
    for start, end in sorted(edges):
        while start > 0 and text[start - 1].isspace():
            start -= 1
        while end < len(text) and text[end].isspace():
            end += 1
        if kept and start <= kept[-1][1]:
            kept[-1][1] = max(kept[-1][1], end)
        else:
            kept.append([start, end])
    # Sentences are cut apart as in plain text, but never inside a tag (an attribute's "Hello. World")
    # nor where an inline element holds both sides ("<b>One. Two.</b>").
    syntax = [False] * (len(text) + 1)
    for tag in tags:
        spans = (((tag.source_start, tag.source_end),) if tag.standalone else
                 ((tag.source_start, tag.source_start + len(tag.opening)), (tag.source_end - len(tag.closing or ""), tag.source_end)))
        for start, end in spans:
            syntax[start:end] = [True] * (end - start)
    parts: list[Kept | Block] = []
    segments: list[Segment] = []
    cursor = 0
    held = False  # whether a kept part holds more than block tags and whitespace
    for start, end in kept + [[len(text), len(text)]]:
        if start > cursor:
            between = text[cursor:start]
            try:
                visible = has_visible_text(read_markup(between, fmt).plain)
            except MarkupError:
                return whole(text)  # an inline element across a block's edge
            if visible:
                parts.append(_sentences(text, cursor, start, fmt, syntax, segments, language))
            else:
                parts.append(Kept(between, cursor, _tags_in(tags, cursor, start)))
                # A block of no text but an element passed through or an empty one stays where it is:
                # sent whole, "default.<br/> <code>%1</code></p>" came back with the <br/> and the
                # code in the middle of the sentence.
                held |= bool(between.strip())
        if end > start:
            parts.append(Kept(text[start:end], start, _tags_in(tags, start, end)))
        cursor = end
    if held and segments:
        return Layout(text, tuple(_merged_kept(parts)), tuple(segments))
    if len(segments) < 2 and not (lead or trail):
        return whole(text)
    if len(segments) < 2:  # translated whole but for its edges
        stop = len(text) - trail
        edges_kept = [Kept(text[:lead], 0)] * bool(lead) + [Block((0,), ())] + [Kept(text[stop:], stop)] * bool(trail)
        return Layout(text, tuple(edges_kept), (Segment(text[lead:stop], tuple(range(lead, stop + 1))),))
    return Layout(text, tuple(_merged_kept(parts)), tuple(segments))


def _sentences(text: str, start: int, end: int, fmt: TextFormat, syntax: list[bool], segments: list[Segment],
               language: str | None) -> Block:
    """text[start:end], a block's markup, as a Block of its sentences and lines (appended to
    `segments`); not cut where the part before would leave an inline element open."""
    first, piece, gaps = len(segments), start, []
    cuts = _sentence_gaps(text[start:end], tuple(range(start, end + 1)), syntax)
    cuts += [(gap_start - start, gap_end - start) for gap_start, gap_end in _line_gaps(text, start, end, syntax, language)]
    for gap_start, gap_end in sorted(cuts):
        if start + gap_start < piece:
            continue
        try:
            read_markup(text[piece:start + gap_start], fmt)
        except MarkupError:
            continue
        segments.append(Segment(text[piece:start + gap_start], tuple(range(piece, start + gap_start + 1))))
        gaps.append(text[start + gap_start:start + gap_end])
        piece = start + gap_end
    segments.append(Segment(text[piece:end], tuple(range(piece, end + 1))))
    return Block(tuple(range(first, len(segments))), tuple(gaps))


def _line_gaps(text: str, start: int, end: int, syntax: list[bool], language: str | None) -> list[tuple[int, int]]:
    """The line breaks of a block's markup text[start:end] (with the whitespace around them; offsets
    into `text`) that plain text's layout would not run on: a blank line, a line that ends a
    sentence or a label (`:`), a next line that is a list item or an option, or one that begins anew
    (`_starts_anew`), each read on the visible text, the tags at the lines' edges skipped. Html reads
    a line break as a space, but messages in Pango or Qt markup are laid out by theirs, and sent as
    one run-on sentence "<b>Copy</b> the file\nPaste it here" came back "Die Datei hier
    <b>einfügen</b>". A line that runs on stays in its sentence."""
    letters = [0]  # letters[k]: visible letters in text[start:start + k]
    for k in range(start, end):
        letters.append(letters[-1] + bool(not syntax[k] and _LETTER.match(text, k)))
    gaps = []
    for match in _LINE_BREAK.finditer(text, start, end):
        gap_start, gap_end = match.span()
        if any(syntax[gap_start:gap_end]) or letters[gap_start - start] == 0 or letters[end - start] == letters[gap_end - start]:
            continue
        before_end = gap_start  # the line's last visible character, closing tags skipped
        while before_end > start and (syntax[before_end - 1] or text[before_end - 1].isspace()):
            before_end -= 1
        after = gap_end  # the next line's first visible character, opening tags skipped
        while after < end and (syntax[after] or text[after].isspace()):
            after += 1
        line_start = max(start, text.rfind("\n", 0, before_end) + 1)
        if before_end <= line_start or after >= end:
            continue
        if (match.group().count("\n") > 1 or _SENTENCE_END.search(text, line_start, before_end)
                or text[before_end - 1] == ":" or text[after] == "-" or _BULLET.match(text, after, end)
                or _starts_anew(text, (line_start, before_end), (after, end), syntax, language)):
            gaps.append((gap_start, gap_end))
    return gaps


def _tags_in(tags: list[Tag], start: int, end: int) -> tuple[Protected, ...]:
    """The tags whose opening tag stands in text[start:end], as protected parts at their opening."""
    return tuple(Protected("tag", tag.opening, tag.source_start, tag.source_start + len(tag.opening))
                 for tag in tags if start <= tag.source_start and tag.source_start + len(tag.opening) <= end)


def openings(layout: Layout) -> list[bool]:
    """Per segment, whether it opens a line (nothing but indentation before it on its line: not an
    option's description, a column's cell or a list item's text) or follows a sentence in its part."""
    text = layout.text
    opens = [True] * len(layout.segments)
    for part in layout.parts:
        if isinstance(part, Block):
            start = layout.segments[part.segments[0]].origin[0]
            opens[part.segments[0]] = not text[_line_of(text, start):start].strip()
    return opens


def _merged_kept(parts: list[Kept | Block]) -> list[Kept | Block]:
    merged: list[Kept | Block] = []
    for part in parts:
        if isinstance(part, Kept) and merged and isinstance(merged[-1], Kept):
            last = merged.pop()
            part = Kept(last.text + part.text, last.start, last.protected + part.protected)
        merged.append(part)
    return merged


def _inside(length: int, protected: list[Protected]) -> list[bool]:
    inside = [False] * (length + 1)
    for p in protected:
        for k in range(p.start, p.end):
            inside[k] = True
    return inside


def _verbatim(text: str) -> list[tuple[int, int]]:
    """The spans of `text` kept as written, in order: Markdown's fenced code blocks (from a line of
    three or more backticks or tildes to the next such line of at least as many, each from its
    opening fence's line to its closing fence's end; sent as prose, "pip install phrasal\nphrasal
    serve" came back "pip install phrasal-Phrasal\nserve"; a fence never closed is no fence) and the
    link reference definitions outside them (`_REFERENCE`)."""
    blocks = []
    opening = None
    for line in _FENCE.finditer(text):
        if opening is None:
            opening = line
        elif line.group(2)[0] == opening.group(2)[0] and len(line.group(2)) >= len(opening.group(2)) \
                and not line.group(3).strip():
            blocks.append((opening.start(), line.end()))
            opening = None
    return sorted(blocks + [line.span() for line in _REFERENCE.finditer(text)
                            if not any(start <= line.start() < end for start, end in blocks)])


def _stripped(text: str, start: int, end: int) -> tuple[int, int]:
    """The span of text[start:end] without the whitespace at its edges (empty where it is all
    whitespace: start >= end)."""
    piece = text[start:end]
    return start + len(piece) - len(piece.lstrip()), start + len(piece.rstrip())


def _icon(char: str) -> bool:
    """A symbol shown as a picture: an emoji, a dingbat (✔, ⚠, ★), an arrow, or an icon font's glyph
    (a private-use code point: Font Awesome's, Material's)."""
    if unicodedata.category(char) in ("So", "Co"):
        return True
    code = ord(char)
    return any(low <= code <= high for low, high in _ARROWS)


def _icons_from(text: str, start: int, end: int) -> int:
    """Where the icons at `start` (each with what joins or modifies it) stop; `start` where none is."""
    at = start
    if at < end and _icon(text[at]):
        at += 1
        while at < end and (_icon(text[at]) or _EMOJI_PARTS.match(text[at])):
            at += 1
    return at


def _icons_before(text: str, start: int, end: int) -> int:
    """Where the icons that end at `end` start (a run starts at an icon); `end` where none is."""
    at = end
    while at > start and (_icon(text[at - 1]) or _EMOJI_PARTS.match(text[at - 1])):
        at -= 1
    while at < end and not _icon(text[at]):
        at += 1
    return at


def _icon_edges(text: str, start: int, end: int, inside: list[bool]) -> tuple[int, int]:
    """text[start:end] without the icons at its edges, each set apart by whitespace ("✔ Done", "Next
    ➜", an icon font's glyph before a label): kept as sent, the label between them translated. Sent
    with them, "✔ Done" came back "✔ Done fertig", "Save file \uf00c" with the glyph inside."""
    while True:
        lead = _icons_from(text, start, end)
        if not (start < lead < end and text[lead] in " \t" and not any(inside[start:lead])):
            break
        start = _stripped(text, lead, end)[0]
    while True:
        tail = _icons_before(text, start, end)
        if not (start < tail < end and text[tail - 1] in " \t" and not any(inside[tail:end])):
            break
        end = _stripped(text, start, tail)[1]
    return start, end


def _line_of(text: str, offset: int) -> int:
    return text.rfind("\n", 0, offset) + 1


def _cells(text: str, start: int, end: int, inside: list[bool]) -> tuple[list[tuple[int, int]], str | None]:
    """The columns of the line text[start:end] (content runs, without the whitespace around them
    or the mark a line of Markdown starts with), and that mark's kind: "item" (a list item's bullet
    or number), "heading" (Markdown's `## `), "quote" (`> `), "row" (a Markdown table's row, its cells
    the columns; sent whole, "| `--port` | The port |" came back with its pipes moved), "forms" (plural
    forms, `_plural_forms`), or None. A
    mark is no word of the sentence: sent with it, "# Getting started" came back "# Hole gestartet"
    (alone "Erste Schritte")."""
    content_start, content_end = _stripped(text, start, end)
    if content_start >= content_end:
        return [], None
    row = _TABLE_ROW.fullmatch(text, content_start, content_end)
    if row and not inside[content_start] and not inside[content_end - 1]:
        # A Markdown table's row: its cells, cut at the pipes (none escaped or in code), kept.
        cells = []
        for cell in _TABLE_CELL.finditer(text, content_start + 1, content_end - 1):
            cell_start, cell_end = _stripped(text, *cell.span())
            if cell_start < cell_end:
                cells.append((cell_start, cell_end))
        return cells, "row"
    forms = _plural_forms(text, content_start, content_end, inside)
    if forms:
        return forms, "forms"
    mark = None
    for kind, pattern in (("item", _BULLET), ("heading", _HEADING), ("quote", _QUOTE)):
        found = pattern.match(text, content_start, content_end)
        if found and not inside[content_start] and found.end() < content_end:
            content_start, mark = found.end(), kind
            break
    label_start, content_end = _icon_edges(text, content_start, content_end, inside)
    if label_start > content_start:
        content_start, mark = label_start, mark or "icon"  # an icon before a label starts a line anew
    cells = []
    cell_start = content_start
    for gap in _COLUMN_GAP.finditer(text, content_start, content_end):
        if inside[gap.start()] or gap.start() == cell_start:
            continue
        # Two spaces end a column only after an option's ("-v, --verbose  print …"); in prose they
        # are a typing slip, and cutting there would cut a sentence.
        if gap.group() == "  " and text[cell_start] != "-":
            continue
        cells.append((cell_start, gap.start()))
        cell_start = gap.end()
    cells.append((cell_start, content_end))
    return cells, mark


def _plural_forms(text: str, start: int, end: int, inside: list[bool]) -> list[tuple[int, int]]:
    """The plural forms of a line that is vue-i18n's choice of them, "no apples | one apple | {count}
    apples" (each form's span), or none. Sent whole, "car | cars" came back "Autos"; each alone, the
    model translates it as the message it is ("Auto | Autos"). Not where
    the line has a bracket outside its placeholders (a command's alternatives, "[ add | del ]",
    Laravel's counted ranges "[1,19] some|[20,*] many"), an empty form ("a || b"), or a form without
    a letter."""
    if "|" not in text[start:end] or any(text[k] in "[](){}<>" and not inside[k] for k in range(start, end)):
        return []
    pipes = [k for k in range(start, end) if text[k] == "|" and not inside[k]]
    # Written without spaces, "Fade|Linear" is as likely glib's context prefix (Q_(), whose translation
    # leaves the context out), so only forms apart as vue-i18n writes them are cut.
    if any(text[k - 1:k] != " " or text[k + 1:k + 2] != " " for k in pipes):
        return []
    forms, form_start = [], start
    for k in pipes + [end]:
        form = _stripped(text, form_start, k)
        if form[0] >= form[1] or not _LETTER.search(text, form[0], form[1]):
            return []
        forms.append(form)
        form_start = k + 1
    return forms if len(forms) > 1 else []


def _chains(text: str, inside: list[bool], language: str | None,
            verbatim: list[tuple[int, int]] = ()) -> list[list[tuple[int, int]]]:
    """The text's parts in order, each a list of (start, end) spans that read on from one line into
    the next (one span where it does not); a line of a span kept as written (`verbatim`, in order:
    `_verbatim`) reads on from none and none from it."""
    chains: list[list[tuple[int, int]]] = []
    open_chain: list[tuple[int, int]] | None = None  # the last column of the line before, if it runs on
    line_start = 0
    while line_start <= len(text):
        line_end = text.find("\n", line_start)
        line_end = len(text) if line_end < 0 else line_end
        cells, mark = _cells(text, line_start, line_end, inside)
        block = bisect.bisect_right(verbatim, (line_start, len(text) + 1)) - 1  # the last one begun by here
        if block >= 0 and line_start < verbatim[block][1]:
            mark, open_chain = "code", None
        elif _RULE.fullmatch(text, line_start, line_end):
            # A rule or a heading's underline ("Installation\n============") is a line of its own: run
            # on, the heading had reached the model as "Installation ============".
            mark, open_chain = "rule", None
        for k, cell in enumerate(cells):
            # A quote's lines run on like any (at the column after their mark); an item or a heading
            # starts anew.
            continues = (k == 0 and len(cells) == 1 and open_chain is not None and mark in (None, "quote")
                         and cell[0] - line_start == open_chain[0][0] - _line_of(text, open_chain[0][0])
                         and text[cell[0]] != "-"
                         and (_worded(text, cell, inside) or _ends_in_word(text, open_chain[-1], inside))
                         and not _starts_anew(text, open_chain[-1], cell, inside, language))
            if continues:
                open_chain.append(cell)
            else:
                open_chain = [cell]
                chains.append(open_chain)
        last = cells[-1] if cells else None
        # A line of placeholders and options alone ("%1", a synopsis' "%s -D") is a value or a
        # command of its own: what follows it is not its sentence ("%1\nTrusted by %2" came back
        # "%1 vertrauenswürdig\nvon %2"), and it is not the sentence of a line ending in another
        # placeholder ("Encoding: %s\n%s"), only of one that ends in a word ("remain at\n'{}'").
        if (last is None or mark in ("heading", "code", "rule", "row") or _SENTENCE_END.search(text, last[0], last[1]) or text[last[1] - 1] == ":"
                or not _worded(text, last, inside)):
            open_chain = None
        line_start = line_end + 1
    return chains


def _starts_anew(text: str, before: tuple[int, int], cell: tuple[int, int], inside: list[bool],
                 language: str | None) -> bool:
    """Whether the line `cell` begins something new although the line `before` ends no sentence: a
    capital letter after a value ("Trusted by %1\nSHA1 %2"), a capitalised word after a synopsis'
    argument ("Usage: %s [options] <interface>\nSolicits on-link IPv6 routers"), and in a language
    that writes its nouns in lower case a capitalised word after a line of several words ("Project is
    opened\nPlease, close it first"; not "Click\nTo\nAdd\nImage", a label wrapped one word a line,
    nor the metavariable of "(encrypted)\nPASSWORD", nor German's nouns, though a German word that is
    never a noun, "Datei kopieren\nHier einfügen", does). Hard-wrapped prose runs on
    in lower case, or with a name, an acronym or a metavariable, which these leave joined."""
    if inside[cell[0]] or not text[cell[0]].isupper():
        return False
    if inside[before[1] - 1]:
        return True
    word = _WORD.match(text, cell[0]).group()
    capitalised = len(word) > 1 and word[1].islower()
    if capitalised and text[before[1] - 1] in "]>":
        return True
    if not capitalised or language is None or not any(c.isspace() for c in text[before[0]:before[1]]):
        return False
    if language == "de":  # a noun keeps its capital mid-sentence, a word that is never one does not
        return re.match(r"[^\W\d_]+", word).group().lower() in FUNCTION_WORDS
    return language not in NOUNS_CAPITALISED


def _worded(text: str, cell: tuple[int, int], inside: list[bool]) -> bool:
    """Whether the cell has a letter outside its placeholders and terms."""
    return any(_LETTER.match(text, k) and not inside[k] for k in range(*cell))


def _ends_in_word(text: str, cell: tuple[int, int], inside: list[bool]) -> bool:
    return bool(_LETTER.match(text, cell[1] - 1)) and not inside[cell[1] - 1]


def _width(text: str, chain: list[tuple[int, int]]) -> int:
    """The column the chain's longest line ends at."""
    return max(end - _line_of(text, start) for start, end in chain)


def _cut_where_ended_short(text: str, chain: list[tuple[int, int]]) -> list[list[tuple[int, int]]]:
    """`chain` cut after each line that its next line's first word would have fitted on, with
    ENDED_SHORT columns to spare, within the chain's width: that line was ended by choice (a
    command's synopsis above its description, a label above its value), not wrapped."""
    if len(chain) == 1:
        return [chain]
    width = _width(text, chain)
    parts = [[chain[0]]]
    for k in range(1, len(chain)):
        first_word = _WORD.match(text, chain[k][0]).end() - chain[k][0]
        if chain[k - 1][1] - _line_of(text, chain[k - 1][0]) + 1 + first_word + ENDED_SHORT <= width:
            parts.append([chain[k]])
        else:
            parts[-1].append(chain[k])
    return parts


def _joined(text: str, chain: list[tuple[int, int]]) -> tuple[str, tuple[int, ...]]:
    pieces, origin = [], []
    for k, (start, end) in enumerate(chain):
        if k:
            pieces.append(" ")
            origin.append(chain[k - 1][1])
        pieces.append(text[start:end])
        origin.extend(range(start, end))
    origin.append(chain[-1][1])
    return "".join(pieces), tuple(origin)


def _sentence_gaps(joined: str, origin: tuple[int, ...], inside: list[bool]) -> list[tuple[int, int]]:
    """Where to cut between sentences: each cut leaves a letter outside the placeholders on both
    sides. Linear in the text (a 2,000-character text of one-word sentences is a request's worst)."""
    letters: list[int] = []  # letters[k]: letters outside placeholders in joined[:k]; counted at the first gap
    gaps = []
    last = 0
    for match in _SENTENCE_GAP.finditer(joined):
        start, end = match.span(1)
        word = joined[max(joined.rfind(" ", 0, match.start()), joined.rfind("(", 0, match.start())) + 1:match.start()]
        if _ABBREVIATION.fullmatch(word) or inside[origin[start]] or inside[origin[start - 1]]:
            continue
        if not letters:
            letters.append(0)
            for k, c in enumerate(joined):
                letters.append(letters[-1] + bool(_LETTER.match(c) and not inside[origin[k]]))
        if letters[start] == letters[last] or letters[-1] == letters[end]:
            continue
        gaps.append((start, end))
        last = end
    return gaps


@dataclass(frozen=True)
class Wrapped:
    """A block's output with line breaks put in: the text, and the map from offsets in the
    unwrapped output to offsets in `text`."""

    text: str
    breaks: tuple[tuple[int, int, int], ...]  # (offset, length replaced, length added) in the unwrapped output

    def offset(self, x: int) -> int:
        return x + sum(added - length for at, length, added in self.breaks if at + length <= x)


def wrap(output: str, block: Block, keep_together: list[tuple[int, int]]) -> Wrapped:
    """`output` broken greedily at whitespace into lines of at most `block.width` columns (a word
    longer than a line stands alone), the first starting at `block.column`, the others with
    `block.indent`; never inside a span of `keep_together` (placeholders put back). Where that takes
    more lines than the source's `block.lines`, the narrowest width up to LINE_LIMIT that keeps
    their number, if one does."""
    if block.width is None:
        return Wrapped(output, ())
    wrapped = _wrapped_at(output, block, block.width, keep_together)
    if block.lines is None or len(wrapped.breaks) < block.lines:
        return wrapped
    for width in range(block.width + 1, LINE_LIMIT + 1):
        wider = _wrapped_at(output, block, width, keep_together)
        if len(wider.breaks) < block.lines:
            return wider
    return wrapped


def _wrapped_at(output: str, block: Block, width: int, keep_together: list[tuple[int, int]]) -> Wrapped:
    breaks = []
    pieces = []
    column = block.column
    cursor = 0
    for match in re.finditer(r"\s+", output):
        word_end = match.start()
        following = _WORD.match(output, match.end()).end()
        at_start = word_end == 0
        column += word_end - cursor
        forbidden = any(a < match.end() and match.start() < b for a, b in keep_together)
        if not at_start and not forbidden and column + len(match.group()) + following - match.end() > width:
            added = "\n" + block.indent
            breaks.append((match.start(), len(match.group()), len(added)))
            pieces.append(output[cursor:match.start()] + added)
            column = len(block.indent)
        else:
            pieces.append(output[cursor:match.end()])
            column += len(match.group())
        cursor = match.end()
    pieces.append(output[cursor:])
    return Wrapped("".join(pieces), tuple(breaks))


def assemble(layout: Layout, nbests: list[list[Served]], requested: AlignmentMode) -> list[Served]:
    """The text's n-best list from its segments' (in segment order): hypothesis k joins each
    segment's k-th (its last where it has fewer) into the text's layout. Its score is the segments'
    scores averaged by the length of their translations; alignment words, links, phrase pairs,
    placeholders, removals and glossary reports are re-addressed into the text sent and the output."""
    if layout.whole:
        return nbests[0]
    size = max((len(n) for n in nbests), default=1)
    joined = [_assemble_one(layout, [n[min(k, len(n) - 1)] for n in nbests], requested) for k in range(size)]
    if layout.renamed:
        names = dict(layout.renamed)
        joined = [edited(served, [(p.target_start, p.target_end, names[p.source_start]) for p in served.placed
                                  if p.kind == "icu" and p.text == "#" and p.source_start in names])
                  for served in joined]
    return joined


def _assemble_one(layout: Layout, served: list[Served], requested: AlignmentMode) -> Served:
    if layout.escapes:
        served = [_escaped(s, layout) for s in served]
    out: list[str] = []
    length = 0
    target_maps: list[Callable[[int], int]] = []  # per segment: its output offset -> the text's output offset
    placed: list[Placed] = []
    for part in layout.parts:
        if isinstance(part, Kept):
            for p in part.protected:
                at = length + p.start - part.start
                placed.append(Placed(p.kind, p.text, p.start, p.end, at, at + len(p.text), "kept"))
            out.append(part.text)
            length += len(part.text)
            continue
        unwrapped, starts, keep_together = [], [], []
        offset = 0
        for k, index in enumerate(part.segments):
            if k:
                unwrapped.append(part.gaps[k - 1])
                offset += len(part.gaps[k - 1])
            starts.append(offset)
            unwrapped.append(served[index].translation.text)
            keep_together += [(offset + p.target_start, offset + p.target_end) for p in served[index].placed]
            offset += len(served[index].translation.text)
        wrapped = wrap("".join(unwrapped), part, keep_together)
        for start in starts:
            target_maps.append(lambda x, start=start, base=length, wrapped=wrapped: base + wrapped.offset(start + x))
        out.append(wrapped.text)
        length += len(wrapped.text)
    text = "".join(out)

    weights = [len(s.translation.text) + 1 for s in served]
    score = sum(w * s.translation.score for w, s in zip(weights, served)) / sum(weights) if served else 0.0
    removed: list[Removed] = []
    memory: list[MemoryUse] = []
    reports: dict[tuple[str, str], list[TermReport]] = {}
    for segment, s, target in zip(layout.segments, served, target_maps):
        source = segment.origin.__getitem__
        for p in s.placed:
            (source_start, source_end), (target_start, target_end) = (_mapped(source, p.source_start, p.source_end),
                                                                      _mapped(target, p.target_start, p.target_end))
            placed.append(replace(p, source_start=source_start, source_end=source_end, target_start=target_start,
                                  target_end=target_end))
        removed += [replace(r, at=target(r.at)) for r in s.removed]
        for use in s.memory:
            (source_start, source_end), (target_start, target_end) = (_mapped(source, use.source_start, use.source_end),
                                                                      _mapped(target, use.target_start, use.target_end))
            memory.append(replace(use, source_start=source_start, source_end=source_end, target_start=target_start,
                                  target_end=target_end))
        for report in s.glossary:
            reports.setdefault((report.source, report.target), []).append(
                replace(report, source_spans=[_mapped(source, a, b) for a, b in report.source_spans],
                        target_spans=[_mapped(target, a, b) for a, b in report.target_spans]))
    placed.sort(key=lambda p: p.target_start)
    glossary = [merged(group) for group in reports.values()]
    alignments = [s.translation.alignment for s in served]
    alignment = phrase_map = None
    if requested != "none" and all(a is not None for a in alignments):
        alignment = _joined_alignment(layout, alignments, target_maps, text)  # type: ignore[arg-type]
        maps = [s.translation.phrase_map for s in served]
        if requested == "phrase" and all(m is not None for m in maps):
            phrase_map = _joined_phrases(maps, alignments)  # type: ignore[arg-type]
    translation = Translation(text, score, alignment, phrase_map)
    flags = alignment_flags(alignment) if alignment is not None else None
    return Served(translation, placed, flags, removed, glossary, memory)


def _mapped(position: Callable[[int], int], start: int, end: int) -> tuple[int, int]:
    """A non-empty span through an offset map. Its end is mapped from its last character: the
    offset just past it may stand elsewhere (a joined line break, a wrapped line's indentation)."""
    return position(start), position(end - 1) + 1


def _joined_alignment(layout: Layout, alignments: list[TokenAlignment],
                      target_maps: list[Callable[[int], int]], output: str) -> TokenAlignment:
    source_words: list[Word] = []
    target_words: list[Word] = []
    links: list[list[tuple[int, float]]] = []
    hard: list[tuple[int, int]] = []
    for segment, alignment, target in zip(layout.segments, alignments, target_maps):
        i0, j0 = len(source_words), len(target_words)
        source_words += [_in_source(layout, segment.origin, w) for w in alignment.source_words]
        # As the output holds it: a word the wrap broke holds the line break, not the space it had.
        target_words += [Word(output[start:end], start, end)
                         for start, end in (_mapped(target, w.start, w.end) for w in alignment.target_words)]
        links += [[(i + i0, weight) for i, weight in row] for row in alignment.links]
        hard += [(i + i0, j + j0) for i, j in alignment.hard]
    # Segments read the same way give one reading; mixed (a fallback in one segment) give none.
    kinds = {a.support_from for a in alignments}
    if len(kinds) != 1 or None in kinds:
        return TokenAlignment(source_words, target_words, links, hard, pharaoh(hard))
    return TokenAlignment(source_words, target_words, links, hard, pharaoh(hard),
                          [weight for a in alignments for weight in a.support or ()], kinds.pop())


def _in_source(layout: Layout, origin: tuple[int, ...], word: Word) -> Word:
    """A segment's word as the text sent holds it: the run of its characters that stand together
    there, from its first (a sentence of an ICU branch joins the branch's last word to the
    punctuation after the argument, "balls" + "." of "{# balls}}.", which stand apart in the text);
    an escaped character is its escape, whole ("Don\\'t", "caf\\u00e9")."""
    text = layout.text

    def written(end: int) -> int:  # the length of an escape that ends at `end`, 1 for a character
        return next((len(form) for form, _ in layout.escapes if text[max(0, end - len(form)):end] == form), 1)

    last = word.start
    while last + 1 < word.end and origin[last + 1] - written(origin[last + 1] + 1) == origin[last]:
        last += 1
    # an escaped character stands for its escape's last character
    start, end = origin[word.start] + 1 - written(origin[word.start] + 1), origin[last] + 1
    return Word(text[start:end], start, end)


def _joined_phrases(maps: list[PhraseMap], alignments: list[TokenAlignment]) -> PhraseMap:
    # One origin names the whole map: where segments came by different ways (a memory's segment
    # beside a phrasal model's), every segment's pairs are extracted from its word alignment.
    origins = {m.origin for m in maps}
    if len(origins) != 1:
        maps = [m if m.origin == "extracted" else PhraseMap("extracted", extracted_phrase_pairs(a))
                for m, a in zip(maps, alignments)]
    pairs = []
    i0 = j0 = 0
    for phrase_map, alignment in zip(maps, alignments):
        pairs += [PhrasePair((p.source[0] + i0, p.source[1] + i0), (p.target[0] + j0, p.target[1] + j0), p.confidence)
                  for p in phrase_map.pairs]
        i0 += len(alignment.source_words)
        j0 += len(alignment.target_words)
    return PhraseMap(maps[0].origin if maps else "extracted", pairs)
