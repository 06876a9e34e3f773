"""CatBoost's multiclass probabilities bit for bit (``thrifty.forest.catboost_softmax``): against
``predict_proba`` on raw scores hypothesis draws through a model's scale and bias (large,
small, equal and overflowing scores, 2 to 41 classes), and the exponential's CPU paths against
their definitions."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests._helpers.importers import SETTINGS, make_data
from thrifty import compile as compile_plan
from thrifty.costs import CostModel
from thrifty.forest import Forest, raw_to_proba
from thrifty.forest.catboost_softmax import catboost_softmax, cpu_group, fast_exp

cb = pytest.importorskip("catboost")

QUIET = {"verbose": 0, "thread_count": 1, "allow_writing_files": False}
CLASSES = (2, 3, 4, 5, 7, 9, 41)
AVX2 = cpu_group() == 4


@pytest.fixture(scope="module")
def models():
    """A small MultiClass model per class count, with the rows it is evaluated on."""
    rng = np.random.default_rng(11)
    out = {}
    for k in CLASSES:
        X = make_data(rng, n=max(300, 20 * k))
        y = np.arange(len(X)) % k
        model = cb.CatBoostClassifier(loss_function="MultiClass", iterations=4, depth=3, **QUIET)
        out[k] = (model.fit(X, y), X[:64])
    return out


_SCALES = st.one_of(
    st.sampled_from([0.0, 1.0, 1e-300, 700.0, 3000.0, 1e300, 1.7e308]),
    st.floats(0.0, 1e4, allow_nan=False),
)


@given(data=st.data())
@SETTINGS
def test_probabilities_equal_catboosts_on_any_raw_scores(models, data):
    """Scale and bias move every row's raw scores: gaps past 708 (exp's lower clamp, and the
    last ``k mod 4`` classes' zero), equal scores (scale 0, repeated biases) and sums that
    overflow to +-inf (scale 1.7e308). CatBoost's ``predict_proba``, bit for bit."""
    k = data.draw(st.sampled_from(CLASSES))
    model, X = models[k]
    model = model.copy()
    scale = data.draw(_SCALES, label="scale")
    pool = st.floats(-1e3, 1e3) | st.sampled_from([0.0, 1.0, -709.0, 708.4, 1e6])
    bias = data.draw(st.lists(pool, min_size=k, max_size=k), label="bias")
    model.set_scale_and_bias(scale, bias)
    forest = Forest.from_model(model)
    raw = model.predict(X, prediction_type="RawFormulaVal")
    np.testing.assert_array_equal(forest.predict_raw(X), raw)
    expected = model.predict_proba(X)
    if not AVX2:
        pytest.skip("checked against CatBoost on AVX2 only: see catboost_softmax's notes")
    np.testing.assert_array_equal(forest.predict_proba(X), expected)
    np.testing.assert_array_equal(catboost_softmax(raw), expected)


@pytest.mark.skipif(not AVX2, reason="CatBoost's AVX2 path")
def test_the_c_librarys_softmax_would_differ(models):
    """The check above can fail: NumPy's exp softmax (LightGBM's link) misses some rows."""
    model, X = models[7]
    raw = model.predict(X, prediction_type="RawFormulaVal")
    assert np.any(raw_to_proba(raw, "softmax") != model.predict_proba(X))
    np.testing.assert_array_equal(raw_to_proba(raw, "catboost_softmax"), model.predict_proba(X))


@pytest.mark.parametrize("k", [3, 9])
def test_compiled_plans_give_the_interpreters_probabilities(models, k):
    model, X = models[k]
    forest = Forest.from_model(model)
    ev = compile_plan(forest, CostModel(np.ones(forest.n_features))).evaluate(X)
    np.testing.assert_array_equal(ev.proba, forest.predict_proba(X))
    np.testing.assert_array_equal(ev.proba, model.predict_proba(X))


_Z = st.one_of(
    st.floats(-800.0, 0.0),
    st.sampled_from([0.0, -0.0, -708.39641853226408, -708.3964185322641, -708.4, -1e308, -np.inf, np.nan]),
)


@given(z=st.lists(st.lists(_Z, min_size=7, max_size=7), min_size=1, max_size=6))
@SETTINGS
def test_exponential_paths(z):
    """Each CPU path against its definition: the vector code on whole groups (4 on AVX2, 2 on
    SSE2) clamps below at -708.396... and reads NaN as its upper bound; the rest of the row
    takes the scalar code, 0 at and below that bound and NaN for NaN; the C library's exp
    off x86. Inside the bounds every path is the same function, near exp: fmath rounds
    ``n * ln2 / 2048`` once, an error growing with ``|z|`` (8e-14 relative near -700)."""
    z = np.array(z)
    four, two, c = fast_exp(z, 4), fast_exp(z, 2), fast_exp(z, 0)
    np.testing.assert_array_equal(c, np.vectorize(math.exp)(z))
    low = z <= -708.39641853226408
    for out, group in ((four, 4), (two, 2)):
        vector = np.arange(7) < 7 - 7 % group
        assert np.all(out[low & vector] > 0) and np.all(out[low & vector] < 3e-308)
        assert np.all(out[low & ~vector] == 0)
        assert np.all(np.isnan(out[np.isnan(z) & ~vector]))
        assert np.all(np.isinf(out[np.isnan(z) & vector]))
        inside = ~low & ~np.isnan(z)
        np.testing.assert_array_equal(out[inside], four[inside])
        bound = 4e-16 * (2.0 + np.abs(z[inside])) * c[inside]
        assert np.all(np.abs(out[inside] - c[inside]) <= bound)
