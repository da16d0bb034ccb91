"""What every document format shares: the errors that stop a file or refuse a text, the texts'
translator (`Translate`), reading a text file's encoding, writing a zip's parts anew, and `Spans`, a
text some spans of which are translated and the rest written back byte for byte."""
from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Callable
from html.entities import name2codepoint
from xml.etree import ElementTree

from service.served import spliced

# The blank lines between paragraphs (a catalog's messages, a text's paragraphs), captured: split by
# it, a text's paragraphs stand at even places and what parts them at odd ones.
PARAGRAPH_BREAK = re.compile(r"((?:\r?\n)(?:[ \t]*\r?\n)+)")

# What reading a zip's part can raise for a file that is not the zip it says (or holds a part not UTF-8).
UNREADABLE_ZIP = (zipfile.BadZipFile, zipfile.LargeZipFile, KeyError, UnicodeDecodeError, OSError, EOFError,
                  RuntimeError, NotImplementedError)


class Failed(Exception):
    """What stops a file's translation: one line saying why."""


class NoTarget(Failed):
    """A file that names no target language, given none."""


class Refused(Exception):
    """The translator turned texts away: its message, the field it names ("text" or "text.N": one
    of the texts; any other, the request itself: the pair, the model, the glossary), and the
    service's name for why ("text_rejected": longer than the model reads; "" unknown)."""

    def __init__(self, message: str, field: str, kind: str = "") -> None:
        super().__init__(message)
        self.field = field
        self.kind = kind


# Why a text is refused that is too long for the model or the server: it may go in clauses
TOO_LONG = frozenset(("text_rejected", "too_many_tokens", "too_long"))


# texts, source language ("auto": the translator's choice), target language, format ("text" or
# "xml") -> their translations, in order; raises Refused or Failed.
Translate = Callable[[list[str], str, str, str], list[str]]


def decoded(name: str, data: bytes) -> tuple[str, str]:
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


def encodable(text: str, encoding: str) -> bool:
    try:
        text.encode(encoding)
    except UnicodeEncodeError:
        return False
    return True


class Spans:
    """A text with some spans of it translated: (start, end, text sent) each, written back by `_put`."""

    marks = ""
    unit = "strings"
    target_language = ""
    errors = "strict"  # what to do with a character the file's encoding lacks: escape it in `_put`

    def __init__(self) -> None:
        self.spans: list[tuple[int, int, str]] = []
        self.text, self.encoding = "", "utf-8"
        self.unwritable: list[str] = []  # each text whose translation could not be written, and why

    @property
    def texts(self) -> list[str]:
        return [text for _, _, text in self.spans]

    def _put(self, translation: str, start: int, end: int) -> str:
        """What is written for the span from its translation: the translation, where the format
        writes its text as the service answers it (markup); else the format's escapes."""
        return translation

    def _edited(self, target: str, written: dict[int, str]) -> list[tuple[int, int, str]]:
        """Other edits than the translations (ARB's locale), given what was written for each span
        (by where it starts)."""
        return []

    # what a translation `_writable` refuses would not do, in the words that name it left
    unwritable_as = "would not read as XML"

    def _writable(self, value: str, start: int, end: int) -> bool:
        return True  # what `_put` wrote for the span reads as the format reads it

    def written(self, translated: dict[str, str], mark: bool, target: str) -> tuple[bytes, int]:
        translations = []
        for start, end, text in self.spans:
            if text in translated:
                value = self._put(translated[text], start, end)
                if self._writable(value, start, end):
                    translations.append((start, end, value))
                else:
                    self.unwritable.append(f"{text[:60]!r}: its translation {self.unwritable_as}; left as it was")
        edits = self._edited(target, {start: value for start, _, value in translations})
        written = spliced(self.text, sorted(translations + edits))
        return written.encode(self.encoding, errors=self.errors), len(translations)


def rewritten(archive: zipfile.ZipFile, parts: dict[str, bytes]) -> tuple[bytes, list[str]]:
    """The archive with the parts `parts` names written anew, every entry else as it was, in its
    place and compressed as it was (OpenDocument's and EPUB's mimetype stays first and stored); and the parts
    left as they were because their new text would not read as XML."""
    output, unreadable = io.BytesIO(), []
    with zipfile.ZipFile(output, "w") as written:
        for info in archive.infolist():
            data = archive.read(info)
            if info.filename in parts:
                if reads_as_xml(parts[info.filename]):
                    data = parts[info.filename]
                else:
                    unreadable.append(info.filename)
            written.writestr(info, data)
    return output.getvalue(), unreadable


# A named character reference; XML names only five, an XHTML document's DTD names HTML's (&nbsp;)
_NAMED_REFERENCE = re.compile(rb"&([A-Za-z][A-Za-z0-9]*);")
_XML_NAMED = frozenset(("amp", "lt", "gt", "quot", "apos"))


_NAMED_REFERENCE_TEXT = re.compile(r"&[A-Za-z_][\w.-]*;")
# A prefix an element or attribute name has in a start or end tag
_PREFIX = re.compile(r"[<\s/]([A-Za-z_][\w.-]*):[A-Za-z_]")


def reads_as_xml_content(value: str) -> bool:
    """Whether `value` reads as an XML element's content, whatever namespace prefixes its tags use and
    whatever entities its file's DTD declares (Termux's strings.xml: `&TERMUX_APP_NAME;`)."""
    prefixes = set(_PREFIX.findall("".join(re.findall(r"<[^>]*>", value)))) - {"xml", "xmlns"}
    declared = "".join(f' xmlns:{prefix}="urn:{prefix}"' for prefix in sorted(prefixes))
    content = _NAMED_REFERENCE_TEXT.sub("", value)
    return reads_as_xml(f"<content{declared}>{content}</content>".encode("utf-8"))


def reads_as_xml(data: bytes) -> bool:
    """Whether a part reads as XML, HTML's named references counted as the characters its DTD names
    them (expat reads no DTD)."""
    def numeric(reference: re.Match) -> bytes:
        name = reference.group(1).decode("ascii")
        code = name2codepoint.get(name)
        return reference.group(0) if code is None or name in _XML_NAMED else b"&#%d;" % code
    try:
        ElementTree.fromstring(_NAMED_REFERENCE.sub(numeric, data))
    except ElementTree.ParseError:
        return False
    return True
