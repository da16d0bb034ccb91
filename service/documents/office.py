"""Office documents, each a zip of XML parts: Word (.docx) and PowerPoint (.pptx), Excel (.xlsx;
`Workbook`, its shared strings), and OpenDocument text, presentations and spreadsheets (.odt, .odp,
.ods; `OpenDocument`).

Each paragraph of the text a reader sees (a Word document's body, headers, footers, footnotes,
endnotes and comments; a presentation's slides, notes, SmartArt and charts' titles; a workbook's
cells and comments) is one text. Its runs of differently formatted text go
to the service as XML elements, `<g id="3">bold words</g>`, and everything else in it (a tab, a
break, a picture, a field, a hyperlink, a bookmark) as an empty one, `<x id="4"/>`: the service
places them in the translation as it places any inline markup, so that the bold words' translation
comes back bold and a picture stays beside the words it stood beside. Adjacent runs formatted alike
(Word splits them for spelling marks and revision ids) are one. Every other byte of the file and of
each part stays as it was; a paragraph whose translation cannot be put back is left as it was.
"""
from __future__ import annotations

import bisect
import functools
import io
import re
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from xml.sax.saxutils import escape, unescape

from service.documents.files import UNREADABLE_ZIP, Failed, reads_as_xml, reads_as_xml_content, rewritten
from service.served import spliced

# The parts that hold the text a reader sees, and the prefix of their paragraphs' elements.
_WORD_PARTS = re.compile(r"word/(?:document|header\d*|footer\d*|footnotes|endnotes|comments)\.xml")
# a presentation's slides, notes, SmartArt (its data and the drawing PowerPoint shows) and charts' titles
_POWERPOINT_PARTS = re.compile(r"ppt/(?:slides/slide|notesSlides/notesSlide|diagrams/data|diagrams/drawing|charts/chart)"
                               r"\d+\.xml")
_LANGUAGE = {"w": re.compile(r'(<w:lang\b[^>]*?\bw:val=")[^"]*'), "a": re.compile(r'(<a:rPr\b[^>]*?\blang=")[^"]*')}
_END_LANGUAGE = re.compile(r'(<a:endParaRPr\b[^>]*?\blang=")[^"]*')
# A run's child element; a run's start tag's revision ids (Word gives each editing session its own)
_RUN_CHILD = re.compile(r"<((?:[\w.-]+:)?[\w.-]+)(?=[\s/>])[^>]*?(?:/>|>.*?</\1>)", re.DOTALL)
_PAGE_MARK = re.compile(r"<w:lastRenderedPageBreak\s*/>")
_REVISION_ID = re.compile(r'\s+w:rsid\w*="[^"]*"')
_MARKUP = re.compile(r'<g id="(\d+)">|</g>|<x id="(\d+)"\s*/>|[^<]+|<', re.DOTALL)


def _unrevised(head: str) -> str:
    return _REVISION_ID.sub("", head)


def _unescaped(text: str) -> str:
    """XML text's characters: its five named references read (`escape` writes three of them)."""
    return unescape(text, {"&quot;": '"', "&apos;": "'"})


def _unreadable_parts(texts: dict[str, str]) -> list[str]:
    """Each part of `texts` that reads as no XML, named, and taken out of `texts`: left as it was,
    and not read by the patterns that expect its elements closed."""
    unreadable = [part for part, text in texts.items() if not reads_as_xml(text.encode("utf-8"))]
    for part in unreadable:
        del texts[part]
    return [f"{part}: reads as no XML; left as it was" for part in unreadable]


def _zip_written(archive: zipfile.ZipFile, parts: dict[str, tuple[str, int]]) -> tuple[bytes, int]:
    """The archive with each part's new text, and the texts translated in those written: a part whose
    text would not read as XML is left as it was, and its translations with it."""
    data, unreadable = rewritten(archive, {part: text.encode("utf-8") for part, (text, _) in parts.items()})
    return data, sum(count for part, (_, count) in parts.items() if part not in unreadable)


@dataclass
class _Paragraph:
    part: str
    start: int                        # where its children start in the part's text
    end: int                          # where they end
    kept: str                         # its properties (w:pPr, a:pPr), first whatever is translated
    base: int                         # the item whose formatting its text outside any run element takes
    # ("text", what precedes its text: a run's start tag and properties (a hyperlink's start tag
    # first), its text, what follows its text) or ("other", the element, "", "")
    items: list[tuple[str, str, str, str]]
    text: str                         # what is sent
    closing: str = ""                 # its end properties (a:endParaRPr), last whatever is translated


@dataclass
class _Nested:
    """An element where it stands in its part, with the elements of its kind inside it."""

    start: int                        # its start tag's start
    inner_start: int                  # its content's start
    inner_end: int = -1               # its end tag's start
    end: int = -1
    children: list = field(default_factory=list)


def _nested(text: str, tags: re.Pattern[str], lo: int, hi: int, make: Callable[[int, int], _Nested]) -> list[_Nested]:
    """The elements whose tags `tags` finds in text[lo:hi] (group 1 "/" in an end tag, group 2 "/" in
    an empty one, which holds nothing), outermost first, each with those inside it."""
    roots: list[_Nested] = []
    open_: list[_Nested] = []
    for tag in tags.finditer(text, lo, hi):
        if tag.group(2):
            continue
        if not tag.group(1):
            node = make(tag.start(), tag.end())
            (open_[-1].children if open_ else roots).append(node)
            open_.append(node)
        elif open_:
            node = open_.pop()
            node.inner_end, node.end = tag.start(), tag.end()
    return [node for node in roots if node.end >= 0]


def _walk(nodes: list) -> list:
    return [found for node in nodes for found in [node, *_walk(node.children)]]


@dataclass
class _Held(_Nested):
    """A Word or PowerPoint paragraph, with the paragraphs its text boxes hold."""

    masked: str = ""                  # its content, each paragraph it holds as <w:p phrasal-held="\0k"/>
    paragraph: _Paragraph | None = None


class OfficeDocument:
    """A .docx or .pptx file's paragraphs, translated as markup (the module's docstring)."""

    fmt = "xml"
    unit = "paragraphs"
    marks = ""
    source_language = target_language = ""

    def __init__(self, name: str, data: bytes, kind: str, fuzzy: bool) -> None:
        self.prefix = "w" if kind == "word" else "a"
        parts = _WORD_PARTS if kind == "word" else _POWERPOINT_PARTS
        try:
            self.archive = zipfile.ZipFile(io.BytesIO(data))
            self.names = [info.filename for info in self.archive.infolist()]
            self.texts_of = {part: self.archive.read(part).decode("utf-8") for part in self.names if parts.fullmatch(part)}
        except UNREADABLE_ZIP as error:
            raise Failed(f"cannot read {name}: not a {'Word' if kind == 'word' else 'PowerPoint'} file ({error})") from None
        if not self.texts_of:
            raise Failed(f"cannot read {name}: it holds no {'word/document.xml' if kind == 'word' else 'slide'}")
        self.unwritable = _unreadable_parts(self.texts_of)
        p = self.prefix
        self._paragraph_tag = re.compile(rf"<(/?){p}:p(?=[\s>/])[^>]*?(/?)>")
        # NUL, which no part that reads as XML holds (those that do not are left): a document's own
        # `<w:p phrasal-held="7"/>` is no mark (it had been taken for one: an IndexError)
        self._held = re.compile(rf'<{p}:p phrasal-held="\x00(\d+)"/>')
        self._child = re.compile(rf"<{p}:pPr\b[^>]*?(?:/>|>.*?</{p}:pPr>)|<{p}:r\b[^>]*?(?:/>|>.*?</{p}:r>)"
                                 r"|<([\w.-]+:[\w.-]+)\b[^>]*?(?:/>|>.*?</\1>)", re.DOTALL)
        self._run = re.compile(rf"(<{p}:r\b[^>]*>)(\s*(?:<{p}:rPr\b[^>]*?(?:/>|>.*?</{p}:rPr>))?)(.*)</{p}:r>", re.DOTALL)
        self._t = re.compile(rf"<{p}:t(?:\s[^>]*)?(?:/>|>(.*?)</{p}:t>)", re.DOTALL)
        self._link = re.compile(rf"(<{p}:hyperlink\b[^>]*>)(.*)</{p}:hyperlink>", re.DOTALL)
        self.paragraphs: list[_Paragraph] = []
        self.roots: dict[str, list[_Held]] = {}
        for part, text in self.texts_of.items():
            self.roots[part] = self._nested(text)
            for node in _walk(self.roots[part]):
                node.paragraph = self._read(part, node.inner_start, node.masked)
                if node.paragraph is not None:
                    self.paragraphs.append(node.paragraph)
        self.texts = [paragraph.text for paragraph in self.paragraphs]

    def _nested(self, text: str) -> list[_Held]:
        """The part's paragraphs, each with those its text boxes hold (a shape's text in a run of it),
        and its content with each of those as `<w:p phrasal-held="\0k"/>`."""
        roots = _nested(text, self._paragraph_tag, 0, len(text), _Held)
        for node in _walk(roots):
            parts, cursor = [], node.inner_start
            for k, child in enumerate(node.children):
                parts += [text[cursor:child.start], f'<{self.prefix}:p phrasal-held="\x00{k}"/>']
                cursor = child.end
            node.masked = "".join(parts) + text[cursor:node.inner_end]
        return roots

    def _read(self, part: str, start: int, body: str) -> _Paragraph | None:
        """A paragraph's runs and other children, or None where it has no text to translate (or
        holds something its children's reading does not cover). A run holding a tab, a break or a
        page's mark beside its text is read as runs of one each, formatted alike; a hyperlink's runs
        of text are its one text, formatted as its first."""
        kept, closing, items, cursor = "", "", [], 0
        for child in self._child.finditer(body):
            if body[cursor:child.start()].strip():
                return None  # text outside any child: not a paragraph this reads
            cursor = child.end()
            element = child.group(0)
            if self.prefix and element.startswith(f"<{self.prefix}:pPr"):
                kept += element
                continue
            if self.prefix and element.startswith(f"<{self.prefix}:endParaRPr"):
                closing += element  # a paragraph's last child: no translation's text goes after it
                continue
            link = self._link.fullmatch(element)
            if link is not None:
                pieces = self._link_text(link.group(2))
                if pieces is None:
                    items.append(("other", element, "", ""))
                else:
                    head, text = pieces
                    items.append(("text", link.group(1) + head, text, self._run_end() + f"</{self.prefix}:hyperlink>"))
                continue
            pieces = self._run_pieces(element)
            if pieces is None:
                items.append(("other", element, "", ""))
                continue
            head, runs = pieces
            for kind, value in runs:
                if kind == "other":
                    items.append(("other", head + value + self._run_end(), "", ""))
                elif items and items[-1][0] == "text" and _unrevised(items[-1][1]) == _unrevised(head) \
                        and items[-1][3] == self._run_end():
                    items[-1] = ("text", items[-1][1], items[-1][2] + value, items[-1][3])  # formatted alike: one run
                else:
                    items.append(("text", head, value, self._run_end()))
        if body[cursor:].strip() or not any(kind == "text" and text.strip() for kind, _, text, _ in items):
            return None
        # The formatting most of its text has is the paragraph's own: that text goes as text, and the
        # rest as elements in it (each run an element, the service had left them empty and moved
        # their words: "<g>Open the </g><g>File</g>…" came back "<g>Das Dateimenü öffnen</g><g></g>…").
        plain = self._run_end()
        lengths: dict[str, int] = {}
        for kind, head, text, tail in items:
            if kind == "text" and tail == plain:
                lengths[head] = lengths.get(head, 0) + len(text)
        own = max(lengths, key=lambda head: lengths[head]) if lengths else None
        base = next((k for k, item in enumerate(items) if item[1] == own and item[3] == plain), -1)
        sent = "".join(escape(text) if kind == "text" and head == own and tail == plain
                       else f'<g id="{k}">{escape(text)}</g>' if kind == "text" else f'<x id="{k}"/>'
                       for k, (kind, head, text, tail) in enumerate(items))
        return _Paragraph(part, start, start + len(body), kept, base, items, sent, closing)

    def _run_pieces(self, element: str) -> tuple[str, list[tuple[str, str]]] | None:
        """A run's start tag and properties, and its content as pieces: ("text", the text of its
        text elements in a row) and ("other", a tab, a break, a mark); None for no run of these."""
        run = self._run.fullmatch(element)
        if run is None or self._run_end() in run.group(3):
            return None
        pieces: list[tuple[str, str]] = []
        cursor, content = 0, run.group(3)
        for child in _RUN_CHILD.finditer(content):
            if content[cursor:child.start()].strip():
                return None
            cursor = child.end()
            t = self._t.fullmatch(child.group(0))
            if t is None:
                pieces.append(("other", child.group(0)))
            elif pieces and pieces[-1][0] == "text":
                pieces[-1] = ("text", pieces[-1][1] + _unescaped(t.group(1) or ""))
            else:
                pieces.append(("text", _unescaped(t.group(1) or "")))
        if content[cursor:].strip():
            return None
        return run.group(1) + run.group(2), pieces

    def _link_text(self, inner: str) -> tuple[str, str] | None:
        """A hyperlink's runs of text only: the first's start tag and properties, and their text (a
        page's mark in them dropped); None where it holds anything else (a field, a picture)."""
        head, text, cursor = None, "", 0
        for child in self._child.finditer(inner):
            if inner[cursor:child.start()].strip():
                return None
            cursor = child.end()
            pieces = self._run_pieces(child.group(0))
            # where a page began, which Word writes again when it lays the text out, is no part of a link's text
            if pieces is None or any(kind != "text" and not _PAGE_MARK.fullmatch(value) for kind, value in pieces[1]):
                return None
            head = pieces[0] if head is None else head
            text += "".join(value for kind, value in pieces[1] if kind == "text")
        return (head, text) if head is not None and not inner[cursor:].strip() else None

    def _rebuilt(self, paragraph: _Paragraph, translation: str, target: str) -> str | None:
        """The paragraph's children with the translation's text in its runs, in the translation's
        order, its runs' language the target; None where the translation's markup is not the
        paragraph's."""
        items, base = paragraph.items, paragraph.base
        out, current, used = [paragraph.kept], None, set()
        for token in _MARKUP.finditer(translation):
            opening, standalone, value = token.group(1), token.group(2), token.group(0)
            if opening is not None:
                index = int(opening)
                if current is not None or index >= len(items) or items[index][0] != "text" or index == base:
                    return None
                current = index
                used.add(index)
            elif value == "</g>":
                if current is None:
                    return None
                current = None
            elif standalone is not None:
                index = int(standalone)
                if index >= len(items) or items[index][0] != "other" or index in used:
                    return None
                used.add(index)
                out.append(items[index][1])
            elif value == "<":
                return None
            else:  # text: in the run it stands in, else formatted as the paragraph's own text (or, where
                # it has none, a hyperlink's alone, as its first run of text)
                own = base if base >= 0 else next(k for k, item in enumerate(items) if item[0] == "text")
                out.append(self._text_run(items[current if current is not None else own], _unescaped(value), target))
        if current is not None:
            return None
        # an element the translation lost (a picture, a bookmark) is kept, at the end
        out += [element for k, (kind, element, _, _) in enumerate(items) if kind == "other" and k not in used]
        # its end properties say the language its text is in now, as its runs do
        return "".join(out) + _END_LANGUAGE.sub(lambda m: m.group(1) + target, paragraph.closing)

    def _run_end(self) -> str:
        return f"</{self.prefix}:r>" if self.prefix else "</r>"

    def _text_run(self, item: tuple[str, str, str, str], text: str, target: str) -> str:
        _, head, _, tail = item
        p = self.prefix
        # the run says it is in the target language now (Word's w:lang, PowerPoint's lang)
        head = _LANGUAGE[p].sub(lambda m: m.group(1) + target, head)
        space = ' xml:space="preserve"' if p == "w" else ""
        return f"{head}<{p}:t{space}>{escape(text)}</{p}:t>{tail}"

    def _rendered(self, text: str, node: _Held, translated: dict[str, str], target: str, done: list[int]) -> str:
        """The paragraph's content translated where its translation can be put back, the paragraphs
        its text boxes hold rendered so too, in their places."""
        children = [text[child.start:child.inner_start] + self._rendered(text, child, translated, target, done)
                    + text[child.inner_end:child.end] for child in node.children]
        content = None
        paragraph = node.paragraph
        translation = translated.get(paragraph.text) if paragraph is not None else None
        if translation is not None:
            content = self._rebuilt(paragraph, translation, target)
            if content is None:
                self.unwritable.append(f"{paragraph.text[:60]!r}: its translation does not hold the paragraph's "
                                       "markup; left as it was")
            else:
                done.append(1)
        return self._held.sub(lambda m: children[int(m.group(1))], node.masked if content is None else content)

    def written(self, translated: dict[str, str], mark: bool, target: str) -> tuple[bytes, int]:
        parts = {}
        for part, text in self.texts_of.items():
            done: list[int] = []
            edits = [(node.inner_start, node.inner_end, self._rendered(text, node, translated, target, done))
                     for node in self.roots.get(part, [])]
            if done:
                parts[part] = (spliced(text, edits), len(done))
        return _zip_written(self.archive, parts)


# OpenDocument's paragraph and heading tags (a self-closed one is an empty paragraph), any element's
# tag, and a spreadsheet cell's tag and the value type of one that holds a value of another type than
# text (its text shows the value).
_ODF_PARAGRAPH_TAG = re.compile(r"<(/?)text:(?:p|h)(?=[\s>/])[^>]*?(/?)>")
_ODF_TAG = re.compile(r"<(/?)[\w.-]+(?::[\w.-]+)?(?=[\s>/])[^>]*?(/?)>")
_ODF_CELL_TAG = re.compile(r"<(/?)table:table-cell(?=[\s>/])[^>]*?(/?)>")
_ODF_VALUE_TYPE = re.compile(r"""\boffice:value-type=["'](?!string["'])""")
_ODF_VISIBLE = re.compile(r"<[^>]*>|\s")
_HELD = re.compile(r'<x id="(\d+)"\s*/>')
_LETTER = re.compile(r"[^\W\d_]")
# A field, whose text the application writes (a page's number, a sheet's name, a date): held, not sent
_ODF_FIELD = re.compile(r"<text:(?:page-number|page-count|sheet-name|title|subject|date|time|file-name|author-name|"
                        r"author-initials|chapter|sequence|variable-get|user-field-get|bookmark-ref|reference-ref|"
                        r"word-count|character-count|paragraph-count)(?=[\s>])")


@dataclass
class _OdfParagraph(_Nested):
    held: list[tuple[int, int]] = field(default_factory=list)  # the elements holding its children (a note, a frame)
    text: str = ""                    # what is sent: its content, each element held an <x id="k"/>


class OpenDocument:
    """An OpenDocument text, presentation or spreadsheet (.odt, .odp, .ods): each paragraph and heading
    of content.xml, and of styles.xml's page headers and footers (.odt, .ods), whose text and inline
    elements (a span of other formatting, a link, a space run, a tab) are XML as the service reads it,
    sent as it is; an element holding paragraphs of its own (a footnote, a frame's text box, a comment)
    goes as an empty element the service places, its paragraphs translated each on its own, and so does
    a field (a page number, a date: the application writes its text). A spreadsheet cell's number,
    date or formula result is no text. Every other part of the file byte for
    byte; a paragraph whose translation would not read as XML is left as it was, and named."""

    fmt = "xml"
    unit = "paragraphs"
    marks = ""
    source_language = target_language = ""

    def __init__(self, name: str, data: bytes, kind: str, fuzzy: bool) -> None:
        try:
            self.archive = zipfile.ZipFile(io.BytesIO(data))
            self.parts = {"content.xml": self.archive.read("content.xml").decode("utf-8")}
            if kind in ("odt", "ods") and "styles.xml" in self.archive.namelist():
                self.parts["styles.xml"] = self.archive.read("styles.xml").decode("utf-8")
        except UNREADABLE_ZIP as error:
            raise Failed(f"cannot read {name}: not an OpenDocument file ({error})") from None
        self.unwritable = _unreadable_parts(self.parts)
        self.roots: dict[str, list[_OdfParagraph]] = {}
        self.texts: list[str] = []
        for part, text in self.parts.items():
            lo, hi = 0, len(text)
            if part == "styles.xml":  # its master pages' headers and footers, not its styles' samples
                region = re.search(r"<office:master-styles\b.*?</office:master-styles>", text, re.DOTALL)
                lo, hi = region.span() if region else (0, 0)
            values = [(cell.start, cell.end) for cell in _walk(_nested(text, _ODF_CELL_TAG, lo, hi, _Nested))
                      if cell.end >= 0 and _ODF_VALUE_TYPE.search(text, cell.start, cell.inner_start)]
            value_starts = [start for start, _ in values]
            self.roots[part] = _nested(text, _ODF_PARAGRAPH_TAG, lo, hi, _OdfParagraph)
            for paragraph in _walk(self.roots[part]):
                k = bisect.bisect_right(value_starts, paragraph.start) - 1  # the last value cell starting before it
                if k < 0 or paragraph.start >= values[k][1]:
                    paragraph.text = self._sent(text, paragraph)
                    if _LETTER.search(_ODF_VISIBLE.sub("", _HELD.sub("", paragraph.text))):  # words, not a date's commas
                        self.texts.append(paragraph.text)
                    else:
                        paragraph.text = ""

    @staticmethod
    def _sent(text: str, paragraph: _OdfParagraph) -> str:
        """The paragraph's content, each of its elements that holds a paragraph of its children, or is a
        field, as `<x id="k"/>`."""
        elements = _nested(text, _ODF_TAG, paragraph.inner_start, paragraph.inner_end, _Nested)
        held = [(element.start, element.end) for element in elements
                if any(element.start <= child.start < element.end for child in paragraph.children)
                or _ODF_FIELD.match(text, element.start)]
        paragraph.held = held
        out, cursor = [], paragraph.inner_start
        for k, (start, end) in enumerate(held):
            out += [text[cursor:start], f'<x id="{k}"/>']
            cursor = end
        return "".join(out) + text[cursor:paragraph.inner_end]

    def _rendered(self, text: str, lo: int, hi: int, paragraphs: list[_OdfParagraph], translated: dict[str, str]) -> tuple[str, int]:
        """text[lo:hi] with each paragraph in it translated, its elements held written back in the
        translation where the service placed them; and how many were."""
        out, cursor, count = [], lo, 0
        for paragraph in paragraphs:
            if not lo <= paragraph.start < hi:
                continue
            held = []
            for start, end in paragraph.held:
                inner, done = self._rendered(text, start, end, paragraph.children, translated)
                held.append(inner)
                count += done
            content = None
            translation = translated.get(paragraph.text) if paragraph.text else None
            if translation is not None:
                placed = [int(m.group(1)) for m in _HELD.finditer(translation)]
                if sorted(placed) == list(range(len(held))):
                    content = _HELD.sub(lambda m: held[int(m.group(1))], translation)
                if content is None or not reads_as_xml_content(content):
                    self.unwritable.append(f"{paragraph.text[:60]!r}: its translation would not read as XML; "
                                           "left as it was")
                    content = None
                else:
                    count += 1
            if content is None:  # as it was, but for its children's translations
                parts, at = [], paragraph.inner_start
                for (start, end), inner in zip(paragraph.held, held):
                    parts += [text[at:start], inner]
                    at = end
                content = "".join(parts) + text[at:paragraph.inner_end]
            out += [text[cursor:paragraph.inner_start], content]
            cursor = paragraph.inner_end
        return "".join(out) + text[cursor:hi], count

    def written(self, translated: dict[str, str], mark: bool, target: str) -> tuple[bytes, int]:
        parts = {}
        for part, text in self.parts.items():
            rendered, done = self._rendered(text, 0, len(text), self.roots[part], translated)
            if done:
                parts[part] = (rendered, done)
        return _zip_written(self.archive, parts)


_WORKBOOK_PARTS = re.compile(r"xl/sharedStrings\.xml|xl/worksheets/sheet\d+\.xml|xl/comments\d+\.xml")
# The prefix a part's root element gives SpreadsheetML's elements: none (Excel, openpyxl, POI) or one
# (`<x:sst xmlns:x=...>`: what the .NET Open XML SDK writes).
_WORKBOOK_ROOT = re.compile(r"(?:<\?.*?\?>|<!--.*?-->|\s)*<(?:([\w.-]+):)?[\w.-]+", re.DOTALL)


@functools.lru_cache(maxsize=8)
def _workbook_patterns(prefix: str) -> dict[str, re.Pattern]:
    """The patterns of a workbook part whose elements carry `prefix` ("" or "x")."""
    q = f"{prefix}:" if prefix else ""
    return {
        "comment": re.compile(rf"<{q}text>(.*?)</{q}text>", re.DOTALL),
        "shared": re.compile(rf"<{q}si>(.*?)</{q}si>", re.DOTALL),
        "inline": re.compile(rf"<{q}is>(.*?)</{q}is>", re.DOTALL),
        "plain": re.compile(rf"<{q}t(?:\s[^>]*)?>(.*?)</{q}t>", re.DOTALL),
        "phonetic": re.compile(rf"<({q}rPh|{q}phoneticPr)\b[^>]*?(?:/>|>.*?</\1>)", re.DOTALL),
        "child": re.compile(rf"<{q}r\b[^>]*?(?:/>|>.*?</{q}r>)|<({q}rPh|{q}phoneticPr)\b[^>]*?(?:/>|>.*?</\1>)", re.DOTALL),
        "run": re.compile(rf"(<{q}r\b[^>]*>)(\s*(?:<{q}rPr\b[^>]*?(?:/>|>.*?</{q}rPr>))?)(.*)</{q}r>", re.DOTALL),
        "t": re.compile(rf"<{q}t(?:\s[^>]*)?(?:/>|>(.*?)</{q}t>)", re.DOTALL),
    }


class Workbook(OfficeDocument):
    """An Excel workbook (.xlsx): its shared strings and its sheets' inline strings (what tools that
    stream a workbook write: `<c t="inlineStr"><is>`), the text of every cell that holds text
    (numbers and formulas are neither), and its cells' comments. A string of runs of different formatting is read as a Word
    paragraph's runs are; a plain one is its text."""

    def __init__(self, name: str, data: bytes, kind: str, fuzzy: bool) -> None:
        self.prefix = ""
        try:
            self.archive = zipfile.ZipFile(io.BytesIO(data))
            self.texts_of = {info.filename: self.archive.read(info).decode("utf-8") for info in self.archive.infolist()
                             if _WORKBOOK_PARTS.fullmatch(info.filename)}
        except UNREADABLE_ZIP as error:
            raise Failed(f"cannot read {name}: not an Excel workbook ({error})") from None
        self.unwritable = _unreadable_parts(self.texts_of)
        self._link = re.compile(r"(?!)")  # a workbook's strings hold no hyperlinks, nor text boxes
        self._held = re.compile(r"(?!)")
        self.paragraphs = []
        for part, strings in self.texts_of.items():
            root = _WORKBOOK_ROOT.match(strings)
            # what the reading of runs (OfficeDocument._read) matches, for this part's prefix
            self.prefix = root.group(1) or "" if root is not None else ""
            patterns = _workbook_patterns(self.prefix)
            self._child, self._run, self._t = patterns["child"], patterns["run"], patterns["t"]
            strings_of = patterns["shared" if part == "xl/sharedStrings.xml" else
                                  "comment" if part.startswith("xl/comments") else "inline"]
            for match in strings_of.finditer(strings):
                body, start = match.group(1), match.start(1)
                # one text (beside its phonetic reading's properties, which stay): sent as it is, its element kept
                plain = patterns["plain"].fullmatch(patterns["phonetic"].sub("", body).strip())
                if plain is not None:
                    element = patterns["plain"].search(body)
                    text = _unescaped(plain.group(1))
                    if text.strip():
                        head = element.group(0)[:element.group(0).index(">") + 1]
                        end = element.group(0)[element.group(0).rindex("</"):]
                        self.paragraphs.append(_Paragraph(part, start + element.start(), start + element.end(),
                                                          "", 0, [("text", head, text, end)], escape(text)))
                    continue
                paragraph = self._read(part, start, body)
                if paragraph is not None:
                    self.paragraphs.append(paragraph)
        if "xl/sharedStrings.xml" not in self.texts_of and not self.paragraphs and not self.unwritable:
            raise Failed(f"cannot read {name}: not an Excel workbook with text (no shared or inline strings)")
        self.texts = [paragraph.text for paragraph in self.paragraphs]
        self.roots = {part: [_Held(p.start, p.start, p.end, p.end, [], text[p.start:p.end], p)
                             for p in self.paragraphs if p.part == part] for part, text in self.texts_of.items()}

    def _text_run(self, item: tuple[str, str, str, str], text: str, target: str) -> str:
        _, head, _, tail = item
        q = tail[2:tail.index(":") + 1] if ":" in tail else ""  # the part's prefix, as its elements carry it
        element = f'<{q}t xml:space="preserve">{escape(text)}</{q}t>'
        return element if tail == f"</{q}t>" else f"{head}{element}{tail}"  # a plain string, or a run
