"""`python -m export.kernels_check MODEL_DIR`: verify float32 decoding through the C kernels.

The kernels (model/cpu_kernels, model/decoding/kernel_backend.py) compute the eager step's
function with sums in another order, so their log-probs equal eager float32's to rounding, and a
near-tie between two beams may in rare sentences go the other way. The torch backend decodes a
vanilla model on the CPU through them (PHRASAL_CPU_KERNELS=auto, the default) only when
MODEL_DIR/kernels_verification.json, written here, says passed for the weights it loads
(export/fast_path_check.py); otherwise eagerly, with a line in the log.

Criterion "kernels-float32" (both must hold):
- at least `min_identical` of the top hypotheses identical to eager float32 (default 99 %):
  rounding may flip an exact near-tie, nothing more;
- corpus BLEU against the reference translations no more than `max_bleu_drop` (default 0.05)
  below eager float32's (sacreBLEU 13a, cased, detokenised).

Exit codes: 0 verified (passed), 1 failed the criterion or the model cannot run on the kernels
(the record says so), 2 bad input (one line on stderr).
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Sequence

from export import fast_path_check
from export.fast_path_check import FastPath, FastPathCriterion
from model.model_dir import LoadedModel

RECORD_FILE = "kernels_verification.json"
CRITERION = "kernels-float32"
# Bumped when the kernels compute differently: an old record then no longer applies.
SCHEME = ("model/cpu_kernels v8: paged self-attention, per-sentence cross-attention, fused beam candidates, "
          "residual + layer norm, fused query/key/value projections, first step once per sentence, kernel encoder, "
          "the decoder step and the encoder in one call at every size with their linear layers in C (float_linear in "
          "tiles of up to 8 rows x 32 outputs, each output summed in a fixed order), the tied output projection and "
          "the memory's key and value projections in C")
DEFAULT_CRITERION = FastPathCriterion(min_identical=0.99, max_bleu_drop=0.05)
KERNELS_PATH = FastPath("float32 kernel path", "float32", CRITERION, DEFAULT_CRITERION, RECORD_FILE, SCHEME,
                        "python -m export.kernels_check", lambda model: model, requires_kernels=True)


def record_problem(model_dir: str | Path, loaded: LoadedModel) -> str | None:
    """Why float32 may not be decoded through the kernels for this model (None: it may)."""
    return fast_path_check.record_problem(KERNELS_PATH, model_dir, loaded, fast_path_check.KERNELS)


def main(argv: Sequence[str] | None = None) -> int:
    return fast_path_check.main(KERNELS_PATH, argv, __doc__.splitlines()[0])


if __name__ == "__main__":
    sys.exit(main())
