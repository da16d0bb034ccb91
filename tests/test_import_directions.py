"""docs/design.md §2, import directions: training → model, export → model, service.runtime → model.

Nothing imports training or service from model; training and export never import the service;
service/runtime never reaches up into the rest of the service (its settings included): the
service passes it paths and options. No package imports in a circle. The service proper
(outside service/runtime) is held by tests/service/test_service_layering.py.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import import_cycles, imported_modules, imported_packages

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


@pytest.mark.parametrize("package", ["model", "training", "export", "service"])
def test_production_packages_import_no_test_support(package):
    """The fakes (testing/) and the tests serve tests and benchmarks only."""
    offenders = {str(path.relative_to(REPO)): sorted(imported_packages(path) & {"testing", "tests"})
                 for path in sorted((REPO / package).rglob("*.py"))}
    assert {path: bad for path, bad in offenders.items() if bad} == {}


def test_benchmarks_and_tools_import_no_tests():
    """What a benchmark or a tool needs of the test support lives in testing/, not in tests/."""
    files = sorted((REPO / "benchmarks").rglob("*.py")) + sorted((REPO / "tools").rglob("*.py"))
    assert files
    assert {str(p.relative_to(REPO)) for p in files if "tests" in imported_packages(p)} == set()


def test_the_checker_sees_imports(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("import service.app\nfrom training.loop import x\nfrom . import y\n")
    assert imported_packages(sample) == {"service", "training"}


def test_service_runtime_imports_nothing_of_the_service_above_it():
    runtime = REPO / "service" / "runtime"
    offenders = {}
    for path in sorted(runtime.rglob("*.py")):
        above = {
            name for name in imported_modules(path)
            if name.split(".")[0] == "service" and name != "service" and name.split(".")[1] != "runtime"
        }
        if above:
            offenders[str(path.relative_to(REPO))] = sorted(above)
    assert offenders == {}


@pytest.mark.parametrize("package", ["service", "training", "export"])
def test_no_import_cycles_within_a_package(package):
    assert import_cycles(REPO, package) == []


def test_the_checkers_see_nested_imports_and_cycles(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text("from pkg.b import f\n")
    (tmp_path / "pkg" / "b.py").write_text("def f():\n    from pkg import a\n")
    (tmp_path / "pkg" / "c.py").write_text("import pkg.a\n")
    assert imported_modules(tmp_path / "pkg" / "a.py") == {"pkg.b", "pkg.b.f"}
    assert import_cycles(tmp_path, "pkg") == [["pkg.a", "pkg.b"]]
