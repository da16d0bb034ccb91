"""The PyTorch backend: our beam search (eager, C kernels on the CPU, static state with CUDA graphs on
CUDA), alignments from cross-attention."""
from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path

import torch

from model.alignments.word_alignment import TokenAlignment, token_alignment
from model.model_dir import LoadedModel, load_model_dir
from model.attention.kernels import avoid_per_shape_attention_plans
from model.cpu_allocator import retain_freed_memory
from model.decoding.beam_search import Hypothesis
from model.decoding.cuda_graph_step import static_step_runner
from model.decoding.finished_alignment import needs_forced_pass
from model.decoding.generate import SearchCancelled, generate, pad_sources
from model.decoding.options import METHOD_ROWS, DecodingOptions
from model.decoding.kernel_backend import EAGER, KERNELS, KernelBackend, decoder_for, kernel_decoding_problem
from model.decoding.static_buckets import BATCH_SIZES, SOURCE_WIDTHS
from model.decoding.static_decoding import StaticGenerator, StaticStateUnsupported, eager_runner
from model.layers import has_phrase_attention
from model.transformer import Transformer
from service.runtime.base import BatchCancelled, Translation, TranslationRuntime
from service.runtime.text_codec import translate_texts

log = logging.getLogger("service.runtime.torch")


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("device 'cuda' was asked for but torch sees no CUDA device")
    device = torch.device(name)
    avoid_per_shape_attention_plans(device)
    return device


# Devices on which static decoding is measured at least as fast as the eager search: what
# STATIC_DECODING=auto takes. CUDA, its steps replayed as CUDA graphs: an outside run on an H100
# (issue 30; fp16, beam 5, benchmarks/static_decode_speed.py --device cuda) measured 84.6 against
# 21-22 sentences/s at batch 1 and 2,829 against 989-1,046 at batch 128, identical hypotheses. Not
# the CPU (results/static_decode_cpu.md), where the C kernels decode.
STATIC_BY_DEFAULT: frozenset[str] = frozenset({"cuda"})
# Source widths (pieces, EOS included) whose buckets warm-up decodes once with static decoding on.
WARM_SOURCE_WIDTH = 64


def use_static_decoding(setting: str, device: torch.device) -> bool:
    """STATIC_DECODING ("auto", "on", "off") for a device."""
    return setting == "on" or (setting == "auto" and device.type in STATIC_BY_DEFAULT)


def is_phrasal(model: Transformer) -> bool:
    """Whether the model is phrasal: its alignment layer attends to source phrases (n-grams or chunks) itself."""
    layer = model.decoder_layers[model.config.alignment_layer_index]
    return has_phrase_attention(layer.cross_attention) or model.config.phrase_representation is not None


class TorchRuntime(TranslationRuntime):
    backend = "torch"

    def __init__(self, loaded: LoadedModel, device: torch.device, model: Transformer | None = None,
                 precision: str | None = None, static_decoding: bool = False,
                 decoding: DecodingOptions = DecodingOptions()):
        """`model`: what decodes instead of the loaded model in its serving precision (the int8
        copy of `cpu_model`); `precision` names it for logs; `decoding`: the service's options for a
        request that sets none (Settings.decoding), which warm-up prepares for."""
        self.decoding = decoding
        self.loaded = loaded
        self.tokenizer = loaded.tokenizer
        self.device = device
        self.source_lang = loaded.source_lang
        self.target_lang = loaded.target_lang
        # fp16 on GPU halves memory traffic; CPU kernels are fastest (and exact) in fp32.
        if model is None:
            model = loaded.model.to(device=device, dtype=torch.float16 if device.type == "cuda" else torch.float32)
        self.model = model
        # Only the serving copy stays: an int8 runtime holding the float32 weights too took more
        # memory than float32 alone.
        self.loaded = replace(loaded, model=model)
        self.precision = precision or ("float16" if device.type == "cuda" else "float32")
        # Source pieces + EOS must fit the positions (the last one is kept for the target's EOS).
        self.max_source_tokens = loaded.config.max_positions - 2
        # Phrase maps come from the model's own phrase attention when it has one.
        self.is_phrasal = is_phrasal(self.model)
        has_head = self.model.supervised_alignment is not None
        self.alignment_methods = ("attention", "shift", "supervised") if has_head else ("attention", "shift")
        self.default_alignment_method = "supervised" if has_head else "attention"
        # Preallocated state per bucket, kept for the runtime's life (CUDA graphs read it).
        self.static = StaticGenerator(self.model, static_step_runner(device)) if static_decoding else None
        self.link_threshold = self.model.supervised_alignment.link_threshold if has_head else 0.0
        # The C-kernel backend over `model` (`kernel_backend`), for the searches it can run;
        # load_runtime sets it once the model's verification record has been read.
        self.kernels: KernelBackend | None = None

    @property
    def step_backend(self) -> str:
        """The step backend the searches run on where they can: KERNELS or EAGER."""
        return KERNELS if self.kernels is not None else EAGER

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return [len(ids) for ids in self.loaded.tokenizer.encode_batch(list(texts))]

    def warm_options(self) -> list[DecodingOptions]:
        """The requests warm-up prepares static decoding for: the default one (the service's
        decoding options, `decoding`), and the same with the word alignment that placeholders,
        markup and glossary terms make a request decode with (service/protected_translation.py),
        by this model's default method. Each keeps other rows, so each has step graphs of its own
        (StaticGenerator keys its decoders by them)."""
        default = self.decoding
        return [default, replace(default, alignment="token", alignment_method=self.default_alignment_method)]

    def warmup(self) -> None:
        super().warmup()
        if self.static is not None and self.static.runner is not eager_runner:
            # Steps captured per bucket (CUDA graphs): the buckets of `warm_options` for
            # batches up to the batcher's default 64 texts and sources up to 64 pieces, most of what
            # traffic meets, are captured now rather than under load.
            started = time.perf_counter()
            widths = [width for width in SOURCE_WIDTHS if width <= WARM_SOURCE_WIDTH]
            try:
                for options in self.warm_options():
                    # As translate_texts hands them to the search.
                    held = self.static.warm(BATCH_SIZES, widths, options.every_finished(), self.device)
            except StaticStateUnsupported as problem:
                self._decode_eagerly(problem)
                return
            log.info("static decoding for %s-%s: %d buckets warmed in %.1f s", self.source_lang, self.target_lang,
                     held, time.perf_counter() - started)

    def memory_bytes(self) -> int | None:
        return int(torch.cuda.memory_reserved(self.device)) if self.device.type == "cuda" else None

    def translate(self, texts: Sequence[str], options: DecodingOptions) -> list[list[Translation]]:
        return translate_texts(
            self.loaded.tokenizer, texts, options, self.max_source_tokens, self._generate, self.is_phrasal,
            self.link_threshold,
        )

    @torch.inference_mode()
    def score(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        """Each target's log-probability given its source: one teacher-forced pass over the batch."""
        if not pairs:
            return []
        tokenizer, c = self.loaded.tokenizer, self.model.config
        sources = tokenizer.encode_batch([source for source, _ in pairs])
        targets = tokenizer.encode_batch([target for _, target in pairs])
        src = pad_sources([ids[: self.max_source_tokens] + [c.eos_id] for ids in sources], c.pad_id).to(self.device)
        gold = pad_sources([ids[: c.max_positions - 1] + [c.eos_id] for ids in targets], c.pad_id).to(self.device)
        tgt_in = torch.cat([torch.full_like(gold[:, :1], c.bos_id), gold[:, :-1]], dim=1)
        log_probs = torch.log_softmax(self.model(src, tgt_in).logits.float(), dim=-1)
        picked = log_probs.gather(2, gold.unsqueeze(2)).squeeze(2).masked_fill(gold.eq(c.pad_id), 0.0)
        return [float(v) for v in picked.sum(dim=1).cpu()]

    @torch.inference_mode()
    def force_align(self, pairs: Sequence[tuple[str, str]], method: str) -> list[TokenAlignment]:
        """Each target forced through the model: rows by `method` as for search (`METHOD_ROWS`)."""
        tokenizer, c = self.loaded.tokenizer, self.model.config
        rows = METHOD_ROWS[method]
        supervised = rows.name == "supervised_attention"
        out: list[TokenAlignment] = []
        for source_text, target_text in pairs:
            source_ids, source_pieces, source_spans = tokenizer.encode_with_offsets(source_text)
            target_ids, target_pieces, target_spans = tokenizer.encode_with_offsets(target_text)
            src = torch.tensor([[*source_ids, c.eos_id]], device=self.device)  # (1, S+1)
            tgt_in = torch.tensor([[c.bos_id, *target_ids]], device=self.device)  # (1, T+1)
            result = self.model(src, tgt_in, need_attention=True)
            n_t, n_s = len(target_ids), len(source_ids)
            steps = getattr(result, rows.name)[0]  # (T + 1, S + 1): one row per step, the EOS step's last
            out.append(token_alignment(
                source_text=source_text, source_pieces=source_pieces, source_spans=source_spans,
                target_text=target_text, target_pieces=target_pieces, target_spans=target_spans,
                attention=steps[rows.offset: rows.offset + n_t, :n_s].float().cpu(), symmetric=supervised,
                link_threshold=self.link_threshold if supervised else 0.0))
        return out

    def translate_until(
        self, texts: Sequence[str], options: DecodingOptions, cancelled: Callable[[], bool]
    ) -> list[list[Translation]]:
        """Stops between decoding steps once ``cancelled()`` (``BatchCancelled``)."""
        generate_until = partial(self._generate, should_stop=cancelled)
        try:
            return translate_texts(
                self.loaded.tokenizer, texts, options, self.max_source_tokens, generate_until, self.is_phrasal,
                self.link_threshold,
            )
        except SearchCancelled:
            raise BatchCancelled() from None

    def search_backend(self, search: DecodingOptions) -> StaticGenerator | KernelBackend | Transformer:
        """What decodes a batch with these options: the static search where it is on, else the C
        kernels where they can give what is asked, else the eager model."""
        if self.static is not None:
            return self.static
        # The kernels give token attention only: phrase tables, and supervised rows read at each
        # step, come from the eager step; a head that reads the finished target is run after the
        # search on either (model/decoding/finished_alignment.py).
        step_rows = search.return_supervised_attention and not needs_forced_pass(self.model)
        if self.kernels is not None and not (search.return_phrase_attention or step_rows):
            return self.kernels
        return self.model

    def _generate(
        self, source_ids: list[list[int]], search: DecodingOptions, should_stop: Callable[[], bool] | None = None
    ) -> list[list[Hypothesis]]:
        tokenizer = self.loaded.tokenizer
        src = pad_sources([ids + [tokenizer.eos_id] for ids in source_ids], tokenizer.pad_id, self.device)
        backend = self.search_backend(search)
        try:
            return generate(backend, src, search, should_stop)
        except StaticStateUnsupported as problem:
            # Found on the first batch, before any hypothesis: the eager search from now on.
            self._decode_eagerly(problem)
            return generate(self.search_backend(search), src, search, should_stop)

    def _decode_eagerly(self, problem: StaticStateUnsupported) -> None:
        log.warning("static decoding cannot serve %s-%s, decoding eagerly from now on: %s",
                    self.source_lang, self.target_lang, problem)
        self.static = None


def cpu_model(path, loaded: LoadedModel, device: torch.device, quantization: str,
              cpu_kernels: str = "auto") -> tuple[Transformer | None, str, str | None]:
    """The model to serve for ``settings.cpu_quantization``: (the int8 copy, "int8", None) when
    int8 was asked for ("int8", or "auto"), runs on the CPU and the model directory's verification
    record says it passed for these weights and for the decoder this process would run it on (the
    kernels where they can decode it and ``cpu_kernels`` is "auto", export/int8_check.py);
    otherwise (None, the default precision, why not). "auto" falls back without a why: float32 is
    then what it asked for, as float16 is on CUDA (the reason still goes to the log, at info)."""
    default = "float16" if device.type == "cuda" else "float32"
    if quantization == "none" or (quantization == "auto" and device.type != "cpu"):
        return None, default, None
    if device.type != "cpu":
        return None, default, f"cpu_quantization={quantization} applies to the CPU only; serving {default} on {device}"
    from export.int8_check import RECORD_FILE, record_problem  # the verification record's reader
    from model.quantization import quantize_int8

    if quantization == "auto" and not (Path(path) / RECORD_FILE).is_file():
        # Most models never had int8 checked: no copy made to learn that.
        log.info("serving %s in %s: no %s", path, default, RECORD_FILE)
        return None, default, None
    quantised = quantize_int8(loaded.model)
    problem = record_problem(path, loaded, decoder_for(quantised) if cpu_kernels == "auto" else EAGER)
    if problem is not None:
        why = f"int8 not verified for {path}, serving {default}: {problem}"
        if quantization == "auto":
            log.info(why)
            return None, default, None
        return None, default, why
    return quantised, "int8", None


def kernel_backend(path, loaded: LoadedModel, model: Transformer, precision: str, device: torch.device,
                   cpu_kernels: str) -> tuple[KernelBackend | None, str | None]:
    """The C-kernel backend to decode `model` with for ``settings.cpu_kernels``, or (None, why not)."""
    if cpu_kernels == "off" or device.type != "cpu":
        return None, None
    problem = kernel_decoding_problem(model)
    if problem is None and precision == "float32":
        from export.kernels_check import record_problem  # the verification record's reader

        problem = record_problem(path, loaded)
    if problem is not None:
        return None, f"decoding {path} eagerly: {problem}"
    # int8 got here only with a record made on the kernels (cpu_model).
    return KernelBackend(model), None


def load_runtime(path: Path, device: str = "auto", static_decoding: str = "auto",
                 cpu_quantization: str = "auto", cpu_kernels: str = "auto",
                 decoding: DecodingOptions = DecodingOptions()) -> TorchRuntime:
    resolved = resolve_device(device)
    if resolved.type == "cpu" and not retain_freed_memory():
        log.info("not glibc: the CPU decoder's freed memory goes back to the system at every step")
    loaded = load_model_dir(path, device="cpu")
    model, precision, refused = cpu_model(path, loaded, resolved, cpu_quantization, cpu_kernels)
    if refused:
        log.warning(refused)
    runtime = TorchRuntime(loaded, resolved, model, precision, use_static_decoding(static_decoding, resolved), decoding)
    kernels, eager_why = kernel_backend(path, loaded, runtime.model, runtime.precision, resolved, cpu_kernels)
    if eager_why:
        log.warning(eager_why)
    runtime.kernels = kernels
    log.info("loaded %s (%s-%s) on %s in %s, %s step backend", path, loaded.source_lang, loaded.target_lang, resolved,
             runtime.precision, runtime.step_backend)
    return runtime
