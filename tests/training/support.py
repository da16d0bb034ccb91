"""Helpers for training tests (imported as ``tests.training.support``)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from training.loop import LOG_FILE


def read_log(run_dir: str | Path, event: str | None = None) -> list[dict[str, Any]]:
    """The events of a run's log.jsonl (training.loop.RunLog), those named ``event`` when given."""
    path = Path(run_dir) / LOG_FILE
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    records = [json.loads(line) for line in lines if line.strip()]
    return [r for r in records if event is None or r["event"] == event]
