"""The CTranslate2 backend: CTranslate2's own C++ beam search with our options mapped onto it
(beam size, n-best, length penalty with the same normalisation, per-sentence max length); token
alignments from the attention it returns (export/ct2_runner.py). CTranslate2 normalises only by
|y|^α: settings asking for length_penalty_form "gnmt" are refused before any model loads."""
from __future__ import annotations

from model.length_penalty import ct2_problem
from service.runtime.base import TranslationRuntime
from service.runtime.exported import load_exported_runtimes
from service.settings import Settings


def load_runtimes(settings: Settings) -> list[TranslationRuntime]:
    why = ct2_problem(settings.length_penalty_form)
    if why is not None:  # Settings refuses it too; this holds for settings built without validation
        raise ValueError(f"PHRASAL_LENGTH_PENALTY_FORM: {why}")
    return load_exported_runtimes(settings, "ct2")
