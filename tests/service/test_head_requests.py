"""HEAD on the health checks and /metrics (load balancers that probe with HEAD) answers like GET."""
from __future__ import annotations

import pytest


@pytest.mark.parametrize("path", ["/health/live", "/health/ready", "/health"])
def test_head_on_a_health_check_has_the_status_and_headers_of_get(client, path):
    got, headed = client.get(path), client.head(path)
    assert (headed.status_code, headed.content) == (200, b"")
    assert headed.headers["content-length"] == got.headers["content-length"]
    assert headed.headers["content-type"] == "application/json"


def test_head_on_metrics_is_200_and_translate_still_refuses_it(client):
    assert (client.head("/metrics").status_code, client.head("/metrics").content) == (200, b"")
    refused = client.head("/translate")
    assert (refused.status_code, refused.headers["allow"]) == (405, "POST")


def test_head_routes_stay_out_of_the_schema(client):
    paths = client.get("/openapi.json").json()["paths"]
    assert {path: sorted(operations) for path, operations in paths.items()} == {
        "/translate": ["post"],
        "/align": ["post"],
        "/models": ["get"],
        "/memories": ["get"],
        "/health/ready": ["get"],
        "/health": ["get"],
        "/health/live": ["get"],
        "/glossaries": ["get", "post"],
        "/glossaries/{glossary_id}": ["delete", "get"],
    }
