"""SentencePiece wrapper: ids for the model, pieces with character spans for alignments."""
from __future__ import annotations

from pathlib import Path

import sentencepiece as spm

Span = tuple[int, int]

# From this many texts a batch is encoded on SentencePiece's threads (training data, exports);
# fewer (what a request or a decoding batch holds) one by one.
THREADED_ENCODE_FROM = 1024


class Tokenizer:
    """One joint SentencePiece model. Sources are encoded as pieces + [EOS]."""

    def __init__(self, model_path: str | Path):
        self.path = Path(model_path)
        self._sp = spm.SentencePieceProcessor(model_file=str(self.path))
        self.pad_id = self._sp.pad_id()
        self.bos_id = self._sp.bos_id()
        self.eos_id = self._sp.eos_id()
        self.unk_id = self._sp.unk_id()

    @property
    def vocab_size(self) -> int:
        return self._sp.get_piece_size()

    def encode(self, text: str) -> list[int]:
        return self._sp.encode(text, out_type=int)

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        # SentencePiece encodes a list on a thread pool it starts for each call: worth it for a corpus,
        # ten times the cost of a loop for a request's texts, and threads that compete with the
        # decoder on a small box (benchmarks/tokenizer_batch.py). The ids are the same either way.
        if len(texts) < THREADED_ENCODE_FROM:
            return [self._sp.encode(text, out_type=int) for text in texts]
        return self._sp.encode(texts, out_type=int)

    def encode_with_offsets(self, text: str) -> tuple[list[int], list[str], list[Span]]:
        """ids, pieces and each piece's (begin, end) character span in `text`, whitespace trimmed."""
        mapping = self._sp.encode(text, out_type="offset_mapping")
        return mapping["ids"], mapping["pieces"], _trim_spans(text, mapping["offsets"])

    def decode(self, ids: list[int]) -> str:
        return self._sp.decode(ids)

    def decode_with_offsets(self, ids: list[int]) -> tuple[str, list[str], list[Span]]:
        """The detokenised text, the pieces and each piece's (begin, end) character span in it."""
        text, pieces, spans, _ = self.decode_with_unknown(ids)
        return text, pieces, spans

    def decode_with_unknown(self, ids: list[int]) -> tuple[str, list[str], list[Span], list[Span]]:
        """As decode_with_offsets, and the untrimmed span of every unknown piece (SentencePiece
        writes " ⁇ "), for model/text/unknown.py to replace."""
        mapping = self._sp.decode(ids, out_type="offset_mapping")
        text = mapping["text"]
        unknown = [span for token, span in zip(ids, mapping["offsets"]) if token == self.unk_id]
        return text, mapping["pieces"], _trim_spans(text, mapping["offsets"]), unknown

    def unknown_spans(self, ids: list[int]) -> list[Span]:
        """The untrimmed span of every unknown piece in decode(ids); none without decoding again
        where `ids` has no unknown piece (nearly always)."""
        return self.decode_with_unknown(ids)[3] if self.unk_id in ids else []

    def id_to_piece(self, token_id: int) -> str:
        return self._sp.id_to_piece(token_id)



def _trim_spans(text: str, offsets: list[tuple[int, int]]) -> list[Span]:
    """A piece that starts a word ("▁x") covers the space before it; the word itself does not."""
    spans = []
    for begin, end in offsets:
        while begin < end and text[begin].isspace():
            begin += 1
        spans.append((begin, end))
    return spans
