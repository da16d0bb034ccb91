"""CPU time of the service's request path a text, without sockets and without a model, one
thread, over the fake runtime (testing/fake_runtime.py), at two depths: the translator
(`service.translator.Translator.translate`: reading the text for placeholders, markup and terms,
cutting it, batching, putting the placeholders back), and the whole app called as ASGI (`POST
/translate` through the middleware, FastAPI's routing and validation, the translator, the JSON answer;
what uvicorn adds, parsing HTTP and writing to the socket, is left out). A script, not a test.

    OMP_NUM_THREADS=1 python benchmarks/request_path.py             # appends to results/request_path_cpu.md
    OMP_NUM_THREADS=1 python benchmarks/request_path.py --profile   # and the top functions by cProfile

The texts: test_2016_flickr's English captions and the software test split's English UI messages
(data/debian_catalogs, placeholders and markup in many). Each set is run --rounds times (after a
warm-up of 100 requests); reported: microseconds of this process's CPU time a text, each round's, for
requests of one text (--texts-per-request: more, the costs a request has once shared by its texts).
The server as it runs, sockets and uvicorn included, is measured by `benchmarks/load.py` (its server
CPU column).
"""
from __future__ import annotations

import argparse
import asyncio
import cProfile
import gzip
import io
import pstats
import json
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run as a script from anywhere
from benchmarks.host import append_report, cpu_name  # noqa: E402
from service.app import create_app  # noqa: E402
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


def requests_of(texts: list[str], requests: int, per: int) -> list[list[str]]:
    """`requests` requests of `per` texts each, cycling through `texts`."""
    return [[texts[(i * per + j) % len(texts)] for j in range(per)] for i in range(requests)]


async def cpu_per_request(texts: list[str], requests: int, per: int = 1, profile: cProfile.Profile | None = None) -> float:
    """Microseconds of CPU time a text, over `requests` requests of `per` texts cycling through `texts`."""
    translator = Translator([FakeRuntime("en", "de", max_source_pieces=512)], Settings(max_wait_ms=0.0))
    translator.start()
    try:
        for text in texts[:100]:
            await translator.translate([text], "en", "de")
        if profile is not None:
            profile.enable()
        started = time.process_time()
        for request in requests_of(texts, requests, per):
            await translator.translate(request, "en", "de")
        spent = time.process_time() - started
        if profile is not None:
            profile.disable()
        return 1e6 * spent / (requests * per)
    finally:
        await translator.stop()


async def app_cpu_per_request(texts: list[str], requests: int, per: int = 1,
                              profile: cProfile.Profile | None = None) -> float:
    """The same through the app's ASGI interface: each request a scope, its body, and a receive that,
    once the body is read, waits as a connection with nothing more to say does."""
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(max_wait_ms=0.0, glossary_db=Path(tmp) / "glossaries.sqlite3",
                            document_db=Path(tmp) / "documents.sqlite3")
        app = create_app(settings, runtime_factory=lambda s: [FakeRuntime("en", "de", max_source_pieces=512)])

        async def post(request: list[str]) -> int:
            body = json.dumps({"text": request if per > 1 else request[0], "source": "en", "target": "de"}).encode()
            scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
                     "scheme": "http", "path": "/translate", "raw_path": b"/translate", "root_path": "",
                     "query_string": b"", "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8000),
                     "headers": [(b"host", b"127.0.0.1:8000"), (b"content-type", b"application/json"),
                                 (b"content-length", str(len(body)).encode())]}
            sent = [False]
            idle = asyncio.get_running_loop().create_future()
            status = [0]

            async def receive() -> dict:
                if not sent[0]:
                    sent[0] = True
                    return {"type": "http.request", "body": body, "more_body": False}
                await idle  # cancelled with the watcher once the answer is out
                return {"type": "http.disconnect"}

            async def send(message: dict) -> None:
                if message["type"] == "http.response.start":
                    status[0] = message["status"]

            await app(scope, receive, send)
            return status[0]

        async with app.router.lifespan_context(app):
            await app.state.lifecycle.wait_loaded()
            for text in texts[:100]:
                if (answered := await post([text] * per)) != 200:
                    raise SystemExit(f"error: POST /translate answered {answered} for {text!r}")
            if profile is not None:
                profile.enable()
            started = time.process_time()
            for request in requests_of(texts, requests, per):
                await post(request)
            spent = time.process_time() - started
            if profile is not None:
                profile.disable()
    return 1e6 * spent / (requests * per)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000, help="timed requests a round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--texts-per-request", type=int, default=1)
    parser.add_argument("--profile", action="store_true", help="print the top functions of one more round per set")
    parser.add_argument("--out", type=Path, default=REPO / "results" / "request_path_cpu.md")
    args = parser.parse_args(argv)
    if args.requests < 1 or args.rounds < 1 or args.texts_per_request < 1:
        parser.error("--requests, --rounds and --texts-per-request: at least 1")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [f"## {when}, commit {commit or 'unknown'}", "",
             f"Machine: {cpu_name()}, Python {sys.version.split()[0]}. "
             f"Command: `python benchmarks/request_path.py {' '.join(argv if argv is not None else sys.argv[1:])}`".rstrip() + "",
             "", f"| texts | through | CPU µs a text, {args.texts_per_request} a request (each round) |", "|---|---|---|"]
    depths = {"the translator": cpu_per_request, "the app (ASGI)": app_cpu_per_request}
    for name, path in SETS.items():
        texts = read(path, 1000)
        for depth, measure in depths.items():
            rounds = [asyncio.run(measure(texts, args.requests, args.texts_per_request)) for _ in range(args.rounds)]
            lines.append(f"| {name} | {depth} | {', '.join(f'{r:.0f}' for r in rounds)} |")
            if args.profile:
                profile = cProfile.Profile()
                asyncio.run(measure(texts, args.requests, args.texts_per_request, profile))
                report = io.StringIO()
                pstats.Stats(profile, stream=report).sort_stats("tottime").print_stats(30)
                print(f"--- {name} through {depth}: top functions by own time\n{report.getvalue()}")
    section = "\n".join(lines) + "\n"
    append_report(args.out, "The request path's CPU time", "python benchmarks/request_path.py", section)
    print(section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
