"""POST /translate with placeholders, do-not-translate terms and inline markup, on the bundled
model (models/en-de, torch backend): each protected part comes back exactly once, unchanged, and
every reported offset slices the strings the client holds."""
from __future__ import annotations

from pathlib import Path

import pytest

from service.app import create_app
from service.protection.markup import read_markup
from service.settings import Settings
from tests.service.support import serving

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def client():
    settings = Settings(model_dirs=[REPO / "models" / "en-de"], device="cpu", inference_process=False, warmup=False)
    with serving(create_app(settings)) as client:
        yield client


def translate(client, **body):
    response = client.post("/translate", json={"source": "en", "target": "de", **body})
    assert response.status_code == 200, response.text
    return response.json()["translations"]


def assert_offsets_slice(text: str, hypothesis: dict) -> None:
    """Every reported part and aligned word slices the text sent and the output where it says."""
    output = hypothesis["text"]
    for p in hypothesis["protected"]:
        assert text[p["source"]["start"]:p["source"]["end"]] == p["text"]
        assert output[p["target"]["start"]:p["target"]["end"]] == p["text"]
    for word in hypothesis["alignment"]["target_words"]:
        assert output[word["start"]:word["end"]] == word["text"]
    for word in hypothesis["alignment"]["source_words"]:
        assert text[word["start"]:word["end"]] == word["text"]


@pytest.mark.parametrize("text, kept", [
    ("%lu to remove and %lu not upgraded.\n", ["%lu", "%lu"]),
    ("A {animal} is running in the park with %1$s.", ["{animal}", "%1$s"]),
    ("Two ${CHILDREN} play with %(count)d balls in {park}.", ["${CHILDREN}", "%(count)d", "{park}"]),
])
def test_placeholders_come_back_exactly_once_and_are_reported_where_they_are(client, text, kept):
    (nbest,) = translate(client, text=text, n_best=2, beam_size=4, alignment="token")
    for hypothesis in nbest:
        output = hypothesis["text"]
        for placeholder in set(kept):
            assert output.count(placeholder) == kept.count(placeholder), output
        reported = hypothesis["protected"]
        assert [p["text"] for p in reported] == kept
        assert_offsets_slice(text, hypothesis)


def test_an_icu_plural_comes_back_a_translated_sentence_a_branch_with_every_offset_slicing_the_strings(client):
    text = "Two ${CHILDREN} play with {count, plural, one {# ball} other {# balls}}."
    (nbest,) = translate(client, text=text, n_best=2, beam_size=4, alignment="token")
    for hypothesis in nbest:
        output = hypothesis["text"]
        assert output.startswith("{count, plural, one {") and output.endswith("}}"), output
        one, other = output[len("{count, plural, one {"):-2].split("} other {")
        for branch in (one, other):
            assert branch.count("${CHILDREN}") == 1 and branch.count("#") == 1 and "play" not in branch, output
        reported = hypothesis["protected"]
        assert sorted(p["text"] for p in reported) == ["#", "#", "${CHILDREN}", "${CHILDREN}"]
        assert_offsets_slice(text, hypothesis)


def test_do_not_translate_terms_are_kept_as_words(client):
    (nbest,) = translate(client, text="A man is riding a Brompton bike through Portland.",
                         do_not_translate=["Brompton", "Portland"])
    output = nbest[0]["text"]
    assert output.count("Brompton") == 1 and output.count("Portland") == 1
    assert [(p["kind"], p["text"], p["placement"] in ("aligned", "fallback")) for p in nbest[0]["protected"]] == [
        ("term", "Brompton", True), ("term", "Portland", True)]


def test_html_tags_wrap_the_translation_of_what_they_wrapped(client):
    text = 'A <b>little girl</b> climbs into a <a href="/toys?id=1&amp;x=2">wooden playhouse</a>.<br/>'
    (nbest,) = translate(client, text=text, format="html", alignment="token")
    output = nbest[0]["text"]
    tags = read_markup(output, "xml").tags  # well nested: XML's rules are the stricter
    assert [(t.opening, t.closing) for t in tags] == [
        ("<b>", "</b>"), ('<a href="/toys?id=1&amp;x=2">', "</a>"), ("<br/>", None)]
    b, a, _ = tags
    plain = read_markup(output, "xml").plain
    assert plain[b.start:b.end] in ("kleines Mädchen", "Ein kleines Mädchen")
    assert "Spielhaus" in plain[a.start:a.end]
    for p in nbest[0]["protected"]:
        assert output[p["target"]["start"]:].startswith(p["text"])
        assert text[p["source"]["start"]:].startswith(p["text"])


def test_each_block_of_html_is_translated_on_its_own_and_its_tags_are_kept_as_sent(client):
    text = "<ul>\n  <li>A dog runs.</li>\n  <li>A girl sleeps.</li>\n</ul>"
    (nbest,) = translate(client, text=text, format="html", alignment="token")
    output = nbest[0]["text"]
    assert output.startswith("<ul>\n  <li>") and output.endswith("</li>\n</ul>")
    first, second = read_markup(output, "html").plain.strip().split("\n  ")
    assert "Hund" in first and "Hund" not in second and "Mädchen" in second
    assert [(p["text"], p["placement"]) for p in nbest[0]["protected"]] == [
        ("<ul>", "kept"), ("<li>", "kept"), ("<li>", "kept")]
    for p in nbest[0]["protected"]:
        assert output[p["target"]["start"]:p["target"]["end"]] == text[p["source"]["start"]:p["source"]["end"]]
    for word in nbest[0]["alignment"]["source_words"]:
        assert text[word["start"]:word["end"]] == word["text"]
    for word in nbest[0]["alignment"]["target_words"]:
        assert output[word["start"]:word["end"]] == word["text"]


def test_entities_and_non_ascii_survive_html(client):
    (nbest,) = translate(client, text="Tom &amp; Jerry eat <i>crème brûlée</i>.", format="html")
    output = nbest[0]["text"]
    assert "&amp;" in output and "&" not in output.replace("&amp;", "")
    assert output.count("<i>") == output.count("</i>") == 1


@pytest.mark.parametrize("body, message", [
    ({"text": "<b>bold <i>both</b></i>", "format": "html"},
     "text: malformed html: closing tag </b> at character 15 does not match <i> opened at character 8"),
    ({"text": ["fine", "fish & chips"], "format": "xml"},
     "text.1: malformed xml: '&' at character 5 starts no entity (write &amp; for a literal '&')"),
    # The text before is translated block by block (two segments): the index is still the text's.
    ({"text": ["<p>A dog.</p><p>A cat.</p>", "fish & chips"], "format": "xml"},
     "text.1: malformed xml: '&' at character 5 starts no entity (write &amp; for a literal '&')"),
    ({"text": "x", "format": "markdown"}, "format: Input should be 'text', 'html' or 'xml'"),
    ({"text": "x", "do_not_translate": [""]}, "do_not_translate.0: String should have at least 1 character"),
])
def test_bad_markup_and_options_are_422_naming_the_field(client, body, message):
    response = client.post("/translate", json={"source": "en", "target": "de", **body})
    assert response.status_code == 422
    assert response.json()["message"] == message


def test_a_text_of_placeholders_only_is_answered_without_a_model_call(client):
    (nbest,) = translate(client, text="{0} %s")
    assert nbest == [{"text": "{0} %s", "score": 0.0, "protected": [
        {"kind": "brace", "text": "{0}", "source": {"start": 0, "end": 3}, "target": {"start": 0, "end": 3},
         "placement": "kept"},
        {"kind": "printf", "text": "%s", "source": {"start": 4, "end": 6}, "target": {"start": 4, "end": 6},
         "placement": "kept"}]}]


def test_plain_text_without_placeholders_is_what_it_was(client):
    # The bundled model as the service serves it by default (int8; float32 gives -0.06404).
    (nbest,) = translate(client, text="Two dogs play in the snow.")
    assert nbest == [{"text": "Zwei Hunde spielen im Schnee.", "score": pytest.approx(-0.06390, abs=1e-4)}]
