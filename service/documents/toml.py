"""TOML string resources (Hugo's i18n/en.toml, go-i18n's active.en.toml): every string value
translated, in its table, array or inline table, written back by tomlkit (which keeps every other
byte: comments, spacing, key order) in the string's own style where the translation allows it (a
literal string holding no apostrophe, a multi-line one). A message table's notes (go-i18n's and
Hugo's `description`, `hash`, `id`, delimiters) are left; a plural message (`one` and `other`...) gets
each category the target's language has and it lacks (CLDR's: French "many"), a copy of its "other"."""
from __future__ import annotations

from typing import Any

from service.documents.files import Failed, decoded
from service.documents.plurals import ORDER, categories

# A message table's keys that are no text to translate (go-i18n's message fields, Hugo's array form's id)
_NOTES = frozenset(("description", "hash", "id", "leftDelim", "rightDelim"))
# What marks a table as one message: its text under one of these keys
_MESSAGE_KEYS = frozenset(ORDER) | {"translation"}


class TomlFile:
    fmt = "text"
    unit = "strings"
    marks = ""
    source_language = target_language = ""

    def __init__(self, name: str, data: bytes, kind: str, fuzzy: bool) -> None:
        import tomlkit  # only a TOML file's reading needs it

        text, self.encoding = decoded(name, data)
        try:
            self.document = tomlkit.parse(text)
        except tomlkit.exceptions.ParseError as error:
            raise Failed(f"cannot read {name}: not TOML: {error}") from None
        self.places: list[tuple[Any, Any, str]] = []  # each string: its container, its key or index, its text
        self.plurals: list[Any] = []  # each plural message's table
        self._walk(self.document)

    def _walk(self, container: Any) -> None:
        items = container.items() if isinstance(container, dict) else enumerate(container)
        message = isinstance(container, dict) and any(key in _MESSAGE_KEYS for key in container)
        # plural: "other" and another category (Hugo writes a message that does not vary as "other" alone)
        if message and isinstance(container.get("other"), str) and set(container) <= set(ORDER) | _NOTES \
                and len(set(container) & set(ORDER)) > 1:
            self.plurals.append(container)
        for key, value in list(items):
            if isinstance(value, str):
                if not (message and key in _NOTES) and value.strip():
                    self.places.append((container, key, str(value)))
            elif isinstance(value, (dict, list)):
                self._walk(value)

    @property
    def texts(self) -> list[str]:
        return [text for _, _, text in self.places]

    def written(self, translated: dict[str, str], mark: bool, target: str) -> tuple[bytes, int]:
        import tomlkit

        count, others = 0, set()
        for container, key, text in self.places:
            if text in translated:
                container[key] = _like(translated[text], container[key])
                count += 1
                others |= {id(container)} if key == "other" else set()
        wanted = categories(target) or ()
        for table in self.plurals:
            if id(table) in others:  # its "other" translated: copied to each category it lacks
                for category in wanted:
                    if category not in table:
                        table[category] = _like(str(table["other"]), table["other"])
        return tomlkit.dumps(self.document).encode(self.encoding), count


def _like(value: str, original: Any) -> Any:
    """`value` as a TOML string in `original`'s style where it can be written so (a literal string
    holds no apostrophe, a single-line one no line break), else a basic one."""
    import tomlkit
    from tomlkit.items import StringType

    kind = getattr(original, "type", StringType.SLB)
    multiline = kind in (StringType.MLB, StringType.MLL)
    literal = kind in (StringType.SLL, StringType.MLL) and "'" not in value and (multiline or "\n" not in value) \
        and not any(ord(c) < 32 and c not in "\t\n" or c == "\x7f" for c in value)
    return tomlkit.string(value, literal=literal, multiline=multiline)
