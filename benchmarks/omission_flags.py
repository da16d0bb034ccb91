"""Omission and insertion flags: does `/align` flag a source word whose translation is missing (or a
target word that translates nothing), and how often does it flag a word that was translated?

    python benchmarks/omission_flags.py                      # captions (in domain), appends to results/omission_flags.md
    python benchmarks/omission_flags.py --test-set gold      # Europarl gold pairs (out of domain)
    python benchmarks/omission_flags.py --omission-max-weight 0.3   # another threshold than the service's
    python benchmarks/omission_flags.py --model en-de-software      # the software model (its supervised head)
    python benchmarks/omission_flags.py --kind insertions           # possible_insertions instead
    python benchmarks/omission_flags.py --kind insertions --insertion-max-support 0.3

Each test pair is a source sentence, its reference translation and reference word links (captions:
eflomal's links on the first 500 pairs of test_2016_flickr, data/multi30k/eflomal; gold: the 50
hand-aligned Europarl pairs of data/gold_align_deen_dev). An omission is made by deleting from the
reference one target word whose only link is a source word with no other link: a word-for-word pair
("Hund" for "dog"), so that after the deletion nothing in the translation translates that source
word. Only content words are deleted (the source word not among the 100 most frequent words of
the English training text: function words are often merged into a neighbour's translation, "of the"
-> "der", and a reviewer needs no flag for those). At most --per-pair deletions a pair, chosen
with a fixed seed.

Insertions (--kind insertions): into each reference, at a random place, a word of four letters or
more from another reference of the set that this one does not hold (--per-pair of them, one at a
time); recall = the inserted words flagged, false flags = target words with a reference link in
the intact pairs flagged (content words: not among the 100 most frequent of the German training
text).

The service (in-process, POST /align, the En->De caption model or --model, with the default method
`make serve` gives it) aligns every damaged pair and every intact pair; words are whitespace tokens of the
reference's tokenisation. Reported per confidence threshold t:
- recall: the share of deleted words flagged with confidence >= t;
- false flags: the share of source words with a reference link in the intact pairs flagged with
  confidence >= t (each was translated, by the reference's links), content and function words apart;
- precision among flags on damaged pairs: of the words flagged there, the share that was deleted.
"""
from __future__ import annotations

import argparse
import collections
import functools
import gzip
import random
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.host import append_report, in_process_service, run_heading  # noqa: E402

# Per model measured: the model directories served beside it, as `make serve` serves them (the caption
# model with its reverse direction, so that its default method is bidirectional; the software model
# has no reverse model of its domain and aligns with its own supervised head). models/en-de has no
# supervised head: its default method is raw attention.
SERVED = {"en-de-align2": ("models/en-de-align2", "models/de-en-align"),
          "en-de-software": ("models/en-de-software",),
          "en-de": ("models/en-de",)}
FREQUENT = 100
THRESHOLDS = (0.0, 0.9)


def read_captions(pairs: int) -> list[tuple[list[str], list[str], set[tuple[int, int]]]]:
    from training.alignment_labels import words

    def lines(path: Path) -> list[str]:
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            return [line.rstrip("\n") for line in handle]

    data = REPO / "data/multi30k"
    links = (data / "eflomal/test_2016_flickr.en-de.gdfa").read_text(encoding="utf-8").splitlines()
    en, de = lines(data / "test_2016_flickr.en.gz"), lines(data / "test_2016_flickr.de.gz")
    out = []
    for k, line in enumerate(links[:pairs]):
        pairs_ = {tuple(int(x) for x in link.split("-")) for link in line.split()}
        out.append((words(en[k]), words(de[k]), pairs_))
    return out


def read_gold(pairs: int) -> list[tuple[list[str], list[str], set[tuple[int, int]]]]:
    data = REPO / "data/gold_align_deen_dev"
    en = (data / "test.en").read_text(encoding="utf-8").splitlines()
    de = (data / "test.de").read_text(encoding="utf-8").splitlines()
    wa = (data / "de-en.wa").read_text(encoding="utf-8").splitlines()
    out = []
    for k in range(min(pairs, len(en))):
        # de-en.wa writes German-English links: reversed into (English, German).
        pairs_ = {(int(b), int(a)) for a, b in (link.split("-") for link in wa[k].split())}
        out.append((en[k].split(), de[k].split(), pairs_))
    return out


@functools.cache
def frequent_words(language: str = "en") -> frozenset[str]:
    from training.alignment_labels import words

    counts: collections.Counter[str] = collections.Counter()
    with gzip.open(REPO / f"data/multi30k/train.{language}.gz", "rt", encoding="utf-8") as handle:
        for line in handle:
            counts.update(w.lower() for w in words(line))
    return frozenset(w for w, _ in counts.most_common(FREQUENT))


def deletions(pairs, per_pair: int, seed: int) -> list[tuple[int, int, int]]:
    """(pair, source word, target word deleted): one-to-one linked content words."""
    frequent = frequent_words()
    rng = random.Random(seed)
    cases = []
    for k, (source, target, links) in enumerate(pairs):
        by_source = collections.Counter(s for s, _ in links)
        by_target = collections.Counter(t for _, t in links)
        candidates = [(s, t) for s, t in sorted(links)
                      if by_source[s] == 1 and by_target[t] == 1 and any(c.isalpha() for c in target[t])
                      and source[s].lower() not in frequent and len(target) > 1]
        rng.shuffle(candidates)
        cases.extend((k, s, t) for s, t in candidates[:per_pair])
    return cases


def align(client, model: str, texts: list[str], translations: list[str], methods: set[str], kind: str = "omissions",
          batch: int = 32) -> list[dict[int, float]]:
    """Per pair: word -> the confidence of its possible-omission (source word) or possible-insertion
    (target word) flag; the methods the service used are added to `methods`."""
    flags = []
    for start in range(0, len(texts), batch):
        response = client.post("/align", json={"text": texts[start:start + batch],
                                               "translation": translations[start:start + batch],
                                               "source": "en", "target": "de", "model": model})
        response.raise_for_status()
        answer = response.json()
        methods.add(answer["alignment_method"])
        for alignment in answer["alignments"]:
            flags.append({f["word"]: f["confidence"] for f in alignment[f"possible_{kind}"]})
    return flags


def insertions(pairs, per_pair: int, seed: int) -> list[tuple[int, int, str]]:
    """(pair, position in its reference, word inserted there): words of other references."""
    rng = random.Random(seed)
    vocabulary = sorted({w for _, target, _ in pairs for w in target if w.isalpha() and len(w) >= 4})
    cases = []
    for k, (_, target, _) in enumerate(pairs):
        held = set(target)
        for _ in range(per_pair):
            word = rng.choice(vocabulary)
            while word in held:
                word = rng.choice(vocabulary)
            cases.append((k, rng.randint(1, len(target)), word))
    return cases


def measure(args: argparse.Namespace) -> str:
    from service import alignment_flags
    from service.settings import Settings

    if args.omission_max_weight is not None:
        alignment_flags.OMISSION_MAX_WEIGHT = args.omission_max_weight
    if args.insertion_max_support is not None:
        alignment_flags.INSERTION_MAX_SUPPORT = dict.fromkeys(alignment_flags.INSERTION_MAX_SUPPORT,
                                                              args.insertion_max_support)
    pairs = read_captions(args.pairs) if args.test_set == "captions" else read_gold(args.pairs)
    omissions = args.kind == "omissions"
    # Per damaged pair: the pair it was made from, its translation, and the word that should be flagged.
    if omissions:
        cases = deletions(pairs, args.per_pair, args.seed)
        damaged_targets = [" ".join(w for j, w in enumerate(pairs[k][1]) if j != t) for k, _, t in cases]
        flagged_word = [s for _, s, _ in cases]  # the source word that lost its translation
    else:
        cases = insertions(pairs, args.per_pair, args.seed)
        damaged_targets = [" ".join(pairs[k][1][:p] + [w] + pairs[k][1][p:]) for k, p, w in cases]
        flagged_word = [p for _, p, _ in cases]  # the inserted target word
    started = time.perf_counter()
    with in_process_service(Settings(model_dirs=list(SERVED[args.model]), device="cpu", inference_process=False,
                                     warmup=False)) as client:
        methods: set[str] = set()
        intact = align(client, args.model, [" ".join(s) for s, _, _ in pairs], [" ".join(t) for _, t, _ in pairs],
                       methods, args.kind)
        damaged = align(client, args.model, [" ".join(pairs[k][0]) for k, _, _ in cases], damaged_targets, methods,
                        args.kind)
    seconds = time.perf_counter() - started
    side = 0 if omissions else 1
    frequent = frequent_words("en" if omissions else "de")
    linked = [(k, w, pairs[k][side][w].lower() not in frequent)
              for k, (_, _, links) in enumerate(pairs) for w in sorted({link[side] for link in links})]
    rows = []
    for t in THRESHOLDS:
        caught = sum(1 for w, flags in zip(flagged_word, damaged) if flags.get(w, -1.0) >= t)
        false = {content: sum(1 for k, w, c in linked if c == content and intact[k].get(w, -1.0) >= t)
                 for content in (True, False)}
        words = {content: sum(1 for *_, c in linked if c == content) for content in (True, False)}
        flagged = sum(1 for flags in damaged for c in flags.values() if c >= t)
        precision = caught / flagged if flagged else 0.0
        rows.append(f"| {t:.1f} | {caught / len(cases):.1%} ({caught}/{len(cases)}) | "
                    + " | ".join(f"{false[c] / max(words[c], 1):.1%} ({false[c]}/{words[c]})" for c in (True, False))
                    + f" | {precision:.1%} |")
    name = {"captions": "test_2016_flickr, first 500 pairs, eflomal links",
            "gold": "data/gold_align_deen_dev, 50 Europarl pairs, gold links"}[args.test_set]
    command = "python benchmarks/omission_flags.py" + (f" --test-set {args.test_set}" if args.test_set != "captions"
                                                       else "")
    if args.model != "en-de-align2":
        command += f" --model {args.model}"
    if not omissions:
        command += " --kind insertions"
    if args.omission_max_weight is not None:
        command += f" --omission-max-weight {args.omission_max_weight}"
    if args.insertion_max_support is not None:
        command += f" --insertion-max-support {args.insertion_max_support}"
    return (run_heading(f" ({args.note})" if args.note else "")
            + f"    {command}\n\n"
            + f"{name}: {len(pairs)} pairs, {len(cases)} {'deleted' if omissions else 'inserted'} words (at most "
            f"{args.per_pair} a pair, seed {args.seed}), {len(linked)} linked {'source' if omissions else 'target'} "
            f"words in the intact pairs; {args.model} served "
            f"with {', '.join(SERVED[args.model][1:]) or 'no other model'}, its default method "
            f"({', '.join(sorted(methods))}); {seconds:.0f} s.\n\n"
            f"| confidence ≥ | recall ({'deleted' if omissions else 'inserted'} words flagged) | false flags: "
            f"{'translated' if omissions else 'translating'} content words | "
            "function words | precision on damaged pairs |\n|---:|---:|---:|---:|---:|\n" + "\n".join(rows) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--test-set", choices=("captions", "gold"), default="captions")
    parser.add_argument("--model", choices=sorted(SERVED), default="en-de-align2")
    parser.add_argument("--kind", choices=("omissions", "insertions"), default="omissions")
    parser.add_argument("--pairs", type=int, default=500)
    parser.add_argument("--per-pair", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--omission-max-weight", type=float,
                        help="flag source words below this weight instead of the service's threshold")
    parser.add_argument("--insertion-max-support", type=float,
                        help="flag target words below this support instead of the service's thresholds")
    parser.add_argument("--note", default="", help="said in the run's heading")
    parser.add_argument("--results", type=Path, default=REPO / "results/omission_flags.md")
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args(argv)
    if args.pairs < 1 or args.per_pair < 1:
        print("omission_flags: --pairs and --per-pair must be >= 1", file=sys.stderr)
        return 2
    report = measure(args)
    print(report)
    if not args.no_write:
        append_report(args.results, "Omission and insertion flags on /align", "python benchmarks/omission_flags.py", report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
