"""What a benchmark ran on, for its results file: the CPU's model name (platform.processor() says
only "x86_64" on Linux; /proc/cpuinfo names the chip)."""
from __future__ import annotations

import os
import platform
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def cpu_name() -> str:
    """The chip's model name, and where a virtual machine hides it ("AMD EPYC" on every generation),
    its family and model numbers and widest vector extension: the CPU results of one "AMD EPYC" moved
    3.5x between machines of different generations, so the name alone does not say which was measured."""
    fields: dict[str, str] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            key = key.strip()
            if key in ("model name", "cpu family", "model", "flags") and key not in fields:
                fields[key] = value.strip()
    except OSError:
        pass
    name = fields.get("model name") or platform.processor() or platform.machine() or "unknown CPU"
    details = []
    if "cpu family" in fields and "model" in fields:
        details.append(f"family {fields['cpu family']} model {fields['model']}")
    flags = set(fields.get("flags", "").split())
    vector = next((label for flag, label in VECTOR_EXTENSIONS if flag in flags), None)
    if vector:
        details.append(vector)
    return f"{name} ({', '.join(details)})" if details else name


# Widest first: the one that decides how fast int8 and float kernels run.
VECTOR_EXTENSIONS = (("amx_int8", "AMX"), ("avx512_vnni", "AVX-512 VNNI"), ("avx512f", "AVX-512"),
                     ("avx_vnni", "AVX-VNNI"), ("avx2", "AVX2"), ("asimd", "NEON"))


def run_heading(note: str = "") -> str:
    """A run's heading in a results file: when (UTC) and on what (chip, architecture, logical CPUs),
    then `note` on the same line."""
    return (f"\n## {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: {cpu_name()}, {platform.machine()}, "
            f"{os.cpu_count()} logical CPUs{note}\n\n")


def append_report(path: Path, title: str, command: str, report: str) -> None:
    """Append one run's report to a results file, newest last; a new file gets the title and says
    which command writes it (so a reader of results/ can rerun it)."""
    if not path.exists():
        path.write_text(f"# {title}\n\nWritten by `{command}` (what it measures: its docstring); newest last.\n",
                        encoding="utf-8")
    with open(path, "a", encoding="utf-8") as handle:
        handle.write("\n" + report.lstrip("\n"))


def translate_through(client, texts: list[str], source: str, target: str, model: str | None = None) -> list[str]:
    """The best translation of each text through the service at `client` (in-process or httpx),
    32 texts a request, beam 5; `model` None names none (the service chooses)."""
    out = []
    for i in range(0, len(texts), 32):
        body = {"source": source, "target": target, "text": texts[i:i + 32], "beam_size": 5}
        if model is not None:
            body["model"] = model
        response = client.post("/translate", json=body)
        response.raise_for_status()
        out += [nbest[0]["text"] for nbest in response.json()["translations"]]
    return out


@contextmanager
def in_process_service(settings, runtime_factory=None) -> Iterator:
    """A client of this checkout's service run in this process (FastAPI's TestClient), once its
    models are loaded: what the benchmarks that measure "through the service" post to.
    `runtime_factory`: as service.app.create_app's."""
    from fastapi.testclient import TestClient

    from service.app import create_app

    app = create_app(settings, runtime_factory=runtime_factory)
    with TestClient(app) as client:
        client.portal.call(app.state.lifecycle.wait_loaded)
        yield client
