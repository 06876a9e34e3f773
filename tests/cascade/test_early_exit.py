"""Early-exit baselines: ranking proximity exits (checked against a per-query brute force) and truncation."""

import numpy as np
import pytest

import thrifty
from thrifty import CostModel, Forest
from thrifty.cascade import EarlyExitRanker, ranking_early_exit, truncate

lightgbm = pytest.importorskip("lightgbm")


@pytest.fixture(scope="module")
def ranker():
    rng = np.random.default_rng(4)
    n_q, per = 30, 20
    X = rng.normal(size=(n_q * per, 5))
    rel = np.clip(np.round(X[:, 0] + 0.5 * X[:, 1] + rng.normal(scale=0.7, size=len(X))), 0, 4).astype(int)
    qid = np.repeat(np.arange(n_q), per)
    model = lightgbm.LGBMRanker(
        n_estimators=40, num_leaves=6, learning_rate=0.2, verbose=-1, n_jobs=1, min_child_samples=3
    ).fit(X, rel, group=[per] * n_q)
    costs = CostModel([1.0, 3.0, 5.0, 10.0, 2.0], tree_cost=0.5)
    return Forest.from_model(model), X, qid, costs


def _brute_force(forest, X, qid, s, every, k):
    """Each query on its own, partial scores from prefix forests' own predict_raw."""
    T = forest.n_trees
    exits = list(range(every, T, every))
    n_exits = len(exits)
    partial = {m: forest.subset(range(m)).predict_raw(X) for m in exits}
    stop = np.full(len(X), T)
    for q in np.unique(qid):
        alive = list(np.flatnonzero(qid == q))
        for i, m in enumerate(exits, start=1):
            if len(alive) < k:
                continue
            g = partial[m]
            kth = sorted((g[d] for d in alive), reverse=True)[k - 1]
            margin = (n_exits - i) / (n_exits - 1) * s
            dropped = [d for d in alive if g[d] <= kth - margin]
            for d in dropped:
                stop[d] = m
            alive = [d for d in alive if d not in dropped]
    return stop


@pytest.mark.parametrize(
    "s,every,k",
    [
        (0.3, 5, 5),  # moderate proximity, the paper's fifth best
        (1.0, 10, 3),  # wider margin, fewer exits
        (0.0, 5, 5),  # no margin: only documents above the k-th best survive the first exit
    ],
)
def test_ranking_early_exit_matches_brute_force(ranker, s, every, k):
    forest, X, qid, costs = ranker
    res = ranking_early_exit(forest, X, qid, s, costs, every=every, k=k)
    np.testing.assert_array_equal(res.n_trees, _brute_force(forest, X, qid, s, every, k))
    np.testing.assert_array_equal(res.cost.n_trees, res.n_trees)
    # the cost of each document is what evaluating its prefix forest alone costs
    for i in range(0, len(X), 37):
        alone = thrifty.evaluate(forest.subset(range(int(res.n_trees[i]))), X[i : i + 1], costs).cost
        assert res.cost.total[i] == pytest.approx(alone.total[0])
        np.testing.assert_array_equal(res.cost.acquired[i], alone.acquired[0])
    assert res.n_trees.min() < forest.n_trees
    if s == 0.0:
        first = res.n_trees > every
        per_query = np.bincount(qid[first])
        assert per_query.max() <= k - 1
    # survivors rank above every dropped document of their query
    for q in np.unique(qid):
        d = qid == q
        full = res.n_trees[d] == forest.n_trees
        if full.any() and (~full).any():
            assert res.score[d][full].min() > res.score[d][~full].max()


def test_no_exit_is_the_full_model(ranker):
    forest, X, qid, costs = ranker
    res = ranking_early_exit(forest, X, qid, np.inf, costs)
    full = thrifty.evaluate(forest, X, costs)
    assert np.all(res.n_trees == forest.n_trees)
    np.testing.assert_allclose(res.cost.total, full.cost.total)
    np.testing.assert_allclose(res.partial, full.raw)
    assert np.array_equal(np.argsort(res.score, kind="stable"), np.argsort(full.raw, kind="stable"))


def test_truncate(ranker):
    forest, X, _, costs = ranker
    plan = truncate(forest, 7)
    ev = thrifty.evaluate(plan, X, costs)
    assert np.all(ev.cost.n_trees == 7)
    np.testing.assert_allclose(ev.raw, forest.subset(range(7)).predict_raw(X))
    with pytest.raises(ValueError, match="k must be"):
        truncate(forest, 0)
    with pytest.raises(ValueError, match="k must be"):
        truncate(forest, forest.n_trees + 1)


def test_errors(ranker):
    forest, X, qid, costs = ranker
    with pytest.raises(ValueError, match="s must be"):
        ranking_early_exit(forest, X, qid, -1.0, costs)
    with pytest.raises(ValueError, match="every"):
        ranking_early_exit(forest, X, qid, 1.0, costs, every=0)
    with pytest.raises(ValueError, match="rows"):
        ranking_early_exit(forest, X, qid[:-1], 1.0, costs)


def test_early_exit_ranker_as_compare_scores_it(ranker, tmp_path):
    """compare's measure sees each query: its cost is the mean over documents of what each
    document's prefix forest costs alone (the brute force's exit), its metrics are those of the
    brute force's ranking (NDCG@10, precision@5 beside it)."""
    from thrifty.comparison.sweep import measure
    from thrifty.metrics import ndcg_at_k, precision_at_k

    forest, X, qid, costs = ranker
    y = np.clip(np.round(X[:, 0] + 0.5 * X[:, 1] + 1.5), 0, 4)
    model = EarlyExitRanker(forest, 0.3, every=5, k=5)
    columns, ev = measure(model, X, y, qid, costs, "ranking")
    stop = _brute_force(forest, X, qid, 0.3, 5, 5)
    assert stop.min() < forest.n_trees  # some documents exit, so the cost is not the full model's
    alone = [
        thrifty.evaluate(forest.subset(range(int(m))), X[i : i + 1], costs).cost.total[0]
        for i, m in enumerate(stop)
    ]
    assert columns["mean_cost"] == pytest.approx(np.mean(alone))
    assert columns["mean_cost"] < thrifty.evaluate(forest, X, costs).cost.mean
    np.testing.assert_array_equal(ev.exit, stop)
    # ranking by exit, later exits first, then by partial score at the exit
    partial = np.array(
        [forest.subset(range(int(m))).predict_raw(X[i : i + 1])[0] for i, m in enumerate(stop)]
    )
    stage = np.searchsorted(np.r_[np.arange(5, forest.n_trees, 5), forest.n_trees], stop)
    brute = stage * 10.0 + 5.0 + np.arctan(partial)  # the same order as the model's score
    assert columns["metric"] == "ndcg@10"
    assert columns["value"] == pytest.approx(ndcg_at_k(y, brute, qid, k=10))
    assert columns["precision@5"] == pytest.approx(precision_at_k(y, brute, qid, k=5))
    # a saved model loads back and ranks alike; thrifty.evaluate refuses it (it needs queries)
    path = thrifty.save(model, tmp_path / "ee.json")
    back = thrifty.load(path)
    np.testing.assert_array_equal(back.predict(X, qid), model.predict(X, qid))
    with pytest.raises(ValueError, match="not a per-example plan.*qid=qid"):
        thrifty.evaluate(model, X, costs)
    with pytest.raises(ValueError, match="needs qid"):
        model.evaluate(X, costs, qid=None)
