"""Placeholders and do-not-translate terms: the parts of a text the model must not touch.

A translation model has never seen `%1$s` or `{count, plural, …}` and mangles them ("%lu to
remove and %lu not upgraded." becomes "% um die % zu %."). They are found here, taken out
before translation, and put back at the position the word alignment gives
(service/protection/placement.py), so each appears in the output exactly once, unchanged.

Styles, in the order they are matched (an earlier style wins where matches overlap):
- "weblate": the marker `[X12X]` Weblate's machine-translation client puts in place of each
  placeholder it recognises before it calls a LibreTranslate server, and swaps back after (sent as
  written, the software model kept 97.2 % of the validation split's messages whole, renumbering or
  splitting the rest: "$[X20X nicht ändern]"; results/placeholder_catalogs.md).
- "url": `https://example.org/a?b=c`, `ftp://…`, `file:///…`, `www.example.org/help` (punctuation
  that ends the sentence is not part of it; a closing parenthesis is where the URL opened one).
- "email": `bugs@example.org` (the model "translated" it to `Fehler@example.org`).
- "code": a Markdown code span with its backticks, `` `npm install` `` (the software model, which
  learned GNU's `` `file' `` as »file«, wrote it »npm install«): no apostrophe inside, so that two of
  GNU's quotes (`` `a' and `b' ``) are none.
- "path": a file path of at least two parts, `/etc/apt/sources.list`, `~/.bashrc`, `./configure`,
  `../lib/x.so`.
- "icu": an ICU MessageFormat argument with a format, `{count, plural, one {# file} other {# files}}`,
  `{0,number,#}` (braces balanced; the whole argument is one placeholder).
- "fluent": Fluent's placeables, `{ $user }`, `{ -brand-name }`, `{ NUMBER($count) }`.
- "shell": `${VAR}`, and a JavaScript template literal's `${user.name}`.
- "webextension": a browser extension's named placeholder, `$COUNT$`, `$user_name$` (messages.json).
- "ruby": `%{name}` and `%<name>s`.
- "python": `%(name)s`, `%(count)5.2f`.
- "brace": `{name}`, `{0}`, `{}`, `{user.name}`, `{items[0]}`, `{name!r:>10}`, `{0:.2f}` (Python
  str.format, .NET, i18next-style names) and the escaped `{{0}}` / `{{ name }}` as one literal
  whole (format strings print it as "{0}"; Jinja, Go's templates and Handlebars read it as a
  variable or a helper: `{{ name | upper }}`, `{{len .Items}}`, `{{#if admin}}`, `{{{raw}}}`), with
  Jinja's, Django's, Twig's and Liquid's tags and comments (`{% if user %}`, `{# note #}`); and any
  other braces around text without whitespace: a command line's alternatives `{-V|--version}`,
  `QUIRKS={metacity|compiz|mutter}`, shell brace expansion `{a,b}`, code `'{...}'`. These are
  literal syntax: the model can only break them (it dropped a dash of `--version` and renamed
  `metacity` in net-tools' and onboard's messages, results/placeholder_catalogs.md).
- "qt": Qt's `%1`..`%99` and `%L1` (a `%` and digits followed by no conversion letter, `$` or
  precision).
- "printf": C/POSIX printf and strftime conversions: a `%`, an optional argument number `1$`,
  flags, width, precision, a length modifier and any conversion letter (`%s`, `%1$s`, `%-5.2f`,
  `%lu`, `%N`, `%-10b`, `%H`), and `%%`. The space flag is not read: "100% sure" and "50 % off"
  are prose far more often than `% d`.
- "laravel": Laravel's named parameters, `:attribute`, `:min` ("The :attribute field is required."),
  a colon that starts a word after a space or a parenthesis (not in a word, a time `12:30`, a URL, a path
  or an emoji's `:smile:`, nor after other punctuation: `?:help`, `[:second]`, which translators translate).
- "entity": an HTML character reference in plain text, `&amp;`, `&#160;`, `&#x2014;` (in html
  and xml the markup reader decodes them instead).
- "option": a command-line option, `--color=WHEN`, `--block-size[=SIZE]`, `-v`, `-rf`, standing as
  a word of its own (not the hyphen of "re-use", of "IP(v4)-Adresse" or "'Eingabe'-Taste", or a
  minus before a number).
- "accelerator": the mnemonic marker of a short GUI label, GTK's `_` (`_Open`, `Save _As…`) and Qt's
  or KDE's `&` (`&File`, `E&xit`): taken out (the software model copied "_Open" untranslated) and
  put back before the first letter of the target word aligned to the word that had it. Read only
  where it is unambiguous: one marker in a label of at most ACCELERATOR_MAX_WORDS words (up to
  LONG_LABEL_MAX_WORDS a `_` before a word of letters, in a text without `%`), `_` at the
  start of a word (not in `max_size`; at the start of the label only before a capital or digit, not
  `_size`) and no other `_`, or inside a word of letters before a lower-case one where the word is not
  all lower-case ASCII (`an_zeigen` is read, `pam_start` and `de_DE` are not: `_mnemonic_word`);
  `&` at the start of a word, or inside one before a lower-case letter (not `AT&T`), neither `&&` nor
  an entity.
- "term": a request's do-not-translate terms, matched case-sensitively where they stand as whole
  words (not inside a longer word).
A URL, address, path or option in quotes or angle brackets (`'--block-size=M'`, `<bugs@example.org>`)
is taken out with them, and so is a command line in quotes of placeholders and such a literal
(`` `%s --help' ``, one part). Placeholders written one against the next (`%s%s`, `{0}{1}`) are one
part: a program prints them so.

A request may name the styles to look for (`PLACEHOLDER_STYLES`), or none: terms are kept either way.
"""
from __future__ import annotations

import bisect
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass

PRINTF = re.compile(
    # Apple's: a variable that a stringsdict or String Catalog substitutes, `%#@count@`, and `%arg`,
    # what one of its variations writes for the argument (read as "%a" and "rg" before)
    r"%(?:\d+\$)?#@[A-Za-z_][A-Za-z0-9_]*@|%arg(?![A-Za-z0-9_])|"
    r"%(?:\d+\$)?[-+0#'I]*(?:\d+|\*(?:\d+\$)?)?(?:\.(?:\d+|\*(?:\d+\$)?))?"
    r"(?:hh|h|ll|l|L|q|j|z|Z|t|I64|I32)?(?:[A-Za-z@%]|<[A-Za-z0-9_]+>)")
QT = re.compile(r"%L?[0-9]{1,2}(?![0-9$A-Za-z]|\.[0-9])")
PYTHON = re.compile(r"%\([^()\s]{1,64}\)[-+ 0#]*(?:\d+|\*)?(?:\.(?:\d+|\*))?[A-Za-z%]")
RUBY = re.compile(r"%\{[A-Za-z_][A-Za-z0-9_]*\}|%<[A-Za-z_][A-Za-z0-9_]*>[-+0#]*\d*(?:\.\d+)?[A-Za-z]")
BRACE = re.compile(
    # escaped, or a template's variable or helper (i18next's unescaped `{{- name}}` and formatted
    # `{{count, number}}`, Jinja's `{{ name | upper }}`, Go's `{{len .Items}}`, Handlebars' `{{#if x}}`
    # and unescaped `{{{raw}}}`): one literal whole; Jinja's, Django's, Twig's and Liquid's tags and
    # comments, `{% if user %}`, `{# note #}`, too
    r"\{\{\{[^{}\n]*\}\}\}|\{\{[^{}\n]*\}\}|\{%[^\n]*?%\}|\{#[^\n]*?#\}"
    r"|(?<!\{)\{[^{}\s]*\}(?!\})")  # a format field, `{name!r:>10}`, or literal syntax, `{-V|--version}`
# A shell's variable, `${HOME}`, `${name:-default}`, or a JavaScript template literal's expression,
# `${user.name}`, `${formatPrice(total)}` (read as a brace field, its `$` had reached the model).
SHELL = re.compile(r"\$\{[^{}\n]+\}")
# A browser extension's (WebExtension, Chrome's i18n) named placeholder, `$COUNT$`: letters, digits, `_`
# and `@`, a letter among them (the model had translated "$COUNT$" as "$ZAHL$"); `$$` is a dollar sign.
WEBEXTENSION = re.compile(r"(?<![\w$])\$[A-Za-z0-9_@]*[A-Za-z][A-Za-z0-9_@]*\$(?![\w$])")
# Fluent's placeables (Mozilla's Project Fluent, .ftl): a variable `{ $user }`, a term `{ -brand-name }`
# or its attribute `{ -brand.gender }`, a message `{ menu-save }` is too rare to tell from prose; a
# function call `{ NUMBER($count, minimumFractionDigits: 2) }`.
FLUENT = re.compile(r"\{\s*(?:[$-][A-Za-z][\w-]*(?:\.[A-Za-z][\w-]*)?|[A-Z][A-Z0-9_-]*\([^{}()]*\))\s*\}")
# Laravel's named parameters, `:attribute`, `:min` ("The :attribute field is required."): a colon that
# starts a word after a space or a parenthesis, not one after other punctuation, whose word translators
# translate ("[hour:minute[:second]]", "?:help q:quit"), nor inside a word, a time, a URL or a path.
LARAVEL = re.compile(r"(?<![^\s(]):[A-Za-z_][A-Za-z0-9_]*(?![\w:/])")
ENTITY = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")
# Sentence punctuation after a URL ends the sentence, not the URL; a closing bracket is the URL's
# only where the URL opened it (Wikipedia's `Foo_(bar)`).
URL = re.compile(r"(?:\b(?:https?|ftp|file)://|\bwww\.(?=[A-Za-z0-9-]+\.))[^\s<>\"'`]+")
EMAIL = re.compile(r"(?<![\w.%+-])[A-Za-z0-9][A-Za-z0-9._+-]*@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+")
PATH = re.compile(r"(?<![\w/~.$}-])(?:(?:~|\.{1,2})/[\w.+-]+(?:/[\w.+@-]+)*/?|/[\w.+-]+(?:/[\w.+@-]+)+/?)")
# An option starts a word: at the start, after a space, an opening bracket or the "," or "|" between
# alternatives ("-V,--version", "[-b|--block]"), or after a quote that itself opens a word. Not after a closing bracket, a quote closing a word, or a sign ending
# one: that hyphen joins a German compound ("IP(v4)-Adresse", "'Eingabe'-Taste", "»Datei«-Menü",
# "GTK+-Bibliothek", "C++-Compiler", "Yahoo!-Konto", "</interface>-Knopf" in plain text); taken for
# an option, it made the software model's as-written translation look as if it had added a
# placeholder.
_OPENING_QUOTE = "['\"`„“‚‘»«]"
OPTION = re.compile(r"(?:^|(?<=[\s(\[{<,|])|(?<=^" + _OPENING_QUOTE + r")|(?<=[\s(\[{<,|]" + _OPENING_QUOTE + r")"
                    r"|(?<=[\s(]``))"
                    r"(?:--[A-Za-z0-9][\w-]*(?:\[=[A-Za-z_][\w-]*\]|=[A-Za-z_][\w-]*)?"
                    r"|-[A-Za-z][A-Za-z0-9]*)(?![\w-])")
ACCELERATOR = re.compile(r"(?<![\w&])&(?=[^\W_])|(?<=[^\W\d_])&(?=[^\W\d_A-Z])|(?<![\w_])_(?=[^\W_])")
ACCELERATOR_MAX_WORDS = 6
# GTK's `_` in a longer label ("Keep main _window in front after applying effect", a check box; sent
# as written, the model dropped the `_`), read where it starts a word of letters in a text without
# printf syntax, not closing a bracket: of 25 catalog messages of 7-16 words with one word-initial `_`
# (data/debian_catalogs, a seeded sample read by hand) it reads 13, every mnemonic but one on a
# one-letter word ("last _N minutes") and one identifier ("without _vector prefix"), and none of
# the other identifiers (`%<_thread%>`, `_float128`, `(to _badptr)`, `_u`).
LONG_LABEL_MAX_WORDS = 16
_LONG_LABEL_MNEMONIC = re.compile(r"(?:(?<=\s)|^)_[^\W\d_]{2,}(?![\w)])")
WEBLATE = re.compile(r"\[X[0-9]+X\]")
CODE = re.compile(r"(?<![\w`])`(?=[^\s`])[^`'\n]*[^\s`']`(?![\w`])")
ICU_START = re.compile(
    r"\{\s*[A-Za-z0-9_]+\s*,\s*(?:plural|select|selectordinal|number|date|time|choice|spellout|ordinal|duration)\b")

PLACEHOLDER_STYLES = ("weblate", "code", "url", "email", "path", "icu", "fluent", "shell", "webextension", "ruby", "python",
                      "brace", "qt",
                      "printf", "laravel", "entity", "option", "accelerator")
# Not a style clients choose: `#`, the number, in a sentence made of an ICU plural branch (service/icu.py),
# reported as an "icu" part.
ICU_NUMBER = "icu-number"


@dataclass(frozen=True)
class Protected:
    """One protected part of a text: ``text == original[start:end]``."""

    kind: str
    text: str
    start: int
    end: int


def blanked(text: str, parts: Sequence[Protected]) -> str:
    """`text` with each part's characters turned into spaces, every offset kept: where glossary terms
    are looked for in a text that keeps its placeholders (a term "name" is not the one in "%(name)s")."""
    chars = list(text)
    for part in parts:
        chars[part.start:part.end] = " " * (part.end - part.start)
    return "".join(chars)


def _icu_arguments(text: str) -> list[tuple[int, int]]:
    spans = []
    for match in ICU_START.finditer(text):
        depth = 0
        for i in range(match.start(), len(text)):
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
                if depth == 0:
                    # i18next's `{{count, number}}` wraps it in a pair of its own: the template
                    # variable is the placeholder ("brace"), braces and all.
                    if not (text[match.start() - 1:match.start()] == "{" and text[i + 1:i + 2] == "}"):
                        spans.append((match.start(), i + 1))
                    break
    return spans


def _term_spans(text: str, term: str) -> list[tuple[int, int]]:
    # Whole words only: "Git" must not protect the start of "GitHub".
    pattern = re.compile(r"(?<!\w)" + re.escape(term) + r"(?!\w)")
    return [(m.start(), m.end()) for m in pattern.finditer(text)]


def _trimmed_urls(text: str) -> list[tuple[int, int]]:
    spans = []
    for match in URL.finditer(text):
        start, end = match.span()
        while end > start:
            last = text[end - 1]
            if last in ".,;:!?'\"" or (last in ")]}" and text.count("([{"[")]}".index(last)], start, end)
                                                          < text.count(last, start, end)):
                end -= 1
            else:
                break
        if end - start > len("www."):
            spans.append((start, end))
    return spans


# GTK's `_` inside a word of a short label ("Dieses Fenster immer an_zeigen", "Ni_ght Mode"), where
# translators put it as often as at the start: sent as written, the model dropped it.
_MIDWORD_MNEMONIC = re.compile(r"(?<=[^\W\d_])_(?=[^\W\d_])")


def _mnemonic_word(text: str, at: int) -> bool:
    """Whether the `_` at `at`, between two letters, marks a mnemonic: a lower-case letter follows, and its
    word is letters but for it and closing punctuation, and not all lower-case ASCII (`pam_start`,
    `object_id`: identifiers; `de_DE`, `WM_ROLE`: no lower-case letter after). Read so on the Debian
    valid and test splits' short labels, both languages, no identifier was taken for a mnemonic."""
    start = max(text.rfind(" ", 0, at), text.rfind("\n", 0, at)) + 1
    end = len(re.match(r"\S*", text[at:]).group(0)) + at
    word = text[start:end].rstrip(".:…!?")
    letters = word.replace("_", "", 1)
    return text[at + 1].islower() and letters.isalpha() and not (letters.isascii() and letters.islower())


def _accelerator(text: str) -> list[tuple[int, int]]:
    words = len(text.split())
    if words > ACCELERATOR_MAX_WORDS:
        if words > LONG_LABEL_MAX_WORDS or "%" in text or text.count("_") != 1:
            return []
        found = _LONG_LABEL_MNEMONIC.search(text)
        return [(found.start(), found.start() + 1)] if found else []
    if "&&" in text or text.count("_") > 1:
        return []
    found = [m.start() for m in ACCELERATOR.finditer(text) if not ENTITY.match(text, m.start())]
    if not found and "%" not in text:
        found = [m.start() for m in _MIDWORD_MNEMONIC.finditer(text) if _mnemonic_word(text, m.start())]
    if len(found) != 1:
        return []
    at = found[0]
    if text[at] == "_" and not text[:at].strip() and text[at + 1].islower():
        return []
    return [(at, at + 1)]


_PATTERNS = {"weblate": WEBLATE, "code": CODE, "email": EMAIL, "path": PATH, "option": OPTION, "shell": SHELL,
             "webextension": WEBEXTENSION, "ruby": RUBY, "python": PYTHON, "brace": BRACE, "printf": PRINTF, "qt": QT,
             "entity": ENTITY, "fluent": FLUENT, "laravel": LARAVEL}
# A character every match of the style's pattern holds: a text without it is not scanned (most texts
# are prose without any: reading a caption for placeholders took 47 µs, 9 without the 15 scans).
# Each entry is checked against its pattern (tests/service/test_placeholder_scan_filter.py).
NEEDED = {"weblate": "[", "code": "`", "email": "@", "path": "/", "option": "-", "shell": "$", "webextension": "$",
          "ruby": "%", "python": "%", "brace": "{", "printf": "%", "qt": "%", "entity": "&", "fluent": "{",
          "laravel": ":"}


LITERALS = ("url", "email", "path", "option")
# Parts that never join others into one: a request's terms and a label's mnemonic.
UNJOINED = ("term", "glossary", "accelerator")
# Each opening quote or bracket and what may close it; GNU's messages quote `like this'.
_PAIRS = {"'": "'", '"': '"', "`": "`'", "‘": "’", "“": "”", "«": "»", "»": "«", "„": "“", "‚": "‘", "<": ">", "[": "]", "(": ")"}


def paired(text: str, start: int, end: int) -> bool:
    """Whether text[start:end] has a quote or bracket pair right around it (`'%s'`, `<bugs@x.org>`, `` `%s' ``)."""
    return 0 < start and end < len(text) and text[end] in _PAIRS.get(text[start - 1], "")


def _enclosed(text: str, start: int, end: int) -> tuple[int, int]:
    return (start - 1, end + 1) if paired(text, start, end) else (start, end)


def unenclosed(text: str) -> str:
    """A protected part without the quotes or angle brackets it was taken with (`'--size=M'` ->
    `--size=M`): a translation may write other quotes around the same literal (»--size=M«). Not a
    Markdown code span's backticks, which are its syntax (GNU's `` `--size=M' `` are quotes)."""
    if len(text) > 2 and text[-1] in _PAIRS.get(text[0], "") and not text[0] == text[-1] == "`":
        return text[1:-1]
    return text


def find_placeholders(text: str, styles: Collection[str] = PLACEHOLDER_STYLES) -> list[Protected]:
    """The placeholders of `text` in the given styles, in text order, none overlapping another."""
    return find_protected(text, (), styles)


def find_protected(text: str, terms: Sequence[str] = (),
                   styles: Collection[str] = PLACEHOLDER_STYLES) -> list[Protected]:
    """Every protected part of `text`, in text order, none overlapping another."""
    candidates: list[tuple[str, int, int]] = []
    for style in PLACEHOLDER_STYLES:
        if style not in styles:
            continue
        if style == "icu":
            candidates += [("icu", a, b) for a, b in _icu_arguments(text)]
        elif style == "url":
            candidates += [("url", a, b) for a, b in _trimmed_urls(text)]
        elif style == "accelerator":
            candidates += [("accelerator", a, b) for a, b in _accelerator(text)]
        elif NEEDED[style] in text:
            candidates += [(style, m.start(), m.end()) for m in _PATTERNS[style].finditer(text)]
    # Longer terms first, so that "New York City" wins over "New York".
    for term in sorted({t for t in terms if t}, key=len, reverse=True):
        candidates += [("term", a, b) for a, b in _term_spans(text, term)]
    if ICU_NUMBER in styles:  # last: a `#` inside a URL or a term is theirs
        candidates += [("icu", m.start(), m.end()) for m in re.finditer("#", text)]
    # A literal in quotes or angle brackets, `'--block-size=M'`, `<bugs@example.org>`, is kept with
    # them: the model, seeing only the empty pair, moved it ("Fehler in <> melden bugs@example.org").
    candidates = [(kind, *_enclosed(text, start, end)) if kind in LITERALS else (kind, start, end)
                  for kind, start, end in candidates]
    # Taken spans never overlap, so a candidate can only meet its neighbours in start order.
    taken: list[Protected] = []
    starts: list[int] = []
    for kind, start, end in candidates:
        at = bisect.bisect_right(starts, start)
        if (at and taken[at - 1].end > start) or (at < len(taken) and taken[at].start < end):
            continue
        starts.insert(at, start)
        taken.insert(at, Protected(kind, text[start:end], start, end))
    return _quoted_runs_joined(text, _glued_joined(text, _alternatives_joined(text, taken)))


def _alternatives_joined(text: str, parts: list[Protected]) -> list[Protected]:
    """Options a usage line joins with `|` (`-V|--version|-h|--help`) as one option: taken one by one,
    the model kept them and lost the bars between them ("-V --version -h||||--help")."""
    joined: list[Protected] = []
    for part in parts:
        last = joined[-1] if joined else None
        if (last is not None and last.kind == part.kind == "option" and text[last.end:part.start] == "|"
                and not paired(text, last.start, last.end) and not paired(text, part.start, part.end)):
            start, end = _enclosed(text, last.start, part.end)
            if (start, end) != (last.start, part.end) and joined[-2:-1] and joined[-2].end > start:
                start, end = last.start, part.end
            joined[-1] = Protected("option", text[start:end], start, end)
        else:
            joined.append(part)
    return joined


def _glued_joined(text: str, parts: list[Protected]) -> list[Protected]:
    """Placeholders written one against the next (`%s%s`, `%s%c%s%s`, `{0}{1}`) as one part: taken out one
    by one and put back by the alignment they came back apart ("%s %s"), printing otherwise."""
    joined: list[Protected] = []
    for part in parts:
        last = joined[-1] if joined else None
        if last is not None and last.end == part.start and last.kind not in UNJOINED and part.kind not in UNJOINED:
            joined[-1] = Protected(last.kind, text[last.start:part.end], last.start, part.end)
        else:
            joined.append(part)
    return joined


def _quoted_runs_joined(text: str, parts: list[Protected]) -> list[Protected]:
    """A command line in quotes made of placeholders and a literal (`` `%s --help' ``, `'%s -h'`) as one
    part, with its quotes, as a literal alone in quotes is: taken out one by one, they left the model
    an empty pair of quotes, and put back they landed beside it ("Versuchen Sie %s --help`' für …")."""
    joined: list[Protected] = []
    k = 0
    while k < len(parts):
        end = k
        while (end + 1 < len(parts) and parts[end + 1].kind not in UNJOINED
               and text[parts[end].end:parts[end + 1].start].strip(" ") == ""
               and parts[end].end < parts[end + 1].start):
            end += 1
        run = parts[k:end + 1]
        if (len(run) > 1 and run[0].kind not in UNJOINED and any(p.kind in LITERALS for p in run)
                and paired(text, run[0].start, run[-1].end)):
            kind = next(p.kind for p in run if p.kind in LITERALS)
            start, stop = run[0].start - 1, run[-1].end + 1
            joined.append(Protected(kind, text[start:stop], start, stop))
            k = end + 1
        else:
            joined.append(parts[k])
            k += 1
    return joined
