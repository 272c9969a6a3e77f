"""Simulated audit cells with a known amount of planted retrieval, for checking an audit's power and its
false discovery rate on a given set of labels before spending model calls.

Four predictors: ``planted`` copies the published label verbatim for a share of items and guesses the
rest; ``random`` guesses every item; ``coarse`` knows each label's first significant figure exactly and
writes two random digits below it; ``honest`` predicts every label with normal error of SD ``noise`` (in
the label's units) and never retrieves: accurate enough, it retains second figures above the null.
Guesses are drawn from the label values themselves (a molecule-blind predictor that knows the label
distribution), written to three significant figures.
"""

from __future__ import annotations

from collections.abc import Sequence

from environment.contamination.audit import Prediction
from environment.contamination.digits import digit_key, format_figures


def simulated_labels(n: int, rng, mean: float = -3.0, sd: float = 2.0) -> list[str]:
    """``n`` labels drawn from a normal distribution and written to three significant figures."""
    return [format_figures(float(x)) for x in rng.normal(mean, sd, size=n)]


def _guess(values: Sequence[float], rng) -> str:
    # A draw from the label distribution, jittered so it is not a verbatim copy of another label.
    spread = (max(values) - min(values)) or 1.0
    return format_figures(float(rng.choice(values)) + float(rng.normal(0.0, 0.05 * spread)))


def _coarse(label: str, rng) -> str:
    key = digit_key(label)
    if key is None:
        return label
    below = "".join(str(d) for d in rng.integers(0, 10, size=2))
    text = f"{'-' if key.negative else ''}{key.digits[0]}.{below}e{key.exponent}"
    return format_figures(float(text))


def simulated_cell(
    labels: Sequence[str],
    predictor: str,
    rng,
    share: float = 0.0,
    model: str = "sim",
    benchmark: str = "bench",
    noise: float = 0.15,
) -> list[Prediction]:
    """One cell of audit rows for ``labels`` from the named predictor (``planted``, ``random``, ``coarse``,
    ``honest``).

    For ``planted``, each item is copied verbatim with probability ``share`` and guessed otherwise; for
    ``honest``, each prediction is the label plus normal error of SD ``noise``.
    """
    values = [float(y) for y in labels]
    rows = []
    for i, label in enumerate(labels):
        if predictor == "planted":
            prediction = label if rng.random() < share else _guess(values, rng)
        elif predictor == "random":
            prediction = _guess(values, rng)
        elif predictor == "coarse":
            prediction = _coarse(label, rng)
        elif predictor == "honest":
            prediction = format_figures(values[i] + float(rng.normal(0.0, noise)))
        else:
            raise ValueError(f"unknown predictor {predictor!r}: use planted, random, coarse or honest")
        rows.append(
            Prediction(
                model=model, benchmark=benchmark, item_id=f"{i:05d}", prediction=prediction, label=label
            )
        )
    return rows
