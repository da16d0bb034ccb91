"""Qt Linguist's .ts files, for service/documents/bilingual.py: which messages have no translation, and the
file with theirs written in, every other byte as it was.

A message is a `<message>` whose `<translation>` is empty and unfinished (`type="unfinished"`; a
vanished or obsolete one is left). Its `<source>` is plain text written as XML (`&amp;Open`,
`&lt;b&gt;Name:&lt;/b&gt; %1`): it goes to the service as the text it stands for, accelerators,
`%1` and rich text read there, and its translation is written back escaped. The translation stays
`type="unfinished"`, Qt Linguist's mark of a translation to review (lrelease leaves it out unless
told otherwise), unless asked to drop the mark. A plural message (`numerus="yes"`, `%n`) gets its
translation in every `<numerusform>`. The target language is the file's `language`. The file
written must parse as XML, or nothing is written.
"""
from __future__ import annotations

import html
import re
from dataclasses import dataclass
from xml.sax.saxutils import escape

from service.served import spliced
from service.documents.xliff import FileInvalid, checked, decoded, language_named

_TS = re.compile(r"<TS\b[^>]*>")
_MESSAGE = re.compile(r"<message\b([^>]*)>(.*?)</message\s*>", re.DOTALL)
_SOURCE = re.compile(r"<source>(.*?)</source\s*>", re.DOTALL)
_TRANSLATION = re.compile(r"<translation\b([^>]*?)(?:/>|>(.*?)</translation\s*>)", re.DOTALL)
_NUMERUSFORM = re.compile(r"(<numerusform\b[^>]*?)(?:/>|>(.*?)</numerusform\s*>)", re.DOTALL)
_UNFINISHED = re.compile(r"""\s*\btype\s*=\s*["']unfinished["']""")


@dataclass(frozen=True)
class Message:
    source: str          # the text the source stands for (its XML unescaped)
    start: int           # its translation element's span in the file's text
    end: int
    attributes: str      # the translation element's attributes
    body: str            # what it holds (numerusforms, or nothing)


@dataclass(frozen=True)
class Linguist:
    text: str
    encoding: str
    source_language: str
    target_language: str
    segments: tuple[Message, ...]  # the messages to translate


def read(data: bytes) -> Linguist:
    """The file's unfinished messages without a translation."""
    text, encoding = decoded(data)
    head = _TS.search(text)
    if head is None:
        raise FileInvalid("no <TS> element: not a Qt Linguist file")
    languages = [re.search(name + r"""\s*=\s*["']([^"']*)["']""", head.group(0)) for name in (r"\bsourcelanguage", r"\blanguage")]
    messages = []
    for match in _MESSAGE.finditer(text):
        body, base = match.group(2), match.start(2)
        source = _SOURCE.search(body)
        translation = _TRANSLATION.search(body)
        if source is None or translation is None or not source.group(1).strip():
            continue
        attributes, inner = translation.group(1), translation.group(2) or ""
        if not _UNFINISHED.search(attributes):
            continue  # finished, vanished or obsolete
        forms = _NUMERUSFORM.findall(inner)
        if any(form[1].strip() for form in forms) or (not forms and inner.strip()):
            continue  # a translation there already
        messages.append(Message(html.unescape(source.group(1)), base + translation.start(), base + translation.end(),
                                attributes, inner))
    return Linguist(text, encoding, languages[0].group(1) if languages[0] else "",
                    languages[1].group(1) if languages[1] else "", tuple(messages))


def written(linguist: Linguist, translations: dict[str, str], mark: bool, target: str) -> tuple[str, int]:
    """The file's text with each message that has a translation given it, and how many; a file that
    names no language (`<TS language>`) names `target` once it holds translations."""
    edits = []
    for message in linguist.segments:
        translation = translations.get(message.source)
        if translation is None:
            continue
        attributes = message.attributes if mark else _UNFINISHED.sub("", message.attributes)
        value = escape(translation)
        if _NUMERUSFORM.search(message.body):
            inner = _NUMERUSFORM.sub(lambda m: f"{m.group(1)}>{value}</numerusform>", message.body)
        else:
            inner = value
        edits.append((message.start, message.end, f"<translation{attributes}>{inner}</translation>"))
    count = len(edits)
    if count:
        edits += language_named(linguist.text, _TS, "language", target)
    return checked(spliced(linguist.text, sorted(edits)), linguist.encoding), count
