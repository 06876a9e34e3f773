"""compare's worker processes fit as this process does: one thread each, the same plans, and
each numba kernel compiled once across them (the others load it from the disk cache)."""

import sys
import time

import numpy as np
import pandas as pd
import pytest

from tests._helpers.worker_probe import KERNEL, compile_at, worker_state
from thrifty import CostModel
from thrifty.comparison.compare import _lightgbm_params
from thrifty.comparison.compile_once import installed, locked
from thrifty.comparison.pool import local_pool
from thrifty.comparison.settings import Settings
from thrifty.comparison.sweep import FitTask, fitting_context, run_task

#: The locks are flock(2)'s: without fcntl (Windows) each worker compiles for itself.
unix = pytest.mark.skipif(sys.platform == "win32", reason="kernel locks need fcntl")


@unix
def test_a_worker_runs_one_thread_and_compiles_under_locks():
    state = local_pool(1).submit(worker_state).result()
    assert state["env"] == dict.fromkeys(state["env"], "1")
    assert state["numba_threads"] == 1
    assert state["locks"]


@unix
def test_a_kernel_two_workers_need_at_once_is_compiled_by_one_and_loaded_by_the_other(tmp_path):
    path = tmp_path / "probe_kernels.py"
    path.write_text(KERNEL)
    pool = local_pool(2)
    # Both workers up and idle before the two calls start together.
    [f.result() for f in [pool.submit(worker_state) for _ in range(4)]]
    name = f"lockprobe{time.time_ns()}.kernels"
    start = time.time() + 1.0
    futures = [pool.submit(compile_at, str(path), name, start) for _ in range(2)]
    got = sorted(f.result() for f in futures)
    # (hits, misses): one compiled it (a miss), the other waited and loaded it (a hit).
    assert got == [(0, 1), (1, 0)]


@unix
def test_locked_compiles_under_locks_for_a_block_only_and_keeps_results():
    from numba import njit

    before = installed()
    with locked():
        assert installed()
        with locked():  # nested: the outer block keeps it
            pass
        assert installed()

        @njit(cache=False)
        def add(a, b):
            return a + b

        assert add(2, 3) == 5
    assert installed() == before


def test_a_qwyc_fit_in_a_worker_returns_the_plan_fitted_here():
    rng = np.random.default_rng(3)
    X = pd.DataFrame(rng.normal(size=(600, 5)), columns=[f"f{j}" for j in range(5)])
    y = (X["f0"] + 0.5 * X["f1"] + 0.4 * rng.normal(size=600) > 0).astype(int).to_numpy()
    costs = CostModel(np.arange(1.0, 6.0), feature_names=list(X.columns))
    params = {**_lightgbm_params(480, "binary", 1, None), "n_estimators": 30, "num_leaves": 8}
    settings = Settings(task="binary", costs=costs, budgets=(), lightgbm_params=params, n_jobs=1)
    ctx = fitting_context(settings, X.iloc[:480], y[:480], None)
    ctx.lightgbm()
    task = FitTask(
        "qwyc",
        0,
        settings,
        X.iloc[:480],
        y[:480],
        None,
        X_eval=X.iloc[480:],
        y_eval=y[480:],
        qid_eval=None,
        keep_models=True,
        shared=ctx.shared(),
        max_candidates=3,
    )
    here = run_task(task)
    there = local_pool(1).submit(run_task, task).result()
    assert [r["name"] for r in there.rows] == [r["name"] for r in here.rows] and len(here.rows) == 3
    for a, b in zip(here.rows, there.rows):
        assert (a["metric"], a["value"], a["mean_cost"]) == (b["metric"], b["value"], b["mean_cost"])
    for name, plan in here.models.items():
        other = there.models[name]
        np.testing.assert_array_equal(plan.order, other.order)
        np.testing.assert_array_equal(plan.eps_pos, other.eps_pos)
        np.testing.assert_array_equal(plan.eps_neg, other.eps_neg)


@unix
def test_a_recursive_kernel_compiles_under_the_locks(tmp_path, monkeypatch):
    import importlib.util

    from thrifty.comparison import compile_once

    path = tmp_path / "rec_kernels.py"
    path.write_text(
        "from numba import njit\n\n"
        "@njit(cache=True)\n"
        "def fib(n):\n"
        "    if n < 2:\n"
        "        return n\n"
        "    return fib(n - 1) + fib(n - 2)\n"
    )
    name = f"recprobe{time.time_ns()}"
    monkeypatch.setattr(compile_once, "PACKAGES", (*compile_once.PACKAGES, name + "."))
    spec = importlib.util.spec_from_file_location(f"{name}.kernels", path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, f"{name}.kernels", module)
    spec.loader.exec_module(module)
    with locked():
        assert module.fib(10) == 55
