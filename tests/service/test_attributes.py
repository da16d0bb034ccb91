"""Html attributes a reader sees (service/attributes.py): which are translated, and how their
translations are written into the answer (testing/fake_runtime.py translates: words reversed,
upper-cased), every reported offset still slicing the output."""
from __future__ import annotations

import random
import re

import pytest

from service.attributes import translatable
from service.errors import RequestError
from service.protection.markup import read_markup
from service.runtime.base import DecodingOptions
from tests.service.support import translated_by_fake


def found(text: str) -> list[tuple[str, str | None]]:
    return [(a.text, a.given) for a in translatable(read_markup(text, "html"), "en", "de")]


@pytest.mark.parametrize("text, expected", [
    ('<img src="a.png" alt="Save icon">', [("Save icon", None)]),
    ('<div alt="not for a div">x</div>', []),
    ('<a href="/x" title="Open the settings">Settings</a>', [("Open the settings", None)]),
    ('<input type="search" placeholder="Search files">', [("Search files", None)]),
    ('<textarea placeholder="Your message"></textarea>', [("Your message", None)]),
    ('<p placeholder="not for a paragraph">x</p>', []),
    ('<input type=button value=Cancel>', [("Cancel", None)]),
    ('<input type="RESET" value="Start over">', [("Start over", None)]),
    # What a form sends stays as sent: a submit button's value, a text field's.
    ('<input type="submit" value="Send">', []),
    ('<input value="Send">', []),
    ('<option value="de" label="German">Deutsch</option>', [("German", None)]),
    ('<th abbr="Qty">Quantity</th>', [("Qty", None)]),
    ('<button aria-label="Close the window">×</button>', [("Close the window", None)]),
    ('<p title=\'Tom &amp; "Jerry"\'>x</p>', [('Tom & "Jerry"', None)]),
    ('<html lang="en-GB"><p lang="fr">oui</p></html>', [("en-GB", "de")]),
    ('<p xml:lang="en" lang="en" title="A tip">Text</p>', [("en", "de"), ("en", "de"), ("A tip", None)]),
    # A part in a language of its own: words of that language, kept, its attributes with them.
    ('<p>An <abbr lang="en" title="HyperText Markup Language">HTML</abbr> page</p>', []),
    ('<p>Say <span lang="en"><b title="a greeting">hi</b></span> <i title="Loud">now</i></p>', [("Loud", None)]),
    ('<img alt="">', []),
    ('<img alt="   ">', []),
    ('<img alt>', []),
    # translate="no" and code are passed through whole, their attributes with them.
    ('<span translate="no" title="Brand">Acme</span>', []),
    ('<code title="the command">ls</code>', []),
    ('<!-- <img alt="a comment"> -->', []),
    ('<b title="One">a</b> <i title="Two">b</i>', [("One", None), ("Two", None)]),
])
def test_the_attributes_html_names_text_for_people_are_found(text, expected):
    assert found(text) == expected


def only(text: str, fmt: str = "html", alignment: str = "none"):
    (served,) = translated_by_fake([text], fmt, options=DecodingOptions(beam_size=1, alignment=alignment))[0]
    return served


@pytest.mark.parametrize("text, expected", [
    ('<p>Click the <img src="a.png" alt="Save icon"> button now</p>',
     '<p>NOW <img src="a.png" alt="ICON SAVE"> BUTTON THE CLICK</p>'),
    ('<a href="/x" title="Open the settings">Settings</a>', '<a href="/x" title="SETTINGS THE OPEN">SETTINGS</a>'),
    # A value written unquoted is quoted once it holds a space; the quotes it is written in escaped.
    ('<input type=button value="Go on"> <input type=reset value=Reset>',
     '<input type=button value="ON GO"> <input type=reset value="RESET">'),
    ('<p title=\'Say "hi" now\'>Hello there</p>', '<p title=\'NOW "HI" SAY\'>THERE HELLO</p>'),
    ('<p title="Say &quot;hi&quot; now">Hello there</p>', '<p title="NOW &quot;HI&quot; SAY">THERE HELLO</p>'),
    ('<p title="Tom &amp; Jerry">Hello there</p>', '<p title="JERRY &amp; TOM">THERE HELLO</p>'),
    # A text of nothing but an image: its description is all there is to translate.
    ('<img src="logo.png" alt="Company logo">', '<img src="logo.png" alt="LOGO COMPANY">'),
    ('<html lang="en"><body><p>Good morning</p></body></html>', '<html lang="de"><body><p>MORNING GOOD</p></body></html>'),
    ('<span translate="no" title="Keep me">Acme</span> is here', 'HERE <span translate="no" title="Keep me">Acme</span> IS'),
])
def test_attribute_values_come_back_translated_in_their_tags(text, expected):
    assert only(text).translation.text == expected


def test_a_plain_text_read_as_html_gets_its_attributes_translated():
    assert only('<a href="/x" title="Open the settings">Settings</a>', "text").translation.text == \
        '<a href="/x" title="SETTINGS THE OPEN">SETTINGS</a>'


def test_xml_attributes_stay_as_sent():
    # Xml vocabularies name their own attributes (KDE's <link url>, DocBook's): none is read as html's.
    assert only('<para title="Open the settings">Settings here</para>', "xml").translation.text == \
        '<para title="Open the settings">HERE SETTINGS</para>'


def test_placeholders_in_a_value_are_kept_as_in_a_plain_text():
    plain = only("Delete %s now", "text").translation.text
    assert only('<a href="%s" title="Delete %s now">Delete</a>').translation.text == \
        f'<a href="%s" title="{plain}">DELETE</a>'


def test_offsets_after_a_translated_attribute_still_slice_the_output():
    text = '<p title="A long title here">Open the <b title="x y">file</b> now</p><p>Close it</p>'
    served = only(text, alignment="token")
    output = served.translation.text
    assert output == '<p title="HERE TITLE LONG A">NOW <b title="Y X">FILE</b> THE OPEN</p><p>IT CLOSE</p>'
    for word in served.translation.alignment.target_words:
        assert output[word.start:word.end] == word.text
    openings = {p.text: p for p in served.placed}
    assert output[openings['<b title="x y">'].target_start:openings['<b title="x y">'].target_end] == '<b title="Y X">FILE</b>'
    assert output[openings['<p title="A long title here">'].target_start:].startswith('<p title="HERE TITLE LONG A">')
    for placed in served.placed:
        assert text[placed.source_start:].startswith(placed.text)


def test_random_pages_with_titles_keep_every_offset():
    rng = random.Random(7)
    words = ["open", "the", "file", "now", "%1", "save", "window"]

    def title() -> str:
        return " ".join(rng.choice(words) for _ in range(rng.randint(1, 3)))

    pages = []
    for _ in range(120):
        blocks = []
        for _ in range(rng.randint(1, 3)):
            inner = " ".join(rng.choice([f'<b title="{title()}">{title()}</b>', title(), f'<img alt="{title()}">'])
                             for _ in range(rng.randint(1, 3)))
            blocks.append(f'<p title="{title()}">{inner}.</p>' if rng.random() < 0.5 else f"<p>{inner}.</p>")
        pages.append("".join(blocks))
    answers = translated_by_fake(pages, "html", options=DecodingOptions(beam_size=1, alignment="token"))
    values = sorted({value for text in pages for value in re.findall(r'(?:title|alt)="([^"]*)"', text)})
    plain = {value: served.translation.text for value, (served,) in zip(values, translated_by_fake(values))}
    for text, (served,) in zip(pages, answers):
        output = served.translation.text
        for word in served.translation.alignment.target_words:
            assert output[word.start:word.end] == word.text, (text, output)
        sent = re.findall(r'(?:title|alt)="([^"]*)"', text)
        back = re.findall(r'(?:title|alt)="([^"]*)"', output)
        assert sorted(back) == sorted(plain[value] for value in sent), (text, output)
        for placed in served.placed:
            assert text[placed.source_start:].startswith(placed.text)
            if placed.kind == "tag":
                assert output[placed.target_start] == "<" and output[placed.target_end - 1] == ">", (text, output)


def test_an_error_names_the_text_sent_not_an_attribute():
    texts = ['<img alt="A picture">', '<p title="x">fine</p>', "<b>never closed"]
    with pytest.raises(RequestError) as caught:
        translated_by_fake(texts, "html")
    assert caught.value.index == 2


def test_a_glossary_term_in_an_attribute_is_reported_with_the_text_s_at_its_places():
    import asyncio

    from service.glossary import GlossaryEntry
    from service.settings import Settings
    from service.translator import Translator
    from testing.fake_runtime import FakeRuntime

    async def main(text: str, glossary: list[GlossaryEntry]):
        translator = Translator([FakeRuntime("en", "de")], Settings(max_wait_ms=1.0))
        translator.start()
        try:
            (answer,) = await translator.translate([text], "en", "de", DecodingOptions(beam_size=1), "html",
                                                   glossary=glossary)
            return answer[0]
        finally:
            await translator.stop()

    # An entity before the term in the value sent (&amp;), and one before it in the value written.
    text = '<p title="Tom &amp; file">Open the file</p><img alt="file &lt;new&gt; for Tom">'
    served = asyncio.run(main(text, [GlossaryEntry("file", "Akte")]))
    output = served.translation.text
    assert output == '<p title="Akte &amp; TOM">Akte THE OPEN</p><img alt="TOM FOR &lt;NEW&gt; Akte">'
    (report,) = served.glossary
    assert [text[a:b] for a, b in report.source_spans] == ["file"] * 3
    assert [output[a:b] for a, b in report.target_spans] == ["Akte"] * 3
    assert report.satisfied and report.enforced == "replaced"
    # Without the term in the text, the attribute's occurrences are the report.
    text = '<img alt="the file">'
    served = asyncio.run(main(text, [GlossaryEntry("file", "Akte")]))
    (report,) = served.glossary
    assert (report.source_spans, report.target_spans) == ([(14, 18)], [(10, 14)])
    assert (text[14:18], served.translation.text) == ("file", '<img alt="Akte THE">')
