"""A slow pure-Python reference for plans and costs, written independently of the kernels."""

from __future__ import annotations

import math

import numpy as np

from thrifty import Forest

ZERO = float(np.float32(1e-35))


def random_forest(
    rng: np.random.Generator,
    n_features: int = 6,
    n_trees: int = 8,
    max_depth: int = 4,
    n_outputs: int = 1,
    categorical: bool = True,
    float32: bool = False,
) -> Forest:
    """A forest of random trees exercising every split kind (missing types, categories)."""
    feature, threshold, left, right, mleft, mtype, cstart, csize, value = ([] for _ in range(9))
    bitsets: list[int] = []
    roots, tclass = [], []

    def node(depth: int) -> int:
        i = len(feature)
        for arr in (feature, threshold, left, right, mleft, mtype, cstart, csize):
            arr.append(0)
        value.append(0.0)
        if depth >= max_depth or rng.random() < 0.2:
            feature[i], left[i], right[i], cstart[i] = -1, -1, -1, -1
            value[i] = float(np.round(rng.normal(), 3))
            return i
        feature[i] = int(rng.integers(n_features))
        mleft[i] = bool(rng.random() < 0.5)
        if categorical and rng.random() < 0.25:
            words = int(rng.integers(1, 3))
            cstart[i], csize[i] = len(bitsets), words
            bitsets.extend(int(w) for w in rng.integers(0, 2**32, size=words, dtype=np.uint64))
        else:
            cstart[i] = -1
            threshold[i] = float(rng.choice([-1.0, 0.0, 0.5, 1.0, 2.5]))
            mtype[i] = int(rng.integers(0, 3))
        left[i] = node(depth + 1)
        right[i] = node(depth + 1)
        return i

    for t in range(n_trees):
        roots.append(node(0))
        tclass.append(t % n_outputs)
    link = "sigmoid" if n_outputs == 1 else "softmax"
    return Forest(
        feature=feature,
        threshold=threshold,
        children_left=left,
        children_right=right,
        missing_left=mleft,
        missing_type=mtype,
        cat_start=cstart,
        cat_size=csize,
        cat_bitsets=np.asarray(bitsets, dtype=np.uint32),
        value=value,
        roots=roots,
        tree_weight=rng.uniform(0.5, 1.5, size=n_trees).round(3),
        tree_class=tclass,
        base_score=np.round(rng.normal(size=n_outputs), 3),
        n_features=n_features,
        link=link,
        task="binary" if n_outputs == 1 else "multiclass",
        input_dtype="float32" if float32 else "float64",
    )


def random_inputs(rng: np.random.Generator, n: int, n_features: int) -> np.ndarray:
    """Values on and around the thresholds, category codes, NaN, zeros and infinities."""
    pool = np.array(
        [
            -1.0,
            0.0,
            -0.0,
            0.5,
            1.0,
            2.5,
            1e-36,
            -0.5,
            3.0,
            7.0,
            31.0,
            33.0,
            40.0,
            64.0,
            1e30,
            np.inf,
            -np.inf,
            np.nan,
            0.49999999,
            1.0000001,
            -3.0,
        ]
    )
    X = rng.choice(pool, size=(n, n_features))
    noise = rng.random((n, n_features)) < 0.3
    X[noise] = rng.normal(scale=2, size=noise.sum())
    return X


def go(forest: Forest, node: int, v: float) -> int:
    """The child an example with value ``v`` goes to (LightGBM semantics, written plainly)."""
    f = forest
    if f.input_dtype == "float32":
        with np.errstate(over="ignore"):
            v = float(np.float32(v))
    if f.cat_start[node] >= 0:
        if math.isnan(v):
            return int(f.children_left[node] if f.missing_left[node] else f.children_right[node])
        if not math.isfinite(v) or v <= -1.0 or math.trunc(v) >= 32 * f.cat_size[node]:
            return int(f.children_right[node])
        code = math.trunc(v)
        word = int(f.cat_bitsets[f.cat_start[node] + code // 32])
        return int(f.children_left[node] if (word >> (code % 32)) & 1 else f.children_right[node])
    mt = int(f.missing_type[node])
    default = int(f.children_left[node] if f.missing_left[node] else f.children_right[node])
    if math.isnan(v):
        if mt == 1:
            v = 0.0
        else:
            return default
    if mt == 2 and abs(v) <= ZERO:
        return default
    return int(f.children_left[node] if v <= f.threshold[node] else f.children_right[node])


def walk(forest: Forest, x: np.ndarray, t: int, touched: list[int]) -> tuple[int, int]:
    """Leaf reached in tree ``t`` and split nodes visited; appends tested features."""
    node, visited = int(forest.roots[t]), 0
    while forest.feature[node] >= 0:
        touched.append(int(forest.feature[node]))
        visited += 1
        node = go(forest, node, float(x[forest.feature[node]]))
    return node, visited


def tree_out(forest: Forest, leaf: int) -> np.ndarray:
    return forest.value[leaf]


class RefCost:
    """Cost of the set of tested features, from the raw groups/dependencies spec."""

    def __init__(
        self,
        costs: np.ndarray,
        groups: dict[str, list[int]],
        deps: dict[int, list[int]],
        group_prices: dict[str, float] | None = None,
    ) -> None:
        self.costs, self.groups, self.deps = costs, groups, deps
        self.group_prices = group_prices or {}

    def acquired(self, touched: set[int]) -> set[int]:
        out: set[int] = set()
        todo = list(touched)
        while todo:
            f = todo.pop()
            if f in out:
                continue
            members = [f]
            for ms in self.groups.values():
                if f in ms:
                    members = list(ms)
            for m in members:
                if m not in out:
                    out.add(m)
                    todo.extend(self.deps.get(m, []))
        return out

    def price(self, touched: set[int]) -> float:
        acq = self.acquired(touched)
        total, grouped = 0.0, set()
        for g, ms in self.groups.items():
            grouped.update(ms)
            if acq & set(ms):
                total += self.group_prices.get(g, float(sum(self.costs[m] for m in ms)))
        return total + float(sum(self.costs[f] for f in acq - grouped))


def reference_sequential(forest: Forest, X: np.ndarray, order, eps_pos, eps_neg):
    """Per example: raw score, exit position, decision, tested features, nodes visited."""
    out = []
    for x in X:
        raw = forest.base_score.astype(float).copy()
        touched: list[int] = []
        nodes, decision, p = 0, 0, 0
        for p, t in enumerate(order, start=1):
            leaf, visited = walk(forest, x, t, touched)
            nodes += visited
            k = forest.tree_class[t]
            if k >= 0:
                raw[k] += forest.tree_weight[t] * forest.value[leaf, 0]
            else:
                raw += forest.tree_weight[t] * forest.value[leaf]
            if len(raw) > 1:  # several outputs: the leading class's margin over the runner-up
                top2 = np.sort(raw)[-2:]
                if top2[1] - top2[0] > eps_pos[p - 1]:
                    decision = 1
                    break
                continue
            if raw[0] > eps_pos[p - 1]:
                decision = 1
                break
            if raw[0] < eps_neg[p - 1]:
                decision = -1
                break
        out.append((raw, p, decision, touched, nodes))
    return out


def reference_cascade(forest: Forest, X: np.ndarray, W, thr, bias):
    out = []
    K = W.shape[0]
    for x in X:
        cache: dict[int, float] = {}
        touched: list[int] = []
        nodes, decision, stage = 0, 0, 0
        for k in range(K):
            stage = k
            s = bias[k]
            for t in np.flatnonzero(W[k]):
                if t not in cache:
                    leaf, visited = walk(forest, x, int(t), touched)
                    nodes += visited
                    cache[int(t)] = forest.tree_weight[t] * forest.value[leaf, 0]
                s += W[k, t] * cache[int(t)]
            if k < K - 1 and s < thr[k]:
                decision = -1
                break
        if decision == 0:
            decision = 1 if s > thr[K - 1] else -1
        out.append((s, stage, decision, touched, nodes, len(cache)))
    return out
