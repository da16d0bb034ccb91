"""Requests the routes do not take are answered by routing (404 unknown path, 405 wrong method)
before the body guard looks at their content type, and a body that is not JSON at all is a 400,
as the OpenAPI document says."""

from __future__ import annotations

import logging

import pytest

from service.server import QueryStringFilter


@pytest.mark.parametrize(
    ("method", "path", "headers", "status", "message"),
    [
        ("PUT", "/health", {}, 405, "Method Not Allowed"),
        ("PUT", "/translate", {"content-type": "text/plain"}, 405, "Method Not Allowed"),
        ("POST", "/nope", {}, 404, "Not Found"),
        ("POST", "/nope", {"content-type": "text/plain"}, 404, "Not Found"),
        ("PATCH", "/metrics", {}, 405, "Method Not Allowed"),
    ],
)
def test_routing_answers_before_the_content_type_is_checked(client, method, path, headers, status, message):
    response = client.request(method, path, content=b"x", headers=headers)
    assert (response.status_code, response.json()) == (status, {"message": message, "detail": []})


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b'{"text": "a",', "body: not parseable as JSON (Expecting property name enclosed in double quotes at character 13)"),
        (b"{oops", "body: not parseable as JSON (Expecting property name enclosed in double quotes at character 1)"),
        (b"nope", "body: not parseable as JSON (Expecting value at character 0)"),
    ],
)
def test_invalid_json_syntax_is_a_400_counted_as_bad_body(client, body, message):
    response = client.post("/translate", content=body, headers={"content-type": "application/json"})
    assert (response.status_code, response.json()) == (400, {"message": message, "detail": []})
    assert 'phrasal_rejections_total{reason="bad_body"} 1.0' in client.get("/metrics").text


def test_the_openapi_document_says_400_for_an_unparseable_body(client):
    responses = client.get("/openapi.json").json()["paths"]["/translate"]["post"]["responses"]
    assert "not parseable JSON" in responses["400"]["description"]


def test_the_access_log_never_shows_a_query_string():
    record = logging.LogRecord(
        "uvicorn.access", logging.INFO, __file__, 1, '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5000", "GET", "/metrics?api_key=0123456789abcdef0123&x=1", "1.1", 200), None,
    )
    assert QueryStringFilter().filter(record)
    assert record.getMessage() == '127.0.0.1:5000 - "GET /metrics?[query omitted] HTTP/1.1" 200'
    plain = logging.LogRecord(
        "uvicorn.access", logging.INFO, __file__, 1, '%s - "%s %s HTTP/%s" %d', ("c", "GET", "/health", "1.1", 200), None
    )
    assert QueryStringFilter().filter(plain) and plain.getMessage() == 'c - "GET /health HTTP/1.1" 200'
