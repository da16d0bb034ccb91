"""A model's tokenizer as a language model of its training text: the log-likelihood of texts under a
SentencePiece unigram model, whose piece scores are the log-probabilities EM estimated on the text it
was trained on (the best segmentation's pieces summed, an unknown piece at the smallest score minus
10, as SentencePiece's own search charges one). The service uses it to choose, among a pair's models
of several domains, the one a request's texts are likeliest to come from (service/domain_routing.py).
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

# SentencePiece's unigram search charges an unknown piece the smallest piece score minus this
# (kUnkPenalty, sentencepiece/src/unigram_model.cc).
UNKNOWN_PENALTY = 10.0


class DomainScorer:
    """The log-likelihood of texts under a model's SentencePiece unigram model."""

    def __init__(self, path: Path) -> None:
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

    @classmethod
    def of_model_dir(cls, model_dir: Path) -> DomainScorer | None:
        """The scorer of a model directory's spm.model; None where it has none or it is not unigram
        (such a model is never chosen by its texts, only by name or by being listed first)."""
        from google.protobuf.message import DecodeError

        path = Path(model_dir) / "spm.model"
        if not path.is_file():
            return None
        try:
            return cls(path)
        except (ValueError, RuntimeError, OSError, DecodeError):
            return None  # the runtime's own load of the tokenizer names what is wrong with it

    def log_likelihood(self, texts: Sequence[str]) -> float:
        scores = self._scores
        # One text at a time: a list would start SentencePiece's thread pool (model/text/tokenizer.py).
        return sum(scores[i] for text in texts for i in self._processor.encode(text))
