"""benchmarks/as_written.py's reading of gettext's line-break check, by hand, and its refusal of
a split whose as-written file is missing."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from benchmarks.as_written import form_kept

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("message, output, kept", [
    ("Save\n", "Speichern\n", True),
    ("\nDone", "\nFertig", True),
    ("Save\n", "Speichern", False),           # the message's final break lost
    ("Save", "Speichern\n", False),           # one added
    ("\n\nDone.\n", "\nFertig.\n", True),     # gettext compares the first and last character only
    ("a\nb", "x y", True),                    # inner breaks are not its business (the lines row is)
])
def test_form_kept_is_msgfmts_begin_and_end_rule(message, output, kept):
    assert form_kept(message, output) is kept


def test_a_missing_model_directory_is_one_line_and_exit_code_2(tmp_path):
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "as_written.py"), "--model-dirs",
                           str(tmp_path / "none")], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].endswith(f"--model-dirs: no such directory: {tmp_path / 'none'}")
