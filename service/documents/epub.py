"""EPUB books (.epub): a zip whose package document (META-INF/container.xml names it) lists the book's
XHTML content documents. Each of them (its chapters, and EPUB 3's navigation document) is translated
as an HTML page is (`HtmlPage`: whole where it fits, else its largest elements, its <html> language
set to the target); the package's titles and the EPUB 2 table of contents' labels (toc.ncx) are
translated too, and the package's language is the target's. Every other entry (images, styles, fonts,
the mimetype first and stored) stays byte for byte; a document whose translation would not read as
XML stays as it was, and is named."""
from __future__ import annotations

import io
import posixpath
import re
import zipfile
from urllib.parse import unquote
from xml.etree import ElementTree

from service.documents.files import UNREADABLE_ZIP, Failed, Spans, decoded, rewritten
from service.documents.prose import HtmlPage

_CONTENT_TYPES = frozenset(("application/xhtml+xml", "text/html"))
_NCX_TYPE = "application/x-dtbncx+xml"
_TITLE = re.compile(r"<dc:title\b[^>]*>(.*?)</dc:title>", re.DOTALL)
_LANGUAGE = re.compile(r"<dc:language\b[^>]*>\s*([^<\s]*)")
_NCX_LABEL = re.compile(r"<(?:\w+:)?text\b[^>/]*>([^<]*?)</(?:\w+:)?text>")


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


class _Labels(Spans):
    """An XML part some of whose elements' text is translated (the package's titles, toc.ncx's labels),
    read as it is written (its entities the service reads as html's) and written back so; the
    package's first language set to the target."""

    def __init__(self, name: str, data: bytes, labels: re.Pattern[str], language: re.Pattern[str] | None) -> None:
        super().__init__()
        self.text, self.encoding = decoded(name, data)
        self.spans = [(m.start(1), m.end(1), m.group(1)) for m in labels.finditer(self.text) if m.group(1).strip()]
        found = language.search(self.text) if language is not None else None
        self._language = (found.start(1), found.end(1)) if found else None
        self.source_language = found.group(1) if found else ""

    def _edited(self, target: str, written: dict[int, str]) -> list[tuple[int, int, str]]:
        return [(*self._language, target)] if self._language else []


class Epub:
    """An EPUB 2 or 3 book, translated as the module's docstring says."""

    fmt = "html"
    unit = "parts"
    marks = ""
    target_language = ""

    def __init__(self, name: str, data: bytes, kind: str, fuzzy: bool) -> None:
        try:
            self.archive = zipfile.ZipFile(io.BytesIO(data))
            container = ElementTree.fromstring(self.archive.read("META-INF/container.xml"))
            package = next((element.get("full-path", "") for element in container.iter()
                            if _local(element.tag) == "rootfile"), "")
            manifest = ElementTree.fromstring(self.archive.read(package))
        except (*UNREADABLE_ZIP, ElementTree.ParseError) as error:
            raise Failed(f"cannot read {name}: not an EPUB book ({error})") from None
        entries = {info.filename for info in self.archive.infolist()}
        folder = posixpath.dirname(package)
        items = {item.get("id"): (posixpath.normpath(posixpath.join(folder, unquote(item.get("href", "")))),
                                  item.get("media-type", ""))
                 for item in manifest.iter() if _local(item.tag) == "item" and item.get("href")}
        # reading order first (the spine), then what else is content (the navigation document)
        spine = [itemref.get("idref") for itemref in manifest.iter() if _local(itemref.tag) == "itemref"]
        ordered = [items[i] for i in spine if i in items] + list(items.values())
        self.documents: dict[str, HtmlPage | _Labels] = {}
        try:
            self.documents[package] = _Labels(package, self.archive.read(package), _TITLE, _LANGUAGE)
            for path, media_type in dict(ordered).items():
                if path not in entries or path in self.documents:
                    continue
                if media_type in _CONTENT_TYPES:
                    self.documents[path] = HtmlPage(path, self.archive.read(path), "html", fuzzy)
                elif media_type == _NCX_TYPE:
                    self.documents[path] = _Labels(path, self.archive.read(path), _NCX_LABEL, None)
        except UNREADABLE_ZIP as error:
            raise Failed(f"cannot read {name}: {error}") from None
        except Failed as error:
            raise Failed(f"cannot read {name}: {error}") from None
        if len(self.documents) == 1:
            raise Failed(f"cannot read {name}: its package {package} lists no XHTML content document")
        languages = [document.source_language for document in self.documents.values() if document.source_language]
        self.source_language = languages[0] if languages else ""
        self.texts = [text for document in self.documents.values() for text in document.texts]
        self.unwritable: list[str] = []

    def finer(self, text: str) -> list[str]:
        """The parts that replace a part refused, in whichever content documents it stands."""
        return [part for document in self.documents.values() if isinstance(document, HtmlPage)
                for part in document.finer(text)]

    def written(self, translated: dict[str, str], mark: bool, target: str) -> tuple[bytes, int]:
        written, counts = {}, {}
        for path, document in self.documents.items():
            written[path], counts[path] = document.written(translated, mark, target)
        data, unreadable = rewritten(self.archive, written)
        self.unwritable = [f"{path}: its translation would not read as XML, left as it was" for path in unreadable
                           if counts[path]]
        return data, sum(count for path, count in counts.items() if path not in unreadable)
