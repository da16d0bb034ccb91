"""A deadline on request headers, which uvicorn does not have.

uvicorn closes a keep-alive connection that stays silent after a response, but a connection that
never sends a request, or sends its headers a byte at a time (slowloris), is held open for as
long as the client likes: each holds a file descriptor, and enough of them stop the server from
accepting anyone. Here every connection waiting for a request (just opened, or after a response)
must deliver the whole request head within ``header_timeout_s``; otherwise it is answered 408
(when part of a request came) or simply closed (when nothing came), and counted as a rejection
with reason ``header_timeout``. The body has its own deadline (service/http/body_guard.py).
"""
from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from service.http.errors import error_body


def header_deadline_protocol(timeout_s: float, on_timeout: Callable[[], None]) -> type[H11Protocol]:
    """uvicorn's h11 protocol with the deadline above (pass as uvicorn.Config(http=...))."""
    body = error_body(f"request headers not received within {timeout_s:g} s")
    timeout_response = (
        b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\nconnection: close\r\n"
        + f"content-length: {len(body)}\r\n\r\n".encode()
        + body
    )

    class HeaderDeadlineProtocol(H11Protocol):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._header_deadline: asyncio.TimerHandle | None = None
            self._bytes_at_arming = 0
            self._bytes_received = 0

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def data_received(self, data: bytes) -> None:
            self._bytes_received += len(data)
            super().data_received(data)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm()  # the next request on this keep-alive connection gets its own deadline

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _arm(self) -> None:
            self._disarm()
            self._bytes_at_arming = self._bytes_received
            self._header_deadline = self.loop.call_later(timeout_s, self._expired)

        def _disarm(self) -> None:
            if self._header_deadline is not None:
                self._header_deadline.cancel()
                self._header_deadline = None

        def _expired(self) -> None:
            self._header_deadline = None
            # IDLE: h11 has not parsed a complete request head since the deadline was armed.
            if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
                return
            on_timeout()
            if self._bytes_received > self._bytes_at_arming:
                self.transport.write(timeout_response)
            self.transport.close()

    return HeaderDeadlineProtocol
