"""The software domain in the study: a split named by its path (its own data directory), the
placeholders-kept metric and its column, and the shipped software study parts and recipes."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

from training.evaluate import placeholder_survival
from training.recipe import load_recipe
from training.study_report import collect, render_markdown
from training.study_spec import load_study, parse_study

REPO = Path(__file__).resolve().parents[2]
SMOKE = str(REPO / "recipes" / "smoke.json")


def test_placeholders_kept_counts_only_sources_with_placeholders():
    sources = ["Open %s", "Copy %1$s to %2$s", "Hello", "{count} files in ${DIR}"]
    hyps = ["%s öffnen", "%2$s nach %1$s", "Hallo", "{count} Dateien"]
    # 3 sources hold placeholders; the reordered printf pair counts as kept, the lost ${DIR} does not.
    assert placeholder_survival(sources, hyps) == {
        "score": 66.67, "sentences": 3, "signature": "placeholders|printf-brace-shell|multiset"}
    assert placeholder_survival(["Hello"], ["Hallo"])["score"] is None


def test_a_split_written_as_a_path_is_read_from_its_own_directory(tmp_path):
    software = tmp_path / "software"
    software.mkdir()
    with gzip.open(software / "test.de.gz", "wt", encoding="utf-8") as handle:
        handle.write("%s öffnen\nSpeichern\n")
    spec = parse_study({"name": "s", "out": str(tmp_path / "out"),
                        "evaluate": {"splits": [f"{software}/test", "test_2016_flickr"], "baseline": "base"},
                        "runs": [{"name": "base", "recipe": SMOKE}]}, "study.json")
    assert spec.evaluate.locate(f"{software}/test") == (software, "test")
    assert spec.evaluate.locate("test_2016_flickr") == (Path("data/multi30k"), "test_2016_flickr")
    run = tmp_path / "out" / "base" / "seed1"
    (run / "model").mkdir(parents=True)
    (run / "model" / "manifest.json").write_text(json.dumps({"target_lang": "de"}))
    (run / "eval").mkdir()
    flat = str(software).strip("/").replace("/", ".") + ".test"
    scores = {"bleu": {"score": 50.0}, "bleu_lowercase": {"score": 51.0}, "chrf": {"score": 70.0},
              "placeholders": {"score": 100.0, "sentences": 1}}
    (run / "eval" / f"{flat}.json").write_text(json.dumps(scores))
    (run / "eval" / f"{flat}.hyp").write_text("%s öffnen\nSichern\n")
    report = collect(spec, {})
    (row,) = report["runs"]
    assert row["scores"] == {f"{software}/test": {"bleu": 50.0, "bleu_lowercase": 51.0, "chrf": 70.0,
                                                  "placeholders": 100.0}}
    (entry,) = report["summary"]
    assert entry[f"{software}/test"]["placeholders"] == (100.0, None)
    header, _, line = render_markdown(report).splitlines()[4:7]
    assert f"{software}/test placeholders kept %" in header
    assert line.startswith("| base | 1 / 1 | — | 50.00 | 51.00 | 70.00 | 100.00 | — | — | — | — | — | — |")


def test_the_shipped_software_study_parts_parse_and_their_recipes_load():
    for name in ("en-de-software.json", "en-de-software-cpu-smoke.json"):
        spec = load_study(REPO / "studies" / name)
        assert spec.evaluate.splits == ("data/debian_catalogs/test", "test_2016_flickr")
        assert [run.name for run in spec.runs] == ["vanilla", "queryk-heterogeneous-1-2-3", "queryk-interleaved"]
        for run in spec.runs:
            recipe = load_recipe(REPO / run.recipe)
            assert (recipe.data_dir, recipe.train_split, recipe.valid_split) == ("data/debian_catalogs", "train", "valid")
            assert recipe.train_mix == [{"data_dir": "data/multi30k", "split": "train", "copies": 2},
                                        {"data_dir": "data/debian_catalogs", "split": "train.identical", "copies": 1},
                                        {"data_dir": "data/cldr_names", "split": "train", "copies": 48}]
