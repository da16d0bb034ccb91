"""`python -m service.plot`: a PNG of a translation's word alignment, with its phrase pairs boxed.

    python -m service.plot --model-dir models/en-de --text "Two dogs play in the snow." --out align.png

The model directory is loaded as the service loads it (the torch backend, manifest checked), the
text translated with the service's defaults, and the hypothesis' alignment drawn: one row per
target word, one column per source word, each cell shaded by the share of the target word's
attention its source word holds; the phrase pairs of the phrase map are boxes over their spans
(the model's own attended phrases for phrasal models, extracted ones otherwise).
Bad arguments or an unloadable model: exit code 2 and one line.
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

PROG = "phrasal-plot"


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog=PROG, description="Draw the word alignment and phrase pairs of a translation as a PNG.")
    p.add_argument("--model-dir", type=Path, required=True, help="a model directory, e.g. models/en-de")
    p.add_argument("--text", required=True, help="the source sentence")
    p.add_argument("--out", type=Path, required=True, help="the PNG to write")
    p.add_argument("--beam", type=int, default=None, help="beam size (default: the service's)")
    p.add_argument("--device", default="cpu", choices=["auto", "cpu", "cuda"])
    return p


def alignment_matrix(alignment) -> list[list[float]]:
    """[target word][source word] = the share of the target word's attention on the source word."""
    weights = [[0.0] * len(alignment.source_words) for _ in alignment.target_words]
    for j, links in enumerate(alignment.links):
        for i, weight in links:
            weights[j][i] = weight
    return weights


def draw(alignment, phrase_map, out: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on a server
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    rows, cols = len(alignment.target_words), len(alignment.source_words)
    weights = alignment_matrix(alignment)
    fig, ax = plt.subplots(figsize=(max(4.0, 0.6 * cols + 2), max(3.0, 0.5 * rows + 1.5)), dpi=120)
    ax.imshow(weights, cmap="Blues", vmin=0.0, vmax=1.0, aspect="auto")
    ax.set_xticks(range(cols), [w.text for w in alignment.source_words], rotation=60, ha="right")
    ax.set_yticks(range(rows), [w.text for w in alignment.target_words])
    for s, t in alignment.hard:
        ax.plot(s, t, marker="o", markersize=3, color="black")
    for pair in phrase_map.pairs if phrase_map is not None else []:
        (s0, s1), (t0, t1) = pair.source, pair.target
        ax.add_patch(Rectangle((s0 - 0.5, t0 - 0.5), s1 - s0, t1 - t0, fill=False, edgecolor="crimson", linewidth=1.5))
    ax.set_xlabel("source")
    ax.set_ylabel("target")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, format="png")
    plt.close(fig)


def run(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.beam is not None and args.beam < 1:
        raise UsageError("--beam must be >= 1")
    if not args.text.strip():
        raise UsageError("--text is empty")
    if args.out.suffix.lower() != ".png":
        raise UsageError(f"--out must name a .png file, got {args.out}")
    from service.runtime.base import DecodingOptions
    from service.runtime.factory import RuntimeSpec, load_runtime

    runtime = load_runtime(RuntimeSpec("torch", args.model_dir, args.device))
    options = DecodingOptions(beam_size=args.beam or DecodingOptions().beam_size, alignment="phrase")
    (best, *_), = runtime.translate([args.text], options)
    draw(best.alignment, best.phrase_map, args.out, f"{args.text}\n→ {best.text}")
    print(args.out)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return run(argv)
    except UsageError as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return 2
    except Exception as error:  # a model directory that does not load: its reason, on one line
        if isinstance(error, (KeyboardInterrupt, SystemExit)):
            raise
        print(f"{PROG}: error: {' '.join(str(error).split())}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
