"""``thrifty.dask.evaluate``: score a Dask DataFrame or Array partition by partition on a cluster."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import dask
import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd

from thrifty.costs import CostModel
from thrifty.exceptions import InputError
from thrifty.runtime.evaluate import Evaluation
from thrifty.runtime.evaluate import evaluate as evaluate_local
from thrifty.runtime.plans import Plan, as_plan

ProviderFactory = Callable[["PartitionInfo"], Callable[[np.ndarray, np.ndarray], Any]]

# Distinct costs a partition's digest counts exactly; beyond this the summary's quantiles come
# from fixed-size per-partition sketches (approximate).
_EXACT_DISTINCT = 50_000
# Points of a partition's quantile sketch.
_SKETCH_POINTS = 1001


@dataclass(frozen=True)
class PartitionInfo:
    """What a provider factory is told about the partition it serves.

    Attributes
    ----------
    number : int
        Position of the partition in the collection.
    rows : DataFrame
        The partition of ``data`` (e.g. the keys that identify its rows in the user's store).
        The provider is called with row ids ``0 .. len(rows) - 1``, positions in this frame.
    """

    number: int
    rows: pd.DataFrame

    @property
    def n_rows(self) -> int:
        return len(self.rows)


def evaluate(
    model: Any,
    data: Any,
    costs: CostModel | None = None,
    *,
    provider_factory: ProviderFactory | None = None,
    n_threads: int = 1,
    chunk_size: int | None = None,
) -> dd.DataFrame:
    """Score a Dask collection: one output row per example, with what it cost (lazy).

    Parameters
    ----------
    model : Plan, Forest, fitted thrifty estimator, supported model, or a picklable compiled plan
        Converted to a plan once on the client; the plan is a single task of the graph, so
        each worker receives it once (not once per partition).
    data : dask DataFrame or 2-D dask Array
        Dense mode: the feature values (DataFrame ``category`` columns are read by value, as
        :func:`thrifty.evaluate` reads them). Lazy mode (``provider_factory`` given): any
        DataFrame whose partitions identify the rows to score (e.g. a key column).
    costs : CostModel, optional
        Prices; default 1 per feature.
    provider_factory : callable, optional
        Lazy acquisition: ``provider_factory(PartitionInfo) -> provider``, called once per
        partition on the worker that scores it; the provider is called as in
        :func:`thrifty.evaluate` with row ids local to the partition and fetches only the
        features the partition's rows need.
    n_threads : int, default=1
        Kernel threads per partition task (match the worker's threads).
    chunk_size : int, optional
        Rows a task evaluates at once (bounds a worker's memory; default as ``thrifty.evaluate``).

    Returns
    -------
    dask DataFrame
        Indexed like ``data``; columns ``prediction`` (label for classifiers, raw score
        otherwise; ``raw_k`` per output for multi-output regressors), ``proba_<class>`` per
        class for classifiers, ``exit``, ``cost`` (total), ``feature_cost``,
        ``evaluation_cost`` and ``n_trees``. Nothing runs until it is computed.
    """
    plan = _shippable(model)
    if costs is not None and not isinstance(costs, CostModel):
        raise TypeError(f"costs must be a thrifty CostModel, got {type(costs).__name__}")
    if provider_factory is not None and not callable(provider_factory):
        raise TypeError("provider_factory must be callable: provider_factory(partition_info) -> provider")
    frame, as_array = _as_frame(data)
    classes = _classes(plan)
    options: dict[str, Any] = {
        "as_array": as_array,
        "provider_factory": provider_factory,
        "classes": None if classes is None else [str(c) for c in classes],
        "n_threads": int(n_threads),
        "chunk_size": chunk_size,
    }
    # Scoring the empty meta on the client checks the model, costs and columns before any work
    # and gives the output's exact dtypes.
    meta = _score_partition(frame._meta, (plan, costs), **options)
    # One named task holds the plan: every partition task depends on it by key, so the graph
    # carries it once and a worker fetches it once.
    shipped = dask.delayed((plan, costs), name=f"thrifty-plan-{uuid.uuid4().hex}")
    return frame.map_partitions(_score_partition, shipped, **options, meta=meta, enforce_metadata=False)


def _shippable(model: Any) -> Any:
    """The object sent to the workers: the model's plan, or a plan-like object (e.g. a
    compiled plan) that :func:`thrifty.evaluate` accepts, as it is."""
    if isinstance(model, Plan):
        return model
    try:
        return as_plan(model)
    except (TypeError, ValueError, AttributeError):
        if hasattr(model, "evaluate") and hasattr(model, "__reduce_ex__"):
            return model
        raise


def _classes(plan: Any) -> Any:
    """The classes of a plan, or of the plan a plan-like object (a compiled plan) runs."""
    return getattr(plan, "classes", getattr(getattr(plan, "plan", None), "classes", None))


def _as_frame(data: Any) -> tuple[dd.DataFrame, bool]:
    if isinstance(data, dd.DataFrame):
        return data, False
    if isinstance(data, da.Array):
        if data.ndim != 2:
            raise InputError(f"a Dask Array to score must be 2-D (rows, features), got {data.ndim}-D")
        # One block per row range: a row's features must sit in one partition.
        return dd.from_dask_array(data.rechunk({1: -1})), True
    raise TypeError(
        f"data must be a Dask DataFrame or Array, got {type(data).__name__}; for data "
        "in memory use thrifty.evaluate, or wrap it with dask.dataframe.from_pandas"
    )


def _no_provider(features: np.ndarray, rows: np.ndarray) -> np.ndarray:
    raise AssertionError("an empty partition fetched a feature")  # pragma: no cover


def _score_partition(
    part: pd.DataFrame,
    shipped: tuple[Any, CostModel | None],
    *,
    as_array: bool,
    provider_factory: ProviderFactory | None,
    classes: list[str] | None,
    n_threads: int,
    chunk_size: int | None,
    partition_info: dict | None = None,
) -> pd.DataFrame:
    plan, costs = shipped
    n = len(part)
    if provider_factory is not None:
        provider: Callable[[np.ndarray, np.ndarray], Any] = _no_provider
        if n:
            number = partition_info["number"] if partition_info else 0
            provider = provider_factory(PartitionInfo(number=number, rows=part))
        ev = evaluate_local(plan, provider, costs, n_rows=n, n_threads=n_threads, chunk_size=chunk_size)
    else:
        X = part.to_numpy(dtype=np.float64) if as_array else part
        ev = evaluate_local(plan, X, costs, n_threads=n_threads, chunk_size=chunk_size)
    return _as_table(ev, part.index, classes)


def _as_table(ev: Evaluation, index: pd.Index, classes: list[str] | None) -> pd.DataFrame:
    columns: dict[str, Any] = {}
    if ev.labels is None and np.ndim(ev.raw) == 2:
        columns.update({f"raw_{k}": ev.raw[:, k] for k in range(ev.raw.shape[1])})
    else:
        columns["prediction"] = ev.predictions
    if ev.proba is not None:
        names = classes or [str(k) for k in range(ev.proba.shape[1])]
        columns.update({f"proba_{c}": ev.proba[:, k] for k, c in enumerate(names)})
    columns["exit"] = ev.exit
    columns["cost"] = ev.cost.total
    columns["feature_cost"] = ev.cost.feature
    columns["evaluation_cost"] = ev.cost.evaluation
    columns["n_trees"] = ev.cost.n_trees
    return pd.DataFrame(columns, index=index)


@dataclass
class CostSummary:
    """The distribution of the cost per example over a scored collection.

    Attributes
    ----------
    n : int
        Examples.
    mean, max, min : float
        Exact (reduced from every partition).
    feature_mean, evaluation_mean : float
        Exact means of the feature and evaluation parts of the cost.
    quantiles : dict of float to float
        Cost quantiles (numpy's default, linear interpolation between order statistics).
    quantiles_exact : bool
        True when every quantile is exact: the costs take at most 50,000 distinct values (the
        usual case: a cost is a sum of a few prices), so exact value counts are reduced. Else
        the quantiles merge per-partition sketches of 1,001 quantiles each (rank error of
        about 1/1,000 of a partition's rows per partition merged).
    """

    n: int
    mean: float
    max: float
    min: float
    feature_mean: float
    evaluation_mean: float
    quantiles: dict[float, float] = field(default_factory=dict)
    quantiles_exact: bool = True


def cost_summary(
    scored: dd.DataFrame, quantiles: Sequence[float] = (0.5, 0.9, 0.99), *, compute: bool = True
) -> Any:
    """Summarise the costs of :func:`evaluate`'s output on the cluster, in one pass.

    Each partition is reduced to a small digest (counts, sums, extremes, and its distinct costs
    with their counts, or a quantile sketch when it has too many), and digests are merged in a
    tree; only the merged digest reaches the client.

    Parameters
    ----------
    scored : dask DataFrame
        :func:`evaluate`'s output (columns ``cost``, ``feature_cost``, ``evaluation_cost``).
    quantiles : sequence of float in [0, 1]
    compute : bool, default=True
        False returns a ``dask.delayed`` object instead (compute it together with other
        outputs, e.g. ``to_parquet(..., compute=False)``, to score only once).

    Returns
    -------
    CostSummary (or a Delayed of it)
    """
    qs = [float(q) for q in quantiles]
    if any(not 0 <= q <= 1 for q in qs):
        raise InputError(f"quantiles must be in [0, 1], got {qs}")
    missing = {"cost", "feature_cost", "evaluation_cost"} - set(scored.columns)
    if missing:
        raise InputError(f"scored lacks column(s) {sorted(missing)}; pass thrifty.dask.evaluate's output")
    parts = scored[["cost", "feature_cost", "evaluation_cost"]].to_delayed()
    digests = [dask.delayed(_digest)(p) for p in parts]
    while len(digests) > 1:
        digests = [dask.delayed(_merge)(*digests[i : i + 8]) for i in range(0, len(digests), 8)]
    result = dask.delayed(_summarise)(digests[0], qs)
    return result.compute() if compute else result


def _digest(part: pd.DataFrame) -> dict[str, Any]:
    cost = part["cost"].to_numpy(dtype=np.float64)
    n = len(cost)
    digest: dict[str, Any] = {
        "n": n,
        "sum": float(cost.sum()),
        "feature": float(part["feature_cost"].sum()),
        "evaluation": float(part["evaluation_cost"].sum()),
        "max": float(cost.max()) if n else -np.inf,
        "min": float(cost.min()) if n else np.inf,
    }
    values, counts = np.unique(cost, return_counts=True)
    if len(values) <= _EXACT_DISTINCT:
        digest["values"], digest["counts"] = values, counts.astype(np.float64)
    else:
        digest["values"] = np.quantile(cost, np.linspace(0, 1, _SKETCH_POINTS))
        digest["counts"] = np.full(_SKETCH_POINTS, n / _SKETCH_POINTS)
        digest["approximate"] = True
    return digest


def _merge(*digests: dict[str, Any]) -> dict[str, Any]:
    out = {"n": sum(d["n"] for d in digests), "approximate": any(d.get("approximate") for d in digests)}
    for key in ("sum", "feature", "evaluation"):
        out[key] = sum(d[key] for d in digests)
    out["max"] = max(d["max"] for d in digests)
    out["min"] = min(d["min"] for d in digests)
    values = np.concatenate([d["values"] for d in digests])
    counts = np.concatenate([d["counts"] for d in digests])
    if out["approximate"]:
        out["values"], out["counts"] = values, counts
        if len(values) > 8 * _SKETCH_POINTS:  # keep a merged sketch small
            order = np.argsort(values, kind="stable")
            values, counts = values[order], counts[order]
            at = np.searchsorted(
                np.cumsum(counts), np.linspace(0, counts.sum(), _SKETCH_POINTS), side="left"
            ).clip(0, len(values) - 1)
            out["values"], out["counts"] = values[at], np.full(_SKETCH_POINTS, counts.sum() / _SKETCH_POINTS)
        return out
    uniq, inverse = np.unique(values, return_inverse=True)
    out["values"], out["counts"] = uniq, np.bincount(inverse, weights=counts)
    return out


def _summarise(digest: dict[str, Any], qs: list[float]) -> CostSummary:
    digest = _merge(digest)
    n = int(digest["n"])
    if n == 0:
        nan = float("nan")
        return CostSummary(0, nan, nan, nan, nan, nan, {q: nan for q in qs}, True)
    return CostSummary(
        n=n,
        mean=digest["sum"] / n,
        max=digest["max"],
        min=digest["min"],
        feature_mean=digest["feature"] / n,
        evaluation_mean=digest["evaluation"] / n,
        quantiles={q: _weighted_quantile(digest["values"], digest["counts"], q) for q in qs},
        quantiles_exact=not digest["approximate"],
    )


def _weighted_quantile(values: np.ndarray, counts: np.ndarray, q: float) -> float:
    """``np.quantile`` (linear) of the multiset where ``values[i]`` occurs ``counts[i]`` times."""
    order = np.argsort(values, kind="stable")
    values, counts = values[order], counts[order]
    ends = np.cumsum(counts)  # order statistic k (0-based) is values[i] for k < ends[i]
    pos = q * (ends[-1] - 1)
    lo, frac = int(np.floor(pos)), pos - np.floor(pos)
    a = values[np.searchsorted(ends, lo, side="right")]
    b = values[min(len(values) - 1, int(np.searchsorted(ends, lo + 1, side="right")))]
    return float(a + frac * (b - a))
