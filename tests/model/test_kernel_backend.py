"""model/decoding/kernel_backend.py: the kernel backend's steps equal the eager Transformer's up to
float rounding through reorders and sentences leaving the batch, and its searches give the
eager searches' hypotheses, on a tiny model and on the bundled one."""
from __future__ import annotations

import pytest
import torch

from model.config import AttentionConfig
from model.decoding.generate import TransformerBackend, generate, source_batch
from model.decoding.options import DecodingOptions
from model.decoding.kernel_backend import KernelBackend, kernel_decoding_problem
from model.model_dir import load_model_dir
from tests.bundled.expectations import MODEL_DIR
from tests.conftest import read_lines
from tests.helpers import TINY_MODEL_OPS, assert_close_for, float_linear_outputs_in_stated_order, tiny_model

pytestmark = pytest.mark.usefixtures("one_thread")


def assert_steps_agree(model, src: torch.Tensor, beam: int, steps: int, generator: torch.Generator) -> None:
    """Run both backends `steps` steps on the same tokens, reordering (and dropping rows, as
    finished sentences do) between steps: log-probs and attention equal up to the model's widest
    reduction (d_ff terms) summed in another order (tests/helpers.py, assert_close_for)."""
    eager, kernels = TransformerBackend(model), KernelBackend(model, ranks_logits=False)
    e_state, k_state = eager.encode(src).expand(beam), kernels.encode(src).expand(beam)
    tokens = torch.full((src.shape[0] * beam,), model.config.bos_id)
    for step in range(steps):
        e_out, k_out = eager.step(tokens, e_state), kernels.step(tokens, k_state)
        assert_close_for(k_out.log_probs, e_out.log_probs, ops=model.config.d_ff, msg=f"step {step}")
        assert_close_for(k_out.attention, e_out.attention, ops=model.config.d_ff, msg=f"step {step}")
        rows = e_out.log_probs.shape[0]
        # Beam-search-like: parents within each sentence; at step 2 the first sentence leaves.
        groups = torch.arange(rows // beam)[1:] if step == 2 else torch.arange(rows // beam)
        index = (groups.unsqueeze(1) * beam + torch.randint(0, beam, (len(groups), beam), generator=generator)).view(-1)
        tokens = e_out.log_probs.argmax(dim=1)[index]
        e_state, k_state = e_out.state.reorder(index), k_out.state.reorder(index)


def test_tiny_model_steps_equal_the_eager_steps():
    model = tiny_model(3)
    src = torch.tensor([[5, 6, 7, 8, 2], [9, 10, 2, 0, 0], [11, 12, 13, 2, 0]])
    assert_steps_agree(model, src, beam=3, steps=6, generator=torch.Generator().manual_seed(0))


@pytest.fixture(scope="module")
def bundled():
    return load_model_dir(MODEL_DIR)


def test_bundled_model_steps_equal_the_eager_steps(bundled):
    src = source_batch(bundled.tokenizer, read_lines("test_2016_flickr", "en", 6))
    assert_steps_agree(bundled.model, src, beam=5, steps=8, generator=torch.Generator().manual_seed(1))


def test_bundled_searches_give_the_eager_hypotheses(bundled):
    src = source_batch(bundled.tokenizer, read_lines("test_2016_flickr", "en", 48))
    options = DecodingOptions(n_best=2, alignment="token")
    eager = generate(bundled.model, src, options)
    for backend in (KernelBackend(bundled.model), KernelBackend(bundled.model, ranks_logits=False)):
        got = generate(backend, src, options)
        assert [[h.tokens for h in nbest] for nbest in got] == [[h.tokens for h in nbest] for nbest in eager]
        for nbest, want in zip(got, eager):
            for h, w in zip(nbest, want):
                ops = bundled.model.config.d_ff
                assert_close_for(h.score, w.score, ops=ops)
                assert_close_for(h.attention, w.attention, ops=ops)
                assert_close_for(h.final_attention, w.final_attention, ops=ops)


def test_a_search_at_its_length_limit_ends_every_hypothesis():
    model = tiny_model(4)
    src = torch.tensor([[5, 6, 7, 2], [8, 2, 0, 0]])
    options = DecodingOptions(max_length_ratio=0.0, max_length_offset=2, n_best=3)
    want = generate(model, src, options)
    got = generate(KernelBackend(model), src, options)
    assert [[h.tokens for h in n] for n in got] == [[h.tokens for h in n] for n in want]
    assert all(len(h.tokens) <= 2 for n in got for h in n)


@pytest.mark.parametrize("overrides, problem", [
    (dict(cross_attention=AttentionConfig("convkv", {"structure": "heterogeneous", "ngrams": [1, 2, 3]})),
     "decoder layer 0's cross-attention is convkv; the kernels run vanilla attention only"),
    (dict(alignment_biases={"position": {}}),
     "decoder layer 0's cross-attention is vanilla with alignment biases; the kernels run vanilla attention only"),
    # beyond decoding.c's MAX_KEYS and MAX_HEAD_DIM (model.cpu_kernels): eager, not an error mid-search
    (dict(max_positions=4097), "max_positions 4097 exceeds the kernels' 4096 keys an attention row"),
    (dict(d_model=1028, n_heads=2), "heads of 514 dimensions exceed the kernels' 512"),
])
def test_other_families_stay_eager_and_say_why(overrides, problem):
    model = tiny_model(0, **overrides)
    assert kernel_decoding_problem(model) == problem
    with pytest.raises(ValueError, match=problem):
        KernelBackend(model)


def test_phrase_attention_is_refused_by_the_search():
    model = tiny_model(0)
    src = torch.tensor([[5, 6, 2]])
    with pytest.raises(ValueError, match="this export returns no phrase attention"):
        generate(KernelBackend(model), src, DecodingOptions(alignment="phrase", return_phrase_attention=True))


def test_fused_projections_give_the_separate_ones():
    from model.decoding.kernel_backend import bare_linear, fused_linear
    from model.quantization import quantize_int8

    model = tiny_model(5)
    x = torch.randn(9, model.config.d_model)
    for source in (model, quantize_int8(model)):
        site = source.decoder_layers[1].self_attention
        parts = [site.q_proj, site.k_proj, site.v_proj]
        with torch.inference_mode():
            want = torch.cat([part(x) for part in parts], dim=1)
            got = bare_linear(fused_linear(parts))(x)
            if source is model:
                assert_close_for(got, want, ops=model.config.d_model)  # one dot product per output
            else:  # int8: the same integers and scales, per output channel: bit for bit
                assert torch.equal(got, want)
            assert torch.equal(bare_linear(site.out_proj)(x), site.out_proj(x))


def test_bare_int8_linear_is_the_module_bit_for_bit_with_and_without_relu():
    import torch.nn.functional as F

    from model.decoding.kernel_backend import bare_linear
    from model.quantization import quantize_int8

    model = quantize_int8(tiny_model(7))
    up = model.decoder_layers[0].ffn.up
    x = torch.randn(11, model.config.d_model) * 3
    with torch.inference_mode():
        assert torch.equal(bare_linear(up)(x), up(x))
        assert torch.equal(bare_linear(up, relu=True)(x), F.relu(up(x)))
        assert bool(up(x).lt(0).any())  # the ReLU had something to do


def test_one_sentence_searches_like_many():
    # One sentence: the first step's per-sentence rows are a strided view of one element.
    model = tiny_model(6)
    src = torch.tensor([[5, 6, 7, 8, 2]])
    options = DecodingOptions(beam_size=2, n_best=2)
    want = generate(model, src, options)
    got = generate(KernelBackend(model), src, options)
    assert [[h.tokens for h in n] for n in got] == [[h.tokens for h in n] for n in want]


def test_the_kernel_encoder_gives_the_models_memory():
    from model.quantization import quantize_int8

    model = tiny_model(7)
    src = torch.tensor([[5, 6, 7, 8, 2], [9, 10, 2, 0, 0]])
    for source, tolerance in ((model, 1e-5), (quantize_int8(model), 1e-4)):
        backend = KernelBackend(source)
        assert backend.encoder_linears is not None
        with torch.inference_mode():
            want, got = source.encode(src), backend._encode(src)
        assert torch.equal(got.pad_mask, want.pad_mask)
        real = ~want.pad_mask  # padded positions are never read
        torch.testing.assert_close(got.states[real], want.states[real], atol=tolerance, rtol=tolerance)
    phrasal_encoder = tiny_model(0, encoder_self_attention=AttentionConfig("queryk", {"structure": "heterogeneous",
                                                                                      "ngrams": [1, 2, 3]}))
    assert KernelBackend(phrasal_encoder).encoder_linears is None  # model.encode, the decoder still on the kernels


def test_a_head_that_reads_the_finished_target_runs_after_a_kernel_search():
    # The served En-De model's head (models/en-de-align2) reads the whole target: its rows come
    # from one forced pass after the search, which the kernel backend's model runs too.
    model = tiny_model(8, supervised_alignment={"layer": 0, "head": "added", "weight": 1.0, "heads": 2,
                                                "self_attention": True, "diagonal": True})
    src = torch.tensor([[5, 6, 7, 8, 2], [9, 10, 2, 0, 0]])
    options = DecodingOptions(beam_size=3, n_best=2, alignment="token", alignment_method="supervised")
    want = generate(model, src, options)
    got = generate(KernelBackend(model), src, options)
    for nbest, expected in zip(got, want):
        assert [h.tokens for h in nbest] == [h.tokens for h in expected]
        for h, w in zip(nbest, expected):
            assert_close_for(h.supervised_attention, w.supervised_attention, ops=TINY_MODEL_OPS)


def _ops_layers(backend, tokens, sentence, table, state):
    """The decoder step as the checked `model.cpu_kernels.ops` calls compute it: what the
    backend's direct kernel calls must give bit for bit (the same kernels on the same inputs)."""
    from model.cpu_kernels import ops

    model, config = backend.model, backend.config
    t, heads, d = state.step, config.n_heads, config.d_model
    layers = model.decoder_layers

    def add_norm(x, y, norm):
        return ops.add_layer_norm(x, y, norm.weight, norm.bias, norm.eps)

    x, h = add_norm(model.target_embedding(tokens.unsqueeze(1), t).squeeze(1), None, layers[0].self_norm)
    attention = None
    for index, (layer, linear) in enumerate(zip(layers, backend.linears)):
        qkv = linear.qkv(h)
        cache = state.caches[index]
        cache.append(t, qkv, qkv[:, d:].data_ptr(), qkv[:, 2 * d:].data_ptr())
        context = ops.self_attention(qkv[:, :d], cache.k_columns, cache.v_columns, qkv.stride(0), table, heads)
        x, h = add_norm(x, linear.self_out(context), layer.cross_norm)
        aligned = index == config.alignment_layer_index
        context, layer_attention = ops.cross_attention(linear.cross_q(h), state.memory_k[index], state.memory_v[index],
                                                       sentence, state.keep, heads, aligned)
        if aligned:
            attention = layer_attention
        x, h = add_norm(x, linear.cross_out(context), layer.ffn_norm)
        after = layers[index + 1].self_norm if index + 1 < len(layers) else model.decoder_norm
        x, h = add_norm(x, linear.down(linear.up_relu(h)), after)
    return backend.output(h).float(), attention


@pytest.mark.parametrize("int8", [False, True])
def test_direct_kernel_calls_equal_the_checked_ops_bit_for_bit(int8):
    from dataclasses import replace

    from model.quantization import quantize_int8

    model = tiny_model(8)
    backend = KernelBackend(quantize_int8(model) if int8 else model)
    if not int8:  # float32's fused step sums in another order (test_fused_float32_steps_equal_the_per_layer_steps)
        backend._fused_step = None
    src = torch.tensor([[5, 6, 7, 8, 2], [9, 10, 2, 0, 0]])
    ours, theirs = backend.encode(src).expand(3), backend.encode(src).expand(3)
    generator = torch.Generator().manual_seed(0)
    tokens = torch.randint(4, model.config.vocab_size, (6,), generator=generator)
    for step in range(4):
        rows = torch.arange(tokens.shape[0], dtype=torch.int32)
        table = torch.cat([ours.table, rows.unsqueeze(1)], dim=1)
        with torch.inference_mode():
            logits, attention = backend._layers(tokens, ours.sentence, table, ours)
            want_logits, want_attention = _ops_layers(backend, tokens, theirs.sentence, table, theirs)
        assert torch.equal(logits, want_logits), f"step {step}"
        assert torch.equal(attention, want_attention), f"step {step}"
        # Reorder as a search does; at step 2 the second sentence leaves.
        if tokens.shape[0] == 3:
            index = torch.tensor([2, 0, 0])
        else:
            index = torch.tensor([0, 0, 2, 4, 3, 3]) if step != 2 else torch.tensor([1, 1, 0])
        ours = replace(ours, step=step + 1, table=table).reorder(index)
        theirs = replace(theirs, step=step + 1, table=table).reorder(index)
        tokens = logits.argmax(dim=1)[index]


def test_a_kernel_search_chooses_in_the_kernels_select():
    # The search takes the ranking decoder's own select (model/decoding/beam_search.py `choose`) at
    # every step; its equality with selection.select is tests/model/test_selection.py's.
    steps, chosen = [], []

    class Watched(KernelBackend):
        def step(self, tokens, state, need_phrase_attention=False):
            steps.append(tokens.shape[0])
            return super().step(tokens, state, need_phrase_attention)

        def select(self, values, index, vocab, eos_id, beam):
            chosen.append(values.shape[0] * beam)
            return super().select(values, index, vocab, eos_id, beam)

    src = torch.tensor([[5, 6, 7, 8, 2], [9, 10, 2, 0, 0], [11, 12, 13, 2, 0]])
    generate(Watched(tiny_model(3)), src, DecodingOptions(beam_size=3))
    assert chosen == steps and len(steps) > 1


def test_fused_float32_steps_equal_the_per_layer_steps():
    # The float32 fused step (model/decoding/kernel_backend.py, FusedStep) computes its linear layers
    # in decoding.c's float_linear: up to the model's widest reduction summed in another order.
    model = tiny_model(8)
    fused, per_layer = KernelBackend(model, ranks_logits=False), KernelBackend(model, ranks_logits=False)
    per_layer._fused_step = None
    assert fused._fused_step is not None and not fused._fused_step.int8
    src = torch.tensor([[5, 6, 7, 8, 2], [9, 10, 2, 0, 0], [11, 12, 13, 2, 0]])
    a, b = fused.encode(src).expand(3), per_layer.encode(src).expand(3)
    tokens = torch.full((9,), model.config.bos_id)
    for step in range(5):
        out_a, out_b = fused.step(tokens, a), per_layer.step(tokens, b)
        assert_close_for(out_a.log_probs, out_b.log_probs, ops=model.config.d_ff, msg=f"step {step}")
        assert_close_for(out_a.attention, out_b.attention, ops=model.config.d_ff, msg=f"step {step}")
        index = torch.tensor([0, 0, 1, 3, 5, 4, 8, 6, 6])
        tokens = out_b.log_probs.argmax(dim=1)[index]
        a, b = out_a.state.reorder(index), out_b.state.reorder(index)


def test_bundled_fused_float32_searches_give_the_per_layer_hypotheses(bundled):
    src = source_batch(bundled.tokenizer, read_lines("test_2016_flickr", "en", 24))
    fused, per_layer = KernelBackend(bundled.model), KernelBackend(bundled.model)
    per_layer._fused_step = None
    for rows in (1, 24):  # one sentence at a time, and a batch
        for start in range(0, 24, rows if rows == 24 else 8):
            part = src[start:start + (rows if rows == 24 else 1)]
            options = DecodingOptions(n_best=2)
            got, want = generate(fused, part, options), generate(per_layer, part, options)
            assert [[h.tokens for h in n] for n in got] == [[h.tokens for h in n] for n in want]
            for nbest, expected in zip(got, want):
                for h, w in zip(nbest, expected):
                    assert_close_for(h.score, w.score, ops=bundled.model.config.d_ff)


@pytest.mark.parametrize("rows", [1, 2, 3, 4, 5, 8, 9, 13, 17])
def test_float_linear_sums_in_its_stated_order(rows):
    # decoding.c's float_linear (the fused float32 step's layers, the tied output projection) in
    # every tile shape (8 rows or fewer, with and without the row alone; 37 outputs: a pair of
    # blocks and a partial block; 26 inputs: two left over from the interleaved sums) gives
    # exactly the numbers of its documented order, whatever the compiler regroups, with and
    # without bias and ReLU; that order is F.linear's up to rounding.
    import torch.nn.functional as F

    from model.cpu_kernels import library

    x, weight, bias, outputs = float_linear_outputs_in_stated_order(library(), rows)
    for (with_bias, relu), out in outputs.items():
        reference = F.linear(x, weight, bias if with_bias else None)
        assert_close_for(out, F.relu(reference) if relu else reference, ops=26)


def test_the_tied_output_projection_is_the_tables_product_up_to_rounding():
    import torch.nn.functional as F

    from model.decoding.kernel_backend import output_function

    model = tiny_model(8)
    assert model.output_projection is None  # tied
    project = output_function(model)
    table = model.source_embedding.tokens.weight
    for rows in (1, 6, 40):
        x = torch.randn(rows, model.config.d_model)
        with torch.inference_mode():
            assert_close_for(project(x), F.linear(x, table), ops=model.config.d_model)


@pytest.mark.parametrize("int8", [False, True])
def test_the_memory_keys_and_values_are_the_cross_attentions_projections(int8):
    # KernelBackend.encode projects the memory once a batch for every decoder layer: float32 in
    # decoding.c's float_linear (equal up to rounding), int8 with the layer's own kernel (equal).
    from model.quantization import quantize_int8

    model = tiny_model(5)
    model = quantize_int8(model) if int8 else model
    backend = KernelBackend(model)
    src = torch.tensor([[5, 6, 7, 8, 2], [9, 10, 2, 0, 0]])
    with torch.inference_mode():
        state = backend.encode(src)
        memory = backend._encode(src).states
        for layer, keys, values in zip(model.decoder_layers, state.memory_k, state.memory_v):
            assert keys.shape == values.shape == memory.shape and keys.is_contiguous() and values.is_contiguous()
            for got, module in ((keys, layer.cross_attention.k_proj), (values, layer.cross_attention.v_proj)):
                if int8:
                    assert torch.equal(got, module(memory))
                else:
                    assert_close_for(got, module(memory), ops=model.config.d_model)


@pytest.mark.parametrize("int8", [False, True])
def test_the_fused_encoder_gives_the_per_layer_encoders_memory(int8, monkeypatch):
    # FusedEncoder: the whole encoder in one kernel call, its self-attention in the cross-attention
    # kernel: equal to the per-layer encoder up to the model's widest reduction in another order.
    from model.quantization import quantize_int8

    model = tiny_model(7)
    backend = KernelBackend(quantize_int8(model) if int8 else model)
    assert backend._fused_encoder is not None and backend._fused_encoder.int8 == int8
    src = torch.tensor([[5, 6, 7, 8, 2], [9, 10, 2, 0, 0], [11, 2, 0, 0, 0]])
    calls = []
    run = backend._fused_encoder.run
    monkeypatch.setattr(backend._fused_encoder, "run", lambda *args: calls.append(1) or run(*args))
    with torch.inference_mode():
        fused = backend._encode(src)
        again = backend._encode(src)
        assert torch.equal(again.states, fused.states)
        monkeypatch.setattr(backend, "_fused_encoder", None)
        per_layer = backend._encode(src)
    assert calls == [1, 1]
    real = ~fused.pad_mask
    assert_close_for(fused.states[real], per_layer.states[real], ops=model.config.d_ff)


def test_a_phrasal_encoder_has_no_fused_encoder():
    model = tiny_model(0, encoder_self_attention=AttentionConfig("queryk", {"structure": "heterogeneous",
                                                                            "ngrams": [1, 2, 3]}))
    assert KernelBackend(model)._fused_encoder is None
