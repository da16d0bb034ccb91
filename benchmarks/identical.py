"""Names, codes and units that German keeps: how many of them the service leaves alone.

    python benchmarks/identical.py                          # the test packages' identical pairs
    python benchmarks/identical.py --split valid            # the validation packages' (for decisions)
    python benchmarks/identical.py --model-dirs models/en-de-software models/en-de-align2 --model auto
    python benchmarks/identical.py --pair de-en --model-dirs models/de-en-software

`data/debian_catalogs/SPLIT.identical.{en,de}.gz` (training/corpus/build.py) holds the identical pairs
of the split's packages that the archive never translates otherwise ("Afghanistan", "ISDN",
"80 kbit/s", a person's name). Each is translated through the service (in-process, 32 texts a
request, beam 5) by every model named, and counted as kept when the output is the message, exactly
and case-folded (the corpus compares case-folded: German capitalises a kept "status"), with the
corpus' test split's BLEU beside it so that a model that keeps more by translating less shows it.
The changed outputs are listed. Appends to results/identical.md.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.host import append_report, in_process_service, run_heading, translate_through  # noqa: E402

CORPUS = REPO / "data" / "debian_catalogs"
SHOWN = 25   # changed outputs listed per model


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=("valid", "test"), default="test")
    parser.add_argument("--pair", choices=("en-de", "de-en"), default="en-de",
                        help="de-en: the German side of the pairs, to English")
    parser.add_argument("--model-dirs", type=Path, nargs="+", default=[REPO / "models" / "en-de-software"],
                        help="the models the in-process service serves; each is scored in turn")
    parser.add_argument("--model", default=None, help="'auto': score the service choosing (no model named) instead")
    parser.add_argument("--results", type=Path, default=REPO / "results" / "identical.md")
    parser.add_argument("--note", default="", help="said in the run's heading")
    args = parser.parse_args()
    if args.model not in (None, "auto"):
        parser.error("--model: only 'auto' (each of --model-dirs is scored by name otherwise)")
    missing = [str(d) for d in args.model_dirs if not (d / "manifest.json").is_file()]
    if missing:
        parser.error(f"--model-dirs: not a model directory: {', '.join(missing)}")

    import sacrebleu
    import torch

    from service.settings import Settings
    from training.data import read_parallel

    torch.set_num_threads(1)
    source, target = args.pair.split("-")
    messages, _ = read_parallel(CORPUS, f"{args.split}.identical", source, target)
    sources, references = read_parallel(CORPUS, args.split, source, target)
    names = ["auto"] if args.model == "auto" else [d.name for d in args.model_dirs]

    def translate(client, texts: list[str], model: str) -> list[str]:
        return translate_through(client, texts, source, target, None if model == "auto" else model)

    rows, changed = [], []
    started = time.perf_counter()
    with in_process_service(Settings(model_dirs=args.model_dirs, device="cpu", inference_process=False,
                                     warmup=False, max_segments=32)) as client:
        for name in names:
            outputs = translate(client, messages, name)
            exact = sum(out == text for text, out in zip(messages, outputs))
            folded = sum(out.casefold() == text.casefold() for text, out in zip(messages, outputs))
            bleu = sacrebleu.corpus_bleu(translate(client, sources, name), [references]).score
            rows.append(f"| {name} | {exact}/{len(messages)} ({100 * exact / len(messages):.1f} %) | "
                        f"{folded}/{len(messages)} ({100 * folded / len(messages):.1f} %) | {bleu:.2f} |")
            changed.append((name, [(t, o) for t, o in zip(messages, outputs) if o.casefold() != t.casefold()]))
    seconds = time.perf_counter() - started
    dirs = " ".join(str(d.relative_to(REPO) if d.is_relative_to(REPO) else d) for d in args.model_dirs)
    command = f"python benchmarks/identical.py --split {args.split} --pair {args.pair} --model-dirs {dirs}" + (
        " --model auto" if args.model == "auto" else "")
    listed = "".join(
        f"\n{name}, changed (first {min(SHOWN, len(pairs))} of {len(pairs)}): "
        + "; ".join(f"{text} → {out}" for text, out in pairs[:SHOWN]) + "\n" for name, pairs in changed)
    report = (
        run_heading(f" ({args.note})" if args.note else "") + f"    {command}\n\n"
        f"{len(messages)} identical pairs of data/debian_catalogs/{args.split}.identical.{source}.gz, "
        f"{source}→{target}; BLEU: the "
        f"{len(sources)} pairs of the {args.split} split (cased); beam 5; in-process; {seconds:.0f} s.\n\n"
        "| model | kept exactly | kept, case-folded | split BLEU |\n|---|---:|---:|---:|\n" + "\n".join(rows) + "\n"
        + listed)
    print(report)
    append_report(args.results, "Names, codes and units German keeps, through the service",
                  "python benchmarks/identical.py", report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
