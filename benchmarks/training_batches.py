"""Host time to build a training batch: on a GPU, the training loop builds each update's batch on the
host between the previous update's launches and the next, so its time adds to every update of a
small, launch-bound model.

    OMP_NUM_THREADS=1 python benchmarks/training_batches.py --max-tokens 8192 --batches 60

The first `--batches` token batches (training/data.py `token_batches`, the recipes' 8,192-token
bound) of Multi30k's training split, encoded with the bundled En-De SentencePiece model, collated
the way training does (`collate`) and, for comparison, with one small tensor copied per row, as
`pad_sequences` did until 2026-11-30. Both must give the same tensors (checked here; tested in
tests/training/test_data.py). Appends a section to results/training_batches_cpu.md.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from host import append_report, run_heading  # noqa: E402  (benchmarks/ is on sys.path)


def per_row(seqs, pad_id: int = 0):
    import torch

    width = max((len(s) for s in seqs), default=0)
    out = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    for row, seq in enumerate(seqs):
        out[row, : len(seq)] = torch.tensor(seq, dtype=torch.long)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="training_batches", description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-tokens", type=int, default=8192)
    parser.add_argument("--batches", type=int, default=60)
    parser.add_argument("--repeats", type=int, default=3, help="timed passes over the batches; the fastest counts")
    parser.add_argument("--out", type=Path, default=REPO / "results" / "training_batches_cpu.md")
    args = parser.parse_args(argv)

    import torch

    import training.data as data
    from model.text.tokenizer import Tokenizer

    tokenizer = Tokenizer(REPO / "models" / "en-de" / "spm.model")
    src_text, tgt_text = data.read_parallel(REPO / "data" / "multi30k", "train", "en", "de")
    train = data.ParallelDataset(tokenizer.encode_batch(src_text), tokenizer.encode_batch(tgt_text), max_len=256)
    batches = data.token_batches(train.src_lengths(), train.tgt_lengths(), args.max_tokens, seed=1, epoch=1)
    batches = batches[: args.batches]
    pairs = [[train[i] for i in batch] for batch in batches]

    def timed(pad) -> tuple[float, list]:
        original = data.pad_sequences
        data.pad_sequences = pad
        try:
            best, made = float("inf"), []
            for _ in range(args.repeats):
                started = time.perf_counter()
                made = [data.collate(batch) for batch in pairs]
                best = min(best, time.perf_counter() - started)
            return best / len(pairs) * 1000, made
        finally:
            data.pad_sequences = original

    now_ms, now = timed(data.pad_sequences)
    row_ms, rows = timed(per_row)
    for a, b in zip(now, rows):
        for name in ("src", "tgt_in", "tgt_out"):
            if not torch.equal(getattr(a, name), getattr(b, name)):
                sys.exit(f"training_batches: error: the two ways differ in a batch's {name}")
    sentences = sum(map(len, batches)) / len(batches)
    report = (run_heading(f", torch {torch.__version__}, {torch.get_num_threads()} intra-op thread(s)")
              + f"    python benchmarks/training_batches.py --max-tokens {args.max_tokens} --batches {args.batches}\n\n"
              + f"{len(batches)} batches of Multi30k train, {sentences:.0f} pairs a batch on average; ms a batch "
              + f"(fastest of {args.repeats} passes), the same tensors both ways:\n\n"
              + "| collate | ms a batch |\n|---|---:|\n"
              + f"| training/data.py (one copy of every id) | {now_ms:.2f} |\n"
              + f"| one tensor a row (before 2026-11-30) | {row_ms:.2f} |\n")
    append_report(args.out, "Host time to build a training batch", "python benchmarks/training_batches.py", report)
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
