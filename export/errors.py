"""Errors the export stage raises, each meant to be read by the person running it."""
from __future__ import annotations


class ExportError(Exception):
    """Bad input (a path, an option, an export directory) that the user must fix: CLI exit code 2."""


class UnsupportedModel(ExportError):
    """A model this target cannot export; `reasons` lists every reason, not only the first."""

    def __init__(self, target: str, reasons: list[str]):
        self.target = target
        self.reasons = list(reasons)
        super().__init__(f"cannot export to {target}: " + "; ".join(self.reasons))


class VerificationFailed(Exception):
    """The exported model does not reproduce eager PyTorch closely enough: CLI exit code 1.

    The export directory is kept, with the failing result in its manifest, for inspection; runtimes
    refuse to load it."""

    def __init__(self, manifest: dict):
        self.manifest = manifest
        super().__init__("the exported model failed verification against eager PyTorch")
