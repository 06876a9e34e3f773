"""Scores-only entries compiled in the background (``objects.background_scores``): the plan
answers from ``thrifty.compile``'s return, on the serving path until ``raw`` is loaded and
then on ``raw``, bit for bit the same; the cache holds every entry once they are compiled;
a failed background compile leaves the serving path and says so once."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import thrifty
import thrifty.runtime.compiled.objects as objects
from tests._helpers.compiled_plans import PLANS, assert_same, input_matrices
from tests._helpers.runtime_costs import N_FEATURES, cost_model
from thrifty import evaluate
from thrifty.runtime.compiled import cache
from thrifty.runtime.compiled.choice import BLOCKS_ENV, SECOND_ENV
from thrifty.runtime.compiled.raw_path import DeferredEvaluation
from thrifty.runtime.compiled.serving import SMALL

ROOT = Path(__file__).resolve().parents[2]
COSTS = cost_model(tree_cost=0.25, split_cost=0.125)
SLOW = [HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
# Around the row counts where calls change entry or buffers: none, one row (the lanes), the
# per-thread buffers' ``SMALL``, a vector of rows plus one, and a second entry's 512 rows.
ROWS = [0, 1, 2, 3, 9, 17, SMALL, SMALL + 1, 257, 511, 512, 513]


@pytest.fixture(params=["vector", "branchy"])
def kind(request, monkeypatch, tmp_path):
    """Each test compiles into an empty cache of its own, the scores in the background, with a
    second scores entry (vector plans: branchy scores for one row; branchy plans: vector
    scores from 512 rows)."""
    monkeypatch.setenv("THRIFTY_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("THRIFTY_BACKGROUND", "on")
    monkeypatch.setenv(SECOND_ENV, "on")
    monkeypatch.setenv(BLOCKS_ENV, request.param)
    return request.param


@pytest.fixture
def held(monkeypatch):
    """The background compile waits for ``held.set()`` before its helpers start."""
    gate = threading.Event()
    emit = objects._emit_helpers

    def waiting(irs, level):
        assert gate.wait(120), "the test never released the background compile"
        return emit(irs, level)

    monkeypatch.setattr(objects, "_emit_helpers", waiting)
    yield gate
    gate.set()


def _matrix(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    X = rng.uniform(-5, 70, (n, N_FEATURES))
    X[rng.random(X.shape) < 0.1] = np.nan
    X[rng.random(X.shape) < 0.05] = np.inf
    return X


@pytest.mark.parametrize("name", ["full", "full-multiclass"])
def test_the_same_answers_before_and_after_raw_arrives(name, kind, held):
    plan = PLANS[name]
    compiled = thrifty.compile(plan, COSTS)
    code = compiled.forest_code.code
    assert compiled.raw_path is None and code.raw is None and not code.wait(0)
    before = {}
    for n in ROWS:
        ev = compiled.evaluate(_matrix(n, n))
        assert not isinstance(ev, DeferredEvaluation)  # the serving path, not scores first
        before[n] = ev
        assert_same(ev, evaluate(plan, _matrix(n, n), COSTS))
    held.set()
    assert compiled.wait(120) and code.raw is not None and code.second is not None
    assert compiled.raw_path is not None and compiled.serving.first is not None
    assert code.ready_seconds >= code.compile_seconds
    for n in ROWS:
        after = compiled.evaluate(_matrix(n, n))
        np.testing.assert_array_equal(after.raw, before[n].raw)
        assert_same(after, before[n])
    # Beyond one row, calls now take the scores first.
    assert isinstance(compiled.evaluate(_matrix(SMALL + 1)), DeferredEvaluation)


def test_the_cache_holds_the_blocks_first_then_every_entry(kind, held):
    """While the scores compile the entry has the blocks alone (a process that stops then
    loses nothing else); once they arrive, every entry, and a new process loads them all
    (here: a new compile of the same plan, from the cache, with ``raw`` at once)."""
    plan = PLANS["full"]
    compiled = thrifty.compile(plan, COSTS)
    code = compiled.forest_code.code
    blocks = cache.read(code.key)
    assert blocks is not None
    held.set()
    assert code.wait(120)
    every = cache.read(code.key)
    assert every is not None and every[: len(blocks)] == blocks and len(every) > len(blocks)
    again = thrifty.compile(plan, COSTS)
    assert again.forest_code.code.from_cache and again.raw_path is not None
    X = _matrix(300)
    assert_same(again.evaluate(X), compiled.evaluate(X))


def test_a_partial_entry_is_completed_on_load(kind, held, monkeypatch):
    """A process that loads an entry without the scores (its compiler stopped early)
    compiles them; with ``THRIFTY_BACKGROUND=off`` before it returns."""
    plan = PLANS["full"]
    stopped = thrifty.compile(plan, COSTS).forest_code.code
    key = stopped.key
    partial_entry = cache.read(key)
    monkeypatch.setenv("THRIFTY_BACKGROUND", "off")
    loaded = thrifty.compile(plan, COSTS)
    assert loaded.forest_code.code.from_cache and loaded.raw_path is not None
    assert len(cache.read(key)) > len(partial_entry)
    X = _matrix(100)
    assert_same(loaded.evaluate(X), evaluate(plan, X, COSTS))
    held.set()  # the first compile's scores finish here, not in a later test
    assert stopped.wait(120)


def test_a_failed_background_compile_keeps_the_serving_path(kind, monkeypatch):
    def failing(irs, results, h, level=1):
        results[h] = None  # as a helper that could not start

    monkeypatch.setattr(objects, "_helper", failing)
    plan = PLANS["full"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled = thrifty.compile(plan, COSTS)
        assert compiled.forest_code.code.wait(120)
    said = [w for w in caught if "background failed" in str(w.message)]
    assert len(said) == 1 and "THRIFTY_BACKGROUND=off" in str(said[0].message)
    assert compiled.raw_path is None and compiled.forest_code.code.raw is None
    for n in (1, 50, 600):
        assert_same(compiled.evaluate(_matrix(n, n)), evaluate(plan, _matrix(n, n), COSTS))


@settings(max_examples=6, deadline=None, suppress_health_check=SLOW)
@given(X=input_matrices(N_FEATURES, max_rows=150))
def test_hypothesis_rows_before_and_after(X, kind, held):
    """NaN, infinities, values on thresholds, category codes; 0 to 150 rows."""
    held.clear()
    plan = PLANS["full"]
    compiled = thrifty.compile(plan, COSTS)
    code = compiled.forest_code.code
    first = compiled.evaluate(X) if code.raw is None else None
    held.set()
    assert code.wait(120)
    after = compiled.evaluate(X)
    reference = evaluate(plan, X, COSTS)
    assert_same(after, reference)
    if first is not None:
        assert_same(first, reference)


def test_the_rule_takes_large_plans(monkeypatch):
    """``auto``: plans of at least ``BACKGROUND_TREES`` positions; ``on``/``off`` force it."""

    class Lay:
        def __init__(self, n):
            self.order = np.arange(n)

    monkeypatch.setenv("THRIFTY_BACKGROUND", "auto")
    assert objects.background_scores(Lay(objects.BACKGROUND_TREES))  # type: ignore[arg-type]
    assert not objects.background_scores(Lay(objects.BACKGROUND_TREES - 1))  # type: ignore[arg-type]
    monkeypatch.setenv("THRIFTY_BACKGROUND", "off")
    assert not objects.background_scores(Lay(10**4))  # type: ignore[arg-type]
    monkeypatch.setenv("THRIFTY_BACKGROUND", "on")
    assert objects.background_scores(Lay(1))  # type: ignore[arg-type]
    monkeypatch.setenv("THRIFTY_BACKGROUND", "sometimes")
    with pytest.raises(ValueError, match="THRIFTY_BACKGROUND"):
        objects.background_scores(Lay(1))  # type: ignore[arg-type]


CHILD = """
import sys, time
import numpy as np
import thrifty
import thrifty.runtime.compiled.objects as objects
from tests._helpers.reference import random_forest
forest = random_forest(np.random.default_rng(5), 8, n_trees=40, max_depth=6)
# Helpers that take a minute: a sleeper in the interpreter's place.
sys.executable = sys.argv[1]
thrifty.compile(thrifty.Full(forest))
for _ in range(6000):
    if objects._HELPERS:
        break
    time.sleep(0.01)
print(" ".join(str(p.pid) for p in objects._HELPERS), flush=True)
"""


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_a_process_that_exits_ends_its_background_helpers(tmp_path):
    """A script that returns before its scores compile leaves no helper process running."""
    env = {**os.environ, "THRIFTY_CACHE_DIR": str(tmp_path), "THRIFTY_BACKGROUND": "on"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    sleeper = tmp_path / "sleeper"
    sleeper.write_text("#!/bin/sh\nexec sleep 60\n")
    sleeper.chmod(0o755)
    args = [sys.executable, "-c", CHILD, str(sleeper)]
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    pids = [int(p) for p in done.stdout.split()]
    assert pids, "no helper was running when the script ended"
    deadline = time.monotonic() + 3  # killed at once; left alone they compile for longer
    while pids and time.monotonic() < deadline:
        pids = [p for p in pids if Path(f"/proc/{p}").exists() and "Z" not in _state(p)]
        time.sleep(0.1)
    assert not pids, f"helper processes {pids} outlived their parent"


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return "Z"
