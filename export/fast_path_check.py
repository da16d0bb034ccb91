"""Verification of a CPU fast path of a model directory: what export/int8_check.py (int8 linear
layers) and export/kernels_check.py (the C decoding kernels, float32) share.

A fast path runs our own beam search on other arithmetic than eager float32, so it is judged like
an export (export/verify.py decodes both sides on the same batches with the service's decoding
defaults) by a `FastPathCriterion`, and the verdict is written into the model directory with the
sha256 of the weights it was made from. The torch backend serves a fast path only while its
record says passed for the weights it loads and for the decoder it will use
(service/runtime/torch_runtime.py); otherwise it serves eager float32 and logs why.
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import torch

from export.errors import ExportError
from export.verify import BLEU_VS_EAGER, Thresholds, read_verify_set, verify
from model.decoding import defaults as decoding_defaults
from model.decoding.generate import generate_ids
from model.decoding.options import DecodingOptions
from model.decoding.kernel_backend import EAGER, KERNELS, KernelBackend, decoder_for, kernel_decoding_problem
from model.errors import ArtifactError
from model.model_dir import WEIGHTS_FILE, LoadedModel, load_model_dir

@dataclass(frozen=True)
class FastPathCriterion:
    min_identical: float  # fraction of top hypotheses identical to eager float32
    max_bleu_drop: float  # BLEU points against the references, eager float32 minus the fast path


@dataclass(frozen=True)
class FastPath:
    """One fast path: how it is named, checked, recorded and made."""

    title: str  # "int8 fast path"
    precision: str  # what the record's "precision" says
    criterion_name: str
    default_criterion: FastPathCriterion
    record_file: str
    scheme: str  # bumped when the path computes differently: an old record then no longer applies
    command: str  # "python -m export.int8_check"
    model: Callable[[torch.nn.Module], torch.nn.Module]  # the float32 model -> the model it decodes
    requires_kernels: bool = False  # the path is the kernels: a model they cannot decode fails


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
    """A model (a quantised copy, say) or a step backend behind the exporter's Runner interface."""

    has_attention = True
    has_phrase_attention = True
    is_phrasal = False

    def __init__(self, model):
        self.model = model

    def generate(self, sources: list[list[int]], options: DecodingOptions):
        return generate_ids(self.model, sources, options)


def runner_for(model: torch.nn.Module) -> EagerRunner:
    return EagerRunner(KernelBackend(model) if decoder_for(model) == KERNELS else model)


class _Recorded:
    """A runner that keeps the top hypothesis' tokens of every sentence it decodes, in order."""

    def __init__(self, runner):
        self._runner = runner
        self.tokens: list[list[int]] = []

    def __getattr__(self, name: str):
        return getattr(self._runner, name)

    def generate(self, sources: list[list[int]], options: DecodingOptions):
        found = self._runner.generate(sources, options)
        self.tokens += [list(nbest[0].tokens) for nbest in found]
        return found


def weights_sha256(loaded: LoadedModel) -> str:
    return loaded.manifest.get("files", {}).get(WEIGHTS_FILE, "")


def check(path: FastPath, loaded: LoadedModel, data, criterion: FastPathCriterion | None = None, *,
          runner=None, beam_size: int = decoding_defaults.BEAM_SIZE, batch_size: int = 32,
          one_at_a_time: bool = True) -> dict[str, Any]:
    """Decode `data` (export.verify.VerifySet or a list of texts) with eager float32 and with the
    fast path (or `runner`), judge, and return the record to write. With `one_at_a_time`, also
    one sentence at a time (record["one_at_a_time"], judged alike), and how many top hypotheses
    the two runs of the fast path share (record["batched_equals_alone"]): whether a translation
    depends on the other texts of its batch."""
    criterion = criterion or path.default_criterion
    record = {"precision": path.precision, "criterion": {"name": path.criterion_name, **asdict(criterion)},
              "scheme": path.scheme, "weights_sha256": weights_sha256(loaded), "torch": torch.__version__}
    decoder = None
    if runner is None:
        model = path.model(loaded.model)
        decoder = decoder_for(model)
        if path.requires_kernels and decoder != KERNELS:
            problem = f"the kernels cannot decode this model: {kernel_decoding_problem(model)}"
            return {**record, "passed": False, "decoder": decoder, "problems": [problem], "result": None}
        runner = runner_for(model)
    def judged(batch: int) -> tuple[dict[str, Any], list[str], list[list[int]]]:
        # verify() reports everything the criterion reads; its own verdict (BLEU vs eager) is not ours.
        recorded = _Recorded(runner)
        result = verify(loaded, recorded, data, Thresholds(BLEU_VS_EAGER, min_bleu=0.0), beam_size=beam_size,
                        batch_size=batch)
        problems = judge(result, criterion)
        for key in ("passed", "criterion", "min_bleu"):
            result.pop(key, None)
        return result, problems, recorded.tokens

    result, problems, batched = judged(batch_size)
    if one_at_a_time and batch_size != 1:
        record["one_at_a_time"], single_problems, alone = judged(1)
        problems += [f"one sentence at a time: {problem}" for problem in single_problems]
        record["batched_equals_alone"] = {"identical_top": sum(a == b for a, b in zip(batched, alone)),
                                          "sentences": len(alone), "batch_size": batch_size}
    return {**record, "passed": not problems, "decoder": decoder or "given runner", "problems": problems, "result": result}


def record_problem(path: FastPath, model_dir: str | Path, loaded: LoadedModel, decoder: str | None = None) -> str | None:
    """Why `path` may not serve this model (None: it may): its record is missing, failed, or was
    made for other weights, another scheme or (when `decoder` is given) another decoder."""
    file = Path(model_dir) / path.record_file
    rerun = f"{path.command} {model_dir}"
    if not file.is_file():
        return f"{file} not found (run {rerun})"
    try:
        record = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        return f"{file} is unreadable: {error}"
    if record.get("weights_sha256") != weights_sha256(loaded):
        return f"{file} was made for other weights; rerun {rerun}"
    if record.get("scheme") != path.scheme:
        return f"{file} was made for another scheme; rerun {rerun}"
    # Records from before the kernels existed were all made on the eager decoder.
    if decoder is not None and record.get("decoder", EAGER) != decoder:
        return f"{file} verified the {record.get('decoder', EAGER)} decoder, this process would run the {decoder} one; rerun {rerun}"
    if not record.get("passed"):
        return f"{file} says the {path.title} failed verification: {'; '.join(record.get('problems', [])) or 'no reason given'}"
    return None


def summary(path: FastPath, record: dict[str, Any]) -> str:
    r = record["result"]
    if r is None:
        return f"{path.title} FAILED: " + "; ".join(record["problems"])
    refs = r.get("bleu_vs_references") or {}
    head = (f"{path.title} ({record['decoder']} decoder) {'PASSED' if record['passed'] else 'FAILED'} "
            f"({path.criterion_name}: >= {100 * record['criterion']['min_identical']:.0f} % identical, "
            f"BLEU drop <= {record['criterion']['max_bleu_drop']:g}): "
            f"{r['identical_top']}/{r['sentences']} identical top hypotheses, BLEU vs eager float32 {r['bleu_vs_eager']:.2f}")
    if refs:
        head += f", BLEU vs references {refs['eager']:.2f} -> {refs['exported']:.2f} ({refs['delta']:+.2f})"
    head += f", eager {r['seconds']['eager']:.1f}s vs {path.precision} {r['seconds']['exported']:.1f}s"
    single = record.get("one_at_a_time")
    if single:
        head += (f"; one sentence at a time {single['identical_top']}/{single['sentences']} identical, "
                 f"BLEU vs eager float32 {single['bleu_vs_eager']:.2f}")
    alike = record.get("batched_equals_alone")
    if alike:
        head += (f"; the {path.precision} top hypothesis the same in batches of {alike['batch_size']} as alone: "
                 f"{alike['identical_top']}/{alike['sentences']}")
    return head + "".join(f"\n  {p}" for p in record["problems"])


def main(path: FastPath, argv: Sequence[str] | None, description: str) -> int:
    prog = path.command.removeprefix("python -m ")
    parser = argparse.ArgumentParser(prog=path.command, description=description)
    parser.add_argument("model_dir", type=Path)
    parser.add_argument("--sentences", type=int, default=1000, help="first N sentences of the split (default 1000)")
    parser.add_argument("--data", type=Path, default=Path("data/multi30k"))
    parser.add_argument("--split", default="test_2016_flickr")
    parser.add_argument("--beam-size", type=int, default=decoding_defaults.BEAM_SIZE)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--no-one-at-a-time", dest="one_at_a_time", action="store_false",
                        help="skip the second pass that decodes one sentence at a time")
    parser.add_argument("--min-identical", type=float, default=path.default_criterion.min_identical)
    parser.add_argument("--max-bleu-drop", type=float, default=path.default_criterion.max_bleu_drop)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    try:
        loaded = load_model_dir(args.model_dir)
        data = read_verify_set(args.data, args.split, loaded.source_lang, loaded.target_lang, args.sentences)
    except (ArtifactError, ExportError) as error:
        print(f"{prog}: error: {error}", file=sys.stderr)
        return 2
    record = check(path, loaded, data, FastPathCriterion(args.min_identical, args.max_bleu_drop),
                   beam_size=args.beam_size, batch_size=args.batch_size, one_at_a_time=args.one_at_a_time)
    (args.model_dir / path.record_file).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print(summary(path, record))
    print(f"wrote {args.model_dir / path.record_file}")
    return 0 if record["passed"] else 1
