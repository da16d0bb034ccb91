"""Prose documents: plain text and Markdown (each paragraph one text, Markdown's code, front matter
and link definitions left), HTML pages (as html, whole where they fit in a text, else their largest
elements; a part refused sent again in parts), SubRip and WebVTT subtitles (each subtitle's text)."""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from html.parser import HTMLParser

from service.documents.files import PARAGRAPH_BREAK, Failed, Spans, decoded, encodable


class _Prose(Spans):
    """Plain text in spans (each without the file's "\r\n"), written back with its line breaks as
    the span it replaces wrote them."""

    fmt = "text"
    source_language = ""
    unit = "paragraphs"

    def _put(self, translation: str, start: int, end: int) -> str:
        return translation.replace("\n", "\r\n") if "\r\n" in self.text[start:end] else translation

    def _add(self, start: int, end: int) -> None:
        self.spans.append((start, end, self.text[start:end].replace("\r\n", "\n")))


class _Paragraphs(_Prose):
    """A text's paragraphs (between blank lines), or the part of each `_translatable` says. A file
    that is not UTF-8 (and has no byte order mark) is read as Windows' Western encoding (cp1252: older subtitle files are, and it
    holds every letter of English, German and French, the languages the service reads) and written
    back in it; a translation holding a character it lacks is left and named."""

    unwritable_as = "holds a character the file's encoding (cp1252) lacks"

    def __init__(self, name: str, data: bytes, kind: str, fuzzy: bool) -> None:
        super().__init__()
        try:
            self.text, self.encoding = decoded(name, data)
        except Failed:
            if data.startswith((b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff")):
                raise  # its byte order mark names its encoding
            try:
                self.text, self.encoding = data.decode("cp1252"), "cp1252"
            except UnicodeDecodeError:  # a byte cp1252 leaves undefined: not its text either
                raise Failed(f"cannot read {name}: neither UTF-8 nor Windows-1252 text") from None
        offset = 0
        for index, block in enumerate(PARAGRAPH_BREAK.split(self.text)):  # paragraphs at even places
            found = self._translatable(block) if index % 2 == 0 else None
            if found is not None:
                self._add(offset + found[0], offset + found[1])
            offset += len(block)

    def _translatable(self, block: str) -> tuple[int, int] | None:
        """Where in the paragraph its text to translate starts and ends, or None for none."""
        raise NotImplementedError

    def _writable(self, value: str, start: int, end: int) -> bool:
        return encodable(value, self.encoding)


class PlainText(_Paragraphs):
    def _translatable(self, block: str) -> tuple[int, int] | None:
        body = block.strip()
        if not body:
            return None
        start = block.index(body)
        return start, start + len(body)


_TIMING = re.compile(r"^\s*\d+\s*\r?\n[^\n]*-->[^\n]*\r?\n")


class Subtitles(_Paragraphs):
    unit = "subtitles"

    def _translatable(self, block: str) -> tuple[int, int] | None:
        # A cue: its number, its timing line, its text; a block that is none stays as it is.
        timing = _TIMING.match(block)
        if timing is None:
            return None
        body = block[timing.end():].rstrip()
        if not body.strip():
            return None
        return timing.end(), timing.end() + len(body)


# A WebVTT file's first line.
_WEBVTT = re.compile(r"\A\ufeff?WEBVTT(?:[ \t][^\r\n]*)?(?:\r?\n|\Z)")
_VTT_BLOCKS = ("NOTE", "STYLE", "REGION")
# The references a cue's text may hold that stand for a character the model should read as it (HTML's
# &lt; and &gt; stay references: read, they would be tags)
_VTT_CHARACTERS = {"&amp;": "&", "&nbsp;": "\u00a0", "&lrm;": "\u200e", "&rlm;": "\u200f"}
_VTT_REFERENCE = re.compile("|".join(_VTT_CHARACTERS))
_BARE_AMPERSAND = re.compile(r"&(?![A-Za-z][A-Za-z0-9]*;|#[0-9]+;|#[xX][0-9A-Fa-f]+;)")
# A cue's tags (a class, italic, bold, underline, voice, ruby, language span; a karaoke timestamp), and a "<"
# that starts none: WebVTT would read it as one, so it is written as a reference
# A voice span opening a cue (`<v Bob>`, `<v.loud Bob> `): who speaks the whole cue
_VOICE = re.compile(r"<v(?=[\s.])[^>\r\n]*>[ \t]*")
_VTT_TAG_OR_LESS = re.compile(r"(</?(?:[cibuv]|ruby|rt|lang)(?=[\s.>])[^>\r\n]*>|<\d[\d:.]*>)|<")


class WebVtt(_Prose):
    """WebVTT subtitles (.vtt, HTML5's <track>): each cue's text, its identifier, timing and settings
    kept, as are the header, NOTE, STYLE and REGION blocks. Its tags (`<v Bob>`, `<c.yellow>`,
    `<i>`, a karaoke `<00:01.500>`) are kept by the service as it keeps a text's markup; `&amp;`
    and the space and direction marks reach it as the characters they stand for; an ampersand or a
    "<" starting no tag is written back as a reference; a translation that would end the cue (a
    blank line, "-->") is left and named. A voice span opening a cue (`<v Bob>`: who speaks it) stays
    where it is, out of the text sent. A line holding "-->" starts a cue, blank line or not, as
    WebVTT's parser reads it."""

    unit = "subtitles"
    unwritable_as = "would end its cue (a blank line or \"-->\")"

    def __init__(self, name: str, data: bytes, kind: str, fuzzy: bool) -> None:
        super().__init__()
        self.text, self.encoding = decoded(name, data)
        if not _WEBVTT.match(self.text):
            raise Failed(f"cannot read {name}: not a WebVTT file (its first line is not WEBVTT)")
        offset = 0
        for index, block in enumerate(PARAGRAPH_BREAK.split(self.text)):  # blocks at even places
            if index == 0:  # the WEBVTT line, header lines, and any cue with no blank line before it
                first = _WEBVTT.match(block).end()
                self._cues(block[first:], first)
            elif index % 2 == 0 and not block.startswith(_VTT_BLOCKS):
                self._cues(block, offset)
            offset += len(block)

    def _cues(self, block: str, offset: int) -> None:
        """Each cue's text in a block: the lines after each timing line up to the next one."""
        lines = [(m.start(), m.group()) for m in re.finditer(r"[^\r\n]*(?:\r?\n|$)", block) if m.group()]
        timings = [k for k, (_, line) in enumerate(lines) if "-->" in line]
        for k, following in zip(timings, timings[1:] + [len(lines)]):
            if k + 1 >= following:
                continue
            start = lines[k + 1][0]
            body = block[start:lines[following - 1][0] + len(lines[following - 1][1])].rstrip()
            if body.strip():
                self._add(offset + start, offset + start + len(body))

    def _add(self, start: int, end: int) -> None:
        voice = _VOICE.match(self.text, start, end)  # the cue's speaker, kept where it stands: no text to translate
        start = voice.end() if voice else start
        if start < end:
            text = self.text[start:end].replace("\r\n", "\n")
            self.spans.append((start, end, _VTT_REFERENCE.sub(lambda m: _VTT_CHARACTERS[m.group()], text)))

    def _put(self, translation: str, start: int, end: int) -> str:
        escaped = _VTT_TAG_OR_LESS.sub(lambda m: m.group(1) or "&lt;", _BARE_AMPERSAND.sub("&amp;", translation))
        return super()._put(escaped, start, end)

    def _writable(self, value: str, start: int, end: int) -> bool:
        return "-->" not in value and not PARAGRAPH_BREAK.search(value) and bool(value.strip())


# --- HTML pages

HTML_PART_CHARS = 4000  # the most characters of a page sent as one text (the service's max_chars is 10,000)
_VOID = frozenset("area base br col embed hr img input link meta param source track wbr".split())
_UNTRANSLATED_ELEMENTS = frozenset(("script", "style", "template", "svg", "math"))
_HTML_TAG = re.compile(r"<html\b[^>]*>", re.IGNORECASE)
# the language a page's <html> names: HTML's lang, XHTML's xml:lang beside it
_LANG = re.compile(r"""(\s(?:xml:)?lang\s*=\s*["']?)([A-Za-z-]+)""", re.IGNORECASE)
_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?([A-Za-z0-9_.:-]+)""", re.IGNORECASE)


@dataclass
class _Element:
    tag: str
    start: int
    inner_start: int            # after its start tag
    end: int = -1
    inner_end: int = -1         # its end tag's start (its end, where it has none)
    children: list[_Element] = field(default_factory=list)


class _Outline(HTMLParser):
    """Where each element of a page starts and ends (an element left open ends where its parent
    does, as HTML's optional end tags imply)."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=False)
        self.text = text
        self.lines = [0] + [m.end() for m in re.finditer("\n", text)]
        self.root = _Element("#document", 0, 0, len(text), len(text))
        self.open = [self.root]
        self.feed(text)
        self.close()
        for element in self.open[1:]:
            element.end = element.inner_end = len(text)

    def _offset(self) -> int:
        line, column = self.getpos()
        return self.lines[line - 1] + column

    def handle_starttag(self, tag: str, attrs: list) -> None:
        start = self._offset()
        written = self.get_starttag_text() or ""
        element = _Element(tag, start, start + len(written))
        self.open[-1].children.append(element)
        if tag in _VOID or written.endswith("/>"):
            element.end = element.inner_end = element.inner_start
        else:
            self.open.append(element)

    def handle_endtag(self, tag: str) -> None:
        start = self._offset()
        end = self.text.find(">", start) + 1 or len(self.text)
        names = [element.tag for element in self.open]
        if tag not in names[1:]:
            return  # an end tag nothing opened
        while self.open[-1].tag != tag:
            element = self.open.pop()
            element.end = element.inner_end = start
        element = self.open.pop()
        element.end, element.inner_end = end, start


# Attributes whose values a reader sees (service/attributes.py translates them)
_PEOPLE_ATTRIBUTE = re.compile(r"""<[^>]*\s(?:alt|title|placeholder|aria-label|label|abbr)\s*=\s*["']?[^\s"'>]""")


def _visible(text: str) -> bool:
    """Whether markup holds anything to translate: text, or an attribute a reader sees."""
    return bool(re.sub(r"<!--.*?-->|<![^>]*>|<[^>]*>|&nbsp;|\s", "", text, flags=re.DOTALL)) or bool(
        _PEOPLE_ATTRIBUTE.search(text))


class HtmlPage(Spans):
    """An HTML page as html: whole where it fits in a text, else its largest elements that fit and
    the runs between them. A part the service refuses (malformed markup: an element never closed,
    end tags crossed) is sent again as its elements and the text between, down to plain text, so
    that a page as browsers forgive it is translated but for the faulty tags."""

    fmt = "html"
    unit = "parts"
    errors = "xmlcharrefreplace"

    def __init__(self, name: str, data: bytes, kind: str, fuzzy: bool) -> None:
        super().__init__()
        declared = _CHARSET.search(data[:2048])
        encoding = declared.group(1).decode("ascii").lower() if declared else "utf-8"
        try:
            self.text, self.encoding = data.decode(encoding), encoding
        except (LookupError, UnicodeDecodeError):
            self.text, self.encoding = decoded(name, data)
        html = _HTML_TAG.search(self.text)
        # where each language attribute of its <html> stands: never in a part sent, so always edited
        self._langs = [(html.start() + m.start(2), html.start() + m.end(2)) for m in _LANG.finditer(html.group())] \
            if html else []
        self.source_language = self.text[slice(*self._langs[0])] if self._langs else ""
        self.root = _Outline(self.text).root
        self._parts(self.root, HTML_PART_CHARS)

    def _parts(self, element: _Element, limit: int, start: int | None = None, end: int | None = None,
               apart: bool = False) -> None:
        """The element whole where it fits in `limit`, else (or given `start` and `end` in it) its
        children that fit, each whole, and the runs of text and elements between them; `apart`:
        each child a part of its own."""
        if element.tag in _UNTRANSLATED_ELEMENTS:
            return
        if start is None and element.tag not in ("#document", "html") and element.end - element.start <= limit:
            self._add(element.start, element.end)
            return
        start = element.inner_start if start is None else start
        end = element.inner_end if end is None else end
        run = start
        for child in element.children:
            if child.start < start or child.end > end:
                continue
            # <html> is sent as what it holds: its start tag names the language, which is edited apart
            if (apart or child.end - child.start > limit or child.tag in _UNTRANSLATED_ELEMENTS or child.end - run > limit
                    or child.tag == "html"):
                self._add(run, child.start)
                self._parts(child, limit)
                run = child.end
        self._add(run, end)

    def _add(self, start: int, end: int) -> None:
        if end > start and _visible(self.text[start:end]):
            self.spans.append((start, end, self.text[start:end]))

    def finer(self, text: str) -> list[str]:
        """The parts that replace a part refused: its elements, each alone, and the runs between."""
        finer: list[str] = []
        for span in [span for span in self.spans if span[2] == text]:
            start, end, _ = span
            element = self._holding(self.root, start, end)
            if (element.start, element.end) == (start, end):
                start, end = element.inner_start, element.inner_end
            kept = len(self.spans)
            self._parts(element, HTML_PART_CHARS, start, end, apart=True)
            parts = self.spans[kept:]
            if parts == [span]:  # nothing finer
                del self.spans[kept:]
                continue
            self.spans.remove(span)
            finer += [part[2] for part in parts]
        return finer

    def _holding(self, element: _Element, start: int, end: int) -> _Element:
        """The element that is the text from `start` to `end`, or else the innermost that holds it."""
        for child in element.children:
            if (child.start, child.end) == (start, end):
                return child
            if child.start <= start and end <= child.end:
                return self._holding(child, start, end)
        return element

    def _edited(self, target: str, written: dict[int, str]) -> list[tuple[int, int, str]]:
        return [(start, end, target) for start, end in self._langs]  # the page says it is in the target language now


# --- Markdown

# What a Markdown file holds that is no prose: front matter (YAML between --- lines at its start) and
# fenced code (to its closing fence, or the end of the file).
_FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n.*?^(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.DOTALL | re.MULTILINE)
# a tag with attributes, what follows the space after its name (where a line break makes it one over lines)
_TAG_WITH_ATTRIBUTES = re.compile(r"<[A-Za-z][A-Za-z0-9-]*\s([^<>]*)>")
_LINE_BREAKS = re.compile(r"\s*\n\s*")
# CommonMark's HTML blocks that go on to a blank line: a paragraph that starts with a block element's tag
# (an <h3 align="center"> title, a <p> of badges) or whose first line is one whole tag is html, sent as html
_HTML_BLOCK = re.compile(
    r"[ ]{0,3}(?:</?(?:address|article|aside|blockquote|body|caption|center|dd|details|dialog|div|dl|dt|fieldset|"
    r"figcaption|figure|footer|form|h[1-6]|head|header|hr|html|legend|li|main|menu|nav|ol|p|section|summary|table|"
    r"tbody|td|tfoot|th|thead|title|tr|ul)(?=[\s/>]|$)|<[A-Za-z][A-Za-z0-9-]*(?:\s[^<>]*)?/?>[ \t]*(?:\r?\n|$)"
    r"|</[A-Za-z][A-Za-z0-9-]*\s*>[ \t]*(?:\r?\n|$))", re.IGNORECASE)
_LINE_END = re.compile(r"\r\n?|\n")
_BLANK_LINES = re.compile(r"(?:\r?\n[ \t]*)+\r?\n")
_LEADING_BLANK_LINES = re.compile(r"(?:[ \t]*\r?\n)*")
_LINK_DEFINITION = re.compile(r"^ {0,3}\[[^\]]+\]:[ \t]*\S+.*$")


@functools.lru_cache(maxsize=1)
def _block_parser():
    """CommonMark's block structure alone: inline markup is not read (200,000 "[" took 3.4 s so)."""
    from markdown_it import MarkdownIt  # only a Markdown file's reading needs it

    return MarkdownIt("commonmark").disable(["inline", "text_join"])


def _code(text: str, start: int) -> list[tuple[int, int]]:
    """Where `text`'s code blocks (fenced or indented) are from `start` on, as CommonMark reads them:
    markdown-it-py's, which knows a list item's own indentation (a fence indented under "- Capture:"
    is code, and so is a block indented four more than its item's text; a paragraph indented as its
    item's text is none)."""
    # where each line starts, its ends as markdown-it reads them (\r\n, \r or \n)
    offsets = [start] + [end.end() for end in _LINE_END.finditer(text, start)] + [len(text)]
    blocks = [token.map for token in _block_parser().parse(text[start:])
              if token.type in ("fence", "code_block") and token.map]
    return [(offsets[min(first, len(offsets) - 1)], offsets[min(last, len(offsets) - 1)]) for first, last in blocks]


class Markdown(_Prose):
    """A Markdown file's paragraphs (the service keeps their headings, lists, quotes and tables), but
    for its code (fenced or indented, in a list item too), front matter and link definitions; a
    paragraph that is an HTML block is sent as html."""

    def __init__(self, name: str, data: bytes, kind: str, fuzzy: bool) -> None:
        super().__init__()
        self.text, self.encoding = decoded(name, data)
        self.formats: dict[str, str] = {}  # a text sent in another format than the file's: an HTML block's
        front = _FRONT_MATTER.match(self.text)
        cursor = front.end() if front else 0
        for start, end in _code(self.text, cursor) + [(len(self.text), len(self.text))]:
            if end <= cursor:
                continue
            self._paragraphs(cursor, max(start, cursor))
            cursor = end

    def _paragraphs(self, start: int, end: int) -> None:
        """The paragraphs between `start` and `end`."""
        cursor = start
        for gap in list(_BLANK_LINES.finditer(self.text, start, end)) + [None]:
            stop = gap.start() if gap is not None else end
            block = self.text[cursor:stop]
            blank = _LEADING_BLANK_LINES.match(block).end()  # what the blank lines before it left
            if block.strip():
                self._block(cursor + blank, block[blank:].rstrip())
            if gap is not None:
                cursor = gap.end()

    def _block(self, start: int, block: str) -> None:
        lines = block.split("\n")
        if all(_LINK_DEFINITION.match(line.rstrip("\r")) for line in lines):
            return
        self._add(start, start + len(block))
        if _HTML_BLOCK.match(block):
            self.formats[self.spans[-1][2]] = "html"
        elif any("\n" in tag.group(1) for tag in _TAG_WITH_ATTRIBUTES.finditer(block)):
            # a tag written over lines (a store badge's <img src=… alt=…>) goes on one, its line's inline
            # markup then read as html: over lines, the service had cut it apart as text
            span_start, span_end, text = self.spans[-1]
            self.spans[-1] = (span_start, span_end, _TAG_WITH_ATTRIBUTES.sub(
                lambda m: _LINE_BREAKS.sub(" ", m.group()) if "\n" in m.group(1) else m.group(), text))
