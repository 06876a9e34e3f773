"""thrifty.metrics against brute-force computations."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import ndcg_score

from thrifty import CostReport, metrics
from thrifty.runtime import Evaluation

FAST = settings(max_examples=60, deadline=None)


# ----------------------------------------------------------------------------- brute force
def bf_auc(y, s):
    pos = [si for yi, si in zip(y, s) if yi == 1]
    neg = [si for yi, si in zip(y, s) if yi == 0]
    wins = sum(1.0 if p > q else 0.5 if p == q else 0.0 for p in pos for q in neg)
    return wins / (len(pos) * len(neg))


def bf_queries(y, s, q):
    """{query: [labels in ranked order]} with ties kept in input order."""
    out = {}
    for qq in dict.fromkeys(q):
        docs = [i for i in range(len(y)) if q[i] == qq]
        docs.sort(key=lambda i: (-s[i], i))
        out[qq] = [y[i] for i in docs]
    return out


def bf_precision(y, s, q, k, relevant_min=1):
    per = [sum(1 for r in ranked[:k] if r >= relevant_min) / k for ranked in bf_queries(y, s, q).values()]
    return sum(per) / len(per)


def bf_dcg(labels, k):
    return sum((2**r - 1) / math.log2(i + 2) for i, r in enumerate(labels[:k]))


def bf_ndcg(y, s, q, k, no_relevant="one"):
    per = []
    for ranked in bf_queries(y, s, q).values():
        ideal = bf_dcg(sorted(ranked, reverse=True), k)
        if ideal == 0:
            if no_relevant == "one":
                per.append(1.0)
            elif no_relevant == "zero":
                per.append(0.0)
            continue
        per.append(bf_dcg(ranked, k) / ideal)
    return sum(per) / len(per)


@st.composite
def ranking_data(draw, ties=True):
    n_queries = draw(st.integers(1, 6))
    sizes = draw(st.lists(st.integers(1, 12), min_size=n_queries, max_size=n_queries))
    n = sum(sizes)
    q = np.repeat(np.arange(n_queries) * 7 + 3, sizes)  # ids need not be 0..Q-1
    perm = np.array(draw(st.permutations(range(n))))
    q = q[perm]  # a query's documents need not be consecutive
    y = np.array(draw(st.lists(st.integers(0, 4), min_size=n, max_size=n)))
    if ties:
        s = np.array(draw(st.lists(st.integers(-3, 3), min_size=n, max_size=n)), dtype=float)
    else:
        s = np.array(draw(st.permutations(range(n))), dtype=float) / 3.0
    return y, s, q


# ----------------------------------------------------------------------------- classification
@FAST
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3)), min_size=1, max_size=50))
def test_accuracy_brute_force(pairs):
    y, p = np.array(pairs).T
    assert metrics.accuracy(y, p) == pytest.approx(np.mean([a == b for a, b in pairs]))


def test_accuracy_text_labels_and_errors():
    assert metrics.accuracy(np.array(["A", "B", "C"]), np.array(["A", "C", "C"])) == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match="labels"):
        metrics.accuracy([0, 1], np.eye(2))
    with pytest.raises(ValueError, match="different numbers"):
        metrics.accuracy([0, 1, 1], [0, 1])


@FAST
@given(
    st.lists(st.tuples(st.integers(0, 1), st.integers(0, 5)), min_size=2, max_size=40).filter(
        lambda v: len({a for a, _ in v}) == 2
    )
)
def test_auc_brute_force(pairs):
    y, s = (np.array(v) for v in zip(*pairs))
    s = s / 5.0
    assert metrics.auc(y, s) == pytest.approx(bf_auc(y, s))
    proba = np.column_stack([1 - s, s])
    assert metrics.auc(y, proba) == pytest.approx(bf_auc(y, s))
    assert metrics.auc(y, s[:, None]) == pytest.approx(bf_auc(y, s))


def test_auc_rejects_one_class_and_multiclass():
    with pytest.raises(ValueError, match="both classes"):
        metrics.auc([1, 1, 1], [0.1, 0.2, 0.3])
    with pytest.raises(ValueError, match="binary"):
        metrics.auc([0, 1, 2], np.full((3, 3), 1 / 3))


@FAST
@given(st.integers(2, 4), st.lists(st.integers(0, 100), min_size=4, max_size=40), st.data())
def test_log_loss_brute_force(n_classes, seeds, data):
    n = len(seeds)
    y = np.array(data.draw(st.lists(st.integers(0, n_classes - 1), min_size=n, max_size=n)))
    rng = np.random.default_rng(sum(seeds))
    p = rng.uniform(0.05, 1.0, size=(n, n_classes))
    p /= p.sum(axis=1, keepdims=True)
    expected = -np.mean(np.log(p[np.arange(n), y]))
    assert metrics.log_loss(y, p, labels=list(range(n_classes))) == pytest.approx(expected)
    if n_classes == 2:
        assert metrics.log_loss(y, p[:, 1], labels=[0, 1]) == pytest.approx(expected)


# ----------------------------------------------------------------------------- ranking
@FAST
@given(ranking_data(), st.integers(1, 8), st.integers(1, 4))
def test_precision_at_k_brute_force(data, k, relevant_min):
    y, s, q = data
    assert metrics.precision_at_k(y, s, q, k=k) == pytest.approx(bf_precision(y, s, q, k))
    assert metrics.precision_at_k(y, s, q, k=k, relevant_min=relevant_min) == pytest.approx(
        bf_precision(y, s, q, k, relevant_min)
    )


@FAST
@given(ranking_data(), st.integers(1, 12), st.sampled_from(["one", "zero", "skip"]))
def test_ndcg_at_k_brute_force(data, k, no_relevant):
    y, s, q = data
    if no_relevant == "skip" and not np.any(y > 0):
        with pytest.raises(ValueError, match="undefined"):
            metrics.ndcg_at_k(y, s, q, k=k, no_relevant=no_relevant)
        return
    assert metrics.ndcg_at_k(y, s, q, k=k, no_relevant=no_relevant) == pytest.approx(
        bf_ndcg(y, s, q, k, no_relevant)
    )


@FAST
@given(ranking_data(ties=False), st.integers(1, 12))
def test_ndcg_matches_sklearn_without_ties(data, k):
    y, s, q = data
    per = []
    for qq in np.unique(q):
        m = q == qq
        if m.sum() < 2 or not np.any(y[m] > 0):
            continue
        # scikit-learn's gain is the label itself: pass 2**rel - 1 to get the exponential gain
        per.append(ndcg_score([2.0 ** y[m] - 1], [s[m]], k=k))
        assert metrics.ndcg_at_k(y[m], s[m], q[m], k=k) == pytest.approx(per[-1])


def test_ranking_ties_keep_input_order():
    y = np.array([0, 0, 3, 1, 2, 0])
    s = np.zeros(6)
    q = np.zeros(6)
    # all tied: the ranking is the input order
    assert metrics.precision_at_k(y, s, q, k=3) == pytest.approx(1 / 3)
    assert metrics.precision_at_k(y, s, q, k=5) == pytest.approx(3 / 5)
    expected = bf_dcg([0, 0, 3, 1, 2, 0], 6) / bf_dcg([3, 2, 1, 0, 0, 0], 6)
    assert metrics.ndcg_at_k(y, s, q, k=6) == pytest.approx(expected)
    # reversing the input order changes the result: ties are not averaged
    assert metrics.precision_at_k(y[::-1], s, q, k=3) == pytest.approx(2 / 3)


def test_precision_denominator_is_k_and_cronus_threshold():
    y, s, q = np.array([4, 3]), np.array([1.0, 0.5]), np.array([0, 0])
    assert metrics.precision_at_k(y, s, q, k=5) == pytest.approx(2 / 5)
    assert metrics.precision_at_k(np.array([2, 3]), s, q, k=2, relevant_min=3) == pytest.approx(1 / 2)


def test_ndcg_query_without_relevant_documents():
    y = np.array([0, 0, 2, 1])
    s = np.array([0.1, 0.2, 0.1, 0.9])
    q = np.array([0, 0, 1, 1])
    q1 = bf_dcg([1, 2], 10) / bf_dcg([2, 1], 10)
    assert metrics.ndcg_at_k(y, s, q) == pytest.approx((1 + q1) / 2)
    assert metrics.ndcg_at_k(y, s, q, no_relevant="zero") == pytest.approx(q1 / 2)
    assert metrics.ndcg_at_k(y, s, q, no_relevant="skip") == pytest.approx(q1)
    with pytest.raises(ValueError, match="no_relevant"):
        metrics.ndcg_at_k(y, s, q, no_relevant="drop")


def test_ranking_input_errors():
    with pytest.raises(ValueError, match="positive integer"):
        metrics.precision_at_k([1], [1.0], [0], k=0)
    with pytest.raises(ValueError, match="NaN"):
        metrics.ndcg_at_k([1, 0], [np.nan, 1.0], [0, 0])
    with pytest.raises(ValueError, match="different numbers"):
        metrics.ndcg_at_k([1, 0], [1.0], [0, 0])


# ----------------------------------------------------------------------------- agreement, costs, score
@FAST
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2)), min_size=1, max_size=50))
def test_disagreement_brute_force(pairs):
    a, b = np.array(pairs).T
    assert metrics.disagreement(a, b) == pytest.approx(np.mean([x != y for x, y in pairs]))


def test_disagreement_of_probability_matrices_and_empty():
    p = np.array([[0.9, 0.1], [0.4, 0.6], [0.2, 0.8]])
    r = np.array([[0.6, 0.4], [0.7, 0.3], [0.1, 0.9]])
    assert metrics.disagreement(p, r) == pytest.approx(1 / 3)
    assert metrics.disagreement(np.array([]), np.array([])) == 0.0


def _report(total):
    total = np.asarray(total, dtype=float)
    n = len(total)
    return CostReport(
        feature=total,
        evaluation=np.zeros(n),
        total=total,
        n_trees=np.full(n, 3),
        n_nodes=np.full(n, 7),
        acquired=np.zeros((n, 2), dtype=bool),
        fixed=2.0,
    )


def _evaluation(raw, labels=None, proba=None, total=None):
    raw = np.asarray(raw, dtype=float)
    return Evaluation(
        raw=raw,
        proba=proba,
        labels=labels,
        exit=np.zeros(len(raw), dtype=np.int64),
        cost=_report(np.ones(len(raw)) if total is None else total),
    )


def test_cost_statistics():
    total = np.arange(1.0, 101.0)
    stats = metrics.cost_statistics(_report(total))
    assert stats["mean"] == pytest.approx(50.5) and stats["max"] == 100.0
    assert stats["median"] == pytest.approx(np.median(total))
    assert stats["q90"] == pytest.approx(np.quantile(total, 0.9))
    assert stats["q99"] == pytest.approx(np.quantile(total, 0.99))
    assert stats["n"] == 100 and stats["fixed"] == 2.0 and stats["mean_trees"] == 3.0
    assert metrics.cost_statistics(_evaluation(np.zeros(100), total=total)) == stats
    with pytest.raises(TypeError, match="CostReport"):
        metrics.cost_statistics(total)


def test_score_per_task():
    y = np.array([0, 1, 1, 0])
    ev = _evaluation([-1.0, 2.0, -0.5, -3.0], labels=np.array([0, 1, 0, 0]), proba=np.full((4, 2), 0.5))
    assert metrics.score("binary", y, ev) == ("accuracy", 0.75)
    assert metrics.score("binary", y, np.array([0, 1, 1, 1])) == ("accuracy", 0.75)
    assert metrics.accuracy(y, ev) == 0.75
    assert (
        metrics.auc(
            y,
            _evaluation(
                [0.1, 0.8, 0.7, 0.2], proba=np.array([[0.9, 0.1], [0.2, 0.8], [0.3, 0.7], [0.8, 0.2]])
            ),
        )
        == 1.0
    )
    yc = np.array(["a", "b", "c"])
    assert metrics.score("multiclass", yc, np.array(["a", "b", "b"])) == ("accuracy", pytest.approx(2 / 3))

    yr = np.array([3, 0, 1, 0, 0, 2])
    qid = np.array([0, 0, 0, 1, 1, 1])
    s = np.array([0.1, 0.9, 0.5, 0.3, 0.2, 0.1])
    name, value = metrics.score("ranking", yr, _evaluation(s), qid=qid)
    assert name == "ndcg@10" and value == pytest.approx(bf_ndcg(yr, s, qid, 10))
    both = metrics.task_scores("ranking", yr, _evaluation(s), qid=qid)
    assert list(both) == ["ndcg@10", "precision@5"]
    assert both["precision@5"] == pytest.approx(bf_precision(yr, s, qid, 5))
    with pytest.raises(ValueError, match="qid"):
        metrics.score("ranking", yr, s)

    yreg = np.array([1.0, 2.0, 4.0])
    assert metrics.score("regression", yreg, np.array([1.0, 3.0, 2.0])) == (
        "rmse",
        pytest.approx(np.sqrt(5 / 3)),
    )
    assert metrics.score("regression", yreg, _evaluation([1.0, 2.0, 4.0]))[1] == 0.0
    three = metrics.task_scores("regression", yreg, _evaluation([1.0, 3.0, 2.0]))
    assert list(three) == ["rmse", "mae", "r2"]
    assert three["mae"] == pytest.approx(1.0) and three["r2"] == pytest.approx(1 - 5 / (14 / 3))
    binary = metrics.task_scores("binary", y, ev, classes=[0, 1])
    assert list(binary) == ["accuracy", "balanced_accuracy", "auc"] and binary["auc"] == 0.5
    with pytest.raises(ValueError, match="unknown task"):
        metrics.score("clustering", y, y)
    with pytest.raises(ValueError, match="labels"):
        metrics.score("binary", y, _evaluation([0.0, 1.0, 0.0, 1.0]))


def test_balanced_accuracy_and_macro_auc_match_scikit_learn():
    from sklearn.metrics import balanced_accuracy_score, roc_auc_score

    from thrifty.metrics import balanced_accuracy, macro_auc

    rng = np.random.default_rng(4)
    y = rng.choice([3, 5, 7], size=200, p=[0.7, 0.2, 0.1])
    proba = rng.dirichlet(np.ones(3), size=200)
    pred = np.array([3, 5, 7])[proba.argmax(axis=1)]
    assert balanced_accuracy(y, pred) == pytest.approx(balanced_accuracy_score(y, pred))
    assert balanced_accuracy(y, np.full(200, 3)) == pytest.approx(1 / 3)  # constant: 1/n_classes
    assert macro_auc(y, proba, [3, 5, 7]) == pytest.approx(
        roc_auc_score(y, proba, multi_class="ovr", average="macro", labels=[3, 5, 7])
    )
    binary = (y == 3).astype(int)
    assert macro_auc(binary, proba[:, [1, 0]]) == pytest.approx(roc_auc_score(binary, proba[:, 0]))
    assert np.isnan(macro_auc(np.zeros(5), np.full((5, 2), 0.5)))


def test_wilson_interval_matches_scipy():
    from scipy.stats import binomtest

    from thrifty.metrics import wilson_interval

    for k, n in [(0, 10), (7, 10), (91, 91), (400, 1000)]:
        ci = binomtest(k, n).proportion_ci(0.95, method="wilson")
        assert wilson_interval(k, n) == pytest.approx((ci.low, ci.high))
    assert all(np.isnan(wilson_interval(0, 0)))


def test_bootstrap_interval_brackets_the_statistic_and_resamples_groups():
    from thrifty.metrics import bootstrap_interval

    x = np.random.default_rng(0).normal(size=400)
    low, high = bootstrap_interval(lambda idx: x[idx].mean(), len(x))
    # The normal-theory interval of a mean: about +-1.96 standard errors.
    se = x.std() / np.sqrt(len(x))
    assert low < x.mean() < high
    assert high - low == pytest.approx(2 * 1.96 * se, rel=0.15)
    groups = np.repeat(np.arange(40), 10)
    values = np.repeat(np.random.default_rng(1).normal(size=40), 10)  # constant within groups
    low, high = bootstrap_interval(lambda idx: values[idx].mean(), 400, groups=groups)
    # Resampling whole groups: the width of 40 independent values, not of 400.
    se = values[::10].std() / np.sqrt(40)
    assert high - low == pytest.approx(2 * 1.96 * se, rel=0.2)


@pytest.mark.parametrize("metric", [metrics.accuracy, metrics.balanced_accuracy])
def test_label_metrics_refuse_probabilities(metric):
    # Probabilities passed where labels belong would compare floats to labels: always 0.
    with pytest.raises(ValueError, match="needs predicted labels"):
        metric(np.array([0, 1]), np.array([[0.9, 0.1], [0.2, 0.8]]))


# ----------------------------------------------------------------------------- regression
@FAST
@given(
    st.lists(
        st.tuples(st.floats(-1e6, 1e6), st.floats(-1e6, 1e6)),
        min_size=2,
        max_size=40,
    )
)
def test_regression_metrics_match_scikit_learn(pairs):
    from sklearn.metrics import mean_absolute_error, mean_squared_error, r2_score

    y, p = (np.array(c) for c in zip(*pairs))
    assert metrics.rmse(y, p) == pytest.approx(np.sqrt(mean_squared_error(y, p)), abs=1e-6)
    assert metrics.mae(y, p) == pytest.approx(mean_absolute_error(y, p), abs=1e-6)
    if np.ptp(y) > 1e-3:
        assert metrics.r2(y, p) == pytest.approx(r2_score(y, p), rel=1e-9, abs=1e-9)
    else:
        assert np.isnan(metrics.r2(np.full(3, 2.0), [1.0, 2.0, 3.0]))


def test_regression_metrics_refuse_bad_shapes():
    with pytest.raises(ValueError, match="one prediction per row"):
        metrics.rmse([1.0, 2.0], np.ones((2, 3)))
    with pytest.raises(ValueError, match="different numbers"):
        metrics.mae([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="at least one row"):
        metrics.r2([], [])


def test_direction_of_each_metric():
    assert not metrics.higher_is_better("rmse") and not metrics.higher_is_better("log_loss")
    assert metrics.higher_is_better("ndcg@10") and metrics.higher_is_better("r2")
    assert all(
        metrics.higher_is_better(names[0]) != (task == "regression")
        for task, names in metrics.TASK_METRICS.items()
    )


@FAST
@given(ranking_data(ties=False), st.integers(1, 12))
def test_per_query_metrics_match_scikit_learn_query_by_query(data, k):
    y, s, q = data
    ndcg = metrics.ndcg_per_query(y, s, q, k=k, no_relevant="zero")
    precision = metrics.precision_per_query(y, s, q, k=k)
    for j, query in enumerate(np.unique(q)):  # per-query values come in sorted-id order
        m = q == query
        # scikit-learn's gain is the label itself: give it 2**label - 1.
        expected = ndcg_score([2.0 ** y[m] - 1], [s[m]], k=k) if len(y[m]) > 1 else float(y[m][0] > 0)
        assert ndcg[j] == pytest.approx(expected)
        top = np.argsort(-s[m])[:k]
        assert precision[j] == pytest.approx(np.sum(y[m][top] >= 1) / k)
    assert metrics.ndcg_at_k(y, s, q, k=k, no_relevant="zero") == pytest.approx(ndcg.mean())
    assert metrics.precision_at_k(y, s, q, k=k) == pytest.approx(precision.mean())
