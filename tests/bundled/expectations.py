"""What the bundled model (models/en-de) answers, pinned in en_de_expected.json.

The pins are the /translate answers (the service's own JSON) to a few requests, the README's
examples among them, and the BLEU of a fixed slice of test_2016_flickr, all at beam 5 on CPU.
They are measured through the service: the app built by ``create_app`` with the default
runtime factory, which checks the model directory (manifest sha256, tensor shapes) before it
serves. The regeneration script and the tests use these same functions, so a pin and its check
can only differ by what the model (or the code serving it) does.

When the bundled model is replaced on purpose, regenerate the pins (and update README.md's
examples, which tests/bundled/test_readme.py holds to the model):

    python -m tests.bundled.regenerate
"""
from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from service.settings import Settings
from tests.conftest import read_lines

REPO = Path(__file__).resolve().parents[2]
MODEL_DIR = REPO / "models" / "en-de"
EXPECTED_FILE = Path(__file__).with_name("en_de_expected.json")
REGENERATE = "python -m tests.bundled.regenerate"

BLEU_SPLIT = "test_2016_flickr"
BLEU_SENTENCES = 200
# Texts per /translate request while scoring the slice (the service's default batching then
# decodes each request as one batch).
BLEU_REQUEST_TEXTS = 50
# The BLEU of the slice may move this much (BLEU points) from its pin: another engine (ONNX
# Runtime, TorchScript), thread count or batch composition may flip a near-tied beam here and
# there, while a real regression (tokenizer, attention, length penalty) costs far more.
BLEU_TOLERANCE = 0.3
# Scores, link weights and phrase confidences may move this much from their pins: they are
# float32 sums whose last bits depend on the batch (padding), the thread count and the engine;
# measured differences are about 1e-6, and 1e-4 is also the export verification's score tolerance
# (export/verify.py). Texts, words, offsets, link order and Pharaoh links are pinned exactly:
# beam search on CPU is deterministic for them.
FLOAT_ATOL = 1e-4


def pinned_requests() -> list[dict[str, Any]]:
    """The /translate bodies whose answers are pinned; the first three are README.md's examples.
    Beam size is the server default (5) unless a body says otherwise."""
    pair = {"source": "en", "target": "de"}
    return [
        {"text": ["A little girl climbs into a wooden playhouse.", "Two dogs are playing in the snow."], **pair},
        {"text": "Two dogs play in the snow.", **pair, "n_best": 2, "alignment": "token"},
        {"text": "A man in a blue shirt is standing on a ladder.", **pair, "alignment": "phrase"},
        # Eight texts of different lengths in one batch: padding must change nothing.
        {"text": read_lines(BLEU_SPLIT, "en", 8), **pair},
        {"text": ["A woman with a red umbrella walks past a fountain.", "Three children are sitting on a bench."],
         **pair, "n_best": 3, "alignment": "phrase"},
    ]


def isolated_settings(**values: Any) -> Settings:
    """Settings from `values` and the defaults alone: PHRASAL_* variables in the caller's shell
    must not change what is measured (tests/service/conftest.py does the same for its tests).
    float32 unless `values` say otherwise: the pins hold the torch, ONNX and TorchScript engines to
    one set of answers, and int8 (the CPU default) answers differently by design; what int8
    serves is held by tests/bundled/test_readme.py and the models' int8_verification.json."""
    values.setdefault("cpu_quantization", "none")
    shell = {name: os.environ.pop(name) for name in list(os.environ) if name.startswith("PHRASAL_")}
    try:
        return Settings(**values)
    finally:
        os.environ.update(shell)


def torch_settings() -> Settings:
    """What `make serve` serves, in this process (the real server test runs the inference child)
    and on CPU."""
    return isolated_settings(model_dirs=[MODEL_DIR], device="cpu", backend="torch", inference_process=False)


def export_settings(backend: str, export_dir: Path) -> Settings:
    return isolated_settings(model_dirs=[MODEL_DIR], device="cpu", backend=backend, export_dirs=[export_dir],
                    inference_process=False)


@contextmanager
def served(settings: Settings, pairs: tuple[str, ...] = ("en-de",)) -> Iterator[Any]:
    """A TestClient of the app serving `settings` through the default runtime factory, once the
    models are loaded and ready and serve exactly `pairs`; a model that fails to load fails here,
    with the reason."""
    from service.app import create_app
    from tests.service.support import serving

    with serving(create_app(settings)) as client:
        health = client.get("/health/ready")
        assert health.status_code == 200, health.text
        assert health.json()["pairs"] == sorted(pairs)
        yield client


def translations(client, body: dict[str, Any]) -> list[list[dict[str, Any]]]:
    response = client.post("/translate", json=body)
    assert response.status_code == 200, response.text
    return response.json()["translations"]


def slice_bleu(client, source: str = "en", target: str = "de") -> dict[str, float]:
    """Cased and lowercased BLEU (sacreBLEU 13a, training.evaluate.score) of the top hypotheses
    for the first BLEU_SENTENCES sentences of BLEU_SPLIT, translated through /translate."""
    from training.evaluate import score

    sources = read_lines(BLEU_SPLIT, source, BLEU_SENTENCES)
    references = read_lines(BLEU_SPLIT, target, BLEU_SENTENCES)
    hypotheses = []
    for start in range(0, len(sources), BLEU_REQUEST_TEXTS):
        body = {"text": sources[start : start + BLEU_REQUEST_TEXTS], "source": source, "target": target}
        hypotheses += [nbest[0]["text"] for nbest in translations(client, body)]
    scores = score(hypotheses, references)
    return {"bleu": scores["bleu"]["score"], "bleu_lowercase": scores["bleu_lowercase"]["score"]}


def model_files() -> dict[str, str]:
    """The sha256 of each file as the bundled model's manifest records it (read as plain JSON:
    the loader's own checks are what the tests exercise)."""
    return json.loads((MODEL_DIR / "manifest.json").read_text())["files"]


def measure(settings: Settings) -> dict[str, Any]:
    """Every pin, measured on the app that `settings` describe."""
    with served(settings) as client:
        cases = [{"request": body, "translations": translations(client, body)} for body in pinned_requests()]
        bleu = slice_bleu(client)
    return {
        "regenerate": REGENERATE,
        "model_dir": MODEL_DIR.relative_to(REPO).as_posix(),
        "model_files": model_files(),
        "device": "cpu",
        "cases": cases,
        "bleu_slice": {"split": BLEU_SPLIT, "sentences": BLEU_SENTENCES, "beam_size": 5, **bleu},
    }


def load_expected() -> dict[str, Any]:
    """The pins, after checking that they were made from the model directory now bundled."""
    expected = json.loads(EXPECTED_FILE.read_text(encoding="utf-8"))
    recorded, now = expected["model_files"], model_files()
    assert recorded == now, (
        f"{MODEL_DIR.relative_to(REPO)} is not the model {EXPECTED_FILE.relative_to(REPO)} was made from "
        f"(manifest hashes {now} != {recorded}); if it was replaced on purpose, run `{REGENERATE}` and "
        "update README.md's examples"
    )
    return expected


def cases_by_id(expected: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The pinned cases by a test id: their position and alignment mode ("3-none")."""
    return {f"{i}-{case['request'].get('alignment', 'none')}": case for i, case in enumerate(expected["cases"])}


def within(expected: Any, atol: float = FLOAT_ATOL) -> Any:
    """`expected` with every float replaced by pytest.approx(abs=atol), everything else left to
    compare exactly: ``assert got == within(pinned)``."""
    import pytest

    if isinstance(expected, float):
        return pytest.approx(expected, abs=atol, rel=0)
    if isinstance(expected, list):
        return [within(item, atol) for item in expected]
    if isinstance(expected, dict):
        return {key: within(value, atol) for key, value in expected.items()}
    return expected
