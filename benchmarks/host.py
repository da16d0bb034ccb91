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
