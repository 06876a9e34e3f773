"""Plans: how an example is evaluated (which trees, in which order, when to stop)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike

from thrifty.costs import CostModel
from thrifty.exceptions import InputError
from thrifty.forest import Forest
from thrifty.forest.io import decode_array, encode_array, forest_from_dict, forest_to_dict
from thrifty.runtime.exits import BinnedExits, Schedule, sum_thresholds

if TYPE_CHECKING:
    # One-model plans subclass Plan in ``models``, which therefore imports this module.
    from thrifty.runtime.models import Linear, ModelPlan

PLAN_FORMAT = "thrifty.plan"
PLAN_VERSION = 1


class Plan:
    """Base of every plan: what to evaluate and the metadata of its outputs.

    Plans are data: subclasses say which trees (or models) an example visits and when it stops;
    ``thrifty.evaluate`` (or ``thrifty.compile``) runs them, in dense or lazy mode, and
    accounts cost exactly.
    """

    kind = "plan"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # Each kind reads its own JSON body back (``plan_from_dict``).
        if "kind" in vars(cls):
            _KINDS[cls.kind] = cls

    # -------------------------------------------------------------- metadata
    @property
    def _lead(self) -> Forest | ModelPlan:
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

    def components(self) -> Sequence[Forest | ModelPlan]:
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
        return readonly(used)

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

    @classmethod
    def _from_body(cls, d: dict[str, Any]) -> Plan:
        """The plan of this kind that ``_body`` wrote as ``d``."""
        raise NotImplementedError


# Plan kinds by name, filled as the classes are defined (here and in ``models``).
_KINDS: dict[str, type[Plan]] = {}


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
            readonly(np.arange(T), np.int64),
            readonly(np.full(T, np.inf)),
            readonly(np.full(T, -np.inf)),
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

    @classmethod
    def _from_body(cls, d: dict[str, Any]) -> Full:
        return cls(forest_from_dict(d["forest"]))


class Sequential(Plan):
    """Trees in a chosen order with per-position exits (QWYC, Fan et al., margin exits).

    After the ``r``-th tree of ``order`` (0-based position ``r``), an example exits positive
    when its partial raw score (base score plus the trees so far) is ``> eps_pos[r]`` and
    negative when it is ``< eps_neg[r]``; infinities disable an exit. An example that never
    exits is decided by its full score against the forest's decision threshold. For a
    ``base_last`` forest (CatBoost with a bias or scale) the partial raw score is the one the
    row would have if it stopped there, ``scale * (trees so far, summed from zero) +
    base_score``, for thresholds, bins and margins alike and any scale (``_base_last_exits``;
    with a scale below 0 and thresholds, ``forest`` is kept as its mirror image: tree weights
    and scale negated, the same raw scores bit for bit); margins and bins form that score at
    each exit (``Schedule.finish``), in every engine.

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
        self.order = readonly(np.arange(T) if order is None else order, np.int64)
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
        if forest.n_outputs > 1 and (np.any(self.eps_neg > -np.inf) or bins is not None):
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
            and np.all(self.eps_pos == np.inf)
            and np.all(self.eps_neg == -np.inf)
            and n == T
            and np.array_equal(self.order, np.arange(n))
        )
        pos, neg, finish = self.eps_pos, self.eps_neg, np.zeros(0)
        if forest.base_last and not full:
            self.forest, pos, neg, finish = _base_last_exits(forest, pos, neg, bins)
        tables = BinnedExits.none(n) if bins is None else bins
        self.schedule = Schedule(self.order, pos, neg, tables, full, finish)

    @property
    def _lead(self) -> Forest:
        return self.forest

    def components(self) -> list[Forest | Linear]:
        return [self.forest]

    def _body(self) -> dict[str, Any]:
        return {
            "forest": forest_to_dict(self.forest),
            "order": self.order.tolist(),
            "eps_pos": floats(self.eps_pos),
            "eps_neg": floats(self.eps_neg),
            "bins": None if self.bins is None else self.bins.to_dict(),
        }

    def __repr__(self) -> str:
        exits = int(
            np.sum(
                (self.eps_pos < np.inf)
                | (self.eps_neg > -np.inf)
                | (self.bins is not None and self.bins.width > 0)
            )
        )
        return f"Sequential(n_trees={len(self.order)}, exits={exits}, {self.forest!r})"

    @classmethod
    def _from_body(cls, d: dict[str, Any]) -> Sequential:
        bins = None if d.get("bins") is None else BinnedExits.from_dict(d["bins"])
        return cls(forest_from_dict(d["forest"]), d["order"], d["eps_pos"], d["eps_neg"], bins=bins)


def _base_last_exits(
    forest: Forest, eps_pos: np.ndarray, eps_neg: np.ndarray, bins: BinnedExits | None
) -> tuple[Forest, np.ndarray, np.ndarray, np.ndarray]:
    """What the engines run a ``base_last`` forest's exits with: ``(forest, eps_pos, eps_neg,
    finish)``. Exits decide on the raw score the row would have if it stopped there, ``f(a) =
    scale * a + base`` of the trees' running sum ``a`` (``Forest.finish``), exactly:

    * one output, thresholds only: thresholds on ``a`` that decide as the user's on ``f(a)``
      (``exits.sum_thresholds``), so every engine compares its sums unchanged. A scale below
      0 reverses the order: the forest is run as its mirror image (tree weights and scale
      negated), whose sums are the negated sums and whose ``f`` is the same expression with
      both signs flipped, bit for bit; a scale of 0 makes ``f`` the constant ``base``
      (finite sums), so each exit is taken by every row or none.
    * margins of several outputs and Fan et al.'s bins: no thresholds on ``a`` exist (bases
      differ per class; bins cut ``f``'s values), so the engines form ``f`` of the sums at each
      exit (``finish = [scale, *base]``) and compare it with the user's thresholds.
    """
    exits = bins is not None or bool(np.any(eps_pos < np.inf) or np.any(eps_neg > -np.inf))
    none = np.zeros(0)
    if not exits:
        return forest, eps_pos, eps_neg, none
    if bins is not None or forest.n_outputs > 1:
        return forest, eps_pos, eps_neg, readonly(np.concatenate([[forest.scale], forest.base_score]))
    if forest.scale == 0.0:
        base = float(forest.base_score[0])
        return (
            forest,
            readonly(np.where(base > eps_pos, -np.inf, np.inf)),
            readonly(np.where(base < eps_neg, np.inf, -np.inf)),
            none,
        )
    if forest.scale < 0.0:
        forest = dataclasses.replace(forest, tree_weight=-forest.tree_weight, scale=-forest.scale)
    return (forest, *sum_thresholds(forest, eps_pos, eps_neg), none)


class Cascade(Plan):
    """Stages re-weighting a shared pool of trees, each with a reject threshold (Cronus).

    Stage ``k`` scores ``stage_bias[k] + sum_t stage_weights[k, t] * h_t(x)`` where ``h_t(x)``
    is tree ``t``'s contribution in the forest (``Forest.contribution_weight`` times leaf
    value). An example is rejected (exits negative) at stage ``k < K-1`` when its score is
    below ``stage_thresholds[k]``; otherwise it continues, and after the last stage it is
    positive when the score exceeds ``stage_thresholds[K-1]``. A tree is evaluated at most
    once per example and its output reused by later stages; a stage with all-zero weights
    costs nothing.
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
        self.stage_weights = readonly(W)
        self.stage_thresholds = _thresholds(stage_thresholds, K, None, "stage_thresholds")
        self.stage_bias = (
            readonly(np.full(K, forest.base_score[0]))
            if stage_bias is None
            else _thresholds(stage_bias, K, None, "stage_bias")
        )
        # Each stage's trees with non-zero weight, flattened (stage k: stage_trees[ptr[k]:ptr[k+1]]).
        nz = [np.flatnonzero(W[k]) for k in range(K)]
        self.stage_ptr = readonly(np.concatenate([[0], np.cumsum([len(z) for z in nz])]), np.int64)
        self.stage_trees = readonly(np.concatenate(nz), np.int64)
        self.stage_w = readonly(np.concatenate([W[k, z] for k, z in enumerate(nz)]))

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
            "stage_thresholds": floats(self.stage_thresholds),
            "stage_bias": floats(self.stage_bias),
        }

    def __repr__(self) -> str:
        return f"Cascade(n_stages={self.n_stages}, {self.forest!r})"

    @classmethod
    def _from_body(cls, d: dict[str, Any]) -> Cascade:
        weights = decode_array(d["stage_weights"])
        return cls(forest_from_dict(d["forest"]), weights, d["stage_thresholds"], d["stage_bias"])


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

    def components(self) -> list[Forest | ModelPlan]:
        return [*self.gate.components(), *self.low.components(), *self.high.components()]

    def _body(self) -> dict[str, Any]:
        return {"gate": self.gate.to_dict(), "low": self.low.to_dict(), "high": self.high.to_dict()}

    def __repr__(self) -> str:
        return f"Gated(gate={self.gate!r}, low={self.low!r}, high={self.high!r})"

    @classmethod
    def _from_body(cls, d: dict[str, Any]) -> Gated:
        return cls(plan_from_dict(d["gate"]), plan_from_dict(d["low"]), plan_from_dict(d["high"]))


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


def check_classes(plan: Plan) -> None:
    """InputError for a classifier (or a classifier part of ``plan``) whose list of classes does
    not match its outputs: a label past the list's end would fail at the first prediction that
    picks it, long after the model was loaded."""
    for part in plan.components():
        if part.task not in ("binary", "multiclass") or part.classes is None:
            continue
        need = max(2, part.n_outputs)
        if len(part.classes) != need:
            raise InputError(
                f"the {part.task} model lists {len(part.classes)} classes "
                f"({np.asarray(part.classes)[:10].tolist()}) but its outputs score {need}; fix its "
                "'classes' list (one label per class, in the order the model was trained with) or "
                "re-save the model from its source"
            )


def plan_from_dict(d: dict[str, Any]) -> Plan:
    """The plan (or a forest's Full plan) written by ``to_dict``."""
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
    cls = _KINDS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise InputError(f"unknown plan kind {kind!r}")
    return cls._from_body(d)


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
    return readonly(out)


def readonly(a: Any, dtype: Any = np.float64) -> np.ndarray:
    """A read-only C-contiguous copy: a plan's arrays never change after construction."""
    out = np.array(a, dtype=dtype, order="C")
    out.flags.writeable = False
    return out


def floats(a: np.ndarray) -> list[float | str]:
    """JSON-safe floats (JSON has no infinity)."""
    return [("inf" if v > 0 else "-inf") if np.isinf(v) else float(v) for v in a]
