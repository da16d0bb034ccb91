"""``python benchmarks/simulated_server.py --latency 1:71.4,8:110.4,64:150.7 --host H --port P``:
the real server (``python -m service``: its settings, uvicorn, batcher) serving
``SimulatedRuntime`` (benchmarks/simulated_latency.py) instead of a model, one per
``PHRASAL_MODEL_DIRS`` entry with the pair read from the directory's name. benchmarks/load.py
--simulate-latency starts it."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run as a script from anywhere
from benchmarks.simulated_latency import BatchLatency, SimulatedRuntime  # noqa: E402
from service.__main__ import main as serve_main  # noqa: E402
from testing.fake_runtime import pair_of  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks/simulated_server.py", add_help=False)
    parser.add_argument("--latency", required=True, help="batch size:milliseconds, comma-separated")
    args, rest = parser.parse_known_args(argv)
    try:
        latency = BatchLatency.parse(args.latency)
    except ValueError as exc:
        parser.error(f"--latency: {exc}")

    def simulated(settings) -> list[SimulatedRuntime]:
        return [SimulatedRuntime(*pair_of(path), latency) for path in settings.model_dirs]

    return serve_main(rest, runtime_factory=simulated)


if __name__ == "__main__":
    sys.exit(main())
