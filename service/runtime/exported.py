"""A runtime over any exported model (ONNX, TorchScript, CTranslate2), engine-free itself.

The runtime factory (service/runtime/factory.py) opens the export with
``export.runners.open_runner`` — the same runner the exporter verified against eager PyTorch — and
hands it here; this class does what TorchRuntime does around the model: pieces
with character offsets, the source-length limit, n-best texts and scores, word alignments
through ``model.alignments.word_alignment.token_alignment`` from the attention rows the runner returns, and
phrase maps: from the model's own phrase attention when the export outputs it (phrasal
cross-attention, phrase representations: the decoder-step graph's "phrase_attention", equal to
eager's), otherwise extracted from the word alignment — exactly as TorchRuntime chooses.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

from model.decoding.generate import SearchCancelled
from model.text.tokenizer import Tokenizer
from service.runtime.base import (BatchCancelled, DecodingOptions, Translation, TranslationRuntime, UnsupportedOption,
                                  check_alignment_method)
from service.runtime.text_codec import translate_texts

log = logging.getLogger("service.runtime")


class ExportedRuntime(TranslationRuntime):
    def __init__(self, runner, backend: str):
        exported = runner.exported
        self.runner = runner
        self.backend = backend
        self.source_lang = exported.source_lang
        self.target_lang = exported.target_lang
        self.tokenizer = Tokenizer(exported.tokenizer_path)
        # What it was made with (python -m export ... --dtype / CTranslate2's quantization).
        self.precision = exported.options.get("quantization") or exported.options.get("dtype")
        # Source pieces + EOS must fit the positions (the last one is kept for the target's EOS).
        self.max_source_tokens = exported.config.max_positions - 2
        # Our beam search (ONNX, TorchScript) keeps the EOS step's row, which shift-att needs; the
        # exported step graph has no supervised head's output, and CTranslate2 runs its own search.
        self.alignment_methods = ("attention",) if backend == "ct2" else ("attention", "shift")
        self.default_alignment_method = "attention"

    def check_options(self, options: DecodingOptions) -> None:
        check_alignment_method(self, options)
        if options.alignment != "none" and not self.runner.has_attention:
            raise UnsupportedOption(
                "alignment",
                f"the {self.backend} export serving {self.pair} returns no attention, so it cannot give "
                f'{options.alignment} alignments; ask with alignment="none"',
            )
        if options.alignment == "phrase" and not self.runner.has_phrase_attention:
            # An export whose manifest does not say how it gives phrase attention: a phrasal
            # model's map would silently change kind.
            raise UnsupportedOption(
                "alignment",
                f"the {self.backend} export serving {self.pair} was made without its phrase attention, so it "
                'cannot give phrase alignments; re-export it, or ask with alignment="token"',
            )

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return [len(ids) for ids in self.tokenizer.encode_batch(list(texts))]

    def warmup(self) -> None:
        alignment = "none" if not self.runner.has_attention else "phrase" if self.runner.has_phrase_attention else "token"
        self.translate(["Hello world."], DecodingOptions(beam_size=2, n_best=1, alignment=alignment))

    def translate(self, texts: Sequence[str], options: DecodingOptions) -> list[list[Translation]]:
        self.check_options(options)
        return translate_texts(
            self.tokenizer, texts, options, self.max_source_tokens, self.runner.generate, self.runner.is_phrasal
        )

    def translate_until(
        self, texts: Sequence[str], options: DecodingOptions, cancelled: Callable[[], bool]
    ) -> list[list[Translation]]:
        """Stops between decoding steps once ``cancelled()`` (``BatchCancelled``); CTranslate2
        only before its call, or between the steps of a greedy search (export/ct2_runner.py)."""
        self.check_options(options)
        try:
            return translate_texts(self.tokenizer, texts, options, self.max_source_tokens,
                                   partial(self.runner.generate, should_stop=cancelled), self.runner.is_phrasal)
        except SearchCancelled:
            raise BatchCancelled() from None


def load_exported_runtime(path: Path, device: str, backend: str) -> ExportedRuntime:
    """The export at ``path``, checked (sha256 of every file, target, passed verification) before
    it is served."""
    from export.runners import open_runner  # engines load only when a backend is chosen

    runner = open_runner(path, device=device, target=backend)
    log.info("loaded %s (%s %s) for %s", path, backend, runner.exported.options, runner.exported.pair)
    return ExportedRuntime(runner, backend)
