"""Markdown's inline emphasis and links in a plain text: `*very*`, `**Save**`, `_this_`, `__that__`,
`***both***`, `~~gone~~`, read as tags whose opening and closing tags are their delimiters, and
`[the guide](docs/guide.md)` or `![a screenshot](main.png)`, read as a tag whose opening tag is
`[` (`![`) and whose closing tag is `](destination)` (or a reference's `][label]`): the link's text is
translated, its destination kept as written (a relative one, "images/main.png", had come back
"Bilder/main.png", and a URL put back apart from its text: "[**release Notizen**] (https://…)"; a
label, "[New project][new]", had come back "[Neues Projekt][neu]", a link to nothing).

Sent as words, the model copies an emphasised word untranslated: "Use *only* the **latest**
version." came back "Verwenden Sie *only* die **latest** Version.", "The file was *successfully*
uploaded." as "*successful* hochgeladen". Read as tags, the words inside are translated with the
sentence and the delimiters put back around their translation by the word alignment, as html's tags
are (service/protection/placement.py).

The delimiters pair as CommonMark's do where it matters for UI text and documentation: a run of one
to three `*` or `_` (two `~`) opens where it is followed by a visible character and not written
inside a word, closes where it follows one and is not followed by a word character, and closes the
nearest open run of the same character and length. Stricter than CommonMark, which lets `*` pair
inside words: "2*3*4" and "**/*.js" stay text. Nothing pairs inside a code span (`` `a*b*` ``), a
link's destination (`[docs](http://x/_y_)`) or label, a bare URL, or a character escaped with a backslash.
"""
from __future__ import annotations

import bisect
import re
import unicodedata
from dataclasses import replace

from service.protection.tagged import Markup, Tag, nested, plain_markup

_RUN = re.compile(r"\*{1,3}|_{1,3}|~~")
_CODE = re.compile(r"(`+)[^`]*?\1")
# Where emphasis cannot start or end: code spans, link destinations, autolinks and bare URLs, escapes.
_OPAQUE = re.compile(_CODE.pattern + r"|\]\([^()\s]*\)|\]\[[^\[\]\n]+\]|<[a-z][a-z0-9+.-]*:[^<>\s]*>|\b[a-z][a-z0-9+.-]*://\S+|\\.",
                     re.IGNORECASE)
_NAMES = {1: "em", 2: "strong", 3: "strong-em"}
# An inline link or image, or one by reference (`[the guide][guide]`, its destination defined
# elsewhere by its label): its text is translated, its destination or label kept as written.
# A link's text may be an image (a README's badge: `[![build](badge.svg)](ci-url)`).
_LINK = re.compile(r"(!?)\[((?:[^\[\]\n]|!\[[^\[\]\n]*\]\([^()\s]*\))*)\](?:\([^()\s]*\)|\[[^\[\]\n]+\])")
_IDENTIFIER = re.compile(r"\w+")
_LISP_SPECIAL = re.compile(r"[A-Z][A-Z0-9]*(?:-[A-Z0-9]+)+")
_ENDS = ".,!?:;…)]}%\"'”’»"


def _punctuation(ch: str) -> bool:
    return unicodedata.category(ch)[0] in "PS"


def _emphasised(inside: str, delimiter: str) -> bool:
    """Whether `inside` reads as emphasised words, not as a file pattern or an identifier: it starts
    with a letter, a digit or a placeholder's first character (an opening quote or bracket before
    one), and ends with one or with closing punctuation. "(*.svg)|*.svg|" is a file dialog's
    filter, "*.reg" a pattern, "__init__" Python's name and "*GENSYM-COUNTER*" a Lisp variable (as
    the German catalog keeps it), not emphasis."""
    if not inside or (delimiter == "__" and _IDENTIFIER.fullmatch(inside)) or _LISP_SPECIAL.fullmatch(inside):
        return False
    first = inside.lstrip("\"'“„«‘([")
    return bool(first) and (first[0].isalnum() or first[0] in "%{$") and (inside[-1].isalnum() or inside[-1] in _ENDS)


def read_markdown(text: str) -> Markup:
    """`text` with its paired emphasis delimiters and its links' brackets and destinations taken out
    as tags (a Markup as read_markup's)."""
    opaque = [False] * len(text)
    for match in _OPAQUE.finditer(text):
        opaque[match.start():match.end()] = [True] * (match.end() - match.start())
    code = [False] * len(text)
    for match in _CODE.finditer(text):
        code[match.start():match.end()] = [True] * (match.end() - match.start())
    pairs: list[tuple[int, int, int]] = []  # (opening run start, closing run start, length)
    stack: list[tuple[str, int, int]] = []   # open runs: (delimiter, start, length)
    for match in _RUN.finditer(text):
        start, end = match.span()
        if opaque[start] or (start and text[start - 1] == match.group()[0]) or (end < len(text) and text[end] == match.group()[0]):
            continue  # in code or a URL, or part of a longer run ("****")
        before = text[start - 1] if start else " "
        after = text[end] if end < len(text) else " "
        opens = not after.isspace() and not before.isalnum() and (not _punctuation(after) or before.isspace() or _punctuation(before))
        closes = not before.isspace() and not after.isalnum() and (not _punctuation(before) or after.isspace() or _punctuation(after))
        delimiter = match.group()
        if closes and not (after == "." and end + 1 < len(text) and text[end + 1].isalnum()):
            found = next((k for k in range(len(stack) - 1, -1, -1) if stack[k][0] == delimiter), None)
            if found is not None and _emphasised(text[stack[found][1] + len(delimiter):start], delimiter):
                pairs.append((stack[found][1], start, len(delimiter)))
                del stack[found:]
                continue
        if opens:
            stack.append((delimiter, start, len(delimiter)))
    # (where the opening tag starts, its length, where the closing tag starts, its length, name)
    spans = [(opening, length, closing, length, "del" if text[opening] == "~" else _NAMES[length])
             for opening, closing, length in pairs]
    links = [match for match in _LINK.finditer(text) if not code[match.start()]]
    links += [image for link in links if not link.group(1) for image in _LINK.finditer(text, link.start(2), link.end(2))]
    # Emphasis across a link's edge ("*a [b* c](x)") pairs no more.
    spans = [span for span in spans
             if not any((link.start() < span[0] < link.end()) != (link.start() < span[2] < link.end()) for link in links)]
    spans += [(link.start(), len(link.group(1)) + 1, link.end(2), link.end() - link.end(2), "img" if link.group(1) else "a")
              for link in links]
    if not spans:
        return plain_markup(text)
    hidden = [False] * len(text)
    for opening, opening_length, closing, closing_length, _ in spans:
        hidden[opening:opening + opening_length] = [True] * opening_length
        hidden[closing:closing + closing_length] = [True] * closing_length
    plain_at = [0] * (len(text) + 1)  # plain_at[i]: where text[i] (or what follows it) stands in the plain text
    kept, origin, origin_end = [], [], []
    for i, ch in enumerate(text):
        plain_at[i] = len(kept)
        if not hidden[i]:
            kept.append(ch)
            origin.append(i)
            origin_end.append(i + 1)
    plain_at[len(text)] = len(kept)
    origin.append(len(text))
    tags = nested([Tag(name, text[opening:opening + opening_length], text[closing:closing + closing_length],
                       plain_at[opening], plain_at[closing], opening, closing + closing_length)
                   for opening, opening_length, closing, closing_length, name in spans])
    return Markup("".join(kept), tags, origin, origin_end)


def reads_as_markdown(text: str) -> bool:
    """Whether a plain text has emphasis to read as tags (and no html: that reading comes first)."""
    return any(ch in text for ch in "*_~[") and bool(read_markdown(text).tags)


def with_markdown(markup: Markup, text: str) -> Markup:
    """An html reading of `text` (`markup`) with the Markdown emphasis and links of its plain text
    read too, as a plain text that is a line of inline html and Markdown holds them ("Press
    <kbd>Ctrl</kbd>+<kbd>S</kbd> to **save**": read as html only, "**save**" came back untranslated).
    Where a Markdown pair crosses an html element's edge, the html reading alone."""
    inner = read_markdown(markup.plain)
    if not inner.tags:
        return markup
    for md in inner.tags:
        for tag in markup.tags:
            if not tag.standalone and (md.source_start < tag.start < md.source_end) != (md.source_start < tag.end < md.source_end):
                return markup

    def inner_at(k: int) -> int:  # where the html reading's plain[k] stands in the Markdown reading's
        return bisect.bisect_left(inner.origin, k, 0, len(inner.plain))

    origin = [markup.origin[k] for k in inner.origin[:-1]] + [len(text)]
    origin_end = [markup.origin_end[k] for k in inner.origin[:-1]]
    tags = [replace(tag, start=inner_at(tag.start), end=inner_at(tag.end), parent=None, children=[])
            for tag in markup.tags]
    tags += [replace(md, source_start=markup.origin[md.source_start], source_end=markup.origin_end[md.source_end - 1],
                     parent=None, children=[]) for md in inner.tags]
    return Markup(inner.plain, nested(tags), origin, origin_end)
