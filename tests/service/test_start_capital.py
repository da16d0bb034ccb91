"""A sentence's translation starts with a capital where its source does (service/start_capital.py)."""
from __future__ import annotations

import pytest

from service.glossary import TermReport
from service.layout import openings, split
from service.protected_translation import prepare_texts
from service.protection.placeholders import find_protected
from service.protection.placement import Placed
from service.runtime.base import Translation
from service.served import Served
from service.start_capital import capitalised, opening_letter
from tests.service.hand_alignment import aligned


def served(source: str, target: str, placed=(), glossary=()) -> tuple[Served, object]:
    (prepared,) = prepare_texts([source], "text", ())
    alignment = aligned(source, target, [(0, 0)])
    return Served(Translation(target, -1.0, alignment), list(placed), None, [], list(glossary)), prepared


@pytest.mark.parametrize("source, target, expected", [
    ("SELinux-Benutzer kann nicht verifiziert werden\n", "cannot verify SELinux user\n",
     "Cannot verify SELinux user\n"),
    ("Socket-Eingabe: Fehler beim Lesen", "socket input: error reading", "Socket input: error reading"),
    ("„Datei“ speichern", "„file“ save", "„File“ save"),                  # quotes may come first
    ("Kindprozess beendet.", "child process ended.", "Child process ended."),
    # Left as the model wrote it:
    ("cannot open", "kann nicht öffnen", "kann nicht öffnen"),           # the source starts in lower case
    ("%s: Authentifizierung fehlgeschlagen", "%s: authentication failed",  # GNU's English: lower case
     "%s: authentication failed"),
    ("42 Dateien gelöscht", "42 files deleted", "42 files deleted"),     # no letter first
    ("Befehl ls fehlgeschlagen", "ls failed", "ls failed"),              # the source writes it so
    ("Lesefehler", "pam_start failed", "pam_start failed"),              # identifiers
    ("Lesefehler", "example.com failed", "example.com failed"),
    ("Lesefehler", "iPhone failed", "iPhone failed"),                    # not a lower-case word
    ("Lesefehler", "ßx failed", "ßx failed"),                            # its capital is two letters
])
def test_the_first_word_follows_the_sources_capital(source, target, expected):
    answer, prepared = served(source, target)
    out = capitalised(answer, prepared)
    assert out.translation.text == expected
    # The alignment's words are the text's words.
    assert [w.text for w in out.translation.alignment.target_words] == [
        expected[w.start:w.end] for w in answer.translation.alignment.target_words]
    assert out.translation.score == answer.translation.score


def test_what_the_service_placed_first_is_left_as_it_is_but_an_accelerator_marker():
    # A placeholder the model put first ("%s file not found") is no sentence start to capitalise.
    answer, prepared = served("Datei %s nicht gefunden", "%s file not found",
                              [Placed("printf", "%s", 6, 8, 0, 2, "aligned")])
    assert capitalised(answer, prepared) == answer
    # A glossary term placed first keeps the glossary's spelling.
    answer, prepared = served("Schlüssel exportieren", "gpg-key export",
                              glossary=[TermReport("Schlüssel", "gpg-key", [(0, 9)], [(0, 7)], "replaced")])
    assert capitalised(answer, prepared) == answer
    # An accelerator's marker may come first, in the source and in the translation.
    answer, prepared = served("&Einheit demaskieren", "&unmask unit", [Placed("accelerator", "&", 0, 1, 0, 1, "aligned")])
    assert capitalised(answer, prepared).translation.text == "&Unmask unit"


def test_only_a_segment_that_opens_a_line_or_follows_a_sentence_is_capitalised():
    # An option's description and a synopsis' metavariable are columns: GNU writes them in lower case.
    text = "Datei gespeichert. Neu starten?\n  -a, --add Benutzername   Benutzer hinzufügen\n- Eintrag\n"
    layout = split(text, find_protected(text))
    assert [(s.text, opens) for s, opens in zip(layout.segments, openings(layout))] == [
        ("Datei gespeichert.", True), ("Neu starten?", True), ("-a, --add Benutzername", True),
        ("Benutzer hinzufügen", False), ("Eintrag", False)]


@pytest.mark.parametrize("text, expected", [("Save", 0), ("  «Save»", 3), ("&Save", 1), ("%s: Save", None),
                                            ("42 files", None), ("...", None)])
def test_the_opening_letter_comes_after_space_quotes_brackets_or_an_accelerator_marker_alone(text, expected):
    assert opening_letter(text) == expected
