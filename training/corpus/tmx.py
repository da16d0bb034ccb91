"""Writing TMX 1.4, the exchange format of translation memories, which the service reads
(service/memory.py): what `python -m training.corpus names --tmx` writes CLDR's names as."""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr


def write_tmx(path: Path, units: Iterable[tuple[str, dict[str, str]]], source_language: str, note: str = "",
              unit_sources: Mapping[str, str] | None = None) -> int:
    """A TMX 1.4 file of `units` ((id, language code -> text), in the order given), the same bytes for
    the same units; how many units were written. `unit_sources`: unit id -> the one language the unit
    serves from (its `srclang`; service/memory.py), for the units that serve from one only."""
    lines = ['<?xml version="1.0" encoding="UTF-8"?>', '<tmx version="1.4">',
             f'  <header creationtool="phrasal" creationtoolversion="1" segtype="phrase" o-tmf="phrasal" '
             f'adminlang="en" srclang={quoteattr(source_language)} datatype="plaintext">']
    if note:
        lines.append(f"    <note>{escape(note)}</note>")
    lines += ["  </header>", "  <body>"]
    count = 0
    for unit_id, variants in units:
        only_from = (unit_sources or {}).get(unit_id)
        lines.append(f"    <tu tuid={quoteattr(unit_id)}" + (f" srclang={quoteattr(only_from)}>" if only_from else ">"))
        lines += [f'      <tuv xml:lang={quoteattr(code)}><seg>{escape(text)}</seg></tuv>' for code, text in variants.items()]
        lines.append("    </tu>")
        count += 1
    lines += ["  </body>", "</tmx>", ""]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines), encoding="utf-8")
    return count
