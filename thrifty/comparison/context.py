"""What each method of :func:`thrifty.compare` gets: a :class:`Context`, the run's
:class:`~thrifty.comparison.settings.Settings` and the rows of one fit, with the base models the
methods share (the plain LightGBM model, a random forest) fitted once."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import joblib
import lightgbm
import numpy as np
import pandas as pd
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

from thrifty.comparison.settings import Settings
from thrifty.costs import CostModel
from thrifty.exceptions import InputError
from thrifty.forest import Forest, to_matrix
from thrifty.forest.names import lightgbm_frame
from thrifty.runtime.evaluate import evaluate

__all__ = ["SHARED", "SHARED_FIGURES", "Context"]

#: The models one method fits and others build on (``Method.after``), handed from one fit
#: task to the next on the same rows: the plain LightGBM model, the CEGB models of every
#: budget, the CEGB and GreedyMiser estimators holding every trial of their trade-off path
#: (``warm_start``), the BudgetRF forest and its prunings, the plain random forest (which
#: BudgetPrune's refinement pass prunes: it was grown again there), and the cheapest-k-features
#: models (the margin cascade's cheap models).
SHARED = (
    "lightgbm",
    "random_forest",
    "cegb",
    "cegb path",
    "greedymiser path",
    "budgetrf",
    "budgetrf+prune",
    "cheapest",
)
#: Figures computed from a model on the fitting rows (:meth:`Context.figure`), handed on with
#: the shared models: the second pass of a time-limited sweep reads them instead of computing
#: them again. Cronus's ``lambda_max`` of the plain model took 4.7 to 6.4 CPU seconds (8.6 to
#: 11.8 s of wall time under load) on flights' 175,000 fitting rows, in each pass of Cronus and
#: of the Cronus cascade of a CEGB model, before either fitted a cascade.
SHARED_FIGURES = ("lambda_max",)
#: Rows of each tree's bootstrap sample in the random forests compare grows (the plain forest
#: BudgetPrune prunes, BudgetRF) on more training rows than this: a forest's trees are grown
#: on bootstrap samples of any size (Breiman's bagging; scikit-learn's ``max_samples``), and at
#: depth 10 a tree of 50,000 rows splits much as one of 200,000, in about a quarter of the time
#: (flights' fitting rows are 175,000).
ROWS_PER_TREE = 50_000
#: Calibration rows (whole queries for ranking) a setting's cost is measured on to order a
#: method's settings (:meth:`Context.order_cost`): a mean cost per row is known to within a few
#: percent on 2,000 rows, far closer than the gaps the order looks for.
ORDER_ROWS = 2000


@dataclass
class Context:
    """The prepared inputs every method gets: the run's settings and the rows of one fit.

    Attributes
    ----------
    settings : Settings
        The run's settings, also read as the context's own ``task``, ``costs``, ``budgets``,
        ``lightgbm_params``, ``n_jobs``, ``random_state`` and ``quick``.
    X_train, y_train, qid_train : training split (``qid`` only for ranking)
    X_val, y_val, qid_val : calibration split: budgets are checked and thresholds fitted here
    replay : dict of str to Candidate
        The candidates this method already fitted on the same rows (the first pass of a
        time-limited sweep), by name: a method hands them back instead of fitting them again
        (``registry.fitted``). Never handed on to another method (names are per method).
    """

    settings: Settings
    X_train: Any
    y_train: np.ndarray
    X_val: Any
    y_val: np.ndarray
    qid_train: np.ndarray | None = None
    qid_val: np.ndarray | None = None
    replay: dict[str, Any] = field(default_factory=dict, repr=False)
    _cache: dict[str, Any] = field(default_factory=dict, repr=False)

    # -- the settings, read as every method reads them (``ctx.budgets``) -----------------------
    @property
    def task(self) -> str:
        return self.settings.task

    @property
    def costs(self) -> CostModel:
        return self.settings.costs

    @property
    def budgets(self) -> tuple[float, ...]:
        return self.settings.budgets

    @property
    def lightgbm_params(self) -> Mapping[str, Any]:
        return self.settings.lightgbm_params

    @property
    def n_jobs(self) -> int:
        return self.settings.n_jobs

    @property
    def random_state(self) -> int:
        return self.settings.random_state

    @property
    def quick(self) -> bool:
        return self.settings.quick

    # -- shared base models, fitted once ----------------------------------------------------
    def shared(self) -> dict[str, Any]:
        """The models of :data:`SHARED` fitted in this context so far, for the methods that
        build on them (the same rows, so the same models)."""
        models = {k: self._cache[k] for k in SHARED if k in self._cache}
        return {**models, **{k: v for k, v in self._cache.items() if k.split(" ", 1)[0] in SHARED_FIGURES}}

    def figure(self, name: str, model: Any, compute: Callable[[], float]) -> float:
        """``compute()``, a figure of ``model`` on this context's rows named ``name`` (one of
        :data:`SHARED_FIGURES`), computed once per model and handed on with the shared models
        (:meth:`shared`). The model is told by its contents (``joblib.hash``): a model handed
        between processes is a copy, and a composition's base may be another model in the
        second pass (``registry.same_model``)."""
        key = f"{name} {joblib.hash(model)}"
        if key not in self._cache:
            self._cache[key] = float(compute())
        return float(self._cache[key])

    def lightgbm(self) -> Forest:
        """The plain LightGBM model on the training split, as a Forest (fitted once); the
        user's own model when the run has one (``Settings.plain_model``)."""
        if "lightgbm" not in self._cache and self.settings.plain_model is not None:
            self._cache["lightgbm"] = self.settings.plain_model  # the user's: never refitted
        if "lightgbm" not in self._cache:
            self._cache["lightgbm"] = Forest.from_model(self.fit_lightgbm(), feature_names=self.feature_names)
        return self._cache["lightgbm"]

    def fit_lightgbm(self, X: Any = None, **overrides: Any) -> Any:
        """A LightGBM model of the task fitted on the training split (or on ``X``, the
        training rows with other columns)."""
        params = {**self.lightgbm_params, **overrides}
        X = lightgbm_frame(self.X_train if X is None else X)  # names LightGBM accepts
        if self.task == "ranking":
            return lightgbm.LGBMRanker(**params).fit(X, self.y_train, group=_group_sizes(self.qid_train))
        cls = lightgbm.LGBMRegressor if self.task == "regression" else lightgbm.LGBMClassifier
        return cls(**params).fit(X, self.y_train)

    @property
    def rows_per_tree(self) -> int | None:
        """Each tree's bootstrap rows in compare's forests: None (as many as the training rows)
        up to :data:`ROWS_PER_TREE` training rows, that many beyond."""
        return ROWS_PER_TREE if len(self.y_train) > ROWS_PER_TREE else None

    def random_forest(self) -> Forest:
        """A plain random forest on the training split, as a Forest: a regressor for regression
        and for ranking (a pointwise ranker of the relevance grades), a classifier otherwise.

        Each tree is grown on a bootstrap sample of at most :data:`ROWS_PER_TREE` rows.
        Categorical columns are split on their category codes; the Forest keeps the categories
        so that it reads the same DataFrames as every other model. The user's own model
        (``Settings.plain_model``) when it is an averaging forest.
        """
        given = self.settings.plain_model
        if "random_forest" not in self._cache and given is not None and given.aggregation == "mean":
            self._cache["random_forest"] = given
        if "random_forest" not in self._cache:
            cls = RandomForestClassifier if self.task in ("binary", "multiclass") else RandomForestRegressor
            rf = cls(
                n_estimators=30 if self.quick else 100,
                max_depth=10,
                min_samples_leaf=2,
                max_samples=self.rows_per_tree,
                n_jobs=self.n_jobs,
                random_state=self.random_state,
            )
            rf.fit(self.matrix(self.X_train), self.y_train)
            self._cache["random_forest"] = self.adopt(Forest.from_model(rf))
        return self._cache["random_forest"]

    def matrix(self, X: Any) -> np.ndarray:
        """``X`` as the float matrix of the training frame's columns (categories as codes)."""
        names = self.feature_names
        return to_matrix(X, len(names), names, self.categories)

    def adopt(self, forest: Forest) -> Forest:
        """``forest`` (fitted on :meth:`matrix` rows) reading DataFrames like the training frame."""
        forest.feature_names, forest.categories = self.feature_names, self.categories
        return forest

    @property
    def feature_names(self) -> list[str]:
        cols = getattr(self.X_train, "columns", None)
        if cols is not None:
            return [str(c) for c in cols]
        return [f"f{i}" for i in range(np.asarray(self.X_train).shape[1])]

    @property
    def categories(self) -> dict[int, list]:
        """Category lists of the training frame's categorical columns, by position."""
        if not hasattr(self.X_train, "dtypes"):
            return {}
        return {
            j: list(dt.categories)
            for j, dt in enumerate(self.X_train.dtypes)
            if isinstance(dt, pd.CategoricalDtype)
        }

    @property
    def full_cost(self) -> float:
        """Mean cost per example of the plain LightGBM model on the calibration split."""
        if "full_cost" not in self._cache:
            self._cache["full_cost"] = evaluate(self.lightgbm(), self.X_val, self.costs).cost.mean
        return self._cache["full_cost"]

    def order_cost(self, model: Any) -> float:
        """``model``'s mean cost per example on at most :data:`ORDER_ROWS` calibration rows
        (drawn once, the same for every model; whole queries for ranking), which orders a
        method's settings (``registry.CostOrder``). No labels are read; nan for no model."""
        if model is None:
            return float("nan")
        if "order rows" not in self._cache:
            self._cache["order rows"] = _order_rows(self.qid_val, len(self.y_val), self.random_state)
        keep = self._cache["order rows"]
        X, qid = self.X_val, self.qid_val
        if keep is not None:
            X = X.iloc[keep] if hasattr(X, "iloc") else np.asarray(X)[keep]
            qid = None if qid is None else qid[keep]
        if getattr(model, "needs_qid", False):  # a rule over each query's documents
            return float(model.evaluate(X, self.costs, qid=qid).cost.mean)
        return float(evaluate(model, X, self.costs).cost.mean)


def _order_rows(qid: np.ndarray | None, n: int, seed: int) -> np.ndarray | None:
    """The calibration rows :meth:`Context.order_cost` reads, in their order: all of them up to
    :data:`ORDER_ROWS` (None), else that many drawn at random (whole queries for ranking)."""
    if n <= ORDER_ROWS:
        return None
    rng = np.random.default_rng(seed)
    if qid is None:
        return np.sort(rng.choice(n, ORDER_ROWS, replace=False))
    queries = np.unique(qid)
    take = max(1, int(len(queries) * ORDER_ROWS / n))
    return np.flatnonzero(np.isin(qid, rng.choice(queries, take, replace=False)))


def _group_sizes(qid: np.ndarray | None) -> np.ndarray:
    if qid is None:
        raise InputError("a ranking task needs query ids (qid)")
    q = np.asarray(qid)
    starts = np.flatnonzero(np.r_[True, q[1:] != q[:-1]])
    if len(np.unique(q)) != len(starts):
        raise InputError("the rows of each query must be consecutive; sort the data by qid")
    return np.diff(np.r_[starts, len(q)])
