"""The HTTP/1.1 protocol the server runs: uvicorn's h11 protocol, hardened where uvicorn leaves a
connection to the client's mercy. Pass ``serving_protocol(...)`` as ``uvicorn.Config(http=...)``.

1. Request heads have a deadline (service/http/header_deadline.py).
2. Malformed HTTP (a bad request line or header, broken chunked framing, a second Content-Length
   that disagrees): uvicorn answers a text/plain 400 of its own that no middleware sees or
   counts; and when the framing breaks after the head (a bad chunk size), the app is already
   handling the request, and its answer hits h11 in the wrong state (two tracebacks per request
   in uvicorn's log, or asyncio's "Fatal error: protocol.data_received() call failed" when the
   app has answered already). Here the protocol answers
   ``{"message": "malformed HTTP request: ...", "detail": []}`` (h11's status hint: 400, or 431
   for an oversized head), closes the connection, tells a request the app is handling that its
   client is gone, and marks its scope (``MALFORMED_STATUS``) so that the metrics count it once, with
   that status and the reason ``bad_request``.
3. A response the client stops reading: uvicorn hands the whole body to the transport, which keeps
   whatever the socket does not take in memory for as long as the connection stays open — a
   client that never reads would hold a 15 MB answer (64 texts, 16-best, phrase alignments) and
   its socket for ever. When unsent response bytes are waiting and the client has taken none of them
   for ``send_timeout_s`` (counted as bytes written minus bytes still buffered, in the transport
   and in the kernel), the connection is aborted (reason ``send_timeout``). A slow but steady
   reader is not: 40 pipelined 130 kB answers read 4 kB at a time over 42 s all arrived with
   ``send_timeout_s=0.5``.
"""

from __future__ import annotations

import asyncio
import struct
import sys
from collections.abc import Callable
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from service.http.errors import error_body
from service.http.header_deadline import header_deadline_protocol
from service.metrics import MALFORMED_STATUS

try:  # POSIX: the kernel's send queue (_kernel_unsent)
    import fcntl
    import termios
except ImportError:  # pragma: no cover - Windows
    fcntl = termios = None  # type: ignore[assignment]

_REASONS = {
    400: b"Bad Request",
    413: b"Content Too Large",
    414: b"URI Too Long",
    431: b"Request Header Fields Too Large",
}
_MAX_QUOTED_CHARS = 120


def _malformed_response(exc: BaseException | None) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    status = getattr(exc, "error_status_hint", 400)
    if status not in _REASONS:
        status = 400
    what = str(exc)[:_MAX_QUOTED_CHARS] if exc is not None and str(exc) else "not parseable"
    body = error_body(f"malformed HTTP request: {what}")
    headers = [
        (b"content-type", b"application/json"),
        (b"connection", b"close"),
        (b"content-length", str(len(body)).encode()),
    ]
    return status, headers, body


class _CountingTransport:
    """The connection's transport, counting the bytes written to it (for the send deadline)."""

    def __init__(self, transport: asyncio.Transport) -> None:
        self._transport = transport
        self.written = 0

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written += len(data)
        self._transport.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


def _kernel_unsent(transport: Any) -> int:
    """Bytes the kernel holds in the socket's send queue (Linux TIOCOUTQ; 0 where unknown)."""
    sock = transport.get_extra_info("socket")
    if sock is None or fcntl is None or not hasattr(termios, "TIOCOUTQ"):
        return 0
    try:
        raw = fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, b"\0\0\0\0")
    except OSError:
        return 0
    return struct.unpack("i", raw)[0]


def serving_protocol(
    *,
    header_timeout_s: float,
    send_timeout_s: float,
    on_rejected: Callable[[str], None],
    on_malformed: Callable[[int], None],
) -> type[H11Protocol]:
    """``on_rejected(reason)`` counts a rejection; ``on_malformed(status)`` counts a malformed
    request that never reached the app (the app's metrics middleware counts the others)."""
    base = header_deadline_protocol(header_timeout_s, lambda: on_rejected("header_timeout"))

    class ServingProtocol(base):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._send_watch: asyncio.TimerHandle | None = None
            self._flushed = 0  # response bytes the socket had taken at the last check

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(_CountingTransport(transport))  # type: ignore[arg-type]

        # -- malformed HTTP --------------------------------------------------------------

        def send_400_response(self, msg: str) -> None:
            # Called by uvicorn's handle_events inside its `except h11.RemoteProtocolError`.
            status, headers, body = _malformed_response(sys.exc_info()[1])
            cycle = self.cycle
            in_app = cycle is not None and not cycle.response_complete
            if in_app and cycle.response_started:
                # Half an answer is out: nothing else can be said on this connection.
                self.transport.close()
                return
            try:
                response = h11.Response(status_code=status, headers=headers, reason=_REASONS[status])
                self.transport.write(self.conn.send(response))
                self.transport.write(self.conn.send(h11.Data(data=body)))
                self.transport.write(self.conn.send(h11.EndOfMessage()))
                answered = True
            except h11.LocalProtocolError:
                # The app answered before the rest of the body came: nobody is told anything.
                answered = False
            if in_app:
                cycle.scope[MALFORMED_STATUS] = status
                cycle.disconnected = True  # the app's receive says so, its sends go nowhere
                cycle.message_event.set()
            elif answered:
                on_malformed(status)
            self.transport.close()

        # -- responses nobody reads ------------------------------------------------------

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._watch_send()

        def pause_writing(self) -> None:
            super().pause_writing()
            self._watch_send()

        def connection_lost(self, exc: Exception | None) -> None:
            if self._send_watch is not None:
                self._send_watch.cancel()
                self._send_watch = None
            super().connection_lost(exc)

        def _watch_send(self) -> None:
            if self._send_watch is None and self.transport.get_write_buffer_size() > 0:
                self._flushed = self._sent()
                self._send_watch = self.loop.call_later(send_timeout_s, self._check_send)

        def _sent(self) -> int:
            # Bytes written minus bytes still buffered, here and in the kernel: what the client
            # took. (The transport's buffer alone is no measure: the next pipelined answer
            # refills it while the client reads, and the kernel takes bytes from it only when a
            # third of a send buffer of megabytes is free, seconds apart for a slow reader.)
            transport = self.transport
            return transport.written - transport.get_write_buffer_size() - _kernel_unsent(transport)

        def _check_send(self) -> None:
            self._send_watch = None
            if self.transport.get_write_buffer_size() == 0:
                return
            if self._sent() > self._flushed:  # the client reads, however slowly
                self._flushed = self._sent()
                self._send_watch = self.loop.call_later(send_timeout_s, self._check_send)
                return
            on_rejected("send_timeout")
            self.transport.abort()

    return ServingProtocol
