"""``QWYCRanker``: a scikit-learn meta-estimator making a fitted tree ranker quit early while
keeping each query's top ``k`` list or set (QWYC with a ranking disagreement)."""

from __future__ import annotations

from numbers import Integral, Real
from typing import Any, ClassVar

import numpy as np

from thrifty._estimator import Candidate, ThriftyEstimator
from thrifty._param_validation import Interval, StrOptions
from thrifty._validation import fitted_forest, query_ids, relevance_labels, validate_frame
from thrifty.exceptions import InputError
from thrifty.metrics import ndcg_at_k
from thrifty.order.estimator import _alphas, _Wrapper
from thrifty.order.ranking import qwyc_ranking, topk_changed
from thrifty.runtime import evaluate

__all__ = ["QWYCRanker"]


class QWYCRanker(_Wrapper, ThriftyEstimator):
    """Evaluate a tree ranker tree by tree, stopping a document once its side of its query's
    top ``k`` is safe (QWYC for rankers).

    ``fit`` chooses an order of the trees and, after each tree, a band ``[eps_neg, eps_pos]``
    on the partial score: a document whose partial score leaves the band stops and is ranked
    by that partial score. It minimises the mean evaluation cost per calibration document
    subject to at most a fraction ``alpha`` of the calibration *queries* having a top-``k``
    list (``keep="order"``) or set (``keep="set"``) different from the full model's (problem
    (2) of Wang, Gupta et al., "Quit When You Can", with that disagreement; see
    :func:`thrifty.order.qwyc_ranking`). No relevance labels are needed; on other queries,
    measure it with ``disagreement``.

    With ``budget``, QWYC is solved for every ``alpha`` of ``alphas`` and the plan with the
    smallest share of changed queries on the calibration documents among those whose mean cost
    there (as ``thrifty.evaluate`` measures it under ``costs``) is within the budget is kept
    (ties: the cheaper); ``budget_search_`` lists them all (its ``metric`` is minus that share).

    Parameters
    ----------
    estimator : fitted tree ranker or Forest
        Any single-output ensemble ``Forest.from_model`` imports: ``LGBMRanker``,
        ``XGBRanker``, a ``CEGBRanker``, or a regressor scoring relevance, possibly in
        ``sklearn.frozen.FrozenEstimator``. An unfitted one is cloned and fitted on ``(X, y)``
        with the queries (``group`` sizes or ``qid``, whichever its ``fit`` takes) first.
    k : int, default=5
        The top ``k`` that must not change (the precision@5 setting of Cronus).
    alpha : float in [0, 1), default=0.05
        Largest fraction of the calibration queries whose top ``k`` may change (without
        ``budget``).
    keep : {"order", "set"}, default="order"
        What of each query's top ``k`` must not change: its list, order included, so that
        NDCG@k (``score``) is the full model's on every query not counted against ``alpha``
        (a document of the full top ``k`` is evaluated in full; what ``thrifty.compare``
        uses, with k=10); or its set (precision@k: documents of the top ``k`` may exit with
        partial scores and change places among themselves).
    mode : {"both", "negative"}, default="both"
        ``"negative"``: only exits below the band (documents leaving the top early).
    ordering : {"optimize", "given", "random"}, default="optimize"
        ``"optimize"`` is QWYC's joint order and thresholds (Algorithm 1); the others fix the
        order first.
    costs : CostModel, dict or array-like of feature costs, optional
        Feature prices and ``tree_cost``. QWYC's objective charges each evaluated tree
        ``tree_cost`` (1 when it is 0); ``cost_report`` and ``budget`` use the full
        per-document cost ``thrifty.evaluate`` reports under these prices.
    budget : float, optional
        Largest mean cost per calibration document; ``None`` uses ``alpha``.
    alphas : array-like of floats in [0, 1), optional
        The bounds tried under a budget (default: ``thrifty.order.estimator.ALPHAS``).
    random_state : int, Generator or None
        Seed of ``ordering="random"``.
    progress : bool, default=True
        Progress bar over QWYC's positions (shown only when stderr is a TTY).

    Attributes
    ----------
    estimator_ : object
        The fitted ranker (``estimator`` itself unless a clone was fitted).
    forest_ : Forest
    plan_ : Sequential
        Order and thresholds; ``thrifty.evaluate(plan_, X, costs_)`` runs it per document.
    costs_ : CostModel
    budget_search_ : pandas.DataFrame
        One row per ``alpha`` tried: ``alpha``, ``cost``, ``metric`` (minus the share of
        calibration queries whose top ``k`` changed, as ``keep``) and ``chosen``.
    alpha_ : float
    result_ : QWYCResult
        Its ``n_disagree`` and ``budget`` count queries.
    mean_models_ : float
        Mean number of trees evaluated per calibration document.
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when ``X`` has column names.
    """

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        # any model ``as_forest`` imports; checked when it is imported
        "estimator": [object],
        "k": [Interval(Integral, 1, None, closed="left")],
        "alpha": [Interval(Real, 0, 1, closed="left")],
        "keep": [StrOptions({"order", "set"})],
        "mode": [StrOptions({"both", "negative"})],
        "ordering": [StrOptions({"optimize", "given", "random"})],
        "costs": [None, "cost-model"],
        "budget": [None, Interval(Real, 0, None, closed="left")],
        "alphas": [None, "array-like"],
        "random_state": ["random_state"],
        "progress": ["boolean"],
    }

    def __init__(
        self,
        estimator: Any,
        *,
        k: int = 5,
        alpha: float = 0.05,
        keep: str = "order",
        mode: str = "both",
        ordering: str = "optimize",
        costs: Any = None,
        budget: float | None = None,
        alphas: Any = None,
        random_state: Any = None,
        progress: bool = True,
    ) -> None:
        self.estimator = estimator
        self.k = k
        self.alpha = alpha
        self.keep = keep
        self.mode = mode
        self.ordering = ordering
        self.costs = costs
        self.budget = budget
        self.alphas = alphas
        self.random_state = random_state
        self.progress = progress

    def fit(self, X: Any, y: Any = None, *, qid: Any = None, calibration: Any = None) -> QWYCRanker:
        """Choose the order and exits on the calibration documents (labels are optional).

        Parameters
        ----------
        X : array-like or DataFrame of shape (n, n_features)
        y : array-like of shape (n,), optional
            Relevance labels: needed only to fit an unfitted ``estimator``.
        qid : array-like of shape (n,), optional
            Query of each document (consecutive rows, when an unfitted LightGBM ranker is
            fitted on them). Without it, all documents form one query.
        calibration : tuple, optional
            ``(X_cal, y_cal, qid_cal)`` (``y_cal`` may be None), or ``(X_cal, y_cal)`` as one
            query: the documents QWYC is fitted on and the budget is measured on (default: the
            training documents and queries).

        Returns
        -------
        self
        """
        self._validate_params()
        alphas = _alphas(self)  # checked before an unfitted estimator is fitted
        if y is None:
            X = validate_frame(self, X, None)
        else:
            X, y = validate_frame(self, X, y)
            y = relevance_labels(y, "y")
        q = query_ids(qid, X.shape[0], "qid")
        model, forest = fitted_forest(self.estimator, X, y, who=type(self).__name__, qid=q)
        if forest.n_outputs != 1 or forest.task not in ("ranking", "regression"):
            raise InputError(
                f"QWYCRanker needs a ranker (or a regressor scoring relevance); the estimator's task "
                f"is {forest.task!r} (use QWYCClassifier for classifiers)"
            )
        costs = self._fit_costs(X)
        X_cal, q_cal = (X, q) if calibration is None else self._queries_of(X, calibration)
        full = forest.predict_raw(X_cal)
        k = int(self.k)

        def candidate(alpha: float) -> Candidate:
            plan, res = qwyc_ranking(
                forest,
                X_cal,
                q_cal,
                k=k,
                alpha=alpha,
                costs=costs,
                keep=self.keep,
                mode=self.mode,
                ordering=self.ordering,
                random_state=self.random_state,
                return_result=True,
                progress=bool(self.progress),
            )
            ev = evaluate(plan, X_cal, costs)
            changed = float(np.mean(topk_changed(ev.raw, full, q_cal, k, self.keep))) if len(q_cal) else 0.0
            mean_models = float(ev.cost.n_trees.mean()) if len(q_cal) else 0.0
            return Candidate({"alpha": alpha}, float(ev.cost.mean), -changed, (plan, res, mean_models))

        chosen = self._select(candidate(a) for a in alphas)
        self.plan_, self.result_, self.mean_models_ = chosen.model
        self.estimator_ = model
        self.forest_ = forest
        self.alpha_ = chosen.params["alpha"]
        return self

    def _queries_of(self, X: Any, calibration: Any) -> tuple[Any, np.ndarray]:
        """``calibration=(X_cal, y_cal[, qid_cal])`` checked against ``X`` (``y_cal`` unused)."""
        if not isinstance(calibration, tuple | list) or len(calibration) not in (2, 3):
            raise InputError(
                "calibration must be a tuple (X_cal, y_cal, qid_cal) or (X_cal, y_cal), got "
                f"{type(calibration).__name__}"
            )
        X_cal = calibration[0]
        y_cal = calibration[1]
        if y_cal is None:  # QWYC needs no labels: stand-ins of the right length for the checks
            y_cal = np.zeros(np.shape(X_cal)[0])
        X_cal, _, _ = self._calibration_rows(X, (X_cal, y_cal))
        q_cal = calibration[2] if len(calibration) == 3 else None
        return X_cal, query_ids(q_cal, X_cal.shape[0], "calibration qid")

    def predict(self, X: Any) -> np.ndarray:
        """Ranking scores, shape (n,): each document's partial score at its exit (its full score
        where no exit fired)."""
        return np.asarray(self.evaluate(X).raw, dtype=np.float64).reshape(-1)

    def score(self, X: Any, y: Any, qid: Any = None) -> float:
        """NDCG@``k`` over the queries ``qid`` (one query without it) of ``predict(X)``
        (:func:`thrifty.metrics.ndcg_at_k`)."""
        y = relevance_labels(y, "y")
        return ndcg_at_k(y, self.predict(X), query_ids(qid, len(y), "qid"), int(self.k))

    def disagreement(self, X: Any, qid: Any = None) -> float:
        """Fraction of the queries ``qid`` of ``X`` (one query without it) whose top ``k``
        under ``predict`` differs from the full model's: its list or its set, as ``keep``."""
        pred = self.predict(X)
        if len(pred) == 0:
            return 0.0
        full = self.forest_.predict_raw(validate_frame(self, X))
        q = query_ids(qid, len(pred), "qid")
        return float(np.mean(topk_changed(pred, full, q, int(self.k), self.keep)))
