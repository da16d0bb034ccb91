"""Mutation check: plant small bugs in the core files and see whether their tests notice.

Two parts, both written to results/mutation.md with the command and the machine:

1. Planted bugs (PLANTED below): seven plausible bugs, each a literal patch of one file, each
   of which must make its test subset fail. A survivor here is a failure of this script
   (exit status 1).
2. Generated mutants: a small AST pass over each file in TARGETS makes one mutant per site
   and operator (comparison boundary and negation, arithmetic and boolean operator swaps,
   dropped `not` / unary minus, integer and float constants moved, True/False swapped, min/max
   swapped, a return value replaced by None). Each mutant runs that file's test subset; the
   kill rate per file and every survivor are listed. Mutants judged equivalent (no input can
   tell them apart) are in EQUIVALENT with the reason, and the rate is given with and without
   them. The target is >= 85 % killed per file (exit status 1 below it, unless --no-target).

Why not mutmut or cosmic-ray: both start a fresh interpreter (or re-import the package) for
every mutant, and on this project importing torch alone costs ~3 s of a 2-core machine, more
than most mutants' tests. Here one parent imports torch, pytest and the web stack once and
forks a child per mutant; the child runs pytest.main on the subset in a private copy of the
repository holding the mutated file. Children never write bytecode, so a mutant of the same
size written in the same second can never run the previous mutant's cached code.

Not part of `make test` (minutes, not seconds). From a fresh clone after `make install`:

    .venv/bin/python tools/mutation.py                 # everything, writes results/mutation.md
    .venv/bin/python tools/mutation.py --planted-only  # the seven planted bugs only
    .venv/bin/python tools/mutation.py --files model/decoding/beam_search.py --jobs 2
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))  # host.py only: the parent must not import the packages it mutates
from host import cpu_name  # noqa: E402

# Each mutated file and the tests that must notice a change in it (fast, targeted subsets).
TARGETS: dict[str, list[str]] = {
    "model/decoding/beam_search.py": ["tests/model/test_beam_search.py"],
    # ConvKV-only cases left out: they never run queryk.py.
    "model/attention/queryk.py": ["tests/model/test_phrasal_attention.py", "-k", "not convkv"],
    "model/attention/functional.py": ["tests/model/test_attention_functional.py", "tests/model/test_transformer.py"],
    "model/model_dir.py": ["tests/model/test_artifacts.py"],
    "service/translator.py": [
        "tests/service/test_limit_edges.py",
        "tests/service/test_request_errors.py",
        "tests/service/test_translate_api.py",
        "tests/service/test_translator.py",
    ],
    "model/alignments/phrase_pairs.py": ["tests/model/test_phrase_alignment.py"],
}


@dataclass(frozen=True)
class Planted:
    name: str
    file: str
    old: str  # must occur exactly once in the file
    new: str
    tests: tuple[str, ...]


PLANTED = [
    Planted(
        "beam length normalisation stops counting EOS",
        "model/decoding/beam_search.py",
        "normaliser = length_normaliser(step + 1, length_penalty, length_penalty_form)  # len counts EOS",
        "normaliser = length_normaliser(max(step, 1), length_penalty, length_penalty_form)",
        ("tests/model/test_beam_search.py",),
    ),
    Planted(
        "QueryK scale sqrt(n*d) -> sqrt(d) inside the module",
        "model/attention/queryk.py",
        "scale = [qk_scale(n * dh) for group",
        "scale = [qk_scale(dh) for group",
        ("tests/model/test_phrasal_attention.py",),
    ),
    Planted(
        "fertility coverage includes the current step",
        "model/biases/features.py",
        "return torch.cumsum(previous_step(probs), dim=2)",
        "return torch.cumsum(probs, dim=2)",
        ("tests/model/test_alignment_bias_features.py",),
    ),
    Planted(
        "phrase-map confidence averaged over unlinked target words too",
        "model/alignments/phrase_pairs.py",
        "        if alignment.links[j]\n    ]",
        "    ]",
        ("tests/model/test_phrase_alignment.py",),
    ),
    Planted(
        "per-text character limit off by one (> becomes >=)",
        "service/translator.py",
        "if len(text) > limits.max_chars:",
        "if len(text) >= limits.max_chars:",
        ("tests/service/test_limit_edges.py", "tests/service/test_request_errors.py"),
    ),
    Planted(
        "a manifest with a file's hash entry deleted is accepted",
        "model/model_dir.py",
        "        if name not in files:\n            raise ArtifactError",
        "        if False:\n            raise ArtifactError",
        ("tests/model/test_artifacts.py",),
    ),
    Planted(
        "sha256 over the first 1 MiB only",
        "model/model_dir.py",
        'for block in iter(lambda: handle.read(1 << 20), b""):',
        "for block in [handle.read(1 << 20)]:",
        ("tests/model/test_artifacts.py",),
    ),
]

# Mutants no test can kill because no input tells them apart from the original:
# (file, line, column, description) -> why. `--list` prints the keys.
EQUIVALENT: dict[tuple[str, int, int, str], str] = {
    ("model/decoding/beam_search.py", 176, 60, "True -> False"):
        "argsort(stable=False) of the 2K <= 32 EOS flags per row: torch's CPU sort of so few elements keeps "
        "equal keys in order anyway, so no input here tells it from stable=True (on CUDA it could differ)",
    ("model/decoding/beam_search.py", 201, 46, "< -> <="):
        "at step == max_len every non-EOS candidate is forced to -inf, so `alive` is already False: the "
        "step < max_len test never decides",
    ("model/attention/queryk.py", 51, 20, "-x -> x"):
        "k is always 4-D (B, h, S, dh): k.shape[2] is k.shape[-2]",
    ("model/attention/queryk.py", 52, 18, "1 -> 0"):
        "(1,) no longer takes the unigram shortcut; the general kernel-row path computes the same scores",
    ("model/attention/queryk.py", 53, 43, "-x -> x"):
        "k is 4-D: k.transpose(2, -1) is k.transpose(-2, -1)",
    ("model/attention/queryk.py", 61, 73, "-x -> x"):
        "k is 4-D: k.transpose(2, -1) is k.transpose(-2, -1)",
    ("model/attention/queryk.py", 62, 11, "- -> +"):
        "span only sizes the scatter buffer of n-gram ends; a larger one is cut back to s columns below",
    ("model/attention/queryk.py", 62, 23, "1 -> 0"):
        "span only sizes the scatter buffer of n-gram ends; a larger one is cut back to s columns below",
    ("model/attention/queryk.py", 100, 49, "1 -> 0"):
        "q.split([w], dim=-1) of the one group's width is [q]: the shortcut only saves a call",
    ("model/attention/functional.py", 45, 57, "-x -> x"):
        "k is 4-D (B, H, S, dh): k.transpose(2, -1) is k.transpose(-2, -1)",
    ("model/attention/functional.py", 79, 49, "> -> >="):
        "F.dropout(x, 0.0, True) returns x itself: the early exit for p = 0 only saves a dispatch",
    ("model/model_dir.py", 34, 18, "True -> False"):
        "frozen only forbids assigning to LoadedModel's fields, which no code does; a test of that would "
        "test dataclasses, not the product",
    ("model/model_dir.py", 54, 51, "20 -> 19"):
        "the block size of the hash loop: 512 KiB blocks give the same sha256 as 1 MiB blocks",
    ("model/alignments/phrase_pairs.py", 31, 18, "True -> False"):
        "frozen only forbids assigning to PhrasePair's fields, which no code does",
    ("model/alignments/phrase_pairs.py", 45, 18, "True -> False"):
        "frozen only forbids assigning to PhraseMap's fields, which no code does",
    # _close keeps an invariant: source[0] and source[1] - 1 are links of words in the target span,
    # and the target span's end words link into the source span.
    ("model/alignments/phrase_pairs.py", 62, 53, "<= -> <"):
        "the leftmost target word's link already lies in the source span (it is the seed or came in "
        "through `into`), so leaving it out of `linked` changes no bound",
    ("model/alignments/phrase_pairs.py", 63, 34, "0 -> 1"):
        "source[0] is itself one of `linked` (invariant), so min() over source[1] and linked is the same",
    ("model/alignments/phrase_pairs.py", 63, 61, "1 -> 0"):
        "source[1] - 1 is itself one of `linked` (invariant), so max() over source[0] and linked + 1 is the same",
    # extracted_phrase_pairs: skipping a word already inside a block only saves work; re-seeding it
    # closes to a block inside the closed one, which the merge loop absorbs.
    ("model/alignments/phrase_pairs.py", 81, 15, "<= -> <"): "re-seeding a word inside a closed block changes nothing (see above)",
    ("model/alignments/phrase_pairs.py", 81, 17, "0 -> 1"): "re-seeding a word inside a closed block changes nothing (see above)",
    ("model/alignments/phrase_pairs.py", 81, 29, "1 -> 0"): "re-seeding a word inside a closed block changes nothing (see above)",
    # The seed block: _close rebuilds both spans from the seed word's link, whatever the seed's bounds.
    ("model/alignments/phrase_pairs.py", 83, 27, "+ -> -"): "_close grows an empty seed target back to (j, j + 1) through `into`",
    ("model/alignments/phrase_pairs.py", 83, 31, "1 -> 0"): "_close grows an empty seed target back to (j, j + 1) through `into`",
    ("model/alignments/phrase_pairs.py", 83, 50, "+ -> -"): "_close rebuilds the seed source from the seed word's link",
    ("model/alignments/phrase_pairs.py", 83, 65, "1 -> 0"): "_close rebuilds the seed source from the seed word's link",
    # The merge loop: blocks are closed in both directions before they meet, so a later block
    # either misses an earlier one on both sides or contains it on both (a source span reaching
    # into a closed block's span takes in the words linked there, and with them the block). The
    # loop therefore only ever absorbs contained blocks and closes the result again; these
    # variants of _close's growth and of the overlap test give the same pairs (also checked by
    # hand on 4,000 random alignments of up to 7 x 7 words).
    **{("model/alignments/phrase_pairs.py", line, col, description): "the merge loop re-closes what this changes (see above)"
       for line, col, description in [
           (64, 51, "<= -> <"), (64, 62, "0 -> 1"), (64, 83, "1 -> 0"), (65, 34, "0 -> 1"), (65, 59, "1 -> 0"),
           (65, 65, "+ -> -"), (65, 69, "1 -> 0"), (86, 48, "or -> and"), (93, 17, "min() -> max()"),
           (93, 23, "0 -> 1"), (93, 46, "max() -> min()"), (93, 52, "1 -> 0"), (94, 17, "min() -> max()"),
           (94, 23, "0 -> 1"), (94, 46, "max() -> min()"), (94, 52, "1 -> 0"), (103, 13, "0 -> 1"),
           (103, 36, "1 -> 0"),
       ]},
    ("model/alignments/phrase_pairs.py", 112, 52, "0.0 -> 1.0"):
        "every block holds its seed, a linked target word, so `masses` is never empty",
    ("service/translator.py", 36, 22, "8192 -> 8191"):
        "where counting tokens moves to a thread (a cost threshold): the counts are the same either way",
    ("service/translator.py", 158, 11, "<= -> <"):
        "where counting tokens moves to a thread (a cost threshold): the counts are the same either way",
    ("service/translator.py", 190, 106, "0 -> 1"):
        "a request whose deadline passed while it waited still gets its 504, one second later: only a timing "
        "assertion could see it, and the tests make none",
}


# -- generating mutants ---------------------------------------------------------------------------
COMPARE_SWAPS = {
    ast.Lt: [ast.LtE], ast.LtE: [ast.Lt], ast.Gt: [ast.GtE], ast.GtE: [ast.Gt],
    ast.Eq: [ast.NotEq], ast.NotEq: [ast.Eq], ast.Is: [ast.IsNot], ast.IsNot: [ast.Is],
    ast.In: [ast.NotIn], ast.NotIn: [ast.In],
}
BINOP_SWAPS = {
    ast.Add: [ast.Sub], ast.Sub: [ast.Add], ast.Mult: [ast.Div], ast.Div: [ast.Mult],
    ast.FloorDiv: [ast.Mult], ast.Mod: [ast.FloorDiv], ast.Pow: [ast.Mult],
    ast.BitAnd: [ast.BitOr], ast.BitOr: [ast.BitAnd], ast.LShift: [ast.RShift], ast.RShift: [ast.LShift],
}


@dataclass(frozen=True)
class Mutant:
    file: str
    line: int
    description: str
    source: str  # the whole mutated file
    col: int = 0

    @property
    def key(self) -> tuple[str, int, int, str]:
        return self.file, self.line, self.col, self.description


def _docstring_nodes(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def _skipped_subtrees(tree: ast.AST) -> set[int]:
    """Nodes never mutated: annotations, f-strings (messages), asserts (internal checks),
    docstrings, imports and `if TYPE_CHECKING` blocks."""
    skip: set[int] = set(_docstring_nodes(tree))

    def drop(node: ast.AST | None) -> None:
        if node is not None:
            skip.update(id(n) for n in ast.walk(node))

    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            drop(node.returns)
            for arg in [*node.args.args, *node.args.posonlyargs, *node.args.kwonlyargs, node.args.vararg, node.args.kwarg]:
                if arg is not None:
                    drop(arg.annotation)
        elif isinstance(node, ast.AnnAssign):
            drop(node.annotation)
        elif isinstance(node, (ast.JoinedStr, ast.Assert, ast.Import, ast.ImportFrom)):
            drop(node)
        elif isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            drop(node)
    return skip


def _splice(source_lines: list[str], node: ast.AST, text: str) -> str:
    """The source with ``node``'s exact span replaced by ``text``."""
    lines = list(source_lines)
    start, end = node.lineno - 1, node.end_lineno - 1
    # col offsets are in UTF-8 bytes
    first = lines[start].encode()
    last = lines[end].encode()
    head = first[: node.col_offset].decode()
    tail = last[node.end_col_offset :].decode()
    lines[start : end + 1] = [head + text + tail]
    return "".join(lines)


def _expression_mutations(node: ast.AST) -> Iterator[tuple[ast.AST, str]]:
    """(mutated copy of node, description) for an expression node."""
    import copy

    if isinstance(node, ast.Compare):
        for i, op in enumerate(node.ops):
            for new in COMPARE_SWAPS.get(type(op), []):
                mutated = copy.deepcopy(node)
                mutated.ops[i] = new()
                yield mutated, f"{_op(op)} -> {_op(new())}"
    elif isinstance(node, ast.BinOp):
        for new in BINOP_SWAPS.get(type(node.op), []):
            mutated = copy.deepcopy(node)
            mutated.op = new()
            yield mutated, f"{_op(node.op)} -> {_op(new())}"
    elif isinstance(node, ast.BoolOp):
        mutated = copy.deepcopy(node)
        mutated.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        yield mutated, f"{_op(node.op)} -> {_op(mutated.op)}"
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Not, ast.USub)):
        yield copy.deepcopy(node.operand), f"{_op(node.op)}x -> x"
    elif isinstance(node, ast.Constant):
        value = node.value
        if isinstance(value, bool):
            yield ast.Constant(not value), f"{value} -> {not value}"
        elif isinstance(value, int):
            new = 1 if value == 0 else value - 1
            yield ast.Constant(new), f"{value} -> {new}"
        elif isinstance(value, float):
            new = 1.0 if value == 0 else -value
            yield ast.Constant(new), f"{value} -> {new}"
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("min", "max"):
        mutated = copy.deepcopy(node)
        mutated.func.id = "max" if node.func.id == "min" else "min"
        yield mutated, f"{node.func.id}() -> {mutated.func.id}()"


def _op(op: ast.AST) -> str:
    return {
        ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=", ast.Is: "is",
        ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in", ast.Add: "+", ast.Sub: "-", ast.Mult: "*",
        ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%", ast.Pow: "**", ast.BitAnd: "&", ast.BitOr: "|",
        ast.LShift: "<<", ast.RShift: ">>", ast.And: "and", ast.Or: "or", ast.Not: "not ", ast.USub: "-",
    }[type(op)]


def generate_mutants(file: str, root: Path = REPO) -> list[Mutant]:
    source = (root / file).read_text(encoding="utf-8")
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    skip = _skipped_subtrees(tree)
    seen: set[str] = {source}
    mutants: list[Mutant] = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        candidates: list[tuple[str, str]] = []
        if isinstance(node, ast.AugAssign):
            for new in BINOP_SWAPS.get(type(node.op), []):
                target = ast.get_source_segment(source, node.target)
                value = ast.get_source_segment(source, node.value)
                candidates.append((f"{target} {_op(new())}= {value}", f"{_op(node.op)}= -> {_op(new())}="))
        elif isinstance(node, ast.Return) and node.value is not None and not (
            isinstance(node.value, ast.Constant) and node.value.value is None
        ):
            candidates.append(("return None", "return value -> return None"))
        elif isinstance(node, ast.expr):
            for mutated, description in _expression_mutations(node):
                candidates.append((f"({ast.unparse(mutated)})", description))
        for text, description in candidates:
            mutated_source = _splice(lines, node, text)
            if mutated_source in seen:
                continue
            try:
                ast.parse(mutated_source)
            except SyntaxError:
                continue
            seen.add(mutated_source)
            mutants.append(Mutant(file, node.lineno, description, mutated_source, node.col_offset))
    mutants.sort(key=lambda m: (m.line, m.col, m.description))
    return mutants


def planted_mutant(bug: Planted, root: Path = REPO) -> Mutant:
    source = (root / bug.file).read_text(encoding="utf-8")
    count = source.count(bug.old)
    if count != 1:
        raise SystemExit(f"planted bug {bug.name!r}: its patch matches {count} places in {bug.file}, expected 1")
    line = source[: source.index(bug.old)].count("\n") + 1
    return Mutant(bug.file, line, bug.name, source.replace(bug.old, bug.new))


# -- running them ----------------------------------------------------------------------------------
@dataclass
class Result:
    mutant: Mutant
    outcome: str  # "killed", "survived", "timeout" (counted as killed)
    seconds: float
    tests: tuple[str, ...]


@dataclass
class Slot:
    """A private copy of the repository and the child running in it."""

    root: Path
    pid: int | None = None
    job: tuple[Mutant, tuple[str, ...]] | None = None
    started: float = 0.0
    originals: dict[str, str] = field(default_factory=dict)


def copy_repository(destination: Path) -> None:
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO, capture_output=True, check=True,
    ).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = REPO / name
        if source.is_file():
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination / name)


def preimport() -> None:
    """Everything heavy that the tests import, loaded once in the parent (never the project's
    own packages: those must come from each child's mutated copy)."""
    import fastapi  # noqa: F401
    import httpx  # noqa: F401
    import numpy  # noqa: F401
    import prometheus_client  # noqa: F401
    import pydantic  # noqa: F401
    import pytest  # noqa: F401
    import safetensors.torch  # noqa: F401
    import sentencepiece  # noqa: F401
    import starlette.testclient  # noqa: F401
    import torch  # noqa: F401

    # pytest loads these plugins (entry points) in every child; importing them here costs once.
    for plugin in ("anyio", "hypothesis", "schemathesis"):
        try:
            __import__(plugin)
        except ImportError:
            pass
    for module in ("model", "service", "training", "export", "tests"):
        if module in sys.modules:
            raise RuntimeError(f"{module} was imported in the parent; children would not see their mutant")


def child(root: Path, tests: tuple[str, ...]) -> None:
    """Runs in the forked child: pytest on ``tests`` inside ``root``; exits with pytest's status."""
    try:
        os.chdir(root)
        sys.path.insert(0, str(root))
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        import model
        import service

        for package in (model, service):
            if not Path(package.__file__).resolve().is_relative_to(root.resolve()):
                os._exit(90)  # the installed copy shadows the mutated one: the run would be meaningless
        import pytest

        status = pytest.main(
            [*tests, "-x", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", "-W", "ignore"]
        )
        os._exit(int(status))
    except BaseException:  # noqa: BLE001 - a child must never return into the parent's loop
        os._exit(91)


def run_all(jobs: list[tuple[Mutant, tuple[str, ...]]], slots: list[Slot], timeout_s, progress) -> list[Result]:
    """``timeout_s(tests)``: seconds a child on that subset may run before it counts as killed."""
    pending = list(jobs)
    results: list[Result] = []
    while pending or any(slot.pid is not None for slot in slots):
        for slot in slots:
            if slot.pid is None and pending:
                mutant, tests = pending.pop(0)
                path = slot.root / mutant.file
                slot.originals.setdefault(mutant.file, path.read_text(encoding="utf-8"))
                path.write_text(mutant.source, encoding="utf-8")
                slot.job, slot.started = (mutant, tests), time.monotonic()
                pid = os.fork()
                if pid == 0:
                    child(slot.root, tests)
                slot.pid = pid
        time.sleep(0.05)
        for slot in slots:
            if slot.pid is None:
                continue
            done, status = os.waitpid(slot.pid, os.WNOHANG)
            elapsed = time.monotonic() - slot.started
            if done == 0 and elapsed < timeout_s(slot.job[1]):
                continue
            if done == 0:
                os.kill(slot.pid, signal.SIGKILL)
                os.waitpid(slot.pid, 0)
                outcome = "timeout"
            else:
                code = os.waitstatus_to_exitcode(status)
                if code in (3, 4, 5, 90, 91):  # pytest's internal/usage error, no tests; our own start-up checks
                    raise SystemExit(f"mutation child could not run {slot.job[1]} in {slot.root} (status {code})")
                # 1: a test failed; 2: collection failed (the mutant broke an import); negative: killed by a signal
                outcome = "survived" if code == 0 else "killed"
            mutant, tests = slot.job
            (slot.root / mutant.file).write_text(slot.originals[mutant.file], encoding="utf-8")
            results.append(Result(mutant, outcome, elapsed, tests))
            progress(results[-1])
            slot.pid = slot.job = None
    return results


# -- report ----------------------------------------------------------------------------------------
def machine() -> str:
    cpu = cpu_name()
    return f"{cpu}, {os.cpu_count()} logical CPUs, Python {platform.python_version()}, {platform.system()}"


def row(result: Result) -> dict:
    m = result.mutant
    return {"file": m.file, "line": m.line, "col": m.col, "description": m.description,
            "outcome": result.outcome, "seconds": round(result.seconds, 1), "changed": _changed_line(m)}


def _changed_line(mutant: Mutant) -> str:
    mutated = mutant.source.splitlines()
    index = mutant.line - 1
    return mutated[index].strip() if 0 <= index < len(mutated) else ""


def _key(r: dict) -> tuple[str, int, int, str]:
    return r["file"], r["line"], r["col"], r["description"]


def summary(rows: list[dict]) -> dict:
    total = len(rows)
    killed = sum(r["outcome"] != "survived" for r in rows)
    equivalent = sum(r["outcome"] == "survived" and _key(r) in EQUIVALENT for r in rows)
    survived = total - killed - equivalent
    return {
        "total": total, "killed": killed, "equivalent": equivalent, "survived": survived,
        "rate": killed / total if total else 1.0,
        "rate_without_equivalent": killed / (total - equivalent) if total - equivalent else 1.0,
    }


def report(store: dict, target: float) -> str:
    """Markdown of everything in ``store`` (the JSON beside the report: the latest run of the
    planted bugs and of each file, each with the command and machine that produced it)."""
    out = [
        "# Mutation check",
        "",
        "Script: [tools/mutation.py](../tools/mutation.py) (what it mutates, and why it is not mutmut",
        "or cosmic-ray, is in its docstring); raw rows in [mutation.json](mutation.json). A mutant is killed",
        "when its file's test subset fails (or errors at collection, or runs past 3x the unmutated time).",
        "Run from a fresh clone after `make install` with `.venv/bin/python tools/mutation.py`.",
        "",
    ]
    planted = store.get("planted")
    if planted:
        out += [
            "## Planted bugs (every one must be caught)",
            "",
            f"Command: `{planted['command']}`  ",
            f"Machine: {planted['machine']}; wall time {planted['wall_s'] / 60:.1f} min.",
            "",
            "| bug | file | tests | caught |",
            "|---|---|---|---|",
        ]
        tests_of = {bug.name: bug.tests for bug in PLANTED}
        for r in planted["rows"]:
            caught = "yes" if r["outcome"] != "survived" else "**NO**"
            tests = ", ".join(f"`{t}`" for t in tests_of.get(r["description"], ()))
            out.append(f"| {r['description']} | `{r['file']}:{r['line']}` | {tests} | {caught} |")
        out.append("")
    files = store.get("files", {})
    if files:
        out += [
            "## Generated mutants",
            "",
            f"Target: at least {target:.0%} killed per file, equivalent mutants set aside.",
            "",
            "| file | tests | mutants | killed | equivalent | survived | kill rate | kill rate, equivalents set aside |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for file, entry in files.items():
            s = summary(entry["rows"])
            tests = " ".join(entry["tests"])
            out.append(
                f"| `{file}` | `{tests}` | {s['total']} | {s['killed']} | {s['equivalent']} | {s['survived']} | "
                f"{s['rate']:.1%} | {s['rate_without_equivalent']:.1%} |"
            )
        all_rows = [r for entry in files.values() for r in entry["rows"]]
        s = summary(all_rows)
        out += [
            f"| all | | {s['total']} | {s['killed']} | {s['equivalent']} | {s['survived']} | {s['rate']:.1%} | "
            f"{s['rate_without_equivalent']:.1%} |",
            "",
            "Runs:",
            "",
        ]
        for file, entry in files.items():
            out.append(f"- `{file}`: `{entry['command']}` on {entry['machine']}, {entry['jobs']} job(s), "
                       f"{entry['wall_s'] / 60:.1f} min for the run")
        out.append("")
        for file, entry in files.items():
            survivors = [r for r in entry["rows"] if r["outcome"] == "survived"]
            if not survivors:
                continue
            out += [f"### Survivors in `{file}`", ""]
            for r in survivors:
                why = EQUIVALENT.get(_key(r))
                label = f"equivalent: {why}" if why else "**not killed**"
                out.append(f"- line {r['line']} col {r['col']}: `{r['description']}` ({label}); `{r['changed']}`")
            out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", nargs="+", choices=list(TARGETS), default=list(TARGETS))
    parser.add_argument("--planted-only", action="store_true", help="run the planted bugs only")
    parser.add_argument("--no-planted", action="store_true", help="run the generated mutants only")
    parser.add_argument("--jobs", type=int, default=1, help="children at a time (default 1)")
    parser.add_argument("--timeout", type=float, default=None,
                        help="seconds per mutant before it counts as killed (default: 3x its unmutated subset's time, at least 20)")
    parser.add_argument("--target", type=float, default=0.85)
    parser.add_argument("--out", type=Path, default=REPO / "results" / "mutation.md")
    parser.add_argument("--list", action="store_true", help="list the generated mutants and exit")
    parser.add_argument("--render", action="store_true",
                        help="rewrite the report from the stored rows (after editing EQUIVALENT) and exit")
    args = parser.parse_args(argv)

    if args.render:
        store = json.loads(args.out.with_suffix(".json").read_text())
        args.out.write_text(report(store, args.target) + "\n", encoding="utf-8")
        return 0

    if args.list:
        for file in args.files:
            for m in generate_mutants(file):
                print(f"{m.file}:{m.line}:{m.col}: {m.description}: {_changed_line(m)}")
        return 0

    # One thread per child: the children run side by side, and torch's default of one thread per
    # core only adds spin-waits to tiny-model tests. No bytecode: see the docstring.
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
    sys.dont_write_bytecode = True
    preimport()
    import torch

    torch.set_num_threads(1)

    planted_jobs = [] if args.no_planted else [(planted_mutant(bug), bug.tests) for bug in PLANTED]
    generated_jobs = []
    if not args.planted_only:
        for file in args.files:
            generated_jobs += [(m, tuple(TARGETS[file])) for m in generate_mutants(file)]
    print(f"{len(planted_jobs)} planted bugs, {len(generated_jobs)} generated mutants", flush=True)

    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="phrasal-mutation-") as tmp:
        slots = []
        for k in range(max(1, args.jobs)):
            root = Path(tmp) / f"slot{k}"
            copy_repository(root)
            slots.append(Slot(root))
        # The unmutated subsets must pass first, or every mutant would look killed.
        subsets = sorted({tests for _, tests in planted_jobs + generated_jobs})
        unchanged = (REPO / "model/__init__.py").read_text(encoding="utf-8")
        baseline = [(Mutant("model/__init__.py", 0, "unmutated", unchanged), tests) for tests in subsets]
        clean = run_all(baseline, slots, lambda tests: 600.0, lambda r: None)
        failed = [r.tests for r in clean if r.outcome != "survived"]
        if failed:
            raise SystemExit(f"the unmutated test subsets {failed} fail: fix them before mutating")
        seconds = {r.tests: r.seconds for r in clean}

        def timeout_s(tests: tuple[str, ...]) -> float:
            return args.timeout if args.timeout is not None else max(20.0, 3 * seconds[tests])

        def progress(result: Result) -> None:
            m = result.mutant
            print(f"{result.outcome:8} {result.seconds:5.1f}s {m.file}:{m.line}:{m.col} {m.description}", flush=True)

        planted = run_all(planted_jobs, slots, timeout_s, progress)
        generated = run_all(generated_jobs, slots, timeout_s, progress)
    wall = time.monotonic() - started

    command = "python tools/mutation.py" + (" " + " ".join(argv if argv is not None else sys.argv[1:])).rstrip()
    json_path = args.out.with_suffix(".json")
    store = json.loads(json_path.read_text()) if json_path.exists() else {}
    facts = {"command": command, "machine": machine(), "jobs": max(1, args.jobs), "wall_s": round(wall, 1)}
    if planted:
        store["planted"] = {**facts, "rows": [row(r) for r in planted]}
    files = store.setdefault("files", {})
    for file in dict.fromkeys(r.mutant.file for r in generated):
        files[file] = {**facts, "tests": TARGETS[file], "rows": [row(r) for r in generated if r.mutant.file == file]}
    store["files"] = {file: files[file] for file in TARGETS if file in files}  # a stable order
    args.out.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(store, indent=1) + "\n", encoding="utf-8")
    text = report(store, args.target)
    args.out.write_text(text + "\n", encoding="utf-8")
    print(text)

    missed = [r.mutant.description for r in planted if r.outcome == "survived"]
    below = [file for file in dict.fromkeys(r.mutant.file for r in generated)
             if summary(store["files"][file]["rows"])["rate_without_equivalent"] < args.target]
    if missed:
        print(f"planted bugs not caught: {missed}", file=sys.stderr)
    if below:
        print(f"files below the {args.target:.0%} kill target: {below}", file=sys.stderr)
    return 1 if missed or below else 0


if __name__ == "__main__":
    sys.exit(main())
