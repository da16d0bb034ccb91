"""A runtime over any exported model (ONNX, TorchScript, CTranslate2), engine-free itself.

The backend files (onnx_runtime.py, torchscript_runtime.py, ct2_runtime.py) open the export
with ``export.runners.open_runner`` — the same runner the exporter verified against eager
PyTorch — and hand it here; this class does what TorchRuntime does around the model: pieces
with character offsets, the source-length limit, n-best texts and scores, and word alignments
through ``model.alignment.token_alignment`` from the attention rows the runner returns.
"""
from __future__ import annotations

import logging
from collections.abc import Sequence

from model.alignment import token_alignment
from model.generate import SearchOptions
from model.tokenizer import Tokenizer
from service.runtime.base import DecodeOptions, TextRejected, Translation, TranslationRuntime, UnsupportedOption

log = logging.getLogger("service.runtime")


class ExportedRuntime(TranslationRuntime):
    def __init__(self, runner, backend: str):
        exported = runner.exported
        self.runner = runner
        self.backend = backend
        self.source_lang = exported.source_lang
        self.target_lang = exported.target_lang
        self.tokenizer = Tokenizer(exported.tokenizer_path)
        # Source pieces + EOS must fit the positions (the last one is kept for the target's EOS).
        self.max_source_tokens = exported.config.max_positions - 2

    def check_options(self, options: DecodeOptions) -> None:
        if options.alignment == "token" and not self.runner.has_attention:
            raise UnsupportedOption(
                "alignment",
                f"the {self.backend} export serving {self.pair} returns no attention, so it cannot give "
                'token alignments; ask with alignment="none"',
            )

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return [len(ids) for ids in self.tokenizer.encode_batch(list(texts))]

    def warmup(self) -> None:
        alignment = "token" if self.runner.has_attention else "none"
        self.translate(["Hello world."], DecodeOptions(beam_size=2, n_best=1, alignment=alignment))

    def translate(self, texts: Sequence[str], options: DecodeOptions) -> list[list[Translation]]:
        self.check_options(options)
        with_alignment = options.alignment == "token"
        if with_alignment:
            encoded = [self.tokenizer.encode_with_offsets(text) for text in texts]
            source_ids = [ids for ids, _, _ in encoded]
        else:
            source_ids = self.tokenizer.encode_batch(list(texts))
        for index, ids in enumerate(source_ids):
            if len(ids) > self.max_source_tokens:
                raise TextRejected(index, f"has {len(ids)} source tokens; this model reads at most {self.max_source_tokens}")
        search = SearchOptions(
            beam_size=options.beam_size,
            n_best=options.n_best,
            length_penalty=options.length_penalty,
            max_length_ratio=options.max_length_ratio,
            max_length_offset=options.max_length_offset,
            return_attention=with_alignment,
        )
        results = []
        for index, hypotheses in enumerate(self.runner.generate(source_ids, search)):
            translations = []
            for hypothesis in hypotheses:
                if not with_alignment:
                    translations.append(Translation(self.tokenizer.decode(hypothesis.tokens), hypothesis.score))
                    continue
                text, pieces, spans = self.tokenizer.decode_with_offsets(hypothesis.tokens)
                _, source_pieces, source_spans = encoded[index]
                # Columns: the source pieces only (EOS and padding dropped); rows: the target pieces.
                attention = hypothesis.attention[:, : len(source_pieces)]
                alignment = token_alignment(
                    source_text=texts[index], source_pieces=source_pieces, source_spans=source_spans,
                    target_text=text, target_pieces=pieces, target_spans=spans, attention=attention,
                )
                translations.append(Translation(text, hypothesis.score, alignment))
            results.append(translations)
        return results


def load_exported_runtimes(settings, backend: str) -> list[TranslationRuntime]:
    """One runtime per ``settings.export_dirs`` entry; each export is checked (sha256 of every
    file, target, passed verification) before it is served."""
    from export.runners import open_runner  # engines load only when a backend is chosen

    runtimes: list[TranslationRuntime] = []
    for path in settings.export_dirs:
        runner = open_runner(path, device=settings.device, target=backend)
        log.info("loaded %s (%s %s) for %s", path, backend, runner.exported.options, runner.exported.pair)
        runtimes.append(ExportedRuntime(runner, backend))
    return runtimes
