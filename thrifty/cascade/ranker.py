"""``CronusRanker``: a scikit-learn meta-estimator turning a tree ranker into a Cronus cascade
over the paper's setting, relevance binarized and precision@k over queries."""

from __future__ import annotations

from numbers import Integral, Real
from typing import Any, ClassVar

import numpy as np

from thrifty._estimator import Candidate
from thrifty._param_validation import Interval, StrOptions
from thrifty._validation import (
    check_sample_weight,
    fitted_forest,
    query_ids,
    relevance_labels,
    validate_frame,
)
from thrifty.cascade.cronus import cascade_scores, stage_rho
from thrifty.cascade.estimator import N_LAMS, CronusEstimator, _class_weight
from thrifty.exceptions import InputError
from thrifty.metrics import precision_at_k
from thrifty.runtime import evaluate

__all__ = ["CronusRanker"]


class CronusRanker(CronusEstimator):
    """Re-weight and re-order a tree ranker into a cascade of early rejects (Cronus).

    The setting of Chen et al. (AISTATS 2012, Section 5): a document is relevant when its
    label is at least ``relevant_min`` (the paper's ``y >= 3`` on Yahoo! LTR), the cascade of
    eq. (8) is fitted to those ``+1`` / ``-1`` targets over the ranker's trees (see
    :func:`thrifty.cascade.cronus`), and it is judged by precision@``k`` over queries (the
    paper's precision@5, :func:`thrifty.metrics.precision_at_k`). A document rejected at a
    later stage ranks above one rejected earlier (:func:`thrifty.cascade.cascade_scores`).

    With ``budget``, ``fit`` tries ``lam = lambda_max / 2**j`` (``j = 0 .. n_lams - 1``) and
    keeps the cascade of highest precision@``k`` on the calibration queries whose mean cost per
    document there (measured by ``thrifty.evaluate``) is within the budget; ``budget_search_``
    lists them all.

    Parameters
    ----------
    estimator : fitted tree ranker or Forest
        Any single-output ensemble ``Forest.from_model`` imports: ``LGBMRanker``,
        ``XGBRanker``, a ``CEGBRanker``, or a regressor scoring relevance. An unfitted one is
        cloned and fitted on ``(X, y)`` with the queries (``group`` sizes or ``qid``, whichever
        its ``fit`` takes) first.
    costs : CostModel, dict or array-like of feature costs, optional
        Feature acquisition costs and the per-tree cost; default 1 per feature, trees free.
    budget : float, optional
        Largest mean cost per calibration document. ``None``: use ``lam``.
    lam : float, optional
        The trade-off when ``budget`` is None (default: ``lambda_max(..., exact=False) / 16``).
    n_stages, rho, delta, eps, gamma, init_only, max_cycles
        As in :func:`thrifty.cascade.cronus`.
    class_weight : float, "balanced" or None, default=3.5
        Loss weight of relevant documents (the paper's ``omega^+ = 3.5``), or "balanced".
    relevant_min : float, default=3
        Smallest relevant label (the paper's binarization ``y >= 3``).
    k : int, default=5
        The ``k`` of precision@k (``score`` and the budget search).
    n_lams : int, default=8
    progress : bool, default=True
    n_threads : int or None, default=1
        As in :class:`CronusClassifier`.

    Attributes
    ----------
    estimator_ : object
    forest_ : Forest
    plan_ : Cascade
        ``thrifty.evaluate(plan_, X, costs_)`` runs it and reports each document's cost.
    costs_ : CostModel
    result_ : CronusResult
    lam_ : float
    budget_search_ : pandas.DataFrame
        One row per cascade fitted: ``lam``, ``cost`` (mean per calibration document),
        ``metric`` (precision@``k`` over the calibration queries) and ``chosen``.
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when ``X`` has column names.
    """

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        **CronusEstimator._parameter_constraints,
        "class_weight": [None, Interval(Real, 0, None, closed="neither"), StrOptions({"balanced"})],
        "relevant_min": [Interval(Real, None, None, closed="neither")],
        "k": [Interval(Integral, 1, None, closed="left")],
    }

    def __init__(
        self,
        estimator: Any,
        *,
        costs: Any = None,
        budget: float | None = None,
        lam: float | None = None,
        n_stages: int = 10,
        rho: Any = 1e-3,
        delta: float = 1.3,
        eps: float = 0.15,
        gamma: float = 50.0,
        class_weight: Any = 3.5,
        relevant_min: float = 3,
        k: int = 5,
        init_only: bool = False,
        max_cycles: int = 5,
        n_lams: int = N_LAMS,
        progress: bool = True,
        n_threads: int | None = 1,
    ) -> None:
        self.estimator = estimator
        self.costs = costs
        self.budget = budget
        self.lam = lam
        self.n_stages = n_stages
        self.rho = rho
        self.delta = delta
        self.eps = eps
        self.gamma = gamma
        self.class_weight = class_weight
        self.relevant_min = relevant_min
        self.k = k
        self.init_only = init_only
        self.max_cycles = max_cycles
        self.n_lams = n_lams
        self.progress = progress
        self.n_threads = n_threads

    def fit(
        self, X: Any, y: Any, *, qid: Any = None, sample_weight: Any = None, calibration: Any = None
    ) -> CronusRanker:
        """Build the cascade on the documents ``(X, y)`` of the queries ``qid``.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n, n_features)
        y : array-like of shape (n,)
            Relevance labels (0-4 on Yahoo! LTR); ``y >= relevant_min`` is relevant.
        qid : array-like of shape (n,), optional
            Query of each document (consecutive rows, when an unfitted LightGBM ranker is
            fitted on them). Without it, all documents form one query.
        sample_weight : array-like of shape (n,), optional
            Weights of the documents in eq. (8) (see :func:`thrifty.cascade.cronus`).
        calibration : tuple, optional
            ``(X_cal, y_cal, qid_cal)``, or ``(X_cal, y_cal)`` as one query: the documents
            the budget and the precision@``k`` of each cascade are measured on (default: the
            training documents and queries).

        Returns
        -------
        self
        """
        self._validate_params()
        stage_rho(self.rho, self.n_stages)
        X, y = validate_frame(self, X, y)
        y = relevance_labels(y, "y")
        qid = query_ids(qid, len(y), "qid")
        w = check_sample_weight(sample_weight, len(y))
        model, forest = fitted_forest(self.estimator, X, y, w, who=type(self).__name__, qid=qid)
        if forest.task not in ("ranking", "regression"):
            raise InputError(
                f"CronusRanker needs a ranker (or a regressor scoring relevance); the estimator's task "
                f"is {forest.task!r} (use CronusClassifier for binary classifiers)"
            )
        costs = self._fit_costs(X)
        X_cal, y_cal, q_cal = (X, y, qid) if calibration is None else self._queries_of(X, calibration)
        relevant = y >= self.relevant_min
        if isinstance(self.class_weight, str) and not relevant.any():
            raise InputError(
                f"class_weight='balanced' needs a relevant document (label >= relevant_min="
                f"{self.relevant_min}); no label of y is that high"
            )
        class_weight = _class_weight(self.class_weight, relevant, np.array([False, True]), w)

        # calibrating on the training documents, their weights weigh the cost (not the precision,
        # a mean over queries)
        w_cal = w if calibration is None else None

        def candidate(lam: float | None) -> Candidate:
            res = self._cascade(forest, X, relevant, costs, lam, class_weight, w)
            ev = evaluate(res.plan, X_cal, costs)
            precision = precision_at_k(y_cal, cascade_scores(ev), q_cal, self.k, self.relevant_min)
            return Candidate(
                {"lam": res.lam}, float(np.average(ev.cost.total, weights=w_cal)), precision, res
            )

        lams = self._lams(forest, X, relevant, costs, class_weight, w)
        self._keep(self._select(candidate(lam) for lam in lams).model, model, forest)
        return self

    def _queries_of(self, X: Any, calibration: Any) -> tuple[Any, np.ndarray, np.ndarray]:
        """``calibration=(X_cal, y_cal[, qid_cal])`` checked against ``X``."""
        if not isinstance(calibration, tuple | list) or len(calibration) not in (2, 3):
            raise InputError(
                "calibration must be a tuple (X_cal, y_cal, qid_cal) or (X_cal, y_cal), got "
                f"{type(calibration).__name__}"
            )
        X_cal, y_cal, _ = self._calibration_rows(X, tuple(calibration[:2]))
        y_cal = relevance_labels(y_cal, "calibration y")
        q_cal = query_ids(calibration[2] if len(calibration) == 3 else None, len(y_cal), "calibration qid")
        return X_cal, y_cal, q_cal

    def predict(self, X: Any) -> np.ndarray:
        """Ranking scores, shape (n,): documents passing every stage rank first (by the last
        stage's score), then those rejected later before those rejected earlier."""
        return cascade_scores(self.evaluate(X))

    def score(self, X: Any, y: Any, qid: Any = None) -> float:
        """Precision@``k`` over the queries ``qid`` (one query without it) of ``predict(X)``,
        a document relevant when ``y >= relevant_min`` (:func:`thrifty.metrics.precision_at_k`)."""
        scores = self.predict(X)
        y = relevance_labels(y, "y")
        return precision_at_k(y, scores, query_ids(qid, len(y), "qid"), self.k, self.relevant_min)
