"""Running the app under uvicorn with a graceful, draining shutdown.

On SIGTERM (or Ctrl-C) the app hears it first (``Lifecycle.begin_drain``: /health/ready turns
503, new translations are refused), then uvicorn's own shutdown runs: stop accepting
connections, give the requests in flight ``drain_timeout_s`` to finish (then cancel them), run
the lifespan shutdown (batchers stopped, models released). The process then exits 0.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType

import uvicorn
from fastapi import FastAPI

from service.http.protocol import serving_protocol
from service.settings import Settings

log = logging.getLogger("service")


class DrainingServer(uvicorn.Server):
    """uvicorn's Server, telling the app first when a signal asks it to stop."""

    def __init__(self, config: uvicorn.Config, on_exit: Callable[[], None]) -> None:
        super().__init__(config)
        self._on_exit = on_exit

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self._on_exit()
        super().handle_exit(sig, frame)


class QueryStringFilter(logging.Filter):
    """Drops the query string from uvicorn's access log lines: a client may put an API key (or
    anything else private) there, and no route of this service reads one."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        # uvicorn.access logs (client, method, path with query, http version, status).
        if isinstance(args, tuple) and len(args) == 5 and isinstance(args[2], str) and "?" in args[2]:
            record.args = (args[0], args[1], args[2].split("?", 1)[0] + "?[query omitted]", *args[3:])
        return True


def _drained(signum: int, frame: FrameType | None) -> None:
    log.info("shut down after signal %d", signum)


def serve(app: FastAPI, settings: Settings, *, host: str, port: int, log_level: str) -> None:
    metrics = app.state.metrics
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        timeout_graceful_shutdown=settings.drain_timeout_s,
        # settings.max_connections is enforced by the app (service/http/admission.py): uvicorn's own
        # limit counts open connections, so idle sockets could lock every request out.
        limit_concurrency=None,
        http=serving_protocol(
            header_timeout_s=settings.header_timeout_s,
            send_timeout_s=settings.send_timeout_s,
            on_rejected=metrics.rejected,
            on_malformed=metrics.malformed,
        ),
    )
    access_log = logging.getLogger("uvicorn.access")  # configured by uvicorn.Config above
    if not any(isinstance(f, QueryStringFilter) for f in access_log.filters):
        access_log.addFilter(QueryStringFilter())
    server = DrainingServer(config, on_exit=app.state.lifecycle.begin_drain)
    # After a signal-initiated shutdown uvicorn re-raises that signal under the handlers that
    # were installed before it started; with these in place a drained shutdown exits 0.
    previous = {sig: signal.signal(sig, _drained) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        server.run()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    # A batch cut off by the drain timeout is still running in its worker thread (a thread
    # cannot be interrupted). The app has shut down; exit now rather than let the interpreter
    # tear down under a thread inside torch, which can abort the process.
    running = [t.name for t in threading.enumerate() if t.name.startswith("phrasal-") and t.is_alive()]
    if running:
        log.warning("exiting while %s still computes a batch nobody waits for", ", ".join(running))
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
