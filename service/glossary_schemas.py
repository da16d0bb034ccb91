"""HTTP bodies of the glossary API (/glossaries) and of the `glossary` field and report of
/translate; the rules they follow are service/glossary.py's."""
from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from service.glossary import MAX_ENTRIES, MAX_TERM_CHARS, GlossaryEntry, TermReport
from service.glossary_store import StoredGlossary

Term = Annotated[str, Field(min_length=1, max_length=MAX_TERM_CHARS)]
GLOSSARY_RULES = (
    "Source terms match as whole words, ignoring case, in the form written (list plurals apart); the "
    "target term is required in the output, its first letter in either case, German endings (e, en, er, es, n, "
    "s, ern, em) allowed; into German, a noun term (a capital, 4+ letters) also as the head or first part of a "
    "closed compound the alignment gives the term and another source word (Einstellungen, Netzwerk in "
    "Netzwerkeinstellungen for network settings). Where the model's own translation of a term does not satisfy it, the target words "
    "aligned to the term are replaced by it (or, with none aligned or where those words translate another source "
    "word, it is inserted where the alignment, or the model's score, puts the term)."
)


class EntryIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    source: Term = Field(description="The source term.")
    target: Term = Field(description="Its required translation.")


class GlossaryCreate(BaseModel):
    """``{"name": "...", "source": "en", "target": "de", "entries": [{"source": "dog", "target": "Hund"}]}``"""

    model_config = ConfigDict(
        extra="forbid", strict=True,
        json_schema_extra={"examples": [{"name": "pets", "source": "en", "target": "de",
                                         "entries": [{"source": "dog", "target": "Hund"}]}]},
    )

    name: Annotated[str, Field(min_length=1, max_length=200)]
    source: Annotated[str, Field(min_length=1, max_length=16, pattern=r"^[A-Za-z0-9_-]+$")]
    target: Annotated[str, Field(min_length=1, max_length=16, pattern=r"^[A-Za-z0-9_-]+$")]
    entries: list[EntryIn] = Field(max_length=MAX_ENTRIES, description=GLOSSARY_RULES)

    def glossary_entries(self) -> list[GlossaryEntry]:
        return [GlossaryEntry(e.source, e.target) for e in self.entries]


class EntryOut(BaseModel):
    source: str
    target: str


class GlossaryOut(BaseModel):
    id: str
    name: str
    source: str
    target: str
    created: str = Field(description="When it was created, ISO 8601 in UTC.")
    entries: list[EntryOut]

    @classmethod
    def of(cls, glossary: StoredGlossary) -> GlossaryOut:
        return cls(id=glossary.id, name=glossary.name, source=glossary.source, target=glossary.target,
                   created=glossary.created, entries=[EntryOut(source=e.source, target=e.target) for e in glossary.entries])


class GlossaryList(BaseModel):
    glossaries: list[GlossaryOut]


class TermSpanOut(BaseModel):
    start: int
    end: int


class TermReportOut(BaseModel):
    source: str = Field(description="The glossary's source term.")
    target: str = Field(description="Its required translation.")
    satisfied: bool = Field(description="The output holds the required translation as often as the source holds the term.")
    source_spans: list[TermSpanOut] = Field(description="Where the term stands in the text sent.")
    target_spans: list[TermSpanOut] = Field(description="Where the required translation stands in the output.")
    enforced: str = Field(description='"kept" (the model\'s own translation satisfied it), "replaced" or "inserted".')
    violations: list[str] = Field(description='What is wrong: "missing", or "N of M occurrences".')

    @classmethod
    def of(cls, report: TermReport) -> TermReportOut:
        return cls(source=report.source, target=report.target, satisfied=report.satisfied,
                   source_spans=[TermSpanOut(start=a, end=b) for a, b in report.source_spans],
                   target_spans=[TermSpanOut(start=a, end=b) for a, b in report.target_spans],
                   enforced=report.enforced, violations=list(report.violations))
