"""A text read into its plain text and its tags: what service/protection/markup.py reads from html
and xml, and service/protection/markdown.py from Markdown, and placement.py puts back."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Tag:
    """One element of the markup. A paired tag wraps plain[start:end]; a standalone one (void,
    self-closing or a comment) stands at `start` (== end). `parent`: index of the enclosing tag."""

    name: str
    opening: str
    closing: str | None
    start: int
    end: int
    source_start: int  # where `opening` stands in the original text
    source_end: int    # where the element ends there (after its closing tag)
    parent: int | None = None
    children: list[int] = field(default_factory=list)
    verbatim: str | None = None  # an element passed through untouched: all of it, as written

    @property
    def standalone(self) -> bool:
        return self.closing is None

    def plain_inside(self, markup: Markup) -> bool:
        """Whether it wraps visible text of `markup` (its own)."""
        return bool(markup.plain[self.start:self.end].strip())


@dataclass(frozen=True)
class Markup:
    plain: str
    tags: list[Tag]
    # origin[i] / origin_end[i]: where plain[i] starts / ends in the original text (an entity
    # is several characters there); origin[len(plain)]: the text's end.
    origin: list[int]
    origin_end: list[int]


def plain_markup(text: str) -> Markup:
    """`text` read as holding no tags: its plain text is itself."""
    return Markup(text, [], list(range(len(text) + 1)), list(range(1, len(text) + 1)))


def nested(tags: list[Tag]) -> list[Tag]:
    """`tags`, spans that nest, in the order they start (an enclosing one first), each with its
    enclosing tag as `parent` and its enclosed ones as `children` (a standalone tag encloses none)."""
    tags = sorted(tags, key=lambda tag: (tag.source_start, -tag.source_end))
    enclosing: list[int] = []  # the tags open around the one being read, innermost last
    for index, tag in enumerate(tags):
        while enclosing and tags[enclosing[-1]].source_end < tag.source_end:
            enclosing.pop()
        if enclosing:
            tag.parent = enclosing[-1]
            tags[enclosing[-1]].children.append(index)
        if not tag.standalone:
            enclosing.append(index)
    return tags
