"""Unknown pieces in a translation written back as the source characters they stand for.

A model whose training targets held characters outside its vocabulary (the corpus has more
characters than the SentencePiece model kept) learns to write the unknown piece for a rare
character of the source, even one its vocabulary has, and SentencePiece renders it as " ⁇ ": "Aurimas Černius" came back as
"Aurimas  ⁇ ernius", "Save 💾 file" as " ⁇  speichern". No reader wants " ⁇ ", and the character
it stands for is nearly always one the source has and the translation lacks, so each unknown
piece is replaced by such a character of the source, in the source's order:

- the candidates are the source's characters, not letters or digits of ASCII and not whitespace,
  that the translation has fewer of than the source; those outside ASCII and not punctuation
  first (letters, symbols, emoji), then the rest outside ASCII, then ASCII's: an unknown piece is
  a rare letter or sign far more often than a missing "!", and a translation writes quotation
  marks of its own (“…” becomes »…«);
- adjacent candidates form one run ("💾💾"); with as many unknown pieces as runs, piece k is run k;
  with as many as characters, piece k is character k; otherwise the first pieces take the runs
  in order and the rest are dropped (no candidate left: dropped).

A piece is replaced with the two spaces SentencePiece writes around it: the pieces beside it bring
their own ("▁" before a word), so "Weight  ⁇  5 kg" becomes "Weight ≥ 5 kg" and "Ωμ ⁇ γα" "Ωμέγα".
"""
from __future__ import annotations

import unicodedata
from collections import Counter
from collections.abc import Sequence

from model.text.edits import Span, apply, moved


def restore(source: str, text: str, unknown: Sequence[Span],
            spans: Sequence[Span] | None = None) -> tuple[str, list[Span] | None]:
    """`text` with each of its `unknown` spans (where SentencePiece wrote an unknown piece, its
    spaces included) replaced by the source characters it stands for; `spans` (character spans
    into `text`, such as its pieces') moved to the new text, an unknown piece's covering what
    replaced it."""
    if not unknown:
        return text, None if spans is None else list(spans)
    replacements = _replacements(source, _without(text, unknown), len(unknown))
    edits = []
    for begin, end, written in sorted(_dropping_a_space(text, b, e) if taken is None
                                      else (b, e, _spaced(source, taken, text, b, e))
                                      for (b, e), taken in zip(unknown, replacements)):
        # a space the edit before already dropped is not dropped again ("a:  ⁇  ⁇ " with both dropped)
        begin = max(begin, edits[-1][1]) if edits else begin
        if begin < end or written:
            edits.append((begin, max(begin, end), written))
    return apply(text, edits), None if spans is None else moved(edits, spans)


def _spaced(source: str, taken: Span, text: str, begin: int, end: int) -> str:
    """The source's characters `taken`, with the space the source has beside them where the
    translation would otherwise run them into a word ("⌘⌥⇧ shortcuts": "⌘⌥⇧ Tastenkürzel", not
    "⌘⌥⇧Tastenkürzel")."""
    start, stop = taken
    written = source[start:stop]
    if stop < len(source) and source[stop].isspace() and end < len(text) and text[end].isalnum():
        written += " "
    if start > 0 and source[start - 1].isspace() and begin > 0 and text[begin - 1].isalnum():
        written = " " + written
    return written


def _dropping_a_space(text: str, begin: int, end: int) -> tuple[int, int, str]:
    """The edit that drops an unknown piece: with one of the two spaces that would meet where it
    stood ("a  ⁇  b" is "a b"), or the space it would leave at the text's start or end."""
    before = begin > 0 and text[begin - 1] == " "
    after = end < len(text) and text[end] == " "
    if after and (before or begin == 0):
        end += 1
    elif before and end == len(text):
        begin -= 1
    return begin, end, ""


def _without(text: str, unknown: Sequence[Span]) -> str:
    kept, last = [], 0
    for begin, end in sorted(unknown):
        kept.append(text[last:begin])
        last = end
    return "".join(kept) + text[last:]


def _replacements(source: str, translated: str, count: int) -> list[Span | None]:
    """The source span each of `count` unknown pieces stands for, None for one dropped."""
    missing = Counter(source) - Counter(translated)
    candidates = [i for i, ch in enumerate(source)
                  if missing[ch] and not ch.isspace() and not (ch.isascii() and ch.isalnum())]
    tiers = ([i for i in candidates if not source[i].isascii() and not unicodedata.category(source[i]).startswith("P")],
             [i for i in candidates if not source[i].isascii()], candidates)
    chosen = next((tier for tier in tiers if tier), [])
    runs: list[Span] = []
    for i in chosen:
        if runs and runs[-1][1] == i:
            runs[-1] = (runs[-1][0], i + 1)
        else:
            runs.append((i, i + 1))
    characters = [(i, i + 1) for i in chosen]
    if count == len(runs):
        taken = runs
    elif count == len(characters):
        taken = characters
    else:
        taken = runs[:count]
    return list(taken) + [None] * (count - len(taken))
