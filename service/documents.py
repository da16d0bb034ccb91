"""The files localisers translate, read and written back with their untranslated texts translated:
gettext catalogs (.po, .pot), XLIFF 1.2 and 2.x (.xlf, .xliff; service/xliff.py), Qt Linguist
(.ts; service/linguist.py), plain text (.txt), Markdown (.md), HTML pages (.html, .htm), SubRip
subtitles (.srt), and the string resources of
programs: JSON (.json: i18next's, ARB's, Chrome's, any object of strings; .arb), Android's
strings.xml (.xml), Java's properties (.properties), Apple's strings (.strings), .NET's
resources (.resx) and YAML (.yml, .yaml: Rails', Symfony's, Hugo's).

What translates the texts is given (`Translate`): the service over HTTP for the pre-translation
client (service/pretranslate.py), the translator in process for the document APIs (LibreTranslate's
translate_file, DeepL's v2/document; service/document_store.py). Every byte of a file but the
translations written into it stays as it was: a catalog's other lines, an XLIFF file's markup, a
text's blank lines and line breaks, a subtitle's numbers and timings.

- A catalog's untranslated messages (and, with `fuzzy`, those marked fuzzy) get a translation marked
  fuzzy, gettext's sign of one for a translator to review; a plural message its singular's
  translation as form 0 and its plural's as every other form its Plural-Forms header counts.
- An XLIFF file's and a .ts file's untranslated segments are marked as their tools mark one to review
  (service/xliff.py, service/linguist.py).
- A text file's paragraphs (text between blank lines) and a subtitle's text are translated each as
  one text, its line breaks kept by the service's layout; so are a Markdown file's (its headings,
  lists, quotes and tables kept by the service), but for its code (fenced or indented), front
  matter and link definitions.
- An HTML page is translated as html, the service translating it block by block (its scripts,
  styles and preformatted text kept); a page longer than a text may be is sent as its largest
  elements that fit, each whole.
- A string resource file is in the source language: every string of it is translated (JSON: every
  string value but those under ARB's `@` keys, `@@locale` set to the target; Android: every
  `<string>`, `<plurals>` item and `<string-array>` item not marked translatable="false"; a
  properties, strings, resx or YAML file: every string value; Rails' top key, the locale, renamed
  to the target), each read from its escapes and written back in them.

A text the translator refuses (`Refused` naming a text: too long, malformed markup) stays as it was
and is named in `Translated.refused`; what stops the whole file is `Failed`, one line saying why.
"""
from __future__ import annotations

import bisect
import json
import os
import re
import tempfile
from html import unescape
from html.parser import HTMLParser
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import polib

from service import linguist, xliff

BATCH = 32

# What a document is, by its name's suffix.
FORMATS = {".po": "gettext", ".pot": "gettext", ".xlf": "xliff", ".xliff": "xliff", ".ts": "linguist",
           ".txt": "text", ".md": "markdown", ".markdown": "markdown", ".html": "html", ".htm": "html", ".srt": "subtitles", ".json": "json", ".arb": "json", ".xml": "android",
           ".properties": "properties", ".strings": "apple", ".resx": "resx",
           ".yml": "yaml", ".yaml": "yaml"}
MEDIA_TYPES = {"gettext": "text/x-gettext-translation", "xliff": "application/xliff+xml",
               "linguist": "application/xml", "text": "text/plain", "markdown": "text/markdown", "html": "text/html", "subtitles": "application/x-subrip",
               "json": "application/json", "android": "application/xml", "properties": "text/x-java-properties",
               "apple": "text/plain", "resx": "application/xml",
               "yaml": "application/yaml"}


class Failed(Exception):
    """What stops a file's translation: one line saying why."""


class NoTarget(Failed):
    """A file that names no target language, given none."""


class Refused(Exception):
    """The translator turned texts away: its message, and the field it names ("text" or "text.N": one
    of the texts; any other, the request itself: the pair, the model, the glossary)."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


# texts, source language ("auto": the translator's choice), target language, format ("text" or
# "xml") -> their translations, in order; raises Refused or Failed.
Translate = Callable[[list[str], str, str, str], list[str]]


@dataclass
class Translated:
    data: bytes
    count: int                  # messages, segments, paragraphs or subtitles that got a translation
    unit: str                   # which of those
    marked: str                 # how the translations are marked for review: "fuzzy", "for review", "" (not)
    source: str
    target: str
    characters: int = 0         # characters of the texts sent
    refused: list[str] = field(default_factory=list)  # each text left as it was, and why
    skipped: int = 0            # XLIFF units segmented again (seg-source), left as they are


def format_of(name: str) -> str | None:
    """The document format a file name's suffix says, or None for one this module cannot read."""
    return FORMATS.get(os.path.splitext(name)[1].lower())


def language(code: str) -> str:
    """A locale's language: "de" for de_DE, de-AT, de@euro, de.UTF-8."""
    return re.split(r"[_@.-]", code.strip())[0].lower()


class _Texts:
    """The distinct texts of a file translated BATCH a request, those refused sent again in parts
    where the document has finer ones (an HTML page's elements), else named."""

    def __init__(self, translate: Translate, source: str, target: str, fmt: str,
                 progress: Callable[[int, int], None] | None,
                 finer: Callable[[str], list[str]] | None = None) -> None:
        self.translate, self.source, self.target, self.fmt = translate, source, target, fmt
        self.progress, self.finer = progress, finer
        self.refused: list[str] = []
        self.characters = 0

    def __call__(self, texts: Sequence[str]) -> dict[str, str]:
        """Each distinct text's translation; a text the translator refuses is named in `refused` and
        left out, a refusal of the request itself (the pair, the model, the glossary) is Failed."""
        translated: dict[str, str] = {}
        distinct = list(dict.fromkeys(texts))  # a plural's forms beyond the first share one translation
        self.characters += sum(len(text) for text in distinct)
        for start in range(0, len(distinct), BATCH):
            batch = distinct[start:start + BATCH]
            try:
                translated.update(zip(batch, self.translate(batch, self.source, self.target, self.fmt)))
            except Refused as refused:
                if len(batch) == 1:
                    self._refused(batch[0], refused, translated)
                else:
                    for text in batch:  # which of them: each alone
                        try:
                            translated[text] = self.translate([text], self.source, self.target, self.fmt)[0]
                        except Refused as alone:
                            self._refused(text, alone, translated)
            if self.progress is not None:
                self.progress(min(start + BATCH, len(distinct)), len(distinct))
        return translated

    def _refused(self, text: str, refused: Refused, translated: dict[str, str]) -> None:
        """A text refused alone: sent again in parts where its document has finer ones, else named."""
        if refused.field.split(".")[0] != "text":  # the request's: every one would be refused
            raise Failed(str(refused)) from None
        parts = self.finer(text) if self.finer is not None else []
        if parts:
            translated.update(self(parts))
        else:
            self.refused.append(f"{text[:60]!r}: {refused}")


def translate_document(name: str, data: bytes, translate: Translate, source: str | None, target: str | None, *,
                       fuzzy: bool = False, mark: bool = True, default_source: str = "auto",
                       detect: Callable[[list[str]], str | None] | None = None,
                       progress: Callable[[int, int], None] | None = None) -> Translated:
    """The file `name` (its suffix says its format) whose bytes are `data`, its untranslated texts
    translated from `source` (None: the language the file names, else `default_source`; "auto" with
    `detect`: the language `detect` finds in its texts) into `target` (None: the one the file names).
    `mark`: marked for review as the format's tools mark a translation; `fuzzy`: a catalog's fuzzy
    messages translated again too. `progress(done, total)` after each batch of texts."""
    kind = format_of(name)
    if kind is None:
        raise Failed(f"{os.path.splitext(name)[1] or name!r} files cannot be translated; "
                     f"formats: {', '.join(FORMATS)}")
    reader = {"gettext": _Gettext, "xliff": _Xml, "linguist": _Xml, "text": _Plain, "markdown": _Markdown, "html": _Html,
              "subtitles": _Subtitles,
              "json": _Json, "android": _Android, "properties": _Properties, "apple": _Apple,
              "resx": _Resx, "yaml": _Yaml}[kind]
    document = reader(name, data, kind, fuzzy)
    source = language(source or document.source_language or default_source)
    named = language(document.target_language)
    target = language(target or named)
    if not target:
        raise NoTarget(f"{name} names no target language"
                       + (" (its Language header is empty)" if kind == "gettext" else ""))
    if named and named != target:
        raise Failed(f"{name} is a translation into {named!r}, not {target!r}")
    if source == "auto" and detect is not None and document.texts:
        detected = detect(document.texts)
        if detected is None:
            raise Failed(f"the language of {name} cannot be detected: give the source language")
        source = detected
    if source == target:
        raise Failed(f"{name}: the source and the target language are both {target!r}")
    texts = _Texts(translate, source, target, document.fmt, progress, getattr(document, "finer", None))
    written, count = document.written(texts(document.texts), mark, target)
    refused = texts.refused + getattr(document, "unwritable", [])
    if count == 0 and refused:
        raise Failed(f"nothing in {name} could be translated: {refused[0]}")
    return Translated(written, count, document.unit, document.marks if mark else "", source, target, texts.characters,
                      refused, getattr(document, "skipped", 0))


# --- gettext catalogs

_PLURALS = re.compile(r"nplurals\s*=\s*(\d+)")
# gettext's tools write a string on lines of at most this many columns, quotes included.
WIDTH = 79


def untranslated(entry: polib.POEntry, fuzzy: bool) -> bool:
    """Whether the message is one to translate: nobody translated it (or, with `fuzzy`, only a tool
    did: it is marked fuzzy)."""
    if entry.obsolete or not entry.msgid:
        return False
    if entry.fuzzy:
        return fuzzy
    return entry.msgstr == "" and all(form == "" for form in entry.msgstr_plural.values())


def plural_forms(catalog: polib.POFile) -> int:
    """How many forms a plural message has in the catalog's language (its Plural-Forms header; 2, as
    English and German have, where it names none)."""
    match = _PLURALS.search(catalog.metadata.get("Plural-Forms", ""))
    return max(1, int(match.group(1))) if match else 2


def string_lines(keyword: str, value: str) -> list[str]:
    """`keyword "value"` as msgmerge writes it: on one line where it fits and holds no line break
    but at its end; else an empty first line and the value on lines broken after each line break
    and, to fit, after a space (checked against msgcat on random Latin-script strings: identical but
    where Unicode's line breaking forbids a break after a space, "— —"; and CJK text, which gettext
    measures in double columns)."""
    escaped = polib.escape(value)
    if len(keyword) + len(escaped) + 3 <= WIDTH and "\n" not in value[:-1]:
        return [f'{keyword} "{escaped}"']
    lines = [f'{keyword} ""']
    for piece in re.findall(r"[^\n]*\n|[^\n]+", value):
        line = ""
        for word in re.findall(r"[^ ]* *", polib.escape(piece)):
            if line.strip() and len(line) + len(word) + 2 > WIDTH:
                lines.append(f'"{line}"')
                line = ""
            line += word
        if line:
            lines.append(f'"{line}"')
    # a string with nowhere to break it stays beside its keyword, however long
    return [f"{keyword} {lines[1]}"] if len(lines) == 2 and not re.search(r" [^ ]", escaped) else lines


_PARAGRAPH_BREAK = re.compile(r"((?:\r?\n)(?:[ \t]*\r?\n)+)")


def _spliced(text: str, entries: list[polib.POEntry]) -> str | None:
    """`text` (a catalog as written) with each of `entries` given its translation and flags where
    it stands, every other line as it was: polib writes a whole catalog again with its own line
    breaks, a diff of every long message. None where the catalog's messages are not one paragraph
    each (then polib writes it)."""
    newline = "\r\n" if "\r\n" in text else "\n"
    blocks = _PARAGRAPH_BREAK.split(text)  # paragraphs at even places, the blank lines between at odd ones
    where: dict[tuple[str | None, str], int] = {}
    for index in range(0, len(blocks), 2):
        # a paragraph of comments or an obsolete message reads as none; the line break added makes
        # it no file's name (polib reads a string naming a file as that file)
        try:
            parsed = [entry for entry in polib.pofile(blocks[index] + "\n") if not entry.obsolete]
        except (OSError, ValueError):  # a message's lines apart by a blank line: the paragraph is no whole message
            return None
        if len(parsed) > 1:
            return None
        if parsed:
            where[(parsed[0].msgctxt, parsed[0].msgid)] = index
    for entry in entries:
        index = where.get((entry.msgctxt, entry.msgid))
        if index is None:
            return None
        body = blocks[index].rstrip("\r\n")
        tail = blocks[index][len(body):]  # the file's last line break, in its last paragraph
        lines = body.split(newline)
        first = next(k for k, line in enumerate(lines) if line.startswith("msgstr"))
        strings = (string_lines("msgstr", entry.msgstr) if not entry.msgid_plural else
                   [line for form in sorted(entry.msgstr_plural)
                    for line in string_lines(f"msgstr[{form}]", entry.msgstr_plural[form])])
        head = lines[:first]
        if "fuzzy" in entry.flags:
            flagged = next((k for k, line in enumerate(head) if line.startswith("#,")), None)
            if flagged is None:
                at = next(k for k, line in enumerate(head) if line.startswith(("#|", "msgctxt", "msgid")))
                head.insert(at, "#, fuzzy")
            elif "fuzzy" not in [flag.strip() for flag in head[flagged][2:].split(",")]:
                head[flagged] = "#, fuzzy," + head[flagged][2:]
        blocks[index] = newline.join(head + strings) + tail
    return "".join(blocks)


# A line of a message's strings (a keyword and a string, or a string going on), obsolete (`#~`) or a
# previous one (`#|`) too, and what it must be: the keyword and one whole string.
_STRING_LINE = re.compile(r'^(?:#[~|]\s*)?(?:(?:msgctxt|msgid|msgid_plural|msgstr(?:\[\d+\])?)\s|")')
_WHOLE_STRING = re.compile(r'^(?:#[~|]\s*)?(?:(?:msgctxt|msgid|msgid_plural|msgstr(?:\[\d+\])?)\s+)?"(?:[^"\\]|\\.)*"\s*$')
# Where a message starts (`msgid`, an obsolete one's `#~ msgid`), and a header: an empty msgid right
# before its msgstr.
_MSGID = re.compile(r"^(?:#~\s*)?msgid\s", re.MULTILINE)
_MSGSTR = re.compile(r"^(?:#~\s*)?msgstr", re.MULTILINE)
_HEADER = re.compile(r'^msgid\s+""\s*\n(?:#~\s*)?msgstr\s', re.MULTILINE)


def read_catalog(name: str, data: bytes) -> polib.POFile:
    """The catalog whose bytes are `data`, every message of it as written: polib reads past some
    malformed lines, an unterminated string losing its last character ("Offen" read "Offe") or its
    message, and a catalog written back so would lose them, so such a file is refused, naming the line."""
    # polib reads a catalog's text that happens to name a file as that file: it reads a file of ours
    with tempfile.TemporaryDirectory(prefix="phrasal-catalog-") as folder:
        path = os.path.join(folder, "catalog.po")
        with open(path, "wb") as file:
            file.write(data)
        try:
            catalog = polib.pofile(path)  # in the charset its header names
        except (OSError, UnicodeDecodeError, ValueError, LookupError) as error:
            raise Failed(f"cannot read {name}: {str(error).replace(path, name)}") from None
    keywords = data.decode("latin-1")  # gettext's keywords are ASCII in any charset
    for number, line in enumerate(keywords.splitlines(), 1):
        if _STRING_LINE.match(line) and not _WHOLE_STRING.match(line):
            raise Failed(f"cannot read {name}: line {number} holds no whole string; check it with msgfmt -c")
    starts = [match.start() for match in _MSGID.finditer(keywords)]
    for start, end in zip(starts, starts[1:] + [len(keywords)]):
        if not _MSGSTR.search(keywords, start, end):  # msgfmt refuses it; polib reads an empty translation
            line = keywords.count("\n", 0, start) + 1
            raise Failed(f"cannot read {name}: the message on line {line} has no msgstr; check it with msgfmt -c")
    written = len(starts) - len(_HEADER.findall(keywords))
    if len(catalog) != written:
        raise Failed(f"cannot read {name}: {written} messages written, {len(catalog)} readable; check it with msgfmt -c")
    return catalog


class _Gettext:
    unit, fmt, marks = "messages", "text", "fuzzy"
    source_language = ""
    unwritable: list[str]

    def __init__(self, name: str, data: bytes, kind: str, fuzzy: bool) -> None:
        self.name, self.data = name, data
        self.catalog = read_catalog(name, data)
        self.unwritable = []
        self.target_language = self.catalog.metadata.get("Language", "")
        self.entries = [entry for entry in self.catalog if untranslated(entry, fuzzy)]
        # Each text to translate: (entry, plural form or None for msgstr, text).
        forms = plural_forms(self.catalog)
        self.slots: list[tuple[polib.POEntry, int | None, str]] = []
        for entry in self.entries:
            if entry.msgid_plural:
                self.slots += [(entry, 0, entry.msgid)] + [(entry, k, entry.msgid_plural) for k in range(1, forms)]
            else:
                self.slots.append((entry, None, entry.msgid))
        self.texts = [text for _, _, text in self.slots]

    def written(self, translated: dict[str, str], mark: bool, target: str) -> tuple[bytes, int]:
        done = []
        for entry in self.entries:
            mine = [(form, translated.get(text)) for owner, form, text in self.slots if owner is entry]
            if any(translation is None for _, translation in mine):
                continue
            if not all(_encodable(translation, self.catalog.encoding) for _, translation in mine):
                self.unwritable.append(f"{entry.msgid[:60]!r}: the catalog's charset {self.catalog.encoding} cannot "
                                       "hold its translation (msgconv -t UTF-8 converts the catalog)")
                continue
            for form, translation in mine:
                if form is None:
                    entry.msgstr = translation
                else:
                    entry.msgstr_plural[form] = translation
            if mark and "fuzzy" not in entry.flags:
                entry.flags.insert(0, "fuzzy")  # first, as msgmerge writes it
            done.append(entry)
        catalog = self.catalog
        spliced = _spliced(self.data.decode(catalog.encoding), done) if self.target_language else None
        if not self.target_language:
            catalog.metadata["Language"] = target  # a template's translation names its language, as msginit's does
        return (spliced if spliced is not None else str(catalog)).encode(catalog.encoding), len(done)


# --- XLIFF and Qt Linguist

class _Xml:
    def __init__(self, name: str, data: bytes, kind: str, fuzzy: bool) -> None:
        self.reader = linguist if kind == "linguist" else xliff
        try:
            self.document = self.reader.read(data)
        except xliff.FileInvalid as error:
            raise Failed(f"cannot read {name}: {error}") from None
        self.unit = "messages" if kind == "linguist" else "segments"
        # XLIFF's sources are markup (inline codes); a .ts file's are plain text written as XML
        self.fmt = "text" if kind == "linguist" else "xml"
        self.source_language = self.document.source_language
        self.target_language = self.document.target_language
        self.skipped = getattr(self.document, "skipped", 0)
        self.texts = [segment.source for segment in self.document.segments]
        self.marks = "for review"

    def written(self, translated: dict[str, str], mark: bool, target: str) -> tuple[bytes, int]:
        try:
            text, done = self.reader.written(self.document, translated, mark)
        except xliff.FileInvalid as error:
            raise Failed(str(error)) from None
        # a character the file's encoding lacks is written as XML writes it, a character reference
        return text.encode(self.document.encoding, errors="xmlcharrefreplace"), done


# --- plain text and subtitles

def _decoded(name: str, data: bytes) -> tuple[str, str]:
    """A text file's text and its encoding: UTF-8 (with its byte order mark kept) or UTF-16 with one."""
    for bom, encoding in ((b"\xef\xbb\xbf", "utf-8-sig"), (b"\xff\xfe", "utf-16"), (b"\xfe\xff", "utf-16")):
        if data.startswith(bom):
            break
    else:
        encoding = "utf-8"
    try:
        return data.decode(encoding), encoding
    except UnicodeDecodeError as error:
        raise Failed(f"cannot read {name}: not {encoding.upper()} text (byte {error.start})") from None


class _Blocks:
    """A text in blocks between blank lines, some of them (`_translatable`) translated."""

    marks = ""
    fmt = "text"
    source_language = target_language = ""

    def __init__(self, name: str, data: bytes, kind: str, fuzzy: bool) -> None:
        self.text, self.encoding = _decoded(name, data)
        self.newline = "\r\n" if "\r\n" in self.text else "\n"
        # text blocks at even places, the blank lines between at odd ones
        self.blocks = _PARAGRAPH_BREAK.split(self.text)
        self.places: list[tuple[int, str, str, str]] = []  # (block, what precedes the text, text, what follows it)
        for index in range(0, len(self.blocks), 2):
            found = self._translatable(self.blocks[index])
            if found is not None:
                head, body, tail = found
                self.places.append((index, head, body.replace("\r\n", "\n"), tail))
        self.texts = [text for _, _, text, _ in self.places]

    def _translatable(self, block: str) -> tuple[str, str, str] | None:
        raise NotImplementedError

    def written(self, translated: dict[str, str], mark: bool, target: str) -> tuple[bytes, int]:
        blocks, done = list(self.blocks), 0
        for index, head, text, tail in self.places:
            translation = translated.get(text)
            if translation is not None:
                blocks[index] = head + translation.replace("\n", self.newline) + tail
                done += 1
        return "".join(blocks).encode(self.encoding), done


class _Plain(_Blocks):
    unit = "paragraphs"

    def _translatable(self, block: str) -> tuple[str, str, str] | None:
        body = block.strip()
        if not body:
            return None
        start = block.index(body)
        return block[:start], body, block[start + len(body):]


_TIMING = re.compile(r"^\s*\d+\s*\r?\n[^\n]*-->[^\n]*\r?\n")


class _Subtitles(_Blocks):
    unit = "subtitles"

    def _translatable(self, block: str) -> tuple[str, str, str] | None:
        # A cue: its number, its timing line, its text; a block that is none stays as it is.
        timing = _TIMING.match(block)
        if timing is None:
            return None
        body = block[timing.end():].rstrip()
        if not body.strip():
            return None
        return block[:timing.end()], body, block[timing.end() + len(body):]



# --- string resources

class _Spans:
    """A text with some spans of it translated: (start, end, text sent) each, written back by `_put`."""

    marks = ""
    unit = "strings"
    target_language = ""
    errors = "strict"  # what to do with a character the file's encoding lacks: escape it in `_put`

    def __init__(self) -> None:
        self.spans: list[tuple[int, int, str]] = []
        self.text, self.encoding = "", "utf-8"

    @property
    def texts(self) -> list[str]:
        return [text for _, _, text in self.spans]

    def _put(self, translation: str, start: int, end: int) -> str:
        raise NotImplementedError

    def _edited(self, target: str) -> list[tuple[int, int, str]]:
        return []  # other edits than translations (ARB's locale)

    def written(self, translated: dict[str, str], mark: bool, target: str) -> tuple[bytes, int]:
        edits = [(start, end, self._put(translated[text], start, end)) for start, end, text in self.spans
                 if text in translated] + self._edited(target)
        out, cursor = [], 0
        for start, end, replacement in sorted(edits):
            out += [self.text[cursor:start], replacement]
            cursor = end
        out.append(self.text[cursor:])
        translations = sum(1 for _, _, text in self.spans if text in translated)
        return "".join(out).encode(self.encoding, errors=self.errors), translations


_SURROGATE = re.compile("[\ud800-\udfff]")
_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\]:,]')


class _Json(_Spans):
    """Every string value of a JSON file, in any nesting; ARB's metadata (keys from `@`) left."""

    fmt = "text"

    def __init__(self, name: str, data: bytes, kind: str, fuzzy: bool) -> None:
        super().__init__()
        self.text, self.encoding = _decoded(name, data)
        try:
            document = json.loads(self.text)
        except ValueError as error:
            raise Failed(f"cannot read {name}: not JSON: {error}") from None
        if not isinstance(document, (dict, list)):
            raise Failed(f"cannot read {name}: not a JSON object or list of strings")
        self.source_language = document.get("@@locale", "") if isinstance(document, dict) else ""
        self.locale: tuple[int, int] | None = None
        # Each open container: whether it is an object, the key just read in it, whether it lies under
        # ARB metadata.
        stack: list[list] = []
        tokens = list(_JSON_TOKEN.finditer(self.text))
        for index, token in enumerate(tokens):
            value = token.group(0)
            if value in "{[":
                stack.append([value == "{", None, bool(stack) and self._metadata(stack[-1])])
            elif value in "}]":
                stack.pop()
            elif value.startswith('"'):
                following = tokens[index + 1].group(0) if index + 1 < len(tokens) else ""
                if stack[-1][0] and following == ":":
                    stack[-1][1] = json.loads(value)  # a key
                elif len(stack) == 1 and stack[-1][1] == "@@locale":
                    self.locale = (token.start(), token.end())
                elif not self._metadata(stack[-1]):
                    string = json.loads(value)
                    if string.strip():
                        self.spans.append((token.start(), token.end(), string))
        # a file that writes its other characters \u-escaped (an ASCII one holding such escapes) stays so;
        # one in English is ASCII for want of any other character and gets the translations' as they are
        self.ascii = self.text.isascii() and re.search(r"\\u(?!00[0-7])[0-9a-fA-F]{4}", self.text) is not None

    @staticmethod
    def _metadata(container: list) -> bool:
        """Whether what the container holds now is ARB's metadata: it lies under a key from `@`, or
        is the value of one."""
        is_object, key, under = container
        return under or (is_object and (key or "").startswith("@"))

    def _put(self, translation: str, start: int, end: int) -> str:
        # half a character (JSON lets "\ud800" stand alone) can only be written escaped
        return json.dumps(translation, ensure_ascii=self.ascii or _SURROGATE.search(translation) is not None)

    def _edited(self, target: str) -> list[tuple[int, int, str]]:
        return [(*self.locale, json.dumps(target))] if self.locale is not None else []


_ANDROID_RESOURCES = re.compile(r"<resources\b")
_ANDROID_ELEMENT = re.compile(r"<(string|plurals|string-array)\b([^>]*?)(?:/>|>(.*?)</\1\s*>)", re.DOTALL)
_ANDROID_ITEM = re.compile(r"<item\b[^>]*>(.*?)</item\s*>", re.DOTALL)
_UNTRANSLATABLE = re.compile(r"""\btranslatable\s*=\s*["']false["']""")
# A quote in an Android string's text that is not escaped: aapt refuses the file
_BARE_QUOTE = re.compile(r"""(?<!\\)(['"])""")
_BARE_DOUBLE_QUOTE = re.compile(r"""(?<!\\)(")""")


class _XmlResources(_Spans):
    """String resources in XML: their values sent as XML, a character the file's encoding lacks
    written as a character reference."""

    fmt = "xml"
    source_language = ""
    errors = "xmlcharrefreplace"

    def _read(self, name: str, data: bytes, root: re.Pattern, what: str) -> None:
        try:
            self.text, self.encoding = xliff.decoded(data)
            xliff.checked(self.text, self.encoding)
        except xliff.FileInvalid as error:
            raise Failed(f"cannot read {name}: {error}") from None
        if not root.search(self.text):
            raise Failed(f"cannot read {name}: not {what}")


class _Android(_XmlResources):
    """Android's strings.xml: each string, plural item and array item's content, sent as markup (its
    <b>, <xliff:g> kept); the quotes a translation brings escaped as aapt wants them."""

    def __init__(self, name: str, data: bytes, kind: str, fuzzy: bool) -> None:
        super().__init__()
        self._read(name, data, _ANDROID_RESOURCES, "Android string resources (no <resources>)")
        for element in _ANDROID_ELEMENT.finditer(self.text):
            if _UNTRANSLATABLE.search(element.group(2)) or element.group(3) is None:
                continue
            if element.group(1) == "string":
                self._add(element.start(3), element.group(3))
            else:
                for item in _ANDROID_ITEM.finditer(element.group(3)):
                    self._add(element.start(3) + item.start(1), item.group(1))

    def _add(self, start: int, content: str) -> None:
        body = content.strip()
        if not body or body.startswith("@"):  # "@string/other" refers to a resource
            return
        start += content.index(body)
        if len(body) > 1 and body[0] == body[-1] == '"':  # a quoted string: its quotes are no text
            start, body = start + 1, body[1:-1]
        self.spans.append((start, start + len(body), body))

    def _put(self, translation: str, start: int, end: int) -> str:
        quoted = self.text[start - 1] == self.text[end] == '"'
        bare = _BARE_DOUBLE_QUOTE if quoted else _BARE_QUOTE  # a quoted string holds apostrophes as they are
        parts = re.split(r"(<[^>]*>)", translation)  # tags' attributes keep their quotes
        return "".join(part if part.startswith("<") else bare.sub(r"\\\1", part) for part in parts)



# A line of a properties file that holds a value: its key (escapes and all) up to the separator
# (`=`, `:` or blanks), and its value to the end of the line, on lines going on after a line that
# ends in an odd number of backslashes.
_PROPERTY = re.compile(r"^[ \t\f]*(?![#!])((?:[^\s=:\\]|\\.)+)([ \t\f]*[=:]?[ \t\f]*)((?:[^\r\n\\]|\\\r?\n|\\.)*)\r?$",
                       re.MULTILINE)
_PROPERTY_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|\r?\n[ \t\f]*|.)", re.DOTALL)
_MESSAGE_FORMAT = re.compile(r"\{\d+[},]")
_LONE_APOSTROPHE = re.compile(r"(?<!')'(?!')")
_PROPERTY_CHARACTERS = {"n": "\n", "t": "\t", "r": "\r", "f": "\f"}


class _Properties(_Spans):
    """Java's properties: each value read from its escapes (`\\u00e9`, `\\n`, a line going on) and
    written back on one line in them; a file in ASCII gets its other characters `\\u`-escaped, as
    Java before 9 reads properties in ISO-8859-1."""

    fmt = "text"
    source_language = ""

    def __init__(self, name: str, data: bytes, kind: str, fuzzy: bool) -> None:
        super().__init__()
        try:
            self.text, self.encoding = _decoded(name, data)
        except Failed:
            self.text, self.encoding = data.decode("latin-1"), "latin-1"  # Java's own reading
        self.ascii = self.text.isascii()
        for match in _PROPERTY.finditer(self.text):
            value = _PROPERTY_ESCAPE.sub(self._character, match.group(3))
            if value.strip():
                self.spans.append((match.start(3), match.end(3), value))

    @staticmethod
    def _character(escape: re.Match) -> str:
        code = escape.group(1)
        if code[0] == "u" and len(code) == 5:
            return chr(int(code[1:], 16))
        if code[0] in "\r\n":
            return ""  # a line going on
        return _PROPERTY_CHARACTERS.get(code, code)

    def _put(self, translation: str, start: int, end: int) -> str:
        if _MESSAGE_FORMAT.search(self.text, start, end):
            # a MessageFormat pattern (it has an argument {0}) reads a lone apostrophe as a quote
            translation = _LONE_APOSTROPHE.sub("''", translation)
        out = []
        for index, char in enumerate(translation):
            if char == "\\":
                out.append("\\\\")
            elif char in "\n\t\r\f":
                out.append("\\" + {"\n": "n", "\t": "t", "\r": "r", "\f": "f"}[char])
            elif char == " " and index == 0:
                out.append("\\ ")  # a value's leading blanks are the separator's
            elif (self.ascii and ord(char) > 126) or not _encodable(char, self.encoding):
                out.append("".join(f"\\u{unit:04x}" for unit in _utf16_units(char)))
            else:
                out.append(char)
        return "".join(out)


def _encodable(text: str, encoding: str) -> bool:
    try:
        text.encode(encoding)
    except UnicodeEncodeError:
        return False
    return True


def _utf16_units(char: str) -> list[int]:
    encoded = char.encode("utf-16-be")
    return [int.from_bytes(encoded[k:k + 2], "big") for k in range(0, len(encoded), 2)]


# An Apple strings file's entry, `"key" = "value";`, and the escapes of its strings.
_APPLE_ENTRY = re.compile(r'("(?:[^"\\]|\\.)*"|[A-Za-z0-9_.]+)\s*=\s*"((?:[^"\\]|\\.)*)"\s*;', re.DOTALL)
_APPLE_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.DOTALL)
_APPLE_ESCAPE = re.compile(r"\\(U[0-9a-fA-F]{4}|u[0-9a-fA-F]{4}|.)", re.DOTALL)
_APPLE_CHARACTERS = {"n": "\n", "t": "\t", "r": "\r", "0": "\0"}


class _Apple(_Spans):
    """Apple's .strings: each entry's value read from its escapes (`\\"`, `\\n`, `\\U00e9`) and
    written back in them; comments left (a comment's text is no entry)."""

    fmt = "text"
    source_language = ""

    def __init__(self, name: str, data: bytes, kind: str, fuzzy: bool) -> None:
        super().__init__()
        self.text, self.encoding = _decoded(name, data)
        comments = [(m.start(), m.end()) for m in _APPLE_COMMENT.finditer(self.text)]
        for entry in _APPLE_ENTRY.finditer(self.text):
            if any(start <= entry.start() < end for start, end in comments):
                continue
            value = _APPLE_ESCAPE.sub(self._character, entry.group(2))
            if value.strip():
                self.spans.append((entry.start(2), entry.end(2), value))

    @staticmethod
    def _character(escape: re.Match) -> str:
        code = escape.group(1)
        if len(code) == 5:
            return chr(int(code[1:], 16))
        return _APPLE_CHARACTERS.get(code, code)

    def _put(self, translation: str, start: int, end: int) -> str:
        return (translation.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
                .replace("\r", "\\r"))



# --- HTML pages

HTML_PART_CHARS = 4000  # the most characters of a page sent as one text (the service's max_chars is 10,000)
_VOID = frozenset("area base br col embed hr img input link meta param source track wbr".split())
_UNTRANSLATED_ELEMENTS = frozenset(("script", "style", "template", "svg", "math"))
_HTML_LANG = re.compile(r"""(<html\b[^>]*\blang\s*=\s*["']?)([A-Za-z-]+)""", re.IGNORECASE)
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


class _Html(_Spans):
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
            self.text, self.encoding = _decoded(name, data)
        language = _HTML_LANG.search(self.text)
        self.source_language = language.group(2) if language else ""
        self._lang = (language.start(2), language.end(2)) if language else None
        self.root = _Outline(self.text).root
        self._parts(self.root, HTML_PART_CHARS)

    def _parts(self, element: _Element, limit: int, start: int | None = None, end: int | None = None,
               apart: bool = False) -> None:
        """The element whole where it fits in `limit`, else (or given `start` and `end` in it) its
        children that fit, each whole, and the runs of text and elements between them; `apart`:
        each child a part of its own."""
        if element.tag in _UNTRANSLATED_ELEMENTS:
            return
        if start is None and element.tag != "#document" and element.end - element.start <= limit:
            self._add(element.start, element.end)
            return
        start = element.inner_start if start is None else start
        end = element.inner_end if end is None else end
        run = start
        for child in element.children:
            if child.start < start or child.end > end:
                continue
            if apart or child.end - child.start > limit or child.tag in _UNTRANSLATED_ELEMENTS or child.end - run > limit:
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

    def written(self, translated: dict[str, str], mark: bool, target: str) -> tuple[bytes, int]:
        self._target = target
        return super().written(translated, mark, target)

    def _put(self, translation: str, start: int, end: int) -> str:
        if self._lang is not None and start <= self._lang[0] < end:  # the page whole: its <html> with it
            return _HTML_LANG.sub(lambda m: m.group(1) + self._target, translation, count=1)
        return translation

    def _edited(self, target: str) -> list[tuple[int, int, str]]:
        # the page says it is in the target language now
        if self._lang is None or any(start <= self._lang[0] < end for start, end, _ in self.spans):
            return []
        return [(*self._lang, target)]



# --- Markdown

# What a Markdown file holds that is no prose: front matter (YAML between --- lines at its start) and
# fenced code (to its closing fence, or the end of the file).
_FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n.*?^(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.DOTALL | re.MULTILINE)
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})[^\n]*\n.*?(?:^ {0,3}\1[`~]*[ \t]*(?:\r?\n|\Z)|\Z)", re.DOTALL | re.MULTILINE)
_BLANK_LINES = re.compile(r"(?:\r?\n[ \t]*)+\r?\n")
_LEADING_BLANK_LINES = re.compile(r"(?:[ \t]*\r?\n)*")
_LIST_ITEM = re.compile(r"^ {0,3}(?:[-*+]|\d{1,9}[.)])[ \t]")
_LINK_DEFINITION = re.compile(r"^ {0,3}\[[^\]]+\]:[ \t]*\S+.*$")


class _Markdown(_Spans):
    fmt = "text"
    source_language = ""
    unit = "paragraphs"

    def __init__(self, name: str, data: bytes, kind: str, fuzzy: bool) -> None:
        super().__init__()
        self.text, self.encoding = _decoded(name, data)
        code = [m.span() for m in _FENCE.finditer(self.text)]
        front = _FRONT_MATTER.match(self.text)
        cursor, previous = (front.end() if front else 0), ""
        for start, end in code + [(len(self.text), len(self.text))]:
            if end <= cursor:
                continue
            previous = self._paragraphs(cursor, max(start, cursor), previous)
            cursor = end

    def _paragraphs(self, start: int, end: int, previous: str) -> str:
        """The paragraphs between `start` and `end`; the last one's text (a list's indented paragraph
        is no code)."""
        cursor = start
        for gap in list(_BLANK_LINES.finditer(self.text, start, end)) + [None]:
            stop = gap.start() if gap is not None else end
            block = self.text[cursor:stop]
            blank = _LEADING_BLANK_LINES.match(block).end()  # what the blank lines before it left
            if block.strip():
                self._block(cursor + blank, block[blank:].rstrip(), previous)
                previous = block[blank:]
            if gap is not None:
                cursor = gap.end()
        return previous

    def _block(self, start: int, block: str, previous: str) -> None:
        lines = block.split("\n")
        if all(line.startswith(("    ", "\t")) for line in lines if line.strip()) and not _LIST_ITEM.match(previous):
            return  # indented code
        if all(_LINK_DEFINITION.match(line.rstrip("\r")) for line in lines):
            return
        self.spans.append((start, start + len(block), block.replace("\r\n", "\n")))

    def _put(self, translation: str, start: int, end: int) -> str:
        return translation.replace("\n", "\r\n") if "\r\n" in self.text[start:end] else translation



# --- .NET resources

_RESX_ROOT = re.compile(r"<root\b")
_RESX_DATA = re.compile(r"<data\b([^>]*)>(.*?)</data\s*>", re.DOTALL)
_RESX_VALUE = re.compile(r"<value>(.*?)</value\s*>", re.DOTALL)
_RESX_NAME = re.compile(r"""\bname\s*=\s*["']([^"']*)["']""")
_RESX_TYPED = re.compile(r"""\b(?:type|mimetype)\s*=""")


class _Resx(_XmlResources):
    """.NET's .resx: each string resource's value (not a file reference, an image or another typed
    value, nor the Windows Forms designer's `>>` entries), sent as XML text and written back escaped."""

    def __init__(self, name: str, data: bytes, kind: str, fuzzy: bool) -> None:
        super().__init__()
        self._read(name, data, _RESX_ROOT, ".NET resources (no <root>)")
        for data_element in _RESX_DATA.finditer(self.text):
            attributes = data_element.group(1)
            named = _RESX_NAME.search(attributes)
            if _RESX_TYPED.search(attributes) or (named and unescape(named.group(1)).startswith(">>")):
                continue
            value = _RESX_VALUE.search(data_element.group(2))
            if value is not None and value.group(1).strip():
                start = data_element.start(2) + value.start(1)
                self.spans.append((start, start + len(value.group(1)), value.group(1)))

    def _put(self, translation: str, start: int, end: int) -> str:
        return translation



# --- YAML

# A line of a YAML file's block mappings and sequences: its indentation, a sequence's dash, a key and
# what follows the key's colon (or the dash). Flow collections ({…}, […]), anchors, aliases and tags
# are left as written: string resources hardly use them.
_YAML_LINE = re.compile(r"""^(?P<indent> *)(?P<dash>- +)?(?:(?P<key>"(?:[^"\\]|\\.)*"|'(?:[^']|'')*'|[^\s#'"{}\[\]&*!|>%@`-][^#]*?|-[^\s#][^#]*?) *:(?= |$))? *(?P<value>.*?)\s*$""")
_YAML_NOT_TEXT = re.compile(r"""^(?:~|null|Null|NULL|true|True|TRUE|false|False|FALSE|yes|no|on|off|[-+]?(?:\d[\d_]*(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+|0x[0-9a-fA-F]+|\.inf|\.nan))$""")
_YAML_PLAIN_UNSAFE = re.compile(r"""^[\s\-?:,\[\]{}#&*!|>'"%@`]|: | #|:$|\s$""")
_YAML_ESCAPES = {"n": "\n", "t": "\t", "\\": "\\", '"': '"', "/": "/", "0": "\0", " ": " ", "r": "\r"}
_YAML_DOCUMENT_MARK = re.compile(r"(?:---|\.\.\.)(?:[ \t]|$)")
_LOCALE_KEY = re.compile(r"^[a-z]{2,3}(?:[-_][A-Za-z]{2,4})?$")
# A quoted scalar's rest, to its closing quote (on its line: `.match(value, 1)`; or on any line).
_YAML_CLOSING = {'"': re.compile(r'(?:[^"\\]|\\.)*"', re.DOTALL), "'": re.compile(r"(?:[^']|'')*'(?!')", re.DOTALL)}


def _deeper_lines_end(lines: list[str], number: int, depth: int) -> int:
    """The number of the first line from `number` on that is neither blank nor indented `depth` or deeper."""
    while number < len(lines) and (not lines[number].strip() or len(lines[number]) - len(lines[number].lstrip(" ")) >= depth):
        number += 1
    return number


class _Yaml(_Spans):
    """Each string scalar of a YAML file's mappings and sequences: plain, single- or double-quoted,
    or a literal or folded block; written back in the same style (a plain one quoted where its
    translation would read otherwise). Rails' files have the locale as their one top key: it is
    renamed to the target."""

    fmt = "text"

    def __init__(self, name: str, data: bytes, kind: str, fuzzy: bool) -> None:
        super().__init__()
        self.text, self.encoding = _decoded(name, data)
        self.styles: dict[int, tuple[str, str]] = {}  # span start -> (style, a block's indentation)
        self.locale: tuple[int, int] | None = None
        self.source_language = ""
        lines = self.text.splitlines(keepends=True)
        offsets = [0]
        for line in lines:
            offsets.append(offsets[-1] + len(line))
        top_keys, top_lines = [], 0
        number = 0
        while number < len(lines):
            line = lines[number].rstrip("\r\n")
            start = offsets[number]
            number += 1
            if not line.strip() or line.lstrip().startswith("#") or _YAML_DOCUMENT_MARK.match(line):
                continue
            top_lines += not line.startswith(" ")
            match = _YAML_LINE.match(line)
            if match is None:
                continue
            indent, value = len(match.group("indent")), match.group("value")
            if match.group("key") is not None and indent == 0 and not match.group("dash"):
                top_keys.append((match.group("key"), start + match.start("key"), start + match.end("key"), value))
            if match.group("key") is None and not match.group("dash"):
                number = _deeper_lines_end(lines, number, indent)  # a plain scalar's lines going on
                continue
            at = start + match.start("value")
            closing = _YAML_CLOSING.get(value[:1])
            if closing is not None and not closing.match(value, 1):  # a quoted scalar on several lines: left
                ended = closing.match(self.text, at + 1)
                number = bisect.bisect_right(offsets, ended.end() - 1) if ended else len(lines)  # the line after
                continue
            if value[:1] in "|>":  # a block: the lines indented deeper than its key's
                if not re.fullmatch(r"[|>][-+]?\d?\s*(?:#.*)?", value):
                    continue
                body_start = offsets[number]
                inner = None
                while number < len(lines):
                    following = lines[number].rstrip("\r\n")
                    depth = len(following) - len(following.lstrip(" "))
                    if following.strip() and depth <= indent + (len(match.group("dash") or "")):
                        break
                    if following.strip() and inner is None:
                        inner = depth
                    number += 1
                body_end = offsets[number]
                while body_end > body_start and self.text[body_end - 1] in "\r\n ":
                    body_end -= 1
                if inner is None:
                    continue
                block = self.text[body_start:body_end]
                content = "\n".join(l[inner:] for l in block.replace("\r\n", "\n").split("\n"))
                if value.startswith(">"):  # folded: its lines are one line, a blank line a line break
                    content = re.sub(r"(?<!\n)\n(?!\n)", " ", content)
                if content.strip():
                    self._add(body_start, body_end, content, "block", " " * inner)
            elif value.startswith('"'):
                quoted = re.match(r'"((?:[^"\\]|\\.)*)"\s*(?:#.*)?$', value)
                if quoted:
                    content = re.sub(r"\\(u[0-9a-fA-F]{4}|.)", lambda m: chr(int(m.group(1)[1:], 16))
                                     if len(m.group(1)) == 5 else _YAML_ESCAPES.get(m.group(1), m.group(0)), quoted.group(1))
                    self._add(at, at + len(quoted.group(1)) + 2, content, "double", "")
            elif value.startswith("'"):
                quoted = re.match(r"'((?:[^']|'')*)'\s*(?:#.*)?$", value)
                if quoted:
                    self._add(at, at + len(quoted.group(1)) + 2, quoted.group(1).replace("''", "'"), "single", "")
            elif value and value[0] not in "{[&*!#" and not self._goes_on(lines, number, indent):
                plain = re.split(r"\s+#", value)[0].rstrip()
                if plain and not _YAML_NOT_TEXT.match(plain):
                    self._add(at, at + len(plain), plain, "plain", "")
        if top_lines == 1 and len(top_keys) == 1 and not top_keys[0][3] and _LOCALE_KEY.match(top_keys[0][0]):
            self.source_language = top_keys[0][0]
            self.locale = top_keys[0][1:3]

    @staticmethod
    def _goes_on(lines: list[str], number: int, indent: int) -> bool:
        """Whether a plain scalar goes on, on the next lines (indented deeper, neither a key nor a
        dash): only its first line would be translated, so it is left."""
        for line in lines[number:]:
            if line.strip() and not line.lstrip().startswith("#"):
                depth = len(line) - len(line.lstrip(" "))
                match = _YAML_LINE.match(line.rstrip("\r\n"))
                return depth > indent and match is not None and match.group("key") is None and not match.group("dash")
        return False

    def _add(self, start: int, end: int, text: str, style: str, indent: str) -> None:
        self.spans.append((start, end, text))
        self.styles[start] = (style, indent)

    def _put(self, translation: str, start: int, end: int) -> str:
        style, indent = self.styles[start]
        if style == "block":
            newline = "\r\n" if "\r\n" in self.text[start:end] else "\n"
            return newline.join(indent + line if line else line for line in translation.split("\n"))
        if style == "single" and "\n" not in translation:
            return "'" + translation.replace("'", "''") + "'"
        if style == "plain" and "\n" not in translation and not _YAML_PLAIN_UNSAFE.search(translation) \
                and not _YAML_NOT_TEXT.match(translation):
            return translation
        return json.dumps(translation, ensure_ascii=False)  # a JSON string is a double-quoted YAML one

    def _edited(self, target: str) -> list[tuple[int, int, str]]:
        return [(*self.locale, target)] if self.locale is not None else []
