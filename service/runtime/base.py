"""The one interface between the service and its translation backends (docs/design.md §2).

Everything in ``service`` outside ``service/runtime`` sees only this module: a runtime serves one
language pair, takes a batch of non-empty texts and decoding options, and returns n-best
translations (with word alignments when asked). Backends (torch, onnxruntime, ctranslate2) are the
only files that import their engines; the service never imports them directly except through the
runtime factory.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Literal

from model.decoding.length_penalty import ct2_problem
from model.decoding.options import AlignmentMethod, AlignmentMode, DecodingOptions, n_best_problem
from model.alignments.word_alignment import TokenAlignment, Word, pharaoh
from model.text import compatibility
from model.text.invisible import has_visible_text
from model.text.language_code import normalise_language_code
from model.alignments.bidirectional import bidirectional_alignment
from model.alignments.phrase_pairs import PhraseMap, PhrasePair, extracted_phrase_pairs
from model.decoding.length_penalty import length_normaliser

__all__ = [
    "AlignmentMethod",
    "AlignmentMode",
    "BatchCancelled",
    "DecodingOptions",
    "ModelLoadFailed",
    "PhraseMap",
    "PhrasePair",
    "RuntimeProblem",
    "RuntimeUnavailable",
    "TextRejected",
    "TokenAlignment",
    "Translation",
    "TranslationRuntime",
    "ct2_problem",
    "extracted_phrase_pairs",
    "UnsupportedOption",
    "Word",
    "has_visible_text",
    "in_source_characters",
    "load_abandoned",
    "n_best_problem",
    "normalise_language_code",
    "pharaoh",
    "bidirectional_alignment",
]


class TextRejected(ValueError):
    """Raised by ``translate`` when a text is one this runtime cannot take (e.g. more source
    tokens than the model has positions). It is the client's doing, so the service answers 422
    naming that text, not 500. ``index`` is the position in the ``texts`` passed to ``translate``;
    ``reason`` is one readable line for the client (no internals)."""

    def __init__(self, index: int, reason: str) -> None:
        super().__init__(f"text {index}: {reason}")
        self.index = index
        self.reason = reason


class UnsupportedOption(ValueError):
    """A request option this runtime's backend cannot honour (e.g. alignments from an export
    without attention). Raised by ``check_options`` before any work is queued; the service
    answers 422 naming ``field`` (a request field, e.g. "alignment") with ``reason``."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


class BatchCancelled(Exception):
    """Raised by ``translate_until`` when ``cancelled()`` turned true before the batch finished:
    nobody waits for its results any more (every request in it timed out or left)."""


# Set by the service around a call of its runtime factory; once the event is set (SIGTERM during
# the load), a factory that can stop a load half-way (inference processes) stops it and raises
# ModelLoadFailed instead of making the shutdown wait for the whole load.
load_abandoned: ContextVar[threading.Event | None] = ContextVar("load_abandoned", default=None)


class ModelLoadFailed(RuntimeError):
    """A model could not be loaded. The message is one line that already names the error's type
    and the file at fault ("ArtifactError: models/en-de: missing manifest.json"), so it is shown
    as it is, not prefixed again."""


class RuntimeUnavailable(RuntimeError):
    """The runtime cannot take batches now (its inference process failed to restart and waits
    out a backoff): the service answers 503 with ``reason`` and ``retry_after`` seconds."""

    def __init__(self, reason: str, retry_after: int) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after


@dataclass(frozen=True)
class RuntimeProblem:
    """Why a loaded runtime cannot serve well now; /health/ready answers 503 with these.
    ``phase``: "stalled" (a model call has outlived the request deadline), "restarting" (its
    inference process is being replaced) or "failed" (a replacement failed to load; retried
    with backoff)."""

    phase: Literal["stalled", "restarting", "failed"]
    reason: str
def check_alignment_method(runtime: TranslationRuntime, options: DecodingOptions) -> None:
    """UnsupportedOption naming "alignment_method" when the runtime cannot give the asked method."""
    if options.alignment == "none" or options.method in runtime.alignment_methods:
        return
    raise UnsupportedOption(
        "alignment_method",
        f"{options.method!r} is not offered by the {runtime.backend} model serving {runtime.pair}; "
        f"it offers: {', '.join(runtime.alignment_methods)}",
    )


@dataclass(frozen=True)
class Translation:
    """One hypothesis: detokenised text, its ranking score (length-normalised log-prob), its
    word alignment when ``options.alignment`` is "token" or "phrase", and its phrase map when
    it is "phrase" (None otherwise, at no cost)."""

    text: str
    score: float
    alignment: TokenAlignment | None = None
    phrase_map: PhraseMap | None = None


def in_source_characters(source: str, text: str) -> str:
    """A translation the model did not write (a translation memory's) with `source`'s compatibility
    characters written back where it has their expansion, as the model's translations get them
    (model/text/compatibility.py): "Bitte warten …" answered "Please wait..." reads "Please wait…"."""
    return compatibility.restore(source, text)[0]


def given_translation(text: str, log_prob: float | None, tokens: int, options: DecodingOptions,
                      alignment: TokenAlignment | None) -> Translation:
    """A translation the model did not search for (a translation memory's) as a search would return
    it: its log-probability under the model over the length penalty of its `tokens` and EOS, as the
    search ranks (0.0 where the backend cannot score it: `log_prob` None), its forced alignment, and
    where a phrase map is asked for, the phrase pairs extracted from that alignment."""
    score = 0.0 if log_prob is None else log_prob / length_normaliser(
        tokens + 1, options.length_penalty, options.length_penalty_form)
    phrase_map = (PhraseMap("extracted", extracted_phrase_pairs(alignment))
                  if options.alignment == "phrase" and alignment is not None else None)
    return Translation(text, score, alignment, phrase_map)


class TranslationRuntime(ABC):
    """A loaded model serving one language pair.

    Subclasses set ``source_lang``, ``target_lang`` (e.g. "en", "de") and ``backend`` (e.g.
    "torch") — as class or instance attributes — and implement ``translate``.

    Threading: ``translate`` is synchronous and is called from worker threads, off the event
    loop, possibly from several threads at once; it must not keep per-call state on ``self``.
    """

    source_lang: str
    target_lang: str
    backend: str
    # The number format its linear layers compute in ("float32", "int8", "float16"); None where
    # the engine does not say (exports: whatever they were made with).
    precision: str | None = None

    @property
    def pair(self) -> str:
        """The pair as clients name it: "en-de"."""
        return f"{self.source_lang}-{self.target_lang}"

    @abstractmethod
    def translate(self, texts: Sequence[str], options: DecodingOptions) -> list[list[Translation]]:
        """Translate a batch.

        texts: strings with something visible (``has_visible_text``; the service answers the
        others itself, empty), in the source language.
        Returns one list per text, in order; each holds 1..options.n_best hypotheses, best first.
        Alignment character offsets index the given text (source) and the returned text (target).
        Raises ``TextRejected`` for a text the client must change (answered 422, naming it); any
        other exception is a failure that the service logs and answers with a generic 500.
        """

    def translate_until(
        self, texts: Sequence[str], options: DecodingOptions, cancelled: Callable[[], bool]
    ) -> list[list[Translation]]:
        """``translate``, giving up with ``BatchCancelled`` once ``cancelled()`` is true (the
        service calls this one). Backends that can stop a search between steps override it; by
        default the batch runs to its end."""
        return self.translate(texts, options)

    def health(self) -> RuntimeProblem | None:
        """None while the runtime serves normally; otherwise why not (``RuntimeProblem``).
        Called on every /health/ready: must be cheap and never block."""
        return None

    def restarts(self) -> int | None:
        """Restarts of this runtime's inference process so far (exported as a counter); None
        for a runtime without one."""
        return None
    # The alignment methods this runtime computes itself ("bidirectional" is the Translator's), and
    # the one it uses when a request names none and the server setting is "auto": the best measured
    # one it has (RESULTS.md, "Word alignments").
    alignment_methods: tuple[str, ...] = ("attention",)
    default_alignment_method: str = "attention"

    def check_options(self, options: DecodingOptions) -> None:
        """Raise ``UnsupportedOption`` for an option this backend lacks; this base checks the
        alignment method against ``alignment_methods``."""
        check_alignment_method(self, options)

    def force_align(self, pairs: Sequence[tuple[str, str]], method: str) -> list[TokenAlignment]:
        """Word alignments of given (source text, target text) pairs, the target forced through the
        model (no search), by one of ``alignment_methods``. The Translator's bidirectional method
        calls it on the reverse pair's runtime. Default: this backend cannot."""
        raise UnsupportedOption("alignment_method", f"the {self.backend} model serving {self.pair} cannot align "
                                                    f"given translations (forced decoding)")

    def score(self, pairs: Sequence[tuple[str, str]]) -> list[float] | None:
        """Each (source text, target text) pair's log-probability under the model, the target's
        pieces and EOS forced through it. The Translator's glossary replacements ask it which article
        agrees with a required German noun. Default: None, this backend cannot."""
        return None

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Source tokens per text, as the model would read them (EOS excluded). The batcher sizes
        batches with it and the service enforces ``max_source_tokens`` with it, so backends with a
        tokenizer override it; this default is an estimate (about four characters a piece).
        Cheap, thread-safe, never raises for any str."""
        return [max(1, (len(text) + 3) // 4) for text in texts]

    def memory_bytes(self) -> int | None:
        """Accelerator memory this runtime's device holds now (e.g. torch.cuda.memory_reserved),
        exported as a gauge; None where there is no such thing (CPU)."""
        return None

    def warmup(self) -> None:
        """Run once after loading, before the service reports healthy, so that the first user
        request does not pay for lazy initialisation (allocator, kernels, JIT). Backends with a
        cheaper or more thorough warm-up override it."""
        self.translate(["Hello world."], DecodingOptions(beam_size=2, n_best=1, alignment="phrase"))

    def close(self) -> None:
        """Release resources at shutdown (default: nothing to release)."""
