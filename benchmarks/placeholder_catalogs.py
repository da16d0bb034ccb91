"""Do UI messages from catalogs the service never saw keep exactly their placeholders?

    python benchmarks/placeholder_catalogs.py --build   # apt-get download the packages, write the set
    python benchmarks/placeholder_catalogs.py           # measure; appends to results/placeholder_catalogs.md
    python benchmarks/placeholder_catalogs.py --split data/debian_catalogs/test --model-dir models/en-de-software
                                                        # the software corpus' test split (packages the
                                                        # software model never saw: its placeholder target)
    python benchmarks/placeholder_catalogs.py --weblate # as Weblate sends them (below)

With --weblate each message goes as Weblate's machine-translation client sends it to a
LibreTranslate server (weblate/machinery/base.py `cleanup_text`): every placeholder replaced by a
marker `[X<offset>X]`, the texts posted to `/libretranslate/translate` without a format, and the
markers in the answer swapped back the way Weblate does (`[X12X]`, spaces allowed before the `]`).

The set (data/protection_eval/debian_unseen.jsonl, built once by --build and committed): English UI
messages and their German translations from the gettext catalogs (`usr/share/locale/de/LC_MESSAGES/
*.mo`, read by hand below: some are not UTF-8, which the stdlib's gettext refuses) of Debian 12
packages that neither the project's own placeholder set (apt, coreutils, dpkg, git, gnupg2, tar,
wget) nor the software corpus' held-out list (issue 31) names: bison, cpio, gawk, kbd, m4, make,
man-db, psmisc, sharutils, sudo, xz-utils. A message is taken when it has 8-300 characters, 8
letters or more, at least one placeholder, and its German translation has the same placeholders
(the translator's own check that they are placeholders); at most 100 per catalog, a seeded sample.

The placeholders a message must keep are read by `REFERENCE` below, written apart from the
service's detector and broader than it: a `%` with, in printf's order, an argument number, flags
(the space flag included), width, precision and a length modifier before any letter; `%%`; Qt's
`%1` (a `%` and digits); any `{...}` without spaces; `${VAR}` and entities. (Until 2026-11-27 it
took flags, width and precision in any order, so "%1 was invited" held a placeholder "%1 w" that
an output "%1 wurde" keeps and "%1 In diesem Raum" does not; Qt's `%1` alone it did not read.) A message counts as kept when its output holds exactly the source's placeholders by that
reading, each as many times: none lost, none changed, none added.
"""
from __future__ import annotations

import argparse
import collections
import json
import random
import re
import shlex
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.host import append_report, in_process_service, run_heading  # noqa: E402

DATA = REPO / "data" / "protection_eval" / "debian_unseen.jsonl"
PACKAGES = ["bison", "cpio", "gawk", "kbd", "m4", "make", "man-db", "psmisc", "sharutils", "sudo", "xz-utils"]
PER_CATALOG = 100
REFERENCE = re.compile(r"%L?\d+(?![\d$A-Za-z]|\.\d)|%(?:\d+\$)?[-+ 0#'I]*(?:\d+|\*(?:\d+\$)?)?(?:\.(?:\d+|\*(?:\d+\$)?))?(?:hh|ll|[hlLqjzZt])?[A-Za-z%]"
                       r"|\$\{\w+\}|\{[^{}\s]*\}|&(?:#\d+|#x[0-9a-fA-F]+|[A-Za-z]\w*);")


def read_mo(data: bytes) -> dict[str, str]:
    """msgid -> msgstr of a compiled gettext catalog (the first form of plurals; no contexts)."""
    order = "<" if struct.unpack("<I", data[:4])[0] == 0x950412DE else ">"
    _, count, originals, translations = struct.unpack(order + "4I", data[4:20])
    pairs = []
    for i in range(count):
        length, offset = struct.unpack(order + "2I", data[originals + 8 * i:originals + 8 * i + 8])
        t_length, t_offset = struct.unpack(order + "2I", data[translations + 8 * i:translations + 8 * i + 8])
        pairs.append((data[offset:offset + length], data[t_offset:t_offset + t_length]))
    header = dict(pairs).get(b"", b"")
    charset = re.search(rb"charset=([-\w]+)", header)
    encoding = charset.group(1).decode() if charset else "utf-8"
    return {source.split(b"\0")[0].decode(encoding, "replace"): target.split(b"\0")[0].decode(encoding, "replace")
            for source, target in pairs if source and b"\x04" not in source}


def build() -> None:
    messages = []
    with tempfile.TemporaryDirectory() as folder:
        subprocess.run(["apt-get", "download", *PACKAGES], cwd=folder, check=True, capture_output=True)
        for deb in sorted(Path(folder).glob("*.deb")):
            fields = subprocess.run(["dpkg-deb", "-f", str(deb), "Package", "Version"], check=True,
                                    capture_output=True, text=True).stdout.split("\n")
            package, version = (f.split(": ", 1)[1] for f in fields[:2])
            subprocess.run(["dpkg-deb", "-x", str(deb), f"{folder}/{package}"], check=True)
            for mo in sorted(Path(folder, package).glob("usr/share/locale/de/LC_MESSAGES/*.mo")):
                found = []
                for source, target in read_mo(mo.read_bytes()).items():
                    wanted = sorted(REFERENCE.findall(source))
                    if (target and wanted and wanted == sorted(REFERENCE.findall(target)) and 8 <= len(source) <= 300
                            and sum(c.isalpha() for c in source) >= 8):
                        found.append({"package": package, "version": version, "catalog": mo.stem,
                                      "source": source, "reference": target})
                found.sort(key=lambda m: m["source"])
                messages += random.Random(mo.stem).sample(found, min(PER_CATALOG, len(found)))
    DATA.write_text("".join(json.dumps(m, ensure_ascii=False) + "\n" for m in messages), encoding="utf-8")
    print(f"{len(messages)} messages from {len({m['catalog'] for m in messages})} catalogs in {DATA}")


def split_items(split: Path) -> list[dict]:
    """The pairs of a corpus split (SPLIT.en.gz, SPLIT.de.gz, SPLIT.origin.gz: package and catalog,
    as training/corpus writes them) whose English holds a placeholder by REFERENCE that the German
    reference holds alike: the same selection as the built set, without its per-catalog sample."""
    import gzip

    def lines(suffix: str) -> list[str]:
        with gzip.open(f"{split}.{suffix}.gz", "rt", encoding="utf-8") as handle:
            return handle.read().splitlines()

    items = []
    for source, target, origin in zip(lines("en"), lines("de"), lines("origin")):
        wanted = sorted(REFERENCE.findall(source))
        if wanted and wanted == sorted(REFERENCE.findall(target)):
            package, catalog = origin.split("\t")
            items.append({"package": package, "catalog": catalog, "source": source, "reference": target})
    return items


def weblate_cleanup(text: str) -> tuple[str, dict[str, str]]:
    """`text` with each placeholder replaced by Weblate's marker, and the markers' placeholders."""
    replacements: dict[str, str] = {}

    def marker(match: re.Match) -> str:
        replacements[f"[X{match.start()}X]"] = match.group()
        return f"[X{match.start()}X]"
    return REFERENCE.sub(marker, text), replacements


def weblate_uncleanup(text: str, replacements: dict[str, str]) -> str:
    for marker, placeholder in replacements.items():
        text = re.sub(re.escape(marker[:-1]) + " *" + re.escape(marker[-1]), lambda _: placeholder, text)
    return text


def kept(source: str, output: str) -> bool:
    return collections.Counter(REFERENCE.findall(source)) == collections.Counter(REFERENCE.findall(output))


def measure(args: argparse.Namespace) -> str:
    from service.settings import Settings

    if args.split is not None:
        items = split_items(args.split)
    else:
        items = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines() if line.strip()]
    model_dirs = args.model_dir + ([Path(args.reverse_model_dir)] if args.reverse_model_dir else [])
    started = time.perf_counter()
    outputs: list[str] = []
    with in_process_service(Settings(model_dirs=model_dirs, device="cpu", inference_process=False,
                                     warmup=False)) as client:
        precision = "/".join(sorted({str(m["precision"]) for m in client.get("/models").json()["models"]}))
        for start in range(0, len(items), 32):
            batch = [i["source"] for i in items[start:start + 32]]
            if args.weblate:
                cleaned = [weblate_cleanup(text) for text in batch]
                response = client.post("/libretranslate/translate", json={"q": [text for text, _ in cleaned],
                                                                           "source": "en", "target": "de"})
                assert response.status_code == 200, response.text
                outputs += [weblate_uncleanup(text, replacements)
                            for text, (_, replacements) in zip(response.json()["translatedText"], cleaned)]
                continue
            response = client.post("/translate", json={"text": batch, "source": "en", "target": "de"})
            assert response.status_code == 200, response.text
            outputs += [nbest[0]["text"] for nbest in response.json()["translations"]]
    seconds = time.perf_counter() - started
    by_package: dict[str, list[bool]] = collections.defaultdict(list)
    misses = []
    for item, output in zip(items, outputs):
        ok = kept(item["source"], output)
        by_package[item["package"]].append(ok)
        if not ok:
            misses.append((item["source"], output))
    total = sum(map(sum, by_package.values()))
    lines = [run_heading(f", torch backend on CPU ({precision}), {' + '.join(path.name for path in model_dirs)}").strip(), "",
             f"Command: `{args.command}` ({seconds:.0f} s).", "",
             f"**{total}/{len(items)} = {total / len(items):.2%}** of the messages keep exactly their placeholders"
             + (" (sent as Weblate sends them: markers `[X<offset>X]`, swapped back)" if args.weblate else "") + ".", "",
             "| package | messages | kept exactly |", "|---|---:|---:|"]
    lines += [f"| {package} | {len(oks)} | {sum(oks) / len(oks):.1%} |" for package, oks in sorted(by_package.items())]
    if misses:
        lines += ["", "Missed (source → output):", ""]
        lines += [f"- `{json.dumps(source, ensure_ascii=False)}` → `{json.dumps(output, ensure_ascii=False)}`"
                  for source, output in misses]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", action="store_true", help="download the packages and rebuild the set")
    parser.add_argument("--results", type=Path, default=REPO / "results" / "placeholder_catalogs.md")
    parser.add_argument("--model-dir", type=Path, nargs="+", default=[REPO / "models" / "en-de-align2", REPO / "models" / "en-de-software"],
                        help="the En->De models served (several: the service chooses per text); default: what make serve serves")
    parser.add_argument("--reverse-model-dir", default=str(REPO / "models" / "de-en-align"),
                        help="served beside it, as make serve does; '' for none")
    parser.add_argument("--split", type=Path, default=None,
                        help="instead of the built set: every pair with placeholders of a software-corpus split, "
                             "e.g. data/debian_catalogs/test (packages the software model never saw)")
    parser.add_argument("--weblate", action="store_true",
                        help="send each message as Weblate's LibreTranslate client does, its placeholders as [X<offset>X]")
    args = parser.parse_args()
    args.command = "python benchmarks/placeholder_catalogs.py " + shlex.join(sys.argv[1:])
    if args.build:
        build()
        return 0
    report = measure(args)
    print(report)
    append_report(args.results, "Placeholders in UI messages from catalogs the service never saw",
                  "python benchmarks/placeholder_catalogs.py", report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
