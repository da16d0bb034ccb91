"""API keys, per-key rate limits and CORS: all off by default."""

from __future__ import annotations

import json
import logging

import pytest
from pydantic import SecretStr, ValidationError

from service.app import create_app
from service.http.auth import KeyRing, TokenBucket
from service.settings import Settings
from testing.fake_runtime import FakeRuntime
from tests.service.support import serving
from tests.service.test_batching import sample

ALICE = "alice-0123456789abcdef"
BOB = "bob-0123456789abcdef00"
BODY = {"text": "a b", "source": "en", "target": "de"}
GUARDED = [("POST", "/translate"), ("GET", "/metrics"), ("GET", "/openapi.json"), ("GET", "/docs"), ("GET", "/nowhere")]


def keyed_app(**overrides):
    settings = Settings(api_keys={"alice": ALICE, "bob": BOB}, **overrides)
    return create_app(settings, runtime_factory=lambda s: [FakeRuntime()])


def call(client, method: str, path: str, headers: dict | None = None):
    if method == "POST":
        return client.post(path, json=BODY, headers=headers or {})
    return client.get(path, headers=headers or {})


def test_without_keys_configured_nothing_asks_for_one(client):
    assert client.post("/translate", json=BODY).status_code == 200
    assert client.get("/metrics").status_code == 200


@pytest.mark.parametrize(("method", "path"), GUARDED)
@pytest.mark.parametrize(
    "headers",
    [{}, {"X-API-Key": "wrong-key-0123456789"}, {"X-API-Key": ALICE[:-1]}, {"Authorization": "Bearer nope"},
     {"X-API-Key": ""}, {"Authorization": ALICE}],
    ids=["none", "wrong", "prefix", "wrong-bearer", "empty", "not-bearer"],
)
def test_every_route_but_health_needs_a_valid_key(method, path, headers):
    with serving(keyed_app()) as client:
        response = call(client, method, path, headers)
    assert response.status_code == 401
    assert response.json() == {"message": "missing or invalid API key: send it in the X-API-Key header", "detail": []}
    assert response.headers["www-authenticate"] == 'ApiKey header="X-API-Key"'


def test_a_valid_key_in_the_header_or_as_a_bearer_token_passes_and_health_stays_open():
    with serving(keyed_app()) as client:
        for path in ("/health", "/health/live", "/health/ready"):
            assert client.get(path).status_code == 200
        assert client.post("/translate", json=BODY, headers={"X-API-Key": ALICE}).status_code == 200
        assert client.post("/translate", json=BODY, headers={"x-api-key": BOB}).status_code == 200
        assert client.get("/metrics", headers={"Authorization": f"Bearer {ALICE}"}).status_code == 200
        metrics = client.get("/metrics", headers={"X-API-Key": ALICE}).text
        client.post("/translate", json=BODY)  # refused
        assert sample(client.get("/metrics", headers={"X-API-Key": BOB}).text, "phrasal_rejections_total",
                      {"reason": "unauthorized"}) == 1
    # Neither keys nor their names become metric labels.
    assert ALICE not in metrics and BOB not in metrics and "alice" not in metrics


def test_the_header_name_is_configurable():
    with serving(keyed_app(api_key_header="X-Phrasal-Key")) as client:
        assert client.post("/translate", json=BODY, headers={"X-API-Key": ALICE}).status_code == 401
        assert client.post("/translate", json=BODY, headers={"X-Phrasal-Key": ALICE}).status_code == 200


def test_keys_never_reach_the_log(caplog):
    with caplog.at_level(logging.DEBUG), serving(keyed_app(rate_limit_per_s=0.01, rate_limit_burst=1)) as client:
        client.post("/translate", json=BODY, headers={"X-API-Key": ALICE})
        client.post("/translate", json=BODY, headers={"X-API-Key": ALICE})
        client.post("/translate", json=BODY, headers={"X-API-Key": "guess-0123456789abcdef"})
    assert ALICE not in caplog.text and "guess-0123456789abcdef" not in caplog.text


def test_the_rate_limit_is_per_key_with_retry_after():
    # Three at once, then one per 100 s: the fourth request within the test is refused.
    with serving(keyed_app(rate_limit_per_s=0.01, rate_limit_burst=3)) as client:
        alice = [client.post("/translate", json=BODY, headers={"X-API-Key": ALICE}) for _ in range(4)]
        bob = client.post("/translate", json=BODY, headers={"X-API-Key": BOB})
        health = client.get("/health")
        metrics = client.get("/metrics", headers={"X-API-Key": BOB}).text
    assert [r.status_code for r in alice] == [200, 200, 200, 429]
    assert alice[3].headers["retry-after"] == "100"
    assert alice[3].json()["message"] == "rate limit of 0.01 requests/s for this key exceeded; retry in 100 s"
    assert bob.status_code == 200  # another key has its own bucket
    assert health.status_code == 200  # health checks are never limited
    assert sample(metrics, "phrasal_rejections_total", {"reason": "rate_limited"}) == 1


def test_token_bucket_refills_at_its_rate():
    now = [0.0]
    bucket = TokenBucket(rate_per_s=2.0, burst=2, clock=lambda: now[0])
    assert [bucket.take("k") for _ in range(3)] == [0.0, 0.0, 0.5]
    now[0] = 0.25
    assert bucket.take("k") == pytest.approx(0.25)  # half a token back: half of 0.5 s to wait
    now[0] = 0.5
    assert bucket.take("k") == 0.0
    now[0] = 100.0
    assert [bucket.take("k") for _ in range(3)] == [0.0, 0.0, 0.5]  # never more than the burst


def test_key_ring_names_the_key_and_only_exact_keys_match():
    ring = KeyRing({"alice": SecretStr(ALICE), "bob": SecretStr(BOB)})
    assert ring.identify(ALICE.encode()) == "alice"
    assert ring.identify(BOB.encode()) == "bob"
    assert ring.identify(ALICE.encode() + b" ") is None
    assert ring.identify(b"") is None


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"api_keys": {"alice": "short"}}, "the key named 'alice' is shorter than 16 characters"),
        ({"api_keys": {"a b": ALICE}}, "key name 'a b' must match"),
        ({"api_keys": {"a": ALICE, "b": ALICE}}, "two names share one key"),
        ({"rate_limit_per_s": 1.0}, "rate_limit_per_s is per API key: set api_keys too"),
    ],
)
def test_bad_auth_settings_are_refused_without_echoing_keys(settings, message):
    with pytest.raises(ValidationError, match=message) as info:
        Settings(**settings)
    assert ALICE not in str(info.value) and "short" not in str(info.value).replace("shorter", "")


def test_cors_is_closed_by_default(client):
    preflight = client.options(
        "/translate", headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"}
    )
    assert "access-control-allow-origin" not in preflight.headers
    response = client.post("/translate", json=BODY, headers={"Origin": "https://evil.example"})
    assert "access-control-allow-origin" not in response.headers


def test_cors_allows_only_the_configured_origins_even_with_keys_on():
    with serving(keyed_app(cors_origins=["https://app.example"])) as client:
        ok = client.options(
            "/translate",
            headers={"Origin": "https://app.example", "Access-Control-Request-Method": "POST",
                     "Access-Control-Request-Headers": "x-api-key, content-type"},
        )
        assert ok.status_code == 200
        assert ok.headers["access-control-allow-origin"] == "https://app.example"
        bad = client.options(
            "/translate", headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"}
        )
        assert bad.status_code == 400
        assert "access-control-allow-origin" not in bad.headers
        response = client.post("/translate", json=BODY, headers={"Origin": "https://app.example", "X-API-Key": ALICE})
        assert response.status_code == 200
        assert response.headers["access-control-allow-origin"] == "https://app.example"


def test_keys_come_from_the_environment_as_json(monkeypatch):
    monkeypatch.setenv("PHRASAL_API_KEYS", json.dumps({"alice": ALICE}))
    monkeypatch.setenv("PHRASAL_RATE_LIMIT_PER_S", "2.5")
    settings = Settings()
    assert {name: key.get_secret_value() for name, key in settings.api_keys.items()} == {"alice": ALICE}
    assert ALICE not in repr(settings)
    assert settings.rate_limit_per_s == 2.5
