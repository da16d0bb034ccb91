"""Closed-loop load benchmark of the translation service (a script, not a test).

N concurrent clients each send one request, wait for its answer, and send the next, for a fixed
time per level (after a warm-up that is not counted). Reported per level: requests, segments/s,
generated tokens/s (read from the server's own /metrics counter before and after), latency
p50/p95/p99, errors by status, the server process's CPU time per request (Linux, --serve or
--server-pid) and how busy the load generator was.

The clients run in --client-processes processes (default: a quarter of the cores): one Python
process's event loop and HTTP client spend about as much CPU time on a request as the server does
(~1 ms each on the 2-core dev machine), so a lone load generator could not show a server faster
than itself; the "load generator" column says when the busiest process neared a core.

Two ways to run it:

  # Against a server you started (e.g. `make serve`): one configuration, labelled by you.
  python benchmarks/load.py --url http://127.0.0.1:8000 --label "batching on"

  # Let the script start the server itself on 127.0.0.1 and a free port, once with dynamic
  # batching on (the defaults) and once off (PHRASAL_MAX_BATCH_SENTENCES=1, PHRASAL_MAX_WAIT_MS=0):
  python benchmarks/load.py --serve --device cpu --clients 1,8,32 --duration 10

  # The serving stack alone: no model, a fake runtime that sleeps per batch as long as a real
  # one takes for that batch size (here the H100 decode times of results/decode_cuda.md), so
  # that the batcher's gain can be measured on any machine; results/load_simulated.md.
  python benchmarks/load.py --serve --simulate-latency 1:71.4,8:110.4,64:150.7 --clients 1,8,32,64,128

Results go to results/load_<device>.md (a section per run, appended; load_simulated.md with
--simulate-latency) naming the machine and the command. Only loopback addresses are accepted unless --allow-remote is given; every level is
bounded in time (--duration) and in requests (--max-requests).
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import gzip
import ipaddress
import json
import math
import multiprocessing
import os
import platform
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import urlsplit

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run as a script from anywhere
from benchmarks.host import cpu_name  # noqa: E402
from benchmarks.simulated_latency import BatchLatency  # noqa: E402
SENTENCES = REPO / "data" / "multi30k" / "test_2016_flickr.en.gz"
BATCHING_OFF = {"PHRASAL_MAX_BATCH_SENTENCES": "1", "PHRASAL_MAX_WAIT_MS": "0"}
LABEL = "as configured"


@dataclass
class Level:
    batching: str
    clients: int
    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)
    requests: int = 0  # answered 200 inside the window
    segments: int = 0
    tokens: float = 0.0
    errors: dict[str, int] = field(default_factory=dict)
    processes: int = 1  # load-generator processes
    client_busy: float = 0.0  # the busiest load-generator process's CPU time / the window
    server_cpu_seconds: float | None = None  # the server process's CPU time in the window (its children's not)

    def percentile(self, q: float) -> float:
        if not self.latencies:
            return math.nan
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def is_loopback(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def load_sentences(limit: int) -> list[str]:
    with gzip.open(SENTENCES, "rt", encoding="utf-8") as handle:
        return [line.strip() for _, line in zip(range(limit), handle) if line.strip()]


async def generated_tokens(client, base: str) -> float:
    """The server's phrasal_generated_tokens_total, summed over pairs (0 if not exported)."""
    response = await client.get(f"{base}/metrics")
    total = 0.0
    for line in response.text.splitlines():
        if line.startswith("phrasal_generated_tokens_total"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def process_cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a process (Linux /proc), or None where it cannot be read."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def shares(clients: int, processes: int) -> list[int]:
    """Clients per load-generator process, as even as can be, none empty."""
    processes = max(1, min(processes, clients))
    return [clients // processes + (i < clients % processes) for i in range(processes)]


@dataclass
class Window:
    """One level's measured window on the wall clock every process reads alike."""

    opens: float
    closes: float


async def drive(base: str, clients: int, budget: int, first: int, window: Window, args,
                sentences: list[str]) -> dict:
    """`clients` closed-loop clients in this process until the window closes (or `budget` requests
    are sent); what was answered inside the window, and this process's CPU time over it."""
    import httpx

    headers = {"X-API-Key": args.api_key} if args.api_key else {}
    out = {"requests": 0, "segments": 0, "latencies": [], "errors": {}, "cpu_seconds": 0.0, "ended": 0.0}
    budget_left = [budget]
    next_sentence = [first]
    # One connection pool per client: httpcore scans every connection of a pool on each request,
    # so one shared pool of 64 connections kept this script's core busy at ~60 requests/s and
    # made it, not the server, the bottleneck.
    # And one TLS context for them all: httpx builds one per client otherwise (its CA bundle read
    # each time, ~27 ms on the dev machine), which for 256 clients held this process's event loop
    # ~7 s, past the warm-up, while the answers to the first requests waited unread (p99 2.3 s).
    tls = httpx.create_ssl_context()
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    async with contextlib.AsyncExitStack() as stack:
        pools = [await stack.enter_async_context(httpx.AsyncClient(timeout=args.timeout, limits=limits, headers=headers,
                                                                   verify=tls))
                 for _ in range(clients)]

        async def one_client(client) -> None:
            while budget_left[0] > 0 and time.time() < window.closes:
                budget_left[0] -= 1
                k = next_sentence[0]
                next_sentence[0] += args.texts_per_request
                texts = [sentences[(k + j) % len(sentences)] for j in range(args.texts_per_request)]
                body = {"text": texts if args.texts_per_request > 1 else texts[0], "source": args.source,
                        "target": args.target}
                if args.beam_size:
                    body["beam_size"] = args.beam_size
                started = time.time()
                try:
                    response = await client.post(f"{base}/translate", json=body)
                    status = str(response.status_code)
                except httpx.HTTPError as exc:
                    status = type(exc).__name__
                answered = time.time()
                # Throughput counts what is answered inside the window; latency only requests that
                # also started inside it: one sent during the warm-up (behind the new connections'
                # SYN retries, say) would add its warm-up wait to the measured tail.
                if not window.opens <= answered <= window.closes:
                    continue
                if status == "200":
                    if started >= window.opens:
                        out["latencies"].append(answered - started)
                    out["requests"] += 1
                    out["segments"] += len(texts)
                else:
                    out["errors"][status] = out["errors"].get(status, 0) + 1

        async def cpu_over_window() -> None:  # ends with the window, or with the clients if they end first
            await asyncio.sleep(max(0.0, window.opens - time.time()))
            before = time.process_time()
            while time.time() < window.closes and not out["ended"]:
                await asyncio.sleep(min(0.05, max(0.0, window.closes - time.time())))
            out["cpu_seconds"] = time.process_time() - before

        watch = asyncio.ensure_future(cpu_over_window())

        await asyncio.gather(*(one_client(client) for client in pools))
        out["ended"] = time.time()  # the window's close (and the answers still out), or the budget's end
        await watch
    return out


def drive_process(base: str, clients: int, budget: int, first: int, window: Window, args,
                  sentences: list[str]) -> dict:
    """A load-generator process's share of a level (run in a worker process)."""
    return asyncio.run(drive(base, clients, budget, first, window, args, sentences))


async def run_level(base: str, level: Level, args, sentences: list[str], pool, server_pid: int | None = None) -> None:
    """One level: its clients spread over the pool's processes (one Python process's event loop
    and HTTP client, ~1 ms of CPU a request, would otherwise bound what a fast server can be
    shown to serve), a window on the wall clock they all read, the server's token counter and
    CPU time read at its edges. A level whose request budget runs out early is timed until then."""
    import httpx

    headers = {"X-API-Key": args.api_key} if args.api_key else {}
    parts = shares(level.clients, args.client_processes)
    # The window opens after the warm-up, counted from when every process can have started.
    opens = time.time() + 1.0 + args.warmup
    window = Window(opens, opens + args.duration)
    loop = asyncio.get_running_loop()
    budgets = [max(1, args.max_requests * n // level.clients) for n in parts]
    firsts = [sum(parts[:i]) * 7919 for i in range(len(parts))]  # each process starts elsewhere in the test set
    futures = [loop.run_in_executor(pool, drive_process, base, n, b, f, window, args, sentences)
               for n, b, f in zip(parts, budgets, firsts)]
    async with httpx.AsyncClient(timeout=args.timeout, headers=headers) as client:
        await asyncio.sleep(max(0.0, window.opens - time.time()))
        tokens_before = await generated_tokens(client, base)
        server_before = process_cpu_seconds(server_pid) if server_pid else None
        await asyncio.sleep(max(0.0, window.closes - time.time()))
        tokens_after = await generated_tokens(client, base)
        server_after = process_cpu_seconds(server_pid) if server_pid else None
    results = await asyncio.gather(*futures)  # each process finishes the requests it has out
    ended = min(window.closes, max(result["ended"] for result in results))
    level.seconds = max(ended - window.opens, 1e-3)
    level.tokens = tokens_after - tokens_before
    if server_before is not None and server_after is not None:
        level.server_cpu_seconds = server_after - server_before
    level.processes = len(parts)
    for result in results:
        level.requests += result["requests"]
        level.segments += result["segments"]
        level.latencies += result["latencies"]
        for status, count in result["errors"].items():
            level.errors[status] = level.errors.get(status, 0) + count
        level.client_busy = max(level.client_busy, result["cpu_seconds"]
                                 / max(min(result["ended"], window.closes) - window.opens, 1e-3))


class SpawnedServer:
    """``python -m service`` on 127.0.0.1 and a free port, with extra PHRASAL_* settings; with
    --simulate-latency, benchmarks/simulated_server.py (the same server, a simulated runtime)."""

    def __init__(self, args, extra_env: dict[str, str]) -> None:
        from testing.live_server import free_port  # here: the load generator's processes need no server stack

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = dict(os.environ)
        env.update({"PHRASAL_MODEL_DIRS": json.dumps([args.model_dir]), "PHRASAL_DEVICE": args.device})
        command = [sys.executable, "-m", "service"]
        if args.simulate_latency:
            simulated = REPO / "benchmarks" / "simulated_server.py"
            command = [sys.executable, str(simulated), "--latency", args.simulate_latency_text]
        env.update(dict(item.split("=", 1) for item in args.server_env))
        env.update(extra_env)
        # The server's own log, kept only when it fails: then its last lines say why.
        self.log = tempfile.NamedTemporaryFile("w+", prefix=f"load_server_{self.port}_", suffix=".log", delete=False)
        self.process = subprocess.Popen(
            [*command, "--host", "127.0.0.1", "--port", str(self.port), "--log-level", "warning"],
            cwd=REPO, env=env, stdout=self.log, stderr=subprocess.STDOUT,
        )

    async def wait_ready(self, timeout: float = 300) -> None:
        import httpx

        deadline = time.monotonic() + timeout
        async with httpx.AsyncClient(timeout=2) as client:
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    raise SystemExit(f"error: the server exited with code {self.process.returncode}; "
                                     f"{self.log_tail()}")
                try:
                    response = await client.get(f"{self.url}/health/ready")
                    if response.status_code == 200:
                        return
                    if response.json().get("phase") == "failed":
                        raise SystemExit(f"error: the server could not load: {response.json().get('reason')}")
                except httpx.HTTPError:
                    pass
                await asyncio.sleep(0.2)
        raise SystemExit("error: the server was not ready in time")

    def log_tail(self) -> str:
        self.log.flush()
        lines = Path(self.log.name).read_text(errors="replace").strip().splitlines()
        return f"its log ({self.log.name}) ends: {lines[-1]}" if lines else f"its log ({self.log.name}) is empty"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()
        if self.process.returncode in (0, -signal.SIGTERM):
            os.unlink(self.log.name)


def machine(device: str) -> str:
    cpu = cpu_name()
    parts = [f"{cpu}, {os.cpu_count()} logical cores", f"Python {platform.python_version()}"]
    try:
        import torch

        parts.append(f"torch {torch.__version__} (default intra-op threads here: {torch.get_num_threads()})")
        if device.startswith("cuda") and torch.cuda.is_available():
            parts.append(f"GPU {torch.cuda.get_device_name(0)}")
    except ImportError:
        pass
    return "; ".join(parts)


def markdown(levels: list[Level], args, argv: list[str]) -> str:
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        f"## Load: {args.texts_per_request} text(s) per request, device {args.device} ({when})",
        "",
        f"Machine: {machine(args.device)}.  ",
        *([f"Configuration: {args.label}.  "] if args.serve and args.label != LABEL else []),
        *([f"Runtime: simulated, no model: the fake runtime sleeps per batch as long as the curve "
           f"{args.simulate_latency_text} (batch size:ms) says, holding no GIL; what is measured is the serving stack.  "]
          if args.simulate_latency else []),
        f"Command: `{shlex.join(['python', 'benchmarks/load.py', *argv])}`  ",
        f"Closed loop: each client sends its next request when the previous one is answered; "
        f"{args.warmup:g} s warm-up, then {args.duration:g} s measured per level (at most {args.max_requests} requests). "
        "Requests and segments/s: answers inside the window; latency percentiles: requests sent and answered inside it. "
        "Tokens/s: the server's generated-token counter (best hypothesis) over the measured window. "
        "Server CPU: the server process's CPU time (every thread: HTTP, the request path, batching; "
        "not a model's inference process) over the window, per answered request. "
        "Load generator: its processes, and the busiest one's CPU time over the window "
        "(near 100 % it, not the server, may bound the level).",
        "",
        "| batching | clients | requests | segments/s | tokens/s | p50 ms | p95 ms | p99 ms | errors "
        "| server CPU ms/request | load generator |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---|",
    ]
    for level in levels:
        errors = ", ".join(f"{k}: {v}" for k, v in sorted(level.errors.items())) or "0"
        server_cpu = ("–" if level.server_cpu_seconds is None or not level.requests
                      else f"{1000 * level.server_cpu_seconds / level.requests:.2f}")
        lines.append(
            f"| {level.batching} | {level.clients} | {level.requests} | {level.segments / level.seconds:.1f} | "
            f"{level.tokens / level.seconds:.0f} | {1000 * level.percentile(0.5):.0f} | "
            f"{1000 * level.percentile(0.95):.0f} | {1000 * level.percentile(0.99):.0f} | {errors} | "
            f"{server_cpu} | {level.processes} process(es), busiest {100 * level.client_busy:.0f} % |"
        )
    by = {(level.batching, level.clients): level for level in levels}
    ratios = [
        f"{c} clients: {by['on', c].segments / max(by['off', c].segments, 1):.1f}x"
        for c in args.clients if ("on", c) in by and ("off", c) in by
    ]
    if ratios:
        lines += ["", "Throughput, batching on / off: " + ", ".join(ratios) + "."]
    return "\n".join(lines) + "\n"


async def main_async(args, argv: list[str]) -> list[Level]:
    sentences = load_sentences(1000)
    levels: list[Level] = []
    # Spawned, not forked: a forked child would inherit this process's running event loop.
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(args.client_processes, mp_context=context) as pool:
        if args.serve:
            configs = [("on", {}), ("off", BATCHING_OFF)]
            if args.batching != "both":
                configs = [c for c in configs if c[0] == args.batching]
            # Both servers at once, levels alternating between them: on a machine whose load drifts,
            # each on/off pair is measured minutes apart at most (an idle server costs nothing).
            servers = {label: SpawnedServer(args, env) for label, env in configs}
            try:
                for server in servers.values():
                    await server.wait_ready()
                for clients in args.clients:
                    for label, server in servers.items():
                        level = Level(label, clients)
                        await run_level(server.url, level, args, sentences, pool, server.process.pid)
                        levels.append(level)
                        print(f"batching {label:3s} clients {clients:4d}: {level.requests} requests, "
                              f"{level.segments / level.seconds:.1f} segments/s, p99 {1000 * level.percentile(0.99):.0f} ms",
                              file=sys.stderr)
            finally:
                for server in servers.values():
                    server.stop()
            levels.sort(key=lambda level: [label for label, _ in configs].index(level.batching))
        else:
            for clients in args.clients:
                level = Level(args.label, clients)
                await run_level(args.url.rstrip("/"), level, args, sentences, pool, args.server_pid)
                levels.append(level)
    return levels


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--url", help="a running server, e.g. http://127.0.0.1:8000")
    target.add_argument("--serve", action="store_true", help="start the server here, batching on and off")
    parser.add_argument("--label", default=LABEL, help="what to call this configuration (--serve: a line above the table)")
    parser.add_argument("--batching", choices=["on", "off", "both"], default="both", help="--serve: which runs")
    parser.add_argument("--model-dir", default="models/en-de", help="--serve: the model directory")
    parser.add_argument("--device", default="cpu", help="--serve: PHRASAL_DEVICE; names the results file")
    parser.add_argument(
        "--server-env", action="append", default=[], metavar="NAME=VALUE",
        help="--serve: extra environment for the server, e.g. OMP_NUM_THREADS=1 (repeatable)",
    )
    parser.add_argument(
        "--simulate-latency", metavar="SIZE:MS,...", default=None,
        help="--serve: no model; a fake runtime whose batches take this long by batch size, e.g. 1:71.4,8:110.4,64:150.7",
    )
    parser.add_argument("--clients", default="1,8,32,128", help="comma-separated client counts")
    parser.add_argument("--duration", type=float, default=10.0, help="measured seconds per level")
    parser.add_argument("--warmup", type=float, default=2.0, help="unmeasured seconds before each level")
    parser.add_argument("--max-requests", type=int, default=20000, help="request bound per level")
    parser.add_argument("--texts-per-request", type=int, default=1)
    parser.add_argument("--beam-size", type=int, default=None, help="default: the server's")
    parser.add_argument("--source", default="en")
    parser.add_argument("--target", default="de")
    parser.add_argument("--api-key", default=os.environ.get("PHRASAL_BENCH_API_KEY"))
    parser.add_argument("--timeout", type=float, default=120.0, help="per request, seconds")
    parser.add_argument("--out", default=None, help="default: results/load_<device>.md")
    parser.add_argument("--allow-remote", action="store_true", help="permit a non-loopback --url")
    parser.add_argument(
        "--client-processes", type=int, default=max(1, (os.cpu_count() or 1) // 4),
        help="load-generator processes the clients are spread over (default: a quarter of the cores, at least 1)",
    )
    parser.add_argument("--server-pid", type=int, default=None,
                        help="--url: the server's process id, for its CPU time per request (Linux)")
    args = parser.parse_args(argv)
    try:
        args.clients = [int(c) for c in args.clients.split(",") if c.strip()]
    except ValueError:
        parser.error("--clients: comma-separated integers, e.g. 1,8,32")
    if not args.clients or min(args.clients) < 1:
        parser.error("--clients: at least one count, each >= 1")
    if args.duration <= 0 or args.duration > 600 or args.warmup < 0:
        parser.error("--duration: 0 < seconds <= 600; --warmup >= 0")
    if args.client_processes < 1:
        parser.error("--client-processes: at least 1")
    if any("=" not in item for item in args.server_env):
        parser.error("--server-env: NAME=VALUE")
    args.simulate_latency_text = args.simulate_latency
    if args.simulate_latency is not None:
        if not args.serve:
            parser.error("--simulate-latency: only with --serve")
        try:
            args.simulate_latency = BatchLatency.parse(args.simulate_latency)
        except ValueError as exc:
            parser.error(f"--simulate-latency: {exc}")
    if args.url and not args.allow_remote and not is_loopback(args.url):
        parser.error(f"--url {args.url}: only loopback addresses unless --allow-remote")
    return args


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    import httpx

    try:
        levels = asyncio.run(main_async(args, argv))
    except httpx.HTTPError as exc:  # the server went away, or --url names none
        print(f"error: {args.url or 'the spawned server'}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    section = markdown(levels, args, argv)
    default_name = "load_simulated.md" if args.simulate_latency else f"load_{args.device.replace(':', '')}.md"
    out = Path(args.out) if args.out else REPO / "results" / default_name
    out.parent.mkdir(parents=True, exist_ok=True)
    new = not out.exists()
    with out.open("a", encoding="utf-8") as handle:
        if new:
            handle.write("# Load benchmark (benchmarks/load.py)\n\n")
        handle.write(section + "\n")
    print(section)
    print(f"appended to {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
