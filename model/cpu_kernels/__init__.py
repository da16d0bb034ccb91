"""C kernels for CPU decoding (decoding.c), compiled on first use for this machine and loaded with ctypes.

They are an accelerator, never a requirement: `library()` is None, with `unavailable()` saying
why, when there is no C compiler, the build fails, or PHRASAL_CPU_KERNELS=off; callers then keep
the PyTorch path. The shared object is built with -march=native, so its cache key includes the
compiler, the flags and this CPU's feature flags: a cache shared between machines never hands
one a binary for another's instruction set.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

SOURCE = Path(__file__).with_name("decoding.c")
DISABLE_ENV = "PHRASAL_CPU_KERNELS"  # "off" keeps every decoding step in PyTorch
CACHE_ENV = "PHRASAL_KERNEL_CACHE"  # where built libraries go (default ~/.cache/phrasal/kernels)
FLAGS = ("-O3", "-march=native", "-fno-math-errno", "-fno-trapping-math", "-fassociative-math",
         "-fno-signed-zeros", "-fopenmp-simd", "-shared", "-fPIC")
# libmvec gives the vectorised expf; without it (not glibc) the kernels still build, scalar.
LINK_ATTEMPTS = ((("-lmvec", "-lm"), ()), (("-lm",), ("-DPHRASAL_NO_LIBMVEC",)))

# decoding.c's limits (its MAX_KEYS and MAX_HEAD_DIM): the most keys one attention row reads (source
# positions or decoding steps) and the widest head; tests/model/test_cpu_kernels.py reads them there.
MAX_KEYS = 4096
MAX_HEAD_DIM = 512

_P, _I, _F = ctypes.c_void_p, ctypes.c_int64, ctypes.c_float
SIGNATURES = {
    "phrasal_self_attention": [_P, _I, _P, _P, _I, _P, _I, _I, _I, _I, _I, _F, _P, _I],
    "phrasal_cross_attention": [_P, _I, _P, _P, _I, _I, _P, _P, _I, _I, _I, _I, _I, _F, _P, _I, _P],
    "phrasal_beam_candidates": [_P, _I, _P, _I, _I, _I, _P, _P, _I, _I, _P, _P],
    "phrasal_select": [_P, _P, _I, _I, _I, _I, _I, _P, _P, _P, _P, _P, _P],
    "phrasal_add_layer_norm": [_P, _P, _I, _I, _P, _P, _F, _P, _P],
    "phrasal_int8_linear": [_P, _I, _I, _P, _P, _P, _P, _I, _I, _P, _P],
    "phrasal_float_linear": [_P, _I, _I, _P, _P, _I, _I, _P],
    "phrasal_encoder": [_P, _I, _P, _F, _P, _I, _I, _I, _I, _F, _P, _P, _I, _I, _P, _P, _P, _P],
    "phrasal_decoder_step": [_P, _I, _P, _F, _P, _I, _I, _I, _I, _F, _P, _I, _I, _P, _P, _I, _I, _I, _I, _P, _P, _P,
                             _P, _P],
}

_lock = threading.Lock()
_loaded: tuple[ctypes.CDLL | None, str | None] | None = None


def library() -> ctypes.CDLL | None:
    """The loaded kernels, built on first call; None when they cannot be had (see `unavailable`)."""
    return _load()[0]


def unavailable() -> str | None:
    """Why `library()` is None, in one line; None when the kernels are loaded."""
    return _load()[1]


def _load() -> tuple[ctypes.CDLL | None, str | None]:
    global _loaded
    with _lock:
        if _loaded is None:
            _loaded = _build_and_load()
        return _loaded


def _build_and_load() -> tuple[ctypes.CDLL | None, str | None]:
    if os.environ.get(DISABLE_ENV, "").lower() == "off":
        return None, f"{DISABLE_ENV}=off"
    if platform.system() != "Linux":
        return None, f"the CPU kernels are built for Linux only, not {platform.system()}"
    compiler = _compiler()
    if compiler is None:
        return None, "no C compiler (cc or gcc) on PATH"
    problems = []
    for libraries, defines in LINK_ATTEMPTS:
        target = _cache_dir() / f"decoding-{_key(compiler, libraries + defines)}.so"
        if not target.exists():
            problem = _compile(compiler, libraries, defines, target)
            if problem:
                problems.append(problem)
                continue
        try:
            return _bound(ctypes.CDLL(str(target))), None
        except OSError as error:
            problems.append(f"loading {target}: {error}")
    return None, "; ".join(problems)


def _compiler() -> str | None:
    return shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")


def _bound(lib: ctypes.CDLL) -> ctypes.CDLL:
    """`lib` with its functions' argument and return types set (SIGNATURES)."""
    for name, argtypes in SIGNATURES.items():
        function = getattr(lib, name)
        function.argtypes = argtypes
        function.restype = ctypes.c_int
    return lib


def build_for(arch: str, folder: Path) -> ctypes.CDLL:
    """The kernels built for `-march=arch` in place of this machine's own (`-march=native`) into
    `folder` and loaded: the vector paths of other machines (an AVX2 one: "haswell"; no AVX:
    "x86-64"), for tests and benchmarks run here. Raises RuntimeError when it does not build."""
    compiler = _compiler()
    if compiler is None:
        raise RuntimeError("no C compiler (cc or gcc) on PATH")
    flags = tuple(f"-march={arch}" if flag == "-march=native" else flag for flag in FLAGS)
    target, problems = Path(folder) / f"decoding-{arch}.so", []
    for libraries, defines in LINK_ATTEMPTS:
        problem = _compile(compiler, libraries, defines, target, flags)
        if problem is None:
            return _bound(ctypes.CDLL(str(target)))
        problems.append(problem)
    raise RuntimeError(f"the -march={arch} build failed: {'; '.join(problems)}")


def use(lib: ctypes.CDLL) -> None:
    """Make `lib` (from build_for) the kernels every later `library()` call returns."""
    global _loaded
    with _lock:
        _loaded = (lib, None)


def _compile(compiler: str, libraries: tuple[str, ...], defines: tuple[str, ...], target: Path,
             flags: tuple[str, ...] = FLAGS) -> str | None:
    target.parent.mkdir(parents=True, exist_ok=True)
    # Built beside the target and renamed into place: processes starting together never load a half-written file.
    handle, partial = tempfile.mkstemp(suffix=".so", dir=target.parent)
    os.close(handle)
    command = [compiler, *flags, *defines, str(SOURCE), "-o", partial, *libraries]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as error:
        os.unlink(partial)
        return f"{' '.join(command)}: {error}"
    if done.returncode != 0:
        os.unlink(partial)
        first = (done.stderr.strip().splitlines() or ["no message"])[0]
        return f"{' '.join(command)} failed: {first}"
    os.replace(partial, target)
    return None


def _cache_dir() -> Path:
    configured = os.environ.get(CACHE_ENV)
    return Path(configured) if configured else Path.home() / ".cache" / "phrasal" / "kernels"


def _key(compiler: str, extra: tuple[str, ...]) -> str:
    version = subprocess.run([compiler, "--version"], capture_output=True, text=True).stdout
    digest = hashlib.sha256()
    for part in (SOURCE.read_bytes().decode(), compiler, version, " ".join(FLAGS + extra), platform.machine(),
                 _cpu_flags()):
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()[:16]


def _cpu_flags() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                return line
    except OSError:
        pass
    return platform.processor()
