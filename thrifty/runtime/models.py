"""One-model plans: a linear model (``Linear``) and a black box charged a fixed set of features
(``Opaque``), as parts of a ``Gated`` plan (ADAPT) or on their own."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from thrifty.exceptions import InputError, InvalidParameterError
from thrifty.forest.io import decode_array, encode_array
from thrifty.forest.links import LINKS, TASKS, decision_threshold
from thrifty.runtime.plans import Plan, floats, readonly


class ModelPlan(Plan):
    """A plan that is one model (not a forest): its outputs are described by its arguments."""

    features: np.ndarray  # the features it reads on every example

    def _describe(
        self,
        n_features: int,
        n_outputs: int,
        link: str,
        task: str,
        classes: Any,
        feature_names: Sequence[str] | None,
    ) -> None:
        if link not in LINKS:
            raise InputError(f"unknown link {link!r}; expected one of {LINKS}")
        if task not in TASKS:
            raise InputError(f"unknown task {task!r}; expected one of {TASKS}")
        if feature_names is not None and len(feature_names) != n_features:
            raise InputError(f"{len(feature_names)} feature names for {n_features} features")
        self._n_features, self._n_outputs = int(n_features), int(n_outputs)
        self._link, self._task = link, task
        self._classes = None if classes is None else np.asarray(classes)
        self._names = None if feature_names is None else [str(f) for f in feature_names]

    n_features = property(lambda self: self._n_features)
    n_outputs = property(lambda self: self._n_outputs)
    link = property(lambda self: self._link)
    task = property(lambda self: self._task)
    classes = property(lambda self: self._classes)
    feature_names = property(lambda self: self._names)
    categories = property(lambda self: {})
    decision_threshold = property(lambda self: decision_threshold(self._link))

    def components(self) -> list[ModelPlan]:
        return [self]

    def feature_usage(self) -> np.ndarray:
        """1 for each feature the model reads (all of them on every example), else 0."""
        used = np.zeros(self.n_features, dtype=np.int64)
        used[self.features] = 1
        return used

    def _meta(self) -> dict[str, Any]:
        return {
            "link": self._link,
            "task": self._task,
            "classes": None if self._classes is None else self._classes.tolist(),
            "feature_names": self._names,
        }


class Linear(ModelPlan):
    """A linear model ``intercept + X @ coef`` (ADAPT-LIN's gate and low-cost model).

    It acquires every feature with a non-zero coefficient.
    """

    kind = "linear"

    def __init__(
        self,
        coef: Any,
        intercept: Any = 0.0,
        *,
        link: str = "identity",
        task: str = "regression",
        classes: Any = None,
        feature_names: Sequence[str] | None = None,
    ) -> None:
        coef = np.asarray(coef, dtype=np.float64)
        self.coef = readonly(coef.reshape(-1, 1) if coef.ndim == 1 else coef)
        self.intercept = readonly(
            np.broadcast_to(np.asarray(intercept, dtype=np.float64), (self.coef.shape[1],))
        )
        if not (np.all(np.isfinite(self.coef)) and np.all(np.isfinite(self.intercept))):
            raise InputError("Linear coefficients and intercept must be finite")
        # The features the model reads: those with a non-zero coefficient.
        self.features = readonly(np.flatnonzero(np.any(self.coef != 0, axis=1)), np.int64)
        self._describe(self.coef.shape[0], self.coef.shape[1], link, task, classes, feature_names)

    def _body(self) -> dict[str, Any]:
        return {"coef": encode_array(self.coef), "intercept": floats(self.intercept), **self._meta()}

    def __repr__(self) -> str:
        return f"Linear(n_features={self.n_features}, nonzero={len(self.features)})"

    @classmethod
    def _from_body(cls, d: dict[str, Any]) -> Linear:
        meta = {k: d[k] for k in ("link", "task", "classes", "feature_names")}
        return cls(decode_array(d["coef"]), d["intercept"], **meta)


class Opaque(ModelPlan):
    """A model thrifty cannot see inside, charged a fixed set of features on every example.

    Every example acquires (and pays for) exactly ``features``; its raw output is what
    ``predict`` returns for it. Use it for a black box (an SVM, a neural network, a linear
    model of scikit-learn) inside a plan, e.g. as ADAPT's expensive model in a ``Gated`` plan.

    Parameters
    ----------
    predict : callable
        ``predict(Z) -> raw scores`` of shape ``(len(Z), width)`` (or ``(len(Z),)`` when
        ``width == 1``), where ``Z`` is a float64 matrix holding, for the examples evaluated,
        the columns ``features`` in the order given (category codes for categorical columns).
        It is called once per batch of examples (lazily: once per round of examples whose
        features have all arrived), never on zero rows.
    features : array-like of int, or boolean mask of shape (n_features,)
        The features the model reads: feature indices (then ``n_features`` is required), or a
        mask (its length is ``n_features``).
    width : int
        Outputs per example: 1 for regression, ranking and binary classification (the positive
        class's score), the number of classes for multiclass.
    link : {"identity", "sigmoid", "softmax", "proba"}
        How raw scores become probabilities (``"proba"``: they already are).
    task : {"regression", "binary", "multiclass", "ranking"}
    classes : array-like, optional
        Class labels in output order (classifiers).
    n_features : int, optional
        Width of the inputs the plan reads (required with feature indices).
    feature_names : sequence of str, optional

    Notes
    -----
    The plan is not saveable as JSON (``thrifty.save`` refuses it); it pickles when ``predict``
    pickles. ``thrifty.compile`` runs it on the interpreter (``native`` is False).
    """

    kind = "opaque"

    def __init__(
        self,
        predict: Callable[[np.ndarray], Any],
        features: Any,
        *,
        width: int = 1,
        link: str = "identity",
        task: str = "regression",
        classes: Any = None,
        n_features: int | None = None,
        feature_names: Sequence[str] | None = None,
    ) -> None:
        if not callable(predict):
            raise InvalidParameterError(
                f"Opaque needs a callable predict(X) -> raw scores, got {type(predict).__name__}"
            )
        feats = np.asarray(features)
        if feats.dtype == np.bool_:
            if feats.ndim != 1 or (n_features is not None and len(feats) != n_features):
                raise InputError(
                    f"features as a mask needs one entry per feature, got shape {feats.shape}"
                    + ("" if n_features is None else f" for n_features={n_features}")
                )
            n_features, feats = len(feats), np.flatnonzero(feats)
        elif n_features is None:
            raise InputError("Opaque with feature indices needs n_features= (or pass a boolean mask)")
        elif feats.size and not np.issubdtype(feats.dtype, np.integer):
            raise InputError(f"features must be integer indices or a boolean mask, got {feats.dtype}")
        feats = feats.reshape(-1).astype(np.int64)
        if np.any(feats < 0) or np.any(feats >= n_features):
            raise InputError(f"features must be indices in [0, {n_features}), got {feats.tolist()[:10]}")
        if len(np.unique(feats)) != len(feats):
            raise InputError("features lists a feature more than once")
        if int(width) < 1:
            raise InputError(f"width must be >= 1, got {width}")
        # The callable, under a name that does not suggest a plan-level predict (labels).
        self.function = predict
        self.features = readonly(feats, np.int64)
        self._describe(n_features, int(width), link, task, classes, feature_names)

    def outputs(self, Z: np.ndarray) -> np.ndarray:
        """``predict(Z)``, checked to be scores (no NaN) of shape ``(len(Z), width)``."""
        n, width = Z.shape[0], self.n_outputs
        out = np.asarray(self.function(Z), dtype=np.float64)
        if out.shape == (n,) and width == 1:
            out = out.reshape(n, 1)
        if out.shape != (n, width):
            raise InputError(
                f"Opaque's predict returned shape {out.shape} for {n} rows; it must return "
                f"({n}, {width})" + (f" or ({n},)" if width == 1 else "")
            )
        if np.isnan(out).any():
            raise InputError("Opaque's predict returned NaN; it must score every row")
        return out

    def _body(self) -> dict[str, Any]:
        raise InputError(
            "an Opaque plan wraps a Python callable and cannot be saved as JSON; pickle it "
            "(if its predict pickles) or save the model it wraps"
        )

    def __repr__(self) -> str:
        name = getattr(self.function, "__qualname__", self.function)
        return f"Opaque({name!r}, features={len(self.features)})"
