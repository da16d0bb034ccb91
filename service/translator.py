"""What a translate request means, apart from HTTP: pick the runtime for the pair, apply the
server's limits and defaults, answer empty texts directly, and run the rest in a worker thread.

Runtimes are synchronous (torch and friends release the GIL in their kernels), so they run in
worker threads through ``anyio.to_thread`` and never block the event loop; a capacity limiter
bounds how many run at once.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import anyio
import anyio.to_thread

from service.errors import RequestError, TranslationFailed, UnsupportedPair
from service.runtime.base import (
    AlignmentMode,
    DecodeOptions,
    TextRejected,
    TokenAlignment,
    Translation,
    TranslationRuntime,
)
from service.settings import Settings

log = logging.getLogger("service")


class Translator:
    def __init__(self, runtimes: Sequence[TranslationRuntime], settings: Settings) -> None:
        if not runtimes:
            raise ValueError("no runtime loaded: nothing to serve")
        by_pair: dict[tuple[str, str], TranslationRuntime] = {}
        for runtime in runtimes:
            if not isinstance(runtime, TranslationRuntime):
                raise TypeError(
                    f"{type(runtime).__name__} is not a service.runtime.base.TranslationRuntime"
                )
            key = (runtime.source_lang, runtime.target_lang)
            if key in by_pair:
                raise ValueError(f"two runtimes serve {runtime.pair}")
            by_pair[key] = runtime
        self._runtimes = by_pair
        self._settings = settings
        self._limiter = anyio.CapacityLimiter(settings.worker_threads)

    @property
    def runtimes(self) -> list[TranslationRuntime]:
        return list(self._runtimes.values())

    @property
    def pairs(self) -> list[str]:
        return sorted(runtime.pair for runtime in self._runtimes.values())

    def runtime_for(self, source: str, target: str) -> TranslationRuntime:
        runtime = self._runtimes.get((source, target))
        if runtime is None:
            raise UnsupportedPair(source, target, self.pairs)
        return runtime

    def check_limits(self, texts: Sequence[str], single: bool) -> None:
        limits = self._settings
        if len(texts) > limits.max_segments:
            raise RequestError(
                ("body", "text"), f"at most {limits.max_segments} texts per request, got {len(texts)}"
            )
        for index, text in enumerate(texts):
            if len(text) > limits.max_chars:
                loc: tuple[str | int, ...] = ("body", "text") if single else ("body", "text", index)
                raise RequestError(loc, f"at most {limits.max_chars} characters per text, got {len(text)}")

    def options(self, beam_size: int | None, n_best: int, alignment: AlignmentMode) -> DecodeOptions:
        settings = self._settings
        # An omitted beam is the server default, widened so that the n_best asked for exist.
        beam = beam_size if beam_size is not None else max(settings.default_beam_size, n_best)
        return DecodeOptions(
            beam_size=beam,
            n_best=n_best,
            alignment=alignment,
            max_length_ratio=settings.max_length_ratio,
            max_length_offset=settings.max_length_offset,
            length_penalty=settings.length_penalty,
        )

    async def translate(
        self,
        texts: Sequence[str],
        source: str,
        target: str,
        *,
        beam_size: int | None = None,
        n_best: int = 1,
        alignment: AlignmentMode = "none",
        single: bool = False,
    ) -> list[list[Translation]]:
        """One n-best list per text, in order. ``single``: the client sent one string, not a
        list (only changes how errors name the field)."""
        runtime = self.runtime_for(source, target)
        self.check_limits(texts, single)
        options = self.options(beam_size, n_best, alignment)

        results: list[list[Translation] | None] = [None] * len(texts)
        todo = []
        for index, text in enumerate(texts):
            if text.strip():
                todo.append(index)
            else:
                # Nothing to translate: answer without a model call (and without its cost).
                empty = TokenAlignment.empty() if options.alignment == "token" else None
                results[index] = [Translation(text="", score=0.0, alignment=empty)]
        if todo:
            batch = [texts[index] for index in todo]
            try:
                out = await self._run(runtime, batch, options)
            except TextRejected as exc:
                index = todo[exc.index] if 0 <= exc.index < len(todo) else None
                loc: tuple[str | int, ...] = ("body", "text")
                if index is not None and not single:
                    loc = (*loc, index)
                raise RequestError(loc, exc.reason, kind="text_rejected") from exc
            for index, nbest in zip(todo, out):
                results[index] = nbest
        return results  # type: ignore[return-value]  # every slot is filled above

    async def _run(
        self, runtime: TranslationRuntime, batch: list[str], options: DecodeOptions
    ) -> list[list[Translation]]:
        try:
            out = await anyio.to_thread.run_sync(runtime.translate, batch, options, limiter=self._limiter)
        except TextRejected:
            raise
        except Exception as exc:
            log.exception("%s runtime %s failed on a batch of %d", runtime.backend, runtime.pair, len(batch))
            raise TranslationFailed() from exc
        if len(out) != len(batch) or any(not 1 <= len(nbest) <= options.n_best for nbest in out):
            log.error(
                "%s runtime %s broke its contract: %d texts in, n-best sizes %s out (n_best=%d)",
                runtime.backend, runtime.pair, len(batch), [len(nbest) for nbest in out], options.n_best,
            )
            raise TranslationFailed()
        return out
