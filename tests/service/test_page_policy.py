"""GET / sends a Content-Security-Policy that allows the page's own inline script (by its
SHA-256) and nothing else, and X-Content-Type-Options: nosniff (the page in a browser under that
policy: tests/service/test_page.py)."""
from __future__ import annotations

import base64
import hashlib
import re

from service.app import create_app
from service.http.page_policy import page_policy
from service.settings import Settings
from testing.fake_runtime import FakeRuntime
from tests.service.support import serving


def test_the_page_is_sent_with_its_policy_and_nosniff():
    with serving(create_app(Settings(warmup=False), runtime_factory=lambda s: [FakeRuntime()])) as client:
        response = client.get("/")
    assert response.status_code == 200
    assert response.headers["x-content-type-options"] == "nosniff"
    policy = dict(part.split(" ", 1) for part in response.headers["content-security-policy"].split("; "))
    (script,) = re.findall(r"<script>(.*?)</script>", response.text, re.DOTALL)
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    assert policy == {
        "default-src": "'none'",
        "script-src": f"'sha256-{digest}'",
        "style-src": "'unsafe-inline'",
        "connect-src": "'self'",
        "img-src": "'self' data:",
        "base-uri": "'none'",
        "form-action": "'none'",
        "frame-ancestors": "'none'",
    }


def test_every_inline_script_is_hashed_and_an_external_one_is_not():
    page = "<script>a()</script><SCRIPT type='module'>b()</SCRIPT><script src='/x.js'></script>"
    hashes = [f"'sha256-{base64.b64encode(hashlib.sha256(body).digest()).decode()}'" for body in (b"a()", b"b()")]
    assert f"script-src {' '.join(hashes)};" in page_policy(page)
    assert "script-src 'none';" in page_policy("<p>no script</p>")
