"""Programs' string resources, in the source language: every string translated, each read from its
escapes and written back in them. JSON (i18next's, ARB's with `@@locale`, any object of strings),
Android's strings.xml, Java's .properties, Apple's .strings, .NET's .resx and YAML (Rails',
Symfony's, Hugo's)."""
from __future__ import annotations

import bisect
import json
import re
from collections.abc import Callable, Iterator
from html import unescape
from xml.sax.saxutils import escape

from service.documents.xliff import FileInvalid, checked, decoded as decoded_xml
from service.documents.files import Failed, Spans, decoded, encodable, reads_as_xml_content
from service.documents.plurals import ORDER, categories

_SURROGATE = re.compile("[\ud800-\udfff]")
_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\]:,]')


# The key of an entry's text in the JSON files whose every entry is an object: a browser extension's
# messages.json, FormatJS's (react-intl's) extracted messages (an object of them, or babel-plugin-react-intl's
# list with their ids), Transifex's structured JSON.
_MESSAGE_KEYS = ("message", "defaultMessage", "string")


class Json(Spans):
    """Every string value of a JSON file, in any nesting; ARB's metadata (keys from `@`) left. A
    file whose every entry is an object holding its text (a browser extension's messages.json:
    "message"; FormatJS's extracted messages: "defaultMessage"; Transifex's structured JSON:
    "string") gets those texts translated, each entry's other keys (a description, a context, a
    character limit, placeholders and what they stand for) left: they are notes for translators and syntax.
    i18next's plurals (its v4 suffixes, `item_one` and `item_other`) get each category the target's
    language has and they lack (CLDR's: French `item_many`), a copy of `item_other`, before it."""

    fmt = "text"

    def __init__(self, name: str, data: bytes, kind: str, fuzzy: bool) -> None:
        super().__init__()
        self.text, self.encoding = decoded(name, data)
        try:
            document = json.loads(self.text)
        except ValueError as error:
            raise Failed(f"cannot read {name}: not JSON: {error}") from None
        if not isinstance(document, (dict, list)):
            raise Failed(f"cannot read {name}: not a JSON object or list of strings")
        self.source_language = document.get("@@locale", "") if isinstance(document, dict) else ""
        # the key holding each entry's text where every entry is an object holding one (its other keys notes)
        entries = list(document.values() if isinstance(document, dict) else document)
        message = next((key for key in _MESSAGE_KEYS if entries and all(
            isinstance(entry, dict) and isinstance(entry.get(key), str) for entry in entries)), None)
        self.locale: tuple[int, int] | None = None
        # i18next's plurals (v4: `key_one`, `key_other`): base name, the categories it has, where its
        # "other" key starts, where its value starts, the whitespace before that key
        self.plurals: list[tuple[str, set[str], int, int, str]] = []
        # Each open container: whether it is an object, the key just read in it, whether it lies under
        # ARB metadata, and its members so far (key: where the key starts, the whitespace before it,
        # where a string value starts).
        stack: list[list] = []
        tokens = list(_JSON_TOKEN.finditer(self.text))
        for index, token in enumerate(tokens):
            value = token.group(0)
            if value in "{[":
                stack.append([value == "{", None, bool(stack) and self._metadata(stack[-1]), {}])
            elif value in "}]":
                if not message and not stack[-1][2]:  # not in ARB's metadata
                    self._plurals_in(stack[-1][3])
                stack.pop()
            elif value.startswith('"'):
                following = tokens[index + 1].group(0) if index + 1 < len(tokens) else ""
                if stack[-1][0] and following == ":":
                    stack[-1][1] = json.loads(value)  # a key
                    before = self.text[tokens[index - 1].end():token.start()]
                    stack[-1][3][stack[-1][1]] = [token.start(), before if not before.strip() else "", None]
                    continue
                if stack[-1][0] and stack[-1][1] in stack[-1][3]:
                    stack[-1][3][stack[-1][1]][2] = token.start()
                if len(stack) == 1 and stack[-1][1] == "@@locale":
                    self.locale = (token.start(), token.end())
                elif message and not (len(stack) == 2 and stack[-1][0] and stack[-1][1] == message):
                    continue
                elif not self._metadata(stack[-1]):
                    string = json.loads(value)
                    if string.strip():
                        self.spans.append((token.start(), token.end(), string))
        # a file that writes its other characters \u-escaped (an ASCII one holding such escapes) stays so;
        # one in English is ASCII for want of any other character and gets the translations' as they are
        self.ascii = self.text.isascii() and re.search(r"\\u(?!00[0-7])[0-9a-fA-F]{4}", self.text) is not None

    def _plurals_in(self, members: dict[str, list]) -> None:
        """The plurals among an object's members: `x_other` and another of CLDR's categories, both strings."""
        for key, (start, before, value) in members.items():
            if key.endswith("_other") and value is not None:
                base = key[:-len("_other")]
                held = {category for category in ORDER if members.get(f"{base}_{category}", [0, "", None])[2] is not None}
                if len(held) > 1:
                    self.plurals.append((base, held, start, value, before))

    def _edited(self, target: str, written: dict[int, str]) -> list[tuple[int, int, str]]:
        edits = [(*self.locale, json.dumps(target))] if self.locale is not None else []
        wanted = categories(target) or ()
        for base, held, start, value, before in self.plurals:
            if value in written:  # each category the target has and the plural lacks, before "other", a copy of it
                added = "".join(f"{json.dumps(f'{base}_{category}', ensure_ascii=self.ascii)}: {written[value]},{before or ' '}"
                                for category in wanted if category not in held)
                if added:
                    edits.append((start, start, added))
        return edits

    @staticmethod
    def _metadata(container: list) -> bool:
        """Whether what the container holds now is ARB's metadata: it lies under a key from `@`, or
        is the value of one."""
        is_object, key, under, _ = container
        return under or (is_object and (key or "").startswith("@"))

    def _put(self, translation: str, start: int, end: int) -> str:
        # half a character (JSON lets "\ud800" stand alone) can only be written escaped
        return json.dumps(translation, ensure_ascii=self.ascii or _SURROGATE.search(translation) is not None)



def _escaped_character(characters: dict[str, str]) -> Callable[[re.Match], str]:
    """What a backslash escape stands for, its match's group 1 being what follows the backslash: a
    `uXXXX` (`UXXXX`) the code point, one `characters` names (by its first character) that one,
    any other character itself."""
    def character(escape: re.Match) -> str:
        code = escape.group(1)
        if len(code) == 5 and code[0] in "uU":
            return chr(int(code[1:], 16))
        return characters.get(code[0], code)
    return character


_ANDROID_RESOURCES = re.compile(r"<resources\b")
_ANDROID_ELEMENT = re.compile(r"<(string-array|plurals|string)(?=[\s>/])([^>]*?)(?:/>|>(.*?)</\1\s*>)", re.DOTALL)
_ANDROID_ITEM = re.compile(r"<item(?=[\s>/])[^>]*>(.*?)</item\s*>", re.DOTALL)
_QUANTITY = re.compile(r"""\bquantity\s*=\s*["']([a-z]*)["']""")
_UNTRANSLATABLE = re.compile(r"""\btranslatable\s*=\s*["']false["']""")
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
# A string's markup (its tags, comments and CDATA sections, written as they are) and its text between.
_ANDROID_MARKUP = re.compile(r"(<!\[CDATA\[.*?\]\]>|<!--.*?-->|<[^>]*>)", re.DOTALL)
# aapt's escapes in a string's text (\' \" \\ \@ \? \n \t \uXXXX), and the whitespace it reads as one space
_ANDROID_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|.)", re.DOTALL)
_ANDROID_WHITESPACE = re.compile(r"\s+")


class XmlResources(Spans):
    """String resources in XML: their values sent as XML, a character the file's encoding lacks
    written as a character reference, a translation that would not read as XML left out and named."""

    fmt = "xml"
    source_language = ""
    errors = "xmlcharrefreplace"

    def _writable(self, value: str, start: int, end: int) -> bool:
        return reads_as_xml_content(value)

    def _outside_comments(self, matches: Iterator[re.Match]) -> Iterator[re.Match]:
        """The matches that do not stand in a comment (a string commented out is no string)."""
        comments = [m.span() for m in _COMMENT.finditer(self.text)]
        starts = [start for start, _ in comments]
        for match in matches:
            k = bisect.bisect_right(starts, match.start()) - 1  # the last comment starting at or before it
            if k < 0 or match.start() >= comments[k][1]:
                yield match

    def _read(self, name: str, data: bytes, root: re.Pattern, what: str) -> None:
        try:
            self.text, self.encoding = decoded_xml(data)
            checked(self.text, self.encoding)
        except FileInvalid as error:
            raise Failed(f"cannot read {name}: {error}") from None
        if not root.search(self.text):
            raise Failed(f"cannot read {name}: not {what}")


class Android(XmlResources):
    """Android's strings.xml: each string, plural item and array item's content, sent as markup (its
    <b>, <xliff:g> kept) and as aapt reads its text: escapes read (\\' is ', \\n a line break), a run of
    whitespace one space but in a quoted string; written back in aapt's escapes (a backslash, a
    quote, a line break, a leading @ or ?). Strings commented out are left. A <plurals> gets each
    quantity the target's language has and it lacks (CLDR's), a copy of its "other" item."""

    def __init__(self, name: str, data: bytes, kind: str, fuzzy: bool) -> None:
        super().__init__()
        self._read(name, data, _ANDROID_RESOURCES, "Android string resources (no <resources>)")
        # each <plurals>: its items' quantities, and its "other" item (where it starts, the whitespace before it)
        self.plurals: list[tuple[set[str], int, str]] = []
        for element in self._outside_comments(_ANDROID_ELEMENT.finditer(self.text)):
            if _UNTRANSLATABLE.search(element.group(2)) or element.group(3) is None:
                continue
            if element.group(1) == "string":
                self._add(element.start(3), element.group(3))
                continue
            quantities, other = set(), None
            for item in _ANDROID_ITEM.finditer(element.group(3)):
                self._add(element.start(3) + item.start(1), item.group(1))
                quantity = _QUANTITY.search(item.group())
                quantities.add(quantity.group(1) if quantity else "")
                if quantity and quantity.group(1) == "other":
                    other = item
            if element.group(1) == "plurals" and other is not None:
                indent = re.search(r"\s*$", element.group(3)[:other.start()]).group()
                self.plurals.append((quantities, element.start(3) + other.start(), indent))

    def _edited(self, target: str, written: dict[int, str]) -> list[tuple[int, int, str]]:
        """Each quantity the target's language has and a <plurals> lacks (French "many"), added
        before its "other" item as a copy of it, as Android's lint asks (MissingQuantity)."""
        wanted, edits = categories(target) or (), []
        starts = [span[0] for span in self.spans]  # in the order read: by where they start
        for quantities, start, indent in self.plurals:
            item = _ANDROID_ITEM.match(self.text, start)
            k = bisect.bisect_left(starts, start)
            if k < len(starts) and starts[k] <= item.end(1):
                if starts[k] not in written:
                    continue  # its "other" untranslated: nothing to copy
                span_start, span_end, _ = self.spans[k]
                other = self.text[start:span_start] + written[span_start] + self.text[span_end:item.end()]
            elif item.group(1).strip().startswith("@"):
                other = item.group()  # a reference to another resource, copied as it is
            else:
                continue
            added = [_QUANTITY.sub(f'quantity="{quantity}"', other, count=1) + indent
                     for quantity in wanted if quantity not in quantities]
            if added:
                edits.append((start, start, "".join(added)))
        return edits

    def _add(self, start: int, content: str) -> None:
        body = content.strip()
        if not body or body.startswith("@"):  # "@string/other" refers to a resource
            return
        start += content.index(body)
        quoted = len(body) > 1 and body[0] == body[-1] == '"'
        if quoted:  # a quoted string: its quotes are no text
            start, body = start + 1, body[1:-1]
        parts = _ANDROID_MARKUP.split(body)  # text at even places, markup at odd ones
        text = "".join(part if k % 2 else self._read_text(part, quoted) for k, part in enumerate(parts))
        if text.strip():
            self.spans.append((start, start + len(body), text))

    @staticmethod
    def _read_text(text: str, quoted: bool) -> str:
        if not quoted:
            text = _ANDROID_WHITESPACE.sub(" ", text)
        # a character an escape names is sent as XML text: "\\u0026" as "&amp;"
        return _ANDROID_ESCAPE.sub(lambda character: escape(_ANDROID_CHARACTER(character)), text)

    def _put(self, translation: str, start: int, end: int) -> str:
        quoted = self.text[start - 1] == self.text[end] == '"'
        quotes = '"' if quoted else "'\""  # a quoted string holds apostrophes as they are
        parts = _ANDROID_MARKUP.split(translation)  # tags' attributes keep their quotes
        written = "".join(part if k % 2 else "".join(_ANDROID_ESCAPED.get(c, "\\" + c if c in quotes else c) for c in part)
                          for k, part in enumerate(parts))
        if not quoted:  # aapt trims a string's edges and reads a run of spaces as one: those it would lose, escaped
            written = _EDGE_SPACES.sub(lambda spaces: "\\u0020" * len(spaces.group()), written)
            written = _SPACE_RUN.sub(lambda run: " " + "\\u0020" * (len(run.group()) - 1), written)
        return "\\" + written if written.startswith(("@", "?")) else written  # else a reference, a style


# A line of a properties file that holds a value: its key (escapes and all) up to the separator
# (`=`, `:` or blanks), and its value to the end of the line, on lines going on after a line that
# ends in an odd number of backslashes.
_PROPERTY = re.compile(r"^[ \t\f]*(?![#!])((?:[^\s=:\\]|\\.)+)([ \t\f]*[=:]?[ \t\f]*)((?:[^\r\n\\]|\\\r?\n|\\.)*)\r?$",
                       re.MULTILINE)
_PROPERTY_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|\r?\n[ \t\f]*|.)", re.DOTALL)
_MESSAGE_FORMAT = re.compile(r"\{\d+[},]")
_LONE_APOSTROPHE = re.compile(r"(?<!')'(?!')")
# a line going on (its break and the next line's indentation) reads as nothing
_PROPERTY_CHARACTER = _escaped_character({"n": "\n", "t": "\t", "r": "\r", "f": "\f", "\n": "", "\r": ""})


class Properties(Spans):
    """Java's properties: each value read from its escapes (`\\u00e9`, `\\n`, a line going on) and
    written back on one line in them; a file in ASCII gets its other characters `\\u`-escaped, as
    Java before 9 reads properties in ISO-8859-1. A MessageFormat pattern (one with an argument,
    `{0}`) is sent with its doubled apostrophes single and written with every apostrophe doubled."""

    fmt = "text"
    source_language = ""

    def __init__(self, name: str, data: bytes, kind: str, fuzzy: bool) -> None:
        super().__init__()
        try:
            self.text, self.encoding = decoded(name, data)
        except Failed:
            self.text, self.encoding = data.decode("latin-1"), "latin-1"  # Java's own reading
        self.ascii = self.text.isascii()
        for match in _PROPERTY.finditer(self.text):
            value = _PROPERTY_ESCAPE.sub(_PROPERTY_CHARACTER, match.group(3))
            if _MESSAGE_FORMAT.search(value):  # a MessageFormat pattern writes an apostrophe doubled
                value = value.replace("''", "'")
            if value.strip():
                self.spans.append((match.start(3), match.end(3), value))


    def _put(self, translation: str, start: int, end: int) -> str:
        if _MESSAGE_FORMAT.search(self.text, start, end):
            # a MessageFormat pattern (it has an argument {0}) reads a lone apostrophe as a quote
            translation = _LONE_APOSTROPHE.sub("''", translation)
        out = []
        for index, char in enumerate(translation):
            if char == "\\":
                out.append("\\\\")
            elif char in "\n\t\r\f":
                out.append("\\" + {"\n": "n", "\t": "t", "\r": "r", "\f": "f"}[char])
            elif char == " " and index == 0:
                out.append("\\ ")  # a value's leading blanks are the separator's
            elif (self.ascii and ord(char) > 126) or not encodable(char, self.encoding):
                out.append("".join(f"\\u{unit:04x}" for unit in _utf16_units(char)))
            else:
                out.append(char)
        return "".join(out)


def _utf16_units(char: str) -> list[int]:
    encoded = char.encode("utf-16-be")
    return [int.from_bytes(encoded[k:k + 2], "big") for k in range(0, len(encoded), 2)]


# An Apple strings file's entry, `"key" = "value";`, and the escapes of its strings.
_APPLE_ENTRY = re.compile(r'("(?:[^"\\]|\\.)*"|[A-Za-z0-9_.]+)\s*=\s*"((?:[^"\\]|\\.)*)"\s*;', re.DOTALL)
_APPLE_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.DOTALL)
_APPLE_ESCAPE = re.compile(r"\\(U[0-9a-fA-F]{4}|u[0-9a-fA-F]{4}|.)", re.DOTALL)
_APPLE_CHARACTER = _escaped_character({"n": "\n", "t": "\t", "r": "\r", "0": "\0"})


class AppleStrings(Spans):
    """Apple's .strings: each entry's value read from its escapes (`\\"`, `\\n`, `\\U00e9`) and
    written back in them; comments left (a comment's text is no entry)."""

    fmt = "text"
    source_language = ""

    def __init__(self, name: str, data: bytes, kind: str, fuzzy: bool) -> None:
        super().__init__()
        self.text, self.encoding = decoded(name, data)
        comments = [(m.start(), m.end()) for m in _APPLE_COMMENT.finditer(self.text)]
        for entry in _APPLE_ENTRY.finditer(self.text):
            if any(start <= entry.start() < end for start, end in comments):
                continue
            value = _APPLE_ESCAPE.sub(_APPLE_CHARACTER, entry.group(2))
            if value.strip():
                self.spans.append((entry.start(2), entry.end(2), value))


    def _put(self, translation: str, start: int, end: int) -> str:
        return (translation.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
                .replace("\r", "\\r"))


# --- .NET resources

_RESX_ROOT = re.compile(r"<root\b")
_RESX_DATA = re.compile(r"<data\b([^>]*)>(.*?)</data\s*>", re.DOTALL)
_RESX_VALUE = re.compile(r"<value>(.*?)</value\s*>", re.DOTALL)
_RESX_NAME = re.compile(r"""\bname\s*=\s*["']([^"']*)["']""")
_RESX_TYPED = re.compile(r"""\b(?:type|mimetype)\s*=""")


_ANDROID_CHARACTER = _escaped_character({"n": "\n", "t": "\t"})
_ANDROID_ESCAPED = {"\\": "\\\\", "\n": "\\n", "\t": "\\t"}
_EDGE_SPACES = re.compile(r"^ +| +$")
_SPACE_RUN = re.compile(r" {2,}")


class Resx(XmlResources):
    """.NET's .resx: each string resource's value (not a file reference, an image or another typed
    value, nor the Windows Forms designer's `>>` entries), sent as XML text and written back escaped."""

    def __init__(self, name: str, data: bytes, kind: str, fuzzy: bool) -> None:
        super().__init__()
        self._read(name, data, _RESX_ROOT, ".NET resources (no <root>)")
        for data_element in self._outside_comments(_RESX_DATA.finditer(self.text)):
            attributes = data_element.group(1)
            named = _RESX_NAME.search(attributes)
            if _RESX_TYPED.search(attributes) or (named and unescape(named.group(1)).startswith(">>")):
                continue
            value = _RESX_VALUE.search(data_element.group(2))
            if value is not None and value.group(1).strip():
                start = data_element.start(2) + value.start(1)
                self.spans.append((start, start + len(value.group(1)), value.group(1)))


# --- YAML

_STR = "tag:yaml.org,2002:str"
_YAML_NOT_TEXT = re.compile(r"""^(?:~|null|Null|NULL|true|True|TRUE|false|False|FALSE|y|Y|n|N|yes|Yes|YES|no|No|NO|on|On|ON|off|Off|OFF|[-+]?(?:\d[\d_]*(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+|0x[0-9a-fA-F]+|0o[0-7]+|\.inf|\.nan)|<<|=)$""")
_YAML_PLAIN_UNSAFE = re.compile(r"""^[\s\-?:,\[\]{}#&*!|>'"%@`]|: | #|:$|\s$""")
_YAML_FLOW_INDICATOR = re.compile(r"[,\[\]{}]")
_YAML_PROPERTIES = re.compile(r"(?:[&!]\S*\s+)*")  # a node's anchor and tag, before its scalar
_LOCALE_KEY = re.compile(r"^[a-z]{2,3}(?:[-_][A-Za-z]{2,4})?$")
_RUBY_SYMBOL = re.compile(r"^:[A-Za-z_][A-Za-z0-9_]*[?!]?$")
# The lists of a Rails locale file that hold names, not text: the order of a date's parts
# (rails-i18n's en.yml writes `order: [year, month, day]`, which Rails reads as symbols).
_RAILS_NAMES = frozenset({("date", "order")})


class Yaml(Spans):
    """Each string scalar of a YAML file (not a key, nor a value of another type: a number, a
    boolean, a null), read by PyYAML wherever it stands (block or flow collections, after an anchor
    or a tag; an alias is its anchor's scalar, translated there): plain, single- or double-quoted on
    one line or several, or a literal or folded block. Written back in its style: a block as a block
    at its indentation, a quoted or plain scalar on one line (quoted where a plain one would not
    read so). Rails' files have the locale as their one top key: it is renamed to the target, and
    their lists of names (a date's parts' order) are left, as are Ruby's symbols (`:year`)."""

    fmt = "text"

    def __init__(self, name: str, data: bytes, kind: str, fuzzy: bool) -> None:
        import yaml  # here: only YAML files need it

        super().__init__()
        self.text, self.encoding = decoded(name, data)
        self.styles: dict[int, tuple[str, str, bool]] = {}  # span start -> (style, a block's indentation, in flow)
        self.locale: tuple[int, int] | None = None
        self.source_language = ""
        try:
            documents = list(yaml.compose_all(self.text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)))
        except yaml.YAMLError as error:
            mark = getattr(error, "problem_mark", None)
            raise Failed(f"cannot read {name}: not YAML" + (f" (line {mark.line + 1}: {getattr(error, 'problem', '')})"
                                                              if mark is not None else "")) from None
        top = documents[0] if len(documents) == 1 else None
        if top is not None and top.id == "mapping" and len(top.value) == 1:
            key, value = top.value[0]
            if key.tag == _STR and _LOCALE_KEY.match(key.value) and value.id == "mapping" \
                    and self.text[key.start_mark.index:key.end_mark.index] == key.value:
                self.source_language = key.value
                self.locale = (key.start_mark.index, key.end_mark.index)
        self._walk(documents)

    def _walk(self, documents: list) -> None:
        """Each string scalar of the documents' nodes, in order; the nodes walked with a stack of
        their own, as deep as libyaml nests them (1,000), beyond Python's recursion."""
        seen: set[int] = set()
        # (a PyYAML node, the keys to it, whether it stands in a flow collection), next first
        stack: list[tuple[object, tuple[str, ...], bool]] = [(document, (), False) for document in reversed(documents)]
        while stack:
            node, path, flow = stack.pop()
            if id(node) in seen:  # an alias: its anchor's node, met before
                continue
            seen.add(id(node))
            if node.id == "mapping":  # PyYAML's node kinds: "mapping", "sequence", "scalar"
                # keys are names, not text
                stack += [(value, (*path, str(key.value)), bool(node.flow_style)) for key, value in reversed(node.value)]
            elif node.id == "sequence":
                if not (self.locale is not None and path[1:] in _RAILS_NAMES):
                    stack += [(item, path, bool(node.flow_style)) for item in reversed(node.value)]
            elif node.tag == _STR and node.value.strip():
                self._scalar(node, flow)

    def _scalar(self, node, flow: bool) -> None:  # noqa: ANN001  # PyYAML's scalar node
        style = node.style or ""
        if not style and _RUBY_SYMBOL.match(node.value):
            return  # Ruby's YAML reads it as a Symbol: a name, not text
        start = _YAML_PROPERTIES.match(self.text, node.start_mark.index).end()
        end = node.end_mark.index
        if style in ("|", ">"):
            self._block(node.value, style, start, end, flow)
        else:
            self._add(start, end, node.value, {"": "plain", "'": "single", '"': "double"}[style], "", flow)

    def _block(self, value: str, style: str, start: int, end: int, flow: bool) -> None:
        """A literal or folded block: its lines after its header's, to its last one that holds text."""
        header_end = self.text.find("\n", start, end)
        if header_end < 0:
            return
        body_start = header_end + 1
        while end > body_start and self.text[end - 1] in "\r\n \t":
            end -= 1
        lines = [line for line in self.text[body_start:end].split("\n") if line.strip()]
        if not lines:
            return
        inner = min(_depth(line) for line in lines)
        self._add(body_start, end, value.rstrip("\n"), "literal" if style == "|" else "folded", " " * inner, flow)

    def _add(self, start: int, end: int, text: str, style: str, indent: str, flow: bool) -> None:
        self.spans.append((start, end, text))
        self.styles[start] = (style, indent, flow)

    def _put(self, translation: str, start: int, end: int) -> str:
        style, indent, flow = self.styles[start]
        if style in ("literal", "folded"):
            newline = "\r\n" if "\r\n" in self.text[start:end] else "\n"
            if style == "folded":  # a line break of a folded block's text is a blank line in it
                translation = translation.replace("\n", "\n\n")
            return newline.join(indent + line if line else line for line in translation.split("\n"))
        if "\n" in translation or flow and _YAML_FLOW_INDICATOR.search(translation):
            return json.dumps(translation, ensure_ascii=False)  # a JSON string is a double-quoted YAML one
        if style == "single":
            return "'" + translation.replace("'", "''") + "'"
        if style == "plain" and not _YAML_PLAIN_UNSAFE.search(translation) and not _YAML_NOT_TEXT.match(translation):
            return translation
        return json.dumps(translation, ensure_ascii=False)

    def _edited(self, target: str, written: dict[int, str]) -> list[tuple[int, int, str]]:
        return [(*self.locale, target)] if self.locale is not None else []


def _depth(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


# --- PHP arrays (Laravel's lang/*.php, and any framework's `return [...]` of strings)

# A PHP file's tokens as a translation file has them: comments, strings in single or double quotes,
# `=>`, an array's brackets (`[` or `array(`), commas, and anything else one character at a time.
_PHP_TOKEN = re.compile(r"""(?P<comment>//[^\n]*|\#[^\n]*|/\*.*?\*/)
    |(?P<string>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")
    |(?P<arrow>=>)|(?P<open>\[|\barray\s*\(|\()|(?P<close>[\])])|(?P<comma>,)|(?P<other>\S)""", re.VERBOSE | re.DOTALL)
_PHP_RETURN = re.compile(r"\A\s*<\?php\b.*?\breturn\s*(?P<array>\[|array\s*\()", re.DOTALL)
_PHP_DOUBLE = re.compile(r"\\(u\{[0-9a-fA-F]+\}|x[0-9a-fA-F]{1,2}|[0-7]{1,3}|.)", re.DOTALL)
_PHP_DOUBLE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "v": "\v", "e": "\x1b", "f": "\f", "\\": "\\", "$": "$", '"': '"'}
# A double-quoted string's variable (`$name`, `{$name}`): such a string is PHP's to fill in, not a text
_PHP_INTERPOLATED = re.compile(r"(?<!\\)(?:\\\\)*\$[A-Za-z_{]|\{\$")


def _php_double(body: str) -> str:
    def character(escape: re.Match) -> str:
        code = escape.group(1)
        if code.startswith("u{"):
            return chr(int(code[2:-1], 16))
        if code[0] == "x" and len(code) > 1:
            return chr(int(code[1:], 16))
        if code[0] in "01234567":
            return chr(int(code, 8) % 256)
        return _PHP_DOUBLE_ESCAPES.get(code, "\\" + code)
    return _PHP_DOUBLE.sub(character, body)


class PhpArray(Spans):
    """A PHP file returning an array of strings (Laravel's lang/en/*.php): each value, at any depth,
    read from its quotes' escapes and written back in them; keys, comments and what is no plain
    string (a double-quoted one with a variable, a concatenation, a function's call) left."""

    fmt = "text"
    source_language = ""

    def __init__(self, name: str, data: bytes, kind: str, fuzzy: bool) -> None:
        super().__init__()
        self.text, self.encoding = decoded(name, data)
        start = _PHP_RETURN.match(self.text)
        if start is None:
            raise Failed(f"cannot read {name}: not a PHP file returning an array (<?php return [...];)")
        tokens = [t for t in _PHP_TOKEN.finditer(self.text, start.start("array")) if t.lastgroup != "comment"]
        opened: list[bool] = []  # each bracket open: whether it is an array's (else a call's parenthesis)
        for k, token in enumerate(tokens):
            kind_of = token.lastgroup
            if kind_of == "open":
                opened.append(token.group() != "(")
            elif kind_of == "close":
                if opened:
                    opened.pop()
                if not opened:
                    break
            elif kind_of == "string" and opened and opened[-1]:
                before = tokens[k - 1].lastgroup if k else None
                after = tokens[k + 1].lastgroup if k + 1 < len(tokens) else None
                # a value: after `=>`, or an item of a list; and ends there (no `.` or call follows)
                if before in ("arrow", "open", "comma") and after in ("comma", "close"):
                    quoted = token.group()
                    body = quoted[1:-1]
                    if quoted[0] == "'":
                        value = body.replace("\\\\", "\\").replace("\\'", "'")
                    elif _PHP_INTERPOLATED.search(body):
                        continue
                    else:
                        value = _php_double(body)
                    if value.strip():
                        self.spans.append((token.start() + 1, token.end() - 1, value))

    def _put(self, translation: str, start: int, end: int) -> str:
        if self.text[start - 1] == "'":
            return translation.replace("\\", "\\\\").replace("'", "\\'")
        return (translation.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$").replace("\n", "\\n")
                .replace("\t", "\\t").replace("\r", "\\r"))
