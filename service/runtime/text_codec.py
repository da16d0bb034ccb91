"""Text in, translations out: the tokenizer and alignment glue every beam-search backend shares.

A backend only turns source ids into n-best hypotheses; this module does what surrounds that:
pieces with character offsets when alignments are asked for, the source-length limit, the
search options, detokenised n-best texts with scores, and word alignments from attention rows.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

from model.alignment import token_alignment
from model.beam_search import Hypothesis
from model.generate import SearchOptions
from model.tokenizer import Tokenizer
from service.runtime.base import DecodeOptions, TextRejected, Translation

Encoded = tuple[list[int], list[str], list[tuple[int, int]]]


def search_options(options: DecodeOptions) -> SearchOptions:
    return SearchOptions(
        beam_size=options.beam_size,
        n_best=options.n_best,
        length_penalty=options.length_penalty,
        max_length_ratio=options.max_length_ratio,
        max_length_offset=options.max_length_offset,
        return_attention=options.alignment == "token",
    )


def translate_texts(
    tokenizer: Tokenizer,
    texts: Sequence[str],
    options: DecodeOptions,
    max_source_tokens: int,
    generate: Callable[[list[list[int]], SearchOptions], list[list[Hypothesis]]],
) -> list[list[Translation]]:
    """Encode `texts`, refuse any over `max_source_tokens` pieces (EOS not counted), run
    `generate(source_ids, search_options)` and turn its hypotheses into translations."""
    with_alignment = options.alignment == "token"
    encoded: list[Encoded] | None = None
    if with_alignment:
        encoded = [tokenizer.encode_with_offsets(text) for text in texts]
        source_ids = [ids for ids, _, _ in encoded]
    else:
        source_ids = tokenizer.encode_batch(list(texts))
    for index, ids in enumerate(source_ids):
        if len(ids) > max_source_tokens:
            raise TextRejected(index, f"has {len(ids)} source tokens; this model reads at most {max_source_tokens}")
    results = []
    for index, hypotheses in enumerate(generate(source_ids, search_options(options))):
        if encoded is None:
            results.append([Translation(tokenizer.decode(h.tokens), h.score) for h in hypotheses])
        else:
            results.append([_aligned(tokenizer, texts[index], encoded[index], h) for h in hypotheses])
    return results


def _aligned(tokenizer: Tokenizer, source_text: str, encoded: Encoded, hypothesis: Hypothesis) -> Translation:
    text, pieces, spans = tokenizer.decode_with_offsets(hypothesis.tokens)
    _, source_pieces, source_spans = encoded
    # Columns: the source pieces only (EOS and padding dropped); rows: the target pieces.
    attention = hypothesis.attention[:, : len(source_pieces)].float().cpu()
    alignment = token_alignment(
        source_text=source_text, source_pieces=source_pieces, source_spans=source_spans,
        target_text=text, target_pieces=pieces, target_spans=spans, attention=attention,
    )
    return Translation(text, hypothesis.score, alignment)
