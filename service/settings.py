"""Service settings, read once from the environment (prefix PHRASAL_) by ``create_app``.

List values come as JSON: PHRASAL_MODEL_DIRS='["models/en-de", "models/en-fr"]'.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

# The request schema's hard bound on beam_size; the default below must respect it.
MAX_BEAM_SIZE = 16


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="PHRASAL_",
        extra="forbid",
        frozen=True,
        # "model_dirs" is our field, not pydantic's "model_" namespace.
        protected_namespaces=(),
    )

    model_dirs: list[Path] = Field(
        default_factory=lambda: [Path("models/en-de")],
        min_length=1,
        description="One model directory per language pair served.",
    )
    device: Literal["auto", "cpu", "cuda"] = "auto"

    # Request limits: a request over them is a 422 naming the field, not a slow server.
    max_segments: int = Field(64, ge=1, description="Texts per request.")
    max_chars: int = Field(2000, ge=1, description="Characters per text.")

    # Decoding defaults and bounds (per-request values come from the request schema).
    default_beam_size: int = Field(5, ge=1, le=MAX_BEAM_SIZE)
    max_length_ratio: float = Field(1.5, gt=0)
    max_length_offset: int = Field(10, ge=0)
    length_penalty: float = Field(1.0, ge=0)

    # Threads that may run translations at once; more would only contend for the same cores/GPU.
    worker_threads: int = Field(4, ge=1)
    warmup: bool = True

    @model_validator(mode="after")
    def _distinct_model_dirs(self) -> Settings:
        seen = set()
        for path in self.model_dirs:
            if path in seen:
                raise ValueError(f"model_dirs lists {path} twice")
            seen.add(path)
        return self
