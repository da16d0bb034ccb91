"""Word alignments built by hand for the protection tests: every expected position is known."""
from __future__ import annotations

from model.alignments.word_alignment import TokenAlignment, Word


def words(text: str) -> list[Word]:
    """The words of `text` split at single spaces, with their character offsets."""
    out, at = [], 0
    for w in text.split(" "):
        if w:
            out.append(Word(w, at, at + len(w)))
        at += len(w) + 1
    return out


def aligned(source: str, target: str, hard: list[tuple[int, int]]) -> TokenAlignment:
    """`hard` links (source word, target word), each target word's whole weight on its link."""
    links = [[] for _ in words(target)]
    for s, t in hard:
        links[t] = [(s, 1.0)]
    return TokenAlignment(words(source), words(target), links, hard, "")
