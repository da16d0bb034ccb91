"""Software messages as their catalogs write them, through the service: translation quality and
what gettext checks of a translation's form.

    python benchmarks/as_written.py                                   # the software validation split
    python benchmarks/as_written.py --split test                      # packages the model never saw
    python benchmarks/as_written.py --model auto --model-dirs models/en-de-align2 models/en-de-software
                                                                      # no model named: the service chooses
    python benchmarks/as_written.py --url http://127.0.0.1:8000       # a running server instead
    python benchmarks/as_written.py --pair de-en --split test         # De->En: the catalogs' German as written

The corpus' splits are normalised (whitespace runs one space, accelerators removed), but a client
sends a message as written: a command's help with its line breaks and columns, a label with `_`
or `&`. `data/debian_catalogs/SPLIT.as_written.jsonl.gz` (training/corpus/as_written.py) holds each
pair of the split as its catalog writes it. Each message is translated through the service twice,
as written and as the corpus has it (32 texts a request, beam 5; in-process with --model-dirs, or
the server at --url), and scored:
- BLEU and chrF2 (sacrebleu, cased) against the corpus' reference, the output normalised the way
  the corpus is (whitespace, the accelerator of a message that has one), over every message and
  over those whose written form differs from the corpus';
- gettext's checks of form (`msgfmt --check-format`, `--check-accelerators`): the output begins
  and ends with a line break where the message does, and holds one accelerator marker of the
  message's kind where the message has one (the corpus' reading, training/corpus/clean.py, where
  its reference has one too), and of those, the marker on a word the reference has (the word
  translated, not the source's word copied with its marker: "Na_cht mode" for "Na_chtmodus");
- the first letter's case (translate-toolkit's pofilter "startcaps"): of the messages that start
  with a capital letter, those whose output does where the reference does, and those whose output
  does not where the reference does not;
- the full stop at the end (pofilter's "endpunc"): of the messages that end with no punctuation, as
  their reference does, those whose output ends with no full stop; of those that end with one, as
  their reference does, those whose output does;
- lines: of the messages whose reference keeps their number of lines, those whose output does.
Appends to results/as_written.md.
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

CORPUS = REPO / "data" / "debian_catalogs"

def form_kept(message: str, output: str) -> bool:
    """msgfmt --check-format's rule on line breaks: begins and ends with one where the message does."""
    return message.startswith("\n") == output.startswith("\n") and message.endswith("\n") == output.endswith("\n")


def on_a_word_of(output: str, reference: str) -> bool:
    """Whether the output's one accelerator marker stands in a word the reference has (its own marker
    taken out): the word was translated, not copied from the source with its marker."""
    from training.corpus.clean import accelerator_markers

    found = accelerator_markers(output)
    if len(found) != 1:
        return False
    at = found[0].start()
    start, end = output.rfind(" ", 0, at) + 1, (output.find(" ", at) + 1 or len(output) + 1) - 1
    word = (output[start:at] + output[at + 1:end]).strip(".,:;!?…()»«\"'").casefold()
    plain = "".join(c for k, c in enumerate(reference) if k not in {m.start() for m in accelerator_markers(reference)})
    return bool(word) and re.search(r"(?<!\w)" + re.escape(word) + r"(?!\w)", plain.casefold()) is not None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=("valid", "test"), default="valid")
    parser.add_argument("--pair", choices=("en-de", "de-en"), default="en-de",
                        help="de-en: the catalogs' German translated to English")
    parser.add_argument("--model-dirs", type=Path, nargs="+", default=None,
                        help="the models the in-process service serves (default: the pair's software model)")
    parser.add_argument("--model", default=None,
                        help="the model a request names (default: the first of --model-dirs); 'auto' names none")
    parser.add_argument("--limit", type=int, default=None, help="the first N messages only (a quick look)")
    parser.add_argument("--url", default=None, help="translate through this running server instead of in-process")
    parser.add_argument("--results", type=Path, default=REPO / "results" / "as_written.md")
    parser.add_argument("--note", default="", help="said in the run's heading")
    parser.add_argument("--outputs", type=Path, default=None,
                        help="also write each message as written, its output and its reference here, a JSON object a line")
    args = parser.parse_args()
    source_lang, target_lang = args.pair.split("-")
    default_dirs = [REPO / "models" / f"{args.pair}-software"]
    args.model_dirs = args.model_dirs or default_dirs
    # The catalogs' msgid is the row's source, its msgstr the target; De->En reads them the other way.
    side, other = ("source", "target") if args.pair == "en-de" else ("target", "source")
    path = CORPUS / f"{args.split}.as_written.jsonl.gz"
    if not path.is_file():
        parser.error(f"{path} is missing: python -m training.corpus as-written --sources "
                     f"data/debian_catalogs/sources.tsv --cache CACHE --corpus data/debian_catalogs")
    missing = [str(d) for d in args.model_dirs if not d.is_dir()]
    if missing and not args.url:
        parser.error(f"--model-dirs: no such directory: {', '.join(missing)}")

    import httpx
    import sacrebleu
    import torch

    from service.settings import Settings
    from service.full_stop import ends_punctuated
    from service.start_capital import opening_letter
    from training.corpus.as_written import read_as_written
    from training.corpus.clean import accelerator_markers, normalise, strip_accelerators

    torch.set_num_threads(1)
    rows = read_as_written(path)[:args.limit]
    written = [row[side] for row in rows]
    cleaned = [strip_accelerators(normalise(row[side]), normalise(row[other])) for row in rows]
    corpus_sources, references = [src for src, _ in cleaned], [ref for _, ref in cleaned]
    model = None if args.model == "auto" else (args.model or args.model_dirs[0].name)

    def translate(client, texts: list[str]) -> list[str]:
        return translate_through(client, texts, source_lang, target_lang, model)

    started = time.perf_counter()
    with (httpx.Client(base_url=args.url, timeout=600) if args.url else in_process_service(Settings(
            model_dirs=args.model_dirs, device="cpu", inference_process=False, warmup=False, max_segments=32))) as client:
        from_written = translate(client, written)
        from_corpus = translate(client, corpus_sources)
    seconds = time.perf_counter() - started
    if args.outputs:
        with args.outputs.open("w", encoding="utf-8") as handle:
            for row, out in zip(rows, from_written):
                handle.write(json.dumps({"source": row[side], "output": out, "reference": row[other]},
                                        ensure_ascii=False) + "\n")
    # The output of a message as written, read as the corpus reads a catalog's translation.
    from_written_cleaned = [strip_accelerators(normalise(row[side]), normalise(out))[1]
                            for row, out in zip(rows, from_written)]

    def scores(outputs: list[str], subset: list[int]) -> str:
        hypotheses, refs = [outputs[i] for i in subset], [[references[i] for i in subset]]
        return f"{sacrebleu.corpus_bleu(hypotheses, refs).score:.2f} / {sacrebleu.corpus_chrf(hypotheses, refs).score:.2f}"

    def share(count: int, total: int) -> str:
        return f"{count}/{total} ({100 * count / total:.1f} %)" if total else "none"

    everything = list(range(len(rows)))
    differs = [i for i in everything if written[i] != corpus_sources[i]]
    breaks = [i for i in everything if written[i].startswith("\n") or written[i].endswith("\n")]
    # The corpus' reading of an accelerator (training/corpus/clean.py), confirmed by the reference.
    marked = [i for i in everything if cleaned[i] != (normalise(written[i]), normalise(rows[i][other]))
              and accelerator_markers(written[i])]

    def markers(text: str) -> list[str]:
        return [m.group() for m in accelerator_markers(text)]
    def capital(text: str) -> bool | None:
        """Whether text starts with a capital letter (service/start_capital.py); None: with no letter."""
        at = opening_letter(text)
        return None if at is None else text[at].isupper()
    capitalised = [i for i in everything if capital(written[i]) and capital(rows[i][other])]
    uncapitalised = [i for i in everything if capital(written[i]) and capital(rows[i][other]) is False]
    def full_stop(text: str) -> bool:
        return text.rstrip().endswith(".") and not text.rstrip().endswith("..")
    unpunctuated = [i for i in everything if not ends_punctuated(written[i]) and not ends_punctuated(rows[i][other])]
    stopped = [i for i in everything if full_stop(written[i]) and full_stop(rows[i][other])]
    line_kept = [i for i in everything if "\n" in written[i].strip("\n")
                 and written[i].count("\n") == rows[i][other].count("\n")]
    command = f"python benchmarks/as_written.py --split {args.split}" + (
        f" --pair {args.pair}" if args.pair != "en-de" else "") + (f" --limit {args.limit}" if args.limit else "") + (
        f" --model {args.model}" if args.model else "") + (
        " --model-dirs " + " ".join(str(d.relative_to(REPO) if d.is_relative_to(REPO) else d) for d in args.model_dirs)
        if args.model_dirs != default_dirs else "") + (f" --url {args.url}" if args.url else "")
    report = (
        run_heading(f" ({args.note})" if args.note else "") +
        f"    {command}\n\n"
        f"{len(rows)} messages of data/debian_catalogs/{path.name} ({source_lang}→{target_lang}), {len(differs)} of them written otherwise than the "
        f"corpus has them; {'no model named (the service chooses)' if model is None else f'model {model}'}, beam 5; "
        f"{'the server at ' + args.url if args.url else 'this checkout, in-process'}; {seconds:.0f} s.\n\n"
        "| messages | as the corpus has them: BLEU / chrF2 | as written: BLEU / chrF2 |\n|---|---:|---:|\n"
        f"| all {len(rows)} | {scores(from_corpus, everything)} | {scores(from_written_cleaned, everything)} |\n"
        f"| the {len(differs)} written otherwise | {scores(from_corpus, differs)} | "
        f"{scores(from_written_cleaned, differs)} |\n\n"
        "| gettext's check, on the outputs of the messages as written | kept |\n|---|---:|\n"
        f"| a line break at the start and at the end exactly where the message has one: all messages | "
        f"{share(sum(form_kept(written[i], from_written[i]) for i in everything), len(rows))} |\n"
        f"| the same, of the {len(breaks)} messages that have one | "
        f"{share(sum(form_kept(written[i], from_written[i]) for i in breaks), len(breaks))} |\n"
        f"| one accelerator of the message's kind ({len(marked)} messages with one) | "
        f"{share(sum(markers(from_written[i]) == markers(written[i]) for i in marked), len(marked))} |\n"
        f"| the same, its marker on a word the reference has | "
        f"{share(sum(on_a_word_of(from_written[i], rows[i][other]) for i in marked), len(marked))} |\n"
        f"| a capital first letter where the message and its reference start with one ({len(capitalised)} messages) | "
        f"{share(sum(capital(from_written[i]) is True for i in capitalised), len(capitalised))} |\n"
        f"| a lower-case one where the message starts with a capital and its reference with a lower-case letter "
        f"({len(uncapitalised)}) | {share(sum(capital(from_written[i]) is False for i in uncapitalised), len(uncapitalised))} |\n"
        f"| no full stop at the end where the message and its reference end with no punctuation ({len(unpunctuated)}) "
        f"| {share(sum(not full_stop(from_written[i]) for i in unpunctuated), len(unpunctuated))} |\n"
        f"| a full stop at the end where both end with one ({len(stopped)}) | "
        f"{share(sum(full_stop(from_written[i]) for i in stopped), len(stopped))} |\n"
        f"| as many lines as the message (of the {len(line_kept)} of several lines whose reference keeps their number) | "
        f"{share(sum(from_written[i].count(chr(10)) == written[i].count(chr(10)) for i in line_kept), len(line_kept))} |\n"
    )
    print(report)
    append_report(args.results, "Software messages as written, through the service", "python benchmarks/as_written.py",
                  report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
