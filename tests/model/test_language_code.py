"""Manifest language codes follow the rule requests follow (model/text/language_code.py): normalised
when only the case or surrounding blanks differ, refused at load otherwise, naming the file."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from model.model_dir import MANIFEST_FILE, read_manifest
from model.errors import ArtifactError
from model.text.language_code import normalise_language_code

BUNDLED = Path(__file__).resolve().parents[2] / "models" / "en-de"


@pytest.mark.parametrize(("value", "code"), [("en", "en"), ("EN", "en"), (" De ", "de"), ("pt-BR", "pt-br"), ("zh_Hans", "zh_hans")])
def test_codes_are_trimmed_and_lower_cased(value, code):
    assert normalise_language_code(value) == code


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("e n", "'e n' is not a language code (1 to 16 letters, digits, '-' or '_')"),
        ("", "'' is not a language code (1 to 16 letters, digits, '-' or '_')"),
        ("x" * 17, f"'{'x' * 17}' is not a language code (1 to 16 letters, digits, '-' or '_')"),
        ("en.", "'en.' is not a language code (1 to 16 letters, digits, '-' or '_')"),
        (5, "must be a string, got int"),
    ],
)
def test_anything_else_is_refused(value, message):
    with pytest.raises(ValueError) as error:
        normalise_language_code(value)
    assert str(error.value) == message


def manifest_with(tmp_path: Path, **changes) -> Path:
    model_dir = tmp_path / "m"
    shutil.copytree(BUNDLED, model_dir)
    manifest = json.loads((model_dir / MANIFEST_FILE).read_text())
    manifest.update(changes)
    (model_dir / MANIFEST_FILE).write_text(json.dumps(manifest))
    return model_dir


def test_a_manifest_in_upper_case_is_read_in_the_form_requests_use(tmp_path):
    manifest = read_manifest(manifest_with(tmp_path, source_lang="EN", target_lang=" de"))
    assert (manifest["source_lang"], manifest["target_lang"]) == ("en", "de")


def test_a_manifest_code_no_request_could_name_is_refused_naming_the_file(tmp_path):
    model_dir = manifest_with(tmp_path, source_lang="e n")
    with pytest.raises(ArtifactError) as error:
        read_manifest(model_dir)
    assert str(error.value) == (
        f"{model_dir / MANIFEST_FILE}: source_lang: 'e n' is not a language code (1 to 16 letters, digits, '-' or '_')"
    )
