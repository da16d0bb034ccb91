"""Texts written in capitals (a heading, a warning, a book's table of contents) through the service.

    python benchmarks/upper_case.py                          # test_2017_flickr (where a change is decided)
    python benchmarks/upper_case.py --set test_2016_flickr --model en-de-software --model-dirs models/en-de-software

Each source sentence is sent twice, 32 a request, beam 5, in-process on the CPU: as written, and in
capitals (each letter its capital, as service/upper_case.py writes one). BLEU and chrF2 (sacrebleu,
cased) of each against the reference, the capitals' output against the reference in capitals; the
first is what the second can reach. Appends to results/upper_case.md.
"""
from __future__ import annotations

import argparse
import gzip
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.host import append_report, in_process_service, run_heading, translate_through  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", default="test_2017_flickr", help="a Multi30k test set (data/multi30k/SET.{en,de}.gz)")
    parser.add_argument("--model-dirs", type=Path, nargs="+", default=[REPO / "models" / "en-de"])
    parser.add_argument("--model", default=None, help="the model a request names (default: the first of --model-dirs)")
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--results", type=Path, default=REPO / "results" / "upper_case.md")
    parser.add_argument("--note", default="")
    args = parser.parse_args()
    import sacrebleu
    import torch

    from service.settings import Settings
    from service.upper_case import capital

    torch.set_num_threads(1)
    prefix = REPO / "data" / "multi30k" / args.set

    def read(lang: str) -> list[str]:
        with gzip.open(f"{prefix}.{lang}.gz", "rt", encoding="utf-8") as handle:
            return handle.read().splitlines()[:args.limit]

    sources, references = read("en"), read("de")
    shouted = ["".join(map(capital, text)) for text in sources]
    model = args.model or args.model_dirs[0].name
    started = time.perf_counter()
    with in_process_service(Settings(model_dirs=args.model_dirs, device="cpu", inference_process=False, warmup=False,
                                     max_segments=32)) as client:
        written = translate_through(client, sources, "en", "de", model)
        capitals = translate_through(client, shouted, "en", "de", model)
    seconds = time.perf_counter() - started

    def scores(outputs: list[str], refs: list[str]) -> str:
        return f"{sacrebleu.corpus_bleu(outputs, [refs]).score:.2f} | {sacrebleu.corpus_chrf(outputs, [refs]).score:.2f}"

    report = (run_heading(f" ({args.note})" if args.note else "") +
              f"    python benchmarks/upper_case.py --set {args.set}" + (f" --limit {args.limit}" if args.limit else "")
              + (f" --model {args.model}" if args.model else "")
              + f" --model-dirs {' '.join(str(d.relative_to(REPO) if d.is_relative_to(REPO) else d) for d in args.model_dirs)}"
              + f"\n\n{len(sources)} sentences of {args.set}, model {model}, beam 5, this checkout in-process; {seconds:.0f} s.\n\n"
              "| sources | BLEU | chrF2 |\n|---|---:|---:|\n"
              f"| as written, against the references | {scores(written, references)} |\n"
              f"| in capitals, against the references in capitals | "
              f"{scores(capitals, [''.join(map(capital, r)) for r in references])} |\n")
    print(report)
    append_report(args.results, "Texts in capitals, through the service", "python benchmarks/upper_case.py", report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
