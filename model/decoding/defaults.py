"""The decoding defaults every entry point starts from: the service, evaluation, export
verification and the benchmarks. Changing one here changes them everywhere, so the figures in
RESULTS.md and the service's answers keep meaning the same search.

The length limit is ``ceil(MAX_LENGTH_RATIO * source tokens) + MAX_LENGTH_OFFSET`` target tokens,
EOS not counted; 1.5 and 10 leave room for German's longer sentences without letting a looping
hypothesis run on (on test_2016_flickr, ratio 2.0 changes one of 1,000 outputs and no BLEU digit).
"""
from __future__ import annotations

BEAM_SIZE = 5
N_BEST = 1
# score = log P(y|x) / |y|**LENGTH_PENALTY, |y| counting EOS (model.decoding.beam_search)
LENGTH_PENALTY = 1.0
MAX_LENGTH_RATIO = 1.5
MAX_LENGTH_OFFSET = 10
