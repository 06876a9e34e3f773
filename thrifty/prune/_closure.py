"""Minimum-weight closure by one minimum s-t cut (Dinic's max-flow with float capacities, njitted).

A closure problem: nodes ``j`` with weights ``w_j`` and implications ``j -> k`` ("if ``j`` is
chosen, ``k`` must be too"); find the closed set of least total weight. Picard (1976): give
each node of negative weight an arc from the source of capacity ``-w_j``, each node of positive
weight an arc to the sink of capacity ``w_j``, each implication an arc of infinite capacity;
the source side of a minimum cut is an optimal closure and its weight is
``sum(min(w, 0)) + cut``. The nodes still reachable from the source in the residual graph form
the *smallest* optimal closure; those that cannot reach the sink, the *largest*.

Capacities are floats, so that real feature costs and lambdas need no integer scaling
(``scipy.sparse.csgraph.maximum_flow`` takes int32 only, which would round them and overflow on
large instances). Residual capacities below a tolerance relative to the largest finite
capacity count as saturated, which bounds the error of the cut value by that tolerance times
the number of arcs; callers recompute the objective of the returned set exactly.
"""

from __future__ import annotations

import numpy as np
from numba import njit

# Relative tolerance under which a residual capacity is treated as zero.
_REL_EPS = 1e-13


def min_weight_closure(
    weight: np.ndarray, tail: np.ndarray, head: np.ndarray, largest: bool = False
) -> np.ndarray:
    """Smallest (or largest) closed set of least total weight.

    Parameters
    ----------
    weight : ndarray of float64, shape (n,)
        Weight of each node.
    tail, head : ndarray of int, shape (m,)
        Implications: choosing ``tail[e]`` forces choosing ``head[e]``.
    largest : bool, default=False
        Return the largest optimal closure (the nodes that cannot reach the sink in the
        residual graph) instead of the smallest (those the source still reaches).

    Returns
    -------
    ndarray of bool, shape (n,)
        The chosen nodes.
    """
    n = weight.shape[0]
    if n == 0:
        return np.zeros(0, dtype=np.bool_)
    weight = np.ascontiguousarray(weight, dtype=np.float64)
    finite = np.abs(weight).max() if n else 0.0
    if finite == 0.0:
        return np.full(n, largest, dtype=np.bool_)
    eps = _REL_EPS * finite
    start, to, cap, rev = _build_graph(
        weight, np.ascontiguousarray(tail, dtype=np.int64), np.ascontiguousarray(head, dtype=np.int64)
    )
    source, sink = n, n + 1
    _dinic(start, to, cap, rev, source, sink, eps)
    if largest:
        return ~_reaches_sink(start, to, cap, rev, sink, eps)[:n]
    return _reachable(start, to, cap, source, eps)[:n]


@njit(cache=True)
def _build_graph(weight, tail, head):
    """CSR residual graph: source ``n``, sink ``n + 1``, each arc with its reverse arc."""
    n = weight.shape[0]
    m = tail.shape[0]
    n_nodes = n + 2
    source, sink = n, n + 1
    n_terminal = 0
    for j in range(n):
        if weight[j] != 0.0:
            n_terminal += 1
    n_arcs = 2 * (m + n_terminal)
    # int32 node and arc indices halve the memory traffic of the random accesses
    u = np.empty(n_arcs, dtype=np.int32)
    v = np.empty(n_arcs, dtype=np.int32)
    c = np.empty(n_arcs, dtype=np.float64)
    k = 0
    # Terminal arcs first: the counting sort below is stable, so each node lists its source /
    # sink arc before its implications and the search finds the sink at once from a w node.
    for j in range(n):
        w = weight[j]
        if w < 0.0:
            a, b, cc = source, j, -w
        elif w > 0.0:
            a, b, cc = j, sink, w
        else:
            continue
        u[k] = a
        v[k] = b
        c[k] = cc
        u[k + 1] = b
        v[k + 1] = a
        c[k + 1] = 0.0
        k += 2
    for e in range(m):
        u[k] = tail[e]
        v[k] = head[e]
        c[k] = np.inf
        u[k + 1] = head[e]
        v[k + 1] = tail[e]
        c[k + 1] = 0.0
        k += 2
    # counting sort of the arcs by their tail; pos[a] is where arc a lands
    start = np.zeros(n_nodes + 1, dtype=np.int64)
    for a in range(n_arcs):
        start[u[a] + 1] += 1
    for x in range(n_nodes):
        start[x + 1] += start[x]
    fill = start[:-1].copy()
    pos = np.empty(n_arcs, dtype=np.int64)
    for a in range(n_arcs):
        pos[a] = fill[u[a]]
        fill[u[a]] += 1
    to = np.empty(n_arcs, dtype=np.int32)
    cap = np.empty(n_arcs, dtype=np.float64)
    rev = np.empty(n_arcs, dtype=np.int32)
    for a in range(n_arcs):
        p = pos[a]
        to[p] = v[a]
        cap[p] = c[a]
        rev[p] = pos[a ^ 1]  # arcs were created in pairs (2e, 2e + 1)
    return start, to, cap, rev


@njit(cache=True)
def _sink_distances(start, to, cap, rev, source, sink, eps, dist, queue):
    """Residual distance of each node to the sink, by a breadth-first search backwards from it.

    Stops as soon as the source is labelled: nodes farther than the source are never on a
    shortest augmenting path. Returns whether the sink is reachable.
    """
    dist[:] = -1
    dist[sink] = 0
    head = 0
    tail = 1
    queue[0] = sink
    while head < tail:
        y = queue[head]
        head += 1
        for a in range(start[y], start[y + 1]):
            x = to[a]
            if dist[x] < 0 and cap[rev[a]] > eps:  # the arc x -> y has residual capacity
                dist[x] = dist[y] + 1
                if x == source:
                    return True
                queue[tail] = x
                tail += 1
    return False


@njit(cache=True)
def _dinic(start, to, cap, rev, source, sink, eps):
    """Dinic's blocking flows on the layers of the distances to the sink.

    Labelling distances *to the sink* (rather than from the source) means every arc the
    search follows leads to the sink within the phase, so a phase costs one backward search
    plus the augmentations, however few. Iterative search with current-arc pointers.
    Returns the flow value.
    """
    n_nodes = start.shape[0] - 1
    dist = np.empty(n_nodes, dtype=np.int32)
    queue = np.empty(n_nodes, dtype=np.int32)
    it = np.empty(n_nodes, dtype=np.int64)
    path = np.empty(n_nodes, dtype=np.int64)  # arcs of the current source-to-node path
    total = 0.0
    while _sink_distances(start, to, cap, rev, source, sink, eps, dist, queue):
        for x in range(n_nodes):
            it[x] = start[x]
        depth = 0
        x = source
        while True:
            if x == sink:
                # bottleneck of the path, then augment and restart from its first saturated arc
                f = np.inf
                for d in range(depth):
                    if cap[path[d]] < f:
                        f = cap[path[d]]
                total += f
                cut_at = -1
                for d in range(depth):
                    a = path[d]
                    cap[a] -= f
                    cap[rev[a]] += f
                    if cut_at < 0 and cap[a] <= eps:
                        cut_at = d
                depth = cut_at
                x = source if depth == 0 else to[path[depth - 1]]
                continue
            advanced = False
            dx = dist[x]
            while it[x] < start[x + 1]:
                a = it[x]
                y = to[a]
                if cap[a] > eps and dist[y] == dx - 1 and dist[y] >= 0:
                    path[depth] = a
                    depth += 1
                    x = y
                    advanced = True
                    break
                it[x] += 1
            if advanced:
                continue
            # dead end: no more flow through x in this phase
            dist[x] = -1
            if depth == 0:
                break
            depth -= 1
            a = path[depth]
            x = to[rev[a]]
            it[x] += 1
    return total


@njit(cache=True)
def _reachable(start, to, cap, source, eps):
    n_nodes = start.shape[0] - 1
    seen = np.zeros(n_nodes, dtype=np.bool_)
    stack = np.empty(n_nodes, dtype=np.int32)
    seen[source] = True
    stack[0] = source
    top = 1
    while top:
        top -= 1
        x = stack[top]
        for a in range(start[x], start[x + 1]):
            y = to[a]
            if not seen[y] and cap[a] > eps:
                seen[y] = True
                stack[top] = y
                top += 1
    return seen


@njit(cache=True)
def _reaches_sink(start, to, cap, rev, sink, eps):
    n_nodes = start.shape[0] - 1
    seen = np.zeros(n_nodes, dtype=np.bool_)
    stack = np.empty(n_nodes, dtype=np.int32)
    seen[sink] = True
    stack[0] = sink
    top = 1
    while top:
        top -= 1
        y = stack[top]
        for a in range(start[y], start[y + 1]):
            x = to[a]
            if not seen[x] and cap[rev[a]] > eps:  # residual arc x -> y
                seen[x] = True
                stack[top] = x
                top += 1
    return seen
