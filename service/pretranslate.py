"""Pre-translate a gettext catalog through a running phrasal service: each message nobody has
translated gets the service's translation, marked fuzzy, gettext's (and Poedit's and Weblate's) sign
of a translation for a translator to review; msgfmt leaves fuzzy ones out of the program until then.
An XLIFF file (service/documents/xliff.py) and a Qt Linguist one (service/documents/linguist.py) are pre-translated the
same way, marked as their tools mark a translation to review; a text or Markdown file's paragraphs, an HTML
page, office documents and books, a SubRip or WebVTT file's subtitles and every string of a program's string
resources (JSON, Android, Java properties, Apple strings and strings dictionaries, String Catalogs, .NET resx,
YAML, Fluent, PHP) are translated (service/documents/ reads and writes them all).

    python -m service.pretranslate po/de.po --in-place                    # the server `make serve` starts
    python -m service.pretranslate po/*.po --in-place                     # each in its Language header's language
    python -m service.pretranslate messages.pot --target de --output de.po --url http://mt:8000
    python -m service.pretranslate de.po --in-place --model en-de-software --fuzzy   # fuzzy ones again
    python -m service.pretranslate de.po --in-place --glossary 3f2a…        # a stored glossary's terms
    python -m service.pretranslate ui.de.xlf --in-place                    # XLIFF 1.2 or 2.x
    python -m service.pretranslate app_de.ts --in-place                    # Qt Linguist
    python -m service.pretranslate notes.txt --target de -o notes.de.txt   # text, subtitles (.srt, .vtt)

Messages go as their catalog writes them, 32 a request (the service keeps their placeholders,
markup, accelerators and layout); a plural message gets its singular's translation as form 0 and
its plural's as every other form its catalog's Plural-Forms header counts; a message's context
(msgctxt) and comments are not sent. Translated, obsolete and (unless --fuzzy) fuzzy messages are
left as they are. A message the service refuses (a 4xx naming it: too long, malformed markup) stays
untranslated and is named on stderr; the rest are written.

Several catalogs may be given with --in-place (`po/*.po`): each is pre-translated in turn, one line
each. Exit status 0 when every catalog was written (with the count of messages translated on stdout),
1 with one line on stderr for each that was not: the catalog cannot be read or written, names no target
language, or the service cannot be reached or refuses the request itself (the pair, the model or the
glossary named).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from service.documents import FORMATS, Failed, NoTarget, Refused, translate_document

RETRIES = 5          # for a busy server's 429 and 503, waiting what its Retry-After says
LONGEST_WAIT_S = 30.0


class Service:
    """The service's /translate over HTTP (the standard library's client: nothing to install)."""

    def __init__(self, url: str, model: str | None, api_key: str | None, timeout_s: float,
                 glossary: str | None = None) -> None:
        self.url = url.rstrip("/") + "/translate"
        self.model, self.glossary = model, glossary
        self.headers = {"Content-Type": "application/json", **({"X-API-Key": api_key} if api_key else {})}
        self.timeout_s = timeout_s

    def translate(self, texts: list[str], source: str, target: str, fmt: str) -> list[str]:
        body = {"text": texts, "source": source, "target": target, **({"model": self.model} if self.model else {}),
                **({"glossary": self.glossary} if self.glossary else {}), **({"format": fmt} if fmt != "text" else {})}
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
                    raise Refused(detail.get("message", f"HTTP {error.code}"), field, _field(detail, "type")) from None
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


def _field(detail: dict, name: str = "field") -> str:
    """The first problem's `name` ("field", or "type": why) in a 4xx answer's body."""
    items = detail.get("detail")
    return str(items[0].get(name, "")) if isinstance(items, list) and items and isinstance(items[0], dict) else ""


def _retry_after(error: urllib.error.HTTPError) -> float:
    try:
        return max(0.1, float(error.headers.get("Retry-After", 1)))
    except ValueError:
        return 1.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m service.pretranslate", description=__doc__.splitlines()[0])
    parser.add_argument("catalogs", metavar="catalog", type=Path, nargs="+",
                        help=f"a file to translate, by its suffix: {', '.join(FORMATS)} (service/documents/); "
                        "several with --in-place (po/*.po)")
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--output", "-o", type=Path, help="where to write the pre-translated catalog (one catalog)")
    where.add_argument("--in-place", action="store_true", help="write each over the catalog read")
    parser.add_argument("--url", default="http://127.0.0.1:8000", help="the service (default: what `make serve` starts)")
    parser.add_argument("--source", help="the messages' language (default: the one an XLIFF or .ts file names, else en)")
    parser.add_argument("--target", help="the translations' language (default: the one the catalog names)")
    parser.add_argument("--model", help="which of the pair's models translates (GET /models; default: the service's choice)")
    parser.add_argument("--glossary", help="a stored glossary's id (POST /glossaries) whose terms the translations use")
    parser.add_argument("--api-key", help="the service's API key, where it asks for one")
    parser.add_argument("--fuzzy", action="store_true", help="translate messages marked fuzzy again too")
    parser.add_argument("--no-fuzzy-mark", dest="mark_fuzzy", action="store_false",
                        help="do not mark the translations fuzzy (they go into the program unreviewed)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for one request (default: 120)")
    args = parser.parse_args(argv)
    if args.output is not None and len(args.catalogs) > 1:
        parser.error("--output names one file: give one catalog, or --in-place for several")
    service = Service(args.url, args.model, args.api_key, args.timeout, args.glossary)
    failed = 0
    for catalog in args.catalogs:
        try:
            _pretranslate(catalog, args.output or catalog, args, service)
        except Failed as failure:
            print(f"pretranslate: {failure}", file=sys.stderr)
            failed += 1
    return 1 if failed else 0


def _pretranslate(catalog: Path, output: Path, args: argparse.Namespace, service: Service) -> None:
    """One catalog pre-translated and written to `output`, its line printed; Failed for what stops it."""
    if not catalog.is_file():
        raise Failed(f"cannot read {catalog}: no such file")
    if catalog.suffix.lower() not in FORMATS:
        raise Failed(f"cannot read {catalog}: its format is none of {', '.join(FORMATS)}")
    try:
        data = catalog.read_bytes()
    except OSError as error:
        raise Failed(f"cannot read {catalog}: {error}") from None
    try:
        done = translate_document(str(catalog), data, service.translate, args.source, args.target,
                                  fuzzy=args.fuzzy, mark=args.mark_fuzzy, default_source="en")
    except NoTarget as missing:
        raise Failed(f"{missing}: pass --target") from None
    for note in done.refused:
        print(f"pretranslate: left untranslated, {note}", file=sys.stderr)
    if done.skipped:
        print(f"pretranslate: {done.skipped} {done.skipped_as} left as they are", file=sys.stderr)
    _replace(output, done.data)
    print(f"{done.count} {done.unit} translated{f' (marked {done.marked})' if done.marked else ''}: {output}")


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
