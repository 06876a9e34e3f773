"""The methods ``thrifty.compare`` runs: a registry of entries, each turning a prepared
:class:`Context` into candidate models.

An entry is a generator function ``run(ctx) -> Iterator[Candidate]``. It yields one candidate at
a time so that :func:`thrifty.compare` can stop at its time limit between two candidates and
still report what it has. Training-time methods get ``ctx.budgets`` (mean cost per example,
chosen from the plain LightGBM model's cost on the calibration split); post-hoc methods start
from ``ctx.lightgbm()`` or ``ctx.random_forest()``, fitted once and shared.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from thrifty.costs import CostModel
from thrifty.forest import Forest

__all__ = ["METHODS", "Candidate", "Context", "Method", "method"]

TASKS = ("binary", "multiclass", "ranking", "regression")


@dataclass
class Candidate:
    """One model a method offers, with what produced it.

    Attributes
    ----------
    name : str
        Unique within its method (e.g. ``"budget=12.5"``).
    model : object
        Anything :func:`thrifty.evaluate` takes (a Forest, a plan, a fitted thrifty estimator).
    params : dict
        The parameters behind it (a budget, alpha, lambda...), shown in the table.
    fit_seconds : float
        Wall-clock seconds to produce it, excluding the shared base models.
    """

    name: str
    model: Any
    params: dict[str, Any] = field(default_factory=dict)
    fit_seconds: float = 0.0


@dataclass
class Context:
    """The prepared inputs every method gets.

    Attributes
    ----------
    task : {"binary", "multiclass", "ranking", "regression"}
    X_train, y_train, qid_train : training split (``qid`` only for ranking)
    X_val, y_val, qid_val : calibration split: budgets are checked and thresholds fitted here
    costs : CostModel
    budgets : list of float
        Mean costs per example the budgeted methods aim at, increasing.
    lightgbm_params : dict
        Parameters of the plain LightGBM model (post-hoc methods start from it).
    n_jobs : int
    random_state : int
    quick : bool
        Fewer points per method.
    """

    task: str
    X_train: Any
    y_train: np.ndarray
    X_val: Any
    y_val: np.ndarray
    costs: CostModel
    budgets: list[float] = field(default_factory=list)
    qid_train: np.ndarray | None = None
    qid_val: np.ndarray | None = None
    lightgbm_params: dict[str, Any] = field(default_factory=dict)
    n_jobs: int = 1
    random_state: int = 0
    quick: bool = False
    _cache: dict[str, Any] = field(default_factory=dict, repr=False)

    # -- shared base models, fitted once ----------------------------------------------------
    def lightgbm(self) -> Forest:
        """The plain LightGBM model on the training split, as a Forest (fitted once)."""
        if "lightgbm" not in self._cache:
            self._cache["lightgbm"] = Forest.from_model(self.fit_lightgbm())
        return self._cache["lightgbm"]

    def fit_lightgbm(self, X: Any = None, **overrides: Any) -> Any:
        """A LightGBM model of the task fitted on the training split (or on ``X``, the
        training rows with other columns)."""
        import lightgbm

        params = {**self.lightgbm_params, **overrides}
        X = self.X_train if X is None else X
        if self.task == "ranking":
            return lightgbm.LGBMRanker(**params).fit(X, self.y_train, group=_group_sizes(self.qid_train))
        cls = lightgbm.LGBMRegressor if self.task == "regression" else lightgbm.LGBMClassifier
        return cls(**params).fit(X, self.y_train)

    def random_forest(self) -> Forest:
        """A plain random forest on the training split (classification), as a Forest.

        Categorical columns are split on their category codes; the Forest keeps the categories
        so that it reads the same DataFrames as every other model.
        """
        if "random_forest" not in self._cache:
            from sklearn.ensemble import RandomForestClassifier

            from thrifty.forest._inputs import to_matrix

            names, categories = self.feature_names, self.categories
            X = to_matrix(self.X_train, len(names), names, categories)
            rf = RandomForestClassifier(n_estimators=30 if self.quick else 100, max_depth=10,
                                        min_samples_leaf=2, n_jobs=self.n_jobs,
                                        random_state=self.random_state).fit(X, self.y_train)
            forest = Forest.from_model(rf)
            forest.feature_names, forest.categories = names, categories
            self._cache["random_forest"] = forest
        return self._cache["random_forest"]

    @property
    def feature_names(self) -> list[str]:
        cols = getattr(self.X_train, "columns", None)
        if cols is not None:
            return [str(c) for c in cols]
        return [f"f{i}" for i in range(np.asarray(self.X_train).shape[1])]

    @property
    def categories(self) -> dict[int, list]:
        """Category lists of the training frame's categorical columns, by position."""
        import pandas as pd

        if not hasattr(self.X_train, "dtypes"):
            return {}
        return {j: list(dt.categories) for j, dt in enumerate(self.X_train.dtypes)
                if isinstance(dt, pd.CategoricalDtype)}

    @property
    def full_cost(self) -> float:
        """Mean cost per example of the plain LightGBM model on the calibration split."""
        if "full_cost" not in self._cache:
            from thrifty.runtime.evaluate import evaluate

            self._cache["full_cost"] = evaluate(self.lightgbm(), self.X_val, self.costs).cost.mean
        return self._cache["full_cost"]


def _group_sizes(qid: np.ndarray | None) -> np.ndarray:
    if qid is None:
        raise ValueError("a ranking task needs query ids (qid)")
    q = np.asarray(qid)
    starts = np.flatnonzero(np.r_[True, q[1:] != q[:-1]])
    if len(np.unique(q)) != len(starts):
        raise ValueError("the rows of each query must be consecutive; sort the data by qid")
    return np.diff(np.r_[starts, len(q)])


Run = Callable[[Context], Iterator[Candidate]]


@dataclass(frozen=True)
class Method:
    """A registered method.

    Attributes
    ----------
    key : str
        Short id used to select it (``methods=["qwyc"]``, ``--methods qwyc``).
    name : str
        Its series name in tables and plots.
    family : {"reference", "train", "post-hoc", "composition"}
    tasks : tuple of str
        The tasks it supports.
    run : callable
        ``run(ctx) -> iterator of Candidate``.
    """

    key: str
    name: str
    family: str
    tasks: tuple[str, ...]
    run: Run


#: Every method ``thrifty.compare`` knows, by key, in the order they run.
METHODS: dict[str, Method] = {}


def method(key: str, name: str, family: str, tasks: Sequence[str] = TASKS) -> Callable[[Run], Run]:
    """Register ``run(ctx)`` as the method ``key`` of :func:`thrifty.compare`."""
    bad = set(tasks) - set(TASKS)
    if bad or family not in ("reference", "train", "post-hoc", "composition") or "," in key:
        raise ValueError(f"bad registration of {key!r}: tasks {sorted(bad)}, family {family!r}")

    def register(run: Run) -> Run:
        METHODS[key] = Method(key, name, family, tuple(tasks), run)
        return run

    return register


def timed(name: str, build: Callable[[], Any], **params: Any) -> Candidate:
    """Run ``build()`` and wrap its result as a Candidate with its wall-clock time."""
    start = time.perf_counter()
    model = build()
    return Candidate(name, model, params, time.perf_counter() - start)


# ---------------------------------------------------------------------- reference
@method("lightgbm", "LightGBM, first k trees", "reference")
def _truncated(ctx: Context) -> Iterator[Candidate]:
    """The plain model truncated after k trees: what a cost-blind practitioner would do."""
    forest = ctx.lightgbm()
    per_round = max(1, forest.n_trees // max(1, _rounds(forest)))
    rounds = _rounds(forest)
    grid = sorted({int(k) for k in np.unique(np.geomspace(1, rounds, 6 if ctx.quick else 12).round())})
    for k in grid:
        yield Candidate(f"k={k}", forest.subset(range(k * per_round)), {"k": k})


def _rounds(forest: Forest) -> int:
    """Boosting rounds: trees per round is the number of outputs (one tree per class)."""
    return max(1, forest.n_trees // max(1, forest.n_outputs))


@method("cheapest", "cheapest k features", "reference", ("binary", "multiclass", "regression"))
def _cheapest(ctx: Context) -> Iterator[Candidate]:
    """LightGBM models restricted to the k cheapest features (by price alone), k < n."""
    names = ctx.feature_names
    # A stable sort keeps the data's column order among equally priced features.
    price = [ctx.costs.acquisition_cost([i]) for i in range(len(names))]
    order = np.argsort(price, kind="stable")
    n = len(names)
    ks = sorted({int(k) for k in np.geomspace(1, max(1, n - 1), 4 if ctx.quick else 8).round()})
    for k in ks:
        if k >= n:
            continue
        keep = [names[i] for i in order[:k]]
        yield timed(f"k={k}", lambda keep=keep: Forest.from_model(ctx.fit_lightgbm(_only(ctx.X_train, keep))),
                    k=k, features=", ".join(keep), price=ctx.costs.acquisition_cost(keep))


def _only(X: Any, keep: list[str]) -> Any:
    """``X`` with every column but ``keep`` blanked out (all missing).

    An all-missing column never wins a split, so the model uses only ``keep`` yet still reads
    the full table: every candidate then takes the same test matrix and cost model.
    """
    import pandas as pd

    blank = pd.Series(False, index=X.index)
    return X.assign(**{c: X[c].where(blank) for c in X.columns if c not in keep})


# ---------------------------------------------------------------------- post-hoc, on LightGBM
@method("qwyc", "QWYC", "post-hoc", ("binary", "multiclass"))
def _qwyc(ctx: Context) -> Iterator[Candidate]:
    """QWYC's order and exits on the plain model, fitted on the calibration split (no labels)."""
    from thrifty.order import qwyc

    forest = ctx.lightgbm()
    for alpha in ((0.0, 0.01, 0.05) if ctx.quick else (0.0, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1)):
        yield timed(f"alpha={alpha:g}",
                    lambda a=alpha: qwyc(forest, ctx.X_val, alpha=a, costs=ctx.costs,
                                         feature_costs=True, progress=False), alpha=alpha)


@method("fan", "Fan et al.", "post-hoc", ("binary",))
def _fan(ctx: Context) -> Iterator[Candidate]:
    """Fan et al.'s binned exits on the plain model's own tree order."""
    from thrifty.order import fan

    forest = ctx.lightgbm()
    for gamma in ((1.0, 2.0, 4.0) if ctx.quick else (0.5, 1.0, 2.0, 3.0, 4.0, 6.0)):
        yield timed(f"gamma={gamma:g}", lambda g=gamma: fan(forest, ctx.X_val, gamma=g), gamma=gamma)


@method("margin", "margin early exit", "post-hoc", ("binary",))
def _margin(ctx: Context) -> Iterator[Candidate]:
    """LightGBM's ``pred_early_stop`` rule, margins calibrated on the calibration split."""
    from thrifty.order import calibrate_margin

    forest = ctx.lightgbm()
    every = max(1, _rounds(forest) // 20)
    for rate in ((0.0, 0.01, 0.05) if ctx.quick else (0.0, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1)):
        yield timed(f"disagreement<={rate:g}",
                    lambda r=rate: calibrate_margin(forest, ctx.X_val, max_disagreement=r, every=every)[0],
                    max_disagreement=rate, every=every)
