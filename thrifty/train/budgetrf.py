"""``BudgetRFClassifier``: the feature-budgeted random forest of Nan, Wang & Saligrama (ICML 2015)."""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from thrifty._validation import class_labels, costs_for_X
from thrifty.exceptions import InputError
from thrifty.train._budgetrf_kernels import IMPURITY_CODES, SPLIT_CODES, grow_tree, tree_leaves


class BudgetRFClassifier(ClassifierMixin, BaseEstimator):
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

    Parameters
    ----------
    n_estimators : int, default=40
    costs : CostModel or array-like of shape (n_features,), optional
        Feature prices; default 1 per feature. With groups or dependencies a feature is priced
        at what acquiring it alone costs.
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
    bootstrap : bool, default=True
        Each tree's sample is drawn with replacement (``max_samples`` rows); otherwise every
        tree sees all rows (and differs only by its candidate features).
    max_samples : int, float or None
        Bootstrap size (None: ``n``; float: fraction of ``n``).
    oob_score : bool, default=False
        Estimate accuracy on out-of-bag rows (``oob_score_``, ``oob_decision_function_``).
    random_state : int, Generator or None
    progress : bool, default=True
        Progress bar over trees (only when stderr is a TTY).

    Attributes
    ----------
    forest_ : Forest
    classes_ : ndarray
    n_classes_ : int
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when ``X`` has column names.
    feature_costs_ : ndarray of shape (n_features,)
        The price of each feature the split rule used.
    estimators_samples_ : list of ndarray
        The rows each tree was grown on (with repeats); ``oob_mask`` turns them into the
        out-of-bag mask ``budget_prune(count_mask=...)`` takes.
    oob_score_ : float
    oob_decision_function_ : ndarray of shape (n, n_classes)
    """

    def __init__(
        self,
        n_estimators: int = 40,
        *,
        costs: Any = None,
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

    def fit(self, X: Any, y: Any) -> BudgetRFClassifier:
        """Grow the forest on ``(X, y)``.

        Parameters
        ----------
        X : array-like of shape (n, n_features)
            Finite numerical features (encode categories first).
        y : array-like of shape (n,)

        Returns
        -------
        self
        """
        from tqdm.auto import tqdm

        from thrifty.forest.importers import ForestBuilder

        self._check_params()
        y, self.classes_, y_idx = class_labels(y, type(self).__name__)
        X, y = validate_data(self, X, y, dtype=np.float64)
        self.n_classes_ = len(self.classes_)
        n, d = X.shape
        self.n_fit_rows_ = n
        self.feature_costs_ = self._feature_costs(d)
        m_features = self._max_features(d)
        n_draw = self._n_samples(n)
        depth = np.iinfo(np.int64).max if self.max_depth is None else int(self.max_depth)
        rng = np.random.default_rng(self.random_state)
        y_idx = y_idx.astype(np.int64)
        width = self.n_classes_ if self.n_classes_ > 2 else 1
        builder = ForestBuilder(width)
        oob_sum = np.zeros((n, self.n_classes_)) if self.oob_score else None
        self.estimators_samples_ = []
        # disable=None: tqdm shows the bar only when stderr is a TTY
        bar = tqdm(
            total=self.n_estimators,
            desc="BudgetRF trees",
            unit="tree",
            disable=None if self.progress else True,
        )
        for _ in range(self.n_estimators):
            sample = rng.integers(0, n, size=n_draw) if self.bootstrap else np.arange(n, dtype=np.int64)
            seed = int(rng.integers(0, 2**31 - 1))
            self.estimators_samples_.append(sample)
            feature, threshold, left, right, counts = grow_tree(
                X,
                y_idx,
                self.n_classes_,
                sample,
                self.feature_costs_,
                IMPURITY_CODES[self.impurity],
                float(self.alpha),
                float(self.power),
                SPLIT_CODES[self.split],
                depth,
                int(self.min_samples_split),
                m_features,
                seed,
            )
            dist = counts / counts.sum(axis=1, keepdims=True)
            builder.add_tree(
                feature,
                threshold,
                left,
                right,
                dist[:, 1] if self.n_classes_ == 2 else dist,
                weight=1.0 / self.n_estimators,
                tree_class=-1 if width > 1 else 0,
            )
            if oob_sum is not None:
                out = np.setdiff1d(np.arange(n), sample)
                if out.shape[0]:
                    leaves = tree_leaves(X, out, feature, threshold, left, right)
                    oob_sum[out] += dist[leaves]
            bar.update()
        bar.close()
        names = getattr(self, "feature_names_in_", None)
        self.forest_ = builder.build(
            base_score=np.zeros(width),
            n_features=d,
            link="proba",
            task="binary" if self.n_classes_ == 2 else "multiclass",
            classes=self.classes_,
            feature_names=None if names is None else [str(c) for c in names],
            aggregation="mean",
            source="thrifty:BudgetRFClassifier",
        )
        if oob_sum is not None:
            seen = oob_sum.sum(axis=1) > 0
            if not seen.all():
                import warnings

                warnings.warn(
                    f"{int((~seen).sum())} rows were never out of bag; their OOB "
                    "estimate is NaN (use more trees)",
                    UserWarning,
                    stacklevel=2,
                )
            with np.errstate(invalid="ignore"):
                self.oob_decision_function_ = oob_sum / oob_sum.sum(axis=1, keepdims=True)
            pred = np.argmax(self.oob_decision_function_[seen], axis=1)
            self.oob_score_ = float(np.mean(pred == y_idx[seen])) if seen.any() else float("nan")
        return self

    def oob_mask(self) -> np.ndarray:
        """Boolean (n_fit_rows, n_estimators): row ``i`` was out of tree ``t``'s sample."""
        check_is_fitted(self, "forest_")
        n = self.n_fit_rows_
        mask = np.ones((n, self.n_estimators), dtype=bool)
        for t, sample in enumerate(self.estimators_samples_):
            mask[sample, t] = False
        return mask

    # ------------------------------------------------------------------ prediction
    def predict_proba(self, X: Any) -> np.ndarray:
        """Mean of the trees' leaf class distributions, shape (n, n_classes)."""
        check_is_fitted(self, "forest_")
        X = validate_data(self, X, reset=False, dtype=np.float64)
        return self.forest_.predict_proba(X)

    def predict(self, X: Any) -> np.ndarray:
        """The class of highest mean leaf probability."""
        proba = self.predict_proba(X)
        return self.classes_[np.argmax(proba, axis=1)]

    def cost_report(self, X: Any, costs: Any = None) -> Any:
        """Per-example ``CostReport`` of predicting ``X`` (default: the fit's ``costs``)."""
        from thrifty.costs import CostModel
        from thrifty.runtime.evaluate import evaluate

        check_is_fitted(self, "forest_")
        X = validate_data(self, X, reset=False, dtype=np.float64)
        if costs is None:
            costs = self.costs if isinstance(self.costs, CostModel) else CostModel(self.feature_costs_)
        return evaluate(self.forest_, X, costs).cost

    # ------------------------------------------------------------------ validation
    def _check_params(self) -> None:
        def integer(name: str, low: int, none_ok: bool = False) -> None:
            v = getattr(self, name)
            if v is None and none_ok:
                return
            if not isinstance(v, numbers.Integral) or isinstance(v, bool) or v < low:
                raise InputError(f"{name} must be an integer >= {low}, got {v!r}")

        integer("n_estimators", 1)
        integer("max_depth", 0, none_ok=True)
        integer("min_samples_split", 2)
        if self.impurity not in IMPURITY_CODES:
            raise InputError(f"impurity must be one of {tuple(IMPURITY_CODES)}, got {self.impurity!r}")
        if self.split not in SPLIT_CODES:
            raise InputError(f"split must be one of {tuple(SPLIT_CODES)}, got {self.split!r}")
        if not isinstance(self.alpha, numbers.Real) or not np.isfinite(self.alpha) or self.alpha < 0:
            raise InputError(f"alpha must be a finite number >= 0, got {self.alpha!r}")
        if not isinstance(self.power, numbers.Real) or not self.power >= 2:
            raise InputError(f"power must be a number >= 2, got {self.power!r}")
        for name in ("bootstrap", "oob_score", "progress"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise InputError(f"{name} must be True or False, got {getattr(self, name)!r}")
        if self.oob_score and not self.bootstrap:
            raise InputError("oob_score=True needs bootstrap=True (no row is out of bag otherwise)")

    def _feature_costs(self, d: int) -> np.ndarray:
        names = list(self.feature_names_in_) if hasattr(self, "feature_names_in_") else None
        costs = costs_for_X(self.costs, names, d)
        return np.array([costs.acquisition_cost([f]) for f in range(d)], dtype=np.float64)

    def _max_features(self, d: int) -> int:
        m = self.max_features
        if m is None:
            return d
        if isinstance(m, str):
            if m == "sqrt":
                return max(1, int(np.sqrt(d)))
            if m == "log2":
                return max(1, int(np.log2(d)))
            raise InputError(f"max_features must be 'sqrt', 'log2', an int, a float or None, got {m!r}")
        if isinstance(m, numbers.Integral) and not isinstance(m, bool):
            if not 1 <= int(m) <= d:
                raise InputError(f"max_features={m} must be within [1, n_features={d}]")
            return int(m)
        if isinstance(m, numbers.Real) and 0.0 < float(m) <= 1.0:
            return max(1, int(float(m) * d))
        raise InputError(
            f"max_features must be 'sqrt', 'log2', an int in [1, {d}], a float in (0, 1] or None, got {m!r}"
        )

    def _n_samples(self, n: int) -> int:
        m = self.max_samples
        if m is None:
            return n
        if isinstance(m, numbers.Integral) and not isinstance(m, bool) and int(m) >= 1:
            return int(m)
        if isinstance(m, numbers.Real) and 0.0 < float(m) <= 1.0:
            return max(1, int(round(float(m) * n)))
        raise InputError(f"max_samples must be None, an int >= 1 or a float in (0, 1], got {m!r}")

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        return tags
