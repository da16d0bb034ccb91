"""The bilingual files CAT tools exchange: XLIFF (service/documents/xliff.py) and Qt Linguist's .ts
(service/documents/linguist.py), their untranslated segments given a target marked as their tools
mark one to review."""
from __future__ import annotations

from service.documents import linguist, xliff
from service.documents.files import Failed


class Bilingual:
    def __init__(self, name: str, data: bytes, kind: str, fuzzy: bool) -> None:
        self.reader = linguist if kind == "linguist" else xliff
        try:
            self.document = self.reader.read(data)
        except xliff.FileInvalid as error:
            raise Failed(f"cannot read {name}: {error}") from None
        self.unit = "messages" if kind == "linguist" else "segments"
        # XLIFF's sources are markup (inline codes); a .ts file's are plain text written as XML
        self.fmt = "text" if kind == "linguist" else "xml"
        self.source_language = self.document.source_language
        self.target_language = self.document.target_language
        self.skipped = getattr(self.document, "skipped", 0)
        self.texts = [segment.source for segment in self.document.segments]
        self.marks = "for review"

    def written(self, translated: dict[str, str], mark: bool, target: str) -> tuple[bytes, int]:
        try:
            text, done = self.reader.written(self.document, translated, mark)
        except xliff.FileInvalid as error:
            raise Failed(str(error)) from None
        # a character the file's encoding lacks is written as XML writes it, a character reference
        return text.encode(self.document.encoding, errors="xmlcharrefreplace"), done
