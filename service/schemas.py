"""HTTP request and response bodies of the translation API.

Request checks that need no server state live here (types, bounds, n_best <= beam_size) so that
FastAPI reports them as 422 with the field in ``loc``; checks that need settings or the loaded
models (text limits, language pair) live in ``service.translator``. A request's decoding fields
become one ``DecodingOptions`` here (``TranslateRequest.decoding_options``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from service.alignment_flags import AlignmentFlags
from service.catalog import MODEL_NAME, ServedModel
from service.glossary_schemas import GLOSSARY_RULES, EntryIn, TermReportOut
from service.protection.placeholders import PLACEHOLDER_STYLES
from service.protection.placement import Placed
from service.runtime.base import (AlignmentMethod, AlignmentMode, DecodingOptions, PhraseMap, TokenAlignment, Word,
                                  n_best_problem)
from service.served import MemoryUse, Served
from service.settings import MAX_BEAM_SIZE



# After trimming and lower-casing: "en", "de", "pt-br", "zh_hans"; with max_length=16 the same
# rule as a model's manifest codes (model/text/language_code.py), so every served pair is reachable.
LANGUAGE_CODE = r"^[A-Za-z0-9_-]+$"


def _valid_unicode(text: str, index: int | None) -> None:
    # JSON can spell a lone surrogate ("\ud800"), which no encoder or tokenizer can take.
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        where = "" if index is None else f"item {index} "
        raise PydanticCustomError(
            "text_invalid_unicode",
            "{where}is not valid Unicode: lone surrogate at character {position}",
            {"where": where, "position": exc.start},
        ) from None


def _text_shape(value: Any) -> Any:
    """A string or a non-empty list of strings, valid Unicode. Checked before the union so that the
    client reads one clear message instead of one error per union member."""
    if isinstance(value, str):
        _valid_unicode(value, None)
        return value
    if not isinstance(value, list):
        raise PydanticCustomError(
            "text_type", "must be a string or a list of strings, got {kind}", {"kind": type(value).__name__}
        )
    if not value:
        raise PydanticCustomError("text_empty_list", "must hold at least one text")
    for index, item in enumerate(value):
        if not isinstance(item, str):
            raise PydanticCustomError(
                "text_item_type",
                "item {index} must be a string, got {kind}",
                {"index": index, "kind": type(item).__name__},
            )
        _valid_unicode(item, index)
    return value


ALIGNMENT_METHOD_HELP = (
    'Where the word alignment comes from: "attention" (the step that predicts each word), "shift" (the step '
    'that reads it), "supervised" (the model\'s supervised alignment head), "bidirectional" (symmetrised '
    "with the reverse model; needs both directions served); omitted: the server default. A method the "
    "model cannot give is a 422 listing those it can."
)
LanguageCode = Annotated[str, Field(min_length=1, max_length=16, pattern=LANGUAGE_CODE)]
ModelName = Annotated[str, Field(min_length=1, max_length=64, pattern=MODEL_NAME.pattern)]
MODEL_HELP = ("Which of the pair's models translates (GET /models lists them); omitted or null: the pair's "
              "default (GET /models, defaults), which is \"auto\" for a pair served by models of several "
              "domains; \"auto\": the model of the domain the texts are likeliest to come from (each model's "
              "tokenizer scores them; one model answers all the texts). A name the pair is not served by is a "
              "422 listing those it is.")
ALIGN_MODEL_HELP = ("Which of the pair's models aligns (GET /models lists them); omitted or null: the pair's default, "
                    "or where that is \"auto\" the model of the domain the texts are likeliest to come from, as "
                    "\"auto\" asks whatever the default (each model aligns best in its own domain). A name the pair "
                    "is not served by is a 422 listing those it is.")


def _normalised_code(value: Any) -> Any:
    """A language code as requests may write it ("EN ", "De") in the form the pairs are named in."""
    return value.strip().lower() if isinstance(value, str) else value

PlaceholderStyle = Literal[PLACEHOLDER_STYLES]  # type: ignore[valid-type]
# Do-not-translate terms per request, and characters per term.
MAX_TERMS = 64
MAX_TERM_CHARS = 100


class TranslateRequest(BaseModel):
    """``{"text": "..." | ["...", ...], "source": "en", "target": "de", "beam_size": 5,
    "n_best": 1, "alignment": "none" | "token" | "phrase"}``."""

    model_config = ConfigDict(
        extra="forbid",
        # No coercion: "5" or 5.0 for beam_size, or NaN anywhere, is a 422, not a guess.
        strict=True,
        json_schema_extra={
            "examples": [{"text": "A man rides a bike.", "source": "en", "target": "de", "alignment": "token"}],
            # n_best <= beam_size as JSON Schema can say it: beam_size omitted or null (the server
            # widens its default beam to n_best), or each beam_size with n_best at most it.
            "anyOf": [{"properties": {"beam_size": {"type": "null"}}}] + [
                {"properties": {"beam_size": {"const": beam}, "n_best": {"maximum": beam}}}
                for beam in range(1, MAX_BEAM_SIZE + 1)
            ],
        },
    )

    text: str | list[str] = Field(description="One text, or a list of texts translated in order.")
    source: LanguageCode = Field(description='Source language code, e.g. "en", or "auto": the served language '
                                 "detected in the texts (the answer's detected field says which).")
    target: LanguageCode = Field(description='Target language code, e.g. "de".')
    beam_size: int | None = Field(
        default=None,
        ge=1,
        le=MAX_BEAM_SIZE,
        description="Beam width; omitted: the server default (5), raised to n_best if smaller.",
    )
    n_best: int = Field(default=1, ge=1, le=MAX_BEAM_SIZE, description="Hypotheses per text, <= beam_size; each "
                        "a different text (fewer where the beam finished fewer different ones).")
    alignment: AlignmentMode = Field(
        default="none",
        description='"token": word alignments for every hypothesis; "phrase": those and the phrase map.',
    )
    format: Literal["text", "html", "xml"] = Field(
        default="text",
        description='"html" / "xml": each block (paragraph, list item, heading, cell, a line <br> parts) is '
        "translated sentence by sentence, its block tags kept as sent; inline tags are taken out and each "
        "put back around the translation of what it wrapped; html's text attributes (alt, title, placeholder, "
        "label, abbr, a button's value, aria-label) are translated; malformed markup is a 422 naming the problem. "
        '"text": a text that is one line of well-formed inline markup (no "&", no "<" or ">" but its tags\') '
        "is read as html; Markdown's emphasis and links are read as tags (their delimiters put back around the "
        "translation), its heading and quote marks, table pipes and fenced code blocks kept.",
    )
    do_not_translate: list[Annotated[str, Field(min_length=1, max_length=MAX_TERM_CHARS)]] = Field(
        default_factory=list,
        max_length=MAX_TERMS,
        description="Terms kept as they are (whole words, case-sensitive), like placeholders: "
        "printf (%s, %1$d, %-10b), Qt (%1), Python (%(name)s), Ruby (%{name}), brace ({name}, {0}, {{0}}), "
        "ICU ({n, plural, ...}), ${VAR}, Weblate's markers ([X12X]) and HTML entities in plain text are always kept.",
    )
    alignment_method: AlignmentMethod | None = Field(default=None, description=ALIGNMENT_METHOD_HELP)
    glossary: list[EntryIn] | Annotated[str, Field(min_length=1, max_length=64)] | None = Field(
        default=None,
        description="Terms whose translation is prescribed: a list of {source, target}, or a stored glossary's id "
        "(POST /glossaries). " + GLOSSARY_RULES + " Every hypothesis then carries a compliance report, glossary.",
    )
    placeholders: Literal["auto", "off"] | list[PlaceholderStyle] = Field(
        default="auto",
        description='Which placeholder styles are kept: "auto" (all), "off" (none; do_not_translate and glossary terms '
        "still apply), or a list of styles.",
    )
    model: ModelName | None = Field(default=None, description=MODEL_HELP)
    memory: bool = Field(
        default=True,
        description="Whether a plain-text sentence or line that a served translation memory holds (GET /memories) "
        "is answered from it instead of by the model (compared in Unicode NFC with runs of whitespace as one "
        "space, case included); such a hypothesis says so in memory. false: the model translates everything.",
    )

    @field_validator("text", mode="before")
    @classmethod
    def _text_shape(cls, value: Any) -> Any:
        return _text_shape(value)

    @field_validator("source", "target", mode="before")
    @classmethod
    def _language_code(cls, value: Any) -> Any:
        return _normalised_code(value)

    @property
    def styles(self) -> tuple[str, ...]:
        if self.placeholders == "auto":
            return PLACEHOLDER_STYLES
        return () if self.placeholders == "off" else tuple(self.placeholders)

    @field_validator("n_best")
    @classmethod
    def _n_best_within_beam(cls, value: int, info: ValidationInfo) -> int:
        beam_size = info.data.get("beam_size")
        if beam_size is not None and n_best_problem(value, beam_size) is not None:
            raise PydanticCustomError(
                "n_best_above_beam_size",
                "must not exceed beam_size ({beam_size}), got {n_best}",
                {"n_best": value, "beam_size": beam_size},
            )
        return value

    def decoding_options(self, defaults: DecodingOptions) -> DecodingOptions:
        """``defaults`` (the server's) with this request's fields; an omitted beam is the default,
        widened so that the n_best asked for exist."""
        beam_size = self.beam_size if self.beam_size is not None else max(defaults.beam_size, self.n_best)
        return replace(defaults, beam_size=beam_size, n_best=self.n_best, alignment=self.alignment,
                       alignment_method=self.alignment_method)

    @property
    def texts(self) -> list[str]:
        return [self.text] if isinstance(self.text, str) else list(self.text)


class AlignRequest(BaseModel):
    """``{"text": "..." | [...], "translation": "..." | [...], "source": "en", "target": "de",
    "alignment_method": ...}``: word alignments of translations the client already has."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        json_schema_extra={
            "examples": [{"text": "A man rides a bike.", "translation": "Ein Mann fährt Fahrrad.",
                          "source": "en", "target": "de"}]
        },
    )

    text: str | list[str] = Field(description="One source text, or a list of them.")
    translation: str | list[str] = Field(
        description="The translation of each text (a reference, a post-edit, another system's output): "
        "a string for a string, a list as long as text's for a list."
    )
    source: LanguageCode = Field(description='Source language code, e.g. "en".')
    target: LanguageCode = Field(description='Target language code, e.g. "de".')
    alignment_method: AlignmentMethod | None = Field(default=None, description=ALIGNMENT_METHOD_HELP)
    model: ModelName | None = Field(default=None, description=ALIGN_MODEL_HELP)

    @field_validator("text", mode="before")
    @classmethod
    def _text_shape(cls, value: Any) -> Any:
        return _text_shape(value)

    @field_validator("translation", mode="before")
    @classmethod
    def _translation_shape(cls, value: Any, info: ValidationInfo) -> Any:
        value = _text_shape(value)
        text = info.data.get("text")  # absent when text itself was refused
        if text is None:
            return value
        if isinstance(text, str) != isinstance(value, str):
            raise PydanticCustomError(
                "translation_shape", "must be a {kind} like text", {"kind": "string" if isinstance(text, str) else "list"}
            )
        if isinstance(text, list) and len(value) != len(text):
            raise PydanticCustomError(
                "translation_count", "must hold one translation per text: {texts} texts, {translations} translations",
                {"texts": len(text), "translations": len(value)},
            )
        return value

    @field_validator("source", "target", mode="before")
    @classmethod
    def _language_code(cls, value: Any) -> Any:
        return _normalised_code(value)

    @property
    def texts(self) -> list[str]:
        return [self.text] if isinstance(self.text, str) else list(self.text)

    @property
    def translations(self) -> list[str]:
        return [self.translation] if isinstance(self.translation, str) else list(self.translation)


class WordOut(BaseModel):
    text: str = Field(description="Equals the string sliced at [start:end].")
    start: int = Field(description="Character offset (Python str index) of the first character.")
    end: int = Field(description="Character offset one past the last character.")


class LinkOut(BaseModel):
    source: int = Field(description="Index into source_words.")
    weight: float = Field(description="Share of the target word's attention; a word's weights sum to 1.")


class FlagOut(BaseModel):
    word: int = Field(description="Index into source_words (omissions) or target_words (insertions).")
    confidence: float = Field(description="How strongly the links suggest it, 0..1; a hint, not a verdict.")


class AlignmentOut(BaseModel):
    source_words: list[WordOut]
    target_words: list[WordOut]
    links: list[list[LinkOut]] = Field(description="Per target word, its source words, heaviest first.")
    pharaoh: str = Field(description='Hard links "i-j" (source-target, 0-based), sorted.')
    possible_omissions: list[FlagOut] = Field(
        description="Source words no target word gives a fifth of its attention: maybe left untranslated."
    )
    possible_insertions: list[FlagOut] = Field(
        description="Target words no source word gives much of its attention: maybe not in the source."
    )

    @classmethod
    def from_alignment(cls, alignment: TokenAlignment, flags: AlignmentFlags) -> AlignmentOut:
        return cls(
            source_words=[WordOut(text=w.text, start=w.start, end=w.end) for w in alignment.source_words],
            target_words=[WordOut(text=w.text, start=w.start, end=w.end) for w in alignment.target_words],
            # Six decimals: more is float noise to a reader, and sums stay within 1e-5 of 1.
            links=[[LinkOut(source=i, weight=round(w, 6)) for i, w in row] for row in alignment.links],
            pharaoh=alignment.pharaoh,
            possible_omissions=[FlagOut(word=f.word, confidence=f.confidence) for f in flags.omissions],
            possible_insertions=[FlagOut(word=f.word, confidence=f.confidence) for f in flags.insertions],
        )


class SpanOut(BaseModel):
    start: int = Field(description="Character offset of the first character.")
    end: int = Field(description="Character offset one past the last character.")


class ProtectedOut(BaseModel):
    kind: Literal["weblate", "code", "url", "email", "path", "printf", "python", "qt", "ruby", "brace", "icu", "fluent",
                  "laravel", "shell", "webextension",
                  "entity", "option", "accelerator", "term", "glossary", "tag"]
    text: str = Field(description="The placeholder or term, or a tag's opening tag, exactly as sent (in html the "
                      "translation holds the tag with its alt, title and other text attributes translated).")
    source: SpanOut = Field(description="Where it stood in the text sent (a tag: from its opening to its closing tag).")
    target: SpanOut = Field(description="Where it stands in the translation.")
    placement: Literal["aligned", "fallback", "kept", "model"] = Field(
        description='"aligned": placed by the word alignment; "fallback": no aligned word near it, placed by '
        'its relative position; "kept": in a part of the text with nothing else to translate (an option '
        'column, `%s: %s`), kept as sent, or an empty element at an edge of the text (`<br/>`, XLIFF\'s `<x/>`) '
        'kept at that edge; "model": the model wrote it itself, from the text as sent.'
    )

    @classmethod
    def of(cls, placed: Placed) -> ProtectedOut:
        return cls(kind=placed.kind, text=placed.text, source=SpanOut(start=placed.source_start, end=placed.source_end),
                   target=SpanOut(start=placed.target_start, end=placed.target_end), placement=placed.placement)


class MemoryOut(BaseModel):
    memory: str = Field(description="The translation memory's name (GET /memories).")
    source: SpanOut = Field(description="The sentence or line it held, in the text sent.")
    target: SpanOut = Field(description="Its stored translation, in the output.")

    @classmethod
    def of(cls, use: MemoryUse) -> MemoryOut:
        return cls(memory=use.memory, source=SpanOut(start=use.source_start, end=use.source_end),
                   target=SpanOut(start=use.target_start, end=use.target_end))


class RemovedOut(BaseModel):
    kind: str = Field(description="The placeholder style it looked like.")
    text: str
    at: int = Field(description="Where it was, as a character offset into the translation.")


class DetectedOut(BaseModel):
    language: str = Field(description="The served language detected in the texts.")
    confidence: float = Field(description="The detector's probability among the served languages, 0..1.")


class PhraseSideOut(BaseModel):
    words: list[int] = Field(description="[first, last + 1): indices into source_words or target_words.")
    start: int = Field(description="Character offset of the span's first character.")
    end: int = Field(description="Character offset one past its last character.")
    text: str = Field(description="Equals the string sliced at [start:end].")

    @classmethod
    def of(cls, words: list[Word], span: tuple[int, int], string: str) -> PhraseSideOut:
        start, end = words[span[0]].start, words[span[1] - 1].end
        return cls(words=list(span), start=start, end=end, text=string[start:end])


class PhrasePairOut(BaseModel):
    source: PhraseSideOut
    target: PhraseSideOut
    confidence: float = Field(description="How much of the target span's attention the source span holds, 0..1.")


class PhraseMapOut(BaseModel):
    origin: Literal["attention", "extracted"] = Field(
        description='"attention": the phrases the model itself attended to; "extracted": the smallest '
        "phrase pairs consistent with the word alignment."
    )
    pairs: list[PhrasePairOut] = Field(description="In target order.")

    @classmethod
    def from_map(cls, phrases: PhraseMap, alignment: TokenAlignment, source: str, target: str) -> PhraseMapOut:
        return cls(
            origin=phrases.origin,
            pairs=[
                PhrasePairOut(
                    source=PhraseSideOut.of(alignment.source_words, pair.source, source),
                    target=PhraseSideOut.of(alignment.target_words, pair.target, target),
                    confidence=round(pair.confidence, 6),
                )
                for pair in phrases.pairs
            ],
        )


class HypothesisOut(BaseModel):
    text: str
    score: float = Field(description="Length-normalised log-probability (higher is better).")
    alignment: AlignmentOut | None = Field(default=None, description='Present when alignment is "token" or "phrase".')
    phrases: PhraseMapOut | None = Field(default=None, description='Present when alignment="phrase".')
    protected: list[ProtectedOut] | None = Field(
        default=None, description="Placeholders, terms and tags put back, each exactly once; present when the text had any."
    )
    removed: list[RemovedOut] | None = Field(
        default=None, description="Placeholder-like text the model wrote that the source did not have, taken out; "
        "present when there was any."
    )
    glossary: list[TermReportOut] | None = Field(
        default=None, description="The glossary's terms found in the text: the compliance report; present with a glossary."
    )
    memory: list[MemoryOut] | None = Field(
        default=None, description="The sentences or lines a translation memory answered instead of the model (its score "
        "there is the model's for the stored translation); present when there were any."
    )

    @classmethod
    def from_served(cls, served: Served, source: str) -> HypothesisOut:
        translation, placed, flags = served.translation, served.placed, served.flags
        alignment, phrase_map = translation.alignment, translation.phrase_map
        return cls(
            text=translation.text,
            protected=[ProtectedOut.of(p) for p in placed] if placed else None,
            score=translation.score,
            alignment=AlignmentOut.from_alignment(alignment, flags) if alignment is not None and flags is not None else None,
            phrases=(
                PhraseMapOut.from_map(phrase_map, alignment, source, translation.text)
                if phrase_map is not None and alignment is not None
                else None
            ),
            removed=[RemovedOut(kind=r.kind, text=r.text, at=r.at) for r in served.removed] or None,
            glossary=[TermReportOut.of(report) for report in served.glossary] or None,
            memory=[MemoryOut.of(use) for use in served.memory] or None,
        )


MODEL_ANSWERED = "The model that answered: the request's, or the pair's default."


class TranslateResponse(BaseModel):
    source: str = Field(description='The source language: the request\'s, or the one detected for "auto".')
    target: str
    model: str = Field(description=MODEL_ANSWERED)
    detected: DetectedOut | None = Field(default=None, description='Present when source was "auto".')
    translations: list[list[HypothesisOut]] = Field(
        description="One n-best list per input text, in input order (a single text gives one list)."
    )

    @classmethod
    def from_results(
        cls, source: str, target: str, model: str, texts: list[str], results: list[list[Served]], detected=None
    ) -> TranslateResponse:
        return cls(
            source=source,
            target=target,
            model=model,
            detected=DetectedOut(language=detected.language, confidence=round(detected.confidence, 6)) if detected else None,
            translations=[[HypothesisOut.from_served(s, text) for s in nbest] for text, nbest in zip(texts, results)],
        )


class AlignResponse(BaseModel):
    source: str
    target: str
    model: str = Field(description=MODEL_ANSWERED)
    alignment_method: AlignmentMethod = Field(description="The method used: the request's, or the server default's.")
    alignments: list[AlignmentOut] = Field(description="One per (text, translation) pair, in order.")


class ModelOut(BaseModel):
    name: str = Field(description='What a request\'s "model" names: the model directory\'s name.')
    pair: str = Field(description='The language pair it serves, e.g. "en-de".')
    source: str
    target: str
    domain: str = Field(description='The text it was made for, e.g. "captions", "software"; "general" when unstated.')
    scores: dict[str, dict[str, float | None]] | None = Field(
        description="Measured scores per test set and metric (e.g. test_2016_flickr: bleu), from the model directory's "
        "model_card.json; null when none was measured."
    )
    default: bool = Field(description="Whether it may answer its pair when a request names no model: the "
                          "pair's default, or one of the models the texts choose among where the default is \"auto\".")
    kind: str | None = Field(description='Its family from its config: the attention kinds it uses ("vanilla" when '
                             'plain) and "+align" for a supervised alignment head; null when unknown.')
    backend: str = Field(description='The engine that runs it, e.g. "torch", "onnx".')
    precision: str | None = Field(description='What its linear layers compute in: "float32", "int8" (the torch '
                                  'backend on a CPU, where the model verified it: PHRASAL_CPU_QUANTIZATION) or '
                                  '"float16" (CUDA); for an export, what it was made with (e.g. "float32", "int8").')

    @classmethod
    def of(cls, model: ServedModel, default: bool) -> ModelOut:
        card, runtime = model.card, model.runtime
        return cls(name=card.name, pair=runtime.pair, source=runtime.source_lang, target=runtime.target_lang,
                   domain=card.domain, scores=card.scores, default=default, kind=card.kind, backend=runtime.backend,
                   precision=runtime.precision)


class ModelsResponse(BaseModel):
    models: list[ModelOut] = Field(description="Every served model, in the order the settings list them.")
    defaults: dict[str, str] = Field(description='What answers each pair when a request names no model: a model\'s '
                                     'name, or "auto" where the texts choose by domain among the pair\'s models '
                                     'marked default.')


class MemoryInfoOut(BaseModel):
    name: str = Field(description='What a hypothesis\' memory names: the file\'s name without ".tmx".')
    directions: dict[str, int] = Field(description='Sources it answers per direction ("en-de"), of the pairs served.')


class MemoriesResponse(BaseModel):
    memories: list[MemoryInfoOut] = Field(description="The translation memories served, in the order they are "
                                          "consulted (the first holding a sentence answers it).")


class HealthResponse(BaseModel):
    status: Literal["ok", "unavailable"]
    phase: Literal["loading", "warming", "ready", "stalled", "restarting", "failed", "draining", "stopped"] = Field(
        description="stalled / restarting / failed after ready: a model's inference process stopped answering, is "
        "being replaced, or failed to restart (retried with backoff); see reason."
    )
    pairs: list[str] = Field(description='Language pairs served, e.g. ["en-de"]; empty when not ready.')
    reason: str | None = Field(default=None, description="Why the service is not ready; absent when it is.")


class LiveResponse(BaseModel):
    status: Literal["ok"]


class ErrorDetail(BaseModel):
    field: str = Field(description='The request field at fault, dotted ("text.2"), or "body".')
    loc: list[str | int]
    msg: str
    type: str


class ErrorResponse(BaseModel):
    message: str = Field(description="One readable line.")
    detail: list[ErrorDetail] = Field(default_factory=list)
