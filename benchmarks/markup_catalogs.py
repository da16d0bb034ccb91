"""UI messages with inline markup (`<b>%s</b>`, `<a href=...>`) through the service as localisation
tools send them (`"format": "html"`): sent as written to the software model, or with tags and
placeholders taken out and put back by the word alignment.

    python benchmarks/markup_catalogs.py                                  # the software validation split
    python benchmarks/markup_catalogs.py --split data/debian_catalogs/test
    python benchmarks/markup_catalogs.py --pair de-en                     # the German side, to English
    python benchmarks/markup_catalogs.py --split data/debian_catalogs/train --tag para --tag list \
        --tag item --tag link --tag qt --limit 150     # KDE's structure markup (KUIT), which no held-out
                                                       # split holds: messages the model trained on
    python benchmarks/markup_catalogs.py --split data/debian_catalogs/train --passed-through  # <code> inline
    python benchmarks/markup_catalogs.py --split data/debian_catalogs/train --attributes  # title="...", alt="..."
    python benchmarks/markup_catalogs.py --split data/debian_catalogs/train --edges  # "files?<br/>"

The messages of a split of data/debian_catalogs whose English side holds at least one tag by the
service's own html reading (service/protection/markup.py) and no entity, comment or passed-through
element; each is translated by models/en-de-software (beam 5, CPU, in-process service, 32 texts a
request) twice: as the service serves it (a text with placeholders is first sent to a model that
keeps placeholders as written where its tags wrap nothing but placeholders,
service/protected_translation.py ``tried_as_written``, else with only its tags taken out,
``tried_tags_out``), and with markup and placeholders always taken out (as before 2026-11-28).
Reported: BLEU and chrF2 (sacrebleu, cased) against the references, how many outputs were served
as the model wrote them, how many hold exactly the source's tags (each opening and closing
tag as written, none added) and its placeholders (the service's detector), and how many nest
their tags as the source does (each tag inside the same enclosing tags; siblings may change
order: "<b>a</b>/<b>b</b>" -> "<b><b>x</b></b>" fails), and of the messages whose plain text starts or
ends with whitespace (inside a tag: "<b>Unit file: </b>", a label a program joins to a value), how
many outputs start and end with the same. The tags are compared with the values of the attributes a
translation translates (service/attributes.py: title, alt, ...) left out; with `--attributes` (the
messages that hold such a value) those values are also scored on their own: BLEU and chrF2 of each
output's values against its reference's, where both hold as many. With `--edges`, the messages with an
empty element at an edge of the text (`<br/>` ending it, no text after), and how many outputs keep the
empty elements at each edge as the source has them. Appends to results/markup_catalogs.md.
"""
from __future__ import annotations

import argparse
import gzip
import re
import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.host import append_report, in_process_service, run_heading  # noqa: E402
from service.attributes import TRANSLATABLE  # noqa: E402


def lines(split: Path, suffix: str) -> list[str]:
    with gzip.open(f"{split}.{suffix}.gz", "rt", encoding="utf-8") as handle:
        return handle.read().splitlines()


def markup_messages(split: Path, source_lang: str, target_lang: str, names: frozenset[str] = frozenset(),
                    limit: int | None = None, passed_through: bool = False,
                    attributes: bool = False, edges: bool = False) -> list[tuple[str, str]]:
    """(source, reference) of the split's messages that the service reads as inline markup with tags
    (with `names`, a tag of one of those names among them), the first `limit`; with `passed_through`,
    those with an inline element passed through untouched (`<code>`) instead; with `attributes`,
    those with an attribute value to translate; with `edges`, those of the first kind with an empty
    element at an edge."""
    from service.protected_translation import tags_only
    from service.protection.markup import MarkupError, read_markup

    chosen = []
    for source, reference in zip(lines(split, source_lang), lines(split, target_lang)):
        if "<" not in source:
            continue
        try:
            markup = read_markup(source, "html")
        except MarkupError:
            continue
        if attributes:
            wanted = bool(values(source))
        elif passed_through:
            wanted = ("&" not in source and not any(tag.name == "!--" for tag in markup.tags)
                      and any(tag.verbatim is not None and tag.name.lower() not in ("pre", "script", "style")
                              for tag in markup.tags))
        else:
            wanted = bool(markup.tags) and tags_only(source, markup) and (not edges or edge_elements(source) != ((), ()))
        if wanted and (not names or any(tag.name.lower() in names for tag in markup.tags)):
            chosen.append((source, reference))
            if len(chosen) == limit:
                break
    return chosen


def values(text: str) -> list[str]:
    """The attribute values of an html text a translation translates (service/attributes.py), lang's
    aside; none where it is no well-formed html."""
    from service.attributes import translatable
    from service.protection.markup import MarkupError, read_markup

    try:
        return [a.text for a in translatable(read_markup(text, "html"), "", "") if a.given is None]
    except MarkupError:
        return []


# The attributes whose values a translation translates (service/attributes.py), and lang.
_TRANSLATED_VALUE = re.compile(r"(\s(?:" + "|".join(map(re.escape, [*TRANSLATABLE, "lang", "xml:lang"]))
                               + r""")\s*=\s*)(?:"[^"]*"|'[^']*'|[^\s"'<>=`]+)""", re.IGNORECASE)


def tags_and_placeholders(text: str) -> Counter | None:
    """The tags and placeholders as the service reads them (none across a tag's edge: "%2</message>A"
    holds "%2", not printf's "%2A"), a tag without the values a translation translates."""
    from service.protection.markup import MarkupError
    from service.protection.placement import prepare

    try:
        prepared = prepare(text, "html")
    except MarkupError:
        return None
    return Counter([("tag", _TRANSLATED_VALUE.sub(r"\1…", t.opening), t.closing) for t in prepared.markup.tags]
                   + [("placeholder", p.text) for p in prepared.protected])


def nesting(text: str) -> Counter | None:
    """Each tag with the tags that enclose it, outermost first: the markup's tree, siblings unordered."""
    from service.protection.markup import MarkupError, read_markup

    try:
        tags = read_markup(text, "html").tags
    except MarkupError:
        return None

    def opening(tag) -> str:
        return _TRANSLATED_VALUE.sub(r"\1…", tag.opening)

    def enclosing(tag) -> tuple[str, ...]:
        return () if tag.parent is None else (*enclosing(tags[tag.parent]), opening(tags[tag.parent]))
    return Counter((opening(tag), enclosing(tag)) for tag in tags)


def edge_space(text: str) -> tuple[str, str]:
    """The whitespace that starts and ends the text's plain text (`<b>Unit file: </b>`: a label a
    program joins to a value), as read in html."""
    from service.protection.markup import MarkupError, read_markup

    try:
        plain = read_markup(text, "html").plain
    except MarkupError:
        return ("?", "?")
    return plain[:len(plain) - len(plain.lstrip())], plain[len(plain.rstrip()):]


def edge_elements(text: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The empty elements (`<br/>`, `<x id="1"/>`) before the text's first visible character and
    after its last, as read in html, in order."""
    from service.protection.markup import MarkupError, read_markup

    try:
        markup = read_markup(text, "html")
    except MarkupError:
        return (("?",), ("?",))
    plain = markup.plain
    first, last = len(plain) - len(plain.lstrip()), len(plain.rstrip())
    empty = [tag for tag in markup.tags if tag.standalone and tag.verbatim is None and tag.name != "!--"]
    return (tuple(tag.opening for tag in empty if tag.start <= first),
            tuple(tag.opening for tag in empty if tag.start >= last))


def translate(model_dir: Path, sources: list[str], source_lang: str, target_lang: str) -> list[dict]:
    from service.settings import Settings

    answers = []
    with in_process_service(Settings(model_dirs=[model_dir], device="cpu", inference_process=False,
                                     warmup=False)) as client:
        for start in range(0, len(sources), 32):
            response = client.post("/translate", json={"text": sources[start:start + 32], "source": source_lang,
                                                       "target": target_lang, "format": "html", "beam_size": 5})
            response.raise_for_status()
            answers += [nbest[0] for nbest in response.json()["translations"]]
    return answers


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", type=Path, default=REPO / "data" / "debian_catalogs" / "valid")
    parser.add_argument("--pair", choices=("en-de", "de-en"), default="en-de")
    parser.add_argument("--model-dir", type=Path, default=None, help="default: models/PAIR-software")
    parser.add_argument("--results", type=Path, default=REPO / "results" / "markup_catalogs.md")
    parser.add_argument("--tag", action="append", default=[],
                        help="only messages with a tag of this name (repeatable: any of them)")
    parser.add_argument("--limit", type=int, default=None, help="the first this many messages chosen")
    parser.add_argument("--passed-through", action="store_true",
                        help="messages with an inline element passed through untouched (<code>) instead")
    parser.add_argument("--attributes", action="store_true",
                        help="messages with an attribute value to translate (title, alt, ...) instead")
    parser.add_argument("--edges", action="store_true",
                        help="only messages with an empty element (<br/>) at an edge of the text")
    args = parser.parse_args()
    import sacrebleu
    import torch

    import service.translator as translator

    torch.set_num_threads(1)
    source_lang, target_lang = args.pair.split("-")
    args.model_dir = args.model_dir or REPO / "models" / f"{args.pair}-software"
    messages = markup_messages(args.split, source_lang, target_lang, frozenset(t.lower() for t in args.tag), args.limit,
                               args.passed_through, args.attributes, args.edges)
    sources, references = [s for s, _ in messages], [r for _, r in messages]
    served, tags_out = translator.tried_as_written, translator.tried_tags_out
    ways = {}
    started = time.perf_counter()
    for way in ("as the service serves it", "markup always taken out"):
        if way == "markup always taken out":
            translator.tried_as_written = lambda prepared: prepared.fmt == "text" and served(prepared)
            translator.tried_tags_out = lambda prepared: False
        try:
            ways[way] = translate(args.model_dir, sources, source_lang, target_lang)
        finally:
            translator.tried_as_written, translator.tried_tags_out = served, tags_out
    seconds = time.perf_counter() - started

    wanted = [tags_and_placeholders(s) for s in sources]
    with_placeholder = [any(k[0] == "placeholder" for k in parts) for parts in wanted]
    subsets = {"all": [True] * len(sources), "with a placeholder": with_placeholder,
               "tags only": [not p for p in with_placeholder]}
    rows = []
    for name, member in subsets.items():
        for way, answers in ways.items():
            chosen = [k for k in range(len(sources)) if member[k]]
            if not chosen:
                continue
            outputs = [answers[k]["text"] for k in chosen]
            refs = [[references[k] for k in chosen]]
            as_written = sum(any(p["placement"] == "model" for p in answers[k].get("protected", [])) for k in chosen)
            exact = sum(tags_and_placeholders(answers[k]["text"]) == wanted[k] for k in chosen)
            nested = sum(nesting(answers[k]["text"]) == nesting(sources[k]) for k in chosen)
            edged = [k for k in chosen if edge_space(sources[k]) != ("", "")]
            edges = sum(edge_space(answers[k]["text"]) == edge_space(sources[k]) for k in edged)
            bleu = sacrebleu.corpus_bleu(outputs, refs).score
            chrf = sacrebleu.corpus_chrf(outputs, refs).score
            rows.append(f"| {name} ({len(chosen)}) | {way} | {bleu:.2f} / {chrf:.2f} | {as_written} | {exact}/{len(chosen)} | {nested}/{len(chosen)} | {edges}/{len(edged)} |")
    if args.attributes:
        # A value whose reference is the value as sent (a translator who kept a tooltip English) is
        # scored apart: there keeping it is right whatever the translation.
        for kept in (False, True):
            for way, answers in ways.items():
                pairs = [(out, ref) for k in range(len(sources))
                           for ins, outs, refs in [(values(sources[k]), values(answers[k]["text"]), values(references[k]))]
                           if len(ins) == len(outs) == len(refs) for sent, out, ref in zip(ins, outs, refs)
                           if (ref == sent) == kept]
                if not pairs:
                    continue
                bleu = sacrebleu.corpus_bleu([o for o, _ in pairs], [[r for _, r in pairs]]).score
                chrf = sacrebleu.corpus_chrf([o for o, _ in pairs], [[r for _, r in pairs]]).score
                whose = "the reference keeps as sent" if kept else "the reference translates"
                rows.append(f"| attribute values {whose} ({len(pairs)}) | {way} | {bleu:.2f} / {chrf:.2f} | | | | |")
    kept_at_edges = ""
    if args.edges:
        kept_at_edges = "Empty elements at the edges of the text as the source has them: " + "; ".join(
            f"{way}, {sum(edge_elements(a['text']) == edge_elements(s) for s, a in zip(sources, answers))}/{len(sources)}"
            for way, answers in ways.items()) + ".\n\n"
    split = args.split.relative_to(REPO) if args.split.is_relative_to(REPO) else args.split
    changed = [(s, a["text"], b["text"]) for s, a, b in zip(sources, *ways.values()) if a["text"] != b["text"]]
    report = (
        run_heading() +
        f"    python benchmarks/markup_catalogs.py --split {split}" + (f" --pair {args.pair}" if args.pair != "en-de" else "")
        + "".join(f" --tag {t}" for t in args.tag) + (f" --limit {args.limit}" if args.limit else "")
        + (" --passed-through" if args.passed_through else "") + (" --attributes" if args.attributes else "")
        + (" --edges" if args.edges else "") + "\n\n"
        f"Model {args.model_dir.name}, format html, beam 5: {len(sources)} messages with tags "
        f"({sum(with_placeholder)} with a placeholder too); {seconds:.0f} s for both ways.\n\n"
        "| messages | way | BLEU / chrF2 | served as the model wrote it | tags and placeholders exactly as in the source "
        "| tags nested as in the source | whitespace at the edges as in the source (of those with some) |\n"
        "|---|---|---:|---:|---:|---:|---:|\n" + "\n".join(rows) + "\n\n" + kept_at_edges +
        f"{len(changed)} outputs differ between the two ways; the first 8 (source / as served / taken out):\n\n"
        + "".join(f"- `{s}`<br>`{a}`<br>`{b}`\n" for s, a, b in changed[:8])
    )
    print(report)
    append_report(args.results, "Inline markup in UI messages: sent as written, or taken out and put back",
                  "python benchmarks/markup_catalogs.py", report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
