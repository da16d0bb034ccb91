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


def test_through_a_running_service_the_placeholders_kept_are_counted(tmp_path, monkeypatch):
    import argparse

    from benchmarks.real_files import through_service
    from service.app import create_app
    from service.settings import Settings
    from testing.fake_runtime import FakeRuntime
    from testing.live_server import live_server

    (tmp_path / "files").mkdir()
    (tmp_path / "files" / "en.json").write_text('{"a": "Open %s now", "b": "two {count} dogs"}', encoding="utf-8")
    (tmp_path / "files" / "skipped.toml").write_text('a = "two dogs"\n', encoding="utf-8")
    (tmp_path / "sources.tsv").write_text("name\trepository\tcommit\tpath\nen.json\ta/b\tc0ffee\ten.json\n"
                                          "skipped.toml\ta/b\tc0ffee\tskipped.toml\n", encoding="utf-8")
    app = create_app(Settings(model_dirs=["models/test-en-de"], inference_process=False),
                     runtime_factory=lambda settings: [FakeRuntime("en", "de")])
    with live_server(app, ready_within_s=30) as url:
        args = argparse.Namespace(files=tmp_path / "files", sources=tmp_path / "sources.tsv", service=url, model=None,
                                  only=".json", target="de", results=tmp_path / "results.md")
        assert through_service(args) == 0  # the service keeps them: none lost
        monkeypatch.setattr("benchmarks.placeholder_catalogs.kept", lambda source, output: "now" in source)
        assert through_service(args) == 1  # as if one had lost its placeholder: counted, the first named
    report = (tmp_path / "results.md").read_text(encoding="utf-8")
    assert "1 files, 2 texts" in report and "| en.json | 2 | 0: – | – |" in report and "skipped.toml" not in report
    assert "**1 with their placeholders not kept**" in report and "| en.json | 2 | 1: 'two {count} dogs' → " in report
