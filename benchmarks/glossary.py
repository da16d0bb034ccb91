"""Glossaries: how often is the required translation of a term in the output, and what does
enforcing it do to BLEU?

    python benchmarks/glossary.py --build   # (re)write data/glossary_eval/multi30k_test2016.jsonl
    python benchmarks/glossary.py           # measure; appends to results/glossary.md
    python benchmarks/glossary.py --methods replace --no-articles   # replace alone, the model's articles kept
    python benchmarks/glossary.py --test-set software [--build]     # UI messages, models/en-de-software
    python benchmarks/glossary.py --test-set captions-fr [--build]  # En->Fr, models/en-fr
    python benchmarks/glossary.py --service ...   # also through POST /translate, as a client gets it
    python benchmarks/glossary.py --outputs F.jsonl ...  # every message's outputs, to diff two rule sets

The test sets (built once by --build and committed), each message with a glossary of up to two
terms taken from its reference, so that every required term is one a translator actually
used:
- captions (data/glossary_eval/multi30k_test2016.jsonl): the 1,000 sentences of Multi30k's
  test_2016_flickr (En→De), measured on en-de-align2;
- software (data/glossary_eval/debian_test.jsonl): the 3,142 messages of the software corpus's test
  split (data/debian_catalogs, packages no model was trained on), measured on en-de-software: what
  a localiser's terminology list asks of the model that serves UI text;
- captions-fr (data/glossary_eval/multi30k_test2016_fr.jsonl): the same sentences into French, terms
  from their French references, measured on en-fr.
The candidate translations of an English word are those the training split's word alignment
(train.en-de.align.gz or train.en-fr.align.gz beside the corpus, eflomal, lower-cased tokens) links
it to at least 5 times;
a term is an English word of three letters or more in the message with a candidate translation in
its reference (as the reference writes it, case and ending included). Terms whose translation is
not the word's most frequent one go first (the terminology a glossary exists for), then the rarer
words; a stop list keeps function words out.

Measured on the bundled models as `make serve` serves them (supervised alignment heads), for each
enforcement method of service/glossary.py: "replace" edits the translation after
the search (so the translation without a glossary is the same search's; the article before a
replaced noun chosen again by the model's score, as the service does for German), "protect" takes
the terms out before it (a search of its own). For all terms and for the terms the model missed
without a glossary:
- compliance: the share of terms whose required translation the output holds as a word (the
  report's rule without the compound parts it reads off the alignment: first letter in either case,
  German endings allowed), and the share written exactly as required;
- BLEU and chrF (sacreBLEU) against the reference; BLEU also on the messages none of whose
  required translations is a function word (`FUNCTION_WORDS`: articles, pronouns, prepositions,
  conjunctions, auxiliaries, which the sets take from the references and no glossary would list).
"""
from __future__ import annotations

import argparse
import collections
import gzip
import json
import os
import platform
import re
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.host import append_report, cpu_name, in_process_service  # noqa: E402

# Per test set: the corpus, its test split, the target language, the committed test set, the model
# measured by default.
TEST_SETS = {
    "captions": ("multi30k", "test_2016_flickr", "de", "multi30k_test2016.jsonl", "en-de-align2"),
    "software": ("debian_catalogs", "test", "de", "debian_test.jsonl", "en-de-software"),
    "captions-fr": ("multi30k", "test_2016_flickr", "fr", "multi30k_test2016_fr.jsonl", "en-fr"),
}
TOKENS = re.compile(r"\w+|[^\w\s]")  # as the training alignment tokenised (its .json)
STOP = set("the and with are for his her its their from into onto over under while who that this these those "
           "some one two three has have out off near next down through front other each while".split())
# Words of software messages that are grammar, not terminology.
STOP |= set("not could would should will can cannot does doesn don isn aren wasn won you your all any "
            "was were been being than when which where what how also only just more most such very".split())
# The part of a contraction before its apostrophe ("doesn" of "doesn't") is no word a glossary lists.
CONTRACTED = re.compile(r"(\w+)['’]\w")
MIN_LINKS = 5
# Required translations that are grammar, not terminology: the sets take some from the references
# ("wearing" -> "Ein"), which no glossary would list; BLEU is also reported without the messages
# that have one, where enforcing them dominates what a rule change does.
FUNCTION_WORDS = {
    "de": set("der die das den dem des ein eine einen einem einer eines und oder aber mit auf in im am an zu zum zur "
              "von vom für bei beim aus nach vor über unter neben durch um als wie ob wenn weil dass da sich sie er "
              "es ihr ihre ihren ihrem sein seine seinen seinem ist sind war wird werden wurde wurden hat haben kann "
              "können muss müssen muß soll sollen darf möchten nicht kein keine keinen nur".split()),
    "fr": set("le la les un une des du de d l et ou mais avec sur dans en à au aux par pour sans sous chez que qui "
              "se il elle ils elles son sa ses leur leurs est sont était être a ont ne pas".split()),
}


def read(corpus: str, name: str) -> list[str]:
    with gzip.open(REPO / "data" / corpus / name, "rt", encoding="utf-8") as handle:
        return [line.rstrip("\n") for line in handle]


def test_set_path(name: str) -> Path:
    return REPO / "data" / "glossary_eval" / TEST_SETS[name][3]


def build(name: str) -> None:
    from service.protection.placeholders import blanked, find_protected

    corpus, split, target, _, _ = TEST_SETS[name]
    links: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for en, de, pairs in zip(read(corpus, "train.en.gz"), read(corpus, f"train.{target}.gz"),
                             read(corpus, f"train.en-{target}.align.gz")):
        en_tokens, de_tokens = TOKENS.findall(en.lower()), TOKENS.findall(de.lower())
        for pair in pairs.split():
            i, j = map(int, pair.split("-"))
            links[en_tokens[i]][de_tokens[j]] += 1
    frequency = {word: sum(counts.values()) for word, counts in links.items()}
    rows = []
    for k, (source, reference) in enumerate(zip(read(corpus, f"{split}.en.gz"), read(corpus, f"{split}.{target}.gz"))):
        surface = {token.lower(): token for token in TOKENS.findall(reference)}
        terms = []
        contracted = set(CONTRACTED.findall(source.lower()))
        # A word inside a placeholder or literal ("/Cursor/Move", "--mpv-options") is kept as
        # written by the service, not a term (service/glossary.py).
        for word in dict.fromkeys(TOKENS.findall(blanked(source, find_protected(source)).lower())):
            if len(word) < 3 or not word.isalpha() or word in STOP or word in contracted or word not in links:
                continue
            candidates = [(t, n) for t, n in links[word].most_common() if n >= MIN_LINKS and t.isalpha() and len(t) >= 3]
            found = [t for t, _ in candidates if t in surface]
            if found:
                top = candidates[0][0]
                terms.append((found[0] == top, frequency[word], word, surface[found[0]]))
        terms.sort()
        # One source term per required translation ("address book" -> "Adressbuch" is not two terms).
        glossary: list[dict[str, str]] = []
        for _, _, word, target in terms:
            if len(glossary) < 2 and all(target.lower() != g["target"].lower() for g in glossary):
                glossary.append({"source": word, "target": target})
        rows.append({"id": k, "source": source, "reference": reference, "glossary": glossary})
    path = test_set_path(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    print(f"{len(rows)} sentences, {sum(len(r['glossary']) for r in rows)} terms in {path}")


def measure(args: argparse.Namespace) -> tuple[str, list[dict]]:
    """The report's section, and per message its outputs under every setting measured (`--outputs`)."""
    import sacrebleu

    from service.glossary import GlossaryEntry, occurrences
    from service.protection.placeholders import find_placeholders
    from service.protection.placement import prepare, restore, terms_translated
    from service.runtime.base import DecodingOptions
    from service.runtime.factory import RuntimeSpec, load_runtime

    items = [json.loads(line) for line in test_set_path(args.test_set).read_text(encoding="utf-8").splitlines() if line.strip()]
    runtime = load_runtime(RuntimeSpec("torch", args.model_dir, "cpu"))
    options = DecodingOptions(alignment="token", alignment_method=runtime.default_alignment_method)
    started = time.perf_counter()
    plain: list[str] = []
    enforced: dict[str, list[str]] = {method: [] for method in ("replace", *args.methods)}
    for method in enforced:
        for start in range(0, len(items), 32):
            batch = items[start:start + 32]
            glossaries = [[GlossaryEntry(t["source"], t["target"]) for t in item["glossary"]] for item in batch]
            prepared = [prepare(item["source"], glossary=g, glossary_method=method) for item, g in zip(batch, glossaries)]
            results = runtime.translate([p.model_text for p in prepared], options)
            for p, nbest in zip(prepared, results):
                best = nbest[0]
                if method == "replace":
                    plain.append(best.text)
                # As the service serves it: the model's scores place a term it left out and, for German,
                # choose the article before a replaced noun.
                rescore = lambda candidates, p=p: runtime.score([(terms_translated(p), c) for c in candidates])  # noqa: E731
                enforced[method].append(restore(p, best.text, best.alignment, rescore,
                                                args.articles and TEST_SETS[args.test_set][2] == "de",
                                                lambda word: runtime.count_tokens([word]) == [1]).text)
    seconds = time.perf_counter() - started
    service_outputs = {}
    if args.service:
        started = time.perf_counter()
        service_outputs = through_service(args.model_dir, items, TEST_SETS[args.test_set][2])
        seconds += time.perf_counter() - started
    references = [item["reference"] for item in items]
    terms = [(k, t["target"]) for k, item in enumerate(items) for t in item["glossary"]]
    missed = [(k, target) for k, target in terms if not occurrences(plain[k], target)]

    def compliance(outputs: list[str], subset: list[tuple[int, str]]) -> str:
        if not subset:
            return "— | —"
        kept = sum(bool(occurrences(outputs[k], target)) for k, target in subset)
        exact = sum(bool(re.search(r"(?<!\w)" + re.escape(target) + r"(?!\w)", outputs[k])) for k, target in subset)
        return f"{kept / len(subset):.1%} | {exact / len(subset):.1%}"

    lines = [f"## {time.strftime('%Y-%m-%d')} — {cpu_name()}, {os.cpu_count()} logical CPUs, {platform.system()}, "
             f"torch backend on CPU ({runtime.precision}), {args.model_dir.name} ({runtime.default_alignment_method} alignment)", "",
             f"Command: `python benchmarks/glossary.py{'' if args.test_set == 'captions' else ' --test-set ' + args.test_set}"
             f"{' --methods ' + ','.join(args.methods) if args.methods != ['replace', 'protect'] else ''}"
             f"{'' if args.articles else ' --no-articles'}{' --service' if args.service else ''}` ({seconds:.0f} s). {len(items)} sentences, {len(terms)} terms "
             f"({sum(1 for i in items if i['glossary'])} sentences with at least one); {len(missed)} terms missed "
             "without a glossary.", "",
             "| glossary | compliance, all terms | exactly as required, all | compliance, terms missed without | "
             "exactly, missed | BLEU | chrF |", "|---|---:|---:|---:|---:|---:|---:|"]
    settings = {"none": plain, **{f"enforced: {m}": o for m, o in enforced.items()},
                **{f"through the service: {way}": o for way, o in service_outputs.items()}}
    for name, outputs in settings.items():
        bleu = sacrebleu.corpus_bleu(outputs, [references]).score
        chrf = sacrebleu.corpus_chrf(outputs, [references]).score
        lines.append(f"| {name} | {compliance(outputs, terms)} | {compliance(outputs, missed)} | {bleu:.2f} | {chrf:.2f} |")
    grammar = FUNCTION_WORDS.get(TEST_SETS[args.test_set][2], set())
    content = [k for k, item in enumerate(items) if not any(t["target"].lower() in grammar for t in item["glossary"])]
    if len(content) < len(items):
        scores = [f"{name} {sacrebleu.corpus_bleu([o[k] for k in content], [[references[k] for k in content]]).score:.2f}"
                  for name, o in settings.items()]
        lines += ["", f"BLEU on the {len(content)} messages none of whose required translations is a function word "
                  "(`FUNCTION_WORDS`): " + ", ".join(scores) + "."]
    with_placeholders = [k for k, item in enumerate(items) if find_placeholders(item["source"])]
    if service_outputs and with_placeholders:
        # The service sends these as written, glossary or not (service/protected_translation.py).
        scores = [f"{way} {sacrebleu.corpus_bleu([o[k] for k in with_placeholders], [[references[k] for k in with_placeholders]]).score:.2f}"
                  for way, o in service_outputs.items()]
        lines += ["", f"BLEU through the service on the {len(with_placeholders)} messages with a placeholder: "
                  + ", ".join(scores) + "."]
    rows = [{"source": item["source"], "glossary": item["glossary"], "reference": item["reference"],
             "outputs": {name: outputs[k] for name, outputs in settings.items()}} for k, item in enumerate(items)]
    return "\n".join(lines) + "\n", rows


def through_service(model_dir: Path, items: list[dict], target: str = "de") -> dict[str, list[str]]:
    """The outputs of POST /translate (in-process, the model as `make serve` serves it), without the
    glossary and with it: what a client gets, the text's placeholders sent as written where the
    service does so and its sentences cut as it cuts them. One request per message (each has its
    own glossary), the messages without a glossary in requests of 32."""
    from service.settings import Settings

    outputs: dict[str, list[str]] = {"no glossary": [], "glossary": []}
    with in_process_service(Settings(model_dirs=[model_dir], device="cpu", inference_process=False,
                                     warmup=False)) as client:
        def post(texts: list[str], glossary: list[dict] | None = None) -> list[str]:
            body = {"text": texts, "source": "en", "target": target, "model": model_dir.name}
            if glossary:
                body["glossary"] = glossary
            response = client.post("/translate", json=body)
            response.raise_for_status()
            return [nbest[0]["text"] for nbest in response.json()["translations"]]

        for start in range(0, len(items), 32):
            outputs["no glossary"] += post([item["source"] for item in items[start:start + 32]])
        for item in items:
            outputs["glossary"] += post([item["source"]], item["glossary"])
    return outputs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", action="store_true", help="rebuild the test set from Multi30k")
    parser.add_argument("--results", type=Path, default=REPO / "results" / "glossary.md")
    parser.add_argument("--test-set", choices=sorted(TEST_SETS), default="captions",
                        help="captions (Multi30k test_2016_flickr) or software (the Debian catalogs' test split)")
    parser.add_argument("--model-dir", type=Path, default=None,
                        help="default: the test set's model (captions: models/en-de-align2, software: models/en-de-software)")
    parser.add_argument("--methods", default="replace,protect",
                        help="enforcement methods to measure, comma-separated (default replace,protect); "
                             "'none' is always measured, on replace's search")
    parser.add_argument("--no-articles", dest="articles", action="store_false",
                        help="keep the model's article before a replaced noun (the service chooses it again)")
    parser.add_argument("--service", action="store_true",
                        help="also translate through POST /translate (in-process), with and without the glossary")
    parser.add_argument("--outputs", type=Path, default=None,
                        help="also write every message's outputs here (JSON lines), to compare two rule sets "
                             "message by message")
    args = parser.parse_args()
    args.methods = [m for m in args.methods.split(",") if m]
    unknown = sorted(set(args.methods) - {"replace", "protect"})
    if unknown:
        parser.error(f"unknown --methods {', '.join(unknown)} (known: replace, protect)")
    if args.model_dir is None:
        args.model_dir = REPO / "models" / TEST_SETS[args.test_set][4]
    if args.build:
        build(args.test_set)
        return 0
    if not test_set_path(args.test_set).is_file():
        parser.error(f"--test-set {args.test_set}: no {test_set_path(args.test_set)} (write it with --build)")
    if not (args.model_dir / "config.json").is_file():
        parser.error(f"--model-dir {args.model_dir}: not a model directory (no config.json)")
    if args.outputs is not None and not args.outputs.parent.is_dir():
        parser.error(f"--outputs {args.outputs}: no directory {args.outputs.parent}")
    report, rows = measure(args)
    print(report)
    if args.outputs is not None:
        args.outputs.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    append_report(args.results, "Glossaries: compliance and BLEU with and without them",
                  "python benchmarks/glossary.py", report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
