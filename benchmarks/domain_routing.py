"""What the texts choosing the model (service/domain_routing.py) does for a client that names none,
on a pair served by a caption model and a software-strings model (what `make serve` serves for En->De).

    python benchmarks/domain_routing.py                 # test_2016_flickr and the software test split
    python benchmarks/domain_routing.py --limit 200     # a quick look
    python benchmarks/domain_routing.py --development   # test_2017_flickr and the software validation
                                                        # split: where a change to the choice is decided
    python benchmarks/domain_routing.py --pair de-en    # De->En: the sets' sides swapped

For each test set: which model each text chooses alone (the hardest case for the choice; a client
sending a file's texts together gives the choice more words); then BLEU and chrF2 (sacrebleu, cased), and for the software
strings the placeholders kept (training/evaluate.py's count), through the service (in-process,
service.app, beam 5, CPU): with no model named, one text a request (the hardest case for the
choice; 8 clients at once so that the batcher fills batches), and with each model named, 32 texts
a request. Appends to results/domain_routing.md.
"""
from __future__ import annotations

import argparse
import gzip
import platform
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.host import append_report, cpu_name, in_process_service  # noqa: E402

# What `make serve` serves per direction: a caption model and a software model.
MODEL_DIRS = {"en-de": [REPO / "models" / "en-de-align2", REPO / "models" / "en-de-software"],
              "de-en": [REPO / "models" / "de-en-align", REPO / "models" / "de-en-software"]}
SETS = {"test_2016_flickr": REPO / "data" / "multi30k" / "test_2016_flickr",
        "software test split": REPO / "data" / "debian_catalogs" / "test"}
# Where a change to the choice is decided before the test sets are read.
DEVELOPMENT_SETS = {"test_2017_flickr": REPO / "data" / "multi30k" / "test_2017_flickr",
                    "software validation split": REPO / "data" / "debian_catalogs" / "valid"}


def lines(prefix: Path, lang: str, limit: int | None) -> list[str]:
    with gzip.open(f"{prefix}.{lang}.gz", "rt", encoding="utf-8") as handle:
        return handle.read().splitlines()[:limit]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pair", choices=sorted(MODEL_DIRS), default="en-de",
                        help="the direction: the test sets' sides swap for de-en")
    parser.add_argument("--model-dirs", type=Path, nargs="+", default=None,
                        help="the pair's models (default: the caption and the software model of --pair)")
    parser.add_argument("--limit", type=int, default=None, help="the first N texts of each set only")
    parser.add_argument("--development", action="store_true",
                        help="test_2017_flickr and the software validation split instead of the test sets")
    parser.add_argument("--note", default="", help="said in the run's heading")
    parser.add_argument("--results", type=Path, default=REPO / "results" / "domain_routing.md")
    args = parser.parse_args()
    source_lang, target_lang = args.pair.split("-")
    args.model_dirs = args.model_dirs or MODEL_DIRS[args.pair]

    import sacrebleu
    import torch

    from service.settings import Settings
    from training.evaluate import placeholder_survival

    torch.set_num_threads(1)
    settings = Settings(model_dirs=args.model_dirs, device="cpu", inference_process=False, warmup=False,
                        max_segments=32)
    names = [path.name for path in args.model_dirs]
    rows, choice_rows = [], []
    started = time.perf_counter()
    with in_process_service(settings) as client:
        translator = client.app.state.lifecycle.translator
        default = translator.default_name((source_lang, target_lang))

        def post(texts: list[str], model: str | None) -> list[str]:
            body = {"source": source_lang, "target": target_lang, "text": texts, "beam_size": 5}
            if model is not None:
                body["model"] = model
            response = client.post("/translate", json=body)
            response.raise_for_status()
            answer = response.json()
            return [(answer["model"], nbest[0]["text"]) for nbest in answer["translations"]]

        for label, prefix in (DEVELOPMENT_SETS if args.development else SETS).items():
            sources, references = lines(prefix, source_lang, args.limit), lines(prefix, target_lang, args.limit)
            def scored(outputs: list[str]) -> str:
                bleu = sacrebleu.corpus_bleu(outputs, [references])
                cells = f"{bleu.score:.2f} ({bleu.bp:.3f}) | {sacrebleu.corpus_chrf(outputs, [references]).score:.2f}"
                survival = placeholder_survival(sources, outputs)
                kept = f"{survival['score']:.2f} % ({survival['sentences']})" if survival["sentences"] else "–"
                return f"{cells} | {kept}"

            with ThreadPoolExecutor(8) as pool:
                routed = [answer for answers in pool.map(lambda text: post([text], None), sources) for answer in answers]
            alone = [model for model, _ in routed]
            # The choice alone, as the service makes it for a one-text request (every candidate's tokenizer).
            timed = time.perf_counter()
            for text in sources:
                translator.model_for(source_lang, target_lang, None, [text])
            cost_us = 1e6 * (time.perf_counter() - timed) / len(sources)
            choice_rows.append(f"| {label} | {len(sources)} | "
                               + " | ".join(f"{alone.count(name)} ({100 * alone.count(name) / len(sources):.1f} %)"
                                            for name in names) + f" | {cost_us:.0f} µs |")
            rows.append(f"| {label} | none ({default}), 1 text a request | {scored([text for _, text in routed])} |")
            for name in names:
                named = [text for i in range(0, len(sources), 32) for _, text in post(sources[i:i + 32], name)]
                rows.append(f"| {label} | {name}, 32 texts a request | {scored(named)} |")
    elapsed = time.perf_counter() - started

    command = "python benchmarks/domain_routing.py" + (f" --pair {args.pair}" if args.pair != "en-de" else "") + (
        f" --limit {args.limit}" if args.limit else "") + (" --development" if args.development else "")
    models = ", ".join(str(path.relative_to(REPO) if path.is_relative_to(REPO) else path) for path in args.model_dirs)
    report = (
        f"\n## {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: {cpu_name()}, {platform.machine()}"
        f"{f' ({args.note})' if args.note else ''}\n\n"
        f"    {command}\n\n"
        f"Served: {models}; a request naming no model is answered by: {default}.\n\n"
        "Which model each text chose, one text a request:\n\n"
        f"| test set | texts | {' | '.join(names)} | the choice, a text |\n"
        f"|---|---:|{'---:|' * len(names)}---:|\n" + "\n".join(choice_rows) + "\n\n"
        "Through the service, beam 5:\n\n"
        "| test set | model | BLEU (its brevity penalty) | chrF2 | placeholders kept (of the texts with some) |\n"
        "|---|---|---:|---:|---:|\n"
        + "\n".join(rows) + f"\n\nTime: {elapsed:.0f} s.\n"
    )
    print(report)
    append_report(args.results, "A request naming no model: the model its texts choose", "python benchmarks/domain_routing.py",
                  report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
