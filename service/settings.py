"""Service settings, read once from the environment (prefix PHRASAL_) by ``create_app``.

List and mapping values come as JSON: PHRASAL_MODEL_DIRS='["models/en-de", "models/en-fr"]',
PHRASAL_API_KEYS='{"alice": "<32 random characters>"}'. docs/operations.md explains each one.
"""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from service.catalog import MODEL_NAME
from service.domain_routing import AUTO
from service.runtime.base import AlignmentMethod, DecodingOptions, ct2_problem

# The request schema's hard bound on beam_size; the default below must respect it.
MAX_BEAM_SIZE = 16
# API key names become log fields and metric labels: short and plain.
_KEY_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
MIN_API_KEY_CHARS = 16
_PAIR = re.compile(r"^[a-z0-9_]+(-[a-z0-9_]+)*-[a-z0-9_]+$")
# The decoding defaults of every entry point (model/decoding/defaults.py).
_DECODING = DecodingOptions()


def address_parts(address: str) -> tuple[str, int]:
    """'host:port' or '[v6]:port' -> (host, port); ValueError naming what is wrong."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{address!r} is not host:port")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
        ipaddress.IPv6Address(host)
    elif ":" in host:
        raise ValueError(f"{address!r}: an IPv6 address goes in brackets, [::1]:8000")
    return host, int(port)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="PHRASAL_",
        extra="forbid",
        frozen=True,
        # "model_dirs" is our field, not pydantic's "model_" namespace.
        protected_namespaces=(),
        # Errors must not echo values: api_keys holds secrets.
        hide_input_in_errors=True,
    )

    model_dirs: list[Path] = Field(
        default_factory=lambda: [Path("models/en-de-align2"), Path("models/en-de-software"), Path("models/de-en-align"),
                                 Path("models/de-en-software"), Path("models/en-fr")],
        min_length=1,
        description="The model directories served: one or more per language pair; a model's name is its directory's name.",
    )
    # The model that answers a pair when a request names none, by pair ("en-de": a model's name, or
    # "auto"); a pair left out is answered by the model its texts choose where its models are of
    # several domains (service/domain_routing.py), else by its first model in model_dirs (export_dirs).
    default_models: dict[str, str] = Field(default_factory=dict)
    # A model's domain where its directory's model_card.json states none, by model name
    # (service/catalog.py); neither: "general".
    model_domains: dict[str, str] = Field(default_factory=dict)
    device: Literal["auto", "cpu", "cuda"] = "auto"
    # Static-state decoding (model/decoding/static_decoding.py; with CUDA graphs on CUDA) or the
    # eager search, for backend "torch". "auto": the one measured fastest for the device
    # (service/runtime/torch_runtime.py STATIC_BY_DEFAULT).
    static_decoding: Literal["auto", "on", "off"] = "auto"
    # Which engine serves (service/runtime/factory.py). "torch" serves model_dirs; the others
    # serve export_dirs, written by `phrasal-export {onnx,torchscript,ct2}` (one per pair).
    backend: Literal["torch", "onnx", "torchscript", "ct2"] = "torch"
    # Backend "torch" on the CPU: "auto" (the default) serves each model with its linear layers
    # int8-quantised (model/int8_linear.py) where the model directory's int8_verification.json
    # says int8 passed for these weights and this decoder (python -m export.int8_check MODEL_DIR),
    # float32 elsewhere; the way CUDA serves float16. The bundled models: 1.34x CTranslate2 int8
    # through the service where float32 is 0.91x (results/service_vs_ct2_cpu.md); 89-93 % of
    # translations identical to float32, BLEU within 0.3 (models/*/int8_verification.json).
    # "none": float32 always, identical to eager PyTorch. "int8": as "auto", with a warning
    # where a model is refused. On CUDA every value serves float16.
    cpu_quantization: Literal["auto", "none", "int8"] = "auto"
    # Backend "torch" on the CPU: "auto" decodes vanilla models through the C kernels
    # (model/cpu_kernels, model/decoding/kernel_backend.py) where they build and the model
    # directory's record says they were verified for its weights: kernels_verification.json for
    # float32 (python -m export.kernels_check MODEL_DIR), int8_verification.json for int8; else
    # eagerly, with a line in the log. "off": always eagerly (it also keeps the kernels unbuilt).
    cpu_kernels: Literal["auto", "off"] = "auto"
    export_dirs: list[Path] = Field(
        default_factory=list, description="Exported model directories, for backend onnx / torchscript / ct2."
    )

    # Request limits: a request over them is a 422 naming the field, not a slow server.
    max_segments: int = Field(64, ge=1, description="Texts per request.")
    # Catalog messages run to a few thousand characters (a shell builtin's help, a licence notice);
    # a text is cut into sentences and lines before the model reads it, and the cost budget below
    # bounds the work of a request however its characters are spread.
    max_chars: int = Field(10_000, ge=1, description="Characters per text.")

    # Decoding defaults and bounds (per-request values come from the request schema).
    default_beam_size: int = Field(_DECODING.beam_size, ge=1, le=MAX_BEAM_SIZE)
    max_length_ratio: float = Field(_DECODING.max_length_ratio, gt=0)
    max_length_offset: int = Field(_DECODING.max_length_offset, ge=0)
    length_penalty: float = Field(_DECODING.length_penalty, ge=0)
    # lp(|y|) = |y|^length_penalty ("power") or ((5+|y|)/6)^length_penalty ("gnmt", Wu et al. 2016
    # eq. 14) (model/decoding/length_penalty.py). Backend ct2 has only "power" and refuses "gnmt" at start.
    length_penalty_form: Literal["power", "gnmt"] = _DECODING.length_penalty_form  # type: ignore[assignment]
    # Where word alignments come from when a request names no "alignment_method": "auto" = the best
    # measured method: "bidirectional" where both directions of a pair are served with a supervised
    # head, else each model's own (the supervised head where the model has one, else attention).
    alignment_method: Literal["auto"] | AlignmentMethod = "auto"

    # Threads that run batches, per language pair. One is right for one GPU (see
    # service/batcher.py): a second would only interleave kernels and double activation memory.
    worker_threads: int = Field(1, ge=1, le=16)
    warmup: bool = True
    # Each model in a child process (service/runtime/inference_process.py): the decode loop and
    # the HTTP event loop then do not contend for one GIL, which under load slows a
    # launch-bound decode several times over.
    inference_process: bool = True
    # The inference process's watchdog and restarts (service/runtime/inference_process.py).
    inference_grace_s: float = Field(
        10.0,
        gt=0,
        description="A model call unanswered request_timeout_s + this after it started is stuck: its process is killed and restarted.",
    )
    inference_restart_backoff_s: float = Field(
        1.0, gt=0, description="Wait before retrying an inference process that failed to restart; doubles per failure."
    )
    inference_restart_backoff_max_s: float = Field(
        60.0, gt=0, description="The longest wait between two restart attempts."
    )

    # --- Dynamic batching (service/batcher.py). Batching off: max_batch_sentences=1, max_wait_ms=0.
    max_batch_sentences: int = Field(64, ge=1, description="Texts per model call.")
    max_batch_tokens: int = Field(
        8192, ge=1, description="Padded source tokens per model call (texts x longest text)."
    )
    max_wait_ms: float = Field(5.0, ge=0, le=1000, description="How long an idle worker waits for company.")

    # --- Backpressure.
    max_queue: int = Field(1024, ge=1, description="Texts waiting for a worker; beyond it: 503 + Retry-After "
                           "(an empty queue takes any one request, however many segments its texts are cut into).")
    request_timeout_s: float = Field(30.0, gt=0, description="Deadline of one request, queue + compute.")
    retry_after_s: int = Field(1, ge=1, description="Retry-After of a 503 (queue full, deadline in queue).")
    max_connections: int | None = Field(
        1024,
        ge=1,
        description="Requests served at once (health checks and /metrics aside); beyond it: 503 + Retry-After.",
    )

    # --- Request limits enforced before the model sees the text.
    max_source_tokens: int | None = Field(
        None, ge=1, description="Source tokens per text (None: the model's own limit)."
    )
    # 50,000 is about 6.5 s of the bundled model on one quiet CPU core (0.13 ms a unit) and 13 s
    # on one shared with other work (docs/operations.md): inside the 30 s deadline either way.
    # GPU replicas can take far more.
    max_request_cost: int | None = Field(
        50_000,
        ge=1,
        description="Cost budget of one request: sum over its texts of source tokens x beam_size (None: no budget).",
    )
    max_body_bytes: int = Field(1 << 20, ge=1024, description="Request body size; beyond it: 413.")
    header_timeout_s: float = Field(
        10.0, gt=0, description="Time a connection has to send a whole request head; beyond it: 408 (or closed if silent)."
    )
    body_timeout_s: float = Field(10.0, gt=0, description="Time to receive a whole body; beyond it: 408.")
    send_timeout_s: float = Field(
        10.0, gt=0, description="Time a response may wait for the client to read any of it; beyond it: connection aborted."
    )

    # --- Auth and quotas, off by default.
    api_keys: dict[str, SecretStr] = Field(
        default_factory=dict, description="Key name -> key. Empty: no authentication."
    )
    api_key_header: str = Field("X-API-Key", min_length=1, pattern=r"^[A-Za-z0-9-]+$")
    rate_limit_per_s: float | None = Field(None, gt=0, description="Requests per second per key.")
    rate_limit_burst: int = Field(20, ge=1, description="Token-bucket size per key.")
    cors_origins: list[str] = Field(default_factory=list, description="Empty: no CORS headers at all.")

    # --- Translation memories (/memories).
    memories: list[Path] = Field(
        default_factory=list,
        description="Translation memories (TMX files) whose segments are answered as stored, first listed first "
        "(service/memory.py); `make serve` serves memories/cldr-names.tmx and memories/debian-terms.tmx.",
    )

    # --- Stored glossaries (/glossaries).
    glossary_db: Path = Field(
        Path("glossaries.sqlite3"),
        description="The SQLite file that holds the stored glossaries (created on first use; relative to the "
        "working directory); ':memory:' keeps them for the process only.",
    )

    # --- Documents sent to be translated (LibreTranslate's translate_file, DeepL's v2/document).
    document_db: Path = Field(
        Path("documents.sqlite3"),
        description="The SQLite file that holds documents sent to be translated until they are done and fetched "
        "(created on first use; relative to the working directory): one accepted is translated after a restart too.",
    )
    max_document_bytes: int = Field(10 << 20, ge=1024, description="A document's size; beyond it: 413.")
    max_documents_waiting: int = Field(
        100, ge=1, description="Documents queued or being translated at once; beyond it a new one is 429 (retry later)."
    )
    document_retention_s: float = Field(
        86_400.0, gt=0, description="How long a document and its translation are kept after it arrived."
    )

    # --- Several replicas (service/http/replicas.py; docs/operations.md, "Scaling out").
    replicas: list[str] = Field(
        default_factory=list,
        description="host:port names of the replicas of this server (every address each resolves to, e.g. a "
        "Kubernetes headless Service), asked for a glossary or document this replica does not hold; empty: one replica.",
    )
    replica_address: str | None = Field(
        None, description="This replica's own host:port as the others reach it, left out of `replicas`' addresses.",
    )

    # --- Lifecycle.
    drain_timeout_s: float = Field(30.0, ge=0, description="After SIGTERM, time left to in-flight requests.")

    @model_validator(mode="after")
    def _distinct_paths(self) -> Settings:
        for field in ("model_dirs", "memories"):
            paths = getattr(self, field)
            twice = next((path for k, path in enumerate(paths) if path in paths[:k]), None)
            if twice is not None:
                raise ValueError(f"{field} lists {twice} twice")
        return self

    @model_validator(mode="after")
    def _replica_addresses(self) -> Settings:
        for field, addresses in (("replicas", self.replicas), ("replica_address", [self.replica_address] * bool(self.replica_address))):
            for address in addresses:
                try:
                    address_parts(address)
                except ValueError as error:
                    raise ValueError(f"{field}: {error}") from None
        return self

    @model_validator(mode="after")
    def _memory_files(self) -> Settings:
        # Checked before any model loads: a typo stops `python -m service` with one line.
        missing = next((path for path in self.memories if not path.is_file()), None)
        if missing is not None:
            raise ValueError(f"memories: no file {missing}")
        return self

    @property
    def served_dirs(self) -> list[Path]:
        """The directories served: model_dirs for backend torch, export_dirs for the others."""
        return self.model_dirs if self.backend == "torch" else self.export_dirs

    @model_validator(mode="after")
    def _named_models(self) -> Settings:
        # Checked here, before any model loads, so that a typo stops `python -m service` with one
        # line; whether a default serves its pair needs the manifests (service/catalog.py).
        field = "model_dirs" if self.backend == "torch" else "export_dirs"
        names: dict[str, Path] = {}
        problems = []
        for path in self.served_dirs:
            if path.name == AUTO:
                problems.append(f"{field}: a model may not be named {AUTO!r} (the directory's name): a request's "
                                f"\"model\": \"{AUTO}\" asks its texts to choose")
            elif not MODEL_NAME.match(path.name):
                problems.append(f"{field}: the model name {path.name!r} (the directory's name) must match {MODEL_NAME.pattern}")
            elif path.name in names:
                problems.append(f"{field}: two models are named {path.name!r} ({names[path.name]} and {path}); "
                                "a model's name is its directory's name")
            names.setdefault(path.name, path)
        listed = ", ".join(names) or "none"
        for pair, name in self.default_models.items():
            if not _PAIR.match(pair):
                problems.append(f"default_models: {pair!r} is not a language pair like 'en-de'")
            if name != AUTO and name not in names:
                problems.append(f"default_models: {pair} names {name!r}, which is not served ({field}: {listed})")
        for name in self.model_domains:
            if name not in names:
                problems.append(f"model_domains: {name!r} is not served ({field}: {listed})")
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @model_validator(mode="after")
    def _consistent_serving_limits(self) -> Settings:
        # Every problem at once, like ModelConfig.
        problems = []
        if self.backend == "ct2" and (why := ct2_problem(self.length_penalty_form)) is not None:
            problems.append(f"backend 'ct2': {why}")
        if self.cpu_quantization == "int8" and self.backend != "torch":
            problems.append(f"cpu_quantization={self.cpu_quantization} applies to backend torch; an {self.backend} export "
                            "is quantised when it is made (python -m export onnx MODEL_DIR OUT --dtype int8)")
        if self.max_segments > self.max_queue:
            problems.append(f"max_queue ({self.max_queue}) must hold one full request (max_segments={self.max_segments})")
        for name, key in self.api_keys.items():
            if not _KEY_NAME.match(name):
                problems.append(f"api_keys: key name {name!r} must match {_KEY_NAME.pattern}")
            if len(key.get_secret_value()) < MIN_API_KEY_CHARS:
                # The name only: a key never appears in a message or a log.
                problems.append(f"api_keys: the key named {name!r} is shorter than {MIN_API_KEY_CHARS} characters")
        secrets = [key.get_secret_value() for key in self.api_keys.values()]
        if len(set(secrets)) != len(secrets):
            problems.append("api_keys: two names share one key")
        if self.inference_restart_backoff_max_s < self.inference_restart_backoff_s:
            problems.append(
                f"inference_restart_backoff_max_s ({self.inference_restart_backoff_max_s:g}) must be at least "
                f"inference_restart_backoff_s ({self.inference_restart_backoff_s:g})"
            )
        if self.rate_limit_per_s is not None and not self.api_keys:
            problems.append("rate_limit_per_s is per API key: set api_keys too")
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @property
    def decoding(self) -> DecodingOptions:
        """The decoding options of a request that sets none: every request starts from these."""
        return DecodingOptions(
            beam_size=self.default_beam_size,
            max_length_ratio=self.max_length_ratio,
            max_length_offset=self.max_length_offset,
            length_penalty=self.length_penalty,
            length_penalty_form=self.length_penalty_form,
        )
