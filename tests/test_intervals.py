"""Confidence intervals (``thrifty/intervals.py``) and the test figures' intervals of a comparison
(``thrifty/comparison/scores.py``), against one resample at a time computed by scikit-learn."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from sklearn.metrics import mean_absolute_error, mean_squared_error, ndcg_score, r2_score

from thrifty.comparison.scores import constant_scores, intervals, quality_columns
from thrifty.intervals import bootstrap_interval, bootstrap_sums


def test_vectorised_bootstrap_draws_what_the_generic_one_draws():
    x = np.random.default_rng(0).normal(size=300) * 1e4
    generic = bootstrap_interval(lambda idx: np.sqrt(np.mean(x[idx] ** 2)), len(x), n_resamples=250)
    fast = bootstrap_sums({"sq": x**2}, {"rms": lambda s, n: np.sqrt(s["sq"] / n)}, n_resamples=250)
    assert fast["rms"] == pytest.approx(generic, rel=1e-12)
    low, high = bootstrap_sums({"a": []}, {"m": lambda s, n: s["a"] / n})["m"]
    assert np.isnan(low) and np.isnan(high)
    with pytest.raises(ValueError, match="one value per unit in every column"):
        bootstrap_sums({"a": [1.0, 2.0], "b": [1.0]}, {"m": lambda s, n: s["a"] / n})


@pytest.mark.parametrize("scale", [1e4, 1e-4, 1.0])
def test_regression_intervals_are_sklearns_metrics_over_resampled_rows(scale):
    rng = np.random.default_rng(1)
    # Prices of ~1e4 and tiny targets around a large offset: the intervals lose no digits.
    y = scale * (rng.gamma(2.0, 1.0, 400) + 3.0)
    pred = y + scale * rng.normal(0, 0.5, 400)
    ev = SimpleNamespace(raw=pred, labels=None)
    found = intervals("regression", y, ev)
    for name, fn, column in [
        ("rmse", lambda a, b: np.sqrt(mean_squared_error(a, b)), "test"),
        ("mae", mean_absolute_error, "test_mae"),
        ("r2", r2_score, "test_r2"),
    ]:
        expected = bootstrap_interval(lambda idx, fn=fn: fn(y[idx], pred[idx]), len(y))
        got = (found[f"{column}_low"], found[f"{column}_high"])
        assert got == pytest.approx(expected, rel=1e-9), name
        assert got[0] < fn(y, pred) < got[1]


def test_ranking_intervals_resample_queries_not_rows():
    rng = np.random.default_rng(2)
    sizes = rng.integers(3, 15, 60)
    qid = np.repeat(np.arange(60) * 3 + 1, sizes)
    y = rng.integers(0, 5, qid.size)
    score = y + rng.normal(0, 1.5, qid.size)
    ev = SimpleNamespace(raw=score, labels=None)
    found = intervals("ranking", y, ev, qid)
    assert found["test_queries"] == 60
    # Each query's NDCG@10 by scikit-learn (gain 2**label - 1; no relevant document counts 1,
    # as LightGBM's does), then the mean over resampled queries.
    per_query = np.array(
        [
            ndcg_score([2.0 ** y[qid == q] - 1], [score[qid == q]], k=10) if y[qid == q].any() else 1.0
            for q in np.unique(qid)
        ]
    )
    precision = np.array(
        [np.sum(y[qid == q][np.argsort(-score[qid == q])[:5]] >= 1) / 5 for q in np.unique(qid)]
    )
    assert (found["test_low"], found["test_high"]) == pytest.approx(
        bootstrap_interval(lambda idx: per_query[idx].mean(), 60), rel=1e-9
    )
    assert (found["test_precision@5_low"], found["test_precision@5_high"]) == pytest.approx(
        bootstrap_interval(lambda idx: precision[idx].mean(), 60), rel=1e-9
    )
    # Over rows the interval would be far narrower than over 60 queries of ~9 documents.
    assert found["test_high"] - found["test_low"] > 0.01


def test_constant_predictions_are_told_apart_per_query():
    assert constant_scores([2.0, 2.0, 2.0]) and not constant_scores([2.0, 2.0, 2.1])
    # Each query's documents tied: a ranking in input order, whatever the scores across queries.
    assert constant_scores([1.0, 1.0, 5.0, 5.0], qid=[7, 7, 3, 3])
    assert not constant_scores([1.0, 1.0, 5.0, 6.0], qid=[7, 7, 3, 3])
    assert not constant_scores(np.zeros(0))
    assert not constant_scores([1.0, 2.0], qid=[0, 1])  # queries of one document rank nothing
    y = np.array([1.0, 2.0, 3.0, 4.0])
    columns = quality_columns("regression", y, SimpleNamespace(raw=np.full(4, 2.5), labels=None, cost=None))
    assert columns["metric"] == "rmse" and columns["constant"] and columns["r2"] == pytest.approx(0.0)
