"""compare's choice when the validation rows (the latest, under a time split) have other class
shares than the rows given (``selection.prior_weights`` and ``selection.reweigh``): a simulation
of a calm validation window between two busier periods."""

import numpy as np
import pandas as pd
import pytest

from thrifty.comparison.selection import choose, prior_weights, reweigh

#: x | y=0 ~ N(0, 1) and x | y=1 ~ N(1, 1); a model answers 1 above its threshold on x.
INFORMATIVE = 0.5 + np.log(3.0)  # the Bayes rule at 25% of 1s: it learned when a row is a 1
TIMID = 3.0  # answers 1 almost never: close to always answering the majority class


def rows(rng, n, share):
    y = (rng.random(n) < share).astype(int)
    return rng.normal(size=n) + y, y


def offered(rng, n_val=5000, window=0.12, history=0.25, weighted=True):
    """The model compare offers of the two (its threshold), chosen on ``n_val`` validation rows
    whose share of 1s is ``window``; the earlier rows given (4 times as many) have ``history``."""
    _, y_fit = rows(rng, 4 * n_val, history)
    x, y = rows(rng, n_val, window)
    units = {(m, "t"): (x > t).astype(int) == y for m, t in (("informative", INFORMATIVE), ("timid", TIMID))}
    table = pd.DataFrame(
        [
            {"method": m, "name": "t", "mean_cost": 1.0, "metric": "accuracy", "value": u.mean()}
            for (m, _), u in units.items()
        ]
    )
    by_index = {i: units[r["method"], "t"] for i, r in table.iterrows()}
    w = prior_weights(y, np.r_[y_fit, y], "binary") if weighted else None
    if w is not None:
        table, by_index = reweigh(table, by_index, w)
    chosen = table.loc[choose(table, {(r["method"], r["name"]): by_index[i] for i, r in table.iterrows()})[0]]
    return chosen["method"]


def accuracy(threshold, share):
    """A model's accuracy on rows with ``share`` of 1s (exact, from the normal distribution)."""
    from scipy.stats import norm

    return (1 - share) * norm.cdf(threshold) + share * norm.sf(threshold - 1.0)


def test_a_calm_validation_window_no_longer_picks_the_model_that_learned_nothing():
    """Later rows have the history's 25% of 1s; the validation window 12%. Plain validation
    accuracy prefers the timid model (it answers the window's majority), which loses on the
    later rows; weighted to the class shares of every row given, the informative model is
    chosen nearly every time and the later rows' accuracy rises."""
    rng = np.random.default_rng(0)
    plain = [offered(rng, weighted=False) for _ in range(40)]
    weighted = [offered(rng) for _ in range(40)]
    assert plain.count("timid") >= 36  # what compare chose before: the window's majority
    assert weighted.count("informative") >= 36
    later = {m: accuracy(t, 0.25) for m, t in (("informative", INFORMATIVE), ("timid", TIMID))}
    assert np.mean([later[m] for m in weighted]) > np.mean([later[m] for m in plain]) + 0.015


def test_without_a_shift_nothing_is_weighted_and_the_better_model_still_wins():
    """Validation rows with the shares of every row (a random split, or a steady prior): no
    weights; the informative model is the better one there and is chosen."""
    rng = np.random.default_rng(1)
    y = np.r_[np.zeros(75), np.ones(25)].astype(int)
    assert prior_weights(y[::5], y, "binary") is None  # the same shares
    assert prior_weights(np.r_[1.0, 2.0], np.r_[1.0, 2.0, 3.0], "regression") is None
    assert [offered(rng, window=0.25) for _ in range(10)].count("informative") >= 9


def test_the_weights_give_each_class_its_share_of_all_rows_and_average_one():
    y_all = np.r_[np.zeros(70), np.ones(30)].astype(int)
    y_val = np.r_[np.zeros(18), np.ones(2)].astype(int)
    w = prior_weights(y_val, y_all, "binary")
    assert w.mean() == pytest.approx(1.0)
    assert w[y_val == 1].sum() / w.sum() == pytest.approx(0.3)  # 10% of the rows weigh 30%
    table = pd.DataFrame({"method": ["m"], "name": ["n"], "value": [0.9], "metric": ["accuracy"]})
    right = y_val == 0  # right on every 0, wrong on every 1
    out, units = reweigh(table, {0: right}, w)
    assert out.at[0, "unweighted_value"] == 0.9 and out.at[0, "value"] == pytest.approx(0.7)
    assert units[0].mean() == pytest.approx(0.7)


def test_string_labels_and_a_class_the_rows_given_never_have():
    y_all = np.array(["late"] * 30 + ["on time"] * 70)
    w = prior_weights(np.array(["late"] * 2 + ["on time"] * 18), y_all, "binary")
    assert w[:2].sum() / w.sum() == pytest.approx(0.3)
    assert prior_weights(np.array(["late", "diverted"]), y_all, "binary") is None
