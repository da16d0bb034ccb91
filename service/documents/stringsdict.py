"""Apple's .stringsdict (a property list, en.lproj/Localizable.stringsdict): each string's format
(`NSStringLocalizedFormatKey`) where it holds text besides its variables (`%#@files@`), and each
case of its variables' rules (plural categories, widths, devices). A plural rule gets each category
the target's language has and it lacks (CLDR's: French "many"), a copy of its "other" case, as
Xcode and translators start one. The rules' names, types and value types are left; comments too.
Sent as XML text and written back in its escapes, as .resx's values."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from service.documents.files import Failed
from service.documents.plurals import categories
from service.documents.resources import XmlResources

_PLIST = re.compile(r"<plist\b")
# What a property list is read as: comments and CDATA skipped, each key and string with its content,
# dicts and arrays opened and closed, any other value whole.
_TOKEN = re.compile(r"<!--.*?-->|<\?.*?\?>|<!DOCTYPE[^>]*>|<(key|string)\s*>(.*?)</\1\s*>|<(string|dict|array)\s*/>"
                    r"|<(/?)(dict|array)\s*>|<(integer|real|date|data)\s*>.*?</\6\s*>|<(?:true|false)\s*/>"
                    r"|</?plist\b[^>]*>", re.DOTALL)
# A format's variables and printf conversions: a format holding nothing else has no text.
_FORMAT_PART = re.compile(r"%(?:\d+\$)?(?:#@[^@\s]*@|[-+ #0']*(?:\d+|\*)?(?:\.(?:\d+|\*))?"
                          r"(?:hh|h|ll|l|q|z|t|j|L)?[@dDiuUxXoOfFeEgGaAcCsSp%])")
_RULE_KEYS = ("NSStringFormatSpecTypeKey", "NSStringFormatValueTypeKey")


@dataclass
class _Node:
    kind: str  # "dict", "array", "string", "other"
    start: int = 0  # a string's content: where it starts and ends
    end: int = 0
    items: list[tuple[re.Match | None, "_Node"]] = field(default_factory=list)  # (its key's token, value)


class StringsDict(XmlResources):
    def __init__(self, name: str, data: bytes, kind: str, fuzzy: bool) -> None:
        super().__init__()
        self._read(name, data, _PLIST, "a property list (no <plist>)")
        root = self._parsed(name)
        if root.kind != "dict":
            raise Failed(f"cannot read {name}: not a strings dictionary (its property list holds no dict)")
        # each plural rule: the categories it has, its "other" key and string, the whitespace before that key
        self.plurals: list[tuple[set[str], re.Match, _Node, str]] = []
        for _, entry in root.items:
            if entry.kind != "dict":
                continue
            for key, value in entry.items:
                if key.group(2) == "NSStringLocalizedFormatKey" and value.kind == "string":
                    self._add(value)
                elif value.kind == "dict":
                    self._rule(value)

    def _parsed(self, name: str) -> _Node:
        """The property list's top value, with where each string's content stands."""
        stack: list[_Node] = [_Node("array")]
        key: re.Match | None = None
        for token in _TOKEN.finditer(self.text):
            text = token.group()
            if text.startswith(("<!--", "<?", "<!DOCTYPE")) or text.startswith(("<plist", "</plist")):
                continue
            if token.group(1) == "key":
                key = token
                continue
            if token.group(4) == "/":  # a dict or array closed
                if len(stack) == 1:
                    raise Failed(f"cannot read {name}: a </{token.group(5)}> closes nothing")
                stack.pop()
                key = None
                continue
            if token.group(1) == "string":
                node = _Node("string", token.start(2), token.end(2))
            elif token.group(3) == "string":
                node = _Node("string", token.end() - 2, token.end() - 2)
            elif token.group(5) or token.group(3) in ("dict", "array"):
                node = _Node(token.group(5) or token.group(3))
            else:
                node = _Node("other")
            holder = stack[-1]
            if holder.kind == "dict" and key is None:
                raise Failed(f"cannot read {name}: a value without its <key> at character {token.start()}")
            holder.items.append((key if holder.kind == "dict" else None, node))
            key = None
            if token.group(5):  # opened, not empty
                stack.append(node)
        if len(stack) != 1 or not stack[0].items:
            raise Failed(f"cannot read {name}: not a property list")
        return stack[0].items[0][1]

    def _add(self, node: _Node) -> None:
        content = self.text[node.start:node.end]
        if re.search(r"\w", _FORMAT_PART.sub("", content)):
            self.spans.append((node.start, node.end, content))

    def _rule(self, rule: _Node) -> None:
        """A variable's rule: each case's string (a device's case may hold a rule of its own)."""
        kinds = {key.group(2): value for key, value in rule.items}
        spec = kinds.get("NSStringFormatSpecTypeKey")
        plural = spec is not None and spec.kind == "string" and \
            self.text[spec.start:spec.end].strip() == "NSStringPluralRuleType"
        for key, value in rule.items:
            if key.group(2) in _RULE_KEYS:
                continue
            if value.kind == "string":
                self._add(value)
            elif value.kind == "dict":
                self._rule(value)
            if plural and key.group(2) == "other" and value.kind == "string":
                before = self.text[:key.start()]
                indent = before[len(before.rstrip()):]
                self.plurals.append((set(kinds), key, value, indent))

    def _edited(self, target: str, written: dict[int, str]) -> list[tuple[int, int, str]]:
        wanted, edits = categories(target) or (), []
        sent = {start for start, _, _ in self.spans}
        for held, key, other, indent in self.plurals:
            if other.start in sent and other.start not in written:
                continue  # its "other" untranslated: nothing to copy
            end = self.text.index(">", other.end) + 1  # its </string>
            pair = (self.text[key.end():other.start] + written.get(other.start, self.text[other.start:other.end])
                    + self.text[other.end:end])
            added = [key.group().replace("other", category, 1) + pair + indent
                     for category in wanted if category not in held]
            if added:
                edits.append((key.start(), key.start(), "".join(added)))
        return edits
