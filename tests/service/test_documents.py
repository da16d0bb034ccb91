"""Documents (service/documents/ reads and writes them; service/document_store.py keeps them;
service/document_worker.py translates them) and the routes that take them: LibreTranslate's
translate_file and DeepL's v2/document, driven by DeepL's own client, over a live server whose fake
runtime translates "two dogs play" as "PLAY DOGS TWO"."""
from __future__ import annotations

import difflib
import io
import json
import re
import threading
import time
import urllib.error
import urllib.request
import zipfile
from xml.etree import ElementTree

import deepl
import pytest

from service.app import create_app
from service.document_store import DONE, ERROR, QUEUED, TRANSLATING, DocumentStore
from service.documents import FORMATS, Failed, NoTarget, Refused, translate_document
from service.glossary import GlossaryEntry
from service.settings import Settings
from testing.fake_runtime import FakeRuntime
from testing.live_server import live_server


def reversed_words(texts, source, target, fmt):
    """What the fake runtime does, line by line: words reversed and upper-cased."""
    if any("refuse me" in text for text in texts):
        raise Refused("too long", "text.0")
    return ["\n".join(" ".join(reversed(line.split())).upper() for line in text.split("\n")) for text in texts]


def test_a_text_file_s_paragraphs_are_translated_its_blank_lines_indentation_and_line_ends_kept():
    text = "\ufefftwo dogs play\r\nin the snow\r\n\r\n  \r\n    the cat sleeps  \r\n"
    done = translate_document("notes.txt", text.encode("utf-8"), reversed_words, "en", "de")
    assert done.data.decode("utf-8") == "\ufeffPLAY DOGS TWO\r\nSNOW THE IN\r\n\r\n  \r\n    SLEEPS CAT THE  \r\n"
    assert (done.count, done.unit, done.marked, done.source, done.target) == (2, "paragraphs", "", "en", "de")
    assert done.characters == len("two dogs play\nin the snow") + len("the cat sleeps")


def test_a_subtitle_s_text_is_translated_its_number_and_timing_kept():
    srt = ("1\n00:00:01,000 --> 00:00:02,500\ntwo dogs play\n\n"
           "2\n00:00:03,000 --> 00:00:04,000\nthe cat\nsleeps\n\n"
           "a note that is no subtitle\n")
    done = translate_document("film.srt", srt.encode(), reversed_words, "en", "de")
    assert done.data.decode() == ("1\n00:00:01,000 --> 00:00:02,500\nPLAY DOGS TWO\n\n"
                                  "2\n00:00:03,000 --> 00:00:04,000\nCAT THE\nSLEEPS\n\n"
                                  "a note that is no subtitle\n")
    assert (done.count, done.unit) == (2, "subtitles")

VTT = ("WEBVTT - captions\r\nKind: captions\r\n\r\nNOTE two dogs play\r\nin a note\r\n\r\nSTYLE\r\n::cue { color: yellow }\r\n\r\n"
       "intro\r\n00:00:01.000 --> 00:00:04.000 line:90%\r\n<v Bob>two dogs play\r\n\r\n"
       "00:04.000 --> 00:06.500\r\nthe cat &amp; <c.yellow>the dog</c>\r\nsleep\r\n\r\n"
       "00:07.000 --> 00:09.000\r\n<00:07.500>two&nbsp;dogs\r\n\r\n00:10.000 --> 00:11.000\r\nend here\r\n")


def test_a_webvtt_cue_s_text_is_translated_its_identifier_timing_settings_and_other_blocks_kept():
    sent, recorded = recording(lambda texts, *_: [text.replace("two dogs play", "zwei Hunde & Katzen")
                                                  .replace("end here", "a --> b") for text in texts])
    done = translate_document("film.vtt", VTT.encode(), recorded, "en", "de")
    # the tags as written (the service keeps a text's markup), but a voice opening the cue, which stays where it
    # is; &amp; and &nbsp; as the characters they are
    assert sent == ["two dogs play", "the cat & <c.yellow>the dog</c>\nsleep", "<00:07.500>two\u00a0dogs",
                    "end here"]
    # an ampersand written back as &amp;, the file's line ends kept; a translation that would end its cue is left
    assert done.data.decode() == VTT.replace("<v Bob>two dogs play", "<v Bob>zwei Hunde &amp; Katzen").replace(
        "&nbsp;", "\u00a0")
    assert (done.count, done.unit) == (3, "subtitles")
    assert done.refused == ["'end here': its translation would end its cue (a blank line or \"-->\"); left as it was"]
    # a timing line starts a cue, blank line before it or not; a "<" that starts no tag is written as a reference
    cues = "WEBVTT\n00:01.000 --> 00:02.000\na &lt; b\n00:02.000 --> 00:03.000\n<i>the cat</i>\n"
    sent.clear()
    done = translate_document("film.vtt", cues.encode(), lambda texts, *_: [t.replace("&lt;", "<") + " <3" for t in texts],
                              "en", "de")
    assert done.data.decode() == cues.replace("a &lt; b", "a &lt; b &lt;3").replace("<i>the cat</i>", "<i>the cat</i> &lt;3")
    with pytest.raises(Failed, match=r"^cannot read film.vtt: not a WebVTT file \(its first line is not WEBVTT\)$"):
        translate_document("film.vtt", b"1\n00:00:01,000 --> 00:00:02,500\ntwo dogs play\n", recorded, "en", "de")

def test_a_subtitle_file_in_windows_1252_is_read_and_written_back_in_it():
    srt = "1\r\n00:00:01,000 --> 00:00:02,500\r\nCe film relate des événements\r\n\r\n2\r\n00:00:03,000 --> 00:00:04,000\r\nFin\r\n"
    german = {"Ce film relate des événements": "Dieser Film erzählt „Ereignisse“", "Fin": "Ende\u202f!"}
    done = translate_document("film.srt", srt.encode("cp1252"), lambda texts, *_: [german[t] for t in texts], "fr", "de")
    # older subtitle files are Windows' Western encoding, not UTF-8; a translation it cannot hold is left and named
    assert done.data == srt.replace("Ce film relate des événements", "Dieser Film erzählt „Ereignisse“").encode("cp1252")
    assert done.refused == ["'Fin': its translation holds a character the file's encoding (cp1252) lacks; left as it was"]
    with pytest.raises(Failed, match=r"^cannot read film.srt: neither UTF-8 nor Windows-1252 text$"):
        translate_document("film.srt", b"1\r\n00:00:01,000 --> 00:00:02,500\r\n\x81\x8d\r\n", reversed_words, "fr", "de")


def test_every_string_of_a_json_file_is_translated_but_arb_s_metadata_and_its_locale_is_the_target():
    arb = ('{\n  "@@locale": "en",\n  "title": "two dogs play",\n'
           '  "@title": {"description": "the dogs", "placeholders": {"n": {"example": "the cat"}}},\n'
           '  "menu": {"open": "open it", "list": ["the cat", "", {"deep": "in the snow"}]},\n  "n": 3, "on": true\n}\n')
    done = translate_document("app_en.arb", arb.encode(), reversed_words, None, "de")
    assert done.data.decode() == arb.replace('"en"', '"de"').replace('"two dogs play"', '"PLAY DOGS TWO"').replace(
        '"open it"', '"IT OPEN"').replace('["the cat"', '["CAT THE"').replace('"in the snow"', '"SNOW THE IN"')
    assert (done.source, done.count, done.unit) == ("en", 4, "strings")

def test_an_i18next_plural_gets_each_category_the_target_language_has_before_its_other():
    plurals = ('{\n  "dogs_one": "two dogs",\n  "dogs_other": "{{count}} dogs play",\n'
               '  "menu": {"cat_one": "the cat", "cat_other": "{{count}} cats", "status_other": "two dogs"}\n}\n')
    done = translate_document("en.json", plurals.encode(), reversed_words, "en", "fr")
    # French: one, many, other (i18next asks Intl.PluralRules, and a key it lacks is not found);
    # "status_other" alone is no plural
    assert done.data.decode() == plurals.replace('"two dogs",', '"DOGS TWO",').replace(
        '  "dogs_other": "{{count}} dogs play"',
        '  "dogs_many": "PLAY DOGS {{COUNT}}",\n  "dogs_other": "PLAY DOGS {{COUNT}}"').replace(
        '"cat_one": "the cat", "cat_other": "{{count}} cats"',
        '"cat_one": "CAT THE", "cat_many": "CATS {{COUNT}}", "cat_other": "CATS {{COUNT}}"').replace(
        '"status_other": "two dogs"', '"status_other": "DOGS TWO"')
    assert json.loads(done.data)["menu"]["cat_many"] == "CATS {{COUNT}}" and done.count == 5
    german = translate_document("en.json", plurals.encode(), reversed_words, "en", "de").data.decode()
    assert "_many" not in german


def test_a_file_of_message_objects_gets_its_messages_translated_their_descriptions_and_placeholders_left():
    messages = ('{\n  "title": {"message": "two dogs play", "description": "the dogs"},\n  "count": {"message": "$N$ the cat",'
                ' "placeholders": {"n": {"content": "$1", "example": "the cat"}}}\n}\n')
    sent, recorded = recording(reversed_words)
    done = translate_document("messages.json", messages.encode(), recorded, "en", "de")
    assert sent == ["two dogs play", "$N$ the cat"]
    assert done.data.decode() == messages.replace('"two dogs play"', '"PLAY DOGS TWO"').replace(
        '"$N$ the cat"', '"CAT THE $N$"')
    # an object of objects that is no extension's (an entry without a message) is read whole
    other = '{"a": {"message": "two dogs"}, "b": {"text": "the cat"}}'
    sent.clear()
    translate_document("messages.json", other.encode(), recorded, "en", "de")
    assert sent == ["two dogs", "the cat"]
    # FormatJS's (react-intl's) extracted messages and Transifex's structured JSON: the text, not the notes
    for key, notes in (("defaultMessage", '"description": "two dogs"'),
                       ("string", '"context": "two dogs", "developer_comment": "the cat", "character_limit": 9')):
        sent.clear()
        entries = f'{{"app.title": {{"{key}": "two dogs play", {notes}}}, "app.cat": {{"{key}": "the cat"}}}}'
        done = translate_document("en.json", entries.encode(), recorded, "en", "de")
        assert sent == ["two dogs play", "the cat"]
        assert done.data.decode() == entries.replace('"two dogs play"', '"PLAY DOGS TWO"').replace(
            '"the cat"}', '"CAT THE"}')
    # babel-plugin-react-intl's list of messages: their ids left too
    sent.clear()
    listed = '[{"id": "two.dogs", "defaultMessage": "two dogs play", "description": "the cat"}]'
    done = translate_document("en.json", listed.encode(), recorded, "en", "de")
    assert sent == ["two dogs play"] and done.data.decode() == listed.replace('"two dogs play"', '"PLAY DOGS TWO"')


XCSTRINGS = """{
  "sourceLanguage" : "en",
  "strings" : {
    "" : {

    },
    "%lld photos" : {
      "localizations" : {
        "en" : {
          "variations" : {
            "plural" : {
              "one" : {
                "stringUnit" : {
                  "state" : "translated",
                  "value" : "%lld photo"
                }
              },
              "other" : {
                "stringUnit" : {
                  "state" : "translated",
                  "value" : "%lld photos"
                }
              }
            }
          }
        }
      }
    },
    "apples" : {
      "localizations" : {
        "en" : {
          "stringUnit" : {
            "state" : "translated",
            "value" : "%@ ate %#@appleCount@ today"
          },
          "substitutions" : {
            "appleCount" : {
              "argNum" : 2,
              "formatSpecifier" : "lld",
              "variations" : {
                "plural" : {
                  "one" : {
                    "stringUnit" : {
                      "state" : "translated",
                      "value" : "one apple"
                    }
                  },
                  "other" : {
                    "stringUnit" : {
                      "state" : "translated",
                      "value" : "%arg apples"
                    }
                  }
                }
              }
            }
          }
        }
      }
    },
    "Cancel" : {
      "localizations" : {
        "de" : {
          "stringUnit" : {
            "state" : "translated",
            "value" : "Abbrechen"
          }
        }
      }
    },
    "CFBundleName" : {
      "shouldTranslate" : false
    },
    "Old label" : {
      "extractionState" : "stale"
    },
    "two dogs play" : {

    },
    "Waiting" : {
      "localizations" : {
        "de" : {
          "stringUnit" : {
            "state" : "new",
            "value" : ""
          }
        }
      }
    }
  },
  "version" : "1.0"
}"""


def test_a_string_catalog_gets_the_target_localizations_it_lacks_written_as_xcode_writes_it():
    sent, recorded = recording(lambda texts, *_: [text.upper() for text in texts])
    done = translate_document("Localizable.xcstrings", XCSTRINGS.encode(), recorded, None, "de")
    # the key where the source language has no localization; plural variations; a substitution's
    # variations; none marked not to translate, stale or already translated; one in the state "new"
    assert sent == ["%lld photo", "%lld photos", "%@ ate %#@appleCount@ today", "one apple", "%arg apples",
                    "two dogs play", "Waiting"]
    assert (done.source, done.count, done.skipped, done.marked) == ("en", 7, 2, "needs_review")
    written = json.loads(done.data)
    review = lambda value: {"stringUnit": {"state": "needs_review", "value": value}}  # noqa: E731
    strings = json.loads(XCSTRINGS)["strings"]
    assert written["strings"]["%lld photos"]["localizations"]["de"] == {
        "variations": {"plural": {"one": review("%LLD PHOTO"), "other": review("%LLD PHOTOS")}}}
    assert written["strings"]["apples"]["localizations"]["de"] == {
        **review("%@ ATE %#@APPLECOUNT@ TODAY"), "substitutions": {"appleCount": {
            "argNum": 2, "formatSpecifier": "lld",
            "variations": {"plural": {"one": review("ONE APPLE"), "other": review("%ARG APPLES")}}}}}
    assert written["strings"]["two dogs play"] == {"localizations": {"de": review("TWO DOGS PLAY")}}
    assert written["strings"]["Waiting"]["localizations"]["de"] == review("WAITING")
    for key in ("", "Cancel", "CFBundleName", "Old label"):
        assert written["strings"][key] == strings[key]
    assert list(written["strings"]["%lld photos"]["localizations"]) == ["de", "en"]  # Xcode's order
    # every line of the file is kept, in order (Xcode's " : ", its empty object over three lines), but
    # the blank one of the empty object that got a localization and the two of the one that was "new"
    before, after = XCSTRINGS.split("\n"), done.data.decode().split("\n")
    lost = [line for tag, i, j, _, _ in difflib.SequenceMatcher(None, before, after, autojunk=False).get_opcodes()
            if tag in ("delete", "replace") for line in before[i:j]]
    assert lost == ["", '            "state" : "new",', '            "value" : ""']
    # a catalog with nothing to add comes back byte for byte
    again = translate_document("Localizable.xcstrings", done.data, recorded, None, "de", mark=False)
    assert (again.count, again.data) == (0, done.data)
    # another tool's catalog (": ", its own key order): written in its style, an entry not added to as it was
    other = '{\n    "sourceLanguage": "en",\n    "strings": {\n        "a": {"localizations": {"de": {"stringUnit": ' \
            '{"value": "A", "state": "translated"}}}},\n        "two dogs": {}\n    }\n}\n'
    done = translate_document("Localizable.xcstrings", other.encode(), recorded, None, "de")
    assert done.data.decode() == json.dumps({"sourceLanguage": "en", "strings": {
        "a": {"localizations": {"de": {"stringUnit": {"value": "A", "state": "translated"}}}},
        "two dogs": {"localizations": {"de": {"stringUnit": {"state": "needs_review", "value": "TWO DOGS"}}}}}},
        indent=4) + "\n"
    with pytest.raises(Failed, match='not a string catalog'):
        translate_document("Localizable.xcstrings", b'{"a": "b"}', recorded, "en", "de")


FTL = """# A comment, left
hello = two dogs { $user } play
block =
    two dogs
    the cat { $n }
emails =
    { $count ->
        [one] the cat
       *[other] { $count } cats
    }
login = two dogs
    .placeholder = the cat
-brand-name = two dogs
about = the cat { -brand-name }
broken line
"""


def test_a_fluent_file_s_messages_variants_and_attributes_are_translated_in_place():
    sent, recorded = recording(lambda texts, *_: [re.sub(r"(\{[^}]*\})|([^{]+)", lambda m: m.group(1) or m.group(2).upper(), text)
                                                  + "\nand more" * ("cats" in text) for text in texts])
    done = translate_document("main.ftl", FTL.encode(), recorded, "en", "de")
    # a term and junk left; each variant alone; a block pattern without its indentation (each text once)
    assert sent == ["two dogs { $user } play", "two dogs\nthe cat { $n }", "the cat", "{ $count } cats", "two dogs",
                    "the cat { -brand-name }"]
    assert done.data.decode() == FTL.replace("hello = two dogs { $user } play", "hello = TWO DOGS { $user } PLAY").replace(
        "    two dogs\n    the cat { $n }", "    TWO DOGS\n    THE CAT { $n }").replace(
        "[one] the cat", "[one] THE CAT").replace("*[other] { $count } cats", "*[other] { $count } CATS\n           and more").replace(
        "login = two dogs\n    .placeholder = the cat", "login = TWO DOGS\n    .placeholder = THE CAT").replace(
        "about = the cat", "about = THE CAT")
    assert done.count == 7
    # a file of CRLF lines: its texts sent with plain line breaks, its translations written in its own
    sent.clear()
    crlf = translate_document("main.ftl", FTL.replace("\n", "\r\n").encode(), recorded, "en", "de")
    assert "two dogs\nthe cat { $n }" in sent and crlf.data.decode() == done.data.decode().replace("\n", "\r\n")
    # a translation that loses a placeable, or writes Fluent's syntax at a line's start, is left and named
    done = translate_document("main.ftl", FTL.encode(), lambda texts, *_: [
        "zwei Hunde" if "$user" in text else text + "\n[x] y" if "$n" in text else text for text in texts], "en", "de")
    assert done.refused == [
        "'two dogs { $user } play': its translation would not read as the same Fluent pattern; left as it was",
        "'two dogs\\nthe cat { $n }': its translation would not read as the same Fluent pattern; left as it was"]
    with pytest.raises(Failed, match="^cannot read a.ftl: no Fluent message in it$"):
        translate_document("a.ftl", b"# only a comment\n", recorded, "en", "de")


PHP = r"""<?php

// Laravel's lines
return [
    'accepted' => 'two dogs :attribute',
    "url" => "the cat\t{$x}",
    'between' => [
        'string' => 'It\'s the cat',
    ],
    'custom' => array(
        'name' => array('rule' => "two \"dogs\"\n"),
    ),
    'list' => ['the cat', 'two dogs'],
    'computed' => __('the cat') . ' two dogs',
    'interpolated' => "Hello $name",
    # 'a' => 'comment'
];
"""
SUFFIX = " 'q' \"d\" $x \\"


def test_a_php_array_s_strings_are_translated_in_their_quotes_escapes():
    sent, recorded = recording(lambda texts, *_: [text.upper() + SUFFIX for text in texts])
    done = translate_document("validation.php", PHP.encode(), recorded, "en", "de")
    # keys, comments, a call's argument, a concatenation and a string PHP fills in are left
    assert sent == ["two dogs :attribute", "It's the cat", 'two "dogs"\n', "the cat", "two dogs"]
    single = r""" \'q\' "d" $x \\'"""  # the suffix in single quotes, and the closing quote
    double = r""" 'q' \"d\" \$x \\" """.rstrip()
    assert done.data.decode() == PHP.replace(
        "'two dogs :attribute'", "'TWO DOGS :ATTRIBUTE" + single).replace(
        r"'It\'s the cat'", r"'IT\'S THE CAT" + single).replace(
        r'"two \"dogs\"\n"', r'"TWO \"DOGS\"\n' + double).replace(
        "['the cat', 'two dogs']", "['THE CAT" + single + ", 'TWO DOGS" + single + "]")
    # read again: exactly the translations, and written so again byte for byte
    from service.documents.resources import PhpArray

    assert PhpArray("validation.php", done.data, "php", False).texts == [text.upper() + SUFFIX for text in sent]
    again = translate_document("validation.php", done.data, lambda texts, *_: texts, "en", "de")
    assert again.data == done.data and again.count == 5
    with pytest.raises(Failed, match=r"^cannot read a.php: not a PHP file returning an array \(<\?php return \[...\];\)$"):
        translate_document("a.php", b"<?php echo 'two dogs';", recorded, "en", "de")


STRINGSDICT = """<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0">
<dict>
	<key>files deleted</key>
	<dict>
		<key>NSStringLocalizedFormatKey</key>
		<string>%#@files@</string>
		<key>files</key>
		<dict>
			<key>NSStringFormatSpecTypeKey</key>
			<string>NSStringPluralRuleType</string>
			<key>NSStringFormatValueTypeKey</key>
			<string>d</string>
			<key>zero</key>
			<string>two dogs &amp; the cat</string>
			<key>one</key>
			<string>one file</string>
			<key>other</key>
			<string>%d files</string>
		</dict>
	</dict>
	<!-- <key>old</key><dict><key>NSStringLocalizedFormatKey</key><string>old text</string></dict> -->
	<key>ate</key>
	<dict>
		<key>NSStringLocalizedFormatKey</key>
		<string>%@ ate %#@apples@ today</string>
		<key>apples</key>
		<dict>
			<key>NSStringFormatSpecTypeKey</key>
			<string>NSStringPluralRuleType</string>
			<key>NSStringFormatValueTypeKey</key>
			<string>ld</string>
			<key>one</key>
			<string>an apple</string>
			<key>other</key>
			<string>%ld</string>
		</dict>
	</dict>
	<key>tap</key>
	<dict>
		<key>NSStringDeviceSpecificRuleType</key>
		<dict>
			<key>iphone</key>
			<string>Tap here</string>
			<key>mac</key>
			<dict>
				<key>NSStringLocalizedFormatKey</key>
				<string>%#@clicks@</string>
				<key>clicks</key>
				<dict>
					<key>NSStringFormatSpecTypeKey</key>
					<string>NSStringVariableWidthRuleType</string>
					<key>20</key>
					<string>Click</string>
				</dict>
			</dict>
		</dict>
	</dict>
</dict>
</plist>
"""


def test_a_strings_dictionary_s_formats_and_cases_are_translated_and_a_plural_gets_the_target_s_categories():
    import plistlib

    sent, recorded = recording(lambda texts, *_: [text.upper() for text in texts])
    done = translate_document("Localizable.stringsdict", STRINGSDICT.encode(), recorded, "en", "fr")
    # each case's string, a format holding text besides its variables; not the rules' names and types, not a
    # format that is only its variable (%#@files@), a comment, nor a case holding no text (%ld)
    assert sent == ["two dogs &amp; the cat", "one file", "%d files", "%@ ate %#@apples@ today", "an apple",
                    "Tap here", "Click"]
    assert done.count == 7
    # French has "many" besides "one" and "other": each plural rule gets it, a copy of its "other", before it
    many = "\t\t\t<key>many</key>\n\t\t\t<string>{}</string>\n\t\t\t<key>other</key>"
    assert done.data.decode() == STRINGSDICT.replace(
        "two dogs &amp; the cat", "TWO DOGS &AMP; THE CAT").replace("one file", "ONE FILE").replace(
        "\t\t\t<key>other</key>\n\t\t\t<string>%d files", many.format("%D FILES") + "\n\t\t\t<string>%D FILES").replace(
        "%@ ate %#@apples@ today", "%@ ATE %#@APPLES@ TODAY").replace("an apple", "AN APPLE").replace(
        "\t\t\t<key>other</key>\n\t\t\t<string>%ld", many.format("%ld") + "\n\t\t\t<string>%ld").replace(
        "Tap here", "TAP HERE").replace(">Click<", ">CLICK<")
    assert plistlib.loads(done.data)["files deleted"]["files"]["many"] == "%D FILES"
    # German has English's categories: nothing added
    done = translate_document("Localizable.stringsdict", STRINGSDICT.encode(), recorded, "en", "de")
    assert "<key>many</key>" not in done.data.decode() and done.count == 7


@pytest.mark.parametrize("data, error", [
    ("<plist><dict><key>a</key><dict></plist>", "^cannot read a.stringsdict: not well-formed XML"),
    ("<plist><array><string>two dogs</string></array></plist>",
     r"^cannot read a.stringsdict: not a strings dictionary \(its property list holds no dict\)$"),
    ("<plist><dict><string>two dogs</string></dict></plist>",
     "^cannot read a.stringsdict: a value without its <key> at character 13$"),
    ("<resources/>", r"^cannot read a.stringsdict: not a property list \(no <plist>\)$"),
])
def test_a_strings_dictionary_that_is_none_is_refused_in_one_line(data, error):
    with pytest.raises(Failed, match=error):
        translate_document("a.stringsdict", data.encode(), reversed_words, "en", "de")


def test_a_plural_gets_each_category_the_target_language_has_a_copy_of_its_other():
    plurals = ('<resources>\n    <plurals name="files">\n        <item quantity="one">one file</item>\n'
               '        <item quantity="other">%d files</item>\n    </plurals>\n'
               '    <plurals name="ref"><item quantity="one">the cat</item><item quantity="other">@string/cats</item></plurals>\n'
               '    <plurals name="kept" translatable="false"><item quantity="other">%d</item></plurals>\n</resources>\n')
    upper = lambda texts, *_: [text.upper() for text in texts]  # noqa: E731
    done = translate_document("strings.xml", plurals.encode(), upper, "en", "fr")
    # as Android's lint asks and French catalogs have them (one, many, other): "many" before "other"
    assert done.data.decode() == plurals.replace("one file", "ONE FILE").replace(
        '        <item quantity="other">%d files</item>',
        '        <item quantity="many">%D FILES</item>\n        <item quantity="other">%D FILES</item>').replace(
        '<item quantity="one">the cat</item><item quantity="other">@string/cats</item>',
        '<item quantity="one">THE CAT</item><item quantity="many">@string/cats</item><item quantity="other">@string/cats</item>')
    russian = translate_document("strings.xml", plurals.encode(), upper, "en", "ru").data.decode()
    assert re.findall(r'quantity="(\w+)">%D FILES', russian) == ["few", "many", "other"]
    assert translate_document("strings.xml", plurals.encode(), upper, "en", "de").data.decode() == \
        plurals.replace("one file", "ONE FILE").replace("%d files", "%D FILES").replace("the cat", "THE CAT")
    # a String Catalog: the French localization gets "many", from the source's "other"
    done = translate_document("Localizable.xcstrings", XCSTRINGS.encode(), upper, None, "fr")
    review = lambda value: {"stringUnit": {"state": "needs_review", "value": value}}  # noqa: E731
    assert json.loads(done.data)["strings"]["%lld photos"]["localizations"]["fr"] == {"variations": {"plural": {
        "many": review("%LLD PHOTOS"), "one": review("%LLD PHOTO"), "other": review("%LLD PHOTOS")}}}
    assert json.loads(done.data)["strings"]["apples"]["localizations"]["fr"]["substitutions"]["appleCount"][
        "variations"]["plural"]["many"] == review("%ARG APPLES")


TEMPLATE = r'''# SOME DESCRIPTIVE TITLE.
#, fuzzy
msgid ""
msgstr ""
"Project-Id-Version: demo 1.0\n"
"Language-Team: LANGUAGE <LL@li.org>\n"
"Language: \n"
"Content-Type: text/plain; charset=UTF-8\n"
"Plural-Forms: nplurals=INTEGER; plural=EXPRESSION;\n"

msgid "two dogs"
msgstr ""

msgid "%d file"
msgid_plural "%d files"
msgstr[0] ""
msgstr[1] ""
'''


def test_a_template_translated_gets_the_target_s_plural_forms_as_msginit_writes_them():
    done = translate_document("demo.pot", TEMPLATE.encode(), reversed_words, "en", "fr")
    # msgfmt refuses nplurals=INTEGER once a catalog has a language: its header is French's now
    assert done.data.decode() == TEMPLATE.replace('"Language: \\n"', '"Language: fr\\n"').replace(
        "nplurals=INTEGER; plural=EXPRESSION;", "nplurals=2; plural=(n > 1);").replace(
        'msgid "two dogs"', '#, fuzzy\nmsgid "two dogs"').replace('msgstr ""\n\nmsgid "%d', 'msgstr "DOGS TWO"\n\n#, fuzzy\nmsgid "%d').replace(
        'msgstr[0] ""\nmsgstr[1] ""', 'msgstr[0] "FILE %D"\nmsgstr[1] "FILES %D"')
    # Russian's three forms, its long header on lines as msginit writes it; Japanese's one
    russian = translate_document("demo.pot", TEMPLATE.encode(), reversed_words, "en", "ru").data.decode()
    assert '"Plural-Forms: nplurals=3; plural=(n%10==1 && n%100!=11 ? 0 : n%10>=2 && "\n' \
           '"n%10<=4 && (n%100<10 || n%100>=20) ? 1 : 2);\\n"\n' in russian
    assert russian.endswith('msgstr[0] "FILE %D"\nmsgstr[1] "FILES %D"\nmsgstr[2] "FILES %D"\n')
    japanese = translate_document("demo.pot", TEMPLATE.encode(), reversed_words, "en", "ja").data.decode()
    assert '"Plural-Forms: nplurals=1; plural=0;\\n"' in japanese and japanese.endswith('msgstr[0] "FILE %D"\n')
    # a template with no plural message and no Plural-Forms line gets none
    plain = TEMPLATE.split("\nmsgid \"%d file\"")[0].replace('"Plural-Forms: nplurals=INTEGER; plural=EXPRESSION;\\n"\n', "")
    assert "Plural-Forms" not in translate_document("demo.pot", plain.encode(), reversed_words, "en", "fr").data.decode()
    # a catalog whose header counts its forms keeps them
    german = TEMPLATE.replace("nplurals=INTEGER; plural=EXPRESSION;", "nplurals=2; plural=(n != 1);")
    assert "nplurals=2; plural=(n != 1);" in translate_document("demo.pot", german.encode(), reversed_words, "en",
                                                                 "fr").data.decode()

TOML = r'''# Hugo's i18n/en.toml
home = "two dogs"   # the menu
description = "the cat"
site.title = "two \"dogs\""
tags = ["two dogs", "the cat"]
count = 3

[wordCount]
other = "the cat {{ .WordCount }}"

[readingTime]
description = "how long"
hash = "sha1-abc"
one = 'the cat'
other = """two dogs
play"""

[[i18n]]
id = "two.dogs"
translation = "two dogs play"
'''


def test_a_toml_file_s_strings_are_translated_in_their_styles_its_notes_left_and_plurals_given_the_target_s():
    import tomlkit

    sent, recorded = recording(lambda texts, *_: [text.upper() + " 'q'" for text in texts])
    done = translate_document("en.toml", TOML.encode(), recorded, "en", "fr")
    # a message table's notes left (a top-level "description" is a message), numbers left; each text sent once
    assert sent == ["two dogs", "the cat", 'two "dogs"', "the cat {{ .WordCount }}", "two dogs\nplay", "two dogs play"]
    # every other byte kept (the comments too); a literal string that cannot hold an apostrophe is a basic one;
    # the plural gets French "many" from its "other" ("other" alone is Hugo's message that does not vary)
    q = " 'q'"
    assert done.data.decode() == TOML.replace('"two dogs"   #', f'"TWO DOGS{q}"   #').replace(
        'description = "the cat"', f'description = "THE CAT{q}"').replace(
        r'site.title = "two \"dogs\""', r'site.title = "TWO \"DOGS\"' + q + '"').replace(
        'tags = ["two dogs", "the cat"]', f'tags = ["TWO DOGS{q}", "THE CAT{q}"]').replace(
        '"the cat {{ .WordCount }}"', '"THE CAT {{ .WORDCOUNT }}' + q + '"').replace(
        "one = 'the cat'", f'one = "THE CAT{q}"').replace(
        'other = """two dogs\nplay"""', f'other = """TWO DOGS\nPLAY{q}"""\nmany = """TWO DOGS\nPLAY{q}"""').replace(
        'translation = "two dogs play"', f'translation = "TWO DOGS PLAY{q}"')
    assert tomlkit.parse(done.data.decode())["readingTime"]["many"] == "TWO DOGS\nPLAY 'q'"
    assert done.count == 9
    with pytest.raises(Failed, match=r"^cannot read en.toml: not TOML: "):
        translate_document("en.toml", b'home = "two dogs', recorded, "en", "de")

def test_a_catalog_mixing_line_ends_gets_each_message_written_in_its_own():
    # a message ending in "\r\n" in a file of "\n"s (found by benchmarks/document_fuzz.py: it had been a 500)
    catalog = ('msgid ""\nmsgstr ""\n"Language: de\\n"\n\nmsgid "two dogs"\nmsgstr ""\r\n\nmsgid "the cat"\r\n'
               'msgstr ""\r\n')
    done = translate_document("de.po", catalog.encode(), reversed_words, "en", "de")
    assert done.data.decode() == catalog.replace('msgid "two dogs"\nmsgstr ""', '#, fuzzy\nmsgid "two dogs"\nmsgstr "DOGS TWO"').replace(
        'msgid "the cat"\r\nmsgstr ""', '#, fuzzy\r\nmsgid "the cat"\r\nmsgstr "CAT THE"')

def test_a_string_table_s_empty_target_cells_get_their_row_s_translation_every_other_cell_kept():
    godot = ('keys,en,de,_comment\nGREET,"two dogs, play",,a note\nASK,the cat,Die Katze,\nQUOTE,"""two"" dogs",,\n'
             'EMPTY,,,\n')
    sent, recorded = recording(reversed_words)
    done = translate_document("strings.csv", godot.encode(), recorded, None, "de")
    # the source is the first language column; keys, comments and translated cells left; quoted where they must be
    assert (sent, done.source, done.count) == (["two dogs, play", '"two" dogs'], "en", 2)
    assert done.data.decode() == godot.replace('"two dogs, play",,', '"two dogs, play","PLAY DOGS, TWO",').replace(
        '"""two"" dogs",,', '"""two"" dogs","DOGS ""TWO""",')
    # no column for the target: one at the end, headed as the source's is (Unity's "English(en)"), every cell quoted
    unity = '"Key","Id","English(en)"\r\n"GREET","1","two dogs"\r\n"SHORT"\r\n'
    done = translate_document("Strings.csv", unity.encode(), reversed_words, "en", "de")
    assert done.data.decode() == ('"Key","Id","English(en)","German(de)"\r\n"GREET","1","two dogs","DOGS TWO"\r\n'
                                  '"SHORT",,,\r\n')
    # Godot's plurals: the row's cell the singular's, the rows below the plural's, as many as the target has forms
    plural = 'en,?plural,ru\nthe cat,two dogs,\nplay,,\n'
    done = translate_document("strings.csv", plural.encode(), reversed_words, "en", "ru")
    assert done.data.decode() == 'en,?plural,ru\nthe cat,two dogs,CAT THE\n,,DOGS TWO\n,,DOGS TWO\nplay,,PLAY\n'
    # a tab-separated table; a file that names no language, a source it lacks, a quote never closed: one line
    assert translate_document("s.tsv", b"keys\ten\tde\nA\tthe cat\t\n", reversed_words, "en", "de").data == \
        b"keys\ten\tde\nA\tthe cat\tCAT THE\n"
    with pytest.raises(Failed, match=r"^cannot read s.csv: no column's header names a language"):
        translate_document("s.csv", b"Id,Text\n1,two dogs\n", reversed_words, "en", "de")
    with pytest.raises(Failed, match=r"^s.csv has no column for 'fr'; its languages: en, de$"):
        translate_document("s.csv", godot.encode(), reversed_words, "fr", "de")
    with pytest.raises(Failed, match=r"^cannot read s.csv: the quoted cell on line 2 is never closed$"):
        translate_document("s.csv", b'keys,en\nA,"two dogs\n', reversed_words, "en", "de")


def test_a_json_file_writing_its_characters_escaped_gets_its_translations_escaped_too():
    def german(texts, source, target, fmt):
        return ["Schlie\u00dfen \"jetzt\"" for _ in texts]

    assert translate_document("de.json", b'{"close": "Close \\u2018now\\u2019"}', german, "en", "de").data == \
        b'{"close": "Schlie\\u00dfen \\"jetzt\\""}'
    assert translate_document("de.json", b'{"close": "Close now"}', german, "en", "de").data == \
        '{"close": "Schließen \\"jetzt\\""}'.encode()
    # half a character, which JSON lets a string hold, is written escaped: UTF-8 cannot hold it
    assert translate_document("de.json", '{"close": "é \\ud800"}'.encode(), lambda texts, *_: texts, "en", "de").data \
        == b'{"close": "\\u00e9 \\ud800"}'
    with pytest.raises(Failed, match="^cannot read de.json: not a JSON object or list of strings$"):
        translate_document("de.json", b'"Close"', german, "en", "de")
    with pytest.raises(Failed, match="^cannot read de.json: not JSON: Expecting"):
        translate_document("de.json", b'{"close": "Close",}', german, "en", "de")


ANDROID = r"""<?xml version="1.0" encoding="utf-8"?>
<resources xmlns:xliff="urn:oasis:names:tc:xliff:document:1.2">
    <string name="app_name" translatable="false">two dogs</string>
    <string name="save">Don\'t save <b>now</b></string>
    <string name="quoted">  "the cat's toy"  </string>
    <string name="ref">@string/save</string>
    <plurals name="files">
        <item quantity="one">%d file</item>
    </plurals>
    <string-array name="planets"><item>Venus</item></string-array>
</resources>
"""


def test_android_strings_are_translated_as_markup_and_quotes_a_translation_brings_are_escaped():
    def quoting(texts, source, target, fmt):
        assert fmt == "xml"
        return [text + """ 'x' <i a="1">"y"</i>""" for text in texts]

    done = translate_document("strings.xml", ANDROID.encode(), quoting, "en", "de")
    # aapt refuses a bare quote outside a quoted string, and a bare double quote inside one
    assert done.data.decode() == r"""<?xml version="1.0" encoding="utf-8"?>
<resources xmlns:xliff="urn:oasis:names:tc:xliff:document:1.2">
    <string name="app_name" translatable="false">two dogs</string>
    <string name="save">Don\'t save <b>now</b> \'x\' <i a="1">\"y\"</i></string>
    <string name="quoted">  "the cat's toy 'x' <i a="1">\"y\"</i>"  </string>
    <string name="ref">@string/save</string>
    <plurals name="files">
        <item quantity="one">%d file \'x\' <i a="1">\"y\"</i></item>
    </plurals>
    <string-array name="planets"><item>Venus \'x\' <i a="1">\"y\"</i></item></string-array>
</resources>
"""
    assert done.count == 4  # not the untranslatable string, nor the reference to another
    with pytest.raises(Failed, match="^cannot read layout.xml: not Android string resources"):
        translate_document("layout.xml", b"<LinearLayout/>", quoting, "en", "de")


def test_android_strings_reach_the_service_as_aapt_reads_them_and_go_back_in_its_escapes():
    sent = []

    german = {"Don't save\nnow": 'Nicht "jetzt"\nspeichern', "the folder C:\\tmp": "der Ordner C:\\tmp",
              "two dogs": "@zwei Hunde", "Venus": "VENUS"}

    def recorded(texts, source, target, fmt):
        sent.extend(texts)
        return [german.get(text, "Mars & mehr") for text in texts]

    written = ('<resources>\n    <string-array name="planets">\n        <item>@string/home</item>\n        <item>Venus</item>\n'
               '    </string-array>\n    <!-- <string name="old">Old text</string> -->\n'
               '    <string name="save">Don\\\'t save\\nnow</string>\n    <string name="path">the folder C:\\\\tmp</string>\n'
               '    <string name="wrapped">two\n        dogs</string>\n    <string name="broken">Mars &amp; more</string>\n'
               '</resources>\n')
    done = translate_document("strings.xml", written.encode(), recorded, "en", "de")
    # an array's items each alone (not the reference), no string commented out, escapes read, a line's
    # wrapping one space as aapt reads it
    assert sent == ["Venus", "Don't save\nnow", "the folder C:\\tmp", "two dogs", "Mars &amp; more"]
    assert done.data.decode() == written.replace("<item>Venus", "<item>VENUS").replace(
        "Don\\'t save\\nnow", 'Nicht \\"jetzt\\"\\nspeichern').replace("the folder C:\\\\tmp", "der Ordner C:\\\\tmp").replace(
        "two\n        dogs", "\\@zwei Hunde")
    # a translation that would not read as XML is left out, and named
    assert done.count == 4 and done.refused == ["'Mars &amp; more': its translation would not read as XML; left as it was"]
    # a space aapt would trim or join is escaped, an escaped character XML holds as an entity is sent as one
    done = translate_document("strings.xml", b'<resources><string name="a">Sync:\\u0020</string><string name="b">'
                              b'About \\u0026 FAQ</string></resources>', lambda texts, *_: [t.replace("Sync", "SYNC") for t in texts],
                              "en", "de")
    assert done.data == b'<resources><string name="a">SYNC:\\u0020</string><string name="b">About &amp; FAQ</string></resources>'
    # an entity the file's DTD declares reads as XML
    declared = '<!DOCTYPE resources [<!ENTITY APP "Termux">]>\n<resources><string name="a">Open &APP;</string></resources>'
    done = translate_document("strings.xml", declared.encode(), lambda texts, *_: ["&APP; öffnen"], "en", "de")
    assert done.data.decode() == declared.replace("Open &APP;", "&APP; öffnen") and done.refused == []


def test_a_bilingual_file_that_names_no_target_language_names_it_once_it_holds_translations():
    xliff_1 = ('<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2"><file source-language="en" '
               'original="a"><body><trans-unit id="1"><source>two dogs</source></trans-unit></body></file></xliff>')
    done = translate_document("messages.xlf", xliff_1.encode(), reversed_words, None, "de")
    assert '<file source-language="en" original="a" target-language="de">' in done.data.decode()
    xliff_2 = ('<xliff version="2.0" xmlns="urn:oasis:names:tc:xliff:document:2.0" srcLang="en"><file id="f">'
               '<unit id="1"><segment><source>two dogs</source></segment></unit></file></xliff>')
    done = translate_document("messages.xlf", xliff_2.encode(), reversed_words, None, "de")
    assert '<xliff version="2.0" xmlns="urn:oasis:names:tc:xliff:document:2.0" srcLang="en" trgLang="de">' in \
        done.data.decode()
    ts = ('<TS version="2.1" sourcelanguage="en"><context><name>A</name><message><source>two dogs</source>'
          '<translation type="unfinished"></translation></message></context></TS>')
    done = translate_document("app.ts", ts.encode(), reversed_words, None, "de")
    assert '<TS version="2.1" sourcelanguage="en" language="de">' in done.data.decode()
    # a file that names one keeps it as written
    named = xliff_1.replace('source-language="en"', 'source-language="en" target-language="de-AT"')
    assert 'target-language="de-AT" original="a">' in translate_document("m.xlf", named.encode(), reversed_words, None, "de").data.decode()


def test_a_properties_file_s_values_are_read_from_their_escapes_and_written_back_in_them():
    seen = []

    def german(texts, source, target, fmt):
        seen.extend(texts)
        return [{"Save file": "Datei speichern", "Open {0}\nnow": "{0} jetzt öffnen\nsofort",
                 "one two": "eins zwei", "Café": "Café", "Can't open {0}": "Kann {0} nicht öffnen, it's",
                 "{0} isn't empty": "{0} ist nicht leer, it's"}[t] for t in texts]

    written = ("# a comment = no value\r\n! another\r\nsave=Save file\r\nopen : Open {0}\\nnow\r\n"
               "long = one \\\r\n    two\r\ncafe=Caf\\u00e9\r\nempty=\r\nerror=Can't open {0}\r\nfull={0} isn''t empty\r\n")
    done = translate_document("Messages.properties", written.encode("ascii"), german, "en", "de")
    # a MessageFormat pattern's apostrophe reaches the service single, whether its file doubled it or not
    assert seen == ["Save file", "Open {0}\nnow", "one two", "Café", "Can't open {0}", "{0} isn't empty"]
    # an ASCII file stays ASCII (Java before 9 reads properties in ISO-8859-1); MessageFormat's apostrophe doubled
    assert done.data.decode("ascii") == (
        "# a comment = no value\r\n! another\r\nsave=Datei speichern\r\nopen : {0} jetzt \\u00f6ffnen\\nsofort\r\n"
        "long = eins zwei\r\ncafe=Caf\\u00e9\r\nempty=\r\nerror=Kann {0} nicht \\u00f6ffnen, it''s\r\n"
        "full={0} ist nicht leer, it''s\r\n")
    assert done.count == 6


def test_an_apple_strings_file_s_values_are_translated_its_keys_and_comments_left():
    def german(texts, source, target, fmt):
        return [{'Hello "world"': 'Hallo „Welt" ', "Line\nTwo": "Zeile\nZwei", "Plain": "Schlicht"}[t] for t in texts]

    written = ('/* The title; "x" = "y"; */\n"title" = "Hello \\"world\\"";\n// "a" = "b";\n'
               '"multi" = "Line\\nTwo";\nplain_key = "Plain";\n"empty" = "";\n')
    done = translate_document("Localizable.strings", written.encode(), german, "en", "de")
    assert done.data.decode() == ('/* The title; "x" = "y"; */\n"title" = "Hallo „Welt\\" ";\n// "a" = "b";\n'
                                  '"multi" = "Zeile\\nZwei";\nplain_key = "Schlicht";\n"empty" = "";\n')
    assert done.count == 3


def test_a_catalog_whose_message_is_broken_by_a_blank_line_is_written_whole():
    # gettext reads a blank line as space; the paragraph-wise splice cannot: polib writes the catalog
    written = b'msgid ""\nmsgstr ""\n"Language: de\\n"\n\n"Content-Type: text/plain; charset=UTF-8\\n"\n\nmsgid "Open"\nmsgstr ""\n'
    done = translate_document("de.po", written, reversed_words, "en", None)
    assert done.count == 1 and b'#, fuzzy\nmsgid "Open"\nmsgstr "OPEN"\n' in done.data


PAGE = """<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><title>two dogs</title><style>p { color: red }</style></head>
<body>
<h1>two dogs</h1>
<p>two dogs play in the <b>snow</b>.</p>
<ul><li>the cat<li>in the snow</ul>
<script>var dogs = 1;</script>
</body>
</html>
"""


def test_an_html_page_is_sent_whole_where_it_fits_and_as_its_largest_elements_that_fit_where_not(monkeypatch):
    sent = []

    def marked(texts, source, target, fmt):
        assert fmt == "html"
        sent.extend(texts)
        return [text.replace("dogs", "Hunde").replace("cat", "Katze") for text in texts]

    done = translate_document("index.html", PAGE.encode(), marked, None, "de")
    # what its <html> holds, whole: the start tag's language is the target's, edited apart
    held = PAGE[PAGE.index('<html lang="en">') + len('<html lang="en">'):PAGE.index("</html>")]
    assert sent == [held] and done.source == "en" and done.count == 1
    translated = PAGE.replace('lang="en"', 'lang="de"').replace("dogs", "Hunde").replace("cat", "Katze")
    assert done.data.decode() == translated
    sent.clear()
    monkeypatch.setattr("service.documents.prose.HTML_PART_CHARS", 60)
    done = translate_document("index.html", PAGE.encode(), marked, None, "de")
    # the head's title (its style never sent), the body's blocks up to the list, the list; no script
    assert sent == ['<meta charset="utf-8"><title>two dogs</title>',
                    "\n<h1>two dogs</h1>\n<p>two dogs play in the <b>snow</b>.</p>\n",
                    "<ul><li>the cat<li>in the snow</ul>"]
    assert done.data.decode() == translated.replace("var Hunde", "var dogs")


def test_a_part_of_a_page_the_service_refuses_is_sent_again_as_its_elements_and_the_text_between():
    sent = []

    def strict(texts, source, target, fmt):
        # what the service does with markup whose elements do not nest (browsers forgive it)
        sent.extend(texts)
        for text in texts:
            opened = []
            for closing, name in re.findall(r"<(/?)(\w+)", text):
                if name in ("br", "img", "meta"):
                    continue
                if not closing:
                    opened.append(name)
                elif not opened or opened.pop() != name:
                    raise Refused(f"malformed html: </{name}>", "text.0")
            if opened:
                raise Refused(f"malformed html: <{opened[-1]}> is never closed", "text.0")
        return [text.replace("save", "speichern").replace("open", "öffnen") for text in texts]

    page = "<html><body><div><p>save it</p><p>open <b>the folder</p></body></html>"
    done = translate_document("a.html", page.encode(), strict, "en", "de")
    # each part refused alone is sent as its elements: what the page's <html> holds, its body's, then both
    # paragraphs (together, then each alone: which one?), then the one's elements and text, then the bold's text
    body = page[len("<html>"):-len("</html>")]
    assert sent == [body, body[len("<body>"):-len("</body>")], "<p>save it</p>", "<p>open <b>the folder</p>",
                    "<p>save it</p>", "<p>open <b>the folder</p>", "open ", "<b>the folder", "open ", "<b>the folder",
                    "the folder"]
    assert done.data.decode() == "<html><body><div><p>speichern it</p><p>öffnen <b>the folder</p></body></html>"
    assert done.refused == [] and done.count == 3  # the first paragraph, "open ", "the folder"
    # the progress is the page's: its one part done, however many finer parts that took
    reported = []
    translate_document("a.html", page.encode(), strict, "en", "de", progress=lambda k, n: reported.append((k, n)))
    assert reported == [(1, 1)]
    # an element whose only text is an attribute a reader sees is a part too
    sent.clear()
    page = '<div><p>save it</p><img src="a.png" alt="open it"><br></span></div>'
    done = translate_document("c.html", page.encode(), strict, "en", "de")
    assert sent == [page, "<p>save it</p>", '<img src="a.png" alt="open it">']
    assert done.data.decode() == '<div><p>speichern it</p><img src="a.png" alt="öffnen it"><br></span></div>'
    with pytest.raises(Failed, match="^nothing in b.html could be translated: 'save</b>': malformed html: </b>$"):
        translate_document("b.html", b"save</b>", strict, "en", "de")


def test_a_character_a_file_s_encoding_lacks_is_written_as_the_format_escapes_it_or_the_message_is_left():
    def euro(texts, source, target, fmt):
        return ["5 € Gebühr" for _ in texts]

    latin = b'<?xml version="1.0" encoding="iso-8859-1"?><resources><string name="a">fee</string></resources>'
    assert translate_document("strings.xml", latin, euro, "en", "de").data == latin.replace(
        b">fee<", ">5 &#8364; Gebühr<".encode("latin-1"))
    assert translate_document("M.properties", "a=fee\nb=Straße\n".encode("latin-1"), euro, "en", "de").data == \
        "a=5 \\u20ac Gebühr\nb=5 \\u20ac Gebühr\n".encode("latin-1")
    catalog = ('msgid ""\nmsgstr ""\n"Language: de\\n"\n"Content-Type: text/plain; charset=ISO-8859-1\\n"\n\n'
               'msgid "fee"\nmsgstr ""\n').encode("latin-1")
    # gettext has no escape for it: the message stays untranslated, named
    with pytest.raises(Failed, match=r"^nothing in de.po could be translated: 'fee': the catalog's charset ISO-8859-1 "
                                     r"cannot hold its translation \(msgconv -t UTF-8 converts the catalog\)$"):
        translate_document("de.po", catalog, euro, "en", "de")

SDLXLIFF = """\ufeff<?xml version="1.0" encoding="utf-8"?><xliff xmlns:sdl="http://sdl.com/FileTypes/SdlXliff/1.0" version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2">
<file original="a.html" source-language="en-US" datatype="x-sdlfilterframework2" target-language="de-DE"><body>
<trans-unit id="u1"><source>two dogs play. <x id="1"/>the cat</source><seg-source><mrk mtype="seg" mid="1">two dogs play.</mrk> <mrk mtype="seg" mid="2"><x id="1"/>the cat</mrk></seg-source><target><mrk mtype="seg" mid="1" /> <mrk mtype="seg" mid="2"><x id="1"/></mrk></target><sdl:seg-defs><sdl:seg id="1" origin="not-translated" /><sdl:seg id="2" /></sdl:seg-defs></trans-unit>
<trans-unit id="u2"><source>the dog</source><seg-source><mrk mtype="seg" mid="3">the dog</mrk></seg-source><target><mrk mtype="seg" mid="3">der Hund</mrk></target><sdl:seg-defs><sdl:seg id="3" conf="Translated" /></sdl:seg-defs></trans-unit>
<trans-unit id="u3"><source>the cat</source><seg-source><mrk mtype="seg" mid="4"><mrk mtype="x-sdl-comment" sdl:cid="c1">the</mrk> cat</mrk></seg-source><target><mrk mtype="seg" mid="4"></mrk></target><sdl:seg-defs><sdl:seg id="4" locked="true"><sdl:value key="k">v</sdl:value></sdl:seg></sdl:seg-defs></trans-unit>
<trans-unit id="u4"><source>two dogs</source><seg-source><mrk mtype="seg" mid="5">two dogs</mrk></seg-source></trans-unit>
</body></file></xliff>
"""


def test_an_sdlxliff_segment_nobody_translated_gets_its_translation_in_its_mrk_confirmed_as_a_draft():
    sent, recorded = recording(upper_outside_tags)
    done = translate_document("page.html.sdlxliff", SDLXLIFF.encode("utf-8"), recorded, None, None)
    # each segment of a unit alone; its tags as SDL copied them; not one translated or locked; a unit with no
    # target (Okapi writes them so) gets one, its seg-source's segments emptied and filled
    assert sent == ["two dogs play.", '<x id="1"/>the cat', "two dogs"]
    assert (done.source, done.target, done.count, done.skipped) == ("en", "de", 3, 0)
    assert done.data.decode("utf-8") == SDLXLIFF.replace(
        '<mrk mtype="seg" mid="1" />', '<mrk mtype="seg" mid="1">TWO DOGS PLAY.</mrk>').replace(
        '<mrk mtype="seg" mid="2"><x id="1"/></mrk></target>', '<mrk mtype="seg" mid="2"><x id="1"/>THE CAT</mrk></target>').replace(
        '<sdl:seg id="1" origin="not-translated" />', '<sdl:seg id="1" conf="Draft" origin="mt" origin-system="phrasal" />').replace(
        '<sdl:seg id="2" />', '<sdl:seg id="2" conf="Draft" origin="mt" origin-system="phrasal" />').replace(
        '<mrk mtype="seg" mid="5">two dogs</mrk></seg-source>', '<mrk mtype="seg" mid="5">two dogs</mrk></seg-source>'
        '<target state="needs-review-translation"><mrk mtype="seg" mid="5">TWO DOGS</mrk></target>')
    unmarked = translate_document("page.html.sdlxliff", SDLXLIFF.encode("utf-8"), upper_outside_tags, None, None,
                                  mark=False)
    assert unmarked.data.decode("utf-8").count('conf="Translated" origin="mt"') == 2
    # another tool's file segmented again (Okapi's): the target's state, once; a copy in the state new translated
    okapi = ('<xliff version="1.2"><file source-language="en" target-language="de"><body><trans-unit id="1">'
             '<source>two dogs play. the cat</source><seg-source><mrk mid="0" mtype="seg">two dogs play.</mrk> '
             '<mrk mid="1" mtype="seg">the cat</mrk></seg-source><target state="new"><mrk mid="0" mtype="seg">two dogs '
             'play.</mrk> <mrk mid="1" mtype="seg">the cat</mrk></target></trans-unit></body></file></xliff>')
    done = translate_document("ui.xlf", okapi.encode(), upper_outside_tags, None, None)
    assert done.data.decode() == okapi.replace('state="new"', 'state="needs-review-translation"').replace(
        '<mrk mid="0" mtype="seg">two dogs play.</mrk> <mrk mid="1" mtype="seg">the cat</mrk></target>',
        '<mrk mid="0" mtype="seg">TWO DOGS PLAY.</mrk> <mrk mid="1" mtype="seg">THE CAT</mrk></target>')

def test_an_xliff_file_whose_elements_carry_a_namespace_prefix_is_read_and_written_with_it():
    prefixed = ('<?xml version="1.0" encoding="UTF-8"?>\n<xlf:xliff version="1.2" xmlns:xlf="urn:oasis:names:tc:xliff:document:1.2">\n'
                '<xlf:file original="a" source-language="en"><xlf:body>\n'
                '  <xlf:trans-unit id="1">\n    <xlf:source>two <xlf:g id="1">dogs</xlf:g> play</xlf:source>\n  </xlf:trans-unit>\n'
                '  <xlf:trans-unit id="2"><xlf:source>the cat</xlf:source><xlf:seg-source><xlf:mrk mtype="seg" mid="1">the cat'
                '</xlf:mrk></xlf:seg-source></xlf:trans-unit>\n'
                '</xlf:body></xlf:file>\n</xlf:xliff>\n')
    done = translate_document("ui.xlf", prefixed.encode(), upper_outside_tags, "en", "de")
    # its targets in its prefix (a <target> in XLIFF's namespace without one would be another element), the file
    # naming the language it now holds
    assert done.data.decode() == prefixed.replace('source-language="en">', 'source-language="en" target-language="de">').replace(
        '<xlf:source>two <xlf:g id="1">dogs</xlf:g> play</xlf:source>\n',
        '<xlf:source>two <xlf:g id="1">dogs</xlf:g> play</xlf:source>\n'
        '    <xlf:target state="needs-review-translation">TWO <xlf:g id="1">DOGS</xlf:g> PLAY</xlf:target>\n').replace(
        '</xlf:seg-source>', '</xlf:seg-source><xlf:target state="needs-review-translation"><xlf:mrk mtype="seg" mid="1">'
        'THE CAT</xlf:mrk></xlf:target>')
    assert done.count == 2


def test_an_xliff_2_segment_translated_is_in_the_state_translated_its_tool_s_substate_dropped():
    xlf = ('<xliff xmlns="urn:oasis:names:tc:xliff:document:2.0" version="2.0" srcLang="en" trgLang="de">'
           '<file id="f"><unit id="u"><segment id="s" state="initial" subState="acme:new"><source>two dogs play</source>'
           '</segment></unit><unit id="v"><segment state="final"><source>the cat</source><target>die Katze</target>'
           '</segment></unit></file></xliff>')
    done = translate_document("ui.xliff", xlf.encode(), reversed_words, None, None)
    assert done.data.decode() == xlf.replace(
        '<segment id="s" state="initial" subState="acme:new"><source>two dogs play</source>',
        '<segment id="s" state="translated"><source>two dogs play</source><target>PLAY DOGS TWO</target>')
    assert (done.count, done.marked) == (1, "for review")


MARKDOWN = """---
title: Help
---

# two dogs

play in the *snow*.
see [the cat][cat].

```bash
$ two dogs

play
```

    indented code

- two dogs

    the cat of the item.

| Key | Action |
|-----|--------|
| `Ctrl+S` | two dogs \\| play |

[cat]: https://example.org/cat
"""


def test_a_markdown_file_s_prose_is_translated_its_code_front_matter_and_link_definitions_left():
    done = translate_document("help.md", MARKDOWN.encode(), reversed_words, "en", "de")
    # (the fake reverses each line's words: the service keeps headings, lists and links in place)
    assert done.data.decode() == MARKDOWN.replace("# two dogs", "DOGS TWO #").replace(
        "play in the *snow*.\nsee [the cat][cat].", "*SNOW*. THE IN PLAY\nCAT][CAT]. [THE SEE").replace(
        "- two dogs", "DOGS TWO -").replace("    the cat of the item.", "ITEM. THE OF CAT THE").replace(
        "| Key | Action |\n|-----|--------|\n| `Ctrl+S` | two dogs \\| play |",
        "| ACTION | KEY |\n|-----|--------|\n| PLAY \\| DOGS TWO | `CTRL+S` |")
    assert done.count == 5  # the heading, the paragraph, the item and its paragraph, the table


RESX = """<?xml version="1.0" encoding="utf-8"?>
<root>
  <resheader name="resmimetype"><value>text/microsoft-resx</value></resheader>
  <data name="Greeting" xml:space="preserve">
    <value>two dogs &amp; the cat</value>
    <comment>the start page's title</comment>
  </data>
  <data name="Icon" type="System.Resources.ResXFileRef, System.Windows.Forms">
    <value>icon.png;System.Drawing.Bitmap</value>
  </data>
  <data name="&gt;&gt;button1.Name" xml:space="preserve"><value>button1</value></data>
  <data name="Empty"><value></value></data>
</root>
"""


def test_a_markdown_list_item_s_fenced_code_is_left_and_an_html_block_is_sent_as_html():
    # as READMEs write them: a fence indented under a list item, a centred title in html
    readme = ('<h3 align="center">two dogs <i>play</i></h3>\n\n- the cat sleeps:\n\n    ```shell\n    the cat --sleep\n'
              '    ```\n\n<!-- a note -->\n* in the snow\n')
    sent = []

    def by_format(texts, source, target, fmt):
        sent.extend((fmt, text) for text in texts)
        return upper_in_html(texts, source, target, "html") if fmt == "html" else [text.upper() for text in texts]

    done = translate_document("README.md", readme.encode(), by_format, "en", "de")
    assert sent == [("html", '<h3 align="center">two dogs <i>play</i></h3>'), ("text", "- the cat sleeps:"),
                    ("text", "<!-- a note -->\n* in the snow")]
    assert "    ```shell\n    the cat --sleep\n    ```" in done.data.decode()
    assert done.data.decode().startswith('<h3 align="center">TWO DOGS <i>PLAY</i></h3>')
    # a tag written over lines goes on one: its line's markup is whole
    badges = '[<img src="a.png"\n      alt="two dogs">](https://x.org)\n[<img src="b.png" alt="the cat">](https://y.org)\n'
    sent.clear()
    done = translate_document("README.md", badges.encode(), by_format, "en", "de")
    assert sent == [("text", '[<img src="a.png" alt="two dogs">](https://x.org)\n[<img src="b.png" alt="the cat">](https://y.org)')]


def test_a_markdown_list_item_s_indented_code_is_left_and_its_indented_paragraphs_translated():
    # CommonMark's reading (markdown-it-py): code is indented four more than its item's text; before,
    # a block indented under "1. " was translated, and an item's second paragraph indented four left
    readme = ("1. install it:\n\n        pip install phrasal\n\n   then run it\n\n- the cat\n    sleeps\n\n"
              "    in the snow\n\n        the cat --sleep\n\n> quoted:\n>\n>     the cat --sleep\n")
    sent, recorded = recording(lambda texts, *_: [text.upper() for text in texts])
    done = translate_document("README.md", readme.replace("\n", "\r\n").encode(), recorded, "en", "de")
    assert sent == ["1. install it:", "   then run it", "- the cat\n    sleeps", "    in the snow", "> quoted:\n>"]
    assert done.data.decode() == readme.replace("\n", "\r\n").replace("install it:", "INSTALL IT:").replace(
        "then run it", "THEN RUN IT").replace("the cat\r\n    sleeps", "THE CAT\r\n    SLEEPS").replace(
        "in the snow", "IN THE SNOW").replace("quoted:", "QUOTED:")


def test_a_resx_file_s_string_values_are_translated_its_typed_values_and_comments_left():
    sent = []

    def german(texts, source, target, fmt):
        sent.extend(texts)
        assert fmt == "xml"
        return ["zwei Hunde &amp; die Katze"]

    done = translate_document("Strings.resx", RESX.encode(), german, "en", "de")
    assert sent == ["two dogs &amp; the cat"] and done.count == 1
    assert done.data.decode() == RESX.replace("<value>two dogs &amp; the cat</value>",
                                              "<value>zwei Hunde &amp; die Katze</value>")
    # UWP's and WinUI's .resw is the same format
    assert translate_document("Resources.resw", RESX.encode(), german, "en", "de").data == done.data


YAML = """# Rails' locale file
en:
  hello: two dogs
  count: 3
  enabled: true
  errors:
    blank: "can't be \\"blank\\""
    taken: 'isn''t the cat'   # a comment stays
  menu:
    - the cat
    - "two dogs"
  help: |
    two dogs play
    in the snow
  folded: >-
    the cat
    sleeps
  long: a plain text
    going on
  alias: &anchor the cat
  empty:
"""


def test_a_yaml_file_s_strings_are_translated_in_their_styles_and_rails_locale_key_renamed():
    yaml = pytest.importorskip("yaml")

    def quoting(texts, source, target, fmt):
        return [text.replace("\n", " / ").upper() + ": it's" for text in texts]

    done = translate_document("en.yml", YAML.encode(), quoting, None, "de")
    assert done.source == "en" and done.count == 9
    assert yaml.safe_load(done.data) == {"de": {
        "hello": "TWO DOGS: it's", "count": 3, "enabled": True,
        "errors": {"blank": "CAN'T BE \"BLANK\": it's", "taken": "ISN'T THE CAT: it's"},
        "menu": ["THE CAT: it's", "TWO DOGS: it's"],
        "help": "TWO DOGS PLAY / IN THE SNOW: it's\n", "folded": "THE CAT SLEEPS: it's",
        "long": "A PLAIN TEXT GOING ON: it's", "alias": "THE CAT: it's", "empty": None}}
    # each in the style it was written in, quoted where a plain one would not read so
    assert "  taken: 'ISN''T THE CAT: it''s'   # a comment stays\n" in done.data.decode()
    assert '  hello: "TWO DOGS: it\'s"\n' in done.data.decode()


def test_a_yaml_scalar_on_several_lines_is_translated_as_the_text_it_reads_as_and_written_on_one():
    yaml = pytest.importorskip("yaml")
    written = ('en:\n  a: "two\n    dogs: play"\n  b: the cat\n  c:\n    two dogs\n    - play\n  d: two\n    dogs\n'
               '  e:\n     two dogs\n    - play\n  f:\n    - - the cat\n  g#h: the cat\n  i:\n   - the cat\n    - play\n')
    done = translate_document("en.yml", written.encode(), reversed_words, None, "de")
    assert done.data.decode() == ('de:\n  a: "PLAY DOGS: TWO"\n  b: CAT THE\n  c:\n    PLAY - DOGS TWO\n  d: DOGS TWO\n'
                                  '  e:\n     PLAY - DOGS TWO\n  f:\n    - - CAT THE\n  g#h: CAT THE\n  i:\n   - PLAY - CAT THE\n')
    assert yaml.safe_load(done.data) == {"de": {"a": "PLAY DOGS: TWO", "b": "CAT THE", "c": "PLAY - DOGS TWO",
                                                "d": "DOGS TWO", "e": "PLAY - DOGS TWO", "f": [["CAT THE"]],
                                                "g#h": "CAT THE", "i": ["PLAY - CAT THE"]}}


def test_a_yaml_file_s_flow_collections_anchors_tags_and_folded_lines_are_read_as_yaml_reads_them():
    yaml = pytest.importorskip("yaml")

    def listing(texts, source, target, fmt):
        return [", ".join(text.upper().split("\n")) if "\n" not in text else text.upper() for text in texts]

    written = ("menu: [the cat, 'two dogs', {title: in the snow}]\nbase: &base\n  title: !!str the cat\ncopy: *base\n"
               "folded: >\n  two dogs\n\n  the cat\nsize: [1, on, ~]\n")
    done = translate_document("menu.yml", written.encode(), listing, "en", "de")
    assert done.data.decode() == ("menu: [THE CAT, 'TWO DOGS', {title: IN THE SNOW}]\nbase: &base\n  title: !!str THE CAT\n"
                                  "copy: *base\nfolded: >\n  TWO DOGS\n\n  THE CAT\nsize: [1, on, ~]\n")
    assert done.count == 5  # the alias is its anchor's node, translated there
    # a translation with a comma is quoted in a flow collection, where a plain one would be two
    done = translate_document("menu.yml", b"menu: [two dogs]\n", lambda texts, *_: ["zwei, Hunde"], "en", "de")
    assert yaml.safe_load(done.data) == {"menu": ["zwei, Hunde"]}
    with pytest.raises(Failed, match="^cannot read menu.yml: not YAML \\(line 2: "):
        translate_document("menu.yml", b"menu: [two dogs\nsize: 3\n", listing, "en", "de")
    # lists as deep as libyaml reads them (beyond Python's recursion limit a walk by recursion met),
    # and deeper, refused in one line
    deep = ("menu: " + "[" * 999 + "two dogs" + "]" * 999 + "\n").encode()
    assert translate_document("menu.yml", deep, listing, "en", "de").data == deep.replace(b"two dogs", b"TWO DOGS")
    with pytest.raises(Failed, match="^cannot read menu.yml: not YAML \\(line 1: exceeded maximum nesting depth\\)$"):
        translate_document("menu.yml", deep.replace(b"[", b"[[", 1).replace(b"]", b"]]", 1), listing, "en", "de")


def test_a_rails_locale_s_names_are_left_its_text_translated():
    # as rails-i18n's en.yml writes them: a date's parts' order (Rails reads them as symbols), a symbol
    written = ("---\nen:\n  date:\n    order:\n    - year\n    - month\n    abbr_day_names:\n    - Sun\n"
               "  time:\n    am: am\n    default: :long\n  helpers:\n    select:\n      prompt: Please select\n")
    done = translate_document("en.yml", written.encode(), reversed_words, None, "de")
    assert done.data.decode() == written.replace("en:", "de:").replace("- Sun", "- SUN").replace(
        "am: am", "am: AM").replace("prompt: Please select", "prompt: SELECT PLEASE")
    # outside a Rails locale file, a list is text like any other
    assert translate_document("menu.yml", b"order:\n- year\n", reversed_words, "en", "de").data == b"order:\n- YEAR\n"


WORD = ('<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
        '<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main" '
        'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"><w:body>'
        '<w:p><w:pPr><w:pStyle w:val="Heading1"/></w:pPr><w:r><w:rPr><w:lang w:val="en-US"/></w:rPr>'
        '<w:t>two dogs</w:t></w:r></w:p>'
        '<w:p><w:r><w:t xml:space="preserve">open the </w:t></w:r><w:r><w:rPr><w:b/></w:rPr><w:t>file</w:t></w:r>'
        '<w:proofErr w:type="spellStart"/><w:r><w:t xml:space="preserve"> now</w:t></w:r>'
        '<w:r><w:t xml:space="preserve"> &amp; play</w:t></w:r></w:p>'
        '<w:p><w:r><w:t xml:space="preserve">see the </w:t></w:r><w:hyperlink r:id="rId5"><w:r><w:rPr>'
        '<w:rStyle w:val="Hyperlink"/></w:rPr><w:t>guide</w:t></w:r></w:hyperlink><w:r><w:tab/></w:r></w:p>'
        '<w:p/><w:sectPr/></w:body></w:document>')


def office_file(part: str, xml: str, more: dict[str, str] | None = None) -> bytes:
    """A zip holding `part` (and the parts `more` names), beside a content-types part and a picture."""
    written = io.BytesIO()
    with zipfile.ZipFile(written, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        archive.writestr(part, xml)
        for name, text in (more or {}).items():
            archive.writestr(name, text)
        archive.writestr("media/image1.png", b"\\x89PNG not translated")
    return written.getvalue()


def recording(translate):
    """The texts sent, and `translate` recording them there."""
    sent = []

    def recorded(texts, source, target, fmt):
        sent.extend(texts)
        return translate(texts, source, target, fmt)
    return sent, recorded


def upper_outside_tags(texts, source, target, fmt):
    """Words upper-cased, markup as it was: what the service's placement keeps."""
    assert fmt == "xml"
    return [re.sub(r"(^|>)([^<]+)", lambda m: m.group(1) + m.group(2).upper().replace("&AMP;", "&amp;"), text)
            for text in texts]


def test_a_word_document_s_paragraphs_are_translated_their_runs_formatting_kept():
    sent, recorded = recording(upper_outside_tags)

    done = translate_document("guide.docx", office_file("word/document.xml", WORD), recorded, "en", "de")
    # the paragraph's own formatting goes as text, the rest as elements the service places
    assert sent == ["two dogs", 'open the <g id="1">file</g><x id="2"/> now &amp; play',
                    'see the <g id="1">guide</g><x id="2"/>']
    archive = zipfile.ZipFile(io.BytesIO(done.data))
    assert archive.namelist() == ["[Content_Types].xml", "word/document.xml", "media/image1.png"]
    assert archive.read("media/image1.png") == b"\\x89PNG not translated"
    assert archive.read("word/document.xml").decode() == WORD.replace(
        '<w:lang w:val="en-US"/></w:rPr><w:t>two dogs</w:t>',
        '<w:lang w:val="de"/></w:rPr><w:t xml:space="preserve">TWO DOGS</w:t>').replace(
        '<w:r><w:t xml:space="preserve">open the </w:t></w:r><w:r><w:rPr><w:b/></w:rPr><w:t>file</w:t></w:r>'
        '<w:proofErr w:type="spellStart"/><w:r><w:t xml:space="preserve"> now</w:t></w:r>'
        '<w:r><w:t xml:space="preserve"> &amp; play</w:t></w:r>',
        '<w:r><w:t xml:space="preserve">OPEN THE </w:t></w:r><w:r><w:rPr><w:b/></w:rPr>'
        '<w:t xml:space="preserve">FILE</w:t></w:r><w:proofErr w:type="spellStart"/>'
        '<w:r><w:t xml:space="preserve"> NOW &amp; PLAY</w:t></w:r>').replace(
        '<w:r><w:t xml:space="preserve">see the </w:t></w:r><w:hyperlink r:id="rId5"><w:r><w:rPr>'
        '<w:rStyle w:val="Hyperlink"/></w:rPr><w:t>guide</w:t></w:r></w:hyperlink>',
        '<w:r><w:t xml:space="preserve">SEE THE </w:t></w:r><w:hyperlink r:id="rId5"><w:r><w:rPr>'
        '<w:rStyle w:val="Hyperlink"/></w:rPr><w:t xml:space="preserve">GUIDE</w:t></w:r></w:hyperlink>')
    assert (done.count, done.unit) == (3, "paragraphs")


def test_a_word_document_through_the_service_keeps_its_formatting_on_the_words_translated(tmp_path):
    with live_server(app_with(tmp_path), ready_within_s=30) as address:
        status, body, _ = multipart(f"{address}/libretranslate/translate_file", {"source": "en", "target": "de"},
                                    "guide.docx", office_file("word/document.xml", WORD))
        assert status == 200, body
        written = zipfile.ZipFile(io.BytesIO(fetch(body["translatedFileUrl"])[1])).read("word/document.xml")
    # the fake reverses each sentence's words; the bold run still holds "file", the link "guide"
    text = written.decode()
    assert '<w:rPr><w:b/></w:rPr><w:t xml:space="preserve">FILE</w:t>' in text
    assert '<w:rStyle w:val="Hyperlink"/></w:rPr><w:t xml:space="preserve">GUIDE</w:t>' in text
    assert "<w:tab/>" in text and '<w:proofErr w:type="spellStart"/>' in text
    ElementTree.fromstring(written)


def test_a_paragraph_whose_translation_lost_its_markup_is_left_as_it_was():
    def broken(texts, source, target, fmt):
        return [text.replace("</g>", "") for text in texts]

    done = translate_document("guide.docx", office_file("word/document.xml", WORD), broken, "en", "de")
    written = zipfile.ZipFile(io.BytesIO(done.data)).read("word/document.xml").decode()
    assert done.count == 1 and '<w:t>file</w:t>' in written and "<w:t>guide</w:t>" in written


def test_a_word_run_s_tabs_breaks_and_page_marks_and_a_link_s_several_runs_are_read_around_their_text():
    # as Word writes them: a page's first run marks where the page began, a tab or a line break in a
    # run of text, a link's text in runs split by editing sessions, a run pretty-printed
    w = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
    document = (f'<w:document {w}><w:body>'
                '<w:p><w:r w:rsidR="1"><w:lastRenderedPageBreak/><w:t>two dogs</w:t></w:r><w:r w:rsidR="2"><w:t> play</w:t></w:r></w:p>'
                '<w:p><w:r><w:t>the cat</w:t><w:tab/><w:t>sleeps</w:t><w:br/></w:r></w:p>'
                '<w:p><w:hyperlink w:anchor="a"><w:r><w:rPr><w:rStyle w:val="Link"/></w:rPr><w:t>in the</w:t></w:r>'
                '<w:r w:rsidR="3"><w:rPr><w:rStyle w:val="Link"/></w:rPr><w:lastRenderedPageBreak/><w:t xml:space="preserve"> snow'
                '</w:t></w:r></w:hyperlink></w:p>'
                '<w:p><w:r>\n  <w:rPr><w:b/></w:rPr>\n  <w:t>open it</w:t>\n</w:r></w:p></w:body></w:document>')
    sent = []

    def stopped(texts, source, target, fmt):  # upper-cased, a full stop after the markup
        sent.extend(texts)
        return [text + "." for text in upper_outside_tags(texts, source, target, fmt)]

    done = translate_document("a.docx", office_file("word/document.xml", document), stopped, "en", "de")
    assert sent == ['<x id="0"/>two dogs play', 'the cat<x id="1"/>sleeps<x id="3"/>', '<g id="0">in the snow</g>', "open it"]
    written = zipfile.ZipFile(io.BytesIO(done.data)).read("word/document.xml").decode()
    assert ('<w:p><w:r w:rsidR="1"><w:lastRenderedPageBreak/></w:r><w:r w:rsidR="1"><w:t xml:space="preserve">TWO DOGS PLAY.'
            '</w:t></w:r></w:p>') in written
    assert ('<w:p><w:r><w:t xml:space="preserve">THE CAT</w:t></w:r><w:r><w:tab/></w:r><w:r><w:t xml:space="preserve">SLEEPS'
            '</w:t></w:r><w:r><w:br/></w:r><w:r><w:t xml:space="preserve">.</w:t></w:r></w:p>') in written
    # a paragraph that is a link alone: text the translation puts outside it goes in the link
    assert ('<w:hyperlink w:anchor="a"><w:r><w:rPr><w:rStyle w:val="Link"/></w:rPr><w:t xml:space="preserve">IN THE SNOW'
            '</w:t></w:r></w:hyperlink><w:hyperlink w:anchor="a"><w:r><w:rPr><w:rStyle w:val="Link"/></w:rPr>'
            '<w:t xml:space="preserve">.</w:t></w:r></w:hyperlink>') in written
    assert "<w:b/></w:rPr><w:t xml:space=\"preserve\">OPEN IT.</w:t>" in written
    assert done.count == 4 and done.refused == []
    ElementTree.fromstring(written)


def test_a_document_s_own_element_that_looks_like_the_reader_s_mark_is_kept_as_an_element():
    # The reader marks where a paragraph holds another (a text box's) with an element of its own; a
    # document holding that element itself had failed with an IndexError (an internal error)
    document = ('<w:document xmlns:w="w"><w:body><w:p><w:r><w:t>two dogs</w:t></w:r><w:p phrasal-held="7"/></w:p>'
                '</w:body></w:document>')
    done = translate_document("a.docx", office_file("word/document.xml", document), upper_outside_tags, "en", "de")
    assert zipfile.ZipFile(io.BytesIO(done.data)).read("word/document.xml").decode() == document.replace(
        "<w:t>two dogs</w:t>", '<w:t xml:space="preserve">TWO DOGS</w:t>')


def test_a_word_paragraph_holding_a_text_box_is_translated_and_so_is_each_paragraph_of_the_box():
    # as Word writes a text box: in a run of the paragraph it is anchored in, once for Word and once
    # for older readers (mc:Choice, mc:Fallback), each with the box's paragraphs
    box = '<w:txbxContent><w:p><w:r><w:t>the cat</w:t></w:r></w:p></w:txbxContent>'
    document = ('<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main" '
                'xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006"><w:body>'
                f'<w:p><w:r><w:t xml:space="preserve">two dogs </w:t></w:r><w:r><mc:AlternateContent><mc:Choice Requires="wps">'
                f'<w:drawing>{box}</w:drawing></mc:Choice><mc:Fallback><w:pict>{box}</w:pict></mc:Fallback>'
                '</mc:AlternateContent></w:r><w:r><w:t>play</w:t></w:r></w:p></w:body></w:document>')
    sent, recorded = recording(upper_outside_tags)

    done = translate_document("a.docx", office_file("word/document.xml", document), recorded, "en", "de")
    assert sent == ['two dogs <x id="1"/>play', "the cat"]  # the box's paragraph once: the same text
    written = zipfile.ZipFile(io.BytesIO(done.data)).read("word/document.xml").decode()
    assert written == document.replace("<w:t>the cat</w:t>", '<w:t xml:space="preserve">THE CAT</w:t>').replace(
        '<w:t xml:space="preserve">two dogs </w:t>', '<w:t xml:space="preserve">TWO DOGS </w:t>').replace(
        "<w:t>play</w:t>", '<w:t xml:space="preserve">PLAY</w:t>')
    assert done.count == 3


@pytest.mark.parametrize("name, part, xml", [
    ("a.docx", "word/comments.xml", '<w:comments xmlns:w="w"><w:comment w:id="0"><w:p><w:r><w:t>two dogs</w:t></w:r></w:p>'
                                   '</w:comment></w:comments>'),
    ("a.pptx", "ppt/diagrams/data1.xml", '<dgm:dataModel xmlns:dgm="d" xmlns:a="a"><dgm:ptLst><dgm:pt><dgm:t><a:p><a:r>'
                                        '<a:t>two dogs</a:t></a:r></a:p></dgm:t></dgm:pt></dgm:ptLst></dgm:dataModel>'),
    ("a.pptx", "ppt/charts/chart1.xml", '<c:chartSpace xmlns:c="c" xmlns:a="a"><c:title><c:tx><c:rich><a:p><a:r><a:t>two dogs'
                                       '</a:t></a:r></a:p></c:rich></c:tx></c:title></c:chartSpace>'),
    ("a.xlsx", "xl/comments1.xml", '<comments><commentList><comment ref="A1"><text><r><t>two dogs</t></r></text></comment>'
                                  '</commentList></comments>'),
])
def test_comments_smartart_and_a_chart_s_title_are_translated(name, part, xml):
    done = translate_document(name, office_file(part, xml), reversed_words, "en", "de")
    assert "DOGS TWO</" in zipfile.ZipFile(io.BytesIO(done.data)).read(part).decode() and done.count == 1


def test_a_slide_paragraph_s_end_properties_stay_last_and_a_workbook_string_s_phonetic_properties_stay():
    a = 'xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main"'
    slide = (f'<p:sld xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main" {a}><a:p><a:r><a:rPr lang="en-US"/>'
             '<a:t>two dogs</a:t></a:r><a:endParaRPr lang="en-US"/></a:p></p:sld>')
    done = translate_document("a.pptx", office_file("ppt/slides/slide1.xml", slide),
                              lambda texts, *_: [text.upper() + " und" for text in texts],
                              "en", "de")
    assert ('<a:p><a:r><a:rPr lang="de"/><a:t>TWO DOGS und</a:t></a:r><a:endParaRPr lang="de"/></a:p>' in
            zipfile.ZipFile(io.BytesIO(done.data)).read("ppt/slides/slide1.xml").decode())
    strings = '<sst><si><t>two dogs</t><phoneticPr fontId="1"/></si></sst>'
    done = translate_document("a.xlsx", office_file("xl/sharedStrings.xml", strings), lambda texts, *_: ["ZWEI"], "en", "de")
    assert zipfile.ZipFile(io.BytesIO(done.data)).read("xl/sharedStrings.xml").decode() == \
        '<sst><si><t xml:space="preserve">ZWEI</t><phoneticPr fontId="1"/></si></sst>'
    # a streamed workbook's inline strings (no shared ones), a number's cell left
    sheet = ('<worksheet><sheetData><row r="1"><c r="A1" t="inlineStr"><is><t>two dogs</t></is></c><c r="B1"><v>3</v></c>'
             '<c r="C1" t="inlineStr"><is><r>\n <rPr><b/></rPr><t>the cat</t></r></is></c></row></sheetData></worksheet>')
    done = translate_document("a.xlsx", office_file("xl/worksheets/sheet1.xml", sheet), reversed_words, "en", "de")
    assert zipfile.ZipFile(io.BytesIO(done.data)).read("xl/worksheets/sheet1.xml").decode() == sheet.replace(
        "<t>two dogs</t>", '<t xml:space="preserve">DOGS TWO</t>').replace("<t>the cat</t>", '<t xml:space="preserve">CAT THE</t>')
    with pytest.raises(Failed, match="^cannot read a.xlsx: not an Excel workbook with text"):
        translate_document("a.xlsx", office_file("xl/worksheets/sheet1.xml", "<worksheet/>"), reversed_words, "en", "de")


def test_a_presentation_s_slides_are_translated():
    slide = ('<p:sld xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main" '
             'xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main"><p:cSld><p:spTree><p:sp><p:txBody>'
             '<a:bodyPr/><a:p><a:r><a:rPr lang="en-US" dirty="0"/><a:t>two dogs </a:t></a:r>'
             '<a:r><a:rPr lang="en-US" b="1"/><a:t>play</a:t></a:r><a:endParaRPr lang="en-US"/></a:p>'
             '</p:txBody></p:sp></p:spTree></p:cSld></p:sld>')
    done = translate_document("deck.pptx", office_file("ppt/slides/slide1.xml", slide), upper_outside_tags, "en", "de")
    assert zipfile.ZipFile(io.BytesIO(done.data)).read("ppt/slides/slide1.xml").decode() == slide.replace(
        '<a:rPr lang="en-US" dirty="0"/><a:t>two dogs </a:t>', '<a:rPr lang="de" dirty="0"/><a:t>TWO DOGS </a:t>').replace(
        '<a:rPr lang="en-US" b="1"/><a:t>play</a:t>', '<a:rPr lang="de" b="1"/><a:t>PLAY</a:t>').replace(
        '<a:endParaRPr lang="en-US"/>', '<a:endParaRPr lang="de"/>')
    with pytest.raises(Failed, match="^cannot read deck.pptx: not a PowerPoint file"):
        translate_document("deck.pptx", b"PK\\x03\\x04 not a zip", upper_outside_tags, "en", "de")


ODT_CONTENT = ('<?xml version="1.0" encoding="UTF-8"?>\n<office:document-content '
               'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
               'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" xmlns:xlink="http://www.w3.org/1999/xlink">'
               '<office:body><office:text><text:h text:outline-level="1">two dogs</text:h>'
               '<text:p text:style-name="P1">open the <text:span text:style-name="T1">file</text:span> now</text:p>'
               '<text:p/><text:p> <text:s text:c="2"/></text:p></office:text></office:body></office:document-content>')


def test_an_opendocument_s_paragraphs_are_sent_as_the_xml_they_are():
    sent, recorded = recording(upper_outside_tags)

    written = io.BytesIO()
    with zipfile.ZipFile(written, "w") as archive:
        archive.writestr("mimetype", "application/vnd.oasis.opendocument.text")  # first and stored, as ODF wants
        archive.writestr("content.xml", ODT_CONTENT, zipfile.ZIP_DEFLATED)
        archive.writestr("styles.xml", "<office:document-styles/>", zipfile.ZIP_DEFLATED)
    done = translate_document("notes.odt", written.getvalue(), recorded, "en", "de")
    assert sent == ["two dogs", 'open the <text:span text:style-name="T1">file</text:span> now']
    archive = zipfile.ZipFile(io.BytesIO(done.data))
    assert [(i.filename, i.compress_type) for i in archive.infolist()] == [
        ("mimetype", zipfile.ZIP_STORED), ("content.xml", zipfile.ZIP_DEFLATED), ("styles.xml", zipfile.ZIP_DEFLATED)]
    assert archive.read("content.xml").decode() == ODT_CONTENT.replace(">two dogs<", ">TWO DOGS<").replace(
        ">open the <text:span text:style-name=\"T1\">file</text:span> now<",
        ">OPEN THE <text:span text:style-name=\"T1\">FILE</text:span> NOW<")
    assert done.count == 2


def test_an_opendocument_paragraph_holding_a_note_a_frame_or_a_field_is_sent_with_each_held_and_placed():
    names = " ".join(f'xmlns:{prefix}="urn:{prefix}"' for prefix in ("office", "text", "draw", "table", "style"))
    content = (f'<office:document-content {names}><office:body><office:text>'
               '<text:p>two dogs<text:note text:id="n1"><text:note-citation>1</text:note-citation><text:note-body>'
               '<text:p>the cat</text:p></text:note-body></text:note> play</text:p>'
               '<text:p><draw:frame><draw:text-box><text:p text:style-name="P1"/><text:p>in the snow</text:p>'
               '</draw:text-box></draw:frame>open it</text:p>'
               '<text:p>page <text:page-number>3</text:page-number></text:p><text:p>broken</text:p>'
               '</office:text><office:spreadsheet><table:table-cell office:value-type="float" office:value="3"><text:p>3 dogs'
               '</text:p></table:table-cell></office:spreadsheet></office:body></office:document-content>')
    styles = (f'<office:document-styles {names}><office:styles><text:p>a sample</text:p></office:styles><office:master-styles>'
              '<style:header><text:p>the header</text:p></style:header></office:master-styles></office:document-styles>')
    sent = []

    def moved(texts, source, target, fmt):  # upper-cased, a held element put last; "broken" broken
        sent.extend(texts)
        out = []
        for text in upper_outside_tags(texts, source, target, fmt):
            held = re.findall(r'<x id="\d+"/>', text)
            out.append("<text:span>BROKEN" if text == "BROKEN" else re.sub(r'<x id="\d+"/>', "", text) + "".join(held))
        return out

    written = io.BytesIO()
    with zipfile.ZipFile(written, "w") as archive:
        archive.writestr("content.xml", content)
        archive.writestr("styles.xml", styles)
    done = translate_document("notes.odt", written.getvalue(), moved, "en", "de")
    # each paragraph alone, what holds another's (the note, the frame) and a field as an element in it;
    # not a number's cell, not a style's sample
    assert sent == ['two dogs<x id="0"/> play', "the cat", '<x id="0"/>open it', "in the snow", 'page <x id="0"/>',
                    "broken", "the header"]
    archive = zipfile.ZipFile(io.BytesIO(done.data))
    assert archive.read("content.xml").decode() == content.replace(
        '<text:p>two dogs<text:note text:id="n1"><text:note-citation>1</text:note-citation><text:note-body><text:p>the cat'
        '</text:p></text:note-body></text:note> play</text:p>',
        '<text:p>TWO DOGS PLAY<text:note text:id="n1"><text:note-citation>1</text:note-citation><text:note-body><text:p>THE CAT'
        '</text:p></text:note-body></text:note></text:p>').replace(
        '<text:p><draw:frame><draw:text-box><text:p text:style-name="P1"/><text:p>in the snow</text:p></draw:text-box>'
        '</draw:frame>open it</text:p>',
        '<text:p>OPEN IT<draw:frame><draw:text-box><text:p text:style-name="P1"/><text:p>IN THE SNOW</text:p></draw:text-box>'
        '</draw:frame></text:p>').replace("<text:p>page <text:page-number>", "<text:p>PAGE <text:page-number>")
    assert archive.read("styles.xml").decode() == styles.replace("the header", "THE HEADER")
    assert done.count == 6 and done.refused == ["'broken': its translation would not read as XML; left as it was"]


def test_an_opendocument_part_that_reads_as_no_xml_is_left_and_the_other_s_translations_counted():
    names = 'xmlns:office="o" xmlns:text="t" xmlns:style="s"'
    content = (f'<office:document-content {names}><office:body><office:text><text:p>two dogs</text:p></office:text>'
               '</office:body></office:document-content>')
    # styles.xml uses an entity only an external DTD names: it reads as no XML, so it stays as it was
    styles = (f'<office:document-styles {names}><office:styles>&nasty;</office:styles><office:master-styles><style:header>'
              '<text:p>the header</text:p></style:header></office:master-styles></office:document-styles>')
    written = io.BytesIO()
    with zipfile.ZipFile(written, "w") as archive:
        archive.writestr("content.xml", content)
        archive.writestr("styles.xml", styles)
    done = translate_document("notes.odt", written.getvalue(), upper_outside_tags, "en", "de")
    archive = zipfile.ZipFile(io.BytesIO(done.data))
    assert archive.read("content.xml").decode() == content.replace("two dogs", "TWO DOGS")
    assert archive.read("styles.xml").decode() == styles
    assert done.count == 1 and done.refused == ["styles.xml: reads as no XML; left as it was"]
    # a file whose every part reads as no XML is refused in one line
    broken = office_file("word/document.xml", "<w:document><w:body><w:p><w:r><w:t>two dogs")
    with pytest.raises(Failed, match="^nothing in a.docx could be translated: word/document.xml: reads as no XML; left as it was$"):
        translate_document("a.docx", broken, upper_outside_tags, "en", "de")


def test_a_workbook_s_shared_strings_are_translated_plain_and_formatted_alike():
    strings = ('<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<sst xmlns="http://schemas.openxmlformats.org/'
               'spreadsheetml/2006/main" count="3" uniqueCount="3"><si><t>two dogs</t></si><si><t xml:space="preserve">'
               ' </t></si><si><r><t xml:space="preserve">open the </t></r><r><rPr><b/></rPr><t>file</t></r></si></sst>')
    sent, recorded = recording(upper_outside_tags)

    done = translate_document("budget.xlsx", office_file("xl/sharedStrings.xml", strings), recorded, "en", "de")
    assert sent == ["two dogs", 'open the <g id="1">file</g>']
    assert zipfile.ZipFile(io.BytesIO(done.data)).read("xl/sharedStrings.xml").decode() == strings.replace(
        "<si><t>two dogs</t></si>", '<si><t xml:space="preserve">TWO DOGS</t></si>').replace(
        '<r><t xml:space="preserve">open the </t></r><r><rPr><b/></rPr><t>file</t></r>',
        '<r><t xml:space="preserve">OPEN THE </t></r><r><rPr><b/></rPr><t xml:space="preserve">FILE</t></r>')
    assert done.count == 2


def test_a_workbook_whose_elements_carry_a_prefix_is_read_as_one_without():
    # What the .NET Open XML SDK writes: `<x:sst xmlns:x=...>`; such a workbook had been refused as
    # "not an Excel workbook with text" or come back untranslated.
    main = 'xmlns:x="http://schemas.openxmlformats.org/spreadsheetml/2006/main"'
    strings = (f'<?xml version="1.0" encoding="utf-8"?><x:sst {main}><x:si><x:t>two dogs</x:t><x:phoneticPr fontId="1"/>'
               '</x:si><x:si><x:r><x:t xml:space="preserve">open the </x:t></x:r><x:r><x:rPr><x:b/></x:rPr><x:t>file</x:t>'
               '</x:r></x:si></x:sst>')
    sheet = (f'<x:worksheet {main}><x:sheetData><x:row r="1"><x:c r="A1" t="inlineStr"><x:is><x:t>the cat</x:t></x:is>'
             '</x:c><x:c r="B1"><x:v>3</x:v></x:c></x:row></x:sheetData></x:worksheet>')
    sent, recorded = recording(upper_outside_tags)
    done = translate_document("report.xlsx", office_file("xl/sharedStrings.xml", strings, {"xl/worksheets/sheet1.xml": sheet}),
                              recorded, "en", "de")
    assert sorted(sent) == ["open the <g id=\"1\">file</g>", "the cat", "two dogs"] and done.count == 3
    written = zipfile.ZipFile(io.BytesIO(done.data))
    assert written.read("xl/sharedStrings.xml").decode() == strings.replace(
        "<x:t>two dogs</x:t>", '<x:t xml:space="preserve">TWO DOGS</x:t>').replace(
        '<x:t xml:space="preserve">open the </x:t>', '<x:t xml:space="preserve">OPEN THE </x:t>').replace(
        "<x:t>file</x:t>", '<x:t xml:space="preserve">FILE</x:t>')
    assert written.read("xl/worksheets/sheet1.xml").decode() == sheet.replace(
        "<x:t>the cat</x:t>", '<x:t xml:space="preserve">THE CAT</x:t>')


CHAPTER = ('<?xml version="1.0" encoding="utf-8"?>\n<!DOCTYPE html>\n'
           '<html xmlns="http://www.w3.org/1999/xhtml" xml:lang="en" lang="en">\n<head><title>two dogs</title>'
           '<link rel="stylesheet" href="style.css"/></head>\n<body>\n<h1>two dogs</h1>\n'
           '<p>the cat <em>sleeps</em>.<br/>a dog &amp; <a id="n1"/>a cat</p>\n</body>\n</html>\n')


def epub_file(chapters: dict[str, str], title: str = "two dogs &amp; a cat") -> bytes:
    """An EPUB 3 book as tools write one: its mimetype first and stored, a package listing the
    chapters (hrefs URL-encoded), a navigation document, an EPUB 2 table of contents, a style sheet."""
    items = "".join(f'<item id="c{i}" href="{href.replace(" ", "%20")}" media-type="application/xhtml+xml"/>'
                    for i, href in enumerate(chapters))
    package = ('<?xml version="1.0" encoding="UTF-8"?>\n<package xmlns="http://www.idpf.org/2007/opf" version="3.0" '
               'unique-identifier="id"><metadata xmlns:dc="http://purl.org/dc/elements/1.1/">'
               f'<dc:identifier id="id">urn:uuid:1</dc:identifier><dc:title>{title}</dc:title>'
               '<dc:language>en</dc:language></metadata><manifest>'
               '<item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" properties="nav"/>'
               '<item id="ncx" href="toc.ncx" media-type="application/x-dtbncx+xml"/>'
               f'<item id="css" href="style.css" media-type="text/css"/>{items}</manifest>'
               '<spine toc="ncx">' + "".join(f'<itemref idref="c{i}"/>' for i in range(len(chapters))) + '</spine></package>')
    nav = ('<?xml version="1.0" encoding="utf-8"?>\n<html xmlns="http://www.w3.org/1999/xhtml" '
           'xmlns:epub="http://www.idpf.org/2007/ops" lang="en"><head><title>contents</title></head><body>'
           '<nav epub:type="toc"><ol><li><a href="ch1.xhtml">two dogs</a></li></ol></nav></body></html>')
    ncx = ('<?xml version="1.0" encoding="UTF-8"?>\n<ncx xmlns="http://www.daisy.org/z3986/2005/ncx/" version="2005-1">'
           '<docTitle><text>two dogs</text></docTitle><navMap><navPoint id="p1" playOrder="1"><navLabel><text>the cat'
           '</text></navLabel><content src="ch1.xhtml"/></navPoint></navMap></ncx>')
    written = io.BytesIO()
    with zipfile.ZipFile(written, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(zipfile.ZipInfo("mimetype"), "application/epub+zip", compress_type=zipfile.ZIP_STORED)
        archive.writestr("META-INF/container.xml",
                         '<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:'
                         'container"><rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/'
                         'oebps-package+xml"/></rootfiles></container>')
        archive.writestr("OEBPS/content.opf", package)
        archive.writestr("OEBPS/nav.xhtml", nav)
        archive.writestr("OEBPS/toc.ncx", ncx)
        archive.writestr("OEBPS/style.css", "p { color: red }")
        for href, chapter in chapters.items():
            archive.writestr(f"OEBPS/{href}", chapter)
    return written.getvalue()


def upper_in_html(texts, source, target, fmt):
    """Text upper-cased, tags and entities as they were: what the service's placement keeps."""
    assert fmt == "html"
    return [re.sub(r"(^|>)([^<]+)", lambda m: m.group(1) + re.sub(r"&\w+;|[^&]+", lambda t: t.group(0) if
                   t.group(0).startswith("&") else t.group(0).upper(), m.group(2)), text) for text in texts]


def test_an_epub_book_s_chapters_titles_and_contents_are_translated_every_other_entry_kept():
    book = epub_file({"ch1.xhtml": CHAPTER, "chapter 2.xhtml": CHAPTER.replace("two dogs", "in the snow")})
    sent = []

    def recorded(texts, source, target, fmt):
        sent.extend(texts)
        return upper_in_html(texts, source, target, fmt)

    done = translate_document("story.epub", book, recorded, None, "de")
    assert (done.source, done.target, done.unit, done.refused) == ("en", "de", "parts", [])
    held = CHAPTER[CHAPTER.index('lang="en">') + len('lang="en">'):CHAPTER.index("</html>")]
    # the package's title, the chapters in reading order, the navigation document, the table of contents
    assert sent == ["two dogs &amp; a cat", held, held.replace("two dogs", "in the snow"),
                    "<head><title>contents</title></head><body><nav epub:type=\"toc\"><ol><li><a href=\"ch1.xhtml\">"
                    "two dogs</a></li></ol></nav></body>", "two dogs", "the cat"]
    assert done.count == 6
    original, written = (zipfile.ZipFile(io.BytesIO(data)) for data in (book, done.data))
    assert [info.filename for info in written.infolist()] == [info.filename for info in original.infolist()]
    assert written.infolist()[0].compress_type == zipfile.ZIP_STORED and written.read("mimetype") == b"application/epub+zip"
    assert written.read("OEBPS/style.css") == b"p { color: red }"
    assert written.read("OEBPS/ch1.xhtml").decode() == CHAPTER.replace('lang="en"', 'lang="de"').replace(
        "two dogs", "TWO DOGS").replace("the cat <em>sleeps</em>.", "THE CAT <em>SLEEPS</em>.").replace(
        "a dog &amp; ", "A DOG &amp; ").replace("a cat</p>", "A CAT</p>")
    assert "<h1>IN THE SNOW</h1>" in written.read("OEBPS/chapter 2.xhtml").decode()
    package = written.read("OEBPS/content.opf").decode()
    assert "<dc:title>TWO DOGS &amp; A CAT</dc:title><dc:language>de</dc:language>" in package
    assert "<text>TWO DOGS</text>" in written.read("OEBPS/toc.ncx").decode()
    assert 'lang="de"><head><title>CONTENTS</title>' in written.read("OEBPS/nav.xhtml").decode()


def test_an_epub_chapter_whose_translation_would_not_read_as_xml_is_left_and_named():
    def unclosed(texts, source, target, fmt):  # html forgives a <br>, XHTML does not
        return [text.replace("<br/>", "<br>") for text in upper_in_html(texts, source, target, fmt)]

    book = epub_file({"ch1.xhtml": CHAPTER, "ch2.xhtml": CHAPTER.replace("<br/>", " ")})
    done = translate_document("story.epub", book, unclosed, "en", "de")
    written = zipfile.ZipFile(io.BytesIO(done.data))
    assert written.read("OEBPS/ch1.xhtml").decode() == CHAPTER
    assert "<h1>TWO DOGS</h1>" in written.read("OEBPS/ch2.xhtml").decode()
    assert done.refused == ["OEBPS/ch1.xhtml: its translation would not read as XML, left as it was"]
    assert done.count == 5
    # HTML's named references, which an XHTML document's DTD names, read as the characters they name
    xhtml11 = CHAPTER.replace("<!DOCTYPE html>", '<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.1//EN" '
                              '"http://www.w3.org/TR/xhtml11/DTD/xhtml11.dtd">').replace("the cat", "the&nbsp;cat")
    done = translate_document("story.epub", epub_file({"ch1.xhtml": xhtml11}), upper_in_html, "en", "de")
    assert "<p>THE&nbsp;CAT <em>SLEEPS</em>." in zipfile.ZipFile(io.BytesIO(done.data)).read("OEBPS/ch1.xhtml").decode()
    assert done.refused == []


def test_a_text_the_translator_refuses_stays_as_it_was_and_is_named():
    done = translate_document("notes.txt", b"two dogs play\n\nrefuse me please\n", reversed_words, "en", "de")
    assert done.data == b"PLAY DOGS TWO\n\nrefuse me please\n"
    assert done.count == 1 and done.refused == ["'refuse me please': too long"]


def test_a_text_too_long_for_the_model_is_sent_again_as_its_clauses_their_translations_in_a_row():
    sent = []

    def short(texts, source, target, fmt):  # a model that reads at most six words a text
        sent.append(texts)
        for k, text in enumerate(texts):
            if len(text.split()) > 6 or "refuse me" in text:
                kind = "" if "refuse me" in text else "text_rejected"
                raise Refused(f"has {len(text.split())} words; this model reads at most 6", f"text.{k}", kind)
        return [text.upper() for text in texts]

    text = ("two dogs play in the snow, the cat sleeps; a bird sings\n\nunbreakable words beyond any limit here and more\n\n"
            "refuse me, for no length\n")
    done = translate_document("notes.txt", text.encode(), short, "en", "de")
    assert done.data.decode() == ("TWO DOGS PLAY IN THE SNOW, THE CAT SLEEPS; A BIRD SINGS\n\n"
                                  "unbreakable words beyond any limit here and more\n\nrefuse me, for no length\n")
    # halves cut at the clause end nearest the middle; a text with none, or refused for another
    # reason than its length, is named once
    assert sent[1:] == [["two dogs play in the snow, the cat sleeps; a bird sings"],
                        ["two dogs play in the snow, ", "the cat sleeps; a bird sings"],
                        ["unbreakable words beyond any limit here and more"], ["refuse me, for no length"]]
    assert done.refused == ["'unbreakable words beyond any limit here and more': has 8 words; this model reads at most 6",
                            "'refuse me, for no length': has 5 words; this model reads at most 6"]


def test_a_refusal_of_the_request_itself_stops_the_file():
    def unserved(texts, source, target, fmt):
        raise Refused("language pair en-fr is not served", "target")

    with pytest.raises(Failed, match="^language pair en-fr is not served$"):
        translate_document("notes.txt", b"two dogs play\n", unserved, "en", "fr")


@pytest.mark.parametrize("name, data, source, target, error", [
    ("report.pdf", b"PK", "en", "de", "'.pdf' files cannot be translated; formats: .po, .pot"),
    ("notes.txt", b"two dogs play\n", "en", None, "notes.txt names no target language$"),
    ("notes.txt", b"two dogs \x81 play\n", "en", "de", "cannot read notes.txt: neither UTF-8 nor Windows-1252 text"),
    ("notes.txt", b"\xef\xbb\xbftwo dogs \xff play\n", "en", "de", "cannot read notes.txt: not UTF-8-SIG text \\(byte 9\\)"),
    ("notes.txt", b"two dogs play\n", "de", "de", "the source and the target language are both 'de'"),
    ("de.po", b'msgid ""\nmsgstr "Language: de_AT\\n"\n\nmsgid "Open"\nmsgstr ""\n', "en", "fr",
     "de.po is a translation into 'de', not 'fr'"),
    ("de.po", b'msgid ""\nmsgstr "Language: de\\n"\n\nmsgid "Open"\nmsgstr ""\n\nmsgid "Done"\n', "en", "de",
     "cannot read de.po: the message on line 7 has no msgstr; check it with msgfmt -c"),
    ("strings.xml", b"<resources><string name='a'>\xff</string></resources>", "en", "de",
     "cannot read strings.xml: not well-formed XML"),
    ("ui.xlf", b"<xliff version='1.2'><file source-language='en' target-language='de'><body>", "en", None,
     "cannot read ui.xlf: not well-formed XML"),
    ("book.epub", b"two dogs", "en", "de", "^cannot read book.epub: not an EPUB book \\(File is not a zip file\\)$"),
    # text boxes in text boxes 1,200 deep: the readers walk paragraphs by recursion
    ("deep.docx", office_file("word/document.xml", '<w:document xmlns:w="w"><w:body>' + "<w:p><w:r><w:pict>" * 1200
                              + "<w:p><w:r><w:t>two dogs</w:t></w:r></w:p>" + "</w:pict></w:r></w:p>" * 1200
                              + "</w:body></w:document>"), "en", "de", "^cannot read deep.docx: its elements nest too deeply$"),
    ("book.epub", office_file("OEBPS/ch1.xhtml", CHAPTER), "en", "de",
     "^cannot read book.epub: not an EPUB book \\(\"There is no item named 'META-INF/container.xml' in the archive\"\\)$"),
])
def test_what_cannot_be_translated_is_one_line_naming_why(name, data, source, target, error):
    with pytest.raises(Failed, match=error):
        translate_document(name, data, reversed_words, source, target)


def test_a_file_naming_no_target_is_no_target_and_its_source_is_detected_when_asked():
    with pytest.raises(NoTarget):
        translate_document("notes.txt", b"two dogs play\n", reversed_words, "en", None)
    seen = []
    done = translate_document("notes.txt", b"zwei Hunde spielen\n", lambda *a: seen.append(a) or ["X"], None, "en",
                              detect=lambda texts: "de")
    assert seen == [(["zwei Hunde spielen"], "de", "en", "text")] and done.source == "de"
    with pytest.raises(Failed, match="the language of notes.txt cannot be detected: give the source language"):
        translate_document("notes.txt", b"zzz\n", reversed_words, None, "en", detect=lambda texts: None)


def test_a_catalog_whose_text_names_a_file_is_read_as_text_not_as_that_file(tmp_path):
    # polib reads a string naming a file as that file: an upload must never make the server read one
    other = tmp_path / "other.po"
    other.write_text('msgid ""\nmsgstr "Language: de\\n"\n\nmsgid "secret"\nmsgstr ""\n', encoding="utf-8")
    with pytest.raises(Failed) as refused:
        translate_document("de.po", str(other).encode(), reversed_words, "en", "de")
    assert str(refused.value) == "cannot read de.po: Syntax error in po file de.po (line 1)"  # no path of the server's


# --- the store


def test_a_claim_whose_lease_ran_out_is_claimed_again_and_the_first_worker_s_writes_are_ignored(tmp_path):
    store = DocumentStore(tmp_path / "documents.sqlite3", lease_s=0.0)
    first = store.add("a.txt", b"one", "en", "de", None, [GlossaryEntry("dog", "Hund")])
    second = store.add("b.txt", b"two", None, "de")
    stale = store.claim()
    assert stale.document.id == first.id and stale.input == b"one"
    assert stale.document.glossary == (GlossaryEntry("dog", "Hund"),)
    time.sleep(0.01)
    again = store.claim()  # the lease of 0 s ran out: the worker is taken for gone
    assert again.document.id == first.id and again.token != stale.token
    assert not store.finish(stale, b"late", 1, 3)
    assert store.progress(again, 1, 2) and store.finish(again, b"EINS", 1, 3)
    done = store.get(first.id)
    assert (done.status, done.translated, done.characters, done.texts_done, done.texts_total) == (DONE, 1, 3, 1, 2)
    assert store.output(first.id) == b"EINS"
    held = store.claim()
    assert held.document.id == second.id and store.release(held)
    assert store.get(second.id).status == QUEUED and store.output(second.id) is None
    assert store.fail(store.claim(), "cannot read b.txt")
    assert (store.get(second.id).status, store.get(second.id).error) == (ERROR, "cannot read b.txt")
    assert store.claim() is None
    store.close()
    reopened = DocumentStore(tmp_path / "documents.sqlite3", retention_s=0.0)
    assert reopened.exists() and reopened.output(first.id) == b"EINS"
    assert reopened.purge() == 2 and reopened.get(first.id) is None


def test_a_store_nobody_sent_a_document_creates_no_file(tmp_path):
    store = DocumentStore(tmp_path / "documents.sqlite3")
    # a download or status asked of a server never sent a document answers none, making no file
    assert store.get("0123") is None and store.output("0123") is None and store.waiting() == 0
    assert not store.exists() and store.claim() is None  # a claim opens it
    assert store.exists()


def test_seconds_remaining_follow_the_pace_so_far(tmp_path):
    store = DocumentStore(tmp_path / "documents.sqlite3")
    document = store.add("a.txt", b"one", "en", "de")
    assert document.seconds_remaining(time.time()) is None
    claim = store.claim()
    store.progress(claim, 1, 4)
    document = store.get(document.id)
    assert document.status == TRANSLATING
    assert document.seconds_remaining(document.started + 10) == 30  # 10 s for a quarter: 30 s for the rest


# --- the routes

PO = ('msgid ""\nmsgstr ""\n"Language: de\\n"\n"Content-Type: text/plain; charset=UTF-8\\n"\n\n'
      'msgid "two dogs play"\nmsgstr ""\n\nmsgid "Done"\nmsgstr "Fertig"\n')


def app_with(tmp_path, runtime=None, **settings):
    runtime = runtime or FakeRuntime("en", "de")
    return create_app(Settings(model_dirs=["models/test-en-de"], inference_process=False,
                               document_db=tmp_path / "documents.sqlite3", **settings),
                      runtime_factory=lambda received: [runtime])


def multipart(url: str, fields: dict[str, str], name: str, data: bytes) -> tuple[int, dict | bytes, dict]:
    boundary = "phrasal-test-boundary"
    parts = [f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode() for k, v in fields.items()]
    parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{name}"\r\n'
                 f"Content-Type: application/octet-stream\r\n\r\n".encode() + data + b"\r\n")
    body = b"".join(parts) + f"--{boundary}--\r\n".encode()
    request = urllib.request.Request(url, body, {"Content-Type": f"multipart/form-data; boundary={boundary}"})
    return fetch(request)


def fetch(request) -> tuple[int, dict | bytes, dict]:
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            data, status, headers = response.read(), response.status, dict(response.headers)
    except urllib.error.HTTPError as error:
        data, status, headers = error.read(), error.code, dict(error.headers)
    return status, json.loads(data) if headers.get("content-type") == "application/json" else data, headers


def test_libretranslate_translate_file_answers_a_url_to_the_catalog_translated(tmp_path):
    with live_server(app_with(tmp_path), ready_within_s=30) as address:
        status, body, _ = multipart(f"{address}/libretranslate/translate_file", {"source": "en", "target": "de"},
                                    "de.po", PO.encode())
        assert status == 200 and body["translatedFileUrl"].startswith(f"{address}/libretranslate/download_file/")
        assert body["translatedFileUrl"].endswith(".de.po")
        status, data, headers = fetch(body["translatedFileUrl"])
        assert status == 200 and data.decode() == PO.replace(
            'msgid "two dogs play"\nmsgstr ""', '#, fuzzy\nmsgid "two dogs play"\nmsgstr "PLAY DOGS TWO"')
        assert headers["content-type"] == "text/x-gettext-translation"
        assert headers["content-disposition"] == "attachment; filename=\"de.po\"; filename*=UTF-8''de.po"
        settings = json.load(urllib.request.urlopen(f"{address}/libretranslate/frontend/settings"))
        assert settings["filesTranslation"] and ".po" in settings["supportedFilesFormat"]
        # what cannot be taken or found, LibreTranslate's way
        status, body, _ = multipart(f"{address}/libretranslate/translate_file", {"source": "en", "target": "de"},
                                    "report.pdf", b"PK")
        assert (status, body["error"]) == (400, "Invalid request: file format not supported: 'report.pdf'; "
                                                "formats: " + ", ".join(FORMATS))
        status, body, _ = multipart(f"{address}/libretranslate/translate_file", {"source": "en", "target": "fr"},
                                    "notes.txt", b"two dogs play")
        assert (status, body) == (400, {"error": "fr is not supported"})
        status, body, _ = multipart(f"{address}/libretranslate/translate_file", {"source": "en", "target": "de"},
                                    "broken.po", b'msgid "Open"\nmsgstr "Offen\n')
        assert status == 400 and body["error"].startswith("cannot read broken.po: line 2 holds no whole string")
        status, body, _ = fetch(f"{address}/libretranslate/download_file/0123.de.po")
        assert status == 404
        # a text the model refuses (the fake's limit: 64 pieces) is left as it was, and named
        status, body, _ = multipart(f"{address}/libretranslate/translate_file", {"source": "en", "target": "de"},
                                    "notes.txt", ("two dogs play\n\n" + "word " * 70).encode())
        assert status == 200 and len(body["untranslated"]) == 1
        assert body["untranslated"][0].startswith("'word word word") and "at most 64" in body["untranslated"][0]
        assert fetch(body["translatedFileUrl"])[1] == ("PLAY DOGS TWO\n\n" + "word " * 70).encode()
        metrics = urllib.request.urlopen(f"{address}/metrics").read().decode()
        # the catalog, the broken one and the text: the other two were refused before they were taken
        for line in ('phrasal_documents_total{outcome="accepted"} 3.0', 'phrasal_documents_total{outcome="done"} 2.0',
                     'phrasal_documents_total{outcome="failed"} 1.0', "phrasal_documents_waiting 0.0",
                     "phrasal_document_duration_seconds_count 2.0"):
            assert line in metrics.splitlines(), line


class _SlowForSeveral(FakeRuntime):
    """A model call of several texts outlasts the request deadline; one of a single text does not."""

    def batch_delay_s(self, n_texts: int) -> float:
        return 2.0 if n_texts > 1 else 0.0


def test_a_batch_the_model_does_not_finish_in_time_is_sent_again_text_by_text(tmp_path):
    runtime = _SlowForSeveral("en", "de", delay_s=1.0)
    app = app_with(tmp_path, runtime, request_timeout_s=0.5, max_wait_ms=50.0)
    with live_server(app, ready_within_s=30) as address:
        status, body, _ = multipart(f"{address}/libretranslate/translate_file", {"source": "en", "target": "de"},
                                    "notes.txt", b"two dogs play\n\nthe cat\n\nin the snow\n")
        assert status == 200 and "untranslated" not in body
        assert fetch(body["translatedFileUrl"])[1] == b"PLAY DOGS TWO\n\nCAT THE\n\nSNOW THE IN\n"
    # the three together past the deadline (nobody waited for their end), then each alone
    assert [len(texts) for texts, _ in runtime.calls if texts != ["warm up"]] == [3, 1, 1, 1], runtime.calls


def test_a_document_over_the_size_limit_is_413_and_a_form_under_the_body_limit_is_read(tmp_path):
    with live_server(app_with(tmp_path, max_body_bytes=2048, max_document_bytes=4096), ready_within_s=30) as address:
        text = ("two dogs play\n\n" * 200).encode()  # 3000 bytes: over the body limit, under the document limit
        status, body, _ = multipart(f"{address}/libretranslate/translate_file", {"source": "en", "target": "de"},
                                    "notes.txt", text)
        assert status == 200
        status, _, _ = multipart(f"{address}/libretranslate/translate_file", {"source": "en", "target": "de"},
                                 "notes.txt", text * 2)
        assert status == 413
        # a route whose path has a parameter is guarded too: the body limit holds for its JSON
        request = urllib.request.Request(f"{address}/deepl/v2/document/0123", json.dumps({"x": "a" * 3000}).encode(),
                                         {"Content-Type": "application/json"})
        status, body, _ = fetch(request)
        assert (status, body["message"]) == (413, "body: at most 2048 bytes, Content-Length says 3009"), body


def test_deepl_s_client_uploads_polls_and_downloads_a_document(tmp_path, monkeypatch):
    monkeypatch.setattr(deepl.http_client, "max_network_retries", 0)  # a 503 answered once, not retried with backoff
    gate = threading.Event()
    runtime = FakeRuntime("en", "de", gate=gate)
    with live_server(app_with(tmp_path, runtime, max_documents_waiting=1), ready_within_s=30) as address:
        client = deepl.Translator("any", server_url=address + "/deepl/")
        handle = client.translate_document_upload(b"two dogs play\n\nthe cat\n", target_lang="DE", filename="a.txt")
        assert runtime.entered.acquire(timeout=30)  # the worker has it: its batch waits at the gate
        status = client.translate_document_get_status(handle)
        assert status.status.value == "translating"
        # one document waits: at max_documents_waiting=1 the next is turned away until it is done
        status_code, body, headers = multipart(f"{address}/deepl/v2/document", {"target_lang": "DE"}, "b.txt", b"the cat")
        assert (status_code, headers["retry-after"]) == (429, "30")
        assert body == {"message": "Too many requests: 1 documents are waiting to be translated; retry later"}
        with pytest.raises(deepl.DocumentNotReadyException):
            client.translate_document_download(handle)
        gate.set()
        deadline = time.monotonic() + 30
        while not status.done and time.monotonic() < deadline:
            time.sleep(0.05)
            status = client.translate_document_get_status(handle)
        assert status.done and status.billed_characters == len("two dogs play") + len("the cat")
        response = client.translate_document_download(handle)
        assert response.content == b"PLAY DOGS TWO\n\nCAT THE\n"
        with pytest.raises(deepl.DeepLException, match="Document not found"):
            client.translate_document_get_status(deepl.DocumentHandle(handle.document_id, "not its key"))
        with pytest.raises(deepl.DeepLException, match="output_format"):
            client.translate_document_upload(b"two dogs play", target_lang="DE", filename="a.txt", output_format="docx")
        handle = client.translate_document_upload(b"\xff\xfe\x00", target_lang="DE", filename="b.txt")
        deadline = time.monotonic() + 30
        while not (status := client.translate_document_get_status(handle)).done and status.ok \
                and time.monotonic() < deadline:
            time.sleep(0.05)
        assert status.status.value == "error" and status.error_message.startswith("cannot read b.txt")


def test_a_document_whose_server_was_killed_is_translated_by_the_next_at_once(tmp_path):
    from tests.service.test_server_process import Server

    db = str(tmp_path / "documents.sqlite3")
    texts = "\n\n".join(f"word{k} here" for k in range(40)).encode()  # two batches of 32 and 8

    def status(port: int, document: dict) -> dict:
        request = urllib.request.Request(f"http://127.0.0.1:{port}/deepl/v2/document/{document['document_id']}",
                                         json.dumps({"document_key": document["document_key"]}).encode(),
                                         {"Content-Type": "application/json"})
        return fetch(request)[1]

    first = Server(delay_s=30.0, document_db=db, inference_process="false")
    try:
        first.wait_ready()
        code, document, _ = multipart(f"http://127.0.0.1:{first.port}/deepl/v2/document", {"target_lang": "DE"},
                                      "notes.txt", texts)
        assert code == 200
        deadline = time.monotonic() + 30
        while status(first.port, document)["status"] != "translating" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert status(first.port, document)["status"] == "translating"  # its first batch sleeps 30 s
    finally:
        first.stop()  # SIGKILL: no shutdown gives the document back
    second = Server(document_db=db, inference_process="false")
    try:
        second.wait_ready()
        deadline, body = time.monotonic() + 20, {}  # well inside the first claim's lease of 60 s
        while body.get("status") != "done" and time.monotonic() < deadline:
            time.sleep(0.05)
            body = status(second.port, document)
        assert body == {"document_id": document["document_id"], "status": "done", "billed_characters": len(texts) - 78}
    finally:
        second.stop()


def test_a_document_accepted_before_a_crash_is_translated_after_the_restart(tmp_path):
    store = DocumentStore(tmp_path / "documents.sqlite3", lease_s=0.0)
    document = store.add("de.po", PO.encode(), "en", "de")
    store.claim()  # the worker that held it died with the process: its lease runs out
    store.close()
    with live_server(app_with(tmp_path), ready_within_s=30) as address:
        deadline, body = time.monotonic() + 30, {}
        while body.get("status") != "done" and time.monotonic() < deadline:
            request = urllib.request.Request(f"{address}/deepl/v2/document/{document.id}",
                                             json.dumps({"document_key": document.key}).encode(),
                                             {"Content-Type": "application/json"})
            status, body, _ = fetch(request)
            time.sleep(0.05)
        assert body == {"document_id": document.id, "status": "done", "billed_characters": len("two dogs play")}
