"""Xcode's String Catalogs (.xcstrings, Xcode 15 on): one JSON file holding a project's strings in
every language. Each string is a key; its source text is the source language's localization, or
the key itself where that has none. A string whose target-language localization is missing (or
"new"; with `fuzzy`, also "needs_review") gets one: a plain string its text, a string that varies
by plural or device each variation of the source's (and each plural category the target's language
adds, CLDR's: a French "many" from the English "other"), a string with substitutions (`%#@count@`)
its text and each substitution's variations, their argument numbers and format specifiers as the
source's. A string marked not to translate, or stale (no longer in the code), is left.

Written as Xcode writes the file (two-space indentation, `" : "`, an empty object over three lines,
no slash escaped, a string's localizations in order), so a catalog Xcode wrote comes back the same but
for the localizations added; one another tool wrote (`": "`, its own indentation) is written so.
"""
from __future__ import annotations

import json
import re
from typing import Any

from service.documents.files import Failed, decoded
from service.documents.plurals import categories

# An object with nothing in it, as Xcode writes one: over three lines.
_EMPTY_OBJECT = re.compile(r'^( *)(.*) : \{\}(,?)$', re.MULTILINE)
# What a localization may hold besides its texts, kept as the source's in the target's.
_STRUCTURE = ("argNum", "formatSpecifier")


def _units(node: Any, path: tuple[str, ...]) -> list[tuple[tuple[str, ...], str]]:
    """Each text of a localization (or of a part of one) and where it stands (the keys from the
    localization down to its stringUnit's holder)."""
    if not isinstance(node, dict):
        return []
    found = []
    unit = node.get("stringUnit")
    if isinstance(unit, dict) and isinstance(unit.get("value"), str):
        found.append((path, unit["value"]))
    variations = node.get("variations")
    for kind, cases in variations.items() if isinstance(variations, dict) else ():
        for case, child in cases.items() if isinstance(cases, dict) else ():
            found += _units(child, path + ("variations", kind, case))
    substitutions = node.get("substitutions")
    for name, child in substitutions.items() if isinstance(substitutions, dict) else ():
        found += _units(child, path + ("substitutions", name))
    return found


def _at(node: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        node = node.get(key) if isinstance(node, dict) else None
    return node


class StringCatalog:
    fmt = "text"
    unit = "strings"
    marks = "needs_review"
    target_language = ""
    skipped_as = "strings marked not to translate or stale"

    def __init__(self, name: str, data: bytes, kind: str, fuzzy: bool) -> None:
        text, self.encoding = decoded(name, data)
        try:
            self.document = json.loads(text)
        except ValueError as error:
            raise Failed(f"cannot read {name}: not JSON: {error}") from None
        if not isinstance(self.document, dict) or not isinstance(self.document.get("strings"), dict):
            raise Failed(f'cannot read {name}: not a string catalog (no "strings" object)')
        self.source_language = str(self.document.get("sourceLanguage") or "")
        self.newline = text.endswith("\n")
        # how the file is written: Xcode's `" : "`, or another tool's `": "`, and its indentation
        self.xcode = text.count('" : ') >= text.count('": ')
        indented = re.search(r"\n( +)\S", text)
        self.indent = len(indented.group(1)) if indented else 2
        self.fuzzy = fuzzy
        self.unwritable: list[str] = []
        self.skipped = 0
        # per string: its key, and each text of its source with where it stands
        self.strings: list[tuple[str, list[tuple[tuple[str, ...], str]]]] = []
        for key, entry in self.document["strings"].items():
            if not isinstance(entry, dict):
                self.unwritable.append(f"{key[:60]!r}: not a string's entry (a JSON object); left as it was")
                continue
            if entry.get("shouldTranslate") is False or entry.get("extractionState") == "stale":
                self.skipped += 1
                continue
            source = (entry.get("localizations") or {}).get(self.source_language) \
                if isinstance(entry.get("localizations"), dict) else None
            units = _units(source, ()) if source is not None else [((), key)]
            units = [(path, value) for path, value in units if value.strip()]
            if units:
                self.strings.append((key, units))
        self.target = ""

    def for_target(self, target: str, source: str) -> None:
        """The texts to translate are those the target's localization lacks; a plural variation
        also each plural category the target's language has and the source's lacks (French "many"
        beside English "one" and "other"), from the source's "other"."""
        self.target = target
        wanted = categories(target) or ()
        for k, (key, units) in enumerate(self.strings):
            cases: dict[tuple[str, ...], dict[str, str]] = {}  # each plural variation: its categories' texts
            for path, value in units:
                if len(path) >= 3 and path[-3:-1] == ("variations", "plural"):
                    cases.setdefault(path[:-1], {})[path[-1]] = value
            added = [(plural + (category,), held["other"]) for plural, held in cases.items() if "other" in held
                     for category in wanted if category not in held]
            self.strings[k] = (key, units + added)

    def _wanted(self, key: str, path: tuple[str, ...]) -> bool:
        localization = _at(self.document["strings"], (key, "localizations", self.target))
        unit = _at(localization, path + ("stringUnit",))
        if not isinstance(unit, dict) or not isinstance(unit.get("value"), str):
            return True
        return unit.get("state") == "new" or (self.fuzzy and unit.get("state") == "needs_review")

    @property
    def texts(self) -> list[str]:
        return [value for key, units in self.strings for path, value in units if self._wanted(key, path)]

    def written(self, translated: dict[str, str], mark: bool, target: str) -> tuple[bytes, int]:
        self.target = target
        count = 0
        for key, units in self.strings:
            entry = self.document["strings"][key]
            source = _at(entry, ("localizations", self.source_language))
            added = 0
            for path, value in units:
                if not self._wanted(key, path) or value not in translated:
                    continue
                node = entry.setdefault("localizations", {})
                walked: tuple[str, ...] = ()
                for step in (target,) + path:
                    walked += (step,)
                    node = node.setdefault(step, {}) if isinstance(node, dict) else None
                    if len(walked) > 2 and walked[-2] == "substitutions" and isinstance(node, dict):
                        for field in _STRUCTURE:  # a substitution's argument, as the source's
                            held = _at(source, walked[1:] + (field,))
                            if held is not None:
                                node.setdefault(field, held)
                if not isinstance(node, dict):
                    self.unwritable.append(f"{value[:60]!r}: its place in the target's localization is no JSON "
                                           "object; left as it was")
                    continue
                node["stringUnit"] = {"state": "needs_review" if mark else "translated", "value": translated[value]}
                added += 1
            count += added
            localizations = entry.get("localizations")
            if added and isinstance(localizations.get(target), dict):  # an entry untouched keeps its order
                localizations[target] = _sorted(localizations[target])
                others = [language for language in localizations if language != target]
                if self.xcode or others == sorted(others, key=str.lower):  # Xcode's order, where the file keeps it
                    entry["localizations"] = dict(sorted(localizations.items(), key=lambda item: item[0].lower()))
        if self.xcode:
            text = json.dumps(self.document, indent=self.indent, separators=(",", " : "), ensure_ascii=False)
            text = _EMPTY_OBJECT.sub(lambda m: f"{m.group(1)}{m.group(2)} : {{\n\n{m.group(1)}}}{m.group(3)}", text)
        else:
            text = json.dumps(self.document, indent=self.indent, ensure_ascii=False)
        return (text + "\n" * self.newline).encode(self.encoding), count


def _sorted(node: Any) -> Any:
    """An object with its keys in order, at every depth (as Xcode writes them)."""
    if isinstance(node, dict):
        return {key: _sorted(node[key]) for key in sorted(node)}
    return node
