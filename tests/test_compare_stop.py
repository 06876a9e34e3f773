"""A time allowance is kept even when a fit started before its end runs far past it: compare
stops waiting, names the fit in ``Comparison.cut`` and ends the workers of its own pool."""

import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from thrifty.comparison import METHODS, Candidate, Method, compare
from thrifty.comparison.pool import _cancel, _stop, local_pool

FAST = {"n_estimators": 20, "num_leaves": 8, "n_jobs": 1}
#: Far longer than the allowance the tests give.
SLEEP = 8.0


def _slow(ctx):
    """A method whose first fit outlasts any allowance here (a first fit on many rows)."""
    time.sleep(SLEEP)
    yield Candidate("late", ctx.lightgbm())


def _compare_with_slow(monkeypatch, fit, allowance: float):
    """``compare`` of LightGBM and a method fitting by ``fit`` under ``allowance`` seconds, in
    threads (they see the method registered here; a process pool's workers would not); the
    sleeping thread cannot be ended, so the pool is left without waiting for it. The
    comparison and the call's wall seconds."""
    monkeypatch.setitem(METHODS, "slow", Method("slow", "Slow method", "post-hoc", ("binary",), fit))
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 4))
    y = (X[:, 0] + 0.3 * rng.normal(size=400) > 0).astype(int)
    pool = ThreadPoolExecutor(2)
    start = time.perf_counter()
    try:
        cmp = compare(
            X,
            y,
            methods=["lightgbm", "slow"],
            time_limit=allowance,
            cv=0,
            executor=pool,
            progress=False,
            lightgbm_params=FAST,
        )
    finally:
        pool.shutdown(wait=False)
    return cmp, time.perf_counter() - start


def test_a_fit_running_past_the_allowance_is_given_up_and_named_in_the_cut(monkeypatch):
    cmp, elapsed = _compare_with_slow(monkeypatch, _slow, allowance=2.0)
    assert elapsed < SLEEP - 2.0  # not waited for
    assert "Slow method" not in set(cmp.table["method"])
    assert "LightGBM, first k trees" in set(cmp.table["method"])
    assert ("Slow method", "every setting", "not fitted: the time allowance ran out") in cmp.cut
    assert cmp.stopped_early


# loky's manager thread dying (a KeyError or InvalidStateError in its queue) fails the test.
@pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_local_pool_given_up_ends_its_workers_and_the_next_call_gets_a_new_pool():
    pool = local_pool(1)
    pool.submit(int, "1").result()  # the worker is up
    workers = list(pool._processes.values())
    running = pool.submit(time.sleep, 60)
    queued = [pool.submit(time.sleep, 60) for _ in range(3)]
    deadline = time.time() + 30
    while not running.running() and time.time() < deadline:
        time.sleep(0.05)
    # At the deadline run_tasks cancels what has not started, but not on its own pool.
    _cancel(pool, queued)
    assert not any(f.cancelled() for f in queued)
    _stop(pool, [running, *queued])
    deadline = time.time() + 30
    while any(p.is_alive() for p in workers) and time.time() < deadline:
        time.sleep(0.05)
    assert not any(p.is_alive() for p in workers)
    fresh = local_pool(1)
    assert fresh is not pool
    assert fresh.submit(int, "3").result(timeout=60) == 3
    # A pool the caller gave is not ended: only its futures are cancelled.
    with ThreadPoolExecutor(1) as theirs:
        queued = [theirs.submit(time.sleep, 0.2), theirs.submit(time.sleep, 0.2)]
        _stop(theirs, queued[1:])
        assert queued[1].cancelled() and theirs.submit(int, "4").result() == 4


@pytest.mark.parametrize("time_limit", [None, 60.0])
def test_under_an_allowance_every_fit_runs_in_a_worker_that_can_be_ended(monkeypatch, time_limit):
    """Without an allowance this process takes tasks beside its workers (one fewer to start);
    under one it takes none: a fit here could not be ended past the allowance."""
    import sys

    compare_module = sys.modules["thrifty.comparison.schedule"]  # where compare runs its stages

    seen = []

    def run_tasks(tasks, **kw):
        seen.append((kw["here"], kw["workers"]))
        return original(tasks, **kw)

    original = compare_module.run_tasks
    monkeypatch.setattr(compare_module, "run_tasks", run_tasks)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4))
    y = (X[:, 0] + 0.3 * rng.normal(size=300) > 0).astype(int)
    compare(
        X,
        y,
        methods=["lightgbm", "cheapest"],
        time_limit=time_limit,
        cv=2,
        n_jobs=2,
        progress=False,
        lightgbm_params=FAST,
    )
    assert seen and all(here is (time_limit is None) for here, _ in seen)
    assert all(workers == 2 for _, workers in seen)  # this process and one worker, or two workers


def test_fits_run_here_cannot_be_given_up_so_here_refuses_stop_at():
    from thrifty.comparison.pool import run_tasks
    from thrifty.exceptions import InputError

    with ThreadPoolExecutor(1) as pool, pytest.raises(InputError, match="here=False"):
        run_tasks([], executor=pool, here=True, stop_at=time.time() + 10)


def _slower(ctx):
    """A first fit that outlasts the whole allowance of the test below."""
    time.sleep(15.0)
    yield Candidate("late", ctx.lightgbm())


def test_the_whole_run_confirmation_included_ends_within_the_allowance(monkeypatch):
    """A fit still running is given up before the allowance's end, early enough to confirm the
    chosen models within it (it used to be given up 5% past the end, and the confirmation came
    after: letter's run took 264.7 s of 240)."""
    from thrifty.comparison.schedule import CONFIRM_SHARE, REFIT_GRACE, confirm_reserve, selection_deadlines

    allowance = 10.0
    cmp, elapsed = _compare_with_slow(monkeypatch, _slower, allowance)
    assert ("Slow method", "every setting", "not fitted: the time allowance ran out") in cmp.cut
    assert cmp.table["test_value"].notna().any()  # the baseline confirmed
    assert elapsed <= allowance
    assert cmp.seconds <= allowance
    # No fit starts in the grace before the give-up, which leaves the confirmation its part.
    kept = confirm_reserve(allowance, 0.0, 8)
    assert kept == pytest.approx(CONFIRM_SHARE * allowance)
    end, stop = selection_deadlines(100.0, allowance, 0.0, kept)
    assert stop == pytest.approx(100.0 - CONFIRM_SHARE * allowance)
    assert end == pytest.approx(stop - REFIT_GRACE * allowance)


def test_the_confirmations_reserve_grows_with_the_measured_scoring_time():
    """A machine six times as loaded (or models six times as large) scores the chosen models
    six times as long: the reserve follows the plain model's measured scoring, within bounds."""
    from thrifty.comparison.schedule import CONFIRM_MAX, CONFIRM_SHARE, confirm_reserve

    assert confirm_reserve(None, 10.0, 8) == 0.0
    assert confirm_reserve(240.0, 0.5, 8) == pytest.approx(CONFIRM_SHARE * 240.0)  # quiet: the share
    assert confirm_reserve(240.0, 3.0, 8) == pytest.approx(24.0)  # loaded: what it measured
    assert confirm_reserve(240.0, 30.0, 8) == pytest.approx(CONFIRM_MAX * 240.0)  # never most of it
