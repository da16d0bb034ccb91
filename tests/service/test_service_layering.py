"""docs/design.md §2: the service sees only the runtime interface. Outside service/runtime no module may
import an engine or the model package; in service/runtime only the backend files import engines."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import imported_packages

SERVICE = Path(__file__).resolve().parents[2] / "service"
ENGINES = {"torch", "sentencepiece", "onnxruntime", "onnx", "ctranslate2"}
NEVER = {"training", "export"}
BACKENDS = {"torch_runtime.py"}


def test_service_outside_runtime_imports_no_engine_and_no_model():
    files = [p for p in SERVICE.rglob("*.py") if "runtime" not in p.relative_to(SERVICE).parts]
    assert {p.name for p in files} >= {"app.py", "routes.py", "schemas.py", "translator.py"}
    offenders = {
        str(p.relative_to(SERVICE)): sorted(imported_packages(p) & (ENGINES | NEVER | {"model"}))
        for p in files
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_runtime_interface_loading_and_process_import_no_engine():
    for name in ("base.py", "factory.py", "inference_process.py", "__init__.py"):
        assert imported_packages(SERVICE / "runtime" / name) & (ENGINES | NEVER) == set(), name


def test_only_backend_files_in_runtime():
    # A new engine-importing runtime file must be added to BACKENDS deliberately.
    for path in (SERVICE / "runtime").glob("*.py"):
        if path.name not in BACKENDS:
            assert imported_packages(path) & ENGINES == set(), path.name


# The web layer: the routes, the app factory, the server and service/http/ (middleware, errors).
WEB_FILES = {"routes.py", "app.py", "server.py"}
WEB_PACKAGES = {"fastapi", "starlette", "uvicorn"}


def test_only_the_web_layer_imports_fastapi_starlette_or_uvicorn():
    files = [p for p in SERVICE.rglob("*.py")
             if p.relative_to(SERVICE).parts[0] != "http" and str(p.relative_to(SERVICE)) not in WEB_FILES]
    assert {"translator.py", "errors.py", "lifecycle.py", "batcher.py"} <= {p.name for p in files}
    offenders = {str(p.relative_to(SERVICE)): sorted(imported_packages(p) & WEB_PACKAGES) for p in files}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_the_web_layer_check_sees_a_fastapi_import(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("def f():\n    from starlette.requests import Request\n")
    assert imported_packages(sample) & WEB_PACKAGES == {"starlette"}
