"""Glossary enforcement on seeded random texts, translations and alignments (service/protection/
placement.py ``restore``, service/protected_translation.py ``serve_as_written``): whatever the
model wrote and however it aligned, nothing raises, every offset the answer gives slices the
client's strings, and an as-written answer keeps its placeholders exactly."""
from __future__ import annotations

import random
from collections import Counter

import pytest

from model.alignments.word_alignment import TokenAlignment
from service.glossary import GlossaryEntry
from service.protected_translation import serve_as_written, tried_as_written
from service.protection.markup import read_markup
from service.protection.placeholders import find_protected
from service.protection.placement import output_word, prepare, restore, terms_translated, written
from service.runtime.base import Translation
from tests.service.hand_alignment import words

SOURCE_WORDS = ["Click", "Apply", "to", "save", "the", "folder", "file", "%s", "{0}", "%(name)s", "name", "(v4)",
                "IP(v4)", "'Enter'", "key", "-v", "Sensor", "alarm", "failed,", "changes.", "?", "»Save«"]
TARGET_WORDS = ["Klicken", "Sie", "auf,", "um", "den", "Ordner", "Datei", "%s", "{0}", "%(name)s", "Name",
                "IP(v4)-Adresse", "'Eingabe'-Taste", "Sensor-Erinnerung", "Alarm", "fehlgeschlagen,", "speichern.",
                "-v", "»Sichern«", "zu", "?", ""]
GLOSSARY = [GlossaryEntry("folder", "Verzeichnis"), GlossaryEntry("Apply", "Übernehmen"), GlossaryEntry("name", "Bezeichnung"),
            GlossaryEntry("alarm", "Alarm"), GlossaryEntry("sensor", "Sensor"), GlossaryEntry("key", "Taste"),
            GlossaryEntry("save", "sichern")]


def random_alignment(rng: random.Random, source: str, target: str) -> TokenAlignment:
    """Each target word linked to up to three source words, weights summing to 1, heaviest first;
    some words left without links; now and then no alignment at all (a backend that gives none)."""
    if rng.random() < 0.1:
        return TokenAlignment.empty()
    src, tgt = words(source), words(target)
    links, hard = [], []
    for t in range(len(tgt)):
        if not src or rng.random() < 0.1:
            links.append([])
            continue
        chosen = rng.sample(range(len(src)), k=min(len(src), rng.randint(1, 3)))
        raw = [rng.random() + 0.01 for _ in chosen]
        row = sorted(((s, w / sum(raw)) for s, w in zip(chosen, raw)), key=lambda link: -link[1])
        links.append(row)
        hard.append((row[0][0], t))
    # Row+column readings also link a source word to the target word that attends to it most.
    for s in range(len(src)):
        best = max(((row_weight, t) for t, row in enumerate(links) for s2, row_weight in row if s2 == s), default=None)
        if best is not None and (s, best[1]) not in hard and rng.random() < 0.5:
            hard.append((s, best[1]))
    return TokenAlignment(src, tgt, links, sorted(hard), "")


def random_scores(rng: random.Random):
    def rescore(candidates: list[str]) -> list[float] | None:
        return None if rng.random() < 0.2 else [rng.random() for _ in candidates]
    return rescore


@pytest.mark.parametrize("seed", range(300))
def test_enforcement_never_raises_and_every_offset_slices_the_output(seed):
    rng = random.Random(seed)
    chosen = [rng.choice(SOURCE_WORDS) for _ in range(rng.randint(1, 9))]
    fmt = "html" if rng.random() < 0.3 else "text"
    if fmt == "html":  # a tag around one word, often a term
        chosen = [w.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") for w in chosen]
        k = rng.randrange(len(chosen))
        chosen[k] = f"<b>{chosen[k]}</b>"
    source = " ".join(chosen)
    target = " ".join(w for w in (rng.choice(TARGET_WORDS) for _ in range(rng.randint(0, 9))) if w)
    glossary = rng.sample(GLOSSARY, k=rng.randint(1, 4))
    prepared = prepare(source, fmt, glossary=glossary)
    alignment = random_alignment(rng, prepared.model_text, target)
    restored = restore(prepared, target, alignment, random_scores(rng), articles=rng.random() < 0.5)
    for report in restored.glossary:
        for start, end in report.source_spans:
            assert 0 <= start < end <= len(source)
        for start, end in report.target_spans:
            assert 0 <= start < end <= len(restored.text)
    for word in alignment.target_words:
        moved = output_word(word, restored)
        assert restored.text[moved.start:moved.end] == moved.text
    if fmt == "html":  # the tag comes back once, well formed, where the answer says it is
        output = read_markup(restored.text, "html")
        assert [t.opening for t in output.tags] == ["<b>"]
        (placed,) = [p for p in restored.placed if p.kind == "tag"]
        assert restored.text[placed.target_start:placed.target_end].startswith("<b>")
        assert restored.text[placed.target_start:placed.target_end].endswith("</b>")

    if not tried_as_written(prepared):
        return
    # As written: the alignment is over the text itself.
    as_written = written(prepared)
    assert terms_translated(as_written).count("%") == source.count("%")
    alignment = random_alignment(rng, source, target)
    served = serve_as_written(prepared, [Translation(target, -1.0, alignment)], "token",
                              lambda _, candidates: random_scores(rng)(candidates))
    if served is None:
        return
    wanted = Counter(p.text for p in find_protected(source))
    for one in served:
        text = one.translation.text
        assert Counter(p.text for p in find_protected(text)) == wanted
        for placed in one.placed:
            assert text[placed.target_start:placed.target_end].strip("'\"»«„“”‘’") == placed.text.strip("'\"")
        for word in one.translation.alignment.target_words:
            assert text[word.start:word.end] == word.text
