"""The one frozen model configuration: validated as a whole, written into every artifact."""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, Mapping

from model.attention.registry import SITES, attention_class, known_attention_kinds
from model.errors import ConfigError

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class AttentionConfig:
    """Which attention kind one site uses, and that kind's own options."""

    kind: str = "vanilla"
    options: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "options": dict(self.options)}


@dataclass(frozen=True)
class ModelConfig:
    """A pre-norm Transformer encoder-decoder whose attention sites are chosen by name."""

    vocab_size: int
    d_model: int = 512
    n_heads: int = 8
    d_ff: int = 2048
    encoder_layers: int = 6
    decoder_layers: int = 6
    dropout: float = 0.1
    attention_dropout: float = 0.0
    activation_dropout: float = 0.0
    max_positions: int = 1024
    pad_id: int = 0
    bos_id: int = 1
    eos_id: int = 2
    tie_embeddings: bool = True
    encoder_self_attention: AttentionConfig = field(default_factory=AttentionConfig)
    decoder_self_attention: AttentionConfig = field(default_factory=AttentionConfig)
    cross_attention: AttentionConfig = field(default_factory=AttentionConfig)
    # Which decoder layer's cross-attention is returned as the alignment (-1 = last).
    alignment_layer: int = -1
    # Attentive source-phrase representations (Xu et al.), e.g. {"glance": "mean"}; None = off.
    # Options are checked by model/phrase_representation/options.py.
    phrase_representation: Mapping[str, Any] | None = None
    # Structural alignment biases on the cross-attention logits (Cohn et al.), by name, e.g.
    # {"position": {}, "markov": {"window": 1}, "fertility": {"window": 1}}; {} = none.
    # Checked by model/biases/options.py.
    alignment_biases: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # The global fertility loss (Cohn et al.), e.g. {"weight": 0.05, "layer": -1}; None = off.
    # Checked by model/global_fertility.py.
    global_fertility: Mapping[str, Any] | None = None
    # The supervised alignment head (Garg et al.), {"layer": 2, "head": 0, "weight": 0.5}; None = off.
    # Checked by model/supervised_alignment.py.
    supervised_alignment: Mapping[str, Any] | None = None
    # +C of Choi et al.'s fine-grained attention: source word embeddings masked by a gate computed
    # from the whole sentence before the encoder reads them (model/embedding.py).
    contextual_source_embeddings: bool = False
    schema_version: int = SCHEMA_VERSION

    def __post_init__(self) -> None:
        problems = _problems(self)
        if problems:
            raise ConfigError(problems)

    def attention(self, site: str) -> AttentionConfig:
        return {
            "encoder_self": self.encoder_self_attention,
            "decoder_self": self.decoder_self_attention,
            "cross": self.cross_attention,
        }[site]

    @property
    def alignment_layer_index(self) -> int:
        return self.alignment_layer % self.decoder_layers

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            out[f.name] = value.to_dict() if isinstance(value, AttentionConfig) else _plain(value)
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "ModelConfig":
        """The only way back from a stored config: unknown keys and every invalid value are reported together."""
        if not isinstance(data, Mapping):
            raise ConfigError([f"config must be a JSON object, got {type(data).__name__}"])
        names = {f.name for f in dataclasses.fields(cls)}
        problems = [f"unknown key {key!r}" for key in sorted(set(data) - names)]
        if "vocab_size" not in data:
            problems.append("missing key 'vocab_size'")
        version = data.get("schema_version", SCHEMA_VERSION)
        if version != SCHEMA_VERSION:
            problems.append(f"schema_version {version!r} is not supported (this code reads {SCHEMA_VERSION})")
        kwargs: dict[str, Any] = {}
        for key, value in data.items():
            if key not in names:
                continue
            if key.endswith("_attention"):
                attention, attention_problems = _attention_from(key, value)
                problems += attention_problems
                if attention is not None:
                    kwargs[key] = attention
            else:
                kwargs[key] = value
        if problems:
            # Report the value problems too, when the rest can be checked.
            try:
                cls(**kwargs)
            except ConfigError as error:
                problems += [p for p in error.problems if p not in problems]
            except TypeError:
                pass
            raise ConfigError(problems)
        return cls(**kwargs)


def _plain(value: Any) -> Any:
    """Mappings (possibly nested) as plain dicts, so that configs compare and serialise as JSON."""
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    return value


def _attention_from(key: str, value: Any) -> tuple[AttentionConfig | None, list[str]]:
    if isinstance(value, str):
        return AttentionConfig(kind=value), []
    if not isinstance(value, Mapping):
        return None, [f"{key} must be a kind name or {{'kind': ..., 'options': {{...}}}}"]
    unknown = sorted(set(value) - {"kind", "options"})
    if unknown:
        return None, [f"{key}: unknown key(s) {unknown}"]
    options = value.get("options", {})
    if not isinstance(options, Mapping):
        return None, [f"{key}.options must be an object"]
    return AttentionConfig(kind=value.get("kind", "vanilla"), options=dict(options)), []


def _problems(c: ModelConfig) -> list[str]:
    problems: list[str] = []

    def check(ok: bool, message: str) -> None:
        if not ok:
            problems.append(message)

    for name in ("vocab_size", "d_model", "n_heads", "d_ff", "encoder_layers", "decoder_layers", "max_positions"):
        value = getattr(c, name)
        check(isinstance(value, int) and not isinstance(value, bool) and value > 0, f"{name} must be a positive integer, got {value!r}")
    for name in ("dropout", "attention_dropout", "activation_dropout"):
        value = getattr(c, name)
        check(isinstance(value, (int, float)) and 0.0 <= value < 1.0, f"{name} must be in [0, 1), got {value!r}")
    if isinstance(c.d_model, int) and isinstance(c.n_heads, int) and c.n_heads > 0:
        check(c.d_model % c.n_heads == 0, f"d_model ({c.d_model}) must be divisible by n_heads ({c.n_heads})")
    ids = {"pad_id": c.pad_id, "bos_id": c.bos_id, "eos_id": c.eos_id}
    for name, value in ids.items():
        check(isinstance(value, int) and isinstance(c.vocab_size, int) and 0 <= value < c.vocab_size,
              f"{name} must be a token id in [0, vocab_size), got {value!r}")
    check(len(set(ids.values())) == len(ids), f"pad_id, bos_id and eos_id must differ, got {ids}")
    check(isinstance(c.tie_embeddings, bool), f"tie_embeddings must be true or false, got {c.tie_embeddings!r}")
    check(isinstance(c.contextual_source_embeddings, bool),
          f"contextual_source_embeddings must be true or false, got {c.contextual_source_embeddings!r}")
    if isinstance(c.decoder_layers, int) and c.decoder_layers > 0:
        check(isinstance(c.alignment_layer, int) and -c.decoder_layers <= c.alignment_layer < c.decoder_layers,
              f"alignment_layer must index a decoder layer in [-{c.decoder_layers}, {c.decoder_layers}), got {c.alignment_layer!r}")
    for site in SITES:
        attention = c.attention(site)
        if not isinstance(attention, AttentionConfig):
            problems.append(f"{site}_attention must be an AttentionConfig")
            continue
        if attention.kind not in known_attention_kinds():
            problems.append(f"{site}_attention: unknown attention kind {attention.kind!r}; known kinds: {', '.join(known_attention_kinds())}")
            continue
        cls = attention_class(attention.kind)
        option_problems = cls.validate_options(dict(attention.options), site)
        problems += option_problems
        sized = isinstance(c.n_heads, int) and c.n_heads > 0 and isinstance(c.d_model, int) and c.d_model > 0
        if not option_problems and sized:
            problems += cls.validate_for_model(dict(attention.options), site, d_model=c.d_model, n_heads=c.n_heads)
    if not problems:
        # The optional model parts check their options and their combination with the rest
        # once the core is known to be sound (they read sizes and attention kinds).
        problems += _feature_problems(c)
    return problems


def _feature_problems(c: ModelConfig) -> list[str]:
    # Imported here: those modules read ModelConfig, and config.py must not depend on them at import.
    from model.biases.options import validate_alignment_biases
    from model.global_fertility import validate_global_fertility
    from model.phrase_representation.options import validate_phrase_representation
    from model.supervised_alignment import validate_supervised_alignment

    problems: list[str] = []
    if c.phrase_representation is not None:
        problems += validate_phrase_representation(c.phrase_representation, c)
    problems += validate_alignment_biases(c.alignment_biases, c)
    if c.global_fertility is not None:
        problems += validate_global_fertility(c.global_fertility, c)
    if c.supervised_alignment is not None:
        problems += validate_supervised_alignment(c.supervised_alignment, c)
    return problems
