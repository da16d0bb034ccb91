"""A request's texts as the model sees them, and the model's answers as the client gets them.

Before translation every text is read as its `format` (plain text, or inline html / xml) and its
placeholders and do-not-translate terms are taken out (service/protection/placement.py); the
model translates what is left. After it, everything taken out is put back by the hypothesis'
word alignment, and the alignment's words are re-addressed so that their offsets slice the
client's own strings (the original text, and the output with tags and placeholders back in).
A text with nothing to protect in plain-text format goes through untouched, at no cost.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from service.alignment_flags import alignment_flags
from service.errors import RequestError
from service.protection.markup import MarkupError, TextFormat
from service.glossary import GlossaryEntry
from service.protection.placeholders import PLACEHOLDER_STYLES, find_placeholders
from service.protection.placement import PreparedText, original_word, output_word, prepare, restore
from service.runtime.base import AlignmentMode, TokenAlignment, Translation
from service.served import Served

def prepare_texts(texts: Sequence[str], fmt: TextFormat, terms: Sequence[str],
                  glossary: Sequence[GlossaryEntry] = (), styles: Sequence[str] = PLACEHOLDER_STYLES) -> list[PreparedText]:
    prepared = []
    for index, text in enumerate(texts):
        try:
            prepared.append(prepare(text, fmt, terms, styles, glossary))
        except MarkupError as error:
            raise RequestError("text", f"malformed {fmt}: {error}", index, kind="malformed_markup") from None
    return prepared


def alignment_needed(prepared: Sequence[PreparedText], requested: AlignmentMode) -> AlignmentMode:
    """Putting things back needs the word alignment even when the client did not ask for it."""
    if requested != "none":
        return requested
    return "token" if any(p.protected or p.markup.tags or p.term_matches for p in prepared) else "none"


def serve(prepared: Sequence[PreparedText], results: Sequence[Sequence[Translation]],
          requested: AlignmentMode) -> list[list[Served]]:
    """Each translation with what was taken out put back, and its alignment's flags when the
    client asked for an alignment."""
    served = [[_serve_one(p, t, requested) for t in nbest] for p, nbest in zip(prepared, results)]
    if requested == "none":
        return served
    return [[_flagged(s) for s in nbest] for nbest in served]


def _flagged(served: Served) -> Served:
    alignment = served.translation.alignment
    return replace(served, flags=alignment_flags(alignment)) if alignment is not None else served


def _serve_one(prepared: PreparedText, translation: Translation, requested: AlignmentMode) -> Served:
    if prepared.untouched and prepared.fmt == "text" and not find_placeholders(translation.text, prepared.styles):
        return Served(translation, [])
    alignment = translation.alignment or TokenAlignment.empty()
    restored = restore(prepared, translation.text, alignment)
    if requested == "none":
        return Served(Translation(restored.text, translation.score), restored.placed, removed=restored.removed,
                      glossary=restored.glossary)
    readdressed = replace(
        alignment,
        source_words=[original_word(w, prepared) for w in alignment.source_words],
        target_words=[output_word(w, restored) for w in alignment.target_words],
    )
    return Served(replace(translation, text=restored.text, alignment=readdressed), restored.placed,
                  removed=restored.removed, glossary=restored.glossary)
