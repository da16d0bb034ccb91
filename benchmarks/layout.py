"""What the service's handling of a text (service/layout.py: layout and sentences; placeholders
sent as written first, service/protected_translation.py) does to translation quality.

    python benchmarks/layout.py                                  # the software validation split
    python benchmarks/layout.py --split data/debian_catalogs/test
    python benchmarks/layout.py --url http://127.0.0.1:8078      # a running server instead (another checkout's)

Each message of a corpus split is translated twice by the same model (beam 5, CPU): whole, by the
runtime itself, and through the service (in-process, service.app; or the server at --url), 32
texts a request. BLEU and chrF2 (sacrebleu, cased) against the split's references, over all
messages, over those this checkout's service/layout.py cuts into more than one segment, and over
those with a placeholder (service/protection/placeholders.py). The corpus' messages have their
whitespace made single spaces (data/debian_catalogs/README.md), so this measures the sentence cut
and the placeholders; what line and column handling keeps is shown by tests/service/test_layout.py.
Appends to results/layout.md.
"""
from __future__ import annotations

import argparse
import gzip
import platform
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.host import append_report, cpu_name, in_process_service  # noqa: E402


def lines(split: Path, suffix: str, limit: int | None) -> list[str]:
    with gzip.open(f"{split}.{suffix}.gz", "rt", encoding="utf-8") as handle:
        return handle.read().splitlines()[:limit]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", type=Path, default=REPO / "data" / "debian_catalogs" / "valid")
    parser.add_argument("--model-dir", type=Path, default=REPO / "models" / "en-de-software")
    parser.add_argument("--limit", type=int, default=None, help="the first N messages only (a quick look)")
    parser.add_argument("--url", default=None, help="translate through this running server instead of in-process")
    parser.add_argument("--results", type=Path, default=REPO / "results" / "layout.md")
    parser.add_argument("--hypotheses", type=Path, default=None,
                        help="also write the service's translations here, one a line (newlines escaped)")
    args = parser.parse_args()

    import httpx
    import sacrebleu
    import torch

    from service.layout import split
    from service.protection.placeholders import find_protected
    from service.runtime.base import DecodingOptions
    from service.runtime.torch_runtime import load_runtime
    from service.settings import Settings

    torch.set_num_threads(1)
    sources, references = lines(args.split, "en", args.limit), lines(args.split, "de", args.limit)
    runtime = load_runtime(args.model_dir, "cpu")
    started = time.perf_counter()
    whole = []
    for i in range(0, len(sources), 32):
        whole += [nbest[0].text for nbest in runtime.translate(sources[i:i + 32], DecodingOptions(beam_size=5))]
    whole_s = time.perf_counter() - started

    model = args.model_dir.name
    served = []
    started = time.perf_counter()
    with (httpx.Client(base_url=args.url, timeout=600) if args.url else in_process_service(Settings(
            model_dirs=[args.model_dir], device="cpu", inference_process=False, warmup=False, max_segments=32))) as client:
        for i in range(0, len(sources), 32):
            response = client.post("/translate", json={"source": "en", "target": "de", "text": sources[i:i + 32],
                                                       "beam_size": 5, "model": model})
            response.raise_for_status()
            served += [nbest[0]["text"] for nbest in response.json()["translations"]]
    served_s = time.perf_counter() - started
    if args.hypotheses:
        args.hypotheses.write_text("".join(text.replace("\\", "\\\\").replace("\n", "\\n") + "\n" for text in served),
                                   encoding="utf-8")

    cut = [i for i, text in enumerate(sources) if len(split(text, find_protected(text), "en").segments) > 1]
    placeholders = [i for i, text in enumerate(sources) if find_protected(text)]

    def scores(outputs: list[str], subset: list[int]) -> str:
        hypotheses, refs = [outputs[i] for i in subset], [[references[i] for i in subset]]
        return f"{sacrebleu.corpus_bleu(hypotheses, refs).score:.2f} / {sacrebleu.corpus_chrf(hypotheses, refs).score:.2f}"

    everything = list(range(len(sources)))
    command = "python benchmarks/layout.py" + (f" --split {args.split.relative_to(REPO)}" if args.split.is_absolute()
                                               and args.split.is_relative_to(REPO) else f" --split {args.split}")
    report = (
        f"\n## {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: {cpu_name()}, {platform.machine()}\n\n"
        f"    {command}{f' --limit {args.limit}' if args.limit else ''}{f' --url {args.url}' if args.url else ''}\n\n"
        f"Model {args.model_dir.relative_to(REPO) if args.model_dir.is_relative_to(REPO) else args.model_dir} "
        f"({runtime.precision}, the service's default for it), beam 5, "
        f"{len(sources)} messages, {len(cut)} of them cut into more than one segment, {len(placeholders)} with a "
        f"placeholder. Service: {args.url + ' (a running server)' if args.url else 'this checkout, in-process'}.\n\n"
        "| messages | whole, by the runtime: BLEU / chrF2 | through the service: BLEU / chrF2 |\n|---|---:|---:|\n"
        f"| all {len(sources)} | {scores(whole, everything)} | {scores(served, everything)} |\n"
        f"| the {len(cut)} cut | {scores(whole, cut)} | {scores(served, cut)} |\n"
        f"| the {len(placeholders)} with a placeholder | {scores(whole, placeholders)} | {scores(served, placeholders)} |\n\n"
        f"Time: whole {whole_s:.0f} s, through the service {served_s:.0f} s.\n"
    )
    print(report)
    append_report(args.results, "Layout, sentences and placeholders sent as written: translation quality through the service",
                  "python benchmarks/layout.py",
                  report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
