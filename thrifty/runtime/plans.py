"""Plans: how an example is evaluated (which trees, in which order, when to stop)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from functools import cached_property
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from thrifty.costs import CostModel
from thrifty.exceptions import InputError, InvalidParameterError
from thrifty.forest import Forest
from thrifty.forest.io import decode_array, encode_array, forest_from_dict, forest_to_dict
from thrifty.forest.links import LINKS, TASKS, decision_threshold
from thrifty.runtime.exits import BinnedExits, Schedule

PLAN_FORMAT = "thrifty.plan"
PLAN_VERSION = 1


class Plan:
    """Base of every plan: what to evaluate and the metadata of its outputs.

    Plans are data: subclasses say which trees (or models) an example visits and when it stops;
    ``thrifty.evaluate`` (or ``thrifty.compile``) runs them, in dense or lazy mode, and
    accounts cost exactly.
    """

    kind = "plan"

    # -------------------------------------------------------------- metadata
    @property
    def _lead(self) -> Forest | _Model:
        raise NotImplementedError

    @property
    def n_features(self) -> int:
        return self._lead.n_features

    @property
    def n_outputs(self) -> int:
        return self._lead.n_outputs

    @property
    def link(self) -> str:
        return self._lead.link

    @property
    def task(self) -> str:
        return self._lead.task

    @property
    def classes(self) -> np.ndarray | None:
        return self._lead.classes

    @property
    def feature_names(self) -> list[str] | None:
        return self._lead.feature_names

    @property
    def categories(self) -> dict[int, list]:
        return getattr(self._lead, "categories", {})

    @property
    def is_classifier(self) -> bool:
        return self.task in ("binary", "multiclass")

    def components(self) -> Sequence[Forest | _Model]:
        """The forests and linear models the plan evaluates from."""
        raise NotImplementedError

    def feature_usage(self) -> np.ndarray:
        """Boolean mask of features any component can test (read-only)."""
        return self._usage

    @cached_property
    def _usage(self) -> np.ndarray:
        # Plans and their components are immutable, so this is computed once per plan.
        used = np.zeros(self.n_features, dtype=bool)
        for c in self.components():
            used |= c.feature_usage() > 0
        return _readonly(used)

    @cached_property
    def default_costs(self) -> CostModel:
        """The cost model used when none is given: every feature costs 1, evaluation is free."""
        return CostModel.uniform(self.n_features, feature_names=self.feature_names)

    def compile(self, costs: CostModel | None = None) -> Any:
        """This plan as native code: ``thrifty.compile(self, costs)`` (see :func:`thrifty.compile`)."""
        # Plans are data and the runtime builds on them, so the compiler is imported on use.
        from thrifty.runtime.compiled.plan import compile as compile_plan

        return compile_plan(self, costs)

    # -------------------------------------------------------------- io
    def to_dict(self) -> dict[str, Any]:
        return {"format": PLAN_FORMAT, "version": PLAN_VERSION, "kind": self.kind, **self._body()}

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    def _body(self) -> dict[str, Any]:
        raise NotImplementedError


def _check_forest(forest: Any, what: str) -> Forest:
    if not isinstance(forest, Forest):
        raise TypeError(
            f"{what} must be a thrifty Forest, got {type(forest).__name__}; "
            "use Forest.from_model(model) to import a fitted model"
        )
    return forest


class Full(Plan):
    """Evaluate every tree of ``forest`` (a plain, CEGB or pruned model)."""

    kind = "full"

    def __init__(self, forest: Forest) -> None:
        self.forest = _check_forest(forest, "forest")
        T = forest.n_trees
        self.schedule = Schedule(
            _readonly(np.arange(T), np.int64),
            _readonly(np.full(T, np.inf)),
            _readonly(np.full(T, -np.inf)),
            BinnedExits.none(T),
            True,
        )

    @property
    def _lead(self) -> Forest:
        return self.forest

    def components(self) -> list[Forest | Linear]:
        return [self.forest]

    def _body(self) -> dict[str, Any]:
        return {"forest": forest_to_dict(self.forest)}

    def __repr__(self) -> str:
        return f"Full({self.forest!r})"


class Sequential(Plan):
    """Trees in a chosen order with per-position exits (QWYC, Fan et al., margin exits).

    After the ``r``-th tree of ``order`` (0-based position ``r``), an example exits positive
    when its partial raw score (base score plus the trees so far) is ``> eps_pos[r]`` and
    negative when it is ``< eps_neg[r]``; infinities disable an exit. An example that never
    exits is decided by its full score against the forest's decision threshold.

    With several outputs (multiclass), an example exits after position ``r`` when the partial
    score of its leading class exceeds the runner-up's by more than ``eps_pos[r]`` (the exit
    predicts the leading class); ``eps_neg`` must then be ``-inf`` and bins are not available.

    Parameters
    ----------
    forest : Forest
    order : sequence of int
        Tree indices in evaluation order (a subset of trees is allowed).
    eps_pos, eps_neg : sequence of float, optional
        Exit thresholds per position (default: no exits); ``eps_neg[r] <= eps_pos[r]``.
    bins : BinnedExits, optional
        Per-bin exits checked after ``eps_pos``/``eps_neg`` (Fan et al.'s rule).
    """

    kind = "sequential"

    def __init__(
        self,
        forest: Forest,
        order: ArrayLike | None = None,
        eps_pos: ArrayLike | None = None,
        eps_neg: ArrayLike | None = None,
        *,
        bins: BinnedExits | None = None,
    ) -> None:
        self.forest = _check_forest(forest, "forest")
        T = forest.n_trees
        self.order = _readonly(np.arange(T) if order is None else order, np.int64)
        if self.order.ndim != 1 or np.any(self.order < 0) or np.any(self.order >= T):
            raise InputError(f"order must list tree indices in [0, {T})")
        if len(np.unique(self.order)) != len(self.order):
            raise InputError("order lists a tree more than once")
        n = len(self.order)
        self.eps_pos = _thresholds(eps_pos, n, np.inf, "eps_pos")
        self.eps_neg = _thresholds(eps_neg, n, -np.inf, "eps_neg")
        if np.any(self.eps_neg > self.eps_pos):
            r = int(np.argmax(self.eps_neg > self.eps_pos))
            raise InputError(
                f"eps_neg[{r}]={self.eps_neg[r]:g} exceeds eps_pos[{r}]={self.eps_pos[r]:g}; "
                "an exit must not be both positive and negative"
            )
        if forest.n_outputs > 1 and (np.any(np.isfinite(self.eps_neg)) or bins is not None):
            raise InputError(
                "with several outputs an exit is a margin of the leading class over "
                "the runner-up: eps_neg must be -inf and bins are not supported"
            )
        if forest.n_outputs > 1 and np.any(self.eps_pos < 0):
            raise InputError("with several outputs eps_pos is a margin and must be >= 0")
        if bins is not None and len(bins.width) != n:
            raise InputError(f"bins cover {len(bins.width)} positions, the order has {n}")
        self.bins = bins
        full = bool(
            bins is None
            and np.all(np.isinf(self.eps_pos))
            and np.all(np.isinf(self.eps_neg))
            and n == T
            and np.array_equal(self.order, np.arange(n))
        )
        self.schedule = Schedule(
            self.order, self.eps_pos, self.eps_neg, BinnedExits.none(n) if bins is None else bins, full
        )

    @property
    def _lead(self) -> Forest:
        return self.forest

    def components(self) -> list[Forest | Linear]:
        return [self.forest]

    def _body(self) -> dict[str, Any]:
        return {
            "forest": forest_to_dict(self.forest),
            "order": self.order.tolist(),
            "eps_pos": _floats(self.eps_pos),
            "eps_neg": _floats(self.eps_neg),
            "bins": None if self.bins is None else self.bins.to_dict(),
        }

    def __repr__(self) -> str:
        exits = int(
            np.sum(
                np.isfinite(self.eps_pos)
                | np.isfinite(self.eps_neg)
                | (self.bins is not None and self.bins.width > 0)
            )
        )
        return f"Sequential(n_trees={len(self.order)}, exits={exits}, {self.forest!r})"


class Cascade(Plan):
    """Stages re-weighting a shared pool of trees, each with a reject threshold (Cronus).

    Stage ``k`` scores ``stage_bias[k] + sum_t stage_weights[k, t] * h_t(x)`` where ``h_t(x)``
    is tree ``t``'s contribution in the forest (weight times leaf value). An example is rejected
    (exits negative) at stage ``k < K-1`` when its score is below ``stage_thresholds[k]``;
    otherwise it continues, and after the last stage it is positive when the score exceeds
    ``stage_thresholds[K-1]``. A tree is evaluated at most once per example and its output
    reused by later stages; a stage with all-zero weights costs nothing.
    """

    kind = "cascade"

    def __init__(
        self,
        forest: Forest,
        stage_weights: Any,
        stage_thresholds: ArrayLike,
        stage_bias: ArrayLike | None = None,
    ) -> None:
        self.forest = _check_forest(forest, "forest")
        if forest.n_outputs != 1:
            raise InputError("Cascade needs a single-output forest (binary, regression or ranking)")
        W = np.asarray(stage_weights, dtype=np.float64)
        if W.ndim != 2 or W.shape[1] != forest.n_trees:
            raise InputError(f"stage_weights must have shape (n_stages, {forest.n_trees}), got {W.shape}")
        if not np.all(np.isfinite(W)):
            raise InputError("stage_weights must be finite")
        K = W.shape[0]
        if K == 0:
            raise InputError("a cascade needs at least one stage")
        self.stage_weights = _readonly(W)
        self.stage_thresholds = _thresholds(stage_thresholds, K, None, "stage_thresholds")
        self.stage_bias = (
            _readonly(np.full(K, forest.base_score[0]))
            if stage_bias is None
            else _thresholds(stage_bias, K, None, "stage_bias")
        )
        # Each stage's trees with non-zero weight, flattened (stage k: stage_trees[ptr[k]:ptr[k+1]]).
        nz = [np.flatnonzero(W[k]) for k in range(K)]
        self.stage_ptr = _readonly(np.concatenate([[0], np.cumsum([len(z) for z in nz])]), np.int64)
        self.stage_trees = _readonly(np.concatenate(nz), np.int64)
        self.stage_w = _readonly(np.concatenate([W[k, z] for k, z in enumerate(nz)]))

    @property
    def n_stages(self) -> int:
        return int(self.stage_weights.shape[0])

    @property
    def _lead(self) -> Forest:
        return self.forest

    def components(self) -> list[Forest | Linear]:
        return [self.forest]

    def _body(self) -> dict[str, Any]:
        return {
            "forest": forest_to_dict(self.forest),
            "stage_weights": encode_array(self.stage_weights),
            "stage_thresholds": _floats(self.stage_thresholds),
            "stage_bias": _floats(self.stage_bias),
        }

    def __repr__(self) -> str:
        return f"Cascade(n_stages={self.n_stages}, {self.forest!r})"


class _Model(Plan):
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

    def components(self) -> list[_Model]:
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


class Linear(_Model):
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
        self.coef = _readonly(coef.reshape(-1, 1) if coef.ndim == 1 else coef)
        self.intercept = _readonly(
            np.broadcast_to(np.asarray(intercept, dtype=np.float64), (self.coef.shape[1],))
        )
        if not (np.all(np.isfinite(self.coef)) and np.all(np.isfinite(self.intercept))):
            raise InputError("Linear coefficients and intercept must be finite")
        # The features the model reads: those with a non-zero coefficient.
        self.features = _readonly(np.flatnonzero(np.any(self.coef != 0, axis=1)), np.int64)
        self._describe(self.coef.shape[0], self.coef.shape[1], link, task, classes, feature_names)

    def _body(self) -> dict[str, Any]:
        return {"coef": encode_array(self.coef), "intercept": _floats(self.intercept), **self._meta()}

    def __repr__(self) -> str:
        return f"Linear(n_features={self.n_features}, nonzero={len(self.features)})"


class Opaque(_Model):
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
        self.features = _readonly(feats, np.int64)
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


class Gated(Plan):
    """A gate routes each example to a cheap model or to the expensive one (ADAPT).

    An example goes to ``high`` when the gate's raw score is ``> 0`` (in ADAPT, sigma(g(x)) is
    the probability of using the expensive model) and to ``low`` otherwise. Features acquired
    for the gate are free for the chosen model. ``raw``/``proba``/labels come from the chosen
    model, each through its own link.
    """

    kind = "gated"

    def __init__(self, gate: Any, low: Any, high: Any) -> None:
        self.gate, self.low, self.high = as_plan(gate), as_plan(low), as_plan(high)
        if self.gate.n_outputs != 1:
            raise InputError("the gate must have a single output (its raw score > 0 routes to high)")
        nf = {self.gate.n_features, self.low.n_features, self.high.n_features}
        if len(nf) != 1:
            raise InputError(
                f"gate, low and high must read the same features; they read "
                f"{self.gate.n_features}, {self.low.n_features} and {self.high.n_features}"
            )
        if self.low.n_outputs != self.high.n_outputs or self.low.task != self.high.task:
            raise InputError("low and high must solve the same task with the same outputs")
        lc, hc = self.low.classes, self.high.classes
        if lc is not None and hc is not None and not np.array_equal(np.asarray(lc), np.asarray(hc)):
            # Labels of the two models would mix silently: class j must mean the same in both.
            raise InputError(
                f"low and high must predict the same classes in the same order; low has "
                f"{list(lc)[:10]}, high has {list(hc)[:10]}"
            )

    @property
    def classes(self) -> np.ndarray | None:
        """The classes of ``high``, or of ``low`` when ``high`` does not name them."""
        return self.high.classes if self.high.classes is not None else self.low.classes

    @property
    def _lead(self) -> Plan:  # type: ignore[override]
        return self.high

    @property
    def feature_names(self) -> list[str] | None:
        return self.high.feature_names or self.low.feature_names or self.gate.feature_names

    @property
    def categories(self) -> dict[int, list]:
        return {**self.gate.categories, **self.low.categories, **self.high.categories}

    def components(self) -> list[Forest | _Model]:
        return [*self.gate.components(), *self.low.components(), *self.high.components()]

    def _body(self) -> dict[str, Any]:
        return {"gate": self.gate.to_dict(), "low": self.low.to_dict(), "high": self.high.to_dict()}

    def __repr__(self) -> str:
        return f"Gated(gate={self.gate!r}, low={self.low!r}, high={self.high!r})"


def as_plan(obj: Any) -> Plan:
    """A plan for ``obj``: a plan, a Forest (-> Full), a fitted thrifty estimator or any model
    ``Forest.from_model`` imports."""
    if isinstance(obj, Plan):
        return obj
    if isinstance(obj, Forest):
        # A forest is immutable, so its Full plan (and what the plan derives) is built once.
        plan = obj.__dict__.get("_full_plan")
        if plan is None:
            plan = obj.__dict__["_full_plan"] = Full(obj)
        return plan
    for attr in ("plan_", "forest_"):
        inner = getattr(obj, attr, None)
        if inner is not None and isinstance(inner, (Plan, Forest)):
            return as_plan(inner)
    return Full(Forest.from_model(obj))


def plan_from_dict(d: dict[str, Any]) -> Plan:
    if d.get("format") == "thrifty.forest":
        return Full(forest_from_dict(d))
    if d.get("format") != PLAN_FORMAT:
        raise InputError(f"not a thrifty plan or forest document (format={d.get('format')!r})")
    if d.get("version", 0) > PLAN_VERSION:
        raise InputError(
            f"plan document version {d['version']} is newer than this thrifty "
            f"understands ({PLAN_VERSION}); upgrade thrifty"
        )
    kind = d.get("kind")
    if kind == "full":
        return Full(forest_from_dict(d["forest"]))
    if kind == "sequential":
        bins = None if d.get("bins") is None else BinnedExits.from_dict(d["bins"])
        return Sequential(forest_from_dict(d["forest"]), d["order"], d["eps_pos"], d["eps_neg"], bins=bins)
    if kind == "cascade":
        return Cascade(
            forest_from_dict(d["forest"]),
            decode_array(d["stage_weights"]),
            d["stage_thresholds"],
            d["stage_bias"],
        )
    if kind == "linear":
        return Linear(
            decode_array(d["coef"]),
            d["intercept"],
            link=d["link"],
            task=d["task"],
            classes=d["classes"],
            feature_names=d["feature_names"],
        )
    if kind == "gated":
        return Gated(plan_from_dict(d["gate"]), plan_from_dict(d["low"]), plan_from_dict(d["high"]))
    raise InputError(f"unknown plan kind {kind!r}")


def _thresholds(values: ArrayLike | None, n: int, default: float | None, what: str) -> np.ndarray:
    if values is None:
        if default is None:
            raise InputError(f"{what} is required")
        return np.full(n, default)
    out = np.asarray(values, dtype=np.float64).reshape(-1)
    if out.shape != (n,):
        raise InputError(f"{what} needs {n} values, got {out.shape[0]}")
    if np.any(np.isnan(out)):
        raise InputError(f"{what} contains NaN; use +inf/-inf to disable an exit")
    return _readonly(out)


def _readonly(a: Any, dtype: Any = np.float64) -> np.ndarray:
    """A read-only C-contiguous copy: a plan's arrays never change after construction."""
    out = np.array(a, dtype=dtype, order="C")
    out.flags.writeable = False
    return out


def _floats(a: np.ndarray) -> list[float | str]:
    """JSON-safe floats (JSON has no infinity)."""
    return [("inf" if v > 0 else "-inf") if np.isinf(v) else float(v) for v in a]
