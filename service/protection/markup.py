"""Inline markup in a text to translate: the tags come out, the text is translated, the tags go back.

`read_markup` turns `<b>Hello</b> &amp; <a href="/x">welcome</a><br/>` into the plain text
`Hello & welcome` and the tags with the character span of plain text each one wraps. Entities
are decoded in the plain text (the model reads `&`, not `&amp;`) and the output is escaped
again (service/protection/placement.py). A tag's own text (attributes and their quoting
included) is kept byte for byte.

"html" is lenient where browsers are: void elements (`<br>`, `<img …>`) need no closing slash
(one closed later, KDE's `<link url='%1'>More...</link>`, wraps text), react-i18next's numbered
tags (`<1>here</1>`, `<2/>`) are tags where they pair,
a `<` or `&` that starts no tag or entity is text. "xml" is strict: every tag closed, `<` and
`&` escaped, only XML's five named entities, and no character reference to a character XML does
not allow (`&#0;`, a surrogate `&#xD800;`). Either way, tags must nest; anything else is a
`MarkupError` naming what is wrong and where (a character offset into the text).

Elements that are not text to translate pass through untouched, as browsers' and LibreTranslate's
translators leave them: `script`, `style`, `code`, `pre`, Android's `xliff:g` (its strings' mark for
what not to translate), any element marked `translate="no"` or `class="notranslate"`, and an
e-book's page break (`epub:type="pagebreak"`, `role="doc-pagebreak"`: the printed page's number). Each is
read as one standalone piece (`Tag.verbatim`, the element from its opening to its closing tag) that
the translation carries like a placeholder. In html,
`script` and `style` hold raw text (a `<` in a script is no tag), ended by their closing tag only.
"""
from __future__ import annotations

import html
import re
from typing import Literal

from service.protection.markdown import read_markdown, with_markdown
from service.protection.tagged import Markup, Tag, plain_markup

# "markdown": a plain text's segment with emphasis or links (service/protection/markdown.py); "html-markdown":
# one that is a line of inline html with them. Never a request's format.
TextFormat = Literal["text", "html", "xml", "markdown", "html-markdown"]

TAG = re.compile(r"<(/?)([A-Za-z][A-Za-z0-9:_.-]*)((?:\s+[^<>\s=/]+(?:\s*=\s*(?:\"[^\"]*\"|'[^']*'|[^\s\"'<>=`]+))?)*)\s*(/?)>")
# react-i18next's numbered tags, read in html where they pair (`_numbered_tag`); the same four groups.
NUMBERED_TAG = re.compile(r"<(/?)([0-9]+)()\s*(/?)>")
# Comments, with declarations (`<!DOCTYPE html>`) and processing instructions (`<?xml ...?>`), which a
# whole page or file holds: kept as written, where they stand.
COMMENT = re.compile(r"<!--.*?-->|<![A-Za-z][^<>]*>|<\?[^<>]*\?>", re.DOTALL)
ENTITY = re.compile(r"&(#[0-9]+|#[xX][0-9a-fA-F]+|[A-Za-z][A-Za-z0-9]*);")
XML_ENTITIES = {"amp", "lt", "gt", "quot", "apos"}
# Elements whose content is not prose to translate; script and style hold raw text in html. With
# them XLIFF's and TMX's codes, which hold the native code a tool took out of the text it sends
# (`<ph>`, `<it>`, and a paired code's halves `<bpt>` and `<ept>`, read as one pair where they nest:
# `_paired_code`).
UNTRANSLATED = {"script", "style", "code", "pre", "xliff:g", "bpt", "ept", "ph", "it"}
# A paired code's halves name their pair by the same `rid`, or lacking one, `id` (XLIFF) or `i` (TMX).
_CODE_PAIR = re.compile(r"""\s(rid|id|i)\s*=\s*(?:"([^"]*)"|'([^']*)')""")
HTML_RAW_TEXT = {"script", "style"}
# Marked not to translate; or a printed page's number in an e-book (EPUB's and DPUB-ARIA's page break),
# which the translation keeps where it stands
TRANSLATE_NO = re.compile(r"""\btranslate\s*=\s*["']?no\b|\bclass\s*=\s*(?:"[^"]*|'[^']*|)\bnotranslate\b"""
                          r"""|\b(?:epub:type|role)\s*=\s*["'][^"']*\b(?:doc-)?pagebreak\b""", re.IGNORECASE)
HTML_VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
# Elements a browser (or Qt's rich text) renders as a line or block of their own: where one starts
# or ends between two characters, the words on either side are apart though no space is written
# ("Line one.<br/>Line two.", "<p>A</p><p>B</p>", KDE's "<nl/>"). With them the structure elements of
# KDE's semantic markup (KUIT: para, list, item, subtitle; "<qt>" wraps a rich text) and DocBook's
# paragraphs and lists, which KDE's and GNOME's catalogs send: "<para>One.</para><para>Two.</para>"
# had reached the model as "One.Two." and come back with a word moved across the paragraphs.
WORD_BREAKING = {"address", "article", "aside", "blockquote", "body", "br", "dd", "div", "dl", "dt", "figcaption",
                 "figure", "footer", "h1", "h2", "h3", "h4", "h5", "h6", "head", "header", "hr", "html", "li", "nl",
                 "ol", "p", "pre", "section", "table", "td", "th", "title", "tr", "ul",
                 # HTML5's other blocks: an EPUB's table of contents is a <nav>, a form's parts, a table's
                 "nav", "main", "details", "summary", "dialog", "hgroup", "search", "menu", "center", "form",
                 "fieldset", "legend", "caption", "thead", "tbody", "tfoot", "select", "optgroup", "option",
                 "para", "simpara", "list", "item", "subtitle", "qt",
                 "itemizedlist", "orderedlist", "listitem", "variablelist", "varlistentry"}


class MarkupError(ValueError):
    """Markup that cannot be taken apart and put back: one line saying what and where."""


def read_markup(text: str, fmt: TextFormat) -> Markup:
    if fmt == "text":
        return plain_markup(text)
    if fmt in ("markdown", "html-markdown"):
        return read_markdown(text) if fmt == "markdown" else with_markdown(read_markup(text, "html"), text)
    strict = fmt == "xml"
    plain: list[str] = []
    origin: list[int] = []
    origin_end: list[int] = []
    tags: list[Tag] = []
    open_stack: list[int] = []
    code_ends: dict[int, int] = {}  # an open paired code's tag -> where its ept starts

    def keep(c: str, start: int, end: int) -> None:
        plain.append(c)
        origin.append(start)
        origin_end.append(end)

    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "<":
            comment = COMMENT.match(text, i)
            if comment:
                _add(tags, open_stack, Tag("!--", comment.group(0), None, len(plain), len(plain), i, comment.end()))
                i = comment.end()
                continue
            match = TAG.match(text, i) or (None if strict else _numbered_tag(text, i, tags, open_stack))
            if match is None:
                if strict:
                    raise MarkupError(f"'<' at character {i} starts no tag (write &lt; for a literal '<')")
                keep(ch, i, i + 1)
                i += 1
                continue
            closing, name, _, self_closing = match.group(1), match.group(2), match.group(3), match.group(4)
            if closing:
                if self_closing:
                    raise MarkupError(f"closing tag {match.group(0)} at character {i} cannot also be self-closing")
                if not strict:
                    _end_implied(tags, open_stack, i, len(plain), closed_by=name)
                if not open_stack:
                    raise MarkupError(f"closing tag </{name}> at character {i} has no opening tag")
                top = tags[open_stack[-1]]
                if top.name != name:
                    raise MarkupError(f"closing tag </{name}> at character {i} does not match <{top.name}> "
                                      f"opened at character {top.source_start}")
                top.closing = match.group(0)
                top.end = len(plain)
                top.source_end = match.end()
                open_stack.pop()
            elif not strict and open_stack and name.lower() in _ENDS.get(tags[open_stack[-1]].name.lower(), ()):
                _end_implied(tags, open_stack, i, len(plain))  # "<li>One<li>Two": the first item ends
                continue
            elif self_closing or (not strict and name.lower() in HTML_VOID and not _closed_later(text, match)):
                _add(tags, open_stack, Tag(name, match.group(0), None, len(plain), len(plain), i, match.end()))
            elif name.lower() in UNTRANSLATED or TRANSLATE_NO.search(match.group(3)):
                end = _element_end(text, match, raw=not strict and name.lower() in HTML_RAW_TEXT)
                if name == "ept" and open_stack and code_ends.get(open_stack[-1]) == i:
                    top = tags[open_stack.pop()]  # a paired code's end
                    top.closing, top.end, top.source_end = text[i:end], len(plain), end
                elif name == "bpt" and (ept := _paired_code(text, match, end)) is not None:
                    # the pair is one element around its text, open until its ept
                    _add(tags, open_stack, Tag(name, text[i:end], "", len(plain), len(plain), i, end))
                    open_stack.append(len(tags) - 1)
                    code_ends[len(tags) - 1] = ept
                else:
                    _add(tags, open_stack, Tag(name, match.group(0), None, len(plain), len(plain), i, end,
                                               verbatim=text[i:end]))
                i = end
                continue
            else:
                # Paired until its closing tag says where it ends; "" marks it open meanwhile.
                _add(tags, open_stack, Tag(name, match.group(0), "", len(plain), len(plain), i, match.end()))
                open_stack.append(len(tags) - 1)
            i = match.end()
        elif ch == "&":
            entity = ENTITY.match(text, i)
            if entity is None or (strict and not entity.group(1).startswith("#")
                                  and entity.group(1) not in XML_ENTITIES):
                if strict:
                    raise MarkupError(f"'&' at character {i} starts no entity (write &amp; for a literal '&')")
                keep(ch, i, i + 1)
                i += 1
                continue
            if strict and entity.group(1).startswith("#") and not _xml_char(entity.group(1)):
                raise MarkupError(f"character reference {entity.group(0)} at character {i} is not a character "
                                  "XML allows")
            decoded = html.unescape(entity.group(0))
            if decoded == entity.group(0):  # an unknown name: text as written
                decoded = ch
                i_next = i + 1
            else:
                i_next = entity.end()
            for c in decoded:
                keep(c, i, i_next)
            i = i_next
        elif ch == ">" and strict:
            raise MarkupError(f"'>' at character {i} closes no tag (write &gt; for a literal '>')")
        else:
            keep(ch, i, i + 1)
            i += 1
    if not strict:
        _end_implied(tags, open_stack, len(text), len(plain), closed_by="")
    if open_stack:
        top = tags[open_stack[-1]]
        raise MarkupError(f"tag <{top.name}> opened at character {top.source_start} is never closed")
    origin.append(len(text))
    return Markup("".join(plain), tags, origin, origin_end)


# HTML's elements whose end tag may be left out (the HTML standard, "Optional tags"), each with the
# elements whose start ends it; any also ends where its parent does (a closing tag, the text's end).
# Qt's and KDE's rich text leaves them out ("<html>…<p>One.<br>", "<p>Two</p>"): a 422 before.
_BLOCKS = frozenset({"address", "article", "aside", "blockquote", "details", "div", "dl", "fieldset", "figcaption",
                     "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr", "main", "menu",
                     "nav", "ol", "p", "pre", "section", "table", "ul"})
_ENDS: dict[str, frozenset[str]] = {
    "p": _BLOCKS, "li": frozenset({"li"}), "dt": frozenset({"dt", "dd"}), "dd": frozenset({"dt", "dd"}),
    "tr": frozenset({"tr", "tbody", "tfoot"}), "td": frozenset({"td", "th", "tr", "tbody", "tfoot"}),
    "th": frozenset({"td", "th", "tr", "tbody", "tfoot"}), "thead": frozenset({"tbody", "tfoot"}),
    "tbody": frozenset({"tbody", "tfoot"}), "tfoot": frozenset(), "option": frozenset({"option", "optgroup"}),
    "optgroup": frozenset({"optgroup"}), "colgroup": frozenset(), "caption": frozenset(), "rt": frozenset({"rt", "rp"}),
    "rp": frozenset({"rt", "rp"}), "html": frozenset(), "head": frozenset({"body"}), "body": frozenset(),
}


def _end_implied(tags: list[Tag], open_stack: list[int], at: int, plain_at: int, closed_by: str | None = None) -> None:
    """Ends, at `at` (`plain_at` in the plain text), the open elements whose end tag HTML lets a
    text leave out: the innermost one (a start that ends it follows, `closed_by` None), or every one
    inside the open element named `closed_by` (its closing tag follows; "": the text ends). Each
    keeps an empty closing tag: the translation leaves it out too."""
    names = [tags[k].name for k in open_stack]
    if closed_by is None:
        count = 1
    elif closed_by in names:
        count = names[::-1].index(closed_by)
    else:
        count = len(names) if closed_by == "" else 0
    if not all(name.lower() in _ENDS for name in names[len(names) - count:]):
        return  # another element left open: malformed, the caller names it
    for _ in range(count):
        tag = tags[open_stack.pop()]
        tag.end, tag.source_end = plain_at, at


def _xml_char(reference: str) -> bool:
    """`#65` / `#x41`: whether XML 1.0 allows the character (its production `Char`)."""
    code = int(reference[2:], 16) if reference[1:2] in ("x", "X") else int(reference[1:])
    return (code in (0x9, 0xA, 0xD) or 0x20 <= code <= 0xD7FF or 0xE000 <= code <= 0xFFFD
            or 0x10000 <= code <= 0x10FFFF)


def _element_end(text: str, opening: re.Match, raw: bool) -> int:
    """Where the element that `opening` starts ends (after its closing tag). Raw text (html's
    script and style) ends at the first closing tag of its name; other content nests."""
    name = opening.group(2)
    if raw:
        closing = re.compile(r"</" + re.escape(name) + r"\s*>", re.IGNORECASE).search(text, opening.end())
        if closing is None:
            raise MarkupError(f"tag <{name}> opened at character {opening.start()} is never closed")
        return closing.end()
    depth = 1
    for match in TAG.finditer(text, opening.end()):
        if match.group(2) != name or match.group(4):
            continue
        depth += -1 if match.group(1) else 1
        if depth == 0:
            return match.end()
    raise MarkupError(f"tag <{name}> opened at character {opening.start()} is never closed")


def _paired_code(text: str, bpt: re.Match, end: int) -> int | None:
    """Where the `<ept>` that ends the paired code `bpt` starts (its element ending at `end`), where
    the text between them nests (their pair then reads as one element around its text, carried
    together: sent apart, "Press <bpt id="1">&lt;b&gt;</bpt>Enter<ept id="1">&lt;/b&gt;</ept>" came
    back with "Eingabe" and the ept's code inside the bpt); None where it does not (each half
    then carried as a placeholder of its own)."""
    key = _code_key(bpt.group(3))
    if key is None:
        return None
    depth = 0
    for match in TAG.finditer(text, end):
        name = match.group(2)
        if name == "ept" and not match.group(1) and _code_key(match.group(3)) == key:
            return match.start() if depth == 0 else None
        if name in ("bpt", "ept") or match.group(4):
            continue
        depth += -1 if match.group(1) else 1
        if depth < 0:
            return None
    return None


def _code_key(attributes: str) -> str | None:
    found = {m.group(1): m.group(2) if m.group(2) is not None else m.group(3) for m in _CODE_PAIR.finditer(attributes)}
    return found.get("rid", found.get("id", found.get("i")))


def _numbered_tag(text: str, at: int, tags: list[Tag], open_stack: list[int]) -> re.Match | None:
    """react-i18next's numbered tags (`<1>here</1>`, `<2/>`, its Trans component's children) at
    `at`, where they pair: an opening one closed later, a closing one that closes the open tag; None
    for any other (`<1>` alone is text, "Press <1> for yes"). Read as words, "Click <1>here</1>"
    came back "Klicken Sie auf <1>her</1>"."""
    match = NUMBERED_TAG.match(text, at)
    if match is None:
        return None
    closing, name, _, self_closing = match.groups()
    if self_closing:
        return match
    if closing:
        return match if open_stack and tags[open_stack[-1]].name == name else None
    return match if _closes_later(text, match) else None


def _closed_later(text: str, opening: re.Match) -> bool:
    """Whether an html void element's name (not `<br>`) is closed later in the text: then it is no
    void element but another vocabulary's (KDE's "<link url='%1'>More...</link>"), which wraps text."""
    return opening.group(2).lower() != "br" and _closes_later(text, opening)


def _closes_later(text: str, opening: re.Match) -> bool:
    """Whether a closing tag of the name `opening` opens stands later in the text."""
    closing = re.compile(r"</" + re.escape(opening.group(2)) + r"\s*>", re.IGNORECASE)
    return closing.search(text, opening.end()) is not None


def _add(tags: list[Tag], open_stack: list[int], tag: Tag) -> None:
    if open_stack:
        tag.parent = open_stack[-1]
        tags[open_stack[-1]].children.append(len(tags))
    tags.append(tag)


def reads_as_markup(text: str) -> bool:
    """Whether a text sent as plain text is one line of well-formed inline markup (Qt's and KDE's
    rich text, Pango's, a web app's HTML: "<b>Remote host:</b> %1", "<filename>%1</filename>"), to be
    read as html: its tags taken out and put back by the alignment, as `format` html does. Sent as
    words, the software model broke some ("<b>Leerkey</b>/<b>Shift+Left</b> to scroll <b></b>%1 to
    search something</b>") and translated the rest worse (results/as_written.md). Not over several
    lines (plain text keeps its lines), nor with an `&` (an entity or an accelerator reads otherwise in
    html) or a `<` or `>` that is no tag's ("Usage: %s <file>", "<unable to print date>": unclosed), nor
    with an element HTML lets go unclosed that wraps no text ("Insert in <li>" names one)."""
    return inline_markup(text) is not None


def inline_markup(text: str) -> Markup | None:
    """`text` read as html where it `reads_as_markup`, else None."""
    if "<" not in text or "&" in text or "\n" in text:
        return None
    try:
        markup = read_markup(text, "html")
    except MarkupError:
        return None
    if not markup.tags or "<" in markup.plain or ">" in markup.plain:
        return None
    # An element left open around no text is named, not markup: "Insert in <li>".
    if any(tag.closing == "" and not tag.plain_inside(markup) for tag in markup.tags):
        return None
    return markup


def escaped(text: str, fmt: TextFormat) -> str:
    """Plain text as text of `fmt`: markup's escaped, a plain text's and Markdown's as it is."""
    if fmt not in ("html", "xml", "html-markdown"):
        return text
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
