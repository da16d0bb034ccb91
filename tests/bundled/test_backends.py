"""The bundled model (models/en-de, its 10k SentencePiece model) served as the service serves it
(create_app and the default runtime factory: manifest sha256 and shapes checked before use) by
each backend: eager torch, and the ONNX and TorchScript exports made here by the export CLI
(`python -m export {onnx,torchscript} models/en-de OUT_DIR`). Every backend gives the pinned
answers of tests/bundled/en_de_expected.json and the pinned BLEU of its test_2016_flickr slice.
A change that stops the real model from loading, exporting or translating fails here."""
from __future__ import annotations

import pytest

from export.cli import main as export_main
from service.settings import Settings
from tests.bundled.expectations import (
    BLEU_TOLERANCE, MODEL_DIR, cases_by_id, export_settings, load_expected, served, slice_bleu, torch_settings,
    translations, within,
)

EXPECTED = load_expected()
CASES = cases_by_id(EXPECTED)


def exported_settings(backend: str, tmp_path_factory) -> Settings:
    """Export the bundled model with the export CLI into a temporary directory; settings serving it."""
    out = tmp_path_factory.mktemp(f"bundled-{backend}") / "export"
    # --no-verify: the pins and the BLEU below hold the export, served by the service's runtime, to
    # eager PyTorch's answers on more than the exporter's verification reads; doing both would
    # decode the same kind of sentences twice more (tests/export covers verification itself).
    code = export_main([backend, str(MODEL_DIR), str(out), "--no-verify"])
    assert code == 0
    return export_settings(backend, out)


@pytest.fixture(scope="module", params=["torch", "onnx", "torchscript"])
def client(request, tmp_path_factory):
    """One app per backend for the whole module (pytest groups the tests by it)."""
    settings = torch_settings() if request.param == "torch" else exported_settings(request.param, tmp_path_factory)
    with served(settings) as test_client:
        assert test_client.app.state.lifecycle.translator.runtimes[0].backend == request.param
        yield test_client


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_pinned_answers(client, case):
    assert translations(client, case["request"]) == within(case["translations"])


def test_bleu_of_the_test_2016_slice_is_the_pinned_one(client):
    pinned = EXPECTED["bleu_slice"]
    got = slice_bleu(client)
    assert got == {key: pytest.approx(pinned[key], abs=BLEU_TOLERANCE) for key in ("bleu", "bleu_lowercase")}


def test_every_engine_serves_the_pins_in_float32_and_says_so(client):
    # isolated_settings serves torch in float32; the exports were made in float32 (their default dtype).
    (model,) = client.get("/models").json()["models"]
    assert model["precision"] == "float32"
