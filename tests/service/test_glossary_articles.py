"""The article before a German noun that a glossary term replaced is chosen again by the model's
score given the source with its terms translated (service/protection/placement.py
`_agreeing_articles`, service/translator.py): "Der Ordner" with "folder" -> "Verzeichnis" becomes
"Das Verzeichnis" where the model prefers it; the runtime's score is the teacher-forced
log-probability (service/runtime/torch_runtime.py)."""
from __future__ import annotations

import pytest
import torch

from model.model_dir import load_model_dir, save_model_dir
from service.app import create_app
from service.catalog import ServedModel
from service.glossary import GlossaryEntry as Entry
from service.glossary import determiner_forms
from service.protection.placement import prepare, restore, terms_translated
from service.runtime.cards import read_card
from service.runtime.torch_runtime import TorchRuntime
from service.settings import Settings
from testing.fake_runtime import FakeRuntime, pair_of
from tests.helpers import tiny_model
from tests.service.hand_alignment import aligned
from tests.service.support import serving

SOURCE = "The folder could not be created."
TRANSLATION = "Der Ordner konnte nicht erstellt werden."
HARD = [(0, 0), (1, 1), (2, 2), (3, 3), (4, 5), (5, 4)]


def preferring(likes, asked: list[list[str]]):
    """A model score that records the candidates it is asked about and prefers those `likes` accepts."""
    def rescore(candidates: list[str]) -> list[float]:
        asked.append(candidates)
        return [1.0 if likes(c) else 0.0 for c in candidates]
    return rescore


def test_determiner_families_keep_the_capital():
    assert determiner_forms("Der") == ("Die", "Das", "Den", "Dem", "Des")
    assert determiner_forms("einen") == ("ein", "eine", "einem", "einer", "eines")
    assert determiner_forms("Ihre") == ("Ihr", "Ihren", "Ihrem", "Ihrer", "Ihres")
    assert determiner_forms("Ordner") == ()
    assert determiner_forms("Im") == ("In der", "In die", "In den") and determiner_forms("zur") == ("zum",)


def test_the_article_the_model_scores_best_with_the_term_is_taken():
    prepared = prepare(SOURCE, glossary=[Entry("folder", "Verzeichnis")])
    asked = []

    rescore = preferring(lambda c: c.startswith("Das "), asked)
    restored = restore(prepared, TRANSLATION, aligned(prepared.model_text, TRANSLATION, HARD), rescore)
    assert restored.text == "Das Verzeichnis konnte nicht erstellt werden."
    (candidates,) = asked  # the replaced text, then each other form of its determiner
    assert candidates == [f"{form} Verzeichnis konnte nicht erstellt werden."
                          for form in ("Der", "Die", "Das", "Den", "Dem", "Des")]
    assert terms_translated(prepared) == "The Verzeichnis could not be created."  # what they are scored against
    (report,) = restored.glossary
    assert (report.enforced, report.target_spans, report.satisfied) == ("replaced", [(4, 15)], True)


def test_without_a_score_or_a_better_one_the_article_stays():
    prepared = prepare(SOURCE, glossary=[Entry("folder", "Verzeichnis")])
    alignment = aligned(prepared.model_text, TRANSLATION, HARD)
    assert restore(prepared, TRANSLATION, alignment, lambda c: None).text == "Der Verzeichnis konnte nicht erstellt werden."
    assert restore(prepared, TRANSLATION, alignment, lambda c: [0.0] * len(c)).text == (
        "Der Verzeichnis konnte nicht erstellt werden.")  # a tie keeps the model's
    # A term the model satisfied needs no replacement, so nothing is scored.
    kept = prepare(SOURCE, glossary=[Entry("folder", "Ordner")])
    assert restore(kept, TRANSLATION, alignment, lambda c: pytest.fail("scored")).text == TRANSLATION


def test_the_adjectives_between_take_the_ending_the_model_scores_best():
    prepared = prepare("Delete the selected folder?", glossary=[Entry("folder", "Verzeichnis")])
    translation = "Den ausgewählten Ordner löschen?"
    asked = []

    rescore = preferring(lambda c: c == "Das ausgewählte Verzeichnis löschen?", asked)
    restored = restore(prepared, translation, aligned(prepared.model_text, translation, [(1, 0), (2, 1), (3, 2)]), rescore)
    assert restored.text == "Das ausgewählte Verzeichnis löschen?"
    (candidates,) = asked  # six determiners x five endings, the model's own first
    assert len(candidates) == 30 and candidates[0] == "Den ausgewählten Verzeichnis löschen?"
    assert "Das ausgewählte Verzeichnis löschen?" in candidates and "Die ausgewähltem Verzeichnis löschen?" in candidates


def test_a_zu_before_a_participle_is_part_of_the_noun_phrase_and_stays():
    prepared = prepare("Select a folder to import", glossary=[Entry("folder", "Verzeichnis")])
    translation = "Wählen Sie einen zu importierenden Ordner aus"
    asked = []

    rescore = preferring(lambda c: c == "Wählen Sie ein zu importierendes Verzeichnis aus", asked)
    alignment = aligned(prepared.model_text, translation, [(0, 0), (1, 2), (3, 3), (4, 4), (2, 5), (0, 6)])
    restored = restore(prepared, translation, alignment, rescore)
    assert restored.text == "Wählen Sie ein zu importierendes Verzeichnis aus"
    (candidates,) = asked  # the determiner's six forms x five endings of the participle; "zu" as it is
    assert len(candidates) == 30 and all(" zu " in c for c in candidates)


def test_a_contraction_before_a_feminine_term_opens_into_preposition_and_article():
    prepared = prepare("A dog runs in the park.", glossary=[Entry("park", "Grünanlage")])
    translation = "Ein Hund rennt im Park."
    asked = []

    rescore = preferring(lambda c: "in der Grünanlage" in c, asked)
    restored = restore(prepared, translation, aligned(prepared.model_text, translation, [(0, 0), (1, 1), (2, 2), (3, 3), (5, 4)]),
                       rescore)
    assert restored.text == "Ein Hund rennt in der Grünanlage."
    assert asked == [[f"Ein Hund rennt {form} Grünanlage." for form in ("im", "in der", "in die", "in den")]]
    (report,) = restored.glossary
    assert report.target_spans == [(22, 32)]


def test_a_word_that_is_a_glossary_term_itself_keeps_its_form():
    # "rote" is the required translation of "red": the noun after it is replaced, the term stays.
    glossary = [Entry("red", "rote"), Entry("ball", "Kugel")]
    prepared = prepare("The red ball.", glossary=glossary)
    translation = "Der rote Ball."
    restored = restore(prepared, translation, aligned(prepared.model_text, translation, [(0, 0), (1, 1), (2, 2)]),
                       lambda candidates: pytest.fail("scored"))
    assert restored.text == "Der rote Kugel."


class Scoring(FakeRuntime):
    """The fake runtime ("der folder" -> "FOLDER DER"), scoring a translation higher the more
    often it says "Das"."""

    def score(self, pairs):
        self.scored = getattr(self, "scored", []) + [list(pairs)]
        return [float(target.count("Das ")) for _, target in pairs]


def test_the_service_asks_the_models_score_for_german_articles(tmp_path):
    dirs = [tmp_path / "en-de", tmp_path / "de-en"]
    runtimes = {}

    def factory(settings):
        served = []
        for path in settings.model_dirs:
            runtimes[path.name] = Scoring(*pair_of(path))
            served.append(ServedModel(read_card(path, settings.model_domains), runtimes[path.name]))
        return served

    app = create_app(Settings(model_dirs=dirs, warmup=False), runtime_factory=factory)
    with serving(app) as client:
        body = {"text": "folder der", "source": "en", "target": "de", "glossary": [
            {"source": "folder", "target": "Verzeichnis"}]}
        response = client.post("/translate", json=body)
        assert response.status_code == 200
        assert response.json()["translations"][0][0]["text"] == "Das Verzeichnis"
        assert runtimes["en-de"].scored == [[("Verzeichnis der", f"{form} Verzeichnis")
                                             for form in ("DER", "Die", "Das", "Den", "Dem", "Des")]]
        body["text"] = "der folder"  # -> "FOLDER DER": no determiner before the noun, nothing scored
        assert client.post("/translate", json=body).json()["translations"][0][0]["text"] == "Verzeichnis DER"
        assert len(runtimes["en-de"].scored) == 1
        # English targets have no determiner table: no article is chosen, and a term the model
        # translated (its word links to it alone) needs no placing: nothing is scored.
        body = {"text": "die Ordner", "source": "de", "target": "en", "glossary": [{"source": "Ordner", "target": "folder"}]}
        assert client.post("/translate", json=body).json()["translations"][0][0]["text"] == "Folder DIE"
        assert not hasattr(runtimes["de-en"], "scored")


def test_the_torch_runtimes_score_is_the_teacher_forced_log_probability(tmp_path, tiny_spm):
    path = save_model_dir(tmp_path / "en-de", tiny_model(seed=3), tiny_spm, source_lang="en", target_lang="de")
    runtime = TorchRuntime(load_model_dir(path), torch.device("cpu"))
    model, tokenizer, c = runtime.model, runtime.loaded.tokenizer, runtime.model.config
    pairs = [("Two dogs play in the snow.", "Zwei Hunde spielen im Schnee."), ("A man.", "Ein Mann fährt Fahrrad.")]
    scores = runtime.score(pairs)  # one padded batch
    for (source, target), score in zip(pairs, scores):  # each alone, unpadded, by hand
        src = torch.tensor([tokenizer.encode_batch([source])[0] + [c.eos_id]])
        gold = torch.tensor([tokenizer.encode_batch([target])[0] + [c.eos_id]])
        tgt_in = torch.cat([torch.tensor([[c.bos_id]]), gold[:, :-1]], dim=1)
        with torch.inference_mode():
            log_probs = torch.log_softmax(model(src, tgt_in).logits.float(), dim=-1)
        assert score == pytest.approx(float(log_probs.gather(2, gold.unsqueeze(2)).sum()), abs=1e-4)
    assert runtime.score([]) == []


def test_without_articles_a_replaced_noun_keeps_the_models_article_and_nothing_is_scored():
    # A French target (service/translator.py): the determiners placement.py knows are German.
    prepared = prepare(SOURCE, glossary=[Entry("folder", "Verzeichnis")])
    asked = []

    rescore = preferring(lambda c: c.startswith("Das "), asked)
    restored = restore(prepared, TRANSLATION, aligned(prepared.model_text, TRANSLATION, HARD), rescore, articles=False)
    assert restored.text == "Der Verzeichnis konnte nicht erstellt werden." and asked == []
