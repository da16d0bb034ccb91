"""The PyTorch backend: eager model, our beam search, alignments from cross-attention."""
from __future__ import annotations

import logging
from collections.abc import Sequence

import torch

from model.alignment import token_alignment
from model.artifacts import LoadedModel, load_model_dir
from model.generate import SearchOptions, generate, pad_sources
from service.runtime.base import DecodeOptions, TextRejected, Translation, TranslationRuntime
from service.settings import Settings

log = logging.getLogger("service.runtime.torch")


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("device 'cuda' was asked for but torch sees no CUDA device")
    return torch.device(name)


class TorchRuntime(TranslationRuntime):
    backend = "torch"

    def __init__(self, loaded: LoadedModel, device: torch.device):
        self.loaded = loaded
        self.device = device
        self.source_lang = loaded.source_lang
        self.target_lang = loaded.target_lang
        # fp16 on GPU halves memory traffic; CPU kernels are fastest (and exact) in fp32.
        self.model = loaded.model.to(device=device, dtype=torch.float16 if device.type == "cuda" else torch.float32)
        self.max_source_tokens = loaded.config.max_positions - 1

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return [len(ids) for ids in self.loaded.tokenizer.encode_batch(list(texts))]

    def memory_bytes(self) -> int | None:
        return int(torch.cuda.memory_reserved(self.device)) if self.device.type == "cuda" else None

    def translate(self, texts: Sequence[str], options: DecodeOptions) -> list[list[Translation]]:
        tokenizer = self.loaded.tokenizer
        with_alignment = options.alignment == "token"
        if with_alignment:
            encoded = [tokenizer.encode_with_offsets(text) for text in texts]
            source_ids = [ids for ids, _, _ in encoded]
        else:
            source_ids = tokenizer.encode_batch(list(texts))
        for index, ids in enumerate(source_ids):
            if len(ids) + 1 > self.max_source_tokens:
                raise TextRejected(index, f"has {len(ids)} source tokens; this model reads at most {self.max_source_tokens - 1}")
        src = pad_sources([ids + [tokenizer.eos_id] for ids in source_ids], tokenizer.pad_id, self.device)
        search = SearchOptions(
            beam_size=options.beam_size,
            n_best=options.n_best,
            length_penalty=options.length_penalty,
            max_length_ratio=options.max_length_ratio,
            max_length_offset=options.max_length_offset,
            return_attention=with_alignment,
        )
        results = []
        for index, hypotheses in enumerate(generate(self.model, src, search)):
            translations = []
            for hypothesis in hypotheses:
                if not with_alignment:
                    translations.append(Translation(tokenizer.decode(hypothesis.tokens), hypothesis.score))
                    continue
                text, pieces, spans = tokenizer.decode_with_offsets(hypothesis.tokens)
                _, source_pieces, source_spans = encoded[index]
                # Columns: the source pieces only (EOS and padding dropped); rows: the target pieces.
                attention = hypothesis.attention[:, : len(source_pieces)].float().cpu()
                alignment = token_alignment(
                    source_text=texts[index], source_pieces=source_pieces, source_spans=source_spans,
                    target_text=text, target_pieces=pieces, target_spans=spans, attention=attention,
                )
                translations.append(Translation(text, hypothesis.score, alignment))
            results.append(translations)
        return results


def load_runtimes(settings: Settings) -> list[TranslationRuntime]:
    device = resolve_device(settings.device)
    runtimes: list[TranslationRuntime] = []
    for path in settings.model_dirs:
        loaded = load_model_dir(path, device="cpu")
        log.info("loaded %s (%s-%s) on %s", path, loaded.source_lang, loaded.target_lang, device)
        runtimes.append(TorchRuntime(loaded, device))
    return runtimes
