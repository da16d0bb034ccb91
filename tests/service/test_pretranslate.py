"""service/pretranslate.py: a gettext catalog pre-translated through a running service over HTTP
(uvicorn in a thread, the fake runtime translating: words reversed, upper-cased)."""
from __future__ import annotations

import json
import urllib.request

import polib
import pytest

from service.app import create_app
from service.pretranslate import main
from service.settings import Settings
from testing.fake_runtime import FakeRuntime
from testing.live_server import live_server

CATALOG = r'''msgid ""
msgstr ""
"Language: de_DE\n"
"Content-Type: text/plain; charset=UTF-8\n"
"Plural-Forms: nplurals=2; plural=(n != 1);\n"

#: src/main.c:10
#, c-format
msgid "Open %s now"
msgstr ""

msgctxt "menu"
msgid "Save the file"
msgstr ""

msgid "Done"
msgstr "Fertig"

#, fuzzy
msgid "Close it"
msgstr "Schließen"

msgid "One file"
msgid_plural "%d files"
msgstr[0] ""
msgstr[1] ""

msgid "<b>never closed"
msgstr ""

#~ msgid "Old message"
#~ msgstr ""
'''


@pytest.fixture(scope="module")
def url():
    def factory(received: Settings):
        return [FakeRuntime("en", "de")]

    app = create_app(Settings(model_dirs=["models/test-en-de"], inference_process=False), runtime_factory=factory)
    with live_server(app, ready_within_s=30) as address:
        yield address


def test_untranslated_messages_get_the_service_s_translation_marked_fuzzy(url, tmp_path, capsys):
    source = tmp_path / "de.po"
    source.write_text(CATALOG, encoding="utf-8")
    output = tmp_path / "out.po"
    assert main([str(source), "--output", str(output), "--url", url]) == 0
    captured = capsys.readouterr()
    assert (captured.out.strip(), captured.err) == (f"4 messages translated (marked fuzzy): {output}", "")
    catalog = polib.pofile(str(output))
    found = {(entry.msgctxt, entry.msgid): entry for entry in catalog}
    opened = found[(None, "Open %s now")]
    assert (opened.msgstr, opened.flags) == ("%s NOW OPEN", ["fuzzy", "c-format"])
    assert opened.occurrences == [("src/main.c", "10")]
    saved = found[("menu", "Save the file")]
    assert (saved.msgstr, saved.fuzzy) == ("FILE THE SAVE", True)
    plural = found[(None, "One file")]
    assert plural.msgstr_plural == {0: "FILE ONE", 1: "%d FILES"}
    # Translated, fuzzy and obsolete messages are left as they are.
    assert (found[(None, "Done")].msgstr, found[(None, "Done")].fuzzy) == ("Fertig", False)
    assert found[(None, "Close it")].msgstr == "Schließen"
    assert [entry.msgstr for entry in catalog.obsolete_entries()] == [""]
    # Sent as a plain text, "<b>" that is no markup is words (html would be a 422).
    assert found[(None, "<b>never closed")].msgstr == "CLOSED <B>NEVER"
    assert source.read_text(encoding="utf-8") == CATALOG  # --output leaves the catalog read alone


def test_only_the_translated_messages_lines_change(url, tmp_path):
    # Written as msgmerge writes: wrapped after spaces, which polib would wrap otherwise.
    written = (
        'msgid ""\nmsgstr ""\n"Language: de\\n"\n"Content-Type: text/plain; charset=UTF-8\\n"\n\n'
        '#. TRANSLATORS: a button\n#: src/main.c:12\nmsgid "Open"\nmsgstr ""\n\n'
        '#: src/main.c:20\n#, c-format\nmsgid ""\n"Could not open the configuration file %s because it does not exist or you do "\n'
        '"not have the permission to read it."\nmsgstr ""\n"Die Konfigurationsdatei %s konnte nicht geöffnet werden, weil sie nicht "\n'
        '"existiert oder Sie keine Berechtigung haben, sie zu lesen."\n\n'
        'msgid "Save the document and all of the files that belong to it, then close the window now"\nmsgstr ""\n\n'
        '#~ msgid "Old"\n#~ msgstr ""\n\nmsgid "Last"\nmsgstr ""\n')
    catalog = tmp_path / "de.po"
    catalog.write_text(written, encoding="utf-8")
    assert main([str(catalog), "--in-place", "--url", url]) == 0
    assert catalog.read_text(encoding="utf-8") == written.replace(
        '#: src/main.c:12\nmsgid "Open"\nmsgstr ""', '#: src/main.c:12\n#, fuzzy\nmsgid "Open"\nmsgstr "OPEN"').replace(
        'msgid "Save the document and all of the files that belong to it, then close the window now"\nmsgstr ""',
        '#, fuzzy\nmsgid "Save the document and all of the files that belong to it, then close the window now"\n'
        'msgstr ""\n"NOW WINDOW THE CLOSE THEN IT, TO BELONG THAT FILES THE OF ALL AND DOCUMENT "\n"THE SAVE"').replace(
        'msgid "Last"\nmsgstr ""\n', '#, fuzzy\nmsgid "Last"\nmsgstr "LAST"\n')  # its last line break kept


def test_fuzzy_messages_are_translated_again_when_asked_and_the_mark_can_be_left_off(url, tmp_path):
    source = tmp_path / "de.po"
    source.write_text(CATALOG, encoding="utf-8")
    assert main([str(source), "--in-place", "--url", url, "--fuzzy", "--no-fuzzy-mark"]) == 0
    found = {entry.msgid: entry for entry in polib.pofile(str(source))}
    assert (found["Close it"].msgstr, found["Open %s now"].fuzzy) == ("IT CLOSE", False)
    assert found["Close it"].fuzzy  # marked by whoever made it; --fuzzy translates, it does not review


def test_a_template_s_translation_names_its_language(url, tmp_path):
    template = tmp_path / "messages.pot"
    template.write_text('msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n\nmsgid "Open"\nmsgstr ""\n',
                        encoding="utf-8")
    assert main([str(template), "--output", str(tmp_path / "de.po"), "--target", "de", "--url", url]) == 0
    catalog = polib.pofile(str(tmp_path / "de.po"))
    assert (catalog.metadata["Language"], [entry.msgstr for entry in catalog]) == ("de", ["OPEN"])


def test_a_stored_glossary_s_terms_are_used(url, tmp_path, capsys):
    body = json.dumps({"name": "ui", "source": "en", "target": "de", "entries": [{"source": "file", "target": "Datei"}]})
    request = urllib.request.Request(url + "/glossaries", body.encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        glossary = json.load(response)["id"]
    source = tmp_path / "de.po"
    source.write_text(CATALOG, encoding="utf-8")
    assert main([str(source), "--in-place", "--url", url, "--glossary", glossary]) == 0
    found = {entry.msgid: entry for entry in polib.pofile(str(source))}
    assert (found["Save the file"].msgstr, found["One file"].msgstr_plural[0]) == ("Datei THE SAVE", "Datei ONE")
    # An id the service does not store stops the run: every message would be refused.
    assert main([str(source), "--in-place", "--url", url, "--glossary", "nope", "--fuzzy"]) == 1
    assert capsys.readouterr().err == "pretranslate: glossary: no stored glossary has the id 'nope'\n"


def test_a_message_the_service_refuses_stays_untranslated_and_is_named(url, tmp_path, capsys):
    source = tmp_path / "de.po"
    long = "word " * 2100  # over the service's 10,000 characters per text
    source.write_text(CATALOG + f'\nmsgid "{long}"\nmsgstr ""\n', encoding="utf-8")
    assert main([str(source), "--in-place", "--url", url]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("4 messages translated")
    (line,) = captured.err.splitlines()
    assert line.startswith("pretranslate: left untranslated, 'word word") and "text" in line
    assert {entry.msgid: entry.msgstr for entry in polib.pofile(str(source))}[long] == ""


def test_a_catalog_in_another_charset_is_read_and_written_in_it(url, tmp_path):
    latin = tmp_path / "de.po"
    latin.write_bytes(b'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=ISO-8859-1\\n"\n"Language: de\\n"\n\n'
                      b'msgid "caf\xe9 open"\nmsgstr ""\n\nmsgid ""\n"a long one"\nmsgstr ""\n')
    assert main([str(latin), "--in-place", "--url", url]) == 0
    written = latin.read_bytes()
    assert b'msgstr "OPEN CAF\xc9"' in written and b'msgstr "ONE LONG A"' in written


@pytest.mark.parametrize("argv, error", [
    (["missing.po", "--in-place"], "pretranslate: cannot read missing.po: no such file"),
    (["{bare}", "--in-place", "--target", "fr"], "pretranslate: target: language pair en-fr is not served"),
    # a German catalog does not take French translations
    (["{catalog}", "--in-place", "--target", "fr"], "pretranslate: de.po is a translation into 'de', not 'fr'"),
    (["notes.pdf", "--in-place"], "pretranslate: cannot read notes.pdf: its format is none of .po, .pot, .xlf"),
    (["{catalog}", "--in-place", "--url", "http://127.0.0.1:9"], "pretranslate: cannot get translations from"),
    (["{bare}", "--in-place"], "pretranslate: {bare} names no target language (its Language header is empty): pass --target"),
    # polib reads an unterminated string less its last character ("Offen" as "Offe"): written back,
    # the translation would be cut.
    (["{broken}", "--in-place"], "pretranslate: cannot read {broken}: line 5 holds no whole string"),
])
def test_what_stops_a_run_is_one_line_and_exit_status_1(url, tmp_path, capsys, monkeypatch, argv, error):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "de.po").write_text(CATALOG, encoding="utf-8")
    (tmp_path / "bare.pot").write_text('msgid ""\nmsgstr ""\n\nmsgid "Open"\nmsgstr ""\n', encoding="utf-8")
    broken = 'msgid ""\nmsgstr "Language: de\\n"\n\nmsgid "Open"\nmsgstr "Offen\n\nmsgid "Save"\nmsgstr ""\n'
    (tmp_path / "broken.po").write_text(broken, encoding="utf-8")
    (tmp_path / "notes.pdf").write_bytes(b"PK\x03\x04")
    names = {"catalog": "de.po", "bare": "bare.pot", "broken": "broken.po"}
    argv = [arg.format(**names) for arg in argv]
    if "--url" not in argv:
        argv += ["--url", url]
    assert main(argv) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(error.format(**names))
    assert (tmp_path / "de.po").read_text(encoding="utf-8") == CATALOG  # nothing written
    assert (tmp_path / "broken.po").read_text(encoding="utf-8") == broken
    assert sorted(path.name for path in tmp_path.iterdir()) == ["bare.pot", "broken.po", "de.po", "notes.pdf"]


@pytest.mark.parametrize("value, lines", [
    ("Open", ['msgstr "Open"']),
    ("Done.\n", ['msgstr "Done.\\n"']),                       # a line break at the end only: one line
    ("One.\nTwo.", ['msgstr ""', '"One.\\n"', '"Two."']),       # broken after each line break
    ("ab " * 23 + "c", ['msgstr "' + "ab " * 23 + 'c"']),     # 79 columns with its keyword: one line
    ("ab " * 23 + "cd", ['msgstr ""', '"' + "ab " * 23 + 'cd"']),  # 80: the value on a line of its own
    ("word " * 16, ['msgstr ""', '"' + "word " * 15 + '"', '"word "']),   # a line of at most 79 columns
    ("z" * 90, ['msgstr "' + "z" * 90 + '"']),                 # nowhere to break: beside its keyword
    ('say "hi"', ['msgstr "say \\"hi\\""']),
])
def test_a_translation_is_written_on_lines_as_msgmerge_writes_them(value, lines):
    from service.documents.gettext import string_lines as _string_lines

    assert _string_lines("msgstr", value) == lines


XLIFF_1 = """<?xml version="1.0" encoding="UTF-8"?>
<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2">
  <file original="ui.properties" source-language="en" target-language="de" datatype="plaintext">
    <body>
      <trans-unit id="1">
        <source>Open the <g id="1">file</g> now<x id="2"/></source>
      </trans-unit>
      <trans-unit id="2">
        <source>Press <bpt id="3">&lt;b&gt;</bpt>Enter<ept id="3">&lt;/b&gt;</ept> &amp; go</source>
        <target xml:lang="de"/>
      </trans-unit>
      <trans-unit id="3">
        <source>Done</source>
        <target>Fertig</target>
      </trans-unit>
      <trans-unit id="5">
        <source>Close it</source>
        <target state="new">Close it</target>
      </trans-unit>
      <trans-unit id="4" translate="no">
        <source>Acme</source>
      </trans-unit>
    </body>
  </file>
</xliff>
"""

XLIFF_2 = """<?xml version="1.0" encoding="UTF-8"?>
<xliff xmlns="urn:oasis:names:tc:xliff:document:2.0" version="2.0" srcLang="en-US" trgLang="de-DE">
  <file id="f1">
    <unit id="u1">
      <segment>
        <source>Delete <pc id="1">all</pc> files?</source>
      </segment>
    </unit>
    <unit id="u2" translate="no">
      <segment>
        <source>Acme Cloud</source>
      </segment>
    </unit>
  </file>
</xliff>
"""


def test_xliff_segments_without_a_translation_get_one_every_other_byte_as_it_was(url, tmp_path, capsys):
    one, two = tmp_path / "ui.xlf", tmp_path / "app.xliff"
    one.write_text(XLIFF_1, encoding="utf-8")
    two.write_text(XLIFF_2, encoding="utf-8")
    assert main([str(one), "--in-place", "--url", url]) == 0
    assert main([str(two), "--in-place", "--url", url]) == 0
    assert capsys.readouterr().out.splitlines() == [f"3 segments translated (marked for review): {one}",
                                                    f"1 segments translated (marked for review): {two}"]
    # The inline codes kept (the fake reverses the words; each code goes back by the alignment).
    first = one.read_text(encoding="utf-8")
    assert first == XLIFF_1.replace(
        '<source>Open the <g id="1">file</g> now<x id="2"/></source>\n',
        '<source>Open the <g id="1">file</g> now<x id="2"/></source>\n'
        '        <target state="needs-review-translation">NOW <g id="1">FILE</g> THE OPEN<x id="2"/></target>\n').replace(
        '<target xml:lang="de"/>',
        '<target xml:lang="de" state="needs-review-translation">GO &amp; <bpt id="3">&lt;b&gt;</bpt>ENTER<ept id="3">'
        '&lt;/b&gt;</ept> PRESS</target>').replace(  # the source copied there as a placeholder, translated
        '<target state="new">Close it</target>', '<target state="needs-review-translation">IT CLOSE</target>')
    assert two.read_text(encoding="utf-8") == XLIFF_2.replace(
        "<source>Delete <pc id=\"1\">all</pc> files?</source>\n",
        "<source>Delete <pc id=\"1\">all</pc> files?</source>\n        <target>FILES? <pc id=\"1\">ALL</pc> DELETE</target>\n"
    ).replace("<segment>", '<segment state="translated">', 1)  # 2.x's state before reviewed and final


def test_an_xliff_translation_left_unmarked_is_in_the_state_translated(url, tmp_path):
    one = tmp_path / "ui.xlf"
    one.write_text(XLIFF_1, encoding="utf-8")
    assert main([str(one), "--in-place", "--url", url, "--no-fuzzy-mark"]) == 0
    written = one.read_text(encoding="utf-8")
    assert written.count('state="translated"') == 3 and "needs-review" not in written and 'state="new"' not in written


def test_a_file_that_is_not_well_formed_xliff_is_refused_and_left(url, tmp_path, capsys):
    broken = tmp_path / "ui.xlf"
    broken.write_text(XLIFF_1.replace("</body>", ""), encoding="utf-8")
    assert main([str(broken), "--in-place", "--url", url]) == 1
    assert capsys.readouterr().err.startswith(f"pretranslate: cannot read {broken}: not well-formed XML:")
    assert broken.read_text(encoding="utf-8") == XLIFF_1.replace("</body>", "")


LINGUIST = """<?xml version="1.0" encoding="utf-8"?>
<!DOCTYPE TS>
<TS version="2.1" language="de_DE" sourcelanguage="en">
<context>
    <name>MainWindow</name>
    <message>
        <location filename="../mainwindow.cpp" line="42"/>
        <source>Save the &amp;file</source>
        <translation type="unfinished"></translation>
    </message>
    <message numerus="yes">
        <source>%n files deleted</source>
        <translation type="unfinished">
            <numerusform></numerusform>
            <numerusform></numerusform>
        </translation>
    </message>
    <message>
        <source>Quit</source>
        <translation>Beenden</translation>
    </message>
    <message>
        <source>Old one</source>
        <translation type="vanished"></translation>
    </message>
</context>
</TS>
"""


def test_a_qt_linguist_file_s_unfinished_messages_get_a_translation_still_unfinished(url, tmp_path, capsys):
    ts = tmp_path / "app_de.ts"
    ts.write_text(LINGUIST, encoding="utf-8")
    assert main([str(ts), "--in-place", "--url", url]) == 0
    assert capsys.readouterr().out == f"2 messages translated (marked for review): {ts}\n"
    # The source is text written as XML: "&amp;file" is an accelerator, written back escaped.
    assert ts.read_text(encoding="utf-8") == LINGUIST.replace(
        '<translation type="unfinished"></translation>', '<translation type="unfinished">&amp;FILE THE SAVE</translation>'
    ).replace("<numerusform></numerusform>", "<numerusform>DELETED %n FILES</numerusform>")
    ts.write_text(LINGUIST, encoding="utf-8")
    assert main([str(ts), "--in-place", "--url", url, "--no-fuzzy-mark"]) == 0
    assert '<translation>&amp;FILE THE SAVE</translation>' in ts.read_text(encoding="utf-8")


def test_a_batch_over_the_server_s_body_limit_goes_text_by_text_and_only_a_text_over_it_is_left(tmp_path, capsys):
    def factory(received: Settings):
        return [FakeRuntime("en", "de")]

    app = create_app(Settings(model_dirs=["models/test-en-de"], inference_process=False, max_body_bytes=1024),
                     runtime_factory=factory)
    messages = [f"message number {k} says something about the files" for k in range(40)] + ["word " * 220]
    catalog = tmp_path / "de.po"
    catalog.write_text('msgid ""\nmsgstr "Language: de\\n"\n' + "".join(f'\nmsgid "{m}"\nmsgstr ""\n' for m in messages),
                       encoding="utf-8")
    with live_server(app, ready_within_s=30) as address:
        assert main([str(catalog), "--in-place", "--url", address]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("40 messages translated")
    (line,) = captured.err.splitlines()
    assert line.startswith("pretranslate: left untranslated, 'word word")
    found = {entry.msgid: entry.msgstr for entry in polib.pofile(str(catalog))}
    assert found[messages[0]] == "FILES THE ABOUT SOMETHING SAYS 0 NUMBER MESSAGE" and found[messages[-1]] == ""


def test_several_catalogs_are_pre_translated_in_place_each_on_its_own(url, tmp_path, capsys):
    de, fr, broken = tmp_path / "de.po", tmp_path / "fr.po", tmp_path / "nl.po"
    de.write_text(CATALOG, encoding="utf-8")
    fr.write_text(CATALOG.replace("Language: de_DE", "Language: fr"), encoding="utf-8")  # a pair not served
    broken.write_text('msgid "Open"\nmsgstr "Offen\n', encoding="utf-8")
    assert main([str(de), str(fr), str(broken), "--in-place", "--url", url]) == 1
    captured = capsys.readouterr()
    assert captured.out == f"4 messages translated (marked fuzzy): {de}\n"
    assert captured.err.splitlines() == ["pretranslate: target: language pair en-fr is not served; served pairs: en-de",
                                         f"pretranslate: cannot read {broken}: line 2 holds no whole string; "
                                         "check it with msgfmt -c"]
    assert 'msgstr "%s NOW OPEN"' in de.read_text(encoding="utf-8")
    assert fr.read_text(encoding="utf-8") == CATALOG.replace("Language: de_DE", "Language: fr")  # left as it was
    with pytest.raises(SystemExit):  # --output names one file
        main([str(de), str(fr), "--output", str(tmp_path / "out.po"), "--url", url])
