"""The recurrent Markov/fertility softmax of a whole target in one GPU kernel (and its backward in one).

`model.biases.recurrence` runs the recurrence α_t = softmax(ℓ_t + Σ_o w[h, o] · x_{t}[i+o]) as a
loop over target steps in PyTorch: about 30 kernel launches a step and layer, forward and backward,
which made a recurrent-bias model's training step 6–18× the baseline's launches
(results/study_slot_costs.md) and kept study part 8 out of a 10-minute slot. The recurrence is
independent per (sentence, head), so one Triton program per (b, h) walks the target steps itself:
one launch forward, one backward, plus a few PyTorch ops for the window weights' gradient.

Same mathematics as `recurrent_probs` with `BiasedCrossAttention`'s biased step (the tests check
the forward and every gradient against it, in Triton's interpreter on the CPU), but not the same
rounding: the window sum is added offset by offset here, through a band matrix product there, so
on CUDA a full pass and incremental decoding agree to float rounding, not bit for bit.

Inputs are ℓ plus the terms that read no attention (the position bias), (B, H, T, S) fp32, the
key padding mask, and per carried signal ("previous": α_{t-1}, Markov; "coverage": Σ_{t'<t} α_{t'},
local fertility) the head's window weights (H, 2k+1).
"""
from __future__ import annotations

import functools
import logging
import os

import torch

from model.biases.features import coverage, previous_step, window

log = logging.getLogger(__name__)

# "off" keeps the PyTorch loop on CUDA too (to compare the two, or where Triton misbehaves).
ENV = "PHRASAL_BIAS_KERNEL"


@functools.lru_cache(maxsize=None)
def _kernels():
    """The two Triton kernels, compiled on first use (importing Triton costs a second)."""
    import triton
    import triton.language as tl

    @triton.jit
    def forward_kernel(logits_ptr, hidden_ptr, w_prev_ptr, w_cov_ptr, probs_ptr, cov_ptr,
                       H, T, S,
                       K_PREV: tl.constexpr, K_COV: tl.constexpr,
                       HAS_PREV: tl.constexpr, HAS_COV: tl.constexpr, BLOCK_S: tl.constexpr):
        row = tl.program_id(0)  # b * H + h
        b = row // H
        h = row % H
        i = tl.arange(0, BLOCK_S)
        inside = i < S
        hidden = tl.load(hidden_ptr + b * S + i, mask=inside, other=1)
        valid = inside & (hidden == 0)
        base = row * T * S
        c = tl.zeros([BLOCK_S], dtype=tl.float32)  # Σ_{t'<t} α_{t'} (registers)
        for t in range(0, T):
            z = tl.load(logits_ptr + base + t * S + i, mask=inside, other=0.0)
            if t > 0:
                if HAS_PREV:
                    # α_{t-1} was stored by the previous step; the barrier after that store makes
                    # every position of it visible to every thread of this program.
                    for o in tl.static_range(-K_PREV, K_PREV + 1):
                        j = i + o
                        x = tl.load(probs_ptr + base + (t - 1) * S + j, mask=inside & (j >= 0) & (j < S), other=0.0)
                        z += tl.load(w_prev_ptr + h * (2 * K_PREV + 1) + o + K_PREV) * x
                if HAS_COV:
                    for o in tl.static_range(-K_COV, K_COV + 1):
                        j = i + o
                        x = tl.load(cov_ptr + base + t * S + j, mask=inside & (j >= 0) & (j < S), other=0.0)
                        z += tl.load(w_cov_ptr + h * (2 * K_COV + 1) + o + K_COV) * x
            z = tl.where(valid, z, float("-inf"))
            top = tl.max(z, axis=0)
            top = tl.where(top == float("-inf"), 0.0, top)  # a row with no source token
            e = tl.where(valid, tl.exp(z - top), 0.0)
            total = tl.sum(e, axis=0)
            p = e / tl.where(total > 0, total, 1.0)  # a row with no source token: all zeros
            tl.store(probs_ptr + base + t * S + i, p, mask=inside)
            c += p
            if HAS_COV:
                if t + 1 < T:
                    tl.store(cov_ptr + base + (t + 1) * S + i, c, mask=inside)
            tl.debug_barrier()

    @triton.jit
    def backward_kernel(grad_ptr, probs_ptr, w_prev_ptr, w_cov_ptr, dz_ptr,
                        H, T, S,
                        K_PREV: tl.constexpr, K_COV: tl.constexpr,
                        HAS_PREV: tl.constexpr, HAS_COV: tl.constexpr, BLOCK_S: tl.constexpr):
        row = tl.program_id(0)
        h = row % H
        i = tl.arange(0, BLOCK_S)
        inside = i < S
        base = row * T * S
        from_next = tl.zeros([BLOCK_S], dtype=tl.float32)    # ∂L/∂α_t through α_{t+1}'s Markov term
        from_later = tl.zeros([BLOCK_S], dtype=tl.float32)   # ∂L/∂α_t through the coverage of every later step
        for step in range(0, T):
            t = T - 1 - step
            p = tl.load(probs_ptr + base + t * S + i, mask=inside, other=0.0)
            a = tl.load(grad_ptr + base + t * S + i, mask=inside, other=0.0) + from_next + from_later
            dz = p * (a - tl.sum(a * p, axis=0))  # the softmax's backward
            tl.store(dz_ptr + base + t * S + i, dz, mask=inside)
            tl.debug_barrier()
            if t > 0:
                # The window's transpose: position j fed z_i for i = j - o.
                if HAS_PREV:
                    d_prev = tl.zeros([BLOCK_S], dtype=tl.float32)
                    for o in tl.static_range(-K_PREV, K_PREV + 1):
                        j = i - o
                        g = tl.load(dz_ptr + base + t * S + j, mask=inside & (j >= 0) & (j < S), other=0.0)
                        d_prev += tl.load(w_prev_ptr + h * (2 * K_PREV + 1) + o + K_PREV) * g
                    from_next = d_prev
                if HAS_COV:
                    for o in tl.static_range(-K_COV, K_COV + 1):
                        j = i - o
                        g = tl.load(dz_ptr + base + t * S + j, mask=inside & (j >= 0) & (j < S), other=0.0)
                        from_later += tl.load(w_cov_ptr + h * (2 * K_COV + 1) + o + K_COV) * g

    return forward_kernel, backward_kernel


def launch(kernel, grid: tuple[int, ...], *args, **meta) -> None:
    """One kernel launch (benchmarks/training_launches.py --bias-kernel counts them here)."""
    kernel[grid](*args, **meta)


def _block(source_len: int) -> int:
    return max(16, 1 << (source_len - 1).bit_length())


def _warps(source_len: int) -> int:
    """One warp per 32 source positions, at most 4: each target step ends in a barrier across the
    program's threads, cheapest when they are few."""
    return max(1, min(4, _block(source_len) // 32))


def _weight(weight: torch.Tensor | None, device: torch.device) -> tuple[torch.Tensor, int]:
    if weight is None:
        return torch.zeros(1, device=device), 0
    return weight.float().contiguous(), (weight.shape[1] - 1) // 2


class RecurrentSoftmax(torch.autograd.Function):
    """(logits (B, H, T, S) fp32, hidden (B, S) bool, w_prev (H, 2k+1) | None, w_cov (H, 2k'+1) | None)
    -> the biased probabilities (B, H, T, S)."""

    @staticmethod
    def forward(ctx, logits, hidden, w_prev, w_cov):
        forward_kernel, _ = _kernels()
        b, h, t_len, s = logits.shape
        logits = logits.float().contiguous()
        hidden = hidden.to(torch.int8).contiguous()
        prev, k_prev = _weight(w_prev, logits.device)
        cov, k_cov = _weight(w_cov, logits.device)
        probs = torch.empty_like(logits)
        # Coverage rows are written one step ahead of their reads; row 0 (nothing attended) stays 0.
        covered = torch.zeros_like(logits) if w_cov is not None else torch.zeros(1, device=logits.device)
        launch(forward_kernel, (b * h,), logits, hidden, prev, cov, probs, covered, h, t_len, s,
               K_PREV=k_prev, K_COV=k_cov, HAS_PREV=w_prev is not None, HAS_COV=w_cov is not None,
               BLOCK_S=_block(s), num_warps=_warps(s))
        ctx.save_for_backward(probs, prev, cov)
        ctx.has = (w_prev is not None, w_cov is not None)
        ctx.windows = (k_prev, k_cov)
        return probs

    @staticmethod
    def backward(ctx, grad):
        _, backward_kernel = _kernels()
        probs, prev, cov = ctx.saved_tensors
        has_prev, has_cov = ctx.has
        k_prev, k_cov = ctx.windows
        b, h, t_len, s = probs.shape
        dz = torch.empty_like(probs)
        launch(backward_kernel, (b * h,), grad.float().contiguous(), probs, prev, cov, dz, h, t_len, s,
               K_PREV=k_prev, K_COV=k_cov, HAS_PREV=has_prev, HAS_COV=has_cov, BLOCK_S=_block(s),
               num_warps=_warps(s))
        # ∂L/∂w[h, o] = Σ_{b,t,i} ∂L/∂z_t[i] · x_t[i+o]: a few launches over the whole target.
        d_prev = torch.einsum("bhts,bhtso->ho", dz, window(previous_step(probs), k_prev)) if has_prev else None
        d_cov = torch.einsum("bhts,bhtso->ho", dz, window(coverage(probs), k_cov)) if has_cov else None
        return dz, None, d_prev, d_cov


@functools.lru_cache(maxsize=None)
def available() -> bool:
    """Triton importable and not switched off; logs once why the PyTorch loop runs instead."""
    if os.environ.get(ENV, "auto").lower() == "off":
        log.info("recurrent alignment biases: %s=off, the PyTorch step loop runs", ENV)
        return False
    try:
        import triton  # noqa: F401
    except ImportError as error:
        log.warning("recurrent alignment biases: Triton is not importable (%s); the PyTorch step loop runs "
                    "(about 30 kernel launches a target step and layer)", error)
        return False
    return True


def recurrent_softmax(logits: torch.Tensor, hidden: torch.Tensor | None, w_prev: torch.Tensor | None,
                      w_cov: torch.Tensor | None) -> torch.Tensor:
    """The biased probabilities of a whole target through the two kernels; hidden (B, S) True at padding."""
    if hidden is None:
        hidden = torch.zeros(logits.shape[0], logits.shape[3], dtype=torch.bool, device=logits.device)
    return RecurrentSoftmax.apply(logits, hidden, w_prev, w_cov)


def loop_softmax(logits: torch.Tensor, hidden: torch.Tensor | None, w_prev: torch.Tensor | None,
                 w_cov: torch.Tensor | None) -> torch.Tensor:
    """The same recurrence as PyTorch's step loop (`BiasedCrossAttention` without the kernel, the
    fertility term summed first): what the kernels are checked against."""
    from model.biases.recurrence import window_probs
    from model.biases.window_bias import window_band

    s = logits.shape[-1]
    windows = [(reads, window_band(w, s)) for reads, w in (("coverage", w_cov), ("previous", w_prev)) if w is not None]
    return window_probs(logits, None if hidden is None else hidden[:, None, None, :], windows)


@functools.lru_cache(maxsize=None)
def verified(device: torch.device) -> bool:
    """The kernels compile and agree with the loop (values and gradients) on a small random problem on
    this device: checked once per process, so that a Triton this code was not tried with falls back
    to the loop (with a log line) instead of failing or training on wrong gradients. The first
    full pass may come under no_grad or inference_mode (validation, forced alignment) or autocast:
    the check runs with gradients and in float32 whatever the caller's mode."""
    with torch.inference_mode(False), torch.enable_grad(), torch.autocast(device.type, enabled=False):
        return _check(device)


def _check(device: torch.device) -> bool:
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 2, 7, 6, generator=generator).to(device)
    hidden = torch.tensor([[False] * 6, [False] * 4 + [True] * 2, [True] * 6], device=device)
    weights = [torch.randn(2, 3, generator=generator).to(device), torch.randn(2, 5, generator=generator).to(device)]
    upstream = torch.randn(logits.shape, generator=generator).to(device)
    results = []
    try:
        for fn in (loop_softmax, recurrent_softmax):
            leaves = [logits.clone().requires_grad_()] + [w.clone().requires_grad_() for w in weights]
            probs = fn(leaves[0], hidden, leaves[1], leaves[2])
            (probs * upstream).sum().backward()
            results.append([probs.detach()] + [leaf.grad for leaf in leaves])
        for got, want in zip(*reversed(results)):
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    except Exception as error:  # noqa: BLE001  (any failure means: do not use the kernels here)
        log.warning("recurrent alignment biases: the Triton kernels failed their check on %s (%s); the PyTorch "
                    "step loop runs", device, str(error).splitlines()[0] if str(error) else type(error).__name__)
        return False
    log.info("recurrent alignment biases: one Triton kernel a pass on %s (checked against the step loop)", device)
    return True


def wanted(logits: torch.Tensor) -> bool:
    """Whether a full pass over these logits takes the kernels: on CUDA, with Triton, checked there."""
    return logits.is_cuda and available() and verified(logits.device)
