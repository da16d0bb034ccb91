"""A text written all in capitals is translated as the sentence it spells, and answered in capitals.

The models learned from sentences in mixed case; given a heading in capitals they wrote nonsense:
"II. A GAME OF CHESS" came back "I I III. Ein CAASSSSSSSSSSSSSSSSSSSSSSS", a book's table of
contents ("I. THE BURIAL OF THE DEAD") a string of repeated letters. So a segment whose letters are
all capitals (at least four, one word of three) goes to the model in sentence case, its first letter
and each sentence's first a capital, Roman numerals and "I" kept so ("II. A game of chess"), and its
translation comes back in capitals. Every change keeps each character where it stood (a character
whose other case is two characters is left as it is; German's ß is ẞ in capitals), so the
alignment's offsets hold as they are.
"""
from __future__ import annotations

import re
from dataclasses import replace

from service.runtime.base import Translation

_WORD = re.compile(r"[^\W\d_]+")
# A Roman numeral kept in capitals: a chapter's (I to XX), or any before a full stop or bracket ("XLII.")
_ROMAN = re.compile(r"M{0,3}(?:CM|CD|D?C{0,3})(?:XC|XL|L?X{0,3})(?:IX|IV|V?I{0,3})")
_CHAPTER = re.compile(r"X{0,2}(?:IX|IV|V?I{0,3})")
_SENTENCE_START = re.compile(r"(?:^|[.!?]\s+)\W*([^\W\d_])")


def upper_case(text: str) -> bool:
    """Whether the text is written in capitals: no lower-case letter, at least four capitals and a
    word of three, and each letter one character in lower case too."""
    if any(map(str.islower, text)):  # most texts: a lower-case letter among the first few characters
        return False
    cased = [c for c in text if c.isupper() or c.islower()]
    return (len(cased) >= 4 and not any(c.islower() for c in cased) and all(len(c.lower()) == 1 for c in cased)
            and any(len(word) >= 3 for word in _WORD.findall(text)))


def sentence_cased(text: str) -> str:
    """An upper-case text in sentence case, each character where it stood."""
    out = list(text.lower())
    for word in _WORD.finditer(text):
        numeral = _CHAPTER.fullmatch(word.group()) or (_ROMAN.fullmatch(word.group()) and text[word.end():word.end() + 1] in ".)")
        if word.group() == "I" or numeral:
            out[word.start():word.end()] = word.group()
    for start in _SENTENCE_START.finditer(text):
        out[start.start(1)] = text[start.start(1)]
    return "".join(out)


def capital(c: str) -> str:
    """A character's capital where it is one character (ß's is ẞ), else the character."""
    if c == "ß":
        return "ẞ"
    upper = c.upper()
    return upper if len(upper) == 1 else c


def upper_cased(translation: Translation, source: str) -> Translation:
    """The translation of `source`'s sentence-cased text in capitals, its alignment's words read
    from the source and the translation as they are now."""
    text = "".join(capital(c) for c in translation.text)
    alignment = translation.alignment
    if alignment is not None:
        alignment = replace(alignment, source_words=[replace(w, text=source[w.start:w.end]) for w in alignment.source_words],
                            target_words=[replace(w, text=text[w.start:w.end]) for w in alignment.target_words])
    return replace(translation, text=text, alignment=alignment)
