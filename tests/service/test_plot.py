"""`python -m service.plot`: the alignment matrix it draws, a PNG of the bundled model's
translation, and one-line errors."""
from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

from model.alignments.word_alignment import TokenAlignment, Word
from service.plot import alignment_matrix
from service.plot import main as plot_main

REPO = Path(__file__).resolve().parents[2]


def test_the_matrix_holds_each_target_words_link_weights():
    words = [Word("a", 0, 1), Word("b", 2, 3), Word("c", 4, 5)]
    alignment = TokenAlignment(words, words[:2], [[(2, 0.75), (0, 0.25)], []], [(2, 0)], "2-0")
    assert alignment_matrix(alignment) == [[0.25, 0.0, 0.75], [0.0, 0.0, 0.0]]


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_a_png_of_the_bundled_models_translation(tmp_path):
    out = tmp_path / "plots" / "align.png"
    done = subprocess.run([sys.executable, "-m", "service.plot", "--model-dir", "models/en-de", "--text",
                           "Two dogs play in the snow.", "--out", str(out)], capture_output=True, text=True, cwd=REPO)
    assert (done.returncode, done.stdout) == (0, f"{out}\n"), done.stderr
    width, height = png_size(out)
    assert width >= 480 and height >= 360


def test_bad_arguments_are_exit_2_and_one_line(tmp_path, capsys):
    assert plot_main(["--model-dir", str(tmp_path / "none"), "--text", "x", "--out", str(tmp_path / "a.png")]) == 2
    assert capsys.readouterr().err == f"phrasal-plot: error: model directory {tmp_path / 'none'} does not exist\n"
    assert plot_main(["--model-dir", "models/en-de", "--text", "x", "--out", str(tmp_path / "a.jpg")]) == 2
    assert capsys.readouterr().err == f"phrasal-plot: error: --out must name a .png file, got {tmp_path / 'a.jpg'}\n"
    assert plot_main(["--model-dir", "models/en-de", "--text", " ", "--out", str(tmp_path / "a.png")]) == 2
    assert capsys.readouterr().err == "phrasal-plot: error: --text is empty\n"
