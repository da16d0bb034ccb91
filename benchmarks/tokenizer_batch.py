"""What a batch of texts costs to encode: SentencePiece's list call (a thread pool started per call)
against a loop over the texts, and `Tokenizer.encode_batch`, which loops below
`THREADED_ENCODE_FROM` texts (model/text/tokenizer.py).

    python benchmarks/tokenizer_batch.py
    python benchmarks/tokenizer_batch.py --model-dir models/en-de-software

test_2016_flickr's English sentences, the model's spm.model, each size repeated until ~1 s has
passed, microseconds per call, wall and CPU time (the best of 3 such runs). The service encodes a request's texts to
count their tokens and again to decode them, a few to 64 texts at a time. Appends to
results/tokenizer_batch.md.
"""
from __future__ import annotations

import argparse
import gzip
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.host import append_report, run_heading  # noqa: E402

SIZES = (1, 8, 32, 128, 1024, 4096)


def per_call_us(call, budget_s: float = 1.0) -> tuple[float, float]:
    """Wall time and CPU time (every thread of the process) per call, the best of 3 runs each."""
    wall = cpu = float("inf")
    for _ in range(3):
        calls, started, started_cpu = 0, time.perf_counter(), time.process_time()
        while time.perf_counter() - started < budget_s / 3:
            call()
            calls += 1
        wall = min(wall, (time.perf_counter() - started) / calls)
        cpu = min(cpu, (time.process_time() - started_cpu) / calls)
    return 1e6 * wall, 1e6 * cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", type=Path, default=REPO / "models" / "en-de")
    parser.add_argument("--results", type=Path, default=REPO / "results" / "tokenizer_batch.md")
    args = parser.parse_args()

    from model.text.tokenizer import THREADED_ENCODE_FROM, Tokenizer

    tokenizer = Tokenizer(args.model_dir / "spm.model")
    processor = tokenizer._sp
    with gzip.open(REPO / "data" / "multi30k" / "test_2016_flickr.en.gz", "rt", encoding="utf-8") as handle:
        sentences = handle.read().splitlines()
    rows = []
    for size in SIZES:
        texts = (sentences * (size // len(sentences) + 1))[:size]
        timings = [per_call_us(lambda: processor.encode(texts, out_type=int)),
                   per_call_us(lambda: [processor.encode(text, out_type=int) for text in texts]),
                   per_call_us(lambda: tokenizer.encode_batch(texts))]
        rows.append(f"| {size} | " + " | ".join(f"{wall:,.0f} / {cpu:,.0f}" for wall, cpu in timings) + " |")

    load = os.getloadavg()[0]
    report = (
        f"{run_heading(f', load average {load:.1f} at the end')}"
        f"    python benchmarks/tokenizer_batch.py --model-dir {args.model_dir}\n\n"
        f"Microseconds per call, wall / CPU (all the process's threads: what a decoder beside it loses); "
        f"`encode_batch` loops below {THREADED_ENCODE_FROM} texts.\n\n"
        "| texts | SentencePiece list call (threads) | loop | `encode_batch` |\n"
        "|---:|---:|---:|---:|\n" + "\n".join(rows) + "\n"
    )
    print(report)
    append_report(args.results, "Encoding a batch of texts: SentencePiece's threads against a loop",
                  "python benchmarks/tokenizer_batch.py", report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
