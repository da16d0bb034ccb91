"""Names software shows (countries, languages, scripts, currencies, time zones, months): how many
the service writes as CLDR does.

    python benchmarks/names.py                               # the lexicon's validation names
    python benchmarks/names.py --split train                 # the names a model was trained on
    python benchmarks/names.py --model-dirs models/en-de-software DIR --note "before and after"
    python benchmarks/names.py --pair de-en --model-dirs models/de-en-software
    python benchmarks/names.py --memory memories/cldr-names.tmx   # the service as `make serve` runs it

`data/cldr_names/SPLIT.{en,de}.gz` (training/corpus/names.py): the English and German names CLDR
gives each key. Each name is translated through the service (in-process, 32 texts a request, beam
5) by every model named, alone as a message, and counted right when the output is CLDR's name,
exactly and case-folded, per category (`SPLIT.origin.gz`). The wrong outputs are listed. Appends
to results/names.md. Without --memory the service serves no translation memory, so the model alone
is measured; memories/cldr-names.tmx holds these names (service/memory.py), and with it the service
answers them from it.
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

from benchmarks.host import append_report, in_process_service, run_heading, translate_through  # noqa: E402

LEXICON = REPO / "data" / "cldr_names"
SHOWN = 30   # wrong outputs listed per model


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=("train", "valid"), default="valid")
    parser.add_argument("--pair", choices=("en-de", "de-en"), default="en-de")
    parser.add_argument("--model-dirs", type=Path, nargs="+", default=[REPO / "models" / "en-de-software"],
                        help="the models the in-process service serves; each is scored in turn")
    parser.add_argument("--results", type=Path, default=REPO / "results" / "names.md")
    parser.add_argument("--note", default="", help="said in the run's heading")
    parser.add_argument("--memory", type=Path, nargs="*", default=[],
                        help="translation memories the service serves (none: the models alone)")
    args = parser.parse_args()
    missing = [str(d) for d in args.model_dirs if not (d / "manifest.json").is_file()]
    if missing:
        parser.error(f"--model-dirs: not a model directory: {', '.join(missing)}")

    import torch

    from service.settings import Settings
    from training.data import read_parallel

    torch.set_num_threads(1)
    source, target = args.pair.split("-")
    texts, references = read_parallel(LEXICON, args.split, source, target)
    with gzip.open(LEXICON / f"{args.split}.origin.gz", "rt", encoding="utf-8") as handle:
        categories = [line.split(":")[0] for line in handle.read().splitlines()]
    in_category = Counter(categories)
    order = sorted(in_category)

    rows, wrong = [], []
    started = time.perf_counter()
    with in_process_service(Settings(model_dirs=args.model_dirs, device="cpu", inference_process=False,
                                     warmup=False, max_segments=32, memories=args.memory)) as client:
        for directory in args.model_dirs:
            outputs = translate_through(client, texts, source, target, directory.name)
            right = [out == ref for out, ref in zip(outputs, references)]
            folded = sum(out.casefold() == ref.casefold() for out, ref in zip(outputs, references))
            per_category = Counter(category for category, ok in zip(categories, right) if ok)
            rows.append(f"| {directory.name} | {sum(right)}/{len(texts)} ({100 * sum(right) / len(texts):.1f} %) | "
                        f"{folded}/{len(texts)} ({100 * folded / len(texts):.1f} %) | "
                        + " | ".join(f"{per_category[c]}/{in_category[c]}" for c in order) + " |")
            wrong.append((directory.name, [(t, o, r) for t, o, r, ok in zip(texts, outputs, references, right)
                                           if not ok]))
    seconds = time.perf_counter() - started
    dirs = " ".join(str(d.relative_to(REPO) if d.is_relative_to(REPO) else d) for d in args.model_dirs)
    command = f"python benchmarks/names.py --split {args.split} --pair {args.pair} --model-dirs {dirs}"
    memories = " ".join(str(m.resolve().relative_to(REPO) if m.resolve().is_relative_to(REPO) else m) for m in args.memory)
    command += f" --memory {memories}" if args.memory else ""
    listed = "".join(
        f"\n{name}, wrong (first {min(SHOWN, len(items))} of {len(items)}; output, CLDR's in brackets): "
        + "; ".join(f"{text} → {out} [{ref}]" for text, out, ref in items[:SHOWN]) + "\n" for name, items in wrong)
    report = (
        run_heading(f" ({args.note})" if args.note else "") + f"    {command}\n\n"
        f"{len(texts)} names of data/cldr_names/{args.split}, {source}→{target}; beam 5; in-process; "
        f"translation memory: {memories or 'none'}; {seconds:.0f} s.\n\n"
        "| model | as CLDR | case-folded | " + " | ".join(order) + " |\n|---|---:|---:|" + "---:|" * len(order) + "\n"
        + "\n".join(rows) + "\n" + listed)
    print(report)
    append_report(args.results, "Names software shows, through the service", "python benchmarks/names.py", report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
