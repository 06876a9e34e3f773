"""The pruning problem (IP3) of a forest on labelled data, as a minimum-weight closure.

Variables (DESIGN.md): ``s_h = 1`` when internal node ``h`` stays split. A valid pruning is a
set of kept splits closed under ``s_h <= s_parent(h)``; the leaf indicator of the paper is
``z_h = s_parent(h) - s_h``. With ``u_{t,k,i}`` the first node of tree ``t`` on example ``i``'s
path that acquires unit ``k`` (a feature, or its group / required inputs), the paper's coupling
``w_{k,i} >= w^(t)_{k,i} = s_{u_{t,k,i}}`` becomes the implication ``s_u -> w_{k,i}``.

Scaled by ``N T`` the objective of (IP3) is ``sum_t e_root(t) + sum_h s_h (e_left + e_right - e_h)
+ lam * T * sum_{k,i} c_k w_{k,i}``: every ``s_h`` weighs its error change ``a_h``, every ``w``
its cost. ``e_h`` is the node's loss as a leaf (``_node_loss``): its misclassified examples, or
for a regressor its squared error; either is a constant of the node, so the form is the same for
both. Two reductions keep the graph small without changing the optimum:

* a ``w_{k,i}`` forced by a single node (the unit is met in one tree only) is that node's cost;
* ``w`` nodes forced by the same set of nodes are one node whose cost is their sum.

``mode="individual"`` gives each tree its own ``w^(t)`` (no sharing across trees), so every
``w`` folds into a node weight and the problem separates by tree.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from thrifty.forest.kernels import child
from thrifty.prune._node_loss import ClassVote, SquaredError


@dataclass
class ClosureProblem:
    """The closure form of (IP3) for one forest, data set and cost model.

    Nodes ``0 .. n_split - 1`` are the forest's split nodes (``split_node``); the others are the
    merged ``w`` nodes. Weights at ``lam`` are ``a + lam * b`` (the (IP3) objective times
    ``N T``); ``node_value`` is what each forest node predicts when it is a leaf, ``counts`` the
    per-node sums it is computed from (weighted class counts, or a regressor's ``(w, w y, w y^2)``
    of centred targets). ``cost`` is each node's share of the ensemble's mean cost per example
    times ``N T`` (the runtime's cost whatever ``mode`` is), ``e_root`` the loss of the root-only
    forest. With example weights (``weight``, one per row) every count is a sum of weights and
    ``N`` (``n_examples``) their total; ``count_mask`` is the rows each tree counts (None: all).
    """

    a: np.ndarray
    b: np.ndarray
    cost: np.ndarray
    tail: np.ndarray
    head: np.ndarray
    split_node: np.ndarray
    var_of_node: np.ndarray
    counts: np.ndarray
    node_value: np.ndarray
    e_root: float
    n_examples: float
    n_trees: int
    fixed_cost: float
    weight: np.ndarray
    count_mask: np.ndarray | None = None

    @property
    def n_split(self) -> int:
        return int(self.split_node.shape[0])

    @property
    def n_vars(self) -> int:
        return int(self.a.shape[0])

    def error(self, chosen: np.ndarray) -> float:
        """Mean per-tree training error (the paper's error term) of a closed set."""
        return float((self.e_root + self.a[chosen].sum()) / (self.n_examples * self.n_trees))

    def mean_cost(self, chosen: np.ndarray) -> float:
        """Mean cost per example of a closed set, as the runtime measures it."""
        return float(self.cost[chosen].sum() / (self.n_examples * self.n_trees) + self.fixed_cost)


def build_problem(
    forest,
    X: np.ndarray,
    target: np.ndarray,
    costs,
    *,
    loss: ClassVote | SquaredError,
    mode: str,
    evaluation: bool,
    count_mask: np.ndarray | None = None,
    sample_weight: np.ndarray | None = None,
) -> ClosureProblem:
    """Walk every example through every tree and assemble the closure problem.

    ``X`` is the forest's validated matrix, ``target`` the class index (``loss`` a
    :class:`ClassVote`) or the value (a :class:`SquaredError`) of each example; ``loss`` says
    what a node predicts as a leaf and what that costs (``e_h``). ``count_mask`` (n, n_trees)
    limits the examples counted in tree ``t``'s errors to ``count_mask[:, t]`` (e.g. its
    out-of-bag rows); the others (its in-bag rows) then decide what a node predicts. Costs count
    every row. ``sample_weight`` (positive, one per row) makes example ``i`` count ``w_i`` times:
    in the errors ``e_h`` and the cost term of (IP3), in what nodes predict, and in the mean cost.
    """
    T = forest.n_trees
    weight = np.ones(X.shape[0]) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    n = float(weight.sum())
    unit_cost = np.asarray(costs.unit_cost, dtype=np.float64)
    use_mask = count_mask is not None
    mask = np.ascontiguousarray(count_mask, dtype=np.bool_) if use_mask else np.zeros((0, 0), dtype=np.bool_)
    col, stats, n_columns = loss.stats(target, weight)
    counts, others, node_cost, pair_ptr, pair_nodes, pair_cost = _walk(
        X,
        col,
        np.ascontiguousarray(stats),
        n_columns,
        use_mask,
        mask,
        forest.roots,
        forest.nodes,
        costs.closure_ptr,
        costs.closure_units,
        unit_cost,
    )
    internal = forest.feature >= 0
    split_node = np.flatnonzero(internal)
    n_split = split_node.shape[0]
    var_of_node = np.full(forest.n_nodes, -1, dtype=np.int64)
    var_of_node[split_node] = np.arange(n_split)

    # What a node predicts: from its counted examples, or with a mask, from the examples the
    # tree does not count (its in-bag rows) where it has any, as the authors' code predicts
    # from a tree's own sample and measures errors out of bag.
    voters = counts
    if use_mask:
        voters = np.where((loss.weight(others) > 0)[:, None], others, counts + others)
    errors, node_value = loss.node_errors(forest, counts, voters)
    left = forest.children_left[split_node]
    right = forest.children_right[split_node]
    a = loss.split_change(errors, counts, split_node, left, right)
    e_root = float(errors[forest.roots].sum())

    # implications child split -> parent split
    parent_var = var_of_node[split_node]
    child_l, child_r = var_of_node[left], var_of_node[right]
    tail = np.concatenate([child_l[child_l >= 0], child_r[child_r >= 0]])
    head = np.concatenate([parent_var[child_l >= 0], parent_var[child_r >= 0]])

    # every example visits (and pays for) a kept split, counted or not
    visits = (loss.weight(counts) + (loss.weight(others) if use_mask else 0))[split_node]
    split_price = float(costs.split_cost)
    # the runtime's cost (times N T): features shared across trees, plus split visits
    singles = np.zeros(n_split)
    lengths = np.diff(pair_ptr)
    single = lengths == 1
    np.add.at(singles, var_of_node[pair_nodes[pair_ptr[:-1][single]]], T * pair_cost[single])
    _, rep, group_cost = _merge_pairs(pair_ptr, pair_nodes, pair_cost, ~single, forest.n_nodes)
    n_group = group_cost.shape[0]
    rep_ptr = pair_ptr[rep]
    rep_len = lengths[rep]
    g_tail = var_of_node[pair_nodes[_ranges(rep_ptr, rep_len)]]
    g_head = n_split + np.repeat(np.arange(n_group), rep_len)
    cost = np.concatenate([singles + T * split_price * visits, T * group_cost])
    # The merged w nodes stay in the graph in both modes: with zero weight in individual mode,
    # where they only let the runtime's cost of a pruning be read off the chosen set.
    a_all = np.concatenate([a, np.zeros(n_group)])
    tail = np.concatenate([tail, g_tail])
    head = np.concatenate([head, g_head])
    if mode == "ensemble":
        b = np.concatenate([singles + (T * split_price * visits if evaluation else 0.0), T * group_cost])
    else:
        b = np.concatenate(
            [node_cost[split_node] + (split_price * visits if evaluation else 0.0), np.zeros(n_group)]
        )
    fixed = float(costs.tree_cost) * T
    return ClosureProblem(
        a=a_all,
        b=b,
        cost=cost,
        tail=tail.astype(np.int64),
        head=head.astype(np.int64),
        split_node=split_node,
        var_of_node=var_of_node,
        counts=voters,
        node_value=node_value,
        e_root=e_root,
        n_examples=n,
        n_trees=T,
        fixed_cost=fixed,
        weight=weight,
        count_mask=mask if use_mask else None,
    )


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenation of ``arange(s, s + l)`` for each start and length."""
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    offsets = np.repeat(starts - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths)
    return np.arange(total, dtype=np.int64) + offsets


def _merge_pairs(
    pair_ptr: np.ndarray, pair_nodes: np.ndarray, pair_cost: np.ndarray, keep: np.ndarray, n_nodes: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Group the (unit, example) pairs of ``keep`` that are forced by the same set of nodes.

    Sets are bucketed by two independent 64-bit hashes and their size, then compared exactly
    (``_split_collisions``), so that the merge never joins two different sets.
    Returns each kept pair's group, one representative pair per group, and each group's cost.
    """
    rng = np.random.default_rng(0x5EED)
    r1 = rng.integers(0, 2**63, size=n_nodes, dtype=np.int64).view(np.uint64)
    r2 = rng.integers(0, 2**63, size=n_nodes, dtype=np.int64).view(np.uint64)
    pairs = np.flatnonzero(keep)
    # sums of random words, wrapping modulo 2**64 (array arithmetic wraps silently)
    starts = pair_ptr[:-1]
    h1 = np.add.reduceat(r1[pair_nodes], starts)[pairs] if pairs.shape[0] else r1[:0]
    h2 = np.add.reduceat(r2[pair_nodes], starts)[pairs] if pairs.shape[0] else r2[:0]
    length = (pair_ptr[pairs + 1] - pair_ptr[pairs]).astype(np.uint64)
    order = np.lexsort((h2, h1, length))
    key = np.stack([length[order], h1[order], h2[order]])
    new = np.ones(order.shape[0], dtype=bool)
    if order.shape[0]:
        new[1:] = np.any(key[:, 1:] != key[:, :-1], axis=0)
    bucket = np.cumsum(new) - 1
    group_sorted = _split_collisions(pair_ptr, pair_nodes, pairs[order], bucket)
    group = np.empty(pairs.shape[0], dtype=np.int64)
    group[order] = group_sorted
    n_group = int(group_sorted.max()) + 1 if group_sorted.shape[0] else 0
    rep = np.full(n_group, -1, dtype=np.int64)
    rep[group[::-1]] = pairs[::-1]  # the first pair of each group
    # Number the groups by the first node forcing them: the arcs of one split node then point
    # to nearby groups, which keeps the max-flow's random accesses in cache.
    renumber = np.empty(n_group, dtype=np.int64)
    by_node = np.argsort(pair_nodes[pair_ptr[rep]], kind="stable")
    renumber[by_node] = np.arange(n_group)
    group = renumber[group]
    rep = rep[by_node]
    group_cost = np.bincount(group, weights=pair_cost[pairs], minlength=n_group)
    return group, rep, group_cost


@njit(cache=True)
def _split_collisions(pair_ptr, pair_nodes, pairs, bucket):
    """Group ids: pairs of one hash bucket with identical (sorted) node lists share a group."""
    m = pairs.shape[0]
    group = np.empty(m, dtype=np.int64)
    n_group = 0
    start = 0
    while start < m:
        end = start
        while end < m and bucket[end] == bucket[start]:
            end += 1
        first = n_group
        for k in range(start, end):
            p = pairs[k]
            found = -1
            for g in range(first, n_group):
                # the representative of group g is the first k' in the bucket assigned to it
                for k2 in range(start, k):
                    if group[k2] == g:
                        q = pairs[k2]
                        same = True
                        for d in range(pair_ptr[p + 1] - pair_ptr[p]):
                            if pair_nodes[pair_ptr[p] + d] != pair_nodes[pair_ptr[q] + d]:
                                same = False
                                break
                        if same:
                            found = g
                        break
                if found >= 0:
                    break
            if found < 0:
                found = n_group
                n_group += 1
            group[k] = found
        start = end
    return group


@njit(cache=True)
def _walk(
    X,
    col,
    stats,
    n_columns,
    use_mask,
    mask,
    roots,
    nodes,
    closure_ptr,
    closure_units,
    unit_cost,
):
    """Per-node sums of the examples' ``stats``, and for each example and priced unit the nodes
    first acquiring it.

    Example ``i`` adds ``stats[i]`` into columns ``col[i]:col[i] + stats.shape[1]`` of every node
    it reaches (``_node_loss``), and counts ``stats[i, 0]`` (its weight) times in the costs.
    Returns ``counts`` (n_nodes, n_columns) over the counted examples, ``others`` over the rest
    (with ``use_mask``); ``node_cost``: per node, the summed cost of the
    units that examples acquire *first within that tree* at the node (individual pruning's
    ``w^(t)``); and the (example, unit) pairs in CSR form: ``pair_nodes[pair_ptr[p]:
    pair_ptr[p + 1]]`` are the nodes (one per tree, sorted) where pair ``p`` is first acquired,
    ``pair_cost[p]`` the unit's price.
    """
    feature = nodes[0]
    n = X.shape[0]
    T = roots.shape[0]
    n_nodes = feature.shape[0]
    n_units = unit_cost.shape[0]
    counts = np.zeros((n_nodes, n_columns))
    # the examples a tree does not count (its in-bag rows): they decide what a node predicts
    others = np.zeros((n_nodes if use_mask else 0, n_columns))
    node_cost = np.zeros(n_nodes, dtype=np.float64)
    tree_seen = np.full(n_units, -1, dtype=np.int64)
    ex_seen = np.full(n_units, -1, dtype=np.int64)
    ucount = np.zeros(n_units, dtype=np.int64)
    buf = np.empty((n_units, T), dtype=np.int64)
    touched = np.empty(n_units, dtype=np.int64)
    cap = max(16, 4 * n)
    pair_nodes = np.empty(cap, dtype=np.int64)
    pair_ptr_l = np.empty(max(16, n), dtype=np.int64)
    pair_cost_l = np.empty(max(16, n), dtype=np.float64)
    n_pairs = 0
    n_entries = 0
    pair_ptr_l[0] = 0
    for i in range(n):
        c = col[i]
        wi = stats[i, 0]
        n_touched = 0
        for t in range(T):
            stamp = i * T + t
            node = roots[t]
            counted = not use_mask or mask[i, t]
            while feature[node] >= 0:
                _add(counts if counted else others, node, c, stats[i])
                f = feature[node]
                for q in range(closure_ptr[f], closure_ptr[f + 1]):
                    u = closure_units[q]
                    if unit_cost[u] <= 0.0 or tree_seen[u] == stamp:
                        continue
                    tree_seen[u] = stamp
                    node_cost[node] += wi * unit_cost[u]
                    if ex_seen[u] != i:
                        ex_seen[u] = i
                        ucount[u] = 0
                        touched[n_touched] = u
                        n_touched += 1
                    buf[u, ucount[u]] = node
                    ucount[u] += 1
                node = child(nodes, node, X[i, f])
            _add(counts if counted else others, node, c, stats[i])
        for k in range(n_touched):
            u = touched[k]
            m = ucount[u]
            if n_pairs + 2 > pair_ptr_l.shape[0]:
                pair_ptr_l = _grow_i(pair_ptr_l)
                pair_cost_l = _grow_f(pair_cost_l)
            while n_entries + m > pair_nodes.shape[0]:
                pair_nodes = _grow_i(pair_nodes)
            # insertion sort: node lists of equal sets must compare equal entry by entry
            for d in range(m):
                v = buf[u, d]
                e = n_entries + d
                while e > n_entries and pair_nodes[e - 1] > v:
                    pair_nodes[e] = pair_nodes[e - 1]
                    e -= 1
                pair_nodes[e] = v
            n_entries += m
            pair_cost_l[n_pairs] = wi * unit_cost[u]
            n_pairs += 1
            pair_ptr_l[n_pairs] = n_entries
    return (
        counts,
        others,
        node_cost,
        pair_ptr_l[: n_pairs + 1].copy(),
        pair_nodes[:n_entries].copy(),
        pair_cost_l[:n_pairs].copy(),
    )


@njit(cache=True, inline="always")
def _add(sums, node, c, row):
    for j in range(row.shape[0]):
        sums[node, c + j] += row[j]


@njit(cache=True)
def _grow_i(a):
    out = np.empty(2 * a.shape[0], dtype=a.dtype)
    out[: a.shape[0]] = a
    return out


@njit(cache=True)
def _grow_f(a):
    out = np.empty(2 * a.shape[0], dtype=a.dtype)
    out[: a.shape[0]] = a
    return out
