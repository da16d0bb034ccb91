"""CPU time of the service's request path for one-text requests, without HTTP and without a model: the
translator (`service.translator.Translator.translate`: reading the text for placeholders, markup and
terms, cutting it, batching, putting the placeholders back) over the fake runtime
(testing/fake_runtime.py), one thread. A script, not a test.

    OMP_NUM_THREADS=1 python benchmarks/request_path.py             # appends to results/request_path_cpu.md
    OMP_NUM_THREADS=1 python benchmarks/request_path.py --profile   # and the top functions by cProfile

The texts: test_2016_flickr's English captions and the software test split's English UI messages
(data/debian_catalogs, placeholders and markup in many). Each set is run --rounds times (after a
warm-up of 100 requests); reported: microseconds of this process's CPU time a request, each round's.
What HTTP, FastAPI and the middleware add is measured with the server in `benchmarks/load.py`
(its server CPU column).
"""
from __future__ import annotations

import argparse
import asyncio
import cProfile
import gzip
import io
import pstats
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run as a script from anywhere
from benchmarks.host import cpu_name  # noqa: E402
from service.settings import Settings  # noqa: E402
from service.translator import Translator  # noqa: E402
from testing.fake_runtime import FakeRuntime  # noqa: E402

SETS = {
    "test_2016_flickr captions": REPO / "data" / "multi30k" / "test_2016_flickr.en.gz",
    "software test split UI messages": REPO / "data" / "debian_catalogs" / "test.en.gz",
}


def read(path: Path, limit: int) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return [line.rstrip("\n") for _, line in zip(range(limit), handle) if line.strip()]


async def cpu_per_request(texts: list[str], requests: int, profile: cProfile.Profile | None = None) -> float:
    """Microseconds of CPU time a one-text request, over `requests` requests cycling through `texts`."""
    translator = Translator([FakeRuntime("en", "de", max_source_pieces=512)], Settings(max_wait_ms=0.0))
    translator.start()
    try:
        for text in texts[:100]:
            await translator.translate([text], "en", "de")
        if profile is not None:
            profile.enable()
        started = time.process_time()
        for i in range(requests):
            await translator.translate([texts[i % len(texts)]], "en", "de")
        spent = time.process_time() - started
        if profile is not None:
            profile.disable()
        return 1e6 * spent / requests
    finally:
        await translator.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000, help="timed requests a round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--profile", action="store_true", help="print the top functions of one more round per set")
    parser.add_argument("--out", type=Path, default=REPO / "results" / "request_path_cpu.md")
    args = parser.parse_args(argv)
    if args.requests < 1 or args.rounds < 1:
        parser.error("--requests and --rounds: at least 1")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [f"## {when}, commit {commit or 'unknown'}", "",
             f"Machine: {cpu_name()}, Python {sys.version.split()[0]}. "
             f"Command: `python benchmarks/request_path.py {' '.join(argv if argv is not None else sys.argv[1:])}`".rstrip() + "",
             "", "| texts | CPU µs a one-text request (each round) |", "|---|---|"]
    for name, path in SETS.items():
        texts = read(path, 1000)
        rounds = [asyncio.run(cpu_per_request(texts, args.requests)) for _ in range(args.rounds)]
        lines.append(f"| {name} | {', '.join(f'{r:.0f}' for r in rounds)} |")
        if args.profile:
            profile = cProfile.Profile()
            asyncio.run(cpu_per_request(texts, args.requests, profile))
            report = io.StringIO()
            pstats.Stats(profile, stream=report).sort_stats("cumulative").print_stats(25)
            print(f"--- {name}: top functions by cumulative time\n{report.getvalue()}")
    section = "\n".join(lines) + "\n"
    new = not args.out.exists()
    with args.out.open("a", encoding="utf-8") as handle:
        if new:
            handle.write("# The request path's CPU time (benchmarks/request_path.py)\n\n")
        handle.write(section + "\n")
    print(section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
