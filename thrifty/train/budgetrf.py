"""``BudgetRFClassifier`` and ``BudgetRFRegressor``: the feature-budgeted random forest of Nan, Wang &
Saligrama (ICML 2015), and its regression counterpart."""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterator
from numbers import Integral, Real
from typing import Any

import numpy as np
from sklearn.base import ClassifierMixin, RegressorMixin
from sklearn.metrics import r2_score
from sklearn.utils.validation import check_is_fitted, column_or_1d
from tqdm.auto import tqdm

from thrifty._estimator import Candidate, ThriftyEstimator
from thrifty._param_validation import Interval, StrOptions
from thrifty._validation import check_sample_weight, class_labels, validate_frame
from thrifty.exceptions import InputError, InvalidParameterError
from thrifty.forest.builder import ForestBuilder
from thrifty.runtime import Full, evaluate
from thrifty.train._budgetrf_inputs import coded, generator
from thrifty.train._budgetrf_kernels import IMPURITY_CODES, SPLIT_CODES, SQUARED_PAIRS, grow_tree


class _BudgetRF(ThriftyEstimator):
    """What both BudgetRF estimators share: the trees of Algorithm 1 grown by one kernel on
    per-node sums, the prefix of trees the budget allows, out-of-bag rows. A subclass says what
    the sums hold, the kernel's criterion and what a leaf predicts (``_sums``), how a prefix is
    scored (``_hits``) and what the forest predicts."""

    _parameter_constraints = {
        "n_estimators": [Interval(Integral, 1, None, closed="left")],
        "costs": [None, "cost-model"],
        "budget": [None, Interval(Real, 0, math.inf, closed="neither")],
        "alpha": [Interval(Real, 0, math.inf, closed="left")],
        "split": [StrOptions(SPLIT_CODES)],
        "max_depth": [None, Interval(Integral, 0, None, closed="left")],
        "max_features": [
            None,
            StrOptions({"sqrt", "log2"}),
            Interval(Integral, 1, None, closed="left"),
            Interval(Real, 0, 1, closed="right"),
        ],
        "min_samples_split": [Interval(Integral, 2, None, closed="left")],
        "bootstrap": ["boolean"],
        "max_samples": [
            None,
            Interval(Integral, 1, None, closed="left"),
            Interval(Real, 0, 1, closed="right"),
        ],
        "oob_score": ["boolean"],
        "random_state": ["random_state"],
        "progress": ["boolean"],
    }

    def _fit(self, X: Any, y: Any, target: np.ndarray, sample_weight: Any, calibration: Any) -> None:
        """Grow the forest on ``(X, y)`` (``target``: what the kernel's sums are made of) and keep
        the prefix of trees the budget allows."""
        self._validate_params()
        if self.oob_score and not self.bootstrap:
            raise InvalidParameterError(
                f"{type(self).__name__}: oob_score=True needs bootstrap=True (no row is out of bag otherwise)"
            )
        X, y = validate_frame(self, X, y)
        M, categories = coded(X)
        n, d = M.shape
        w = check_sample_weight(sample_weight, n)
        costs = self._fit_costs(X)
        split = self._calibration(X, y, w, calibration)
        self.n_fit_rows_ = n
        self.feature_costs_ = costs.prices()
        forest = self._grow(M, target, np.ones(n) if w is None else w, categories)
        chosen = self._select(self._prefixes(forest, split, scored=calibration is not None))
        self.forest_ = chosen.model
        self.plan_ = Full(self.forest_)
        self.n_estimators_ = int(chosen.params["n_trees"])
        del self.estimators_samples_[self.n_estimators_ :]
        if self.oob_score:
            self._oob(M, target)

    def _prefixes(self, forest: Any, split: Any, *, scored: bool) -> Iterator[Candidate]:
        """The candidates: every forest, or with a budget each prefix of its trees up to the
        first one over the budget (a prefix never costs less than a shorter one: each
        example's acquired features and evaluated trees only grow)."""
        if self.budget is None:
            yield self._prefix(forest, forest.n_trees, split, scored)
            return
        for k in range(1, forest.n_trees + 1):
            candidate = self._prefix(forest, k, split, scored)
            yield candidate
            if candidate.cost > self.budget:
                return

    def _prefix(self, forest: Any, k: int, split: Any, scored: bool) -> Candidate:
        """The forest of the first ``k`` trees, measured on the calibration rows."""
        prefix = forest if k == forest.n_trees else forest.subset(range(k))
        ev = evaluate(prefix, split.X_cal, self.costs_)
        cost = float(np.average(ev.cost.total, weights=split.w_cal))
        metric = None
        if scored:
            metric = float(np.average(self._hits(ev, np.asarray(split.y_cal)), weights=split.w_cal))
        return Candidate({"n_trees": k}, cost, metric, prefix)

    def _grow(self, X: np.ndarray, target: np.ndarray, w: np.ndarray, categories: dict) -> Any:
        """The ``n_estimators`` trees of Algorithm 1, as one averaged Forest."""
        n, d = X.shape
        m_features = self._max_features(d)
        n_draw = self._n_samples(n)
        depth = np.iinfo(np.int64).max if self.max_depth is None else int(self.max_depth)
        rng = generator(self.random_state)
        col, stats, n_columns, criterion, values = self._sums(target, w)
        meta = self._forest_meta()
        width = meta.pop("width")
        builder = ForestBuilder(width)
        self.estimators_samples_ = []
        # disable=None: tqdm shows the bar only when stderr is a TTY
        with tqdm(
            total=self.n_estimators,
            desc="BudgetRF trees",
            unit="tree",
            disable=None if self.progress else True,
        ) as bar:
            for _ in range(self.n_estimators):
                sample = rng.integers(0, n, size=n_draw) if self.bootstrap else np.arange(n, dtype=np.int64)
                seed = int(rng.integers(0, 2**31 - 1))
                # rows of weight 0 take no part (they would still place thresholds otherwise)
                sample = sample[w[sample] > 0]
                self.estimators_samples_.append(sample)
                feature, threshold, left, right, missing_left, counts = grow_tree(
                    X,
                    col,
                    stats,
                    n_columns,
                    sample,
                    self.feature_costs_,
                    criterion,
                    (depth, int(self.min_samples_split), m_features),
                    seed,
                )
                builder.add_tree(
                    feature,
                    threshold,
                    left,
                    right,
                    values(counts),
                    missing_left=missing_left,
                    weight=1.0 / self.n_estimators,
                    tree_class=-1 if width > 1 else 0,
                )
                bar.update()
        names = getattr(self, "feature_names_in_", None)
        return builder.build(
            base_score=np.zeros(width),
            n_features=d,
            feature_names=None if names is None else [str(c) for c in names],
            categories=categories,
            aggregation="mean",
            source=f"thrifty:{type(self).__name__}",
            **meta,
        )

    def oob_mask(self) -> np.ndarray:
        """Boolean of shape ``(n_fit_rows, n_estimators_)``: row ``i`` was out of tree ``t``'s sample."""
        check_is_fitted(self, "forest_")
        mask = np.ones((self.n_fit_rows_, len(self.estimators_samples_)), dtype=bool)
        for t, sample in enumerate(self.estimators_samples_):
            mask[sample, t] = False
        return mask

    def _max_features(self, d: int) -> int:
        m = self.max_features
        if m is None:
            return d
        if m == "sqrt":
            return max(1, int(np.sqrt(d)))
        if m == "log2":
            return max(1, int(np.log2(d)))
        if isinstance(m, Integral):
            if int(m) > d:
                raise InputError(f"max_features={m} must be within [1, n_features={d}]")
            return int(m)
        return max(1, int(m * d))

    def _n_samples(self, n: int) -> int:
        m = self.max_samples
        if m is None:
            return n
        if isinstance(m, Integral):
            return int(m)
        return max(1, int(round(m * n)))

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        return tags

    def _oob_sum(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For each row the sum of its out-of-bag trees' leaf values (n, width) and how many
        trees that is; warns of the rows never out of bag (their estimates are NaN)."""
        mask = self.oob_mask()
        values = self.forest_.value[self.forest_.apply(X)]  # (n, trees, width)
        n_oob = mask.sum(axis=1)
        if not np.all(n_oob > 0):
            warnings.warn(
                f"{int((n_oob == 0).sum())} rows were never out of bag; their OOB estimate is NaN "
                "(use more trees)",
                UserWarning,
                stacklevel=5,
            )
        return (values * mask[:, :, None]).sum(axis=1), n_oob


class BudgetRFClassifier(ClassifierMixin, _BudgetRF):
    """Random forest whose splits trade impurity reduction against feature cost (BudgetRF).

    Each tree is grown on a bootstrap sample. At a node, for each of ``max_features`` random
    features the threshold minimising the children's impurity is found (their maximum,
    ``split="minmax"``, or their size-weighted mean, ``split="expected"``), then the feature
    minimising ``cost_f / (impurity reduction)`` is chosen (Algorithm 1 of "Feature-Budgeted
    Random Forest", Nan, Wang & Saligrama, ICML 2015); a node of zero impurity is a leaf. With
    admissible impurities each tree's worst-case cost is within ``O(log n)`` of the optimal
    tree's. ``predict_proba`` averages the leaves' class distributions. The fitted forest is a
    thrifty ``Forest`` (``forest_``) for ``thrifty.evaluate`` and for pruning
    (``thrifty.prune.budget_prune``).

    ``sample_weight`` multiplies each example's contribution to the class counts ``n_i`` the
    impurities are computed from (threshold-Pairs ``sum_{i<j} [[n_i - alpha]_+ [n_j - alpha]_+
    - alpha^2]_+`` of Section 3.2 of the paper, and likewise entropy and powers), to the node
    sizes of the ``expected`` rule and to ``min_samples_split`` (a node splits when its total
    weight reaches it), so an integer weight is exactly a repeated row. Bootstrapping draws rows
    uniformly, as scikit-learn's forests do, and a drawn row counts its draws times its weight;
    rows of weight 0 take no part.

    Missing values (NaN) are allowed (not in the paper): each split sends them to the child that
    gives the lower criterion (to the heavier child when the node saw none). A DataFrame's
    ``category`` columns are trained on their category codes, as ordered numbers (a missing
    category is NaN); the fitted ``forest_`` records the categories, so a DataFrame at
    prediction is coded by category, whatever its category order.

    ``budget`` bounds the mean cost per example on the calibration rows (``calibration`` of
    ``fit``, else the training rows), as the paper's BudgetRF does: it adds trees while the
    forest's average cost on validation data stays within the budget, i.e. it keeps the
    longest prefix of trees within the budget (the cost never falls as trees are added). Here
    each prefix of the ``n_estimators`` grown trees, up to the first one over the budget, is a
    candidate, measured exactly with :func:`thrifty.evaluate` (groups, dependencies and tree
    costs included). With calibration rows given, the prefix of highest calibration accuracy
    within the budget is kept (the cheaper on ties), which departs from the paper only when a
    shorter prefix is more accurate there. On the training rows (the default) accuracy is that
    of trees grown on those very rows, so no accuracy is used and the longest prefix within the
    budget is kept: the paper's rule. (The 2015 paper's text is not among this repository's
    references, which hold only the BudgetPrune paper that prunes its 40- and 90-tree forests;
    this reading of its stopping rule is ours.)

    Parameters
    ----------
    n_estimators : int, default=40
        Trees grown (with ``budget``, the most the fitted forest keeps).
    costs : CostModel, dict or array-like of shape (n_features,), optional
        Feature prices; default 1 per feature. With groups or dependencies the split rule
        prices a feature at what acquiring it alone costs; the budget is measured exactly.
    budget : float > 0, optional
        Most mean cost per example on the calibration rows; raises :class:`BudgetError` when
        even the first tree costs more.
    impurity : {"pairs", "entropy", "powers"}, default="pairs"
        Threshold-Pairs, thresholded entropy, or powers (see ``_budgetrf_kernels.impurity``).
    alpha : float >= 0, default=0.0
        The impurity threshold: class counts (pairs, powers) or entropy below it count as pure,
        so larger values stop growth earlier.
    power : float >= 2, default=2.0
        Exponent of the ``"powers"`` impurity.
    split : {"minmax", "expected"}, default="minmax"
    max_depth : int, optional
        Deepest node (root at depth 0); unlimited by default.
    max_features : {"sqrt", "log2"}, int, float or None, default="sqrt"
        Candidate features per node (None: all).
    min_samples_split : int >= 2, default=2
        A node splits only when its total sample weight (its row count, unweighted) is at
        least this.
    bootstrap : bool, default=True
        Each tree's sample is drawn with replacement (``max_samples`` rows); otherwise every
        tree sees all rows (and differs only by its candidate features).
    max_samples : int, float or None
        Bootstrap size (None: ``n``; float: fraction of ``n``).
    oob_score : bool, default=False
        Estimate accuracy on out-of-bag rows (``oob_score_``, ``oob_decision_function_``).
    random_state : int, RandomState, Generator or None
    progress : bool, default=True
        Progress bar over trees (only when stderr is a TTY).

    Attributes
    ----------
    forest_ : Forest
        The kept trees (every grown tree without a budget), averaged.
    plan_ : Full
        ``Full(forest_)``, the plan ``cost_report`` and ``evaluate`` run.
    costs_ : CostModel
        The cost model aligned to the columns of ``X``.
    n_estimators_ : int
        Trees in ``forest_``.
    budget_search_ : DataFrame
        One row per candidate: ``n_trees`` (the prefix length, up to the first prefix over
        the budget), ``cost`` (mean cost on the calibration rows), ``metric`` (calibration
        accuracy, NaN on the training rows) and ``chosen``; one row without a budget.
    classes_ : ndarray
    n_classes_ : int
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when ``X`` has column names.
    feature_costs_ : ndarray of shape (n_features,)
        The price of each feature the split rule used.
    estimators_samples_ : list of ndarray
        The rows each kept tree was grown on (with repeats; rows of weight 0 left out);
        ``oob_mask`` turns them into the out-of-bag mask ``budget_prune(count_mask=...)``
        takes.
    oob_score_ : float
        Accuracy of the kept trees on their out-of-bag rows (unweighted).
    oob_decision_function_ : ndarray of shape (n, n_classes)
    """

    _parameter_constraints = {
        **_BudgetRF._parameter_constraints,
        "impurity": [StrOptions(IMPURITY_CODES)],
        "power": [Interval(Real, 2, None, closed="left")],
    }

    def __init__(
        self,
        n_estimators: int = 40,
        *,
        costs: Any = None,
        budget: float | None = None,
        impurity: str = "pairs",
        alpha: float = 0.0,
        power: float = 2.0,
        split: str = "minmax",
        max_depth: int | None = None,
        max_features: Any = "sqrt",
        min_samples_split: int = 2,
        bootstrap: bool = True,
        max_samples: Any = None,
        oob_score: bool = False,
        random_state: Any = None,
        progress: bool = True,
    ) -> None:
        self.n_estimators = n_estimators
        self.costs = costs
        self.budget = budget
        self.impurity = impurity
        self.alpha = alpha
        self.power = power
        self.split = split
        self.max_depth = max_depth
        self.max_features = max_features
        self.min_samples_split = min_samples_split
        self.bootstrap = bootstrap
        self.max_samples = max_samples
        self.oob_score = oob_score
        self.random_state = random_state
        self.progress = progress

    def fit(
        self, X: Any, y: Any, sample_weight: Any = None, *, calibration: Any = None
    ) -> BudgetRFClassifier:
        """Grow the forest on ``(X, y)`` and keep the prefix of trees the budget allows.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n, n_features)
            Numerical features; NaN is missing. A DataFrame's ``category`` columns are
            trained on their codes (see the class docstring); polars and pyarrow tables are
            read as pandas DataFrames.
        y : array-like of shape (n,)
        sample_weight : array-like of shape (n,), optional
            Weight of each row in the class counts (see the class docstring).
        calibration : tuple (X_cal, y_cal) or (X_cal, y_cal, sample_weight_cal), optional
            Rows the budget is measured on and the prefixes are scored on (weighted mean cost,
            weighted accuracy); default the training rows (see the class docstring).

        Returns
        -------
        self
        """
        y, self.classes_, y_idx = class_labels(y, type(self).__name__)
        self.n_classes_ = len(self.classes_)
        self._fit(X, y, y_idx.astype(np.int64), sample_weight, calibration)
        return self

    def _sums(self, target: np.ndarray, w: np.ndarray) -> tuple:
        """Each row's weight in its class's column; a leaf predicts its class distribution (a
        leaf of no weight, the prior)."""
        prior = np.bincount(target, weights=w, minlength=self.n_classes_) / w.sum()

        def values(counts: np.ndarray) -> np.ndarray:
            total = counts.sum(axis=1, keepdims=True)
            dist = np.where(total > 0, counts / np.where(total > 0, total, 1.0), prior)
            return dist[:, 1] if self.n_classes_ == 2 else dist

        criterion = (
            IMPURITY_CODES[self.impurity],
            float(self.alpha),
            float(self.power),
            SPLIT_CODES[self.split],
        )
        return target, w[:, None], self.n_classes_, criterion, values

    def _forest_meta(self) -> dict:
        return {
            "width": self.n_classes_ if self.n_classes_ > 2 else 1,
            "link": "proba",
            "task": "binary" if self.n_classes_ == 2 else "multiclass",
            "classes": self.classes_,
        }

    def _hits(self, ev: Any, y: np.ndarray) -> np.ndarray:
        return self.classes_[np.argmax(np.asarray(ev.proba), axis=1)] == y

    def _oob(self, X: np.ndarray, y_idx: np.ndarray) -> None:
        """Out-of-bag class distributions and accuracy of the kept trees."""
        total, n_oob = self._oob_sum(X)
        if self.n_classes_ == 2:  # a binary leaf holds the second class's probability
            total = np.column_stack([n_oob - total[:, 0], total[:, 0]])
        seen = n_oob > 0
        with np.errstate(invalid="ignore"):
            self.oob_decision_function_ = total / n_oob[:, None]
        pred = np.argmax(self.oob_decision_function_[seen], axis=1)
        self.oob_score_ = float(np.mean(pred == y_idx[seen])) if seen.any() else float("nan")

    # ------------------------------------------------------------------ prediction
    def predict_proba(self, X: Any) -> np.ndarray:
        """Mean of the trees' leaf class distributions, shape (n, n_classes)."""
        check_is_fitted(self, "forest_")
        return self.forest_.predict_proba(validate_frame(self, X))

    def predict(self, X: Any) -> np.ndarray:
        """The class of highest mean leaf probability."""
        proba = self.predict_proba(X)
        return self.classes_[np.argmax(proba, axis=1)]


class BudgetRFRegressor(RegressorMixin, _BudgetRF):
    """Regression forest whose splits trade a variance-based impurity reduction against feature
    cost (BudgetRF for regression).

    The split rule is :class:`BudgetRFClassifier`'s (Algorithm 1 of Nan, Wang & Saligrama,
    ICML 2015): per candidate feature the threshold minimising the children's impurity (their
    maximum, ``split="minmax"``, or weighted mean, ``"expected"``), then the feature minimising
    ``cost_f / (impurity reduction)``. The paper's admissible impurities are for class labels;
    a regressor uses *squared pairs*, the regression analogue of threshold-Pairs:

    .. math:: F(G) = \\Big[\\sum_{i<j \\in G} w_i w_j \\frac{(y_i - y_j)^2}{\\sigma^2}
              - \\alpha\\Big]_+ = \\Big[\\frac{W_G \\, \\mathrm{SSE}_G}{\\sigma^2}
              - \\alpha\\Big]_+,

    each pair weighted by its squared target difference in units of the training targets'
    variance ``sigma^2`` (a pair one standard deviation apart counts 1, as a pair of different
    labels does in Pairs, and ``alpha`` does not depend on the target's scale). It is admissible
    in the paper's sense: 0 exactly on a node of one target value (``alpha = 0``), monotone and
    supermodular (adding an example adds its pair terms with every member, which only grow
    with the node), and the threshold, convex and non-decreasing, keeps both properties
    (``_budgetrf_kernels.impurity`` also says why CART's ``SSE_G`` alone is not supermodular).
    A node of zero impurity is a leaf, a leaf predicts the weighted mean target of its rows, and
    ``predict`` averages the trees. Sample weights (``w_i``; an integer weight is a repeated
    row), the bootstrap, missing values, categorical columns, ``budget`` (scored by squared
    error on calibration rows) and the fitted attributes are as for :class:`BudgetRFClassifier`.

    With wide price ranges the rule keeps to the cheapest features, by design rather than by
    bug (the authors' code does the same): squared pairs, like Pairs, shrink with the square
    of a node's size, so a median cut on a feature *unrelated* to ``y`` already removes 3/4 of
    ``F(G)`` and no cut removes more than all of it. A feature costing more than about 4/3 of a
    cheaper one with a median cut is therefore never chosen at a node where both are
    candidates. On ``y = 3 [x_1 > 0] + 0.1 x_0 + noise`` (2,000 rows), ``x_0`` priced 1 and
    ``x_1`` 3, 10 trees with every feature a candidate split 12,599 times on ``x_0`` and never
    on ``x_1``; with ``max_features=1`` (a random candidate subset per node, as in the authors'
    code), 6,271 and 6,328 times. Hence the default ``max_features="sqrt"``, the classifier's
    and the randomisation of the authors' code: measured on diamonds (20,000 rows, 40 trees of
    depth 10, priced), every feature a candidate (``1.0``) gives a forest of test RMSE 1,429 at
    cost 4.9 that BudgetPrune cannot improve (1,431 at every budget from 4.8), ``"sqrt"`` one of
    1,347 at cost 43.8 whose prunings reach 1,382 at cost 5.0 and 1,352 at 40.8 (see the
    BudgetRF page of the docs).

    Parameters
    ----------
    n_estimators, costs, budget, split, max_depth, min_samples_split, bootstrap, max_samples
        As for :class:`BudgetRFClassifier`; so are ``random_state`` and ``progress``.
    alpha : float >= 0, default=0.0
        The impurity threshold, in pairs of examples one target standard deviation apart: a
        node whose squared pairs sum to no more is pure.
    max_features : {"sqrt", "log2"}, int, float or None, default="sqrt"
        Candidate features per node, drawn afresh at each node (1.0 or None: all, which keeps
        a priced forest to its cheapest features, see above).
    oob_score : bool, default=False
        Estimate ``R^2`` on out-of-bag rows (``oob_score_``, ``oob_prediction_``).

    Attributes
    ----------
    forest_, plan_, costs_, n_estimators_, feature_costs_, estimators_samples_
        As for :class:`BudgetRFClassifier` (and ``n_features_in_``, ``feature_names_in_``).
    budget_search_ : DataFrame
        As for :class:`BudgetRFClassifier`; ``metric`` is minus the calibration rows' mean
        squared error.
    oob_score_ : float
        ``R^2`` of the kept trees' out-of-bag predictions (unweighted).
    oob_prediction_ : ndarray of shape (n,)
    """

    def __init__(
        self,
        n_estimators: int = 40,
        *,
        costs: Any = None,
        budget: float | None = None,
        alpha: float = 0.0,
        split: str = "minmax",
        max_depth: int | None = None,
        max_features: Any = "sqrt",
        min_samples_split: int = 2,
        bootstrap: bool = True,
        max_samples: Any = None,
        oob_score: bool = False,
        random_state: Any = None,
        progress: bool = True,
    ) -> None:
        self.n_estimators = n_estimators
        self.costs = costs
        self.budget = budget
        self.alpha = alpha
        self.split = split
        self.max_depth = max_depth
        self.max_features = max_features
        self.min_samples_split = min_samples_split
        self.bootstrap = bootstrap
        self.max_samples = max_samples
        self.oob_score = oob_score
        self.random_state = random_state
        self.progress = progress

    def fit(self, X: Any, y: Any, sample_weight: Any = None, *, calibration: Any = None) -> BudgetRFRegressor:
        """Grow the forest on ``(X, y)`` and keep the prefix of trees the budget allows; see
        :meth:`BudgetRFClassifier.fit` (``y``: numeric targets)."""
        y = column_or_1d(np.asarray(y), warn=True).astype(np.float64)
        if not np.all(np.isfinite(y)):
            raise InputError("y contains NaN or infinity; regression targets must be finite")
        self._fit(X, y, y, sample_weight, calibration)
        return self

    def _sums(self, target: np.ndarray, w: np.ndarray) -> tuple:
        """``(w, w z, w z^2)`` of ``z = (y - offset) / p``, ``p`` the power of two nearest the
        targets' standard deviation ``sigma`` and ``offset`` a multiple of ``p`` near their mean:
        centring spares ``W S2 - S1^2`` the cancellation of a large mean, and the sums of targets
        of few binary digits (integers) are exact, so integer weights split as repeated rows do.
        ``alpha`` goes to ``p^2`` units (every reduction scales alike); a leaf predicts its mean."""
        mean = float(np.average(target, weights=w))
        sigma = float(np.sqrt(np.average((target - mean) ** 2, weights=w)))
        p = 2.0 ** np.round(np.log2(sigma)) if sigma > 0 else 1.0
        offset = p * np.round(mean / p)
        z = (target - offset) / p
        stats = np.column_stack([w, w * z, w * z * z])

        def values(sums: np.ndarray) -> np.ndarray:
            weight = sums[:, 0]
            mean_z = np.where(weight > 0, sums[:, 1] / np.where(weight > 0, weight, 1.0), (mean - offset) / p)
            return offset + p * mean_z

        alpha = float(self.alpha) * ((sigma / p) ** 2 if sigma > 0 else 1.0)
        criterion = (SQUARED_PAIRS, alpha, 2.0, SPLIT_CODES[self.split])
        return np.zeros(target.shape[0], dtype=np.int64), stats, 3, criterion, values

    def _forest_meta(self) -> dict:
        return {"width": 1, "link": "identity", "task": "regression", "classes": None}

    def _hits(self, ev: Any, y: np.ndarray) -> np.ndarray:
        return -((np.asarray(ev.raw) - y) ** 2)

    def _oob(self, X: np.ndarray, y: np.ndarray) -> None:
        """Out-of-bag mean predictions and ``R^2`` of the kept trees."""
        total, n_oob = self._oob_sum(X)
        seen = n_oob > 0
        with np.errstate(invalid="ignore", divide="ignore"):
            self.oob_prediction_ = total[:, 0] / n_oob
        self.oob_score_ = float(r2_score(y[seen], self.oob_prediction_[seen]) if seen.sum() > 1 else np.nan)

    def predict(self, X: Any) -> np.ndarray:
        """Mean of the trees' leaf values."""
        check_is_fitted(self, "forest_")
        return self.forest_.predict(validate_frame(self, X))
