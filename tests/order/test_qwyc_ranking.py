"""QWYC for rankers: at most alpha of the queries change their top-k set, against brute force."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import thrifty
from tests.order.test_qwyc_regression import brute_exits, simulate
from thrifty.order import qwyc_ranking, qwyc_ranking_scores, topk_changed

lightgbm = pytest.importorskip("lightgbm")


def brute_qwyc_ranking(F, qid, k, alpha, optimize):
    """Algorithms 1 / 2 with ``brute_exits``: a document disagrees when it exits on the wrong
    side of its query's cut (midpoint of the k-th and (k+1)-th full scores), and costs 1 of
    the budget unless its query is already counted. ``(order, exits, mean cost, queries counted)``."""
    n, T = F.shape
    full = np.zeros(n)
    for t in range(T):
        full = full + F[:, t]
    cut, top = np.full(n, -np.inf), np.ones(n, dtype=bool)
    for q in np.unique(qid):
        rows = np.flatnonzero(qid == q)
        ranked = rows[np.argsort(-full[rows], kind="stable")]
        if len(rows) > k:
            cut[rows] = 0.5 * full[ranked[k - 1]] + 0.5 * full[ranked[k]]
            top[ranked[k:]] = False
    broken = set()
    budget = alpha * len(np.unique(qid))
    pi, live, g = list(range(T)), np.ones(n, dtype=bool), np.zeros(n)
    exits, paid = [], 0.0
    for r in range(T):
        m = int(live.sum())
        if m == 0:
            break
        idx = np.flatnonzero(live)
        dw = np.array([0.0 if qid[i] in broken else 1.0 for i in idx])
        best, j, best_out = np.inf, 0, None
        for jj, t in enumerate(pi[r:] if optimize else [pi[r]]):
            s = g[idx] + F[idx, t]
            bad = np.where(top[idx], s <= cut[idx], s >= cut[idx])
            out = brute_exits(s, bad, budget - len(broken), False, dw)
            J = m / out.sum() if out.any() else np.inf
            if J < best:
                best, j, best_out = J, jj, out
        pi[r], pi[r + j] = pi[r + j], pi[r]
        paid += m
        g[idx] = g[idx] + F[idx, pi[r]]
        if best_out is None:
            exits.append(0)
            continue
        gone = idx[best_out]
        wrong = np.where(top[gone], g[gone] <= cut[gone], g[gone] >= cut[gone])
        broken |= set(qid[gone[wrong]].tolist())
        exits.append(len(gone))
        live[gone] = False
    exits += [0] * (T - len(exits))
    return np.array(pi), np.array(exits, dtype=float), paid / n, len(broken)


@settings(max_examples=60, deadline=None)
@given(
    arrays(
        np.float64,
        st.tuples(st.integers(2, 14), st.integers(1, 5)),
        elements=st.integers(-4, 4).map(lambda v: v / 2.0),  # sums exact
    ),
    st.integers(1, 3),
    st.sampled_from([0.0, 0.25, 0.5]),
    st.booleans(),
    st.data(),
)
def test_matches_brute_force(F, k, alpha, optimize, data):
    """Algorithm 1 (or 2 along the given order) over at most 5 trees: the exhaustive search's
    order, exits, cost and queries counted, and no more queries changed than counted."""
    n = F.shape[0]
    qid = np.array(data.draw(st.lists(st.integers(0, 3), min_size=n, max_size=n)))
    ordering = "optimize" if optimize else "given"
    res = qwyc_ranking_scores(F, qid, k=k, alpha=alpha, ordering=ordering)
    order, exits, cost, counted = brute_qwyc_ranking(F, qid, k, alpha, optimize)
    np.testing.assert_array_equal(res.order, order)
    np.testing.assert_array_equal(res.n_exit, exits)
    assert res.mean_cost == pytest.approx(cost)
    assert res.n_disagree == counted <= alpha * len(np.unique(qid))
    pred, _ = simulate(F, res.order, res.eps_pos, res.eps_neg)
    assert topk_changed(pred, F.sum(1), qid, k).sum() <= counted


def test_hand_example():
    # one query of 3 documents, k = 1: full scores 3, 1, -2; cut 2 (midpoint of 3 and 1)
    F = np.array([[3.0, 0.0], [2.0, -1.0], [-2.0, 0.0]])
    res = qwyc_ranking_scores(F, [7, 7, 7], k=1, alpha=0.0, ordering="given")
    # after tree 0 the scores 3, 2, -2: the top document may exit above 2, the last below 2;
    # document 1 (2.0, not top) sits on the cut and must wait
    assert res.n_exit.tolist() == [2.0, 1.0] and res.n_disagree == 0


@pytest.fixture(scope="module")
def ranker():
    rng = np.random.default_rng(0)
    nq, per = 80, 15
    X = rng.normal(size=(nq * per, 6))
    qid = np.repeat(np.arange(nq), per)
    rel = np.clip((X[:, 0] + 0.5 * X[:, 1] + rng.normal(scale=0.5, size=len(X))).round() + 1, 0, 4)
    m = lightgbm.LGBMRanker(n_estimators=40, num_leaves=8, verbose=-1).fit(X, rel, group=[per] * nq)
    return m, X, qid


@pytest.mark.parametrize("alpha", [0.0, 0.05, 0.2])
def test_forest_within_alpha_of_the_queries(ranker, alpha):
    model, X, qid = ranker
    plan, res = qwyc_ranking(model, X, qid, k=5, alpha=alpha, return_result=True)
    ev = thrifty.evaluate(plan, X)
    changed = topk_changed(ev.raw.reshape(-1), model.predict(X), qid, 5)
    assert changed.sum() <= res.n_disagree <= alpha * 80
    assert ev.cost.n_trees.mean() == pytest.approx(res.mean_cost)
    assert res.mean_cost < 40


def test_validation(ranker):
    model, X, qid = ranker
    with pytest.raises(thrifty.exceptions.InputError, match="one query"):
        qwyc_ranking(model, X, qid[:-1])
    clf = lightgbm.LGBMClassifier(n_estimators=2, verbose=-1).fit(X, qid % 2)
    with pytest.raises(thrifty.exceptions.InputError, match="needs a ranker"):
        qwyc_ranking(clf, X, qid)
