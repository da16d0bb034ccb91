"""Several replicas behind one address, each storing what it received (docs/operations.md, "Scaling
out"): a glossary stored with POST /glossaries and a document sent to a file route live in the
SQLite files of the replica that took them (service/glossary_store.py, service/document_store.py),
which in Kubernetes is one pod's. A request naming one that another replica holds is answered by
that replica.

A route that does not hold what a request names marks its answer (a 404, or its API's error for an
unknown glossary) with the header NOT_HELD, and a route that lists what it holds marks its list
with LISTED. This middleware, seeing either on a request a client sent (a forwarded one carries
FORWARDED and is answered as it stands), sends the same request, body and headers (the client's key
among them: every replica checks it; its rate limit is charged only where the request arrived) to every
other replica at once:

- NOT_HELD: the first answer below 500 without the mark is the client's. If every replica answers
  with the mark, the local answer stands (nobody holds it); if one could not be asked, or answered
  5xx, and none holds it, a 503 with Retry-After (it may be held where nobody could ask).
- LISTED: the lists merged (each item once, by its id, oldest first); a replica not answering 200
  makes it a 503, never a list that silently lacks its part.

Replicas are only ever the addresses the names in ``replicas`` resolve to (in Kubernetes a headless
Service, one address per ready pod), never one a request names, less ``replica_address`` (this
replica's own); with none configured the middleware is not installed.
"""
from __future__ import annotations

import asyncio
import json
import logging
import socket
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.http.auth import DEEPL_PREFIX, LIBRETRANSLATE_PREFIX
from service.http.errors import NOT_HELD, error_body
from service.metrics import Metrics
from service.settings import address_parts

log = logging.getLogger("service")

LISTED = "x-phrasal-listed"
FORWARDED = "x-phrasal-forwarded"
_FORWARDED = FORWARDED.encode()
_MARKS = {NOT_HELD.encode(), LISTED.encode(), _FORWARDED}
# Not passed on to another replica: the framing is its own, and an encoding we would have to undo.
_REQUEST_HOP = {"content-length", "transfer-encoding", "connection", "keep-alive", "te", "upgrade", "expect",
                "accept-encoding", "proxy-connection", FORWARDED}
_RESPONSE_HOP = {b"content-length", b"transfer-encoding", b"connection", b"keep-alive", b"content-encoding"} | _MARKS
RESOLVE_EVERY_S = 5.0
CONNECT_TIMEOUT_S = 2.0


def not_held(what: str) -> dict[str, str]:
    """The headers of an answer saying this replica does not hold the `what` a request names."""
    return {NOT_HELD: what}


LISTING = {LISTED: "glossaries"}


def _joined(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


async def _resolved(host: str, port: int) -> list[str]:
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [info[4][0] for info in infos]


@dataclass
class Answer:
    status: int
    headers: list[tuple[bytes, bytes]]
    body: bytes

    def has(self, name: str) -> bool:
        wanted = name.encode()
        return any(key.lower() == wanted for key, _ in self.headers)


class Replicas:
    """The other replicas, and how to ask them."""

    def __init__(self, names: Iterable[str], own: str | None, timeout_s: float) -> None:
        self.names = [address_parts(name) for name in names]
        self.own = _joined(*address_parts(own)) if own else None
        self.timeout_s = timeout_s
        self._known: list[str] = []
        self._hosts: set[str] = set()  # every replica's address, this one's too
        self._resolved_at = float("-inf")

    async def addresses(self) -> list[str]:
        """Every replica's host:port but this one's, resolved again after RESOLVE_EVERY_S."""
        if time.monotonic() - self._resolved_at < RESOLVE_EVERY_S:
            return self._known
        found: set[str] = set()
        hosts: set[str] = set()
        for host, port in self.names:
            try:
                resolved = await _resolved(host, port)
            except OSError as error:  # a name with no ready replica behind it yet
                log.warning("replicas: %s resolves to nothing (%s)", _joined(host, port), error)
                continue
            found.update(_joined(address, port) for address in resolved)
            hosts.update(resolved)
        self._known, self._hosts, self._resolved_at = sorted(found - {self.own}), hosts, time.monotonic()
        return self._known

    async def sent_on(self, scope: Scope) -> bool:
        """Whether `scope` is a request a replica sent on: marked FORWARDED, from an address the
        replicas' names resolve to (the mark alone is anyone's to send). The client's key was
        charged where the request arrived, so its rate limit is not charged again here."""
        if not any(k.lower() == _FORWARDED for k, _ in scope["headers"]):
            return False
        client = scope.get("client")
        await self.addresses()
        return bool(client) and client[0] in self._hosts

    async def ask(self, scope: Scope, body: bytes,
                  enough: Callable[[Answer], bool] = lambda answer: False) -> list[tuple[str, Answer | None]]:
        """The request `scope` and `body` sent to every other replica at once; None where one gave no
        answer. The first answer that is `enough` ends the asking (the others are not waited for:
        a replica that hangs costs the timeout only where nobody holds what was asked)."""
        import httpx  # only a server with replicas imports it

        addresses = await self.addresses()
        if not addresses:
            return []
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"]
                   if k.decode("latin-1").lower() not in _REQUEST_HOP]
        headers += [(FORWARDED, "1"), ("accept-encoding", "identity")]
        path = scope.get("raw_path") or scope["path"].encode()
        query = scope.get("query_string", b"")
        target = path.decode("latin-1") + ("?" + query.decode("latin-1") if query else "")
        timeout = httpx.Timeout(self.timeout_s, connect=min(CONNECT_TIMEOUT_S, self.timeout_s))

        async with httpx.AsyncClient(timeout=timeout) as client:
            async def one(address: str) -> tuple[str, Answer | None]:
                try:
                    reply = await client.request(scope["method"], f"http://{address}{target}", headers=headers,
                                                 content=body)
                except httpx.HTTPError as error:
                    log.warning("replicas: %s did not answer %s %s: %s", address, scope["method"], scope["path"],
                                type(error).__name__)
                    return address, None
                return address, Answer(reply.status_code, list(reply.headers.raw), reply.content)

            answers: list[tuple[str, Answer | None]] = []
            pending = {asyncio.ensure_future(one(address)) for address in addresses}
            try:
                while pending:
                    finished, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                    answers += [task.result() for task in finished]
                    if any(answer is not None and enough(answer) for _, answer in answers):
                        break
            finally:
                for task in pending:
                    task.cancel()
            return answers


def _holds(answer: Answer) -> bool:
    return not answer.has(NOT_HELD) and answer.status < 500


def held_answer(answers: list[tuple[str, Answer | None]]) -> tuple[str, Answer | None]:
    """("held", the holder's answer), ("nowhere", None) or ("unanswered", a 5xx to relay or None)."""
    unsure: Answer | None = None
    missing = False
    for _, answer in answers:
        if answer is None:
            missing = True
        elif answer.has(NOT_HELD):
            continue
        elif answer.status < 500:
            return "held", answer
        else:
            missing, unsure = True, unsure or answer
    return ("unanswered", unsure) if missing else ("nowhere", None)


def _item_key(item: Any) -> tuple[str, str]:
    if not isinstance(item, dict):
        return "", json.dumps(item, sort_keys=True)
    created = str(item.get("created", item.get("creation_time", "")))
    return created, str(item.get("id", item.get("glossary_id", "")))


def merged_list(local: bytes, answers: list[tuple[str, Answer | None]], key: str) -> bytes | None:
    """The local list and every replica's, each item once, oldest first; None if one is missing."""
    items: dict[tuple[str, str], Any] = {}
    bodies = [local]
    for _, answer in answers:
        if answer is None or answer.status != 200:
            return None
        bodies.append(answer.body)
    for body in bodies:
        try:
            listed = json.loads(body)[key]
        except (ValueError, KeyError, TypeError):
            return None
        for item in listed:
            items.setdefault(_item_key(item), item)
    return json.dumps({key: [items[k] for k in sorted(items)]}, ensure_ascii=False).encode()


def _unavailable(path: str, message: str, retry_after_s: int) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """A 503 in the error shape of the API the path belongs to."""
    if path.startswith(DEEPL_PREFIX + "/"):
        body = json.dumps({"message": message}).encode()
    elif path.startswith(LIBRETRANSLATE_PREFIX + "/"):
        body = json.dumps({"error": message}).encode()
    else:
        body = error_body(message)
    return 503, [(b"content-type", b"application/json"), (b"retry-after", str(retry_after_s).encode())], body


class ReplicaRouting:
    """The middleware: see the module's text."""

    def __init__(self, app: ASGIApp, replicas: Replicas, metrics: Metrics, retry_after_s: int) -> None:
        self.app = app
        self.replicas = replicas
        self.metrics = metrics
        self.retry_after_s = retry_after_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or any(k.lower() == _FORWARDED for k, _ in scope["headers"]):
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        state = {"more": True, "mark": None}
        held: list[Message] = []

        async def recording() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                chunks.append(message.get("body", b""))
                state["more"] = message.get("more_body", False)
            return message

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {k.lower() for k, _ in message.get("headers", [])}
                state["mark"] = NOT_HELD if NOT_HELD.encode() in names else LISTED if LISTED.encode() in names else ""
            if state["mark"]:
                held.append(message)
            else:
                await send(message)

        await self.app(scope, recording, sending)
        if not state["mark"] or not held:
            return
        while state["more"]:  # the part of the body the route did not read, to send on whole
            message = await receive()
            if message["type"] != "http.request":
                return  # the client left
            chunks.append(message.get("body", b""))
            state["more"] = message.get("more_body", False)
        local = Answer(held[0]["status"], list(held[0].get("headers", [])),
                       b"".join(m.get("body", b"") for m in held[1:]))
        answers = await self.replicas.ask(scope, b"".join(chunks),
                                          enough=(lambda answer: False) if state["mark"] == LISTED else _holds)
        if state["mark"] == LISTED:
            merged = merged_list(local.body, answers, "glossaries")
            if merged is None:
                self.metrics.replica_requests.labels(outcome="unanswered").inc()
                await self._send(send, *_unavailable(scope["path"], "a replica did not answer with its list; retry",
                                                     self.retry_after_s))
                return
            self.metrics.replica_requests.labels(outcome="merged").inc()
            await self._send(send, local.status, local.headers, merged)
            return
        outcome, answer = held_answer(answers)
        self.metrics.replica_requests.labels(outcome=outcome).inc()
        if outcome == "held" or (outcome == "unanswered" and answer is not None):
            await self._send(send, answer.status, answer.headers, answer.body)
        elif outcome == "unanswered":
            await self._send(send, *_unavailable(
                scope["path"], "not held here, and a replica that may hold it did not answer; retry",
                self.retry_after_s))
        else:
            await self._send(send, local.status, local.headers, local.body)

    @staticmethod
    async def _send(send: Send, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
        kept = [(k, v) for k, v in headers if k.lower() not in _RESPONSE_HOP]
        kept.append((b"content-length", str(len(body)).encode()))
        await send({"type": "http.response.start", "status": status, "headers": kept})
        await send({"type": "http.response.body", "body": body})
