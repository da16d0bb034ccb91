"""The wheels benchmarks/gpu/serving.sh installs on a GPU machine that has PyTorch but not the
service's stack (fastapi, pydantic, uvicorn, ...) nor CTranslate2, made here into .whl/ (ignored).

The versions are this environment's own (`importlib.metadata`), for CPython 3.12 on x86-64 Linux.
CTranslate2's wheel carries its libraries with debug information (its extension alone is 69 MB);
that is stripped (`strip -g`) and the wheel rewritten with a fresh RECORD, so that the wheels and
the repository fit what a device call may carry (64 MiB).

    python benchmarks/gpu/wheels.py            # -> .whl/*.whl
"""
from __future__ import annotations

import argparse
import base64
import hashlib
import importlib.metadata as metadata
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

# What the service and the benchmarks need beyond the GPU image's packages (its list:
# fastapi's required opentelemetry-api included; torch, numpy, sentencepiece, safetensors,
# sacrebleu, prometheus-client, httpx, anyio, click and h11 are there).
PACKAGES = ("fastapi", "starlette", "pydantic", "pydantic-core", "pydantic-settings", "python-dotenv", "uvicorn",
            "annotated-types", "typing-inspection", "annotated-doc", "typing-extensions", "opentelemetry-api",
            "rapidfuzz", "polib", "python-multipart", "ctranslate2")
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
             "manylinux1_x86_64")
STRIPPED = ("ctranslate2",)


def record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def stripped(wheel: Path) -> None:
    """The wheel rewritten in place with its ELF files' debug information removed."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        with zipfile.ZipFile(wheel) as archive:
            names = [n for n in archive.namelist() if not n.endswith("/")]
            archive.extractall(root)
        for name in names:
            path = root / name
            if path.read_bytes()[:4] == b"\x7fELF":
                subprocess.run(["strip", "-g", str(path)], check=True)
        record = next(n for n in names if n.endswith(".dist-info/RECORD"))
        lines = [record_line(n, (root / n).read_bytes()) for n in names if n != record] + [f"{record},,"]
        (root / record).write_text("\n".join(lines) + "\n")
        rewritten = wheel.with_suffix(".tmp")
        with zipfile.ZipFile(rewritten, "w", zipfile.ZIP_DEFLATED) as archive:
            for name in names:
                archive.write(root / name, name)
        rewritten.replace(wheel)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(".whl"))
    args = parser.parse_args(argv)
    if shutil.which("strip") is None:
        sys.exit("error: needs `strip` (binutils) to make CTranslate2's wheel small enough to carry")
    args.out.mkdir(exist_ok=True)
    pins = [f"{name}=={metadata.version(name)}" for name in PACKAGES]
    platforms = [flag for platform in PLATFORMS for flag in ("--platform", platform)]
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                    "--python-version", "3.12", "--implementation", "cp", *platforms, "-d", str(args.out), *pins],
                   check=True)
    for name in STRIPPED:
        for wheel in args.out.glob(f"{name}-*.whl"):
            stripped(wheel)
    total = sum(w.stat().st_size for w in args.out.glob("*.whl"))
    print(f"{len(pins)} wheels in {args.out}, {total / 2**20:.1f} MiB: {', '.join(pins)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
