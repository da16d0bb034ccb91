"""`phrasal-export` / `python -m export {torchscript,onnx,ct2} MODEL_DIR OUT_DIR [options]`.

    python -m export onnx models/en-de exports/en-de-onnx
    python -m export onnx models/en-de exports/en-de-onnx-fp16 --dtype float16
    python -m export onnx models/en-de exports/en-de-onnx-int8 --dtype int8
    python -m export torchscript models/en-de exports/en-de-ts
    python -m export ct2 models/en-de exports/en-de-ct2-int8 --quantization int8
    python -m export ct2 models/en-de exports/en-de-ct2-int8 --quantization int8 --min-bleu 90

Every target: check support -> build -> verify against eager PyTorch (on by default: the first
--verify-sentences sentences of data/multi30k/<split>.<source lang>.gz) -> manifest.json.
Criteria (export/verify.py): identical top hypotheses and scores within a tolerance (100 % for
float32 graphs, >= 99 % for CTranslate2 float32 and float16 graphs); for quantised CTranslate2
exports and int8 ONNX graphs, corpus BLEU >= 85 of their output against eager float32 output. The manifest records
the criterion, its threshold and the result; failing cases are printed.
Criteria (cont.): float16 graphs are judged against the eager float16 model they were made
from, with their agreement with eager float32 reported beside it.
Exit codes: 0 exported and verified; 1 verification failed (the directory keeps the failing
manifest, runtimes refuse it), or the exporter or a runtime failed (one line on stderr;
--traceback for the whole story); 2 bad input or a model the target cannot export (one line on
stderr listing every reason).
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from pathlib import Path
from typing import Sequence

from export.ct2_target import QUANTIZATIONS
from model.decoding import defaults as decoding_defaults
from export.errors import ExportError, VerificationFailed
from export.pipeline import DTYPES, ONNX_DTYPES, ExportRequest, run_export
from export.verify import CRITERIA, failure_lines, summary_line

PROG = "phrasal-export"


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, not usage + error
        raise UsageError(message)


def _number(kind: type, low: float, high: float | None = None, what: str = ""):
    """An argparse type: a `kind` number in [low, high] (high None: no upper bound)."""

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            value = None
        if value is None or not math.isfinite(value) or value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
        return value

    return parse


_positive_int = _number(int, 1, what="a positive integer")
_fraction = _number(float, 0.0, 1.0, what="a number in [0, 1]")
_non_negative = _number(float, 0.0, what="a number >= 0")
_bleu = _number(float, 0.0, 100.0, what="a BLEU score in [0, 100]")

# Target-specific options: (flags, argparse keywords). Every target reads the common ones.
_DTYPE = (("--dtype",), {"choices": sorted(DTYPES), "default": "float32", "help": "weights and arithmetic of the graphs"})
_ONNX_DTYPE = (("--dtype",), {"choices": ONNX_DTYPES, "default": "float32",
                              "help": "weights and arithmetic of the graphs (int8: ONNX Runtime dynamic quantisation, CPU)"})
TARGET_OPTIONS = {
    "onnx": ("encoder + decoder-step ONNX graphs (onnxruntime)",
             [_ONNX_DTYPE, (("--opset",), {"type": _positive_int, "help": "ONNX opset (default: the exporter's)"})]),
    "torchscript": ("traced encoder + decoder-step modules", [_DTYPE]),
    "ct2": ("CTranslate2 model (vanilla Transformer only)",
            [(("--quantization",), {"choices": QUANTIZATIONS, "default": "float32"})]),
}


def _common_parser() -> argparse.ArgumentParser:
    common = _Parser(add_help=False)
    common.add_argument("model_dir", type=Path, metavar="MODEL_DIR", help="verified model directory (model.model_dir)")
    common.add_argument("out_dir", type=Path, metavar="OUT_DIR", help="directory to write the export into")
    common.add_argument("--force", action="store_true", help="replace OUT_DIR if it is not empty")
    common.add_argument("--traceback", action="store_true", help="on an unexpected failure, print the traceback")
    common.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                        help="where verification runs (and where TorchScript is traced)")
    v = common.add_argument_group("verification (export.verify states the criteria and default thresholds)")
    v.add_argument("--no-verify", dest="verify", action="store_false", help="skip verification against eager PyTorch")
    v.add_argument("--verify-sentences", type=_positive_int, default=300, metavar="N", help="sentences to verify on (default 300)")
    v.add_argument("--verify-data", type=Path, default=Path("data/multi30k"), metavar="DIR",
                   help="directory of <split>.<lang>.gz files (the target-language file, if present, gives references)")
    v.add_argument("--verify-split", default="test_2016_flickr", metavar="NAME", help="split to read (default test_2016_flickr)")
    v.add_argument("--beam-size", type=_positive_int, default=decoding_defaults.BEAM_SIZE,
                   help=f"beam size of both searches (default {decoding_defaults.BEAM_SIZE})")
    v.add_argument("--batch-size", type=_positive_int, default=32, help="sentences per batch (default 32)")
    v.add_argument("--criterion", choices=CRITERIA,
                   help="override the criterion (default: bleu-vs-eager for quantised ct2, identical-top otherwise)")
    v.add_argument("--min-match", type=_fraction, help="identical-top: override the required fraction of identical top hypotheses")
    v.add_argument("--score-tolerance", type=_non_negative, help="identical-top: override the allowed |score difference|")
    v.add_argument("--min-bleu", type=_bleu, help="bleu-vs-eager: override the required BLEU against eager float32 output")
    return common


def build_parser() -> argparse.ArgumentParser:
    """One parser: the options every target shares live on a parent parser."""
    common = _common_parser()
    parser = _Parser(prog=PROG, description="Export a phrasal model to ONNX, TorchScript or CTranslate2, verified against eager PyTorch.")
    sub = parser.add_subparsers(dest="target", required=True, parser_class=_Parser, metavar="{onnx,torchscript,ct2}")
    for target, (help_text, options) in TARGET_OPTIONS.items():
        target_parser = sub.add_parser(target, parents=[common], help=help_text)
        for flags, keywords in options:
            target_parser.add_argument(*flags, **keywords)
    return parser


def request_from(args: argparse.Namespace) -> ExportRequest:
    """Every parsed option is an ExportRequest field of the same name (target-specific ones
    absent for other targets keep the request's defaults)."""
    fields = {f.name for f in dataclasses.fields(ExportRequest)}
    return ExportRequest(**{name: value for name, value in vars(args).items() if name in fields})


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        request = request_from(args)
        manifest = run_export(request, log=lambda line: print(line, file=sys.stderr))
    except (UsageError, ExportError) as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return 2
    except VerificationFailed as error:
        result = error.manifest["verification"]
        print(summary_line(result))
        print("\n".join(failure_lines(result)))
        print(f"{PROG}: error: {request.out_dir} failed verification; runtimes will refuse it", file=sys.stderr)
        return 1
    except Exception as error:  # the exporter or a runtime broke: one line, not a traceback
        if args.traceback:
            raise
        first = str(error).strip().splitlines()[0][:300] if str(error).strip() else ""
        print(f"{PROG}: error: the {args.target} export failed: {type(error).__name__}: {first} "
              "(rerun with --traceback for details)", file=sys.stderr)
        return 1
    result = manifest["verification"]
    print(summary_line(result))
    if result.get("failures"):
        print("\n".join(failure_lines(result)))
    print(f"wrote {request.out_dir} ({manifest['target']}, {len(manifest['files'])} files hashed in manifest.json)")
    return 0
