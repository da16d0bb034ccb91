"""The service never reports ready with a pair no request can reach: a runtime whose language
codes are not in the form requests are matched in is refused at load, with the reason."""

from __future__ import annotations

import pytest

from service.app import create_app
from testing.fake_runtime import FakeRuntime
from tests.service.support import serving


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("EN", "model load failed: ValueError: the fake runtime for 'EN-de': source language 'EN' must be written 'en'"),
        (
            "e n",
            "model load failed: ValueError: the fake runtime for 'e n-de': source language 'e n' is not a language "
            "code (1 to 16 letters, digits, '-' or '_')",
        ),
    ],
)
def test_a_runtime_with_a_code_requests_cannot_name_fails_the_load(settings, source, reason):
    app = create_app(settings, runtime_factory=lambda s: [FakeRuntime(source, "de")])
    with serving(app) as client:
        response = client.get("/health/ready")
        assert (response.status_code, response.json()) == (
            503, {"status": "unavailable", "phase": "failed", "pairs": [], "reason": reason}
        )


def test_a_request_in_any_case_reaches_the_pair(client):
    response = client.post("/translate", json={"text": "a dog", "source": " EN", "target": "De"})
    assert (response.status_code, response.json()["source"], response.json()["target"]) == (200, "en", "de")
