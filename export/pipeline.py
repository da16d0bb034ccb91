"""One export: check support -> build -> verify -> manifest, the same for every target."""
from __future__ import annotations

import copy
import shutil
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

import torch

from model.decoding import defaults as decoding_defaults
from model.model_dir import TOKENIZER_FILE, LoadedModel, load_model_dir
from model.errors import ArtifactError
from export.exported_dir import ExportedDir, read_export_dir, write_manifest
from export.errors import ExportError, UnsupportedModel, VerificationFailed
from export.runners import open_runner
from export.support import TARGETS, check_support
from export.verify import BLEU_VS_EAGER, CRITERIA, Thresholds, default_thresholds, read_verify_set, verify

DTYPES = {"float32": torch.float32, "float16": torch.float16}
# ONNX only: the float32 graphs dynamically quantised by ONNX Runtime (export/onnx_quantize.py).
GRAPH_INT8 = "int8"
ONNX_DTYPES = (*DTYPES, GRAPH_INT8)


@dataclass(frozen=True)
class ExportRequest:
    target: str
    model_dir: Path
    out_dir: Path
    dtype: str = "float32"  # onnx / torchscript; onnx also "int8"
    quantization: str = "float32"  # ct2
    opset: int | None = None  # onnx; None: the exporter's default
    device: str = "cpu"  # torchscript traces on it; verification runs on it
    force: bool = False
    verify: bool = True
    verify_sentences: int = 300
    verify_data: Path = Path("data/multi30k")
    verify_split: str = "test_2016_flickr"
    beam_size: int = decoding_defaults.BEAM_SIZE
    batch_size: int = 32
    # Overrides of the defaults by target and precision (export.verify.default_thresholds).
    criterion: str | None = None  # "identical-top" | "bleu-vs-eager"
    min_match: float | None = None
    score_tolerance: float | None = None
    min_bleu: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def precision(self) -> str:
        return self.quantization if self.target == "ct2" else self.dtype

    def options(self) -> dict[str, Any]:
        """What the manifest records as the export options."""
        if self.target == "ct2":
            return {"quantization": self.quantization}
        out: dict[str, Any] = {"dtype": self.dtype}
        if self.target == "onnx":
            out["opset_requested"] = self.opset
        else:
            out["device"] = self.device
        return out


def _prepare_out_dir(request: ExportRequest) -> None:
    out, model_dir = request.out_dir.resolve(), request.model_dir.resolve()
    if out == model_dir or model_dir in out.parents:
        raise ExportError(f"OUT_DIR {request.out_dir} must lie outside MODEL_DIR {request.model_dir}")
    if out.exists():
        if not out.is_dir():
            raise ExportError(f"OUT_DIR {request.out_dir} exists and is not a directory")
        if any(out.iterdir()):
            if not request.force:
                raise ExportError(f"OUT_DIR {request.out_dir} exists and is not empty; pass --force to replace it")
            shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)


def _empty_out_dir(out: Path, remove: bool) -> None:
    if remove:
        shutil.rmtree(out, ignore_errors=True)
        return
    for path in out.iterdir():
        shutil.rmtree(path) if path.is_dir() else path.unlink()


def thresholds_for(request: ExportRequest) -> Thresholds:
    """The defaults for the target and precision, with the request's overrides; an override that
    the criterion in force does not read is refused rather than ignored."""
    base = default_thresholds(request.target, request.precision)
    if request.criterion is not None:
        if request.criterion not in CRITERIA:
            raise ExportError(f"criterion must be one of {', '.join(CRITERIA)}, got {request.criterion!r}")
        base = replace(base, criterion=request.criterion)
    unused = ["min_match", "score_tolerance"] if base.criterion == BLEU_VS_EAGER else ["min_bleu"]
    given = [name for name in unused if getattr(request, name) is not None]
    if given:
        flags = ", ".join("--" + name.replace("_", "-") for name in given)
        raise ExportError(
            f"{flags} does not apply: this export is verified by {base.criterion} "
            f"(choose the criterion with --criterion {'|'.join(CRITERIA)})"
        )
    override = {"min_match": request.min_match, "score_tolerance": request.score_tolerance, "min_bleu": request.min_bleu}
    return replace(base, **{key: value for key, value in override.items() if value is not None})


def _build(
    request: ExportRequest, loaded: LoadedModel, log: Callable[[str], None]
) -> tuple[ExportedDir, dict[str, Any], torch.nn.Module | None]:
    """The export, its build info, and the eager model the graphs were made from when it is not
    the loaded float32 model (float16 graphs: verified against it)."""
    out = request.out_dir
    layout = None
    reference = None
    started = f"exporting {request.model_dir} ({loaded.source_lang}-{loaded.target_lang}) to {request.target} [{request.precision}] in {out}"
    if request.target == "ct2":
        _, reasons = check_support(loaded.model, "ct2")
        if reasons:
            raise UnsupportedModel("ct2", reasons)
        log(started)
        from export.ct2_target import build_ct2

        info = build_ct2(loaded.model, loaded.tokenizer, out, request.quantization)
    else:
        if request.dtype == GRAPH_INT8 and request.target != "onnx":
            raise ExportError(f"dtype int8 is for onnx exports (ONNX Runtime quantisation), not {request.target}")
        if request.dtype not in (*DTYPES, GRAPH_INT8):
            raise ExportError(f"dtype must be one of {', '.join(ONNX_DTYPES)}, got {request.dtype!r}")
        device = "cpu" if request.target == "onnx" else request.device
        if device == "cuda" and not torch.cuda.is_available():
            raise ExportError("--device cuda was asked for but torch sees no CUDA device")
        # A copy: the loaded model stays the float32 eager reference for verification.
        model = copy.deepcopy(loaded.model).to(device=device, dtype=DTYPES.get(request.dtype, torch.float32)).eval()
        layout, reasons = check_support(model, request.target)
        if reasons:
            raise UnsupportedModel(request.target, reasons)
        log(started)
        if request.target == "onnx":
            from export.onnx_target import build_onnx

            info = build_onnx(model, layout, out, request.opset)
            if request.dtype == GRAPH_INT8:
                from export.onnx_quantize import quantize_graphs_int8

                info.update(quantize_graphs_int8(out, info["files"]))
        else:
            from export.torchscript_target import build_torchscript

            info = build_torchscript(model, layout, out)
        if request.dtype in DTYPES and request.dtype != "float32":
            reference = model  # int8 graphs have no eager counterpart: judged against float32
    shutil.copyfile(loaded.path / TOKENIZER_FILE, out / TOKENIZER_FILE)
    exported = ExportedDir(out, request.target, loaded.config, loaded.source_lang, loaded.target_lang, request.options(), layout, {})
    return exported, info, reference


def run_export(request: ExportRequest, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Export, verify and write the manifest; returns it. Raises ExportError / UnsupportedModel
    (bad input, exit 2) or VerificationFailed (exit 1, after writing the failing manifest)."""
    if request.target not in TARGETS:
        raise ExportError(f"unknown target {request.target!r}; known: {', '.join(TARGETS)}")
    try:
        loaded = load_model_dir(request.model_dir)
    except ArtifactError as error:
        raise ExportError(str(error)) from None
    data, thresholds = None, None
    if request.verify:  # fail before the slow part
        thresholds = thresholds_for(request)
        data = read_verify_set(request.verify_data, request.verify_split, loaded.source_lang, loaded.target_lang,
                               request.verify_sentences)
    created = not request.out_dir.exists()
    _prepare_out_dir(request)
    try:
        exported, info, reference = _build(request, loaded, log)
        if data is not None and thresholds is not None:
            runner = open_runner(exported, device=request.device)
            result = verify(loaded, runner, data, thresholds, beam_size=request.beam_size,
                            batch_size=request.batch_size, reference=reference, reference_precision=request.dtype)
        else:
            result = {"skipped": True}
    except BaseException:
        # Half-written graphs without a manifest are no export: leave the directory as it was
        # found (absent or empty), so that the next attempt needs no --force.
        _empty_out_dir(request.out_dir, remove=created)
        raise
    manifest = write_manifest(exported, extra={
        "build": info,
        "verification": result,
        "source_model": {"path": str(request.model_dir), "files": loaded.manifest.get("files", {})},
        **request.extra,
    })
    if result.get("passed") is False:
        raise VerificationFailed(manifest)
    read_export_dir(request.out_dir, request.target)  # what a runtime will check, checked once now
    return manifest
