"""The molecule-blind null: the best predictor that knows only the digit distribution of the labels.

Having matched a label's first k-1 figures, such a predictor does best by emitting the most frequent next
digit among labels that share that prefix (the modal continuation). Its retentions are the floor that a
model's retentions are tested against. The modes are fitted on a random half of the labels and scored on
the other half, so fitting and evaluation never share a label and the floor is not inflated by
memorising the evaluation labels themselves.

Choices the method leaves open (documented in docs/contamination.md):
- ties between equally frequent digits go to the smallest digit;
- a prefix absent from the fitting half backs off to the mode after the next shorter prefix, down to
  (sign, exponent) and finally to all fitted labels;
- the null retention at k figures is the share of *all* evaluation labels whose k-th digit equals the
  modal continuation of their own (k-1)-figure prefix, i.e. the blind predictor's success rate given that
  it has matched that prefix, averaged over the label distribution;
- with ``splits > 1`` the null is the mean over that many independent random halvings: each term is
  exactly the method's "fit on a random half, score on the other half", and the mean removes the noise
  of one particular halving, which the binomial test would otherwise treat as signal (the audit uses
  20; ``splits=1`` is the single split).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from environment.contamination.digits import FIGURES, DigitKey


@dataclass(frozen=True)
class NullRetention:
    """Null retentions R12 and R23 of the modal-continuation predictor, and the sizes of the two halves."""

    r12: float
    r23: float
    n_fit: int
    n_eval: int


class _PrefixCodes:
    """Integer codes of every label's prefixes, so a halving can be fitted and scored with array sums.

    ``codes[j]`` holds, per label, the id of its j-figure prefix (sign, exponent, d1 .. dj) for j = 0 ..
    FIGURES - 1; ``digits[:, k - 1]`` is the k-th digit.
    """

    def __init__(self, keys: Sequence[DigitKey]) -> None:
        import numpy as np

        self.digits = np.array([key.digits for key in keys], dtype=np.int64).reshape(len(keys), FIGURES)
        self.codes = []
        for j in range(FIGURES):
            ids: dict[tuple, int] = {}
            self.codes.append(
                np.array([ids.setdefault(key.prefix(j), len(ids)) for key in keys], dtype=np.int64)
            )

    def modal_hits(self, fit, score, k: int):
        """For each label in ``score``: does its k-th digit equal the mode fitted on ``fit`` after its prefix?

        The mode after the (k-1)-figure prefix is used when that prefix occurs in ``fit``; otherwise the
        mode after the next shorter prefix, down to (sign, exponent) and then all fitted labels. Ties go
        to the smallest digit.
        """
        import numpy as np

        digit = self.digits[:, k - 1]
        pooled = np.bincount(digit[fit], minlength=10)
        predicted = np.full(len(score), int(np.argmax(pooled)))
        for j in range(k):  # shortest prefix first; longer prefixes override where they were seen
            counts = np.zeros((int(self.codes[j].max()) + 1, 10), dtype=np.int64)
            np.add.at(counts, (self.codes[j][fit], digit[fit]), 1)
            code = self.codes[j][score]
            seen = counts[code].sum(axis=1) > 0
            predicted = np.where(seen, np.argmax(counts[code], axis=1), predicted)
        return predicted == digit[score]


def null_retention(labels: Sequence[DigitKey], seed: int | Sequence[int], splits: int = 1) -> NullRetention:
    """Null retentions of the modal-continuation predictor, fitted on a random half, scored on the rest.

    ``labels`` are the keys of the audited labels in a fixed order (the caller sorts by item id so the
    split does not depend on row order); ``seed`` fixes the halvings. NaN when fewer than two labels.
    """
    import numpy as np

    if splits < 1:
        raise ValueError("splits must be at least 1")
    n = len(labels)
    if n < 2:
        return NullRetention(r12=math.nan, r23=math.nan, n_fit=0, n_eval=n)
    codes = _PrefixCodes(labels)
    rng = np.random.default_rng(seed)
    n_fit = n // 2
    totals = np.zeros(FIGURES - 1)
    for _ in range(splits):
        order = rng.permutation(n)
        fit, score = order[:n_fit], order[n_fit:]
        totals += [codes.modal_hits(fit, score, k).mean() for k in range(2, FIGURES + 1)]
    r12, r23 = (totals / splits).tolist()
    return NullRetention(r12=r12, r23=r23, n_fit=n_fit, n_eval=n - n_fit)
