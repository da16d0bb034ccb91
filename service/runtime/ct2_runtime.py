"""The CTranslate2 backend: CTranslate2's own C++ beam search with our options mapped onto it
(beam size, n-best, length penalty with the same normalisation, per-sentence max length); token
alignments from the attention it returns (export/ct2_runner.py)."""
from __future__ import annotations

from service.runtime.base import TranslationRuntime
from service.runtime.exported import load_exported_runtimes
from service.settings import Settings


def load_runtimes(settings: Settings) -> list[TranslationRuntime]:
    return load_exported_runtimes(settings, "ct2")
