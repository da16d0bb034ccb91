"""What a device call carries, and making it fit: the device tool copies the working tree (tracked
files, untracked files git does not ignore, the carried paths) and refuses more than 64 MiB. The
repository alone is close to that (the Debian corpus, five bundled models, the study's results), so
a GPU command that also carries wheels (benchmarks/gpu/serving.sh: 31 MiB of them) only fits with
what it does not read set aside for the call.

    python tools/device_tree.py size --carry .whl           # MiB that would travel; exit 1 if over
    python tools/device_tree.py aside --for serving         # move what serving.sh never reads to .dev/aside/
    ... the device call (run, carry [".whl"]) ...
    python tools/device_tree.py restore                     # put it all back

Set-aside paths go to .dev/aside/ (ignored, so it does not travel), renamed, never copied; `restore`
refuses to overwrite anything, and `git checkout -- PATH` brings back a tracked path whatever
happened to the copy.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LIMIT = 64 * 2**20  # the device tool's limit on what travels (device README, "Limits")
ASIDE = Path(".dev") / "aside"
MANIFEST = "manifest.json"

# What each prepared GPU command never reads. Serving (benchmarks/gpu/serving.sh) reads models/en-de,
# data/multi30k and the code; the study parts (studies/gpu/run-part.sh) read data/multi30k,
# data/gold_align_deen_dev, models/en-de and results/study-en-de (a parent model), never the corpus.
# The bundled models none of them reads (models/en-de is the one serving and the study read).
OTHER_MODELS = ("models/en-de-align", "models/en-de-align2", "models/de-en-align", "models/en-de-software",
                "models/de-en-software", "models/en-fr")
# None of them serves a translation memory.
UNUSED = {
    "serving": ("data/debian_catalogs", *OTHER_MODELS, "results/study-en-de", "memories"),
    "study": ("data/debian_catalogs", *OTHER_MODELS, "memories"),
    # studies/en-de-software-gpu.sh reads the corpus' splits, not its alignment labels (no run of
    # studies/en-de-software.json trains a head), nor any bundled model.
    "software": ("data/debian_catalogs/train.en-de.align.gz", *OTHER_MODELS, "memories"),
}


def _git(repo: Path, *args: str) -> list[str]:
    done = subprocess.run(["git", *args], cwd=repo, capture_output=True, check=True)
    return [name for name in done.stdout.decode().split("\0") if name]


def travelling_files(repo: Path, carry: list[str]) -> list[Path]:
    """The files a device call would copy: tracked ones present in the working tree, untracked ones
    git does not ignore, and every file under the carried paths."""
    names = set(_git(repo, "ls-files", "-z", "--cached", "--others", "--exclude-standard"))
    files = [repo / name for name in names if (repo / name).is_file()]
    for path in carry:
        root = repo / path
        files += [root] if root.is_file() else [p for p in root.rglob("*") if p.is_file()]
    return files


def size(repo: Path, carry: list[str]) -> int:
    return sum(path.stat().st_size for path in set(travelling_files(repo, carry)))


def aside(repo: Path, paths: list[str]) -> list[str]:
    """Move each tracked path to .dev/aside/PATH; returns those moved (a missing one is skipped)."""
    store = repo / ASIDE
    manifest = store / MANIFEST
    moved = json.loads(manifest.read_text()) if manifest.exists() else []
    tracked = set(_git(repo, "ls-files", "-z"))
    for path in paths:
        source = repo / path
        if not source.exists():
            continue
        if not any(name == path or name.startswith(path.rstrip("/") + "/") for name in tracked):
            raise SystemExit(f"error: {path} is not tracked by git: only tracked paths are set aside")
        target = store / path
        if target.exists():
            raise SystemExit(f"error: {target} already exists: restore first")
        target.parent.mkdir(parents=True, exist_ok=True)
        os.rename(source, target)
        moved.append(path)
        manifest.write_text(json.dumps(moved, indent=1))
    return moved


def restore(repo: Path) -> list[str]:
    """Put every set-aside path back; refuses to overwrite one that exists again."""
    store = repo / ASIDE
    manifest = store / MANIFEST
    if not manifest.exists():
        return []
    moved = json.loads(manifest.read_text())
    clashes = [path for path in moved if (repo / path).exists()]
    if clashes:
        raise SystemExit(f"error: {', '.join(clashes)} exist(s) again; move them away, then restore")
    for path in moved:
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        os.rename(store / path, repo / path)
    manifest.unlink()
    # The folders a file was set aside in go too: left empty, they blocked setting aside the folder
    # itself later ("aside --for software", restore, then "aside --for serving").
    for folder in sorted((p for p in store.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
        if not any(folder.iterdir()):
            folder.rmdir()
    return moved


def main(argv: list[str] | None = None, repo: Path = REPO) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    measure = sub.add_parser("size", help="MiB a device call would carry (exit 1 over the limit)")
    measure.add_argument("--carry", action="append", default=[], help="a carried path (repeatable), e.g. .whl")
    put = sub.add_parser("aside", help="move tracked paths a command never reads to .dev/aside/")
    put.add_argument("--for", dest="command_for", choices=sorted(UNUSED), help="the paths that command never reads")
    put.add_argument("paths", nargs="*", help="more tracked paths")
    sub.add_parser("restore", help="put back what was set aside")
    args = parser.parse_args(argv)
    if args.command == "size":
        missing = [path for path in args.carry if not (repo / path).exists()]
        if missing:
            parser.error(f"--carry: {', '.join(missing)} does not exist")
        total = size(repo, args.carry)
        print(f"{total / 2**20:.1f} MiB would travel (limit {LIMIT / 2**20:.0f} MiB)")
        return 0 if total <= LIMIT else 1
    if args.command == "aside":
        paths = [*(UNUSED[args.command_for] if args.command_for else ()), *args.paths]
        if not paths:
            parser.error("aside: name --for or paths")
        moved = aside(repo, paths)
        print(f"set aside in {ASIDE}: {', '.join(moved) or 'nothing'}; now {size(repo, []) / 2**20:.1f} MiB "
              "without carried paths")
        return 0
    print(f"restored: {', '.join(restore(repo)) or 'nothing was set aside'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
