"""DESIGN §2 import directions: training → model, export → model, service.runtime → model.

Nothing imports training or service from model; training and export never import the service;
the service proper (outside service/runtime) is held by tests/service/test_service_layering.py.
"""
from __future__ import annotations

from pathlib import Path

from tests.helpers import imported_packages

REPO = Path(__file__).resolve().parents[1]
FORBIDDEN = {
    "model": {"training", "export", "service"},
    "training": {"export", "service"},
    "export": {"training", "service"},
}


def test_packages_import_only_in_the_allowed_directions():
    offenders = {}
    for package, forbidden in FORBIDDEN.items():
        files = sorted((REPO / package).rglob("*.py"))
        assert files, package
        for path in files:
            bad = imported_packages(path) & forbidden
            if bad:
                offenders[str(path.relative_to(REPO))] = sorted(bad)
    assert offenders == {}


def test_the_checker_sees_imports(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("import service.app\nfrom training.loop import x\nfrom . import y\n")
    assert imported_packages(sample) == {"service", "training"}
