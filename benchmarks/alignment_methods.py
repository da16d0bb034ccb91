"""What each alignment method costs in the torch runtime (a script, not a test).

Translates the first N sentences of a split through `TorchRuntime.translate` (beam search, word
alignments and detokenisation included) once without alignments and once per alignment method the
model offers, and prints seconds and the ratio to no alignment; process CPU time too, since a shared
machine's wall time is noisy. "bidirectional" adds a forced pass of every hypothesis through the
reverse model (`force_align`); --reverse-model-dir times that pass when a reverse model exists, and
the whole method as the service runs it (the search with the forward model's default method, the
reverse pass, the per-link combination with the cognate prior). "/align" rows time the forced
alignment of given translations (here the model's own), forward and, with a reverse model,
bidirectional.

    python benchmarks/alignment_methods.py --model-dir models/en-de-align --sentences 200 --out results/alignment_cost_cpu.md
"""
from __future__ import annotations

import argparse
import gzip
import time
from pathlib import Path

import torch

from model.model_dir import load_model_dir
from model.alignments.bidirectional import bidirectional_alignment
from service.runtime.base import DecodingOptions
from service.runtime.torch_runtime import TorchRuntime
from host import cpu_name  # benchmarks/host.py: the script's own folder is on sys.path


def timed(fn) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", default="models/en-de")
    parser.add_argument("--reverse-model-dir", default=None)
    parser.add_argument("--split", default="data/multi30k/test_2016_flickr.en.gz")
    parser.add_argument("--sentences", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    with gzip.open(args.split, "rt", encoding="utf-8") as handle:
        texts = [line.strip() for _, line in zip(range(args.sentences), handle)]
    runtime = TorchRuntime(load_model_dir(args.model_dir), torch.device("cpu"))
    batches = [texts[k : k + args.batch_size] for k in range(0, len(texts), args.batch_size)]

    def run(options: DecodingOptions):
        return [h for batch in batches for nbest in runtime.translate(batch, options) for h in nbest]

    runs = [("none", DecodingOptions(beam_size=args.beam))]
    runs += [(method, DecodingOptions(beam_size=args.beam, alignment="token", alignment_method=method))
             for method in runtime.alignment_methods]
    run(runs[0][1])  # warm-up
    rows = []
    for name, options in runs:
        wall, cpu = timed(lambda: run(options))
        rows.append((name, wall, cpu))
    if args.reverse_model_dir:
        reverse = TorchRuntime(load_model_dir(args.reverse_model_dir), torch.device("cpu"))
        hypotheses = run(DecodingOptions(beam_size=args.beam))
        pairs = [(h.text, text) for h, text in zip(hypotheses, texts)]
        wall, cpu = timed(lambda: reverse.force_align(pairs, reverse.default_alignment_method))
        rows.append(("bidirectional: the reverse forced pass alone", wall, cpu))
        forward_options = DecodingOptions(beam_size=args.beam, alignment="token",
                                        alignment_method=runtime.default_alignment_method)

        def bidirectional() -> None:
            found = run(forward_options)
            back = reverse.force_align([(h.text, text) for h, text in zip(found, texts)], reverse.default_alignment_method)
            [bidirectional_alignment(h.alignment, b) for h, b in zip(found, back)]

        wall, cpu = timed(bidirectional)
        rows.append(("bidirectional, whole (search, reverse pass, combination with the cognate prior)", wall, cpu))
    given = [(text, h.text) for h, text in zip(run(DecodingOptions(beam_size=args.beam)), texts)]
    wall, cpu = timed(lambda: runtime.force_align(given, runtime.default_alignment_method))
    rows.append((f"/align, {runtime.default_alignment_method} (forced pass of given translations, no search)", wall, cpu))
    if args.reverse_model_dir:

        def align_both() -> None:
            forward = runtime.force_align(given, runtime.default_alignment_method)
            back = reverse.force_align([(t, s) for s, t in given], reverse.default_alignment_method)
            [bidirectional_alignment(f, b) for f, b in zip(forward, back)]

        wall, cpu = timed(align_both)
        rows.append(("/align, bidirectional (both forced passes and the combination)", wall, cpu))
    base_cpu = rows[0][2]
    lines = [f"# Alignment method cost, torch runtime, CPU ({cpu_name()}, "
             f"{args.threads} thread(s), torch {torch.__version__})", "",
             f"`python benchmarks/alignment_methods.py --model-dir {args.model_dir} --sentences {args.sentences}"
             f"{' --reverse-model-dir ' + args.reverse_model_dir if args.reverse_model_dir else ''}`: the first "
             f"{len(texts)} sentences of {Path(args.split).name}, beam {args.beam}, batches of {args.batch_size}.", "",
             "| alignment | wall s | CPU s | CPU vs none |", "|---|---|---|---|"]
    for name, wall, cpu in rows:
        lines.append(f"| {name} | {wall:.2f} | {cpu:.2f} | {cpu / base_cpu:.2f}x |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
