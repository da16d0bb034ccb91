"""n-best lists hold distinct texts (service/runtime/text_codec.py): the search returns all the
hypotheses its beam finished, and of two that detokenise to one text the better-scored stays,
so n distinct hypotheses come back wherever the beam found them."""

from __future__ import annotations

from model.decoding.beam_search import Hypothesis
from service.runtime.base import DecodingOptions
from service.runtime.text_codec import translate_texts

# Token sequences and their detokenised texts: (5,) and (6, 7) both read "a dog".
TEXTS = {(5,): "a dog", (6, 7): "a dog", (8,): "the dog", (9,): "a cat", (10,): "dogs"}


class StubTokenizer:
    def encode_batch(self, texts):
        return [[1, 2, 3] for _ in texts]

    def decode(self, tokens):
        return TEXTS[tuple(tokens)]

    def unknown_spans(self, tokens):
        return []


def run(options: DecodingOptions, hypotheses: list[Hypothesis]):
    searches = []

    def generate(source_ids, search):
        searches.append(search)
        return [hypotheses[: search.n_best]]

    (nbest,) = translate_texts(StubTokenizer(), ["x"], options, 100, generate)
    return [(t.text, t.score) for t in nbest], searches[0]


HYPOTHESES = [
    Hypothesis([5], -0.1, -0.2, None),
    Hypothesis([6, 7], -0.2, -0.6, None),
    Hypothesis([8], -0.3, -0.6, None),
    Hypothesis([9], -0.4, -0.8, None),
    Hypothesis([10], -0.5, -1.0, None),
]


def test_a_repeated_text_is_dropped_and_the_next_distinct_one_takes_its_place():
    kept, search = run(DecodingOptions(beam_size=5, n_best=3), HYPOTHESES)
    assert search.n_best == 5  # the whole beam, not n_best
    assert kept == [("a dog", -0.1), ("the dog", -0.3), ("a cat", -0.4)]


def test_fewer_come_back_only_when_the_beam_holds_fewer_distinct_texts():
    kept, _ = run(DecodingOptions(beam_size=2, n_best=2), HYPOTHESES)
    assert kept == [("a dog", -0.1)]


def test_one_best_asks_the_search_for_one():
    kept, search = run(DecodingOptions(beam_size=5, n_best=1), HYPOTHESES)
    assert (search.n_best, kept) == (1, [("a dog", -0.1)])


def test_a_bare_word_start_piece_decodes_to_no_second_space():
    # The De->En software model wrote "▁" before a copied word: "Drag an atom or a  Binding".
    from pathlib import Path

    import sentencepiece

    from model.text.tokenizer import Tokenizer
    from service.runtime.text_codec import _restored

    model = Path(__file__).resolve().parents[2] / "models" / "de-en-software" / "spm.model"
    pieces = sentencepiece.SentencePieceProcessor(model_file=str(model))
    ids = [pieces.piece_to_id(p) for p in ["▁a", "▁", "▁Bind", "ing", "▁to", "▁"]]
    text, _, spans, unknown = Tokenizer(model).decode_with_unknown(ids)
    assert text == "a  Binding to "  # SentencePiece's own reading
    text, spans = _restored("eine Bindung zu", text, unknown, spans)
    assert text == "a Binding to"
    assert [text[begin:end] for begin, end in spans] == ["a", "", "Bind", "ing", "to", ""]
    assert _restored("x", "a dog", [], [(0, 1), (2, 5)]) == ("a dog", [(0, 1), (2, 5)])


def test_no_space_after_an_opening_bracket_unless_the_source_spaces_one():
    from service.runtime.text_codec import _restored

    # The models decoded a word-start piece after "(": "exited normal ( signal %d)".
    assert _restored("beendet (Signal %d)", "exited ( signal %d)", [], [(0, 6), (7, 8), (9, 15)]) == (
        "exited (signal %d)", [(0, 6), (7, 8), (8, 14)])
    assert _restored("<Datum nicht verfügbar>", "< Datum nicht da>", [], None) == ("<Datum nicht da>", None)
    # A source that writes a space after a bracket keeps the output's.
    assert _restored("Liste ( , )", "List ( a, b )", [], None) == ("List ( a, b )", None)
    assert _restored("kaputt :( nochmal", "broken :( again", [], None) == ("broken :( again", None)
