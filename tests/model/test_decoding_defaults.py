"""Every entry point decodes with the same defaults (model/decoding/defaults.py), so a figure
measured with one (evaluation, export verification) describes what the service answers."""
from __future__ import annotations

import inspect

from model.decoding import defaults as decoding_defaults
from model.decoding.generate import SearchOptions
from service.runtime.base import DecodeOptions
from service.settings import Settings
from training.evaluate import build_parser
from training.recipe import TrainingRecipe
from training.translate import translate_batch
from export.pipeline import ExportRequest
from export.verify import search_options, verify

EXPECTED = {"beam_size": 5, "n_best": 1, "length_penalty": 1.0, "max_length_ratio": 1.5, "max_length_offset": 10}


def test_the_defaults_are_the_documented_values():
    assert {
        "beam_size": decoding_defaults.BEAM_SIZE,
        "n_best": decoding_defaults.N_BEST,
        "length_penalty": decoding_defaults.LENGTH_PENALTY,
        "max_length_ratio": decoding_defaults.MAX_LENGTH_RATIO,
        "max_length_offset": decoding_defaults.MAX_LENGTH_OFFSET,
    } == EXPECTED


def test_search_and_service_options_start_from_them():
    search, decode = SearchOptions(), DecodeOptions()
    for name, value in EXPECTED.items():
        assert getattr(search, name) == value, name
        assert getattr(decode, name) == value, name


def test_service_settings_start_from_them():
    settings = Settings()
    assert (settings.default_beam_size, settings.length_penalty, settings.max_length_ratio,
            settings.max_length_offset) == (5, 1.0, 1.5, 10)


def test_evaluation_translation_and_training_validation_start_from_them():
    args = build_parser().parse_args(["--model-dir", "m", "--split", "s"])
    assert (args.beam, args.length_penalty) == (5, 1.0)
    params = inspect.signature(translate_batch).parameters
    assert (params["beam"].default, params["length_penalty"].default, params["max_length_ratio"].default,
            params["max_length_offset"].default) == (5, 1.0, 1.5, 10)
    fields = {f.name: f.default for f in TrainingRecipe.__dataclass_fields__.values()}
    assert (fields["decode_max_len_a"], fields["decode_max_len_b"]) == (1.5, 10)


def test_export_verification_starts_from_them():
    options = search_options(7)
    assert (options.beam_size, options.length_penalty, options.max_length_ratio, options.max_length_offset) == (7, 1.0, 1.5, 10)
    assert inspect.signature(verify).parameters["beam_size"].default == 5
    assert ExportRequest.__dataclass_fields__["beam_size"].default == 5
