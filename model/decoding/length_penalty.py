"""The length penalty that ranks finished hypotheses: score = log P(y|x) / lp(|y|).

Two forms, named by the option `length_penalty_form` (α is `length_penalty`; |y| counts EOS):

- "power": lp = |y|^α, the fairseq / CTranslate2 normalisation; α = 1 ranks by mean log-prob,
  α = 0 by raw log-prob. What the shipped models decode with (model/decoding/defaults.py).
- "gnmt": lp = ((5 + |y|) / 6)^α, Wu et al. 2016 ("Google's Neural Machine Translation
  System"), eq. 14, with α = 0.6 in "Attention Is All You Need" §6.1 and the tensor2tensor
  setups that the phrase-based attention papers build on.

CTranslate2's C++ search has only the power form: a CTranslate2 backend refuses "gnmt" rather
than rank with the other formula (export/ct2_runner.py, service/settings.py).
"""
from __future__ import annotations

FORMS = ("power", "gnmt")
# The α that Wu et al. 2016 and Vaswani et al. 2017 (§6.1) decode with under the GNMT form.
GNMT_ALPHA = 0.6


def length_normaliser(length: int, alpha: float, form: str = "power") -> float:
    """lp(|y|) for a hypothesis of `length` tokens counting EOS: |y|^α ("power") or
    ((5 + |y|) / 6)^α ("gnmt", Wu et al. 2016 eq. 14)."""
    if form == "power":
        return float(length) ** alpha
    if form == "gnmt":
        return ((5.0 + length) / 6.0) ** alpha
    raise ValueError(form_problem(form))


def form_problem(form: object) -> str:
    return f"length_penalty_form must be one of {', '.join(FORMS)}, got {form!r}"


def ct2_problem(form: str) -> str | None:
    """Why CTranslate2 cannot rank with `form` (None when it can): its search only has |y|^α."""
    if form == "power":
        return None
    return (f"length_penalty_form {form!r} is not offered by CTranslate2, whose beam search only normalises by "
            f"|y|^length_penalty (length_penalty_form 'power')")
