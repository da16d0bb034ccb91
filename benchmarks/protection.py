"""Placeholders and tags through /translate: do they survive, do they land in the right place, and
does protecting them cost translation quality?

    python benchmarks/protection.py --build      # (re)write the test sets under data/protection_eval/
    python benchmarks/protection.py              # measure; appends to results/protection.md

Test sets (data/protection_eval/, built once by --build and committed):
- ui_messages.jsonl: English UI messages with placeholders and their German translations, from
  the gettext catalogs of Debian 12 packages (apt, coreutils, dpkg, git, gnupg2, tar, wget):
  single-line messages with at least one placeholder whose German translation keeps the same
  placeholders, 60 per package at most (seeded sample).
- multi30k_placeholders.jsonl: the first 300 sentences of test_2016_flickr with one placeholder
  inserted at a random word boundary (seeded), and the German reference.
- multi30k_tags.jsonl: the same sentences with one to three consecutive words wrapped in an
  inline tag (<b>, <i> or <a href=…>), format html.

Measured, for the service as it runs (bundled model, torch backend, CPU):
- survival: every placeholder exactly once in the output (and, for the unprotected baseline, the
  raw text sent to the model as is; for masking, the text with each placeholder replaced by a
  number the model should copy): the measurement that chose removal and re-insertion;
- tags: every tag present and the output well nested;
- BLEU / chrF (sacreBLEU) of the text around them: placeholders and tags removed from output and
  reference, protected against unprotected;
- tag placement agreement with a person's judgement: placement_judgements.jsonl holds, for the
  first 50 tagged sentences, whether the tag wraps the translation of what it wrapped; an output
  that changed since it was judged is reported as not judged.
"""
from __future__ import annotations

import argparse
import gettext
from collections import Counter
import gzip
import json
import os
import platform
import random
import re
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from service.protection.markup import MarkupError, read_markup  # noqa: E402
from service.protection.placeholders import find_protected  # noqa: E402
from host import append_report, cpu_name, in_process_service  # noqa: E402  (benchmarks/host.py: the script's own folder is on sys.path)

DATA = REPO / "data" / "protection_eval"
PACKAGES = ["apt", "coreutils", "dpkg", "git", "gnupg2", "tar", "wget"]
CATALOGS = Path("/usr/share/locale/de/LC_MESSAGES")
PLACEHOLDERS = ["%s", "%d", "{name}", "{0}", "${USER}", "%1$s"]
TAGS = [("<b>", "</b>"), ("<i>", "</i>"), ('<a href="https://example.org/{k}">', "</a>")]


def build() -> None:
    DATA.mkdir(parents=True, exist_ok=True)
    messages = []
    for package in PACKAGES:
        with open(CATALOGS / f"{package}.mo", "rb") as handle:
            catalog = gettext.GNUTranslations(handle)._catalog  # msgid -> msgstr
        found = []
        for source, target in catalog.items():
            if not isinstance(source, str) or not isinstance(target, str) or not target:
                continue
            if "\n" in source.strip() or not 12 <= len(source) <= 160 or sum(c.isalpha() for c in source) <= 10:
                continue
            kept = sorted(p.text for p in find_protected(source))
            if kept and kept == sorted(p.text for p in find_protected(target)):
                found.append({"package": package, "source": source.strip(), "reference": target.strip()})
        found.sort(key=lambda m: m["source"])
        messages += random.Random(package).sample(found, min(60, len(found)))
    write_jsonl(DATA / "ui_messages.jsonl", messages)

    en, de = read_split("test_2016_flickr", "en")[:300], read_split("test_2016_flickr", "de")[:300]
    with_placeholders, with_tags = [], []
    for k, (source, reference) in enumerate(zip(en, de)):
        rng = random.Random(k)
        words = source.split(" ")
        at = rng.randrange(len(words))  # before word `at`
        placeholder = rng.choice(PLACEHOLDERS)
        with_placeholders.append({"id": k, "source": " ".join(words[:at] + [placeholder] + words[at:]),
                                  "reference": reference, "placeholder": placeholder})
        width = rng.randint(1, min(3, len(words)))
        first = rng.randrange(len(words) - width + 1)
        opening, closing = rng.choice(TAGS)
        opening = opening.format(k=k)
        wrapped = words[:first] + [opening + words[first]] + words[first + 1:]
        wrapped[first + width - 1] += closing
        with_tags.append({"id": k, "source": " ".join(wrapped), "reference": reference,
                          "wrapped": " ".join(words[first:first + width])})
    write_jsonl(DATA / "multi30k_placeholders.jsonl", with_placeholders)
    write_jsonl(DATA / "multi30k_tags.jsonl", with_tags)
    print(f"{len(messages)} UI messages, {len(with_placeholders)} + {len(with_tags)} Multi30k sentences in {DATA}")


def read_split(split: str, lang: str) -> list[str]:
    with gzip.open(REPO / "data" / "multi30k" / f"{split}.{lang}.gz", "rt", encoding="utf-8") as handle:
        return [line.rstrip("\n") for line in handle]


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def without_protected(text: str, fmt: str = "text") -> str:
    """The words around the placeholders and tags: what BLEU is measured on."""
    if fmt != "text":
        try:
            text = read_markup(text, "html").plain
        except MarkupError:
            text = re.sub(r"<[^>]*>", "", text)
    for p in reversed(find_protected(text)):
        text = text[:p.start] + text[p.end:]
    return " ".join(text.split())


def survived(source: str, output: str) -> bool:
    """Every placeholder of the source in the output exactly as often, as the detector reads both: a
    count of each one's characters would find `%s` twice in `'%s%s'` (one part since 2026-11-28)."""
    return Counter(p.text for p in find_protected(output)) == Counter(p.text for p in find_protected(source))


# The other way to protect a placeholder: replace it by a token the model copies, find it again in
# the output. Numbers are what this model copies best (tried: X1..X6 0 %, first names 7 %).
MASKS = ["123", "456", "789", "246", "135", "579"]


def masked_row(name: str, sources: list[str], raw) -> str:
    """Survival when each placeholder is replaced by a number mask before translation: every mask
    must come back exactly once for the placeholders to be put back."""
    masked, wanted = [], []
    for text in sources:
        found = find_protected(text)
        for k, p in reversed(list(enumerate(found))):
            text = text[:p.start] + MASKS[k % len(MASKS)] + text[p.end:]
        masked.append(text)
        wanted.append([MASKS[k % len(MASKS)] for k in range(len(found))])
    outputs = raw(masked)
    kept = sum(all(o.count(m) == w.count(m) for m in set(w)) for o, w in zip(outputs, wanted))
    return f"| {name} | masked as numbers | {len(sources)} | {kept / len(sources):.1%} | — | — |"


def measure(args: argparse.Namespace) -> str:
    import sacrebleu

    from service.runtime.base import DecodingOptions
    from service.runtime.factory import RuntimeSpec, load_runtime
    from service.settings import Settings

    model_dirs = [args.model_dir] + ([Path(args.reverse_model_dir)] if args.reverse_model_dir else [])
    settings = Settings(model_dirs=model_dirs, device="cpu", inference_process=False, warmup=False)
    runtimes = [load_runtime(RuntimeSpec("torch", path, "cpu")) for path in model_dirs]
    lines = []
    with in_process_service(settings, runtime_factory=lambda s: runtimes) as client:

        def protected(texts: list[str], **extra) -> list[str]:
            out = []
            for start in range(0, len(texts), 32):
                response = client.post("/translate", json={"text": texts[start:start + 32], "source": "en",
                                                           "target": "de", **extra})
                assert response.status_code == 200, response.text
                out += [nbest[0]["text"] for nbest in response.json()["translations"]]
            return out

        def raw(texts: list[str]) -> list[str]:
            return [nbest[0].text for nbest in runtimes[0].translate(texts, DecodingOptions())]

        started = time.perf_counter()
        rows = []
        for name, path in (("UI messages (Debian catalogs)", DATA / "ui_messages.jsonl"),
                           ("Multi30k + placeholder", DATA / "multi30k_placeholders.jsonl")):
            items = read_jsonl(path)
            sources, refs = [i["source"] for i in items], [without_protected(i["reference"]) for i in items]
            for mode, outputs in (("protected", protected(sources)), ("unprotected", raw(sources))):
                kept = sum(survived(s, o) for s, o in zip(sources, outputs))
                if mode == "unprotected":
                    rows.append(masked_row(name, sources, raw))
                hyps = [without_protected(o) for o in outputs]
                bleu = sacrebleu.corpus_bleu(hyps, [refs]).score
                chrf = sacrebleu.corpus_chrf(hyps, [refs]).score
                rows.append(f"| {name} | {mode} | {len(items)} | {kept / len(items):.1%} | {bleu:.2f} | {chrf:.2f} |")

        items = read_jsonl(DATA / "multi30k_tags.jsonl")
        sources = [i["source"] for i in items]
        outputs = protected(sources, format="html")
        nested = present = 0
        for source, output in zip(sources, outputs):
            try:
                tags = read_markup(output, "xml").tags
                nested += 1
                present += [t.opening for t in tags] == [t.opening for t in read_markup(source, "html").tags]
            except MarkupError:
                pass
        refs = [i["reference"] for i in items]
        hyps = [without_protected(o, "html") for o in outputs]
        plain_outputs = raw([without_protected(s, "html") for s in sources])
        tag_bleu = sacrebleu.corpus_bleu(hyps, [refs]).score
        plain_bleu = sacrebleu.corpus_bleu(plain_outputs, [refs]).score
        judged = {j["id"]: j for j in read_jsonl(DATA / "placement_judgements.jsonl")} \
            if (DATA / "placement_judgements.jsonl").exists() else {}
        agree = counted = stale = 0
        for item, output in zip(items[:50], outputs[:50]):
            verdict = judged.get(item["id"])
            if verdict is None or verdict["output"] != output:
                stale += 1
                continue
            counted += 1
            agree += bool(verdict["agree"])
        if args.sample:
            write_jsonl(DATA / "placement_sample.jsonl", [
                {"id": i["id"], "source": i["source"], "wrapped": i["wrapped"], "output": o}
                for i, o in zip(items[:50], outputs[:50])])
        seconds = time.perf_counter() - started

    lines.append(f"## {time.strftime('%Y-%m-%d')} — {cpu_name()}, {os.cpu_count()} logical CPUs, "
                 f"{platform.system()}, torch backend on CPU ({'/'.join(sorted({str(r.precision) for r in runtimes}))}), "
                 f"{' + '.join(path.name for path in model_dirs)}")
    lines.append("")
    command = "python benchmarks/protection.py" + ("" if args.reverse_model_dir else " --reverse-model-dir ''")
    lines.append(f"Command: `{command}` ({seconds:.0f} s).")
    lines.append("")
    lines.append("| set | mode | texts | every placeholder exactly once | BLEU around them | chrF around them |")
    lines.append("|---|---|---:|---:|---:|---:|")
    lines += rows
    lines.append("")
    lines.append(f"Tags (Multi30k + one inline tag, format html, {len(items)} sentences): output well nested "
                 f"{nested / len(items):.1%}, every tag present {present / len(items):.1%}; BLEU of the text "
                 f"{tag_bleu:.2f} with tags vs {plain_bleu:.2f} for the same sentences without them.")
    agreement = f"{agree}/{counted} = {agree / counted:.0%}" if counted else "none judged"
    lines.append(f"Tag placement agreement with a person's judgement (first 50 tagged sentences): {agreement}"
                 + (f"; {stale} outputs changed since they were judged (not counted)" if stale else "") + ".")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", action="store_true", help="rebuild the test sets from the catalogs and Multi30k")
    parser.add_argument("--sample", action="store_true", help="write placement_sample.jsonl for judging")
    parser.add_argument("--results", type=Path, default=REPO / "results" / "protection.md")
    parser.add_argument("--model-dir", type=Path, default=REPO / "models" / "en-de-align2", help="default: what make serve serves")
    parser.add_argument("--reverse-model-dir", default=str(REPO / "models" / "de-en-align"),
                        help="served beside it, as make serve does, so that alignments are bidirectional; '' for none")
    args = parser.parse_args()
    if args.build:
        build()
        return 0
    report = measure(args)
    print(report)
    append_report(args.results, "Placeholders and tags through /translate", "python benchmarks/protection.py", report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
