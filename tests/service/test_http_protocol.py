"""What the server does with broken HTTP, clients that stop reading, and bodies cut off by the
drain (service/http/protocol.py, service/http/body_guard.py): a real server process, raw sockets."""
from __future__ import annotations

import json
import re
import signal
import socket
import sys
import time

import pytest

from tests.service.support import wait_until
from tests.service.test_header_deadline import read_all
from tests.service.test_server_process import Server, request

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX server process")

BODY = json.dumps({"text": "hello world", "source": "en", "target": "de"}).encode()


def head(method: str, path: str, *headers: str) -> bytes:
    return "\r\n".join([f"{method} {path} HTTP/1.1", "Host: test", *headers, "", ""]).encode()


def exchange(server: Server, data: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", server.port), timeout=15) as sock:
        sock.sendall(data)
        return read_all(sock)


def statuses_and_bodies(raw: bytes) -> list[tuple[int, bytes]]:
    """Each response on a connection: its status and body (all of ours have a Content-Length)."""
    out = []
    while raw:
        top, _, rest = raw.partition(b"\r\n\r\n")
        status = int(top.split(b" ", 2)[1])
        length = int(re.search(rb"(?im)^content-length: *(\d+)", top).group(1))
        out.append((status, rest[:length]))
        raw = rest[length:]
    return out


def scrape(server: Server) -> dict[str, float]:
    _, text = request(server.port, "GET", "/metrics")
    return {
        line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(("phrasal_rejections_total{", "phrasal_request_duration_seconds_count{"))
        and 'route="/metrics"' not in line  # the scrapes themselves
    }


def delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {key: after[key] - before.get(key, 0.0) for key in after if after[key] != before.get(key, 0.0)}


def malformed(what: str) -> bytes:
    return json.dumps({"message": f"malformed HTTP request: {what}", "detail": []}, separators=(",", ":")).encode()


def test_malformed_http_is_answered_once_as_json_counted_and_never_a_traceback():
    # Before: a bad chunk size arriving with the head got uvicorn's text/plain 400 while the app
    # answered too (415, 404, 200): two "Exception in ASGI application" tracebacks per request,
    # and the metrics counted the status the app tried, not the 400 the client got.
    server = Server()
    try:
        server.wait_ready()
        before = scrape(server)
        bad_chunk = b"zz\r\n"
        cases = [
            head("POST", "/translate", "Content-Type: text/plain", "Transfer-Encoding: chunked") + bad_chunk,
            head("POST", "/translate", "Content-Type: application/json", "Transfer-Encoding: chunked") + bad_chunk,
            head("GET", "/health/live", "Transfer-Encoding: chunked") + bad_chunk,
            head("GET", "/health/live") + b"GARBAGE\r\n\r\n",  # a good request, then garbage on the connection
            head("GET", "/health/live", "Content-Length: 1", "Content-Length: 2"),
        ]
        answers = [statuses_and_bodies(exchange(server, data)) for data in cases]
        # The app answered this one before the rest of its body came: there is nothing to add.
        late = socket.create_connection(("127.0.0.1", server.port), timeout=15)
        late.sendall(head("GET", "/health/live", "Transfer-Encoding: chunked"))
        live = 'phrasal_request_duration_seconds_count{route="/health/live",status="200"}'
        wait_until(lambda: scrape(server)[live] - before.get(live, 0.0) == 2.0, what="the health check answered")
        late.sendall(bad_chunk)
        late_answer = statuses_and_bodies(read_all(late))
        late.close()
        after = scrape(server)
        assert request(server.port, "POST", "/translate", json.loads(BODY))[0] == 200
    finally:
        code, log = server.stop()

    chunk_error = malformed("illegal chunk header: bytearray(b'zz\\r\\n')")
    assert answers == [
        [(400, chunk_error)],
        [(400, chunk_error)],
        [(400, chunk_error)],
        [(200, b'{"status":"ok"}'), (400, malformed("illegal request line: bytearray(b'GARBAGE')"))],
        [(400, malformed("conflicting Content-Length headers"))],
    ]
    assert [status for status, _ in late_answer] == [200]
    assert delta(before, after) == {
        'phrasal_rejections_total{reason="bad_request"}': 5.0,
        'phrasal_request_duration_seconds_count{route="/translate",status="400"}': 2.0,
        'phrasal_request_duration_seconds_count{route="/health/live",status="400"}': 1.0,
        'phrasal_request_duration_seconds_count{route="/health/live",status="200"}': 2.0,
        'phrasal_request_duration_seconds_count{route="unmatched",status="400"}': 2.0,
    }
    assert "Traceback" not in log and "ERROR" not in log


def test_content_length_with_transfer_encoding_is_refused_and_the_connection_closed():
    # h11 framed such a body by its chunks and kept the connection open (request smuggling
    # behind a proxy that frames by the length).
    server = Server()
    try:
        server.wait_ready()
        data = head(
            "POST", "/translate", "Content-Type: application/json", f"Content-Length: {len(BODY)}",
            "Transfer-Encoding: chunked",
        ) + BODY
        answer = statuses_and_bodies(exchange(server, data))  # read to the end: the server closed
    finally:
        server.stop()
    assert answer == [(400, b'{"message":"body: Content-Length and Transfer-Encoding must not both be set","detail":[]}')]


def test_a_client_that_stops_reading_is_cut_off_after_send_timeout():
    # Before: the unread answers stayed in the server's memory, and the connection open, for as
    # long as the client liked. Pipelined requests whose answers (130 kB each) are never read
    # fill the socket buffers, then the transport's.
    server = Server(send_timeout_s="0.5", header_timeout_s="30")
    texts = ["x" * 2000] * 64
    payload = json.dumps({"text": texts, "source": "en", "target": "de"}).encode()
    one = head("POST", "/translate", "Content-Type: application/json", f"Content-Length: {len(payload)}") + payload
    try:
        server.wait_ready()
        before = scrape(server)
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", server.port))
        sock.sendall(one * 60)
        key = 'phrasal_rejections_total{reason="send_timeout"}'
        wait_until(lambda: scrape(server)[key] - before[key] == 1.0, timeout=60, what="the connection to be cut")
        sock.settimeout(15)  # a connection left open would raise socket.timeout here
        received = 0
        try:
            while chunk := sock.recv(1 << 20):  # what the kernel had buffered, then the end
                received += len(chunk)
        except ConnectionResetError:
            pass
        sock.close()
        assert received < 60 * 130_000  # not every answer came
        assert request(server.port, "GET", "/health/live")[0] == 200
    finally:
        code, log = server.stop()
    assert "Traceback" not in log


def test_a_body_still_arriving_when_the_drain_timeout_expires_gets_a_503():
    # Before: uvicorn's cancellation of the body read became a text/plain 500 and a traceback.
    server = Server(drain_timeout_s="0.5")
    try:
        server.wait_ready()
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=15)
        sock.sendall(head("POST", "/translate", "Content-Type: application/json", f"Content-Length: {len(BODY)}") + BODY[:10])
        time.sleep(0.2)  # the app is reading the body (no state to poll: the read is inside FastAPI)
        server.process.send_signal(signal.SIGTERM)
        answer = statuses_and_bodies(read_all(sock))
        sock.close()
        assert server.process.wait(timeout=30) == 0
    finally:
        code, log = server.stop()
    assert answer == [(503, b'{"message":"the server shut down before this translation finished; retry","detail":[]}')]
    assert "Traceback" not in log and "Exception in ASGI application" not in log
