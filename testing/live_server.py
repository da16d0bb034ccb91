"""A FastAPI app served over real HTTP in this process, for clients that speak HTTP themselves
(service/pretranslate.py's tests and benchmark, the page's browser test)."""
from __future__ import annotations

import socket
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn
from fastapi import FastAPI


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def live_server(app: FastAPI, ready_within_s: float = 60.0, port: int | None = None) -> Iterator[str]:
    """`app` served by uvicorn in a thread on `port` (default: a free local one), for clients that
    speak HTTP themselves: its base URL once /health/ready answers 200; stopped on exit."""
    port = port if port is not None else free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + ready_within_s
    while True:
        try:
            with urllib.request.urlopen(url + "/health/ready", timeout=1) as response:
                if response.status == 200:
                    break
        except OSError:
            pass
        assert time.monotonic() < deadline, "the server did not become ready"
        time.sleep(0.05)
    try:
        yield url
    finally:
        server.should_exit = True
        thread.join(10)
