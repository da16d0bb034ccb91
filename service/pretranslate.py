"""Pre-translate a gettext catalog through a running phrasal service: each message nobody has
translated gets the service's translation, marked fuzzy, gettext's (and Poedit's and Weblate's) sign
of a translation for a translator to review; msgfmt leaves fuzzy ones out of the program until then.
An XLIFF file (service/xliff.py) and a Qt Linguist one (service/linguist.py) are pre-translated the
same way, marked as their tools mark a translation to review.

    python -m service.pretranslate po/de.po --in-place                    # the server `make serve` starts
    python -m service.pretranslate messages.pot --target de --output de.po --url http://mt:8000
    python -m service.pretranslate de.po --in-place --model en-de-software --fuzzy   # fuzzy ones again
    python -m service.pretranslate de.po --in-place --glossary 3f2a…        # a stored glossary's terms
    python -m service.pretranslate ui.de.xlf --in-place                    # XLIFF 1.2 or 2.x
    python -m service.pretranslate app_de.ts --in-place                    # Qt Linguist

Messages go as their catalog writes them, 32 a request (the service keeps their placeholders,
markup, accelerators and layout); a plural message gets its singular's translation as form 0 and
its plural's as every other form its catalog's Plural-Forms header counts; a message's context
(msgctxt) and comments are not sent. Translated, obsolete and (unless --fuzzy) fuzzy messages are
left as they are. A message the service refuses (a 4xx naming it: too long, malformed markup) stays
untranslated and is named on stderr; the rest are written.

Exit status 0 when the catalog was written (with the count of messages translated on stdout), 1
with one line on stderr when it was not: the catalog cannot be read or written, names no target
language, or the service cannot be reached or refuses the request itself (the pair, the model or the
glossary named).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import polib

from service import linguist, xliff

BATCH = 32
RETRIES = 5          # for a busy server's 429 and 503, waiting what its Retry-After says
LONGEST_WAIT_S = 30.0
_PLURALS = re.compile(r"nplurals\s*=\s*(\d+)")


class Failed(Exception):
    """What stops the run: one line for stderr."""


class Refused(Exception):
    """The service turned a request away with a 4xx: its message, and the field it names ("text":
    one of the texts; any other, the request itself: the pair, the model, the glossary)."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


class Service:
    """The service's /translate over HTTP (the standard library's client: nothing to install)."""

    def __init__(self, url: str, source: str, target: str, model: str | None, api_key: str | None,
                 timeout_s: float, glossary: str | None = None, fmt: str = "text") -> None:
        self.url = url.rstrip("/") + "/translate"
        self.source, self.target, self.model, self.glossary, self.fmt = source, target, model, glossary, fmt
        self.headers = {"Content-Type": "application/json", **({"X-API-Key": api_key} if api_key else {})}
        self.timeout_s = timeout_s

    def translate(self, texts: list[str]) -> list[str]:
        body = {"text": texts, "source": self.source, "target": self.target, **({"model": self.model} if self.model else {}),
                **({"glossary": self.glossary} if self.glossary else {}), **({"format": self.fmt} if self.fmt != "text" else {})}
        for attempt in range(RETRIES + 1):
            request = urllib.request.Request(self.url, json.dumps(body).encode("utf-8"), self.headers, method="POST")
            try:
                with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                    answer = json.load(response)
                return [nbest[0]["text"] for nbest in answer["translations"]]
            except urllib.error.HTTPError as error:
                detail = _error_body(error)
                if error.code in (429, 503) and attempt < RETRIES:
                    time.sleep(min(LONGEST_WAIT_S, _retry_after(error)))
                    continue
                if 400 <= error.code < 500 and error.code not in (401, 403, 404, 429):
                    # a body too large is its texts' doing: sent one by one, only the longest are refused
                    field = "text" if error.code == 413 else _field(detail)
                    raise Refused(detail.get("message", f"HTTP {error.code}"), field) from None
                raise Failed(f"{self.url} answered {error.code}: {detail.get('message', error.reason)}") from None
            except (urllib.error.URLError, OSError, ValueError, KeyError, IndexError, TypeError) as error:
                raise Failed(f"cannot get translations from {self.url}: {getattr(error, 'reason', error)}") from None
        raise Failed(f"{self.url} stayed busy after {RETRIES} retries")


def _error_body(error: urllib.error.HTTPError) -> dict:
    try:
        body = json.loads(error.read())
    except (ValueError, OSError):
        return {}
    return body if isinstance(body, dict) else {}


def _field(detail: dict) -> str:
    items = detail.get("detail")
    return str(items[0].get("field", "")) if isinstance(items, list) and items and isinstance(items[0], dict) else ""


def _retry_after(error: urllib.error.HTTPError) -> float:
    try:
        return max(0.1, float(error.headers.get("Retry-After", 1)))
    except ValueError:
        return 1.0


def untranslated(entry: polib.POEntry, fuzzy: bool) -> bool:
    """Whether the message is one to pre-translate: nobody translated it (or, with `fuzzy`, only a
    tool did: it is marked fuzzy)."""
    if entry.obsolete or not entry.msgid:
        return False
    if entry.fuzzy:
        return fuzzy
    return entry.msgstr == "" and all(form == "" for form in entry.msgstr_plural.values())


def translate_all(service: Service, texts: list[str]) -> dict[str, str]:
    """Each distinct text's translation, BATCH texts a request; a text the service refuses is
    named on stderr and left out, a refusal of the request itself (the pair, the model, the
    glossary) stops the run."""
    translated: dict[str, str] = {}
    distinct = list(dict.fromkeys(texts))  # a plural's forms beyond the first share one translation
    for start in range(0, len(distinct), BATCH):
        batch = distinct[start:start + BATCH]
        try:
            translated.update(zip(batch, service.translate(batch)))
        except Refused:
            for text in batch:  # which of them: each alone
                try:
                    translated[text] = service.translate([text])[0]
                except Refused as refused:
                    if refused.field.split(".")[0] != "text":  # the request's, not this text's: every one would be refused
                        raise Failed(str(refused)) from None
                    print(f"pretranslate: left untranslated, {text[:60]!r}: {refused}", file=sys.stderr)
    return translated


def plural_forms(catalog: polib.POFile) -> int:
    """How many forms a plural message has in the catalog's language (its Plural-Forms header; 2, as
    English and German have, where it names none)."""
    match = _PLURALS.search(catalog.metadata.get("Plural-Forms", ""))
    return max(1, int(match.group(1))) if match else 2


def pretranslate(catalog: polib.POFile, service: Service, fuzzy: bool = False,
                 mark_fuzzy: bool = True) -> list[polib.POEntry]:
    """Translates the catalog's untranslated messages in place; returns those that got a translation."""
    entries = [entry for entry in catalog if untranslated(entry, fuzzy)]
    # Each text the service translates: (entry, plural form or None for msgstr, text).
    texts: list[tuple[polib.POEntry, int | None, str]] = []
    forms = plural_forms(catalog)
    for entry in entries:
        if entry.msgid_plural:
            texts += [(entry, 0, entry.msgid)] + [(entry, k, entry.msgid_plural) for k in range(1, forms)]
        else:
            texts.append((entry, None, entry.msgid))
    translated = translate_all(service, [text for _, _, text in texts])
    done = []
    for entry in entries:
        mine = [(form, translated.get(text)) for owner, form, text in texts if owner is entry]
        if any(translation is None for _, translation in mine):
            continue
        for form, translation in mine:
            if form is None:
                entry.msgstr = translation
            else:
                entry.msgstr_plural[form] = translation
        if mark_fuzzy and "fuzzy" not in entry.flags:
            entry.flags.insert(0, "fuzzy")  # first, as msgmerge writes it
        done.append(entry)
    return done


# gettext's tools write a string on lines of at most this many columns, quotes included.
WIDTH = 79


def _string_lines(keyword: str, value: str) -> list[str]:
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
        # a paragraph of comments or an obsolete message reads as none
        parsed = [entry for entry in polib.pofile(blocks[index] + "\n") if not entry.obsolete]
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
        strings = (_string_lines("msgstr", entry.msgstr) if not entry.msgid_plural else
                   [line for form in sorted(entry.msgstr_plural)
                    for line in _string_lines(f"msgstr[{form}]", entry.msgstr_plural[form])])
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
_HEADER = re.compile(r'^msgid\s+""\s*\n(?:#~\s*)?msgstr\s', re.MULTILINE)


def _read(path: Path) -> tuple[polib.POFile, bytes]:
    """The catalog at `path` and its bytes, every message of it as written: polib reads past some
    malformed lines, an unterminated string losing its last character ("Offen" read "Offe") or its
    message, and a catalog written back so would lose them, so such a file is refused, naming the line."""
    if not path.is_file():  # polib reads a string that names no file as a catalog's text
        raise Failed(f"cannot read {path}: no such file")
    try:
        data = path.read_bytes()
        catalog = polib.pofile(str(path))  # in the charset its header names
        keywords = data.decode("latin-1")  # gettext's keywords are ASCII in any charset
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise Failed(f"cannot read {path}: {error}") from None
    for number, line in enumerate(keywords.splitlines(), 1):
        if _STRING_LINE.match(line) and not _WHOLE_STRING.match(line):
            raise Failed(f"cannot read {path}: line {number} holds no whole string; check it with msgfmt -c")
    written = len(_MSGID.findall(keywords)) - len(_HEADER.findall(keywords))
    if len(catalog) != written:
        raise Failed(f"cannot read {path}: {written} messages written, {len(catalog)} readable; check it with msgfmt -c")
    return catalog, data


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m service.pretranslate", description=__doc__.splitlines()[0])
    parser.add_argument("catalog", type=Path, help="a .po or .pot file, an XLIFF file (.xlf, .xliff) or a Qt Linguist one (.ts)")
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--output", "-o", type=Path, help="where to write the pre-translated catalog")
    where.add_argument("--in-place", action="store_true", help="write it over the catalog read")
    parser.add_argument("--url", default="http://127.0.0.1:8000", help="the service (default: what `make serve` starts)")
    parser.add_argument("--source", default="en", help="the messages' language (default: en)")
    parser.add_argument("--target", help="the translations' language (default: the catalog's Language header)")
    parser.add_argument("--model", help="which of the pair's models translates (GET /models; default: the service's choice)")
    parser.add_argument("--glossary", help="a stored glossary's id (POST /glossaries) whose terms the translations use")
    parser.add_argument("--api-key", help="the service's API key, where it asks for one")
    parser.add_argument("--fuzzy", action="store_true", help="translate messages marked fuzzy again too")
    parser.add_argument("--no-fuzzy-mark", dest="mark_fuzzy", action="store_false",
                        help="do not mark the translations fuzzy (they go into the program unreviewed)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for one request (default: 120)")
    args = parser.parse_args(argv)
    try:
        if args.catalog.suffix.lower() in (".xlf", ".xliff", ".ts"):
            return _pretranslate_xml(args)
        catalog, data = _read(args.catalog)
        target = args.target or re.split(r"[_@.-]", catalog.metadata.get("Language", ""))[0].lower()
        if not target:
            raise Failed(f"{args.catalog} names no language (its Language header is empty): pass --target")
        service = Service(args.url, args.source, target, args.model, args.api_key, args.timeout, args.glossary)
        done = pretranslate(catalog, service, args.fuzzy, args.mark_fuzzy)
        spliced = _spliced(data.decode(catalog.encoding), done) if catalog.metadata.get("Language") else None
        if not catalog.metadata.get("Language"):
            catalog.metadata["Language"] = target  # a template's translation names its language, as msginit's does
        output = args.catalog if args.in_place else args.output
        _replace(output, (spliced if spliced is not None else str(catalog)).encode(catalog.encoding))
    except Failed as failed:
        print(f"pretranslate: {failed}", file=sys.stderr)
        return 1
    print(f"{len(done)} messages translated{' (marked fuzzy)' if args.mark_fuzzy else ''}: {output}")
    return 0


def _pretranslate_xml(args: argparse.Namespace) -> int:
    """main's path for an XLIFF file (service/xliff.py) or a Qt Linguist one (.ts, service/linguist.py);
    Failed for what stops it."""
    reader = linguist if args.catalog.suffix.lower() == ".ts" else xliff
    if not args.catalog.is_file():
        raise Failed(f"cannot read {args.catalog}: no such file")
    try:
        document = reader.read(args.catalog.read_bytes())
    except (OSError, xliff.FileInvalid) as error:
        raise Failed(f"cannot read {args.catalog}: {error}") from None
    source = args.source if args.source != "en" or not document.source_language else document.source_language
    target = args.target or document.target_language
    source, target = (re.split(r"[_@.-]", code)[0].lower() for code in (source, target))
    if not target:
        raise Failed(f"{args.catalog} names no target language: pass --target")
    if getattr(document, "skipped", 0):
        print(f"pretranslate: {document.skipped} units segmented again (seg-source) left as they are", file=sys.stderr)
    # XLIFF's sources are markup (inline codes); a .ts file's are plain text written as XML
    fmt = "text" if reader is linguist else "xml"
    service = Service(args.url, source, target, args.model, args.api_key, args.timeout, args.glossary, fmt=fmt)
    translations = translate_all(service, [segment.source for segment in document.segments])
    try:
        text, done = reader.written(document, translations, args.mark_fuzzy)
    except xliff.FileInvalid as error:
        raise Failed(str(error)) from None
    output = args.catalog if args.in_place else args.output
    _replace(output, text.encode(document.encoding))
    marked = args.mark_fuzzy and (reader is linguist or document.version == "1")
    print(f"{done} {'messages' if reader is linguist else 'segments'} translated{' (marked for review)' if marked else ''}: "
          f"{output}")
    return 0


def _replace(output: Path, data: bytes) -> None:
    """`data` written beside `output` and moved over it: a file is never left half written."""
    partial = output.with_name(output.name + ".pretranslate-partial")
    try:
        partial.write_bytes(data)
        os.replace(partial, output)
    except OSError as error:
        partial.unlink(missing_ok=True)
        raise Failed(f"cannot write {output}: {error}") from None


if __name__ == "__main__":
    sys.exit(main())
