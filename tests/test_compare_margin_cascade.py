"""compare's margin cascade of the cheapest-k-features baseline into the plain model
("cheapest k features, plain model where unsure"): offered for binary classification, built
from the two baselines' models without a fit of its own, and leaving the others' results as
they were."""

import numpy as np
import pandas as pd
import pytest

from thrifty import CostModel, evaluate
from thrifty.cascade import margin_band, margin_cascade
from thrifty.comparison import METHODS, compare
from thrifty.comparison.context import Context
from thrifty.exceptions import InputError

FAST = {"n_estimators": 30, "num_leaves": 8, "n_jobs": 1}
KEY = "cheapest+plain"
BASELINES = ["lightgbm", "cheapest"]


def binary_data(n=1500, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 6))
    y = (X[:, 0] + 0.5 * X[:, 1] - 0.8 * X[:, 5] + 0.3 * rng.normal(size=n) > 0).astype(int)
    return X, y


COSTS = CostModel([1.0, 2.0, 4.0, 8.0, 16.0, 32.0])


@pytest.fixture(scope="module")
def runs():
    """compare on binary data with the two baselines, with and without the cascade; and the
    LightGBM fits each run made. 7,000 rows: one validation split, whose models are the final
    ones (under cross-validation the final refit fits the cheap models a chosen cascade needs,
    as it does the baseline's)."""
    import lightgbm

    X, y = binary_data(7000)
    fits = []
    fit = lightgbm.LGBMClassifier.fit

    def counted(self, *a, **kw):
        fits.append(1)
        return fit(self, *a, **kw)

    kw = dict(quick=True, progress=False, lightgbm_params=FAST, n_jobs=1)
    mp = pytest.MonkeyPatch()
    mp.setattr(lightgbm.LGBMClassifier, "fit", counted)
    try:
        alone = compare(X, y, COSTS, methods=BASELINES, **kw)
        n_alone = len(fits)
        both = compare(X, y, COSTS, methods=[*BASELINES, KEY], **kw)
        n_both = len(fits) - n_alone
    finally:
        mp.undo()
    return alone, both, n_alone, n_both


def test_offered_on_binary_data_from_the_baselines_models_without_a_fit(runs):
    """Its candidates are in the table (each cheap model cheaper than the plain model, for each
    share), each a margin cascade of a cheapest-k model into the plain model, and the run with
    it fitted no more LightGBM models than the run without it."""
    alone, both, n_alone, n_both = runs
    name = METHODS[KEY].name
    rows = both.table[both.table["method"] == name]
    assert len(rows) >= 2
    assert n_both == n_alone
    assert rows["mean_cost"].notna().all() and rows["value"].notna().all()
    plain_cost = both.table.loc[both.table["method"] == METHODS["lightgbm"].name, "mean_cost"].max()
    assert (rows["mean_cost"] < plain_cost + 1e-9).all()
    # A chosen cascade is the plan margin_cascade builds from the cheap and the plain model.
    cheap_rows = both.table[both.table["method"] == METHODS["cheapest"].name]
    cheap_cost = dict(zip(cheap_rows["name"], cheap_rows["mean_cost"]))
    for name_ in rows["name"]:
        k = name_.split(",")[0]
        assert rows.loc[rows["name"] == name_, "mean_cost"].iloc[0] >= cheap_cost[k] - 1e-9


def test_the_other_methods_results_are_unchanged(runs):
    """Without an allowance, the baselines' rows are the same with the cascade as without (their
    validation figures; the test figures are those of the front, which the cascade joins)."""
    alone, both, _, _ = runs
    drop = ["fit_seconds", *(c for c in alone.table.columns if c.startswith("test_"))]
    ours = both.table[both.table["method"] != METHODS[KEY].name].drop(columns=drop).reset_index(drop=True)
    theirs = alone.table.drop(columns=drop).reset_index(drop=True)
    pd.testing.assert_frame_equal(ours[theirs.columns], theirs)


def test_each_candidate_is_the_cascade_of_a_cheap_model_and_the_plain_model():
    """Run on a context by hand: each candidate routes the calibration share asked, and
    evaluates as margin_cascade of its cheapest-k model (shared, not refitted) and the plain
    model; the settings come in the order that covers their costs first."""
    from thrifty.comparison.settings import Settings
    from thrifty.comparison.sweep import fitting_context

    X, y = binary_data(1200, 2)
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(6)])
    settings = Settings(
        task="binary",
        costs=COSTS,
        budgets=(5.0, 10.0),
        lightgbm_params={**FAST, "verbose": -1},
        n_jobs=1,
        random_state=0,
        quick=False,
        plain_model=None,
        split="random",
    )
    ctx: Context = fitting_context(settings, frame, y, None)
    cheap = {c.name: c for c in METHODS["cheapest"].run(ctx)}
    cands = list(METHODS[KEY].run(ctx))
    plain = ctx.lightgbm()
    assert len(cands) == 5 * sum(ctx.order_cost(c.model) < ctx.order_cost(plain) for c in cheap.values())
    assert [c.params["share"] for c in cands][:1] != [0.02]  # CostOrder's middle first, not the grid's start
    for c in cands:
        low = cheap[c.name.split(",")[0]].model
        assert c.model.low.forest is low and c.model.high.high.forest is plain  # shared, not refitted
        lo, hi = margin_band(low, ctx.X_val, c.params["share"])
        ref = evaluate(margin_cascade(low, plain, lo, hi), ctx.X_val, COSTS)
        ev = evaluate(c.model, ctx.X_val, COSTS)
        np.testing.assert_array_equal(ev.labels, ref.labels)
        np.testing.assert_array_equal(ev.cost.total, ref.cost.total)
        # The share asked, to within rows of equal |score| (a one-feature model has few scores).
        d = np.sort(np.abs(low.predict_raw(ctx.X_val).ravel()))
        reachable = np.r_[0, np.flatnonzero(np.diff(d) > 1e-9) + 1, len(d)]
        want = reachable[np.argmin(np.abs(reachable - round(c.params["share"] * len(d))))]
        assert ((lo < d) & (d < hi)).sum() == want


@pytest.mark.parametrize("task", ["multiclass", "regression", "ranking"])
def test_absent_for_the_other_tasks_with_its_reason_in_the_task_table(task):
    """Registered for binary classification only; asked for another task, a one-line error;
    docs/usage.md's task table says in a line why not."""
    assert METHODS[KEY].tasks == ("binary",)
    rng = np.random.default_rng(1)
    X = rng.normal(size=(300, 3))
    y = {"multiclass": np.arange(300) % 3, "regression": X[:, 0] * 3.7, "ranking": np.arange(300) % 3}[task]
    qid = np.repeat(np.arange(30), 10) if task == "ranking" else None
    with pytest.raises(InputError, match="do not support the task"):
        compare(X, y, task=task, qid=qid, methods=[KEY], quick=True, progress=False, lightgbm_params=FAST)
    from pathlib import Path

    usage = (Path(__file__).parents[1] / "docs" / "usage.md").read_text()
    row = next(line for line in usage.splitlines() if line.startswith("| margin cascade"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    column = {"multiclass": 2, "regression": 3, "ranking": 4}[task]
    assert cells[1].startswith("`margin_cascade`") and cells[column].startswith("—")


def test_scheduled_with_the_post_hoc_methods_as_it_fits_nothing():
    """A time allowance reaches it early: it runs after the baselines and with the post-hoc
    methods, before the training methods and the compositions that fit."""
    from thrifty.comparison.compare import _methods

    order = [m.key for m in _methods("all", "binary")]
    assert METHODS[KEY].family == "composition" and not METHODS[KEY].fits
    assert order.index("cheapest") < order.index(KEY) < order.index("cegb") < order.index("cegb+qwyc")
