"""A model's tokenizer as a language model of its training text: the log-likelihood of texts under a
SentencePiece unigram model, whose piece scores are the log-probabilities EM estimated on the text it
was trained on (the best segmentation's pieces summed, an unknown piece at the smallest score minus
10, as SentencePiece's own search charges one), and where the model's card has them, of the texts'
lengths in words under its training text's (add-one smoothed). A unigram model alone has no notion
of where a text ends: "German" is likelier as caption words ("a German shepherd") than as software
words, but no caption is one word long, and a sixth of software messages are. The service uses it to
choose, among a pair's models of several domains, the one a request's texts are likeliest to come
from (service/domain_routing.py).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

# Text lengths in words are counted 0 .. LENGTH_BINS - 2, and LENGTH_BINS - 1 or more.
LENGTH_BINS = 65

# SentencePiece's unigram search charges an unknown piece the smallest piece score minus this
# (kUnkPenalty, sentencepiece/src/unigram_model.cc).
UNKNOWN_PENALTY = 10.0


class DomainScorer:
    """The log-likelihood of texts under a model's SentencePiece unigram model."""

    def __init__(self, path: Path, source_lengths: Sequence[int] | None = None) -> None:
        import sentencepiece as spm
        from sentencepiece import sentencepiece_model_pb2

        proto = sentencepiece_model_pb2.ModelProto()
        proto.ParseFromString(Path(path).read_bytes())
        if proto.trainer_spec.model_type != sentencepiece_model_pb2.TrainerSpec.UNIGRAM:
            # A BPE model's scores are merge ranks, not probabilities.
            raise ValueError(f"{path}: not a SentencePiece unigram model")
        self._processor = spm.SentencePieceProcessor(model_file=str(path))
        pieces = self._processor.get_piece_size()
        scores = [self._processor.get_score(i) for i in range(pieces)]
        normal = [s for i, s in enumerate(scores) if not self._processor.is_unused(i)
                  and not self._processor.is_control(i) and not self._processor.is_unknown(i)]
        unknown = min(normal) - UNKNOWN_PENALTY
        self._scores = [unknown if self._processor.is_unknown(i) else s for i, s in enumerate(scores)]
        self._length_scores: list[float] | None = None
        if source_lengths is not None:
            if len(source_lengths) != LENGTH_BINS or any(n < 0 for n in source_lengths):
                raise ValueError(f"source_lengths must be {LENGTH_BINS} counts >= 0")
            total = sum(source_lengths) + LENGTH_BINS
            self._length_scores = [math.log((n + 1) / total) for n in source_lengths]

    @classmethod
    def of_model_dir(cls, model_dir: Path) -> DomainScorer | None:
        """The scorer of a model directory's spm.model; None where it has none or it is not unigram
        (such a model is never chosen by its texts, only by name or by being listed first)."""
        from google.protobuf.message import DecodeError

        from model.model_card import read_source_lengths

        path = Path(model_dir) / "spm.model"
        if not path.is_file():
            return None
        try:
            return cls(path, read_source_lengths(Path(model_dir)))
        except (ValueError, RuntimeError, OSError, DecodeError):
            return None  # the runtime's own load of the tokenizer names what is wrong with it

    @property
    def has_lengths(self) -> bool:
        return self._length_scores is not None

    def log_likelihood(self, texts: Sequence[str], lengths: bool = True) -> float:
        """The texts' log-likelihood: their pieces', and with `lengths` (where the card gave them)
        their lengths' in words."""
        scores = self._scores
        # One text at a time: a list would start SentencePiece's thread pool (model/text/tokenizer.py).
        total = sum(scores[i] for text in texts for i in self._processor.encode(text))
        if lengths and self._length_scores is not None:
            total += sum(self._length_scores[min(len(text.split()), LENGTH_BINS - 1)] for text in texts)
        return total
