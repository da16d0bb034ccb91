"""Verification: the exported runtime's beam search against eager PyTorch on real sentences.

Both sides decode the same batches with the same options (the service's defaults: beam 5,
length penalty 1, max length 1.5 x source + 10). A sentence passes when the top hypotheses have
the same token ids; for those, |score difference| must stay within the tolerance (scores are
length-normalised log-probs, score = log P / len ** length_penalty). Default thresholds:

| export                                   | same top hypothesis | score tolerance |
|------------------------------------------|---------------------|-----------------|
| onnx / torchscript float32               | 100 %               | 1e-4            |
| ct2 float32 (its own search and kernels) | >= 99 %             | 1e-3            |
| float16 / bfloat16 (any target)          | >= 99 %             | 1e-2            |
| ct2 int8* / int16                        | >= 99 %             | 1e-1            |
"""
from __future__ import annotations

import gzip
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from model.artifacts import LoadedModel
from model.generate import SearchOptions, generate, pad_sources
from export.errors import ExportError
from export.runners import Runner

MAX_REPORTED_FAILURES = 20


@dataclass(frozen=True)
class Thresholds:
    min_match: float  # fraction of sentences whose top hypothesis must be identical
    score_tolerance: float  # max |score difference| on identical top hypotheses


def default_thresholds(target: str, precision: str) -> Thresholds:
    if precision == "float32":
        return Thresholds(0.99, 1e-3) if target == "ct2" else Thresholds(1.0, 1e-4)
    if precision in ("float16", "bfloat16"):
        return Thresholds(0.99, 1e-2)
    return Thresholds(0.99, 1e-1)


def sentence_file(data_dir: Path, split: str, lang: str) -> Path:
    return Path(data_dir) / f"{split}.{lang}.gz"


def read_sentences(path: Path, limit: int) -> list[str]:
    if not path.is_file():
        raise ExportError(f"verification data {path} not found; pass --verify-data DIR / --verify-split NAME, or --no-verify")
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        lines = [line.strip() for _, line in zip(range(limit), handle)]
    return [line for line in lines if line]


def search_options(beam_size: int) -> SearchOptions:
    return SearchOptions(beam_size=beam_size, n_best=1, length_penalty=1.0, max_length_ratio=1.5, max_length_offset=10)


def verify(
    loaded: LoadedModel,
    runner: Runner,
    sentences: list[str],
    thresholds: Thresholds,
    *,
    beam_size: int = 5,
    batch_size: int = 32,
    source: str = "",
) -> dict[str, Any]:
    """Compare top hypotheses and scores; returns the JSON-ready result (with the failing cases)."""
    tokenizer = loaded.tokenizer
    options = search_options(beam_size)
    eager, exported = [], []
    eager_seconds = exported_seconds = 0.0
    for start in range(0, len(sentences), batch_size):
        ids = tokenizer.encode_batch(sentences[start : start + batch_size])
        began = time.perf_counter()
        eager += [h[0] for h in generate(loaded.model, pad_sources([s + [tokenizer.eos_id] for s in ids], tokenizer.pad_id), options)]
        eager_seconds += time.perf_counter() - began
        began = time.perf_counter()
        exported += [h[0] for h in runner.generate(ids, options)]
        exported_seconds += time.perf_counter() - began
    failures, diffs = [], []
    identical = violations = 0
    for index, (a, b) in enumerate(zip(eager, exported)):
        same = a.tokens == b.tokens
        diff = abs(a.score - b.score)
        if same:
            identical += 1
            diffs.append(diff)
            violations += diff > thresholds.score_tolerance
        if not same or diff > thresholds.score_tolerance:
            failures.append({
                "index": index, "source": sentences[index],
                "eager": tokenizer.decode(a.tokens), "exported": tokenizer.decode(b.tokens),
                "eager_score": round(a.score, 6), "exported_score": round(b.score, 6),
                "reason": "different top hypothesis" if not same else f"score differs by {diff:.2e}",
            })
    n = len(sentences)
    rate = identical / n if n else 1.0
    passed = n > 0 and rate >= thresholds.min_match and violations == 0
    return {
        "passed": passed,
        "sentences": n,
        "source": source,
        "beam_size": beam_size,
        "length_penalty": options.length_penalty,
        "identical_top": identical,
        "identical_rate": round(rate, 6),
        "min_match": thresholds.min_match,
        "score_tolerance": thresholds.score_tolerance,
        "max_abs_score_diff": max(diffs, default=0.0),
        "mean_abs_score_diff": sum(diffs) / len(diffs) if diffs else 0.0,
        "score_violations": violations,
        "failures": failures[:MAX_REPORTED_FAILURES],
        "failure_count": len(failures),
        "seconds": {"eager": round(eager_seconds, 3), "exported": round(exported_seconds, 3)},
    }


def summary_line(result: dict[str, Any]) -> str:
    if result.get("skipped"):
        return "verification skipped (--no-verify)"
    verdict = "PASSED" if result["passed"] else "FAILED"
    return (
        f"verification {verdict}: {result['identical_top']}/{result['sentences']} identical top hypotheses "
        f"({100 * result['identical_rate']:.2f}%, need {100 * result['min_match']:.0f}%), max |score diff| "
        f"{result['max_abs_score_diff']:.2e} (tolerance {result['score_tolerance']:.0e}), "
        f"eager {result['seconds']['eager']:.1f}s vs exported {result['seconds']['exported']:.1f}s"
    )


def failure_lines(result: dict[str, Any]) -> list[str]:
    lines = []
    for f in result.get("failures", []):
        lines.append(
            f"  #{f['index']} {f['reason']}: {f['source']!r}\n"
            f"      eager    ({f['eager_score']:.4f}): {f['eager']!r}\n"
            f"      exported ({f['exported_score']:.4f}): {f['exported']!r}"
        )
    hidden = result.get("failure_count", 0) - len(result.get("failures", []))
    if hidden > 0:
        lines.append(f"  ... and {hidden} more")
    return lines
