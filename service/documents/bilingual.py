"""The bilingual files CAT tools exchange: XLIFF (service/documents/xliff.py) and Qt Linguist's .ts
(service/documents/linguist.py), their untranslated segments given a target marked as their tools
mark one to review."""
from __future__ import annotations

from service.documents.files import Failed
from service.documents.linguist import read as read_linguist, written as written_linguist
from service.documents.xliff import FileInvalid, read as read_xliff, written as written_xliff


class Bilingual:
    def __init__(self, name: str, data: bytes, kind: str, fuzzy: bool) -> None:
        read, self._written = (read_linguist, written_linguist) if kind == "linguist" else (read_xliff, written_xliff)
        try:
            self.document = read(data)
        except FileInvalid as error:
            raise Failed(f"cannot read {name}: {error}") from None
        self.unit = "messages" if kind == "linguist" else "segments"
        # XLIFF's sources are markup (inline codes); a .ts file's are plain text written as XML
        self.fmt = "text" if kind == "linguist" else "xml"
        self.source_language = self.document.source_language
        self.target_language = self.document.target_language
        self.skipped = getattr(self.document, "skipped", 0)
        self.skipped_as = "segments segmented again (seg-source) with no <mrk> in a target"
        self.texts = [segment.source for segment in self.document.segments]
        self.marks = "for review"

    def written(self, translated: dict[str, str], mark: bool, target: str) -> tuple[bytes, int]:
        try:
            text, done = self._written(self.document, translated, mark, target)
        except FileInvalid as error:
            raise Failed(str(error)) from None
        # a character the file's encoding lacks is written as XML writes it, a character reference
        return text.encode(self.document.encoding, errors="xmlcharrefreplace"), done
