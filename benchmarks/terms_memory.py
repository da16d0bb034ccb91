"""What the memory of short messages the packages translate alike (memories/debian-terms.tmx,
training/corpus/terms.py) does to short software messages, through the service.

    python benchmarks/terms_memory.py                       # En->De, the validation packages
    python benchmarks/terms_memory.py --split test --pair de-en
    python benchmarks/terms_memory.py --as-written                 # accelerators and spaces as written

`data/debian_catalogs/SPLIT.short.jsonl.gz` holds every message of at most four words of the split's
packages, including those the train split has too (the corpus' splits drop them; a client's catalog
has them: "Search Results", "Subject"). Each message is translated by the pair's software model
through the in-process service twice, 32 texts a request, beam 5: with the memories `make serve`
serves (memories/cldr-names.tmx first, then the terms) and with `"memory": false`, and scored against
the package's own translation: exact matches, chrF2 and BLEU (sacrebleu, cased) over the messages a
memory answered and over all. Appends to results/terms_memory.md.
"""
from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.host import append_report, in_process_service, run_heading  # noqa: E402

MEMORIES = [REPO / "memories" / "cldr-names.tmx", REPO / "memories" / "debian-terms.tmx"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=("valid", "test"), default="valid")
    parser.add_argument("--pair", choices=("en-de", "de-en"), default="en-de")
    parser.add_argument("--limit", type=int, default=None, help="the first N messages only (a quick look)")
    parser.add_argument("--as-written", action="store_true",
                        help="send each message as its catalog writes it (an accelerator kept; the output "
                             "scored with it taken out again, as benchmarks/as_written.py does)")
    parser.add_argument("--memory", type=Path, default=MEMORIES[1],
                        help="the terms memory to serve after the CLDR names (another build's, to compare)")
    parser.add_argument("--results", type=Path, default=REPO / "results" / "terms_memory.md")
    args = parser.parse_args()
    path = REPO / "data" / "debian_catalogs" / f"{args.split}.short.jsonl.gz"
    if not path.is_file():
        parser.error(f"{path} is missing: python -m training.corpus terms --sources data/debian_catalogs/sources.tsv "
                     "--cache CACHE --corpus data/debian_catalogs --tmx memories/debian-terms.tmx")
    import sacrebleu
    import torch

    from service.settings import Settings
    from training.corpus.clean import normalise, strip_accelerators
    from training.corpus.build import read_jsonl_gzip

    torch.set_num_threads(1)
    rows = read_jsonl_gzip(path)[:args.limit]
    source_lang, target_lang = args.pair.split("-")
    side, other = ("source", "target") if args.pair == "en-de" else ("target", "source")
    texts, references = [row[side] for row in rows], [row[other] for row in rows]
    if args.as_written:
        texts = [row["written"][0 if side == "source" else 1] for row in rows]
    model = f"{args.pair}-software"

    def translate(client, memory: bool) -> tuple[list[str], list[str | None]]:
        outputs, answered_by = [], []
        for i in range(0, len(texts), 32):
            response = client.post("/translate", json={"source": source_lang, "target": target_lang, "model": model,
                                                       "text": texts[i:i + 32], "beam_size": 5, "memory": memory})
            response.raise_for_status()
            for nbest in response.json()["translations"]:
                outputs.append(nbest[0]["text"])
                answered_by.append(nbest[0]["memory"][0]["memory"] if nbest[0].get("memory") else None)
        return outputs, answered_by

    started = time.perf_counter()
    if not args.memory.is_file():
        parser.error(f"--memory: no such file: {args.memory}")
    with in_process_service(Settings(model_dirs=[REPO / "models" / model], memories=[MEMORIES[0], args.memory], device="cpu",
                                     inference_process=False, warmup=False, max_segments=32)) as client:
        plain, _ = translate(client, False)
        remembered, answered_by = translate(client, True)
    seconds = time.perf_counter() - started
    if args.as_written:  # the output read as the corpus reads a catalog's translation
        plain, remembered = ([strip_accelerators(normalise(text), normalise(out))[1] for text, out in zip(texts, outputs)]
                             for outputs in (plain, remembered))

    def scores(outputs: list[str], subset: list[int]) -> str:
        if not subset:
            return "– | – | –"
        hypotheses, refs = [outputs[i] for i in subset], [[references[i] for i in subset]]
        exact = sum(outputs[i] == references[i] for i in subset)
        return (f"{exact} ({100 * exact / len(subset):.1f} %) | {sacrebleu.corpus_chrf(hypotheses, refs).score:.2f} | "
                f"{sacrebleu.corpus_bleu(hypotheses, refs).score:.2f}")

    everything = list(range(len(rows)))
    by_memory = Counter(name for name in answered_by if name is not None)
    answered = [i for i in everything if answered_by[i] is not None]
    command = f"python benchmarks/terms_memory.py --split {args.split}" + (
        f" --pair {args.pair}" if args.pair != "en-de" else "") + (f" --limit {args.limit}" if args.limit else "") + (
        f" --memory {args.memory}" if args.memory != MEMORIES[1] else "") + (" --as-written" if args.as_written else "")
    report = (
        run_heading("") + f"    {command}\n\n"
        f"{len(rows)} messages of data/debian_catalogs/{path.name} ({source_lang}→{target_lang}, "
        f"{'as their catalogs write them, ' + str(sum(t != row[side] for t, row in zip(texts, rows))) + ' of them otherwise than normalised, ' if args.as_written else ''}"
        f"{len({row['package'] for row in rows})} packages), model {model}, beam 5, this checkout in-process; "
        f"answered by a memory: {len(answered)} ("
        + (", ".join(f"{name} {count}" for name, count in sorted(by_memory.items())) or "none") +
        f"); {seconds:.0f} s.\n\n"
        "| messages | translated | exact matches | chrF2 | BLEU |\n|---|---|---:|---:|---:|\n"
        f"| the {len(answered)} a memory answered | by the model alone | {scores(plain, answered)} |\n"
        f"| | through the memories | {scores(remembered, answered)} |\n"
        f"| all {len(rows)} | by the model alone | {scores(plain, everything)} |\n"
        f"| | through the memories | {scores(remembered, everything)} |\n"
    )
    print(report)
    append_report(args.results, "Short software messages and the memory of their usual translations",
                  "python benchmarks/terms_memory.py", report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
