"""A training recipe: one frozen dataclass read from JSON (recipes/*.json), validated as a whole.

Unknown keys are rejected by name; every bad value is reported at once. The model architecture is
the `model` object, handed to `ModelConfig.from_dict` with the vocabulary size and special ids
filled in from the SentencePiece model. Dropout lives there, not here.
"""
from __future__ import annotations

import copy
import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from model.decoding import defaults as decoding_defaults
from model.decoding.length_penalty import FORMS as LENGTH_PENALTY_FORMS
from model.config import ModelConfig
from model.errors import ConfigError

SPECIAL_IDS = {"pad_id": 0, "bos_id": 1, "eos_id": 2}


class RecipeError(ValueError):
    """A recipe (file, key or --set override) is invalid; `problems` lists every problem found."""

    def __init__(self, problems: Sequence[str], source: str = "recipe"):
        self.problems = list(problems)
        self.source = source
        super().__init__(f"{source}: " + "; ".join(self.problems))


@dataclass(frozen=True)
class TrainingRecipe:
    name: str = "unnamed"
    # Data: data_dir/{split}.{lang}.gz, line-parallel; relative paths are taken from the working directory.
    data_dir: str = "data/multi30k"
    train_split: str = "train"
    valid_split: str = "val"
    source_lang: str = "en"
    target_lang: str = "de"
    train_limit: int | None = None      # first N training pairs only (smoke runs)
    # More training data after train_split: [{"data_dir": "data/multi30k", "split": "train", "copies": 2}]
    # (each entry's pairs `copies` times: a small corpus is not drowned by a large one). The
    # SentencePiece model is trained on all of it; valid_split stays data_dir's.
    train_mix: list[dict[str, Any]] = field(default_factory=list)
    valid_limit: int | None = None      # first N validation pairs for the validation loss
    max_len: int = 128                  # pairs with a side longer than this many pieces are dropped
    # SentencePiece: one joint cased model over source + target training text.
    spm_vocab_size: int = 10000
    spm_model_type: str = "unigram"
    spm_character_coverage: float = 1.0
    spm_byte_fallback: bool = False
    # Model architecture (ModelConfig keys except vocab_size and the special ids).
    model: dict[str, Any] = field(default_factory=dict)
    # Bilingual symmetric training (`train-symmetric`): {"lambda": λ}, the weight of the trace bonus;
    # one model source→target and one target→source, trained together. None = one direction.
    symmetric: dict[str, Any] | None = None
    # Which parameters train: null = all; else a list of name prefixes (e.g. ["supervised_alignment."]
    # to train an added alignment head on a frozen model); every prefix must name a parameter.
    trainable: list[str] | None = None
    # Optimisation.
    max_tokens: int = 8192              # padded tokens a batch, B x max(S, T)
    # Batches per update and process (gradient accumulation): an update trains on
    # accumulate x processes batches (training/distributed.py).
    accumulate: int = 1
    max_updates: int = 8000
    lr: float = 0.005                   # peak lr, reached at the end of warm-up
    warmup: int = 2000
    betas: tuple[float, float] = (0.9, 0.98)
    adam_eps: float = 1e-8
    weight_decay: float = 0.0
    label_smoothing: float = 0.1
    clip_norm: float = 1.0              # 0 disables clipping
    seed: int = 1
    amp: str = "bf16"                   # "bf16": bf16 autocast on CUDA (never on CPU); "off"
    # Speed levers that leave the arithmetic as it is (up to float rounding): how AdamW updates the
    # parameters ("auto": one fused kernel on CUDA, torch's default elsewhere; "fused"; "foreach":
    # one multi-tensor kernel per operation), and whether the model's forward pass in training runs
    # through torch.compile (fewer, fused kernels; compiled once per batch shape family), in torch's
    # mode "default" or "reduce-overhead" (on CUDA, every forward and backward pass is then a CUDA-graph
    # replay, recorded once per batch shape: a training that launches ~900 small kernels a step is bound
    # by their launches, not by the GPU).
    optimizer_implementation: str = "auto"
    compile: bool = False
    compile_mode: str = "default"
    # Logging, validation, checkpoints, export.
    log_interval: int = 50
    val_interval: int = 1000            # updates between validations (also run at the end)
    val_every_epoch: bool = False
    val_bleu_sentences: int = 200       # first N sentences of the validation split; 0 = no BLEU
    val_beam: int = 1
    decode_max_len_a: float = decoding_defaults.MAX_LENGTH_RATIO  # decoding length limit: a * source length + b
    decode_max_len_b: int = decoding_defaults.MAX_LENGTH_OFFSET
    # How the model is decoded (validation BLEU; `phrasal-eval` reads it from the model directory's
    # manifest): score = log P / lp(|y|), lp = |y|^α ("power") or ((5+|y|)/6)^α ("gnmt", Wu et al.
    # 2016 eq. 14), α = decode_length_penalty (model/decoding/length_penalty.py). A recipe names the form its paper used.
    decode_length_penalty: float = decoding_defaults.LENGTH_PENALTY
    decode_length_penalty_form: str = decoding_defaults.LENGTH_PENALTY_FORM
    checkpoint_interval: int = 100
    keep_last: int = 10
    average_last: int = 10
    export_fp16: bool = True

    # --- construction -----------------------------------------------------------------

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str = "recipe") -> "TrainingRecipe":
        if not isinstance(data, Mapping):
            raise RecipeError([f"must be a JSON object, got {type(data).__name__}"], source)
        names = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(data) - set(names))
        if unknown:
            raise RecipeError(["unknown key(s): " + ", ".join(repr(k) for k in unknown)], source)
        kwargs = dict(copy.deepcopy(dict(data)))
        if isinstance(kwargs.get("betas"), list):
            kwargs["betas"] = tuple(kwargs["betas"])
        problems = _problems(kwargs)
        model = kwargs.get("model", {})
        if isinstance(model, Mapping):
            vocab = kwargs.get("spm_vocab_size")
            vocab = vocab if _is_int(vocab) and vocab > 0 else cls.spm_vocab_size
            try:
                cls(model=dict(model)).model_config(vocab)
            except ConfigError as error:
                problems += [f"model: {p}" for p in error.problems]
        if problems:
            raise RecipeError(problems, source)
        return cls(**kwargs)

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["betas"] = list(self.betas)
        return out

    def replace(self, **changes: Any) -> "TrainingRecipe":
        return TrainingRecipe.from_dict({**self.to_dict(), **changes})

    def model_config(self, vocab_size: int) -> ModelConfig:
        """The ModelConfig for a SentencePiece vocabulary of `vocab_size` pieces."""
        clash = sorted(set(self.model) & {"vocab_size", *SPECIAL_IDS})
        if clash:
            raise ConfigError([f"{k} is set from the SentencePiece model; remove it from the recipe" for k in clash])
        return ModelConfig.from_dict({**self.model, "vocab_size": vocab_size, **SPECIAL_IDS})


def load_recipe(path: str | Path, overrides: Sequence[str] = ()) -> TrainingRecipe:
    """Read a recipe JSON file and apply `key=value` overrides (value parsed as JSON, else a string;
    `model.KEY=value` sets one model key)."""
    path = Path(path)
    if not path.is_file():
        raise RecipeError(["file not found"], str(path))
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise RecipeError([f"not valid JSON ({error})"], str(path)) from None
    if not isinstance(data, dict):
        raise RecipeError([f"must be a JSON object, got {type(data).__name__}"], str(path))
    return TrainingRecipe.from_dict(apply_overrides(data, overrides), str(path))


def apply_overrides(data: Mapping[str, Any], overrides: Sequence[str]) -> dict[str, Any]:
    out = copy.deepcopy(dict(data))
    names = {f.name for f in dataclasses.fields(TrainingRecipe)}
    for item in overrides:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise RecipeError([f"--set {item!r} must be KEY=VALUE"], "--set")
        value = _parse_value(raw)
        if key.startswith("model."):
            sub = key[len("model."):]
            if not sub:
                raise RecipeError([f"--set {item!r} names no model key"], "--set")
            out["model"] = {**dict(out.get("model") or {}), sub: value}
        elif key not in names:
            raise RecipeError([f"unknown key(s): {key!r}"], "--set")
        else:
            out[key] = value
    return out


def _parse_value(raw: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


_INT_FIELDS = ("max_len", "spm_vocab_size", "max_tokens", "accumulate", "max_updates", "warmup", "seed", "log_interval",
               "val_interval", "val_bleu_sentences", "val_beam", "decode_max_len_b", "checkpoint_interval",
               "keep_last", "average_last")
_POSITIVE_INT = {"max_len", "spm_vocab_size", "max_tokens", "accumulate", "max_updates", "warmup", "log_interval",
                 "val_interval", "val_beam", "checkpoint_interval", "keep_last", "average_last"}
_FLOAT_FIELDS = ("spm_character_coverage", "adam_eps", "weight_decay", "label_smoothing", "clip_norm",
                 "decode_max_len_a", "decode_length_penalty")
_STR_FIELDS = ("name", "data_dir", "train_split", "valid_split", "source_lang", "target_lang")
_BOOL_FIELDS = ("spm_byte_fallback", "val_every_epoch", "export_fp16", "compile")
OPTIMIZER_IMPLEMENTATIONS = ("auto", "fused", "foreach")
COMPILE_MODES = ("default", "reduce-overhead")


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _problems(d: Mapping[str, Any]) -> list[str]:
    defaults = TrainingRecipe()
    get = lambda k: d.get(k, getattr(defaults, k))  # noqa: E731
    problems: list[str] = []
    for k in _INT_FIELDS:
        v = get(k)
        if not _is_int(v) or (k in _POSITIVE_INT and v <= 0) or v < 0:
            problems.append(f"{k} must be a {'positive' if k in _POSITIVE_INT else 'non-negative'} integer, got {v!r}")
    for k in ("train_limit", "valid_limit"):
        v = get(k)
        if v is not None and (not _is_int(v) or v <= 0):
            problems.append(f"{k} must be a positive integer or null, got {v!r}")
    for k in _FLOAT_FIELDS:
        v = get(k)
        if not _is_number(v) or v < 0:
            problems.append(f"{k} must be a non-negative number, got {v!r}")
    for k in _STR_FIELDS:
        v = get(k)
        if not isinstance(v, str) or not v:
            problems.append(f"{k} must be a non-empty string, got {v!r}")
    for k in _BOOL_FIELDS:
        if not isinstance(get(k), bool):
            problems.append(f"{k} must be true or false, got {get(k)!r}")
    if not isinstance(get("model"), Mapping):
        problems.append(f"model must be a JSON object of ModelConfig keys, got {get('model')!r}")
    betas = get("betas")
    if not (isinstance(betas, tuple) and len(betas) == 2 and all(_is_number(b) and 0 <= b < 1 for b in betas)):
        problems.append(f"betas must be two numbers in [0, 1), got {betas!r}")
    if get("spm_model_type") not in ("unigram", "bpe"):
        problems.append(f"spm_model_type must be 'unigram' or 'bpe', got {get('spm_model_type')!r}")
    if get("decode_length_penalty_form") not in LENGTH_PENALTY_FORMS:
        problems.append(f"decode_length_penalty_form must be one of {', '.join(LENGTH_PENALTY_FORMS)}, "
                        f"got {get('decode_length_penalty_form')!r}")
    if get("optimizer_implementation") not in OPTIMIZER_IMPLEMENTATIONS:
        problems.append(f"optimizer_implementation must be one of {', '.join(OPTIMIZER_IMPLEMENTATIONS)}, "
                        f"got {get('optimizer_implementation')!r}")
    if get("compile_mode") not in COMPILE_MODES:
        problems.append(f"compile_mode must be one of {', '.join(COMPILE_MODES)}, got {get('compile_mode')!r}")
    elif get("compile_mode") != "default" and get("compile") is False:
        problems.append(f"compile_mode {get('compile_mode')!r} needs compile: true")
    if get("amp") not in ("bf16", "off"):
        problems.append(f"amp must be 'bf16' or 'off', got {get('amp')!r}")
    if not _is_number(get("lr")) or get("lr") <= 0:
        problems.append(f"lr must be positive, got {get('lr')!r}")
    if _is_number(get("label_smoothing")) and not 0 <= get("label_smoothing") < 1:
        problems.append(f"label_smoothing must be in [0, 1), got {get('label_smoothing')!r}")
    if _is_number(get("spm_character_coverage")) and not 0 < get("spm_character_coverage") <= 1:
        problems.append(f"spm_character_coverage must be in (0, 1], got {get('spm_character_coverage')!r}")
    if _is_int(get("keep_last")) and _is_int(get("average_last")) and get("average_last") > get("keep_last"):
        problems.append(f"average_last ({get('average_last')}) must not exceed keep_last ({get('keep_last')})")
    if _is_int(get("max_len")) and _is_int(get("max_tokens")) and get("max_tokens") < get("max_len") + 1:
        problems.append(f"max_tokens ({get('max_tokens')}) must be at least max_len + 1 ({get('max_len') + 1})")
    problems += _symmetric_problems(get("symmetric"))
    problems += _train_mix_problems(get("train_mix"))
    trainable = get("trainable")
    if trainable is not None and not (isinstance(trainable, list) and trainable
                                      and all(isinstance(p, str) and p for p in trainable)):
        problems.append(f"trainable must be null or a non-empty list of parameter name prefixes, got {trainable!r}")
    if get("source_lang") == get("target_lang"):
        problems.append(f"source_lang and target_lang must differ, got {get('source_lang')!r} twice")
    return problems


TRAIN_MIX_KEYS = ("data_dir", "split", "copies")


def _train_mix_problems(value: Any) -> list[str]:
    if not isinstance(value, list):
        return [f"train_mix must be a list of {{\"data_dir\", \"split\", \"copies\"}} objects, got {value!r}"]
    problems = []
    for i, item in enumerate(value):
        if not isinstance(item, Mapping) or set(item) != set(TRAIN_MIX_KEYS):
            problems.append(f"train_mix[{i}] must be an object with exactly the keys {', '.join(TRAIN_MIX_KEYS)}, "
                            f"got {item!r}")
            continue
        for key in ("data_dir", "split"):
            if not isinstance(item[key], str) or not item[key]:
                problems.append(f"train_mix[{i}].{key} must be a non-empty string, got {item[key]!r}")
        if not _is_int(item["copies"]) or item["copies"] < 1:
            problems.append(f"train_mix[{i}].copies must be a positive integer, got {item['copies']!r}")
    return problems


SYMMETRIC_KEYS = ("lambda",)


def _symmetric_problems(value: Any) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, Mapping):
        return [f"symmetric must be an object like {{\"lambda\": 1.0}} or null, got {value!r}"]
    problems = []
    unknown = sorted(set(value) - set(SYMMETRIC_KEYS))
    if unknown:
        problems.append(f"symmetric: unknown key(s) {', '.join(repr(k) for k in unknown)}; known keys: "
                        + ", ".join(SYMMETRIC_KEYS))
    if "lambda" not in value:
        problems.append("symmetric: 'lambda' is required (the weight of the trace bonus, a number >= 0)")
    elif not _is_number(value["lambda"]) or not 0 <= value["lambda"] < float("inf"):
        problems.append(f"symmetric: lambda must be a number >= 0, got {value['lambda']!r}")
    return problems
