"""The bundled pair (models/en-de-align2 + models/de-en-align, what `make serve` serves) aligns the 50
hand-aligned gold De-En pairs (data/gold_align_deen_dev) through POST /align exactly as the
evaluation CLI's models do (training/forced_alignment.py), and the AER of what users get is pinned:
0.345 by the default (bidirectional), 0.370 by the En->De head alone (results/alignment.md). When a
bundled model or the alignment reading changes on purpose, measure again with
`python -m training.align_eval ... --supervised --row-column` and update the pins here, README.md
and results/alignment.md."""
from __future__ import annotations

import pytest

from model.alignments.bidirectional import agreement_links
from model.model_dir import load_model_dir
from tests.bundled.expectations import REPO, served, torch_settings
from training import alignment_metrics as am
from training.forced_alignment import align_direction

GOLD = REPO / "data" / "gold_align_deen_dev"
FORWARD, REVERSE = REPO / "models" / "en-de-align2", REPO / "models" / "de-en-align"
# (hits, links) against the 599 sure links; AER = 1 - 2·hits / (links + 599).
PINS = {"bidirectional": (405, 637), "supervised": (360, 544)}


@pytest.fixture(scope="module")
def gold():
    en = (GOLD / "test.en").read_text(encoding="utf-8").splitlines()
    de = (GOLD / "test.de").read_text(encoding="utf-8").splitlines()
    links, _, _ = am.read_gold((GOLD / "de-en.wa").read_text().splitlines(), len(en), "pharaoh", None, True, "gold")
    return en, de, links


@pytest.fixture(scope="module")
def served_links(gold):
    en, de, _ = gold
    settings = torch_settings().model_copy(update={"model_dirs": [FORWARD, REVERSE]})
    out = {}
    with served(settings, pairs=("de-en", "en-de")) as client:
        for method in (None, "supervised"):
            body = {"text": en, "translation": de, "source": "en", "target": "de"}
            if method:
                body["alignment_method"] = method
            response = client.post("/align", json=body)
            assert response.status_code == 200, response.text
            answer = response.json()
            for alignment, s, t in zip(answer["alignments"], en, de):  # the service's words are the gold's
                assert [w["text"] for w in alignment["source_words"]] == s.split()
                assert [w["text"] for w in alignment["target_words"]] == t.split()
            out[answer["alignment_method"]] = [
                am.parse_links(a["pharaoh"]) for a in answer["alignments"]]
    return out


def test_the_default_is_bidirectional_and_equals_the_evaluation_clis(gold, served_links):
    en, de = [s.split() for s in gold[0]], [t.split() for t in gold[1]]
    forward = align_direction(load_model_dir(FORWARD), en, de, supervised=True)
    reverse = align_direction(load_model_dir(REVERSE), de, en, supervised=True)
    expected = [agreement_links(f, r, s, t)[0] for f, r, s, t in zip(forward.rows, reverse.rows, en, de)]
    assert served_links["bidirectional"] == expected
    assert served_links["supervised"] == forward.symmetric


@pytest.mark.parametrize("method", sorted(PINS))
def test_the_aer_users_get_is_pinned(gold, served_links, method):
    scores = am.score(served_links[method], gold[2])
    assert (scores.hits_sure, scores.links) == PINS[method]
    assert scores.aer == pytest.approx(1 - 2 * PINS[method][0] / (PINS[method][1] + 599))
