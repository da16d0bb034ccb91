"""A sentence's translation starts with a capital where its source does.

Localisation checkers flag a translation whose first letter's case differs from its message's
(translate-toolkit's pofilter "startcaps"). The software models answered a capitalised German
message in lower case now and then ("SELinux-Benutzer kann nicht verifiziert werden" -> "cannot
verify SELinux user"): of the 1,360 validation messages that start with a capital letter, as their
English reference does, 26 De->En and 16 En->De translations did not (`python
benchmarks/as_written.py --split valid [--pair de-en]`, results/as_written.md). So where a segment
that opens a line or follows a sentence starts with a capital letter (its first character, after
space, quotes or an accelerator's marker; not after a placeholder: "%s: Authentifizierung
fehlgeschlagen" is "%s: authentication failed" in GNU's English), its translation's first word is
capitalised when the translation starts with it, the word is a plain lower-case word (not an
identifier such as ``stdin``, ``pam_start`` or ``example.com``, nor one the source writes in lower
case itself) and no placeholder, tag or glossary term the service placed is it. An option's
description, a column's cell, is left as the model wrote it: GNU writes those in lower case and
German catalogs do not.

Never the other way: a German translation of a lower-case English message starts with a capital
whenever its first word is a noun.
"""
from __future__ import annotations

import re
from dataclasses import replace

from service.protection.placement import PreparedText
from service.served import Served

_LETTER = re.compile(r"[^\W\d_]")
# What may come before the first word: space, quotes, brackets and an accelerator's marker ("&Ask").
_OPENERS = " \t\n\"'„“‚‘«»‹›([¿¡&_~"
# A plain word: letters, hyphen-joined parts, then a space, the end, or punctuation that ends it.
_PLAIN_WORD = re.compile(r"[^\W\d_]+(?:-[^\W\d_]+)*(?=$|\s|[,;:!?)\]»«”“’‘›‹\"'.…]+(?:$|\s))")


def opening_letter(text: str) -> int | None:
    """The offset of text's first letter where only space, quotes, brackets or an accelerator's
    marker come before it; None where anything else does (a placeholder, a digit) or none is."""
    letter = _LETTER.search(text)
    return None if letter is None or text[:letter.start()].strip(_OPENERS) else letter.start()


def capitalised(served: Served, prepared: PreparedText) -> Served:
    """`served` with its first word capitalised where its source starts with a capital (see above);
    `prepared`'s text must be a segment that opens a line or follows a sentence."""
    source = prepared.original
    first = opening_letter(source)
    if (first is None or not source[first].isupper()
            or any(p.start <= first for p in prepared.protected if p.kind != "accelerator")):
        return served
    text = served.translation.text
    k = opening_letter(text)
    if k is None or not text[k].islower() or len(text[k].upper()) != 1:
        return served
    word = _PLAIN_WORD.match(text, k)
    if word is None or word.group() != word.group().lower():
        return served
    placed = [p.target_start for p in served.placed if p.kind != "accelerator"]
    placed += [start for report in served.glossary for start, _ in report.target_spans]
    if any(start < word.end() for start in placed):
        return served
    if re.search(rf"(?<![\w-]){re.escape(word.group())}(?![\w-])", source):
        return served  # the source writes it so: a name or a command the model copied
    text = text[:k] + text[k].upper() + text[k + 1:]
    translation = served.translation
    alignment = translation.alignment
    if alignment is not None:
        alignment = replace(alignment, target_words=[replace(w, text=text[w.start:w.end]) if w.start <= k < w.end else w
                                                     for w in alignment.target_words])
    return replace(served, translation=replace(translation, text=text, alignment=alignment))
