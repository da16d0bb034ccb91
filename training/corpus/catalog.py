"""Reading a GNU gettext .mo catalog with the standard library (struct), entry by entry.

The format (GNU gettext manual, "The Format of GNU MO Files"): a magic number that also gives the
byte order, a revision, the number of strings N, and the offsets of two tables of N (length,
offset) pairs, original strings and translations. An original holding NUL is a plural entry
(msgid NUL msgid_plural, msgstr[0] NUL msgstr[1] ...); one holding EOT (\\x04) carries its
msgctxt before it. The entry with the empty msgid is the header, whose Content-Type names the
charset of every other string.

A .mo file has no fuzzy entries: msgfmt leaves them out unless --use-fuzzy is given, and then
nothing marks them. So "fuzzy skipped" holds for the source catalogs only through msgfmt.
"""
from __future__ import annotations

import codecs
import re
import struct
from dataclasses import dataclass, field

MAGIC_LITTLE = 0x950412DE
MAGIC_BIG = 0xDE120495
_CHARSET = re.compile(r"charset=\s*([A-Za-z0-9_.:-]+)", re.IGNORECASE)


class CatalogError(ValueError):
    """The bytes are not a readable .mo catalog."""


@dataclass
class Catalog:
    """The singular (msgid, msgstr) entries of one catalog, msgctxt removed, and what was skipped."""

    charset: str
    entries: list[tuple[str, str]] = field(default_factory=list)
    plural: int = 0          # entries with msgid_plural: skipped
    empty: int = 0           # an empty msgstr: skipped (msgfmt keeps none, but a hand-made .mo may)
    undecodable: int = 0     # bytes that are not text in the header's charset: skipped
    with_context: int = 0    # entries whose msgctxt was removed (they are kept)


def _charset(header: bytes) -> str:
    match = _CHARSET.search(header.decode("ascii", "replace"))
    name = match.group(1) if match else "utf-8"
    if name.upper() == "CHARSET":  # the template's placeholder, left in by some projects
        name = "utf-8"
    try:
        return codecs.lookup(name).name
    except LookupError:
        return "utf-8"


def read_catalog(data: bytes) -> Catalog:
    """Every entry of a .mo catalog; CatalogError when the tables point outside the file."""
    if len(data) < 20:
        raise CatalogError(f"{len(data)} bytes: too short for a .mo header")
    (magic,) = struct.unpack("<I", data[:4])
    if magic == MAGIC_LITTLE:
        order = "<"
    elif magic == MAGIC_BIG:
        order = ">"
    else:
        raise CatalogError(f"magic number {magic:#010x} is not a .mo catalog's")
    _revision, count, originals, translations = struct.unpack(order + "4I", data[4:20])

    def string(table: int, index: int) -> bytes:
        at = table + 8 * index
        if at + 8 > len(data):
            raise CatalogError(f"string table entry {index} lies outside the file")
        length, offset = struct.unpack(order + "2I", data[at:at + 8])
        if offset + length > len(data):
            raise CatalogError(f"string {index} lies outside the file")
        return data[offset:offset + length]

    raw = [(string(originals, i), string(translations, i)) for i in range(count)]
    header = next((msgstr for msgid, msgstr in raw if msgid == b""), b"")
    catalog = Catalog(_charset(header))
    for msgid, msgstr in raw:
        if msgid == b"":
            continue
        if b"\x00" in msgid:
            catalog.plural += 1
            continue
        if not msgstr:
            catalog.empty += 1
            continue
        if b"\x04" in msgid:
            msgid = msgid.split(b"\x04", 1)[1]
            catalog.with_context += 1
        try:
            catalog.entries.append((msgid.decode(catalog.charset), msgstr.decode(catalog.charset)))
        except UnicodeDecodeError:
            catalog.undecodable += 1
    return catalog


def write_catalog(entries: list[tuple[str, str]], charset: str = "UTF-8") -> bytes:
    """A little-endian .mo catalog of `entries` (msgid, msgstr) with a header naming `charset`;
    a msgid may carry "ctxt\\x04" before it, or "singular\\x00plural" (with msgstr "a\\x00b").
    msgfmt's layout: originals sorted, both tables before the strings. Used by the tests."""
    header = f"Content-Type: text/plain; charset={charset}\n".encode("ascii")
    encoded = sorted([(b"", header)] + [(k.encode(charset), v.encode(charset)) for k, v in entries])
    count = len(encoded)
    start = 20 + 16 * count
    ids, strs = b"", b""
    id_table, str_table = [], []
    for msgid, msgstr in encoded:
        id_table.append((len(msgid), len(ids)))
        ids += msgid + b"\x00"
        str_table.append((len(msgstr), len(strs)))
        strs += msgstr + b"\x00"
    out = struct.pack("<5I", MAGIC_LITTLE, 0, count, 20, 20 + 8 * count)
    out += b"".join(struct.pack("<2I", n, start + o) for n, o in id_table)
    out += b"".join(struct.pack("<2I", n, start + len(ids) + o) for n, o in str_table)
    return out + ids + strs
