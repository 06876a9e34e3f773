"""Would a proper score break compare's ties better than accuracy? A simulation where the true
ranking of the models is known (issue 24, flights' budgets of 2.4 and 3.6).

Accuracy at one threshold is a noisy, discontinuous statistic, so a rule suggests itself: among
the candidates whose paired validation lead of the best's is within the noise (95% bootstrap
interval containing 0, ``scores.paired_lead``), offer the one of best validation Brier score.
This script asks, on generated data, whether that rule picks the truly more accurate model more
often than plain argmax of validation accuracy.

Each trial draws a binary problem (true logit ``z ~ N(-1.2, 1.2^2)``, about 28% positives) and
``k`` models (2 or 4), each predicting ``sigmoid(a * (z + s * e) + b)`` with its own noise ``e``:
``s`` sets how well it ranks, ``a`` and ``b`` how well its probabilities are calibrated. Its
true accuracy is measured on 400,000 fresh rows; both rules choose on 20,000 validation rows.
Two families of models:

* ``calibrated``: ``a = 1``, ``b = 0``; the models differ in ``s`` only.
* ``miscalibrated``: ``a`` in [0.5, 1.5] and ``b`` in [-0.8, 0.8] too, as compare's candidates
  are (a model's first k trees are shrunk towards the prior, a QWYC plan answers early from a
  partial sum, GreedyMiser's and CEGB's models are fitted under a penalty).

Figures (``results/tiebreak.json``): per family, the share of trials in which each rule picked
the truly most accurate model and each rule's mean regret (true accuracy lost against that
model), with a bootstrap interval over trials of the difference; ``results/tiebreak.png``.

    python benchmarks/tiebreak.py [--quick]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from _figures import emit

RESULTS = Path(__file__).resolve().parent / "results"
N_VAL, N_TRUE, RESAMPLES = 20_000, 400_000, 300


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-z))


def _rows(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    z = -1.2 + 1.2 * rng.normal(size=n)
    return z, rng.random(n) < _sigmoid(z)


def _trial(rng: np.random.Generator, k: int, calibrated: bool) -> tuple[np.ndarray, int, int]:
    """(true accuracies, argmax's pick, the Brier tie-break's pick) of one trial."""
    s = rng.uniform(0.3, 1.5, size=k)
    a = np.ones(k) if calibrated else rng.uniform(0.5, 1.5, size=k)
    b = np.zeros(k) if calibrated else rng.uniform(-0.8, 0.8, size=k)

    def predict(z: np.ndarray) -> np.ndarray:
        return _sigmoid(a[:, None] * (z[None, :] + s[:, None] * rng.normal(size=(k, len(z)))) + b[:, None])

    z, y = _rows(rng, N_TRUE)
    true = ((predict(z) > 0.5) == y).mean(axis=1)
    z, y = _rows(rng, N_VAL)
    p = predict(z)
    right = ((p > 0.5) == y).astype(np.float64)
    best = int(np.argmax(right.mean(axis=1)))
    draws = rng.integers(0, N_VAL, size=(RESAMPLES, N_VAL))
    # The candidates whose paired lead of the best's has a 95% interval containing 0 (ties).
    lows = [np.quantile((right[best] - right[j])[draws].mean(axis=1), 0.025) for j in range(k)]
    within = [best] + [j for j in range(k) if j != best and lows[j] <= 0]
    brier = ((p - y) ** 2).mean(axis=1)
    return true, best, min(within, key=lambda j: brier[j])


def family(rng: np.random.Generator, trials: int, calibrated: bool) -> dict[str, object]:
    picked, regret = [], []
    for t in range(trials):
        true, best, rule = _trial(rng, 2 if t % 2 else 4, calibrated)
        picked.append((best == np.argmax(true), rule == np.argmax(true)))
        regret.append((true.max() - true[best], true.max() - true[rule]))
    picked_a, regret_a = np.array(picked, dtype=float), np.array(regret)
    d = regret_a[:, 0] - regret_a[:, 1]  # positive: the tie-break loses less than argmax
    boot = [d[rng.integers(0, len(d), len(d))].mean() for _ in range(2000)]
    return {
        "trials": trials,
        "truly_best_argmax": round(float(picked_a[:, 0].mean()), 3),
        "truly_best_brier_tiebreak": round(float(picked_a[:, 1].mean()), 3),
        "regret_argmax": round(float(regret_a[:, 0].mean()), 6),
        "regret_brier_tiebreak": round(float(regret_a[:, 1].mean()), 6),
        "regret_saved_by_tiebreak": [
            round(float(v), 6) for v in (d.mean(), *np.quantile(boot, [0.025, 0.975]))
        ],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    trials = 40 if args.quick else 400
    rng = np.random.default_rng(12345)
    out = {name: family(rng, trials, name == "calibrated") for name in ("calibrated", "miscalibrated")}
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6, 3.5), layout="constrained")
    ax = fig.add_subplot()
    x = np.arange(2)
    rules = (("argmax", "argmax accuracy"), ("brier_tiebreak", "Brier among ties"))
    for i, (rule, label) in enumerate(rules):
        ax.bar(x + 0.38 * i, [out[f][f"truly_best_{rule}"] for f in out], 0.38, label=label)
    ax.set_xticks(x + 0.19, list(out))
    ax.set_ylim(0.8, 1.0)
    ax.set_ylabel("share of trials picking the truly best")
    ax.legend()
    RESULTS.mkdir(parents=True, exist_ok=True)
    fig.savefig(RESULTS / f"tiebreak{'_quick' if args.quick else ''}.png", dpi=110)
    emit({"bench": "tiebreak", **out}, args.quick)


if __name__ == "__main__":
    main()
