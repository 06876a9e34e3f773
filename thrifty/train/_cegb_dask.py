"""CEGB and GreedyMiser on Dask collections: training through ``lightgbm.dask``, budgets measured
with :func:`thrifty.dask.evaluate` on the cluster.

The penalties are the ones used in memory, but LightGBM's data-parallel learner (the one
``lightgbm.dask`` runs) does not apply them as one machine does. Each feature's split gains are
computed on one worker only, the one its histogram is reduced to
(``DataParallelTreeLearner::FindBestSplitsFromHistograms``), and that worker counts the lazy
penalty ``beta_f * #(rows of the leaf that have not acquired f)`` over its OWN rows
(``CalculateOndemandCosts`` walks the local ``DataPartition``): about ``1/K`` of the count with
``K`` workers, and zero in a small leaf where the worker holds none of the unpaid rows. The
coupled (once per model) penalty is global, but ``UpdateLeafBestSplits`` credits it back to the
cached splits of one worker, so workers can disagree on the next leaf to split. Multiplying the
lazy penalties by ``K`` was measured and does not restore agreement (docs/scale.md), so no
parameter is changed here: a warning says the model can differ from a single-machine one.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from thrifty.exceptions import InputError

__all__ = ["dask_client", "is_dask", "warn_data_parallel"]


def is_dask(X: Any) -> bool:
    """Whether ``X`` is a Dask collection (DataFrame, Series or Array)."""
    return hasattr(X, "__dask_graph__") and hasattr(X, "dask")


def dask_client() -> Any:
    """The current ``distributed.Client`` (``lightgbm.dask`` trains on its workers)."""
    try:
        from distributed import default_client
    except ImportError as exc:  # pragma: no cover - only without the extra
        raise ImportError(
            "fitting on Dask collections needs the extra thrifty[dask] (`pip install 'thrifty[dask]'`)"
        ) from exc
    try:
        return default_client()
    except ValueError as exc:
        raise InputError(
            "fitting on a Dask collection needs a distributed Client: create one first, "
            "e.g. `distributed.Client(scheduler_address)` or `Client(LocalCluster())`"
        ) from exc


def check_dask_inputs(X: Any, y: Any, sample_weight: Any, calibration: Any) -> tuple[Any, Any, Any, Any]:
    """``(X, y, sample_weight, X_cal)`` as Dask collections with matching rows per partition."""
    import dask.array as da
    import dask.dataframe as dd

    if not isinstance(X, (dd.DataFrame, da.Array)):
        raise TypeError(f"a Dask X must be a Dask DataFrame or Array, got {type(X).__name__}")
    if isinstance(X, da.Array) and X.ndim != 2:
        raise InputError(f"a Dask Array X must be 2-D (rows, features), got {X.ndim}-D")
    if not is_dask(y):
        raise TypeError(
            "X is a Dask collection but y is not; give y as a Dask Series or Array partitioned like X"
        )
    if sample_weight is not None and not is_dask(sample_weight):
        raise TypeError(
            "X is a Dask collection but sample_weight is not; give it as a Dask Series "
            "or Array partitioned like X"
        )
    X_cal = X
    if calibration is not None:
        if not isinstance(calibration, tuple | list) or len(calibration) != 2:
            raise InputError(
                "on Dask, calibration must be a tuple (X_cal, y_cal) of Dask collections (calibration "
                f"weights are not supported there), got {type(calibration).__name__}"
            )
        X_cal = calibration[0]
        if not is_dask(X_cal):
            raise TypeError(
                "X is a Dask collection but the calibration X is not; give the calibration rows "
                "as a Dask collection too"
            )
        if X_cal.shape[1] != X.shape[1]:
            raise InputError(f"the calibration X has {X_cal.shape[1]} features but X has {X.shape[1]}")
    return X, y, sample_weight, X_cal


def mean_cost(forest: Any, X_cal: Any, costs: Any) -> float:
    """Mean cost per example of ``forest`` on the Dask calibration rows, computed on the cluster."""
    from thrifty.dask import cost_summary, evaluate

    return float(cost_summary(evaluate(forest, X_cal, costs), quantiles=()).mean)


def dask_labels(y: Any) -> np.ndarray:
    """The sorted distinct labels of a Dask Series or Array (computed on the cluster)."""
    if hasattr(y, "unique") and hasattr(y, "to_dask_array"):
        values = y.unique().compute()
    else:
        import dask.array as da

        values = da.unique(y).compute()
    return np.sort(np.asarray(values))


def warn_data_parallel(params: dict[str, Any], n_workers: int) -> None:
    """Warn that LightGBM's data-parallel CEGB differs from one machine's (see the module)."""
    lazy = any(params.get("cegb_penalty_feature_lazy") or [])
    coupled = any(params.get("cegb_penalty_feature_coupled") or [])
    if n_workers > 1 and (lazy or coupled):
        kind = " and ".join(k for k, on in (("per-example", lazy), ("once-per-model", coupled)) if on)
        warnings.warn(
            f"{kind} feature costs trained on {n_workers} Dask workers: LightGBM's "
            "data-parallel learner counts them per worker, so the model can use more "
            "features than one trained on one machine at the same trade-off (budgets are "
            "still measured exactly; see docs/scale.md)",
            UserWarning,
            stacklevel=4,
        )
