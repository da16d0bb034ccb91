"""Score the word alignments a running service returns (`POST /align`) against gold alignments.

    python -m training.service_align_eval --url http://127.0.0.1:8000 --source en --target de \
        --src data/gold_align_deen_dev/test.en --tgt data/gold_align_deen_dev/test.de \
        --gold data/gold_align_deen_dev/de-en.wa --gold-reverse [--method bidirectional] [--json]

The same gold formats and scores as `training.align_eval`, which reads the models directly: this
one checks what users get, through HTTP, with the server's own defaults when no method is named.
Words are whitespace tokens; the service's words must be the same (it splits at whitespace too),
and a pair where they are not is an error rather than a silently shifted score.
"""
from __future__ import annotations

import argparse
import json
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Sequence

from training import alignment_metrics as am
from training.align_eval import score_lines
from training.usage import OneLineParser, UsageError

PROG = "phrasal-service-align-eval"
METHODS = ("attention", "shift", "supervised", "bidirectional")


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog=PROG, description="Score a running service's /align alignments against gold alignments.")
    p.add_argument("--url", required=True, help="the service, e.g. http://127.0.0.1:8000")
    p.add_argument("--source", required=True, help='source language code, e.g. "en"')
    p.add_argument("--target", required=True, help='target language code, e.g. "de"')
    p.add_argument("--src", type=Path, required=True, help="source sentences, one a line, words = whitespace tokens")
    p.add_argument("--tgt", type=Path, required=True, help="their translations, one a line")
    p.add_argument("--gold", type=Path, required=True, help="gold word alignments (as training.align_eval reads them)")
    p.add_argument("--gold-format", choices=("auto", *am.FORMATS), default="auto")
    p.add_argument("--gold-base", type=int, choices=(0, 1))
    p.add_argument("--gold-reverse", action="store_true", help="the gold file writes target-source links")
    p.add_argument("--method", choices=METHODS, help="alignment_method to ask for; omitted: the server's default")
    p.add_argument("--model", help='the model to ask for ("auto": the one the texts choose); omitted: the pair\'s default')
    p.add_argument("--batch-size", type=int, default=32, help="pairs a request")
    p.add_argument("--api-key", help="sent as X-API-Key when the service has keys on")
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    return p


def post_align(url: str, body: dict[str, Any], api_key: str | None) -> dict[str, Any]:
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["X-API-Key"] = api_key
    request = urllib.request.Request(url.rstrip("/") + "/align", data=json.dumps(body).encode(), headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=300) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as error:
        try:
            message = json.loads(error.read()).get("message", "")
        except ValueError:
            message = ""
        raise UsageError(f"{url}/align answered {error.code}: {message or error.reason}") from None
    except urllib.error.URLError as error:
        raise UsageError(f"cannot reach {url}: {error.reason}") from None


def run(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.batch_size < 1:
        raise UsageError("--batch-size must be >= 1")
    from training.data import read_lines

    src, tgt = read_lines(args.src), read_lines(args.tgt)
    if len(src) != len(tgt):
        raise UsageError(f"--src has {len(src)} lines but --tgt has {len(tgt)}")
    gold, gold_format, gold_base = am.read_gold(read_lines(args.gold), len(src), args.gold_format, args.gold_base,
                                                args.gold_reverse, str(args.gold))
    am.check_bounds(gold, [len(s.split()) for s in src], [len(t.split()) for t in tgt], gold_base, str(args.gold))
    links: list[set[am.Link]] = []
    methods: set[str] = set()
    models: set[str] = set()
    for start in range(0, len(src), args.batch_size):
        body: dict[str, Any] = {"text": src[start : start + args.batch_size],
                                "translation": tgt[start : start + args.batch_size],
                                "source": args.source, "target": args.target}
        if args.method:
            body["alignment_method"] = args.method
        if args.model:
            body["model"] = args.model
        answer = post_align(args.url, body, args.api_key)
        methods.add(answer["alignment_method"])
        models.add(answer["model"])
        for k, alignment in enumerate(answer["alignments"], start=start):
            for side, words, line in (("source", alignment["source_words"], src[k]),
                                      ("target", alignment["target_words"], tgt[k])):
                if [w["text"] for w in words] != line.split():
                    raise UsageError(f"pair {k + 1}: the service split the {side} into other words than its "
                                     f"whitespace tokens ({len(words)} against {len(line.split())})")
            links.append(am.parse_links(alignment["pharaoh"], f"the service's pair {k + 1}"))
    method = ", ".join(sorted(methods))
    report = {"url": args.url, "pair": f"{args.source}-{args.target}", "alignment_method": method,
              "models": sorted(models),
              "sentences": len(src), "gold": {"path": str(args.gold), "format": gold_format, "base": gold_base,
                                              "reverse": args.gold_reverse},
              "results": {method: am.score(links, gold).to_dict()}}
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print("\n".join([f"{args.url} /align {report['pair']}: {len(src)} pairs, gold {args.gold}, "
                         f"model {', '.join(report['models'])}",
                         *score_lines(report["results"])]))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return run(argv)
    except (UsageError, am.AlignmentInputError, OSError, UnicodeDecodeError) as error:
        print(f"{PROG}: error: {' '.join(str(error).split())}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
