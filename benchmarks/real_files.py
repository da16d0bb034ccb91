"""Real files of public projects through the document readers (service/documents/): what each writes
back must read as its format and, for string resources, as exactly the translations it was given.

    python benchmarks/real_files.py --files DIR     # DIR holds benchmarks/real_files.tsv's files
    python benchmarks/real_files.py --every tests --suffix .vtt   # every such file under a folder
    python benchmarks/real_files.py --files DIR --service http://localhost:8000 --model en-de-software
                                                   # through a running service: placeholders kept?

benchmarks/real_files.tsv names each file: its project (a GitHub repository), the commit, its path there
and the name it has in DIR. The files are not in this repository (each keeps its project's licence);
with a clone of a project, `git -C CLONE show COMMIT:PATH > DIR/NAME` writes one (a path ending in
"/ (zipped)" is an EPUB book unpacked in its project: zip its folder, the mimetype first and stored).
A file missing from DIR is counted as such. Each file is translated twice by stand-ins for the service:
- as it is (each text given back unchanged): the file must still read as its format and, read
  again, hold the same texts (a string resource, a catalog's messages);
- into text that needs escaping in every format (upper case, then `"q" 'a' \\ & < > % {x} #`, in
  markup as entities, its tags kept): the file must read as its format (json, PyYAML, XML,
  polib, each part of a zip as XML), every translation must be written (none left as refused), a
  string resource, read again, must hold exactly those translations, and a document (office,
  OpenDocument, text, subtitles), read again, no text without one.
A failure is either broken, or an exception other than a one-line refusal (`Failed`). Appends to
results/real_files.md.
"""
from __future__ import annotations

import argparse
import csv
import html
import io
import json
import re
import sys
import time
import zipfile
from pathlib import Path
from xml.etree import ElementTree

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.host import append_report, run_heading  # noqa: E402

SUFFIX = {"text": ' "q" \'a\' \\ & < > % {x} #', "markup": ' "q" \'a\' \\ &amp; &lt; &gt; % {x} #'}
# What a stand-in keeps as written in markup: tags, references, escapes
_KEPT = re.compile(r"(<[^>]*>|&[#A-Za-z0-9]+;|\\.)", re.DOTALL)
# The formats whose texts, read again from the file written, are what the stand-in answered
RESOURCES = {"json", "yaml", "android", "properties", "apple", "resx", "php", "stringsdict", "toml"}
# The formats whose plural rules get the target language's categories: checked into French (one, many, other)
PLURALS = {"android", "stringsdict", "xcstrings", "toml", "json"}
# The formats whose every text, read again from the file written, holds the stand-in's translation
# (not HTML's and EPUB's: their parts are cut by length, and a translation's length cuts them otherwise)
DOCUMENTS = {"word", "powerpoint", "excel", "odt", "odp", "ods", "text", "subtitles", "webvtt"}


def hostile(texts: list[str], source: str, target: str, fmt: str) -> list[str]:
    if fmt == "text":
        return [text.upper() + SUFFIX["text"] for text in texts]
    return ["".join(part if k % 2 else part.upper() for k, part in enumerate(_KEPT.split(text))) + SUFFIX["markup"]
            for text in texts]


def unchanged(texts: list[str], source: str, target: str, fmt: str) -> list[str]:
    return list(texts)


def readable(kind: str, data: bytes, before: bytes) -> str | None:
    """Why `data` does not read as its format, or None (a zip: each part that read in `before`)."""
    import plistlib

    import polib
    import yaml

    try:
        if kind in ("json", "xcstrings"):
            json.loads(data)
        elif kind == "fluent":  # no more of it that Fluent cannot read than before
            from fluent.syntax import FluentParser, ast

            junk = [sum(isinstance(entry, ast.Junk) for entry in FluentParser().parse(text.decode()).body)
                    for text in (data, before)]
            if junk[0] > junk[1]:
                raise ValueError(f"{junk[0] - junk[1]} more entries of junk")
        elif kind == "yaml":
            yaml.safe_load(data)
        elif kind == "stringsdict":
            plistlib.loads(data)
        elif kind == "toml":
            import tomlkit

            tomlkit.parse(data.decode("utf-8"))
        elif kind == "table":  # as many rows as before, each as wide as the header
            import csv

            rows, old = (list(csv.reader(io.StringIO(text.decode("utf-8")))) for text in (data, before))
            if len(rows) != len(old) or (all(len(row) == len(old[0]) for row in old)
                                         and any(len(row) != len(rows[0]) for row in rows)):
                raise ValueError(f"{len(rows)} rows for {len(old)}, or of other widths than the header's")
        elif kind in ("subtitles", "webvtt"):  # every cue where it was: the same timing lines in order
            timings = [re.findall(r"^[^\r\n]*-->[^\r\n]*$", _text(text), re.MULTILINE) for text in (data, before)]
            if timings[0] != timings[1]:
                raise ValueError(f"{len(timings[0])} timing lines for {len(timings[1])}")
        elif kind in ("android", "resx", "xliff", "linguist"):
            ElementTree.fromstring(data)
        elif kind == "gettext":
            polib.pofile(data.decode("utf-8", errors="replace") + "\n")
        elif kind in ("word", "powerpoint", "excel", "odt", "odp", "ods", "epub"):
            archive, original = zipfile.ZipFile(io.BytesIO(data)), zipfile.ZipFile(io.BytesIO(before))
            for info in archive.infolist():
                if info.filename.endswith((".xml", ".xhtml", ".opf", ".ncx", ".rels")) and _reads(original.read(info.filename)):
                    ElementTree.fromstring(archive.read(info))
    except Exception as error:  # noqa: BLE001  # any reader's refusal is the finding
        return f"{type(error).__name__}: {str(error)[:160]}"
    return None


def _text(data: bytes) -> str:
    """A text file's text: UTF-8, else Windows' Western encoding, as the subtitle and text readers read it."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data.decode("cp1252")


def _reads(data: bytes) -> bool:
    try:
        ElementTree.fromstring(data)
    except ElementTree.ParseError:
        return False
    return True


def check(name: str, data: bytes) -> tuple[int, str, list[str]]:
    """The texts translated, the refusal (one line) where the file is refused, and what broke."""
    from service.documents import READERS, Failed, format_of, translate_document

    kind = format_of(name)
    broken: list[str] = []
    count = 0
    try:
        target = READERS[kind](name, data, kind, False).target_language or "de"  # a catalog's own, else German
    except Failed:
        target = "de"
    for translate in (unchanged, hostile):
        try:
            done = translate_document(name, data, translate, "en", target)
        except Failed as error:
            return count, str(error), broken + ["a refusal of several lines"] * ("\n" in str(error))
        except Exception as error:  # noqa: BLE001
            return count, "", broken + [f"{translate.__name__}: {type(error).__name__}: {error}"]
        why = readable(kind, done.data, data)
        if why is not None:
            broken.append(f"{translate.__name__}: does not read as {kind}: {why}")
            continue
        count = max(count, done.count)
        if translate is hostile and done.refused:  # a translation the stand-in gave that could not be written
            broken.append(f"hostile: {len(done.refused)} left, the first {done.refused[0][:120]}")
        if translate is hostile and kind in DOCUMENTS:
            left = [text for text in READERS[kind](name, done.data, kind, False).texts
                    if '"q"' not in text and "&quot;q&quot;" not in text]
            if left:
                broken.append(f"hostile: {len(left)} texts read again untranslated, the first {left[0][:100]!r}")
        if kind == "table":  # every row's cell in the target's column holds its translation now
            table = READERS[kind](name, done.data, kind, False)
            table.for_target(target, "en")
            if table.texts:
                broken.append(f"{translate.__name__}: {len(table.texts)} rows still lack a translation")
        if kind == "xliff":  # every segment that had no translation has one now
            left = READERS[kind](name, done.data, kind, False).texts
            if left:
                broken.append(f"{translate.__name__}: {len(left)} segments still lack a translation, "
                              f"the first {left[0][:100]!r}")
        if kind == "xcstrings":  # every string the target lacked has its localization now
            catalog = READERS[kind](name, done.data, kind, False)
            catalog.for_target(target, "en")
            if catalog.texts:
                broken.append(f"{translate.__name__}: {len(catalog.texts)} strings still lack a translation, "
                              f"the first {catalog.texts[0][:100]!r}")
        if kind in RESOURCES:
            before = READERS[kind](name, data, kind, False).texts
            after = READERS[kind](name, done.data, kind, False).texts
            expected = before if translate is unchanged else hostile(before, "en", "de", READERS[kind].fmt)
            if after != expected:
                wrong = next(k for k in range(min(len(after), len(expected))) if after[k] != expected[k]) \
                    if len(after) == len(expected) else None
                broken.append(f"{translate.__name__}: read again, {len(after)} texts against {len(expected)}"
                              + (f"; text {wrong}: {after[wrong]!r:.120} for {expected[wrong]!r:.120}" if wrong is not None else ""))
    if kind in PLURALS:
        try:
            done = translate_document(name, data, hostile, "en", "fr")
        except Failed:
            return count, "", broken
        lacking = _lacking_many(kind, done.data)
        if lacking:
            broken.append(f"into French: {len(lacking)} plural rules lack \"many\", the first {lacking[0][:100]!r}")
    return count, "", broken


def _lacking_many(kind: str, data: bytes) -> list[str]:
    """The plural rules of a file translated into French that have "other" and lack "many"."""
    import plistlib

    if kind == "android":
        return [element.get("name", "") for element in ElementTree.fromstring(data).iter("plurals")
                if element.get("translatable") != "false"
                and {"other"} <= {item.get("quantity") for item in element} and "many" not in
                {item.get("quantity") for item in element}]
    found = []

    def walk(node, where: str) -> None:
        if isinstance(node, dict) and kind == "json":  # i18next's: item_one and item_other beside item_many
            found.extend(f"{where}/{key}" for key in node if key.endswith("_other") and
                         f"{key[:-6]}_one" in node and f"{key[:-6]}_many" not in node)
        if isinstance(node, dict):
            plural = node.get("plural") if kind == "xcstrings" else node if \
                node.get("NSStringFormatSpecTypeKey") == "NSStringPluralRuleType" or \
                (kind == "toml" and "one" in node and "other" in node) else None
            if kind != "json" and isinstance(plural, dict) and "other" in plural and "many" not in plural and \
                    (kind != "xcstrings" or "/fr/" in where):
                found.append(where)
            for key, value in node.items():
                walk(value, f"{where}/{key}")

    if kind == "toml":
        import tomlkit

        document = tomlkit.parse(data.decode("utf-8")).unwrap()
    else:
        document = json.loads(data) if kind in ("xcstrings", "json") else plistlib.loads(data)
    walk(document, "")
    return found


def every(folder: Path, suffix: str, results: Path) -> int:
    """Each file under `folder` a reader knows (whose name ends in `suffix`), counted: translated,
    refused in one line, broken (the broken ones named)."""
    from service.documents import format_of

    started = time.perf_counter()
    found = sorted(path for path in folder.rglob("*")
                   if path.is_file() and path.name.endswith(suffix) and format_of(path.name) is not None)
    translated, texts, refused, broken = 0, 0, 0, []
    for path in found:
        count, refusal, problems = check(path.name, path.read_bytes())
        texts += count
        refused += bool(refusal)
        translated += not refusal and not problems
        broken += [f"{path.relative_to(folder)}: {'; '.join(problems)}"] * bool(problems)
    report = (run_heading() + f"    python benchmarks/real_files.py --every {folder}"
              + (f" --suffix {suffix}" if suffix else "") + "\n\n"
              f"{len(found)} files under {folder}, {time.perf_counter() - started:.0f} s: {translated} translated "
              f"({texts} texts), {refused} refused in one line. **Files broken: {len(broken)}**.\n\n"
              + "".join(f"- `{line[:300]}`\n" for line in broken[:20]))
    print(report)
    append_report(results, "Real files through the document readers", "python benchmarks/real_files.py", report)
    return 1 if broken else 0


def _sources(path: Path) -> list[dict[str, str]]:
    """The rows of the sources list: name, repository, commit, path."""
    with path.open(encoding="utf-8") as handle:
        return list(csv.DictReader(handle, delimiter="\t"))


def through_service(args: argparse.Namespace) -> int:
    """The list's files translated by a running service: per file, the texts sent and those whose
    output holds other placeholders than their source (none lost, changed or added), and whether the
    file written still reads as its format."""
    from benchmarks.placeholder_catalogs import kept
    from service.documents import READERS, Failed, format_of, translate_document
    from service.pretranslate import Service

    service = Service(args.service, args.model, None, 600.0)
    sources = _sources(args.sources)
    suffixes = tuple(suffix for suffix in args.only.split(",") if suffix)
    started = time.perf_counter()
    rows, texts, changed, failures = [], 0, 0, 0
    for source in sources:
        path = args.files / source["name"]
        if not path.is_file() or (suffixes and not source["name"].endswith(suffixes)):
            continue
        data, kind, pairs = path.read_bytes(), format_of(source["name"]), []

        def translate(batch: list[str], source_language: str, target: str, fmt: str) -> list[str]:
            output = service.translate(batch, source_language, target, fmt)
            # in markup an entity is a character written so (`&amp;` may come back "und"), not a placeholder
            read = html.unescape if fmt in ("xml", "html") else str
            pairs.extend((read(text), read(translation)) for text, translation in zip(batch, output))
            return output

        try:
            target = READERS[kind](source["name"], data, kind, False).target_language or args.target
            done = translate_document(source["name"], data, translate, "en", target)
            why = readable(kind, done.data, data)
        except Failed as error:
            rows.append(f"| {source['name']} | – | – | {str(error).replace('|', '/')[:160]} |")
            continue
        lost = [(text, output) for text, output in pairs if not kept(text, output)]
        texts, changed, failures = texts + len(pairs), changed + len(lost), failures + (why is not None)
        first = f"{lost[0][0][:60]!r} → {lost[0][1][:60]!r}".replace("|", "/") if lost else "–"
        rows.append(f"| {source['name']} | {len(pairs)} | {len(lost)}: {first} | {why or '–'} |")
    only = f" --only {args.only}" if args.only else ""
    report = (run_heading() + f"    python benchmarks/real_files.py --files {args.files} --service {args.service}"
              + (f" --model {args.model}" if args.model else "") + (f" --target {args.target}" if args.target != "de" else "")
              + only + "\n\n"
              f"{len(rows)} files, {texts} texts, {time.perf_counter() - started:.0f} s: **{changed} with their "
              f"placeholders not kept**, {failures} files not reading as their format.\n\n"
              "| file | texts | placeholders not kept (the first) | reads as its format / refused |\n|---|---:|---|---|\n"
              + "\n".join(rows) + "\n")
    print(report)
    append_report(args.results, "Real files through the document readers", "python benchmarks/real_files.py", report)
    return 1 if changed or failures else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=Path, help="the folder holding the sources list's files")
    parser.add_argument("--sources", type=Path, default=REPO / "benchmarks" / "real_files.tsv")
    parser.add_argument("--results", type=Path, default=REPO / "results" / "real_files.md")
    parser.add_argument("--every", type=Path, default=None,
                        help="instead of the list: every file under this folder whose format the readers know, summed "
                             "up (a parser's test files: mozilla/vtt.js's tests)")
    parser.add_argument("--suffix", default="", help="with --every: only the files whose names end so (.vtt)")
    parser.add_argument("--service", default=None, metavar="URL",
                        help="translate through this running service instead of the stand-ins, and count the texts "
                             "whose placeholders the translation did not keep (benchmarks/placeholder_catalogs.py's reading)")
    parser.add_argument("--model", default=None, help="with --service: the model a request names (en-de-software)")
    parser.add_argument("--target", default="de", help="with --service: the language a file that names none goes into")
    parser.add_argument("--only", default="", help="with --service: only the list's files whose names end so "
                                                    "(comma-separated: .stringsdict,.toml)")
    args = parser.parse_args()
    if args.service is not None:
        if args.files is None:
            parser.error("--service translates the list's files: give --files")
        return through_service(args)
    if args.every is not None:
        return every(args.every, args.suffix, args.results)
    if args.files is None:
        parser.error("give --files (the list's files) or --every (a folder)")
    sources = _sources(args.sources)
    started = time.perf_counter()
    rows, missing, failures = [], [], 0
    for source in sources:
        path = args.files / source["name"]
        if not path.is_file():
            missing.append(source["name"])
            continue
        count, refusal, broken = check(source["name"], path.read_bytes())
        failures += bool(broken)
        rows.append(f"| {source['name']} | {source['repository']}@{source['commit'][:8]} | {count} | "
                    + (refusal.replace("|", "\\|") or "–") + " | " + ("; ".join(broken).replace("|", "\\|") or "–") + " |")
    report = (run_heading() + f"    python benchmarks/real_files.py --files {args.files}\n\n"
              f"{len(rows)} files of {len(sources)} ({len(missing)} missing{': ' + ', '.join(missing) if missing else ''}), "
              f"{time.perf_counter() - started:.0f} s. **Files broken: {failures}**.\n\n"
              "| file | project | texts translated | refused (one line) | broken |\n|---|---|---:|---|---|\n" + "\n".join(rows) + "\n")
    print(report)
    append_report(args.results, "Real files through the document readers", "python benchmarks/real_files.py", report)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
