"""A gettext catalog pre-translated end to end (service/pretranslate.py through the service over
HTTP), and checked the way a localiser's build checks it: gettext's `msgfmt --check --use-fuzzy`.

    python benchmarks/pretranslate_catalog.py                 # the software test split, as written
    python benchmarks/pretranslate_catalog.py --split valid --limit 500
    python benchmarks/pretranslate_catalog.py --through libretranslate   # or deepl: the document routes

The split's messages as their catalogs write them (`data/debian_catalogs/SPLIT.as_written.jsonl.gz`,
each source once) become a catalog, each message flagged as xgettext flags it: `c-format` where it
holds a C conversion (`%s`, `%1$d`), `python-format` for `%(name)s`, `qt-format` for `%1`. The
service (this checkout, models/en-de-software, in this process on a free port) pre-translates it,
and msgfmt checks every translation against its message: the same conversions in a c-format or
python-format message, the same `%1` in a qt-format one, a line break at the start and the end where
the message has one. Reported: messages translated, messages msgfmt finds fault with (and the first
ones), BLEU and chrF2 of the translations against the catalogs' own. `--through` sends the catalog
as a document instead: LibreTranslate's translate_file (the file downloaded from the URL it answers)
or DeepL's v2/document through DeepL's Python client (`translate_document`). Appends to
results/pretranslate_catalog.md.
"""
from __future__ import annotations

import argparse
import gzip
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.host import append_report, run_heading  # noqa: E402

_C_FORMAT = re.compile(r"%(?:\d+\$)?[-+ 0#']*(?:\d+|\*)?(?:\.(?:\d+|\*))?(?:hh|h|ll|l|L|j|z|t)?[diouxXeEfFgGaAcsp]")
_PYTHON_FORMAT = re.compile(r"%\([A-Za-z_]\w*\)[-+ 0#]*\d*(?:\.\d+)?[diouxXeEfFgGcrsa]")
_QT_FORMAT = re.compile(r"%L?\d{1,2}(?![\d$])")


def flags(message: str) -> list[str]:
    """The format flag xgettext would give the message, if any."""
    if _PYTHON_FORMAT.search(message):
        return ["python-format"]
    if _C_FORMAT.search(message):
        return ["c-format"]
    if _QT_FORMAT.search(message):
        return ["qt-format"]
    return []


def catalog(split: str, limit: int | None) -> tuple[str, dict[str, str]]:
    """The catalog's text, and each message's reference translation."""
    import polib

    references: dict[str, str] = {}
    with gzip.open(REPO / "data" / "debian_catalogs" / f"{split}.as_written.jsonl.gz", "rt", encoding="utf-8") as handle:
        for line in handle:
            pair = json.loads(line)
            references.setdefault(pair["source"], pair["target"])
            if limit is not None and len(references) == limit:
                break
    po = polib.POFile()
    po.metadata = {"Project-Id-Version": f"debian-catalogs-{split}", "PO-Revision-Date": "2026-11-29 00:00+0000",
                   "Last-Translator": "phrasal", "Language-Team": "German", "Language": "de", "MIME-Version": "1.0",
                   "Content-Type": "text/plain; charset=UTF-8",
                   "Content-Transfer-Encoding": "8bit", "Plural-Forms": "nplurals=2; plural=(n != 1);"}
    for source in references:
        po.append(polib.POEntry(msgid=source, msgstr="", flags=flags(source)))
    return str(po), references


THROUGH = {"pretranslate": "`python -m service.pretranslate`",
           "libretranslate": "LibreTranslate's `translate_file` (service/http/libretranslate.py)",
           "deepl": "DeepL's `v2/document` with DeepL's client (service/http/deepl.py)"}


def through_documents(api: str, url: str, path: Path) -> bytes:
    """The catalog at `path` translated as a document through `api`'s route of the service at `url`."""
    import io
    import urllib.request
    import uuid

    if api == "deepl":
        import deepl

        output = io.BytesIO()
        deepl.Translator("any", server_url=url + "/deepl/").translate_document(
            path.read_bytes(), output, source_lang="EN", target_lang="DE", filename=path.name)
        return output.getvalue()
    boundary = uuid.uuid4().hex
    fields = "".join(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'
                     for name, value in (("source", "en"), ("target", "de")))
    body = (fields + f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{path.name}"\r\n\r\n'
            ).encode() + path.read_bytes() + f"\r\n--{boundary}--\r\n".encode()
    request = urllib.request.Request(url + "/libretranslate/translate_file", body,
                                     {"Content-Type": f"multipart/form-data; boundary={boundary}"})
    with urllib.request.urlopen(request, timeout=3600) as response:
        location = json.load(response)["translatedFileUrl"]
    with urllib.request.urlopen(location, timeout=60) as response:
        return response.read()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=("valid", "test"), default="test")
    parser.add_argument("--limit", type=int, default=None, help="the first this many messages")
    parser.add_argument("--through", choices=("pretranslate", "libretranslate", "deepl"), default="pretranslate",
                        help="the pre-translation client (default), or a document route of the compatible APIs")
    parser.add_argument("--results", type=Path, default=REPO / "results" / "pretranslate_catalog.md")
    args = parser.parse_args()
    import polib
    import sacrebleu

    from service.app import create_app
    from service.pretranslate import main as pretranslate
    from service.settings import Settings
    from testing.live_server import live_server

    msgfmt = shutil.which("msgfmt")
    text, references = catalog(args.split, args.limit)
    with tempfile.TemporaryDirectory() as scratch:
        settings = Settings(model_dirs=[REPO / "models" / "en-de-software"], device="cpu", inference_process=False,
                            warmup=False, memories=[], document_db=Path(scratch) / "documents.sqlite3")
        with live_server(create_app(settings)) as url:
            path = Path(scratch) / "de.po"
            path.write_text(text, encoding="utf-8")
            started = time.perf_counter()
            if args.through == "pretranslate":
                status = pretranslate([str(path), "--in-place", "--url", url])
                if status != 0:
                    return status
            else:
                path.write_bytes(through_documents(args.through, url, path))
            seconds = time.perf_counter() - started
        translated = polib.pofile(str(path))
        faults: list[str] = []
        if msgfmt is not None:
            check = subprocess.run([msgfmt, "--check", "--use-fuzzy", "-o", "/dev/null", str(path)],
                                   capture_output=True, text=True)
            faults = [line for line in check.stderr.splitlines() if re.match(r".*:\d+: ", line)]
    outputs = [entry.msgstr for entry in translated]
    sources = [entry.msgid for entry in translated]
    done = sum(bool(entry.msgstr) for entry in translated)
    bleu = sacrebleu.corpus_bleu(outputs, [[references[s] for s in sources]]).score
    chrf = sacrebleu.corpus_chrf(outputs, [[references[s] for s in sources]]).score
    flagged = sum(bool(entry.flags and set(entry.flags) - {"fuzzy"}) for entry in translated)
    checked = (f"{len(faults)} lines of fault (msgfmt --check --use-fuzzy)" if msgfmt is not None
               else "not checked: msgfmt is not installed (Debian's gettext package)")
    report = (
        run_heading() +
        f"    python benchmarks/pretranslate_catalog.py --split {args.split}"
        + (f" --limit {args.limit}" if args.limit else "")
        + (f" --through {args.through}" if args.through != "pretranslate" else "") + "\n\n"
        f"{len(sources)} messages of data/debian_catalogs/{args.split}.as_written.jsonl.gz, {flagged} of them with a "
        f"format flag; models/en-de-software, through {THROUGH[args.through]} over HTTP, {seconds:.0f} s.\n\n"
        "| messages translated | msgfmt's check | BLEU / chrF2 against the catalogs' translations |\n"
        "|---:|---|---:|\n"
        f"| {done}/{len(sources)} | {checked} | {bleu:.2f} / {chrf:.2f} |\n\n"
        + ("msgfmt's first faults:\n\n" + "".join(f"- `{line}`\n" for line in faults[:10]) + "\n" if faults else "")
    )
    print(report)
    append_report(args.results, "A gettext catalog pre-translated and checked by msgfmt",
                  "python benchmarks/pretranslate_catalog.py", report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
