"""Word links from eflomal (unsupervised): the reference rows of training.align_eval and the
labels of training.alignment_labels."""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Sequence

from training import alignment_metrics as am
from training.usage import UsageError

Alignments = list[set[am.Link]]


def eflomal_alignments(
    source_words: Sequence[Sequence[str]], target_words: Sequence[Sequence[str]],
    extra_source: Sequence[str] = (), extra_target: Sequence[str] = (),
) -> tuple[Alignments, Alignments]:
    """eflomal's forward (one source word per target word) and reverse links for the given pairs.

    eflomal is unsupervised and learns from whatever it is given: the extra lines only add
    statistics, their links are thrown away. It has no seed, so reruns differ a little.
    """
    try:
        import eflomal
    except ImportError as error:
        raise UsageError(f"--reference eflomal needs the eflomal package (pip install eflomal): {error}") from None
    src = [" ".join(w) for w in source_words] + [" ".join(line.split()) for line in extra_source]
    tgt = [" ".join(w) for w in target_words] + [" ".join(line.split()) for line in extra_target]
    with tempfile.TemporaryDirectory(prefix="phrasal-eflomal-") as tmp:
        forward_file, reverse_file = Path(tmp) / "forward", Path(tmp) / "reverse"
        try:
            eflomal.Aligner().align(src, tgt, links_filename_fwd=str(forward_file),
                                    links_filename_rev=str(reverse_file), quiet=True)
        except Exception as error:  # an external aligner: whatever it raises, report it in one line
            raise UsageError(f"eflomal failed: {type(error).__name__}: {error}") from None
        n = len(source_words)
        out = []
        for path in (forward_file, reverse_file):
            lines = path.read_text(encoding="utf-8").split("\n")[:n]
            lines += [""] * (n - len(lines))
            out.append([am.parse_links(line, f"eflomal output line {k}") for k, line in enumerate(lines, 1)])
    return out[0], out[1]
