"""Markdown emphasis through /translate: are the emphasised words translated, do the delimiters
come back around them, and what does the emphasis cost the sentence?

    python benchmarks/markdown_emphasis.py        # appends to results/markdown_emphasis.md

The sentences of data/protection_eval/multi30k_tags.jsonl (the first 300 of Multi30k's
test_2016_flickr, one to three consecutive words wrapped in an inline tag) with each tag written as
Markdown emphasis instead (`<b>` as `**`, `<i>` and `<a>` as `*`), sent as plain text (format
"text", as a client sends a Markdown string) to the service as `make serve` runs the En→De pair
(models/en-de-align2 beside models/en-de-software, domain routing choosing, models/de-en-align for
bidirectional alignments, in-process, CPU, beam 5). Reported: how many outputs hold the source's
emphasis delimiters, paired as the source's (service/protection/markdown.py reads both); how many
emphasised spans come back as sent, English copied (compared case-blind, spans that the reference
also keeps as sent not counted); BLEU and chrF2 (sacrebleu) of the outputs with the delimiters
taken out, against the reference, and of the same sentences sent without emphasis.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.host import append_report, in_process_service, run_heading, translate_through  # noqa: E402

DATA = REPO / "data" / "protection_eval" / "multi30k_tags.jsonl"
DELIMITERS = {"b": "**", "i": "*", "a": "*"}
MODEL_DIRS = ["models/en-de-align2", "models/en-de-software", "models/de-en-align"]


def as_markdown(source: str) -> str:
    return re.sub(r"<(b|i|a)\b[^>]*>(.*?)</\1>", lambda m: DELIMITERS[m.group(1)] + m.group(2) + DELIMITERS[m.group(1)],
                  source)


def emphasised(text: str) -> list[tuple[str, str]]:
    """Each emphasis span as (delimiter, the words inside)."""
    from service.protection.markdown import read_markdown

    markup = read_markdown(text)
    return [(tag.opening, markup.plain[tag.start:tag.end]) for tag in markup.tags]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=REPO / "results" / "markdown_emphasis.md")
    args = parser.parse_args()
    import sacrebleu
    import torch

    from service.protection.markdown import read_markdown
    from service.settings import Settings

    torch.set_num_threads(1)
    items = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines() if line.strip()]
    sources = [as_markdown(item["source"]) for item in items]
    plain_sources = [read_markdown(source).plain for source in sources]
    references = [item["reference"] for item in items]
    started = time.perf_counter()
    with in_process_service(Settings(model_dirs=[REPO / d for d in MODEL_DIRS], device="cpu", inference_process=False,
                                     warmup=False)) as client:
        outputs = translate_through(client, sources, "en", "de")
        plain_outputs = translate_through(client, plain_sources, "en", "de")
    seconds = time.perf_counter() - started

    kept = sum([d for d, _ in emphasised(o)] == [d for d, _ in emphasised(s)] for s, o in zip(sources, outputs))
    spans = copied = 0
    for source, output, reference in zip(sources, outputs, references):
        for (_, inside), (_, back) in zip(emphasised(source), emphasised(output)):
            if inside.lower() in reference.lower():
                continue  # kept as sent in the reference too (a name, "T-shirt")
            spans += 1
            copied += back.lower() == inside.lower()
    hyps = [read_markdown(o).plain for o in outputs]
    bleu, chrf = sacrebleu.corpus_bleu(hyps, [references]).score, sacrebleu.corpus_chrf(hyps, [references]).score
    plain_bleu = sacrebleu.corpus_bleu(plain_outputs, [references]).score
    plain_chrf = sacrebleu.corpus_chrf(plain_outputs, [references]).score
    examples = [(s, o) for s, o in zip(sources, outputs)][:6]
    report = (
        run_heading() + "    python benchmarks/markdown_emphasis.py\n\n"
        f"{len(items)} Multi30k sentences with one emphasis each, format text, beam 5, {' + '.join(MODEL_DIRS)}; "
        f"{seconds:.0f} s.\n\n"
        "| outputs with the source's emphasis | emphasised spans copied untranslated | BLEU / chrF2 with emphasis "
        "(delimiters out) | BLEU / chrF2 of the same sentences without |\n|---:|---:|---:|---:|\n"
        f"| {kept}/{len(items)} | {copied}/{spans} | {bleu:.2f} / {chrf:.2f} | {plain_bleu:.2f} / {plain_chrf:.2f} |\n\n"
        "The first outputs:\n\n" + "".join(f"- `{s}`<br>`{o}`\n" for s, o in examples))
    print(report)
    append_report(args.results, "Markdown emphasis through /translate", "python benchmarks/markdown_emphasis.py", report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
