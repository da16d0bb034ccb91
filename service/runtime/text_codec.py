"""Text in, translations out: the tokenizer and alignment glue every beam-search backend shares.

A backend only turns source ids into n-best hypotheses; this module does what surrounds that:
pieces with character offsets when alignments are asked for, the source-length limit, the
search options, detokenised n-best texts with scores (distinct texts: see search_options), word alignments from attention rows, and
phrase maps: from the model's phrase attention where it has its own phrases (`native_phrases`),
otherwise by consistent extraction from the word alignment (model/alignments/phrase_pairs.py).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

from model.alignments.word_alignment import TokenAlignment, token_alignment
from model.decoding.beam_search import Hypothesis
from model.decoding.generate import SearchOptions
from model.alignments.phrase_pairs import PhraseMap, attended_phrase_pairs, extracted_phrase_pairs
from model.alignments.attention_phrases import phrase_links
from model.text.tokenizer import Tokenizer
from service.runtime.base import DecodeOptions, TextRejected, Translation

Encoded = tuple[list[int], list[str], list[tuple[int, int]]]


def search_options(options: DecodeOptions, native_phrases: bool = False) -> SearchOptions:
    # n-best lists are distinct texts: two token sequences can detokenise to one text ("▁a b" and
    # "▁ab"), so the search returns every finished hypothesis its beam holds (up to beam_size),
    # and the first n_best distinct texts are kept (_distinct).
    return SearchOptions(
        beam_size=options.beam_size,
        n_best=options.beam_size if options.n_best > 1 else 1,
        length_penalty=options.length_penalty,
        max_length_ratio=options.max_length_ratio,
        max_length_offset=options.max_length_offset,
        return_attention=options.alignment != "none",
        return_phrase_attention=native_phrases and options.alignment == "phrase",
        return_supervised_attention=options.alignment != "none" and options.alignment_method == "supervised",
    )


def translate_texts(
    tokenizer: Tokenizer,
    texts: Sequence[str],
    options: DecodeOptions,
    max_source_tokens: int,
    generate: Callable[[list[list[int]], SearchOptions], list[list[Hypothesis]]],
    native_phrases: bool = False,
) -> list[list[Translation]]:
    """Encode `texts`, refuse any over `max_source_tokens` pieces (EOS not counted), run
    `generate(source_ids, search_options)` and turn its hypotheses into translations.

    native_phrases: the model attends to source phrases itself (phrasal cross-attention, phrase
    representations), so `generate` can return each hypothesis' phrase attention."""
    with_alignment = options.alignment != "none"
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
    search = search_options(options, native_phrases)
    phrases = options.alignment == "phrase"
    for index, hypotheses in enumerate(generate(source_ids, search)):
        kept = _distinct(tokenizer, hypotheses, options.n_best)
        if encoded is None:
            results.append([Translation(text, h.score) for text, h in kept])
        else:
            results.append([_aligned(tokenizer, texts[index], encoded[index], h, phrases, options.alignment_method)
                            for _, h in kept])
    return results


def _distinct(tokenizer: Tokenizer, hypotheses: list[Hypothesis], n_best: int) -> list[tuple[str, Hypothesis]]:
    """The first ``n_best`` hypotheses (best first) whose detokenised texts differ: of two that
    read the same, the better-scored one stays."""
    kept: list[tuple[str, Hypothesis]] = []
    seen: set[str] = set()
    for hypothesis in hypotheses:
        text = tokenizer.decode(hypothesis.tokens)
        if text in seen:
            continue
        seen.add(text)
        kept.append((text, hypothesis))
        if len(kept) == n_best:
            break
    return kept


def alignment_rows(hypothesis: Hypothesis, method: str, n_source: int) -> list[list[float]]:
    """The (T, n_source) rows that align the hypothesis' T tokens by `method`: "attention" the step
    that predicts token k; "shift" the step that reads it (the next one; the EOS step reads the last
    token); "supervised" the supervised head at the step that reads it (its row 0 read BOS)."""
    if method == "attention":
        return hypothesis.attention[:, :n_source].float().cpu().tolist()
    if method == "shift":
        rows = hypothesis.attention[1:, :n_source].float().cpu().tolist()
        return rows + [hypothesis.final_attention[:n_source].float().cpu().tolist()]
    if method == "supervised":
        return hypothesis.supervised_attention[1:, :n_source].float().cpu().tolist()
    raise ValueError(f"unknown alignment method {method!r}")


def _aligned(
    tokenizer: Tokenizer, source_text: str, encoded: Encoded, hypothesis: Hypothesis, phrases: bool,
    method: str = "attention",
) -> Translation:
    text, pieces, spans = tokenizer.decode_with_offsets(hypothesis.tokens)
    _, source_pieces, source_spans = encoded
    # Columns: the source pieces only (EOS and padding dropped); rows: the target pieces.
    attention = alignment_rows(hypothesis, method, len(source_pieces))
    sides = dict(
        source_text=source_text, source_pieces=source_pieces, source_spans=source_spans,
        target_text=text, target_pieces=pieces, target_spans=spans,
    )
    # The supervised head's matrix is read both ways (the measured best hard links: RESULTS.md).
    alignment = token_alignment(attention=attention, symmetric=method == "supervised", **sides)
    phrase_map = _phrase_map(alignment, hypothesis, len(source_pieces), sides) if phrases else None
    return Translation(text, hypothesis.score, alignment, phrase_map)


def _phrase_map(alignment: TokenAlignment, hypothesis: Hypothesis, n_source: int, sides: dict) -> PhraseMap:
    table = getattr(hypothesis, "phrase_attention", None)
    if table is None:
        return PhraseMap("extracted", extracted_phrase_pairs(alignment))
    links = phrase_links(table.float().cpu(), source_length=n_source, top_k=1)
    return PhraseMap("attention", attended_phrase_pairs(links, **sides))
