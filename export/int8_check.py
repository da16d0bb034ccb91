"""`python -m export.int8_check MODEL_DIR`: verify the int8 CPU fast path of a model directory.

The fast path is the eager model with its linear layers int8 dynamically quantised
(model/quantization.py). It runs our own beam search, so it is judged like an export
(export/verify.py decodes both sides on the same batches with the service's decoding
defaults), by the criterion below, and the verdict is written to MODEL_DIR/int8_verification.json
with the sha256 of the weights it was made from. The torch backend serves int8 only when that
record says passed for the weights it loads (service/runtime/torch_runtime.py); otherwise it
serves float32 and logs why.

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

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence

import torch

from model.decoding import defaults as decoding_defaults
from model.model_dir import WEIGHTS_FILE, LoadedModel, load_model_dir
from model.errors import ArtifactError
from model.decoding.generate import SearchOptions, generate_ids
from model.quantization import INT8, quantize_int8
from export.errors import ExportError
from export.verify import BLEU_VS_EAGER, Thresholds, read_verify_set, verify

RECORD_FILE = "int8_verification.json"
CRITERION = "int8-fast-path"
# Bumped when model/quantization.py quantises differently: an old record then no longer applies.
SCHEME = "torch quantize_dynamic qint8 per-tensor; vanilla attention, feed-forward and output projection linears; v2"


@dataclass(frozen=True)
class FastPathCriterion:
    min_identical: float = 0.75  # fraction of top hypotheses identical to eager float32
    max_bleu_drop: float = 0.3  # BLEU points against the references, eager float32 minus int8


def judge(result: dict[str, Any], criterion: FastPathCriterion) -> list[str]:
    """The reasons `result` (export.verify.verify's) fails `criterion`; empty when it passes."""
    problems = []
    if result["sentences"] == 0:
        return ["no sentences were verified"]
    if result["identical_rate"] < criterion.min_identical:
        problems.append(f"identical top hypotheses {100 * result['identical_rate']:.1f} % < "
                        f"{100 * criterion.min_identical:.1f} %")
    references = result.get("bleu_vs_references")
    if references is None:
        problems.append("no reference translations, so the BLEU drop cannot be measured")
    else:
        drop = references["eager"] - references["exported"]
        if drop > criterion.max_bleu_drop + 1e-9:
            problems.append(f"BLEU against the references drops by {drop:.2f} > {criterion.max_bleu_drop:g} "
                            f"({references['eager']:.2f} -> {references['exported']:.2f})")
    return problems


class EagerRunner:
    """An eager model (here the quantised copy) behind the exporter's Runner interface."""

    has_attention = True
    has_phrase_attention = True
    native_phrases = False

    def __init__(self, model: torch.nn.Module):
        self.model = model

    def generate(self, sources: list[list[int]], options: SearchOptions):
        return generate_ids(self.model, sources, options)


def weights_sha256(loaded: LoadedModel) -> str:
    return loaded.manifest.get("files", {}).get(WEIGHTS_FILE, "")


def check_int8(loaded: LoadedModel, data, criterion: FastPathCriterion = FastPathCriterion(), *,
               runner=None, beam_size: int = decoding_defaults.BEAM_SIZE, batch_size: int = 32) -> dict[str, Any]:
    """Decode `data` (export.verify.VerifySet or a list of texts) with eager float32 and with the
    int8 copy (or `runner`), judge, and return the record to write."""
    runner = runner if runner is not None else EagerRunner(quantize_int8(loaded.model))
    # verify() reports everything the criterion reads; its own verdict (BLEU vs eager) is not ours.
    result = verify(loaded, runner, data, Thresholds(BLEU_VS_EAGER, min_bleu=0.0), beam_size=beam_size, batch_size=batch_size)
    problems = judge(result, criterion)
    for key in ("passed", "criterion", "min_bleu"):
        result.pop(key, None)
    return {
        "passed": not problems,
        "precision": INT8,
        "criterion": {"name": CRITERION, **asdict(criterion)},
        "problems": problems,
        "scheme": SCHEME,
        "weights_sha256": weights_sha256(loaded),
        "torch": torch.__version__,
        "result": result,
    }


def record_problem(model_dir: str | Path, loaded: LoadedModel) -> str | None:
    """Why the int8 fast path may not serve this model (None: it may): its record is missing,
    failed, or was made for other weights or another quantisation scheme."""
    path = Path(model_dir) / RECORD_FILE
    if not path.is_file():
        return f"{path} not found (run python -m export.int8_check {model_dir})"
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        return f"{path} is unreadable: {error}"
    if record.get("weights_sha256") != weights_sha256(loaded):
        return f"{path} was made for other weights; rerun python -m export.int8_check {model_dir}"
    if record.get("scheme") != SCHEME:
        return f"{path} was made for another quantisation scheme; rerun python -m export.int8_check {model_dir}"
    if not record.get("passed"):
        return f"{path} says int8 failed verification: {'; '.join(record.get('problems', [])) or 'no reason given'}"
    return None


def summary(record: dict[str, Any]) -> str:
    r = record["result"]
    refs = r.get("bleu_vs_references") or {}
    head = (f"int8 fast path {'PASSED' if record['passed'] else 'FAILED'} ({CRITERION}: >= "
            f"{100 * record['criterion']['min_identical']:.0f} % identical, BLEU drop <= {record['criterion']['max_bleu_drop']:g}): "
            f"{r['identical_top']}/{r['sentences']} identical top hypotheses, BLEU vs eager float32 {r['bleu_vs_eager']:.2f}")
    if refs:
        head += f", BLEU vs references {refs['eager']:.2f} -> {refs['exported']:.2f} ({refs['delta']:+.2f})"
    head += f", eager {r['seconds']['eager']:.1f}s vs int8 {r['seconds']['exported']:.1f}s"
    return head + "".join(f"\n  {p}" for p in record["problems"])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m export.int8_check", description=__doc__.splitlines()[0])
    parser.add_argument("model_dir", type=Path)
    parser.add_argument("--sentences", type=int, default=1000, help="first N sentences of the split (default 1000)")
    parser.add_argument("--data", type=Path, default=Path("data/multi30k"))
    parser.add_argument("--split", default="test_2016_flickr")
    parser.add_argument("--beam-size", type=int, default=decoding_defaults.BEAM_SIZE)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--min-identical", type=float, default=FastPathCriterion.min_identical)
    parser.add_argument("--max-bleu-drop", type=float, default=FastPathCriterion.max_bleu_drop)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    try:
        loaded = load_model_dir(args.model_dir)
        data = read_verify_set(args.data, args.split, loaded.source_lang, loaded.target_lang, args.sentences)
    except (ArtifactError, ExportError) as error:
        print(f"export.int8_check: error: {error}", file=sys.stderr)
        return 2
    record = check_int8(loaded, data, FastPathCriterion(args.min_identical, args.max_bleu_drop),
                        beam_size=args.beam_size, batch_size=args.batch_size)
    (args.model_dir / RECORD_FILE).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print(summary(record))
    print(f"wrote {args.model_dir / RECORD_FILE}")
    return 0 if record["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
