from model.text.tokenizer import Tokenizer


def test_source_spans_slice_back_to_the_pieces(tiny_spm):
    tokenizer = Tokenizer(tiny_spm)
    text = "Zwei  Männer stehen draußen."
    ids, pieces, spans = tokenizer.encode_with_offsets(text)
    assert ids == tokenizer.encode(text)
    assert [text[a:b] for a, b in spans] == [p.lstrip("▁") for p in pieces]


def test_decoded_spans_slice_back_to_the_pieces(tiny_spm):
    tokenizer = Tokenizer(tiny_spm)
    ids = tokenizer.encode("A man in a blue shirt.")
    text, pieces, spans = tokenizer.decode_with_offsets(ids)
    assert text == "A man in a blue shirt."
    assert [text[a:b] for a, b in spans] == [p.lstrip("▁") for p in pieces]


def test_special_ids(tiny_spm):
    tokenizer = Tokenizer(tiny_spm)
    assert (tokenizer.pad_id, tokenizer.bos_id, tokenizer.eos_id, tokenizer.unk_id) == (0, 1, 2, 3)
    assert tokenizer.encode("") == []


def test_a_batch_encodes_to_the_same_ids_one_by_one_and_on_sentencepieces_threads(tiny_spm):
    from model.text.tokenizer import THREADED_ENCODE_FROM
    from tests.conftest import read_lines

    tokenizer = Tokenizer(tiny_spm)
    lines = read_lines("val", "en", 200) + read_lines("val", "de", 200) + ["", "  ", "Ünïcödé ☃ 42"]
    one_by_one = [tokenizer.encode(text) for text in lines]
    assert len(lines) < THREADED_ENCODE_FROM <= 3 * len(lines)
    assert tokenizer.encode_batch(lines) == one_by_one  # a loop
    assert tokenizer.encode_batch(lines * 3) == one_by_one * 3  # SentencePiece's threads
    assert tokenizer.encode_batch([]) == []
