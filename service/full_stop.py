"""A translation ends with a full stop only where its source ends with a sentence's punctuation.

The caption models learned from sentences that end with one, and ended whatever they were given so: a
heading "A day in the park" came back "Ein Tag im Park.", a button's "Two dogs" "Zwei Hunde.", and
where the text was one element, `<h1>A day in the park</h1>`, the full stop landed after its end tag.
Localisation checkers flag a translation whose end punctuation differs from its message's
(translate-toolkit's pofilter "endpunc"). So where a segment's source (its last visible character:
after trailing space and tags) ends with none of . ! ? … : ; and its translation's last visible
character is one full stop (not an ellipsis), that full stop is taken out; but not where it ends an
abbreviation or an ordinal the model wrote ("usw.", "z.B.", "am 3.") nor where it is a word of its
own in the alignment, and never in a translation memory's answer.
"""
from __future__ import annotations

from service.protection.placement import PreparedText
from service.served import Served, edited

# What ends a sentence, or a message that introduces what follows it.
_END_PUNCTUATION = ".!?…:;。！？：；"
_FULL_STOPS = ".。"
# A quote or bracket after a sentence's punctuation: 'He said "Stop."'
_CLOSING = "\"'”’»›)]}"
# The abbreviations a sentence may end with, whose full stop is their own (a short word is none:
# German ends sentences with "an", "aus", "ist").
_ABBREVIATIONS = frozenset("""usw etc bzw ca vgl evtl ggf inkl zzgl bspw usf sog nr abs abschn bd hr fr dr prof str tel
    mio mrd jh vs cf approx cie env mme mlle""".split())


def _last_visible(text: str, end: int | None = None) -> int | None:
    """The offset of the last character of text[:end] that is neither space nor in a tag after it (a
    markup text's end tags, an XML empty element); scanned back, in one pass."""
    end = len(text) if end is None else end
    while end > 0:
        if text[end - 1].isspace():
            end -= 1
        elif text[end - 1] == ">" and (start := text.rfind("<", 0, end - 1)) >= 0 and ">" not in text[start:end - 1]:
            end = start
        else:
            return end - 1
    return None


def ends_punctuated(source: str) -> bool:
    """Whether source's last visible character (before closing quotes and brackets) is punctuation
    that ends a sentence or introduces what follows."""
    last = _last_visible(source)
    while last is not None and source[last] in _CLOSING:
        last = _last_visible(source, last)
    return last is None or source[last] in _END_PUNCTUATION


def _own_full_stop(text: str, stop: int) -> bool:
    """Whether the full stop at text[stop] ends an abbreviation or an ordinal: after a digit ("am 3."),
    a word with a full stop of its own ("z.B."), one letter ("J."), a word abbreviated ("usw.")."""
    start = stop  # the word before it (word characters and full stops), scanned back
    while start > 0 and (text[start - 1].isalnum() or text[start - 1] in "_."):
        start -= 1
    word = text[start:stop]
    return bool(word) and (word[-1].isdigit() or "." in word or len(word) == 1 or word.casefold() in _ABBREVIATIONS)


def full_stop_as_source(served: Served, prepared: PreparedText) -> Served:
    """`served` without the full stop its translation ends with where its source ends with no
    punctuation (see above)."""
    if ends_punctuated(prepared.original):
        return served
    text = served.translation.text
    stop = _last_visible(text)
    if stop is None or text[stop] not in _FULL_STOPS or text[stop - 1:stop] in (".", "…") or _own_full_stop(text, stop):
        return served
    alignment = served.translation.alignment
    if alignment is not None and any((w.start, w.end) == (stop, stop + 1) for w in alignment.target_words):
        return served
    return edited(served, [(stop, stop + 1, "")])
