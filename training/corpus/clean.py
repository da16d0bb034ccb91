"""Normalising catalog entries and deciding which pairs are clean, one reason per pair dropped.

- Normalisation: Unicode NFC, every run of whitespace (the catalogs' \\n and \\t included) one
  space, none at the ends; a keyboard accelerator marker (GTK `_Open` / Qt `&Open`, German
  `Ö_ffnen` / `Ö&ffnen`) removed when each side has exactly one, so that the model learns words,
  not where a translator put the accelerator.
- Dropped, with the reason counted: the translator-credit entries (names, not translations); a
  side without a letter; a German side equal to the English one (an untranslated copy, compared
  case-insensitively); a side over MAX_CHARS characters; a length ratio outside 1/MAX_RATIO ..
  MAX_RATIO (characters, each side + RATIO_SMOOTHING so that "OK" / "Ja" is not extreme); a pair
  whose placeholders differ (`placeholders` below).
- Near duplicates share `near_key`: case-folded, letters and digits only.
- An identical pair is not always an untranslated copy: German keeps names, codes and units
  ("Afghanistan", "ISDN", "80 kbit/s"). `may_be_kept_identical` admits the short ones without an
  English function word; the build keeps those of them that no catalog translates otherwise, apart
  from the translations (training/corpus/build.py), so that a model can learn to leave them alone.
"""
from __future__ import annotations

import re
import unicodedata
from collections import Counter

MAX_CHARS = 500
MAX_RATIO = 3.0
RATIO_SMOOTHING = 10
CREDIT_MSGIDS = frozenset({
    "translator-credits", "translator_credits", "translator-credit", "translators", "your names",
    "your emails", "name of translators", "email of translators", "roles_of_translators",
    "credit_for_translators", "translated by", "translation", "_: name of translators\nyour names",
    "_: email of translators\nyour emails",
})
_SPACE = re.compile(r"\s+")
# printf conversions (positional index read apart: German reorders with %2$s; no space flag: "100% sure"
# is prose), {name}, {0} and ${VAR}
_PLACEHOLDER = re.compile(
    r"%(?P<position>\d+\$)?(?P<spec>[-+0#']*(?:\d+|\*)?(?:\.(?:\d+|\*))?(?:hh|h|ll|l|L|q|j|z|t|I64|I32)?"
    r"[diouxXeEfFgGaAcspn%@])|\$?\{[A-Za-z_][A-Za-z0-9_.]*\}|\{\d+\}")
_ACCELERATOR = re.compile(r"(?<![_&\w])[_&](?=\w)|(?<=\w)[_&](?=\w)")
_LETTER = re.compile(r"[^\W\d_]")
IDENTICAL_MAX_WORDS = 4
# A message with one of these is an English phrase a translator left, not a name German keeps.
ENGLISH_FUNCTION_WORDS = frozenset(
    "a all an and any are as at be been by can could did do does for from has have if in into is it its no "
    "not of on or should than that the then these this those to was were will with would you your".split())


def normalise(text: str) -> str:
    return _SPACE.sub(" ", unicodedata.normalize("NFC", text)).strip()


def placeholders(text: str) -> Counter[str]:
    """The multiset of placeholders a text holds, printf conversions without their position
    (`%2$s` counts as `%s`), so that a pair whose sides differ here would make the model drop,
    add or change a placeholder."""
    found: Counter[str] = Counter()
    for match in _PLACEHOLDER.finditer(text):
        found["%" + match.group("spec") if match.group("spec") is not None else match.group(0)] += 1
    return found


def accelerator_markers(text: str) -> list[re.Match[str]]:
    # `file_name`, `&amp;` and `_NET_WM` are not accelerators: only a marker in a word of letters.
    return [m for m in _ACCELERATOR.finditer(text)
            if not re.match(r"&\w+;", text[m.start():]) and not text[m.start() + 1:].startswith(("_", "&"))]


def strip_accelerators(source: str, target: str) -> tuple[str, str]:
    """Both sides without their accelerator marker, when each has exactly one of the same kind and
    the source's marked word does not appear unchanged in the target (an identifier, not a marker)."""
    a, b = accelerator_markers(source), accelerator_markers(target)
    if len(a) != 1 or len(b) != 1 or a[0].group(0) != b[0].group(0):
        return source, target
    word = re.match(r"\S*", source[source.rfind(" ", 0, a[0].start()) + 1:]).group(0)
    if word in target.split():
        return source, target
    return source[:a[0].start()] + source[a[0].end():], target[:b[0].start()] + target[b[0].end():]


def rejection(source: str, target: str) -> str | None:
    """Why a normalised pair is not kept, or None when it is."""
    if source.casefold() in CREDIT_MSGIDS:
        return "translator credits"
    if not _LETTER.search(source) or not _LETTER.search(target):
        return "no letter"
    if source.casefold() == target.casefold():
        return "untranslated copy"
    if len(source) > MAX_CHARS or len(target) > MAX_CHARS:
        return f"over {MAX_CHARS} characters"
    ratio = (len(target) + RATIO_SMOOTHING) / (len(source) + RATIO_SMOOTHING)
    if not 1 / MAX_RATIO <= ratio <= MAX_RATIO:
        return "length ratio"
    if placeholders(source) != placeholders(target):
        return "placeholders differ"
    return None


def may_be_kept_identical(text: str) -> bool:
    """Whether an untranslated copy of `text` may be a translation German keeps as it is: at most
    IDENTICAL_MAX_WORDS words, none of them an English function word."""
    words = set(re.findall(r"[^\W\d_]+", text.casefold()))
    return len(text.split()) <= IDENTICAL_MAX_WORDS and not words & ENGLISH_FUNCTION_WORDS


def near_key(text: str) -> str:
    return "".join(ch for ch in text.casefold() if ch.isalnum())
