"""training.service_align_eval: the AER of a service's /align answers against gold links (here the
app in-process, its HTTP replaced by the TestClient), and its errors as one line with exit code 2."""
from __future__ import annotations

import json

import pytest

from service.app import create_app
from service.settings import Settings
from tests.service.support import serving
from tests.service.test_align_endpoint import model_dirs  # noqa: F401  (fixture)
from training import alignment_metrics as am
from training import service_align_eval as cli

pytestmark = pytest.mark.usefixtures("one_thread")

SRC = ["Two dogs play .", "A man rides a bike ."]
TGT = ["Zwei Hunde spielen .", "Ein Mann fährt Fahrrad ."]
GOLD = ["0-0 1-1 2-2 3-3", "0-0 1-1 2-2 4-3 5-4"]


@pytest.fixture
def files(tmp_path):
    for name, lines in (("src.en", SRC), ("tgt.de", TGT), ("gold.txt", GOLD)):
        (tmp_path / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return tmp_path


@pytest.fixture
def through_app(monkeypatch, model_dirs):  # noqa: F811
    settings = Settings(model_dirs=[model_dirs["en-de"]], device="cpu", inference_process=False)
    with serving(create_app(settings)) as client:
        def post(url, body, api_key):
            response = client.post("/align", json=body)
            if response.status_code != 200:
                raise cli.UsageError(f"{url}/align answered {response.status_code}: {response.json()['message']}")
            return response.json()

        monkeypatch.setattr(cli, "post_align", post)
        yield client


def test_the_report_scores_what_the_service_returns(files, through_app, capsys):
    argv = ["--url", "http://test", "--source", "en", "--target", "de", "--src", str(files / "src.en"),
            "--tgt", str(files / "tgt.de"), "--gold", str(files / "gold.txt"), "--method", "attention", "--json",
            "--batch-size", "1"]
    assert cli.main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    answer = through_app.post("/align", json={"text": SRC, "translation": TGT, "source": "en", "target": "de",
                                              "alignment_method": "attention"}).json()
    links = [am.parse_links(a["pharaoh"]) for a in answer["alignments"]]
    gold, _, _ = am.read_gold(GOLD, 2)
    assert report["alignment_method"] == "attention" and report["models"] == ["en-de"]
    assert report["results"] == {"attention": am.score(links, gold).to_dict()}
    assert cli.main(argv[:-3] + ["--batch-size", "1"]) == 0  # the table align_eval prints
    scores = am.score(links, gold)
    assert capsys.readouterr().out.splitlines()[1:] == [
        f"{'method':34s} {'links':>7s} {'precision':>9s} {'recall':>7s} {'AER':>7s}",
        f"{'attention':34s} {scores.links:7d}    {scores.precision:6.4f}  {scores.recall:6.4f}  {scores.aer:6.4f}"]


def test_a_refused_request_is_one_line_and_exit_2(files, through_app, capsys):
    argv = ["--url", "http://test", "--source", "en", "--target", "fr", "--src", str(files / "src.en"),
            "--tgt", str(files / "tgt.de"), "--gold", str(files / "gold.txt")]
    assert cli.main(argv) == 2
    assert capsys.readouterr().err == ("phrasal-service-align-eval: error: http://test/align answered 422: "
                                       "target: language pair en-fr is not served; served pairs: en-de\n")


def test_an_unreachable_service_is_one_line_and_exit_2(files, capsys):
    argv = ["--url", "http://127.0.0.1:9", "--source", "en", "--target", "de", "--src", str(files / "src.en"),
            "--tgt", str(files / "tgt.de"), "--gold", str(files / "gold.txt")]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("phrasal-service-align-eval: error: cannot reach http://127.0.0.1:9: ") and err.count("\n") == 1


def test_a_model_is_asked_for_by_name_and_an_unknown_one_is_one_line(files, through_app, capsys):
    argv = ["--url", "http://test", "--source", "en", "--target", "de", "--src", str(files / "src.en"),
            "--tgt", str(files / "tgt.de"), "--gold", str(files / "gold.txt"), "--json"]
    assert cli.main(argv + ["--model", "en-de"]) == 0
    assert json.loads(capsys.readouterr().out)["models"] == ["en-de"]
    assert cli.main(argv + ["--model", "en-de-x"]) == 2
    assert capsys.readouterr().err.startswith("phrasal-service-align-eval: error: http://test/align answered 422: "
                                              "model: no model named 'en-de-x'")
