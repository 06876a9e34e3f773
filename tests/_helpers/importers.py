"""Data generators, hypothesis strategies and tolerances of the importer tests (tests/forest)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from thrifty.forest import Forest

# Few examples, no deadline (the first call may compile numba kernels); module-scoped model
# fixtures are shared across examples on purpose.
SETTINGS = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)

RTOL, ATOL = 1e-9, 1e-12


def make_data(
    rng: np.random.Generator,
    n: int = 300,
    n_features: int = 4,
    *,
    nan_fraction: float = 0.0,
    cat_levels: Mapping[int, int] | None = None,
    zero_fraction: float = 0.0,
) -> np.ndarray:
    """Gaussian features, some replaced by integer category codes, NaN and exact zeros."""
    X = rng.normal(size=(n, n_features))
    for j, levels in (cat_levels or {}).items():
        X[:, j] = rng.integers(0, levels, n)
    if zero_fraction:
        X[rng.random(X.shape) < zero_fraction] = 0.0
    if nan_fraction:
        X[rng.random(X.shape) < nan_fraction] = np.nan
    return X


class SplitValues(dict):
    """Feature -> values around its thresholds, with a short repr for hypothesis' reports."""

    def __repr__(self) -> str:
        return f"SplitValues({sum(len(v) for v in self.values())} values)"


def split_values(forest: Forest) -> SplitValues:
    """Per feature: the forest's thresholds and their float64/float32 neighbours.

    Inputs sitting exactly on (or one ulp around) a threshold are where off-by-one-ulp
    conversions of split conditions show up.
    """
    out = SplitValues()
    numeric = (forest.feature >= 0) & (forest.cat_start < 0)
    for j in np.unique(forest.feature[numeric]):
        t = np.unique(forest.threshold[numeric & (forest.feature == j)])
        t32 = t.astype(np.float32)
        out[int(j)] = np.unique(
            np.concatenate(
                [
                    t,
                    np.nextafter(t, np.inf),
                    np.nextafter(t, -np.inf),
                    t32.astype(np.float64),
                    np.nextafter(t32, np.float32(np.inf)).astype(np.float64),
                    np.nextafter(t32, np.float32(-np.inf)).astype(np.float64),
                ]
            )
        )
    return out


SPECIALS = [0.0, -0.0, 1e-36, -1e-36, 1e-35, -1e-35, 1e-300]


@st.composite
def matrices(
    draw: st.DrawFn,
    n_features: int,
    thresholds: Mapping[int, np.ndarray],
    *,
    categorical: Mapping[int, int] | None = None,
    nan: bool = True,
    inf: bool = True,
    max_rows: int = 30,
    min_rows: int = 0,
) -> np.ndarray:
    """A float64 matrix mixing arbitrary floats, threshold values, zeros, NaN and infinities.

    Categorical columns (index -> number of training levels) hold integer codes, including
    unseen ones beyond the training levels and negative ones.
    """
    categorical = dict(categorical or {})
    n = draw(st.integers(min_rows, max_rows))
    columns = []
    for j in range(n_features):
        if j in categorical:
            levels = categorical[j]
            cell = st.one_of(
                st.integers(-3, levels + 40).map(float), st.sampled_from([float(levels), 1e9, -1e9])
            )
        else:
            choices = [
                st.floats(-1e6, 1e6, allow_nan=False),
                st.sampled_from(SPECIALS),
                st.floats(allow_nan=False, allow_infinity=inf, width=32),
            ]
            values = np.asarray(thresholds.get(j, ()), dtype=np.float64)
            if not inf:  # e.g. scikit-learn's +inf threshold of NaN-only splits, and neighbours
                values = values[np.abs(values) <= np.finfo(np.float32).max]
            if len(values):
                choices.append(st.sampled_from(sorted(values.tolist())))
            cell = st.one_of(*choices)
        if nan:
            cell = st.one_of(cell, st.just(np.nan))
        columns.append(draw(st.lists(cell, min_size=n, max_size=n)))
    return np.asarray(columns, dtype=np.float64).T.reshape(n, n_features)


def assert_close(actual: np.ndarray, expected: np.ndarray, rtol: float = RTOL, atol: float = ATOL) -> None:
    """Equal shapes and values within the importer tolerance (1e-9 relative)."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol)
