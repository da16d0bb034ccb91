"""Property-based API testing from the OpenAPI schema (schemathesis), on the FakeRuntime.

Every operation gets 100 schema-valid and 100 schema-invalid examples (fixed seed); none may get
a 5xx, every answer must match the schema's status codes, content types and bodies, and invalid
data must be refused. The requests go through a TestClient whose lifespan ran and whose models
are loaded (schemathesis' own ASGI client would start the app itself, unloaded).
"""

from __future__ import annotations

import pytest

schemathesis = pytest.importorskip("schemathesis")

from hypothesis import HealthCheck, given, seed, settings  # noqa: E402
from schemathesis import GenerationMode  # noqa: E402
from schemathesis.checks import (  # noqa: E402
    content_type_conformance,
    negative_data_rejection,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from service.app import create_app  # noqa: E402
from service.settings import Settings  # noqa: E402
from testing.fake_runtime import FakeRuntime  # noqa: E402
from tests.service.support import serving  # noqa: E402

APP = create_app(Settings(max_segments=8, max_chars=200, glossary_db=":memory:"),
                 runtime_factory=lambda s: [FakeRuntime("en", "de")])
SCHEMA = schemathesis.openapi.from_dict(APP.openapi())
OPERATIONS = [result.ok() for result in SCHEMA.get_all_operations()]
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


@pytest.fixture(scope="module")
def client():
    with serving(APP) as test_client:
        yield test_client


def test_the_schema_lists_the_operations():
    assert sorted(op.label for op in OPERATIONS) == [
        "DELETE /glossaries/{glossary_id}", "GET /glossaries", "GET /glossaries/{glossary_id}", "GET /health",
        "GET /health/live", "GET /health/ready", "GET /memories", "GET /models", "POST /align", "POST /glossaries", "POST /translate"
    ]


# An operation without inputs (the health routes) has no invalid example: negative mode only
# for those with a body or query, so that no parametrisation skips by construction.
CASES = [(op, GenerationMode.POSITIVE) for op in OPERATIONS] + [
    (op, GenerationMode.NEGATIVE) for op in OPERATIONS if op.body or op.query
]


def test_negative_mode_covers_every_operation_with_inputs():
    assert sorted(op.label for op, mode in CASES if mode is GenerationMode.NEGATIVE) == [
        "POST /align", "POST /glossaries", "POST /translate"]


@pytest.mark.parametrize(("operation", "mode"), CASES, ids=[f"{op.label}-{mode.value}" for op, mode in CASES])
def test_no_example_gets_a_server_error(client, operation, mode):
    checks = CHECKS + ([negative_data_rejection] if mode is GenerationMode.NEGATIVE else [])

    @seed(20240601)
    @settings(
        max_examples=100, deadline=None, database=None, suppress_health_check=list(HealthCheck), derandomize=False
    )
    @given(case=operation.as_strategy(generation_mode=mode))
    def run(case):
        kwargs = case.as_transport_kwargs(base_url="http://testserver")
        if not kwargs.get("cookies"):
            kwargs.pop("cookies", None)
        if "data" in kwargs:  # raw bytes for an invalid body: httpx calls that content
            kwargs["content"] = kwargs.pop("data")
        response = client.request(**kwargs)
        statuses.append(response.status_code)
        case.validate_response(response, checks=checks)

    statuses: list[int] = []
    run()
    if operation.body:
        assert len(statuses) >= 100
