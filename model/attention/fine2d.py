"""fine2d: fine-grained (2D) attention, one softmax over source positions per head dimension.

Choi, Cho & Bengio, "Fine-Grained Attention Mechanism for Neural Machine Translation" (eq. 7-9;
the math and its Transformer-head form are in fine2d_functional.py):

    e[t, s, d] = τ (q[t, d]·k[s, d] + r[s, d]),   α = softmax_s e,   c[t, d] = Σ_s α[t, s, d] v[s, d]

    {"kind": "fine2d", "options": {"score": "product", "key_term": true, "scale": "per_dimension"}}
                                                                        the defaults
    {"kind": "fine2d", "options": {"score": "mlp"}}                     the paper's score network

- score: "product" (default, the Transformer-head form: e = τ (q[t, d]·k[s, d] + r[s, d])) or
  "mlp" (the paper's f^d, eq. 7: e[t, s, :] = W_o tanh(q[t] + k[s]), one W_o (dₕ, dₕ) per head;
  twice the activation memory of "product"; key_term and scale are then not options).
- key_term: with (default) or without the learned key-only term r (eq. 7; without it
  e = τ q[t, d]·k[s, d]).
- scale: τ. "per_dimension" (default): vanilla's rule (a sum of n unit-variance terms divided by
  √n) applied to a per-dimension logit, which sums one product (and r): τ = 1, or 1/√2 with the
  key term; a fresh layer is then about as sharp as vanilla attention. "sqrt_head_dim"
  (τ = 1/√dₕ): each single product divided as if it were a full dot product, which leaves a fresh
  layer almost uniform (the earlier form, kept for comparison). The paper's scores come from an
  MLP with no such scale; benchmarks/fine2d_temperature.py measures the spread of each.

+C, the paper's contextualisation (§4.3), is not an option of this kind: it masks the source
word embeddings that feed the encoder with a gate computed from the whole sentence (model key
`contextual_source_embeddings`, model/embedding.py). Inside this head it would cancel: a
per-sentence vector added to the keys' input moves k[s, d] and r[s, d] by the same amount at
every source position s, which the softmax over s (eq. 8) removes. Multiplying the embeddings
before the encoder has no such symmetry.

Allowed at every site; it is meant for cross-attention, since its scores take B·H·T·S·dₕ memory
(the full pass chunks them over target positions, see `CHUNK_ELEMENTS`). The weights returned
for alignments are α averaged over the dimensions (B, H, T, S), as the paper visualises them.

Decoding state, as for vanilla (every tensor batch-first): self-attention caches "k", "v" and
"r" of every step so far (N, H, t, dₕ), steps on dim 2; cross-attention projects the memory once
in `init_state` into the same names (N, H, S, dₕ).
"""
from __future__ import annotations

from typing import Any

import torch
from torch import nn

from model.attention import fine2d_functional
from model.attention.fine2d_functional import SCALES, fine2d_attention, fine2d_attention_chunked, score_scale
from model.attention.contract import AttentionModule, AttentionOut
from model.attention.functional import attention_mask, merge_heads, split_heads
from model.attention.registry import register_attention

State = dict[str, torch.Tensor]

KIND = "fine2d"
OPTIONS = ("key_term", "scale", "score")
SCORES = ("product", "mlp")
DEFAULT_SCALE = "per_dimension"


def _exporting() -> bool:
    # Tracers and torch.export would bake (or guard on) the chunk count; one unchunked call gives
    # the same numbers, and an exported decoder step has one target position anyway.
    return torch.jit.is_tracing() or torch.jit.is_scripting() or torch.compiler.is_compiling() or torch.compiler.is_exporting()


@register_attention(KIND)
class Fine2dAttention(AttentionModule):
    """Fine-grained attention (eq. 7-9) with vanilla's projections plus the key-term projection."""

    def __init__(self, d_model: int, n_heads: int, dropout: float, site: str, options: dict[str, Any]):
        super().__init__()
        self.n_heads = n_heads
        self.head_dim = d_model // n_heads
        self.site = site
        self.dropout = dropout
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        mlp = options.get("score", "product") == "mlp"
        # r[s, d]: the learned per-dimension, key-only term of the product score (eq. 7).
        self.r_proj = nn.Linear(d_model, d_model) if options.get("key_term", True) and not mlp else None
        self.out_proj = nn.Linear(d_model, d_model)
        self.scale = score_scale(options.get("scale", DEFAULT_SCALE), self.head_dim, self.r_proj is not None)  # τ, eq. 7
        # W_o of the paper's score network f^d, one (dₕ out, dₕ hidden) matrix per head (eq. 7).
        self.score_weight = nn.Parameter(torch.empty(n_heads, self.head_dim, self.head_dim)) if mlp else None
        if self.score_weight is not None:
            for head in self.score_weight.data:
                nn.init.xavier_uniform_(head)

    @staticmethod
    def validate_options(options: dict[str, Any], site: str) -> list[str]:
        where = f"{site}: attention kind {KIND!r}"
        problems = []
        unknown = sorted(set(options) - set(OPTIONS))
        if unknown:
            problems.append(f"{where}: unknown option(s) {unknown}; known options: {', '.join(OPTIONS)}")
        if "key_term" in options and not isinstance(options["key_term"], bool):
            problems.append(f"{where}: key_term must be true or false, got {options['key_term']!r}")
        scale = options.get("scale", DEFAULT_SCALE)
        if not isinstance(scale, str) or scale not in SCALES:
            problems.append(f"{where}: scale must be one of {', '.join(SCALES)}, got {scale!r}")
        score = options.get("score", "product")
        if not isinstance(score, str) or score not in SCORES:
            problems.append(f"{where}: score must be one of {', '.join(SCORES)}, got {score!r}")
        elif score == "mlp":
            problems += [f"{where}: {name} applies only to score 'product'" for name in ("key_term", "scale") if name in options]
        return problems

    # -- full pass ------------------------------------------------------------------------
    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor | None = None,
        *,
        key_padding_mask: torch.Tensor | None = None,
        causal: bool = False,
        need_weights: bool = False,
        need_phrase_attention: bool = False,
    ) -> AttentionOut:
        """x (B, T, D) queries; memory (B, S, D) keys/values for cross-attention, else x itself.

        Returns the output (B, T, D) and, when asked, α averaged over dimensions (B, H, T, S).
        """
        q = split_heads(self.q_proj(x), self.n_heads)  # (B, H, T, dh)
        keys = self._keys(x if memory is None else memory)
        mask = attention_mask(key_padding_mask, q.shape[2], keys["k"].shape[2], causal, q.device)
        dropout = self.dropout if self.training else 0.0
        args = (q, keys["k"], keys["v"], keys.get("r"), mask, dropout, self.training, need_weights or need_phrase_attention)
        if _exporting():
            context, probs = fine2d_attention(*args, scale=self.scale, score_weight=self.score_weight)
        else:
            context, probs = fine2d_attention_chunked(
                *args, budget=fine2d_functional.CHUNK_ELEMENTS, scale=self.scale, score_weight=self.score_weight
            )
        return AttentionOut(self.out_proj(merge_heads(context)), probs)

    # -- incremental decoding -------------------------------------------------------------
    def init_state(self, memory: torch.Tensor | None, batch_size: int, device: torch.device, dtype: torch.dtype) -> State:
        """Cross-attention: the projected memory; self-attention: empty caches (N, H, 0, dh)."""
        if self.site == "cross":
            assert memory is not None
            return self._keys(memory)
        empty = torch.zeros(batch_size, self.n_heads, 0, self.head_dim, device=device, dtype=dtype)  # (N, H, 0, dh)
        return {name: empty.clone() for name in self._state_names()}

    def sentence_state(self) -> frozenset[str]:
        return frozenset(self._state_names()) if self.site == "cross" else frozenset()

    def step(
        self,
        x: torch.Tensor,
        state: State,
        *,
        key_padding_mask: torch.Tensor | None = None,
        need_weights: bool = False,
        need_phrase_attention: bool = False,
    ) -> AttentionOut:
        """One decoding step: x (N, 1, D) -> output (N, 1, D), α averaged (N, H, 1, S), new state.

        One target position: never chunked, no Python branch on tensor sizes (exported as traced).
        """
        q = split_heads(self.q_proj(x), self.n_heads)  # (N, H, 1, dh)
        if self.site == "cross":
            new_state = state
        else:
            new_state = {
                name: torch.cat([state[name], t], dim=2)  # (N, H, t+1, dh)
                for name, t in self._keys(x).items()
            }
        mask = attention_mask(key_padding_mask, 1, new_state["k"].shape[2], False, q.device)
        dropout = self.dropout if self.training else 0.0
        context, probs = fine2d_attention(
            q, new_state["k"], new_state["v"], new_state.get("r"), mask, dropout, self.training,
            need_weights or need_phrase_attention, self.scale, self.score_weight,
        )  # (N, H, 1, dh), (N, H, 1, S)
        return AttentionOut(self.out_proj(merge_heads(context)), probs, state=new_state)

    # -- shared ---------------------------------------------------------------------------
    def _state_names(self) -> tuple[str, ...]:
        return ("k", "v") if self.r_proj is None else ("k", "v", "r")

    def _keys(self, source: torch.Tensor) -> State:
        """source (B, S, D) -> {"k", "v"[, "r"]} each (B, H, S, dh)."""
        keys = {
            "k": split_heads(self.k_proj(source), self.n_heads),  # (B, H, S, dh)
            "v": split_heads(self.v_proj(source), self.n_heads),  # (B, H, S, dh)
        }
        if self.r_proj is not None:
            keys["r"] = split_heads(self.r_proj(source), self.n_heads)  # (B, H, S, dh)
        return keys
