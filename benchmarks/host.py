"""What a benchmark ran on, for its results file: the CPU's model name (platform.processor() says
only "x86_64" on Linux; /proc/cpuinfo names the chip)."""
from __future__ import annotations

import platform
from pathlib import Path


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def append_report(path: Path, title: str, command: str, report: str) -> None:
    """Append one run's report to a results file, newest last; a new file gets the title and says
    which command writes it (so a reader of results/ can rerun it)."""
    if not path.exists():
        path.write_text(f"# {title}\n\nWritten by `{command}` (what it measures: its docstring); newest last.\n",
                        encoding="utf-8")
    with open(path, "a", encoding="utf-8") as handle:
        handle.write("\n" + report.lstrip("\n"))
