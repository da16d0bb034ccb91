"""Translation memories: segments whose translation is already known, answered as stored instead of by
the model.

A memory is a TMX file (the exchange format of translation memories: TMX 1.4, what localisation tools
export) named by the ``memories`` setting; the bundled one, memories/cldr-names.tmx, holds CLDR's English
and German names of countries, languages, scripts, currencies, time zones, months and weekdays
(written by ``python -m training.corpus names --tmx``, training/corpus/tmx.py), which a small model leaves in English ("Norway",
"Sunday") or mangles. A translation unit serves every direction between its languages (a unit
with an English and a German variant answers en->de and de->en) unless it names its source
language (below).

Matching (service/translator.py): a plain-text segment (a sentence or line, service/layout.py) whose
text, in Unicode NFC with runs of whitespace as one space and none at either end, equals a unit's
source variant exactly (case included: "March" the month, not "march") is answered by the unit's
target variant. A unit whose `<tu>` names a source language (TMX's `srclang` attribute, not "*all*")
serves only from that language: a memory can hold the usual German of "Cancel" for en->de and the
usual English of "Abbrechen" for de->en without the two answering each other's direction. A source
a memory holds with two different targets is not answered (the memory cannot say which); where
several memories hold a source, the first listed answers.

What a memory cannot hold is left out when it loads, counted and logged: a variant with inline
markup (TMX's bpt, ept, ph, it, hi, ...), an empty one, a unit with one language. A file that
is not TMX, or not well-formed XML, fails the load with the file and the problem named.
"""
from __future__ import annotations

import logging
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from xml.etree import ElementTree

log = logging.getLogger("service")

_XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"
_SPACE = re.compile(r"\s+")


class MemoryLoadFailed(ValueError):
    """A memory file that cannot be read: its path and the problem, in one line."""


def memory_key(text: str) -> str:
    """What a segment and a memory's source variant are compared by."""
    return _SPACE.sub(" ", unicodedata.normalize("NFC", text)).strip()


def _language_keys(code: str) -> list[str]:
    """The codes a variant answers for: "de-DE" for "de-de" and "de" (a pair is served as "de")."""
    code = code.strip().lower().replace("_", "-")
    primary = code.split("-", 1)[0]
    return [code] if primary == code else [code, primary]


@dataclass(frozen=True)
class MemoryMatch:
    target: str
    memory: str   # the memory's name


@dataclass
class TranslationMemory:
    """One TMX file's units, by direction: (source code, target code) -> source key -> target."""

    name: str
    path: Path
    directions: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)
    ambiguous: Counter = field(default_factory=Counter)   # per direction: sources left out
    skipped: Counter = field(default_factory=Counter)     # per reason: variants or units left out

    @classmethod
    def load(cls, path: Path) -> TranslationMemory:
        memory = cls(name=path.name.removesuffix(".tmx"), path=path)
        try:
            memory._read(path)
        except ElementTree.ParseError as exc:
            raise MemoryLoadFailed(f"memory {path}: not well-formed XML: {exc}") from None
        except OSError as exc:
            raise MemoryLoadFailed(f"memory {path}: {exc.strerror or exc}") from None
        return memory

    def _read(self, path: Path) -> None:
        targets: dict[tuple[str, str], dict[str, set[str]]] = {}
        root_seen = False
        for event, element in ElementTree.iterparse(path, events=("start", "end")):
            if not root_seen:
                root_seen = True
                if element.tag != "tmx":
                    raise MemoryLoadFailed(f"memory {path}: not a TMX file (its root element is <{element.tag}>, "
                                           "not <tmx>)")
                continue
            if event != "end" or element.tag != "tu":
                continue
            variants = self._variants(element)
            only_from = element.get("srclang") or "*all*"  # an empty one names no language
            only_from = None if only_from.lower() == "*all*" else set(_language_keys(only_from))
            element.clear()   # a large memory is read unit by unit
            if len(variants) < 2:
                self.skipped["unit with fewer than two languages"] += 1
                continue
            for source_code, source in variants:
                if only_from is not None and not only_from & set(_language_keys(source_code)):
                    continue  # "de-DE" names a "de" variant too
                for target_code, target in variants:
                    if target_code == source_code:
                        continue
                    for s in _language_keys(source_code):
                        for t in _language_keys(target_code):
                            if s != t:
                                targets.setdefault((s, t), {}).setdefault(memory_key(source), set()).add(target)
        for direction, by_source in targets.items():
            kept = {}
            for source, options in by_source.items():
                if len(options) == 1:
                    kept[source] = next(iter(options))
                else:
                    self.ambiguous[direction] += 1
            self.directions[direction] = kept

    def _variants(self, unit: ElementTree.Element) -> list[tuple[str, str]]:
        variants = []
        for tuv in unit.findall("tuv"):
            code = tuv.get(_XML_LANG) or tuv.get("lang")  # TMX 1.1 wrote lang
            seg = tuv.find("seg")
            if not code or seg is None:
                self.skipped["variant without a language or a seg"] += 1
                continue
            if len(seg):
                self.skipped["variant with inline markup"] += 1
                continue
            text = (seg.text or "").strip()
            if not text:
                self.skipped["empty variant"] += 1
                continue
            variants.append((code, text))
        return variants

    def get(self, source: str, target: str, text: str) -> str | None:
        by_source = self.directions.get((source, target))
        return by_source.get(memory_key(text)) if by_source else None

    def sizes(self) -> dict[str, int]:
        """Sources answered per direction ("en-de"), the directions in sorted order."""
        return {f"{s}-{t}": len(by_source) for (s, t), by_source in sorted(self.directions.items()) if by_source}


class Memories:
    """The memories served, in the order the setting lists them (the first holding a source answers)."""

    def __init__(self, memories: Sequence[TranslationMemory] = ()) -> None:
        names = Counter(memory.name for memory in memories)
        twice = sorted(name for name, count in names.items() if count > 1)
        if twice:
            raise MemoryLoadFailed(f"two memories are named {twice[0]!r} (a memory is named after its file)")
        self.memories = list(memories)

    @classmethod
    def load(cls, paths: Iterable[Path]) -> Memories:
        memories = cls([TranslationMemory.load(Path(path)) for path in paths])
        for memory in memories.memories:
            sizes = ", ".join(f"{direction} {count}" for direction, count in memory.sizes().items()) or "nothing"
            left = sum(memory.skipped.values()) + sum(memory.ambiguous.values())
            log.info("memory %s (%s): %s%s", memory.name, memory.path, sizes,
                     f"; {left} left out ({_left_out(memory)})" if left else "")
        return memories

    def lookup(self, source: str, target: str, text: str) -> MemoryMatch | None:
        for memory in self.memories:
            found = memory.get(source, target, text)
            if found is not None:
                return MemoryMatch(found, memory.name)
        return None

    def serves(self, source: str, target: str) -> bool:
        return any(memory.directions.get((source, target)) for memory in self.memories)


def _left_out(memory: TranslationMemory) -> str:
    parts = [f"{count} {reason}" for reason, count in sorted(memory.skipped.items())]
    parts += [f"{count} ambiguous {s}-{t} sources" for (s, t), count in sorted(memory.ambiguous.items())]
    return "; ".join(parts)
