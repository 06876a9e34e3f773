"""Cost–quality frontiers: evaluate a set of models on data, tabulate, keep the Pareto front."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from thrifty import metrics
from thrifty.costs import CostModel
from thrifty.exceptions import InputError
from thrifty.runtime.evaluate import Evaluation, evaluate
from thrifty.runtime.plans import as_plan

__all__ = ["cost_columns", "frontier", "frontier_gap", "metric_direction", "pareto_front"]

Metric = Callable[[Any, Evaluation], float]

COLUMNS = [
    "name",
    "mean_cost",
    "median_cost",
    "q90_cost",
    "max_cost",
    "mean_trees",
    "mean_features",
    "metric",
    "value",
]


def frontier(
    models: Sequence[Any] | Mapping[str, Any],
    X: Any,
    y: Any,
    costs: CostModel | None,
    *,
    qid: Any = None,
    metric: str | Metric | None = None,
    names: Sequence[str] | None = None,
    params: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
    progress: bool = True,
) -> pd.DataFrame:
    """Evaluate each model on ``X`` with exact per-example costs and tabulate cost and quality.

    Parameters
    ----------
    models : sequence or mapping of str to model
        Forests, plans, fitted thrifty estimators or LightGBM/XGBoost/scikit-learn models
        (anything :func:`thrifty.evaluate` takes). A mapping's keys name the rows.
    X : array-like of shape (n, n_features)
        The examples every model is evaluated on.
    y : array-like of shape (n,)
        Their targets (or a reference model's labels, to measure disagreement with it).
    costs : CostModel or None
        Prices (None: every feature costs 1).
    qid : array-like of shape (n,), optional
        Query ids, for ranking metrics.
    metric : str or callable, optional
        ``None``: the task's primary metric (:func:`thrifty.metrics.score`: accuracy,
        NDCG@10 for ranking, RMSE for regression). A name: ``"accuracy"``, ``"auc"``,
        ``"log_loss"``, ``"rmse"``, ``"mae"``, ``"r2"``, ``"precision@k"`` or ``"ndcg@k"``
        (e.g. ``"ndcg@10"``; without ``@k``, the function's default k). A callable
        ``metric(y, evaluation) -> float``, named by its ``__name__``. :func:`pareto_front`
        reads the direction from the ``metric`` column (RMSE, MAE and log_loss are
        lower-is-better); pass ``higher_is_better`` there for a callable that is.
    names : sequence of str, optional
        Row names (default: the mapping's keys, else ``model_0``, ``model_1``, ...).
    params : mapping or sequence of mappings, optional
        Extra columns describing each model, e.g. the budget a method was given: either
        ``{column: values}`` (one value per model, or a scalar for all) or one mapping per model.
    progress : bool, default=True
        Show a progress bar over the models (only when stderr is a terminal).

    Returns
    -------
    pandas.DataFrame
        One row per model: ``name``, ``mean_cost``, ``median_cost``, ``q90_cost``,
        ``max_cost``, ``mean_trees``, ``mean_features`` (features acquired per example),
        ``metric``, ``value``, then the ``params`` columns.

    Examples
    --------
    >>> table = frontier({"5 trees": forest.subset(range(5)), "all": forest}, X, y, costs,
    ...                  metric="accuracy")  # doctest: +SKIP
    >>> pareto_front(table)  # doctest: +SKIP
    """
    if isinstance(models, Mapping):
        names = list(models) if names is None else names
        models = list(models.values())
    models = list(models)
    names = [f"model_{i}" for i in range(len(models))] if names is None else [str(n) for n in names]
    if len(names) != len(models):
        raise InputError(f"{len(names)} names for {len(models)} models; give one name per model")
    extra = _params(params, len(models))
    clash = sorted(set(extra) & set(COLUMNS))
    if clash:
        raise InputError(f"params column(s) {clash} would overwrite the table's own columns; rename them")
    rows = []
    # disable=None lets tqdm hide the bar when stderr is not a terminal (logs, CI).
    for name, model in tqdm(
        list(zip(names, models)),
        desc="frontier",
        unit="model",
        disable=None if progress else True,
        leave=False,
    ):
        plan = as_plan(model)
        ev = evaluate(plan, X, costs)
        metric_name, value = _score(metric, plan.task, ev, y, qid)
        rows.append({"name": name, **cost_columns(ev.cost), "metric": metric_name, "value": float(value)})
    table = pd.DataFrame(rows, columns=COLUMNS)
    for column, values in extra.items():
        table[column] = values
    return table


def cost_columns(report: Any) -> dict[str, float]:
    """The cost columns of a frontier row: mean, median, 90% quantile and max cost per
    example, mean trees evaluated and mean features acquired per example."""
    if not report.n_examples:
        return dict.fromkeys(COLUMNS[1:7], 0.0)
    q = report.quantiles((0.5, 0.9))
    return {
        "mean_cost": report.mean,
        "median_cost": q[0.5],
        "q90_cost": q[0.9],
        "max_cost": report.max,
        "mean_trees": float(report.n_trees.mean()),
        "mean_features": float(report.acquired.sum(axis=1).mean()),
    }


def pareto_front(
    table: pd.DataFrame,
    *,
    cost: str = "mean_cost",
    value: str = "value",
    higher_is_better: bool | None = None,
) -> pd.DataFrame:
    """The rows no other row dominates, sorted by cost.

    A row is dominated when another row costs no more and is at least as good, and is strictly
    cheaper or strictly better. Rows with identical cost and value do not dominate each other
    and are all kept. Rows with a missing cost or value are ignored.

    Parameters
    ----------
    table : DataFrame
        A frontier table (or any table with the two columns).
    cost, value : str
        Columns to minimise and to optimise.
    higher_is_better : bool, optional
        Whether ``value`` is maximised (accuracy, AUC, NDCG) or minimised (RMSE, a loss).
        Default: for the ``value`` column, from the table's ``metric`` column
        (:func:`thrifty.metrics.higher_is_better`; minimised for ``rmse``, ``mae``,
        ``log_loss``); maximised otherwise.

    Returns
    -------
    DataFrame
        The non-dominated rows, original index kept, by increasing cost (better value first
        among equal costs, then original order).
    """
    for column in (cost, value):
        if column not in table.columns:
            raise KeyError(f"the table has no column {column!r}; its columns are {list(table.columns)}")
    c = table[cost].to_numpy(dtype=np.float64)
    v = table[value].to_numpy(dtype=np.float64)
    if not (metric_direction(table, value) if higher_is_better is None else higher_is_better):
        v = -v
    valid = np.flatnonzero(~(np.isnan(c) | np.isnan(v)))
    # Sort by cost, best value first within a cost: a row survives exactly when it ties the
    # best value at its cost and beats every strictly cheaper row.
    order = valid[np.lexsort((-v[valid], c[valid]))]
    keep: list[int] = []
    best_cheaper: float | None = None
    start = 0
    while start < len(order):
        stop = start
        while stop < len(order) and c[order[stop]] == c[order[start]]:
            stop += 1
        top = v[order[start]]
        if best_cheaper is None or top > best_cheaper:
            keep.extend(int(i) for i in order[start:stop] if v[i] == top)
            best_cheaper = top
        start = stop
    return table.iloc[keep]


def frontier_gap(
    a: pd.DataFrame,
    b: pd.DataFrame,
    *,
    cost: str = "mean_cost",
    value: str = "value",
    log_cost: bool = False,
    higher_is_better: bool | None = None,
) -> float:
    """How far the frontier of ``a`` lies above that of ``b``, on average over their common costs.

    Each table defines a step function ``best(c)``: the best value among its rows costing at
    most ``c`` (what a user with budget ``c`` can have). The gap is the mean of
    ``best_a(c) - best_b(c)`` over ``c`` from the larger of the two cheapest costs to the
    smaller of the two largest costs, i.e. the area between the curves divided by the range's
    width: positive when ``a`` is better there, in the units of ``value`` (for an error such
    as RMSE, positive when ``a``'s error is lower: ``best_b(c) - best_a(c)``).

    Parameters
    ----------
    a, b : DataFrame
        Frontier tables (any rows; dominated rows do not change the step functions).
    cost, value : str
        Columns of cost (x) and quality (y).
    log_cost : bool, default=False
        Average over ``log(c)`` instead of ``c`` (costs spanning orders of magnitude; zero
        costs are then left out).
    higher_is_better : bool, optional
        Default: from ``a``'s ``metric`` column, as in :func:`pareto_front`.

    Returns
    -------
    float
        NaN when the cost ranges do not overlap; when they meet in a single cost, the gap
        there.
    """
    sign = 1.0 if (metric_direction(a, value) if higher_is_better is None else higher_is_better) else -1.0
    curves = []
    for t in (a, b):
        c = t[cost].to_numpy(np.float64)
        v = sign * t[value].to_numpy(np.float64)
        ok = ~(np.isnan(c) | np.isnan(v)) & ((c > 0) if log_cost else True)
        order = np.argsort(c[ok], kind="stable")
        cs, vs = c[ok][order], np.maximum.accumulate(v[ok][order])
        curves.append((np.log(cs) if log_cost else cs, vs))
    if any(len(cs) == 0 for cs, _ in curves):
        return float("nan")
    lo = max(cs[0] for cs, _ in curves)
    hi = min(cs[-1] for cs, _ in curves)
    if hi < lo:
        return float("nan")

    def best(curve: tuple[np.ndarray, np.ndarray], x: np.ndarray) -> np.ndarray:
        cs, vs = curve
        return vs[np.searchsorted(cs, x, side="right") - 1]

    if hi == lo:
        x = np.array([lo])
        return float((best(curves[0], x) - best(curves[1], x))[0])
    # Both functions are constant between consecutive breakpoints: integrate exactly.
    knots = np.unique(np.concatenate([np.clip(cs, lo, hi) for cs, _ in curves] + [[lo, hi]]))
    left, width = knots[:-1], np.diff(knots)
    gap = best(curves[0], left) - best(curves[1], left)
    return float(np.sum(gap * width) / (hi - lo))


def metric_direction(table: pd.DataFrame, value: str = "value") -> bool:
    """Whether ``table``'s ``value`` column is higher-is-better, by its ``metric`` column, which
    names what ``value`` holds (True for any other column, without a ``metric`` column, or
    when it names several metrics)."""
    if value != "value" or "metric" not in table.columns or not len(table):
        return True
    names = table["metric"].dropna().astype(str).unique()
    return len(names) != 1 or metrics.higher_is_better(names[0])


def _params(params: Any, n: int) -> dict[str, list[Any]]:
    """Normalise ``params`` to ``{column: one value per model}``."""
    if params is None:
        return {}
    if isinstance(params, Mapping):
        out = {}
        for column, values in params.items():
            if isinstance(values, (str, bytes)) or np.ndim(values) == 0:
                out[str(column)] = [values] * n
                continue
            values = list(values)
            if len(values) != n:
                raise InputError(f"params[{column!r}] has {len(values)} values for {n} models")
            out[str(column)] = values
        return out
    per_model = list(params)
    if len(per_model) != n:
        raise InputError(f"{len(per_model)} params mappings for {n} models; give one per model")
    columns = list(dict.fromkeys(k for p in per_model for k in p))
    return {str(k): [p.get(k) for p in per_model] for k in columns}


def _score(metric: str | Metric | None, task: str, ev: Evaluation, y: Any, qid: Any) -> tuple[str, float]:
    if metric is None:
        name, value = metrics.score(task, y, ev, qid=qid)
        return str(name), float(value)
    if callable(metric):
        name = getattr(metric, "__name__", "metric")
        return ("metric" if name == "<lambda>" else name), float(metric(y, ev))
    if not isinstance(metric, str):
        raise TypeError(
            f"metric must be None, a name or a callable(y, evaluation), got {type(metric).__name__}"
        )
    return metric, float(_named_metric(metric, ev, y, qid))


def _named_metric(name: str, ev: Evaluation, y: Any, qid: Any) -> float:
    base, _, k = name.partition("@")
    if base in ("accuracy", "auc", "log_loss") and not k:
        if ev.proba is None:
            raise InputError(f"metric {name!r} needs a classifier; this model predicts scores")
        fn = {"accuracy": metrics.accuracy, "auc": metrics.auc, "log_loss": metrics.log_loss}[base]
        return fn(y, ev)
    if base in ("rmse", "mae", "r2") and not k:
        return {"rmse": metrics.rmse, "mae": metrics.mae, "r2": metrics.r2}[base](y, ev)
    if base in ("precision", "ndcg"):
        if qid is None:
            raise InputError(f"metric {name!r} needs qid= (the query id of each example)")
        at_k = metrics.precision_at_k if base == "precision" else metrics.ndcg_at_k
        if k and not k.isdigit():
            raise InputError(f"metric {name!r}: k must be an integer, as in 'ndcg@10'")
        return at_k(y, ev.raw, qid, k=int(k)) if k else at_k(y, ev.raw, qid)
    raise InputError(
        f"unknown metric {name!r}; use 'accuracy', 'auc', 'log_loss', 'rmse', 'mae', 'r2', "
        "'precision@k', 'ndcg@k' or a callable(y, evaluation)"
    )
