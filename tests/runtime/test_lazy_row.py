"""One-row lazy requests of a compiled plan (``compiled.lazy_row``): per-row state reused across
requests, results read from the row's native state.

Each request must ask for what the interpreter's lazy rounds ask for, round by round, and end in
dense evaluation's result bit for bit (every field, its dtype and shape), whatever the plan, the
width, the cost model and the values; and reusing state must never leak one request into
another: requests interleaved on one thread, running on several threads at once, abandoned
half-way (closed, failed or dropped) and followed by new ones.
"""

from __future__ import annotations

import dataclasses
import gc
import pickle
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import thrifty
from tests._helpers.compiled_plans import PLANS, VALUES, input_matrices
from tests._helpers.reference import random_forest
from tests._helpers.runtime_costs import N_FEATURES, cost_model
from thrifty import CostModel, Full, Sequential, evaluate
from thrifty.exceptions import InputError
from thrifty.runtime import lazy_rounds
from thrifty.runtime.compiled.lazy_row import KEEP, RowEvaluation
from thrifty.runtime.evaluation import Evaluation
from thrifty.runtime.lazy.policies import Prefetch

COSTS = cost_model(tree_cost=0.25, split_cost=0.125)
OTHER = cost_model(tree_cost=1.5, split_cost=0.0)
FIELDS = ("feature", "evaluation", "total", "n_trees", "n_nodes", "acquired")
SETTINGS = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def _base_last(forest):
    return dataclasses.replace(
        forest, base_score=np.full(forest.n_outputs, 0.1234567), base_last=True, scale=0.37
    )


def _wide(F: int):
    rng = np.random.default_rng(F)
    forest = random_forest(rng, F, n_trees=12, max_depth=5)
    return Sequential(forest, rng.permutation(12), np.full(12, 1.0), np.full(12, -1.0))


_RNG = np.random.default_rng(3)
ROW_PLANS = {name: plan for name, plan in PLANS.items() if isinstance(plan, (Full, Sequential))}
ROW_PLANS["full-base-last"] = Full(_base_last(random_forest(_RNG, N_FEATURES, n_trees=9)))
ROW_PLANS["full-multiclass-base-last"] = Full(
    _base_last(random_forest(_RNG, N_FEATURES, n_trees=9, n_outputs=3))
)
ROW_PLANS["sequential-base-last"] = Sequential(
    ROW_PLANS["full-base-last"].forest, _RNG.permutation(9), np.full(9, 1.5), np.full(9, -1.5)
)
# A scale below 0: the plan runs the forest's mirror image (``plans._base_last_exits``).
ROW_PLANS["sequential-negative-scale"] = Sequential(
    dataclasses.replace(ROW_PLANS["full-base-last"].forest, scale=-0.37),
    _RNG.permutation(9),
    np.full(9, 1.5),
    np.full(9, -1.5),
)
WIDE = {F: _wide(F) for F in (64, 65, 130)}


pytestmark = pytest.mark.usefixtures("private_compile_cache")


_COMPILED: dict = {}


def compiled(key, plan, costs=COSTS):
    if key not in _COMPILED:
        _COMPILED[key] = thrifty.compile(plan, costs)
    return _COMPILED[key]


def requests_of(gen, x):
    """Drive ``gen`` answering from the one row ``x``; the evaluation and the rounds seen."""
    seen = []
    try:
        request = next(gen)
        while True:
            seen.append([(f, rows.tolist()) for f, rows in request])
            request = gen.send([x[rows, f].copy() for f, rows in request])
    except StopIteration as stop:
        return stop.value, seen


def assert_identical(a, b):
    """Every field equal bit for bit, with the same dtype and shape."""
    for name in ("raw", "exit", "proba", "labels"):
        u, v = getattr(a, name), getattr(b, name)
        if v is None:
            assert u is None, name
            continue
        assert u.dtype == v.dtype and u.shape == v.shape, name
        np.testing.assert_array_equal(u, v, err_msg=name)
    for name in FIELDS:
        u, v = getattr(a.cost, name), getattr(b.cost, name)
        assert u.dtype == v.dtype and u.shape == v.shape, name
        np.testing.assert_array_equal(u, v, err_msg=name)
    assert a.cost.fixed == b.cost.fixed
    assert a.cost.feature_names == b.cost.feature_names


def one_row(plan, code, x, costs, given=None, rounds="in_order"):
    """The one-row request on ``code`` (priced by ``given``: None for its own cost model)
    against the interpreter's rounds and (without a prefetch) dense evaluation under ``costs``."""
    ev, seen = requests_of(lazy_rounds(code, given, n_rows=1, rounds=rounds), x)
    ref, ref_seen = requests_of(lazy_rounds(plan, costs, n_rows=1, rounds=rounds), x)
    assert type(ev) is RowEvaluation
    assert seen == ref_seen
    assert_identical(ev, ref)
    if not isinstance(rounds, Prefetch):
        assert_identical(ev, evaluate(plan, x, costs))
    elif seen:
        # A prefetch is paid for once the row waits for a round, tested or not.
        assert ev.cost.acquired[0, rounds.features].all()
    return ev


@pytest.mark.parametrize("name", sorted(ROW_PLANS))
@SETTINGS
@given(X=input_matrices(N_FEATURES, max_rows=3))
def test_one_row_requests_are_the_interpreters_and_dense(name, X):
    plan = ROW_PLANS[name]
    code = compiled(name, plan)
    for x in X:
        row = x[None]
        one_row(plan, code, row, COSTS)
        # Another cost model than the compiled plan's own.
        one_row(plan, code, row, OTHER, OTHER)


@pytest.mark.parametrize("name", sorted(ROW_PLANS))
@SETTINGS
@given(
    X=input_matrices(N_FEATURES, max_rows=2),
    fetch=st.lists(st.integers(0, N_FEATURES - 1), unique=True, max_size=4),
    parallel=st.booleans(),
)
def test_one_row_requests_under_every_policy(name, X, fetch, parallel):
    """``"parallel"`` and prefetches (then parallel or in order) on one row: the interpreter's
    rounds, requests and charges."""
    plan = ROW_PLANS[name]
    code = compiled(name, plan)
    prefetch = Prefetch(np.array(fetch, dtype=np.int64), N_FEATURES, parallel)
    for x in X:
        for rounds in ("parallel", prefetch):
            one_row(plan, code, x[None], COSTS, rounds=rounds)
            one_row(plan, code, x[None], OTHER, OTHER, rounds=rounds)


@pytest.mark.parametrize("F", sorted(WIDE))
@SETTINGS
@given(data=st.data())
def test_one_row_requests_over_64_features(F, data):
    x = np.array([data.draw(st.lists(VALUES, min_size=F, max_size=F))])
    plan = WIDE[F]
    costs = CostModel(
        {f"x{i}": 1.0 + (i % 7) / 3 for i in range(F)}, feature_names=[f"x{i}" for i in range(F)]
    )
    code = compiled(("wide", F), plan, costs)
    one_row(plan, code, x, costs, costs)
    one_row(plan, code, x, costs, costs, rounds="parallel")
    # Features in every word of the tested set, the last one's top bit included.
    fetch = np.unique(np.array([0, 63, F - 1], dtype=np.int64))
    one_row(plan, code, x, costs, costs, rounds=Prefetch(fetch, F, data.draw(st.booleans())))


def _rows(n=12, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.choice([-1.0, 0.0, 0.5, 1.0, 2.5, 7.0, 33.0, np.nan, np.inf], size=(n, N_FEATURES))
    return X, [evaluate(PLANS["sequential"], X[i : i + 1], COSTS) for i in range(n)]


def test_interleaved_requests_on_one_thread_keep_their_own_state():
    code = compiled("sequential", PLANS["sequential"])
    X, want = _rows()
    # Twice: the second time the requests take the states the first ones gave back.
    for _ in range(2):
        gens = [lazy_rounds(code, n_rows=1) for _ in range(len(X))]
        pending = {i: next(g) for i, g in enumerate(gens)}
        done = {}
        # One round of each request in turn, until every one has finished.
        while pending:
            for i in list(pending):
                f, rows = pending[i][0]
                try:
                    pending[i] = gens[i].send([X[i : i + 1][rows, f]])
                except StopIteration as stop:
                    done[i] = stop.value
                    del pending[i]
        for i, ev in done.items():
            assert_identical(ev, want[i])


def test_requests_on_several_threads_at_once():
    code = compiled("sequential", PLANS["sequential"])
    X, want = _rows(24, seed=1)
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def work(k):
        try:
            start.wait()
            for rep in range(30):
                i = (k * 7 + rep) % len(X)
                ev, _ = requests_of(lazy_rounds(code, n_rows=1), X[i : i + 1])
                assert_identical(ev, want[i])
        except BaseException as exc:  # reported on the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


@pytest.mark.parametrize("how", ["close", "bad-answer", "dropped"])
def test_a_request_abandoned_half_way_leaves_nothing_behind(how):
    code = compiled("full", PLANS["full"])
    X, _ = _rows()
    want = [evaluate(PLANS["full"], X[i : i + 1], code.costs) for i in range(len(X))]
    row = code.lazy_row(None)
    abandoned = 0
    for i in range(len(X)):
        gen = lazy_rounds(code, n_rows=1)
        try:
            # The first value known, then the request abandoned: its state must be reset.
            f, rows = next(gen)[0]
            gen.send([X[i : i + 1][rows, f]])
            abandoned += 1
            if how == "close":
                gen.close()
            elif how == "bad-answer":
                with pytest.raises(InputError, match="send one array of values"):
                    gen.send([])
            else:
                del gen
                gc.collect()
        except StopIteration:
            pass  # a row that needed at most one feature
        assert len(row.free) <= KEEP
        j = (i + 5) % len(X)
        ev, _ = requests_of(lazy_rounds(code, n_rows=1), X[j : j + 1])
        assert_identical(ev, want[j])
    assert abandoned > len(X) // 2


def test_bad_values_get_one_line_errors():
    code = compiled("full", PLANS["full"])
    x = np.full((1, N_FEATURES), 0.5)
    gen = lazy_rounds(code, n_rows=1)
    next(gen)
    with pytest.raises(InputError, match="non-numeric"):
        gen.send([np.array(["a"])])
    gen = lazy_rounds(code, n_rows=1)
    next(gen)
    with pytest.raises(InputError, match="send one value per requested row"):
        gen.send([np.array([0.5, 1.0])])
    gen = lazy_rounds(code, n_rows=1)
    request = next(gen)
    with pytest.raises(InputError, match="1 was requested, got none"):
        gen.send(None)
    # Lists, integer and float32 arrays and (1, 1) arrays are values too.
    x = np.array([[0.0, 1.0, 7.0, -1.0, 33.0, 2.0, 3.0, 0.0][j % 8] for j in range(N_FEATURES)])[None]
    kinds = [
        lambda v: [float(v)],
        lambda v: np.array([v], dtype=np.int64),
        lambda v: np.array([[v]]),
        lambda v: np.array([v], dtype=np.float32),
    ]
    for rounds in ("in_order", "parallel"):
        gen = lazy_rounds(code, n_rows=1, rounds=rounds)
        request, k = next(gen), 0
        try:
            while True:
                answers = []
                for f, _ in request:
                    answers.append(kinds[k % len(kinds)](x[0, f]))
                    k += 1
                request = gen.send(answers)
        except StopIteration as stop:
            assert k >= 2
            assert_identical(stop.value, evaluate(PLANS["full"], x, code.costs))
    # A bad value among several of a round is named too.
    gen = lazy_rounds(code, n_rows=1, rounds="parallel")
    request = next(gen)
    with pytest.raises(InputError, match="non-numeric"):
        gen.send([np.array(["a"])] * len(request))


def test_requests_share_one_read_only_row_id_array():
    code = compiled("full", PLANS["full"])
    gen = lazy_rounds(code, n_rows=1)
    ((f, rows),) = next(gen)
    assert rows.tolist() == [0] and rows.dtype == np.int64 and not rows.flags.writeable
    gen.close()


def test_the_result_pickles_as_a_plain_evaluation_and_fields_can_be_set():
    code = compiled("full-multiclass", PLANS["full-multiclass"])
    X, _ = _rows()
    ev, _ = requests_of(lazy_rounds(code, n_rows=1), X[:1])
    back = pickle.loads(pickle.dumps(ev))
    assert type(back) is Evaluation
    assert_identical(back, ev)
    ev.cost.latency = np.array([0.5])  # as the server's batcher sets it
    assert ev.cost.latency.tolist() == [0.5]


def test_chunks_and_several_rows_take_the_general_rounds():
    code = compiled("sequential", PLANS["sequential"])
    X, want = _rows(4)
    ev, _ = requests_of(lazy_rounds(code, n_rows=1, chunk_size=1), X[:1])
    assert type(ev) is not RowEvaluation
    assert_identical(ev, want[0])


def test_a_bad_policy_is_refused_on_one_row_too():
    code = compiled("sequential", PLANS["sequential"])
    with pytest.raises(InputError, match="rounds must be"):
        lazy_rounds(code, n_rows=1, rounds="sideways")
    with pytest.raises(InputError, match="Prefetch was made for 3 features"):
        lazy_rounds(code, n_rows=1, rounds=Prefetch(np.array([0]), 3))
