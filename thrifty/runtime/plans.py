"""Plans: how an example is evaluated (which trees, in which order, when to stop)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from thrifty.costs import CostModel
from thrifty.exceptions import InputError
from thrifty.forest import Forest, raw_to_proba
from thrifty.forest.io import decode_array, encode_array, forest_from_dict, forest_to_dict

PLAN_FORMAT = "thrifty.plan"
PLAN_VERSION = 1


class Plan:
    """Base of every plan: metadata of its outputs and the shared prediction API.

    Subclasses say which trees an example visits; ``thrifty.evaluate`` executes them, in dense
    or lazy mode, and accounts cost exactly.
    """

    kind = "plan"

    # -------------------------------------------------------------- metadata
    @property
    def _lead(self) -> Forest | Linear:
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

    def components(self) -> list[Forest | Linear]:
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
        """This plan compiled to native code: ``thrifty.compile(self, costs)``."""
        from thrifty.runtime.compiled import compile

        return compile(self, costs)

    # -------------------------------------------------------------- prediction
    def predict_raw(self, X: Any) -> np.ndarray:
        from thrifty.runtime.evaluate import evaluate

        return evaluate(self, X).raw

    def predict_proba(self, X: Any) -> np.ndarray:
        from thrifty.runtime.evaluate import evaluate

        ev = evaluate(self, X)
        if ev.proba is None:
            raise InputError(f"predict_proba needs a classifier; this plan's task is {self.task!r}")
        return ev.proba

    def predict(self, X: Any) -> np.ndarray:
        from thrifty.runtime.evaluate import evaluate

        ev = evaluate(self, X)
        return ev.labels if ev.labels is not None else ev.raw

    def cost_report(self, X: Any, costs: Any = None) -> Any:
        """The per-example ``CostReport`` of predicting ``X`` under ``costs``."""
        from thrifty.runtime.evaluate import evaluate

        return evaluate(self, X, costs).cost

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


class BinnedExits:
    """Per-bin exit thresholds of each position (Fan et al. 2002's dynamic scheduling).

    After position ``r`` the partial score ``g`` falls in bin ``floor(g / width[r])``; a bin in
    the table of position ``r`` exits positive when ``g > pos`` and negative when ``g < neg``;
    a bin missing from the table means "evaluate this example in full" (no further exits).
    ``width[r] == 0`` gives position ``r`` no table.

    Parameters
    ----------
    width : array-like of shape (n_positions,)
    tables : sequence of mappings ``{bin: (pos, neg)}``, one per position
    """

    def __init__(self, width: ArrayLike, tables: Sequence[dict[int, tuple[float, float]]]) -> None:
        self.width = np.asarray(width, dtype=np.float64)
        if len(tables) != len(self.width):
            raise InputError(f"{len(tables)} bin tables for {len(self.width)} positions")
        if np.any(~np.isfinite(self.width)) or np.any(self.width < 0):
            raise InputError("bin widths must be finite and >= 0")
        keys, pos, neg = [], [], []
        self.ptr = np.zeros(len(tables) + 1, dtype=np.int64)
        for r, table in enumerate(tables):
            for b in sorted(table):
                p_, n_ = table[b]
                if np.isnan(p_) or np.isnan(n_) or n_ > p_:
                    raise InputError(f"bin {b} of position {r}: thresholds must satisfy neg <= pos")
                keys.append(float(b))
                pos.append(float(p_))
                neg.append(float(n_))
            self.ptr[r + 1] = len(keys)
        self.key = np.asarray(keys, dtype=np.float64)
        self.pos = np.asarray(pos, dtype=np.float64)
        self.neg = np.asarray(neg, dtype=np.float64)

    def tables(self) -> list[dict[int, tuple[float, float]]]:
        return [
            {
                int(self.key[j]): (float(self.pos[j]), float(self.neg[j]))
                for j in range(self.ptr[r], self.ptr[r + 1])
            }
            for r in range(len(self.width))
        ]

    def to_dict(self) -> dict[str, Any]:
        return {
            "width": encode_array(self.width),
            "ptr": encode_array(self.ptr),
            "key": encode_array(self.key),
            "pos": encode_array(self.pos),
            "neg": encode_array(self.neg),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> BinnedExits:
        return cls._of(**{name: decode_array(d[name]) for name in ("width", "ptr", "key", "pos", "neg")})

    @classmethod
    def none(cls, n_positions: int) -> BinnedExits:
        """No bin tables at any of ``n_positions`` positions."""
        empty = np.zeros(0, dtype=np.float64)
        return cls._of(np.zeros(n_positions), np.zeros(n_positions + 1, np.int64), empty, empty, empty)

    @classmethod
    def _of(
        cls, width: np.ndarray, ptr: np.ndarray, key: np.ndarray, pos: np.ndarray, neg: np.ndarray
    ) -> BinnedExits:
        out = cls.__new__(cls)
        out.width, out.ptr, out.key, out.pos, out.neg = width, ptr, key, pos, neg
        return out


@dataclass(frozen=True)
class Schedule:
    """The trees a forest plan visits, in order, with each position's exits (see ``Sequential``).

    ``full`` is True when every tree is visited in forest order with no exit at all.
    """

    order: np.ndarray
    eps_pos: np.ndarray
    eps_neg: np.ndarray
    bins: BinnedExits
    full: bool


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


class Linear(Plan):
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
        self._link, self._task = link, task
        self._classes = None if classes is None else np.asarray(classes)
        self._names = None if feature_names is None else [str(f) for f in feature_names]

    n_features = property(lambda self: int(self.coef.shape[0]))
    n_outputs = property(lambda self: int(self.coef.shape[1]))
    link = property(lambda self: self._link)
    task = property(lambda self: self._task)
    classes = property(lambda self: self._classes)
    feature_names = property(lambda self: self._names)
    categories = property(lambda self: {})
    decision_threshold = property(lambda self: 0.5 if self._link == "proba" else 0.0)

    def components(self) -> list[Forest | Linear]:
        return [self]

    def feature_usage(self) -> np.ndarray:
        return np.any(self.coef != 0, axis=1).astype(np.int64)

    def _body(self) -> dict[str, Any]:
        return {
            "coef": encode_array(self.coef),
            "intercept": _floats(self.intercept),
            "link": self._link,
            "task": self._task,
            "classes": None if self._classes is None else self._classes.tolist(),
            "feature_names": self._names,
        }

    def __repr__(self) -> str:
        return f"Linear(n_features={self.n_features}, nonzero={int(self.feature_usage().sum())})"


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

    def components(self) -> list[Forest | Linear]:
        return self.gate.components() + self.low.components() + self.high.components()

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


def labels_from(
    raw: np.ndarray, decision: np.ndarray | None, link: str, classes: Any, n_outputs: int
) -> np.ndarray:
    """Class labels: forced decisions (+1/-1) where given, else the link's decision rule."""
    classes = np.asarray(classes) if classes is not None else np.arange(max(2, n_outputs))
    if n_outputs > 1:
        return classes[np.argmax(raw, axis=1)]
    r = raw[:, 0] if raw.ndim == 2 else raw
    positive = r > (0.5 if link == "proba" else 0.0)
    if decision is not None:
        positive = np.where(decision != 0, decision > 0, positive)
    return classes[positive.astype(np.intp)]


def proba_from(raw: np.ndarray, link: str) -> np.ndarray:
    return raw_to_proba(raw[:, 0] if raw.shape[1] == 1 else raw, link)
