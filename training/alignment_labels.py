"""Alignment labels for the supervised alignment head: eflomal word links, cached beside the data.

    python -m training.alignment_labels --data-dir data/multi30k --split train --source en --target de

writes `data/multi30k/train.en-de.align.gz` (one Pharaoh line a sentence pair, `i-j` = source word i,
target word j, 0-based) and `train.en-de.align.json` (how it was made: the sha256 of the two text files,
the word rule, the symmetrisation, the eflomal version). The trainer reads the cached file and refuses
it when the text files changed since (their sha256 differs); the command above rebuilds it.

Words are `WORD_PATTERN` tokens (runs of letters/digits, or one other non-space character), so that
punctuation glued to a word in the raw text ("shirt.") is its own word for eflomal; eflomal sees them
lowercased (its statistics are sparse enough already). Both directions are aligned and symmetrised with
grow-diag-final-and (Koehn et al. 2005), the usual choice for supervision (Garg et al. 2019, §5).

Words are mapped to SentencePiece pieces when the trainer loads the labels (`piece_links`): a piece
belongs to the word its first character falls in, and pieces (s, t) are linked when their words are.
Kept at word level on disk so that the cache does not depend on a SentencePiece model.
"""
from __future__ import annotations

import argparse
import bisect
import gzip
import hashlib
import json
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from training import alignment_metrics as am

WORD_PATTERN = r"\w+|[^\w\s]"
_WORD = re.compile(WORD_PATTERN)
SYMMETRISATION = "grow-diag-final-and"
PROG = "phrasal-alignment-labels"

Span = tuple[int, int]


class LabelError(ValueError):
    """The cached labels are missing or do not belong to the text files; the message says how to rebuild."""


def word_spans(text: str) -> list[Span]:
    """The (start, end) character spans of the words of `text` (WORD_PATTERN)."""
    return [m.span() for m in _WORD.finditer(text)]


def words(text: str) -> list[str]:
    return [text[a:b] for a, b in word_spans(text)]


def labels_path(data_dir: str | Path, split: str, source: str, target: str) -> Path:
    return Path(data_dir) / f"{split}.{source}-{target}.align.gz"


def meta_path(data_dir: str | Path, split: str, source: str, target: str) -> Path:
    return Path(data_dir) / f"{split}.{source}-{target}.align.json"


def rebuild_command(data_dir: str | Path, split: str, source: str, target: str) -> str:
    return (f"python -m training.alignment_labels --data-dir {data_dir} --split {split} "
            f"--source {source} --target {target}")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def build_labels(data_dir: str | Path, split: str, source: str, target: str) -> tuple[Path, dict]:
    """Run eflomal over the split (both directions), symmetrise, write the labels and their metadata."""
    from importlib.metadata import version

    import eflomal  # noqa: F401  the `align` extra: fail here, before reading the data

    from training.eflomal_links import eflomal_alignments
    from training.data import read_parallel, split_path

    src_lines, tgt_lines = read_parallel(data_dir, split, source, target)
    started = time.perf_counter()
    src_words = [[w.lower() for w in words(line)] for line in src_lines]
    tgt_words = [[w.lower() for w in words(line)] for line in tgt_lines]
    forward, reverse = eflomal_alignments(src_words, tgt_words)
    links = [am.grow_diag_final_and(f, r) for f, r in zip(forward, reverse)]
    out = labels_path(data_dir, split, source, target)
    # mtime=0: the same links give the same bytes, so a rebuild that changes nothing changes no file.
    with open(out, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as handle:
        handle.write("".join(am.pharaoh(a) + "\n" for a in links).encode("utf-8"))
    meta = {
        "source_file": split_path(data_dir, split, source).name,
        "target_file": split_path(data_dir, split, target).name,
        "source_sha256": _sha256(split_path(data_dir, split, source)),
        "target_sha256": _sha256(split_path(data_dir, split, target)),
        "pairs": len(links),
        "links": sum(len(a) for a in links),
        "words": WORD_PATTERN,
        "lowercased": True,
        "aligner": f"eflomal {version('eflomal')} (defaults), both directions",
        "symmetrisation": SYMMETRISATION,
        "command": rebuild_command(data_dir, split, source, target),
        "seconds": round(time.perf_counter() - started, 1),
    }
    meta_path(data_dir, split, source, target).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    return out, meta


def read_labels(data_dir: str | Path, split: str, source: str, target: str) -> list[set[am.Link]]:
    """The cached word links of every line of the split; LabelError when absent or stale. Where only
    the other direction's labels are cached (`train.en-de` for a De->En model), they
    are read transposed: grow-diag-final-and treats the two directions alike, so its links for
    (target, source) are those for (source, target) with each link's ends swapped."""
    from training.data import split_path

    path, meta_file = labels_path(data_dir, split, source, target), meta_path(data_dir, split, source, target)
    command = rebuild_command(data_dir, split, source, target)
    transposed = False
    if not path.is_file() and labels_path(data_dir, split, target, source).is_file():
        path, meta_file = labels_path(data_dir, split, target, source), meta_path(data_dir, split, target, source)
        command, transposed = rebuild_command(data_dir, split, target, source), True
    if not path.is_file() or not meta_file.is_file():
        raise LabelError(f"no alignment labels at {path}; build them with: {command}")
    meta = json.loads(meta_file.read_text(encoding="utf-8"))
    sides = (("source", target), ("target", source)) if transposed else (("source", source), ("target", target))
    for side, lang in sides:
        if meta.get(f"{side}_sha256") != _sha256(split_path(data_dir, split, lang)):
            raise LabelError(f"{path} was built from other text than {split_path(data_dir, split, lang)}; "
                             f"rebuild it with: {command}")
    if transposed and meta.get("symmetrisation") != "grow-diag-final-and":
        raise LabelError(f"{path} is not symmetrised ({meta.get('symmetrisation')}), so it cannot be read "
                         f"{target}-{source}; build {labels_path(data_dir, split, source, target)} with: "
                         f"{rebuild_command(data_dir, split, source, target)}")
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        lines = handle.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    links = [am.parse_links(line, f"{path} line {k}") for k, line in enumerate(lines, start=1)]
    return [{(j, i) for i, j in pair} for pair in links] if transposed else links


def piece_owner(word_starts: Sequence[int], word_ends: Sequence[int], spans: Sequence[Span]) -> list[int | None]:
    """Each piece's word: the word its first character falls in (None for an empty or word-less piece)."""
    owner: list[int | None] = []
    for begin, end in spans:
        k = bisect.bisect_right(word_starts, begin) - 1
        owner.append(k if begin < end and k >= 0 and begin < word_ends[k] else None)
    return owner


def piece_links(source_text: str, target_text: str, links: set[am.Link], tokenizer) -> list[tuple[int, int]]:
    """Word links of one pair -> (source piece, target piece) links of its SentencePiece encoding."""
    owners = []
    for text in (source_text, target_text):
        spans = word_spans(text)
        _, _, piece_spans = tokenizer.encode_with_offsets(text)
        owners.append(piece_owner([a for a, _ in spans], [b for _, b in spans], piece_spans))
    source_owner, target_owner = owners
    by_word: dict[int, list[int]] = {}
    for s, i in enumerate(source_owner):
        if i is not None:
            by_word.setdefault(i, []).append(s)
    sources_of: dict[int, list[int]] = {}
    for i, j in sorted(links):
        sources_of.setdefault(j, []).append(i)
    out = []
    for t, j in enumerate(target_owner):
        for i in sources_of.get(j, ()) if j is not None else ():
            out.extend((s, t) for s in by_word.get(i, ()))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description="Build the eflomal alignment labels of a split.")
    parser.add_argument("--data-dir", type=Path, default=Path("data/multi30k"))
    parser.add_argument("--split", default="train")
    parser.add_argument("--source", default="en")
    parser.add_argument("--target", default="de")
    args = parser.parse_args(argv)
    try:
        out, meta = build_labels(args.data_dir, args.split, args.source, args.target)
    except (FileNotFoundError, ValueError, ImportError) as error:
        print(f"{PROG}: error: {' '.join(str(error).split())}", file=sys.stderr)
        return 2
    print(f"{out}: {meta['pairs']} pairs, {meta['links']} links ({meta['seconds']}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())


def target_rows(links: Sequence[Sequence[tuple[int, int]]], target_len: int, source_len: int):
    """Per pair (source piece, target piece) links -> the (B, T, S) float label rows of
    `training.losses.supervised_alignment_loss`, T and S the padded batch widths.

    Target piece k is READ at decoder step k + 1 (tgt_in = [BOS] + y), the row the head is trained
    on (model/supervised_alignment.py says why); each row is normalised over its links.
    """
    import torch

    rows = torch.zeros(len(links), target_len, source_len)  # (B, T, S)
    for b, pairs in enumerate(links):
        for s, t in pairs:
            rows[b, t + 1, s] = 1.0
    return rows / rows.sum(dim=-1, keepdim=True).clamp_min(1.0)
