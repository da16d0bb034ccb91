"""The Content-Security-Policy of the page at GET /: it runs its own inline script and nothing
else, talks only to this server, and cannot be framed.

The inline scripts are allowed by their SHA-256 (computed from the page as served, so an edit of
the page keeps its policy right); styles may be inline (a style cannot run code, and the page
sets some per element).
"""
from __future__ import annotations

import base64
import hashlib
import re

_INLINE_SCRIPT = re.compile(r"<script(?![^>]*\bsrc=)[^>]*>(.*?)</script>", re.DOTALL | re.IGNORECASE)


def _source_hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


def page_policy(page: str) -> str:
    """The policy for ``page``: its inline ``<script>`` blocks by hash, fetches to this origin."""
    scripts = " ".join(_source_hash(body) for body in _INLINE_SCRIPT.findall(page)) or "'none'"
    return "; ".join([
        "default-src 'none'",
        f"script-src {scripts}",
        "style-src 'unsafe-inline'",
        "connect-src 'self'",
        "img-src 'self' data:",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    ])
