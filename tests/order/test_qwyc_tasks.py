"""QWYC for regressors (exits within a tolerance for all but alpha of the rows) and rankers (at
most alpha of the queries change their top-k set), against brute force."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import thrifty
from thrifty.order import (
    default_tolerance,
    qwyc,
    qwyc_ranking,
    qwyc_ranking_scores,
    qwyc_regression,
    qwyc_scores,
    topk_changed,
)

lightgbm = pytest.importorskip("lightgbm")

# ------------------------------------------------------------------------------ references


def cuts(s):
    """Thresholds realising every split of the sorted scores ``s`` (incl. none / all)."""
    v = np.unique(s)
    return np.concatenate([[-np.inf, v[0] - 1.0], (v[:-1] + v[1:]) / 2, [v[-1] + 1.0, np.inf]])


def brute_exits(s, bad, budget, neg_only, dw=None):
    """Algorithm 2 by exhaustive search over every pair of cuts: line 4 takes the largest low
    exit set ``{s < c}`` whose far rows fit the budget, line 5 the largest high exit set
    ``{s > c2}``, ``c2 >= c``, with what is left. ``dw``: what each far row costs (default 1).
    Returns the exiting rows (a mask)."""
    dw = np.ones(len(s)) if dw is None else dw
    cs = cuts(s)
    fits = [c for c in cs if dw[bad & (s < c)].sum() <= budget]
    n_low = max(int(np.sum(s < c)) for c in fits)
    lows = [c for c in fits if np.sum(s < c) == n_low]
    best = s < lows[0]
    if neg_only:
        return best
    for c in lows:
        used = dw[bad & (s < c)].sum()
        for c2 in cs[cs >= c]:
            out = (s < c) | (s > c2)
            if used + dw[bad & (s > c2)].sum() <= budget and out.sum() > best.sum():
                best = out
    return best


def brute_qwyc(F, tol, alpha, *, optimize, cost=None, neg_only=False):
    """Algorithm 1 (``optimize``) or Algorithm 2 along the given order, with ``brute_exits``:
    ``(order, exits per position, mean cost, rows farther than tol at their exit)``."""
    n, T = F.shape
    cost = np.ones(T) if cost is None else cost
    full = np.zeros(n)
    for t in range(T):
        full = full + F[:, t]
    pi = list(range(T))
    live = np.ones(n, dtype=bool)
    g = np.zeros(n)
    budget, spent, paid = alpha * n, 0, 0.0
    exits = []
    for r in range(T):
        m = int(live.sum())
        if m == 0:
            break
        best, j, best_out = np.inf, 0, None
        for jj, t in enumerate(pi[r:] if optimize else [pi[r]]):
            s = g[live] + F[live, t]
            out = brute_exits(s, np.abs(full[live] - s) > tol, budget - spent, neg_only)
            J = cost[t] * m / out.sum() if out.any() else np.inf
            if J < best:  # Algorithm 1: strictly smaller J only
                best, j, best_out = J, jj, out
        pi[r], pi[r + j] = pi[r + j], pi[r]
        t = pi[r]
        paid += cost[t] * m
        g[live] = g[live] + F[live, t]
        if best_out is None:
            exits.append(0)
            continue
        idx = np.flatnonzero(live)[best_out]
        spent += int(np.sum(np.abs(full[idx] - g[idx]) > tol))
        exits.append(len(idx))
        live[idx] = False
    exits += [0] * (T - len(exits))
    return np.array(pi), np.array(exits, dtype=float), paid / n, spent


def simulate(F, order, eps_pos, eps_neg):
    """The runtime's rule on a score matrix: early predictions and trees evaluated."""
    n = F.shape[0]
    g = np.zeros(n)
    pred = np.full(n, np.nan)
    trees = np.zeros(n)
    for r, t in enumerate(order):
        live = np.isnan(pred)
        g[live] = g[live] + F[live, t]
        trees[live] += 1
        out = live & ((g > eps_pos[r]) | (g < eps_neg[r]))
        pred[out] = g[out]
    pred[np.isnan(pred)] = g[np.isnan(pred)]
    return pred, trees


half_scores = arrays(
    np.float64,
    st.tuples(st.integers(1, 10), st.integers(1, 4)),
    elements=st.integers(-4, 4).map(lambda v: v / 2.0),  # sums exact: no rounding at the tolerance
)


# ------------------------------------------------------------------------------ brute force


@settings(max_examples=40, deadline=None)
@given(
    half_scores,
    st.sampled_from([0.25, 0.5, 1.0, 1.75]),
    st.sampled_from([0.0, 0.1, 0.25, 0.5]),
    st.booleans(),
)
def test_every_order_matches_brute_force(F, tol, alpha, neg_only):
    """Algorithm 2 along every order of the trees: the same exits, cost and disagreements as
    the exhaustive search over all cuts, and at most alpha n rows farther than tol."""
    mode = "negative" if neg_only else "both"
    for perm in itertools.permutations(range(F.shape[1])):
        Fp = F[:, list(perm)]
        res = qwyc_scores(Fp, alpha=alpha, tolerance=tol, ordering="given", mode=mode, return_result=True)
        _, exits, cost, spent = brute_qwyc(Fp, tol, alpha, optimize=False, neg_only=neg_only)
        np.testing.assert_array_equal(res.n_exit, exits)
        assert res.mean_cost == pytest.approx(cost) and res.n_disagree == spent <= alpha * len(F)
        pred, trees = simulate(Fp, res.order, res.eps_pos, res.eps_neg)
        assert np.sum(np.abs(pred - Fp.sum(1)) > tol) == spent
        assert trees.mean() == pytest.approx(cost)


@settings(max_examples=60, deadline=None)
@given(
    arrays(
        np.float64,
        st.tuples(st.integers(1, 12), st.integers(1, 5)),
        elements=st.integers(-4, 4).map(lambda v: v / 2.0),
    ),
    st.sampled_from([0.25, 0.5, 1.0]),
    st.sampled_from([0.0, 0.1, 0.25]),
    st.data(),
)
def test_algorithm1_matches_brute_force(F, tol, alpha, data):
    """Algorithm 1 over at most 5 trees: the greedy choice of the brute-force reference at every
    position (all remaining trees, all cuts), the same order, cost and disagreements."""
    cost = np.array(
        data.draw(st.lists(st.sampled_from([1.0, 2.0, 3.0]), min_size=F.shape[1], max_size=F.shape[1]))
    )
    res = qwyc_scores(F, alpha=alpha, tolerance=tol, costs=cost, return_result=True)
    order, exits, mean_cost, spent = brute_qwyc(F, tol, alpha, optimize=True, cost=cost)
    np.testing.assert_array_equal(res.order, order)
    np.testing.assert_array_equal(res.n_exit, exits)
    assert res.mean_cost == pytest.approx(mean_cost)
    assert res.n_disagree == spent <= alpha * len(F)


def test_exact_tolerance_is_never_exceeded_with_alpha_zero():
    F = np.array([[1.0, 0.0, 0.5], [2.0, -1.0, 0.0], [-1.0, 0.0, 0.0], [0.0, 3.0, -3.0]])
    order, eps_pos, eps_neg = qwyc_scores(F, alpha=0.0, tolerance=0.5, ordering="given")
    pred, _ = simulate(F, order, eps_pos, eps_neg)
    assert np.all(np.abs(pred - F.sum(1)) <= 0.5)


# ------------------------------------------------------------------------------ forests


@pytest.fixture(scope="module")
def reg():
    from sklearn.datasets import make_regression

    X, y = make_regression(n_samples=900, n_features=6, noise=10.0, random_state=4)
    m = lightgbm.LGBMRegressor(n_estimators=40, num_leaves=8, learning_rate=0.2, verbose=-1)
    return m.fit(X[:600], y[:600]), X[:600], y[:600], X[600:]


@pytest.mark.parametrize("alpha", [0.0, 0.02, 0.1])
@pytest.mark.parametrize("ordering", ["optimize", "given", "random"])
def test_forest_plan_within_tolerance_for_all_but_alpha(reg, alpha, ordering):
    model, X, y, _ = reg
    tol = default_tolerance(y)
    assert tol == pytest.approx(0.05 * np.std(y))
    plan, res = qwyc(model, X, y, alpha=alpha, ordering=ordering, random_state=0, return_result=True)
    assert isinstance(plan, thrifty.Sequential)
    ev = thrifty.evaluate(plan, X)
    far = np.abs(ev.raw.reshape(-1) - model.predict(X)) > tol
    assert far.sum() == res.n_disagree <= alpha * len(X)
    assert ev.cost.n_trees.mean() == pytest.approx(res.mean_cost)
    if alpha > 0:
        assert res.mean_cost < plan.forest.n_trees


def test_weights_are_repeated_rows(reg):
    model, X, _, _ = reg
    rep = np.random.default_rng(0).integers(0, 3, size=len(X))
    a = qwyc_regression(model, X, alpha=0.05, tolerance=5.0, sample_weight=rep, return_result=True)[1]
    b = qwyc_regression(model, np.repeat(X, rep, axis=0), alpha=0.05, tolerance=5.0, return_result=True)[1]
    np.testing.assert_array_equal(a.order, b.order)
    assert a.mean_cost == pytest.approx(b.mean_cost) and a.n_disagree == b.n_disagree


def test_validation(reg):
    model, X, y, _ = reg
    with pytest.raises(thrifty.exceptions.InputError, match="needs class labels"):
        qwyc(model, X, y, ordering="greedy_mse")
    with pytest.raises(thrifty.exceptions.InvalidParameterError):
        qwyc(model, X, tolerance=0.0)
    clf = lightgbm.LGBMClassifier(n_estimators=3, verbose=-1).fit(X, y > 0)
    with pytest.raises(thrifty.exceptions.InputError, match="regressors only"):
        qwyc(clf, X, tolerance=1.0)
    assert default_tolerance(np.ones(5)) > 0  # a constant target still gets a tolerance


# ------------------------------------------------------------------------------ rankers


def brute_qwyc_ranking(F, qid, k, alpha, optimize, keep_order=False):
    """Algorithms 1 / 2 with ``brute_exits``: a document disagrees when it exits on the wrong
    side of its query's cut (midpoint of the k-th and (k+1)-th full scores), or with
    ``keep_order`` when it is of the full top k and exits at all, and costs 1 of the budget
    unless its query is already counted. ``(order, exits, mean cost, queries counted)``."""
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
    if keep_order:
        cut[top] = np.inf  # any exit of a top-k document is on the wrong side
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
    st.booleans(),
    st.data(),
)
def test_ranking_matches_brute_force(F, k, alpha, optimize, keep_order, data):
    """Algorithm 1 (or 2 along the given order) over at most 5 trees: the exhaustive search's
    order, exits, cost and queries counted, and no more queries changed than counted (with
    ``keep="order"``, no more queries whose top-k list changed, order included)."""
    n = F.shape[0]
    qid = np.array(data.draw(st.lists(st.integers(0, 3), min_size=n, max_size=n)))
    ordering = "optimize" if optimize else "given"
    keep = "order" if keep_order else "set"
    res = qwyc_ranking_scores(F, qid, k=k, alpha=alpha, ordering=ordering, keep=keep)
    order, exits, cost, counted = brute_qwyc_ranking(F, qid, k, alpha, optimize, keep_order)
    np.testing.assert_array_equal(res.order, order)
    np.testing.assert_array_equal(res.n_exit, exits)
    assert res.mean_cost == pytest.approx(cost)
    assert res.n_disagree == counted <= alpha * len(np.unique(qid))
    pred, _ = simulate(F, res.order, res.eps_pos, res.eps_neg)
    assert topk_changed(pred, F.sum(1), qid, k).sum() <= counted
    if keep_order:
        full = F.sum(1)
        lists = [
            [rows[np.argsort(-s[rows], kind="stable")[:k]].tolist() for s in (pred, full)]
            for rows in (np.flatnonzero(qid == q) for q in np.unique(qid))
        ]
        assert sum(a != b for a, b in lists) <= counted


def test_ranking_hand_example():
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


def test_ranking_validation(ranker):
    model, X, qid = ranker
    with pytest.raises(thrifty.exceptions.InputError, match="one query"):
        qwyc_ranking(model, X, qid[:-1])
    clf = lightgbm.LGBMClassifier(n_estimators=2, verbose=-1).fit(X, qid % 2)
    with pytest.raises(thrifty.exceptions.InputError, match="needs a ranker"):
        qwyc_ranking(clf, X, qid)
