"""``python -m testing.fake_server [--delay-s S] --host H --port P``: the real server
(``python -m service``: its settings, uvicorn and draining shutdown) serving the test fake runtime
(testing/fake_runtime.py) instead of model directories, so that tests can run a real server
process without a model. Each batch sleeps ``--delay-s`` seconds; the pair of each
``PHRASAL_MODEL_DIRS`` entry is read from its name."""

from __future__ import annotations

import argparse
import sys
from functools import partial

from service.__main__ import main as serve_main
from testing.fake_runtime import fake_runtimes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m testing.fake_server", add_help=False)
    parser.add_argument("--delay-s", type=float, default=0.0, help="seconds per batch (0 to 60)")
    args, rest = parser.parse_known_args(argv)
    if not 0 <= args.delay_s <= 60:
        parser.error("--delay-s: 0 to 60 seconds")
    return serve_main(rest, runtime_factory=partial(fake_runtimes, delay_s=args.delay_s))


if __name__ == "__main__":
    sys.exit(main())
