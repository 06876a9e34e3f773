"""``thrifty.compare``: every method that applies, over budgets, on one frontier."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from thrifty.comparison.methods import METHODS, Candidate, Context
from thrifty.costs import CostModel
from thrifty.frontier import frontier, pareto_front

__all__ = ["Comparison", "compare"]

#: Budgets (fractions of the plain LightGBM model's mean cost on the calibration split) the
#: budgeted methods aim at, and the ones the report recommends a model for.
BUDGET_FRACTIONS = (0.05, 0.1, 0.2, 0.3, 0.5, 0.75)
QUICK_BUDGET_FRACTIONS = (0.1, 0.3, 0.6)
RECOMMEND_FRACTIONS = (0.1, 0.25, 0.5, 1.0)

DEFAULT_LIGHTGBM = {"n_estimators": 200, "learning_rate": 0.05, "num_leaves": 16,
                    "random_state": 0, "deterministic": True,
                    "force_row_wise": True, "verbose": -1}


@dataclass
class Comparison:
    """What :func:`compare` measured.

    Attributes
    ----------
    table : DataFrame
        One row per model: ``method``, ``family``, ``name``, ``parameters``, the cost columns
        of :func:`thrifty.frontier.frontier` (mean, median, 90% quantile, max per example),
        ``metric``, ``value`` (on the test split, higher is better), ``fit_seconds``, then one
        column per parameter any method reported (empty where a method has no such parameter).
    front : DataFrame
        The rows no other row dominates (cheaper on average and at least as good), by cost.
    models : dict of (method, name) to model
    task : str
    full_cost : float
        Mean cost of the plain LightGBM model on the calibration split (budgets are fractions
        of it).
    budgets : list of float
    skipped : list of (method, name, reason)
        Candidates a method could not produce (e.g. a budget below its cheapest model).
    stopped_early : bool
        The time limit stopped the run before every method finished.
    seconds : float
    costs : CostModel
    baseline : Forest
        The plain LightGBM model the post-hoc methods start from.
    n_calibration : int
        Rows of the calibration split.
    """

    table: pd.DataFrame
    front: pd.DataFrame
    models: dict[tuple[str, str], Any]
    task: str
    full_cost: float
    budgets: list[float]
    skipped: list[tuple[str, str, str]] = field(default_factory=list)
    stopped_early: bool = False
    seconds: float = 0.0
    costs: CostModel | None = None
    baseline: Any = None
    n_calibration: int = 0

    def recommend(self, budgets: Sequence[float] | None = None) -> pd.DataFrame:
        """The best model on the front within each budget (mean cost per example).

        Parameters
        ----------
        budgets : sequence of float, optional
            Default: 10%, 25%, 50% and 100% of the plain LightGBM model's mean cost.

        Returns
        -------
        DataFrame
            ``for_budget``, then the front row of the best value whose mean cost is within it
            (no row when nothing is).
        """
        if budgets is None:
            budgets = [f * self.full_cost for f in RECOMMEND_FRACTIONS]
        rows = []
        for b in budgets:
            within = self.front[self.front["mean_cost"] <= b + 1e-12]
            if len(within):
                best = within.loc[within["value"].idxmax()]
                # The table's own "budget" column (what a method was asked for) stays as it is.
                rows.append({"for_budget": float(b), **best.to_dict()})
        return pd.DataFrame(rows)

    def model(self, method: str, name: str) -> Any:
        """The model of one table row."""
        return self.models[method, name]

    def plot(self, ax: Any = None, *, cost_unit: str | None = None) -> Any:
        """Every method's frontier and the overall Pareto front (see ``thrifty.plot``)."""
        from thrifty.plot import plot_frontier

        ax = plot_frontier(self.table, ax=ax, cost_unit=cost_unit,
                           value_label=f"test {self.table['metric'].iloc[0]}" if len(self.table) else None)
        costs = self.table["mean_cost"].to_numpy(float)
        if len(costs) and costs.max() > 20 * max(costs[costs > 0].min(initial=np.inf), 1e-12):
            ax.set_xscale("symlog", linthresh=float(costs[costs > 0].min(initial=1.0)))
        return ax

    def write(self, out: str | Path, *, cost_unit: str | None = None,
              title: str = "thrifty compare") -> list[Path]:
        """Write ``table.csv``, ``front.csv``, ``frontier.png``, ``report.md`` and the
        recommended models as JSON (``models/``) to the folder ``out``."""
        from matplotlib.figure import Figure

        from thrifty.comparison.report import markdown_report
        from thrifty.io import save

        out = Path(out)
        (out / "models").mkdir(parents=True, exist_ok=True)
        self.table.to_csv(out / "table.csv", index=False)
        self.front.to_csv(out / "front.csv", index=False)
        fig = Figure(figsize=(9, 5.5), layout="constrained")
        ax = self.plot(fig.add_subplot(), cost_unit=cost_unit)
        ax.set_title(title)
        fig.savefig(out / "frontier.png", dpi=120)
        files = [out / "table.csv", out / "front.csv", out / "frontier.png"]
        rec = self.recommend()
        saved: dict[tuple[str, str], str] = {}
        for _, row in rec.iterrows():
            key = (row["method"], row["name"])
            if key not in saved:
                path = out / "models" / f"{_slug(key[0])}__{_slug(key[1])}.json"
                save(self.models[key], path)
                saved[key] = str(path.relative_to(out))
                files.append(path)
        (out / "report.md").write_text(markdown_report(self, rec, saved, cost_unit=cost_unit, title=title))
        files.append(out / "report.md")
        return files

    def summary(self, cost_unit: str | None = None) -> str:
        """A few lines for the terminal."""
        from thrifty.comparison.report import answer

        lines = [f"{len(self.table)} models from {self.table['method'].nunique()} methods in "
                 f"{self.seconds:.1f} s; {len(self.front)} on the Pareto front"
                 + (" (stopped early at the time limit)" if self.stopped_early else "")]
        lines += [answer(row, cost_unit) for _, row in self.recommend().iterrows()]
        return "\n".join(lines)


def compare(X: Any, y: Any, costs: Any = None, *, task: str | None = None,
            methods: str | Sequence[str] = "all", budgets: Sequence[float] | None = None,
            X_val: Any = None, y_val: Any = None, X_test: Any = None, y_test: Any = None,
            qid: Any = None, qid_val: Any = None, qid_test: Any = None,
            lightgbm_params: Mapping[str, Any] | None = None, n_jobs: int = 1,
            time_limit: float | None = None, quick: bool = False, random_state: int = 0,
            progress: bool = True) -> Comparison:
    """Run every method that applies to the task over a sweep of budgets; one frontier.

    Training-time methods (CEGB, GreedyMiser, BudgetRF, ADAPT) get the budgets; post-hoc
    methods (QWYC, Fan, margin early exit, Cronus, BudgetPrune) start from a plain LightGBM
    model or a plain random forest fitted on the training split; compositions chain them.
    Budgets, thresholds and exits are fitted on the calibration split; every model is then
    evaluated on the test split by thrifty's runtime, so all costs are measured alike.

    Parameters
    ----------
    X, y : training data (array or DataFrame; categorical columns as pandas ``category``)
    costs : CostModel, mapping of feature name to cost, sequence, path, or None
        Feature prices (None: 1 per feature). A path is read with ``CostModel.from_file``.
    task : {"binary", "multiclass", "ranking", "regression"}, optional
        Inferred from ``y`` (and ``qid``) when omitted.
    methods : "all" or sequence of str
        Keys of ``thrifty.comparison.METHODS`` (``thrifty compare --list``) or their names;
        methods that do not support the task are left out of "all" and rejected when named.
    budgets : sequence of float, optional
        Mean costs per example for the budgeted methods. Default: 5%, 10%, 20%, 30%, 50% and
        75% of the plain LightGBM model's mean cost on the calibration split.
    X_val, y_val : calibration split, optional
        Default: 20% of the training rows (by query for ranking, stratified otherwise).
    X_test, y_test : test split, optional
        Default: 25% of the rows given, held out before anything is fitted.
    qid, qid_val, qid_test : query ids (ranking), rows of a query consecutive
    lightgbm_params : mapping, optional
        Parameters of the plain LightGBM model (default: 200 trees of 16 leaves, rate 0.05).
    n_jobs : int, default=1
        Threads for LightGBM and the random forest.
    time_limit : float, optional
        Seconds; once exceeded, no further candidate is started and the result says so.
    quick : bool, default=False
        Fewer budgets and fewer points per method.
    random_state : int, default=0
    progress : bool, default=True
        A progress bar over the candidates (only when stderr is a terminal).

    Returns
    -------
    Comparison
    """
    from tqdm.auto import tqdm

    start = time.perf_counter()
    deadline = None if time_limit is None else start + float(time_limit)
    costs_in = costs
    task = _task(y, qid) if task is None else task
    if task not in ("binary", "multiclass", "ranking", "regression"):
        raise ValueError(f"unknown task {task!r}; expected binary, multiclass, ranking or regression")
    X, y, qid = _frame(X), np.asarray(y), None if qid is None else np.asarray(qid)
    if X_test is None:
        (X, y, qid), (X_test, y_test, qid_test) = _split(X, y, qid, task, 0.25, random_state)
    if X_val is None:
        (X, y, qid), (X_val, y_val, qid_val) = _split(X, y, qid, task, 0.2, random_state)
    X_val, X_test = _frame(X_val), _frame(X_test)
    y_val, y_test = np.asarray(y_val), np.asarray(y_test)
    names = [str(c) for c in X.columns]
    costs = _costs(costs_in, names)
    chosen = _methods(methods, task)
    # LightGBM's default min_data_per_group=100 all but forbids categorical splits on a few
    # hundred rows; scale it (and the leaf size) with the data.
    small = {"min_data_per_group": int(np.clip(len(y) // 20, 5, 100)),
             "min_child_samples": int(np.clip(len(y) // 50, 5, 20)), "cat_smooth": 1.0}
    params = {**DEFAULT_LIGHTGBM, **small, "n_jobs": n_jobs, **(lightgbm_params or {})}
    if task == "multiclass":
        params.setdefault("objective", "multiclass")
    ctx = Context(task=task, X_train=X, y_train=y, X_val=X_val, y_val=y_val, costs=costs,
                  qid_train=qid, qid_val=None if qid_val is None else np.asarray(qid_val),
                  lightgbm_params=params, n_jobs=n_jobs, random_state=random_state, quick=quick)
    full_cost = ctx.full_cost
    if budgets is None:
        fractions = QUICK_BUDGET_FRACTIONS if quick else BUDGET_FRACTIONS
        budgets = [f * full_cost for f in fractions]
    ctx.budgets = sorted(float(b) for b in budgets)
    qid_test = None if qid_test is None else np.asarray(qid_test)

    tables, models, skipped, stopped = [], {}, [], False
    with tqdm(total=len(chosen), desc="thrifty compare", unit="method",
              disable=None if progress else True) as bar:
        for m in chosen:
            bar.set_postfix_str(m.key)
            runner = m.run(ctx)
            while True:
                if deadline is not None and time.perf_counter() > deadline:
                    stopped = True
                    break
                try:
                    cand: Candidate = next(runner)
                except StopIteration:
                    break
                except ValueError as exc:  # e.g. a budget below the method's cheapest model
                    skipped.append((m.name, "", " ".join(str(exc).split())))
                    break
                if cand.model is None:  # the method could not meet this candidate's target
                    skipped.append((m.name, cand.name, str(cand.params.get("reason", ""))))
                    continue
                row = frontier({cand.name: cand.model}, X_test, y_test, costs, qid=qid_test,
                               params={k: [v] for k, v in cand.params.items()}, progress=False)
                row.insert(0, "family", m.family)
                row.insert(0, "method", m.name)
                row.insert(3, "parameters", _describe(cand.params))
                row["fit_seconds"] = cand.fit_seconds
                tables.append(row)
                models[m.name, cand.name] = cand.model
            bar.update()
            if stopped:
                break
    table = pd.concat(tables, ignore_index=True) if tables else pd.DataFrame(
        columns=["method", "family", "name", "parameters", "mean_cost", "value", "fit_seconds"])
    return Comparison(table=table, front=pareto_front(table) if len(table) else table,
                      models=models, task=task, full_cost=float(full_cost), budgets=ctx.budgets,
                      skipped=skipped, stopped_early=stopped, seconds=time.perf_counter() - start,
                      costs=costs, baseline=ctx.lightgbm(), n_calibration=len(y_val))


# ---------------------------------------------------------------------- inputs
def _task(y: Any, qid: Any) -> str:
    from sklearn.utils.multiclass import type_of_target

    if qid is not None:
        return "ranking"
    kind = type_of_target(np.asarray(y))
    if kind == "binary":
        return "binary"
    if kind == "multiclass":
        return "multiclass"
    if kind == "continuous":
        return "regression"
    raise ValueError(f"cannot tell the task from y (scikit-learn calls it {kind!r}); pass task=")


def _frame(X: Any) -> pd.DataFrame:
    if isinstance(X, pd.DataFrame):
        return X
    A = np.asarray(X)
    if A.ndim != 2:
        raise ValueError(f"X must be 2-dimensional (n_rows, n_features), got shape {A.shape}")
    return pd.DataFrame(A, columns=[f"f{i}" for i in range(A.shape[1])])


def _costs(costs: Any, names: list[str]) -> CostModel:
    if costs is None:
        return CostModel.uniform(len(names), feature_names=names)
    if isinstance(costs, CostModel):
        return costs.for_features(names, len(names))
    if isinstance(costs, (str, Path)):
        return CostModel.from_file(costs, names).for_features(names, len(names))
    if isinstance(costs, Mapping):
        return CostModel.from_dict(costs, names).for_features(names, len(names))
    return CostModel(costs, feature_names=names)


def _split(X: pd.DataFrame, y: np.ndarray, qid: np.ndarray | None, task: str, fraction: float,
           seed: int) -> tuple[tuple, tuple]:
    """Hold out ``fraction`` of the rows: whole queries for ranking, stratified otherwise."""
    from sklearn.model_selection import GroupShuffleSplit, train_test_split

    n = len(y)
    if n < 8:
        raise ValueError(f"{n} rows are too few to hold out calibration and test rows; "
                         "give X_val/y_val and X_test/y_test")
    if task == "ranking":
        if qid is None:
            raise ValueError("a ranking task needs qid")
        keep, held = next(GroupShuffleSplit(1, test_size=fraction, random_state=seed).split(X, y, qid))
        keep, held = np.sort(keep), np.sort(held)
    else:
        classes = task in ("binary", "multiclass") and np.unique(y, return_counts=True)[1].min() >= 2
        keep, held = train_test_split(np.arange(n), test_size=fraction, random_state=seed,
                                      stratify=y if classes else None)

    def part(idx: np.ndarray) -> tuple:
        return X.iloc[idx], y[idx], None if qid is None else qid[idx]

    return part(keep), part(held)


def _methods(methods: str | Sequence[str], task: str) -> list:
    if isinstance(methods, str) and methods == "all":
        # Cheapest families first, so that a time limit still leaves the post-hoc methods on
        # the plain model (seconds) and cuts the searches and compositions (minutes).
        rank = {"reference": 0, "post-hoc": 1, "train": 2, "composition": 3}
        return sorted((m for m in METHODS.values() if task in m.tasks), key=lambda m: rank[m.family])
    names = [methods] if isinstance(methods, str) else list(methods)
    by_name = {m.name: m for m in METHODS.values()}
    unknown = [n for n in names if n not in METHODS and n not in by_name]
    if unknown:
        raise ValueError(f"unknown method(s) {unknown}; known: {', '.join(METHODS)}")
    chosen = [METHODS[n] if n in METHODS else by_name[n] for n in names]
    wrong = [m.key for m in chosen if task not in m.tasks]
    if wrong:
        raise ValueError(f"method(s) {wrong} do not support the task {task!r}")
    return chosen


def _describe(params: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in params.items())


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-." else "_" for c in text).strip("_")
