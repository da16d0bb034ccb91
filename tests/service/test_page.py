"""The page at GET / in headless Chromium (Debian's chromium, driven by Playwright) against a real
server on the bundled model: load it, translate, click a word, see its counterpart highlighted.
A screenshot is kept under build/test-artifacts/ for a person to look at."""
from __future__ import annotations

import json
import os
import shutil
import urllib.request
from pathlib import Path

import pytest
from playwright.sync_api import sync_playwright

from service.app import create_app
from service.settings import Settings
from testing.live_server import live_server

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("PHRASAL_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = REPO / "build" / "test-artifacts"
# What a root process in a sandbox without a network needs (no sandbox, no GPU, no phoning home).
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def base_url(tmp_path_factory):
    # A second En->De model beside the default: a test-only copy of models/en-de-align under another
    # name and domain (no software model is trained yet; none is shipped).
    second = tmp_path_factory.mktemp("models") / "en-de-software"
    shutil.copytree(REPO / "models" / "en-de-align", second)
    (second / "model_card.json").write_text(json.dumps({"domain": "software"}))
    settings = Settings(model_dirs=[REPO / "models" / "en-de", second], device="cpu", inference_process=False,
                        warmup=False, memories=[REPO / "memories" / "cldr-names.tmx"],
                        document_db=tmp_path_factory.mktemp("documents") / "documents.sqlite3")
    with live_server(create_app(settings)) as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    assert Path(CHROMIUM).exists(), f"{CHROMIUM} is missing: make test installs Debian's chromium (tools/system-packages.sh)"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


def highlighted(page) -> list[list[str]]:
    return page.eval_on_selector_all(".w.hl", "els => els.map(e => [e.dataset.side, e.textContent])")


def test_the_page_translates_and_highlights_the_counterpart_of_a_clicked_word(base_url, browser):
    page = browser.new_page(viewport={"width": 1100, "height": 700})
    refused = []  # what the page's Content-Security-Policy blocked: nothing it needs
    page.on("console", lambda message: refused.append(message.text) if "Content Security Policy" in message.text else None)
    page.goto(base_url + "/")
    page.wait_for_selector("#target option", state="attached")  # no string evaluation: the page's policy forbids eval
    # The source is detected unless the reader names it.
    assert page.eval_on_selector_all("#source option", "els => els.map(e => e.textContent)") == [
        "detect language", "English (en)"]
    assert page.eval_on_selector_all("#target option", "els => els.map(e => e.textContent)") == ["German (de)"]
    assert page.input_value("#source") == "auto"
    page.fill("#text", "Two dogs play in the snow.")
    page.click("#go")
    page.wait_for_selector('.hyp .w[data-side="target"]')
    assert page.inner_text(".hyp .output") == "Zwei Hunde spielen im Schnee."
    assert page.inner_text("#status") == "detected English (en), confidence 100 %"
    # "the" went into "im" with "in": no target word gives it a fifth of its attention.
    assert page.eval_on_selector_all(".w.omission", "els => els.map(e => [e.dataset.side, e.textContent])") == [
        ["source", "the"]]
    assert page.inner_text(".hyp .omissions") == "possibly untranslated (a hint, not a verdict): the"
    # models/en-de has no supervised head: "im" is flagged because its heaviest link is 0.40, under 0.5.
    assert page.eval_on_selector_all(".w.insertion", "els => els.map(e => [e.dataset.side, e.textContent])") == [
        ["target", "im"]]
    assert page.inner_text(".hyp .insertions") == "possibly not in the source (a hint, not a verdict): im"
    page.click('.w[data-side="target"][data-index="1"]')
    assert highlighted(page) == [["source", "dogs"], ["target", "Hunde"]]
    page.click('.w[data-side="source"][data-index="5"]')
    assert highlighted(page) == [["source", "snow."], ["target", "im"], ["target", "Schnee."]]
    # Phrase pairs colour the words they hold; the heat map has a row per target word.
    assert page.eval_on_selector_all(".w", "els => els.filter(e => e.style.borderBottomColor).length") > 0
    assert page.eval_on_selector_all(".heat tr", "rows => rows.length") == 1 + 5
    assert refused == []
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "page.png"), full_page=True)
    page.close()


def test_the_page_offers_the_models_of_the_chosen_pair_and_says_which_answered(base_url, browser):
    page = browser.new_page()
    refused = []
    page.on("console", lambda message: refused.append(message.text) if "Content Security Policy" in message.text else None)
    page.goto(base_url + "/")
    page.wait_for_selector("#target option", state="attached")
    # With "detect language" the pair is known only once the text is read: its default answers.
    assert page.eval_on_selector_all("#model option", "els => els.map(e => e.textContent)") == ["the pair's default"]
    page.select_option("#source", "en")
    # The bundled model's card (models/en-de/model_card.json); the copy's card states no scores.
    scores = json.loads((REPO / "models" / "en-de" / "model_card.json").read_text())["scores"]
    measured = ", ".join(f"BLEU {s['bleu']} on {name}" for name, s in scores.items())
    # Two domains: a request naming no model is answered by the model its text chooses (GET /models, defaults).
    assert page.eval_on_selector_all("#model option", "els => els.map(e => [e.value, e.textContent])") == [
        ["", "chosen by the text among en-de, en-de-software"], ["en-de", f"en-de (captions; {measured}; int8)"],
        ["en-de-software", "en-de-software (software; not measured; int8)"]]  # int8: verified, the CPU default
    assert page.input_value("#model") == ""
    page.fill("#text", "Two dogs play in the snow.")
    page.click("#go")
    page.wait_for_selector(".hyp .meta")
    assert page.inner_text(".hyp .meta").endswith(", model en-de")  # one tokenizer for both: a tie, the first
    page.select_option("#model", "en-de-software")
    page.click("#go")
    page.wait_for_function("() => document.querySelector('.hyp .meta').innerText.endsWith(', model en-de-software')")
    assert refused == []
    page.close()


def test_the_page_shows_placeholders_and_errors(base_url, browser):
    page = browser.new_page()
    page.goto(base_url + "/")
    page.wait_for_selector("#target option", state="attached")  # no string evaluation: the page's policy forbids eval
    page.fill("#text", "A {animal} runs in the snow.")
    page.click("#go")
    page.wait_for_selector(".hyp ul.protected li")
    assert "{animal}" in page.inner_text(".hyp .output")
    assert page.inner_text(".hyp ul.protected li").startswith("brace {animal} → characters ")
    page.select_option("#format", "xml")
    page.fill("#text", "fish & chips")
    page.click("#go")
    page.wait_for_selector("#status.error")
    assert page.inner_text("#status") == (
        "422: text: malformed xml: '&' at character 5 starts no entity (write &amp; for a literal '&')")
    page.close()


def test_the_page_sends_a_glossary_and_shows_its_report(base_url, browser):
    page = browser.new_page()
    page.goto(base_url + "/")
    page.wait_for_selector("#target option", state="attached")
    page.fill("#text", "Two dogs play in the snow.")
    page.fill("#glossary", "dogs = Köter\ncats = Katzen")
    page.click("#go")
    page.wait_for_selector(".hyp ul.glossary li")
    assert page.inner_text(".hyp .output") == "Zwei Köter spielen im Schnee."
    # Only the terms the text holds are reported.
    assert page.eval_on_selector_all(".hyp ul.glossary li", "els => els.map(e => e.textContent)") == [
        "glossary dogs → Köter: at characters 5–10, replaced"]
    page.close()


def test_the_page_says_which_part_a_translation_memory_answered(base_url, browser):
    page = browser.new_page()
    page.goto(base_url + "/")
    page.wait_for_selector("#target option", state="attached")
    page.fill("#text", "Sunday")
    page.click("#go")
    page.wait_for_selector(".hyp .memory")
    assert page.inner_text(".hyp .output") == "Sonntag"
    assert page.inner_text(".hyp .memory") == "from a translation memory, not the model: cldr-names at characters 0–7"
    page.close()


def test_the_page_translates_a_file_and_links_to_it(base_url, browser):
    page = browser.new_page()
    page.goto(base_url + "/")
    page.wait_for_selector("#target option", state="attached")
    assert page.get_attribute("#file", "accept").startswith(".po,.pot,.xlf")
    page.select_option("#source", "en")
    catalog = 'msgid ""\nmsgstr "Language: de\\n"\n\nmsgid "Two dogs play in the snow."\nmsgstr ""\n'
    page.set_input_files("#file", files=[{"name": "de.po", "mimeType": "text/x-gettext-translation",
                                          "buffer": catalog.encode()}])
    page.click("#gofile")
    page.wait_for_selector("#download")
    assert page.inner_text("#filestatus") == "translated: de.po"
    with urllib.request.urlopen(page.get_attribute("#download", "href")) as response:
        assert response.read().decode() == catalog.replace(
            'msgid "Two', '#, fuzzy\nmsgid "Two').replace('msgstr ""\n', 'msgstr "Zwei Hunde spielen im Schnee."\n')
    page.set_input_files("#file", files=[{"name": "report.pdf", "mimeType": "application/octet-stream", "buffer": b"PK"}])
    page.click("#gofile")
    page.wait_for_selector("#filestatus.error")
    assert page.inner_text("#filestatus").startswith("400: Invalid request: file format not supported: 'report.pdf'")
    page.close()
