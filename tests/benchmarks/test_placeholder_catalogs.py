"""benchmarks/placeholder_catalogs.py's reference reading of placeholders, by hand: what a message
must keep for the benchmark to count it kept."""
from __future__ import annotations

import pytest
from benchmarks.placeholder_catalogs import REFERENCE, kept


@pytest.mark.parametrize("text, found", [
    # Qt: a % and digits, not followed by a conversion letter, `$` or a precision.
    ("%1 was invited into this room", ["%1"]),
    ("Copied %1 of %L2 files to %10.", ["%1", "%L2", "%10"]),
    # printf in its order: argument number, flags (space included), width, precision, length.
    ("%1$s and %2$*3$d, %-10.3lf, %10d, %%", ["%1$s", "%2$*3$d", "%-10.3lf", "%10d", "%%"]),
    ("100% sure", ["% s"]),  # the space flag is read: broader than the service
    ("route {-V|--version}, ${HOME}, &amp; {with spaces}", ["{-V|--version}", "${HOME}", "&amp;"]),
])
def test_reference_reading(text, found):
    assert REFERENCE.findall(text) == found


def test_kept_compares_the_placeholders_as_a_multiset():
    assert kept("%1 was invited into this room", "%1 wurde in diesen Raum eingeladen")
    assert kept("%1 was invited into this room", "In diesen Raum wurde %1 eingeladen")
    assert not kept("%s of %s", "%s von")  # one lost
    assert not kept("route {-V|--version}", "Route {-V|-version}")  # one changed
    assert not kept("Saved.", "%s gespeichert.")  # one added
