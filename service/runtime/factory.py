"""Pick the backend from settings: ``settings.backend`` names the module whose
``load_runtimes(settings)`` builds the runtimes. Engines are imported only for the backend chosen,
so this file imports none."""
from __future__ import annotations

import importlib
from collections.abc import Sequence

from service.runtime.base import TranslationRuntime
from service.settings import Settings

BACKEND_MODULES = {
    "torch": "service.runtime.torch_runtime",
    "onnx": "service.runtime.onnx_runtime",
    "torchscript": "service.runtime.torchscript_runtime",
    "ct2": "service.runtime.ct2_runtime",
}


def load_runtimes(settings: Settings) -> Sequence[TranslationRuntime]:
    module = BACKEND_MODULES.get(settings.backend)
    if module is None:
        raise ValueError(f"unknown backend {settings.backend!r}; known: {', '.join(BACKEND_MODULES)}")
    if settings.backend != "torch" and not settings.export_dirs:
        raise ValueError(
            f"backend {settings.backend!r} serves exported models: set export_dirs "
            f"(e.g. PHRASAL_EXPORT_DIRS='[\"exports/en-de-{settings.backend}\"]', written by phrasal-export)"
        )
    if settings.inference_process:
        from service.runtime.inference_process import load_process_runtimes

        return load_process_runtimes(settings)
    return importlib.import_module(module).load_runtimes(settings)
