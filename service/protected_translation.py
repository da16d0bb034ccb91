"""A request's texts as the model sees them, and the model's answers as the client gets them.

Before translation every text is read as its `format` (plain text, or inline html / xml) and its
placeholders and do-not-translate terms are taken out (service/protection/placement.py); the
model translates what is left. After it, everything taken out is put back by the hypothesis'
word alignment, and the alignment's words are re-addressed so that their offsets slice the
client's own strings (the original text, and the output with tags and placeholders back in).
A text with nothing to protect in plain-text format goes through untouched, at no cost. A text
with placeholders or terms (inline tags go with them; in markup, only without a glossary) is first
translated as written, and that translation served, its glossary enforced, where the model kept
every one of them (``serve_as_written``).
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial

from service.alignment_flags import alignment_flags
from service.errors import RequestError
from service.layout import PASSED_BLOCKS
from service.protection.markup import Markup, MarkupError, Tag, TextFormat, read_markup
from service.glossary import GlossaryEntry
from service.protection.placeholders import (PLACEHOLDER_STYLES, Protected, find_placeholders, find_protected, paired,
                                             unenclosed)
from service.protection.placement import (Placed, PreparedText, original_word, output_word, prepare, restore,
                                          terms_translated, written)
from service.runtime.base import AlignmentMode, TokenAlignment, Translation
from service.served import Served

def prepare_texts(texts: Sequence[str], fmt: TextFormat | Sequence[TextFormat], terms: Sequence[str],
                  glossary: Sequence[GlossaryEntry] = (), styles: Sequence[str] = PLACEHOLDER_STYLES,
                  found: Sequence[Sequence[Protected] | None] = (),
                  text_styles: Sequence[Sequence[str] | None] = ()) -> list[PreparedText]:
    """Each text as the model will see it; ``fmt``: how to read them, or per text how to read it;
    ``found``: per text, its protected parts where the caller has read them already (plain text),
    else None (or no list at all); ``text_styles``: per text, the styles it is read with where not
    ``styles`` (None: ``styles``)."""
    prepared = []
    for index, text in enumerate(texts):
        own = text_styles[index] if text_styles and text_styles[index] is not None else styles
        text_fmt = fmt if isinstance(fmt, str) else fmt[index]
        try:
            prepared.append(prepare(text, text_fmt, terms, own, glossary, found=found[index] if found else None))
        except MarkupError as error:
            raise RequestError("text", f"malformed {text_fmt}: {error}", index, kind="malformed_markup") from None
    return prepared


def alignment_needed(prepared: Sequence[PreparedText], requested: AlignmentMode) -> AlignmentMode:
    """Putting things back needs the word alignment even when the client did not ask for it."""
    if requested != "none":
        return requested
    return "token" if any(p.protected or p.markup.tags or p.term_matches for p in prepared) else "none"


Rescore = Callable[[str, list[str]], "list[float] | None"]
KnownWord = Callable[[str], bool]


def serve(prepared: Sequence[PreparedText], results: Sequence[Sequence[Translation]],
          requested: AlignmentMode, rescore: Rescore | None = None, articles: bool = True,
          known_word: KnownWord | None = None) -> list[list[Served]]:
    """Each translation with what was taken out put back, and its alignment's flags when the
    client asked for an alignment. `rescore` (source, candidate translations) -> their
    log-probabilities: where given, it places a glossary term the model left out and, with
    `articles` (a German target), chooses again the article before a noun a term replaced and,
    with `known_word` (whether the model's vocabulary holds a word whole), the part of a closed
    compound a term replaces (placement.restore)."""
    served = [[_serve_one(p, t, requested, rescore, articles, known_word) for t in nbest]
              for p, nbest in zip(prepared, results)]
    if requested == "none":
        return served
    return [[_flagged(s) for s in nbest] for nbest in served]


def tried_as_written(prepared: PreparedText) -> bool:
    """Whether to send the text itself first: it has placeholders or terms (and, in markup, no
    glossary: it is enforced as written on plain text only, `serve_as_written`). A model
    that learned placeholders from message catalogs (the software model: 99.8 % kept on its own)
    translates a message better with them in place than with them taken out and put back by the
    alignment, which cannot move them where German word order wants them (results/layout.md); the
    same holds for a tag that wraps nothing but placeholders (`<filename>%1</filename>`: "Das Archiv
    existiert <filename>%1</filename> bereits" taken out), which then goes as written with them,
    while a tag around words ("<b>Remote host:</b> %1") is still taken out: the model translates
    short tagged labels worse as written (results/markup_catalogs.md). So does markup with an inline
    element passed through (`<code>`, Android's `<xliff:g>`, translate="no"), placeholders or not:
    taken out, it leaves a hole the model translates around ("Use <code>--force</code> to overwrite."
    came back "<code>--force</code> Zum Überschreiben verwenden."); as written it is taken only where
    the model wrote the element to the letter (`_tags_as_written`). Markup only where tags are all
    there is to it: entities and comments stay the protected path's, which escapes them exactly."""
    # An accelerator is not left to the model: the software model copied "_Open" untranslated.
    if prepared.protected_terms or any(p.kind == "accelerator" for p in prepared.protected):
        return False
    if prepared.fmt == "text":
        return bool(prepared.protected)
    passed = [tag for tag in prepared.markup.tags if tag.verbatim is not None]
    if not prepared.protected and not passed:
        return False
    return (not prepared.glossary and tags_only(prepared.original, prepared.markup, passed_through=True)
            and not any(tag.name.lower() in PASSED_BLOCKS for tag in passed)
            and all(tag.standalone or _wraps_only_protected(prepared, tag) for tag in prepared.markup.tags))


def tried_tags_out(prepared: PreparedText) -> bool:
    """Whether to send a markup text first with its tags taken out and its placeholders left in: it
    has placeholders but a tag around words, so it does not go as written, and the model, missing a
    placeholder the sentence needs, translated the rest wrong ("<p>%1 is calling you</p>" as "<p>%1
    wird dich aufgerufen</p>"). Placeholders only: no terms, glossary or accelerator; tags only
    (`tags_only`)."""
    return (prepared.fmt != "text" and bool(prepared.protected) and not prepared.glossary
            and all(p.kind not in ("term", "glossary", "accelerator") for p in prepared.protected)
            and tags_only(prepared.original, prepared.markup) and not tried_as_written(prepared))


def tags_out(prepared: PreparedText) -> PreparedText:
    """`prepared`'s text with its tags taken out and its placeholders left in, for `tried_tags_out`."""
    return prepare(prepared.original, prepared.fmt, styles=())


def serve_tags_out(prepared: PreparedText, without_tags: PreparedText, nbest: Sequence[Translation],
                   requested: AlignmentMode) -> list[Served] | None:
    """The hypotheses of `without_tags` (`tags_out(prepared)`) with the tags put back that keep each of
    `prepared`'s placeholders exactly, as often, with as many placeholder syntax characters, as
    `serve_as_written` checks; None when the best one does not (then the text is translated with its
    placeholders taken out too). Each placeholder is reported at its output occurrence, in order."""
    parts_kept = _parts_kept(prepared)
    served = []
    for translation in nbest:
        one = _serve_one(without_tags, translation, requested)
        output = read_markup(one.translation.text, prepared.fmt)
        found = find_protected(output.plain, (), prepared.styles)
        if not parts_kept(one.translation.text, output, found):
            if not served:
                return None
            continue
        one = replace(one, placed=_written_places(prepared, output, found) + one.placed)
        served.append(_flagged(one) if requested != "none" else one)
    return served


def tags_only(original: str, markup: Markup, passed_through: bool = False) -> bool:
    """Whether the markup of `original` is tags and nothing the protected path must escape or pass
    through untouched: no entity, comment or (unless `passed_through`) passed-through element (code,
    translate="no")."""
    return "&" not in original and not any((tag.verbatim is not None and not passed_through) or tag.name == "!--"
                                           for tag in markup.tags)


def _wraps_only_protected(prepared: PreparedText, tag: Tag) -> bool:
    """Whether the paired `tag` wraps no text but protected parts and whitespace."""
    inside = list(prepared.markup.plain[tag.start:tag.end])
    for part in prepared.protected:
        for k in range(max(part.start, tag.start), min(part.end, tag.end)):
            inside[k - tag.start] = " "
    return not "".join(inside).strip()


# Placeholder syntax outside any placeholder the detector reads: the model's "% %s" for "%s" holds
# the one "%s" and a stray "%" that a broader reading (printf's space flag) takes for a broken
# conversion. An output with more or fewer of these than its source is not taken as written.
_SYNTAX = frozenset("%{}$&<>`\\")


def _syntax(written: str, markup: Markup, parts: Sequence[Protected]) -> Counter:
    """The placeholder syntax characters of `written` (read as `markup`) but the quotes or brackets
    right around a placeholder, or the quotes a literal was taken with, which a translation may write
    its own way (GNU's `%s' as »%s«, `` `%s --help' `` as »%s --help«; an address's angle brackets
    count)."""
    quotes = {markup.origin[k] for p in parts if paired(markup.plain, p.start, p.end) for k in (p.start - 1, p.end)}
    quotes |= {markup.origin[k] for p in parts if unenclosed(p.text) != p.text and p.text[0] not in "<[("
               for k in (p.start, p.end - 1)}
    return Counter(c for k, c in enumerate(written) if c in _SYNTAX and k not in quotes)


def _parts_kept(prepared: PreparedText) -> Callable[..., bool]:
    """Whether an output (`written`, read as `output`, its protected parts `found`) keeps each of
    `prepared`'s protected parts exactly, as often, adding none, and, with `syntax`, as many of each
    placeholder syntax character (`_syntax`) and the parts a pair wraps alone (`_in_pairs`)."""
    source = prepared.markup
    wanted = Counter(unenclosed(p.text) for p in prepared.protected)
    syntax_wanted = _syntax(prepared.original, source, prepared.protected)
    in_pairs = _in_pairs(source.plain, prepared.protected)

    def kept(written: str, output: Markup, found: Sequence[Protected], syntax: bool = True) -> bool:
        return (Counter(unenclosed(p.text) for p in found) == wanted
                and (not syntax or _syntax(written, output, found) == syntax_wanted
                     and _in_pairs(output.plain, found) == in_pairs))
    return kept


def _in_pairs(plain: str, parts: Sequence[Protected]) -> Counter:
    """The parts a quote, bracket or parenthesis pair wraps alone (`(%s)`, `'%s'`), of any style: the
    model's "%s()" for "(%s)" keeps the placeholder and loses what it stood in."""
    return Counter(unenclosed(p.text) for p in parts if paired(plain, p.start, p.end))


def serve_as_written(prepared: PreparedText, nbest: Sequence[Translation], requested: AlignmentMode,
                     rescore: Rescore | None = None, articles: bool = True,
                     known_word: KnownWord | None = None, stored: bool = False) -> list[Served] | None:
    """The hypotheses of the text as written that keep each of its placeholders and terms exactly,
    as often, adding none, with as many of each placeholder syntax character (`%`, braces, `$`, …);
    None when the best one does not (then the text is translated with
    them taken out). A literal taken with its quotes may come back in other quotes ('--size=M' as
    »--size=M«). Each placed part is the output's occurrence of it in the same order (its target
    span with the output's own quotes). A glossary (plain text) is enforced on each hypothesis as on
    any translation (placement.restore, through `written`; `rescore` and the rest as for `serve`), and the
    hypothesis is kept only if its placeholders are still exact afterwards. `stored`: the translation is
    a translation memory's, not the model's: its syntax characters are what its author wrote
    ("Antigua & Barbuda" for "Antigua und Barbuda"), so only its placeholders and terms are checked."""
    terms = [p.text for p in prepared.protected if p.kind == "term"]
    source = prepared.markup
    parts_kept = _parts_kept(prepared)
    # The text as the model read it, to enforce its glossary on (None: no term in it).
    with_terms = written(prepared) if prepared.term_matches else None
    scorer = partial(rescore, terms_translated(with_terms)) if with_terms is not None and rescore is not None else None

    def kept(text: str) -> tuple[Markup, list[Protected], list[Placed]] | None:
        try:
            output = read_markup(text, prepared.fmt)
        except MarkupError:
            return None
        found = find_protected(output.plain, terms, prepared.styles)
        tags = _tags_as_written(source, output)
        if tags is None or not parts_kept(text, output, found, syntax=not stored):
            return None
        return output, found, tags

    served = []
    for translation in nbest:
        checked = kept(translation.text)
        reports: list = []
        if checked is not None and with_terms is not None:
            alignment = translation.alignment or TokenAlignment.empty()
            restored = restore(with_terms, translation.text, alignment, scorer, articles, known_word)
            # A replaced word may have held a placeholder: the enforced text is checked again.
            checked = kept(restored.text)
            reports = restored.glossary
            translation = replace(translation, text=restored.text, alignment=replace(
                alignment, target_words=[output_word(w, restored) for w in alignment.target_words]))
        if checked is None:
            if not served:
                return None
            continue
        output, found, tags = checked
        placed = _written_places(prepared, output, found) + tags
        one = Served(translation if requested != "none" else Translation(translation.text, translation.score), placed,
                     glossary=reports)
        served.append(_flagged(one) if requested != "none" else one)
    return served


def _written_places(prepared: PreparedText, output: Markup, found: Sequence[Protected]) -> list[Placed]:
    """Each of `prepared`'s protected parts at its occurrence among `found` (the output's), in order:
    where the model wrote it."""
    source = prepared.markup
    unused = list(found)
    placed = []
    for p in prepared.protected:
        match = next(f for f in unused if unenclosed(f.text) == unenclosed(p.text))
        unused.remove(match)
        placed.append(Placed(p.kind, p.text, source.origin[p.start], source.origin_end[p.end - 1],
                             output.origin[match.start], output.origin_end[match.end - 1], "model"))
    return placed


def _tags_as_written(source: Markup, output: Markup) -> list[Placed] | None:
    """Each of the source's tags in the output, as written and inside the same enclosing tag (in
    any order: German may put two elements the other way round), a tag that wrapped text still
    wrapping some, an element passed through written to the letter, and no other tag; None where
    the output differs."""
    def key(markup: Markup, index: int) -> tuple[str, str | None, str | None, str | None]:
        tag = markup.tags[index]
        return (tag.opening, tag.closing, markup.tags[tag.parent].opening if tag.parent is not None else None,
                tag.verbatim)

    if Counter(key(source, i) for i in range(len(source.tags))) != Counter(key(output, i) for i in range(len(output.tags))):
        return None
    unused = list(range(len(output.tags)))
    placed = []
    for index, tag in enumerate(source.tags):
        match = next(i for i in unused if key(output, i) == key(source, index))
        unused.remove(match)
        found = output.tags[match]
        if tag.plain_inside(source) and not found.plain_inside(output):
            return None
        placed.append(Placed("tag", tag.opening, tag.source_start, tag.source_end, found.source_start,
                             found.source_end, "model"))
    return placed


def _flagged(served: Served) -> Served:
    alignment = served.translation.alignment
    return replace(served, flags=alignment_flags(alignment)) if alignment is not None else served


def _serve_one(prepared: PreparedText, translation: Translation, requested: AlignmentMode,
               rescore: Rescore | None = None, articles: bool = True, known_word: KnownWord | None = None) -> Served:
    if prepared.untouched and prepared.fmt == "text" and not find_placeholders(translation.text, prepared.styles):
        return Served(translation, [])
    alignment = translation.alignment or TokenAlignment.empty()
    scorer = None
    if rescore is not None and prepared.term_matches:
        scorer = partial(rescore, terms_translated(prepared))
    restored = restore(prepared, translation.text, alignment, scorer, articles, known_word)
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
