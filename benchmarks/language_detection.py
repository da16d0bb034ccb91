"""How well does source-language detection (service/language_detection.py) name the language of a
text, on the Multi30k test sets of every served language?

    python benchmarks/language_detection.py     # appends to results/language_detection.md

For each language of the served models (models/*/ manifests; with data in data/multi30k) and each
test set (test_2016_flickr, test_2017_flickr, 1000 sentences each), the share of sentences detected
as their language: by the service's detector (py3langid restricted to the served languages), by
py3langid over all its 97 languages (what it says unrestricted), and both on the first three words
of each sentence only (what a user has typed when the page first asks). French is measured too,
unrestricted, as a language the bundled models do not serve.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from host import append_report, cpu_name  # noqa: E402

from service.language_detection import LanguageDetector  # noqa: E402

SPLITS = ["test_2016_flickr", "test_2017_flickr"]


def served_languages() -> list[str]:
    languages = set()
    for manifest in (REPO / "models").glob("*/manifest.json"):
        data = json.loads(manifest.read_text())
        languages.update(data[key] for key in ("source_lang", "target_lang") if key in data)
    return sorted(languages)


def sentences(split: str, lang: str) -> list[str]:
    path = REPO / "data" / "multi30k" / f"{split}.{lang}.gz"
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return [line.strip() for line in handle if line.strip()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=REPO / "results" / "language_detection.md")
    args = parser.parse_args()
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    served = served_languages()
    detector = LanguageDetector(served)
    unrestricted = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    started = time.perf_counter()
    rows = []
    for lang in served + ["fr"]:
        for split in SPLITS:
            if not (REPO / "data" / "multi30k" / f"{split}.{lang}.gz").exists():
                continue
            texts = sentences(split, lang)
            short = [" ".join(t.split()[:3]) for t in texts]
            cells = []
            for inputs in (texts, short):
                if lang in served:
                    cells.append(sum(detector.detect(t).language == lang for t in inputs) / len(inputs))
                else:
                    cells.append(None)
                cells.append(sum(unrestricted.classify(t)[0] == lang for t in inputs) / len(inputs))
            rows.append(f"| {lang} | {split} | {len(texts)} | " + " | ".join("—" if c is None else f"{c:.1%}" for c in cells) + " |")
    seconds = time.perf_counter() - started
    report = "\n".join([
        f"## {time.strftime('%Y-%m-%d')} — {cpu_name()}, {os.cpu_count()} logical CPUs, {platform.system()}", "",
        f"Command: `python benchmarks/language_detection.py` ({seconds:.0f} s). Served languages: {', '.join(served)}.", "",
        "| language | test set | sentences | served only | all 97 | served only, first 3 words | all 97, first 3 words |",
        "|---|---|---:|---:|---:|---:|---:|", *rows]) + "\n"
    print(report)
    append_report(args.results, "Source-language detection on the Multi30k test sets",
                  "python benchmarks/language_detection.py", report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
