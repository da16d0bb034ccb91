"""README.md's /translate and /align examples are what the bundled models answer: each curl command's body is
sent to the service serving its default models (models/en-de-align2, models/en-de-software and models/de-en-align, as `make serve` does), and every value the README prints (texts, scores,
words and offsets, link weights, the Pharaoh string, phrase pairs) must be in the answer. A
README that drifts from the model, or a model that drifts from the README, fails here.

The README prints two kinds of answer: a whole JSON answer where ``{...}`` stands for a part
left out (that part is not compared), and a fragment ``... "text":"...", ... "phrases":{...}``
(the first hypothesis' text and its phrase map)."""
from __future__ import annotations

import json
import re
from typing import Any
from unittest.mock import ANY

import pytest

from service.settings import Settings
from tests.bundled.expectations import REPO, served, torch_settings

README = REPO / "README.md"


def make_variable(name: str) -> str:
    """A variable's default as the Makefile sets it (`NAME ?= value`)."""
    for line in (REPO / "Makefile").read_text(encoding="utf-8").splitlines():
        if line.startswith(f"{name} ?="):
            return line.partition("?=")[2].strip()
    raise AssertionError(f"Makefile sets no {name}")
# The README was captured from a running server (a child process with its own thread count and
# batches), so its float32 scores differ from this process' in the 7th digit, and a weight rounded
# to the 6 decimals it prints can land one unit away; 1e-5 is far below what a model change moves.
README_ATOL = 1e-5
CURL = re.compile(r"^\$ curl .*?(?P<route>/translate|/align) .*?\n\s*-d '(?P<body>[^']*)'\n(?P<answer>.*?)(?=^```)",
                  re.M | re.S)
ELIDED = "{...}"
EXAMPLES = ["plain", "token-alignment", "align", "phrase-map", "html-tags", "glossary", "memory", "terms-memory"]


def readme_examples() -> list[tuple[str, dict[str, Any], str]]:
    """(route, request body, printed answer) of every `curl ... /translate` or `/align` example in README.md."""
    text = README.read_text(encoding="utf-8")
    examples = [(m["route"], json.loads(m["body"]), m["answer"].strip()) for m in CURL.finditer(text)]
    assert len(examples) == len(EXAMPLES), f"README.md: expected {len(EXAMPLES)} examples, found {len(examples)}"
    return examples


def shown(value: Any) -> Any:
    """The printed answer as a comparison: floats within README_ATOL, left-out parts anything."""
    if value is None:
        return ANY
    if isinstance(value, float):
        return pytest.approx(value, abs=README_ATOL, rel=0)
    if isinstance(value, list):
        return [shown(item) for item in value]
    if isinstance(value, dict):
        return {key: shown(item) for key, item in value.items()}
    return value


@pytest.fixture(scope="module")
def client():
    # The README shows what `make serve` answers: the service's default model directories, in its
    # default precision (int8 on the CPU where verified).
    default = [REPO / path for path in Settings.model_fields["model_dirs"].default_factory()]
    quantization = Settings.model_fields["cpu_quantization"].default
    memories = [REPO / path for path in make_variable("MEMORIES").split()]
    update = {"model_dirs": default, "cpu_quantization": quantization, "memories": memories}
    with served(torch_settings().model_copy(update=update), pairs=("en-de", "de-en", "en-fr")) as test_client:
        yield test_client


@pytest.mark.parametrize("index", range(len(EXAMPLES)), ids=EXAMPLES)
def test_readme_example_is_what_the_bundled_model_answers(client, index):
    route, body, printed = readme_examples()[index]
    response = client.post(route, json=body)
    assert response.status_code == 200, response.text
    answer = response.json()
    if printed.startswith("..."):
        # ... "text":"<first hypothesis>", ... "phrases":{<its phrase map>}
        text = re.match(r'\.\.\. "text":("(?:[^"\\]|\\.)*"), \.\.\. "phrases":(\{.*\})$', printed, re.S)
        assert text is not None, f"README.md: unexpected fragment {printed[:80]!r}"
        first = answer["translations"][0][0]
        assert first["text"] == json.loads(text[1])
        assert first["phrases"] == shown(json.loads(text[2]))
    else:
        assert answer == shown(json.loads(printed.replace(ELIDED, "null")))


def test_make_serve_serves_the_bundled_models_in_int8(client):
    # What the examples above were captured from: every bundled model verified int8 on the kernels.
    models = client.get("/models").json()["models"]
    assert [(m["name"], m["backend"], m["precision"]) for m in models] == [
        ("en-de-align2", "torch", "int8"), ("en-de-software", "torch", "int8"), ("de-en-align", "torch", "int8"),
        ("de-en-software", "torch", "int8"), ("en-fr", "torch", "int8")]
