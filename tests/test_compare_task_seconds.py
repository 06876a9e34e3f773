"""compare says where its selection's time went: each method's task seconds on each fold."""

import time

import numpy as np

from thrifty.comparison import METHODS, Candidate, Method, compare

FAST = {"n_estimators": 10, "num_leaves": 4, "n_jobs": 1}


def test_each_methods_seconds_per_fold(monkeypatch):
    """A method sleeping 0.2 s per candidate, 3 candidates, on 2 folds: at least 0.6 s on
    each fold, and every method and fold is listed."""

    def sleepy(ctx):
        for i in range(3):
            time.sleep(0.2)
            yield Candidate(f"i={i}", ctx.lightgbm())

    monkeypatch.setitem(
        METHODS, "sleepy", Method("sleepy", "Sleepy", "post-hoc", ("binary",), sleepy, "lightgbm")
    )
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 4))
    y = (X[:, 0] + 0.3 * rng.normal(size=200) > 0).astype(int)
    cmp = compare(X, y, methods=["lightgbm", "sleepy"], cv=2, n_jobs=1, progress=False, lightgbm_params=FAST)
    seconds = cmp.task_seconds
    assert list(seconds) == ["LightGBM, first k trees", "Sleepy"]
    assert all(len(v) == 2 for v in seconds.values())
    assert all(s >= 0.6 for s in seconds["Sleepy"])
