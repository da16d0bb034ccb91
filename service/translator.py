"""What a translate request means, apart from HTTP: pick the model for the pair (the one the
request names, else the one its texts choose where the pair is served by models of several domains
(service/domain_routing.py), else the pair's default: service/catalog.py), apply the server's limits, cut plain
texts into sentences and lines (service/layout.py), send a segment with placeholders as written and
take out what must not be translated where the model did not keep it (service/protected_translation.py),
answer segments with nothing visible directly, queue the rest on that model's ``MicroBatcher``, wait
for them within the request's deadline, put back what was taken out, and the segments' answers into
each text's layout.

Runtimes are synchronous (torch and friends release the GIL in their kernels); they run in the
batchers' worker threads and never block the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from typing import NamedTuple

import anyio.to_thread

from service.alignment_flags import AlignmentFlags, alignment_flags
from service.attributes import Attribute, translatable, written
from service.batcher import BatchLimits, MicroBatcher, TextRefused
from service.catalog import ServedModel, as_served_model, default_models, domain_candidates, routed_pairs
from service.domain_routing import AUTO, likeliest
from service.errors import DeadlineExceeded, NotReady, QueueTimeout, RequestError, UnsupportedPair
from service.full_stop import full_stop_as_source
from service.glossary import GlossaryEntry
from service.language_detection import Detection, LanguageDetector
from service.memory import MemoryMatch, Memories
from service.metrics import Metrics
from service.protected_translation import (alignment_needed, prepare_texts, serve, serve_as_written, serve_tags_out,
                                          tags_out, tried_as_written, tried_tags_out)
from service.protection.markdown import reads_as_markdown
from service.protection.markup import TAG, MarkupError, TextFormat, inline_markup, read_markup, reads_as_markup
from service.protection.placement import PreparedText
from service.icu import icu_split
from service.layout import Layout, assemble, markup_split, openings, split, whole
from service.protection.placeholders import PLACEHOLDER_STYLES, find_protected
from service.runtime.base import (
    AlignmentMethod,
    AlignmentMode,
    DecodingOptions,
    PhraseMap,
    RuntimeUnavailable,
    TokenAlignment,
    Translation,
    TranslationRuntime,
    UnsupportedOption,
    has_visible_text,
    in_source_characters,
    normalise_language_code,
    bidirectional_alignment,
    given_translation,
)
from service.served import MemoryUse, Served
from service.settings import Settings
from service.start_capital import capitalised
from service.upper_case import sentence_cased, upper_case, upper_cased

log = logging.getLogger("service")

# Counting tokens of more characters than this moves to a thread (SentencePiece takes ~5 ms for
# 100k characters; below this the thread hop costs more than the count).
_COUNT_INLINE_CHARS = 8192


class Answer(NamedTuple):
    """What ``translate_any`` answers: the source language used, its detection (None unless
    "auto"), the name of the model that translated, and one n-best list per text."""

    source: str
    detected: Detection | None
    model: str
    results: list[list[Served]]


class Translator:
    def __init__(self, models: Sequence[ServedModel | TranslationRuntime], settings: Settings,
                 metrics: Metrics | None = None, memories: Memories | None = None) -> None:
        """``models``: what is served, several per pair if need be; a bare runtime is a model named
        after its pair (service/catalog.py ``as_served_model``). ``memories``: the translation
        memories whose segments are answered as stored (service/memory.py)."""
        if not models:
            raise ValueError("no runtime loaded: nothing to serve")
        by_name: dict[str, ServedModel] = {}
        for item in models:
            model = as_served_model(item, settings.model_domains)
            runtime = model.runtime
            for side, code in (("source", runtime.source_lang), ("target", runtime.target_lang)):
                # Requests name codes in this form (service/schemas.py): another form is a pair
                # that would be reported ready and that no request could reach.
                try:
                    normal = normalise_language_code(code)
                except ValueError as exc:
                    raise ValueError(f"the {runtime.backend} runtime for {runtime.pair!r}: {side} language {exc}") from None
                if normal != code:
                    raise ValueError(
                        f"the {runtime.backend} runtime for {runtime.pair!r}: {side} language {code!r} must be "
                        f"written {normal!r}"
                    )
            if model.name in by_name:
                raise ValueError(f"two models are named {model.name!r}")
            if model.name == AUTO:
                raise ValueError(f"a model may not be named {AUTO!r}: a request's \"model\": \"{AUTO}\" asks its texts to choose")
            by_name[model.name] = model
        self._models = by_name
        self._defaults = default_models(list(by_name.values()), settings.default_models)
        self._candidates = domain_candidates(list(by_name.values()))
        self._routed = routed_pairs(self._candidates, settings.default_models)
        self._settings = settings
        self._metrics = metrics
        self.memories = memories if memories is not None else Memories()
        if metrics is not None:
            served = {model.pair for model in by_name.values()}
            for memory in self.memories.memories:
                for pair in memory.sizes():
                    if pair in served:
                        metrics.memory_hits.labels(pair=pair, memory=memory.name)
        if metrics is not None:  # every series exists from the first scrape
            for candidates in self._candidates.values():
                for model in candidates:
                    metrics.chosen.labels(pair=model.pair, model=model.name)
        limits = BatchLimits(
            max_sentences=settings.max_batch_sentences,
            max_tokens=settings.max_batch_tokens,
            max_wait_s=settings.max_wait_ms / 1000,
            max_queue=settings.max_queue,
            workers=settings.worker_threads,
            retry_after_s=settings.retry_after_s,
        )
        self._batchers = {name: MicroBatcher(model.runtime, limits, metrics, model=name) for name, model in by_name.items()}
        # Forced alignments (/align) do not go through the batchers; this bounds how many run at
        # once, as the batchers' workers bound the searches, so that a flood of them queues here
        # (and times out as a 503) instead of taking every thread beside the searches.
        self._forced_slots = asyncio.Semaphore(settings.worker_threads)
        self._detector: LanguageDetector | None = None

    def start(self) -> None:
        """Start the batchers' workers (from the serving event loop)."""
        for batcher in self._batchers.values():
            batcher.start()

    async def stop(self) -> None:
        for batcher in self._batchers.values():
            await batcher.stop()

    @property
    def runtimes(self) -> list[TranslationRuntime]:
        return [model.runtime for model in self._models.values()]

    @property
    def models(self) -> list[ServedModel]:
        """Every served model, in the order served."""
        return list(self._models.values())

    def is_default(self, model: ServedModel) -> bool:
        """Whether it may answer a request that names no model: its pair's default, or one its texts
        may choose."""
        routed = self._routed.get(model.key)
        return model in routed if routed is not None else self._defaults[model.key] is model

    def default_name(self, pair_key: tuple[str, str]) -> str:
        """What answers the pair when a request names no model: a model's name, or "auto"."""
        return AUTO if pair_key in self._routed else self._defaults[pair_key].name

    @property
    def pairs(self) -> list[str]:
        return sorted({model.pair for model in self._models.values()})

    @property
    def queued(self) -> int:
        return sum(batcher.queued for batcher in self._batchers.values())

    @property
    def detector(self) -> LanguageDetector:
        """Source-language detection among the served source languages (built on first use)."""
        if self._detector is None:
            self._detector = LanguageDetector(sorted({source for source, _ in self._defaults}))
        return self._detector

    def detect(self, text: str) -> list[Detection]:
        """The served source languages `text` may be in, likeliest first."""
        return self.detector.rank(text)

    def resolve_source(self, texts: Sequence[str], source: str, target: str) -> tuple[str, Detection | None]:
        """`source`, or for "auto" the served source language detected in the texts (all together)."""
        if source != "auto":
            return source, None
        detection = self.detector.detect(" ".join(texts))
        if detection is None:
            raise RequestError("source", "auto: no served source language can be detected; name one",
                               kind="undetectable_language")
        if detection.language == target:
            raise RequestError("source", f"auto: the texts are in {detection.language}, the target "
                               "language; choose another target", kind="source_is_target")
        return detection.language, detection

    def model_for(self, source: str, target: str, name: str | None = None, texts: Sequence[str] = ()) -> ServedModel:
        """The model named ``name``; for None, the one ``texts`` choose where the pair is routed by
        domain (``default_name`` is "auto"), else the pair's default; for "auto", the one ``texts``
        choose among the pair's domains, whatever the default. A RequestError naming "model" when no
        model of that name serves the pair."""
        default = self._defaults.get((source, target))
        if default is None:
            raise UnsupportedPair(source, target, self.pairs)
        if name is None or name == AUTO:
            candidates = (self._routed if name is None else self._candidates).get(default.key)
            if candidates is None or not texts:
                return default
            chosen = candidates[likeliest([model.scorer for model in candidates], texts)]  # type: ignore[misc]
            if self._metrics is not None:
                self._metrics.chosen.labels(pair=chosen.pair, model=chosen.name).inc()
            return chosen
        model = self._models.get(name)
        if model is not None and model.key == (source, target):
            return model
        offered = ", ".join(m.name + (" (default)" if self.is_default(m) else "") for m in self._models.values()
                            if m.key == default.key)
        if model is None:
            raise RequestError("model", f"no model named {name!r} is served; {default.pair} is served by: {offered}",
                               kind="unknown_model")
        raise RequestError("model", f"{name!r} serves {model.pair}, not {default.pair}; {default.pair} is served by: "
                           f"{offered}", kind="model_of_another_pair")

    def runtime_for(self, source: str, target: str) -> TranslationRuntime:
        return self.model_for(source, target).runtime

    @property
    def defaults(self) -> DecodingOptions:
        """The server's decoding options, which a request's own override (service/settings.py)."""
        return self._settings.decoding

    def check_limits(self, texts: Sequence[str], field: str = "text") -> None:
        limits = self._settings
        if len(texts) > limits.max_segments:
            raise RequestError(field, f"at most {limits.max_segments} texts per request, got {len(texts)}")
        for index, text in enumerate(texts):
            if len(text) > limits.max_chars:
                raise RequestError(field, f"at most {limits.max_chars} characters per text, got {len(text)}", index)

    def alignment_method(self, model: ServedModel, asked: str | None) -> str:
        """The request's method, else the server setting, else ("auto") the best measured one:
        "bidirectional" where the other direction is served by a model of the same domain and both
        have a supervised head (results/alignment.md: better on the gold dev set than either head
        alone), else the model's own default. A reverse model of another domain does not help (the
        software model with the caption De->En model: gold AER 0.204 either way, agreement with
        eflomal on the software test split 0.148 against 0.145 alone, results/alignment.md), so it
        is used only when a request asks for "bidirectional"."""
        runtime = model.runtime
        if asked is not None:
            return asked
        setting = self._settings.alignment_method
        if setting != "auto":
            return setting
        reverse = self._served_reverse(model, same_domain=True)
        if runtime.default_alignment_method == "supervised" and reverse is not None \
                and reverse.default_alignment_method == "supervised":
            return "bidirectional"
        return runtime.default_alignment_method

    async def translate(self, texts: Sequence[str], source: str, target: str, *rest, **options) -> list[list[Served]]:
        """``translate_with_model``'s n-best lists (the same arguments), without the model."""
        return (await self.translate_with_model(texts, source, target, *rest, **options))[1]

    async def translate_with_model(
        self,
        texts: Sequence[str],
        source: str,
        target: str,
        options: DecodingOptions | None = None,
        fmt: TextFormat = "text",
        terms: Sequence[str] = (),
        glossary: Sequence[GlossaryEntry] = (),
        styles: Sequence[str] = PLACEHOLDER_STYLES,
        model: str | None = None,
        memory: bool = True,
    ) -> tuple[ServedModel, list[list[Served]]]:
        """The model that translated, and one n-best list per text, in order. ``options``: the
        server's ``defaults`` unless given; an alignment_method of None is the server's choice
        (``alignment_method``). ``fmt``, ``terms``, ``glossary`` and ``styles``: how to read the
        texts, what to keep untranslated, which translations to require, which placeholder styles
        to keep (service/protection, service/glossary.py); ``model``: which of the pair's models
        translates (None: the pair's default or the one its texts choose, ``model_for``); ``memory``:
        whether segments a translation memory holds are answered from it (``_memory_hits``). Raises
        ``RequestError``, ``QueueFull`` / ``QueueTimeout``, ``DeadlineExceeded``, ``TranslationFailed``."""
        options = options if options is not None else self.defaults
        self.check_limits(texts)  # on the texts as sent, before anything is taken out
        attributes: list[list[Attribute]] = [[] for _ in texts]
        parents = list(range(len(texts)))

        def cut_and_prepare() -> tuple[list[Layout], list[PreparedText], ServedModel]:
            layouts, found, segment_styles, segment_formats = [], [], [], []
            unlabelled = tuple(style for style in styles if style != "accelerator")
            # The texts, then the attribute values of those read as html (service/attributes.py),
            # each a plain text of its own; parents[k]: the text sent that item k is (part of).
            items: list[tuple[str, TextFormat]] = [(text, fmt) for text in texts]
            k = 0
            while k < len(items):
                text, item_fmt = items[k]
                k += 1
                # Markup is read for its placeholders later; here only for an ICU argument.
                protected = find_protected(text, terms, styles) if item_fmt == "text" or "{" in text else []
                # an argument inside a tag is its attribute's (Angular's disp="{n, plural, …}")
                if item_fmt != "text" and protected:
                    tags = [tag.span() for tag in TAG.finditer(text)]
                    protected = [p for p in protected if not any(a <= p.start < b for a, b in tags)]
                # A plural or select argument: a whole sentence per branch (service/icu.py), each read
                # as html where it is a line of inline markup (format.js's "{n, plural, one {<b>#</b>
                # file} ...}": read as html whole, its syntax reached the model, "{n, Plural, ein {").
                branched = icu_split(text, protected, terms, styles)
                if branched is not None and not (memory and self.memories.lookup(source, target, text) is not None):
                    layout, branch_found, branch_styles = branched
                    layouts.append(layout)
                    formats = [item_fmt if item_fmt != "text" else _plain_format(segment.text, True)
                               for segment in layout.segments]
                    segment_formats += formats
                    found += [parts if f == "text" else None for f, parts in zip(formats, branch_found)]
                    segment_styles += branch_styles
                    continue
                # A plain text that is a line of well-formed inline markup is read as html; so is such a
                # line of a longer text, once cut. Markup inside an ICU argument that stays whole keeps
                # the text plain, the argument one placeholder: read as markup, its syntax would reach
                # the model as words.
                icu_markup = any(p.kind == "icu" and "<" in p.text for p in protected)
                text_fmt = "text" if icu_markup else "html" if item_fmt == "text" and reads_as_markup(text) else item_fmt
                if text_fmt != "text":
                    protected = []
                layout = split(text, protected, source) if text_fmt == "text" else markup_split(text, text_fmt, source)
                if memory and len(layout.segments) > 1 and self.memories.lookup(source, target, text) is not None:
                    layout = whole(text)  # a memory holding the text whole answers it whole ("U.S. Outlying Islands")
                if k <= len(texts) and text_fmt == "html":
                    attributes[k - 1] = _attributes(text, source, target)
                    items += [(a.text, "text") for a in attributes[k - 1] if a.given is None]
                    parents.extend([k - 1] * (len(items) - len(parents)))
                layouts.append(layout)
                # Nor is a sentence cut from such a text read as markup: its argument would go as words.
                formats = [("text" if icu_markup else _plain_format(segment.text, not layout.whole)) if text_fmt == "text"
                           else _plain_format(segment.text, True) if item_fmt == "text" else text_fmt
                           for segment in layout.segments]
                segment_formats += formats
                # A text translated whole has the parts split() read: prepare need not read them again.
                found += [protected] if formats == ["text"] and layout.whole else [None] * len(layout.segments)
                # An accelerator marks a label, a whole line: a sentence cut from a line without one has
                # none either ("Key_ids dürfen nur einmal vorkommen." after "Doppelte key_id ...").
                labels = _labelled_lines(text) if text_fmt == "text" and not layout.whole else None
                segment_styles += [None if labels is None or text.count("\n", 0, segment.origin[0]) in labels
                                   else unlabelled for segment in layout.segments]
            segments = [segment.text for layout in layouts for segment in layout.segments]
            try:
                prepared = prepare_texts(segments, segment_formats, terms, glossary, styles, found, segment_styles)
            except RequestError as error:
                # Only markup is refused here (malformed), and malformed markup is one segment whose
                # offsets are its text's; the index is the segment's.
                if error.index is not None:
                    error.index = parents[_owners(layouts)[error.index]]
                raise
            # Where the pair is routed by domain, the words choose the model, not the markup and
            # placeholders the service keeps whatever the model (a caption in <b> is a caption).
            return layouts, prepared, self.model_for(source, target, model, [p.model_text for p in prepared])

        # Like counting tokens, cutting, reading and scoring many characters moves off the event loop.
        if sum(len(text) for text in texts) <= _COUNT_INLINE_CHARS:
            layouts, prepared, chosen = cut_and_prepare()
        else:
            layouts, prepared, chosen = await anyio.to_thread.run_sync(cut_and_prepare)
        owner = [parents[k] for k in _owners(layouts)]
        wanted = options.n_best
        if wanted > 1 and any(p.term_matches for p in prepared):
            # Enforcing the terms can make hypotheses alike (`_distinct`): the beam's other
            # finished ones fill the list. The search is the same; only more of it is kept.
            options = replace(options, n_best=max(wanted, options.beam_size))
        try:
            asked = options.alignment
            options = replace(options, alignment=alignment_needed(prepared, asked))
            opening = [opens for layout in layouts for opens in openings(layout)]
            served = await self._served(chosen, prepared, options, asked, memory, opening)
        except RequestError as error:
            if error.index is not None:  # a segment's: the client knows the text it is part of
                error.index = owner[error.index]
            raise
        results = []
        first = 0
        for layout in layouts:
            results.append(_distinct(assemble(layout, served[first:first + len(layout.segments)], asked))[:wanted])
            first += len(layout.segments)
        values = iter(results[len(texts):])
        for index, found in enumerate(attributes):
            if found:
                translations = [_best(next(values), a.text) if a.given is None else Served(Translation(a.given, 0.0), [])
                                for a in found]
                results[index] = [written(s, texts[index], found, translations) for s in results[index]]
        return chosen, results[:len(texts)]

    async def _served(self, model: ServedModel, prepared: list[PreparedText], options: DecodingOptions,
                      asked: AlignmentMode, memory: bool, opening: list[bool]) -> list[list[Served]]:
        """Each text a translation memory holds answered from it (``_memory_hits``), as written: its
        glossary enforced on it, and kept only where it keeps the text's placeholders. The others
        translated as written where their placeholders may stay in (protected_translation
        ``tried_as_written``), the model is one that keeps them (``ServedModel.keeps_placeholders``)
        and it kept them all; the rest, and those where it did not, with them taken out and put back.
        A segment that ``opening`` says opens a line or follows a sentence starts with a capital
        where its source does (service/start_capital.py); a segment ends with a full stop only where
        its source ends with punctuation (service/full_stop.py)."""
        hits = self._memory_hits(model, prepared) if memory else {}
        remembered = await self._remembered(model, [(_remembered_text(prepared[i]), hit.target)
                                                    for i, hit in hits.items()], options) if hits else None
        if remembered is None:  # nothing held, or the backend cannot align given translations
            hits = {}
        keeps = model.keeps_placeholders  # read off the card once a request, not once a segment
        # A memory's answer is taken as written, but for a label's accelerator: that is placed in it
        # as in the model's translation of the label without it.
        as_written = [(not _marked(p)) if index in hits else (keeps and tried_as_written(p))
                      for index, p in enumerate(prepared)]
        # Markup whose placeholders may stay in but whose tags may not: sent with only its tags out.
        without_tags = {index: tags_out(p) for index, p in enumerate(prepared)
                        if keeps and index not in hits and tried_tags_out(p)}
        searched = [index for index in range(len(prepared)) if index not in hits]
        first: list[list[Translation]] = [[] for _ in prepared]
        for index, nbest in zip(hits, remembered or ()):
            first[index] = nbest
        for index, nbest in zip(searched, await self._translate(
                model, [prepared[i].original if as_written[i] else without_tags[i].model_text if i in without_tags
                        else prepared[i].model_text for i in searched], options)):
            first[index] = nbest
        rescore = self._glossary_rescorer(model, prepared)
        articles = model.runtime.target_lang == "de"  # the determiners placement.py knows are German
        # A word the model's vocabulary holds whole ("Dialog"): where a term may cut a compound.
        known_word = (lambda word: model.runtime.count_tokens([word]) == [1]) if rescore is not None else None
        served: list[list[Served] | None] = [None] * len(prepared)

        def put_back(indices: list[int], results: list[list[Translation]], first_pass: bool) -> None:
            for index, nbest in zip(indices, results):
                stored = first_pass and index in hits
                if first_pass and as_written[index]:
                    served[index] = serve_as_written(prepared[index], nbest, asked, rescore, articles, known_word,
                                                     stored=stored)
                elif first_pass and index in without_tags:
                    served[index] = serve_tags_out(prepared[index], without_tags[index], nbest, asked)
                else:
                    served[index] = serve([prepared[index]], [nbest], asked, rescore, articles, known_word)[0]
                if not stored and served[index] is not None:
                    served[index] = [full_stop_as_source(s, prepared[index]) for s in served[index]]
                    if prepared[index].fmt in ("text", "markdown") and opening[index]:
                        served[index] = [capitalised(s, prepared[index]) for s in served[index]]

        async def finish(indices: list[int], results: list[list[Translation]], first_pass: bool) -> None:
            if rescore is None:
                put_back(indices, results, first_pass)
            else:  # the model's scores come from the inference process: off the event loop
                await anyio.to_thread.run_sync(put_back, indices, results, first_pass)

        await finish(list(range(len(prepared))), first, True)
        for index, hit in hits.items():
            nbest = served[index]
            if nbest is None:  # the memory's translation lost a placeholder: the model translates it
                continue
            served[index] = [replace(s, memory=[MemoryUse(hit.memory, 0, len(prepared[index].original), 0,
                                                           len(s.translation.text))]) for s in nbest]
            if self._metrics is not None:
                self._metrics.memory_hits.labels(pair=model.pair, memory=hit.memory).inc()
        again = [index for index, s in enumerate(served) if s is None]
        if again:
            retried = await self._translate(model, [prepared[index].model_text for index in again], options)
            await finish(again, retried, False)
        return served  # type: ignore[return-value]  # every slot is filled above

    def _memory_hits(self, model: ServedModel, prepared: list[PreparedText]) -> dict[int, MemoryMatch]:
        """The plain-text segments a translation memory holds (service/memory.py), by index: not one
        with do-not-translate terms or protected glossary terms (a stored translation knows nothing
        of them), nor an accelerator beside placeholders, nor more tokens on either side than a forced
        pass may have. A label with an accelerator and nothing else protected is looked up without
        its marker ("_Cancel" as "Cancel")."""
        source, target = model.key
        if not self.memories.serves(source, target):
            return {}
        hits = {}
        for index, p in enumerate(prepared):
            if (p.fmt != "text" or p.protected_terms or not has_visible_text(p.original)
                    or any(part.kind == "term" for part in p.protected)
                    or (_marked(p) and any(part.kind != "accelerator" for part in p.protected))):
                continue
            text = _remembered_text(p)
            match = self.memories.lookup(source, target, text)
            if match is not None:
                hits[index] = replace(match, target=in_source_characters(text, match.target))
        limit = self._forced_token_limit(model.runtime)
        if hits and limit is not None:
            counts = model.runtime.count_tokens([_remembered_text(prepared[i]) for i in hits]
                                                + [h.target for h in hits.values()])
            sources, targets = counts[:len(hits)], counts[len(hits):]
            hits = {i: h for (i, h), s, t in zip(hits.items(), sources, targets) if s <= limit and t <= limit}
        return hits

    async def _remembered(self, model: ServedModel, pairs: list[tuple[str, str]],
                          options: DecodingOptions) -> list[list[Translation]] | None:
        """Each (segment, memory translation) pair as the one hypothesis of its segment: scored by the
        model as a search would rank it (its log-probability over the length penalty; 0.0 where the
        backend cannot score given translations) and, when an alignment is needed, aligned by the
        model forced through it (by the method a search would use). None where the backend cannot
        align given translations: the model translates those segments."""
        runtime = model.runtime
        aligning = options.alignment != "none"
        method = self.alignment_method(model, options.alignment_method)
        reverse = None
        if aligning and method == "bidirectional":
            reverse = self._reverse_runtime(model)
            method = runtime.default_alignment_method
        if aligning:
            _check_options(runtime, replace(options, alignment_method=method))

        def forced() -> tuple[list[float] | None, list[int], list[TokenAlignment] | None]:
            return (runtime.score(pairs), runtime.count_tokens([target for _, target in pairs]),
                    runtime.force_align(pairs, method) if aligning else None)

        try:
            async with self._forced_slot():
                scores, lengths, aligned = await anyio.to_thread.run_sync(forced)
        except UnsupportedOption:
            return None
        except RuntimeUnavailable as exc:  # its process restarting: the search would wait for it too
            raise NotReady.of(exc) from None
        except Exception:  # the stored translations go unused; the model translates those segments
            log.exception("scoring or aligning memory translations failed on %s", model.name)
            return None
        results = [[given_translation(target, None if scores is None else scores[k], lengths[k], options,
                                      aligned[k] if aligned is not None else None)]
                   for k, (_, target) in enumerate(pairs)]
        if reverse is not None:
            results = await self._symmetrised(reverse, [source for source, _ in pairs], results)
        return results

    def _glossary_rescorer(self, model: ServedModel, prepared: list[PreparedText]):
        """Where a glossary term may be placed: (source, candidate translations) -> the model's
        log-probabilities of them (None where it cannot score, or the scoring failed: the
        alignment's choice then stands, and a replaced German noun keeps the model's article)."""
        runtime = model.runtime
        if not any(p.term_matches for p in prepared):
            return None

        def rescore(source: str, candidates: list[str]) -> list[float] | None:
            try:
                return runtime.score([(source, candidate) for candidate in candidates])
            except Exception:  # the translation stands without it
                log.warning("scoring glossary candidates failed on %s", model.name, exc_info=True)
                return None

        return rescore

    async def translate_any(self, texts: Sequence[str], source: str, target: str, *rest, **options) -> Answer:
        """``translate_with_model`` (the same arguments) from ``source`` or, for "auto", from the
        served language detected in the texts."""
        source, detected = self.resolve_source(texts, source, target)
        chosen, results = await self.translate_with_model(texts, source, target, *rest, **options)
        return Answer(source, detected, chosen.name, results)

    async def _translate(self, model: ServedModel, texts: list[str],
                         options: DecodingOptions) -> list[list[Translation]]:
        runtime = model.runtime
        deadline = time.perf_counter() + self._settings.request_timeout_s
        method = self.alignment_method(model, options.alignment_method)
        reverse = None
        if options.alignment != "none" and method == "bidirectional":
            reverse = self._reverse_runtime(model)
            method = runtime.default_alignment_method  # the forward half; the reverse half is added below
        options = replace(options, alignment_method=method)
        _check_options(runtime, options)

        results: list[list[Translation] | None] = [None] * len(texts)
        todo = []
        for index, text in enumerate(texts):
            if has_visible_text(text):
                todo.append(index)
            else:
                # Nothing to translate (blank, or only zero-width, format, private-use or lone
                # combining characters: model/text/invisible.py): answer without a model call, which
                # would invent a sentence for it.
                empty = TokenAlignment.empty() if options.alignment != "none" else None
                empty_map = PhraseMap("extracted", []) if options.alignment == "phrase" else None
                results[index] = [Translation(text="", score=0.0, alignment=empty, phrase_map=empty_map)]
        if todo:
            # a text in capitals goes in sentence case, its translation back in capitals (service/upper_case.py)
            shouted = {index for index in todo if upper_case(texts[index])}
            batch = [sentence_cased(texts[index]) if index in shouted else texts[index] for index in todo]
            tokens = await self._count(runtime, batch)
            self._check_tokens(tokens, todo)
            self._check_cost(tokens, options)
            for index, nbest in zip(todo, await self._queue(model, batch, tokens, options, deadline, todo)):
                results[index] = [upper_cased(h, texts[index]) for h in nbest] if index in shouted else nbest
        if reverse is not None:
            results = await self._symmetrised(reverse, texts, results)  # type: ignore[arg-type]
        return results  # type: ignore[return-value]  # every slot is filled above

    def _served_reverse(self, model: ServedModel, same_domain: bool = False) -> TranslationRuntime | None:
        """The runtime of the other direction: its first served model of `model`'s domain, else
        (unless `same_domain`) its default model; None when there is none."""
        key = (model.runtime.target_lang, model.runtime.source_lang)
        reverse = next((m for m in self._models.values() if m.key == key and m.card.domain == model.card.domain),
                       None if same_domain else self._defaults.get(key))
        return reverse.runtime if reverse is not None else None

    def _reverse_runtime(self, model: ServedModel) -> TranslationRuntime:
        """The runtime of the other direction, for "bidirectional"; a 422 naming the field when not served."""
        runtime = model.runtime
        reverse = self._served_reverse(model)
        if reverse is None:
            raise RequestError(
                "alignment_method",
                f"'bidirectional' needs the reverse pair {runtime.target_lang}-{runtime.source_lang} served "
                f"(served: {', '.join(self.pairs)}); {runtime.pair} offers: {', '.join(runtime.alignment_methods)}",
                kind="unsupported_option",
            )
        return reverse

    async def _symmetrised(
        self, reverse: TranslationRuntime, texts: Sequence[str], results: list[list[Translation]]
    ) -> list[list[Translation]]:
        """Every hypothesis' forward links symmetrised with the reverse model's forced alignment of it."""
        pairs = [(h.text, text) for text, nbest in zip(texts, results) for h in nbest if h.text]
        try:
            aligned = await anyio.to_thread.run_sync(reverse.force_align, pairs, reverse.default_alignment_method)
        except UnsupportedOption as exc:
            raise _unsupported(exc) from exc
        except RuntimeUnavailable as exc:  # the reverse model's process restarting
            raise NotReady.of(exc) from None
        backward = iter(aligned)
        out = []
        for nbest in results:
            out.append([replace(h, alignment=_combined(h.alignment, next(backward))) if h.text else h for h in nbest])
        return out

    async def align(
        self,
        texts: Sequence[str],
        translations: Sequence[str],
        source: str,
        target: str,
        alignment_method: AlignmentMethod | None = None,
        model: str | None = None,
    ) -> tuple[str, str, list[tuple[TokenAlignment, AlignmentFlags]]]:
        """Word alignments of given translations (a reference, a post-edit, another system's
        output): each translation forced through the model (``model``, else the pair's default), no
        search. Returns the model's name, the method used and one alignment per pair, with its
        flags. Raises ``RequestError`` for the limits, the pair, the model or a method the model
        cannot give. A request naming no model is aligned as one to /translate is translated: by
        the pair's default, or where that is "auto" by the model its texts, as given, choose. Each
        model aligns best in its own domain (results/alignment.md: on the gold Europarl pairs the
        software model's head 0.202 AER, the caption models 0.343; on captions, against eflomal,
        the caption model 0.090, the software model 0.111)."""
        if model is not None and model != AUTO or sum(len(text) for text in texts) <= _COUNT_INLINE_CHARS:
            chosen = self.model_for(source, target, model, texts)
        else:  # scoring many characters for the choice by domain moves off the event loop
            chosen = await anyio.to_thread.run_sync(self.model_for, source, target, model, texts)
        runtime = chosen.runtime
        self.check_limits(texts)
        self.check_limits(translations, "translation")
        method = self.alignment_method(chosen, alignment_method)
        reverse = self._reverse_runtime(chosen) if method == "bidirectional" else None
        forward_method = runtime.default_alignment_method if reverse is not None else method
        options = DecodingOptions(beam_size=1, n_best=1, alignment="token", alignment_method=forward_method)
        _check_options(runtime, options)
        tokens = 0
        for aligner in (runtime,) if reverse is None else (runtime, reverse):
            for field, side in (("text", texts), ("translation", translations)):
                counts = await self._count(aligner, list(side))
                self._check_tokens(counts, list(range(len(side))), self._forced_token_limit(aligner), field)
                tokens += sum(counts) if aligner is runtime else 0
        # A forced pass costs what a search of beam 1 over both sides would.
        self._check_cost([tokens], options)
        pairs = list(zip(texts, translations))
        try:
            async with self._forced_slot():
                aligned = await anyio.to_thread.run_sync(runtime.force_align, pairs, forward_method)
                if reverse is not None:
                    swapped = [(translation, text) for text, translation in pairs]
                    backward = await anyio.to_thread.run_sync(reverse.force_align, swapped,
                                                              reverse.default_alignment_method)
                    aligned = [_combined(f, b) for f, b in zip(aligned, backward)]
        except UnsupportedOption as exc:
            raise _unsupported(exc) from exc
        except RuntimeUnavailable as exc:  # its process restarting: a 503 with when to retry, not a 500
            raise NotReady.of(exc) from None
        return chosen.name, method, [(alignment, alignment_flags(alignment)) for alignment in aligned]

    @contextlib.asynccontextmanager
    async def _forced_slot(self) -> AsyncIterator[None]:
        """One of the slots forced passes take turns in; a 503 when none frees within the deadline."""
        timeout = self._settings.request_timeout_s
        try:
            await asyncio.wait_for(self._forced_slots.acquire(), timeout)
        except asyncio.TimeoutError:
            raise QueueTimeout(f"server busy: not started within the {timeout:g} s deadline; retry later",
                               retry_after=self._settings.retry_after_s) from None
        try:
            yield
        finally:
            self._forced_slots.release()

    def _forced_token_limit(self, runtime: TranslationRuntime) -> int | None:
        """Tokens a side of a forced pair may have: the server's max_source_tokens and what the
        model's positions hold (the runtime checks that for a search, not for a forced pass)."""
        limits = [limit for limit in (self._settings.max_source_tokens, getattr(runtime, "max_source_tokens", None))
                  if limit is not None]
        return min(limits) if limits else None

    async def _count(self, runtime: TranslationRuntime, batch: list[str]) -> list[int]:
        if sum(len(text) for text in batch) <= _COUNT_INLINE_CHARS:
            counts = runtime.count_tokens(batch)
        else:
            counts = await anyio.to_thread.run_sync(runtime.count_tokens, batch)
        return [int(count) for count in counts]

    def _check_tokens(self, tokens: list[int], todo: list[int], limit: int | None = None,
                      field: str | None = None) -> None:
        """`limit`: the server's max_source_tokens unless given; `field`: a forced pair's side
        ("text" or "translation"), whose tokens are not only source tokens."""
        limit = self._settings.max_source_tokens if limit is None else limit
        if limit is None:
            return  # the runtime checks its own (TextRejected)
        for count, index in zip(tokens, todo):
            if count > limit:
                kind = "source tokens" if field is None else "tokens"
                raise RequestError(field or "text", f"has {count} {kind}; at most {limit} per text (max_source_tokens)",
                                   index, kind="too_many_tokens")

    def _check_cost(self, tokens: list[int], options: DecodingOptions) -> None:
        """The cost budget: source tokens x beam_size, summed over the texts. A search's work
        grows with the beams it carries and the steps it takes (about as many as the source has
        tokens), so a request over the budget could not finish inside the deadline on the
        hardware the budget was set for (docs/operations.md); refused before it costs anything."""
        budget = self._settings.max_request_cost
        if budget is None:
            return
        cost = sum(tokens) * options.beam_size
        if cost > budget:
            raise RequestError(
                "text",
                f"this request would cost {cost} ({sum(tokens)} source tokens x beam_size {options.beam_size}); "
                f"the budget is {budget} per request (max_request_cost): send fewer or shorter texts, or a smaller beam_size",
                kind="over_budget",
            )

    async def _queue(
        self,
        model: ServedModel,
        batch: list[str],
        tokens: list[int],
        options: DecodingOptions,
        deadline: float,
        todo: list[int],
    ) -> list[list[Translation]]:
        batcher = self._batchers[model.name]
        job = batcher.submit(batch, tokens, options)  # QueueFull at once when there is no room
        try:
            # shield: a timeout must not cancel the job's future before drop() looks at it.
            return await asyncio.wait_for(asyncio.shield(job.future), max(deadline - time.perf_counter(), 0))
        except asyncio.TimeoutError:
            timeout = self._settings.request_timeout_s
            if batcher.drop(job):
                raise DeadlineExceeded(f"translation took longer than the {timeout:g} s deadline") from None
            raise QueueTimeout(
                f"server busy: not started within the {timeout:g} s deadline; retry later",
                retry_after=self._settings.retry_after_s,
            ) from None
        except TextRefused as exc:
            raise RequestError("text", exc.reason, todo[exc.slot], kind="text_rejected") from exc
        finally:
            batcher.drop(job)  # a no-op once the job is done; on cancellation it frees the queue


def _labelled_lines(text: str) -> set[int]:
    """The lines of `text` (by index) that are labels with an accelerator read whole."""
    return {k for k, line in enumerate(text.split("\n")) if find_protected(line, (), ("accelerator",))}


def _plain_format(segment: str, cut: bool) -> TextFormat:
    """How a segment of a plain text is read: as html where it is a line of inline markup (a text is
    asked that before it is cut: `cut`, whether it was), as Markdown where it has emphasis or links
    (service/protection/markdown.py), both where it has both, else as plain text."""
    markup = inline_markup(segment) if cut else None
    if markup is not None:
        return "html-markdown" if reads_as_markdown(markup.plain) else "html"
    return "markdown" if reads_as_markdown(segment) else "text"


def _best(nbest: list[Served], otherwise: str) -> Served:
    return nbest[0] if nbest else Served(Translation(otherwise, 0.0), [])


def _attributes(text: str, source: str, target: str) -> list[Attribute]:
    """An html text's attribute values to translate (none where the markup is malformed: the text
    is refused where it is read for translation, naming the problem)."""
    try:
        return translatable(read_markup(text, "html"), source, target)
    except MarkupError:
        return []


def _distinct(nbest: list[Served]) -> list[Served]:
    """The n-best list without a repeated output text (the better-scored kept): enforcing a glossary
    makes hypotheses that differed only in the term's word alike ("Klicken Sie auf Anwenden, um"
    and "Klicken Sie auf, um" both become "Klicken Sie auf Übernehmen, um"), so a request with
    terms keeps every hypothesis the beam finished until this has run."""
    seen: set[str] = set()
    distinct = []
    for served in nbest:
        if served.translation.text not in seen:
            seen.add(served.translation.text)
            distinct.append(served)
    return distinct


def _owners(layouts: list[Layout]) -> list[int]:
    """Per segment, the index of the text it was cut from."""
    return [index for index, layout in enumerate(layouts) for _ in layout.segments]


def _marked(prepared: PreparedText) -> bool:
    """Whether the segment has an accelerator marker the service took out."""
    return any(part.kind == "accelerator" for part in prepared.protected)


def _remembered_text(prepared: PreparedText) -> str:
    """What a memory is asked for and forced through: the segment as written, a label without its
    accelerator marker (the model's text of it)."""
    return prepared.model_text if _marked(prepared) else prepared.original


def _check_options(runtime: TranslationRuntime, options: DecodingOptions) -> None:
    try:
        runtime.check_options(options)
    except UnsupportedOption as exc:
        raise _unsupported(exc) from exc


def _unsupported(exc: UnsupportedOption) -> RequestError:
    return RequestError(exc.field, exc.reason, kind="unsupported_option")


def _combined(forward: TokenAlignment, backward: TokenAlignment) -> TokenAlignment:
    """The bidirectional alignment of a pair, or the forward one where the two models split a text
    into different words (their links cannot be matched; SentencePiece models with other
    normalisation rules can do that)."""
    try:
        return bidirectional_alignment(forward, backward)
    except ValueError as exc:
        log.warning("bidirectional alignment fell back to the forward model's: %s", exc)
        return forward
