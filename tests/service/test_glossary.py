"""Glossaries: matching rules, enforcement through the word alignment, the compliance report
(service/glossary.py, service/protection/placement.py), and the SQLite store
(service/glossary_store.py). Alignments are built by hand, so every position is known."""
from __future__ import annotations

import sqlite3

import pytest

from service.glossary import GlossaryEntry as Entry
from service.glossary import find_terms, occurrences, report
from service.glossary_store import GlossaryInvalid, GlossaryStore
from service.protection.placement import output_word, prepare, restore
from service.runtime.base import TokenAlignment
from tests.service.hand_alignment import aligned, words


def test_source_terms_match_whole_words_ignoring_case_and_the_longest_wins():
    glossary = [Entry("dog", "Hund"), Entry("hot dog", "Hotdog"), Entry("cat", "Katze")]
    text = "Dog eats a hot  dog; dogs and a cat-like catalog."
    assert [(glossary[m.entry].source, text[m.start:m.end]) for m in find_terms(text, glossary)] == [
        ("dog", "Dog"), ("hot dog", "hot  dog"), ("cat", "cat")]


@pytest.mark.parametrize("text, found", [
    ("Der Hund und die Hunde, des Hundes, den Hunden.", ["Hund", "Hunde", "Hundes", "Hunden"]),
    ("hund am Satzanfang", ["hund"]),             # the first letter in either case
    ("Hundehütte, HUND, Windhund", []),            # not inside a longer word, the rest as written
])
def test_a_required_target_term_is_satisfied_by_its_declined_forms(text, found):
    assert [text[a:b] for a, b in occurrences(text, "Hund")] == found


@pytest.mark.parametrize("text, term, found", [
    ("Die Datei konnte nicht geöffnet werden.", "öffnen", ["geöffnet"]),   # "-et" after the stem
    ("Geöffnete Dateien; er öffnet sie", "öffnen", ["Geöffnete", "öffnet"]),
    ("Das Dokument wurde gespeichert.", "speichern", ["gespeichert"]),   # an -ern verb
    ("Dateien wurden entfernt; entfernte Rechner", "entfernen", ["entfernt", "entfernte"]),  # no "ge" after ent-
    ("Paket installiert", "installieren", ["installiert"]),               # none after -ier
    ("Versteckte Dateien angezeigt, anzuzeigen", "anzeigen", ["angezeigt", "anzuzeigen"]),  # separable: an|ge, an|zu
    ("Einträge hinzugefügt", "hinzufügen", ["hinzugefügt"]),
    ("Die Datei wurde verschoben.", "verschieben", []),                  # an irregular participle is not known
    ("öffnete, geöffnetes", "Öffnen", []),                              # a noun term: its own forms only
    ("geladen", "laden", []),                                          # a stem under four letters
])
def test_a_german_verb_term_is_satisfied_by_its_regular_forms(text, term, found):
    assert [text[a:b] for a, b in occurrences(text, term)] == found


@pytest.mark.parametrize("text, term, found", [
    ("Hundehütte, HUND, Windhund", "Hund", ["Hund", "hund"]),           # first part (linking e), head
    ("Netzwerkeinstellungen öffnen", "Einstellungen", ["einstellungen"]),
    ("Netzwerkeinstellungen öffnen", "Netzwerk", ["Netzwerk"]),
    ("Dateinamen und Dateien", "Datei", ["Datei", "Dateien"]),          # a compound, then a declined form
    ("Sicherheitseinstellungen", "Sicherheit", ["Sicherheit"]),         # the linking s
    ("Bildung, Motor, Passwortdialog", "Bild", []),                     # "ung": under four letters after it
    ("Motor", "Tor", []),                                               # a term under four letters: whole words only
    ("Passwortdialog", "Kennwort", []),
    ("Netzwerkeinstellungen", "einstellungen", []),                     # not a noun (no capital): whole words only
])
def test_a_german_noun_term_is_satisfied_inside_a_closed_compound(text, term, found):
    assert [text[a:b] for a, b in occurrences(text, term, compounds=True)] == found
    assert occurrences("Netzwerkeinstellungen", "Einstellungen") == []  # not for other targets


def test_a_term_the_model_wrote_inside_a_german_compound_is_kept_and_the_compound_too():
    # "Network Settings" -> "Netzwerkeinstellungen": replacing the compound by the term lost "Network".
    glossary = [Entry("settings", "Einstellungen"), Entry("network", "Netzwerk")]
    prepared = prepare("Open the network settings.", glossary=glossary)
    translation = "Netzwerkeinstellungen öffnen."
    alignment = aligned(prepared.model_text, translation, [(2, 0), (3, 0), (0, 1)])
    restored = restore(prepared, translation, alignment)
    assert restored.text == translation
    assert [(r.source, r.enforced, r.target_spans, r.violations) for r in restored.glossary] == [
        ("network", "kept", [(0, 8)], []), ("settings", "kept", [(8, 21)], [])]
    # For another target language the compound is one word, not the term: replaced.
    other = restore(prepared, translation, alignment, articles=False)
    assert [(r.source, r.enforced) for r in other.glossary] == [("network", "inserted"), ("settings", "replaced")]
    # A compound the alignment gives the term alone is the model's mistake: the term replaces it.
    prepared = prepare("A parade in china.", glossary=[Entry("china", "China")])
    translation = "Eine Parade in Chinatown."
    restored = restore(prepared, translation, aligned(prepared.model_text, translation, [(0, 0), (1, 1), (2, 2), (3, 3)]))
    assert restored.text == "Eine Parade in China."
    assert [(r.enforced, r.target_spans) for r in restored.glossary] == [("replaced", [(15, 20)])]


def test_a_term_takes_one_part_of_a_compound_that_also_translates_another_word_where_the_model_scores_it_best():
    # The software model: "Open the extraction dialog." -> "Den Extraktionsdialog öffnen.", the compound
    # hard-aligned to extraction and dialog. Replacing it whole lost the dialog ("Den Entpacken öffnen.").
    prepared = prepare("Open the extraction dialog.", glossary=[Entry("extraction", "Entpacken")])
    translation = "Den Extraktionsdialog öffnen."
    links = [[(1, 0.98)], [(2, 0.78), (3, 0.22)], [(0, 0.77), (3, 0.2)]]
    alignment = weighted(prepared.model_text, translation, links, [(1, 0), (2, 1), (3, 1), (0, 2)])
    scored: list[list[str]] = []
    rescore = preferring("Den Entpacken-Dialog öffnen.", scored)

    known = {"Dialog", "Extraktion", "Extra"}.__contains__  # whole pieces of the model's vocabulary
    restored = restore(prepared, translation, alignment, rescore, known_word=known)
    assert restored.text == "Den Entpacken-Dialog öffnen."
    assert [(r.enforced, r.target_spans, r.satisfied) for r in restored.glossary] == [("replaced", [(4, 13)], True)]
    # The whole word first, then each split with a whole piece on one side ("Extra", "Extraktion" with
    # or without its linking s, "Dialog"): the term as the first part, then as the head.
    assert scored[0] == ["Den Entpacken öffnen.", "Den Entpacken-Ktionsdialog öffnen.", "Den Extra-Entpacken öffnen.",
                         "Den Entpacken-Sdialog öffnen.", "Den Extraktion-Entpacken öffnen.",
                         "Den Entpacken-Dialog öffnen.", "Den Extraktions-Entpacken öffnen."]
    # The model may prefer the whole word; without its scores or its vocabulary, the whole word is replaced.
    assert restore(prepared, translation, alignment, lambda c: [1.0] + [0.0] * (len(c) - 1),
                   known_word=known).text == "Den Entpacken öffnen."
    assert restore(prepared, translation, alignment, rescore).text == "Den Entpacken öffnen."
    assert restore(prepared, translation, alignment, known_word=known).text == "Den Entpacken öffnen."
    # A word hard-aligned to the term alone is no compound of two words: no split is scored.
    scored.clear()
    alone = weighted(prepared.model_text, translation, links, [(1, 0), (2, 1), (0, 2)])
    assert restore(prepared, translation, alone, rescore, known_word=known).text == "Den Entpacken öffnen."
    assert scored and not any("-" in candidate for candidates in scored for candidate in candidates)


def test_a_term_takes_the_part_of_a_compound_that_another_term_does_not_hold():
    # "Network Settings" -> "Netzwerkeinstellungen" with network -> Netzwerk (kept inside it) and
    # settings -> Konfiguration: the compound went to network, and settings was inserted beside it
    # ("Netzwerkeinstellungen Konfiguration"). The split where the other term's part ends needs no
    # vocabulary.
    glossary = [Entry("settings", "Konfiguration"), Entry("network", "Netzwerk")]
    prepared = prepare("Network Settings", glossary=glossary)
    translation = "Netzwerkeinstellungen"
    alignment = weighted(prepared.model_text, translation, [[(0, 0.58), (1, 0.42)]], [(0, 0), (1, 0)])
    restored = restore(prepared, translation, alignment, preferring("Netzwerk-Konfiguration"),
                       known_word=lambda word: False)
    assert restored.text == "Netzwerk-Konfiguration"
    assert [(r.source, r.enforced, r.target_spans) for r in restored.glossary] == [
        ("network", "kept", [(0, 8)]), ("settings", "replaced", [(9, 22)])]


def test_the_word_after_a_term_inserted_at_a_sentences_start_loses_the_sentences_capital_where_the_model_prefers():
    # The software model left "Seek" out: "Rückwärts/vorwärts 5 Sekunden"; the term inserted before it
    # gave "Springen Rückwärts/vorwärts 5 Sekunden".
    prepared = prepare("Seek backward 5 seconds", glossary=[Entry("seek", "Springen")])
    translation = "Zurück 5 Sekunden"
    alignment = aligned(prepared.model_text, translation, [(1, 0), (2, 1), (3, 2)])
    scored: list[list[str]] = []
    restored = restore(prepared, translation, alignment, preferring("Springen zurück 5 Sekunden", scored))
    assert restored.text == "Springen zurück 5 Sekunden"
    assert scored == [["Springen Zurück 5 Sekunden", "Springen zurück 5 Sekunden"]]
    assert [(r.enforced, r.target_spans) for r in restored.glossary] == [("inserted", [(0, 8)])]
    # The lowered word is where "Zurück" was: its alignment links address it.
    assert restored.text[restored.char_start[0]:restored.char_end[5]] == "zurück"
    # A noun keeps its capital; a word in capitals is not asked about; nor without the model's scores.
    assert restore(prepared, translation, alignment, preferring("Springen Zurück 5 Sekunden", scored)).text == \
        "Springen Zurück 5 Sekunden"
    scored.clear()
    capitals = "DVD 5 Sekunden"
    assert restore(prepared, capitals, aligned(prepared.model_text, capitals, [(1, 0), (2, 1), (3, 2)]),
                   preferring("Springen dVD 5 Sekunden", scored)).text == "Springen DVD 5 Sekunden"
    assert scored == []
    assert restore(prepared, translation, alignment).text == "Springen Zurück 5 Sekunden"


def test_a_term_the_model_translated_otherwise_is_replaced_where_the_alignment_puts_it():
    prepared = prepare("A dog chases the Dog.", glossary=[Entry("dog", "Köter")])
    translation = "Ein Hund jagt den Hund."
    restored = restore(prepared, translation, aligned(prepared.model_text, translation,
                                                      [(0, 0), (1, 1), (2, 2), (3, 3), (4, 4)]))
    assert restored.text == "Ein Köter jagt den Köter."
    (report,) = restored.glossary
    assert (report.source, report.target, report.enforced, report.violations) == ("dog", "Köter", "replaced", [])
    assert report.source_spans == [(2, 5), (17, 20)] and report.target_spans == [(4, 9), (19, 24)]
    # The alignment's replaced words address the term in the output, their punctuation with them.
    alignment = aligned(prepared.model_text, translation, [(0, 0), (1, 1), (2, 2), (3, 3), (4, 4)])
    assert [(w.text, w.start, w.end) for w in (output_word(w, restored) for w in alignment.target_words)] == [
        ("Ein", 0, 3), ("Köter", 4, 9), ("jagt", 10, 14), ("den", 15, 18), ("Köter.", 19, 25)]


def test_a_term_the_model_already_satisfies_is_kept_and_one_without_aligned_words_is_inserted():
    prepared = prepare("Two dogs play in the snow.", glossary=[Entry("dogs", "Hund"), Entry("snow", "Schnee")])
    translation = "Zwei Hunde spielen im Schnee."
    # dogs-Hunde (a declined form: kept); "snow." aligned to nothing: Schnee is there all the same.
    restored = restore(prepared, translation, aligned(prepared.model_text, translation, [(0, 0), (1, 1), (2, 2), (3, 3)]))
    assert restored.text == translation
    assert [(r.source, r.enforced, r.target_spans) for r in restored.glossary] == [
        ("dogs", "kept", [(5, 10)]), ("snow", "kept", [(22, 28)])]
    prepared = prepare("A dog runs.", glossary=[Entry("dog", "Hund")])
    translation = "Ein rennt."
    restored = restore(prepared, translation, aligned(prepared.model_text, translation, [(0, 0), (2, 1)]))
    assert restored.text == "Ein Hund rennt."
    assert [(r.enforced, r.target_spans, r.satisfied) for r in restored.glossary] == [("inserted", [(4, 8)], True)]


def test_a_replacement_keeps_punctuation_and_tags_and_placeholders_stay():
    prepared = prepare("A <b>dog</b> sees %s dog.", "html", glossary=[Entry("dog", "Köter")])
    assert prepared.model_text == "A dog sees dog."
    translation = "Ein Hund sieht Hund."
    restored = restore(prepared, translation, aligned(prepared.model_text, translation, [(0, 0), (1, 1), (2, 2), (3, 3)]))
    assert restored.text == "Ein <b>Köter</b> sieht %s Köter."
    assert restored.glossary[0].source_spans == [(5, 8), (21, 24)]


def test_violations_are_reported_when_the_output_cannot_satisfy_the_term():
    glossary = [Entry("dog", "Hund"), Entry("cat", "Katze")]
    found = [(0, (2, 5)), (1, (6, 9)), (0, (10, 13))]
    missing, cat = report(glossary, found, "Eine Katze.", {1: "replaced"})
    assert (missing.source, missing.source_spans, missing.violations, missing.satisfied, missing.enforced) == (
        "dog", [(2, 5), (10, 13)], ["missing"], False, "kept")
    assert (cat.target_spans, cat.satisfied, cat.enforced) == ([(5, 10)], True, "replaced")
    (fewer, _) = report(glossary, found, "Ein Hund.", {})
    assert fewer.violations == ["1 of 2 occurrences"]


def test_the_protect_method_takes_the_term_out_and_puts_the_required_one_in_its_place():
    prepared = prepare("A dog sees %s dog.", glossary=[Entry("dog", "Köter")], glossary_method="protect")
    assert prepared.model_text == "A sees."
    translation = "Ein sieht."
    restored = restore(prepared, translation, aligned(prepared.model_text, translation, [(0, 0), (1, 1)]))
    assert restored.text == "Ein Köter sieht %s Köter."
    assert [p.text for p in restored.placed] == ["%s"]
    (term,) = restored.glossary
    assert (term.source_spans, term.target_spans, term.enforced, term.satisfied) == (
        [(2, 5), (14, 17)], [(4, 9), (19, 24)], "inserted", True)


def test_the_store_keeps_glossaries_across_reopening(tmp_path):
    path = tmp_path / "sub" / "glossaries.sqlite3"
    store = GlossaryStore(path)
    first = store.create("pets", "en", "de", [Entry(" hot   dog ", "Hotdog "), Entry("dog", "Hund")])
    second = store.create("empty", "de", "en", [])
    store.close()
    store = GlossaryStore(path)
    assert store.get(first.id) == first
    assert first.entries == (Entry("hot dog", "Hotdog"), Entry("dog", "Hund"))
    assert [g.id for g in store.list()] == [first.id, second.id]
    assert store.delete(first.id) is True and store.delete(first.id) is False
    assert store.get(first.id) is None and [g.id for g in store.list()] == [second.id]
    # Entries go with their glossary.
    assert sqlite3.connect(path).execute("SELECT COUNT(*) FROM entries").fetchone() == (0,)


@pytest.mark.parametrize("entries, field, message", [
    ([Entry("", "x")], "entries.0.source", "must not be empty"),
    ([Entry("dog", "Hund"), Entry("a", " ")], "entries.1.target", "must not be empty"),
    ([Entry("x" * 101, "y")], "entries.0.source", "at most 100 characters, got 101"),
    ([Entry("Dog", "Hund"), Entry("dog", "Köter")], "entries.1.source", "'dog' is already entry 0"),
    ([Entry(f"t{k}", "x") for k in range(257)], "entries", "at most 256 entries per glossary"),
])
def test_bad_entries_are_refused_naming_the_entry(entries, field, message):
    store = GlossaryStore(":memory:")
    with pytest.raises(GlossaryInvalid) as error:
        store.create("bad", "en", "de", entries)
    assert (error.value.field, error.value.message) == (field, message)
    assert store.list() == []


def preferring(best: str, scored: list[list[str]] | None = None):
    """A model score that prefers the sentence `best` and records in `scored` what it is asked."""
    def rescore(candidates: list[str]) -> list[float]:
        if scored is not None:
            scored.append(candidates)
        return [1.0 if c == best else 0.0 for c in candidates]
    return rescore


def weighted(source: str, target: str, links: list[list[tuple[int, float]]], hard: list[tuple[int, int]]):
    """An alignment with each target word's link weights as a model gives them, and its hard links."""
    return TokenAlignment(words(source), words(target), links, hard, "")


def test_a_term_no_word_is_hard_aligned_to_replaces_the_word_that_attends_to_it_most():
    # The software model's alignment: "speichern." links 0.515 to "work." and 0.485 to "Save", so
    # "Save" has no hard link; inserting the term gave "sichern Ihre Arbeit speichern."
    prepared = prepare("Save your work.", glossary=[Entry("save", "sichern")])
    translation = "Ihre Arbeit speichern."
    links = [[(1, 1.0)], [(2, 0.99), (1, 0.01)], [(2, 0.515), (0, 0.485)]]
    restored = restore(prepared, translation, weighted(prepared.model_text, translation, links, [(1, 0), (2, 1), (2, 2)]))
    assert restored.text == "Ihre Arbeit sichern."
    assert [(r.enforced, r.target_spans, r.satisfied) for r in restored.glossary] == [("replaced", [(12, 19)], True)]


def test_the_terms_translation_standing_for_another_source_word_does_not_satisfy_it():
    # The software model: "Press Delete to remove the file." -> "Drücken Sie das Löschen, um die Datei
    # zu entfernen.". With Delete -> Entfernen, "entfernen" (remove's) counted, the text was left as
    # it was and the term reported kept.
    source, translation = "Press Delete to remove the file.", "Drücken Sie das Löschen, um die Datei zu entfernen."
    links = [[(0, 1.0)], [(0, 0.9), (1, 0.1)], [(1, 0.8), (0, 0.2)], [(1, 0.97), (3, 0.03)], [(2, 1.0)], [(4, 1.0)],
             [(5, 1.0)], [(2, 1.0)], [(3, 0.97), (1, 0.03)]]
    prepared = prepare(source, glossary=[Entry("Delete", "Entfernen")])
    restored = restore(prepared, translation, weighted(source, translation, links, heaviest(links)))
    assert restored.text == "Drücken Sie das Entfernen, um die Datei zu entfernen."
    # Reported where the term stands for Delete only, not where "entfernen" translates remove.
    assert [(r.enforced, r.target_spans, r.satisfied) for r in restored.glossary] == [("replaced", [(16, 25)], True)]
    # Each term takes its own word, though each word is the other term's translation.
    prepared = prepare(source, glossary=[Entry("delete", "entfernen"), Entry("remove", "löschen")])
    restored = restore(prepared, translation, weighted(source, translation, links, heaviest(links)))
    assert restored.text == "Drücken Sie das Entfernen, um die Datei zu löschen."
    assert [(r.source, r.enforced, r.target_spans) for r in restored.glossary] == [
        ("delete", "replaced", [(16, 25)]), ("remove", "replaced", [(43, 50)])]
    # A word whose links the term shares with a neighbour may be the term's ("existiert" 0.76 to "does",
    # 0.24 to "exist." in "Device directory does not exist."): a tenth of its heaviest link or more, kept.
    links[8] = [(3, 0.9), (1, 0.1)]
    prepared = prepare(source, glossary=[Entry("Delete", "Entfernen")])
    restored = restore(prepared, translation, weighted(source, translation, links, heaviest(links)))
    assert restored.text == translation
    assert [(r.enforced, r.target_spans) for r in restored.glossary] == [("kept", [(41, 50)])]


def test_a_word_aligned_to_two_terms_goes_to_the_one_it_translates_alone():
    # "löschen?" links to "folder?" (0.501) and "Delete" (0.499), both hard; "Ordner" only to
    # "folder?". Each term keeps its own word (the two replacements had run together:
    # "Verzeichnisentfernen?").
    glossary = [Entry("delete", "entfernen"), Entry("folder", "Verzeichnis")]
    prepared = prepare("Delete the folder?", glossary=glossary)
    translation = "Ordner löschen?"
    links = [[(2, 1.0)], [(2, 0.501), (0, 0.499)]]
    restored = restore(prepared, translation, weighted(prepared.model_text, translation, links, [(0, 1), (2, 0), (2, 1)]))
    assert restored.text == "Verzeichnis entfernen?"
    assert [(r.source, r.enforced, r.target_spans) for r in restored.glossary] == [
        ("delete", "replaced", [(12, 21)]), ("folder", "replaced", [(0, 11)])]


def test_a_term_the_translation_merged_is_not_inserted_again_and_takes_the_capital_it_replaces():
    # "Press Save to save the document." -> "Zum Speichern des Dokuments drücken.": one "Speichern"
    # for both source terms, the button's name aligned to nothing. It was "Zum sichern sichern ...".
    prepared = prepare("Press Save to save the document.", glossary=[Entry("save", "sichern")])
    translation = "Zum Speichern des Dokuments drücken."
    links = [[(2, 0.98), (0, 0.02)], [(3, 0.93), (1, 0.07)], [(4, 1.0)], [(5, 1.0)], [(5, 0.51), (0, 0.40), (3, 0.09)]]
    restored = restore(prepared, translation,
                       weighted(prepared.model_text, translation, links, [(2, 0), (3, 1), (4, 2), (5, 3), (5, 4)]))
    assert restored.text == "Zum Sichern des Dokuments drücken."
    (report,) = restored.glossary
    assert (report.enforced, report.target_spans, report.violations) == ("replaced", [(4, 11)], ["1 of 2 occurrences"])


def test_a_term_inserted_at_the_start_of_the_translation_takes_a_capital():
    prepared = prepare("Save the file.", glossary=[Entry("save", "sichern")])
    translation = "Die Datei."
    restored = restore(prepared, translation, aligned(prepared.model_text, translation, [(1, 0), (2, 1)]))
    assert restored.text == "Sichern Die Datei."
    assert [(r.enforced, r.target_spans) for r in restored.glossary] == [("inserted", [(0, 7)])]


def test_a_one_word_term_replaces_one_word_and_the_sentences_last_verb_stays():
    # "löschen?" links 0.52 to "folder?" (their question marks) and 0.48 to "Delete": hard-aligned
    # to the term, it had been replaced with it ("Den ausgewählten Verzeichnis?").
    prepared = prepare("Delete the selected folder?", glossary=[Entry("folder", "Verzeichnis")])
    translation = "Den ausgewählten Ordner löschen?"
    links = [[(1, 0.99), (2, 0.01)], [(2, 1.0)], [(3, 1.0)], [(3, 0.52), (0, 0.48)]]
    restored = restore(prepared, translation,
                       weighted(prepared.model_text, translation, links, [(1, 0), (2, 1), (3, 2), (3, 3)]))
    assert restored.text == "Den ausgewählten Verzeichnis löschen?"


def heaviest(links: list[list[tuple[int, float]]]) -> list[tuple[int, int]]:
    """Each target word's hard link: its heaviest (the links are listed heaviest first)."""
    return [(row[0][0], t) for t, row in enumerate(links) if row]


def test_a_term_whose_words_translate_another_source_word_goes_where_the_model_scores_best():
    prepared = prepare("Click Apply to save.", glossary=[Entry("Apply", "Übernehmen")])
    translation = "Klicken Sie auf, um zu speichern."
    # "Klicken" links 0.76 to Click and 0.24 to Apply: Apply's only word is another's translation.
    links = [[(0, 0.76), (1, 0.24)], [(0, 1.0)], [(0, 1.0)], [(2, 1.0)], [(2, 1.0)], [(3, 1.0)]]
    alignment = weighted(prepared.model_text, translation, links, heaviest(links))
    scored: list[list[str]] = []

    def rescore(candidates: list[str]) -> list[float]:
        scored.append(candidates)
        return [1.0 if c == "Klicken Sie auf Übernehmen, um zu speichern." else 0.0 for c in candidates]

    restored = restore(prepared, translation, alignment, rescore)
    assert restored.text == "Klicken Sie auf Übernehmen, um zu speichern."
    assert [(r.enforced, r.target_spans) for r in restored.glossary] == [("inserted", [(16, 26)])]
    # The candidates: the alignment's replacement, then the term after Click's last word (before its
    # comma: no space there) and before the first word of "to".
    assert scored == [["Übernehmen Sie auf, um zu speichern.", "Klicken Sie auf Übernehmen, um zu speichern.",
                       "Klicken Sie auf, Übernehmen um zu speichern."]]
    # Without the model's scores, the alignment's choice stands.
    assert restore(prepared, translation, alignment).text == "Übernehmen Sie auf, um zu speichern."
    # A word whose link to the term is not that weak is the term's: replaced, nothing scored.
    scored.clear()
    links[0] = [(0, 0.6), (1, 0.4)]
    restored = restore(prepared, translation, weighted(prepared.model_text, translation, links, heaviest(links)), rescore)
    assert restored.text == "Übernehmen Sie auf, um zu speichern." and scored == []


def test_a_term_whose_words_are_only_pronouns_goes_where_the_model_scores_best():
    # The software model left Open out: "Klicken Sie zum Laden der Datei.", "Sie" hard-aligned to Click
    # (0.62) and Open (0.38). Replacing "Sie" gave "Klicken Öffnen zum Laden", then "Klicke Öffnen".
    prepared = prepare("Click Open to load the file.", glossary=[Entry("Open", "Öffnen")])
    translation = "Klicken Sie zum Laden der Datei."
    links = [[(0, 0.66), (1, 0.34)], [(0, 0.62), (1, 0.38)], [(2, 1.0)], [(3, 0.99)], [(4, 0.97)], [(5, 0.98)]]
    alignment = weighted(prepared.model_text, translation, links, [(0, 0), (0, 1), (1, 1), (2, 2), (3, 3), (4, 4), (5, 5)])
    scored: list[list[str]] = []
    rescore = preferring("Klicken Sie Öffnen zum Laden der Datei.", scored)

    restored = restore(prepared, translation, alignment, rescore)
    assert restored.text == "Klicken Sie Öffnen zum Laden der Datei."
    # The alignment's replacement, then the term after Click's last word (before the first of "to" too).
    assert scored[0] == ["Klicken Öffnen zum Laden der Datei.", "Klicken Sie Öffnen zum Laden der Datei."]
    assert [(r.enforced, r.satisfied) for r in restored.glossary] == [("inserted", True)]
    # Into another language the word is not read as German: replaced, as without the model's scores.
    assert restore(prepared, translation, alignment, rescore, articles=False).text == \
        "Klicken Öffnen zum Laden der Datei."
    assert restore(prepared, translation, alignment).text == "Klicken Öffnen zum Laden der Datei."


def test_a_replacement_keeps_the_part_of_a_compound_that_is_another_terms_translation():
    glossary = [Entry("alarm", "Alarm"), Entry("sensor", "Sensor")]
    prepared = prepare("Sensor Alarm", glossary=glossary)
    translation = "Sensor-Erinnerung"
    restored = restore(prepared, translation, weighted(prepared.model_text, translation, [[(1, 0.73), (0, 0.27)]], [(1, 0)]))
    assert restored.text == "Sensor-Alarm"
    assert all(r.satisfied for r in restored.glossary)
    # With one term, the model's scores choose between the whole word and each of its parts.
    prepared = prepare("Sensor Alarm", glossary=[Entry("alarm", "Alarm")])
    alignment = weighted(prepared.model_text, translation, [[(1, 0.73), (0, 0.27)]], [(1, 0)])
    assert restore(prepared, translation, alignment).text == "Alarm"
    scored: list[list[str]] = []

    def rescore(candidates: list[str]) -> list[float]:
        scored.append(candidates)
        return [len(c) * 1.0 for c in candidates]

    assert restore(prepared, translation, alignment, rescore).text == "Alarm-Erinnerung"
    assert scored == [["Alarm", "Alarm-Erinnerung", "Sensor-Alarm"]]


def test_a_tag_around_a_term_the_model_left_out_goes_around_the_term_where_it_is_inserted():
    prepared = prepare("Click <b>Apply</b> to save.", "html", glossary=[Entry("Apply", "Übernehmen")])
    translation = "Klicken Sie auf, um zu speichern."
    links = [[(0, 0.76), (1, 0.24)], [(0, 1.0)], [(0, 1.0)], [(2, 1.0)], [(2, 1.0)], [(3, 1.0)]]
    alignment = weighted(prepared.model_text, translation, links, heaviest(links) + [(1, 0)])

    def rescore(candidates: list[str]) -> list[float]:
        return [1.0 if c == "Klicken Sie auf Übernehmen, um zu speichern." else 0.0 for c in candidates]

    restored = restore(prepared, translation, alignment, rescore)
    assert restored.text == "Klicken Sie auf <b>Übernehmen</b>, um zu speichern."
    (tag,) = restored.placed
    assert (tag.text, tag.source_start, tag.source_end, tag.target_start, tag.target_end) == ("<b>", 6, 18, 16, 33)
    assert [(r.enforced, r.target_spans) for r in restored.glossary] == [("inserted", [(19, 29)])]
    # Replacing the word the alignment gave the term, the tag wraps the replacement.
    assert restore(prepared, translation, alignment).text == "<b>Übernehmen</b> Sie auf, um zu speichern."


def test_a_multilingual_glossary_keeps_a_dictionary_per_pair_merged_or_replaced(tmp_path):
    from service.glossary_store import Dictionary

    store = GlossaryStore(tmp_path / "glossaries.sqlite3")
    created = store.create_multilingual("pets", [Dictionary("en", "de", (Entry("dog", "Hund"), Entry("cat", "Katze"))),
                                                 Dictionary("de", "en", (Entry("Hund", "dog"),))])
    # merged (DeepL's PATCH): a term given anew (matched as matching does, ignoring case) takes its new target
    merged = store.update_multilingual(created.id, None, [Dictionary("en", "de", (Entry("Cat", "Mieze"), Entry("bird", "Vogel")))],
                                       merge=True)
    assert merged.dictionary("en", "de").entries == (Entry("dog", "Hund"), Entry("Cat", "Mieze"), Entry("bird", "Vogel"))
    # replaced (DeepL's PUT): only what is given; the other pair untouched
    replaced = store.update_multilingual(created.id, "animals", [Dictionary("en", "de", (Entry("cow", "Kuh"),))], merge=False)
    assert (replaced.name, replaced.dictionary("en", "de").entries, replaced.dictionary("de", "en").entries) == (
        "animals", (Entry("cow", "Kuh"),), (Entry("Hund", "dog"),))
    with pytest.raises(GlossaryInvalid, match="^dictionaries.1: the pair en-de is given twice$"):
        store.create_multilingual("x", [Dictionary("en", "de", (Entry("a", "b"),)), Dictionary("en", "de", (Entry("c", "d"),))])
    with pytest.raises(GlossaryInvalid, match="^dictionaries.0.entries: must not be empty$"):
        store.create_multilingual("x", [Dictionary("en", "de", ())])
    assert store.update_multilingual("none", None, [], merge=True) is None
    assert store.delete_dictionary(created.id, "de", "en") and not store.delete_dictionary(created.id, "de", "en")
    store.close()
    reopened = GlossaryStore(tmp_path / "glossaries.sqlite3")  # kept across restarts
    assert reopened.get_multilingual(created.id).dictionaries == (Dictionary("en", "de", (Entry("cow", "Kuh"),)),)
    assert [g.id for g in reopened.list_multilingual()] == [created.id] and reopened.list() == []
    assert reopened.delete_multilingual(created.id) and reopened.get_multilingual(created.id) is None
    assert reopened._connection().execute("SELECT COUNT(*) FROM dictionary_entries").fetchone() == (0,)
