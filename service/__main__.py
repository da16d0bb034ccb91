"""``python -m service --host 127.0.0.1 --port 8000``: serve the models named by PHRASAL_* settings.

SIGTERM (or Ctrl-C) drains: /health/ready turns 503 and new translations are refused, uvicorn
stops accepting connections and gives the requests in flight ``PHRASAL_DRAIN_TIMEOUT_S`` to
finish, the models are released, and the process exits 0.
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
from typing import TYPE_CHECKING

from pydantic import ValidationError
from pydantic_settings import SettingsError

if TYPE_CHECKING:
    from service.app import RuntimeFactory


def main(argv: list[str] | None = None, runtime_factory: RuntimeFactory | None = None) -> int:
    """``runtime_factory``: what ``create_app`` loads the runtimes with (default: the backend the
    settings name); test and benchmark servers inject theirs here."""
    parser = argparse.ArgumentParser(prog="python -m service", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port to bind (default 8000)")
    parser.add_argument(
        "--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"]
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    # Imported after argument parsing so that --help is instant.
    from service.app import create_app
    from service.server import serve
    from service.settings import Settings

    try:
        settings = Settings()
    except ValidationError as exc:
        problems = "; ".join(
            f"PHRASAL_{str(err['loc'][0]).upper()}: {err['msg']}" if err["loc"] else err["msg"]
            for err in exc.errors()
        )
        print(f"error: invalid settings: {problems}", file=sys.stderr)
        return 2
    except SettingsError as exc:  # a list or mapping setting whose value is not JSON
        field = re.search(r'field "(\w+)"', str(exc))
        name = f"PHRASAL_{field[1].upper()}" if field else "a PHRASAL_ variable"
        print(f"error: invalid settings: {name}: not JSON (a list is written '[\"a\", \"b\"]', a mapping "
              f"'{{\"key\": \"value\"}}')", file=sys.stderr)
        return 2
    serve(create_app(settings, runtime_factory), settings, host=args.host, port=args.port, log_level=args.log_level)
    return 0


if __name__ == "__main__":
    sys.exit(main())
