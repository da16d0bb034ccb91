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
