"""Text in, translations out: the tokenizer and alignment glue every beam-search backend shares.

A backend only turns source ids into n-best hypotheses; this module does what surrounds that:
pieces with character offsets when alignments are asked for, the source-length limit, the
search's options, detokenised n-best texts with scores (distinct texts: DecodingOptions.every_finished), word
alignments from attention rows, and
phrase maps: from the model's phrase attention where it is a phrasal model (`is_phrasal`),
otherwise by consistent extraction from the word alignment (model/alignments/phrase_pairs.py).
"""
from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import replace

from model.alignments.word_alignment import TokenAlignment, token_alignment
from model.decoding.beam_search import Hypothesis
from model.alignments.phrase_pairs import PhraseMap, attended_phrase_pairs, extracted_phrase_pairs
from model.alignments.attention_phrases import phrase_links
from model.text import compatibility, unknown
from model.text.edits import apply, moved
from model.text.tokenizer import Tokenizer
from model.decoding.options import DecodingOptions, MethodRows
from service.runtime.base import TextRejected, Translation

Encoded = tuple[list[int], list[str], list[tuple[int, int]]]


def translate_texts(
    tokenizer: Tokenizer,
    texts: Sequence[str],
    options: DecodingOptions,
    max_source_tokens: int,
    generate: Callable[[list[list[int]], DecodingOptions], list[list[Hypothesis]]],
    is_phrasal: bool = False,
    link_threshold: float = 0.0,
) -> list[list[Translation]]:
    """Encode `texts`, refuse any over `max_source_tokens` pieces (EOS not counted), run
    `generate(source_ids, options)` (with every finished hypothesis kept and, where the model has
    its own, the phrase attention) and turn its hypotheses into translations.

    is_phrasal: the model attends to source phrases itself (phrasal cross-attention, phrase
    representations), so `generate` can return each hypothesis' phrase attention. link_threshold: the
    supervised head's hard-link threshold (model.alignments.symmetrisation.matrix_links)."""
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
    search = replace(options.every_finished(), return_phrase_attention=is_phrasal and options.alignment == "phrase")
    with_phrase_map = options.alignment == "phrase"
    for index, hypotheses in enumerate(generate(source_ids, search)):
        kept = _distinct(tokenizer, texts[index], hypotheses, options.n_best)
        if encoded is None:
            results.append([Translation(text, h.score) for text, h in kept])
        else:
            results.append([_aligned(tokenizer, texts[index], encoded[index], h, with_phrase_map, options.method_rows,
                                     link_threshold) for _, h in kept])
    return results


def _distinct(tokenizer: Tokenizer, source: str, hypotheses: list[Hypothesis], n_best: int) -> list[tuple[str, Hypothesis]]:
    """The first ``n_best`` hypotheses (best first) whose detokenised texts differ: of two that
    read the same, the better-scored one stays. Texts carry `source`'s characters back (`_restored`)."""
    kept: list[tuple[str, Hypothesis]] = []
    seen: set[str] = set()
    for hypothesis in hypotheses:
        text, _ = _restored(source, tokenizer.decode(hypothesis.tokens), tokenizer.unknown_spans(hypothesis.tokens))
        if text in seen:
            continue
        seen.add(text)
        kept.append((text, hypothesis))
        if len(kept) == n_best:
            break
    return kept


def _restored(source: str, text: str, unknown_spans: list[tuple[int, int]],
              spans: list[tuple[int, int]] | None = None) -> tuple[str, list[tuple[int, int]] | None]:
    """A decoded translation with the source's characters written back: where the model wrote an
    unknown piece for one (model/text/unknown.py), then where the tokenizer expanded a compatibility
    character (model/text/compatibility.py), a space run made one space (`_single_spaced`), and
    no space after an opening bracket the source does not space (`_bracket_spaced`); `spans` moved
    with the text."""
    text, spans = unknown.restore(source, text, unknown_spans, spans)
    text, spans = compatibility.restore(source, text, spans)
    text, spans = _single_spaced(text, spans)
    return _bracket_spaced(source, text, spans)


_EXTRA_SPACES = re.compile(r"^ +|(?<= ) +| +$")


def _single_spaced(text: str, spans: list[tuple[int, int]] | None) -> tuple[str, list[tuple[int, int]] | None]:
    """SentencePiece decodes a bare "▁" piece before a word as a second space ("Drag an atom or a  Binding",
    a De->En software translation), and one before the end as a trailing space; the models learned
    text with every space run one space and none at the ends, so such spaces are that slip, never
    the source's layout (service/layout.py keeps that)."""
    return _without(_EXTRA_SPACES, text, spans)


_SPACE_IN_BRACKET = re.compile(r"(?<=[(\[{<]) (?=[^\W_])")
_SPACED_BRACKET = re.compile(r"[(\[{<] ")


def _bracket_spaced(source: str, text: str, spans: list[tuple[int, int]] | None
                    ) -> tuple[str, list[tuple[int, int]] | None]:
    """No space between an opening bracket and the word after it where the source writes none: the
    models decoded a word-start piece after "(" ("nscd exited normal ( signal %d)", "< Datum kann nicht
    ausgegeben werden>"; 7 of the 4,110 software validation outputs, both directions). A source
    that writes "( " anywhere (":( ", "(< 20") keeps the model's spacing."""
    if not _SPACE_IN_BRACKET.search(text) or _SPACED_BRACKET.search(source):
        return text, spans
    return _without(_SPACE_IN_BRACKET, text, spans)


def _without(pattern: re.Pattern[str], text: str, spans: list[tuple[int, int]] | None
             ) -> tuple[str, list[tuple[int, int]] | None]:
    """`text` with what `pattern` matches taken out, `spans` moved with it."""
    edits = [(m.start(), m.end(), "") for m in pattern.finditer(text)]
    if not edits:
        return text, spans
    return apply(text, edits), None if spans is None else moved(edits, spans)


def alignment_rows(hypothesis: Hypothesis, rows: MethodRows, n_source: int) -> list[list[float]]:
    """The (T, n_source) rows that align the hypothesis' T tokens (`METHOD_ROWS`). The search keeps
    T token attention rows and the EOS step's apart (needed only from offset 1), and T + 1
    supervised rows (row 0 read BOS)."""
    if rows.name == "attention":
        steps = hypothesis.attention[:, :n_source].float().cpu().tolist()
        if rows.offset:
            steps.append(hypothesis.final_attention[:n_source].float().cpu().tolist())
    else:
        steps = hypothesis.supervised_attention[:, :n_source].float().cpu().tolist()
    return steps[rows.offset: rows.offset + len(hypothesis.tokens)]


def _aligned(
    tokenizer: Tokenizer, source_text: str, encoded: Encoded, hypothesis: Hypothesis, with_phrase_map: bool,
    rows: MethodRows, link_threshold: float = 0.0,
) -> Translation:
    text, pieces, spans, unknown_spans = tokenizer.decode_with_unknown(hypothesis.tokens)
    text, spans = _restored(source_text, text, unknown_spans, spans)
    _, source_pieces, source_spans = encoded
    # Columns: the source pieces only (EOS and padding dropped); rows: the target pieces.
    attention = alignment_rows(hypothesis, rows, len(source_pieces))
    sides = dict(
        source_text=source_text, source_pieces=source_pieces, source_spans=source_spans,
        target_text=text, target_pieces=pieces, target_spans=spans,
    )
    # The supervised head's matrix is read both ways (the measured best hard links: RESULTS.md).
    supervised = rows.name == "supervised_attention"
    alignment = token_alignment(attention=attention, symmetric=supervised,
                                link_threshold=link_threshold if supervised else 0.0, **sides)
    phrase_map = _phrase_map(alignment, hypothesis, len(source_pieces), sides) if with_phrase_map else None
    return Translation(text, hypothesis.score, alignment, phrase_map)


def _phrase_map(alignment: TokenAlignment, hypothesis: Hypothesis, n_source: int, sides: dict) -> PhraseMap:
    table = getattr(hypothesis, "phrase_attention", None)
    if table is None:
        return PhraseMap("extracted", extracted_phrase_pairs(alignment))
    links = phrase_links(table.float().cpu(), source_length=n_source, top_k=1)
    return PhraseMap("attention", attended_phrase_pairs(links, **sides))
