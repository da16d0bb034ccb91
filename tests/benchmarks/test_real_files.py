"""benchmarks/real_files.py's check of a file, on files written here: a resource read back as the
stand-in's translations, a refusal counted as one, a writer that loses an escape found."""
from __future__ import annotations

import pytest
from benchmarks.real_files import check


def test_a_resource_whose_translations_read_back_passes_and_a_refusal_is_one_line():
    android = b'<resources><string name="a">Don\\\'t save</string><string name="b">"  two  dogs "</string></resources>'
    assert check("strings.xml", android) == (2, "", [])
    count, refusal, broken = check("notes.txt", b"two \x81 dogs\n")
    assert (count, refusal, broken) == (0, "cannot read notes.txt: neither UTF-8 nor Windows-1252 text", [])


def test_a_writer_that_loses_an_escape_is_found(monkeypatch):
    # Apple's strings written back without escaping a quote: the file reads otherwise, or not at all
    monkeypatch.setattr("service.documents.resources.AppleStrings._put", lambda self, translation, start, end: translation)
    count, refusal, broken = check("Localizable.strings", b'"save" = "Save it";\n')
    assert refusal == "" and broken and broken[0].startswith("hostile: read again")


@pytest.mark.parametrize("name, data", [("en.json", b'{"a": "two dogs"}'), ("en.yml", b"en:\n  a: two dogs\n")])
def test_json_and_yaml_files_pass(name, data):
    assert check(name, data) == (1, "", [])
