"""A deterministic runtime for service tests (and the load benchmark's simulated server): no
model, but the real alignment path.

Translation rule: the source words in reverse order, upper-cased. Hypothesis k of the n-best is
that word order rotated left by k (so hypotheses differ), scored -0.5 * (k + 1); a sentence of
n words has at most n distinct hypotheses, so fewer than n_best may come back, as the runtime
contract allows.

Words longer than four characters are cut into two SentencePiece-style pieces ("▁hel", "lo")
and the piece-level attention is built from the word permutation, then turned into words by
``model.alignments.word_alignment.token_alignment`` — the same function real backends use — so service tests
exercise subword merging and character offsets end to end. Attention of target piece t: 0.8
spread evenly over the pieces of the source word it translates, plus 0.2 spread evenly over all
source pieces.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from model.alignments.word_alignment import WORD_BOUNDARY, token_alignment
from model.alignments.phrase_pairs import PhraseMap, extracted_phrase_pairs
from service.runtime.cards import read_card
from service.catalog import ServedModel
from service.runtime.base import (
    BatchCancelled,
    DecodingOptions,
    TextRejected,
    Translation,
    TranslationRuntime,
    has_visible_text,
)

Span = tuple[int, int]
_WORD = re.compile(r"\S+")


def fake_pieces(text: str) -> tuple[list[str], list[Span], list[int]]:
    """SentencePiece-like pieces of ``text``: per piece its string, its span, and its word index.

    Like SentencePiece, a word-initial piece's span includes the whitespace before it (the
    "▁" stands for it); the alignment code trims that back off.
    """
    pieces: list[str] = []
    spans: list[Span] = []
    words: list[int] = []
    for w, match in enumerate(_WORD.finditer(text)):
        start, end = match.span()
        begin = start - 1 if start > 0 and text[start - 1].isspace() else start
        cut = start + 3 if end - start > 4 else end
        pieces.append(WORD_BOUNDARY + text[start:cut])
        spans.append((begin, cut))
        words.append(w)
        if cut < end:
            pieces.append(text[cut:end])
            spans.append((cut, end))
            words.append(w)
    return pieces, spans, words


class FakeRuntime(TranslationRuntime):
    """Reverses and upper-cases words; records every call so tests can check batching.

    ``delay_s``: each call sleeps ``batch_delay_s(len(texts))``, that long unless a subclass
    says otherwise (a stand-in for compute, for lifecycle tests).
    ``gate``: each call waits until the event is set, so a test can hold the worker busy and the
    queue full for as long as it likes; ``entered`` counts calls that reached the gate.
    """

    backend = "fake"

    def __init__(
        self,
        source_lang: str = "en",
        target_lang: str = "de",
        max_source_pieces: int = 64,
        *,
        delay_s: float = 0.0,
        gate: threading.Event | None = None,
    ) -> None:
        self.source_lang = source_lang
        self.target_lang = target_lang
        # Like a real model's position limit: longer texts are rejected (TextRejected -> 422).
        self.max_source_pieces = max_source_pieces
        self.delay_s = delay_s
        self.gate = gate
        self.entered = threading.Semaphore(0)
        self.calls: list[tuple[list[str], DecodingOptions]] = []
        self.warmups = 0
        self.cancelled = 0  # calls given up because nobody waited for them
        self.closed = False
        self._lock = threading.Lock()  # translate runs in worker threads
        self._local = threading.local()  # the cancellation of the call a thread is in

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return [len(fake_pieces(text)[0]) for text in texts]

    def warmup(self) -> None:
        self.warmups += 1

    def close(self) -> None:
        self.closed = True

    def batch_delay_s(self, batch_size: int) -> float:
        return self.delay_s

    def translate_until(
        self, texts: Sequence[str], options: DecodingOptions, cancelled: Callable[[], bool]
    ) -> list[list[Translation]]:
        """``translate`` (a subclass's too), its delay given up once ``cancelled()``."""
        self._local.cancelled = cancelled
        try:
            return self.translate(texts, options)
        finally:
            self._local.cancelled = None

    def translate(self, texts: Sequence[str], options: DecodingOptions) -> list[list[Translation]]:
        # The delay is slept in slices, like decoding steps, so that a cancellation stops it.
        cancelled = getattr(self._local, "cancelled", None)
        with self._lock:
            self.calls.append((list(texts), options))
        self.entered.release()
        if self.gate is not None:
            self.gate.wait()
        delay_s = self.batch_delay_s(len(texts))
        if cancelled is None:
            if delay_s:
                time.sleep(delay_s)
        else:
            end = time.monotonic() + delay_s
            while (left := end - time.monotonic()) > 0:
                if cancelled():
                    self.cancelled += 1
                    raise BatchCancelled()
                time.sleep(min(left, 0.01))
        for k, text in enumerate(texts):
            if not has_visible_text(text):
                # The service answers empty texts itself; getting one is a caller bug.
                raise ValueError(f"text {k} is empty; runtimes only receive non-empty texts")
            n_pieces = len(fake_pieces(text)[0])
            if n_pieces > self.max_source_pieces:
                raise TextRejected(
                    k, f"has {n_pieces} source tokens; this model reads at most {self.max_source_pieces}"
                )
        return [self._translate_one(text, options) for text in texts]

    def _translate_one(self, text: str, options: DecodingOptions) -> list[Translation]:
        words = _WORD.findall(text)
        reverse = list(range(len(words)))[::-1]
        results = []
        for k in range(min(options.n_best, len(words))):
            order = reverse[k:] + reverse[:k]  # target word j translates source word order[j]
            target = " ".join(words[i].upper() for i in order)
            alignment = None
            phrase_map = None
            if options.alignment != "none":
                alignment = self._align(text, target, order)
            if options.alignment == "phrase":
                phrase_map = PhraseMap("extracted", extracted_phrase_pairs(alignment))
            results.append(Translation(text=target, score=-0.5 * (k + 1), alignment=alignment, phrase_map=phrase_map))
        return results

    def force_align(self, pairs: Sequence[tuple[str, str]], method: str) -> list:
        """Given translations aligned as if each reversed its source: target word j <- source word n-1-j.
        Holds at the gate like ``translate``."""
        self.entered.release()
        if self.gate is not None:
            self.gate.wait()
        out = []
        for source, target in pairs:
            n_source = len(set(fake_pieces(source)[2]))
            n_target = len(set(fake_pieces(target)[2]))
            out.append(self._align(source, target, [(n_source - 1 - j) % n_source if n_source else 0
                                                    for j in range(n_target)]))
        return out

    @staticmethod
    def _align(source: str, target: str, order: list[int]):
        src_pieces, src_spans, src_word = fake_pieces(source)
        tgt_pieces, tgt_spans, tgt_word = fake_pieces(target)
        n_src = len(src_pieces)
        attention = []  # (T_pieces, S_pieces)
        for j in tgt_word:
            aligned = [s for s in range(n_src) if src_word[s] == order[j]]
            row = [0.2 / n_src] * n_src
            for s in aligned:
                row[s] += 0.8 / len(aligned)
            attention.append(row)
        return token_alignment(
            source_text=source,
            source_pieces=src_pieces,
            source_spans=src_spans,
            target_text=target,
            target_pieces=tgt_pieces,
            target_spans=tgt_spans,
            attention=attention,
        )


def pair_of(path: Path) -> tuple[str, str]:
    """The pair a model directory's name starts with: "models/en-de-align" serves en-de."""
    source, _, rest = Path(path).name.partition("-")
    return source or "en", rest.partition("-")[0] or "de"


def fake_runtimes(settings, **options) -> list[ServedModel]:
    """A runtime factory for ``create_app``: one FakeRuntime per ``settings.model_dirs`` entry, its
    pair read from the directory's name, served under that name with the directory's card (a
    model_card.json there, the model_domains setting), no model read."""
    return [ServedModel(read_card(path, settings.model_domains), FakeRuntime(*pair_of(path), **options))
            for path in settings.model_dirs]
