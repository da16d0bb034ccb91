"""The files localisers translate, read and written back with their untranslated texts translated:
gettext catalogs (.po, .pot), XLIFF 1.2 and 2.x (.xlf, .xliff; service/documents/xliff.py), Qt Linguist
(.ts; service/documents/linguist.py), plain text (.txt), Markdown (.md), HTML pages (.html, .htm), Word,
PowerPoint, Excel and OpenDocument files (.docx, .pptx, .xlsx, .odt, .odp, .ods; service/documents/office.py), EPUB
books (.epub; service/documents/epub.py), SubRip and WebVTT subtitles (.srt, .vtt), and the string resources of
programs: JSON (.json: i18next's, ARB's, Chrome's, any object of strings; .arb), Android's
strings.xml (.xml), Java's properties (.properties), Apple's strings (.strings), .NET's
resources (.resx, and UWP's .resw), YAML (.yml, .yaml: Rails', Symfony's, Hugo's), Xcode's String Catalogs (.xcstrings;
service/documents/xcstrings.py), Apple's strings dictionaries (.stringsdict; service/documents/stringsdict.py),
Fluent (.ftl; service/documents/fluent.py), TOML (.toml: Hugo's, go-i18n's; service/documents/toml.py), PHP
arrays (.php: Laravel's) and string tables (.csv, .tsv: Godot's, Unity's; service/documents/table.py).

What translates the texts is given (`Translate`): the service over HTTP for the pre-translation
client (service/pretranslate.py), the translator in process for the document APIs (LibreTranslate's
translate_file, DeepL's v2/document; service/document_store.py). Every byte of a file but the
translations written into it stays as it was: a catalog's other lines, an XLIFF file's markup, a
text's blank lines and line breaks, a subtitle's numbers and timings.

- A catalog's untranslated messages (and, with `fuzzy`, those marked fuzzy) get a translation marked
  fuzzy, gettext's sign of one for a translator to review; a plural message its singular's
  translation as form 0 and its plural's as every other form its Plural-Forms header counts.
- An XLIFF file's and a .ts file's untranslated segments are marked as their tools mark one to review
  (service/documents/bilingual.py).
- A text file's paragraphs (text between blank lines) and a subtitle's text are translated each as
  one text, its line breaks kept by the service's layout; so are a Markdown file's (its headings,
  lists, quotes and tables kept by the service), but for its code (fenced or indented), front
  matter and link definitions.
- An HTML page is translated as html, the service translating it block by block (its scripts,
  styles and preformatted text kept); a page longer than a text may be is sent as its largest
  elements that fit, each whole; so is each content document of an EPUB book.
- A string resource file is in the source language: every string of it is translated (JSON: every
  string value but those under ARB's `@` keys, `@@locale` set to the target; Android: every
  `<string>`, `<plurals>` item and `<string-array>` item not marked translatable="false"; a
  properties, strings, resx or YAML file: every string value; Rails' top key, the locale, renamed
  to the target), each read from its escapes and written back in them. A plural there gets each
  category the target's language has and the source lacks (service/documents/plurals.py).
- A file of every language (a String Catalog, a string table) gets what the target's part lacks:
  `for_target(target, source)` says which before its texts are read.

A text the translator refuses (`Refused` naming a text: too long, malformed markup) stays as it was
and is named in `Translated.refused`; what stops the whole file is `Failed`, one line saying why.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from service.documents.bilingual import Bilingual
from service.documents.epub import Epub
from service.documents.fluent import FluentFile
from service.documents.files import TOO_LONG, Failed, NoTarget, Refused, Translate
from service.documents.gettext import Catalog
from service.documents.office import OfficeDocument, OpenDocument, Workbook
from service.documents.prose import HtmlPage, Markdown, PlainText, Subtitles, WebVtt
from service.documents.resources import AppleStrings, Android, Json, PhpArray, Properties, Resx, Yaml
from service.documents.stringsdict import StringsDict
from service.documents.table import StringTable
from service.documents.toml import TomlFile
from service.documents.xcstrings import StringCatalog

__all__ = ["BATCH", "FORMATS", "MEDIA_TYPES", "Failed", "NoTarget", "Refused", "Translate", "Translated", "format_of",
           "language", "translate_document"]

BATCH = 32

# What a document is, by its name's suffix; what reads it; what it is served as.
FORMATS = {".po": "gettext", ".pot": "gettext", ".xlf": "xliff", ".xliff": "xliff", ".sdlxliff": "xliff", ".ts": "linguist",
           ".txt": "text", ".md": "markdown", ".markdown": "markdown", ".html": "html", ".htm": "html",
           ".srt": "subtitles", ".vtt": "webvtt", ".json": "json", ".arb": "json", ".xml": "android", ".properties": "properties",
           ".strings": "apple", ".resx": "resx", ".resw": "resx", ".yml": "yaml", ".yaml": "yaml", ".docx": "word", ".pptx": "powerpoint",
           ".odt": "odt", ".odp": "odp", ".ods": "ods", ".xlsx": "excel", ".epub": "epub", ".xcstrings": "xcstrings",
           ".ftl": "fluent", ".php": "php", ".stringsdict": "stringsdict", ".toml": "toml", ".csv": "table", ".tsv": "table"}
READERS = {"gettext": Catalog, "xliff": Bilingual, "linguist": Bilingual, "text": PlainText, "markdown": Markdown,
           "html": HtmlPage, "subtitles": Subtitles, "webvtt": WebVtt, "json": Json, "android": Android, "properties": Properties,
           "apple": AppleStrings, "resx": Resx, "yaml": Yaml, "word": OfficeDocument, "powerpoint": OfficeDocument,
           "odt": OpenDocument, "odp": OpenDocument, "ods": OpenDocument, "excel": Workbook, "epub": Epub,
           "xcstrings": StringCatalog, "fluent": FluentFile, "php": PhpArray, "stringsdict": StringsDict, "toml": TomlFile, "table": StringTable}
MEDIA_TYPES = {"gettext": "text/x-gettext-translation", "xliff": "application/xliff+xml", "linguist": "application/xml",
               "text": "text/plain", "markdown": "text/markdown", "html": "text/html", "subtitles": "application/x-subrip", "webvtt": "text/vtt",
               "json": "application/json", "android": "application/xml", "properties": "text/x-java-properties",
               "apple": "text/plain", "resx": "application/xml", "yaml": "application/yaml",
               "word": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
               "powerpoint": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
               "odt": "application/vnd.oasis.opendocument.text",
               "odp": "application/vnd.oasis.opendocument.presentation",
               "ods": "application/vnd.oasis.opendocument.spreadsheet",
               "excel": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
               "epub": "application/epub+zip", "xcstrings": "application/json",
               "fluent": "text/plain", "php": "application/x-httpd-php", "stringsdict": "application/x-plist", "toml": "application/toml", "table": "text/csv"}


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
    skipped: int = 0            # left as they are by the file's say (`skipped_as` says which)
    skipped_as: str = ""        # "units segmented again (seg-source)" (XLIFF), "strings marked not to translate or stale"


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
                 finer: Callable[[str], list[str]] | None = None, formats: dict[str, str] | None = None) -> None:
        self.translate, self.source, self.target, self.fmt = translate, source, target, fmt
        self.progress, self.finer = progress, finer
        self.formats = formats or {}  # a text sent in another format than the document's
        self.refused: list[str] = []
        self.characters = 0
        self._finer = False  # translating a refused text's finer parts: within the batch that refused it

    def __call__(self, texts: Sequence[str]) -> dict[str, str]:
        """Each distinct text's translation; a text the translator refuses is named in `refused` and
        left out, a refusal of the request itself (the pair, the model, the glossary) is Failed."""
        translated: dict[str, str] = {}
        distinct = list(dict.fromkeys(texts))  # a plural's forms beyond the first share one translation
        self.characters += sum(len(text) for text in distinct)
        for start in range(0, len(distinct), BATCH):
            batch = distinct[start:start + BATCH]
            for fmt in dict.fromkeys(self.formats.get(text, self.fmt) for text in batch):  # one request a format
                sent = [text for text in batch if self.formats.get(text, self.fmt) == fmt]
                try:
                    translated.update(zip(sent, self.translate(sent, self.source, self.target, fmt)))
                except Refused as refused:
                    if len(sent) == 1:
                        self._refused(sent[0], refused, translated)
                    else:
                        for text in sent:  # which of them: each alone
                            try:
                                translated[text] = self.translate([text], self.source, self.target, fmt)[0]
                            except Refused as alone:
                                self._refused(text, alone, translated)
            if self.progress is not None and not self._finer:  # the file's texts done, not a refused one's parts
                self.progress(min(start + BATCH, len(distinct)), len(distinct))
        return translated

    def _refused(self, text: str, refused: Refused, translated: dict[str, str]) -> None:
        """A text refused alone: sent again in parts where its document has finer ones (an HTML
        page's elements), else, too long for the model, as its clauses, else named."""
        if refused.field.split(".")[0] != "text":  # the request's: every one would be refused
            raise Failed(str(refused)) from None
        parts = self.finer(text) if self.finer is not None else []
        clauses = clauses_of(text) if not parts and refused.kind in TOO_LONG else []
        for clause in clauses:  # in the text's format
            self.formats.setdefault(clause, self.formats.get(text, self.fmt))
        named = len(self.refused)
        if parts or clauses:
            finer, self._finer = self._finer, True
            try:
                done = self(parts or clauses)
            finally:
                self._finer = finer
            if parts:
                translated.update(done)
                return
            if all(clause in done for clause in clauses):  # the text: its clauses' translations in a row
                translated[text] = "".join(done[clause] for clause in clauses)
                return
            del self.refused[named:]  # a clause left: the text is left whole, and named as itself
        self.refused.append(f"{text[:60]!r}: {refused}")


# Where a sentence may be cut in clauses: after a comma, semicolon, colon or dash and the space after
# it, not inside a tag (where the next angle bracket is a ">")
_CLAUSE_END = re.compile(r"(?:[,;:]|\s[—–-])\s+")


def clauses_of(text: str) -> list[str]:
    """A text too long for the model in two halves, cut at the clause end nearest its middle, each
    with its own whitespace (so that their translations in a row are the text's); [] where it has none."""
    in_tag = [False] * (len(text) + 1)  # whether the first angle bracket from here on is a ">", scanned back
    for k in range(len(text) - 1, -1, -1):
        in_tag[k] = text[k] == ">" or (text[k] != "<" and in_tag[k + 1])
    cuts = [m.end() for m in _CLAUSE_END.finditer(text) if 0 < m.end() < len(text) and not in_tag[m.end()]]
    if not cuts:
        return []
    cut = min(cuts, key=lambda at: abs(at - len(text) / 2))
    return [text[:cut], text[cut:]]


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
    try:
        document = READERS[kind](name, data, kind, fuzzy)
    except RecursionError:  # the readers walk a file's nesting by recursion: a file nests deeper than any real one
        raise Failed(f"cannot read {name}: its elements nest too deeply") from None
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
    if hasattr(document, "for_target"):  # a file of every language: what it lacks in the target's
        document.for_target(target, source)
    texts = _Texts(translate, source, target, document.fmt, progress, getattr(document, "finer", None),
                   getattr(document, "formats", None))
    translated = texts(document.texts)
    try:
        written, count = document.written(translated, mark, target)
    except RecursionError:
        raise Failed(f"cannot read {name}: its elements nest too deeply") from None
    refused = texts.refused + getattr(document, "unwritable", [])
    if count == 0 and refused:
        raise Failed(f"nothing in {name} could be translated: {refused[0]}")
    return Translated(written, count, document.unit, document.marks if mark else "", source, target, texts.characters,
                      refused, getattr(document, "skipped", 0), getattr(document, "skipped_as", ""))
