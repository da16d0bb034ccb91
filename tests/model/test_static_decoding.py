"""Static-state decoding (model/decoding/static_decoding.py) returns what the eager `generate` returns, for
every attention kind and model family, on batches padded up to a bucket, with beam 1 and 5."""
import dataclasses
import math

import pytest
import torch

from model.attention.registry import attention_class, known_attention_kinds
from model.config import AttentionConfig
from model.decoding.generate import SearchCancelled, generate
from model.decoding.options import DecodingOptions
from model.decoding.static_decoding import StaticGenerator, grown, pad_to_bucket
from model.decoding.static_buckets import Bucket
from tests.helpers import randomise_biases, tiny_model
from tests.helpers import TINY_MODEL_OPS, assert_close_for

pytestmark = pytest.mark.usefixtures("one_thread")

# 3 sentences of widths 5, 3, 2: the bucket pads them to 4 x 8 (a padding sentence, 3 padding columns).
SRC = torch.tensor([[5, 6, 7, 8, 2], [9, 10, 2, 0, 0], [11, 2, 0, 0, 0]])
STRUCTURES = {
    "homogeneous-2+2": {"structure": "homogeneous", "ngrams": [1, 2], "heads_per_ngram": [2, 2]},
    "homogeneous-1-2-3": {"structure": "homogeneous", "ngrams": [1, 2, 3], "heads_per_ngram": [2, 1, 1]},
    "heterogeneous-1-2-3": {"structure": "heterogeneous", "ngrams": [1, 2, 3]},
    "interleaved": {"structure": "interleaved"},
}
SITES = ("encoder_self", "decoder_self", "cross")
ALL_BIASES = {"position": {}, "markov": {"window": 1, "form": "parallel"}, "fertility": {"window": 1, "form": "parallel"}}
HETEROGENEOUS = AttentionConfig("queryk", {"structure": "heterogeneous", "ngrams": [1, 2, 3]})


def every_site(attention: AttentionConfig) -> dict:
    return {f"{site}_attention": attention for site in SITES}


FAMILIES: dict[str, dict] = {"vanilla": {}}
for _kind in ("convkv", "queryk"):
    for _name, _options in STRUCTURES.items():
        FAMILIES[f"{_kind}-{_name}"] = every_site(AttentionConfig(_kind, _options))
    # The decoder's self-attention alone phrasal: its n-gram window is the only phrasal state.
    FAMILIES[f"{_kind}-heterogeneous-decoder-self"] = {"decoder_self_attention": AttentionConfig(_kind, STRUCTURES["heterogeneous-1-2-3"])}
# Every other registered kind at every site where it runs with its default options.
for _kind in known_attention_kinds():
    if _kind not in ("vanilla", "convkv", "queryk"):
        FAMILIES[f"{_kind}-every-site"] = {
            f"{site}_attention": AttentionConfig(_kind, {}) for site in SITES
            if not attention_class(_kind).validate_options({}, site)
        }
FAMILIES.update({
    "phrase-representation": {"phrase_representation": {"glance": "mean"}},
    "phrase-representation-convkv-interleaved": {"phrase_representation": {"glance": "max"},
                                                 **every_site(AttentionConfig("convkv", {"structure": "interleaved"}))},
    "alignment-biases": {"alignment_biases": ALL_BIASES},
    "alignment-biases-queryk-self": {"alignment_biases": ALL_BIASES, "decoder_self_attention": HETEROGENEOUS},
    "supervised-head-added": {"supervised_alignment": {"layer": 1, "head": "added", "weight": 1.0}},
    "supervised-head-0": {"supervised_alignment": {"layer": 1, "head": 0, "weight": 1.0}},
    # Heads that read the whole target: their rows come from the forced pass after the search.
    "supervised-heads-diagonal": {"supervised_alignment": {"layer": 1, "head": "added", "weight": 1.0,
                                                           "heads": 2, "diagonal": True}},
    "supervised-head-target-context": {"supervised_alignment": {"layer": 1, "head": "added", "weight": 1.0,
                                                                "self_attention": True}},
})


def family_model(name: str, seed: int = 0):
    overrides = FAMILIES[name]
    model = tiny_model(seed=seed, **overrides)
    return randomise_biases(model, seed) if "alignment_biases" in overrides else model


def options_for(model, beam: int) -> DecodingOptions:
    phrasal = model.config.phrase_representation is not None or any(
        layer.cross_attention.phrase_sizes > 0 for layer in model.decoder_layers)
    return DecodingOptions(
        beam_size=beam, n_best=beam, max_length_offset=4, alignment="phrase" if phrasal else "token",
        return_phrase_attention=phrasal, alignment_method="supervised" if model.supervised_alignment is not None else None,
    )


# CPU BLAS kernels group their sums by the number of rows a matmul has (a Linear over 1-3 rows
# differs from the same rows among 12 by ~2e-7 here), and the eager search drops finished
# sentences while the static one keeps the bucket's rows: so values agree to float32 rounding,
# not bit for bit (up to TINY_MODEL_OPS roundings); tokens and the order of hypotheses agree exactly.
def assert_same_hypotheses(expected, got, ops: int = TINY_MODEL_OPS) -> None:
    assert len(expected) == len(got)
    for want_list, got_list in zip(expected, got):
        assert [h.tokens for h in got_list] == [h.tokens for h in want_list]
        for want, have in zip(want_list, got_list):
            # Summed log-probs of tens of nats: the tolerance scales with their magnitude.
            assert_close_for(have.score, want.score, ops=ops)
            assert_close_for(have.log_prob, want.log_prob, ops=ops)
            for field in ("attention", "final_attention", "phrase_attention", "supervised_attention"):
                a, b = getattr(want, field, None), getattr(have, field, None)
                assert (a is None) == (b is None), field
                if a is not None:
                    assert a.shape == b.shape, field
                    assert_close_for(b, a, ops=ops, msg=field)


@pytest.mark.parametrize("beam", [1, 5])
@pytest.mark.parametrize("name", list(FAMILIES))
def test_static_search_equals_eager_search(name, beam):
    model = family_model(name, seed=3)
    options = options_for(model, beam)
    expected = generate(model, SRC, options)
    assert_same_hypotheses(expected, generate(StaticGenerator(model), SRC, options))


@pytest.mark.parametrize("beam", [1, 5])
@pytest.mark.parametrize("name", list(FAMILIES))
def test_a_batch_that_fills_its_bucket_is_bit_for_bit_the_eager_search(name, beam):
    """One sentence as wide as its bucket: the eager search never changes its row count and
    nothing is padded, so the static state, its in-place writes and reorders and the fixed-shape
    search add no rounding of their own. (Padding the source does: a matmul over 8 columns of
    which 3 are zero may group its sum otherwise than one over 5.)"""
    model = family_model(name, seed=3)
    options = options_for(model, beam)
    src = torch.tensor([[5, 6, 7, 8, 9, 10, 11, 2]])  # (1, 8): the bucket (1, 8, ·) exactly
    static = StaticGenerator(model, batch_sizes=(1,))
    assert_same_hypotheses(generate(model, src, options), generate(static, src, options), ops=0)


@pytest.mark.parametrize("form", ["power", "gnmt"])
def test_static_search_ranks_with_the_eager_length_penalty(form):
    """Scores are log P / lp(|y|) with the same lp as the eager search (model/decoding/length_penalty.py)."""
    model = family_model("vanilla", seed=3)
    options = dataclasses.replace(options_for(model, 5), length_penalty=0.6, length_penalty_form=form)
    expected = generate(model, SRC, options)
    got = generate(StaticGenerator(model), SRC, options)
    assert_same_hypotheses(expected, got)
    h = got[0][0]
    lp = (len(h.tokens) + 1) ** 0.6 if form == "power" else ((5 + len(h.tokens) + 1) / 6) ** 0.6
    assert math.isclose(h.score, h.log_prob / lp, rel_tol=1e-12)


def test_a_bucket_serves_batch_after_batch():
    """The second batch in a bucket reuses the first one's buffers (what a captured graph reads)
    and gets what the eager search gives it; then the first batch again. As sentences finish,
    the search moves to smaller buckets (4 -> 2 -> 1 sentences here), which keep their buffers too."""
    model = family_model("queryk-interleaved", seed=5)
    options = options_for(model, 4)
    static = StaticGenerator(model)
    first = generate(static, SRC, options)
    assert sorted(key[0].batch for key in static.decoders) == [1, 2, 4]
    buffers = {key: {name: t.data_ptr() for name, t in d.buffers.items()} for key, d in static.decoders.items()}
    other = torch.tensor([[12, 13, 14, 15, 16, 17, 2], [18, 2, 0, 0, 0, 0, 0], [19, 20, 2, 0, 0, 0, 0]])
    assert_same_hypotheses(generate(model, other, options), generate(static, other, options))
    assert_same_hypotheses(first, generate(static, SRC, options))
    assert {key: {name: t.data_ptr() for name, t in d.buffers.items()} for key, d in static.decoders.items()} == buffers


@pytest.mark.parametrize("check_every", [1, 3, 100])
def test_checking_for_the_end_less_often_changes_nothing(check_every):
    model = family_model("vanilla", seed=4)
    options = DecodingOptions(beam_size=3, n_best=2, max_length_offset=6, alignment="token")
    assert_same_hypotheses(generate(model, SRC, options), generate(StaticGenerator(model, check_every=check_every), SRC, options))


def test_without_attention_no_rows_come_back():
    model = family_model("vanilla", seed=4)
    options = DecodingOptions(beam_size=2, n_best=2, max_length_offset=3)
    got = generate(StaticGenerator(model), SRC, options)
    assert all(h.attention is None and h.final_attention is None for nbest in got for h in nbest)
    assert_same_hypotheses(generate(model, SRC, options), got)


def test_should_stop_cancels_between_steps():
    model = family_model("vanilla")
    calls = []

    def stop_on_third_ask() -> bool:
        calls.append(1)
        return len(calls) == 3

    with pytest.raises(SearchCancelled):
        generate(StaticGenerator(model), SRC, DecodingOptions(beam_size=2, max_length_offset=10), stop_on_third_ask)
    assert len(calls) == 3


def test_padding_a_batch_to_its_bucket():
    padded = pad_to_bucket(SRC, Bucket(batch=5, source=7, target=8), pad_id=0, eos_id=2)
    assert padded.tolist() == [
        [5, 6, 7, 8, 2, 0, 0], [9, 10, 2, 0, 0, 0, 0], [11, 2, 0, 0, 0, 0, 0], [2, 0, 0, 0, 0, 0, 0], [2, 0, 0, 0, 0, 0, 0],
    ]


def test_only_caches_that_grow_by_one_row_along_dim_2_are_caches():
    assert grown(torch.zeros(2, 4, 0, 8), torch.zeros(2, 4, 1, 8))
    assert not grown(torch.zeros(2, 1, 8), torch.zeros(2, 1, 8))
    with pytest.raises(ValueError, match=r"changed shape \(2, 3\) -> \(2, 4\)"):
        grown(torch.zeros(2, 3), torch.zeros(2, 4))
    with pytest.raises(ValueError, match=r"changed shape \(2, 4, 0, 8\) -> \(2, 4, 2, 8\)"):
        grown(torch.zeros(2, 4, 0, 8), torch.zeros(2, 4, 2, 8))


def test_bad_search_options_are_refused_before_any_search():
    # The options type checks its own rules, so neither search can be handed these.
    with pytest.raises(ValueError, match=r"n_best must be in 1..beam_size \(2\), got 3"):
        DecodingOptions(beam_size=2, n_best=3)
    with pytest.raises(ValueError, match="beam_size must be an integer >= 1, got 0"):
        DecodingOptions(beam_size=0)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_runs_in_the_models_dtype(dtype):
    """The caches take the model's dtype, the search stays in float32: the eager search's tokens."""
    model = family_model("queryk-heterogeneous-1-2-3", seed=3).to(dtype)
    options = options_for(model, 4)
    static = StaticGenerator(model)
    got = generate(static, SRC, options)
    assert {t.dtype for name, t in next(iter(static.decoders.values())).buffers.items()
            if t.is_floating_point()} == {dtype}
    assert [[h.tokens for h in n] for n in got] == [[h.tokens for h in n] for n in generate(model, SRC, options)]


def test_empty_batch():
    assert generate(StaticGenerator(family_model("vanilla")), torch.zeros(0, 3, dtype=torch.long)) == []


def test_the_runner_is_eager_off_cuda():
    from model.decoding.cuda_graph_step import CudaGraphRunner, static_step_runner
    from model.decoding.static_decoding import eager_runner

    assert static_step_runner(torch.device("cpu")) is eager_runner
    assert static_step_runner(torch.device("cuda"), cuda_graphs=False) is eager_runner
    assert isinstance(static_step_runner(torch.device("cuda")), CudaGraphRunner)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a CUDA device")
@pytest.mark.parametrize("name", ["vanilla", "queryk-interleaved", "convkv-homogeneous-1-2-3", "alignment-biases",
                                  "phrase-representation", "supervised-head-added"])
def test_cuda_graph_replay_equals_eager_search(name):
    """Captured steps (first batch) and replayed ones (the batches after) give the eager search's
    hypotheses, fp32, on CUDA; a bucket's graphs are captured once."""
    from model.decoding.cuda_graph_step import CudaGraphRunner

    model = family_model(name, seed=3).cuda()
    runner = CudaGraphRunner()
    static = StaticGenerator(model, runner=runner)
    for beam in (1, 5):
        options = options_for(model, beam)
        src = SRC.cuda()
        expected = generate(model, src, options)
        for _ in range(3):  # capture, then replay twice
            # cuBLAS may choose its kernels by row count too: the same float32 reassociation bound.
            assert_same_hypotheses(expected, generate(static, src, options))
    assert all(graphs for graphs in runner.graphs.values())  # every capture succeeded


def test_warming_covers_every_target_rung_of_each_width_by_hand():
    """A bucket's target steps follow the longest source's length: with the default limits
    (ceil(1.5·L) + 10 tokens, steps = that + 1) the lengths of width 8 (2..8) reach 16 steps up to
    L = 3 (5 + 10 + 1) and 32 from L = 4; those of width 16 (9..16) 32 up to L = 14 (21 + 10 + 1)
    and 64 from L = 15 (23 + 10 + 1); those of width 32 (17..32) only 64 (37..59 steps). Warm-up
    decodes the longest length of each rung; at max_positions 128, width 64 reaches 64 steps up to
    L = 35 and 128 (capped there) from L = 36."""
    warmed = StaticGenerator(family_model("vanilla", seed=6))
    options = DecodingOptions(beam_size=2)
    assert [warmed.warm_lengths(w, options) for w in (8, 16, 32, 64)] == [[3, 8], [14, 16], [32], [35, 64]]
    # A smaller offset moves the rungs: ceil(1.5·L) + 4 + 1 steps.
    assert warmed.warm_lengths(16, DecodingOptions(max_length_offset=4)) == [16]  # 19..29 steps: all 32


def test_warming_makes_every_bucket_asked_for_and_changes_no_result():
    """`warm` decodes one made-up batch per (batch size, source width): afterwards those buckets
    (and the smaller ones their searches shrank into) hold their buffers, and a real batch decodes
    as on a fresh generator, in buffers that stay where they were."""
    model = family_model("vanilla", seed=6)
    options = options_for(model, 3)
    warmed = StaticGenerator(model)
    held = warmed.warm([1, 2, 4], [8, 16], options, torch.device("cpu"))
    buckets = {(key[0].batch, key[0].source) for key in warmed.decoders}
    assert held == len(warmed.decoders)
    assert {(b, w) for b in (1, 2, 4) for w in (8, 16)} <= buckets
    assert all(key[1:] == (3, True, False, False) for key in warmed.decoders)  # the options given
    buffers = {key: {name: t.data_ptr() for name, t in d.buffers.items()} for key, d in warmed.decoders.items()}
    assert_same_hypotheses(generate(StaticGenerator(model), SRC, options), generate(warmed, SRC, options), ops=0)
    assert {key: {name: t.data_ptr() for name, t in d.buffers.items()}
            for key, d in warmed.decoders.items() if key in buffers} == buffers
