"""The serving path of compiled plans: each call's result is the interpreter's, field for field,
on its own (independent of later calls and of other threads), and pickles as a plain one."""

from __future__ import annotations

import pickle
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import thrifty
from tests._helpers.compiled_plans import PLANS as COMPILED_PLANS
from tests._helpers.compiled_plans import input_matrices
from tests._helpers.reference import random_inputs
from tests._helpers.runtime_costs import N_FEATURES, cost_model
from thrifty import CostModel, CostReport, Evaluation, Full, Sequential, evaluate
from thrifty.exceptions import InputError
from thrifty.runtime.compiled.raw_path import DeferredEvaluation
from thrifty.runtime.compiled.serving import SMALL, ScoresEvaluation, ServingCostReport, ServingEvaluation

# Inputs on and around the random forests' thresholds (-1, 0, 0.5, 1, 2.5), some of which
# float32 rounds onto a threshold (1 + 1e-12 -> 1.0) or to infinity (1e39).
VALUES = st.sampled_from(
    [-1.0, 0.0, -0.0, 0.5, 1.0, 2.5, 1.0 + 1e-12, 2.5 + 1e-12, 0.5 + 1e-13, -1.0 - 1e-12, 1e39, -1e39]
    + [3.0, 33.0, -0.5, np.inf, -np.inf, np.nan, 1e-36, 3.4028235e38]
) | st.floats(-3, 40, allow_nan=False)

REPORT_FIELDS = ("feature", "evaluation", "total", "n_trees", "n_nodes", "acquired")


# The compiled tests' plans that have a serving path: Full and Sequential plans (float32
# inputs, bins, subsets of trees, multiclass margins).
PLANS = {name: plan for name, plan in COMPILED_PLANS.items() if isinstance(plan, (Full, Sequential))}
# Groups and dependencies in the prices (a panel of two features, a derived feature), and
# prices for trees and splits.
COSTS = cost_model(tree_cost=0.25, split_cost=0.125)
# Prices whose sums round differently in different orders (1e-16 + 1e-16 + 1.0 is not
# 1.0 + 1e-16 + 1e-16): the native code must pay each example's units in the interpreter's
# order to agree bit for bit.
ODD_COSTS = CostModel(
    {"x0": 1e-16, "x3": 1.0, "x4": 1 / 3, "x5": 0.1, "panel": 1e-16},
    feature_names=[f"x{i}" for i in range(N_FEATURES)],
    groups={"panel": ["x1", "x2"]},
    dependencies={"x4": ["x0", "x3"], "x5": ["x2"]},
    tree_cost=0.1,
    split_cost=0.3,
)
_COMPILED: dict[tuple[str, int], thrifty.CompiledPlan] = {}


def compiled(name: str, costs: CostModel = COSTS) -> thrifty.CompiledPlan:
    key = (name, id(costs))
    if key not in _COMPILED:
        _COMPILED[key] = thrifty.compile(PLANS[name], costs)
        assert _COMPILED[key].serving is not None
    return _COMPILED[key]


def assert_identical(got: Evaluation, want: Evaluation) -> None:
    """Every field of two evaluations equal, with the same dtypes and shapes."""
    assert isinstance(got, Evaluation) and isinstance(got.cost, CostReport)
    pairs = [(name, getattr(got, name), getattr(want, name)) for name in ("raw", "proba", "labels", "exit")]
    pairs += [(name, getattr(got.cost, name), getattr(want.cost, name)) for name in REPORT_FIELDS]
    for name, a, b in pairs:
        if b is None:
            assert a is None, name
            continue
        assert a.dtype == b.dtype and a.shape == b.shape, (name, a.dtype, b.dtype, a.shape, b.shape)
        np.testing.assert_array_equal(a, b, err_msg=name)
    assert got.cost.fixed == want.cost.fixed
    assert got.cost.feature_names == want.cost.feature_names
    assert got.cost.latency is None and want.cost.latency is None
    np.testing.assert_array_equal(got.predictions, want.predictions)


@pytest.mark.parametrize("costs", [COSTS, ODD_COSTS], ids=["costs", "odd-costs"])
@pytest.mark.parametrize("name", sorted(PLANS))
@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(X=input_matrices(N_FEATURES, SMALL + 6, VALUES))
def test_served_results_are_the_interpreters(name, costs, X):
    """0 to SMALL + 6 rows (the per-thread buffers and past them), read field by field."""
    kept = X.copy()
    c = compiled(name, costs)
    # ``serve`` itself: ``evaluate`` takes a plan without exits' scores first (test_ir_vraw.py).
    got = c.serving.serve(X)
    assert type(got) is ServingEvaluation and type(got.cost) is ServingCostReport
    assert_identical(got, evaluate(PLANS[name], X, costs))
    assert_identical(c.evaluate(X), evaluate(PLANS[name], X, costs))
    # The float32 forests' inputs are rounded on the path's own copy, never in the caller's.
    np.testing.assert_array_equal(X, kept)


@pytest.mark.parametrize("name", ["full-float32", "sequential", "sequential-multiclass"])
def test_one_row_at_a_time_and_large_batches(name):
    rng = np.random.default_rng(3)
    X = random_inputs(rng, 3000, N_FEATURES)
    X[::7, 2] = 1.0 + 1e-12  # float32 rounds these onto the threshold 1.0
    plan, c = PLANS[name], compiled(name)
    want = evaluate(plan, X, COSTS)
    assert_identical(c.evaluate(X), want)
    assert_identical(evaluate(c, X), want)
    for i in range(0, 200, 7):
        assert_identical(c.evaluate(X[i : i + 1]), evaluate(plan, X[i : i + 1], COSTS))
    # Other numeric dtypes and layouts are converted on the copy into the buffers.
    for Z in (X[:9].astype(np.float32), np.asfortranarray(X[:9]), (X[:9] > 0.5), np.arange(54).reshape(9, 6)):
        assert_identical(c.evaluate(Z), evaluate(plan, Z, COSTS))
    # The cost model the plan was compiled with, given again, takes the same path.
    assert type(evaluate(c, X[:3], c.costs)) is ServingEvaluation


def test_a_result_does_not_change_with_later_calls():
    """Each result owns its numbers: fields read only after many more calls (which reuse the
    thread's buffers) are still the first call's."""
    rng = np.random.default_rng(4)
    X = random_inputs(rng, 120, N_FEATURES)
    c = compiled("sequential")
    first = [c.evaluate(X[i : i + 1]) for i in range(60)] + [c.evaluate(X[60:90]), c.evaluate(X[90:120])]
    for _ in range(3):
        c.evaluate(X[::-1][:40])
    got = [first[i] for i in range(60)]
    want = [evaluate(PLANS["sequential"], X[i : i + 1], COSTS) for i in range(60)]
    got += first[60:]
    want += [evaluate(PLANS["sequential"], X[60:90], COSTS), evaluate(PLANS["sequential"], X[90:120], COSTS)]
    for g, w in zip(got, want):
        assert_identical(g, w)


def test_threads_calling_at_once_get_their_own_results():
    """Three threads serve calls of 1 to SMALL rows at once (the native code releases the GIL,
    so one thread's call runs while another copies its rows in): each gets its own rows'
    results."""
    rng = np.random.default_rng(5)
    X = random_inputs(rng, 3000, N_FEATURES)
    plan, c = PLANS["sequential-multiclass"], compiled("sequential-multiclass")
    calls = [(lo, lo + int(rng.integers(1, SMALL + 1))) for lo in rng.integers(0, 3000 - SMALL, 300)]
    want = [evaluate(plan, X[lo:hi], COSTS) for lo, hi in calls]
    start = threading.Barrier(3)
    out: dict[int, list] = {}

    def serve(k: int) -> None:
        start.wait()
        out[k] = [
            (j, c.evaluate(X[lo:hi])) for _ in range(3) for j, (lo, hi) in enumerate(calls) if j % 3 == k
        ]

    workers = [threading.Thread(target=serve, args=(k,)) for k in range(3)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert sum(len(v) for v in out.values()) == 3 * len(calls)
    for results in out.values():
        for j, ev in results:
            assert_identical(ev, want[j])


def test_a_served_result_behaves_as_a_plain_one():
    pd = pytest.importorskip("pandas")
    X = random_inputs(np.random.default_rng(6), 30, N_FEATURES)
    plan = PLANS["sequential-bins"]
    got, want = compiled("sequential-bins").evaluate(X), evaluate(plan, X, COSTS)
    # Pickled (to a Dask client, say): a plain Evaluation and CostReport of the same numbers.
    back = pickle.loads(pickle.dumps(got))
    assert type(back) is Evaluation and type(back.cost) is CostReport
    assert_identical(back, want)
    report = pickle.loads(pickle.dumps(compiled("sequential-bins").evaluate(X).cost))
    assert type(report) is CostReport
    assert got.cost.summary() == want.cost.summary()
    assert repr(got.cost) == repr(want.cost)
    pd.testing.assert_frame_equal(got.cost.to_frame(), want.cost.to_frame())
    np.testing.assert_array_equal(got.cost.acquisition_rate(), want.cost.acquisition_rate())
    # Fields can be assigned, as a service does with the latency it measured.
    got.cost.latency = np.zeros(len(X))
    got.raw = got.raw + 1.0
    np.testing.assert_array_equal(got.raw, want.raw + 1.0)
    assert got.cost.latency is not None and back.cost.latency is None


def test_no_rows():
    for name in ("full", "sequential-multiclass"):
        got = compiled(name).evaluate(np.empty((0, N_FEATURES)))
        assert_identical(got, evaluate(PLANS[name], np.empty((0, N_FEATURES)), COSTS))


def test_the_plans_evaluate_is_the_serving_paths_and_falls_back_as_the_class_method_does():
    """A compiled plan with a serving path evaluates through it directly (one Python call a
    one-row call); what the path does not take (lists, other widths and dimensions, text) goes
    to the general path, with the same results and errors as ``CompiledPlan.evaluate``."""
    c = compiled("full")
    assert c.evaluate == c.serving.evaluate
    general = type(c).evaluate
    rng = np.random.default_rng(5)
    X = random_inputs(rng, 5, N_FEATURES)
    for Z in (X, X[:1], X[:0], X[:2].tolist(), X[0].tolist(), X.astype(np.float32), X.astype(object)):
        try:
            want = general(c, Z, n_threads=1)
        except Exception as exc:  # the same refusal, word for word
            with pytest.raises(type(exc)) as got:
                c.evaluate(Z, n_threads=1)
            assert str(got.value) == str(exc)
            continue
        assert_identical(c.evaluate(Z, n_threads=1), want)
    for bad in (X[:, :-1], X[None], np.array(["a"] * N_FEATURES)[None]):
        with pytest.raises(Exception) as want_exc:
            general(c, bad)
        with pytest.raises(type(want_exc.value)) as got_exc:
            c.evaluate(bad)
        assert str(got_exc.value) == str(want_exc.value) and "\n" not in str(got_exc.value)
    with pytest.raises(Exception, match=str(N_FEATURES)):
        c.evaluate(X[:1, :-1])
    # Plans without a serving path keep the class's method.
    gated = thrifty.compile(COMPILED_PLANS["gated"], COSTS)
    assert gated.serving is None and "evaluate" not in vars(gated)
    assert_identical(gated.evaluate(X[:1]), evaluate(COMPILED_PLANS["gated"], X[:1], COSTS))
    # Pickled and rebuilt, the plan binds its new serving path.
    again = pickle.loads(pickle.dumps(c))
    assert again.evaluate == again.serving.evaluate
    assert_identical(again.evaluate(X[:1]), c.evaluate(X[:1]))


def _row_of(ev: Evaluation, i: int) -> list[tuple[str, np.ndarray | None]]:
    """Every per-example field of row ``i`` of an evaluation."""
    fields = [(name, getattr(ev, name)) for name in ("raw", "proba", "labels", "exit")]
    fields += [(name, getattr(ev.cost, name)) for name in REPORT_FIELDS]
    return [(name, None if a is None else a[i : i + 1]) for name, a in fields]


def assert_row(got: Evaluation, batch: Evaluation, i: int, form: str) -> None:
    """A one-row evaluation equal, field for field and bit for bit, to row ``i`` of a batch's."""
    for (name, a), (_, b) in zip(_row_of(got, 0), _row_of(batch, i)):
        if b is None:
            assert a is None, (form, name)
            continue
        assert a.dtype == b.dtype and a.shape == b.shape, (form, name, a.shape, b.shape)
        np.testing.assert_array_equal(a, b, err_msg=f"{form}: {name}")


@pytest.mark.parametrize("name", ["full", "full-float32", "sequential-multiclass"])
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(X=input_matrices(N_FEATURES, 6, VALUES).filter(len), at=st.integers(0, 5))
def test_one_row_in_every_form_a_caller_passes_is_its_row_of_a_batch(name, X, at):
    """A one-row call (the lanes, or a branchy plan's scores-first path) on each form of row
    a caller may hold: its own copy, a view of a larger matrix's row, a column slice of a wider
    matrix (not contiguous), reversed strides, Fortran order, a one-row DataFrame; and float32
    rows against a float32 batch. The batch (over ``SMALL`` rows) runs the rows through the
    vector blocks."""
    pd = pytest.importorskip("pandas")
    i = at % len(X)
    c = compiled(name)
    big = np.vstack([X] * (SMALL // len(X) + 1))
    batch = c.evaluate(big)
    wide = np.hstack([X, np.full((len(X), 3), np.nan)])
    forms = {
        "own copy": X[i : i + 1].copy(),
        "row view": big[i : i + 1],
        "column slice": wide[i : i + 1, :N_FEATURES],
        "reversed strides": X[:, ::-1][i : i + 1, ::-1],
        "Fortran order": np.asfortranarray(X[i : i + 1]),
    }
    for form, row in forms.items():
        got = c.evaluate(row, n_threads=1)
        # The serving path's lanes (scores only or not), or the scores-first path of a plan
        # that has one.
        assert type(got) in (ServingEvaluation, ScoresEvaluation, DeferredEvaluation), form
        assert_row(got, batch, i, form)
    assert_row(c.evaluate(pd.DataFrame(X[i : i + 1])), batch, i, "DataFrame")
    with np.errstate(over="ignore"):  # 1e39 is infinity in float32, as a caller's cast makes it
        X32 = big.astype(np.float32)
    assert_row(c.evaluate(X32[i : i + 1]), c.evaluate(X32), i, "float32")
    # The caller's rows are as they were (float32 forests round on the path's copy).
    np.testing.assert_array_equal(wide[:, :N_FEATURES], X)


def test_a_row_of_the_wrong_shape_is_refused_in_one_line_naming_the_fix():
    c = compiled("full")
    row = np.zeros(N_FEATURES)
    with pytest.raises(InputError, match=r"reshape\(1, -1\)") as flat:
        c.evaluate(row)
    for width in (N_FEATURES - 1, N_FEATURES + 1):
        with pytest.raises(InputError, match=f"{width} features.*expects {N_FEATURES}") as wrong:
            c.evaluate(np.zeros((1, width)))
        assert "\n" not in str(wrong.value)
    assert "\n" not in str(flat.value)
