"""The placeholder reader's scan filter (service/protection/placeholders.py `NEEDED`) on whole corpora:
every text read with and without it must give the same protected parts; and how long each takes.

    python benchmarks/placeholder_scan_filter.py     # appends to results/placeholder_scan_filter.md

The filter skips a style's pattern on a text without the character every match of that pattern holds
(tests/service/test_placeholder_scan_filter.py checks each character against its pattern's parse
tree); this reads the software corpus's splits in both languages and Multi30k's English training
captions with `find_protected` (every style, no terms), once as the service does and once with the
filter off, and counts the texts whose parts differ (expected: none).
"""
from __future__ import annotations

import argparse
import gzip
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.host import append_report, run_heading  # noqa: E402
from service.protection import placeholders  # noqa: E402

CORPORA = [f"data/debian_catalogs/{split}.{lang}.gz" for split in ("train", "valid", "test") for lang in ("en", "de")]
CORPORA.append("data/multi30k/train.en.gz")


def read_all(paths: list[str]) -> list[str]:
    texts: list[str] = []
    for path in paths:
        with gzip.open(REPO / path, "rt", encoding="utf-8") as handle:
            texts += [line.rstrip("\n") for line in handle]
    return texts


def timed_reading(texts: list[str]) -> tuple[list, float]:
    started = time.process_time()
    found = [placeholders.find_protected(text) for text in texts]
    return found, time.process_time() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "results" / "placeholder_scan_filter.md")
    args = parser.parse_args(argv)
    texts = read_all(CORPORA)
    filtered, with_filter = timed_reading(texts)
    needed = placeholders.NEEDED
    placeholders.NEEDED = {style: "" for style in needed}  # "" is in every text: every pattern runs
    try:
        unfiltered, without_filter = timed_reading(texts)
    finally:
        placeholders.NEEDED = needed
    differ = sum(1 for a, b in zip(filtered, unfiltered) if a != b)
    report = (run_heading() + f"Corpora: {', '.join(CORPORA)}: {len(texts):,} texts, {sum(1 for f in filtered if f):,} "
              f"with protected parts.\n\n| reading | CPU s | texts whose parts differ from scanning every pattern |\n"
              f"|---|---:|---:|\n| with the filter (the service) | {with_filter:.1f} | {differ} |\n"
              f"| every pattern on every text | {without_filter:.1f} | – |\n")
    append_report(args.out, "The placeholder scan filter on whole corpora", "python benchmarks/placeholder_scan_filter.py", report)
    print(report)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
