"""`python -m export.int8_check MODEL_DIR`: verify the int8 CPU fast path of a model directory.

The fast path is the model with its linear layers int8 dynamically quantised
(model/quantization.py), decoded by the C kernels where they can decode it
(model/decoding/kernel_backend.py), else eagerly; the record names the decoder. It runs our own
beam search, so it is judged like an export (export/fast_path_check.py) by the criterion below,
and the verdict is written to MODEL_DIR/int8_verification.json with the sha256 of the weights it
was made from. The torch backend serves int8 only when that record says passed for the weights
it loads and the decoder it would run (service/runtime/torch_runtime.py); otherwise it serves
float32 and logs why.

Criterion "int8-fast-path" (both must hold):
- at least `min_identical` of the top hypotheses identical to eager float32 (default 75 %):
  quantisation flips near-tied beams, so identity cannot be asked of every sentence, but most
  outputs must not move;
- corpus BLEU against the reference translations no more than `max_bleu_drop` (default 0.3)
  below eager float32's (sacreBLEU 13a, cased, detokenised): what a user would see. Without
  reference translations the check refuses to pass (it cannot measure that).

Exit codes: 0 verified (passed), 1 failed the criterion (the record says so; the service will
not use int8), 2 bad input (one line on stderr).
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Sequence

from export import fast_path_check
from export.fast_path_check import EagerRunner, FastPath, FastPathCriterion, judge  # noqa: F401 (this module's API)
from model.decoding import defaults as decoding_defaults
from model.model_dir import LoadedModel
from model.quantization import INT8, quantize_int8

RECORD_FILE = "int8_verification.json"
CRITERION = "int8-fast-path"
# Bumped when model/quantization.py quantises differently, or the kernel decoder runs the int8
# layers differently (v3: the output projection on oneDNN's packing from 32 rows up; v4: the
# encoder of up to 128 source positions in one kernel call, its attention in the C kernel,
# model/decoding/kernel_backend.py; v5: int8 weights per output channel and one input scale per
# row, model/int8_linear.py, the fused step and encoder at every size): an old record then
# no longer applies. (The fused decoder step gives the per-layer numbers bit for bit and needed no
# new scheme.)
SCHEME = "int8 per output channel, inputs per row (model/int8_linear.py); vanilla attention, feed-forward and output projection linears; v5"
DEFAULT_CRITERION = FastPathCriterion(min_identical=0.75, max_bleu_drop=0.3)
INT8_PATH = FastPath("int8 fast path", INT8, CRITERION, DEFAULT_CRITERION, RECORD_FILE, SCHEME,
                     "python -m export.int8_check", quantize_int8)


def check_int8(loaded: LoadedModel, data, criterion: FastPathCriterion = DEFAULT_CRITERION, *, runner=None,
               beam_size: int = decoding_defaults.BEAM_SIZE, batch_size: int = 32,
               one_at_a_time: bool = True) -> dict[str, Any]:
    """Decode `data` with eager float32 and with the int8 copy (or `runner`); the record to write."""
    return fast_path_check.check(INT8_PATH, loaded, data, criterion, runner=runner, beam_size=beam_size,
                                 batch_size=batch_size, one_at_a_time=one_at_a_time)


def record_problem(model_dir: str | Path, loaded: LoadedModel, decoder: str | None = None) -> str | None:
    """Why int8 may not serve this model on `decoder` (None: it may)."""
    return fast_path_check.record_problem(INT8_PATH, model_dir, loaded, decoder)


def main(argv: Sequence[str] | None = None) -> int:
    return fast_path_check.main(INT8_PATH, argv, __doc__.splitlines()[0])


if __name__ == "__main__":
    sys.exit(main())
