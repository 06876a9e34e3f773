"""The base every thrifty estimator shares: parameters, costs, calibration data, budget selection.

A method says only how it trains and which models it would choose between (its *candidates*);
this base owns what is the same for all of them:

- the declared parameter constraints, checked once at ``fit``;
- ``costs=`` turned into a :class:`~thrifty.costs.CostModel` aligned with ``X``'s columns;
- the calibration rows the budget is measured on: ``fit(..., calibration=(X_cal, y_cal))``
  everywhere, else the method's default (the training rows, or a held-out fraction of them);
- the selection rule and its record, ``budget_search_``: among the candidates whose mean cost
  per example on the calibration rows is within ``budget``, the best calibration metric wins;
- ``cost_report`` and ``evaluate`` through the fitted plan ``plan_``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator
from sklearn.model_selection import train_test_split
from sklearn.utils.validation import check_array, check_is_fitted

from thrifty._param_validation import validate_params
from thrifty._validation import check_sample_weight, check_width, costs_for_X, to_frame, validate_frame
from thrifty.exceptions import BudgetError, InputError
from thrifty.forest import is_dataframe
from thrifty.runtime import evaluate

__all__ = ["Candidate", "Split", "ThriftyEstimator", "WrapsModel", "allows_nan"]

# A candidate meets the budget up to this relative slack (its cost is a float mean of sums).
BUDGET_SLACK = 1e-9
# Calibration metrics this close count as equal; the cheaper candidate then wins.
METRIC_TIE = 1e-12


@dataclass
class Candidate:
    """One model a method would choose between.

    Attributes
    ----------
    params : dict
        What distinguishes it (``{"tradeoff": 0.1}``, ``{"p_full": 0.3, "gamma": 1.0}``);
        one column of ``budget_search_`` per key.
    cost : float
        Its mean cost per example on the calibration rows (weighted by their sample weights).
    metric : float or None
        Its calibration metric, higher is better (accuracy, minus a loss), or None when the
        method measures cost only.
    model : object
        Whatever the method needs to finish fitting from it.
    """

    params: dict[str, Any]
    cost: float
    metric: float | None = None
    model: Any = None


@dataclass
class Split:
    """The rows a method trains on (``X, y, w``) and the rows its budget is measured on."""

    X: Any
    y: Any
    w: np.ndarray | None
    X_cal: Any
    y_cal: Any
    w_cal: np.ndarray | None


def _take(X: Any, rows: np.ndarray) -> Any:
    return X.iloc[rows] if is_dataframe(X) else X[rows]


class ThriftyEstimator(BaseEstimator):
    """Base of thrifty's estimators (see the module docstring for what it owns).

    Subclasses declare ``_parameter_constraints`` for every ``__init__`` parameter, call
    :meth:`_validate_params`, :meth:`_fit_costs` and :meth:`_calibration` in ``fit``, feed
    their candidates to :meth:`_select`, and set ``plan_``.
    """

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {}

    def _validate_params(self) -> None:
        """Check every parameter against ``_parameter_constraints`` (scikit-learn's convention:
        at ``fit``, never in ``__init__``)."""
        validate_params(self._parameter_constraints, self.get_params(deep=False), type(self).__name__)

    def _fit_costs(self, X: Any) -> Any:
        """``self.costs`` as a CostModel aligned with ``X``'s columns; sets ``costs_``."""
        names = [str(c) for c in X.columns] if is_dataframe(X) else None
        self.costs_ = costs_for_X(self.costs, names, X.shape[1])
        return self.costs_

    def _calibration(
        self,
        X: Any,
        y: Any,
        sample_weight: Any,
        calibration: Any,
        *,
        default: str = "train",
        fraction: float | None = None,
        random_state: Any = None,
        stratify: bool = True,
    ) -> Split:
        """The training rows and the calibration rows (where the budget is measured).

        Parameters
        ----------
        X, y, sample_weight
            The validated training data (``sample_weight`` already checked or None).
        calibration : tuple or None
            ``(X_cal, y_cal)`` or ``(X_cal, y_cal, sample_weight_cal)``; None uses ``default``.
        default : {"train", "split"}
            ``"train"``: calibrate on the training rows. ``"split"``: hold out ``fraction``
            of them (stratified by ``y`` when ``stratify`` and every class has two rows),
            seeded by ``random_state``; the method trains on the rest.
        """
        n = X.shape[0]
        if calibration is not None:
            return Split(X, y, sample_weight, *self._calibration_rows(X, calibration))
        if default == "train":
            return Split(X, y, sample_weight, X, y, sample_weight)
        if default != "split" or fraction is None:
            raise ValueError(f"default must be 'train' or 'split' with a fraction, got {default!r}")
        y_arr = np.asarray(y)
        strata = None
        if stratify:
            _, counts = np.unique(y_arr, return_counts=True)
            strata = y_arr if counts.min() >= 2 else None
        try:
            fit_rows, cal_rows = train_test_split(
                np.arange(n), test_size=fraction, random_state=random_state, stratify=strata
            )
        except ValueError:  # too few rows of a class for the stratified split asked for
            fit_rows, cal_rows = train_test_split(np.arange(n), test_size=fraction, random_state=random_state)
        fit_rows, cal_rows = np.sort(fit_rows), np.sort(cal_rows)
        w = sample_weight
        return Split(
            _take(X, fit_rows),
            y_arr[fit_rows],
            None if w is None else w[fit_rows],
            _take(X, cal_rows),
            y_arr[cal_rows],
            None if w is None else w[cal_rows],
        )

    def _calibration_rows(self, X: Any, calibration: Any) -> tuple[Any, Any, np.ndarray | None]:
        """The user's ``calibration=(X_cal, y_cal[, w_cal])``, checked against ``X``."""
        if not isinstance(calibration, tuple | list) or len(calibration) not in (2, 3):
            raise InputError(
                "calibration must be a tuple (X_cal, y_cal) or (X_cal, y_cal, sample_weight_cal), got "
                f"{type(calibration).__name__}"
            )
        X_cal = to_frame(calibration[0])
        if not is_dataframe(X_cal):
            X_cal = check_array(X_cal, dtype=np.float64, ensure_all_finite="allow-nan")
        check_width(X_cal.shape[1], X.shape[1], "the training X has")
        both_frames = is_dataframe(X) and is_dataframe(X_cal)
        if both_frames and list(map(str, X_cal.columns)) != list(map(str, X.columns)):
            raise InputError(
                "calibration X has other column names than the training X; give the same columns in the "
                "same order"
            )
        y_cal = np.asarray(calibration[1])
        if y_cal.ndim != 1 or len(y_cal) != X_cal.shape[0]:
            raise InputError(
                f"calibration y must be 1-d with one label per row of X_cal ({X_cal.shape[0]}), "
                f"got shape {y_cal.shape}"
            )
        w_cal = check_sample_weight(calibration[2], X_cal.shape[0]) if len(calibration) == 3 else None
        return X_cal, y_cal, w_cal

    def _select(self, candidates: Iterable[Candidate]) -> Candidate:
        """Choose among ``candidates`` by the one rule and record them in ``budget_search_``.

        Without a budget the method gives exactly one candidate, which is chosen. With one,
        the candidates within ``budget`` (mean cost on the calibration rows) compete: the
        highest metric wins, near-ties going to the cheaper; when no candidate has a metric
        the most expensive feasible one wins (the method ranks by cost alone).

        Raises
        ------
        BudgetError
            When every candidate costs more than the budget; it names the cheapest cost
            and carries the table as ``budget_search``.
        """
        cands = list(candidates)
        if not cands:
            raise ValueError(f"{type(self).__name__} produced no candidate model")
        budget = getattr(self, "budget", None)
        table = _table(cands)
        if budget is None:
            if len(cands) != 1:
                raise ValueError(f"{type(self).__name__} gave {len(cands)} candidates without a budget")
            chosen = 0
        else:
            feasible = [i for i, c in enumerate(cands) if c.cost <= float(budget) * (1.0 + BUDGET_SLACK)]
            if not feasible:
                cheapest = min(c.cost for c in cands)
                error = BudgetError(
                    f"{type(self).__name__}: no model meets budget={float(budget):g}; the cheapest of the "
                    f"{len(cands)} tried costs {cheapest:.6g} per example on the calibration rows. Raise "
                    f"budget to at least {cheapest:.6g}, or lower the feature prices"
                )
                error.budget_search = table  # type: ignore[attr-defined]
                raise error
            scored = [i for i in feasible if cands[i].metric is not None]
            if scored:
                best = max(float(cands[i].metric) for i in scored)  # type: ignore[arg-type]
                tied = [i for i in scored if float(cands[i].metric) >= best - METRIC_TIE]  # type: ignore[arg-type]
                chosen = min(tied, key=lambda i: (cands[i].cost, i))
            else:
                chosen = max(feasible, key=lambda i: (cands[i].cost, -i))
        table.loc[chosen, "chosen"] = True
        self.budget_search_ = table
        return cands[chosen]

    def evaluate(self, X: Any, costs: Any = None) -> Any:
        """``thrifty.evaluate`` of the fitted plan on ``X``: predictions, exits and per-example costs.

        ``costs`` defaults to the cost model the estimator was fitted with.
        """
        check_is_fitted(self, "plan_")
        X = validate_frame(self, X)
        return evaluate(self.plan_, X, self.costs_ if costs is None else costs)

    def cost_report(self, X: Any, costs: Any = None) -> Any:
        """The per-example ``CostReport`` of predicting ``X`` (exact, from thrifty's runtime).

        ``costs`` defaults to the cost model the estimator was fitted with.
        """
        return self.evaluate(X, costs).cost


def _table(cands: list[Candidate]) -> pd.DataFrame:
    """``budget_search_``: one row per candidate, its parameters, cost, metric and ``chosen``."""
    keys: list[str] = []
    for c in cands:
        keys.extend(k for k in c.params if k not in keys)
    rows = [
        {
            "candidate": i,
            **{k: c.params.get(k) for k in keys},
            "cost": float(c.cost),
            "metric": np.nan if c.metric is None else float(c.metric),
            "chosen": False,
        }
        for i, c in enumerate(cands)
    ]
    return pd.DataFrame(rows, columns=["candidate", *keys, "cost", "metric", "chosen"])


def allows_nan(model: Any) -> bool:
    """Whether a wrapped model takes NaN: a scikit-learn style model says so in its tags (an
    unfitted one is fitted on ``fit``'s rows, where it must accept them); a Forest or a booster
    routes a missing value by each split's default direction."""
    from sklearn.frozen import FrozenEstimator
    from sklearn.utils import get_tags

    inner = model.estimator if isinstance(model, FrozenEstimator) else model
    if hasattr(inner, "__sklearn_tags__"):
        return bool(get_tags(inner).input_tags.allow_nan)
    return True


class WrapsModel:
    """Mixin (left of :class:`ThriftyEstimator`) of the estimators that wrap a model (QWYC,
    Cronus, ADAPT's expensive model): they accept NaN only where the wrapped model does.

    thrifty's runtime routes NaN by each split's default direction, but a model that refuses
    NaN (scikit-learn's gradient boosting) refuses it in its own fit and predict; its wrapper
    says so in its tags, and ``evaluate`` refuses it as the model's predict would.
    """

    #: The parameter holding the wrapped model.
    _wrapped = "estimator"

    def _method_takes_nan(self) -> bool:
        """Whether the method's own parts route NaN (the trees do)."""
        return True

    def _takes_nan(self) -> bool:
        return self._method_takes_nan() and allows_nan(getattr(self, self._wrapped))

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()  # type: ignore[misc]
        tags.input_tags.allow_nan = self._takes_nan()
        return tags

    def evaluate(self, X: Any, costs: Any = None) -> Any:
        if not self._takes_nan() and not is_dataframe(X):
            check_array(X, ensure_all_finite=True)
        return super().evaluate(X, costs)  # type: ignore[misc]
