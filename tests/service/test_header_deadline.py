"""Request heads have a deadline (service/http/header_deadline.py): a real server process, raw sockets."""
from __future__ import annotations

import json
import socket
import sys

import pytest

from tests.service.test_server_process import Server, request

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX server process")

BODY = json.dumps({"text": "hello world", "source": "en", "target": "de"}).encode()
TRANSLATE = (
    b"POST /translate HTTP/1.1\r\nHost: test\r\ncontent-type: application/json\r\n"
    + f"content-length: {len(BODY)}\r\n\r\n".encode() + BODY
)
TIMEOUT_408 = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: 67\r\n\r\n"
    b'{"message":"request headers not received within 0.5 s","detail":[]}'
)


@pytest.fixture(scope="module")
def server():
    # Each fake batch takes longer than the header deadline: a slow answer must not be cut off.
    running = Server(header_timeout_s="0.5", delay_s=0.8, max_wait_ms="0")
    running.wait_ready()
    yield running
    running.stop()


def connect(server: Server) -> socket.socket:
    # The socket timeout bounds a broken server's hang; it is far above the 0.5 s deadline.
    return socket.create_connection(("127.0.0.1", server.port), timeout=15)


def read_all(sock: socket.socket) -> bytes:
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def read_response(sock: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, _, rest = data.partition(b"\r\n\r\n")
    length = int(next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")))
    while len(rest) < length:
        rest += sock.recv(65536)
    return head + b"\r\n\r\n" + rest


def rejections(server: Server) -> float:
    _, text = request(server.port, "GET", "/metrics")
    line = next(line for line in text.splitlines() if line.startswith('phrasal_rejections_total{reason="header_timeout"}'))
    return float(line.split()[-1])


def test_slow_heads_are_cut_and_counted_and_timely_ones_are_served(server):
    before = rejections(server)

    with connect(server) as silent:  # never sends a byte: closed without an answer
        assert read_all(silent) == b""

    with connect(server) as partial:  # slowloris: half a head, then nothing
        partial.sendall(TRANSLATE[:30])
        assert read_all(partial) == TIMEOUT_408

    with connect(server) as keep_alive:
        keep_alive.sendall(TRANSLATE[:20])  # a head in two pieces, inside the deadline
        keep_alive.sendall(TRANSLATE[20:])
        first = read_response(keep_alive)  # computed for 0.8 s, longer than the deadline
        assert first.startswith(b"HTTP/1.1 200 OK\r\n")
        assert json.loads(first.partition(b"\r\n\r\n")[2])["translations"][0][0]["text"] == "WORLD HELLO"
        keep_alive.sendall(b"GET /health/live HTTP/1.1\r\n")  # the next request on it: deadline again
        assert read_all(keep_alive) == TIMEOUT_408

    assert rejections(server) - before == 3
