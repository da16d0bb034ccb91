"""`phrasal-export` / `python -m export {torchscript,onnx,ct2} MODEL_DIR OUT_DIR [options]`.

    python -m export onnx models/en-de exports/en-de-onnx
    python -m export onnx models/en-de exports/en-de-onnx-fp16 --dtype float16
    python -m export torchscript models/en-de exports/en-de-ts
    python -m export ct2 models/en-de exports/en-de-ct2-int8 --quantization int8

Every target: check support -> build -> verify against eager PyTorch (on by default: the first
--verify-sentences sentences of data/multi30k/<split>.<source lang>.gz) -> manifest.json.
Exit codes: 0 exported and verified; 1 verification failed (the directory keeps the failing
manifest, runtimes refuse it); 2 bad input or a model the target cannot export (one line on
stderr listing every reason).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

from export.ct2_target import QUANTIZATIONS
from export.errors import ExportError, VerificationFailed
from export.pipeline import DTYPES, ExportRequest, run_export
from export.verify import failure_lines, summary_line

PROG = "phrasal-export"


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, not usage + error
        raise UsageError(message)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1], got {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1], got {text!r}")
    return value


def _non_negative(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """One parser: the options every target shares live on a parent parser."""
    common = _Parser(add_help=False)
    common.add_argument("model_dir", type=Path, metavar="MODEL_DIR", help="verified model directory (model.artifacts)")
    common.add_argument("out_dir", type=Path, metavar="OUT_DIR", help="directory to write the export into")
    common.add_argument("--force", action="store_true", help="replace OUT_DIR if it is not empty")
    common.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                        help="where verification runs (and where TorchScript is traced)")
    v = common.add_argument_group("verification")
    v.add_argument("--no-verify", dest="verify", action="store_false", help="skip verification against eager PyTorch")
    v.add_argument("--verify-sentences", type=_positive_int, default=300, metavar="N", help="sentences to verify on (default 300)")
    v.add_argument("--verify-data", type=Path, default=Path("data/multi30k"), metavar="DIR", help="directory of <split>.<lang>.gz files")
    v.add_argument("--verify-split", default="test_2016_flickr", metavar="NAME", help="split to read (default test_2016_flickr)")
    v.add_argument("--beam-size", type=_positive_int, default=5, help="beam size of both searches (default 5)")
    v.add_argument("--batch-size", type=_positive_int, default=32, help="sentences per batch (default 32)")
    v.add_argument("--min-match", type=_fraction, help="override the required fraction of identical top hypotheses")
    v.add_argument("--score-tolerance", type=_non_negative, help="override the allowed |score difference|")

    parser = _Parser(prog=PROG, description="Export a phrasal model to ONNX, TorchScript or CTranslate2, verified against eager PyTorch.")
    sub = parser.add_subparsers(dest="target", required=True, parser_class=_Parser, metavar="{onnx,torchscript,ct2}")
    onnx = sub.add_parser("onnx", parents=[common], help="encoder + decoder-step ONNX graphs (onnxruntime)")
    onnx.add_argument("--dtype", choices=sorted(DTYPES), default="float32")
    onnx.add_argument("--opset", type=_positive_int, help="ONNX opset (default: the exporter's)")
    ts = sub.add_parser("torchscript", parents=[common], help="traced encoder + decoder-step modules")
    ts.add_argument("--dtype", choices=sorted(DTYPES), default="float32")
    ct2 = sub.add_parser("ct2", parents=[common], help="CTranslate2 model (vanilla Transformer only)")
    ct2.add_argument("--quantization", choices=QUANTIZATIONS, default="float32")
    return parser


def request_from(args: argparse.Namespace) -> ExportRequest:
    return ExportRequest(
        target=args.target, model_dir=args.model_dir, out_dir=args.out_dir,
        dtype=getattr(args, "dtype", "float32"), quantization=getattr(args, "quantization", "float32"),
        opset=getattr(args, "opset", None), device=args.device, force=args.force, verify=args.verify,
        verify_sentences=args.verify_sentences, verify_data=args.verify_data, verify_split=args.verify_split,
        beam_size=args.beam_size, batch_size=args.batch_size, min_match=args.min_match,
        score_tolerance=args.score_tolerance,
    )


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        request = request_from(args)
        manifest = run_export(request, log=lambda line: print(line, file=sys.stderr))
    except UsageError as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return 2
    except ExportError as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return 2
    except VerificationFailed as error:
        result = error.manifest["verification"]
        print(summary_line(result))
        print("\n".join(failure_lines(result)))
        print(f"{PROG}: error: {request.out_dir} failed verification; runtimes will refuse it", file=sys.stderr)
        return 1
    result = manifest["verification"]
    print(summary_line(result))
    if result.get("failures"):
        print("\n".join(failure_lines(result)))
    print(f"wrote {request.out_dir} ({manifest['target']}, {len(manifest['files'])} files hashed in manifest.json)")
    return 0
