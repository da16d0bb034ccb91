"""Every entry point decodes with the same defaults (model/decoding/defaults.py), so a figure
measured with one (evaluation, export verification) describes what the service answers."""
from __future__ import annotations

import inspect

from model.decoding import defaults as decoding_defaults
from model.decoding.options import DecodingOptions
from service.runtime.base import DecodingOptions
from service.settings import Settings
from training.evaluate import build_parser, length_penalty_of
from training.recipe import TrainingRecipe
from training.translate import translate_batch
from export.pipeline import ExportRequest
from export.verify import search_options, verify

EXPECTED = {"beam_size": 5, "n_best": 1, "length_penalty": 1.0, "length_penalty_form": "power", "max_length_ratio": 1.5,
            "max_length_offset": 10}


def test_the_defaults_are_the_documented_values():
    assert {
        "beam_size": decoding_defaults.BEAM_SIZE,
        "n_best": decoding_defaults.N_BEST,
        "length_penalty": decoding_defaults.LENGTH_PENALTY,
        "length_penalty_form": decoding_defaults.LENGTH_PENALTY_FORM,
        "max_length_ratio": decoding_defaults.MAX_LENGTH_RATIO,
        "max_length_offset": decoding_defaults.MAX_LENGTH_OFFSET,
    } == EXPECTED


def test_search_and_service_options_start_from_them():
    search, decode = DecodingOptions(), DecodingOptions()
    for name, value in EXPECTED.items():
        assert getattr(search, name) == value, name
        assert getattr(decode, name) == value, name


def test_service_settings_start_from_them():
    settings = Settings()
    assert (settings.default_beam_size, settings.length_penalty, settings.length_penalty_form, settings.max_length_ratio,
            settings.max_length_offset) == (5, 1.0, "power", 1.5, 10)


def test_evaluation_translation_and_training_validation_start_from_them():
    args = build_parser().parse_args(["--model-dir", "m", "--split", "s"])
    # The length penalty is the model's recipe's, else the default (a manifest without one: the shipped models).
    assert args.beam == 5 and length_penalty_of({"training": {"recipe": {}}}, args.length_penalty, args.length_penalty_form) == (1.0, "power")
    assert length_penalty_of({}, None, None) == (1.0, "power")
    params = inspect.signature(translate_batch).parameters
    assert (params["beam"].default, params["length_penalty"].default, params["max_length_ratio"].default,
            params["max_length_offset"].default) == (5, 1.0, 1.5, 10)
    fields = {f.name: f.default for f in TrainingRecipe.__dataclass_fields__.values()}
    assert (fields["decode_max_len_a"], fields["decode_max_len_b"], fields["decode_length_penalty"],
            fields["decode_length_penalty_form"]) == (1.5, 10, 1.0, "power")
    assert params["length_penalty_form"].default == "power"


def test_export_verification_starts_from_them():
    options = search_options(7)
    assert (options.beam_size, options.length_penalty, options.length_penalty_form, options.max_length_ratio,
            options.max_length_offset) == (7, 1.0, "power", 1.5, 10)
    assert inspect.signature(verify).parameters["beam_size"].default == 5
    assert ExportRequest.__dataclass_fields__["beam_size"].default == 5


def test_evaluation_takes_the_length_penalty_the_model_recipe_names():
    manifest = {"training": {"recipe": {"decode_length_penalty": 0.6, "decode_length_penalty_form": "gnmt"}}}
    assert length_penalty_of(manifest, None, None) == (0.6, "gnmt")
    assert length_penalty_of(manifest, 1.0, "power") == (1.0, "power")  # the command line wins
