"""compare's calibration rows under a time split, weighted to the class shares of all the
fitting rows (``methods.calibration_weights``, ``label_shift.prior_weights``): QWYC's exits are
fitted on them, and a budgeted path's models compared on them."""

import numpy as np
import pandas as pd
import pytest

from thrifty.comparison import methods
from thrifty.comparison.label_shift import prior_weights
from thrifty.comparison.settings import Settings
from thrifty.comparison.sweep import fitting_context
from thrifty.costs import CostModel
from thrifty.order import qwyc
from thrifty.runtime.evaluate import evaluate

FAST = {"n_estimators": 60, "num_leaves": 7, "learning_rate": 0.1, "verbose": -1, "n_jobs": 1}
COSTS = CostModel([1.0, 1.0, 1.0])


def _draw(rng, n, share):
    """Rows of a fixed class-conditional law (each feature shifted by the class) with a share
    ``share`` of positives: label shift only."""
    y = (rng.uniform(size=n) < share).astype(int)
    X = rng.normal(size=(n, 3)) + 0.9 * y[:, None] * np.array([1.0, 0.7, 0.5])
    return pd.DataFrame(X, columns=["a", "b", "c"]), y


def _calm_window(seed):
    """4,000 rows with 30% positives, then a calm window of 1,000 with 8% (the latest: the
    calibration rows under a time split), and 4,000 later rows with 30% again."""
    rng = np.random.default_rng(seed)
    (X1, y1), (X2, y2), (Xt, _) = (_draw(rng, 4000, 0.3), _draw(rng, 1000, 0.08), _draw(rng, 4000, 0.3))
    ctx = fitting_context(
        Settings(task="binary", costs=COSTS, lightgbm_params=FAST, split="ordered"),
        pd.concat([X1, X2], ignore_index=True),
        np.concatenate([y1, y2]),
        None,
    )
    return ctx, Xt


def _later_disagreement(ctx, Xt, alpha):
    full = np.asarray(evaluate(ctx.lightgbm(), Xt, COSTS).labels)
    plan = methods._quit(ctx, ctx.lightgbm(), alpha)
    return float(np.mean(np.asarray(evaluate(plan, Xt, COSTS).labels) != full))


def test_weighted_calibration_keeps_alpha_on_later_rows(monkeypatch):
    """Fitted on a calm window, QWYC's bound of alpha=0.1 (decisions changed against the full
    model) held on later rows of the usual class mix only with the window weighted: over four
    draws the plain plans changed 16% of later decisions (each draw over 13%), the weighted
    ones 10%."""
    weighted, plain = [], []
    for seed in range(4):
        ctx, Xt = _calm_window(seed)
        weighted.append(_later_disagreement(ctx, Xt, 0.1))
        with monkeypatch.context() as m:
            m.setattr(methods, "prior_weights", lambda *a: None)
            plain.append(_later_disagreement(ctx, Xt, 0.1))
    assert np.mean(weighted) <= 0.1 + 0.02 < 0.1 + 0.04 < np.mean(plain)
    assert all(w < p for w, p in zip(weighted, plain))


@pytest.mark.parametrize("split", ["random", "ordered"])
def test_compare_plan_is_qwyc_on_the_weighted_rows(split):
    """The plan compare offers is qwyc's on the calibration rows with the label-shift weights
    under a time split, with none under a random one."""
    ctx, _ = _calm_window(0)
    ctx = fitting_context(
        Settings(task="binary", costs=COSTS, lightgbm_params=FAST, split=split),
        pd.concat([ctx.X_train, ctx.X_val], ignore_index=True),
        np.concatenate([ctx.y_train, ctx.y_val]),
        None,
    )
    rows, weights = methods._qwyc_rows(ctx)
    expected = prior_weights(ctx.y_val, np.concatenate([ctx.y_train, ctx.y_val]), "binary")
    if split == "random":
        assert weights is None
    else:
        np.testing.assert_allclose(weights, expected)
        assert weights[ctx.y_val == 1].min() > 2 > 1 > weights[ctx.y_val == 0].max()
    plan = methods._quit(ctx, ctx.lightgbm(), 0.1)
    ref = qwyc(ctx.lightgbm(), rows, alpha=0.1, costs=COSTS, feature_costs=True, sample_weight=weights)
    np.testing.assert_array_equal(plan.order, ref.order)
    np.testing.assert_array_equal(plan.eps_pos, ref.eps_pos)
    np.testing.assert_array_equal(plan.eps_neg, ref.eps_neg)


def test_path_choice_weighs_a_calm_calibration_window(monkeypatch):
    """Of a budgeted path's models, compare offers the dearest within the budget unless another
    beats it on the calibration rows beyond the noise. On a calm window (8% positives against
    27% in all the fitting rows) a model of one tree, which answers "negative" nearly always,
    beats the full model there unweighted; weighted to the usual class mix it does not, and the
    full model (the estimator's own choice) is offered."""
    from types import SimpleNamespace

    ctx, _ = _calm_window(0)
    full = ctx.lightgbm()
    stump = full.subset(range(1))
    table = pd.DataFrame(
        {"tradeoff": [0.0, 0.0], "cost": [1.0, 3.0], "truncated": False, "chosen": [False, True]}
    )
    path = SimpleNamespace(budget_search_=table, search_models_=[stump, full])
    assert methods._best_on_path(ctx, path, 5.0) == 1
    ctx._cache.pop("path scores", None)
    with monkeypatch.context() as m:
        m.setattr(methods, "prior_weights", lambda *a: None)
        assert methods._best_on_path(ctx, path, 5.0) == 0  # unweighted, the calm window's pick
