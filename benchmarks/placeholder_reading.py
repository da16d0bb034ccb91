"""What the placeholder reader (service/protection/placeholders.py) takes for a placeholder in text
a translator wrote: a probe for rules that misfire on German.

    python benchmarks/placeholder_reading.py                                  # the software training split
    python benchmarks/placeholder_reading.py --split data/debian_catalogs/valid

For each message pair of a corpus split, the protected parts (every style) the German reference has
and its English source does not, counted per kind, with the most frequent contexts (the three
characters before each, and its first character): a German compound read as an option
("GTK+-Bibliothek") shows up here, and so does a translator's renamed option argument
("»--fontsize=GRÖSSE«", a real one). Also the parts read on the English side, per kind. The service
takes what it reads in a translation and not in the source for something the model made up
(protected_translation.serve_as_written refuses it; placement.restore removes it), so every false
reading on the German side can cost a word. Appends to results/placeholder_reading.md.
"""
from __future__ import annotations

import argparse
import gzip
import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.host import append_report, run_heading  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", type=Path, default=REPO / "data" / "debian_catalogs" / "train")
    parser.add_argument("--contexts", type=int, default=12, help="contexts shown per kind")
    parser.add_argument("--results", type=Path, default=REPO / "results" / "placeholder_reading.md")
    args = parser.parse_args()
    missing = [f"{args.split}.{side}.gz" for side in ("en", "de") if not Path(f"{args.split}.{side}.gz").is_file()]
    if missing:
        parser.error(f"--split {args.split}: no {' or '.join(missing)}")

    from service.protection.placeholders import find_protected

    started = time.perf_counter()
    source_kinds: Counter = Counter()
    extra_kinds: Counter = Counter()
    contexts: dict[str, Counter] = {}
    pairs = 0
    with gzip.open(f"{args.split}.en.gz", "rt", encoding="utf-8") as en, \
            gzip.open(f"{args.split}.de.gz", "rt", encoding="utf-8") as de:
        for source, reference in zip(en, de):
            source, reference = source.rstrip("\n"), reference.rstrip("\n")
            pairs += 1
            found = find_protected(source)
            source_kinds.update(p.kind for p in found)
            have = Counter(p.text for p in found)
            for part in find_protected(reference):
                if have[part.text]:
                    have[part.text] -= 1
                    continue
                extra_kinds[part.kind] += 1
                before = reference[max(0, part.start - 3):part.start]
                contexts.setdefault(part.kind, Counter())[f"{before}⟨{part.text[:1]}"] += 1
    seconds = time.perf_counter() - started

    try:
        shown = args.split.relative_to(REPO)
    except ValueError:
        shown = args.split
    lines = [run_heading().strip(), "", f"    python benchmarks/placeholder_reading.py --split {shown}", "",
             f"{pairs} message pairs ({seconds:.0f} s). Per kind: the parts read in the English sources, and "
             "those read in the German references that their source does not have.", "",
             "| kind | read in the sources | in a reference, not its source | most frequent contexts (⟨ = where it starts) |",
             "|---|---:|---:|---|"]
    for kind in sorted(set(source_kinds) | set(extra_kinds), key=lambda k: -extra_kinds[k]):
        common = ", ".join(f"`{text}` {count}" for text, count in contexts.get(kind, Counter()).most_common(args.contexts))
        lines.append(f"| {kind} | {source_kinds[kind]} | {extra_kinds[kind]} | {common} |")
    report = "\n".join(lines) + "\n"
    print(report)
    append_report(args.results, "Placeholders read in translators' German: a probe for misfiring rules",
                  "python benchmarks/placeholder_reading.py", report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
