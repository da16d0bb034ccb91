"""Glossaries: source terms whose translation is prescribed, enforced through the word alignment and
reported per hypothesis.

Matching rules (the same for per-request and stored glossaries):
- A source term matches where it stands as whole words, ignoring case ("Dog" at the start of a
  sentence is the term "dog"), in the exact form written: no stemming, so a glossary that wants
  "dogs" too lists it. Longer terms win over the terms inside them; matches do not overlap.
- The required target term is satisfied by a whole-word occurrence in the translation, its first
  letter in either case (sentence-initial capitals) and the rest as written, optionally followed by
  one of the German inflection endings in `INFLECTION_ENDINGS` ("Hund" is satisfied by "Hunde",
  "Hundes", "Hunden"): a noun the model declined is kept, not forced back to its lemma. A German
  verb term in the infinitive is satisfied by its regular forms and participle (`verb_forms`:
  "öffnen" by "geöffnet", "anzeigen" by "angezeigt").
- German targets: a noun term (a capital, four letters or more, one word) is also satisfied as a
  part of a closed compound that the alignment gives the term and another source word: its head
  ("Einstellungen" in "Netzwerkeinstellungen" for "network settings", three letters or more before
  it) or its first part ("Netzwerk" there, then a linking s/n/en/es/e/er and four letters or more;
  `occurrences` with `compounds`, placement.py's `_compound_parts`). Otherwise the term replaced
  the whole compound ("Netzwerkeinstellungen" -> "Einstellungen", the network lost). A compound for
  the term alone ("Chinatown" for "china") is replaced.

Enforcement (service/protection/placement.py), by one of two methods (`GlossaryMethod`):
- "replace" (the default: it measures best, results/glossary.md): the model translates the text
  as it is; for each matched source term, the target words aligned to it (their largest cluster,
  as for a tag; with no hard link, the words that attend to it most; a word aligned to two terms
  goes to one of them) are its translation. Where neither they nor any other words of the
  translation satisfy the required term (a word that translates another source word does not:
  with Delete -> Entfernen, the "entfernen" of "Drücken Sie das Löschen, um die Datei zu
  entfernen." is remove's; placement.py, `_own_occurrences`), they are replaced by it (their punctuation kept; a
  capital first letter where the replaced words had one). Where no target word is aligned to the
  term and the translation holds the term nowhere, it is inserted where the alignment puts the
  term's position (capitalised at the start of a sentence).
  A term replaces no more target words than it has, and never another term's required
  translation: in a hyphenated compound only a part that is not one ("Sensor-Erinnerung" ->
  "Sensor-Alarm"). Where the model's scores are at hand (German targets, the torch backend),
  they choose: between the compound and its parts, and, where the words the alignment gives the
  term translate another source word (each links to the term under half its heaviest link:
  "Klicken" 0.24 to Apply, 0.76 to Click) or are only German pronouns and determiners ("Sie"),
  between replacing them and inserting the term beside the translations of its neighbours
  ("Klicken Sie auf Übernehmen, um", not "Übernehmen Sie auf, um"; placement.py, `_best_place`);
  a tag around exactly that term goes around it where it is inserted ("Klicken Sie auf
  <b>Übernehmen</b>, um"). For German they also choose between replacing a closed compound that
  translates the term and another source word and replacing only its part, hyphenated ("Den
  Entpacken-Dialog öffnen." for "Den Extraktionsdialog öffnen.", `_compound_choices`); the case of
  the word after a term inserted at a sentence's start ("Öffnen aus dem Dateimenü auswählen.",
  `_recased`); and the determiner and up to two adjectives right before a replaced noun, given the
  source with its terms translated (placement.py, `_agreeing_articles`; "Den ausgewählten Ordner"
  -> "Das ausgewählte Verzeichnis").
  A plain text with placeholders goes to the model as written first, as without a glossary
  (service/protected_translation.py, `serve_as_written`), and the glossary is enforced on that
  translation the same way; it is kept only if its placeholders are still exact afterwards.
- "protect": the source term is taken out before translation like a placeholder and the required
  term put in its place by the alignment (how `do_not_translate` terms are kept).
The report (`TermReport`) is read off the final output: each term, where it stood in the source,
where its required translation stands in the output for it (not where it translates another
source word), and what is wrong (`violations`).
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

GlossaryMethod = Literal["replace", "protect"]
# Endings a required German term may carry and still count as itself (declension, plural).
INFLECTION_ENDINGS = ("", "e", "en", "er", "es", "n", "s", "ern", "em")
# What a request or stored glossary may hold.
MAX_ENTRIES = 256
MAX_TERM_CHARS = 100


@dataclass(frozen=True)
class GlossaryEntry:
    source: str
    target: str


@dataclass(frozen=True)
class TermMatch:
    entry: int   # index into the glossary
    start: int   # character offsets into the text searched
    end: int


def _source_pattern(term: str) -> re.Pattern:
    words = [re.escape(w) for w in term.split()]
    return re.compile(r"(?<!\w)" + r"\s+".join(words) + r"(?!\w)", re.IGNORECASE)


def find_terms(text: str, glossary: Sequence[GlossaryEntry]) -> list[TermMatch]:
    """Every glossary source term in `text`, in text order, none overlapping another."""
    candidates = []
    for index in sorted(range(len(glossary)), key=lambda i: len(glossary[i].source), reverse=True):
        candidates += [TermMatch(index, m.start(), m.end()) for m in _source_pattern(glossary[index].source).finditer(text)]
    taken: list[TermMatch] = []
    for match in candidates:
        if not any(match.start < t.end and t.start < match.end for t in taken):
            taken.append(match)
    return sorted(taken, key=lambda t: t.start)


def _target_pattern(term: str) -> re.Pattern:
    endings = "|".join(e for e in INFLECTION_ENDINGS if e)
    forms = [_either_case(term) + f"(?:{endings})?"] + [_either_case(form) for form in verb_forms(term)]
    return re.compile(r"(?<!\w)(?:" + "|".join(forms) + r")(?!\w)")


def _either_case(form: str) -> str:
    """`form` as a pattern, its first letter in either case."""
    return f"[{re.escape(form[0].lower())}{re.escape(form[0].upper())}]" + re.escape(form[1:])


# German verb prefixes: inseparable ones take no "ge" in the participle ("entfernt"); separable ones
# take it, and "zu", after them ("angezeigt", "anzuzeigen"). Longest first.
_INSEPARABLE = ("miss", "emp", "ent", "ver", "zer", "be", "er", "ge")
_SEPARABLE = ("zusammen", "zurück", "hinzu", "fest", "nach", "auf", "aus", "bei", "ein", "her", "hin", "los", "mit",
              "vor", "weg", "ab", "an", "zu")
_ADJECTIVE = ("", "e", "en", "em", "er", "es")


def verb_forms(term: str) -> list[str]:
    """The forms other than itself by which a German infinitive term (one lower-case word ending in
    -en, -ern or -eln) is also satisfied: its regular present forms ("öffnet", "öffne"), its regular
    past participle, also declined ("geöffnet", "gespeicherte", "entfernt", "installiert",
    "angezeigt") and, for a separable verb, its infinitive with "zu" ("anzuzeigen"): a model that
    wrote "Die Datei konnte nicht geöffnet werden" has used open -> öffnen, and replacing the
    participle by the infinitive broke the sentence. Irregular participles ("verschoben") are not
    known. Empty for any other term."""
    if not re.fullmatch(r"[a-zäöüß]{4,}(?:en|[lr]n)", term):
        return []
    stem = term[:-2] if term.endswith("en") else term[:-1]
    prefix = next((p for p in _SEPARABLE if term.startswith(p) and len(term) - len(p) >= 5), "")
    core = stem[len(prefix):]
    forms = [stem + e for e in ("e", "st", "t", "et", "end")]
    # "-et" after a stem a plain "t" cannot follow ("geöffnet", "beendet"); which one is not known.
    if core.endswith("ier"):
        participles = [stem + "t"]
    elif core.startswith(_INSEPARABLE):
        participles = [stem + "t", stem + "et"]
    else:
        participles = [prefix + "ge" + core + e for e in ("t", "et")]
    forms += [p + e for p in participles for e in _ADJECTIVE]
    if prefix:
        forms.append(prefix + "zu" + term[len(prefix):])
    return forms


def occurrences(text: str, target: str, compounds: bool = False) -> list[tuple[int, int]]:
    """Where `text` satisfies the required target term as a word (the rules above); with `compounds`,
    also where a closed compound holds it as its head or first part (the part's span), which counts
    only in a word the alignment gives the term and another source word (placement.py)."""
    spans = [(m.start(), m.end()) for m in _target_pattern(target).finditer(text)]
    if compounds and _COMPOUND_TERM.fullmatch(target):
        for pattern in _compound_patterns(target):
            spans += [m.span(1) for m in pattern.finditer(text)]
    return sorted(set(spans))


# A term that may stand inside a German closed compound: a noun (its capital), one word, 4+ letters.
_COMPOUND_TERM = re.compile(r"[^\W\d_a-zäöüß][^\W\d_]{3,}")
# What may join the parts of a German closed compound ("Extraktion|s|dialog").
LINKING = ("s", "n", "en", "es", "e", "er")


def _compound_patterns(term: str) -> tuple[re.Pattern, re.Pattern]:
    """(head, first part): the term ending a closed compound after 3+ letters, its first letter
    lower case ("netzwerk|einstellungen"), German endings allowed; the term starting one, then a
    linking element and 4+ lower-case letters ("Netzwerk|einstellungen")."""
    endings = "|".join(e for e in INFLECTION_ENDINGS if e)
    head = re.compile(r"(?<!\w)[^\W\d_]{3,}(" + re.escape(term[0].lower() + term[1:]) + f"(?:{endings})?)" + r"(?!\w)")
    linking = "|".join(LINKING)
    first = re.compile(r"(?<!\w)(" + re.escape(term) + f")(?:{linking})?" + r"[a-zäöüß]{4,}(?!\w)")
    return head, first


# German determiners, by family: a replaced noun may have another gender than the model's word
# ("Der Ordner" -> "Der Verzeichnis"), so the article before it is chosen again among its family's
# forms by the model's score (service/protection/placement.py, `_agreeing_articles`).
_DETERMINERS = tuple(tuple(stem + ending for ending in endings) for stem, endings in (
    ("d", ("er", "ie", "as", "en", "em", "es")),
    *((stem, ("", "e", "en", "em", "er", "es")) for stem in ("ein", "kein", "mein", "dein", "sein", "ihr", "unser")),
    *((stem, ("er", "e", "es", "en", "em")) for stem in ("dies", "jed", "welch")),
))
_DETERMINER_FAMILY = {form: family for family in _DETERMINERS for form in family}
# A preposition fused with the article ("im" = "in dem") stands for a masculine or neuter noun; a
# feminine one takes the preposition and its article ("im Park" -> "in der Grünanlage").
_CONTRACTIONS = {"im": ("in der", "in die", "in den"), "ins": ("in die", "in den"), "am": ("an der", "an die"),
                 "ans": ("an die", "an den"), "zum": ("zur",), "zur": ("zum",), "vom": ("von der",),
                 "beim": ("bei der",)}
_DETERMINER_FAMILY.update({form: (form, *others) for form, others in _CONTRACTIONS.items()})


# German words that are never nouns (determiners, prepositions, conjunctions, particles, auxiliaries and
# modals, some adverbs): their capital is only ever a sentence's start (service/layout.py, placement.py).
FUNCTION_WORDS = frozenset(
    "der die das den dem des ein eine einen einem einer eines kein keine keinen keinem keiner dieser diese "
    "dieses diesen diesem jeder jede jedes jeden jedem alle zum zur zu mit von vom für auf aus bei beim nach "
    "über unter vor durch um ohne gegen an am im in ins bis seit während wegen und oder aber wenn dass ob als "
    "wie weil damit nicht nur auch noch bereits schon jetzt hier dort dann bitte ist sind war waren wird "
    "werden wurde wurden kann können konnte konnten muss müssen soll sollen hat haben hatte darf dürfen".split())


# German personal and reflexive pronouns: with the determiners, words that stand for grammar, never
# for a glossary term (`grammatical`).
_PRONOUNS = frozenset("ich du er sie es wir ihr man sich mich dich uns euch ihm ihn ihnen".split())


def grammatical(word: str) -> bool:
    """Whether the German `word` (its punctuation aside) is a determiner or a pronoun."""
    word = word.strip(".,;:!?…\"'()[]»«„“”")
    return word.lower() in _PRONOUNS or bool(determiner_forms(word))


def determiner_forms(word: str) -> tuple[str, ...]:
    """The forms of the German determiner `word` other than itself, with its capital where it has
    one ("Der" -> "Die", "Das", "Den", "Dem", "Des"; a contraction: the preposition with the other
    genders' articles, "im" -> "in der", "in die", "in den"); empty for any other word."""
    family = _DETERMINER_FAMILY.get(word.lower(), ())
    capital = word[:1].isupper()
    return tuple(f[:1].upper() + f[1:] if capital else f for f in family if f != word.lower())


@dataclass(frozen=True)
class Edit:
    """One change to a translation: replace translation[start:end] (empty: insert at start) by `text`."""

    entry: int
    start: int
    end: int
    text: str
    # "replaced" | "inserted" | "agreed" (a determiner or adjective before a replaced noun, chosen again)
    # | "recased" (the first letter of the word after a term inserted at a sentence's start, lower-cased)
    how: str
    lead: str = ""   # an insertion's spaces before and after it, where it would touch a word
    trail: str = ""
    term: tuple[int, int] | None = None  # where the source term it enforces stands (model text offsets)


@dataclass(frozen=True)
class TermReport:
    source: str
    target: str
    source_spans: list[tuple[int, int]]   # in the text sent
    target_spans: list[tuple[int, int]]   # occurrences satisfying it in the output
    enforced: str                          # "kept" (the model's own), "replaced" or "inserted"
    violations: list[str] = field(default_factory=list)

    @property
    def satisfied(self) -> bool:
        return not self.violations


def report(glossary: Sequence[GlossaryEntry], found: Sequence[tuple[int, tuple[int, int]]], output: str,
           enforced: dict[int, str], compound_parts: dict[int, list[tuple[int, int]]] | None = None,
           owned_elsewhere: dict[int, list[tuple[int, int]]] | None = None) -> list[TermReport]:
    """One report per glossary entry found in the source, in the order first found. `found`: per
    match, its entry and its offsets in the text sent; `enforced`: entry -> how it was enforced,
    for those that were; `compound_parts`: entry -> where a compound in the output holds its term
    and `owned_elsewhere`: entry -> where an occurrence translates another source word, not the
    term (both the alignment's reading, placement.py)."""
    reports = []
    for entry in dict.fromkeys(e for e, _ in found):
        term = glossary[entry]
        spans = [span for e, span in found if e == entry]
        present = sorted({*occurrences(output, term.target), *(compound_parts or {}).get(entry, [])}
                         - set((owned_elsewhere or {}).get(entry, [])))
        reports.append(TermReport(term.source, term.target, spans, present, enforced.get(entry, "kept"),
                                  violations(present, spans)))
    return reports


def violations(present: Sequence[tuple[int, int]], spans: Sequence[tuple[int, int]]) -> list[str]:
    """What a term found at `spans` in the source lacks in an output that satisfies it at `present`."""
    if not present:
        return ["missing"]
    if len(present) < len(spans):
        return [f"{len(present)} of {len(spans)} occurrences"]
    return []


def merged(group: list[TermReport]) -> TermReport:
    """One glossary entry's reports from several segments, as one text's (`report`): the
    occurrences its segments found, which only the segments' alignments can tell from words that
    translate another source word or hold the term inside a compound (placement.py)."""
    first = group[0]
    # An ICU message's sentences share the text around its argument: each of their occurrences is
    # one to satisfy, reported once at its place in the text sent.
    occurrences = [span for report in group for span in report.source_spans]
    present = sorted({span for report in group for span in report.target_spans})
    ways = {report.enforced for report in group}
    enforced = next((way for way in ("inserted", "replaced") if way in ways), "kept")
    return TermReport(first.source, first.target, sorted(set(occurrences)), present, enforced,
                      violations(present, occurrences))
