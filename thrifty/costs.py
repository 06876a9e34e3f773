"""CostModel (what a prediction costs) and CostReport (what each prediction did cost)."""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from thrifty.exceptions import InputError
from thrifty.forest.names import align, check_unique, is_generic

Key = int | str
#: The keys of a full cost spec (``CostModel.from_dict``, a JSON cost file).
SPEC_KEYS = (
    "costs",
    "feature_names",
    "groups",
    "group_costs",
    "dependencies",
    "tree_cost",
    "split_cost",
    "fixed_costs",
)
# Largest total price accepted: what an example pays for every feature plus one tree and one
# split, so that sums over trees, nodes and rows stay finite (float64 overflows near 1.8e308).
MAX_TOTAL_COST = 1e300


class CostModel:
    """Prices of features and of evaluation, and how they are paid.

    A feature's acquisition cost is paid **once per example**, the first time any evaluated
    tree tests it; later tests of it on the same example are free (the value is cached).

    Parameters
    ----------
    feature_costs : array-like of shape (n_features,) or mapping
        Cost of each feature, or ``{name: cost}`` (then ``feature_names`` is required, every
        feature needs a cost unless it is derived, and a key may also name a group to price
        the group as a whole). Costs must be finite and ``>= 0``.
    feature_names : sequence of str, optional
        Names of the features, in column order.
    groups : mapping of str to sequence of features, optional
        Features produced together (one extractor, one lab panel). Acquiring any member pays
        the group **once** and acquires every member. A group costs the price given under its
        name in ``feature_costs``, or else the sum of its members' costs.
    dependencies : mapping of feature to sequence of features, optional
        A derived feature requires its inputs: acquiring it also acquires (and pays for) them,
        e.g. ``{"FTI": ["TT4", "T4U"]}``. Cycles are rejected.
    tree_cost : float, default=0
        Evaluation cost of each tree evaluated on an example.
    split_cost : float, default=0
        Evaluation cost of each split node visited on an example (CEGB's per-split penalty).
    fixed_costs : array-like or mapping, optional
        Cost paid once per **model** for each feature it uses at all (CEGB's coupled cost,
        e.g. setting up an extractor); reported in ``CostReport.fixed``, not per example.

    Examples
    --------
    >>> costs = CostModel({"age": 1, "TT4": 14.51, "T4U": 11.41, "FTI": 0},
    ...                   feature_names=["age", "TT4", "T4U", "FTI"],
    ...                   dependencies={"FTI": ["TT4", "T4U"]})
    >>> costs.acquisition_cost(["FTI"])
    25.92
    """

    def __init__(
        self,
        feature_costs: Any,
        *,
        feature_names: Sequence[str] | None = None,
        groups: Mapping[str, Sequence[Key]] | None = None,
        dependencies: Mapping[Key, Sequence[Key]] | None = None,
        tree_cost: float = 0.0,
        split_cost: float = 0.0,
        fixed_costs: Any = None,
    ) -> None:
        self.feature_names = None if feature_names is None else [str(f) for f in feature_names]
        if self.feature_names is not None:
            check_unique(self.feature_names, "feature_names")
        group_prices: dict[str, float] = {}
        if isinstance(feature_costs, Mapping):
            if self.feature_names is None:
                raise InputError(
                    "feature_costs given by name needs feature_names=[...] (the column order of your data)"
                )
            group_names = set(groups or {})
            derived = {self._index(k) for k in (dependencies or {})}
            costs = np.zeros(len(self.feature_names))
            seen = set()
            for key, value in feature_costs.items():
                if str(key) in group_names and str(key) not in self.feature_names:
                    group_prices[str(key)] = _check_cost(value, f"group {key!r}")
                    continue
                costs[self._index(key)] = _check_cost(value, f"feature {key!r}")
                seen.add(self._index(key))
            grouped = {self._index(m) for members in (groups or {}).values() for m in members}
            missing = [
                f
                for i, f in enumerate(self.feature_names)
                if i not in seen and i not in derived and i not in grouped
            ]
            if missing:
                raise InputError(
                    f"no cost given for feature(s) {missing[:10]}; give every "
                    "feature a cost (0 if it is free)"
                )
        else:
            raw = (
                np.asarray(feature_costs, dtype=object).reshape(-1)
                if np.ndim(feature_costs) == 1
                else np.asarray(feature_costs, dtype=object)
            )
            if raw.ndim != 1:
                raise InputError(f"feature_costs must be 1-dimensional, got shape {raw.shape}")
            # Counted before each cost is checked: the check names the feature by its position.
            if self.feature_names is not None and len(raw) != len(self.feature_names):
                raise InputError(
                    f"{len(raw)} feature costs for {len(self.feature_names)} "
                    "feature names; give one cost per feature"
                )
            costs = np.array([_check_cost(c, f"feature {self._label(i)!r}") for i, c in enumerate(raw)])
        self.feature_costs = costs.astype(np.float64)
        self.n_features = len(costs)
        self.tree_cost = _check_cost(tree_cost, "tree_cost")
        self.split_cost = _check_cost(split_cost, "split_cost")
        self.fixed_costs = self._per_feature(fixed_costs, "fixed_costs")
        self.groups = {str(g): [self._index(m) for m in members] for g, members in (groups or {}).items()}
        self.dependencies = {
            self._index(d): [self._index(m) for m in inputs] for d, inputs in (dependencies or {}).items()
        }
        self._group_prices = group_prices
        self._compile()
        self._check_total()

    # ------------------------------------------------------------------ constructors
    @classmethod
    def uniform(cls, n_features: int, cost: float = 1.0, **kwargs: Any) -> CostModel:
        """Every feature costs ``cost`` (the papers' setting when no real costs exist)."""
        return cls(np.full(int(n_features), float(cost)), **kwargs)

    @classmethod
    def from_meta(cls, meta: Mapping[str, Any]) -> CostModel:
        """The cost model of a dataset's ``meta.json`` (uniform costs when it has none).

        Features without a price that are derived (``meta["dependencies"]``) cost nothing
        of their own; ``meta["groups"]`` and ``meta["tree_cost"]`` are honoured.
        """
        names = list(meta["features"])
        deps = meta.get("dependencies") or None
        if not meta.get("costs"):
            return cls(np.ones(len(names)), feature_names=names, dependencies=deps, groups=meta.get("groups"))
        return cls(
            dict(meta["costs"]),
            feature_names=names,
            dependencies=deps,
            groups=meta.get("groups"),
            tree_cost=meta.get("tree_cost", 0.0),
            split_cost=meta.get("split_cost", 0.0),
        )

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], feature_names: Sequence[str] | None = None) -> CostModel:
        """From ``{"feature": cost, ...}`` or ``{"costs": {...}, "groups": ..., ...}``.

        In the second form every key is one of ``SPEC_KEYS``: a misspelt one (``tree_cots``)
        would otherwise be ignored without a word.
        """
        if "costs" in d and isinstance(d["costs"], (Mapping, list)):
            unknown = [str(k) for k in d if k not in SPEC_KEYS]
            if unknown:
                raise InputError(
                    f"unknown key(s) {unknown} in the cost spec; its keys are {', '.join(SPEC_KEYS)}"
                )
            names = d.get("feature_names") or feature_names
            if names is None and isinstance(d["costs"], Mapping):
                names = list(d["costs"])
            costs = d["costs"]
            if d.get("group_costs"):  # as CostModel.to_dict writes a group's own price
                if not isinstance(costs, Mapping):
                    raise InputError("group_costs needs the costs by name ({'feature': cost, ...})")
                costs = {**costs, **d["group_costs"]}
            return cls(
                costs,
                feature_names=names,
                groups=d.get("groups"),
                dependencies=d.get("dependencies"),
                tree_cost=d.get("tree_cost", 0.0),
                split_cost=d.get("split_cost", 0.0),
                fixed_costs=d.get("fixed_costs"),
            )
        names = list(feature_names) if feature_names is not None else list(d)
        return cls(dict(d), feature_names=names)

    @classmethod
    def from_file(cls, path: str | Path, feature_names: Sequence[str] | None = None) -> CostModel:
        """Read a cost file: JSON (``{"name": cost}`` or a full spec) or CSV ``feature,cost``."""
        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(f"cost file {str(path)!r} does not exist")
        text = path.read_text()
        where = f"cost file {str(path)!r}"
        if path.suffix.lower() == ".json" or text.lstrip().startswith("{"):
            try:
                d = json.loads(text, object_pairs_hook=lambda pairs: _unique_keys(pairs, where))
            except json.JSONDecodeError as exc:
                raise InputError(f"{where} is not valid JSON: {exc}") from exc
            if not isinstance(d, dict):
                raise InputError(f"{where} must hold a JSON object of feature: cost")
            return cls.from_dict(d, feature_names)
        rows = list(csv.DictReader(text.splitlines()))
        if not rows or not {"feature", "cost"} <= set(rows[0]):
            raise InputError(f"{where} must be CSV with columns feature,cost (or JSON)")
        pairs = []
        for line, r in enumerate(rows, start=2):
            cell = (r["cost"] or "").strip()
            try:
                pairs.append((r["feature"], float(cell)))
            except ValueError:
                shown = "is empty" if not cell else f"is {cell!r}, not a number"
                raise InputError(
                    f"{where}, line {line}: the cost of feature {r['feature']!r} {shown}; "
                    "give a number (0 if it is free)"
                ) from None
        costs = _unique_keys(pairs, where)
        return cls(costs, feature_names=list(feature_names) if feature_names is not None else list(costs))

    def to_dict(self) -> dict[str, Any]:
        names = self.feature_names or [str(i) for i in range(self.n_features)]
        return {
            "costs": {names[i]: float(c) for i, c in enumerate(self.feature_costs)},
            "feature_names": names,
            "groups": {g: [names[m] for m in ms] for g, ms in self.groups.items()},
            "group_costs": {
                g: float(self.unit_cost[self.unit_of_feature[ms[0]]]) for g, ms in self.groups.items() if ms
            },
            "dependencies": {names[d]: [names[m] for m in ms] for d, ms in self.dependencies.items()},
            "tree_cost": self.tree_cost,
            "split_cost": self.split_cost,
            "fixed_costs": [float(c) for c in self.fixed_costs],
        }

    @classmethod
    def _from_saved(cls, d: Mapping[str, Any]) -> CostModel:
        costs = dict(d["costs"])
        costs.update({g: c for g, c in d.get("group_costs", {}).items()})
        return cls(
            costs,
            feature_names=d["feature_names"],
            groups=d.get("groups") or None,
            dependencies=d.get("dependencies") or None,
            tree_cost=d.get("tree_cost", 0.0),
            split_cost=d.get("split_cost", 0.0),
            fixed_costs=d.get("fixed_costs"),
        )

    # ------------------------------------------------------------------ queries
    def closure(self, features: Sequence[Key]) -> np.ndarray:
        """Boolean mask of every feature acquired when ``features`` are (groups, dependencies)."""
        mask = np.zeros(self.n_features, dtype=bool)
        for f in features:
            i = self._index(f)
            for u in self.closure_units[self.closure_ptr[i] : self.closure_ptr[i + 1]]:
                mask[self.unit_feat[self.unit_ptr[u] : self.unit_ptr[u + 1]]] = True
        return mask

    def acquisition_cost(self, features: Sequence[Key]) -> float:
        """Cost of acquiring ``features`` (and what they require) for one example."""
        units = set()
        for f in features:
            i = self._index(f)
            units.update(self.closure_units[self.closure_ptr[i] : self.closure_ptr[i + 1]].tolist())
        return float(sum(self.unit_cost[u] for u in units))

    def prices(self) -> np.ndarray:
        """Each feature's :meth:`acquisition_cost` on its own (its group and what it depends
        on included), shape ``(n_features,)``: what the cheapest-features orders sort by."""
        return np.array([self.acquisition_cost([f]) for f in range(self.n_features)], dtype=np.float64)

    def fixed_cost(self, used: np.ndarray) -> float:
        """Once-per-model cost of the features marked in the boolean mask ``used``."""
        return float(self.fixed_costs[np.asarray(used, dtype=bool)].sum())

    def for_features(self, names: Sequence[str] | None, n_features: int) -> CostModel:
        """This cost model aligned to a model's features (by name when both have names).

        A LightGBM name matches the name it was stored for (``blood_pressure`` finds the cost
        of ``blood pressure``) when no other name is stored the same way.
        """
        if names is None or self.feature_names is None or list(names) == self.feature_names:
            if n_features != self.n_features:
                raise InputError(
                    f"the cost model prices {self.n_features} features but the model "
                    f"uses {n_features}; give one cost per model feature"
                )
            return self
        order = align(names, self.feature_names)
        if order is None:
            if n_features == self.n_features and is_generic(names):
                return self
            unknown = [n for n in names if n not in self.feature_names]
            raise InputError(
                f"the cost model has no cost for the model's feature(s) {unknown[:10]}; "
                f"its features are {self.feature_names[:10]}"
            )
        if sorted(order) != list(range(self.n_features)):
            extra = [self.feature_names[i] for i in sorted(set(range(self.n_features)) - set(order))]
            raise InputError(
                f"the cost model prices feature(s) {extra[:10]} that the model does "
                "not have; build the cost model for the model's features"
            )
        d = self.to_dict()
        renamed = dict(zip((self.feature_names[i] for i in order), names))
        d["costs"] = {renamed[k]: v for k, v in d["costs"].items()}
        d["groups"] = {g: [renamed[m] for m in ms] for g, ms in d["groups"].items()}
        d["dependencies"] = {renamed[k]: [renamed[m] for m in ms] for k, ms in d["dependencies"].items()}
        d["feature_names"] = list(names)
        d["fixed_costs"] = [d["fixed_costs"][i] for i in order]
        return CostModel._from_saved(d)

    def __repr__(self) -> str:
        extras = []
        if self.groups:
            extras.append(f"groups={len(self.groups)}")
        if self.dependencies:
            extras.append(f"dependencies={len(self.dependencies)}")
        if self.tree_cost:
            extras.append(f"tree_cost={self.tree_cost:g}")
        if self.split_cost:
            extras.append(f"split_cost={self.split_cost:g}")
        return (
            f"CostModel(n_features={self.n_features}, total={self.feature_costs.sum():g}"
            + "".join(", " + e for e in extras)
            + ")"
        )

    # ------------------------------------------------------------------ internals
    def _index(self, key: Key) -> int:
        if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
            n = (
                len(self.feature_names)
                if self.feature_names is not None
                else getattr(self, "n_features", None)
            )
            if key < 0 or (n is not None and key >= n):
                raise InputError(f"feature index {key} is out of range")
            return int(key)
        if self.feature_names is None:
            raise InputError(f"feature {key!r} is named but the cost model has no feature_names")
        try:
            return self.feature_names.index(str(key))
        except ValueError:
            more = "..." if len(self.feature_names) > 10 else ""
            raise InputError(
                f"unknown feature name {key!r}; known features are {self.feature_names[:10]}{more}"
            ) from None

    def _label(self, i: int) -> str | int:
        return self.feature_names[i] if self.feature_names is not None else i

    def _per_feature(self, values: Any, what: str) -> np.ndarray:
        n = self.n_features
        if values is None:
            return np.zeros(n)
        if isinstance(values, Mapping):
            out = np.zeros(n)
            for k, v in values.items():
                out[self._index(k)] = _check_cost(v, f"{what}[{k!r}]")
            return out
        out = np.asarray(values, dtype=np.float64)
        if out.shape != (n,):
            raise InputError(f"{what} must have one value per feature ({n}), got shape {out.shape}")
        for i, c in enumerate(out):
            _check_cost(c, f"{what}[{self._label(i)!r}]")
        return out

    def _compile(self) -> None:
        """Units (groups or single features), their prices, and each feature's closure."""
        n = self.n_features
        unit_of = np.full(n, -1, dtype=np.int64)
        members: list[list[int]] = []
        prices: list[float] = []
        for g, ms in self.groups.items():
            if not ms:
                raise InputError(f"group {g!r} has no members")
            for m in ms:
                if unit_of[m] >= 0:
                    raise InputError(f"feature {self._label(m)!r} is in more than one group")
                unit_of[m] = len(members)
            prices.append(self._group_prices.get(g, float(self.feature_costs[ms].sum())))
            members.append(sorted(set(ms)))
        for f in range(n):
            if unit_of[f] < 0:
                unit_of[f] = len(members)
                members.append([f])
                prices.append(float(self.feature_costs[f]))
        self.unit_of_feature = unit_of
        self.unit_cost = np.asarray(prices, dtype=np.float64)
        self.unit_ptr = np.zeros(len(members) + 1, dtype=np.int64)
        self.unit_ptr[1:] = np.cumsum([len(m) for m in members])
        self.unit_feat = np.asarray([f for m in members for f in m], dtype=np.int64)
        self._check_acyclic()
        closures = [self._feature_closure(f) for f in range(n)]
        self.closure_ptr = np.zeros(n + 1, dtype=np.int64)
        self.closure_ptr[1:] = np.cumsum([len(c) for c in closures])
        self.closure_units = np.asarray([u for c in closures for u in c], dtype=np.int64)

    def _check_total(self) -> None:
        with np.errstate(over="ignore"):
            total = float(self.unit_cost.sum() + self.fixed_costs.sum()) + self.tree_cost + self.split_cost
        if not total <= MAX_TOTAL_COST:
            raise InputError(
                f"the costs add up to {total:.3g}, beyond what float64 sums hold "
                f"(at most {MAX_TOTAL_COST:g}); express them in a larger unit "
                "(e.g. divide every cost by 1e6)"
            )

    def _feature_closure(self, f: int) -> list[int]:
        units: set[int] = set()
        stack = [f]
        while stack:
            g = stack.pop()
            u = int(self.unit_of_feature[g])
            if u in units:
                continue
            units.add(u)
            for m in self.unit_feat[self.unit_ptr[u] : self.unit_ptr[u + 1]]:
                stack.extend(self.dependencies.get(int(m), []))
        return sorted(units)

    def _check_acyclic(self) -> None:
        state = dict.fromkeys(self.dependencies, 0)

        def visit(d: int, path: list[int]) -> None:
            if state.get(d) == 1:
                cycle = path[path.index(d) :] + [d]
                raise InputError(
                    "cyclic feature dependency: " + " -> ".join(str(self._label(c)) for c in cycle)
                )
            if state.get(d) == 2 or d not in self.dependencies:
                return
            state[d] = 1
            for m in self.dependencies[d]:
                visit(m, path + [d])
            state[d] = 2

        for d in list(self.dependencies):
            visit(d, [])


def _unique_keys(pairs: Sequence[tuple[str, Any]], where: str) -> dict[str, Any]:
    """``pairs`` as a dict, refusing a key given twice (JSON and CSV would keep the last)."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise InputError(f"{where} gives {key!r} twice ({out[key]!r} and {value!r}); keep one of them")
        out[key] = value
    return out


def _check_cost(value: Any, what: str) -> float:
    # float() would take True as 1 and "3" as 3: a cost written as either is a slip.
    if isinstance(value, (bool, np.bool_, str, bytes)):
        raise InputError(f"cost of {what} must be a number, got {value!r}")
    try:
        c = float(value)
    except (TypeError, ValueError):
        raise InputError(f"cost of {what} must be a number, got {value!r}") from None
    if math.isnan(c):
        raise InputError(f"cost of {what} is NaN; give a finite cost >= 0")
    if math.isinf(c):
        raise InputError(f"cost of {what} is infinite; give a finite cost >= 0")
    if c < 0:
        raise InputError(f"cost of {what} is negative ({c:g}); costs must be >= 0")
    return c


@dataclass
class CostReport:
    """What each example's prediction cost.

    Attributes
    ----------
    feature : ndarray of shape (n,)
        Acquisition cost paid by each example.
    evaluation : ndarray of shape (n,)
        ``tree_cost * n_trees + split_cost * n_nodes``.
    total : ndarray of shape (n,)
        ``feature + evaluation``.
    n_trees : ndarray of int, shape (n,)
        Trees evaluated on each example.
    n_nodes : ndarray of int, shape (n,)
        Split nodes visited on each example.
    acquired : ndarray of bool, shape (n, n_features)
        Features acquired for each example (including group members and required inputs).
    fixed : float
        Once-per-model cost of the features the model uses (``CostModel.fixed_costs``).
    feature_names : list of str or None
    latency : ndarray of shape (n,) or None
        Wall latency of each example's feature fetches when those of one round overlap
        (``thrifty.evaluate_async``; None elsewhere).
    """

    feature: np.ndarray
    evaluation: np.ndarray
    total: np.ndarray
    n_trees: np.ndarray
    n_nodes: np.ndarray
    acquired: np.ndarray
    fixed: float = 0.0
    feature_names: list[str] | None = None
    latency: np.ndarray | None = None

    @property
    def n_examples(self) -> int:
        return int(self.total.shape[0])

    @property
    def mean(self) -> float:
        """Mean total cost per example."""
        return float(self.total.mean()) if self.n_examples else 0.0

    @property
    def max(self) -> float:
        return float(self.total.max()) if self.n_examples else 0.0

    def quantiles(self, q: Sequence[float] = (0.5, 0.9, 0.99)) -> dict[float, float]:
        """Quantiles of the total cost per example."""
        if not self.n_examples:
            return {float(p): 0.0 for p in q}
        return {float(p): float(v) for p, v in zip(q, np.quantile(self.total, q))}

    def acquisition_rate(self) -> np.ndarray:
        """Fraction of examples that acquired each feature."""
        return self.acquired.mean(axis=0) if self.n_examples else np.zeros(self.acquired.shape[1])

    def summary(self) -> dict[str, float]:
        """Mean, quantiles and max of the total, plus the means of its parts."""
        q = self.quantiles((0.5, 0.9, 0.99))
        return {
            "mean": self.mean,
            "median": q[0.5],
            "q90": q[0.9],
            "q99": q[0.99],
            "max": self.max,
            "mean_feature": float(self.feature.mean()) if self.n_examples else 0.0,
            "mean_evaluation": float(self.evaluation.mean()) if self.n_examples else 0.0,
            "mean_trees": float(self.n_trees.mean()) if self.n_examples else 0.0,
            "mean_nodes": float(self.n_nodes.mean()) if self.n_examples else 0.0,
            "fixed": self.fixed,
        }

    def to_frame(self) -> Any:
        """A pandas DataFrame, one row per example (acquired features as 0/1 columns)."""
        import pandas as pd  # here, not above: `import thrifty.costs` stays free of pandas (0.4 s)

        names = self.feature_names or [f"f{i}" for i in range(self.acquired.shape[1])]
        df = pd.DataFrame(
            {
                "total": self.total,
                "feature": self.feature,
                "evaluation": self.evaluation,
                "n_trees": self.n_trees,
                "n_nodes": self.n_nodes,
            }
        )
        if self.latency is not None:
            df["latency"] = self.latency
        acq = pd.DataFrame(self.acquired.astype(np.int8), columns=[f"acquired:{n}" for n in names])
        return pd.concat([df, acq], axis=1)

    def __repr__(self) -> str:
        return (
            f"CostReport(n={self.n_examples}, mean={self.mean:.4g}, max={self.max:.4g}, "
            f"mean_trees={self.summary()['mean_trees']:.4g})"
        )
