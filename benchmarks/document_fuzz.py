"""The document routes under mutated files: seed files of every format the routes read
(service/documents/), each mutated (bytes flipped, cut, inserted: quotes, backslashes, line breaks,
markup, invalid UTF-8) and sent through LibreTranslate's translate_file or DeepL's v2/document with
varied fields (languages, names with paths, NULs, long ones), the service in this process on the
fake runtime (testing/fake_runtime.py: words reversed and upper-cased). Counted: answers by status,
documents done and failed. A failure is any 5xx, any document failed with the internal error (a bug:
the worker logs a traceback), or a translated file that cannot be downloaded. With PyYAML: each
mutated YAML file PyYAML reads must come back as YAML of the same shape (translations that need
quoting made of colons, hashes, quotes and brackets). Mutated files with plurals (a strings
dictionary, Android's plurals, a String Catalog, a TOML file, i18next's JSON) translated into French, whose plurals gain "many":
each must still read as its format where it did before, and only a one-line refusal may stop one.

    python benchmarks/document_fuzz.py                  # 300 uploads, 2,000 YAML files, seed 1
    python benchmarks/document_fuzz.py --uploads 1000 --yaml 10000 --seed 7
    python benchmarks/document_fuzz.py --uploads 0 --yaml 0 --yaml-files rails-i18n/rails/locale

Exit status 1 where a failure was found (each is printed). Appends to results/document_fuzz.md.
"""
from __future__ import annotations

import argparse
import io
import json
import logging
import random
import sys
import time
import zipfile
from collections.abc import Iterable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.host import append_report, run_heading  # noqa: E402

SEEDS = {
    "de.po": (b'msgid ""\nmsgstr ""\n"Language: de\\n"\n"Content-Type: text/plain; charset=UTF-8\\n"\n'
              b'"Plural-Forms: nplurals=2; plural=(n != 1);\\n"\n\n#, c-format\nmsgid "Open %s now"\nmsgstr ""\n\n'
              b'msgctxt "menu"\nmsgid "Save the file"\nmsgstr ""\n\nmsgid "One file"\nmsgid_plural "%d files"\n'
              b'msgstr[0] ""\nmsgstr[1] ""\n'),
    "ui.xlf": (b'<?xml version="1.0"?>\n<xliff version="1.2"><file source-language="en" target-language="de">'
               b'<body><trans-unit id="1"><source>Open the <g id="1">file</g> now<x id="2"/></source></trans-unit>'
               b'<trans-unit id="2"><source>Close it</source><target state="new">Close it</target></trans-unit>'
               b'</body></file></xliff>\n'),
    "app.ts": (b'<?xml version="1.0" encoding="utf-8"?>\n<TS version="2.1" language="de" sourcelanguage="en">'
               b'<context><name>W</name><message><source>Save the &amp;file</source>'
               b'<translation type="unfinished"></translation></message></context></TS>\n'),
    "notes.txt": "two dogs play\r\n\r\n  the cat\n\n\n\ufeffx\n".encode(),
    "help.md": (b"---\ntitle: x\n---\n\n# Getting started\n\nOpen the *File* menu, see [docs][d].\n\n```\ncode\n\n"
                b"more\n```\n\n- one item\n\n| a | b |\n|---|---|\n| c | d |\n\n[d]: https://example.org\n"),
    "help.html": (b'<!DOCTYPE html>\n<html lang="en"><head><title>Help</title><style>p{}</style></head><body>'
                  b'<h1>Help</h1><div><p>Save the <b>file</b>.</p><img src="a.png" alt="The window"><ul>'
                  b'<li>one<li>two</ul></div><script>x=1</script></body></html>\n'),
    "film.srt": b"1\n00:00:01,000 --> 00:00:02,000\ntwo dogs\n\n2\n00:00:03,000 --> 00:00:04,000\nthe cat\n",
    "en.json": (b'{"@@locale": "en", "menu": {"open": "Open a file", "n": "{{count}} items"}, "@menu": {"d": "x"},'
                b' "list": ["one", "", {"deep": "two"}], "esc": "caf\\u00e9 \\"x\\""}\n'),
    "strings.xml": (b'<?xml version="1.0" encoding="utf-8"?>\n<resources><string name="a">Don\\\'t save <b>now'
                    b'</b></string><string name="q">"it\'s"</string><plurals name="p"><item quantity="one">%d file'
                    b'</item></plurals><string name="n" translatable="false">X</string></resources>\n'),
    "M.properties": b"# c\nsave=Save file\nopen : Open {0}\\nnow\nlong = one \\\r\n  two\ncafe=Caf\\u00e9\n",
    "L.strings": b'/* c */\n"title" = "Hello \\"world\\"";\n// "a" = "b";\n"m" = "Line\\nTwo";\nk = "Plain";\n',
    "S.resx": (b'<?xml version="1.0" encoding="utf-8"?>\n<root><data name="a" xml:space="preserve"><value>Save '
               b'&amp; quit {0}</value></data></root>\n'),
    "en.yml": (b"en:\n  errors:\n    blank: \"can't be blank\"\n    taken: 'isn''t free'  # c\n  menu:\n"
               b"    - Open a file\n    - \"Save\"\n  help: |\n    line one\n    line two\n  f: >-\n    a\n    b\n"
               b"  n: 3\n  welcome: \"Welcome, %{name}!\"\n  long: a plain text\n    going on\n  quoted: \"two\n    lines\"\n"
               b"  tabs: [Open, 'Save as', {title: Close it}]\n  base: &base\n    label: !!str Print\n  copy: *base\n"
               b"  folded: >\n    one\n\n    two\n"),
}
# Word's document part and OpenDocument's content: mutated as XML, then zipped (a mutated zip is only
# a zip that does not read).
WORD_XML = ('<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<w:document xmlns:w="http://schemas.openxmlformats.org/'
            'wordprocessingml/2006/main" xmlns:r="r"><w:body><w:p><w:pPr><w:pStyle w:val="Heading1"/></w:pPr><w:r><w:t>'
            'Getting started</w:t></w:r></w:p><w:p><w:r><w:t xml:space="preserve">Open the </w:t></w:r><w:r><w:rPr><w:b/>'
            '</w:rPr><w:t>File</w:t></w:r><w:proofErr w:type="spellStart"/><w:r><w:t xml:space="preserve"> menu &amp; '
            'save.</w:t></w:r></w:p><w:p><w:r><w:t>See </w:t></w:r><w:hyperlink r:id="rId5"><w:r><w:t>the guide</w:t>'
            '</w:r></w:hyperlink><w:r><w:tab/></w:r></w:p><w:sectPr/></w:body></w:document>').encode()
SEEDS["guide.docx"] = WORD_XML
SEEDS["notes.odt"] = ('<?xml version="1.0" encoding="UTF-8"?>\n<office:document-content xmlns:office="o" xmlns:text="t" '
                      'xmlns:xlink="x"><office:body><office:text><text:h text:outline-level="1">Save it</text:h><text:p>'
                      'Open the <text:span text:style-name="T1">File</text:span> menu<text:s text:c="2"/>and <text:a '
                      'xlink:href="s.html">Settings</text:a>.</text:p></office:text></office:body></office:document-content>'
                      ).encode()
SEEDS["story.epub"] = ('<?xml version="1.0" encoding="utf-8"?>\n<html xmlns="http://www.w3.org/1999/xhtml" xml:lang="en" '
                       'lang="en"><head><title>Getting started</title></head><body><h1>Getting started</h1><p>Open '
                       'the <em>File</em> menu &amp; save.<br/>See <a href="b.xhtml">the guide</a>.</p></body></html>').encode()
SEEDS["Localizable.xcstrings"] = (
    b'{\n  "sourceLanguage" : "en",\n  "strings" : {\n    "" : {\n\n    },\n    "%lld files" : {\n      "localizations" : {\n'
    b'        "en" : {\n          "variations" : {\n            "plural" : {\n              "one" : {\n                '
    b'"stringUnit" : {\n                  "state" : "translated",\n                  "value" : "%lld file"\n'
    b'                }\n              },\n              "other" : {\n                "stringUnit" : {\n'
    b'                  "state" : "translated",\n                  "value" : "%lld files"\n                }\n'
    b'              }\n            }\n          }\n        }\n      }\n    },\n    "Open %@" : {\n\n    },\n'
    b'    "X" : {\n      "shouldTranslate" : false\n    }\n  },\n  "version" : "1.0"\n}')
SEEDS["main.ftl"] = (b"# c\nhello = Hello, { $user }!\nblock =\n    Line one\n    two { $n }\nemails =\n    { $n ->\n"
                     b"        [one] One <b>email</b>.\n       *[other] { $n } emails.\n    }\n    .title = Mail\n"
                     b"-brand = Firefox\nabout = About { -brand }\n")
SEEDS["validation.php"] = (b"<?php\n\n// c\nreturn [\n    'accepted' => 'The :attribute must be accepted.',\n"
                           b"    \"url\" => \"Line\\n \\\"two\\\"\",\n    'between' => ['string' => 'It\\'s :min'],\n"
                           b"    'x' => array('y' => __('z') . 'w'),\n];\n")
SEEDS["Localizable.stringsdict"] = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<plist version="1.0">\n<dict>\n\t<key>files</key>\n\t<dict>\n'
    b'\t\t<key>NSStringLocalizedFormatKey</key>\n\t\t<string>Deleted %#@files@</string>\n\t\t<key>files</key>\n'
    b'\t\t<dict>\n\t\t\t<key>NSStringFormatSpecTypeKey</key>\n\t\t\t<string>NSStringPluralRuleType</string>\n'
    b'\t\t\t<key>one</key>\n\t\t\t<string>one file &amp; more</string>\n\t\t\t<key>other</key>\n'
    b'\t\t\t<string>%d files</string>\n\t\t</dict>\n\t</dict>\n\t<!-- c -->\n</dict>\n</plist>\n')
SEEDS["page.sdlxliff"] = (
    b'<?xml version="1.0" encoding="utf-8"?><xliff xmlns:sdl="http://sdl.com/FileTypes/SdlXliff/1.0" version="1.2">'
    b'<file source-language="en-US" target-language="de-DE"><body><trans-unit id="u1"><source>Two dogs. <x id="1"/>A cat'
    b'</source><seg-source><mrk mtype="seg" mid="1">Two dogs.</mrk> <mrk mtype="seg" mid="2"><x id="1"/>A <mrk '
    b'mtype="x-sdl-comment">cat</mrk></mrk></seg-source><target><mrk mtype="seg" mid="1" /> <mrk mtype="seg" mid="2">'
    b'<x id="1"/></mrk></target><sdl:seg-defs><sdl:seg id="1" /><sdl:seg id="2" locked="false" /></sdl:seg-defs>'
    b'</trans-unit></body></file></xliff>')
SEEDS["en.toml"] = (b'# c\nhome = "Home"  # menu\ntags = ["a tag", \'b\']\n[readingTime]\ndescription = "note"\n'
                    b'one = \'One minute\'\nother = """{{ .Count }} minutes\nto read"""\n[[i18n]]\nid = "x"\ntranslation = "Hi"\n')
SEEDS["plurals.json"] = b'{"item_one": "One {{what}}", "item_other": "{{count}} items", "menu": {"a_one": "A", "a_other": "As"}}'
SEEDS["strings.csv"] = b'keys,en,?plural,de,_note\nGREET,"Hello, ""friend""",,,x\nAPPLE,%d apple,%d apples,,\n,,,,\nBYE,Bye,,Tschuss,\n'
SEEDS["film.vtt"] = (b"WEBVTT\nKind: captions\n\nNOTE c\n\n1\n00:00:01.000 --> 00:00:02.500 line:90%\n<v Bob>Two &amp; "
                     b"<i>dogs</i>\n\n00:03.000 --> 00:04.000\n<c.y>The cat</c>\n00:04.000 --> 00:05.000\nsleeps\n")
SEEDS["plurals.xml"] = (b'<resources>\n    <plurals name="files">\n        <item quantity="one">One <b>file</b></item>\n'
                        b'        <item quantity="other">%d files</item>\n    </plurals>\n</resources>\n')
INSERTS = [b'"', b"\\", b"\n", b"<", b"&", b"\x00", b"\r\n", b"msgid ", b"-->", "é".encode(), b"\xff", b": ", b"#",
           b"'", b"  ", b"- ", b"|", b"{", b"}"]


def mutate(rng: random.Random, data: bytes) -> bytes:
    data = bytearray(data)
    for _ in range(rng.randint(0, 6)):
        if not data:
            break
        k, roll = rng.randrange(len(data)), rng.random()
        if roll < 0.3:
            data[k] = rng.randrange(256)
        elif roll < 0.5:
            del data[k:k + rng.randint(1, 20)]
        elif roll < 0.8:
            data[k:k] = rng.choice(INSERTS)
        else:
            data = data[:k]
    return bytes(data)


def _zipped(part: str, data: bytes) -> bytes:
    written = io.BytesIO()
    with zipfile.ZipFile(written, "w") as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        archive.writestr(part, data)
    return written.getvalue()


def _book(chapter: bytes) -> bytes:
    """An EPUB book of one chapter: its mimetype first and stored, its container, its package."""
    written = io.BytesIO()
    with zipfile.ZipFile(written, "w") as archive:
        archive.writestr("mimetype", "application/epub+zip")
        archive.writestr("META-INF/container.xml", '<container xmlns="urn:oasis:names:tc:opendocument:xmlns:container">'
                         '<rootfiles><rootfile full-path="content.opf"/></rootfiles></container>')
        archive.writestr("content.opf", '<package xmlns="http://www.idpf.org/2007/opf"><metadata xmlns:dc="dc">'
                         '<dc:title>Getting started</dc:title><dc:language>en</dc:language></metadata><manifest>'
                         '<item id="c" href="a.xhtml" media-type="application/xhtml+xml"/></manifest>'
                         '<spine><itemref idref="c"/></spine></package>')
        archive.writestr("a.xhtml", chapter)
    return written.getvalue()


def uploads(count: int, rng: random.Random) -> tuple[dict, list[str]]:
    from fastapi.testclient import TestClient

    from service.app import create_app
    from service.document_worker import INTERNAL_FAILURE
    from service.settings import Settings
    from testing.fake_runtime import FakeRuntime

    counts: dict[str, int] = {}
    failures: list[str] = []
    app = create_app(Settings(model_dirs=["models/test-en-de"], inference_process=False, document_db=":memory:",
                              max_documents_waiting=10_000),
                     runtime_factory=lambda settings: [FakeRuntime("en", "de", max_source_pieces=512)])

    def tally(key: str) -> None:
        counts[key] = counts.get(key, 0) + 1

    with TestClient(app, raise_server_exceptions=False) as client:
        deadline = time.monotonic() + 60
        while client.get("/health/ready").status_code != 200 and time.monotonic() < deadline:
            time.sleep(0.05)
        for _ in range(count):
            seed = rng.choice(sorted(SEEDS))
            data = mutate(rng, SEEDS[seed])
            if seed.endswith((".docx", ".odt")):
                data = _zipped("word/document.xml" if seed.endswith(".docx") else "content.xml", data)
            elif seed.endswith(".epub"):
                data = _book(data)
            name = rng.choice([seed, seed, seed, seed.upper(), "x/" + seed, "C:\\x\\" + seed, "é" + seed, seed + "\x00",
                               "", "a" * 300 + seed])
            upload = {"file": (name, data, "application/octet-stream")}
            if rng.random() < 0.5:
                fields = {"source": rng.choice(["en", "auto", "en", "xx"]), "target": rng.choice(["de", "de", "fr"])}
                answer = client.post("/libretranslate/translate_file", data=fields, files=upload)
                tally(f"translate_file {answer.status_code}")
                if answer.status_code >= 500:
                    failures.append(f"translate_file {answer.status_code} {answer.text[:200]} for {name!r}: {data!r}")
                elif answer.status_code == 200:
                    download = client.get(answer.json()["translatedFileUrl"])
                    if download.status_code != 200:
                        failures.append(f"download_file {download.status_code} for {name!r}: {data!r}")
                continue
            fields = {"target_lang": rng.choice(["DE", "de", "FR", "EN-US"]), "filename": rng.choice(["", name])}
            answer = client.post("/deepl/v2/document", data=fields, files=upload)
            tally(f"v2/document {answer.status_code}")
            if answer.status_code >= 500:
                failures.append(f"v2/document {answer.status_code} {answer.text[:200]} for {name!r}: {data!r}")
            if answer.status_code != 200:
                continue
            handle, state = answer.json(), {}
            deadline = time.monotonic() + 30
            while state.get("status") not in ("done", "error") and time.monotonic() < deadline:
                time.sleep(0.01)
                state = client.post(f"/deepl/v2/document/{handle['document_id']}", json=handle).json()
            tally(f"document {state.get('status')}")
            if state.get("error_message") == INTERNAL_FAILURE or state.get("status") not in ("done", "error"):
                failures.append(f"document {state} for {name!r}: {data!r}")
    return counts, failures


def yaml_shapes(files: Iterable[tuple[str, bytes]]) -> tuple[int, int, list[str]]:
    """The YAML files PyYAML reads, translated into text that needs quoting: each output must read
    as YAML of the same shape (the same keys; strings where strings were). How many were read, how
    many strings they had translated, and the failures."""
    import yaml

    from service.documents import Failed, translate_document

    def quoting(texts, source, target, fmt):
        return [text.upper() + ' : it\'s "x" #y - [z] {w}' for text in texts]

    def shape(value, within=()):
        if id(value) in within:  # an alias to a collection holding it: YAML's recursion
            return "recursion"
        if isinstance(value, dict):
            return {key: shape(item, (*within, id(value))) for key, item in value.items()}
        if isinstance(value, list):
            return [shape(item, (*within, id(value))) for item in value]
        return type(value).__name__

    checked, strings, failures = 0, 0, []
    for name, data in files:
        try:
            before = yaml.safe_load(data)
        except yaml.YAMLError:
            continue  # not YAML to begin with
        try:
            done = translate_document("en.yml", data, quoting, "en", "xx")
        except Failed:
            continue
        written, strings = done.data, strings + done.count
        try:
            after = yaml.safe_load(written)
        except yaml.YAMLError as error:
            failures.append(f"not YAML after translation: {name}: {data!r}: {str(error)[:120]}")
            continue
        checked += 1
        if isinstance(before, dict) and len(before) == 1 and isinstance(after, dict) and len(after) == 1:
            before, after = next(iter(before.values())), next(iter(after.values()))  # the locale key, renamed
        if shape(before) != shape(after):
            failures.append(f"shape changed: {name}: {data!r}")
    return checked, strings, failures


def plural_shapes(files: Iterable[tuple[str, bytes]]) -> tuple[int, list[str]]:
    """Files with plurals translated into French, whose plurals gain "many": each output must read as
    its format where the input did, and nothing but a one-line refusal may stop one. How many were
    translated, and the failures."""
    import plistlib
    from xml.etree import ElementTree

    from service.documents import Failed, translate_document

    import tomlkit

    readers = {".stringsdict": plistlib.loads, ".xml": ElementTree.fromstring, ".xcstrings": json.loads, ".json": json.loads,
               ".toml": lambda data: tomlkit.parse(data.decode("utf-8"))}
    translated, failures = 0, []
    for name, data in files:
        read = readers[Path(name).suffix]
        try:
            read(data)
        except Exception:  # noqa: BLE001  # not its format to begin with: only the refusal is checked
            readable = False
        else:
            readable = True
        try:
            done = translate_document(name, data, lambda texts, *_: [text.upper() + " & <x>" for text in texts],
                                      "en", "fr")
        except Failed as error:
            if "\n" in str(error):
                failures.append(f"a refusal of several lines: {name}: {data!r}")
            continue
        except Exception as error:  # noqa: BLE001
            failures.append(f"{type(error).__name__}: {error}: {name}: {data!r}")
            continue
        translated += 1
        if readable:
            try:
                read(done.data)
            except Exception as error:  # noqa: BLE001
                failures.append(f"does not read after translation: {name}: {data!r}: {str(error)[:120]}")
    return translated, failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--uploads", type=int, default=300)
    parser.add_argument("--yaml", type=int, default=2000)
    parser.add_argument("--plurals", type=int, default=1000,
                        help="mutated files with plurals translated into French (their plurals gain categories)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--yaml-files", type=Path, default=None,
                        help="also every .yml file under this folder as it is (rails-i18n's rails/locale: a checkout of "
                             "github.com/svenfuchs/rails-i18n)")
    parser.add_argument("--results", type=Path, default=REPO / "results" / "document_fuzz.md")
    args = parser.parse_args()
    logging.getLogger("service").setLevel(logging.CRITICAL)  # the failures are counted, not logged
    rng = random.Random(args.seed)
    started = time.perf_counter()
    counts, failures = uploads(args.uploads, rng)
    checked, _, yaml_failures = yaml_shapes(("en.yml", mutate(rng, SEEDS["en.yml"])) for _ in range(args.yaml))
    failures += yaml_failures
    plural_seeds = ["Localizable.stringsdict", "plurals.xml", "Localizable.xcstrings", "en.toml", "plurals.json"]
    plurals, plural_failures = plural_shapes((seed, mutate(rng, SEEDS[seed]))
                                             for seed in (rng.choice(plural_seeds) for _ in range(args.plurals)))
    failures += plural_failures
    real = ""
    if args.yaml_files is not None:
        found = sorted(args.yaml_files.rglob("*.yml")) + sorted(args.yaml_files.rglob("*.yaml"))
        read, strings, real_failures = yaml_shapes((str(path), path.read_bytes()) for path in found)
        failures += real_failures
        real = f" The {len(found)} files under {args.yaml_files}: {read} read before and after, {strings} strings translated."
    report = (
        run_heading() + f"    python benchmarks/document_fuzz.py --uploads {args.uploads} --yaml {args.yaml} "
        f"--plurals {args.plurals} --seed {args.seed}" + (f" --yaml-files {args.yaml_files}" if args.yaml_files else "") +
        f"\n\n{args.uploads} mutated uploads ({len(SEEDS)} seed files), {time.perf_counter() - started:.0f} s: "
        + ", ".join(f"{key}: {value}" for key, value in sorted(counts.items()))
        + f". YAML files read before and after: {checked}.{real} Files with plurals translated into French: "
        f"{plurals} of {args.plurals}. **Failures: {len(failures)}**.\n\n"
        + "".join(f"- `{failure[:300]}`\n" for failure in failures[:10])
    )
    print(report)
    append_report(args.results, "The document routes under mutated files", "python benchmarks/document_fuzz.py", report)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
