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
- with ``splits > 1`` the null is the mean over that many independent random halvings (default 1, the
  single split the method describes).
"""

from __future__ import annotations

import math
from collections import Counter
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


class ModalContinuation:
    """Modes of the k-th digit after each shorter prefix, fitted on a set of label keys."""

    def __init__(self, fitted: Sequence[DigitKey]) -> None:
        # counts[k][prefix] counts the k-th digit (1-based) after every prefix of length 0 .. k-1 figures;
        # a prefix of j figures is (sign, exponent, d1 .. dj); the empty tuple pools all labels.
        self._counts: dict[int, dict[tuple, Counter]] = {k: {} for k in range(2, FIGURES + 1)}
        for key in fitted:
            for k in range(2, FIGURES + 1):
                digit = key.digits[k - 1]
                for prefix in self._backoff_chain(key, k):
                    self._counts[k].setdefault(prefix, Counter())[digit] += 1

    @staticmethod
    def _backoff_chain(key: DigitKey, k: int) -> list[tuple]:
        return [key.prefix(j) for j in range(k - 1, -1, -1)] + [()]

    def predict(self, key: DigitKey, k: int) -> int | None:
        """The modal k-th digit after the (k-1)-figure prefix of ``key`` (backing off when unseen)."""
        for prefix in self._backoff_chain(key, k):
            counts = self._counts[k].get(prefix)
            if counts:
                best = max(counts.values())
                return min(digit for digit, count in counts.items() if count == best)
        return None


def _split_retention(keys: Sequence[DigitKey], fit_idx: Sequence[int], eval_idx: Sequence[int]) -> tuple:
    model = ModalContinuation([keys[i] for i in fit_idx])
    rates = []
    for k in range(2, FIGURES + 1):
        hits = sum(model.predict(keys[i], k) == keys[i].digits[k - 1] for i in eval_idx)
        rates.append(hits / len(eval_idx))
    return tuple(rates)


def null_retention(labels: Sequence[DigitKey], seed: int | Sequence[int], splits: int = 1) -> NullRetention:
    """Null retentions of the modal-continuation predictor, fitted on a random half, scored on the rest.

    ``labels`` are the keys of the audited labels in a fixed order (the caller sorts by item id so the
    split does not depend on row order); ``seed`` fixes the halving. NaN when fewer than two labels.
    """
    import numpy as np

    n = len(labels)
    if n < 2:
        return NullRetention(r12=math.nan, r23=math.nan, n_fit=0, n_eval=n)
    rng = np.random.default_rng(seed)
    n_fit = n // 2
    totals = [0.0, 0.0]
    for _ in range(splits):
        order = rng.permutation(n)
        r12, r23 = _split_retention(labels, order[:n_fit], order[n_fit:])
        totals[0] += r12
        totals[1] += r23
    return NullRetention(r12=totals[0] / splits, r23=totals[1] / splits, n_fit=n_fit, n_eval=n - n_fit)
