"""gettext catalogs (.po, .pot): the untranslated messages (with `fuzzy`, the fuzzy ones too) get a
translation marked fuzzy, gettext's sign of one for a translator to review, a plural message its
singular's translation as form 0 and its plural's as every other form its Plural-Forms header
counts; only the translated messages' lines change, written as msgmerge writes them (and a template's
header's Language line, which names the target language then, and a Plural-Forms line holding
msginit's placeholder or missing before a plural message, which gets the target's as msginit writes it:
without it msgfmt refuses the catalog)."""
from __future__ import annotations

import os
import re
import tempfile

import polib

from service.documents.files import PARAGRAPH_BREAK, Failed, encodable
from service.documents.plurals import gettext_header

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


def plural_forms(catalog: polib.POFile) -> int | None:
    """How many forms a plural message has in the catalog's language (its Plural-Forms header);
    None where the header names no number (none, or a template's `nplurals=INTEGER`)."""
    match = _PLURALS.search(catalog.metadata.get("Plural-Forms", ""))
    return max(1, int(match.group(1))) if match else None


def string_lines(keyword: str, value: str) -> list[str]:
    """`keyword "value"` as msgmerge writes it: on one line where it fits and holds no line break
    but at its end; else an empty first line and the value on lines broken after each line break
    and, to fit, after a space (checked against msgcat on random Latin-script strings: identical but
    where Unicode's line breaking forbids a break after a space, "— —"; and CJK text, which gettext
    measures in double columns)."""
    escaped = polib.escape(value)
    if len(keyword) + len(escaped) + 3 <= WIDTH and "\n" not in value[:-1]:
        return [f'{keyword} "{escaped}"']
    lines = [f'{keyword} ""'] + [line for piece in re.findall(r"[^\n]*\n|[^\n]+", value) for line in _wrapped(piece)]
    # a string with nowhere to break it stays beside its keyword, however long
    return [f"{keyword} {lines[1]}"] if len(lines) == 2 and not re.search(r" [^ ]", escaped) else lines


def _wrapped(piece: str) -> list[str]:
    """A line of a string's value, quoted, on lines broken after a space to fit."""
    lines, line = [], ""
    for word in re.findall(r"[^ ]* *", polib.escape(piece)):
        if line.strip() and len(line) + len(word) + 2 > WIDTH:
            lines.append(f'"{line}"')
            line = ""
        line += word
    return lines + [f'"{line}"'] * bool(line)


def _spliced(text: str, entries: list[polib.POEntry]) -> str | None:
    """`text` (a catalog as written) with each of `entries` given its translation and flags where
    it stands, every other line as it was: polib writes a whole catalog again with its own line
    breaks, a diff of every long message. None where the catalog's messages are not one paragraph
    each (then polib writes it)."""
    blocks = PARAGRAPH_BREAK.split(text)  # paragraphs at even places, the blank lines between at odd ones
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
        ending = "\r\n" if "\r\n" in body else "\n"  # the paragraph's own (a file may mix them)
        lines = re.split(r"\r?\n", body)
        first = next((k for k, line in enumerate(lines) if line.startswith("msgstr")), None)
        if first is None:
            return None
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
        blocks[index] = ending.join(head + strings) + tail
    return "".join(blocks)


def _header_field(text: str, name: str, value: str, after: str) -> str | None:
    """`text` whose header's field `name` is `value` (its line replaced, or a line added after the
    field `after`'s, else at the header's end), every other line as it was; None where it has no header."""
    header = _HEADER.search(text)
    if header is None:
        return None
    following = PARAGRAPH_BREAK.search(text, header.start())
    end = following.start() if following else len(text.rstrip("\r\n"))
    newline = "\r\n" if "\r\n" in text else "\n"
    field = newline.join(_wrapped(f"{name}: {value}\n"))  # as msginit writes it
    line = re.compile(rf'^"{name}:', re.MULTILINE).search(text, header.start(), end)
    if line is not None:  # the field's lines: to the first that ends its value
        last = _FIELD_END.search(text, line.start(), end)
        if last is not None:
            return text[:line.start()] + field + text[last.end():]
    before = re.compile(rf'^"{after}:.*$', re.MULTILINE).search(text, header.start(), end)
    at = before.end() if before is not None else end
    return text[:at] + newline + field + text[at:]


# Where a header field's value ends: a string ending in a line break at the end of its line.
_FIELD_END = re.compile(r'\\n"(?=\r?$)', re.MULTILINE)


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


class Catalog:
    unit, fmt, marks = "messages", "text", "fuzzy"
    source_language = ""
    unwritable: list[str]

    def __init__(self, name: str, data: bytes, kind: str, fuzzy: bool) -> None:
        self.name, self.data = name, data
        self.catalog = read_catalog(name, data)
        self.unwritable = []
        self.target_language = self.catalog.metadata.get("Language", "")
        self.entries = [entry for entry in self.catalog if untranslated(entry, fuzzy)]
        self.plural_header = ""  # the Plural-Forms header the catalog lacks, for the target
        self._slots(plural_forms(self.catalog) or 2)

    def _slots(self, forms: int) -> None:
        """Each text to translate: (entry, plural form or None for msgstr, text)."""
        self.slots: list[tuple[polib.POEntry, int | None, str]] = []
        for entry in self.entries:
            if entry.msgid_plural:
                self.slots += [(entry, 0, entry.msgid)] + [(entry, k, entry.msgid_plural) for k in range(1, forms)]
            else:
                self.slots.append((entry, None, entry.msgid))
        self.texts = [text for _, _, text in self.slots]

    def for_target(self, target: str, source: str) -> None:
        """A catalog whose header counts no plural forms (a template's) has the target's, as msginit
        writes them, where it holds a plural message or a Plural-Forms line."""
        if plural_forms(self.catalog) is not None:
            return
        if "Plural-Forms" not in self.catalog.metadata and not any(entry.msgid_plural for entry in self.catalog):
            return
        header = gettext_header(target)
        if header is not None:
            self.plural_header = header[1]
            self._slots(header[0])

    def written(self, translated: dict[str, str], mark: bool, target: str) -> tuple[bytes, int]:
        done = []
        for entry in self.entries:
            mine = [(form, translated.get(text)) for owner, form, text in self.slots if owner is entry]
            if any(translation is None for _, translation in mine):
                continue
            if not all(encodable(translation, self.catalog.encoding) for _, translation in mine):
                self.unwritable.append(f"{entry.msgid[:60]!r}: the catalog's charset {self.catalog.encoding} cannot "
                                       "hold its translation (msgconv -t UTF-8 converts the catalog)")
                continue
            for form, translation in mine:
                if form is None:
                    entry.msgstr = translation
                else:
                    entry.msgstr_plural[form] = translation
            if entry.msgid_plural and self.plural_header:  # a template's two empty forms, where the target has one
                for form in [form for form in entry.msgstr_plural if int(form) >= len(mine)]:
                    del entry.msgstr_plural[form]
            if mark and "fuzzy" not in entry.flags:
                entry.flags.insert(0, "fuzzy")  # first, as msgmerge writes it
            done.append(entry)
        catalog = self.catalog
        spliced = _spliced(self.data.decode(catalog.encoding), done)
        if not self.target_language:  # a template's translation names its language, as msginit's does
            catalog.metadata["Language"] = target
            spliced = _header_field(spliced, "Language", target, "Language-Team") if spliced is not None else None
        if self.plural_header and done:
            catalog.metadata["Plural-Forms"] = self.plural_header
            spliced = _header_field(spliced, "Plural-Forms", self.plural_header, "Content-Transfer-Encoding") \
                if spliced is not None else None
        return (spliced if spliced is not None else str(catalog)).encode(catalog.encoding), len(done)
