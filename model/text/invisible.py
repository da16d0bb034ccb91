"""Characters that show nothing on their own: whitespace, controls, format characters (zero-width
space and joiners, soft hyphen, byte-order mark, invisible operators), private-use code points,
lone surrogates, and combining marks with no letter before them.

A text made only of these has nothing to translate (the service answers it with an empty
translation and no model call: a model would invent a sentence for it), and a word's span does
not start with them, nor end with any but a combining mark (which belongs to the letter before it).
"""
from __future__ import annotations

import unicodedata

# Shown by nothing on their own wherever they stand.
BLANK_CATEGORIES = frozenset({"Cc", "Cf", "Co", "Cs", "Zs", "Zl", "Zp"})
# Combining marks: invisible without a base character; part of the letter they follow.
MARK_CATEGORIES = frozenset({"Mn", "Me"})


def is_blank(char: str) -> bool:
    """Whitespace or a character of ``BLANK_CATEGORIES``."""
    return char.isspace() or unicodedata.category(char) in BLANK_CATEGORIES


def is_invisible(char: str) -> bool:
    """``is_blank`` or a combining mark: what shows nothing at the start of a word."""
    return is_blank(char) or unicodedata.category(char) in MARK_CATEGORIES


def has_visible_text(text: str) -> bool:
    """Whether ``text`` holds anything to translate."""
    return not all(is_invisible(char) for char in text)
