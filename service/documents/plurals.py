"""A target language's plural forms, as Unicode's CLDR and gettext's tables name them (Babel's copy
of both, pinned in pyproject.toml): the categories a string resource varies by (French: one, many,
other, where the English source has one and other) and the Plural-Forms header msginit writes.
Babel is imported on first use: only a document's translation needs it."""
from __future__ import annotations

from functools import lru_cache

# CLDR's categories in the order Android, Apple and CLDR itself list them.
ORDER = ("zero", "one", "two", "few", "many", "other")


@lru_cache(maxsize=64)
def categories(language: str) -> tuple[str, ...] | None:
    """The plural categories of `language` (a BCP 47 or POSIX code) in CLDR's order; None where
    CLDR does not know the language."""
    from babel import Locale, UnknownLocaleError

    try:
        tags = Locale.parse(language.replace("-", "_")).plural_form.tags
    except (UnknownLocaleError, ValueError, TypeError):
        return None
    return tuple(category for category in ORDER if category in tags or category == "other")


@lru_cache(maxsize=64)
def gettext_header(language: str) -> tuple[int, str] | None:
    """How many plural forms a gettext catalog in `language` has and its Plural-Forms header
    (`nplurals=2; plural=(n > 1);`, msgfmt's advice for French); None where the table lacks the
    language."""
    from babel.messages.plurals import PLURALS, get_plural

    code = language.replace("-", "_")
    if code not in PLURALS and code.split("_")[0] not in PLURALS:
        return None  # get_plural would answer English's
    forms = get_plural(code)
    return forms.num_plurals, str(forms)

