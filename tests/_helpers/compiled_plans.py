"""Compiled plans' test material: plans of every kind the compiler takes (PLANS), inputs drawn on
and around their thresholds (VALUES, input_matrices), and the check that a compiled plan gives
the interpreter's and lazy evaluation's results bit for bit (check, assert_same)."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

import thrifty
from tests._helpers.reference import random_forest
from tests._helpers.runtime_costs import N_FEATURES, lazy_provider
from thrifty import Full, Gated, Linear, Sequential, evaluate
from thrifty.runtime import BinnedExits

# Values the generated inputs draw from: thresholds of the random forests, category codes
# (negative, unseen, fractional), zeros, infinities and NaN.
VALUES = st.sampled_from(
    [
        -1.0,
        0.0,
        -0.0,
        0.5,
        1.0,
        2.5,
        1e-36,
        -1e-36,
        -0.5,
        -0.9,
        -1.5,
        3.0,
        7.0,
        31.0,
        32.0,
        33.0,
        63.9,
        64.0,
        1e30,
        np.inf,
        -np.inf,
        np.nan,
        0.49999999,
        1.0000001,
        -3.0,
    ]
) | st.floats(-5, 70, allow_nan=False)


def input_matrices(n_features: int, max_rows: int = 40, values: st.SearchStrategy = VALUES):
    """A strategy of float64 input matrices of 0 to ``max_rows`` rows, each cell drawn from
    ``values`` (not ``tests._helpers.importers.matrices``, which draws around a fitted model's
    thresholds for the importer tests)."""
    return (
        st.integers(0, max_rows)
        .flatmap(
            lambda n: st.lists(
                st.lists(values, min_size=n_features, max_size=n_features), min_size=n, max_size=n
            )
        )
        .map(lambda rows: np.array(rows, dtype=np.float64).reshape(-1, n_features))
    )


def assert_same(a, b, *, lazy: bool = False):
    """Two evaluations equal bit for bit (NaN-free outputs: equality is exact)."""
    np.testing.assert_array_equal(a.raw, b.raw)
    np.testing.assert_array_equal(a.exit, b.exit)
    for name in ("feature", "evaluation", "total", "n_trees", "n_nodes", "acquired"):
        np.testing.assert_array_equal(getattr(a.cost, name), getattr(b.cost, name), err_msg=name)
    if a.proba is not None:
        np.testing.assert_array_equal(a.proba, b.proba)
        np.testing.assert_array_equal(a.labels, b.labels)
    assert a.cost.fixed == b.cost.fixed


def check(plan, X, costs, *, native=True):
    """Compile ``plan`` (native code or not, as ``native`` says) and check that it gives the
    interpreter's results on ``X``, dense, one row and lazily; returns the compiled plan."""
    compiled = thrifty.compile(plan, costs)
    assert compiled.native is native
    reference = evaluate(plan, X, costs)
    assert_same(compiled.evaluate(X), reference)
    assert_same(evaluate(compiled, X), reference)
    # One row at a time (the serial path) and one large call agree too.
    if len(X) > 1:
        assert_same(evaluate(compiled, X[:1], costs), evaluate(plan, X[:1], costs))
    provider, _ = lazy_provider(X)
    assert_same(evaluate(compiled, provider, n_rows=len(X)), reference)
    return compiled


def _plans(seed: int) -> dict[str, thrifty.runtime.Plan]:
    rng = np.random.default_rng(seed)
    forest = random_forest(rng, N_FEATURES, n_trees=9)
    forest32 = random_forest(rng, N_FEATURES, n_trees=7, float32=True)
    multi = random_forest(rng, N_FEATURES, n_trees=9, n_outputs=3)
    order = rng.permutation(9)
    bins = BinnedExits(
        rng.uniform(0.2, 1.0, 9).round(2),
        [{int(b): (1.0, -1.0) for b in rng.integers(-3, 3, 3)} for _ in range(9)],
    )
    coef = np.zeros(N_FEATURES)
    coef[[0, 4]] = [0.5, -1.0]
    return {
        "full": Full(forest),
        "full-float32": Full(forest32),
        "full-multiclass": Full(multi),
        "sequential": Sequential(forest, order, np.full(9, 1.5), np.full(9, -1.5)),
        "sequential-bins": Sequential(forest, order, bins=bins),
        "sequential-subset": Sequential(forest, order[:5], np.full(5, 2.0), np.full(5, -np.inf)),
        "sequential-multiclass": Sequential(multi, rng.permutation(9), np.full(9, 0.8)),
        "gated": Gated(
            Linear(coef),
            Sequential(forest32, rng.permutation(7), np.full(7, 1.0), np.full(7, -1.0)),
            Full(forest),
        ),
        # Low and high run natively on the rows the gate routes to them.
        "gated-forests": Gated(
            Full(forest32), Sequential(forest, order, np.full(9, 1.0), np.full(9, -1.0)), Full(forest)
        ),
    }


# One plan of each kind the compiler takes, by name.
PLANS = _plans(7)


def plan_layout(plan):
    """The compiler's ``Layout`` of a Full or Sequential ``plan`` (its order and exit kinds), as
    ``tables.forest_code`` builds it."""
    from thrifty.runtime.compiled.layout import Layout
    from thrifty.runtime.compiled.tables import leaf_tables

    s = plan.schedule
    kinds = np.where(s.bins.width > 0, 2, np.isfinite(s.eps_pos) | np.isfinite(s.eps_neg)).astype(np.int8)
    return Layout(plan.forest, s.order, kinds, *leaf_tables(plan.forest)[1:])
