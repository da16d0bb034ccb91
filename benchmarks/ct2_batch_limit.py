"""What one length limit per `translate_batch` changes (export/ct2_runner.py), as agreement.

CTranslate2 takes one `max_decoding_length` per call; its users call it once per batch, and so
does our runner: the limit is the batch's longest per-sentence limit. Our own search stops every
sentence at its own limit (`ceil(ratio * (pieces + 1)) + offset`). This script decodes the same
sentences with the same CTranslate2 export both ways — whole batches (the runner), and one call
per group of equal per-sentence limits (what the runner did before, exact per-sentence limits) —
and with our eager float32 search, and reports the share of identical top hypotheses between
each pair, and how many whole-batch hypotheses run past their own sentence's limit. Not a timing.

    python benchmarks/ct2_batch_limit.py                          # bundled en-de, 1000 sentences, beam 5, batch 32
    python benchmarks/ct2_batch_limit.py --sentences 64 --results -
"""
from __future__ import annotations

import argparse
import datetime
import shlex
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any, Sequence

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script: the repository's packages first
    sys.path.insert(0, str(REPO))

from benchmarks.engines import Engine, export_for, machine, versions  # noqa: E402


def per_limit_groups(runner, sources: list[list[int]], options) -> list[list]:
    """The runner's hypotheses with exact per-sentence limits: one call per group of equal limits."""
    groups: dict[int, list[int]] = defaultdict(list)
    for index, ids in enumerate(sources):
        groups[runner.limit(len(ids), options)].append(index)
    results: list[list] = [[] for _ in sources]
    for indices in groups.values():
        for index, nbest in zip(indices, runner.generate([sources[i] for i in indices], options)):
            results[index] = nbest
    return results


def share(a: list[list[int]], b: list[list[int]]) -> float:
    return sum(x == y for x, y in zip(a, b)) / len(a)


def compare(model_dir: Path, export_dir: Path, sentences: list[str], beam: int, batch: int) -> dict[str, Any]:
    from export.runners import open_runner
    from model.decoding.generate import generate, pad_sources
    from model.decoding.options import DecodingOptions
    from model.model_dir import load_model_dir

    loaded = load_model_dir(model_dir)
    runner = open_runner(export_dir)
    options = DecodingOptions(beam_size=beam, n_best=1)
    ids = loaded.tokenizer.encode_batch(sentences)
    config = loaded.config
    whole, exact, eager = [], [], []
    for start in range(0, len(ids), batch):
        chunk = ids[start : start + batch]
        whole += [nbest[0].tokens for nbest in runner.generate(chunk, options)]
        exact += [nbest[0].tokens for nbest in per_limit_groups(runner, chunk, options)]
        src = pad_sources([s + [config.eos_id] for s in chunk], config.pad_id)
        eager += [nbest[0].tokens for nbest in generate(loaded.model, src, options)]
    past = sum(len(t) > runner.limit(len(s), options) for t, s in zip(whole, ids))
    calls = sum(len({runner.limit(len(s), options) for s in ids[i : i + batch]}) for i in range(0, len(ids), batch))
    return {"sentences": len(ids), "beam": beam, "batch": batch,
            "whole_vs_exact": share(whole, exact), "whole_vs_eager": share(whole, eager),
            "exact_vs_eager": share(exact, eager), "past_own_limit": past,
            "calls_whole": -(-len(ids) // batch), "calls_exact": calls}


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", type=Path, default=Path("models/en-de"))
    parser.add_argument("--data", type=Path, default=Path("data/multi30k"))
    parser.add_argument("--split", default="test_2016_flickr")
    parser.add_argument("--sentences", type=int, default=1000)
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--quantization", default="float32", help="the CTranslate2 export's (float32: the same numbers as eager up to rounding)")
    parser.add_argument("--work-dir", type=Path, default=None, help="where the export goes (reused; default a temporary one)")
    parser.add_argument("--results", type=Path, default=Path("results/ct2_batch_limit.md"), help="markdown file appended to ('-' for none)")
    args = parser.parse_args(argv)

    from export.verify import read_verify_set
    from model.model_dir import load_model_dir

    loaded = load_model_dir(args.model_dir)
    data = read_verify_set(args.data, args.split, loaded.source_lang, loaded.target_lang, args.sentences)
    scratch = None if args.work_dir else tempfile.TemporaryDirectory(prefix="ct2-limit-")
    work = args.work_dir or Path(scratch.name)
    try:
        export = export_for(Engine("ct2", "ct2", args.quantization), args.model_dir, work / f"ct2-{args.quantization}", "cpu")
        row = compare(args.model_dir, export, data.sources, args.beam, args.batch)
    finally:
        if scratch is not None:
            scratch.cleanup()
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    command = "python benchmarks/ct2_batch_limit.py " + shlex.join(argv if argv is not None else sys.argv[1:])
    report = [
        f"## {stamp}: {machine('cpu')}", "", f"    {command}", "",
        f"{row['sentences']} sentences of {args.split}, {args.model_dir} exported to CTranslate2 {args.quantization}, "
        f"beam {row['beam']}, batches of {row['batch']}, {versions()}. Identical top hypotheses:", "",
        "| CTranslate2, one limit per batch vs per-sentence limits | one limit per batch vs our eager search "
        "| per-sentence limits vs our eager search | past their own limit (one per batch) | translate_batch calls (per batch / per limit) |",
        "|---|---|---|---|---|",
        f"| {row['whole_vs_exact']:.4f} | {row['whole_vs_eager']:.4f} | {row['exact_vs_eager']:.4f} | "
        f"{row['past_own_limit']} | {row['calls_whole']} / {row['calls_exact']} |", "",
    ]
    print("\n".join(report))
    if str(args.results) != "-":
        fresh = not args.results.exists()
        with args.results.open("a", encoding="utf-8") as handle:
            if fresh:
                handle.write("# CTranslate2 with one length limit per batch (benchmarks/ct2_batch_limit.py)\n\n")
            handle.write("\n".join(report) + "\n")
    return row


if __name__ == "__main__":
    main()
